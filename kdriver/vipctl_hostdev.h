/*
 * vipctl_hostdev.h - vipctl's view of the host's network devices
 * (vipctl_hostdev.c, libpci) and its doctor command (vipctl_doctor.c,
 * libkmod). vipctl only: vipd links neither library.
 */
#ifndef VIPCTL_HOSTDEV_H
#define VIPCTL_HOSTDEV_H

#include <stdbool.h>

#include "kd_hostif.h"

struct vipctl_pci {
    unsigned vendor, device, class_id;
    char name[400]; /* "Ethernet controller: Red Hat, Inc. Virtio 1.0 network device" */
    char link[256]; /* "PCI Express 8 GT/s x4 (...)" or "none: ..." */
    char why[200];  /* why it could not be described */
};

/* Names and link of the PCI function at slot (DDDD:BB:DD.F); false with
 * out->why set if it cannot be described. */
bool vipctl_pci_describe(const char *slot, struct vipctl_pci *out);

/* The host_* lines of `vipctl nics` for one interface; eth >= 0 when it is
 * /dev/via_eth<eth>. */
void vipctl_hostif_print(const struct kd_hostif *h, int eth);

/* `vipctl doctor`: what the host offers for faster links. */
int vipctl_doctor(void);

#endif

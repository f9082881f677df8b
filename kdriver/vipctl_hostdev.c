/*
 * vipctl_hostdev.c - what vipctl says about a host network interface: its
 * addresses, the device behind it, and for a PCI device its vendor and
 * device names and its link (libpci).
 *
 * libpci names come from pci.ids only (not udev's hwdb), so that what
 * vipctl prints is what the file says and a test can check it. Its link
 * comes from the PCI Express capability when the configuration space can
 * be read (root), else from sysfs (current_link_speed, which the kernel
 * creates for PCI Express devices only).
 */
#include "vipctl_hostdev.h"

#include <limits.h>
#include <net/if_arp.h>
#include <pci/pci.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* libpci's error callback may not return: it jumps back here. */
static jmp_buf *pci_jump;
static char pci_why[160];

__attribute__((noreturn, format(printf, 1, 2))) static void pci_error(char *msg, ...)
{
    va_list ap;
    va_start(ap, msg);
    vsnprintf(pci_why, sizeof pci_why, msg, ap);
    va_end(ap);
    longjmp(*pci_jump, 1);
}

static void pci_quiet(char *msg, ...)
{
    (void)msg;
}

/* PCI Express link speed codes (LNKSTA/LNKCAP bits 3:0). */
static const char *const exp_speed[] = {"?", "2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s",
                                        "32 GT/s", "64 GT/s"};

static const char *speed_name(unsigned code)
{
    return code < sizeof exp_speed / sizeof *exp_speed ? exp_speed[code] : "?";
}

/* The link from the PCI Express capability; false if it has none. */
static bool link_from_cap(struct pci_dev *d, char *out, size_t cap)
{
    struct pci_cap *c = pci_find_cap(d, PCI_CAP_ID_EXP, PCI_CAP_NORMAL);
    if (!c)
        return false;
    unsigned sta = pci_read_word(d, c->addr + PCI_EXP_LNKSTA);
    unsigned lcap = pci_read_long(d, c->addr + PCI_EXP_LNKCAP);
    snprintf(out, cap, "PCI Express %s x%u (the device can do %s x%u)",
             speed_name(sta & PCI_EXP_LNKSTA_SPEED), (sta & PCI_EXP_LNKSTA_WIDTH) >> 4,
             speed_name(lcap & PCI_EXP_LNKCAP_SPEED), (lcap & PCI_EXP_LNKCAP_WIDTH) >> 4);
    return true;
}

/* The link as sysfs reports it; false if sysfs has no link for it. */
static bool link_from_sysfs(const char *slot, char *out, size_t cap)
{
    char v[4][32];
    static const char *const attr[4] = {"current_link_speed", "current_link_width",
                                        "max_link_speed", "max_link_width"};
    for (unsigned i = 0; i < 4; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/%s", slot, attr[i]);
        FILE *f = fopen(path, "re");
        v[i][0] = 0;
        if (f) {
            if (!fgets(v[i], sizeof v[i], f))
                v[i][0] = 0;
            fclose(f);
        }
        v[i][strcspn(v[i], "\n")] = 0;
        if (i == 0 && !v[0][0])
            return false;
    }
    snprintf(out, cap, "PCI Express %s x%s (the device can do %s x%s)", v[0],
             v[1][0] ? v[1] : "?", v[2][0] ? v[2] : "?", v[3][0] ? v[3] : "?");
    return true;
}

/* Parse DDDD:BB:DD.F. */
static bool parse_slot(const char *s, int *dom, int *bus, int *dev, int *fn)
{
    char tail;
    return sscanf(s, "%x:%x:%x.%x%c", (unsigned *)dom, (unsigned *)bus, (unsigned *)dev,
                  (unsigned *)fn, &tail) == 4;
}

bool vipctl_pci_describe(const char *slot, struct vipctl_pci *out)
{
    memset(out, 0, sizeof *out);
    int dom, bus, dev, fn;
    if (!parse_slot(slot, &dom, &bus, &dev, &fn)) {
        snprintf(out->why, sizeof out->why, "'%s' is not a PCI address", slot);
        return false;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s", slot);
    if (access(path, F_OK) != 0) {
        snprintf(out->why, sizeof out->why, "%s is not in /sys/bus/pci/devices", slot);
        return false;
    }
    struct pci_access *volatile a = pci_alloc();
    struct pci_dev *volatile d = NULL;
    jmp_buf jb;
    if (setjmp(jb)) {
        /* libpci gave up half-way: what it allocated is lost, once. */
        snprintf(out->why, sizeof out->why, "libpci: %s", pci_why);
        pci_jump = NULL;
        return false;
    }
    pci_jump = &jb;
    a->error = pci_error;
    a->warning = pci_quiet;
    a->debug = pci_quiet;
    a->method = PCI_ACCESS_SYS_BUS_PCI;
    pci_init(a);
    d = pci_get_dev(a, dom, bus, dev, fn);
    int got = pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CAPS);
    out->vendor = d->vendor_id;
    out->device = d->device_id;
    out->class_id = d->device_class;
    int how = PCI_LOOKUP_NO_HWDB;
    char cls[128], name[256];
    snprintf(out->name, sizeof out->name, "%s: %s",
             pci_lookup_name(a, cls, sizeof cls, how | PCI_LOOKUP_CLASS, d->device_class),
             pci_lookup_name(a, name, sizeof name, how | PCI_LOOKUP_VENDOR | PCI_LOOKUP_DEVICE,
                             d->vendor_id, d->device_id));
    if (!((got & PCI_FILL_CAPS) && link_from_cap(d, out->link, sizeof out->link)) &&
        !link_from_sysfs(slot, out->link, sizeof out->link))
        snprintf(out->link, sizeof out->link,
                 "none: %s is not a PCI Express device (no PCI Express capability, no link "
                 "in sysfs), so it has no link speed or width",
                 slot);
    pci_free_dev(d);
    pci_cleanup(a);
    pci_jump = NULL;
    return true;
}

static const char *hwtype_name(int t)
{
    switch (t) {
    case ARPHRD_ETHER:
        return "Ethernet";
    case ARPHRD_LOOPBACK:
        return "loopback";
    case ARPHRD_INFINIBAND:
        return "InfiniBand";
    case ARPHRD_NONE:
        return "no link layer";
    case -1:
        return "link type unknown";
    default:
        return "other link type";
    }
}

#define KEY "\t%-24s"

void vipctl_hostif_print(const struct kd_hostif *h, int eth)
{
    char mac[3 * sizeof h->mac + 2] = "";
    bool zero = true; /* lo's all-zero address says nothing */
    for (unsigned i = 0; i < h->mac_len; i++)
        zero = zero && !h->mac[i];
    for (unsigned i = 0; i < h->mac_len && !zero; i++)
        snprintf(mac + 3 * i, sizeof mac - 3 * i, "%s%02x", i ? ":" : " ", h->mac[i]);
    char bound[32] = "";
    if (eth >= 0)
        snprintf(bound, sizeof bound, " (/dev/via_eth%d)", eth);
    printf(KEY "%s%s, %s, %s%s\n", "host_interface:", h->name, bound, h->up ? "up" : "down",
           hwtype_name(h->hwtype), mac);
    printf(KEY, "host_address:");
    if (!h->naddrs)
        printf("none: %s has no IP address", h->name);
    for (unsigned i = 0; i < h->naddrs && i < KD_HOSTIF_ADDRS; i++)
        printf("%s%s", i ? " " : "", h->addr[i]);
    if (h->naddrs > KD_HOSTIF_ADDRS)
        printf(" (and %u more)", h->naddrs - KD_HOSTIF_ADDRS);
    printf("\n");
    switch (h->kind) {
    case KD_HOSTIF_UNKNOWN:
        printf(KEY "unknown: there is no /sys/class/net/%s (is /sys mounted?)\n",
               "host_device:", h->name);
        return;
    case KD_HOSTIF_LOOPBACK:
        printf(KEY "none: %s is the loopback interface; no device is behind it\n",
               "host_device:", h->name);
        return;
    case KD_HOSTIF_VIRTUAL:
        printf(KEY "none: %s is a virtual interface (driver %s); no PCI device is behind it\n",
               "host_device:", h->name, h->driver[0] ? h->driver : "unknown");
        return;
    case KD_HOSTIF_DEVICE:
    case KD_HOSTIF_NKINDS:
        break;
    }
    printf(KEY "%s on the %s bus, driver %s\n", "host_device:", h->device,
           h->bus[0] ? h->bus : "unknown", h->driver[0] ? h->driver : "none");
    if (!h->pci_slot[0]) {
        printf(KEY "none: %s's device is on the %s bus, not PCI\n", "host_pci:", h->name,
               h->bus[0] ? h->bus : "unknown");
        return;
    }
    struct vipctl_pci p;
    if (!vipctl_pci_describe(h->pci_slot, &p)) {
        printf(KEY "%s (%s)\n", "host_pci:", h->pci_slot, p.why);
        return;
    }
    printf(KEY "%s %s [%04x:%04x]\n", "host_pci:", h->pci_slot, p.name, p.vendor, p.device);
    printf(KEY "%s\n", "host_pci_link:", p.link);
}

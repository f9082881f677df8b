/*
 * kd_hostif.h - the host's network interfaces and the device behind each,
 * and which of them /dev/via_ethN is bound to (kd_hostif.c).
 *
 * Shared by vipd (it refuses /dev/via_ethN when the host has no interface
 * N) and vipctl (nics, doctor). Needs nothing but libc and /sys; the names
 * of a PCI device and its link come from libpci in vipctl only
 * (vipctl_hostdev.c).
 */
#ifndef KD_HOSTIF_H
#define KD_HOSTIF_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KD_HOSTIF_MAX 256u   /* interfaces listed (of a host with more: some 256) */
#define KD_HOSTIF_ADDRS 8u   /* addresses shown per interface */

/* What is behind an interface, as /sys/class/net tells it. */
enum kd_hostif_kind {
    KD_HOSTIF_UNKNOWN,  /* no /sys/class/net/IF (is /sys mounted?) */
    KD_HOSTIF_LOOPBACK, /* lo */
    KD_HOSTIF_VIRTUAL,  /* veth, bridge, tun, ifb, ...: no device link */
    KD_HOSTIF_DEVICE,   /* a device on a bus: PCI, virtio, USB, ... */
    KD_HOSTIF_NKINDS
};
extern const char *const kd_hostif_kind_name[KD_HOSTIF_NKINDS];

struct kd_hostif {
    char name[IF_NAMESIZE];
    unsigned ifindex;
    int hwtype;          /* ARPHRD_* (/sys/class/net/IF/type), -1 if unknown */
    bool up, running;    /* IFF_UP, IFF_RUNNING */
    enum kd_hostif_kind kind;
    char driver[32];     /* e1000e, virtio_net, veth, ... ("" if unknown) */
    char bus[16];        /* the device's bus: pci, virtio, usb, ... ("" if none) */
    char device[32];     /* the device's name on that bus (0000:00:03.0, virtio2) */
    char pci_slot[32];   /* the PCI function behind it (itself, or a virtio
                          * device's parent), "" if none */
    uint8_t mac[8];
    unsigned mac_len;
    unsigned naddrs;     /* addresses held (at most KD_HOSTIF_ADDRS shown) */
    char addr[KD_HOSTIF_ADDRS][INET6_ADDRSTRLEN + 4]; /* "192.0.2.2/24" */
};

/* The host's interfaces in index order, filled into out[0..max); returns
 * how many (<= max) or -errno. */
int kd_hostif_list(struct kd_hostif *out, unsigned max);

/* Which of list[0..n) /dev/via_ethN is bound to: the interface named ethN
 * if there is one, else the N-th (from 0, in index order) Ethernet
 * interface with a device behind it (the predictable names enp0s3,
 * ens33, ...). -1: none, so /dev/via_ethN does not open. */
int kd_hostif_eth(const struct kd_hostif *list, unsigned n, unsigned eth);

/* The same for this host now: true with *out filled if interface N
 * exists. For vipd, which asks at each open. */
bool kd_hostif_eth_now(unsigned eth, struct kd_hostif *out);

/* "lo, eth0, ifb0" into buf: what the host has, for error messages. */
void kd_hostif_names(char *buf, size_t cap);

#endif

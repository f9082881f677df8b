/*
 * kd_hostif.c - the host's network interfaces (if_nameindex, getifaddrs),
 * the device behind each (/sys/class/net/IF/device), and the binding of
 * M-VIA's /dev/via_ethN to interface N.
 *
 * M-VIA ran one VIA device per Ethernet interface: via_eth0 on eth0. Hosts
 * now name their interfaces enp0s3 or ens33, so interface N is ethN when
 * that exists and otherwise the N-th Ethernet interface with a device
 * behind it (spec-notes/host-devices.md).
 */
#include "kd_hostif.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

const char *const kd_hostif_kind_name[KD_HOSTIF_NKINDS] = {
    [KD_HOSTIF_UNKNOWN] = "unknown",
    [KD_HOSTIF_LOOPBACK] = "loopback",
    [KD_HOSTIF_VIRTUAL] = "virtual",
    [KD_HOSTIF_DEVICE] = "device",
};

/* s into out[cap], cut if longer (sysfs names fit; a cut one is still shown). */
static void copy_name(char *out, size_t cap, const char *s)
{
    size_t n = strnlen(s, cap - 1);
    memcpy(out, s, n);
    out[n] = 0;
}

/* The last component of the link at path (".../bus/pci" -> "pci"), or "". */
static void link_base(const char *path, char *out, size_t cap)
{
    char target[PATH_MAX];
    out[0] = 0;
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
        return;
    target[n] = 0;
    const char *b = strrchr(target, '/');
    copy_name(out, cap, b ? b + 1 : target);
}

/* The first line of a small sysfs file, or false. */
static bool read_line(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    bool ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (ok)
        out[strcspn(out, "\n")] = 0;
    return ok;
}

/* The driver of an interface without a device (veth, bridge, ifb): only
 * the kernel's ethtool answer names it. */
static void ethtool_driver(const char *ifname, char *out, size_t cap)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    struct ethtool_drvinfo d = {.cmd = ETHTOOL_GDRVINFO};
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    ifr.ifr_data = (char *)&d;
    if (ioctl(s, SIOCETHTOOL, &ifr) == 0) {
        d.driver[sizeof d.driver - 1] = 0;
        copy_name(out, cap, (const char *)d.driver);
    }
    close(s);
}

/* Kind, bus, device, PCI function and driver, from /sys/class/net/IF. */
static void probe_sysfs(struct kd_hostif *h)
{
    char path[PATH_MAX + 32], buf[64]; /* + a leaf name after a realpath */
    snprintf(path, sizeof path, "/sys/class/net/%s", h->name);
    if (access(path, F_OK) != 0) {
        h->kind = KD_HOSTIF_UNKNOWN;
        return;
    }
    snprintf(path, sizeof path, "/sys/class/net/%s/type", h->name);
    if (read_line(path, buf, sizeof buf))
        h->hwtype = atoi(buf);
    char dev[PATH_MAX];
    snprintf(path, sizeof path, "/sys/class/net/%s/device", h->name);
    if (!realpath(path, dev)) {
        h->kind = h->hwtype == ARPHRD_LOOPBACK ? KD_HOSTIF_LOOPBACK : KD_HOSTIF_VIRTUAL;
        ethtool_driver(h->name, h->driver, sizeof h->driver);
        return;
    }
    h->kind = KD_HOSTIF_DEVICE;
    const char *base = strrchr(dev, '/');
    copy_name(h->device, sizeof h->device, base ? base + 1 : dev);
    snprintf(path, sizeof path, "%s/subsystem", dev);
    link_base(path, h->bus, sizeof h->bus);
    snprintf(path, sizeof path, "%s/driver", dev);
    link_base(path, h->driver, sizeof h->driver);
    if (strcmp(h->bus, "pci") == 0) {
        copy_name(h->pci_slot, sizeof h->pci_slot, h->device);
    } else if (strcmp(h->bus, "virtio") == 0 && base) {
        /* A virtio NIC is a function of its transport; on virtio-pci that
         * is the PCI device one level up (virtio-mmio has none). */
        char parent[PATH_MAX], sub[16];
        snprintf(parent, sizeof parent, "%.*s", (int)(base - dev), dev);
        snprintf(path, sizeof path, "%s/subsystem", parent);
        link_base(path, sub, sizeof sub);
        const char *pb = strrchr(parent, '/');
        if (strcmp(sub, "pci") == 0 && pb)
            copy_name(h->pci_slot, sizeof h->pci_slot, pb + 1);
    }
    /* Other buses (usb, platform, ...): the PCI device up the path is the
     * bus's controller, not the NIC, so none is named. */
}

static struct kd_hostif *find(struct kd_hostif *l, unsigned n, const char *name)
{
    for (unsigned i = 0; i < n; i++)
        if (strcmp(l[i].name, name) == 0)
            return &l[i];
    return NULL;
}

/* Addresses ("192.0.2.2/24"), MAC and flags from getifaddrs. */
static void add_addresses(struct kd_hostif *l, unsigned n)
{
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) < 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        struct kd_hostif *h = i->ifa_name ? find(l, n, i->ifa_name) : NULL;
        if (!h)
            continue;
        h->up = (i->ifa_flags & IFF_UP) != 0;
        h->running = (i->ifa_flags & IFF_RUNNING) != 0;
        if (h->kind == KD_HOSTIF_UNKNOWN && (i->ifa_flags & IFF_LOOPBACK))
            h->kind = KD_HOSTIF_LOOPBACK;
        if (!i->ifa_addr)
            continue;
        int fam = i->ifa_addr->sa_family;
        if (fam == AF_PACKET) {
            const struct sockaddr_ll *ll = (const void *)i->ifa_addr;
            h->mac_len = ll->sll_halen <= sizeof h->mac ? ll->sll_halen : 0;
            memcpy(h->mac, ll->sll_addr, h->mac_len);
            if (h->hwtype < 0)
                h->hwtype = ll->sll_hatype;
            continue;
        }
        if (fam != AF_INET && fam != AF_INET6)
            continue;
        if (h->naddrs++ >= KD_HOSTIF_ADDRS)
            continue;
        char ip[INET6_ADDRSTRLEN] = "?";
        unsigned prefix = 0;
        const void *a, *m = NULL;
        size_t mlen;
        if (fam == AF_INET) {
            a = &((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr;
            if (i->ifa_netmask)
                m = &((const struct sockaddr_in *)(const void *)i->ifa_netmask)->sin_addr;
            mlen = 4;
        } else {
            a = &((const struct sockaddr_in6 *)(const void *)i->ifa_addr)->sin6_addr;
            if (i->ifa_netmask)
                m = &((const struct sockaddr_in6 *)(const void *)i->ifa_netmask)->sin6_addr;
            mlen = 16;
        }
        inet_ntop(fam, a, ip, sizeof ip);
        for (size_t b = 0; m && b < mlen; b++)
            prefix += (unsigned)__builtin_popcount(((const uint8_t *)m)[b]);
        snprintf(h->addr[h->naddrs - 1], sizeof h->addr[0], "%s/%u", ip, prefix);
    }
    freeifaddrs(ifs);
}

static int by_index(const void *x, const void *y)
{
    const struct kd_hostif *a = x, *b = y;
    return a->ifindex < b->ifindex ? -1 : a->ifindex > b->ifindex;
}

int kd_hostif_list(struct kd_hostif *out, unsigned max)
{
    struct if_nameindex *ni = if_nameindex();
    if (!ni)
        return -errno;
    unsigned n = 0;
    for (struct if_nameindex *p = ni; p->if_index && p->if_name && n < max; p++) {
        struct kd_hostif *h = &out[n++];
        memset(h, 0, sizeof *h);
        copy_name(h->name, sizeof h->name, p->if_name);
        h->ifindex = p->if_index;
        h->hwtype = -1;
        probe_sysfs(h);
    }
    if_freenameindex(ni);
    qsort(out, n, sizeof *out, by_index);
    add_addresses(out, n);
    return (int)n;
}

int kd_hostif_eth(const struct kd_hostif *list, unsigned n, unsigned eth)
{
    char want[IF_NAMESIZE + 8];
    snprintf(want, sizeof want, "eth%u", eth);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(list[i].name, want) == 0)
            return (int)i;
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++)
        if (list[i].kind == KD_HOSTIF_DEVICE && list[i].hwtype == ARPHRD_ETHER && k++ == eth)
            return (int)i;
    return -1;
}

bool kd_hostif_eth_now(unsigned eth, struct kd_hostif *out)
{
    struct kd_hostif *l = malloc(KD_HOSTIF_MAX * sizeof *l);
    if (!l)
        return false;
    int n = kd_hostif_list(l, KD_HOSTIF_MAX);
    int i = n > 0 ? kd_hostif_eth(l, (unsigned)n, eth) : -1;
    if (i >= 0 && out)
        *out = l[i];
    free(l);
    return i >= 0;
}

void kd_hostif_names(char *buf, size_t cap)
{
    if (!cap)
        return;
    buf[0] = 0;
    struct kd_hostif *l = malloc(KD_HOSTIF_MAX * sizeof *l);
    int n = l ? kd_hostif_list(l, KD_HOSTIF_MAX) : -ENOMEM;
    size_t used = 0;
    for (int i = 0; i < n && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", l[i].name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (n <= 0)
        snprintf(buf, cap, "none that it can list");
    free(l);
}

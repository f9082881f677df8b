/*
 * kd_ns.c - the name service: NS_LOOKUP (VipNSGetHostByName) and
 * NS_REVERSE (VipNSGetHostByAddr).
 *
 * A name is, in this order:
 *   HOST:DEV     DEV (viaN, /dev/viaN, /dev/via_lo, /dev/via_ethN) of HOST,
 *                which must be this host;
 *   DEV          that NIC of this host;
 *   a name of the hosts file (vipd --hosts FILE, else $VIPD_HOSTS): its
 *                addresses in the order of the file (NameIndex 0, 1, ...);
 *   an address a host line of the hosts file gives one of that host's
 *                interfaces (NAME ADDR:PORT ethN=IPv4 ...), numeric or by
 *                /etc/hosts: that host's NIC N, this host's too;
 *   this host    localhost, 127.0.0.1, gethostname() (short or FQDN): the
 *                asking session's own NIC; an address of this machine, or
 *                a name /etc/hosts gives one: the NIC /dev/via_ethN opens
 *                when the address is interface ethN's (the asking session's
 *                own NIC for a loopback address, or an interface no
 *                /dev/via_ethN is bound to).
 * The hosts file is read once, at start-up, by a strict parser: a line it
 * does not understand stops vipd with the file and line named.
 */
#include "kd.h"
#include "kd_hostif.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "via_spec.h"

#define NS_NAME_MAX 63u        /* bytes of a name (NS_LOOKUP carries 64) */
#define NS_MAX_ENTRIES 65536u  /* name-address pairs of the hosts file */
#define NS_LINE_MAX 1024u

struct kd_ns_entry {
    char name[NS_NAME_MAX + 1];
    uint8_t addr[VIA_NIC_ADDR_LEN];
};

/* ---- names of this host and its devices --------------------------------------- */

/* A decimal NIC index that fills the whole string. */
static bool nic_number(const char *s, unsigned *out)
{
    if (!*s || strlen(s) > 5)
        return false;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return false;
    *out = (unsigned)atoi(s);
    return true;
}

/* A device name without host part: viaN, /dev/viaN, /dev/via_lo,
 * /dev/via_ethN (the names VipOpenNic accepts). */
static bool device_index(const char *s, unsigned *out)
{
    if (strncmp(s, "/dev/", 5) == 0)
        s += 5;
    if (strcmp(s, "via_lo") == 0) {
        *out = 0;
        return true;
    }
    if (strncmp(s, "via_eth", 7) == 0)
        return nic_number(s + 7, out);
    if (strncmp(s, "via", 3) == 0)
        return nic_number(s + 3, out);
    return false;
}

/* /dev/via_ethN names NIC N only while the host has network interface N
 * (as VipOpenNic does); false with r failed. */
static bool host_if_bound(const char *dev, unsigned idx, struct kd_reply *r)
{
    if (strncmp(dev, "/dev/", 5) == 0)
        dev += 5;
    if (strncmp(dev, "via_eth", 7) != 0 || kd_hostif_eth_now(idx, NULL))
        return true;
    kd_fail(r, VIP_ERROR_NAMESERVICE, "%.40s: this host has no network interface %u", dev, idx);
    return false;
}

/* Is the textual IP address ip one of this machine's? Loopback always is.
 * ifname: the interface holding it ("" for a loopback address). */
static bool local_address(const char *ip, char ifname[IF_NAMESIZE])
{
    struct in_addr v4;
    struct in6_addr v6;
    ifname[0] = 0;
    int af = inet_pton(AF_INET, ip, &v4) == 1    ? AF_INET
             : inet_pton(AF_INET6, ip, &v6) == 1 ? AF_INET6
                                                 : 0;
    if (!af)
        return false;
    if ((af == AF_INET && (ntohl(v4.s_addr) >> 24) == 127) ||
        (af == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&v6)))
        return true;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) < 0)
        return false;
    bool ours = false;
    for (struct ifaddrs *i = ifs; i && !ours; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != af)
            continue;
        if (af == AF_INET)
            ours = memcmp(&((struct sockaddr_in *)(void *)i->ifa_addr)->sin_addr, &v4,
                          sizeof v4) == 0;
        else
            ours = memcmp(&((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr, &v6,
                          sizeof v6) == 0;
        if (ours && !(i->ifa_flags & IFF_LOOPBACK))
            snprintf(ifname, IF_NAMESIZE, "%s", i->ifa_name);
    }
    freeifaddrs(ifs);
    return ours;
}

/* The NIC that /dev/via_ethN opens for interface ifname: N, or -1 (no
 * /dev/via_ethN of this vipd is bound to it). */
static int nic_of_interface(const char *ifname)
{
    if (!*ifname)
        return -1;
    struct kd_hostif *list = calloc(KD_HOSTIF_MAX, sizeof *list);
    int n = list ? kd_hostif_list(list, KD_HOSTIF_MAX) : -1, nic = -1;
    for (int pos = 0; pos < n && nic < 0; pos++) {
        if (strcmp(list[pos].name, ifname) != 0)
            continue;
        for (unsigned eth = 0; eth < kd.nnics && nic < 0; eth++)
            if (kd_hostif_eth(list, (unsigned)n, eth) == pos)
                nic = (int)eth;
    }
    free(list);
    return nic;
}

/* The next line of /etc/hosts (open as f) that lists name: its address
 * (*ip, inside line) and whether it lists this host's name too; false at
 * the end. */
static bool etc_hosts_next(FILE *f, const char *name, char line[NS_LINE_MAX], char **ip,
                           bool *beside_ours)
{
    while (fgets(line, NS_LINE_MAX, f)) {
        line[strcspn(line, "#\n")] = 0;
        char *save = NULL;
        bool named = false;
        *ip = strtok_r(line, " \t", &save);
        *beside_ours = false;
        for (char *w = *ip ? strtok_r(NULL, " \t", &save) : NULL; w;
             w = strtok_r(NULL, " \t", &save)) {
            named |= strcasecmp(w, name) == 0;
            *beside_ours |= strcasecmp(w, kd.hostname) == 0;
        }
        if (named && *ip)
            return true;
    }
    return false;
}

/* Does /etc/hosts give `name` to an address of this machine, or list it
 * beside this host's name? ifname: the interface holding that address, ""
 * if none does (a loopback address, or a line that only lists the name
 * beside ours). Read at each look-up: it is small and may change. */
static bool etc_hosts_says_ours(const char *name, char ifname[IF_NAMESIZE])
{
    ifname[0] = 0;
    FILE *f = fopen("/etc/hosts", "r");
    if (!f)
        return false;
    char line[NS_LINE_MAX], *ip;
    bool ours = false, beside_ours;
    while (!ours && etc_hosts_next(f, name, line, &ip, &beside_ours))
        ours = local_address(ip, ifname) || beside_ours;
    fclose(f);
    return ours;
}

/* The names of this machine itself: localhost, its host name (short or
 * FQDN). They mean the asking session's own NIC. */
static bool is_host_name(const char *h)
{
    if (!*h || strcmp(h, "localhost") == 0 || strcmp(h, "127.0.0.1") == 0 ||
        strcasecmp(h, kd.hostname) == 0)
        return true;
    /* short name of an FQDN hostname, or FQDN of a short one */
    size_t a = strcspn(h, "."), b = strcspn(kd.hostname, ".");
    return a == b && strncasecmp(h, kd.hostname, a) == 0;
}

/* Names that mean this machine: its own names, its addresses, and the
 * names /etc/hosts gives them. ifname: the interface a name or address
 * belongs to ("" for the machine as a whole, or a loopback address). */
static bool is_this_host(const char *h, char ifname[IF_NAMESIZE])
{
    ifname[0] = 0;
    if (is_host_name(h))
        return true;
    return local_address(h, ifname) || etc_hosts_says_ours(h, ifname);
}

/* ---- the hosts file ----------------------------------------------------------------- */

static bool name_ok(const char *w, char *why, size_t cap)
{
    unsigned idx;
    if (strlen(w) > NS_NAME_MAX) {
        snprintf(why, cap, "name '%.20s...' is longer than %u bytes", w, NS_NAME_MAX);
        return false;
    }
    if (!isalnum((unsigned char)w[0])) {
        snprintf(why, cap, "name '%s' must start with a letter or digit", w);
        return false;
    }
    for (const char *p = w; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') {
            snprintf(why, cap, "name '%s' has '%c' (names take letters, digits, '.', '-', "
                               "'_')", w, *p);
            return false;
        }
    if (device_index(w, &idx)) {
        snprintf(why, cap, "'%s' is a device name and cannot be redefined", w);
        return false;
    }
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void host_addr(uint32_t id, unsigned nic, uint8_t out[VIA_NIC_ADDR_LEN])
{
    out[0] = (uint8_t)(id >> 24), out[1] = (uint8_t)(id >> 16), out[2] = (uint8_t)(id >> 8);
    out[3] = (uint8_t)id, out[4] = (uint8_t)(nic >> 8), out[5] = (uint8_t)nic;
}

/* viaN of this vipd, a NIC address hh:hh:hh:hh:hh:hh (as vipctl prints it),
 * or ADDR:PORT, the vipd listening there (vipd --listen): its via0. */
static bool address_ok(const char *name, const char *w, uint8_t out[VIA_NIC_ADDR_LEN],
                       char *why, size_t cap)
{
    unsigned idx;
    uint32_t ip;
    uint16_t port;
    if (strchr(w, '.') && kd_host_parse_addr(w, &ip, &port)) {
        struct kd_host *h = kd_host_add(name, ip, port);
        if (!h) {
            snprintf(why, cap, "more than %u hosts", KD_MAX_HOSTS);
            return false;
        }
        host_addr(h->host_id, 0, out);
        return true;
    }
    if (strncmp(w, "via", 3) == 0 && nic_number(w + 3, &idx)) {
        if (idx >= kd.nnics) {
            snprintf(why, cap, "no NIC %s: this vipd has via0..via%u (see -n)", w,
                     kd.nnics - 1);
            return false;
        }
        kd_nic_addr(idx, out);
        return true;
    }
    bool hex = strlen(w) == 3 * VIA_NIC_ADDR_LEN - 1;
    for (unsigned i = 0; hex && i < VIA_NIC_ADDR_LEN; i++) {
        int hi = hexval(w[3 * i]), lo = hexval(w[3 * i + 1]);
        hex = hi >= 0 && lo >= 0 && (i == VIA_NIC_ADDR_LEN - 1 || w[3 * i + 2] == ':');
        if (hex)
            out[i] = (uint8_t)(hi << 4 | lo);
    }
    if (!hex) {
        snprintf(why, cap, "'%s' is not a NIC address (viaN, hh:hh:hh:hh:hh:hh, or "
                           "IPv4-ADDRESS:PORT of another vipd)", w);
        return false;
    }
    uint32_t host = (uint32_t)out[0] << 24 | (uint32_t)out[1] << 16 | (uint32_t)out[2] << 8 |
                    out[3];
    idx = (unsigned)out[4] << 8 | out[5];
    if (host == kd.host_id && idx >= kd.nnics) {
        snprintf(why, cap, "%s is NIC %u of this host, which has via0..via%u", w, idx,
                 kd.nnics - 1);
        return false;
    }
    return true;
}

/* "ethN=IPv4" after a host's ADDR:PORT on its line: the address of that
 * host's interface N. true when w is such a word (why set if it is bad). */
static bool interface_word(const char *name, const char *w, bool *bad, char *why, size_t cap)
{
    unsigned n;
    char ip[INET_ADDRSTRLEN + 1];
    struct in_addr a;
    if (strncmp(w, "eth", 3) != 0 || !strchr(w, '='))
        return false;
    *bad = true;
    struct kd_host *h = NULL;
    for (unsigned i = 0; i < kd.nnethosts && !h; i++)
        if (strcasecmp(kd.nethost[i].name, name) == 0)
            h = &kd.nethost[i];
    if (sscanf(w, "eth%u=%16s", &n, ip) != 2 || inet_pton(AF_INET, ip, &a) != 1 ||
        n >= KD_HOST_IFS) {
        snprintf(why, cap, "'%s' is not ethN=IPv4-ADDRESS (N below %u)", w, KD_HOST_IFS);
        return true;
    }
    if (!h) {
        snprintf(why, cap, "'%s': an interface of a host, after its ADDR:PORT on the line", w);
        return true;
    }
    h->if_ip[n] = a.s_addr;
    *bad = false;
    return true;
}

/* One line's words: "name address [address ...]", and for a host
 * "name ADDR:PORT [ethN=IPv4 ...]"; false with why set. */
static bool parse_line(char *line, char *why, size_t cap)
{
    char *save = NULL, *name = strtok_r(line, " \t\r", &save);
    if (!name)
        return true; /* blank or comment */
    if (!name_ok(name, why, cap))
        return false;
    unsigned naddr = 0;
    for (char *w = strtok_r(NULL, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
        bool bad = false;
        if (interface_word(name, w, &bad, why, cap)) {
            if (bad)
                return false;
            continue;
        }
        struct kd_ns_entry e = {0};
        if (!address_ok(name, w, e.addr, why, cap))
            return false;
        for (size_t i = 0; i < kd.nhosts; i++)
            if (strcasecmp(kd.hosts[i].name, name) == 0 &&
                memcmp(kd.hosts[i].addr, e.addr, VIA_NIC_ADDR_LEN) == 0) {
                snprintf(why, cap, "'%s' already has address %s", name, w);
                return false;
            }
        if (kd.nhosts == NS_MAX_ENTRIES) {
            snprintf(why, cap, "more than %u name-address pairs", NS_MAX_ENTRIES);
            return false;
        }
        struct kd_ns_entry *n = realloc(kd.hosts, (kd.nhosts + 1) * sizeof *n);
        if (!n) {
            snprintf(why, cap, "out of memory");
            return false;
        }
        kd.hosts = n;
        snprintf(e.name, sizeof e.name, "%s", name);
        kd.hosts[kd.nhosts++] = e;
        naddr++;
    }
    if (!naddr) {
        snprintf(why, cap, "'%s' has no address (a line is: name address...)", name);
        return false;
    }
    return true;
}

bool kd_ns_load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "vipd: hosts file %s: %s\n", path, strerror(errno));
        return false;
    }
    char *line = NULL, why[200];
    size_t cap = 0;
    ssize_t len;
    unsigned no = 0;
    bool ok = true;
    errno = 0;
    while (ok && (len = getline(&line, &cap, f)) >= 0) {
        no++;
        if ((size_t)len > NS_LINE_MAX) {
            snprintf(why, sizeof why, "line longer than %u bytes", NS_LINE_MAX);
            ok = false;
        } else if (memchr(line, 0, (size_t)len)) {
            snprintf(why, sizeof why, "NUL byte in the line (not a text file?)");
            ok = false;
        } else {
            line[strcspn(line, "#\n")] = 0;
            ok = parse_line(line, why, sizeof why);
        }
    }
    if (ok && ferror(f)) {
        snprintf(why, sizeof why, "read error: %s", strerror(errno));
        ok = false;
    }
    free(line);
    fclose(f);
    if (!ok) {
        fprintf(stderr, "vipd: %s:%u: %s\n", path, no, why);
        kd_ns_free();
        return false;
    }
    return true;
}

void kd_ns_free(void)
{
    free(kd.hosts);
    kd.hosts = NULL;
    kd.nhosts = 0;
}

/* ---- NS_LOOKUP / NS_REVERSE ------------------------------------------------------- */

/* The IPv4 addresses name stands for: itself if numeric, else the lines of
 * /etc/hosts that list it. */
static unsigned ipv4_of(const char *name, uint32_t *out, unsigned max)
{
    struct in_addr a;
    if (inet_pton(AF_INET, name, &a) == 1) {
        out[0] = a.s_addr;
        return 1;
    }
    unsigned n = 0;
    FILE *f = fopen("/etc/hosts", "r");
    char line[NS_LINE_MAX], *ip;
    bool beside_ours;
    while (f && n < max && etc_hosts_next(f, name, line, &ip, &beside_ours))
        if (inet_pton(AF_INET, ip, &a) == 1)
            out[n++] = a.s_addr;
    if (f)
        fclose(f);
    return n;
}

/* A name whose address the hosts file gives to interface ethN of one of
 * its hosts: that host's NIC N (ours, if it is this host's line). */
static bool declared_interface(const char *name, uint8_t out[VIA_NIC_ADDR_LEN])
{
    uint32_t ip[8];
    unsigned n = kd.nnethosts ? ipv4_of(name, ip, 8) : 0;
    for (unsigned k = 0; k < n; k++)
        for (unsigned i = 0; i < kd.nnethosts; i++)
            for (unsigned eth = 0; eth < KD_HOST_IFS; eth++) {
                const struct kd_host *h = &kd.nethost[i];
                if (h->if_ip[eth] != ip[k])
                    continue;
                if (h->host_id == kd.host_id) {
                    if (eth >= kd.nnics)
                        continue; /* declared, but this vipd has no such NIC */
                    kd_nic_addr(eth, out);
                } else {
                    host_addr(h->host_id, eth, out);
                }
                return true;
            }
    return false;
}

/* The index-th address of name; false with r failed. */
static bool resolve(const char *name, uint32_t index, unsigned own, uint8_t out[VIA_NIC_ADDR_LEN],
                    struct kd_reply *r)
{
    unsigned idx, found = 0;
    const char *colon = strrchr(name, ':');
    if (colon) {
        char host[NS_NAME_MAX + 2];
        snprintf(host, sizeof host, "%.*s", (int)(colon - name), name);
        if (!device_index(colon + 1, &idx)) {
            kd_fail(r, VIP_ERROR_NAMESERVICE, "unknown NIC name %.60s", colon + 1);
            return false;
        }
        for (unsigned i = 0; i < kd.nnethosts; i++)
            if (strcasecmp(kd.nethost[i].name, host) == 0 &&
                kd.nethost[i].host_id != kd.host_id) {
                if (index != 0) {
                    kd_fail(r, VIP_ERROR_NAMESERVICE, "'%s' has one address (NameIndex 0)",
                            name);
                    return false;
                }
                host_addr(kd.nethost[i].host_id, idx, out); /* another host's NIC */
                return true;
            }
        char ifname[IF_NAMESIZE];
        if (!is_this_host(host, ifname)) {
            kd_fail(r, VIP_ERROR_NAMESERVICE,
                    "unknown host %.40s (neither this host nor one of the hosts file)", host);
            return false;
        }
        if (!host_if_bound(colon + 1, idx, r))
            return false;
    } else if (device_index(name, &idx)) {
        if (!host_if_bound(name, idx, r)) /* else: an explicit NIC of this host */
            return false;
    } else {
        for (size_t i = 0; i < kd.nhosts; i++)
            if (strcasecmp(kd.hosts[i].name, name) == 0 && found++ == index) {
                memcpy(out, kd.hosts[i].addr, VIA_NIC_ADDR_LEN);
                return true;
            }
        if (found) {
            kd_fail(r, VIP_ERROR_NAMESERVICE, "'%s' has %u address%s (NameIndex 0..%u)", name,
                    found, found == 1 ? "" : "es", found - 1);
            return false;
        }
        if (declared_interface(name, out)) {
            if (index == 0)
                return true;
            kd_fail(r, VIP_ERROR_NAMESERVICE, "'%s' has one address (NameIndex 0)", name);
            return false;
        }
        char ifname[IF_NAMESIZE];
        if (!is_this_host(name, ifname)) {
            kd_fail(r, VIP_ERROR_NAMESERVICE, "unknown host %.64s", name);
            return false;
        }
        /* A name or address of interface ethN is the NIC /dev/via_ethN
         * opens; the machine's own names are the asking session's NIC. */
        int eth = nic_of_interface(ifname);
        idx = eth >= 0 ? (unsigned)eth : own;
    }
    if (idx >= kd.nnics) {
        kd_fail(r, VIP_ERROR_NAMESERVICE, "no such NIC via%u (this vipd has %u)", idx,
                kd.nnics);
        return false;
    }
    if (index != 0) {
        kd_fail(r, VIP_ERROR_NAMESERVICE, "'%s' has one address (NameIndex 0)", name);
        return false;
    }
    kd_nic_addr(idx, out);
    return true;
}

void kd_op_ns_lookup(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_ns_lookup *q = body;
    char name[sizeof q->name + 1];
    memcpy(name, q->name, sizeof q->name);
    name[sizeof q->name] = 0; /* the client may not have terminated it */
    uint8_t addr[VIA_NIC_ADDR_LEN];
    if (!resolve(name, q->index, c->sess ? c->sess->nic->index : 0, addr, r))
        return;
    struct via_ctl_ns_lookup_r *a = kd_body(r, sizeof *a);
    if (a)
        memcpy(a->nic_addr, addr, VIA_NIC_ADDR_LEN);
    kd_debug("NS_LOOKUP '%s' [%u] -> %02x%02x%02x%02x:%u", name, q->index, addr[0], addr[1],
             addr[2], addr[3], (unsigned)addr[4] << 8 | addr[5]);
}

/* The hosts file's first name for the address, else HOST:viaN for a NIC of
 * this host. */
void kd_op_ns_reverse(struct kd_client *c, uint64_t cookie, const void *body,
                      struct kd_reply *r)
{
    (void)c;
    (void)cookie;
    const struct via_ctl_ns_reverse *q = body;
    const uint8_t *h = q->nic_addr;
    uint32_t host = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    unsigned idx = (unsigned)h[4] << 8 | h[5];
    const char *name = NULL;
    for (size_t i = 0; i < kd.nhosts && !name; i++)
        if (memcmp(kd.hosts[i].addr, h, VIA_NIC_ADDR_LEN) == 0)
            name = kd.hosts[i].name;
    struct kd_host *other = name ? NULL : kd_host_by_id(host);
    if (other) {
        struct via_ctl_ns_reverse_r *a = kd_body(r, sizeof *a);
        if (a)
            snprintf(a->name, sizeof a->name, "%.63s:via%u", other->name, idx);
        return;
    }
    if (!name && (host != kd.host_id || idx >= kd.nnics)) {
        kd_fail(r, VIP_ERROR_NAMESERVICE,
                "no name for %02x:%02x:%02x:%02x:%02x:%02x: not a NIC of this host nor in "
                "the hosts file", h[0], h[1], h[2], h[3], h[4], h[5]);
        return;
    }
    struct via_ctl_ns_reverse_r *a = kd_body(r, sizeof *a);
    if (!a)
        return;
    if (name)
        snprintf(a->name, sizeof a->name, "%s", name);
    else
        snprintf(a->name, sizeof a->name, "%.80s:via%u", kd.hostname, idx);
}

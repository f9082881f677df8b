/*
 * test_hostdev.c - the host's network devices as an M-VIA user sees them:
 * /dev/via_ethN opens NIC viaN only if the host has network interface N;
 * the address of interface N names NIC N; `vipctl nics` names that interface, its addresses and its PCI device;
 * `vipctl doctor` reports the kernel's module support, the RDMA drivers
 * and devices (needs run_tests.sh's vipd, six NICs).
 *
 * Every expectation is computed here from the host itself by other means
 * than vipctl's (the realpath of /sys/class/net/IF, SIOCGIFADDR and
 * /proc/net/if_inet6, pci.ids read by hand, /proc/modules, modules.dep and
 * modules.builtin read as text), so the tests hold on any machine: with or
 * without a PCI NIC, in a container, with or without module support.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "via_abi.h"

#define NNICS 6 /* run_tests.sh's vipd */
#define OUT_CAP (1 << 18)

/* ---- the host's interfaces, from /sys/class/net ------------------------------- */

struct sysif {
    char name[IF_NAMESIZE];
    unsigned ifindex;
    int type;
    bool device;    /* /sys/class/net/IF/device exists */
    char slot[32];  /* the PCI function in its device path, "" if none */
};

static bool is_pci_addr(const char *s)
{
    unsigned d, b, s2, f;
    char tail;
    return strlen(s) == 12 && sscanf(s, "%4x:%2x:%2x.%1x%c", &d, &b, &s2, &f, &tail) == 4;
}

/* The PCI function of IF from its path /sys/devices/.../SLOT[/virtioN]/net/IF. */
static void pci_of_path(const char *name, char *slot, size_t cap)
{
    char link[PATH_MAX], real[PATH_MAX];
    slot[0] = 0;
    snprintf(link, sizeof link, "/sys/class/net/%s", name);
    if (!realpath(link, real))
        return;
    char *comp[64];
    int n = 0;
    for (char *t = strtok(real, "/"); t && n < 64; t = strtok(NULL, "/"))
        comp[n++] = t;
    if (n < 3 || strcmp(comp[n - 2], "net") != 0)
        return;
    const char *up = comp[n - 3];
    if (is_pci_addr(up))
        snprintf(slot, cap, "%s", up);
    else if (n >= 4 && strncmp(up, "virtio", 6) == 0 && is_pci_addr(comp[n - 4]))
        snprintf(slot, cap, "%s", comp[n - 4]);
}

static int read_int(const char *fmt, const char *name, int dflt)
{
    char path[PATH_MAX], buf[32];
    snprintf(path, sizeof path, fmt, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return dflt;
    int v = fgets(buf, sizeof buf, f) ? atoi(buf) : dflt;
    fclose(f);
    return v;
}

static int by_ifindex(const void *x, const void *y)
{
    const struct sysif *a = x, *b = y;
    return a->ifindex < b->ifindex ? -1 : a->ifindex > b->ifindex;
}

static int sys_ifaces(struct sysif *l, int max)
{
    DIR *d = opendir("/sys/class/net");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < max;) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= IF_NAMESIZE)
            continue;
        struct sysif *s = &l[n];
        char path[PATH_MAX];
        memcpy(s->name, e->d_name, strlen(e->d_name) + 1); /* < IF_NAMESIZE: above */
        snprintf(path, sizeof path, "/sys/class/net/%s/ifindex", s->name);
        if (access(path, F_OK) != 0)
            continue; /* bonding_masters and the like */
        s->ifindex = (unsigned)read_int("/sys/class/net/%s/ifindex", s->name, 0);
        s->type = read_int("/sys/class/net/%s/type", s->name, -1);
        snprintf(path, sizeof path, "/sys/class/net/%s/device", s->name);
        s->device = access(path, F_OK) == 0;
        pci_of_path(s->name, s->slot, sizeof s->slot);
        n++;
    }
    if (d)
        closedir(d);
    qsort(l, (size_t)n, sizeof *l, by_ifindex);
    return n;
}

/* Interface N of M-VIA's /dev/via_ethN: ethN, else the N-th Ethernet
 * interface with a device (spec-notes/host-devices.md). */
static int sys_eth(const struct sysif *l, int n, unsigned eth)
{
    char want[32];
    snprintf(want, sizeof want, "eth%u", eth);
    for (int i = 0; i < n; i++)
        if (strcmp(l[i].name, want) == 0)
            return i;
    unsigned k = 0;
    for (int i = 0; i < n; i++)
        if (l[i].device && l[i].type == 1 && k++ == eth)
            return i;
    return -1;
}

/* ---- reading vipctl's output ------------------------------------------------- */

/* The value of "\tKEY<blanks>VALUE\n" within [from, end), or false. */
static bool value(const char *from, const char *end, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = from; p && p < end; p = strchr(p + 1, '\t')) {
        if (strncmp(p + 1, key, kl) != 0)
            continue;
        const char *v = p + 1 + kl;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strcspn(v, "\n");
        snprintf(out, cap, "%.*s", (int)n, v);
        return true;
    }
    return false;
}

/* The lines of interface name's block in `out`: from its host_interface
 * line to the next one or a blank line. */
static bool iface_block(const char *out, const char *name, const char **from, const char **end)
{
    for (const char *p = strstr(out, "host_interface:"); p;
         p = strstr(p + 1, "host_interface:")) {
        const char *v = p + strlen("host_interface:");
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strcspn(v, " ,\n");
        if (n != strlen(name) || strncmp(v, name, n) != 0)
            continue;
        *from = p - 1;
        const char *e1 = strstr(v, "host_interface:"), *e2 = strstr(v, "\n\n");
        *end = e1 && (!e2 || e1 < e2) ? e1 : e2 ? e2 : v + strlen(v);
        return true;
    }
    return false;
}

/* ---- the PCI device, from sysfs and pci.ids --------------------------------------- */

static unsigned read_hex(const char *slot, const char *attr)
{
    char path[PATH_MAX], buf[32] = "";
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/%s", slot, attr);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    return (unsigned)strtoul(buf, NULL, 16);
}

/* The vendor and device names pci.ids gives, or false (no file, unknown). */
static bool pci_ids_names(unsigned ven, unsigned dev, char *vname, char *dname, size_t cap)
{
    FILE *f = fopen("/usr/share/misc/pci.ids", "r");
    if (!f)
        f = fopen("/usr/share/hwdata/pci.ids", "r");
    if (!f)
        return false;
    char line[256];
    bool in_vendor = false, found = false;
    vname[0] = dname[0] = 0;
    while (fgets(line, sizeof line, f) && !found) {
        line[strcspn(line, "\n")] = 0;
        unsigned id;
        if (line[0] == 'C' && line[1] == ' ')
            break; /* the class list follows the vendors */
        if (isxdigit((unsigned char)line[0]) && sscanf(line, "%4x", &id) == 1) {
            in_vendor = id == ven;
            if (in_vendor)
                snprintf(vname, cap, "%s", line + 6);
        } else if (in_vendor && line[0] == '\t' && line[1] != '\t' &&
                   sscanf(line + 1, "%4x", &id) == 1 && id == dev) {
            snprintf(dname, cap, "%s", line + 7);
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* ---- modules, from /proc and the module tree as text --------------------------------- */

enum mod_state { MOD_NO, MOD_LOADED, MOD_BUILTIN, MOD_AVAILABLE };
static const char *const mod_answer[] = {"no. ", "loaded", "built into the kernel", "available"};

/* Does a line of file name module (as "NAME" first word, or ".../NAME.ko*")? */
static bool file_names(const char *path, const char *mod, bool ko_path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096];
    bool hit = false;
    size_t ml = strlen(mod);
    while (!hit && fgets(line, sizeof line, f)) {
        line[strcspn(line, ko_path ? ":\n" : " \n")] = 0;
        const char *b = line;
        if (ko_path) {
            const char *sl = strrchr(line, '/');
            b = sl ? sl + 1 : line;
        }
        for (char *p = (char *)b; *p; p++)
            if (*p == '-')
                *p = '_';
        hit = strncmp(b, mod, ml) == 0 && (ko_path ? strncmp(b + ml, ".ko", 3) == 0 : !b[ml]);
    }
    fclose(f);
    return hit;
}

static enum mod_state mod_expect(const char *mod)
{
    char path[PATH_MAX], tree[PATH_MAX - 64];
    struct utsname u;
    uname(&u);
    snprintf(tree, sizeof tree, "/lib/modules/%s", u.release);
    snprintf(path, sizeof path, "/sys/module/%s/initstate", mod);
    if (file_names("/proc/modules", mod, false) || access(path, F_OK) == 0)
        return MOD_LOADED;
    struct stat st;
    snprintf(path, sizeof path, "%s/modules.builtin", tree);
    char sysdir[PATH_MAX];
    snprintf(sysdir, sizeof sysdir, "/sys/module/%s", mod);
    if ((stat(sysdir, &st) == 0 && S_ISDIR(st.st_mode)) || file_names(path, mod, true))
        return MOD_BUILTIN;
    snprintf(path, sizeof path, "%s/modules.dep", tree);
    bool can_load = access("/proc/modules", F_OK) == 0 &&
                    read_int("%s", "/proc/sys/kernel/modules_disabled", 0) != 1;
    return can_load && file_names(path, mod, true) ? MOD_AVAILABLE : MOD_NO;
}

/* ---- the tests ----------------------------------------------------------------------- */

/* Every interface of the host is listed with what is behind it. */
static void test_doctor_interfaces(void)
{
    static struct sysif l[256];
    char *out = malloc(OUT_CAP);
    TCHK(out != NULL);
    int n = sys_ifaces(l, 256);
    CU_ASSERT_EQUAL(tl_vipctl("doctor", out, OUT_CAP), 0);
    int listed = 0;
    for (const char *p = out; (p = strstr(p, "host_interface:")); p++)
        listed++;
    CU_ASSERT_EQUAL(listed, n);
    for (int i = 0; i < n; i++) {
        const char *from, *end;
        char v[512], want[600];
        if (!iface_block(out, l[i].name, &from, &end)) {
            fprintf(stderr, "\n  vipctl doctor does not list %s:\n%s\n", l[i].name, out);
            CU_FAIL("an interface of /sys/class/net is missing");
            continue;
        }
        /* which /dev/via_ethN it is, if any */
        int eth = -1;
        for (unsigned e = 0; e < (unsigned)n && eth < 0; e++)
            if (sys_eth(l, n, e) == i)
                eth = (int)e;
        TCHK(value(from, end, "host_interface:", v, sizeof v));
        snprintf(want, sizeof want, "%s (/dev/via_eth%d)", l[i].name, eth);
        CU_ASSERT_EQUAL(strstr(v, "/dev/via_eth") != NULL, eth >= 0);
        if (eth >= 0)
            CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
        TCHK(value(from, end, "host_device:", v, sizeof v));
        /* no device: it says so in words; a device: it names it */
        CU_ASSERT_EQUAL(strncmp(v, "none: ", 6) == 0, !l[i].device);
        if (!l[i].slot[0]) {
            CU_ASSERT(!value(from, end, "host_pci_link:", v, sizeof v));
            continue;
        }
        TCHK(value(from, end, "host_pci:", v, sizeof v));
        unsigned ven = read_hex(l[i].slot, "vendor"), dev = read_hex(l[i].slot, "device");
        snprintf(want, sizeof want, "[%04x:%04x]", ven, dev);
        CU_ASSERT_PTR_NOT_NULL(strstr(v, l[i].slot));
        CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
        char vname[256], dname[256];
        if (pci_ids_names(ven, dev, vname, dname, sizeof vname)) {
            CU_ASSERT_PTR_NOT_NULL(strstr(v, vname));
            CU_ASSERT_PTR_NOT_NULL(strstr(v, dname));
        }
        /* the link: PCI Express speed and width as sysfs has them, or "none" */
        TCHK(value(from, end, "host_pci_link:", v, sizeof v));
        char path[PATH_MAX];
        snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/current_link_width", l[i].slot);
        int width = read_int("%s", path, -1);
        if (width >= 0) {
            snprintf(want, sizeof want, "PCI Express ");
            CU_ASSERT_EQUAL(strncmp(v, want, strlen(want)), 0);
            snprintf(want, sizeof want, " x%d ", width);
            CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
        } else {
            CU_ASSERT_EQUAL(strncmp(v, "none: ", 6), 0);
        }
    }
out:
    free(out);
}

/* Module support, each RDMA driver and the RDMA device nodes: the answer
 * this host gives, and a sentence for each "no". */
static void test_doctor_modules(void)
{
    char *out = malloc(OUT_CAP), v[1024];
    TCHK(out != NULL);
    CU_ASSERT_EQUAL(tl_vipctl("doctor", out, OUT_CAP), 0);
    const char *end = out + strlen(out);
    bool modules = access("/proc/modules", F_OK) == 0;
    TCHK(value(out, end, "module support:", v, sizeof v));
    CU_ASSERT_EQUAL(strncmp(v, modules ? "yes" : "no. ", modules ? 3 : 4), 0);
    static const char *const mods[] = {"rdma_rxe", "siw", "ib_uverbs"};
    bool any = false;
    for (unsigned i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "%s:", mods[i]);
        enum mod_state want = mod_expect(mods[i]);
        any = any || want != MOD_NO;
        TCHK(value(out, end, key, v, sizeof v));
        if (strncmp(v, mod_answer[want], strlen(mod_answer[want])) != 0) {
            fprintf(stderr, "\n  %s: expected '%s...', vipctl says '%s'\n", mods[i],
                    mod_answer[want], v);
            CU_FAIL("module answer differs from /proc/modules, /sys/module, modules.dep");
        }
        if (want == MOD_NO) /* a plain sentence, not a bare "no" */
            CU_ASSERT(strlen(v) > 40 && v[strlen(v) - 1] == '.');
    }
    DIR *d = opendir("/dev/infiniband");
    bool nodes = false;
    for (struct dirent *e; d && (e = readdir(d));)
        nodes = nodes || e->d_name[0] != '.';
    if (d)
        closedir(d);
    TCHK(value(out, end, "/dev/infiniband:", v, sizeof v));
    CU_ASSERT_EQUAL(strncmp(v, nodes ? "yes: " : "no. ", nodes ? 5 : 4), 0);
    if (!nodes)
        CU_ASSERT(strlen(v) > 40 && v[strlen(v) - 1] == '.');
    if (!any && !nodes)
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "summary: this host offers no link faster"));
out:
    free(out);
}

/* The IPv4 address of an interface by ioctl, "" if none. */
static void ipv4_of(const char *name, char *out, size_t cap)
{
    out[0] = 0;
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq r = {0};
    snprintf(r.ifr_name, sizeof r.ifr_name, "%s", name);
    if (s >= 0 && ioctl(s, SIOCGIFADDR, &r) == 0)
        inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)&r.ifr_addr)->sin_addr, out,
                  (socklen_t)cap);
    if (s >= 0)
        close(s);
}

/* Its IPv6 addresses from /proc/net/if_inet6 ("a b c d e NAME"). */
static int ipv6_of(const char *name, char out[][INET6_ADDRSTRLEN], int max)
{
    FILE *f = fopen("/proc/net/if_inet6", "r");
    int n = 0;
    char hex[40], dev[IF_NAMESIZE + 8];
    unsigned a, b, c, d;
    while (f && n < max && fscanf(f, "%32s %x %x %x %x %20s", hex, &a, &b, &c, &d, dev) == 6) {
        if (strcmp(dev, name) != 0)
            continue;
        unsigned char bin[16];
        for (int i = 0; i < 16; i++)
            sscanf(hex + 2 * i, "%2hhx", &bin[i]);
        inet_ntop(AF_INET6, bin, out[n++], INET6_ADDRSTRLEN);
    }
    if (f)
        fclose(f);
    return n;
}

/* `vipctl nics`: each NIC names the host interface N it is bound to, with
 * its addresses, or says there is none. */
static void test_nics_host_interface(void)
{
    static struct sysif l[256];
    char *out = malloc(OUT_CAP);
    TCHK(out != NULL);
    int n = sys_ifaces(l, 256);
    CU_ASSERT_EQUAL(tl_vipctl("nics", out, OUT_CAP), 0);
    for (unsigned nic = 0; nic < NNICS; nic++) {
        char head[32], v[1024], next[32];
        snprintf(head, sizeof head, "nic: via%u\n", nic);
        snprintf(next, sizeof next, "nic: via%u\n", nic + 1);
        const char *from = strstr(out, head);
        TCHK(from != NULL);
        const char *end = strstr(from, next);
        if (!end)
            end = from + strlen(from);
        TCHK(value(from, end, "host_interface:", v, sizeof v));
        int i = sys_eth(l, n, nic);
        if (i < 0) {
            CU_ASSERT_EQUAL(strncmp(v, "none: ", 6), 0);
            continue;
        }
        char want[INET6_ADDRSTRLEN + 64];
        snprintf(want, sizeof want, "%s (/dev/via_eth%u)", l[i].name, nic);
        CU_ASSERT_EQUAL(strncmp(v, want, strlen(want)), 0);
        TCHK(value(from, end, "host_address:", v, sizeof v));
        char ip4[INET_ADDRSTRLEN], ip6[8][INET6_ADDRSTRLEN];
        ipv4_of(l[i].name, ip4, sizeof ip4);
        int n6 = ipv6_of(l[i].name, ip6, 8);
        if (ip4[0]) {
            snprintf(want, sizeof want, "%s/", ip4);
            CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
        }
        for (int k = 0; k < n6; k++) {
            snprintf(want, sizeof want, "%.*s/", INET6_ADDRSTRLEN, ip6[k]);
            CU_ASSERT_PTR_NOT_NULL(strstr(v, want));
        }
        if (!ip4[0] && !n6)
            CU_ASSERT_EQUAL(strncmp(v, "none: ", 6), 0);
        if (l[i].slot[0])
            CU_ASSERT(value(from, end, "host_pci:", v, sizeof v) && strstr(v, l[i].slot));
    }
out:
    free(out);
}

/* The host's interfaces into l (their count into *n) and a session on
 * dev with the name service started: the address buffer for its answers,
 * or NULL (the failure recorded). */
static VIP_NET_ADDRESS *ns_session(struct sysif *l, int *n, struct tl_nic *t, const char *dev)
{
    *n = sys_ifaces(l, 256);
    VIP_NET_ADDRESS *a = calloc(1, sizeof *a + 6 + 16);
    TCHK(a != NULL);
    TRC(tl_open(t, dev), VIP_SUCCESS);
    TRC(VipNSInit(t->nic, NULL), VIP_SUCCESS);
    return a;
out:
    free(a);
    return NULL;
}

/* /dev/via_ethN (and via_ethN) opens NIC N where the host has interface N,
 * and is refused with VIP_INVALID_PARAMETER and a reason where it has not;
 * the name service agrees. */
static void test_open_via_eth(void)
{
    static struct sysif l[256];
    int n = 0;
    struct tl_nic t = {0};
    VIP_NET_ADDRESS *a = ns_session(l, &n, &t, "via0");
    TCHK(a != NULL);
    unsigned opened = 0, refused = 0;
    for (unsigned eth = 0; eth < NNICS; eth++) {
        char dev[32];
        snprintf(dev, sizeof dev, "/dev/via_eth%u", eth);
        const char *name = eth % 2 ? dev + 5 : dev; /* with and without /dev/ */
        VIP_NIC_HANDLE h = NULL;
        VIP_RETURN rc = VipOpenNic(name, &h);
        char why[256];
        snprintf(why, sizeof why, "%s", vip_last_error());
        VIP_RETURN ns = VipNSGetHostByName(t.nic, dev, a, 0);
        if (sys_eth(l, n, eth) >= 0) {
            opened++;
            TRC_SOFT(rc, VIP_SUCCESS);
            VIP_NIC_ATTRIBUTES at;
            if (rc == VIP_SUCCESS && VipQueryNic(h, &at) == VIP_SUCCESS)
                CU_ASSERT_EQUAL(at.LocalNicAddress[5], eth);
            TRC_SOFT(ns, VIP_SUCCESS);
            if (ns == VIP_SUCCESS)
                CU_ASSERT_EQUAL(tl_host_bytes(a)[5], eth);
        } else {
            refused++;
            TRC_SOFT(rc, VIP_INVALID_PARAMETER);
            if (rc != VIP_SUCCESS)
                CU_ASSERT_PTR_NOT_NULL(strstr(why, "no host network interface"));
            TRC_SOFT(ns, VIP_ERROR_NAMESERVICE);
        }
        if (rc == VIP_SUCCESS)
            VipCloseNic(h);
    }
    /* six NICs, at most a few interfaces: some name is always refused */
    CU_ASSERT(opened + refused == NNICS && refused > 0);
    /* the other names of a NIC do not depend on the host's interfaces */
    VIP_NIC_HANDLE h;
    TRC(VipOpenNic("/dev/via_lo", &h), VIP_SUCCESS);
    VipCloseNic(h);
    TRC(VipOpenNic("/dev/via5", &h), VIP_SUCCESS);
    VipCloseNic(h);
out:
    free(a);
    tl_close(&t);
}

/* A name of one interface's address is that interface's NIC: the address
 * of the interface /dev/via_ethN is bound to resolves to NIC N, whichever
 * NIC asks (a library finding its device and its peer by host name, one
 * name per interface, connects the right NICs). The machine's own names and
 * its loopback address are the asking session's NIC. */
static void test_interface_address_names_its_nic(void)
{
    static struct sysif l[256];
    int n = 0;
    struct tl_nic t = {0};
    VIP_NET_ADDRESS *a = ns_session(l, &n, &t, "via5");
    TCHK(a != NULL);
    unsigned named = 0;
    for (unsigned eth = 0; eth < NNICS; eth++) {
        int i = sys_eth(l, n, eth);
        char ip[64];
        if (i < 0)
            continue;
        ipv4_of(l[i].name, ip, sizeof ip);
        if (!ip[0])
            continue;
        TRC_SOFT(VipNSGetHostByName(t.nic, ip, a, 0), VIP_SUCCESS);
        CU_ASSERT_EQUAL(tl_host_bytes(a)[5], eth);
        CU_ASSERT_EQUAL(memcmp(tl_host_bytes(a), t.attr.LocalNicAddress, 4), 0);
        if (tl_host_bytes(a)[5] != eth)
            fprintf(stderr, "\n  %s (%s, /dev/via_eth%u) resolved to NIC %u\n", ip,
                    l[i].name, eth, tl_host_bytes(a)[5]);
        named++;
    }
    if (!named)
        fprintf(stderr, " (no /dev/via_ethN interface here has an IPv4 address) ");
    static const char *const own[] = {"127.0.0.1", "127.0.1.1", "localhost"};
    for (unsigned k = 0; k < sizeof own / sizeof own[0]; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s", own[k]);
        TRC_SOFT(VipNSGetHostByName(t.nic, name, a, 0), VIP_SUCCESS);
        CU_ASSERT_EQUAL(memcmp(tl_host_bytes(a), t.attr.LocalNicAddress, 6), 0);
    }
    /* an address that is not this machine's names nothing here */
    char far[] = "198.51.100.77";
    TRC_SOFT(VipNSGetHostByName(t.nic, far, a, 0), VIP_ERROR_NAMESERVICE);
out:
    free(a);
    tl_close(&t);
}

/* One raw HELLO; the reply's status, its reason into msg. */
static int32_t raw_hello(uint32_t nic, uint32_t flags, char *msg, size_t cap)
{
    const char *path = getenv("VIPD_SOCKET");
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path ? path : "");
    int32_t st = -1;
    struct {
        struct via_ctl_hdr h;
        struct via_ctl_hello q;
    } req = {.h = {.op = VIA_CTL_HELLO, .len = sizeof req.q, .cookie = 9},
             .q = {.abi = VIA_ABI_VERSION, .nic = nic, .pid = (uint32_t)getpid(),
                   .flags = flags}};
    struct via_ctl_reply_hdr r;
    if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        send(s, &req, sizeof req, MSG_NOSIGNAL) == (ssize_t)sizeof req &&
        recv(s, &r, sizeof r, MSG_WAITALL) == (ssize_t)sizeof r) {
        st = r.status;
        snprintf(msg, cap, "%.*s", (int)sizeof r.msg, r.msg);
    }
    if (s >= 0)
        close(s);
    return st;
}

/* vipd checks the HELLO flags itself: unknown bits and an unbound
 * interface are refused whatever the library sent. */
static void test_hello_flags(void)
{
    static struct sysif l[256];
    int n = sys_ifaces(l, 256);
    char msg[128];
    CU_ASSERT_EQUAL(raw_hello(0, 0x80, msg, sizeof msg), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "flags"));
    unsigned eth = 0;
    while (eth < NNICS && sys_eth(l, n, eth) >= 0)
        eth++;
    TCHK(eth < NNICS);
    CU_ASSERT_EQUAL(raw_hello(eth, VIA_HELLO_HOST_IF, msg, sizeof msg), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "no host network interface"));
out:;
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_doctor_interfaces),
        TL_TEST(test_doctor_modules),
        TL_TEST(test_nics_host_interface),
        TL_TEST(test_open_via_eth),
        TL_TEST(test_interface_address_names_its_nic),
        TL_TEST(test_hello_flags),
        TL_END,
    };
    return tl_main(argc, argv, "hostdev", tests);
}

/*
 * vipctl_doctor.c - `vipctl doctor`: what this host offers for links
 * faster than the emulated NIC's own (shared memory here, sockets across
 * hosts): its network interfaces and the devices behind them, whether the
 * kernel can load modules, whether the software RDMA drivers (rdma_rxe,
 * siw) and the verbs interface (ib_uverbs) are loaded, built in or
 * available (libkmod), and whether any RDMA device exists.
 *
 * Every check prints one line "KEY: ANSWER"; ANSWER starts with yes,
 * loaded, built in, available or "no."; a "no" is followed by a plain
 * sentence saying what it means. Needs no vipd and no privilege.
 */
#include <dirent.h>
#include <errno.h>
#include <libkmod.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "vipctl_hostdev.h"

#define KEY "\t%-24s"

/* The software that would give a faster link, and what each is. */
static const struct rdma_module {
    const char *name;
    const char *what;
} rdma_modules[] = {
    {"rdma_rxe", "Soft-RoCE (RDMA over an Ethernet interface)"},
    {"siw", "Soft-iWARP (RDMA over TCP)"},
    {"ib_uverbs", "User verbs (how programs reach RDMA devices, /dev/infiniband)"},
};

/* What the kernel says about modules, gathered once. */
struct kernel_facts {
    bool modules;       /* /proc/modules: built with loadable-module support */
    bool loading_off;   /* /proc/sys/kernel/modules_disabled = 1 */
    bool tree;          /* the module tree exists */
    char tree_dir[PATH_MAX];
    unsigned nloaded;   /* lines of /proc/modules */
};

static void kernel_facts(struct kmod_ctx *ctx, struct kernel_facts *k)
{
    memset(k, 0, sizeof *k);
    FILE *f = fopen("/proc/modules", "re");
    if (f) {
        k->modules = true;
        int c, last = '\n';
        while ((c = getc(f)) != EOF) {
            if (c == '\n')
                k->nloaded++;
            last = c;
        }
        if (last != '\n')
            k->nloaded++;
        fclose(f);
    }
    f = fopen("/proc/sys/kernel/modules_disabled", "re");
    if (f) {
        k->loading_off = getc(f) == '1';
        fclose(f);
    }
    const char *dir = ctx ? kmod_get_dirname(ctx) : NULL;
    if (!dir) {
        struct utsname u;
        uname(&u);
        snprintf(k->tree_dir, sizeof k->tree_dir, "/lib/modules/%s", u.release);
    } else {
        snprintf(k->tree_dir, sizeof k->tree_dir, "%s", dir);
    }
    struct stat st;
    k->tree = stat(k->tree_dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_dir(const char *fmt, const char *arg)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, fmt, arg);
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The answer for one module: loaded, built in, available, or no. Returns
 * true for any answer but no. */
static bool module_line(struct kmod_ctx *ctx, const struct kernel_facts *k,
                        const struct rdma_module *m)
{
    char key[40];
    snprintf(key, sizeof key, "%s:", m->name);
    struct kmod_module *mod = NULL;
    int state = ctx && kmod_module_new_from_name(ctx, m->name, &mod) == 0
                    ? kmod_module_get_initstate(mod)
                    : -ENOENT;
    if (mod)
        kmod_module_unref(mod);
    /* libkmod calls a /sys/module/NAME without initstate "coming"; the
     * kernel makes such a directory for a built-in module with parameters. */
    bool sysdir = is_dir("/sys/module/%s", m->name);
    bool initstate = false;
    if (sysdir) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "/sys/module/%s/initstate", m->name);
        initstate = access(path, F_OK) == 0;
    }
    if (state == KMOD_MODULE_BUILTIN || (sysdir && !initstate)) {
        printf(KEY "built into the kernel: %s is there\n", key, m->what);
        return true;
    }
    if (state == KMOD_MODULE_LIVE || state == KMOD_MODULE_COMING) {
        printf(KEY "loaded: %s is there\n", key, m->what);
        return true;
    }
    if (state == KMOD_MODULE_GOING) {
        printf(KEY "no. %s is being unloaded right now.\n", key, m->what);
        return false;
    }
    /* Not in the kernel: is it in the module tree? */
    const char *path = NULL;
    char where[PATH_MAX] = "";
    struct kmod_list *l = NULL;
    if (ctx && k->tree && kmod_module_new_from_lookup(ctx, m->name, &l) == 0) {
        struct kmod_list *it;
        kmod_list_foreach(it, l)
        {
            struct kmod_module *x = kmod_module_get_module(it);
            if (!path && (path = kmod_module_get_path(x)))
                snprintf(where, sizeof where, "%s", path);
            kmod_module_unref(x);
        }
        kmod_module_unref_list(l);
    }
    if (where[0] && k->modules && !k->loading_off) {
        printf(KEY "available: not loaded; 'modprobe %s' (as root) loads %s from %s\n", key,
               m->name, m->what, where);
        return true;
    }
    if (where[0])
        printf(KEY "no. %s is in the module tree (%s), but this kernel cannot load it: %s.\n",
               key, m->what, where,
               k->modules ? "module loading is switched off until the next boot"
                          : "it has no loadable-module support");
    else if (!k->modules)
        printf(KEY "no. %s is not built into this kernel, and the kernel cannot load "
                   "modules.\n", key, m->what);
    else if (!k->tree)
        printf(KEY "no. %s is not loaded, and there is no module tree (%s) to load it "
                   "from.\n", key, m->what, k->tree_dir);
    else
        printf(KEY "no. %s is not loaded, not built in, and not in the module tree (%s).\n",
               key, m->what, k->tree_dir);
    return false;
}

/* The entries of dir other than . and .. into buf ("rxe0 siw0"); how many. */
static unsigned list_dir(const char *dir, char *buf, size_t cap)
{
    buf[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    unsigned n = 0;
    size_t used = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        n++;
        if (used < cap) {
            int w = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", e->d_name);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    closedir(d);
    return n;
}

static void interfaces(void)
{
    struct kd_hostif *l = malloc(KD_HOSTIF_MAX * sizeof *l);
    int n = l ? kd_hostif_list(l, KD_HOSTIF_MAX) : -ENOMEM;
    printf("network interfaces (/dev/via_ethN opens the NIC viaN bound to interface N):\n");
    if (n < 0)
        printf(KEY "no. The interfaces cannot be listed: %s.\n", "interfaces:", strerror(-n));
    else if (n == 0)
        printf(KEY "no. This host (or network namespace) has no network interface.\n",
               "interfaces:");
    for (int i = 0; i < n; i++) {
        int eth = -1;
        for (unsigned e = 0; e < (unsigned)n && eth < 0; e++)
            if (kd_hostif_eth(l, (unsigned)n, e) == i)
                eth = (int)e;
        printf("%s", i ? "\n" : "");
        vipctl_hostif_print(&l[i], eth);
    }
    bool any_eth = n > 0 && kd_hostif_eth(l, (unsigned)n, 0) >= 0;
    if (n > 0 && !any_eth)
        printf("\n" KEY "no. No interface is ethN or an Ethernet device, so no "
                   "/dev/via_ethN opens (via0, via1, ... and /dev/via_lo do).\n",
               "/dev/via_eth0:");
    free(l);
}

/* Silence libkmod: its complaints about a missing tree are our "no". */
static void kmod_quiet(void *data, int priority, const char *file, int line, const char *fn,
                       const char *format, va_list args)
{
    (void)data, (void)priority, (void)file, (void)line, (void)fn, (void)format, (void)args;
}

int vipctl_doctor(void)
{
    printf("vipctl doctor: what this host offers for faster links\n\n");
    interfaces();

    struct kmod_ctx *ctx = kmod_new(NULL, NULL);
    if (ctx)
        kmod_set_log_fn(ctx, kmod_quiet, NULL);
    struct kernel_facts k;
    kernel_facts(ctx, &k);
    printf("\nkernel modules:\n");
    if (k.modules)
        printf(KEY "yes: %u loaded\n", "module support:", k.nloaded);
    else
        printf(KEY "no. This kernel was built without loadable-module support (there is no "
                   "/proc/modules): it has only the drivers built into it.\n",
               "module support:");
    if (k.modules && k.loading_off)
        printf(KEY "no. Loading modules is switched off until the next boot "
                   "(/proc/sys/kernel/modules_disabled is 1).\n", "module loading:");
    if (k.tree)
        printf(KEY "yes: %s\n", "module tree:", k.tree_dir);
    else
        printf(KEY "no. There is no %s, so no module could be loaded from it%s.\n",
               "module tree:", k.tree_dir,
               k.modules ? " (in a container, the host's tree is often not mounted)" : "");
    if (!ctx)
        printf(KEY "no. libkmod could not start, so only /sys/module was asked.\n",
               "libkmod:");

    printf("\nRDMA drivers:\n");
    bool soft = false, verbs = false;
    for (unsigned i = 0; i < sizeof rdma_modules / sizeof *rdma_modules; i++) {
        bool ok = module_line(ctx, &k, &rdma_modules[i]);
        if (strcmp(rdma_modules[i].name, "ib_uverbs") == 0)
            verbs = ok;
        else
            soft = soft || ok;
    }
    kmod_unref(ctx);

    printf("\nRDMA devices:\n");
    char names[512];
    unsigned ndev = list_dir("/sys/class/infiniband", names, sizeof names);
    if (ndev)
        printf(KEY "yes: %s\n", "/sys/class/infiniband:", names);
    else
        printf(KEY "no. The kernel has no RDMA device (nothing in /sys/class/infiniband).\n",
               "/sys/class/infiniband:");
    unsigned nnode = list_dir("/dev/infiniband", names, sizeof names);
    if (nnode)
        printf(KEY "yes: %s\n", "/dev/infiniband:", names);
    else
        printf(KEY "no. There is no /dev/infiniband%s: no program here can open an RDMA "
                   "device.\n", "/dev/infiniband:",
               is_dir("%s", "/dev/infiniband") ? " entry" : "");

    printf("\nsummary: ");
    if (ndev && nnode)
        printf("this host has RDMA devices that programs can open: a libfabric link "
               "(verbs provider) could ride them.\n");
    else if (ndev)
        printf("this host has RDMA devices, but programs cannot open them yet "
               "(ib_uverbs and /dev/infiniband are needed).\n");
    else if (soft)
        printf("no RDMA device yet, but a software one can be made on an Ethernet "
               "interface ('rdma link add NAME type rxe|siw netdev IF' as root, iproute2)%s.\n",
               verbs ? "" : ", once ib_uverbs is loaded");
    else
        printf("this host offers no link faster than its network interfaces: it has no "
               "RDMA device and no RDMA driver it could load. Between hosts, the emulated "
               "NICs can only use sockets.\n");
    return 0;
}

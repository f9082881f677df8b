/*
 * test_hosts_netns.c - two emulated hosts in two network namespaces of the
 * test's own, joined by a veth pair on a private /30 the test picks: host0
 * (namespace vipt-PID-a, 10.213.X.Y+1) and host1 (vipt-PID-b, .Y+2), one
 * vipd in each, listening on its namespace's address only. A verified
 * ping-pong runs with the client process in namespace a and the server
 * process in namespace b (the NIC's socket lives in the process, so the
 * processes join the namespaces too), over the UDP link and the libfabric
 * link. Every address is one this test made.
 *
 * Needs root and `ip` (Debian iproute2); otherwise each test prints a skip
 * line and passes. Namespaces of this test's name pattern whose pid is dead
 * are removed first; ours are removed at the end, also after a failure
 * (and the vipds die with the test: PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tpp.h"
#include "lib/thosts.h"
#include "lib/tvipd.h"

#define NS_PORT 7400 /* the namespaces are fresh: any port is free there */

struct netns_pair {
    char ns[2][32];    /* vipt-PID-a, vipt-PID-b */
    char addr[2][20];  /* their veth addresses */
    char dev[2][16];   /* their ends of the veth */
    char dir[64], file[96];
    struct tvipd v[2];
    int made;          /* namespaces created (to remove) */
};

/* A shell command, its output thrown away; 0 when it exited with 0. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd - 16, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd - 16)
        return -1;
    strcat(cmd, " >/dev/null 2>&1");
    int rc = system(cmd);
    return rc == 0 ? 0 : -1;
}

/* Root with `ip` that can list namespaces; else the reason to skip. */
static const char *why_skip(void)
{
    if (geteuid() != 0)
        return "not root";
    if (sh("ip netns list") != 0)
        return "no working `ip netns` (Debian iproute2)";
    return NULL;
}

/* Namespaces vipt-PID-[ab] left by a test whose pid is gone. */
static void remove_leftovers(void)
{
    FILE *p = popen("ip netns list 2>/dev/null", "r");
    if (!p)
        return;
    char line[256];
    while (fgets(line, sizeof line, p)) {
        int pid;
        char ab;
        if (sscanf(line, "vipt-%d-%c", &pid, &ab) != 2 || (ab != 'a' && ab != 'b'))
            continue;
        if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
            sh("ip netns del vipt-%d-%c", pid, ab);
    }
    pclose(p);
}

static void pair_down(struct netns_pair *p)
{
    for (unsigned i = 2; i-- > 0;)
        tvipd_stop(&p->v[i]);
    if (p->made)
        for (unsigned i = 0; i < 2; i++)
            sh("ip netns del %s", p->ns[i]); /* takes its end of the veth with it */
    p->made = 0;
    if (p->file[0]) {
        unlink(p->file);
        char key[160];
        snprintf(key, sizeof key, "%s/vipd.key", p->dir);
        unlink(key);
    }
    if (p->dir[0])
        rmdir(p->dir);
    p->file[0] = p->dir[0] = 0;
}

/* Run fn(arg) with this process in namespace ns; 0 on success. */
static int in_netns(const char *ns, int (*fn)(void *), void *arg)
{
    char path[96];
    snprintf(path, sizeof path, "/run/netns/%s", ns);
    int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc = -1;
    if (self >= 0 && fd >= 0 && setns(fd, CLONE_NEWNET) == 0) {
        rc = fn(arg);
        if (setns(self, CLONE_NEWNET) != 0) {
            fprintf(stderr, "\n  could not go back to our own network namespace\n");
            abort(); /* every later test would run in the wrong one */
        }
    }
    if (fd >= 0)
        close(fd);
    if (self >= 0)
        close(self);
    return rc;
}

struct vipd_in {
    struct tvipd *v;
    const char *const *argv;
};

static int start_vipd(void *arg)
{
    struct vipd_in *s = arg;
    return tvipd_start(s->v, s->argv, 0);
}

/* Two namespaces, a veth between them, a hosts file, a vipd in each
 * (--link link). 0, or -1 with everything removed again. */
static int pair_up(struct netns_pair *p, const char *link)
{
    memset(p, 0, sizeof *p);
    remove_leftovers();
    pid_t pid = getpid();
    /* 10.213.X.Y/30 from our pid: another test run has another pid. */
    unsigned x = (unsigned)pid & 0xff, y = (((unsigned)pid >> 8) & 0x3f) * 4;
    for (unsigned i = 0; i < 2; i++) {
        snprintf(p->ns[i], sizeof p->ns[i], "vipt-%d-%c", (int)pid, 'a' + i);
        snprintf(p->addr[i], sizeof p->addr[i], "10.213.%u.%u", x, y + 1 + i);
    }
    snprintf(p->dev[0], sizeof p->dev[0], "vta%d", (int)pid % 1000000);
    snprintf(p->dev[1], sizeof p->dev[1], "vtb%d", (int)pid % 1000000);
    const char *va = p->dev[0], *vb = p->dev[1];
    p->made = 1;
    if (sh("ip netns add %s", p->ns[0]) || sh("ip netns add %s", p->ns[1]) ||
        sh("ip link add %s netns %s type veth peer name %s netns %s", va, p->ns[0], vb,
           p->ns[1]))
        goto fail;
    for (unsigned i = 0; i < 2; i++)
        if (sh("ip -n %s addr add %s/30 dev %s", p->ns[i], p->addr[i], p->dev[i]) ||
            sh("ip -n %s link set lo up", p->ns[i]) ||
            sh("ip -n %s link set %s up", p->ns[i], p->dev[i]))
            goto fail;
    snprintf(p->dir, sizeof p->dir, "/tmp/vipl-netns.XXXXXX");
    if (!mkdtemp(p->dir)) {
        p->dir[0] = 0;
        goto fail;
    }
    snprintf(p->file, sizeof p->file, "%s/hosts", p->dir);
    FILE *f = fopen(p->file, "w");
    if (!f)
        goto fail;
    for (unsigned i = 0; i < 2; i++)
        fprintf(f, "host%u %s:%u\n", i, p->addr[i], NS_PORT);
    fclose(f);
    char key[160];
    snprintf(key, sizeof key, "%s/vipd.key", p->dir);
    if (thosts_keygen(key) != 0)
        goto fail;
    for (unsigned i = 0; i < 2; i++) {
        char listen[32];
        snprintf(listen, sizeof listen, "%s:%u", p->addr[i], NS_PORT);
        const char *argv[] = {"--listen", listen, "--hosts", p->file, "--link", link, NULL};
        struct vipd_in s = {&p->v[i], argv};
        if (in_netns(p->ns[i], start_vipd, &s) != 0) {
            fprintf(stderr, "\n  vipd --link %s in %s did not start\n", link, p->ns[i]);
            goto fail;
        }
    }
    return 0;
fail:
    pair_down(p);
    return -1;
}

/* Packets host i's end of the veth has sent (kernel counters), or -1. */
static long long veth_tx(const struct netns_pair *p, unsigned i)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ip netns exec %s cat /sys/class/net/%s/statistics/tx_packets",
             p->ns[i], p->dev[i]);
    FILE *f = popen(cmd, "r");
    long long n = -1;
    if (f) {
        if (fscanf(f, "%lld", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

/* ---- one side of a ping-pong, in a child, in its host's namespace -------------------- */

struct side {
    struct tpp_cfg c;
    const struct netns_pair *p;
    unsigned host;
    int server;
};

static int run_side(void *arg)
{
    struct side *s = arg;
    setenv("VIPD_SOCKET", s->p->v[s->host].sock, 1);
    char err[512];
    if (tpp_side(&s->c, s->server, err, sizeof err))
        tl_child_fail(__FILE__, __LINE__, "%s in %s: %s", s->server ? "server" : "client",
                      s->p->ns[s->host], err);
    return 0;
}

static int side_child(void *arg)
{
    struct side *s = arg;
    /* A child of its own: it never goes back, so a failed setns is its end. */
    if (in_netns(s->p->ns[s->host], run_side, s) != 0)
        tl_child_fail(__FILE__, __LINE__, "could not join %s", s->p->ns[s->host]);
    return 0;
}

static void pp_netns(const char *link, VIP_RELIABILITY_LEVEL rel, unsigned n,
                     enum tpp_kind kind)
{
    const char *why = why_skip();
    if (why) {
        printf("\n  skip: network namespaces need root and iproute2: %s\n", why);
        return;
    }
    struct netns_pair p;
    if (pair_up(&p, link) != 0) {
        CU_FAIL("could not set up two namespaces with a vipd each");
        return;
    }
    long long tx0[2] = {veth_tx(&p, 0), veth_tx(&p, 1)};
    struct tpp_cfg c;
    tpp_defaults(&c, rel, n, kind);
    snprintf(c.srv_host, sizeof c.srv_host, "host1");
    struct side srv = {c, &p, 1, 1}, cli = {c, &p, 0, 0};
    struct tl_child cs, cc;
    if (tl_spawn(&cs, side_child, &srv) != 0) {
        CU_FAIL("fork");
        goto out;
    }
    if (tl_spawn(&cc, side_child, &cli) != 0) {
        CU_FAIL("fork");
        tl_child_kill(&cs);
        goto out;
    }
    TCHILD_OK(&cc, 120000);
    TCHILD_OK(&cs, 120000);
    /* The messages went over the veth, each way: at least a packet each. */
    for (unsigned i = 0; i < 2; i++) {
        long long tx = veth_tx(&p, i);
        CU_ASSERT(tx0[i] >= 0 && tx >= tx0[i] + (long long)c.nmsgs);
        if (!(tx0[i] >= 0 && tx >= tx0[i] + (long long)c.nmsgs))
            fprintf(stderr, "\n  %s sent %lld packets, expected %u or more\n", p.dev[i],
                    tx - tx0[i], c.nmsgs);
    }
out:
    pair_down(&p);
}

static void test_udp_reliable_delivery(void)
{
    pp_netns("udp", VIP_SERVICE_RELIABLE_DELIVERY, 1000, TPP_SMALL);
}

static void test_udp_unreliable(void)
{
    pp_netns("udp", VIP_SERVICE_UNRELIABLE, 500, TPP_SMALL);
}

static void test_udp_1mib(void)
{
    pp_netns("udp", VIP_SERVICE_RELIABLE_DELIVERY, 10, TPP_LARGE);
}

static void test_ofi_reliable_delivery(void)
{
    pp_netns("ofi", VIP_SERVICE_RELIABLE_DELIVERY, 1000, TPP_MIXED);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_udp_reliable_delivery), TL_TEST(test_udp_unreliable),
        TL_TEST(test_udp_1mib), TL_TEST(test_ofi_reliable_delivery), TL_END};
    return tl_main(argc, argv, "hosts_netns", tests);
}

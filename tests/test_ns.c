/*
 * test_ns.c - the name service and system management: VipNSGetHostByName
 * and VipNSGetHostByAddr on gethostname(), on /etc/hosts names of this
 * machine and on the names of vipd's hosts file (several addresses by
 * NameIndex, a foreign host, a bad line refused with its file and line),
 * and VipQuerySystemManagementInfo's autodiscovery list.
 *
 * The hosts-file tests run a private vipd (beside this program, in
 * ../bin/vipd) on a socket of their own, and stop it whatever happens.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/tlib.h"

/* ---- helpers ------------------------------------------------------------------ */

static VIP_NET_ADDRESS *addr_new(void)
{
    return calloc(1, sizeof(VIP_NET_ADDRESS) + 6 + 16);
}

/* Address of this host's NIC i as the name service gives it for "viaN". */
static int lookup(VIP_NIC_HANDLE nic, const char *name, VIP_ULONG idx, uint8_t out[6])
{
    VIP_NET_ADDRESS *a = addr_new();
    VIP_RETURN rc = a ? VipNSGetHostByName(nic, (VIP_CHAR *)name, a, idx) : VIP_ERROR_RESOURCE;
    if (rc == VIP_SUCCESS && a->HostAddressLen != 6)
        rc = VIP_ERROR_RESOURCE;
    if (rc == VIP_SUCCESS)
        memcpy(out, tl_host_bytes(a), 6);
    free(a);
    return (int)rc;
}

/* The name VipNSGetHostByAddr gives a 6-byte address (rc returned). */
static VIP_RETURN reverse(VIP_NIC_HANDLE nic, const uint8_t addr[6], char *name, size_t cap)
{
    VIP_NET_ADDRESS *a = addr_new();
    if (!a)
        return VIP_ERROR_RESOURCE;
    a->HostAddressLen = 6;
    memcpy(tl_host_bytes(a), addr, 6);
    VIP_ULONG len = cap;
    VIP_RETURN rc = VipNSGetHostByAddr(nic, a, name, &len);
    free(a);
    return rc;
}

/* How many NICs the test vipd has: viaN resolves for exactly those. */
static unsigned count_nics(VIP_NIC_HANDLE nic)
{
    unsigned n = 0;
    uint8_t a[6];
    char name[16];
    for (unsigned i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "via%u", i);
        if (lookup(nic, name, 0, a) == VIP_SUCCESS)
            n = i + 1;
    }
    return n;
}

/* ---- this host's names --------------------------------------------------------- */

static void test_hostname_and_etc_hosts(void)
{
    struct tl_nic t = {0};
    uint8_t a[6];
    char host[256] = "", name[128];
    FILE *f = NULL;
    TRC(tl_open(&t, "via1"), VIP_SUCCESS);
    TCHK(gethostname(host, sizeof host - 1) == 0 && host[0]);
    /* gethostname() and its HOST:viaN form */
    TRC(lookup(t.nic, host, 0, a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(a, t.attr.LocalNicAddress, 6), 0);
    TRC_SOFT(lookup(t.nic, host, 1, a), VIP_ERROR_NAMESERVICE);
    snprintf(name, sizeof name, "%.100s:via0", host);
    TRC(lookup(t.nic, name, 0, a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(a, t.attr.LocalNicAddress, 4), 0);
    CU_ASSERT_EQUAL(a[5], 0);
    TRC(reverse(t.nic, a, name, sizeof name), VIP_SUCCESS);
    CU_ASSERT_PTR_NOT_NULL(strstr(name, host));
    CU_ASSERT_PTR_NOT_NULL(strstr(name, ":via0"));
    /* every other name /etc/hosts gives a loopback address means this host */
    unsigned seen = 0;
    f = fopen("/etc/hosts", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\n")] = 0;
        char *save = NULL, *ip = strtok_r(line, " \t", &save);
        if (!ip || (strncmp(ip, "127.", 4) != 0 && strcmp(ip, "::1") != 0))
            continue;
        for (char *w = strtok_r(NULL, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
            if (strlen(w) > 60 || strchr(w, ':') || strncmp(w, "via", 3) == 0)
                continue;
            int rc = lookup(t.nic, w, 0, a);
            if (rc != VIP_SUCCESS)
                fprintf(stderr, "\n  /etc/hosts name '%s': %s\n", w,
                        vip_strerror((VIP_RETURN)rc));
            CU_ASSERT_EQUAL(rc, VIP_SUCCESS);
            CU_ASSERT(rc != VIP_SUCCESS || memcmp(a, t.attr.LocalNicAddress, 6) == 0);
            snprintf(name, sizeof name, "%s:via0", w);
            CU_ASSERT_EQUAL(lookup(t.nic, name, 0, a), VIP_SUCCESS);
            seen++;
        }
    }
    CU_ASSERT(seen > 0); /* "localhost" at least */
    TRC_SOFT(lookup(t.nic, "no-such-host.invalid", 0, a), VIP_ERROR_NAMESERVICE);
    TRC_SOFT(lookup(t.nic, "no-such-host.invalid:via0", 0, a), VIP_ERROR_NAMESERVICE);
    /* a name buffer too small says how long the name is */
    VIP_NET_ADDRESS *x = addr_new();
    TCHK(x != NULL);
    x->HostAddressLen = 6;
    memcpy(tl_host_bytes(x), t.attr.LocalNicAddress, 6);
    VIP_ULONG len = 3;
    TRC_SOFT(VipNSGetHostByAddr(t.nic, x, name, &len), VIP_INVALID_PARAMETER);
    CU_ASSERT(len > 3);
    VIP_ULONG need = len;
    TRC_SOFT(VipNSGetHostByAddr(t.nic, x, name, &len), VIP_SUCCESS);
    CU_ASSERT_EQUAL(strlen(name) + 1, need);
    tl_host_bytes(x)[0] ^= 0x77; /* another host, in no hosts file */
    len = sizeof name;
    TRC_SOFT(VipNSGetHostByAddr(t.nic, x, name, &len), VIP_ERROR_NAMESERVICE);
    free(x);
out:
    if (f)
        fclose(f);
    tl_close(&t);
}

/* ---- system management ---------------------------------------------------------- */

static void test_autodiscovery(void)
{
    struct tl_nic t = {0};
    VIP_NET_ADDRESS *slot[8] = {0};
    VIP_AUTODISCOVERY_LIST l = {0};
    TRC(tl_open(&t, "via1"), VIP_SUCCESS);
    unsigned nnics = count_nics(t.nic);
    TCHK(nnics >= 2);
    for (unsigned i = 0; i < 8; i++)
        TCHK((slot[i] = addr_new()) != NULL);
    /* too few entries: nothing written, NumAdAddrs says how many are needed */
    l.NumAdAddrs = 0;
    TRC_SOFT(VipQuerySystemManagementInfo(t.nic, VIP_SMI_AUTODISCOVERY, &l),
             VIP_INVALID_PARAMETER);
    CU_ASSERT_EQUAL(l.NumAdAddrs, nnics - 1);
    l.ADAddrArray = slot;
    l.NumAdAddrs = 8;
    TRC(VipQuerySystemManagementInfo(t.nic, VIP_SMI_AUTODISCOVERY, &l), VIP_SUCCESS);
    CU_ASSERT_EQUAL(l.NumAdAddrs, nnics - 1);
    CU_ASSERT_EQUAL(l.NumberOfHops, 1);
    /* every other NIC once, not ours */
    unsigned seen = 0;
    for (unsigned i = 0; i < l.NumAdAddrs && i < 8; i++) {
        const uint8_t *a = tl_host_bytes(slot[i]);
        CU_ASSERT_EQUAL(slot[i]->HostAddressLen, 6);
        CU_ASSERT_EQUAL(slot[i]->DiscriminatorLen, 0);
        CU_ASSERT_EQUAL(memcmp(a, t.attr.LocalNicAddress, 4), 0);
        CU_ASSERT(a[4] == 0 && a[5] < nnics && a[5] != t.attr.LocalNicAddress[5]);
        seen |= 1u << (a[5] & 7);
    }
    CU_ASSERT_EQUAL(seen, ((1u << nnics) - 1) & ~(1u << t.attr.LocalNicAddress[5]));
    /* a discovered address is a NIC the name service names */
    char name[128];
    TRC_SOFT(reverse(t.nic, tl_host_bytes(slot[0]), name, sizeof name), VIP_SUCCESS);
    /* the errors */
    TRC_SOFT(VipQuerySystemManagementInfo(t.nic, 2, &l), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipQuerySystemManagementInfo(t.nic, VIP_SMI_AUTODISCOVERY, NULL),
             VIP_INVALID_PARAMETER);
    TRC_SOFT(VipQuerySystemManagementInfo(NULL, VIP_SMI_AUTODISCOVERY, &l),
             VIP_INVALID_PARAMETER);
    l.ADAddrArray = NULL;
    l.NumAdAddrs = 8;
    TRC_SOFT(VipQuerySystemManagementInfo(t.nic, VIP_SMI_AUTODISCOVERY, &l),
             VIP_INVALID_PARAMETER);
    VIP_NET_ADDRESS *holes[8] = {slot[0], NULL};
    l.ADAddrArray = holes;
    TRC_SOFT(VipQuerySystemManagementInfo(t.nic, VIP_SMI_AUTODISCOVERY, &l),
             VIP_INVALID_PARAMETER);
out:
    for (unsigned i = 0; i < 8; i++)
        free(slot[i]);
    tl_close(&t);
}

/* ---- a private vipd with a hosts file ---------------------------------------------- */

struct pvipd {
    pid_t pid;
    char dir[64];
    char sock[96], log[96], hosts[96];
};

static int vipd_path(char *out, size_t cap)
{
    char dir[PATH_MAX];
    if (tl_bindir(dir, sizeof dir) != 0)
        return -1;
    int w = snprintf(out, cap, "%s/../bin/vipd", dir);
    return w > 0 && (size_t)w < cap && access(out, X_OK) == 0 ? 0 : -1;
}

static int pv_init(struct pvipd *v, const char *hosts_text)
{
    memset(v, 0, sizeof *v);
    v->pid = -1;
    snprintf(v->dir, sizeof v->dir, "/tmp/vipl-ns.XXXXXX");
    if (!mkdtemp(v->dir))
        return -1;
    snprintf(v->sock, sizeof v->sock, "%s/vipd.sock", v->dir);
    snprintf(v->log, sizeof v->log, "%s/vipd.log", v->dir);
    snprintf(v->hosts, sizeof v->hosts, "%s/test.hosts", v->dir);
    FILE *f = fopen(v->hosts, "w");
    if (!f)
        return -1;
    fputs(hosts_text, f);
    return fclose(f);
}

/* Start vipd -f -n 4 on v->sock; the hosts file by --hosts (by_env: by
 * $VIPD_HOSTS). 0 once it answers; -1 if it exited (its status in *status). */
static int pv_start(struct pvipd *v, int by_env, int *status)
{
    char exe[PATH_MAX];
    *status = -1;
    if (vipd_path(exe, sizeof exe) < 0)
        return -1;
    v->pid = fork();
    if (v->pid < 0)
        return -1;
    if (v->pid == 0) {
        int fd = open(v->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        if (by_env) {
            setenv("VIPD_HOSTS", v->hosts, 1);
            execl(exe, "vipd", "-f", "-q", "-n", "4", "-s", v->sock, (char *)NULL);
        } else {
            unsetenv("VIPD_HOSTS");
            execl(exe, "vipd", "-f", "-q", "-n", "4", "-s", v->sock, "--hosts", v->hosts,
                  (char *)NULL);
        }
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        int st;
        if (waitpid(v->pid, &st, WNOHANG) == v->pid) {
            v->pid = -1;
            *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return -1;
        }
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", v->sock);
        int ok = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0;
        if (s >= 0)
            close(s);
        if (ok)
            return 0;
        usleep(10000);
    }
    return -1;
}

static void pv_stop(struct pvipd *v)
{
    if (v->pid > 0) {
        kill(v->pid, SIGTERM);
        int st, i;
        for (i = 0; i < 500 && waitpid(v->pid, &st, WNOHANG) == 0; i++)
            usleep(10000);
        if (i == 500) {
            kill(v->pid, SIGKILL);
            waitpid(v->pid, &st, 0);
        }
        v->pid = -1;
    }
    if (v->dir[0]) {
        unlink(v->sock);
        char lock[160];
        snprintf(lock, sizeof lock, "%s.lock", v->sock);
        unlink(lock);
        unlink(v->log);
        unlink(v->hosts);
        rmdir(v->dir);
        v->dir[0] = 0;
    }
}

/* VipOpenNic on the private vipd (VIPD_SOCKET names it for this call only). */
static VIP_RETURN pv_open(struct pvipd *v, struct tl_nic *t, const char *dev)
{
    const char *old = getenv("VIPD_SOCKET");
    char *keep = old ? strdup(old) : NULL;
    setenv("VIPD_SOCKET", v->sock, 1);
    VIP_RETURN rc = tl_open(t, dev);
    if (keep) {
        setenv("VIPD_SOCKET", keep, 1);
        free(keep);
    } else {
        unsetenv("VIPD_SOCKET");
    }
    return rc;
}

static const char good_hosts[] =
    "# names for the tests\n"
    "alpha   via1\n"
    "\n"
    "beta    via0 via2   # two addresses on one line\n"
    "beta    via3\n"
    "gamma   01:02:03:04:00:05\n"
    "Delta.example-1_x   via2\n";

static void hosts_file_lookups(int by_env)
{
    struct pvipd v;
    struct tl_nic t = {0};
    uint8_t a[6], own[6], via[4][6];
    char name[128];
    int st;
    TCHK(pv_init(&v, good_hosts) == 0);
    TCHK(pv_start(&v, by_env, &st) == 0);
    TRC(pv_open(&v, &t, "via0"), VIP_SUCCESS);
    memcpy(own, t.attr.LocalNicAddress, 6);
    for (unsigned i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "via%u", i);
        TRC(lookup(t.nic, name, 0, via[i]), VIP_SUCCESS);
    }
    TRC(lookup(t.nic, "alpha", 0, a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(a, via[1], 6), 0);
    TRC_SOFT(lookup(t.nic, "alpha", 1, a), VIP_ERROR_NAMESERVICE);
    /* several addresses, in the order of the file */
    TRC(lookup(t.nic, "beta", 0, a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(a, via[0], 6), 0);
    TRC(lookup(t.nic, "beta", 1, a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(a, via[2], 6), 0);
    TRC(lookup(t.nic, "beta", 2, a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(a, via[3], 6), 0);
    TRC_SOFT(lookup(t.nic, "beta", 3, a), VIP_ERROR_NAMESERVICE);
    TRC(lookup(t.nic, "DELTA.example-1_x", 0, a), VIP_SUCCESS); /* names ignore case */
    CU_ASSERT_EQUAL(memcmp(a, via[2], 6), 0);
    /* another host's NIC: named, but not reachable */
    TRC(lookup(t.nic, "gamma", 0, a), VIP_SUCCESS);
    static const uint8_t g[6] = {1, 2, 3, 4, 0, 5};
    CU_ASSERT_EQUAL(memcmp(a, g, 6), 0);
    VIP_VI_HANDLE vi = NULL;
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    VIP_NET_ADDRESS *ga = tl_addr(t.nic, "gamma", "x"), *la = tl_addr(t.nic, "localhost", "");
    VIP_VI_ATTRIBUTES ra;
    if (ga && la)
        TRC_SOFT(VipConnectRequest(vi, la, ga, 1000, &ra), VIP_NOT_REACHABLE);
    CU_ASSERT(ga && la);
    free(ga);
    free(la);
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    /* the reverse: the file's first name, else HOST:viaN */
    TRC(reverse(t.nic, via[1], name, sizeof name), VIP_SUCCESS);
    CU_ASSERT_STRING_EQUAL(name, "alpha");
    TRC(reverse(t.nic, via[3], name, sizeof name), VIP_SUCCESS);
    CU_ASSERT_STRING_EQUAL(name, "beta");
    TRC(reverse(t.nic, g, name, sizeof name), VIP_SUCCESS);
    CU_ASSERT_STRING_EQUAL(name, "gamma");
    uint8_t none[6] = {1, 2, 3, 4, 0, 6};
    TRC_SOFT(reverse(t.nic, none, name, sizeof name), VIP_ERROR_NAMESERVICE);
    /* this host's names still mean the caller's NIC */
    TRC(lookup(t.nic, "localhost", 0, a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(a, own, 6), 0);
out:
    tl_close(&t);
    pv_stop(&v);
}

static void test_hosts_file_option(void)
{
    hosts_file_lookups(0);
}

static void test_hosts_file_env(void)
{
    hosts_file_lookups(1);
}

/* A bad line stops vipd before it serves anybody, naming file and line. */
static void test_hosts_file_bad_lines(void)
{
    static const struct {
        const char *text;
        unsigned line;
        const char *why;
    } bad[] = {
        {"ok via0\nlonely\n", 2, "no address"},
        {"ok via0\n\nfar via9\n", 3, "no NIC via9"},
        {"via1 via0\n", 1, "device name"},
        {"a:b via0\n", 1, "has ':'"},
        {"# fine\nx 01:02:03:04:05\n", 2, "not a NIC address"},
        {"x zz:02:03:04:05:06\n", 1, "not a NIC address"},
        {"x via0\ny via1 via1\n", 2, "already has"},
        {"-x via0\n", 1, "must start"},
        {"x via0 eth1=10.1.2.3\n", 1, "after its ADDR:PORT"},
        {"h 127.0.0.1:7 eth1=10.1.2\n", 1, "not ethN=IPv4"},
        {"h 127.0.0.1:7 eth99=10.1.2.3\n", 1, "not ethN=IPv4"},
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct pvipd v;
        int st;
        char want[200], log[2048] = "";
        TCHK(pv_init(&v, bad[i].text) == 0);
        CU_ASSERT_EQUAL(pv_start(&v, 0, &st), -1);
        CU_ASSERT_EQUAL(st, 1);
        FILE *f = fopen(v.log, "r");
        if (f) {
            size_t n = fread(log, 1, sizeof log - 1, f);
            log[n] = 0;
            fclose(f);
        }
        snprintf(want, sizeof want, "%s:%u: ", v.hosts, bad[i].line);
        if (!strstr(log, want) || !strstr(log, bad[i].why))
            fprintf(stderr, "\n  case %u: wanted '%s' and '%s' in: %s\n", i, want, bad[i].why,
                    log);
        CU_ASSERT_PTR_NOT_NULL(strstr(log, want));
        CU_ASSERT_PTR_NOT_NULL(strstr(log, bad[i].why));
        pv_stop(&v);
    }
out:;
}

/* Through the library: a vipd that VipOpenNic starts with a bad
 * $VIPD_HOSTS fails, and vip_last_error() says where. */
static int autostart_child(void *arg)
{
    struct pvipd *v = arg;
    char exe[PATH_MAX];
    TC_CHECK(vipd_path(exe, sizeof exe) == 0);
    setenv("VIPD_SOCKET", v->sock, 1);
    setenv("VIPD_AUTOSTART", "1", 1);
    setenv("VIPD_PATH", exe, 1);
    setenv("VIPD_HOSTS", v->hosts, 1);
    VIP_NIC_HANDLE nic;
    TC_RC(VipOpenNic("via0", &nic), VIP_ERROR_RESOURCE);
    char want[200];
    snprintf(want, sizeof want, "%s:2:", v->hosts);
    if (!strstr(vip_last_error(), want))
        tl_child_fail(__FILE__, __LINE__, "vip_last_error() is '%s', wanted '%s' in it",
                      vip_last_error(), want);
    return 0;
}

static void test_hosts_file_bad_autostart(void)
{
    struct pvipd v;
    struct tl_child ch = {.pid = -1};
    TCHK(pv_init(&v, "fine via0\nbroken 1:2:3\n") == 0);
    TCHK(tl_spawn(&ch, autostart_child, &v) == 0);
out:
    TCHILD_OK(&ch, 30000);
    pv_stop(&v);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_hostname_and_etc_hosts),
        TL_TEST(test_autodiscovery),
        TL_TEST(test_hosts_file_option),
        TL_TEST(test_hosts_file_env),
        TL_TEST(test_hosts_file_bad_lines),
        TL_TEST(test_hosts_file_bad_autostart),
        TL_END,
    };
    return tl_main(argc, argv, "ns", tests);
}

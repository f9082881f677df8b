/*
 * test_system.c - one NIC for several users: a system vipd (vipd --system)
 * serving two throwaway users (tests/lib/tsys.c: uids without a passwd
 * entry; each test on a system vipd of its own, never /run/vipd). How one
 * user's objects are out of the other's reach: test_system_isolation.
 *
 *   each_user_works       two users' programs run side by side;
 *   users_connect         programs of two users connect when both agree
 *                         (client-server, peer-to-peer) and exchange data;
 *                         a request the other side rejects gets VIP_REJECT;
 *   vipctl_own_objects    vipctl shows a user their own VIs and regions and
 *                         root everybody's; stopping vipd and the trace are
 *                         root's;
 *   per_user_limits       sessions, VIs, registered bytes: the one over the
 *                         limit is refused with a reason naming the option,
 *                         and the other user is not affected;
 *   system_socket_found   with no socket of their own, programs and vipctl
 *                         find the system socket, and trust it only if its
 *                         directory, the socket and the daemon are root's;
 *   start_script          vipd-start start/status/stop; vipd --system will
 *                         not run as anyone but root.
 * Every test needs root and is skipped, saying so, without it.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tpp.h"
#include "lib/tsys.h"
#include "via_abi.h"

/* ---- each user's programs work ------------------------------------------------------ */

static void test_each_user_works(void)
{
    if (!tsys_start(NULL))
        return;
    struct tpp_cfg cfg[2];
    struct tl_child ch[4];
    unsigned n = 0;
    bool ok = true;
    for (unsigned u = 0; u < 2; u++) {
        tpp_defaults(&cfg[u], VIP_SERVICE_RELIABLE_DELIVERY, 200, TPP_SMALL);
        snprintf(cfg[u].cli_dev, sizeof cfg[u].cli_dev, "via1");
        tl_discrim(cfg[u].disc, u ? "B" : "A");
    }
    /* both users' pairs at once, each through the one NIC pair */
    for (unsigned u = 0; u < 2 && ok; u++) {
        uid_t uid = u ? tsys_uid_b : tsys_uid_a;
        ok = tsys_spawn_as(&ch[n], uid, tpp_child_server, &cfg[u]) == 0;
        n += ok;
        ok = ok && tsys_spawn_as(&ch[n], uid, tpp_child_client, &cfg[u]) == 0;
        n += ok;
    }
    CU_ASSERT_TRUE(ok);
    tsys_reap(ch, n, ok);
    tvipd_stop(&tsys_vipd);
}

/* ---- two users connect when both agree ------------------------------------------------ */

static int reject_server(void *arg)
{
    const char *disc = arg;
    struct tl_nic t;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(t.nic, "via0", disc);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + VIA_MAX_DISCRIM);
    TC_CHECK(local && remote);
    VIP_VI_ATTRIBUTES ra;
    VIP_CONN_HANDLE conn;
    TC_RC(VipConnectWait(t.nic, local, 10000, remote, &ra, &conn), VIP_SUCCESS);
    TC_RC(VipConnectReject(conn), VIP_SUCCESS);
    free(local);
    free(remote);
    tl_close(&t);
    return 0;
}

static int reject_client(void *arg)
{
    const char *disc = arg;
    struct tl_nic t;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via1"), VIP_SUCCESS);
    TC_RC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TC_RC(tl_request(&t, vi, "via0", disc, 10000), VIP_REJECT);
    TC_CHECK(tl_vi_state(vi) == VIP_STATE_IDLE);
    VipDestroyVi(vi);
    tl_close(&t);
    return 0;
}

struct p2p {
    char dev[8], peer_dev[8];
    char mine[17], theirs[17];
    uint32_t out, in;
};

/* One side of a peer-to-peer connection, then a message each way. */
static int p2p_side(void *arg)
{
    const struct p2p *p = arg;
    struct tsys_link l;
    tsys_link_open(&l, p->dev);
    VIP_NET_ADDRESS *local = tl_addr(l.t.nic, p->dev, p->mine);
    VIP_NET_ADDRESS *remote = tl_addr(l.t.nic, p->peer_dev, p->theirs);
    TC_CHECK(local && remote);
    VIP_VI_ATTRIBUTES ra;
    TC_RC(VipConnectPeerRequest(l.vi, local, remote, 10000), VIP_SUCCESS);
    TC_RC(VipConnectPeerWait(l.vi, &ra), VIP_SUCCESS);
    tsys_link_swap(&l, p->out, p->in);
    /* the peer may still be taking our message: disconnect when told */
    tl_child_post('s');
    TC_CHECK(tl_child_take(20000) == 'x');
    free(local);
    free(remote);
    tsys_link_close(&l);
    return 0;
}

static void test_users_connect(void)
{
    if (!tsys_start(NULL))
        return;
    struct tl_child ch[6];
    unsigned n = 0;
    bool ok;
    /* client-server: A serves, B's program connects and they ping-pong */
    struct tpp_cfg cfg;
    tpp_defaults(&cfg, VIP_SERVICE_RELIABLE_DELIVERY, 100, TPP_MIXED);
    snprintf(cfg.cli_dev, sizeof cfg.cli_dev, "via1");
    ok = tsys_spawn_as(&ch[n], tsys_uid_a, tpp_child_server, &cfg) == 0;
    n += ok;
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_b, tpp_child_client, &cfg) == 0;
    n += ok;
    /* A does not agree: B is told so */
    char disc[17];
    tl_discrim(disc, "rej");
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_a, reject_server, disc) == 0;
    n += ok;
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_b, reject_client, disc) == 0;
    n += ok;
    /* peer-to-peer: both ask for each other */
    struct p2p pa = {"via0", "via1", "", "", 21, 22}, pb = {"via1", "via0", "", "", 22, 21};
    tl_discrim(pa.mine, "pa");
    tl_discrim(pb.mine, "pb");
    memcpy(pa.theirs, pb.mine, sizeof pa.theirs);
    memcpy(pb.theirs, pa.mine, sizeof pb.theirs);
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_a, p2p_side, &pa) == 0;
    n += ok;
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_b, p2p_side, &pb) == 0;
    n += ok;
    /* both have their message: they may disconnect */
    ok = ok && tl_gather(&ch[4], 2, 's', 30000, NULL, NULL) == 0;
    ok = ok && tl_parent_post(&ch[4], 'x') == 0 && tl_parent_post(&ch[5], 'x') == 0;
    CU_ASSERT_TRUE(ok);
    tsys_reap(ch, n, ok);
    tvipd_stop(&tsys_vipd);
}

/* ---- vipctl ------------------------------------------------------------------------------ */

/* Does a `vipctl vis` or `vipctl mem` table have a row of pid? */
static bool table_has(const char *out, pid_t pid, bool mem)
{
    for (const char *l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        unsigned nic, id, p;
        int k = mem ? sscanf(l, "via%u 0x%x %u", &nic, &id, &p)
                    : sscanf(l, "via%u %u %u", &nic, &id, &p);
        if (k == 3 && p == (unsigned)pid)
            return true;
    }
    return false;
}

/* A program holding a VI and a registered buffer until told. */
static int holder(void *arg)
{
    (void)arg;
    struct tsys_link l;
    tsys_link_open(&l, "via0");
    tl_child_post('r');
    TC_CHECK(tl_child_take(30000) == 'x');
    tsys_link_close(&l);
    return 0;
}

struct seen {
    pid_t mine, other;
};

/* vipctl as a user: their own objects only, nothing of root's to do. */
static int vipctl_user(void *arg)
{
    const struct seen *w = arg;
    static char out[65536];
    TC_CHECK(tl_vipctl("vis", out, sizeof out) == 0);
    TC_CHECK(table_has(out, w->mine, false) && !table_has(out, w->other, false));
    TC_CHECK(tl_vipctl("mem", out, sizeof out) == 0);
    TC_CHECK(table_has(out, w->mine, true) && !table_has(out, w->other, true));
    TC_CHECK(tl_vipctl("nics", out, sizeof out) == 0);
    TC_CHECK(strstr(out, "\tvis:\t\t\t1\n") && !strstr(out, "\tvis:\t\t\t2\n"));
    TC_CHECK(tl_vipctl("shutdown", out, sizeof out) != 0 && strstr(out, "only root"));
    TC_CHECK(tl_vipctl("trace on", out, sizeof out) != 0 && strstr(out, "only root"));
    TC_CHECK(tl_vipctl("ping", out, sizeof out) == 0); /* and vipd is still there */
    return 0;
}

static void test_vipctl_own_objects(void)
{
    if (!tsys_start(NULL))
        return;
    struct tl_child ch[4]; /* A's holder, B's holder, A's and B's vipctl */
    unsigned n = 0;
    static char out[65536];
    bool ok = tsys_spawn_as(&ch[n], tsys_uid_a, holder, NULL) == 0;
    n += ok;
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_b, holder, NULL) == 0;
    n += ok;
    ok = ok && tl_gather(ch, 2, 'r', 30000, NULL, NULL) == 0;
    struct seen sa = {ch[0].pid, ch[1].pid}, sb = {ch[1].pid, ch[0].pid};
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_a, vipctl_user, &sa) == 0;
    n += ok;
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_b, vipctl_user, &sb) == 0;
    n += ok;
    CU_ASSERT_TRUE(ok);
    if (ok) {
        tsys_reap(ch + 2, 2, true);
        /* root sees both */
        CU_ASSERT_EQUAL(tl_vipctl("vis", out, sizeof out), 0);
        CU_ASSERT_TRUE(table_has(out, sa.mine, false) && table_has(out, sb.mine, false));
        CU_ASSERT_EQUAL(tl_vipctl("mem", out, sizeof out), 0);
        CU_ASSERT_TRUE(table_has(out, sa.mine, true) && table_has(out, sb.mine, true));
        CU_ASSERT_EQUAL(tl_vipctl("nics", out, sizeof out), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\tvis:\t\t\t2\n"));
        ok = tl_parent_post(&ch[0], 'x') == 0 && tl_parent_post(&ch[1], 'x') == 0;
    }
    tsys_reap(ch, ok ? 2 : n, ok);
    tvipd_stop(&tsys_vipd);
}

/* ---- per-user limits ---------------------------------------------------------------------- */

#define LIM_REG (64u << 10) /* --max-reg-bytes-per-user 64K */

/* Take everything the limits allow (2 sessions, 2 VIs, 64 KiB), meet each
 * limit, hold it until told, then free some and take it again. */
static int limits_user(void *arg)
{
    (void)arg;
    struct tl_nic t[2];
    VIP_NIC_HANDLE third;
    VIP_VI_HANDLE vi[3];
    VIP_MEM_HANDLE mh[2];
    uint8_t *mem = aligned_alloc(4096, 2 * LIM_REG);
    TC_CHECK(mem);
    memset(mem, 0, 2 * LIM_REG);
    TC_RC(tl_open(&t[0], "via0"), VIP_SUCCESS);
    TC_RC(tl_open(&t[1], "via1"), VIP_SUCCESS);
    TC_RC(VipOpenNic("via0", &third), VIP_ERROR_RESOURCE);
    TC_CHECK(strstr(vip_last_error(), "--max-sessions-per-user"));
    /* VIs count over the user's NICs */
    TC_RC(tl_vi(&t[0], VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi[0]), VIP_SUCCESS);
    TC_RC(tl_vi(&t[1], VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi[1]), VIP_SUCCESS);
    TC_RC(tl_vi(&t[0], VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi[2]), VIP_ERROR_RESOURCE);
    TC_CHECK(strstr(vip_last_error(), "--max-vis-per-user"));
    /* so do registered bytes: 48 KiB, then 32 KiB too many, then 16 KiB fit exactly */
    VIP_MEM_ATTRIBUTES ma0 = {.Ptag = t[0].ptag}, ma1 = {.Ptag = t[1].ptag};
    TC_RC(VipRegisterMem(t[0].nic, mem, 48u << 10, &ma0, &mh[0]), VIP_SUCCESS);
    TC_RC(VipRegisterMem(t[1].nic, mem + (48u << 10), 32u << 10, &ma1, &mh[1]),
          VIP_ERROR_RESOURCE);
    TC_CHECK(strstr(vip_last_error(), "--max-reg-bytes-per-user"));
    TC_RC(VipRegisterMem(t[1].nic, mem + (48u << 10), 16u << 10, &ma1, &mh[1]), VIP_SUCCESS);
    tl_child_post('f');
    TC_CHECK(tl_child_take(30000) == 'g');
    /* what is freed can be taken again */
    TC_RC(VipDestroyVi(vi[0]), VIP_SUCCESS);
    TC_RC(tl_vi(&t[0], VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi[0]), VIP_SUCCESS);
    TC_RC(VipDeregisterMem(t[0].nic, mem, mh[0]), VIP_SUCCESS);
    TC_RC(VipRegisterMem(t[0].nic, mem, 48u << 10, &ma0, &mh[0]), VIP_SUCCESS);
    TC_RC(VipDestroyVi(vi[1]), VIP_SUCCESS);
    tl_close(&t[1]);
    VIP_RETURN rc = VIP_ERROR_RESOURCE;
    for (int i = 0; i < 200 && rc != VIP_SUCCESS; i++) {
        rc = VipOpenNic("via1", &third);
        if (rc != VIP_SUCCESS)
            usleep(10000); /* vipd notices the closed session, bounded */
    }
    TC_RC(rc, VIP_SUCCESS);
    VipCloseNic(third);
    VipDestroyVi(vi[0]);
    tl_close(&t[0]);
    free(mem);
    return 0;
}

static void test_per_user_limits(void)
{
    static const char *const lim[] = {"--max-sessions-per-user", "2", "--max-vis-per-user", "2",
                                      "--max-reg-bytes-per-user", "64K", NULL};
    if (!tsys_start(lim))
        return;
    struct tl_child ch[2];
    unsigned n = 0;
    /* A holds all it may; B, at the same time, all it may too */
    bool ok = tsys_spawn_as(&ch[n], tsys_uid_a, limits_user, NULL) == 0;
    n += ok;
    ok = ok && tl_parent_take(&ch[0], 30000) == 'f';
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_b, limits_user, NULL) == 0;
    n += ok;
    ok = ok && tl_parent_take(&ch[1], 30000) == 'f';
    ok = ok && tl_parent_post(&ch[0], 'g') == 0 && tl_parent_post(&ch[1], 'g') == 0;
    CU_ASSERT_TRUE(ok);
    tsys_reap(ch, n, ok);
    tvipd_stop(&tsys_vipd);
}

/* ---- finding the system socket ------------------------------------------------------------ */

struct find {
    char xdg[128];  /* the user's runtime directory: no vipd of theirs in it */
    char trap[128]; /* a "system socket" of the user's own */
};

static int listen_at(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s >= 0 && (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 4) < 0)) {
        close(s);
        s = -1;
    }
    return s;
}

static int find_child(void *arg)
{
    const struct find *f = arg;
    char sys[128], own[160];
    static char out[4096];
    snprintf(sys, sizeof sys, "%s", getenv("VIPD_SOCKET"));
    unsetenv("VIPD_SOCKET");
    setenv("XDG_RUNTIME_DIR", f->xdg, 1);
    setenv("VIPD_SYSTEM_SOCKET", sys, 1);
    setenv("VIPD_AUTOSTART", "0", 1);
    setenv("VIPD_CTL_TIMEOUT_MS", "1000", 1); /* a trap that took the bait answers nothing */
    /* found and used, side sockets too (VipConnectWait runs on one) */
    struct tl_nic t;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(t.nic, "via0", "nobody");
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + VIA_MAX_DISCRIM);
    TC_CHECK(local && remote);
    VIP_VI_ATTRIBUTES ra;
    VIP_CONN_HANDLE conn;
    TC_RC(VipConnectWait(t.nic, local, 50, remote, &ra, &conn), VIP_TIMEOUT);
    free(local);
    free(remote);
    tl_close(&t);
    TC_CHECK(tl_vipctl("ping", out, sizeof out) == 0 && strstr(out, sys));
    /* at the system socket only root's will do: not even our own */
    setenv("VIPD_SYSTEM_SOCKET", f->trap, 1);
    int ls = listen_at(f->trap);
    TC_CHECK(ls >= 0);
    VIP_NIC_HANDLE nic;
    TC_RC(VipOpenNic("via0", &nic), VIP_ERROR_RESOURCE);
    if (!strstr(vip_last_error(), "not to root"))
        tl_child_fail(__FILE__, __LINE__, "reason: %s", vip_last_error());
    TC_CHECK(accept(ls, NULL, NULL) < 0 && errno == EAGAIN); /* nobody even connected */
    close(ls);
    /* a socket of the user's own comes first (here a dead one) */
    setenv("VIPD_SYSTEM_SOCKET", sys, 1);
    snprintf(own, sizeof own, "%s/vipd", f->xdg);
    TC_CHECK(mkdir(own, 0700) == 0);
    snprintf(own, sizeof own, "%s/vipd/vipd.sock", f->xdg);
    TC_CHECK((ls = listen_at(own)) >= 0);
    close(ls);
    TC_RC(VipOpenNic("via0", &nic), VIP_ERROR_RESOURCE);
    TC_CHECK(strstr(vip_last_error(), own));
    return 0;
}


static void test_system_socket_found(void)
{
    if (!tsys_start(NULL))
        return;
    char base[96] = "";
    struct find f;
    struct tl_child ch;
    bool ok = tsys_make_base(base, sizeof base, "find");
    snprintf(f.xdg, sizeof f.xdg, "%s/xdg", base);
    snprintf(f.trap, sizeof f.trap, "%s/trap/vipd.sock", base);
    char trapdir[128];
    snprintf(trapdir, sizeof trapdir, "%s/trap", base);
    ok = ok && mkdir(f.xdg, 0700) == 0 && chown(f.xdg, tsys_uid_a, tsys_uid_a) == 0;
    ok = ok && mkdir(trapdir, 0755) == 0 && chown(trapdir, tsys_uid_a, tsys_uid_a) == 0;
    CU_ASSERT_TRUE(ok);
    if (ok) {
        ok = tsys_spawn_as(&ch, tsys_uid_a, find_child, &f) == 0;
        CU_ASSERT_TRUE(ok);
        if (ok)
            TCHILD_OK(&ch, 30000);
    }
    if (base[0])
        tsys_remove_tree(base);
    tvipd_stop(&tsys_vipd);
}

/* ---- the start script ----------------------------------------------------------------------- */

/* bin/NAME beside vipctl */
static void bin_path(char *out, size_t cap, const char *name)
{
    const char *ctl = getenv("TL_VIPCTL");
    snprintf(out, cap, "%s", ctl ? ctl : "");
    char *slash = strrchr(out, '/');
    snprintf(slash ? slash + 1 : out, cap - (size_t)(slash ? slash + 1 - out : 0), "%s", name);
}

static int script(const char *sock, const char *args)
{
    char exe[PATH_MAX], cmd[PATH_MAX + 512];
    bin_path(exe, sizeof exe, "vipd-start");
    snprintf(cmd, sizeof cmd, "VIPD_SYSTEM_SOCKET='%s' '%s' %s >/dev/null 2>&1", sock, exe, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The pid answering at sock (SO_PEERCRED), or -1. */
static pid_t daemon_pid(const char *sock)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct ucred cr = {.pid = -1};
    socklen_t len = sizeof cr;
    if (s >= 0 && (connect(s, (struct sockaddr *)&a, sizeof a) < 0 ||
                   getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0))
        cr.pid = -1;
    if (s >= 0)
        close(s);
    return cr.pid;
}

static int script_user(void *arg)
{
    const char *sock = arg;
    char vipd[PATH_MAX], cmd[PATH_MAX + 256], out[1024] = "";
    unsetenv("VIPD_SOCKET");
    setenv("XDG_RUNTIME_DIR", "/nonexistent-vipl-test", 1);
    setenv("VIPD_SYSTEM_SOCKET", sock, 1);
    struct tl_nic t;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    tl_close(&t);
    /* a user cannot run a system vipd */
    bin_path(vipd, sizeof vipd, "vipd");
    snprintf(cmd, sizeof cmd, "'%s' --system -f -s '%s.user' 2>&1", vipd, sock);
    FILE *p = popen(cmd, "r");
    TC_CHECK(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    TC_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(out, "root"));
    return 0;
}

static void test_start_script(void)
{
    if (!tsys_need_root())
        return;
    char base[96] = "", sock[160], dir[128];
    pid_t pid = -1;
    TCHK(tsys_make_base(base, sizeof base, "start"));
    snprintf(dir, sizeof dir, "%s/run", base);
    snprintf(sock, sizeof sock, "%s/vipd.sock", dir);
    TCHK(script(sock, "start -n 1 -l warn") == 0);
    pid = daemon_pid(sock);
    TCHK(pid > 0);
    struct stat st;
    TCHK(stat(dir, &st) == 0);
    CU_ASSERT_TRUE(st.st_uid == 0 && (st.st_mode & 07777) == 0755);
    TCHK(stat(sock, &st) == 0);
    CU_ASSERT_TRUE(S_ISSOCK(st.st_mode) && st.st_uid == 0 && (st.st_mode & 0777) == 0666);
    CU_ASSERT_EQUAL(script(sock, "status"), 0);
    CU_ASSERT_EQUAL(script(sock, "start"), 0); /* already running: says so */
    CU_ASSERT_EQUAL(daemon_pid(sock), pid);
    struct tl_child ch;
    if (tsys_spawn_as(&ch, tsys_uid_a, script_user, sock) == 0)
        TCHILD_OK(&ch, 30000);
    else
        CU_FAIL("fork");
    CU_ASSERT_EQUAL(script(sock, "stop"), 0);
    CU_ASSERT_NOT_EQUAL(script(sock, "status"), 0);
    for (int i = 0; i < 200 && kill(pid, 0) == 0; i++)
        usleep(10000); /* its exit after answering the shutdown, bounded */
    CU_ASSERT_NOT_EQUAL(kill(pid, 0), 0);
out:
    if (pid > 0 && kill(pid, 0) == 0)
        kill(pid, SIGKILL);
    if (base[0])
        tsys_remove_tree(base);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_each_user_works),    TL_TEST(test_users_connect),
        TL_TEST(test_vipctl_own_objects), TL_TEST(test_per_user_limits),
        TL_TEST(test_system_socket_found), TL_TEST(test_start_script),
        TL_END,
    };
    tsys_pick_uids();
    return tl_main(argc, argv, "system vipd: one NIC, several users", tests);
}
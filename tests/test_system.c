/*
 * test_system.c - one NIC for several users: a system vipd (vipd --system)
 * serving two throwaway users. Each test starts a system vipd of its own
 * on a private root-owned directory that other users can reach
 * (tests/lib/tvipd.c), never /run/vipd.
 *
 *   each_user_works       two users' programs run side by side;
 *   users_connect         programs of two users connect when both agree
 *                         (client-server, peer-to-peer) and exchange data;
 *                         a request the other side rejects gets VIP_REJECT;
 *   isolation             user B names every VI, ptag, session, pending
 *                         connection and region of user A it can guess, by
 *                         VIPL calls and by raw requests: each is refused
 *                         with the VIA error code and A's programs go on;
 *                         A's and vipd's descriptors are out of B's reach;
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
 *
 * The users are uids without a passwd entry, entered with setresuid() in
 * forked children: nothing to create, nothing to remove. Every test needs
 * root and is skipped, saying so, without it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tpp.h"
#include "lib/tvipd.h"
#include "via_abi.h"

#define RAW_MAX_FDS 8 /* more than any reply carries */

static uid_t uid_a, uid_b;
static struct tvipd sysd;

/* ---- users ------------------------------------------------------------------- */

/* Two uids nobody has (no passwd entry), different for concurrent runs. */
static void pick_uids(void)
{
    uid_t u = 60000u + (uid_t)(getpid() % 2000) * 2u;
    while (getpwuid(u) || getpwuid(u + 1))
        u += 2;
    uid_a = u;
    uid_b = u + 1;
}

static bool need_root(void)
{
    if (geteuid() == 0)
        return true;
    fprintf(stderr, "\n  skipped: needs root to act as two throwaway users\n");
    return false;
}

struct as_user {
    uid_t uid;
    int (*fn)(void *);
    void *arg;
};

/* In the child: become uid (no groups, gid = uid), as a program that user
 * started would be, then run fn. */
static int as_user_run(void *p)
{
    const struct as_user *a = p;
    pid_t parent = getppid();
    if (setgroups(0, NULL) < 0 || setresgid(a->uid, a->uid, a->uid) < 0 ||
        setresuid(a->uid, a->uid, a->uid) < 0)
        tl_child_fail(__FILE__, __LINE__, "cannot become uid %u: %s", (unsigned)a->uid,
                      strerror(errno));
    /* its /proc entries are its own, as any program's */
    prctl(PR_SET_DUMPABLE, 1);
    /* new credentials cleared it: die with the test all the same */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    return a->fn(a->arg);
}

static int spawn_as(struct tl_child *c, uid_t uid, int (*fn)(void *), void *arg)
{
    struct as_user a = {uid, fn, arg}; /* the child has its own copy */
    return tl_spawn(c, as_user_run, &a);
}

/* ---- the system vipd ---------------------------------------------------------- */

/* A directory other users can pass through, for the private ones. */
static const char *reach_parent(void)
{
    static const char *const cand[] = {"/run", "/dev/shm", "/var/tmp", "/tmp"};
    for (unsigned i = 0; i < sizeof cand / sizeof *cand; i++) {
        struct stat st;
        if (lstat(cand[i], &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) &&
            access(cand[i], W_OK) == 0)
            return cand[i];
    }
    return NULL;
}

/* Start `vipd --system` (with extra options) on a private directory, mode
 * 0755 so that the users reach its socket. false: skipped or failed. */
static bool sys_start(const char *const *extra)
{
    if (!need_root())
        return false;
    const char *parent = reach_parent();
    if (!parent) {
        CU_FAIL("no directory other users can reach (/run, /dev/shm, /var/tmp, /tmp)");
        return false;
    }
    const char *args[16] = {"--system"};
    for (unsigned i = 0; extra && extra[i] && i < 14; i++)
        args[i + 1] = extra[i];
    if (tvipd_start_in(&sysd, parent, args, 0) != 0) {
        CU_FAIL("could not start a system vipd of the test's own");
        return false;
    }
    /* vipd leaves the mode of a directory it did not make to its owner */
    if (chmod(sysd.dir, 0755) < 0) {
        CU_FAIL("chmod of the system vipd's directory");
        tvipd_stop(&sysd);
        return false;
    }
    return true;
}

/* Wait for the children spawned (all if ok, else killed at once) and
 * report what they said. */
static void reap(struct tl_child *c, unsigned n, bool ok)
{
    for (unsigned i = 0; i < n; i++)
        TCHILD_OK(&c[i], ok ? 30000 : 1);
}

/* ---- one message each way on a connected VI --------------------------------------- */

struct link {
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
};
#define L_LEN 1024u
#define L_RDESC(l) ((VIP_DESCRIPTOR *)(void *)(l)->b.p)
#define L_SDESC(l) ((VIP_DESCRIPTOR *)(void *)((l)->b.p + 64))
#define L_RDATA(l) ((l)->b.p + 4096)
#define L_SDATA(l) ((l)->b.p + 8192)

/* A NIC, a registered buffer and a reliable VI with a receive posted. */
static void link_open(struct link *l, const char *dev)
{
    TC_RC(tl_open(&l->t, dev), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&l->t, &l->b, 12288), VIP_SUCCESS);
    TC_RC(tl_vi(&l->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &l->vi), VIP_SUCCESS);
    tl_desc_1(L_RDESC(l), L_RDATA(l), L_LEN, l->b.mh);
    TC_RC(VipPostRecv(l->vi, L_RDESC(l), l->b.mh), VIP_SUCCESS);
}

/* Send message `out`, receive message `in`, both checked byte for byte. */
static void link_swap(struct link *l, uint32_t out, uint32_t in)
{
    VIP_DESCRIPTOR *d;
    tl_fill(L_SDATA(l), L_LEN, out);
    tl_desc_1(L_SDESC(l), L_SDATA(l), L_LEN, l->b.mh);
    TC_RC(VipPostSend(l->vi, L_SDESC(l), l->b.mh), VIP_SUCCESS);
    TC_RC(VipSendWait(l->vi, 10000, &d), VIP_SUCCESS);
    TC_CHECK(d == L_SDESC(l) && !(d->CS.Status & VIP_STATUS_ERROR_MASK));
    TC_RC(VipRecvWait(l->vi, 10000, &d), VIP_SUCCESS);
    TC_CHECK(d == L_RDESC(l));
    TC_CHECK((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) == VIP_STATUS_DONE);
    TC_CHECK(d->CS.Length == L_LEN && tl_verify(L_RDATA(l), L_LEN, in) == -1);
}

static void link_close(struct link *l)
{
    VipDisconnect(l->vi);
    VipDestroyVi(l->vi);
    tl_buf_free(&l->b);
    tl_close(&l->t);
}

/* ---- each user's programs work ------------------------------------------------------ */

static void test_each_user_works(void)
{
    if (!sys_start(NULL))
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
        uid_t uid = u ? uid_b : uid_a;
        ok = spawn_as(&ch[n], uid, tpp_child_server, &cfg[u]) == 0;
        n += ok;
        ok = ok && spawn_as(&ch[n], uid, tpp_child_client, &cfg[u]) == 0;
        n += ok;
    }
    CU_ASSERT_TRUE(ok);
    reap(ch, n, ok);
    tvipd_stop(&sysd);
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
    struct link l;
    link_open(&l, p->dev);
    VIP_NET_ADDRESS *local = tl_addr(l.t.nic, p->dev, p->mine);
    VIP_NET_ADDRESS *remote = tl_addr(l.t.nic, p->peer_dev, p->theirs);
    TC_CHECK(local && remote);
    VIP_VI_ATTRIBUTES ra;
    TC_RC(VipConnectPeerRequest(l.vi, local, remote, 10000), VIP_SUCCESS);
    TC_RC(VipConnectPeerWait(l.vi, &ra), VIP_SUCCESS);
    link_swap(&l, p->out, p->in);
    /* the peer may still be taking our message: disconnect when told */
    tl_child_post('s');
    TC_CHECK(tl_child_take(20000) == 'x');
    free(local);
    free(remote);
    link_close(&l);
    return 0;
}

static void test_users_connect(void)
{
    if (!sys_start(NULL))
        return;
    struct tl_child ch[6];
    unsigned n = 0;
    bool ok;
    /* client-server: A serves, B's program connects and they ping-pong */
    struct tpp_cfg cfg;
    tpp_defaults(&cfg, VIP_SERVICE_RELIABLE_DELIVERY, 100, TPP_MIXED);
    snprintf(cfg.cli_dev, sizeof cfg.cli_dev, "via1");
    ok = spawn_as(&ch[n], uid_a, tpp_child_server, &cfg) == 0;
    n += ok;
    ok = ok && spawn_as(&ch[n], uid_b, tpp_child_client, &cfg) == 0;
    n += ok;
    /* A does not agree: B is told so */
    char disc[17];
    tl_discrim(disc, "rej");
    ok = ok && spawn_as(&ch[n], uid_a, reject_server, disc) == 0;
    n += ok;
    ok = ok && spawn_as(&ch[n], uid_b, reject_client, disc) == 0;
    n += ok;
    /* peer-to-peer: both ask for each other */
    struct p2p pa = {"via0", "via1", "", "", 21, 22}, pb = {"via1", "via0", "", "", 22, 21};
    tl_discrim(pa.mine, "pa");
    tl_discrim(pb.mine, "pb");
    memcpy(pa.theirs, pb.mine, sizeof pa.theirs);
    memcpy(pb.theirs, pa.mine, sizeof pb.theirs);
    ok = ok && spawn_as(&ch[n], uid_a, p2p_side, &pa) == 0;
    n += ok;
    ok = ok && spawn_as(&ch[n], uid_b, p2p_side, &pb) == 0;
    n += ok;
    /* both have their message: they may disconnect */
    ok = ok && tl_gather(&ch[4], 2, 's', 30000, NULL, NULL) == 0;
    ok = ok && tl_parent_post(&ch[4], 'x') == 0 && tl_parent_post(&ch[5], 'x') == 0;
    CU_ASSERT_TRUE(ok);
    reap(ch, n, ok);
    tvipd_stop(&sysd);
}

/* ---- isolation ------------------------------------------------------------------------ */

/* What the parent and A's programs tell B (shared memory). */
struct board {
    pid_t vipd, a_server;
    uint64_t va;     /* A's client's registered buffer */
    VIP_MEM_HANDLE mh;
    char disc[17];
};

/* A's server: a request offered to it waits for its answer while B tries
 * to answer it; then connected, while B tries to break the connection. */
static int iso_server(void *arg)
{
    const struct board *bd = arg;
    struct link l;
    link_open(&l, "via0");
    VIP_CQ_HANDLE cq;
    TC_RC(VipCreateCQ(l.t.nic, 16, &cq), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(l.t.nic, "via0", bd->disc);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + VIA_MAX_DISCRIM);
    TC_CHECK(local && remote);
    VIP_VI_ATTRIBUTES ra;
    VIP_CONN_HANDLE conn;
    TC_RC(VipConnectWait(l.t.nic, local, 10000, remote, &ra, &conn), VIP_SUCCESS);
    tl_child_post('o');
    TC_CHECK(tl_child_take(30000) == 'g');
    TC_RC(VipConnectAccept(conn, l.vi), VIP_SUCCESS);
    tl_child_post('c');
    TC_CHECK(tl_child_take(30000) == 'g');
    link_swap(&l, 11, 12);
    tl_child_post('s');
    TC_CHECK(tl_child_take(20000) == 'x');
    TC_RC(VipDestroyCQ(cq), VIP_SUCCESS); /* still there */
    free(local);
    free(remote);
    link_close(&l);
    return 0;
}

static int iso_client(void *arg)
{
    struct board *bd = arg;
    struct link l;
    link_open(&l, "via1");
    bd->va = (uintptr_t)l.b.p;
    bd->mh = l.b.mh;
    TC_RC(tl_request(&l.t, l.vi, "via0", bd->disc, 30000), VIP_SUCCESS);
    tl_child_post('c');
    TC_CHECK(tl_child_take(30000) == 'g');
    link_swap(&l, 12, 11);
    VIP_MEM_ATTRIBUTES ma;
    TC_RC(VipQueryMem(l.t.nic, l.b.p, l.b.mh, &ma), VIP_SUCCESS); /* still registered */
    tl_child_post('s');
    TC_CHECK(tl_child_take(20000) == 'x');
    link_close(&l);
    return 0;
}

/* A connection of B's own to vipd (no library in between). */
static int raw_open(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", getenv("VIPD_SOCKET"));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 5};
    if (s >= 0 && (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
                   connect(s, (struct sockaddr *)&a, sizeof a) < 0)) {
        close(s);
        s = -1;
    }
    return s;
}

/* One request; the reply's status (-1000: no reply). Descriptors that come
 * with it are closed; its body goes to rep (cap bytes) or is dropped. */
static int32_t raw_call(int s, uint32_t op, const void *body, uint32_t len, void *rep,
                        size_t cap)
{
    struct via_ctl_hdr h = {.op = op, .len = len, .cookie = 99};
    struct iovec iov[2] = {{&h, sizeof h}, {(void *)body, len}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (sendmsg(s, &m, MSG_NOSIGNAL) != (ssize_t)(sizeof h + len))
        return -1000;
    struct via_ctl_reply_hdr r;
    union {
        char b[CMSG_SPACE(sizeof(int) * RAW_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec ri = {&r, sizeof r};
    struct msghdr rm = {.msg_iov = &ri, .msg_iovlen = 1, .msg_control = u.b,
                        .msg_controllen = sizeof u.b};
    ssize_t n = recvmsg(s, &rm, MSG_WAITALL | MSG_CMSG_CLOEXEC);
    for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&rm) : NULL; c; c = CMSG_NXTHDR(&rm, c)) {
        size_t k = c->cmsg_type == SCM_RIGHTS ? (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) : 0;
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
            close(fd);
        }
    }
    if (n != (ssize_t)sizeof r)
        return -1000;
    unsigned char sink[512];
    for (uint32_t left = r.len; left > 0;) {
        bool into = rep && r.len <= cap;
        size_t k = into ? left : (left < sizeof sink ? left : sizeof sink);
        ssize_t got = recv(s, into ? (char *)rep + (r.len - left) : (char *)sink, k, MSG_WAITALL);
        if (got <= 0)
            return -1000;
        left -= (uint32_t)got;
    }
    return r.status;
}

#define EXPECT(call, want, what, id)                                                        \
    do {                                                                                    \
        int32_t st_ = (call);                                                               \
        if (st_ != (int32_t)(want))                                                         \
            tl_child_fail(__FILE__, __LINE__, "%s %u: status %d, expected %s", what,        \
                          (unsigned)(id), (int)st_, #want);                                 \
    } while (0)

#define GUESSES 64u /* ids from 0 (or 1) up: A's are among the first */

/* Every VI op on every VI id not B's: none is B's. */
static void attack_vis(int s)
{
    for (uint32_t id = 0; id < GUESSES; id++) {
        struct via_ctl_vi v = {.vi_id = id};
        struct via_ctl_set_vi sv = {.vi_id = id,
                                    .attr = {.reliability = VIP_SERVICE_RELIABLE_DELIVERY}};
        struct via_ctl_vi_error ve = {.vi_id = id, .code = VIP_ERROR_CONN_LOST};
        struct via_ctl_conn_request cr = {.vi_id = id, .timeout_ms = 1000};
        EXPECT(raw_call(s, VIA_CTL_VI_ERROR, &ve, sizeof ve, NULL, 0), VIP_INVALID_PARAMETER,
               "VI_ERROR on VI", id);
        EXPECT(raw_call(s, VIA_CTL_DISCONNECT, &v, sizeof v, NULL, 0), VIP_INVALID_PARAMETER,
               "DISCONNECT of VI", id);
        EXPECT(raw_call(s, VIA_CTL_SET_VI, &sv, sizeof sv, NULL, 0), VIP_INVALID_PARAMETER,
               "SET_VI of VI", id);
        EXPECT(raw_call(s, VIA_CTL_CONN_REQUEST, &cr, sizeof cr, NULL, 0),
               VIP_INVALID_PARAMETER, "CONN_REQUEST with VI", id);
        EXPECT(raw_call(s, VIA_CTL_PEER_REQUEST, &cr, sizeof cr, NULL, 0),
               VIP_INVALID_PARAMETER, "PEER_REQUEST with VI", id);
        EXPECT(raw_call(s, VIA_CTL_PEER_DONE, &v, sizeof v, NULL, 0), VIP_INVALID_PARAMETER,
               "PEER_DONE of VI", id);
        EXPECT(raw_call(s, VIA_CTL_PEER_WAIT, &v, sizeof v, NULL, 0), VIP_INVALID_PARAMETER,
               "PEER_WAIT of VI", id);
        EXPECT(raw_call(s, VIA_CTL_DESTROY_VI, &v, sizeof v, NULL, 0), VIP_INVALID_PARAMETER,
               "DESTROY_VI of VI", id);
    }
}

/* Every ptag id but the session's own `mine`; CQ ids, which name only the
 * session's own CQs (it has none). */
static void attack_ptags_cqs(int s, uint32_t mine, void *buf)
{
    for (uint32_t p = 1; p <= GUESSES; p++) {
        if (p == mine)
            continue;
        struct via_ctl_ptag dp = {.ptag = p};
        struct via_ctl_reg_mem rm = {.va = (uintptr_t)buf, .len = 4096, .ptag = p};
        struct via_ctl_create_vi cv = {
            .attr = {.reliability = VIP_SERVICE_RELIABLE_DELIVERY, .ptag = p}};
        EXPECT(raw_call(s, VIA_CTL_REG_MEM, &rm, sizeof rm, NULL, 0), VIP_INVALID_PTAG,
               "REG_MEM with ptag", p);
        EXPECT(raw_call(s, VIA_CTL_CREATE_VI, &cv, sizeof cv, NULL, 0), VIP_INVALID_PTAG,
               "CREATE_VI with ptag", p);
        EXPECT(raw_call(s, VIA_CTL_DESTROY_PTAG, &dp, sizeof dp, NULL, 0), VIP_INVALID_PTAG,
               "DESTROY_PTAG of ptag", p);
    }
    for (uint32_t id = 0; id < 4; id++) {
        struct via_ctl_cq q = {.cq_id = id};
        EXPECT(raw_call(s, VIA_CTL_DESTROY_CQ, &q, sizeof q, NULL, 0), VIP_INVALID_PARAMETER,
               "DESTROY_CQ of CQ", id);
    }
}

/* A's pending request, and any other connection id. */
static void attack_conns(int s)
{
    for (uint32_t id = 1; id <= GUESSES; id++) {
        struct via_ctl_conn_accept ca = {.conn_id = id, .vi_id = 0};
        struct via_ctl_conn_reject cj = {.conn_id = id};
        EXPECT(raw_call(s, VIA_CTL_CONN_ACCEPT, &ca, sizeof ca, NULL, 0),
               VIP_INVALID_PARAMETER, "CONN_ACCEPT of connection", id);
        EXPECT(raw_call(s, VIA_CTL_CONN_REJECT, &cj, sizeof cj, NULL, 0),
               VIP_INVALID_PARAMETER, "CONN_REJECT of connection", id);
    }
}

/* Every session id but B's own: none can be attached to. */
static void attack_sessions(const uint32_t *own, unsigned nown)
{
    int s = raw_open();
    TC_CHECK(s >= 0);
    for (uint32_t id = 1; id <= GUESSES; id++) {
        bool mine = false;
        for (unsigned i = 0; i < nown; i++)
            mine |= own[i] == id;
        struct via_ctl_attach at = {.session_id = id};
        if (!mine)
            EXPECT(raw_call(s, VIA_CTL_ATTACH, &at, sizeof at, NULL, 0), VIP_INVALID_PARAMETER,
                   "ATTACH to session", id);
    }
    close(s);
}

/* Descriptors of vipd and of A's programs through /proc: none opens. */
static void attack_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d)
        closedir(d);
    TC_CHECK(!d && errno == EACCES);
    for (int fd = 0; fd < (int)GUESSES; fd++) {
        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
        int f = open(path, O_RDWR | O_CLOEXEC);
        if (f >= 0)
            close(f);
        if (f >= 0)
            tl_child_fail(__FILE__, __LINE__, "opened %s", path);
    }
}

static int iso_attacker(void *arg)
{
    const struct board *bd = arg;
    /* B's raw sessions, one per NIC (a VI id names a VI of the session's NIC) */
    int s[2];
    uint32_t sid[2], ptag[2];
    for (unsigned i = 0; i < 2; i++) {
        TC_CHECK((s[i] = raw_open()) >= 0);
        struct via_ctl_hello h = {.abi = VIA_ABI_VERSION, .nic = i, .pid = (uint32_t)getpid()};
        struct via_ctl_hello_r hr;
        struct via_ctl_ptag_r pr;
        EXPECT(raw_call(s[i], VIA_CTL_HELLO, &h, sizeof h, &hr, sizeof hr), VIP_SUCCESS,
               "HELLO on via", i);
        EXPECT(raw_call(s[i], VIA_CTL_CREATE_PTAG, NULL, 0, &pr, sizeof pr), VIP_SUCCESS,
               "CREATE_PTAG on via", i);
        sid[i] = hr.session_id;
        ptag[i] = pr.ptag;
    }
    void *buf = aligned_alloc(4096, 4096);
    TC_CHECK(buf);
    memset(buf, 0, 4096);
    TC_CHECK(tl_child_take(30000) == 'g');
    /* round 1: a request is offered to A and waits for A's answer */
    attack_sessions(sid, 2);
    for (unsigned i = 0; i < 2; i++) {
        attack_conns(s[i]);
        attack_vis(s[i]);
        attack_ptags_cqs(s[i], ptag[i], buf);
        struct via_ctl_dereg_mem dm = {.va = bd->va, .handle = bd->mh};
        struct via_ctl_set_mem sm = {.va = bd->va, .handle = bd->mh, .ptag = ptag[i]};
        EXPECT(raw_call(s[i], VIA_CTL_DEREG_MEM, &dm, sizeof dm, NULL, 0),
               VIP_INVALID_PARAMETER, "DEREG_MEM of A's region on via", i);
        EXPECT(raw_call(s[i], VIA_CTL_SET_MEM, &sm, sizeof sm, NULL, 0), VIP_INVALID_PARAMETER,
               "SET_MEM of A's region on via", i);
    }
    /* and as a VIPL program would, with A's address and handle */
    struct tl_nic t;
    TC_RC(tl_open(&t, "via1"), VIP_SUCCESS);
    VIP_MEM_ATTRIBUTES ma;
    TC_RC(VipDeregisterMem(t.nic, (VIP_PVOID)(uintptr_t)bd->va, bd->mh), VIP_INVALID_PARAMETER);
    TC_RC(VipQueryMem(t.nic, (VIP_PVOID)(uintptr_t)bd->va, bd->mh, &ma), VIP_INVALID_PARAMETER);
    tl_close(&t);
    attack_fds(bd->vipd);
    attack_fds(bd->a_server);
    tl_child_post('d');
    TC_CHECK(tl_child_take(30000) == 'g');
    /* round 2: A's VIs are connected */
    for (unsigned i = 0; i < 2; i++)
        attack_vis(s[i]);
    tl_child_post('d');
    for (unsigned i = 0; i < 2; i++)
        close(s[i]);
    free(buf);
    return 0;
}

static void test_isolation(void)
{
    if (!sys_start(NULL))
        return;
    struct board *bd = mmap(NULL, sizeof *bd, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
    struct tl_child ch[3]; /* A's server, A's client, B */
    unsigned n = 0;
    bool ok = bd != MAP_FAILED;
    CU_ASSERT_TRUE_FATAL(ok);
    memset(bd, 0, sizeof *bd);
    bd->vipd = sysd.pid;
    tl_discrim(bd->disc, "iso");
    ok = spawn_as(&ch[n], uid_a, iso_server, bd) == 0;
    n += ok;
    ok = ok && spawn_as(&ch[n], uid_a, iso_client, bd) == 0;
    n += ok;
    ok = ok && tl_parent_take(&ch[0], 30000) == 'o';
    bd->a_server = ch[0].pid;
    ok = ok && spawn_as(&ch[n], uid_b, iso_attacker, bd) == 0;
    n += ok;
    /* B's first round while A's request is pending, the second once A is
     * connected; then A's programs exchange their messages */
    ok = ok && tl_parent_post(&ch[2], 'g') == 0 && tl_parent_take(&ch[2], 60000) == 'd';
    ok = ok && tl_parent_post(&ch[0], 'g') == 0;
    ok = ok && tl_gather(ch, 2, 'c', 30000, NULL, NULL) == 0;
    ok = ok && tl_parent_post(&ch[2], 'g') == 0 && tl_parent_take(&ch[2], 60000) == 'd';
    ok = ok && tl_parent_post(&ch[0], 'g') == 0 && tl_parent_post(&ch[1], 'g') == 0;
    ok = ok && tl_gather(ch, 2, 's', 30000, NULL, NULL) == 0;
    ok = ok && tl_parent_post(&ch[0], 'x') == 0 && tl_parent_post(&ch[1], 'x') == 0;
    CU_ASSERT_TRUE(ok);
    reap(ch, n, ok);
    munmap(bd, sizeof *bd);
    tvipd_stop(&sysd);
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
    struct link l;
    link_open(&l, "via0");
    tl_child_post('r');
    TC_CHECK(tl_child_take(30000) == 'x');
    link_close(&l);
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
    if (!sys_start(NULL))
        return;
    struct tl_child ch[4]; /* A's holder, B's holder, A's and B's vipctl */
    unsigned n = 0;
    static char out[65536];
    bool ok = spawn_as(&ch[n], uid_a, holder, NULL) == 0;
    n += ok;
    ok = ok && spawn_as(&ch[n], uid_b, holder, NULL) == 0;
    n += ok;
    ok = ok && tl_gather(ch, 2, 'r', 30000, NULL, NULL) == 0;
    struct seen sa = {ch[0].pid, ch[1].pid}, sb = {ch[1].pid, ch[0].pid};
    ok = ok && spawn_as(&ch[n], uid_a, vipctl_user, &sa) == 0;
    n += ok;
    ok = ok && spawn_as(&ch[n], uid_b, vipctl_user, &sb) == 0;
    n += ok;
    CU_ASSERT_TRUE(ok);
    if (ok) {
        reap(ch + 2, 2, true);
        /* root sees both */
        CU_ASSERT_EQUAL(tl_vipctl("vis", out, sizeof out), 0);
        CU_ASSERT_TRUE(table_has(out, sa.mine, false) && table_has(out, sb.mine, false));
        CU_ASSERT_EQUAL(tl_vipctl("mem", out, sizeof out), 0);
        CU_ASSERT_TRUE(table_has(out, sa.mine, true) && table_has(out, sb.mine, true));
        CU_ASSERT_EQUAL(tl_vipctl("nics", out, sizeof out), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\tvis:\t\t\t2\n"));
        ok = tl_parent_post(&ch[0], 'x') == 0 && tl_parent_post(&ch[1], 'x') == 0;
    }
    reap(ch, ok ? 2 : n, ok);
    tvipd_stop(&sysd);
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
    if (!sys_start(lim))
        return;
    struct tl_child ch[2];
    unsigned n = 0;
    /* A holds all it may; B, at the same time, all it may too */
    bool ok = spawn_as(&ch[n], uid_a, limits_user, NULL) == 0;
    n += ok;
    ok = ok && tl_parent_take(&ch[0], 30000) == 'f';
    ok = ok && spawn_as(&ch[n], uid_b, limits_user, NULL) == 0;
    n += ok;
    ok = ok && tl_parent_take(&ch[1], 30000) == 'f';
    ok = ok && tl_parent_post(&ch[0], 'g') == 0 && tl_parent_post(&ch[1], 'g') == 0;
    CU_ASSERT_TRUE(ok);
    reap(ch, n, ok);
    tvipd_stop(&sysd);
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

/* A private directory that other users can pass through. */
static bool make_base(char *base, size_t cap, const char *tag)
{
    const char *parent = reach_parent();
    snprintf(base, cap, "%s/vipl-%s.XXXXXX", parent ? parent : "/tmp", tag);
    return parent && mkdtemp(base) && chmod(base, 0755) == 0;
}

static void remove_tree(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "\n  could not remove %s\n", dir);
}

static void test_system_socket_found(void)
{
    if (!sys_start(NULL))
        return;
    char base[96] = "";
    struct find f;
    struct tl_child ch;
    bool ok = make_base(base, sizeof base, "find");
    snprintf(f.xdg, sizeof f.xdg, "%s/xdg", base);
    snprintf(f.trap, sizeof f.trap, "%s/trap/vipd.sock", base);
    char trapdir[128];
    snprintf(trapdir, sizeof trapdir, "%s/trap", base);
    ok = ok && mkdir(f.xdg, 0700) == 0 && chown(f.xdg, uid_a, uid_a) == 0;
    ok = ok && mkdir(trapdir, 0755) == 0 && chown(trapdir, uid_a, uid_a) == 0;
    CU_ASSERT_TRUE(ok);
    if (ok) {
        ok = spawn_as(&ch, uid_a, find_child, &f) == 0;
        CU_ASSERT_TRUE(ok);
        if (ok)
            TCHILD_OK(&ch, 30000);
    }
    if (base[0])
        remove_tree(base);
    tvipd_stop(&sysd);
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
    if (!need_root())
        return;
    char base[96] = "", sock[160], dir[128];
    pid_t pid = -1;
    TCHK(make_base(base, sizeof base, "start"));
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
    if (spawn_as(&ch, uid_a, script_user, sock) == 0)
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
        remove_tree(base);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_each_user_works),   TL_TEST(test_users_connect),
        TL_TEST(test_isolation),         TL_TEST(test_vipctl_own_objects),
        TL_TEST(test_per_user_limits),   TL_TEST(test_system_socket_found),
        TL_TEST(test_start_script),      TL_END,
    };
    pick_uids();
    return tl_main(argc, argv, "system vipd: one NIC, several users", tests);
}

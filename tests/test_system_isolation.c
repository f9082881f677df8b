/*
 * test_system_isolation.c - on a system vipd (vipd --system), user B tries
 * to reach user A's objects (tests/lib/tsys.c: two throwaway uids, a
 * system vipd of the test's own).
 *
 * While a connection request to A's server waits for A's answer, and again
 * once A's programs are connected, B names every VI, ptag, session,
 * connection, CQ and region of A's it can guess: by raw requests on
 * sessions of its own on both NICs, and by VIPL calls with A's address and
 * memory handle. Each is refused with the VIA error code; A's programs
 * then accept, connect and exchange their messages as if B were not there.
 * /proc/<vipd>/fd and /proc/<A's program>/fd do not open for B. Needs root
 * (skipped, saying so, without it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tsys.h"
#include "via_abi.h"

#define RAW_MAX_FDS 8 /* more than any reply carries */

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
    struct tsys_link l;
    tsys_link_open(&l, "via0");
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
    tsys_link_swap(&l, 11, 12);
    tl_child_post('s');
    TC_CHECK(tl_child_take(20000) == 'x');
    TC_RC(VipDestroyCQ(cq), VIP_SUCCESS); /* still there */
    free(local);
    free(remote);
    tsys_link_close(&l);
    return 0;
}

static int iso_client(void *arg)
{
    struct board *bd = arg;
    struct tsys_link l;
    tsys_link_open(&l, "via1");
    bd->va = (uintptr_t)l.b.p;
    bd->mh = l.b.mh;
    TC_RC(tl_request(&l.t, l.vi, "via0", bd->disc, 30000), VIP_SUCCESS);
    tl_child_post('c');
    TC_CHECK(tl_child_take(30000) == 'g');
    tsys_link_swap(&l, 12, 11);
    VIP_MEM_ATTRIBUTES ma;
    TC_RC(VipQueryMem(l.t.nic, l.b.p, l.b.mh, &ma), VIP_SUCCESS); /* still registered */
    tl_child_post('s');
    TC_CHECK(tl_child_take(20000) == 'x');
    tsys_link_close(&l);
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
    if (!tsys_start(NULL))
        return;
    struct board *bd = mmap(NULL, sizeof *bd, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                            -1, 0);
    struct tl_child ch[3]; /* A's server, A's client, B */
    unsigned n = 0;
    bool ok = bd != MAP_FAILED;
    CU_ASSERT_TRUE_FATAL(ok);
    memset(bd, 0, sizeof *bd);
    bd->vipd = tsys_vipd.pid;
    tl_discrim(bd->disc, "iso");
    ok = tsys_spawn_as(&ch[n], tsys_uid_a, iso_server, bd) == 0;
    n += ok;
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_a, iso_client, bd) == 0;
    n += ok;
    ok = ok && tl_parent_take(&ch[0], 30000) == 'o';
    bd->a_server = ch[0].pid;
    ok = ok && tsys_spawn_as(&ch[n], tsys_uid_b, iso_attacker, bd) == 0;
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
    tsys_reap(ch, n, ok);
    munmap(bd, sizeof *bd);
    tvipd_stop(&tsys_vipd);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_isolation),
        TL_END,
    };
    tsys_pick_uids();
    return tl_main(argc, argv, "system vipd: one user against another", tests);
}

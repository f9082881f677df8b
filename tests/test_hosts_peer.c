/*
 * test_hosts_peer.c - peer-to-peer connections and RDMA across emulated
 * hosts: two vipds on 127.0.0.1 (tests/lib/thosts.c), on the link of
 * THOSTS_LINK (run_tests.sh runs this with udp, then ofi).
 *
 *   VipConnectPeerRequest/Done/Wait with the peer on the other host, each
 *   host's request first (of two hosts one sends its request to the other,
 *   which keeps it: both orders take different paths in the vipds);
 *   over that connection, RDMA write and RDMA read with verified data
 *   (and sends, which tell the target the write has landed);
 *   a peer request nobody mirrors times out, or its process exits, and
 *   is withdrawn: a later mirror request does not meet the stale one;
 *   a request whose withdrawal finds the other host dead ends once.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/thosts.h"
#include "lib/tlib.h"

#define RLEN (256u << 10) /* the registered region of each side */
#define XLEN (64u << 10)  /* bytes written, and read, by RDMA */
#define SEQ_WRITE 11u
#define SEQ_READ 12u

struct pside {
    const struct thosts *h;
    unsigned host, other;
    char mine[17], theirs[17]; /* local / remote discriminators */
    VIP_RELIABILITY_LEVEL rel;
    bool first;  /* requests before the other side does */
    bool writer; /* initiates the RDMA; the other side is its target */
    bool leaves; /* lonely_child: requests, then exits without a word */
    unsigned timeout_ms; /* lonely_child's request (0: 300) */
};

struct rinfo {
    uint64_t addr;
    VIP_MEM_HANDLE mh;
};

/* An RDMA descriptor: the remote address segment, then one local segment. */
static void rdma_desc(VIP_DESCRIPTOR *d, uint16_t op, const struct rinfo *remote, uint8_t *local,
                      uint32_t len, VIP_MEM_HANDLE mh)
{
    memset(d, 0, tl_desc_size(2));
    d->CS.Control = op;
    d->CS.SegCount = 2;
    d->CS.Length = len;
    d->DS[0].Remote.Data.AddressBits = remote->addr;
    d->DS[0].Remote.Handle = remote->mh;
    VIP_DATA_SEGMENT *s = tl_seg(d, 1);
    s->Data.Address = local;
    s->Handle = mh;
    s->Length = len;
}

/* Connect peer-to-peer, as s says; VIP_SUCCESS or what failed. */
static VIP_RETURN peer_connect(struct tl_nic *t, VIP_VI_HANDLE vi, const struct pside *s,
                               VIP_ULONG timeout, VIP_VI_ATTRIBUTES *ra)
{
    char other[16];
    snprintf(other, sizeof other, "host%u", s->other);
    VIP_NET_ADDRESS *local = tl_addr(t->nic, "localhost", s->mine);
    VIP_NET_ADDRESS *remote = tl_addr(t->nic, other, s->theirs);
    VIP_RETURN rc = local && remote ? VipConnectPeerRequest(vi, local, remote, timeout)
                                    : VIP_ERROR_NAMESERVICE;
    if (rc == VIP_SUCCESS && s->first) {
        /* the mirror request cannot have come: the other side waits for 'r' */
        VIP_RETURN d = VipConnectPeerDone(vi, ra);
        if (d != VIP_NOT_DONE)
            tl_child_fail(__FILE__, __LINE__, "PeerDone before the mirror: %d", (int)d);
        tl_child_post('r');
    }
    if (rc == VIP_SUCCESS)
        rc = VipConnectPeerWait(vi, ra);
    free(local);
    free(remote);
    return rc;
}

static int peer_child(void *arg)
{
    const struct pside *s = arg;
    thosts_use(s->h, s->host);
    struct tl_nic t;
    struct tl_buf ctl;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &ctl, 16384), VIP_SUCCESS);
    uint8_t *reg = aligned_alloc(4096, RLEN);
    TC_CHECK(reg != NULL);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = t.ptag, .EnableRdmaWrite = VIP_TRUE,
                             .EnableRdmaRead = VIP_TRUE};
    VIP_MEM_HANDLE mh;
    TC_RC(VipRegisterMem(t.nic, reg, RLEN, &ma, &mh), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = s->rel, .MaxTransferSize = t.attr.MaxTransferSize,
                            .Ptag = t.ptag, .EnableRdmaWrite = VIP_TRUE,
                            .EnableRdmaRead = VIP_TRUE};
    VIP_VI_HANDLE vi;
    TC_RC(VipCreateVi(t.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)ctl.p, *rd[2], *xd, *done;
    rd[0] = (VIP_DESCRIPTOR *)(void *)(ctl.p + 1024);
    rd[1] = (VIP_DESCRIPTOR *)(void *)(ctl.p + 2048);
    xd = (VIP_DESCRIPTOR *)(void *)(ctl.p + 3072);
    struct rinfo *mine = (struct rinfo *)(void *)(ctl.p + 8192);
    struct rinfo *theirs = (struct rinfo *)(void *)(ctl.p + 8192 + 1024);
    uint8_t *rbuf2 = ctl.p + 8192 + 2048;
    tl_desc_1(rd[0], theirs, sizeof *theirs, ctl.mh);
    tl_desc_1(rd[1], rbuf2, 64, ctl.mh);
    for (int i = 0; i < 2; i++)
        TC_RC(VipPostRecv(vi, rd[i], ctl.mh), VIP_SUCCESS);
    if (!s->first)
        TC_CHECK(tl_child_take(-1) == 'g');

    VIP_VI_ATTRIBUTES ra;
    TC_RC(peer_connect(&t, vi, s, 20000, &ra), VIP_SUCCESS);
    TC_CHECK(tl_vi_state(vi) == VIP_STATE_CONNECTED);
    TC_CHECK(ra.ReliabilityLevel == s->rel && ra.EnableRdmaWrite && ra.EnableRdmaRead);

    /* Each side tells the other where its region is. */
    if (s->writer)
        tl_fill(reg, XLEN, SEQ_WRITE); /* what it writes */
    else
        tl_fill(reg, XLEN, SEQ_READ); /* what the writer reads; it writes at XLEN */
    *mine = (struct rinfo){(uint64_t)(uintptr_t)reg, mh};
    tl_desc_1(sd, mine, sizeof *mine, ctl.mh);
    TC_RC(VipPostSend(vi, sd, ctl.mh), VIP_SUCCESS);
    TC_RC(VipSendWait(vi, 20000, &done), VIP_SUCCESS);
    TC_CHECK(done == sd && !(sd->CS.Status & VIP_STATUS_ERROR_MASK));
    TC_RC(VipRecvWait(vi, 20000, &done), VIP_SUCCESS);
    TC_CHECK(done == rd[0] && !(done->CS.Status & VIP_STATUS_ERROR_MASK));

    if (s->writer) {
        struct rinfo at = {theirs->addr + XLEN, theirs->mh};
        rdma_desc(xd, VIP_CONTROL_OP_RDMAWRITE, &at, reg, XLEN, mh);
        TC_RC(VipPostSend(vi, xd, ctl.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(vi, 20000, &done), VIP_SUCCESS);
        if (done != xd || (xd->CS.Status & VIP_STATUS_ERROR_MASK))
            tl_child_fail(__FILE__, __LINE__, "RDMA write: status %#x",
                          (unsigned)done->CS.Status);
        TC_CHECK((xd->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RDMA_WRITE);
        /* RDMA read of the target's first XLEN bytes into ours at XLEN */
        memset(reg + XLEN, 0, XLEN);
        rdma_desc(xd, VIP_CONTROL_OP_RDMAREAD, theirs, reg + XLEN, XLEN, mh);
        TC_RC(VipPostSend(vi, xd, ctl.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(vi, 20000, &done), VIP_SUCCESS);
        TC_CHECK(done == xd && !(xd->CS.Status & VIP_STATUS_ERROR_MASK));
        TC_CHECK((xd->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RDMA_READ);
        TC_CHECK(tl_verify(reg + XLEN, XLEN, SEQ_READ) == -1);
        /* "written": sent after the write, so it arrives after it */
        TC_RC(VipPostSend(vi, sd, ctl.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(vi, 20000, &done), VIP_SUCCESS);
        TC_RC(VipRecvWait(vi, 20000, &done), VIP_SUCCESS); /* the target has checked */
        TC_CHECK(done == rd[1] && !(done->CS.Status & VIP_STATUS_ERROR_MASK));
    } else {
        TC_RC(VipRecvWait(vi, 20000, &done), VIP_SUCCESS);
        TC_CHECK(done == rd[1] && !(done->CS.Status & VIP_STATUS_ERROR_MASK));
        TC_CHECK(tl_verify(reg + XLEN, XLEN, SEQ_WRITE) == -1);
        TC_CHECK(tl_verify(reg, XLEN, SEQ_READ) == -1); /* the read left it alone */
        TC_RC(VipPostSend(vi, sd, ctl.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(vi, 20000, &done), VIP_SUCCESS);
        /* the writer's last receive done: our disconnect cannot overtake it */
        TC_CHECK(tl_child_take(-1) == 'q');
    }
    TC_CHECK(tl_child_post('d') == 0);
    tl_end(&t, vi, &ctl); /* reg goes with the session's registrations */
    free(reg);
    return 0;
}

/* host0 (the writer) and host1 connect peer-to-peer; host `first` requests first. */
static void peer_rdma_once(const struct thosts *hp, VIP_RELIABILITY_LEVEL rel, unsigned first)
{
    struct thosts h = *hp;
    struct pside s[2];
    char a[17], b[17];
    tl_discrim(a, "pa");
    tl_discrim(b, "pb");
    for (unsigned i = 0; i < 2; i++) {
        s[i] = (struct pside){&h, i, 1 - i, "", "", rel, i == first, i == 0, false, 0};
        snprintf(s[i].mine, sizeof s[i].mine, "%s", i ? b : a);
        snprintf(s[i].theirs, sizeof s[i].theirs, "%s", i ? a : b);
    }
    struct tl_child c[2];
    unsigned f = first, o = 1 - first;
    bool f_up = tl_spawn(&c[f], peer_child, &s[f]) == 0;
    bool o_up = f_up && tl_spawn(&c[o], peer_child, &s[o]) == 0;
    CU_ASSERT(f_up && o_up);
    if (o_up) {
        CU_ASSERT_EQUAL(tl_parent_take(&c[f], 20000), 'r');
        tl_parent_post(&c[o], 'g');
        CU_ASSERT_EQUAL(tl_parent_take(&c[0], 30000), 'd'); /* the writer is done */
        tl_parent_post(&c[1], 'q');
        TCHILD_OK(&c[0], 30000);
        TCHILD_OK(&c[1], 30000);
    }
    if (o_up || f_up)
        tl_child_kill(&c[f]);
    if (o_up)
        tl_child_kill(&c[o]);
}

/* Either host first, on one pair of vipds: the host ids (of random ports)
 * decide which host sends and which keeps; so both paths run. */
static void peer_rdma(VIP_RELIABILITY_LEVEL rel)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    peer_rdma_once(&h, rel, 0);
    peer_rdma_once(&h, rel, 1);
    thosts_stop(&h);
}

static void test_peer_rdma_reliable_delivery(void)
{
    peer_rdma(VIP_SERVICE_RELIABLE_DELIVERY);
}

static void test_peer_rdma_reliable_reception(void)
{
    peer_rdma(VIP_SERVICE_RELIABLE_RECEPTION);
}

/* ---- a peer request that nobody mirrors ------------------------------------------------ */

static int lonely_child(void *arg)
{
    const struct pside *s = arg;
    thosts_use(s->h, s->host);
    struct tl_nic t;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_vi(&t, s->rel, NULL, NULL, &vi), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES ra;
    if (s->leaves) {
        char other[16];
        snprintf(other, sizeof other, "host%u", s->other);
        VIP_NET_ADDRESS *local = tl_addr(t.nic, "localhost", s->mine);
        VIP_NET_ADDRESS *remote = tl_addr(t.nic, other, s->theirs);
        TC_CHECK(local && remote);
        TC_RC(VipConnectPeerRequest(vi, local, remote, 20000), VIP_SUCCESS);
        free(local);
        free(remote);
        TC_CHECK(tl_child_post('t') == 0);
        /* leaves with its request pending, as a process that exits does
         * (tests/valgrind.supp knows this NIC is left on purpose) */
        return 0;
    }
    TC_RC(peer_connect(&t, vi, s, s->timeout_ms ? s->timeout_ms : 300, &ra), VIP_TIMEOUT);
    TC_CHECK(tl_vi_state(vi) == VIP_STATE_IDLE);
    TC_CHECK(tl_child_post('t') == 0);
    tl_end(&t, vi, NULL);
    return 0;
}

/* The vipd of host i has no session left (the one of a child gone). */
static bool sessions_gone(const struct thosts *h, unsigned i)
{
    char out[8192];
    for (uint64_t end = tl_now_ms() + 10000; tl_now_ms() < end;) {
        thosts_use(h, i);
        const char *l = tl_vipctl("nics", out, sizeof out) == 0 ? strstr(out, "sessions:") : NULL;
        if (l && strtoul(l + strlen("sessions:"), NULL, 10) == 0)
            return true;
    }
    return false;
}

/* One side's request times out (leaves: its process exits instead); then
 * the mirror request of the other side must not meet it (it was
 * withdrawn) and times out too. */
static void lonely_once(const struct thosts *hp, unsigned first, bool leaves)
{
    struct thosts h = *hp;
    char a[17], b[17];
    tl_discrim(a, "la");
    tl_discrim(b, "lb");
    for (unsigned k = 0; k < 2; k++) {
        unsigned i = k ? 1 - first : first;
        struct pside s = {&h, i, 1 - i, "", "", VIP_SERVICE_RELIABLE_DELIVERY, false, false,
                          leaves && k == 0, 0};
        snprintf(s.mine, sizeof s.mine, "%s", i ? b : a);
        snprintf(s.theirs, sizeof s.theirs, "%s", i ? a : b);
        struct tl_child c;
        if (tl_spawn(&c, lonely_child, &s) != 0) {
            CU_FAIL("fork");
            break;
        }
        tl_parent_post(&c, 'g');
        CU_ASSERT_EQUAL(tl_parent_take(&c, 20000), 't');
        TCHILD_OK(&c, 20000);
        if (k == 0 && leaves) /* its vipd has seen it go (and told the other) */
            CU_ASSERT(sessions_gone(&h, i));
    }
}

/* Either host first, on one pair of vipds (see peer_rdma). */
static void lonely(bool leaves)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    lonely_once(&h, 0, leaves);
    lonely_once(&h, 1, leaves);
    thosts_stop(&h);
}

static void test_peer_timeout(void)
{
    lonely(false);
}

static void test_peer_process_leaves(void)
{
    lonely(true);
}

/* ---- a request whose end finds the other host dead ------------------------------------- */

/* A TCP connection between the vipds on ports a and b (either end's
 * listening port, as /proc/net/tcp shows them) holds bytes that b's end
 * has not read. */
static bool unread_toward(uint16_t a, uint16_t b)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned lport, rport, st, txq, rxq;
        if (sscanf(line, " %*u: %*x:%x %*x:%x %x %x:%x", &lport, &rport, &st, &txq, &rxq) == 5 &&
            st == 1 && rxq > 0 && (lport == b || rport == a))
            found = true;
    }
    fclose(f);
    return found;
}

/* The line of host j in host i's `vipctl net` (cut at its end), or NULL. */
static char *net_line(const struct thosts *h, unsigned i, unsigned j, char *out, size_t cap)
{
    char name[32];
    snprintf(name, sizeof name, "host host%u ", j);
    thosts_use(h, i);
    char *l = tl_vipctl("net", out, cap) == 0 ? strstr(out, name) : NULL;
    if (l && strchr(l, '\n'))
        *strchr(l, '\n') = '\0';
    return l;
}

/* Host i says host j is up (its link to j is made), within 10 s. */
static bool host_up(const struct thosts *h, unsigned i, unsigned j)
{
    char out[4096];
    for (uint64_t end = tl_now_ms() + 10000; tl_now_ms() < end;) {
        const char *l = net_line(h, i, j, out, sizeof out);
        if (l && strstr(l, " up,"))
            return true;
    }
    return false;
}

/* A peer request kept by the other host times out; withdrawing it there
 * is the first thing to find that host's vipd dead (the send fails), and
 * takes the host down inside the request's end, which must not end (and
 * free) that request a second time: the requester's vipd lives on and
 * answers. The order is made, not waited for: the keeper's vipd stops,
 * with the requester's heartbeats (every 200 ms) left unread in its
 * socket; the requester's vipd stops; the keeper's is killed, so its
 * socket answers with a reset; the requester's vipd resumes after the
 * timeout, and its loop runs the timers before it reads the socket. The
 * host with the lower id sends its peer request (kd_remote.c), so that
 * one requests. */
static void test_peer_end_finds_host_dead(void)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    char out[4096], *was = getenv("VIPD_SOCKET"), *keep = was ? strdup(was) : NULL;
    unsigned id[2] = {0, 0};
    for (unsigned i = 0; i < 2; i++) {
        const char *l = net_line(&h, 0, i, out, sizeof out);
        CU_ASSERT(l && sscanf(l, "host %*s %x", &id[i]) == 1);
    }
    unsigned rq = id[0] < id[1] ? 0 : 1, kp = 1 - rq;
    struct pside s = {&h, rq, kp, "", "", VIP_SERVICE_RELIABLE_DELIVERY, true, false, false, 2500};
    tl_discrim(s.mine, "ea");
    tl_discrim(s.theirs, "eb");
    struct tl_child c;
    /* The child's library must wait out its vipd's stop, not give up. */
    setenv("VIPD_PING_MS", "20000", 1);
    int sp = tl_spawn(&c, lonely_child, &s);
    unsetenv("VIPD_PING_MS");
    if (sp != 0) {
        CU_FAIL("fork");
        free(keep);
        thosts_stop(&h);
        return;
    }
    CU_ASSERT_EQUAL(tl_parent_take(&c, 20000), 'r');
    CU_ASSERT(host_up(&h, rq, kp)); /* the request went to the keeper */
    pid_t a = h.v[rq].pid, b = h.v[kp].pid;
    kill(b, SIGSTOP);
    bool unread = false;
    for (uint64_t end = tl_now_ms() + 10000; !unread && tl_now_ms() < end;)
        unread = unread_toward(h.port[rq], h.port[kp]);
    CU_ASSERT(unread);
    kill(a, SIGSTOP);
    kill(b, SIGKILL);
    usleep(2500 * 1000); /* the request's timeout passes while its vipd is stopped */
    kill(a, SIGCONT);
    CU_ASSERT_EQUAL(tl_parent_take(&c, 20000), 't');
    TCHILD_OK(&c, 20000);
    CU_ASSERT(kill(a, 0) == 0);
    CU_ASSERT(net_line(&h, rq, kp, out, sizeof out) != NULL); /* it answers */
    if (keep)
        setenv("VIPD_SOCKET", keep, 1);
    free(keep);
    thosts_stop(&h);
}

static const struct tl_test tests[] = {
    TL_TEST(test_peer_rdma_reliable_delivery),
    TL_TEST(test_peer_rdma_reliable_reception),
    TL_TEST(test_peer_timeout),
    TL_TEST(test_peer_process_leaves),
    TL_TEST(test_peer_end_finds_host_dead),
    TL_END,
};

int main(int argc, char **argv)
{
    thosts_quick_failures();
    return tl_main(argc, argv, "hosts_peer", tests);
}

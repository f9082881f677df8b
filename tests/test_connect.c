/*
 * test_connect.c - how connections are made: the client-server model when
 * nobody waits yet (VIP_NO_MATCH, at once; the client retries), a matched
 * request that is never answered, the order of VipConnectRequest's return
 * codes; and the peer-to-peer model: either side first, both at once, many
 * pairs at once, timeout, cancellation by VipDisconnect and VipDestroyVi,
 * and each documented error.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/tlib.h"

#define MSG 64u /* bytes of the messages exchanged over a new connection */

/* ---- a registered buffer cut into descriptor and data slots ----------------- */

struct ep {
    struct tl_nic t;
    struct tl_buf b;
};

static VIP_DESCRIPTOR *slot_desc(struct ep *e, unsigned k)
{
    return (VIP_DESCRIPTOR *)(void *)(e->b.p + (size_t)k * 128);
}

static uint8_t *slot_data(struct ep *e, unsigned k)
{
    return e->b.p + 16384 + (size_t)k * MSG;
}

/* Slots: 2i receive, 2i + 1 send, for VI i < 64. */
static VIP_RETURN ep_open(struct ep *e, const char *dev)
{
    memset(e, 0, sizeof *e);
    VIP_RETURN rc = tl_open(&e->t, dev);
    if (rc == VIP_SUCCESS && (rc = tl_buf_alloc(&e->t, &e->b, 16384 + 128 * MSG)) != VIP_SUCCESS)
        tl_close(&e->t);
    return rc;
}

static void ep_close(struct ep *e)
{
    tl_buf_free(&e->b);
    tl_close(&e->t);
}

static VIP_RETURN post_recv(struct ep *e, VIP_VI_HANDLE vi, unsigned i)
{
    tl_desc_1(slot_desc(e, 2 * i), slot_data(e, 2 * i), MSG, e->b.mh);
    return VipPostRecv(vi, slot_desc(e, 2 * i), e->b.mh);
}

/* Send message seq on vi from slot 2i + 1 and wait for its completion:
 * NULL, or what went wrong. */
static const char *send_msg(struct ep *e, VIP_VI_HANDLE vi, unsigned i, uint32_t seq)
{
    VIP_DESCRIPTOR *d = slot_desc(e, 2 * i + 1), *done = NULL;
    tl_fill(slot_data(e, 2 * i + 1), MSG, seq);
    tl_desc_1(d, slot_data(e, 2 * i + 1), MSG, e->b.mh);
    if (VipPostSend(vi, d, e->b.mh) != VIP_SUCCESS)
        return "VipPostSend failed";
    if (VipSendWait(vi, 10000, &done) != VIP_SUCCESS || done != d)
        return "VipSendWait did not return the send";
    return (d->CS.Status & VIP_STATUS_ERROR_MASK) ? "the send completed in error" : NULL;
}

/* Wait for message seq in the receive of slot 2i: NULL, or what is wrong. */
static const char *recv_msg(struct ep *e, VIP_VI_HANDLE vi, unsigned i, uint32_t seq)
{
    VIP_DESCRIPTOR *d = NULL;
    if (VipRecvWait(vi, 10000, &d) != VIP_SUCCESS || d != slot_desc(e, 2 * i))
        return "VipRecvWait did not return the receive";
    if (!(d->CS.Status & VIP_STATUS_DONE) || (d->CS.Status & VIP_STATUS_ERROR_MASK))
        return "the receive completed in error";
    if (d->CS.Length != MSG || tl_verify(slot_data(e, 2 * i), MSG, seq) >= 0)
        return "the message arrived damaged";
    return NULL;
}

static VIP_VI_HANDLE new_vi(struct ep *e, VIP_RELIABILITY_LEVEL rel)
{
    VIP_VI_HANDLE vi = NULL;
    return tl_vi(&e->t, rel, NULL, NULL, &vi) == VIP_SUCCESS ? vi : NULL;
}

/* ---- client-server: VIP_NO_MATCH ------------------------------------------------ */

/* Nobody waits: the answer comes at once, whatever the Timeout. */
static void test_no_match_is_prompt(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_NET_ADDRESS *local = NULL, *remote = NULL;
    VIP_VI_ATTRIBUTES ra;
    char disc[17];
    tl_discrim(disc, "nobody");
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    local = tl_addr(t.nic, "localhost", "");
    remote = tl_addr(t.nic, "via1", disc);
    TCHK(local && remote);
    uint64_t t0 = tl_now_ms();
    TRC_SOFT(VipConnectRequest(vi, local, remote, 5000, &ra), VIP_NO_MATCH);
    TRC_SOFT(VipConnectRequest(vi, local, remote, VIP_INFINITE, &ra), VIP_NO_MATCH);
    CU_ASSERT(tl_now_ms() - t0 < 1000);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_IDLE);
    /* on its own NIC as well */
    free(remote);
    remote = tl_addr(t.nic, "localhost", disc);
    TCHK(remote != NULL);
    TRC_SOFT(VipConnectRequest(vi, local, remote, 5000, &ra), VIP_NO_MATCH);
out:
    free(local);
    free(remote);
    if (vi)
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    tl_close(&t);
}

struct cs_cfg {
    char disc[17];
};

/* The client of an old VIA program: ask until somebody waits. Tells the
 * parent ('n') after its first VIP_NO_MATCH; then sends one message and
 * expects its echo. */
static int early_client(void *arg)
{
    const struct cs_cfg *c = arg;
    struct ep e;
    TC_RC(ep_open(&e, "via0"), VIP_SUCCESS);
    VIP_VI_HANDLE vi = new_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY);
    TC_CHECK(vi != NULL);
    TC_RC(post_recv(&e, vi, 0), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(e.t.nic, "localhost", "");
    VIP_NET_ADDRESS *remote = tl_addr(e.t.nic, "via1", c->disc);
    TC_CHECK(local && remote);
    VIP_VI_ATTRIBUTES ra;
    VIP_RETURN rc;
    unsigned misses = 0;
    uint64_t end = tl_now_ms() + 30000;
    while ((rc = VipConnectRequest(vi, local, remote, VIP_INFINITE, &ra)) == VIP_NO_MATCH &&
           tl_now_ms() < end) {
        if (misses++ == 0)
            tl_child_post('n');
        usleep(1000);
    }
    TC_RC(rc, VIP_SUCCESS);
    TC_CHECK(misses > 0);
    TC_CHECK(ra.ReliabilityLevel == VIP_SERVICE_RELIABLE_DELIVERY);
    const char *why = send_msg(&e, vi, 0, 7);
    if (!why)
        why = recv_msg(&e, vi, 0, 8);
    if (why)
        tl_child_fail(__FILE__, __LINE__, "client: %s", why);
    TC_RC(VipDisconnect(vi), VIP_SUCCESS);
    TC_RC(VipDestroyVi(vi), VIP_SUCCESS);
    free(local);
    free(remote);
    ep_close(&e);
    return 0;
}

static int late_server(void *arg)
{
    const struct cs_cfg *c = arg;
    struct ep e;
    TC_RC(ep_open(&e, "via1"), VIP_SUCCESS);
    VIP_VI_HANDLE vi = new_vi(&e, VIP_SERVICE_RELIABLE_DELIVERY);
    TC_CHECK(vi != NULL);
    TC_RC(post_recv(&e, vi, 0), VIP_SUCCESS);
    TC_RC(tl_accept(&e.t, vi, c->disc, 20000), VIP_SUCCESS);
    const char *why = recv_msg(&e, vi, 0, 7);
    if (!why)
        why = send_msg(&e, vi, 0, 8);
    if (why)
        tl_child_fail(__FILE__, __LINE__, "server: %s", why);
    TC_RC(VipDisconnect(vi), VIP_SUCCESS); /* the client still gets what was sent */
    TC_RC(VipDestroyVi(vi), VIP_SUCCESS);
    ep_close(&e);
    return 0;
}

/* The client starts first and retries; the server starts once the client
 * has been told VIP_NO_MATCH; they connect. */
static void test_client_before_server(void)
{
    struct cs_cfg c;
    struct tl_child cli = {.pid = -1}, srv = {.pid = -1};
    tl_discrim(c.disc, "late");
    TCHK(tl_spawn(&cli, early_client, &c) == 0);
    CU_ASSERT_EQUAL(tl_parent_take(&cli, 20000), 'n');
    TCHK(tl_spawn(&srv, late_server, &c) == 0);
out:
    TCHILD_OK(&cli, 60000);
    TCHILD_OK(&srv, 60000);
}

/* A server that takes the request and never answers it: the request ends
 * with VIP_TIMEOUT after its Timeout, and the offer is gone. */
static int silent_server(void *arg)
{
    const struct cs_cfg *c = arg;
    struct tl_nic t;
    TC_RC(tl_open(&t, "via1"), VIP_SUCCESS);
    VIP_VI_HANDLE vi;
    TC_RC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(t.nic, "localhost", c->disc);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + 16);
    TC_CHECK(local && remote);
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES ra;
    TC_RC(VipConnectWait(t.nic, local, 20000, remote, &ra, &conn), VIP_SUCCESS);
    tl_child_post('m');
    TC_CHECK(tl_child_take(20000) == 'q');
    TC_RC(VipConnectAccept(conn, vi), VIP_INVALID_PARAMETER); /* withdrawn */
    TC_RC(VipDestroyVi(vi), VIP_SUCCESS);
    free(local);
    free(remote);
    tl_close(&t);
    return 0;
}

static void test_matched_request_times_out(void)
{
    struct cs_cfg c;
    struct tl_child srv = {.pid = -1};
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_NET_ADDRESS *local = NULL, *remote = NULL;
    VIP_VI_ATTRIBUTES ra;
    tl_discrim(c.disc, "silent");
    TCHK(tl_spawn(&srv, silent_server, &c) == 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    local = tl_addr(t.nic, "localhost", "");
    remote = tl_addr(t.nic, "via1", c.disc);
    TCHK(local && remote);
    VIP_RETURN rc;
    uint64_t t0 = 0, end = tl_now_ms() + 20000;
    do {
        t0 = tl_now_ms();
        rc = VipConnectRequest(vi, local, remote, 300, &ra);
    } while (rc == VIP_NO_MATCH && tl_now_ms() < end && usleep(1000) == 0);
    uint64_t dt = tl_now_ms() - t0;
    TRC_SOFT(rc, VIP_TIMEOUT);
    CU_ASSERT(dt >= 280 && dt < 5000);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_IDLE);
    CU_ASSERT_EQUAL(tl_parent_take(&srv, 5000), 'm');
    tl_parent_post(&srv, 'q');
out:
    free(local);
    free(remote);
    if (vi)
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    tl_close(&t);
    if (srv.pid > 0)
        tl_parent_post(&srv, 'q');
    TCHILD_OK(&srv, 30000);
}

/* An address of this host's NIC `nic` (which need not exist), disc "x". */
static VIP_NET_ADDRESS *nic_addr(struct tl_nic *t, unsigned nic, const char *disc)
{
    VIP_NET_ADDRESS *a = tl_addr(t->nic, "localhost", disc);
    if (a) {
        tl_host_bytes(a)[4] = (uint8_t)(nic >> 8);
        tl_host_bytes(a)[5] = (uint8_t)nic;
    }
    return a;
}

/*
 * The order of VipConnectRequest's checks: parameters (VIP_INVALID_PARAMETER)
 * before the VI's state (VIP_INVALID_STATE) before the target
 * (VIP_NOT_REACHABLE, VIP_NO_MATCH). A pending peer request makes the VI
 * CONNECT_PENDING without a second process.
 */
static void test_request_return_order(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_NET_ADDRESS *local = NULL, *nobody = NULL, *bad = NULL, *absent = NULL, *foreign = NULL;
    VIP_VI_ATTRIBUTES ra;
    char disc[17];
    tl_discrim(disc, "ord");
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    local = tl_addr(t.nic, "localhost", "me");
    nobody = tl_addr(t.nic, "via1", disc);
    bad = tl_addr(t.nic, "via1", disc);
    absent = nic_addr(&t, 7, disc); /* the test vipd has via0..via5 */
    foreign = tl_addr(t.nic, "via1", disc);
    TCHK(local && nobody && bad && absent && foreign);
    bad->DiscriminatorLen = 17;
    tl_host_bytes(foreign)[0] ^= 0x5a; /* another host id */

    /* IDLE: each error for what it is */
    TRC_SOFT(VipConnectRequest(vi, local, bad, 1000, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(vi, local, nobody, 0, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(vi, local, absent, 1000, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(vi, local, foreign, 1000, &ra), VIP_NOT_REACHABLE);
    TRC_SOFT(VipConnectRequest(vi, local, nobody, 1000, &ra), VIP_NO_MATCH);

    /* CONNECT_PENDING: parameters first, then the state */
    TRC(VipConnectPeerRequest(vi, local, nobody, 20000), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_CONNECT_PENDING);
    TRC_SOFT(VipConnectRequest(vi, local, bad, 1000, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(vi, local, nobody, 0, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(vi, local, absent, 1000, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(NULL, local, nobody, 1000, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(vi, local, foreign, 1000, &ra), VIP_INVALID_STATE);
    TRC_SOFT(VipConnectRequest(vi, local, nobody, 1000, &ra), VIP_INVALID_STATE);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_CONNECT_PENDING);
    TRC_SOFT(VipDisconnect(vi), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_IDLE);
    TRC_SOFT(VipConnectRequest(vi, local, nobody, 1000, &ra), VIP_NO_MATCH);
out:
    free(local);
    free(nobody);
    free(bad);
    free(absent);
    free(foreign);
    if (vi)
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    tl_close(&t);
}

/* ---- peer-to-peer ---------------------------------------------------------------- */

/* Two VIs of one process, on via0 and via1, addresses (via0, da) and (via1, db). */
struct pair {
    struct ep a, b;
    VIP_VI_HANDLE va, vb;
    VIP_NET_ADDRESS *la, *lb; /* local addresses */
    VIP_NET_ADDRESS *ra, *rb; /* what each names as remote: lb, la */
};

static VIP_RETURN pair_open(struct pair *p, VIP_RELIABILITY_LEVEL ra, VIP_RELIABILITY_LEVEL rb)
{
    char da[17], db[17];
    memset(p, 0, sizeof *p);
    tl_discrim(da, "a");
    tl_discrim(db, "b");
    VIP_RETURN rc = ep_open(&p->a, "via0");
    if (rc == VIP_SUCCESS && (rc = ep_open(&p->b, "via1")) != VIP_SUCCESS)
        ep_close(&p->a);
    if (rc != VIP_SUCCESS)
        return rc;
    p->va = new_vi(&p->a, ra);
    p->vb = new_vi(&p->b, rb);
    p->la = tl_addr(p->a.t.nic, "localhost", da);
    p->lb = tl_addr(p->b.t.nic, "localhost", db);
    p->ra = tl_addr(p->a.t.nic, "via1", db);
    p->rb = tl_addr(p->b.t.nic, "via0", da);
    if (!p->va || !p->vb || !p->la || !p->lb || !p->ra || !p->rb)
        return VIP_ERROR_RESOURCE;
    if (post_recv(&p->a, p->va, 0) != VIP_SUCCESS || post_recv(&p->b, p->vb, 0) != VIP_SUCCESS)
        return VIP_ERROR_RESOURCE;
    return VIP_SUCCESS;
}

static void pair_close(struct pair *p)
{
    VIP_VI_STATE s;
    if (p->va && ((s = tl_vi_state(p->va)) == VIP_STATE_CONNECTED || s == VIP_STATE_ERROR))
        VipDisconnect(p->va);
    if (p->vb && ((s = tl_vi_state(p->vb)) == VIP_STATE_CONNECTED || s == VIP_STATE_ERROR))
        VipDisconnect(p->vb);
    if (p->va)
        CU_ASSERT_EQUAL(VipDestroyVi(p->va), VIP_SUCCESS);
    if (p->vb)
        CU_ASSERT_EQUAL(VipDestroyVi(p->vb), VIP_SUCCESS);
    free(p->la);
    free(p->lb);
    free(p->ra);
    free(p->rb);
    if (p->a.t.nic)
        ep_close(&p->a);
    if (p->b.t.nic)
        ep_close(&p->b);
}

/* A message each way over the pair's connection. */
static void pair_exchange(struct pair *p)
{
    const char *why = send_msg(&p->a, p->va, 0, 11);
    if (!why)
        why = recv_msg(&p->b, p->vb, 0, 11);
    if (!why)
        why = send_msg(&p->b, p->vb, 0, 12);
    if (!why)
        why = recv_msg(&p->a, p->va, 0, 12);
    if (why)
        fprintf(stderr, "\n  exchange: %s\n", why);
    CU_ASSERT_PTR_NULL(why);
}

/* Done until it says something else than VIP_NOT_DONE (bounded). */
static VIP_RETURN done_poll(VIP_VI_HANDLE vi, VIP_VI_ATTRIBUTES *ra, unsigned max_ms)
{
    VIP_RETURN rc;
    uint64_t end = tl_now_ms() + max_ms;
    while ((rc = VipConnectPeerDone(vi, ra)) == VIP_NOT_DONE && tl_now_ms() < end)
        usleep(500);
    return rc;
}

/* One side asks, then the other: the first stays CONNECT_PENDING (Done says
 * VIP_NOT_DONE) until the second asks; both end CONNECTED. */
static void peer_in_order(int b_first)
{
    struct pair p;
    VIP_VI_ATTRIBUTES ra, rb;
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    VIP_VI_HANDLE first = b_first ? p.vb : p.va, second = b_first ? p.va : p.vb;
    TRC(b_first ? VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000)
                : VipConnectPeerRequest(p.va, p.la, p.ra, 20000),
        VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(first), VIP_STATE_CONNECT_PENDING);
    TRC_SOFT(VipConnectPeerDone(first, &ra), VIP_NOT_DONE);
    CU_ASSERT_EQUAL(tl_vi_state(second), VIP_STATE_IDLE);
    TRC(b_first ? VipConnectPeerRequest(p.va, p.la, p.ra, 20000)
                : VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000),
        VIP_SUCCESS);
    /* the second request met the first: both outcomes are decided */
    TRC(VipConnectPeerDone(second, b_first ? &ra : &rb), VIP_SUCCESS);
    TRC(VipConnectPeerWait(first, b_first ? &rb : &ra), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(p.va), VIP_STATE_CONNECTED);
    CU_ASSERT_EQUAL(tl_vi_state(p.vb), VIP_STATE_CONNECTED);
    CU_ASSERT_EQUAL(ra.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
    CU_ASSERT_EQUAL(rb.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
    /* told once: there is no request any more */
    TRC_SOFT(VipConnectPeerDone(p.va, &ra), VIP_INVALID_STATE);
    pair_exchange(&p);
out:
    pair_close(&p);
}

static void test_peer_a_first(void)
{
    peer_in_order(0);
}

static void test_peer_b_first(void)
{
    peer_in_order(1);
}

/* A request meets only the one whose local and remote addresses are its
 * remote and local ones: two VIs asking for the same remote, from
 * different local discriminators, are told apart. */
static void test_peer_matches_both_addresses(void)
{
    struct pair p;
    VIP_VI_HANDLE vx = NULL;
    VIP_NET_ADDRESS *lx = NULL;
    VIP_VI_ATTRIBUTES ra;
    char dx[17];
    tl_discrim(dx, "x");
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    TCHK((vx = new_vi(&p.a, VIP_SERVICE_RELIABLE_DELIVERY)) != NULL);
    lx = tl_addr(p.a.t.nic, "localhost", dx);
    TCHK(lx != NULL);
    /* x asks first for the same remote (b's address) as a */
    TRC(VipConnectPeerRequest(vx, lx, p.ra, 20000), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, 20000), VIP_SUCCESS);
    /* b names a: it meets a, not the older x */
    TRC(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_SUCCESS);
    TRC(VipConnectPeerDone(p.va, &ra), VIP_SUCCESS);
    TRC(VipConnectPeerDone(p.vb, &ra), VIP_SUCCESS);
    TRC_SOFT(VipConnectPeerDone(vx, &ra), VIP_NOT_DONE);
    pair_exchange(&p);
out:
    if (vx)
        CU_ASSERT_EQUAL(VipDestroyVi(vx), VIP_SUCCESS);
    free(lx);
    pair_close(&p);
}

/* ---- peer-to-peer between processes, many pairs at once ----------------------- */

#define NPAIRS 16

struct many_cfg {
    char da[NPAIRS][17], db[NPAIRS][17];
};

/* The child: VIs on via1 named db[i], each asking for (via0, da[i]) as soon
 * as the parent says 'g' (the parent asks at the same moment). */
static int many_child(void *arg)
{
    const struct many_cfg *c = arg;
    struct ep e;
    VIP_VI_HANDLE vi[NPAIRS];
    VIP_NET_ADDRESS *l[NPAIRS], *r[NPAIRS];
    TC_RC(ep_open(&e, "via1"), VIP_SUCCESS);
    for (unsigned i = 0; i < NPAIRS; i++) {
        vi[i] = new_vi(&e, VIP_SERVICE_RELIABLE_RECEPTION);
        l[i] = tl_addr(e.t.nic, "localhost", c->db[i]);
        r[i] = tl_addr(e.t.nic, "via0", c->da[i]);
        TC_CHECK(vi[i] && l[i] && r[i]);
        TC_RC(post_recv(&e, vi[i], i), VIP_SUCCESS);
    }
    tl_child_post('r');
    TC_CHECK(tl_child_take(20000) == 'g');
    for (unsigned i = 0; i < NPAIRS; i++)
        TC_RC(VipConnectPeerRequest(vi[i], l[i], r[i], 20000), VIP_SUCCESS);
    for (unsigned i = 0; i < NPAIRS; i++) {
        VIP_VI_ATTRIBUTES ra;
        TC_RC(i % 2 ? VipConnectPeerWait(vi[i], &ra) : done_poll(vi[i], &ra, 20000),
              VIP_SUCCESS);
        TC_CHECK(ra.ReliabilityLevel == VIP_SERVICE_RELIABLE_RECEPTION);
    }
    for (unsigned i = 0; i < NPAIRS; i++) {
        const char *why = recv_msg(&e, vi[i], i, 100 + i);
        if (!why)
            why = send_msg(&e, vi[i], i, 200 + i);
        if (why)
            tl_child_fail(__FILE__, __LINE__, "pair %u: %s", i, why);
    }
    TC_CHECK(tl_child_take(20000) == 'q');
    for (unsigned i = 0; i < NPAIRS; i++) {
        VipDisconnect(vi[i]);
        TC_RC(VipDestroyVi(vi[i]), VIP_SUCCESS);
        free(l[i]);
        free(r[i]);
    }
    ep_close(&e);
    return 0;
}

static void test_peer_many_pairs_at_once(void)
{
    static struct many_cfg c;
    struct tl_child ch = {.pid = -1};
    struct ep e = {0};
    VIP_VI_HANDLE vi[NPAIRS] = {0};
    VIP_NET_ADDRESS *l[NPAIRS] = {0}, *r[NPAIRS] = {0};
    for (unsigned i = 0; i < NPAIRS; i++) {
        tl_discrim(c.da[i], "A");
        tl_discrim(c.db[i], "B");
    }
    TRC(ep_open(&e, "via0"), VIP_SUCCESS);
    for (unsigned i = 0; i < NPAIRS; i++) {
        vi[i] = new_vi(&e, VIP_SERVICE_RELIABLE_RECEPTION);
        l[i] = tl_addr(e.t.nic, "localhost", c.da[i]);
        r[i] = tl_addr(e.t.nic, "via1", c.db[i]);
        TCHK(vi[i] && l[i] && r[i]);
        TRC(post_recv(&e, vi[i], i), VIP_SUCCESS);
    }
    TCHK(tl_spawn(&ch, many_child, &c) == 0);
    TCHK(tl_parent_take(&ch, 20000) == 'r');
    tl_parent_post(&ch, 'g');
    for (unsigned i = 0; i < NPAIRS; i++)
        TRC(VipConnectPeerRequest(vi[i], l[i], r[i], 20000), VIP_SUCCESS);
    for (unsigned i = 0; i < NPAIRS; i++) {
        VIP_VI_ATTRIBUTES ra;
        TRC(i % 2 ? done_poll(vi[i], &ra, 20000) : VipConnectPeerWait(vi[i], &ra), VIP_SUCCESS);
        CU_ASSERT_EQUAL(tl_vi_state(vi[i]), VIP_STATE_CONNECTED);
    }
    for (unsigned i = 0; i < NPAIRS; i++) {
        const char *why = send_msg(&e, vi[i], i, 100 + i);
        if (!why)
            why = recv_msg(&e, vi[i], i, 200 + i);
        if (why)
            fprintf(stderr, "\n  pair %u: %s\n", i, why);
        CU_ASSERT_PTR_NULL(why);
    }
out:
    if (ch.pid > 0)
        tl_parent_post(&ch, 'q');
    TCHILD_OK(&ch, 60000);
    for (unsigned i = 0; i < NPAIRS; i++) {
        if (vi[i]) {
            if (tl_vi_state(vi[i]) != VIP_STATE_IDLE)
                VipDisconnect(vi[i]);
            CU_ASSERT_EQUAL(VipDestroyVi(vi[i]), VIP_SUCCESS);
        }
        free(l[i]);
        free(r[i]);
    }
    ep_close(&e);
}

/* ---- peer-to-peer: timeout, cancellation, errors ----------------------------------- */

static void test_peer_timeout(void)
{
    struct pair p;
    VIP_VI_ATTRIBUTES ra;
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    /* Wait reports the timeout when it expires */
    uint64_t t0 = tl_now_ms();
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, 200), VIP_SUCCESS);
    TRC_SOFT(VipConnectPeerDone(p.va, &ra), VIP_NOT_DONE);
    TRC_SOFT(VipConnectPeerWait(p.va, &ra), VIP_TIMEOUT);
    uint64_t dt = tl_now_ms() - t0;
    CU_ASSERT(dt >= 190 && dt < 5000);
    CU_ASSERT_EQUAL(tl_vi_state(p.va), VIP_STATE_IDLE);
    TRC_SOFT(VipConnectPeerDone(p.va, &ra), VIP_INVALID_STATE); /* told once */
    /* Done reports it as well, later; the expired request meets nobody */
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, 50), VIP_SUCCESS);
    TRC_SOFT(done_poll(p.va, &ra, 5000), VIP_TIMEOUT);
    TRC(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_SUCCESS);
    TRC_SOFT(VipConnectPeerDone(p.vb, &ra), VIP_NOT_DONE);
    /* a new request of the first VI does */
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, 20000), VIP_SUCCESS);
    TRC(VipConnectPeerWait(p.va, &ra), VIP_SUCCESS);
    TRC(VipConnectPeerWait(p.vb, &ra), VIP_SUCCESS);
    pair_exchange(&p);
out:
    pair_close(&p);
}

struct waiter {
    VIP_VI_HANDLE vi;
    VIP_RETURN rc;
    uint64_t at_ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    VIP_VI_ATTRIBUTES ra;
    w->rc = VipConnectPeerWait(w->vi, &ra);
    w->at_ms = tl_now_ms();
    return NULL;
}

/* A VipConnectPeerWait blocked on the first request returns when the
 * mirror arrives. (Had the waiter not blocked yet when it did, it would
 * find the outcome told at once: the check holds either way, and fails if
 * a blocked waiter is never woken.) */
static void test_peer_wait_woken_by_mirror(void)
{
    struct pair p;
    pthread_t th;
    int started = 0;
    struct waiter w = {.rc = VIP_ERROR_RESOURCE};
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, VIP_INFINITE), VIP_SUCCESS);
    w.vi = p.va;
    TCHK(pthread_create(&th, NULL, wait_thread, &w) == 0);
    started = 1;
    usleep(50000); /* most likely blocked by now */
    TRC(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_SUCCESS);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    int jr = pthread_timedjoin_np(th, NULL, &until);
    CU_ASSERT_EQUAL(jr, 0);
    if (jr == 0)
        started = 0;
    TRC_SOFT(w.rc, VIP_SUCCESS);
    TRC(VipConnectPeerDone(p.vb, NULL), VIP_SUCCESS);
    pair_exchange(&p);
out:
    if (started) { /* never woken: the disconnect releases it */
        VipDisconnect(p.va);
        pthread_join(th, NULL);
    }
    pair_close(&p);
}

/* VipDisconnect cancels a pending request, and a VipConnectPeerWait blocked
 * on it returns; the cancelled request meets nobody. */
static void test_peer_cancel_by_disconnect(void)
{
    struct pair p;
    VIP_VI_ATTRIBUTES ra;
    pthread_t th;
    int started = 0;
    struct waiter w = {.rc = VIP_SUCCESS};
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, VIP_INFINITE), VIP_SUCCESS);
    w.vi = p.va;
    TCHK(pthread_create(&th, NULL, wait_thread, &w) == 0);
    started = 1;
    /* The waiter may not be blocked yet when we cancel: either way it
     * must come back with VIP_INVALID_STATE, not hang. */
    usleep(20000);
    uint64_t t0 = tl_now_ms();
    TRC_SOFT(VipDisconnect(p.va), VIP_SUCCESS);
    pthread_join(th, NULL);
    started = 0;
    TRC_SOFT(w.rc, VIP_INVALID_STATE);
    CU_ASSERT(w.at_ms - t0 < 2000);
    CU_ASSERT_EQUAL(tl_vi_state(p.va), VIP_STATE_IDLE);
    TRC_SOFT(VipConnectPeerDone(p.va, &ra), VIP_INVALID_STATE);
    TRC(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_SUCCESS);
    TRC_SOFT(VipConnectPeerDone(p.vb, &ra), VIP_NOT_DONE);
    TRC_SOFT(VipDisconnect(p.vb), VIP_SUCCESS);
out:
    if (started)
        pthread_join(th, NULL);
    pair_close(&p);
}

/* VipDestroyVi takes a VI with a pending request (and cancels it). */
static void test_peer_cancel_by_destroy(void)
{
    struct pair p;
    VIP_VI_ATTRIBUTES ra;
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, VIP_INFINITE), VIP_SUCCESS);
    TRC(VipDestroyVi(p.va), VIP_SUCCESS);
    p.va = NULL;
    TRC(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_SUCCESS);
    TRC_SOFT(VipConnectPeerDone(p.vb, &ra), VIP_NOT_DONE);
    /* a new VI under the old address meets it */
    p.va = new_vi(&p.a, VIP_SERVICE_RELIABLE_DELIVERY);
    TCHK(p.va != NULL);
    TRC(post_recv(&p.a, p.va, 0), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, 20000), VIP_SUCCESS);
    TRC(VipConnectPeerWait(p.vb, &ra), VIP_SUCCESS);
    TRC(VipConnectPeerWait(p.va, &ra), VIP_SUCCESS);
    pair_exchange(&p);
out:
    pair_close(&p);
}

/* A connected peer that disconnects: the other sees the connection lost. */
static void test_peer_disconnect_after_connect(void)
{
    struct pair p;
    VIP_VI_ATTRIBUTES ra;
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, 20000), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_SUCCESS);
    /* b disconnects before it has even collected the connection */
    TRC_SOFT(VipDisconnect(p.vb), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(p.vb), VIP_STATE_IDLE);
    TRC_SOFT(VipConnectPeerDone(p.vb, &ra), VIP_INVALID_STATE);
    TRC(VipConnectPeerDone(p.va, &ra), VIP_SUCCESS);
    /* a's NIC finds the channel closed (asynchronously, like any lost connection) */
    uint64_t end = tl_now_ms() + 5000;
    while (tl_vi_state(p.va) != VIP_STATE_ERROR && tl_now_ms() < end)
        usleep(1000);
    CU_ASSERT_EQUAL(tl_vi_state(p.va), VIP_STATE_ERROR);
    TRC_SOFT(VipDisconnect(p.va), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(p.va), VIP_STATE_IDLE);
out:
    pair_close(&p);
}

static void test_peer_errors(void)
{
    struct pair p;
    VIP_VI_ATTRIBUTES ra;
    uint32_t garbage[64] = {0x56493030u, 1, 2};
    VIP_NET_ADDRESS *foreign = NULL, *absent = NULL;
    TRC(pair_open(&p, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_UNRELIABLE), VIP_SUCCESS);
    foreign = tl_addr(p.a.t.nic, "via1", "f");
    absent = nic_addr(&p.a.t, 7, "f");
    TCHK(foreign && absent);
    tl_host_bytes(foreign)[1] ^= 0x33;
    /* parameters */
    TRC_SOFT(VipConnectPeerRequest(NULL, p.la, p.ra, 1000), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectPeerRequest((VIP_VI_HANDLE)garbage, p.la, p.ra, 1000),
             VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectPeerRequest(p.va, NULL, p.ra, 1000), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectPeerRequest(p.va, p.la, NULL, 1000), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectPeerRequest(p.va, p.la, p.ra, 0), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectPeerRequest(p.va, p.la, absent, 1000), VIP_INVALID_PARAMETER);
    VIP_UINT16 dl = p.la->DiscriminatorLen;
    p.la->DiscriminatorLen = 17;
    TRC_SOFT(VipConnectPeerRequest(p.va, p.la, p.ra, 1000), VIP_INVALID_PARAMETER);
    p.la->DiscriminatorLen = dl;
    TRC_SOFT(VipConnectPeerDone(NULL, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectPeerWait((VIP_VI_HANDLE)garbage, &ra), VIP_INVALID_PARAMETER);
    /* no request */
    TRC_SOFT(VipConnectPeerDone(p.va, &ra), VIP_INVALID_STATE);
    TRC_SOFT(VipConnectPeerWait(p.va, &ra), VIP_INVALID_STATE);
    /* another host */
    TRC_SOFT(VipConnectPeerRequest(p.va, p.la, foreign, 1000), VIP_NOT_REACHABLE);
    CU_ASSERT_EQUAL(tl_vi_state(p.va), VIP_STATE_IDLE);
    /* pending: a second request is refused */
    TRC(VipConnectPeerRequest(p.va, p.la, p.ra, 20000), VIP_SUCCESS);
    TRC_SOFT(VipConnectPeerRequest(p.va, p.la, p.ra, 20000), VIP_INVALID_STATE);
    /* reliability levels differ: the mirror is refused, the first stays pending */
    TRC_SOFT(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_INVALID_RELIABILITY_LEVEL);
    CU_ASSERT_EQUAL(tl_vi_state(p.vb), VIP_STATE_IDLE);
    TRC_SOFT(VipConnectPeerDone(p.va, &ra), VIP_NOT_DONE);
    VIP_VI_ATTRIBUTES fix = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                             .MaxTransferSize = p.b.t.attr.MaxTransferSize, .Ptag = p.b.t.ptag};
    TRC(VipSetViAttributes(p.vb, &fix), VIP_SUCCESS);
    TRC(VipConnectPeerRequest(p.vb, p.lb, p.rb, 20000), VIP_SUCCESS);
    TRC(VipConnectPeerWait(p.va, &ra), VIP_SUCCESS);
    TRC(VipConnectPeerDone(p.vb, &ra), VIP_SUCCESS);
    /* connected: no new request, no destroy */
    TRC_SOFT(VipConnectPeerRequest(p.va, p.la, p.ra, 1000), VIP_INVALID_STATE);
    TRC_SOFT(VipDestroyVi(p.va), VIP_INVALID_STATE);
    pair_exchange(&p);
out:
    free(foreign);
    free(absent);
    pair_close(&p);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_no_match_is_prompt),
        TL_TEST(test_client_before_server),
        TL_TEST(test_matched_request_times_out),
        TL_TEST(test_request_return_order),
        TL_TEST(test_peer_a_first),
        TL_TEST(test_peer_b_first),
        TL_TEST(test_peer_matches_both_addresses),
        TL_TEST(test_peer_many_pairs_at_once),
        TL_TEST(test_peer_wait_woken_by_mirror),
        TL_TEST(test_peer_timeout),
        TL_TEST(test_peer_cancel_by_disconnect),
        TL_TEST(test_peer_cancel_by_destroy),
        TL_TEST(test_peer_disconnect_after_connect),
        TL_TEST(test_peer_errors),
        TL_END,
    };
    return tl_main(argc, argv, "connect", tests);
}

/*
 * test_conf_vi.c - VIPL conformance, chapter "VIs": VipCreateVi,
 * VipDestroyVi, VipQueryVi, and the VI state machine of VIA 1.0: what each
 * call does to a VI that is IDLE, CONNECT_PENDING (a VipConnectRequest in
 * progress on another thread), CONNECTED or in ERROR, the code it returns
 * and the state it leaves (one table, `rules`, checked in every state).
 *
 * Chapter VIs: also covered by test_basic.c: the three reliability levels,
 * MaxTransferSize limits, bad reliability levels, foreign/garbage/NULL
 * ptags, NULL arguments, bad NIC and CQ handles, many VIs; by
 * test_errors.c: a reliable VI in ERROR after a bad descriptor, disconnect
 * flushing queued descriptors, reconnecting after a disconnect, accepting
 * with a VI of another reliability level; by test_multi.c: a request that
 * times out leaves the VI IDLE.
 * Vague points: spec-notes/conformance.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tconf.h"
#include "via_abi.h"

/* ---- VipCreateVi / VipQueryVi ----------------------------------------------------- */

static void test_create_errors(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = VIP_SERVICE_UNRELIABLE, .Ptag = t.ptag};
    int qos;
    a.QoS = &qos; /* VIA 1.0 defines no QoS */
    TERR(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_QOS);
    a.QoS = NULL;
    /* RDMA read where the NIC cannot do it (RDMAReadSupport) */
    CU_ASSERT_FALSE(t.attr.RDMAReadSupport & VIP_SERVICE_UNRELIABLE);
    a.EnableRdmaRead = VIP_TRUE;
    TERR(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_RDMAREAD);
    a.ReliabilityLevel = VIP_SERVICE_RELIABLE_RECEPTION;
    CU_ASSERT_TRUE(t.attr.RDMAReadSupport & VIP_SERVICE_RELIABLE_RECEPTION);
    TRC(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_SUCCESS);
    /* every output of VipQueryVi is optional */
    TRC_SOFT(VipQueryVi(vi, NULL, NULL, NULL, NULL), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES q;
    memset(&q, 0x55, sizeof q);
    TRC_SOFT(VipQueryVi(vi, NULL, &q, NULL, NULL), VIP_SUCCESS);
    CU_ASSERT_EQUAL(q.ReliabilityLevel, VIP_SERVICE_RELIABLE_RECEPTION);
    CU_ASSERT_TRUE(q.EnableRdmaRead);
    CU_ASSERT_FALSE(q.EnableRdmaWrite);
    CU_ASSERT_PTR_NULL(q.QoS);
    CU_ASSERT_PTR_EQUAL(q.Ptag, t.ptag);
    /* MaxTransferSize 0: the NIC's largest */
    CU_ASSERT_EQUAL(q.MaxTransferSize, t.attr.MaxTransferSize);
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    vi = NULL;
    uint32_t garbage[32] = {0x56493030u};
    TERR(VipQueryVi((VIP_VI_HANDLE)garbage, NULL, &q, NULL, NULL), VIP_INVALID_PARAMETER);
    TERR(VipDestroyVi((VIP_VI_HANDLE)garbage), VIP_INVALID_PARAMETER);
out:
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
}

/* ---- the state machine -------------------------------------------------------------- */

enum call { C_POST_SEND, C_POST_RECV, C_REQUEST, C_ACCEPT, C_SET_ATTR, C_QUERY, C_DESTROY, NCALLS };

/* A call that would leave the state (and is tested where the transition
 * is): not made by check_rules. */
#define LEAVES ((VIP_RETURN)-1)

/* What each call returns in each state (indexed by VIP_VI_STATE); the VI
 * stays in that state. VipConnectRequest in IDLE is made with timeout 0 to
 * a discriminator nobody waits on. */
static const struct rule {
    const char *name;
    VIP_RETURN rc[4];
} rules[NCALLS] = {
    /*                          IDLE                CONNECTED           CONNECT_PENDING     ERROR */
    [C_POST_SEND] = {"VipPostSend", {VIP_INVALID_STATE, VIP_SUCCESS, VIP_INVALID_STATE, VIP_SUCCESS}},
    [C_POST_RECV] = {"VipPostRecv", {VIP_SUCCESS, VIP_SUCCESS, VIP_SUCCESS, VIP_SUCCESS}},
    [C_REQUEST] = {"VipConnectRequest",
                   {VIP_NO_MATCH, VIP_INVALID_STATE, VIP_INVALID_STATE, VIP_INVALID_STATE}},
    [C_ACCEPT] = {"VipConnectAccept", {LEAVES, VIP_INVALID_STATE, VIP_INVALID_STATE,
                                       VIP_INVALID_STATE}},
    /* (the VI's own attributes again: allowed in every state; what may
     * change where is test_attr's, spec-notes/vi-attributes.md) */
    [C_SET_ATTR] = {"VipSetViAttributes",
                    {VIP_SUCCESS, VIP_SUCCESS, VIP_SUCCESS, VIP_SUCCESS}},
    [C_QUERY] = {"VipQueryVi", {VIP_SUCCESS, VIP_SUCCESS, VIP_SUCCESS, VIP_SUCCESS}},
    /* (a pending request is cancelled by destroying its VI: test_connect) */
    [C_DESTROY] = {"VipDestroyVi", {LEAVES, VIP_INVALID_STATE, LEAVES, LEAVES}},
};

static const char *const state_name[] = {"IDLE", "CONNECTED", "CONNECT_PENDING", "ERROR"};

struct sm {
    struct tc_pair p;      /* e[0].vi: the VI under test; e[1].vi: its peer */
    VIP_VI_HANDLE offerer; /* a VI of e[1] that offers connections to e[0] */
    char host0[16], host1[16];
    unsigned slot;
    VIP_DESCRIPTOR *sent, *recv; /* what the table posted last */
};

static int sm_open(struct sm *s)
{
    memset(s, 0, sizeof *s);
    if (tc_pair_open(&s->p, "via0", "via1") ||
        tc_pair_vis(&s->p, VIP_SERVICE_RELIABLE_DELIVERY))
        return -1;
    if (tl_vi(&s->p.e[1].t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &s->offerer) !=
        VIP_SUCCESS) {
        s->offerer = NULL;
        CU_FAIL("offering VI");
        return -1;
    }
    tc_dev_name(&s->p.e[0].t, s->host0);
    tc_dev_name(&s->p.e[1].t, s->host1);
    return 0;
}

static void sm_close(struct sm *s)
{
    if (s->offerer)
        VipDestroyVi(s->offerer);
    tc_pair_close(&s->p);
}

/* A connection request offered to e[0] (from the offerer); VipConnectAccept
 * with vi; a refused offer is rejected, and the offerer learns VIP_REJECT. */
static VIP_RETURN accept_offer(struct sm *s, VIP_VI_HANDLE vi)
{
    struct tc_call req;
    char disc[17];
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES ra;
    tl_discrim(disc, "o");
    VIP_NET_ADDRESS *local = tl_addr(s->p.e[0].t.nic, "localhost", disc);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + VIA_MAX_DISCRIM);
    VIP_RETURN rc = VIP_ERROR_RESOURCE;
    if (!local || !remote || tc_call_start(&req, 0, &s->p.e[1].t, s->offerer, s->host0, disc,
                                           10000)) {
        CU_FAIL("offer");
        goto out;
    }
    TRC_SOFT(VipConnectWait(s->p.e[0].t.nic, local, 10000, remote, &ra, &conn), VIP_SUCCESS);
    tc_err_prime();
    rc = VipConnectAccept(conn, vi);
    if (rc != VIP_SUCCESS) {
        CU_ASSERT_TRUE(tc_err_fresh());
        TRC_SOFT(VipConnectReject(conn), VIP_SUCCESS);
        TRC_SOFT(tc_call_join(&req), VIP_REJECT);
    } else {
        TRC_SOFT(tc_call_join(&req), VIP_SUCCESS);
    }
out:
    free(local);
    free(remote);
    return rc;
}

static VIP_RETURN make_call(struct sm *s, enum call c)
{
    VIP_VI_HANDLE vi = s->p.e[0].vi;
    struct tc_end *e = &s->p.e[0];
    VIP_VI_ATTRIBUTES a;
    unsigned k = s->slot++ % 8;
    switch (c) {
    case C_POST_SEND:
        s->sent = tc_desc(e, 16 + k);
        tl_desc_1(s->sent, tc_data(e, 16 + k), 64, e->b.mh);
        return VipPostSend(vi, s->sent, e->b.mh);
    case C_POST_RECV:
        s->recv = tc_desc(e, 24 + k);
        tl_desc_1(s->recv, tc_data(e, 24 + k), 64, e->b.mh);
        return VipPostRecv(vi, s->recv, e->b.mh);
    case C_REQUEST: {
        char disc[17];
        tl_discrim(disc, "nobody");
        return tl_request(&e->t, vi, s->host1, disc, 100);
    }
    case C_ACCEPT:
        return accept_offer(s, vi);
    case C_SET_ATTR:
        if (VipQueryVi(vi, NULL, &a, NULL, NULL) != VIP_SUCCESS)
            return VIP_ERROR_RESOURCE;
        return VipSetViAttributes(vi, &a);
    case C_QUERY: {
        VIP_VI_STATE st;
        VIP_BOOLEAN se, re;
        return VipQueryVi(vi, &st, &a, &se, &re);
    }
    case C_DESTROY:
        return VipDestroyVi(vi);
    default:
        return VIP_ERROR_RESOURCE;
    }
}

/* Make every call of the table in state st; each returns what the table
 * says, a failure with a reason of its own, and the VI stays in st. */
static void check_rules(struct sm *s, VIP_VI_STATE st)
{
    for (unsigned c = 0; c < NCALLS; c++) {
        VIP_RETURN want = rules[c].rc[st];
        if (want == LEAVES)
            continue;
        tc_err_prime();
        VIP_RETURN rc = make_call(s, (enum call)c);
        int fresh = tc_err_fresh();
        VIP_VI_STATE now = tl_vi_state(s->p.e[0].vi);
        if (rc != want || now != st || (rc != VIP_SUCCESS && !fresh))
            fprintf(stderr, "\n  state %s: %s returned %s (expected %s), state after %s (%s)\n",
                    state_name[st], rules[c].name, vip_strerror(rc), vip_strerror(want),
                    (unsigned)now < 4 ? state_name[now] : "?", vip_last_error());
        CU_ASSERT_EQUAL(rc, want);
        CU_ASSERT_EQUAL(now, st);
        if (rc != VIP_SUCCESS)
            CU_ASSERT_TRUE(fresh);
    }
}

/* Every descriptor a VI in ERROR takes completes flushed. */
static void expect_flushed(VIP_VI_HANDLE vi, int recv, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        VIP_DESCRIPTOR *d = tc_wait(vi, recv, 5000);
        CU_ASSERT_PTR_NOT_NULL(d);
        if (d)
            CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, VIP_STATUS_DESC_FLUSHED_ERROR);
    }
}

static void test_state_idle(void)
{
    struct sm s;
    if (sm_open(&s) == 0) {
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_IDLE);
        check_rules(&s, VIP_STATE_IDLE);
        /* VipDisconnect on an idle VI: it stays IDLE, and the receive
         * posted there completes flushed, as on a disconnect in any state */
        TRC_SOFT(VipDisconnect(s.p.e[0].vi), VIP_SUCCESS);
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_IDLE);
        VIP_DESCRIPTOR *d = tc_wait(s.p.e[0].vi, 1, 5000);
        CU_ASSERT_PTR_EQUAL(d, s.recv);
        if (d)
            CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, VIP_STATUS_DESC_FLUSHED_ERROR);
        /* a receive posted while idle is delivered once connected */
        CU_ASSERT_EQUAL(tc_post_recv(&s.p.e[0], 1, 64), VIP_SUCCESS);
        if (tc_pair_connect(&s.p) == 0) {
            CU_ASSERT_EQUAL(tc_post_send(&s.p.e[1], 0, 64, 7), VIP_SUCCESS);
            d = tc_wait(s.p.e[0].vi, 1, 5000);
            CU_ASSERT_PTR_EQUAL(d, tc_desc(&s.p.e[0], 1));
            if (d)
                CU_ASSERT_EQUAL(tl_verify(tc_data(&s.p.e[0], 1), 64, 7), -1);
        }
    }
    sm_close(&s);
}

/* A peer-to-peer request of e[0] to e[1] (discriminators d0 -> d1),
 * pending until e[1] mirrors it or the timeout. */
static VIP_RETURN peer_request(struct sm *s, int side, const char *mine, const char *theirs,
                               VIP_ULONG timeout)
{
    struct tc_end *e = &s->p.e[side];
    VIP_NET_ADDRESS *local = tl_addr(e->t.nic, side ? s->host1 : s->host0, mine);
    VIP_NET_ADDRESS *remote = tl_addr(e->t.nic, side ? s->host0 : s->host1, theirs);
    VIP_RETURN rc = VIP_ERROR_RESOURCE;
    if (local && remote)
        rc = VipConnectPeerRequest(e->vi, local, remote, timeout);
    free(local);
    free(remote);
    return rc;
}

/* A VI with a connection request pending (VipConnectPeerRequest, no
 * mirror yet: it stays pending; a client's VipConnectRequest is pending
 * only between its match and the server's answer). */
static void test_state_pending(void)
{
    struct sm s;
    char d0[17], d1[17];
    tl_discrim(d0, "p0");
    tl_discrim(d1, "p1");
    VIP_VI_ATTRIBUTES ra;
    if (sm_open(&s) == 0 && peer_request(&s, 0, d0, d1, 20000) == VIP_SUCCESS) {
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_CONNECT_PENDING);
        check_rules(&s, VIP_STATE_CONNECT_PENDING);
        /* the mirror comes: CONNECTED, and the receive posted while
         * pending takes the first message */
        TRC_SOFT(peer_request(&s, 1, d1, d0, 20000), VIP_SUCCESS);
        TRC_SOFT(VipConnectPeerWait(s.p.e[0].vi, &ra), VIP_SUCCESS);
        TRC_SOFT(VipConnectPeerWait(s.p.e[1].vi, &ra), VIP_SUCCESS);
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_CONNECTED);
        CU_ASSERT_EQUAL(tc_post_send(&s.p.e[1], 0, 64, 8), VIP_SUCCESS);
        VIP_DESCRIPTOR *d = tc_wait(s.p.e[0].vi, 1, 5000);
        CU_ASSERT_PTR_EQUAL(d, s.recv);
    }
    sm_close(&s);
}

/* VipDisconnect of a pending VI withdraws its request: IDLE at once, and
 * the mirror that comes later finds nothing to meet. */
static void test_state_pending_disconnect(void)
{
    struct sm s;
    char d0[17], d1[17];
    tl_discrim(d0, "w0");
    tl_discrim(d1, "w1");
    VIP_VI_ATTRIBUTES ra;
    if (sm_open(&s) == 0 && peer_request(&s, 0, d0, d1, 20000) == VIP_SUCCESS) {
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_CONNECT_PENDING);
        uint64_t t0 = tl_now_ms();
        TRC_SOFT(VipDisconnect(s.p.e[0].vi), VIP_SUCCESS);
        CU_ASSERT(tl_now_ms() - t0 < 5000);
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_IDLE);
        /* nobody can take the withdrawn request */
        TRC_SOFT(peer_request(&s, 1, d1, d0, 300), VIP_SUCCESS);
        TERR(VipConnectPeerWait(s.p.e[1].vi, &ra), VIP_TIMEOUT);
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[1].vi), VIP_STATE_IDLE);
        /* and the VI can request again */
        if (tc_pair_connect(&s.p) == 0)
            CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_CONNECTED);
    }
    sm_close(&s);
}

static void test_state_connected(void)
{
    struct sm s;
    if (sm_open(&s) == 0 && tc_pair_connect(&s.p) == 0) {
        CU_ASSERT_EQUAL(tc_post_recv(&s.p.e[1], 0, 64), VIP_SUCCESS);
        check_rules(&s, VIP_STATE_CONNECTED);
        /* the send the table posted arrived */
        VIP_DESCRIPTOR *d = tc_wait(s.p.e[1].vi, 1, 5000);
        CU_ASSERT_PTR_EQUAL(d, tc_desc(&s.p.e[1], 0));
        d = tc_wait(s.p.e[0].vi, 0, 5000);
        CU_ASSERT_PTR_EQUAL(d, s.sent);
        if (d)
            CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
        /* VipDisconnect: IDLE here, ERROR at the peer */
        TRC_SOFT(VipDisconnect(s.p.e[0].vi), VIP_SUCCESS);
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_IDLE);
        CU_ASSERT_EQUAL(tc_wait_state(s.p.e[1].vi, VIP_STATE_ERROR, 5000), 0);
        /* the receive the table posted completes flushed */
        expect_flushed(s.p.e[0].vi, 1, 1);
    }
    sm_close(&s);
}

static int to_error(struct sm *s)
{
    if (tc_pair_connect(&s->p))
        return -1;
    if (VipDisconnect(s->p.e[1].vi) != VIP_SUCCESS ||
        tc_wait_state(s->p.e[0].vi, VIP_STATE_ERROR, 5000)) {
        CU_FAIL("peer disconnect did not put the VI in ERROR");
        return -1;
    }
    return 0;
}

static void test_state_error(void)
{
    struct sm s;
    if (sm_open(&s) == 0 && to_error(&s) == 0) {
        check_rules(&s, VIP_STATE_ERROR);
        /* what the table posted completes flushed */
        expect_flushed(s.p.e[0].vi, 0, 1);
        expect_flushed(s.p.e[0].vi, 1, 1);
        /* VipDisconnect: IDLE, and the VI can connect again */
        TRC_SOFT(VipDisconnect(s.p.e[0].vi), VIP_SUCCESS);
        CU_ASSERT_EQUAL(tl_vi_state(s.p.e[0].vi), VIP_STATE_IDLE);
        if (tc_pair_connect(&s.p) == 0) {
            CU_ASSERT_EQUAL(tc_post_recv(&s.p.e[1], 1, 64), VIP_SUCCESS);
            CU_ASSERT_EQUAL(tc_post_send(&s.p.e[0], 2, 64, 9), VIP_SUCCESS);
            VIP_DESCRIPTOR *d = tc_wait(s.p.e[1].vi, 1, 5000);
            CU_ASSERT_PTR_EQUAL(d, tc_desc(&s.p.e[1], 1));
            if (d)
                CU_ASSERT_EQUAL(tl_verify(tc_data(&s.p.e[1], 1), 64, 9), -1);
        }
    }
    sm_close(&s);
}

/* A VI in ERROR may be destroyed without a disconnect. */
static void test_state_error_destroy(void)
{
    struct sm s;
    if (sm_open(&s) == 0 && to_error(&s) == 0) {
        CU_ASSERT_EQUAL(tc_post_recv(&s.p.e[0], 0, 64), VIP_SUCCESS);
        TRC_SOFT(VipDestroyVi(s.p.e[0].vi), VIP_SUCCESS);
        s.p.e[0].vi = NULL;
    }
    sm_close(&s);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_create_errors),
        TL_TEST(test_state_idle),
        TL_TEST(test_state_pending),
        TL_TEST(test_state_pending_disconnect),
        TL_TEST(test_state_connected),
        TL_TEST(test_state_error),
        TL_TEST(test_state_error_destroy),
        TL_END,
    };
    return tl_main(argc, argv, "conf_vi", tests);
}

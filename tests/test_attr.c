/*
 * test_attr.c - VipSetViAttributes and VipSetMemAttributes: what may change
 * in which VI state (spec-notes/vi-attributes.md), that the NIC acts on the
 * new values (a lowered MaxTransferSize refuses a longer send, a region
 * moved to another ptag fails the VI's sends from it, RDMA enables reach
 * the TPT), and every error return with its reason in vip_last_error().
 * The peer, where one is needed, is the echo child of tests/lib/techo.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/techo.h"
#include "lib/tlib.h"

/* rc and a reason naming `why` (NULL: any reason). */
#define TRC_WHY(call, expect, why)                                                        \
    do {                                                                                  \
        TRC_SOFT(call, expect);                                                           \
        const char *tw_ = (why);                                                          \
        if (tw_ && !strstr(vip_last_error(), tw_)) {                                      \
            fprintf(stderr, "\n  %s:%d: reason \"%s\" does not name \"%s\"\n", __FILE__,  \
                    __LINE__, vip_last_error(), tw_);                                     \
            CU_FAIL("reason");                                                            \
        }                                                                                 \
    } while (0)

static int same_attr(const VIP_VI_ATTRIBUTES *a, const VIP_VI_ATTRIBUTES *b)
{
    return a->ReliabilityLevel == b->ReliabilityLevel &&
           a->MaxTransferSize == b->MaxTransferSize && a->Ptag == b->Ptag &&
           !a->EnableRdmaWrite == !b->EnableRdmaWrite &&
           !a->EnableRdmaRead == !b->EnableRdmaRead;
}

static VIP_VI_ATTRIBUTES query(VIP_VI_HANDLE vi)
{
    VIP_VI_ATTRIBUTES a;
    memset(&a, 0xa5, sizeof a);
    if (VipQueryVi(vi, NULL, &a, NULL, NULL) != VIP_SUCCESS)
        CU_FAIL("VipQueryVi");
    return a;
}

/* Every refused value, on a VI in any state: the code, a reason, and the
 * VI's attributes unchanged. */
static void refused_values(struct tl_nic *t, struct tl_nic *other, VIP_VI_HANDLE vi)
{
    VIP_VI_ATTRIBUTES cur = query(vi), a;
    uint32_t garbage[32] = {1, 2, 3};
    static const VIP_RELIABILITY_LEVEL bad_levels[] = {0, 3, 5, 6, 7, 8, 0x10, 0xFFFF};
    for (unsigned i = 0; i < sizeof bad_levels / sizeof *bad_levels; i++) {
        a = cur;
        a.ReliabilityLevel = bad_levels[i];
        TRC_WHY(VipSetViAttributes(vi, &a), VIP_INVALID_RELIABILITY_LEVEL, "reliability");
    }
    a = cur;
    a.MaxTransferSize = t->attr.MaxTransferSize + 1;
    TRC_WHY(VipSetViAttributes(vi, &a), VIP_INVALID_MTU, "max transfer size");
    a.MaxTransferSize = 1ul << 40;
    TRC_WHY(VipSetViAttributes(vi, &a), VIP_INVALID_MTU, "max transfer size");
    VIP_PROTECTION_HANDLE bad_ptags[3] = {other->ptag, garbage, NULL};
    for (unsigned i = 0; i < 3; i++) {
        a = cur;
        a.Ptag = bad_ptags[i];
        TRC_WHY(VipSetViAttributes(vi, &a), VIP_INVALID_PTAG, "Ptag");
    }
    a = cur;
    a.QoS = garbage;
    TRC_WHY(VipSetViAttributes(vi, &a), VIP_INVALID_QOS, "QoS");
    /* RDMA read where the NIC reports no support for it (RDMAReadSupport) */
    static const VIP_RELIABILITY_LEVEL levels[3] = {
        VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned i = 0; i < 3; i++) {
        if (t->attr.RDMAReadSupport & levels[i])
            continue;
        a = cur;
        a.ReliabilityLevel = levels[i];
        a.EnableRdmaRead = VIP_TRUE;
        TRC_WHY(VipSetViAttributes(vi, &a), VIP_INVALID_RDMAREAD, "RdmaRead");
    }
    TRC_WHY(VipSetViAttributes(vi, NULL), VIP_INVALID_PARAMETER, "NULL");
    TRC_WHY(VipSetViAttributes(NULL, &cur), VIP_INVALID_PARAMETER, "not a VI");
    TRC_WHY(VipSetViAttributes((VIP_VI_HANDLE)garbage, &cur), VIP_INVALID_PARAMETER, "not a VI");
    VIP_VI_ATTRIBUTES after = query(vi);
    CU_ASSERT_TRUE(same_attr(&after, &cur));
}

/* ---- an Idle VI: everything may change -------------------------------------------------- */
static void test_set_vi_idle(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_PROTECTION_HANDLE p2 = NULL;
    VIP_VI_HANDLE vi = NULL;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_open(&u, "via0"), VIP_SUCCESS);
    TRC(VipCreatePtag(t.nic, &p2), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    static const VIP_RELIABILITY_LEVEL levels[3] = {
        VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_RECEPTION, VIP_SERVICE_RELIABLE_DELIVERY};
    for (unsigned i = 0; i < 3; i++) {
        VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = levels[i], .MaxTransferSize = 1000u << i,
                               .Ptag = i % 2 ? p2 : t.ptag, .EnableRdmaWrite = i % 2};
        TRC_SOFT(VipSetViAttributes(vi, &a), VIP_SUCCESS);
        VIP_VI_ATTRIBUTES q = query(vi);
        CU_ASSERT_TRUE(same_attr(&q, &a));
    }
    /* 0 asks for the NIC's largest transfer */
    VIP_VI_ATTRIBUTES a = query(vi);
    a.MaxTransferSize = 0;
    TRC_SOFT(VipSetViAttributes(vi, &a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(query(vi).MaxTransferSize, t.attr.MaxTransferSize);
    /* p2 is no longer the VI's: it may go; the VI's ptag may not */
    a.Ptag = t.ptag;
    TRC_SOFT(VipSetViAttributes(vi, &a), VIP_SUCCESS);
    TRC_SOFT(VipDestroyPtag(t.nic, p2), VIP_SUCCESS);
    p2 = NULL;
    TRC_SOFT(VipDestroyPtag(t.nic, t.ptag), VIP_ERROR_RESOURCE);
    refused_values(&t, &u, vi);
out:
    if (vi)
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    if (p2)
        VipDestroyPtag(t.nic, p2);
    tl_close(&u);
    tl_close(&t);
}

/* ---- a connected VI, then one in error, then Idle again --------------------------------- */
struct conn {
    struct tl_nic t, u;
    struct tl_buf b;
    VIP_PROTECTION_HANDLE p2;
    VIP_VI_HANDLE vi;
    struct techo e;
};
#define CDESC(c, i) ((VIP_DESCRIPTOR *)(void *)((c)->b.p + 64u * (i)))
#define CDATA(c, i) ((c)->b.p + 4096u + 16384u * (i))

static void conn_init(struct conn *c)
{
    memset(c, 0, sizeof *c);
    c->e.child.pid = -1;
    c->e.child.rep = c->e.child.to_child = c->e.child.to_parent = -1;
}

/* Our VI (unreliable: a refused send harms only itself) connected to the
 * echo child. */
static VIP_RETURN conn_up(struct conn *c)
{
    VIP_RETURN rc;
    conn_init(c);
    if (techo_start(&c->e, "via1", VIP_SERVICE_UNRELIABLE) != 0)
        return VIP_ERROR_RESOURCE;
    if ((rc = tl_open(&c->t, "via0")) != VIP_SUCCESS || (rc = tl_open(&c->u, "via0")) ||
        (rc = VipCreatePtag(c->t.nic, &c->p2)) != VIP_SUCCESS ||
        (rc = tl_buf_alloc(&c->t, &c->b, 4096u + 16384u * 4)) != VIP_SUCCESS ||
        (rc = tl_vi(&c->t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &c->vi)) != VIP_SUCCESS)
        return rc;
    return tl_request(&c->t, c->vi, "via1", c->e.disc, 20000);
}

static void conn_down(struct conn *c)
{
    int up = c->vi && tl_vi_state(c->vi) == VIP_STATE_CONNECTED;
    techo_stop(&c->e, up ? c->vi : NULL, CDESC(c, 63), c->b.mh);
    if (c->vi) {
        VipDisconnect(c->vi);
        TRC_SOFT(VipDestroyVi(c->vi), VIP_SUCCESS);
    }
    tl_buf_free(&c->b);
    tl_close(&c->u);
    tl_close(&c->t);
}

/* Send len bytes (from data slot 1, handle mh) and take the echo; the
 * send's status (0: DONE without error and the echo came back intact). */
static uint32_t round_trip(struct conn *c, uint32_t len, VIP_MEM_HANDLE mh, uint32_t seq)
{
    VIP_DESCRIPTOR *rd = CDESC(c, 0), *sd = CDESC(c, 1), *d;
    tl_desc_1(rd, CDATA(c, 0), 16384, c->b.mh);
    if (VipPostRecv(c->vi, rd, c->b.mh) != VIP_SUCCESS)
        return ~0u;
    tl_fill(CDATA(c, 1), len, seq);
    tl_desc_1(sd, CDATA(c, 1), len, mh);
    if (VipPostSend(c->vi, sd, c->b.mh) != VIP_SUCCESS || VipSendWait(c->vi, 10000, &d) ||
        d != sd)
        return ~0u;
    uint32_t st = d->CS.Status & ~(uint32_t)VIP_STATUS_OP_MASK;
    if (st != VIP_STATUS_DONE)
        return st; /* nothing went: the receive stays posted for the next message */
    if (VipRecvWait(c->vi, 10000, &d) != VIP_SUCCESS || d != rd ||
        (d->CS.Status & VIP_STATUS_ERROR_MASK) || d->CS.Length != len ||
        tl_verify(CDATA(c, 0), len, seq) != -1)
        return ~1u;
    return 0;
}

static void test_set_vi_connected(void)
{
    struct conn c;
    conn_init(&c);
    TRC(conn_up(&c), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES cur = query(c.vi), a;
    /* the attributes as they are: no change, allowed in any state */
    TRC_SOFT(VipSetViAttributes(c.vi, &cur), VIP_SUCCESS);
    /* the reliability level and the ptag only while Idle */
    a = cur;
    a.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
    TRC_WHY(VipSetViAttributes(c.vi, &a), VIP_INVALID_STATE, "ReliabilityLevel changes only");
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "CONNECTED"));
    a = cur;
    a.Ptag = c.p2;
    TRC_WHY(VipSetViAttributes(c.vi, &a), VIP_INVALID_STATE, "Ptag changes only");
    /* a value no VI may have is refused as such, whatever the state */
    refused_values(&c.t, &c.u, c.vi);
    /* MaxTransferSize: the NIC checks each send against the new value */
    CU_ASSERT_EQUAL(round_trip(&c, 5000, c.b.mh, 1), 0);
    a = cur;
    a.MaxTransferSize = 4096;
    TRC_SOFT(VipSetViAttributes(c.vi, &a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(query(c.vi).MaxTransferSize, 4096);
    CU_ASSERT_EQUAL(round_trip(&c, 4096, c.b.mh, 2), 0);
    CU_ASSERT_EQUAL(round_trip(&c, 4097, c.b.mh, 3), VIP_STATUS_DONE | VIP_STATUS_LENGTH_ERROR);
    CU_ASSERT_EQUAL(tl_vi_state(c.vi), VIP_STATE_CONNECTED); /* unreliable: the VI is fine */
    a.MaxTransferSize = 16384;
    TRC_SOFT(VipSetViAttributes(c.vi, &a), VIP_SUCCESS);
    /* (the receive posted for message 3 is still there: 4 takes it) */
    VIP_DESCRIPTOR *d;
    tl_fill(CDATA(&c, 1), 9000, 4);
    tl_desc_1(CDESC(&c, 1), CDATA(&c, 1), 9000, c.b.mh);
    TRC(VipPostSend(c.vi, CDESC(&c, 1), c.b.mh), VIP_SUCCESS);
    TRC(VipSendWait(c.vi, 10000, &d), VIP_SUCCESS);
    CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    TRC(VipRecvWait(c.vi, 10000, &d), VIP_SUCCESS);
    CU_ASSERT_EQUAL(d->CS.Length, 9000);
    CU_ASSERT_EQUAL(tl_verify(CDATA(&c, 0), 9000, 4), -1);
    /* the RDMA enables are looked at per message: they may change now */
    a.EnableRdmaWrite = VIP_TRUE;
    TRC_SOFT(VipSetViAttributes(c.vi, &a), VIP_SUCCESS);
    CU_ASSERT_TRUE(query(c.vi).EnableRdmaWrite);
    a.EnableRdmaWrite = VIP_FALSE;
    TRC_SOFT(VipSetViAttributes(c.vi, &a), VIP_SUCCESS);
    CU_ASSERT_FALSE(query(c.vi).EnableRdmaWrite);
    /* The peer goes: our VI is in error. Still no reliability change;
     * the transfer size may change. */
    techo_stop(&c.e, c.vi, CDESC(&c, 63), c.b.mh);
    uint64_t until = tl_now_ms() + 10000;
    while (tl_vi_state(c.vi) != VIP_STATE_ERROR && tl_now_ms() < until)
        (void)VipRecvDone(c.vi, &d); /* lends the NIC a CPU */
    TCHK(tl_vi_state(c.vi) == VIP_STATE_ERROR);
    a = query(c.vi);
    a.ReliabilityLevel = VIP_SERVICE_RELIABLE_RECEPTION;
    TRC_WHY(VipSetViAttributes(c.vi, &a), VIP_INVALID_STATE, "ERROR");
    a = query(c.vi);
    a.MaxTransferSize = 2048;
    TRC_SOFT(VipSetViAttributes(c.vi, &a), VIP_SUCCESS);
    /* Idle again: everything may change */
    TRC(VipDisconnect(c.vi), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(c.vi), VIP_STATE_IDLE);
    a.ReliabilityLevel = VIP_SERVICE_RELIABLE_RECEPTION;
    a.Ptag = c.p2;
    TRC_SOFT(VipSetViAttributes(c.vi, &a), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES q = query(c.vi);
    CU_ASSERT_TRUE(same_attr(&q, &a));
out:
    conn_down(&c);
}

/* ---- a VI whose connection request is in flight: nothing changes ------------------------ */

/* A peer-to-peer request nobody mirrors keeps the VI CONNECT_PENDING until
 * its timeout. */
static void test_set_vi_pending(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_NET_ADDRESS *local = NULL, *remote = NULL;
    char d0[17], d1[17];
    tl_discrim(d0, "a0");
    tl_discrim(d1, "a1"); /* nobody requests the mirror */
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    local = tl_addr(t.nic, "via0", d0);
    remote = tl_addr(t.nic, "via1", d1);
    TCHK(local && remote);
    TRC(VipConnectPeerRequest(vi, local, remote, 400), VIP_SUCCESS);
    TCHK(tl_vi_state(vi) == VIP_STATE_CONNECT_PENDING);
    VIP_VI_ATTRIBUTES cur = query(vi), a = cur, ra;
    a.MaxTransferSize = 1024;
    TRC_SOFT(VipSetViAttributes(vi, &a), VIP_INVALID_STATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "PENDING"));
    TRC_SOFT(VipSetViAttributes(vi, &cur), VIP_SUCCESS);
    /* the request times out: Idle again, and the change is allowed */
    TRC_SOFT(VipConnectPeerWait(vi, &ra), VIP_TIMEOUT);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_IDLE);
    TRC_SOFT(VipSetViAttributes(vi, &a), VIP_SUCCESS);
out:
    free(local);
    free(remote);
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
}

/* ---- memory attributes ------------------------------------------------------------------ */
static VIP_MEM_ATTRIBUTES mem_query(VIP_NIC_HANDLE nic, void *p, VIP_MEM_HANDLE mh)
{
    VIP_MEM_ATTRIBUTES m;
    memset(&m, 0xa5, sizeof m);
    if (VipQueryMem(nic, p, mh, &m) != VIP_SUCCESS)
        CU_FAIL("VipQueryMem");
    return m;
}

static void test_set_mem(void)
{
    struct conn c;
    struct tl_buf r = {0}, gone = {0};
    uint32_t garbage[32] = {1, 2, 3};
    conn_init(&c);
    TRC(conn_up(&c), VIP_SUCCESS);
    /* a data region of its own, ptag A (the VI's) */
    TRC(tl_buf_alloc(&c.t, &r, 16384), VIP_SUCCESS);
    tl_fill(r.p, 3000, 7);
    VIP_DESCRIPTOR *rd = CDESC(&c, 0), *sd = CDESC(&c, 1), *d;
    /* sends from r: fine, then refused once r is ptag B's, then fine again */
    for (unsigned step = 0; step < 3; step++) {
        VIP_MEM_ATTRIBUTES m = {.Ptag = step == 1 ? c.p2 : c.t.ptag};
        TRC_SOFT(VipSetMemAttributes(c.t.nic, r.p, r.mh, &m), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(mem_query(c.t.nic, r.p, r.mh).Ptag, m.Ptag);
        tl_desc_1(rd, CDATA(&c, 0), 16384, c.b.mh);
        if (step != 1)
            TRC(VipPostRecv(c.vi, rd, c.b.mh), VIP_SUCCESS);
        tl_desc_1(sd, r.p, 3000, r.mh);
        TRC(VipPostSend(c.vi, sd, c.b.mh), VIP_SUCCESS);
        TRC(VipSendWait(c.vi, 10000, &d), VIP_SUCCESS);
        CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK,
                        step == 1 ? VIP_STATUS_PROTECTION_ERROR : 0);
        if (step != 1) {
            TRC(VipRecvWait(c.vi, 10000, &d), VIP_SUCCESS);
            CU_ASSERT_EQUAL(d->CS.Length, 3000);
            CU_ASSERT_EQUAL(tl_verify(CDATA(&c, 0), 3000, 7), -1);
        }
    }
    CU_ASSERT_EQUAL(tl_vi_state(c.vi), VIP_STATE_CONNECTED);
    /* the RDMA enables reach the TPT the NIC reads (VipQueryMem reads it) */
    for (unsigned f = 0; f < 4; f++) {
        VIP_MEM_ATTRIBUTES m = {.Ptag = c.t.ptag, .EnableRdmaWrite = f & 1,
                                .EnableRdmaRead = (f >> 1) & 1};
        TRC_SOFT(VipSetMemAttributes(c.t.nic, r.p, r.mh, &m), VIP_SUCCESS);
        VIP_MEM_ATTRIBUTES q = mem_query(c.t.nic, r.p, r.mh);
        CU_ASSERT_EQUAL(!!q.EnableRdmaWrite, f & 1);
        CU_ASSERT_EQUAL(!!q.EnableRdmaRead, (f >> 1) & 1);
    }
    /* refusals: each with its code and reason, the region unchanged */
    VIP_MEM_ATTRIBUTES ok = {.Ptag = c.t.ptag}, m = ok;
    TRC_SOFT(VipSetMemAttributes(c.t.nic, r.p, r.mh, &ok), VIP_SUCCESS);
    TRC_WHY(VipSetMemAttributes(NULL, r.p, r.mh, &ok), VIP_INVALID_PARAMETER, "not a NIC");
    TRC_WHY(VipSetMemAttributes((VIP_NIC_HANDLE)garbage, r.p, r.mh, &ok), VIP_INVALID_PARAMETER,
            "not a NIC");
    TRC_WHY(VipSetMemAttributes(c.t.nic, r.p, r.mh, NULL), VIP_INVALID_PARAMETER, "NULL");
    VIP_PROTECTION_HANDLE bad_ptags[3] = {c.u.ptag, garbage, NULL};
    for (unsigned i = 0; i < 3; i++) {
        m.Ptag = bad_ptags[i];
        m.EnableRdmaWrite = VIP_TRUE;
        TRC_WHY(VipSetMemAttributes(c.t.nic, r.p, r.mh, &m), VIP_INVALID_PTAG, "Ptag");
    }
    m = ok;
    m.EnableRdmaWrite = VIP_TRUE;
    TRC_WHY(VipSetMemAttributes(c.t.nic, r.p + 64, r.mh, &m), VIP_INVALID_PARAMETER,
            "was registered at");
    TRC_WHY(VipSetMemAttributes(c.t.nic, r.p, 0x12345678u, &m), VIP_INVALID_PARAMETER,
            "is not a registration");
    /* a handle deregistered, and one of another NIC handle (session) */
    TRC(tl_buf_alloc(&c.t, &gone, 4096), VIP_SUCCESS);
    VIP_MEM_HANDLE stale = gone.mh;
    TRC_SOFT(VipDeregisterMem(c.t.nic, gone.p, stale), VIP_SUCCESS);
    gone.nic = NULL; /* tl_buf_free: do not deregister it again */
    TRC_WHY(VipSetMemAttributes(c.t.nic, gone.p, stale, &m), VIP_INVALID_PARAMETER,
            "is not a registration");
    VIP_MEM_ATTRIBUTES mu = {.Ptag = c.u.ptag}; /* a ptag of that session */
    TRC_WHY(VipSetMemAttributes(c.u.nic, r.p, r.mh, &mu), VIP_INVALID_PARAMETER,
            "is not a registration");
    VIP_MEM_ATTRIBUTES q = mem_query(c.t.nic, r.p, r.mh);
    CU_ASSERT_PTR_EQUAL(q.Ptag, c.t.ptag);
    CU_ASSERT_FALSE(q.EnableRdmaWrite);
    CU_ASSERT_FALSE(q.EnableRdmaRead);
    /* a ptag that still has regions cannot go; once they moved away, it can */
    m = (VIP_MEM_ATTRIBUTES){.Ptag = c.p2};
    TRC_SOFT(VipSetMemAttributes(c.t.nic, r.p, r.mh, &m), VIP_SUCCESS);
    TRC_SOFT(VipDestroyPtag(c.t.nic, c.p2), VIP_ERROR_RESOURCE);
    TRC_SOFT(VipSetMemAttributes(c.t.nic, r.p, r.mh, &ok), VIP_SUCCESS);
    TRC_SOFT(VipDestroyPtag(c.t.nic, c.p2), VIP_SUCCESS);
out:
    tl_buf_free(&gone);
    tl_buf_free(&r);
    conn_down(&c);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_set_vi_idle),
        TL_TEST(test_set_vi_connected),
        TL_TEST(test_set_vi_pending),
        TL_TEST(test_set_mem),
        TL_END,
    };
    return tl_main(argc, argv, "attr", tests);
}

/*
 * test_conf_cq.c - VIPL conformance, chapter "completion queues":
 * VipCreateCQ, VipDestroyCQ, VipCQDone, VipCQWait: which work queues
 * complete into a CQ, the order and contents of its entries, entries of a
 * VI destroyed since, and CQ overflow, which VIA 1.0 makes a catastrophic
 * error (what VipCQDone/VipCQWait report after it, what the error
 * callback gets, what becomes of the VIs).
 *
 * Chapter CQ: also covered by test_basic.c: entry counts 0 and NULL
 * arguments, an empty CQ (NOT_DONE, TIMEOUT), a CQ of another session,
 * destroying a CQ a VI uses; test_multi.c: 64 VIs of two processes
 * completing into one send and one receive CQ; test_threads.c: several
 * threads waiting on one CQ; test_progress.c: CQ traffic on every profile.
 * (VipResizeCQ is another chapter's.) Vague points: spec-notes/conformance.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tconf.h"

#define TX(p) (&(p)->e[0])
#define RX(p) (&(p)->e[1])

/* The next CQ entry must name vi and the queue. */
#define CQ_NEXT(cq, vi_, recv_)                                                            \
    do {                                                                                  \
        VIP_VI_HANDLE v_ = NULL;                                                          \
        VIP_BOOLEAN r_ = -1;                                                              \
        TRC(VipCQWait((cq), 5000, &v_, &r_), VIP_SUCCESS);                                \
        CU_ASSERT_PTR_EQUAL(v_, (vi_));                                                   \
        CU_ASSERT_EQUAL(r_, (recv_));                                                     \
    } while (0)

/* Which queues complete into which CQ: a VI with only a send CQ, a VI
 * whose two queues share one; entries in completion order, then the
 * descriptor from the VI the entry names. */
static void test_routing(void)
{
    struct tc_pair p;
    VIP_VI_HANDLE v;
    VIP_BOOLEAN r;
    VIP_DESCRIPTOR *d;
    if (tc_pair_open(&p, "via0", "via1"))
        goto out;
    TRC(VipCreateCQ(TX(&p)->t.nic, 8, &TX(&p)->cq), VIP_SUCCESS);
    TRC(VipCreateCQ(RX(&p)->t.nic, 8, &RX(&p)->cq), VIP_SUCCESS);
    TRC(tl_vi(&TX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, TX(&p)->cq, NULL, &TX(&p)->vi),
        VIP_SUCCESS);
    TRC(tl_vi(&RX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, RX(&p)->cq, RX(&p)->cq, &RX(&p)->vi),
        VIP_SUCCESS);
    if (tc_pair_connect(&p))
        goto out;
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    TRC(tc_post_recv(RX(&p), 1, 100), VIP_SUCCESS);
    TRC(tc_post_recv(TX(&p), 8, 100), VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 1, 20, 2), VIP_SUCCESS);
    /* sender: two send entries, then the descriptors in order */
    CQ_NEXT(TX(&p)->cq, TX(&p)->vi, VIP_FALSE);
    CQ_NEXT(TX(&p)->cq, TX(&p)->vi, VIP_FALSE);
    TRC(VipSendDone(TX(&p)->vi, &d), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(d, tc_desc(TX(&p), 0));
    TRC(VipSendDone(TX(&p)->vi, &d), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(d, tc_desc(TX(&p), 1));
    /* receiver: two receive entries; then its reply's send entry after them */
    CQ_NEXT(RX(&p)->cq, RX(&p)->vi, VIP_TRUE);
    CQ_NEXT(RX(&p)->cq, RX(&p)->vi, VIP_TRUE);
    TRC(tc_post_send(RX(&p), 2, 30, 3), VIP_SUCCESS);
    CQ_NEXT(RX(&p)->cq, RX(&p)->vi, VIP_FALSE);
    for (unsigned i = 0; i < 2; i++) {
        TRC(VipRecvDone(RX(&p)->vi, &d), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(d, tc_desc(RX(&p), i));
        CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), i), 10 * (i + 1), i + 1), -1);
    }
    TRC(VipSendDone(RX(&p)->vi, &d), VIP_SUCCESS);
    /* the sender's receive queue has no CQ: the reply completes on the VI only */
    TCHK(tc_wait(TX(&p)->vi, 1, 5000) == tc_desc(TX(&p), 8));
    TRC_SOFT(VipCQDone(TX(&p)->cq, &v, &r), VIP_NOT_DONE);
    TRC_SOFT(VipCQDone(RX(&p)->cq, &v, &r), VIP_NOT_DONE);
out:
    tc_pair_close(&p);
}

/* Three VIs into one receive CQ: each entry names the VI that completed,
 * in completion order. */
static void test_many_vis(void)
{
    struct tc_pair p;
    enum { N = 3 };
    VIP_VI_HANDLE tv[N] = {0}, rv[N] = {0};
    if (tc_pair_open(&p, "via0", "via1"))
        goto out;
    TRC(VipCreateCQ(RX(&p)->t.nic, 16, &RX(&p)->cq), VIP_SUCCESS);
    for (unsigned i = 0; i < N; i++) {
        TRC(tl_vi(&TX(&p)->t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, NULL, &tv[i]), VIP_SUCCESS);
        TRC(tl_vi(&RX(&p)->t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, RX(&p)->cq, &rv[i]),
            VIP_SUCCESS);
        if (tc_connect(&TX(&p)->t, tv[i], &RX(&p)->t, rv[i]))
            goto out;
        VIP_DESCRIPTOR *rd = tc_desc(RX(&p), i);
        tl_desc_1(rd, tc_data(RX(&p), i), 100, RX(&p)->b.mh);
        TRC(VipPostRecv(rv[i], rd, RX(&p)->b.mh), VIP_SUCCESS);
    }
    /* reliable reception: a send completes once placed at the receiver, so
     * sending one at a time fixes the order the receives complete in */
    static const unsigned order[N] = {2, 0, 1};
    for (unsigned k = 0; k < N; k++) {
        unsigned i = order[k];
        VIP_DESCRIPTOR *sd = tc_desc(TX(&p), i);
        tl_fill(tc_data(TX(&p), i), 50, i);
        tl_desc_1(sd, tc_data(TX(&p), i), 50, TX(&p)->b.mh);
        TRC(VipPostSend(tv[i], sd, TX(&p)->b.mh), VIP_SUCCESS);
        TCHK(tc_wait(tv[i], 0, 5000) == sd);
        CU_ASSERT_EQUAL(sd->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    }
    for (unsigned k = 0; k < N; k++) {
        unsigned i = order[k];
        CQ_NEXT(RX(&p)->cq, rv[i], VIP_TRUE);
        VIP_DESCRIPTOR *d;
        TRC(VipRecvDone(rv[i], &d), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(d, tc_desc(RX(&p), i));
        CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), i), 50, i), -1);
    }
out:
    for (unsigned i = 0; i < N; i++) {
        if (tv[i]) {
            VipDisconnect(tv[i]);
            VipDestroyVi(tv[i]);
        }
        if (rv[i]) {
            VipDisconnect(rv[i]);
            VipDestroyVi(rv[i]);
        }
    }
    tc_pair_close(&p);
}

/* An entry of a VI destroyed before the entry was taken is skipped. */
static void test_entry_of_destroyed_vi(void)
{
    struct tc_pair p;
    VIP_VI_HANDLE t2 = NULL, r2 = NULL, v;
    VIP_BOOLEAN r;
    if (tc_pair_open(&p, "via0", "via1"))
        goto out;
    TRC(VipCreateCQ(RX(&p)->t.nic, 8, &RX(&p)->cq), VIP_SUCCESS);
    TRC(tl_vi(&TX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &TX(&p)->vi), VIP_SUCCESS);
    TRC(tl_vi(&RX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, RX(&p)->cq, &RX(&p)->vi),
        VIP_SUCCESS);
    TRC(tl_vi(&TX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &t2), VIP_SUCCESS);
    TRC(tl_vi(&RX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, RX(&p)->cq, &r2), VIP_SUCCESS);
    if (tc_pair_connect(&p) || tc_connect(&TX(&p)->t, t2, &RX(&p)->t, r2))
        goto out;
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    tl_desc_1(tc_desc(RX(&p), 1), tc_data(RX(&p), 1), 100, RX(&p)->b.mh);
    TRC(VipPostRecv(r2, tc_desc(RX(&p), 1), RX(&p)->b.mh), VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    /* both receives completed (taken from the VIs; the entries stay) */
    TCHK(tc_wait(RX(&p)->vi, 1, 5000) == tc_desc(RX(&p), 0));
    tl_desc_1(tc_desc(TX(&p), 1), tc_data(TX(&p), 1), 10, TX(&p)->b.mh);
    TRC(VipPostSend(t2, tc_desc(TX(&p), 1), TX(&p)->b.mh), VIP_SUCCESS);
    TCHK(tc_wait(r2, 1, 5000) == tc_desc(RX(&p), 1));
    TRC(VipDisconnect(RX(&p)->vi), VIP_SUCCESS);
    TRC(VipDestroyVi(RX(&p)->vi), VIP_SUCCESS);
    RX(&p)->vi = NULL;
    /* (the entry follows the descriptor's status: wait for it) */
    TRC(VipCQWait(RX(&p)->cq, 5000, &v, &r), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(v, r2);
    CU_ASSERT_TRUE(r);
    TRC_SOFT(VipCQDone(RX(&p)->cq, &v, &r), VIP_NOT_DONE);
out:
    if (t2) {
        VipDisconnect(t2);
        VipDestroyVi(t2);
    }
    if (r2) {
        VipDisconnect(r2);
        VipDestroyVi(r2);
    }
    tc_pair_close(&p);
}

/* ---- overflow -------------------------------------------------------------------------- */

/* Send n messages to the receiver and take them from its VI (not the CQ). */
static int burst(struct tc_pair *p, unsigned n, uint32_t seq0)
{
    for (unsigned i = 0; i < n; i++)
        if (tc_post_recv(RX(p), i, 100) != VIP_SUCCESS)
            return -1;
    for (unsigned i = 0; i < n; i++) {
        if (tc_post_send(TX(p), i, 10, seq0 + i) != VIP_SUCCESS ||
            tc_wait(TX(p)->vi, 0, 5000) != tc_desc(TX(p), i))
            return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        VIP_DESCRIPTOR *d = tc_wait(RX(p)->vi, 1, 5000);
        if (d != tc_desc(RX(p), i) || tl_verify(tc_data(RX(p), i), 10, seq0 + i) != -1)
            return -1;
    }
    return 0;
}

/* A CQ of EntryCount 4 holds 4 completions; a fifth is lost, a catastrophic
 * error: the error callback hears of it once (ResourceCode CQ, the CQ's
 * handle), VipCQDone and VipCQWait refuse the CQ from then on; the VIs
 * bound to it are unharmed and still complete on their own queues. */
static void test_overflow(void)
{
    struct tc_pair p;
    struct tc_errlog log;
    VIP_VI_HANDLE v;
    VIP_BOOLEAN r;
    tc_errlog_init(&log);
    /* The NIC writes a CQ entry just after the descriptor's status: with
     * its own thread at work, the test could look between the two and
     * take an entry before the one that overflows is written. Without it,
     * each receive is placed by our own wait, entry and all. */
    setenv("VIP_PROGRESS", "manual", 1);
    int rc = tc_pair_open(&p, "via0", "via1");
    unsetenv("VIP_PROGRESS");
    if (rc)
        goto out;
    TRC(VipErrorCallback(RX(&p)->t.nic, &log, tc_errlog_handler), VIP_SUCCESS);
    TRC(VipCreateCQ(RX(&p)->t.nic, 4, &RX(&p)->cq), VIP_SUCCESS);
    TRC(tl_vi(&TX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &TX(&p)->vi), VIP_SUCCESS);
    TRC(tl_vi(&RX(&p)->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, RX(&p)->cq, &RX(&p)->vi),
        VIP_SUCCESS);
    if (tc_pair_connect(&p))
        goto out;
    /* exactly EntryCount completions fit */
    TCHK(burst(&p, 4, 100) == 0);
    for (unsigned i = 0; i < 4; i++)
        CQ_NEXT(RX(&p)->cq, RX(&p)->vi, VIP_TRUE);
    TRC(VipCQDone(RX(&p)->cq, &v, &r), VIP_NOT_DONE);
    CU_ASSERT_EQUAL(tc_errlog_count(&log), 0);
    /* one more than it holds */
    TCHK(burst(&p, 5, 200) == 0);
    TERR(VipCQDone(RX(&p)->cq, &v, &r), VIP_ERROR_RESOURCE);
    TCHK(tc_errlog_count(&log) == 1);
    VIP_ERROR_DESCRIPTOR *e = &log.e[0];
    CU_ASSERT_EQUAL(e->ErrorCode, VIP_ERROR_CATASTROPHIC);
    CU_ASSERT_EQUAL(e->ResourceCode, VIP_RESOURCE_CQ);
    CU_ASSERT_PTR_EQUAL(e->CQHandle, RX(&p)->cq);
    CU_ASSERT_PTR_EQUAL(e->NicHandle, RX(&p)->t.nic);
    CU_ASSERT_PTR_NULL(e->ViHandle);
    CU_ASSERT_PTR_NULL(e->DescriptorPtr);
    CU_ASSERT(pthread_equal(log.thread[0], pthread_self()));
    /* from now on the CQ is refused, and the callback is not repeated */
    TERR(VipCQDone(RX(&p)->cq, &v, &r), VIP_ERROR_RESOURCE);
    TERR(VipCQWait(RX(&p)->cq, 100, &v, &r), VIP_ERROR_RESOURCE);
    CU_ASSERT_EQUAL(tc_errlog_count(&log), 1);
    /* the VI is unharmed */
    CU_ASSERT_EQUAL(tl_vi_state(RX(&p)->vi), VIP_STATE_CONNECTED);
    CU_ASSERT_EQUAL(burst(&p, 2, 300), 0);
    CU_ASSERT_EQUAL(tc_errlog_count(&log), 1);
out:
    tc_pair_close(&p);
}

/* ---- arguments -------------------------------------------------------------------------- */

static void test_bad_arguments(void)
{
    struct tl_nic t = {0};
    VIP_CQ_HANDLE cq = NULL;
    VIP_VI_HANDLE vi = NULL, v;
    VIP_BOOLEAN r;
    uint32_t garbage[64] = {0x4351};
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TERR(VipCreateCQ(NULL, 4, &cq), VIP_INVALID_PARAMETER);
    TERR(VipCreateCQ((VIP_NIC_HANDLE)garbage, 4, &cq), VIP_INVALID_PARAMETER);
    TERR(VipCreateCQ(t.nic, 0, &cq), VIP_INVALID_PARAMETER);
    TERR(VipCreateCQ(t.nic, 4, NULL), VIP_INVALID_PARAMETER);
    TRC(VipCreateCQ(t.nic, 4, &cq), VIP_SUCCESS);
    TERR(VipCQDone(cq, NULL, &r), VIP_INVALID_PARAMETER);
    TERR(VipCQDone(cq, &v, NULL), VIP_INVALID_PARAMETER);
    TERR(VipCQDone((VIP_CQ_HANDLE)garbage, &v, &r), VIP_INVALID_PARAMETER);
    TERR(VipCQWait(cq, 10, NULL, &r), VIP_INVALID_PARAMETER);
    TERR(VipCQWait(cq, 10, &v, NULL), VIP_INVALID_PARAMETER);
    TERR(VipCQWait(NULL, 10, &v, &r), VIP_INVALID_PARAMETER);
    TERR(VipCQWait(cq, 0, &v, &r), VIP_TIMEOUT);
    TERR(VipCQWait(cq, 20, &v, &r), VIP_TIMEOUT);
    TRC(tl_vi(&t, VIP_SERVICE_UNRELIABLE, cq, cq, &vi), VIP_SUCCESS);
    TERR(VipDestroyCQ(cq), VIP_INVALID_STATE);
    TERR(VipDestroyCQ((VIP_CQ_HANDLE)garbage), VIP_INVALID_PARAMETER);
    TRC(VipDestroyVi(vi), VIP_SUCCESS);
    vi = NULL;
    TRC(VipDestroyCQ(cq), VIP_SUCCESS);
    cq = NULL;
out:
    if (vi)
        VipDestroyVi(vi);
    if (cq)
        VipDestroyCQ(cq);
    tl_close(&t);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_routing),
        TL_TEST(test_many_vis),
        TL_TEST(test_entry_of_destroyed_vi),
        TL_TEST(test_overflow),
        TL_TEST(test_bad_arguments),
        TL_END,
    };
    return tl_main(argc, argv, "conf_cq", tests);
}

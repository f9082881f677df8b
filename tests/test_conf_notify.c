/*
 * test_conf_notify.c - VIPL conformance, chapter "notification":
 * VipSendNotify, VipRecvNotify, VipCQNotify. Each is one-shot: the handler
 * runs once, on a library thread, with the next completion of its queue
 * (which it then owns; a CQ handler gets the VI and queue of the next CQ
 * entry). A handler that re-arms itself sees completions in completion
 * order; a notification pending when its VI or CQ is destroyed never
 * runs; every descriptor goes to exactly one taker, handler or Done.
 *
 * Chapter notification: also covered by test_multi.c: VipRecvNotify
 * between two processes, NULL arguments, a notification of an idle VI
 * that never runs. Vague points: spec-notes/conformance.md.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/tconf.h"

#define TX(p) (&(p)->e[0])
#define RX(p) (&(p)->e[1])

/* ---- what the handlers saw ---------------------------------------------------- */
enum { MAXN = 16 };
struct seen {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned n;
    VIP_NIC_HANDLE nic[MAXN];
    VIP_VI_HANDLE vi[MAXN];
    VIP_DESCRIPTOR *d[MAXN];
    uint32_t status[MAXN];   /* the status word as the handler found it */
    VIP_BOOLEAN recvq[MAXN];
    int recv;                /* descriptor handlers: re-arm on the receive queue */
    VIP_CQ_HANDLE cq;        /* CQ handlers: re-arm on this CQ */
    unsigned rearm;          /* re-arm this many more times */
    VIP_RETURN rearm_rc;
};

static void seen_init(struct seen *s, int recv, unsigned rearm)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->recv = recv;
    s->rearm = rearm;
}

static void seen_fini(struct seen *s)
{
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}

static unsigned seen_count(struct seen *s)
{
    pthread_mutex_lock(&s->lock);
    unsigned n = s->n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Wait (bounded) until the handlers ran n times; the count then. */
static unsigned seen_wait(struct seen *s, unsigned n, int ms)
{
    uint64_t until = tl_now_ms() + (uint64_t)ms;
    pthread_mutex_lock(&s->lock);
    while (s->n < n && tl_now_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    unsigned got = s->n;
    pthread_mutex_unlock(&s->lock);
    return got;
}

static void on_desc(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
    struct seen *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (s->n < MAXN) {
        s->nic[s->n] = nic;
        s->vi[s->n] = vi;
        s->d[s->n] = d;
        s->status[s->n] = d ? d->CS.Status : 0;
    }
    s->n++;
    int again = s->rearm > 0;
    if (again)
        s->rearm--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (again) {
        VIP_RETURN rc = s->recv ? VipRecvNotify(vi, s, on_desc) : VipSendNotify(vi, s, on_desc);
        if (rc != VIP_SUCCESS)
            s->rearm_rc = rc;
    }
}

static void on_cq(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_BOOLEAN recvq)
{
    struct seen *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (s->n < MAXN) {
        s->nic[s->n] = nic;
        s->vi[s->n] = vi;
        s->recvq[s->n] = recvq;
    }
    s->n++;
    int again = s->rearm > 0;
    if (again)
        s->rearm--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (again) {
        VIP_RETURN rc = VipCQNotify(s->cq, s, on_cq);
        if (rc != VIP_SUCCESS)
            s->rearm_rc = rc;
    }
}

static int pair(struct tc_pair *p, VIP_RELIABILITY_LEVEL rel)
{
    if (tc_pair_open(p, "via0", "via1") || tc_pair_vis(p, rel))
        return -1;
    return tc_pair_connect(p);
}

/* ---- one-shot ---------------------------------------------------------------------- */

/* The handler runs once, with the first completion, which it owns (Done
 * no longer returns it); the second completion stays for Done/Wait. */
static void one_shot(int recv)
{
    struct tc_pair p;
    struct seen s;
    seen_init(&s, recv, 0);
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    struct tc_end *e = recv ? RX(&p) : TX(&p);
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    TRC(tc_post_recv(RX(&p), 1, 100), VIP_SUCCESS);
    TRC(recv ? VipRecvNotify(e->vi, &s, on_desc) : VipSendNotify(e->vi, &s, on_desc),
        VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 1, 20, 2), VIP_SUCCESS);
    TCHK(seen_wait(&s, 1, 5000) == 1);
    CU_ASSERT_PTR_EQUAL(s.nic[0], e->t.nic);
    CU_ASSERT_PTR_EQUAL(s.vi[0], e->vi);
    CU_ASSERT_PTR_EQUAL(s.d[0], tc_desc(e, 0));
    CU_ASSERT_EQUAL(s.status[0], VIP_STATUS_DONE | (recv ? VIP_STATUS_OP_RECEIVE : 0));
    if (recv)
        CU_ASSERT_EQUAL(tl_verify(tc_data(e, 0), 10, 1), -1);
    /* the second is ours: the notification is spent */
    VIP_DESCRIPTOR *d = tc_wait(e->vi, recv, 5000);
    CU_ASSERT_PTR_EQUAL(d, tc_desc(e, 1));
    TRC_SOFT(recv ? VipRecvDone(e->vi, &d) : VipSendDone(e->vi, &d), VIP_NOT_DONE);
    CU_ASSERT_EQUAL(seen_count(&s), 1);
out:
    tc_pair_close(&p);
    CU_ASSERT_EQUAL(seen_count(&s), 1);
    seen_fini(&s);
}

static void test_recv_one_shot(void)
{
    one_shot(1);
}

static void test_send_one_shot(void)
{
    one_shot(0);
}

/* ---- order ----------------------------------------------------------------------------- */

/* A handler that re-arms itself sees every completion, in order. */
static void rearmed(int recv)
{
    struct tc_pair p;
    struct seen s;
    enum { N = 6 };
    seen_init(&s, recv, N - 1);
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    struct tc_end *e = recv ? RX(&p) : TX(&p);
    for (unsigned i = 0; i < N; i++)
        TRC(tc_post_recv(RX(&p), i, 100), VIP_SUCCESS);
    TRC(recv ? VipRecvNotify(e->vi, &s, on_desc) : VipSendNotify(e->vi, &s, on_desc),
        VIP_SUCCESS);
    for (unsigned i = 0; i < N; i++)
        TRC(tc_post_send(TX(&p), i, 10 + i, 40 + i), VIP_SUCCESS);
    TCHK(seen_wait(&s, N, 5000) == N);
    CU_ASSERT_EQUAL(s.rearm_rc, VIP_SUCCESS);
    for (unsigned i = 0; i < N; i++) {
        CU_ASSERT_PTR_EQUAL(s.d[i], tc_desc(e, i));
        CU_ASSERT_EQUAL(s.status[i] & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK), VIP_STATUS_DONE);
        if (recv)
            CU_ASSERT_EQUAL(tl_verify(tc_data(e, i), 10 + i, 40 + i), -1);
    }
out:
    tc_pair_close(&p);
    CU_ASSERT_EQUAL(seen_count(&s), N);
    seen_fini(&s);
}

static void test_recv_order(void)
{
    rearmed(1);
}

static void test_send_order(void)
{
    rearmed(0);
}

/* VipCQNotify with completions on two VIs: the handler gets (VI, queue) of
 * each CQ entry in completion order; the descriptors stay on the VIs. */
static void test_cq_two_vis(void)
{
    struct tc_pair p;
    struct seen s;
    VIP_VI_HANDLE t2 = NULL, r2 = NULL;
    seen_init(&s, 1, 2);
    if (tc_pair_open(&p, "via0", "via1"))
        goto out;
    TRC(VipCreateCQ(RX(&p)->t.nic, 8, &RX(&p)->cq), VIP_SUCCESS);
    s.cq = RX(&p)->cq;
    TRC(tl_vi(&TX(&p)->t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, NULL, &TX(&p)->vi), VIP_SUCCESS);
    TRC(tl_vi(&RX(&p)->t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, RX(&p)->cq, &RX(&p)->vi),
        VIP_SUCCESS);
    TRC(tl_vi(&TX(&p)->t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, NULL, &t2), VIP_SUCCESS);
    TRC(tl_vi(&RX(&p)->t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, RX(&p)->cq, &r2), VIP_SUCCESS);
    if (tc_pair_connect(&p) || tc_connect(&TX(&p)->t, t2, &RX(&p)->t, r2))
        goto out;
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    TRC(tc_post_recv(RX(&p), 1, 100), VIP_SUCCESS);
    tl_desc_1(tc_desc(RX(&p), 2), tc_data(RX(&p), 2), 100, RX(&p)->b.mh);
    TRC(VipPostRecv(r2, tc_desc(RX(&p), 2), RX(&p)->b.mh), VIP_SUCCESS);
    TRC(VipCQNotify(RX(&p)->cq, &s, on_cq), VIP_SUCCESS);
    /* r2, then the pair's VI twice: reliable reception completes a send
     * once placed, so one at a time fixes the order */
    tl_desc_1(tc_desc(TX(&p), 9), tc_data(TX(&p), 9), 8, TX(&p)->b.mh);
    TRC(VipPostSend(t2, tc_desc(TX(&p), 9), TX(&p)->b.mh), VIP_SUCCESS);
    TCHK(tc_wait(t2, 0, 5000) == tc_desc(TX(&p), 9));
    for (unsigned i = 0; i < 2; i++) {
        TRC(tc_post_send(TX(&p), i, 8, i), VIP_SUCCESS);
        TCHK(tc_wait(TX(&p)->vi, 0, 5000) == tc_desc(TX(&p), i));
    }
    TCHK(seen_wait(&s, 3, 5000) == 3);
    CU_ASSERT_EQUAL(s.rearm_rc, VIP_SUCCESS);
    VIP_VI_HANDLE want[3] = {r2, RX(&p)->vi, RX(&p)->vi};
    for (unsigned i = 0; i < 3; i++) {
        CU_ASSERT_PTR_EQUAL(s.vi[i], want[i]);
        CU_ASSERT_TRUE(s.recvq[i]);
        CU_ASSERT_PTR_EQUAL(s.nic[i], RX(&p)->t.nic);
    }
    VIP_DESCRIPTOR *d;
    TRC_SOFT(VipRecvDone(r2, &d), VIP_SUCCESS);
    TRC_SOFT(VipRecvDone(RX(&p)->vi, &d), VIP_SUCCESS);
    TRC_SOFT(VipRecvDone(RX(&p)->vi, &d), VIP_SUCCESS);
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
    CU_ASSERT_EQUAL(seen_count(&s), 3);
    seen_fini(&s);
}

/* ---- notifications and the end of their VI or CQ ----------------------------------------- */

/* A disconnect completes the posted receive (flushed): that is the next
 * completion, and the pending handler gets it. A notification still
 * pending when the VI or CQ is destroyed never runs, and the destroy
 * does not wait for a completion that cannot come. */
static void test_pending_at_end(void)
{
    struct tc_pair p;
    struct seen s, never, never_cq;
    seen_init(&s, 1, 0);
    seen_init(&never, 1, 0);
    seen_init(&never_cq, 1, 0);
    if (tc_pair_open(&p, "via0", "via1"))
        goto out;
    TRC(VipCreateCQ(RX(&p)->t.nic, 8, &RX(&p)->cq), VIP_SUCCESS);
    if (tc_pair_vis(&p, VIP_SERVICE_RELIABLE_DELIVERY) || tc_pair_connect(&p))
        goto out;
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    TRC(VipRecvNotify(RX(&p)->vi, &s, on_desc), VIP_SUCCESS);
    TRC(VipDisconnect(RX(&p)->vi), VIP_SUCCESS);
    TCHK(seen_wait(&s, 1, 5000) == 1);
    CU_ASSERT_PTR_EQUAL(s.d[0], tc_desc(RX(&p), 0));
    CU_ASSERT_EQUAL(s.status[0] & VIP_STATUS_ERROR_MASK, VIP_STATUS_DESC_FLUSHED_ERROR);
    /* the flushed receive's CQ entry: taken, so the CQ is empty */
    VIP_VI_HANDLE v;
    VIP_BOOLEAN r;
    TRC(VipCQWait(RX(&p)->cq, 5000, &v, &r), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(v, RX(&p)->vi);
    /* now nothing is posted: these can never run */
    TRC(VipRecvNotify(RX(&p)->vi, &never, on_desc), VIP_SUCCESS);
    TRC(VipSendNotify(RX(&p)->vi, &never, on_desc), VIP_SUCCESS);
    TRC(VipCQNotify(RX(&p)->cq, &never_cq, on_cq), VIP_SUCCESS);
    uint64_t t0 = tl_now_ms();
    TRC(VipDestroyVi(RX(&p)->vi), VIP_SUCCESS);
    RX(&p)->vi = NULL;
    TRC(VipDestroyCQ(RX(&p)->cq), VIP_SUCCESS);
    RX(&p)->cq = NULL;
    CU_ASSERT(tl_now_ms() - t0 < 2000);
    CU_ASSERT_EQUAL(seen_count(&never), 0);
    CU_ASSERT_EQUAL(seen_count(&never_cq), 0);
out:
    tc_pair_close(&p);
    seen_fini(&s);
    seen_fini(&never);
    seen_fini(&never_cq);
}

/* A descriptor that completed before the notification was asked for, and
 * was not taken yet, is the next completion: the handler gets it. */
static void test_completed_before(void)
{
    struct tc_pair p;
    struct seen s;
    seen_init(&s, 1, 0);
    if (pair(&p, VIP_SERVICE_RELIABLE_RECEPTION))
        goto out;
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 0, 10, 5), VIP_SUCCESS);
    /* reliable reception: the send completes once the receive has */
    TCHK(tc_wait(TX(&p)->vi, 0, 5000) == tc_desc(TX(&p), 0));
    TRC(VipRecvNotify(RX(&p)->vi, &s, on_desc), VIP_SUCCESS);
    TCHK(seen_wait(&s, 1, 5000) == 1);
    CU_ASSERT_PTR_EQUAL(s.d[0], tc_desc(RX(&p), 0));
out:
    tc_pair_close(&p);
    seen_fini(&s);
}

/* A notification pending while the program also polls: each descriptor is
 * taken once, by the handler or by Done, never by both. */
static void test_notify_and_done(void)
{
    struct tc_pair p;
    struct seen s;
    VIP_DESCRIPTOR *d = NULL, *mine[2] = {NULL, NULL};
    unsigned nmine = 0;
    seen_init(&s, 1, 0);
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    TRC(tc_post_recv(RX(&p), 1, 100), VIP_SUCCESS);
    TRC(VipRecvNotify(RX(&p)->vi, &s, on_desc), VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    /* poll until one of us has the first message */
    uint64_t until = tl_now_ms() + 5000;
    while (!nmine && seen_count(&s) == 0 && tl_now_ms() < until)
        if (VipRecvDone(RX(&p)->vi, &d) == VIP_SUCCESS)
            mine[nmine++] = d;
    TCHK(nmine + seen_count(&s) == 1);
    /* the second message: whoever did not take the first may take it */
    TRC(tc_post_send(TX(&p), 1, 10, 2), VIP_SUCCESS);
    if (nmine) {
        TCHK(seen_wait(&s, 1, 5000) == 1); /* the handler still waited */
        CU_ASSERT_PTR_EQUAL(mine[0], tc_desc(RX(&p), 0));
        CU_ASSERT_PTR_EQUAL(s.d[0], tc_desc(RX(&p), 1));
    } else {
        TCHK((d = tc_wait(RX(&p)->vi, 1, 5000)) != NULL);
        mine[nmine++] = d;
        CU_ASSERT_PTR_EQUAL(s.d[0], tc_desc(RX(&p), 0));
        CU_ASSERT_PTR_EQUAL(mine[0], tc_desc(RX(&p), 1));
    }
    TRC_SOFT(VipRecvDone(RX(&p)->vi, &d), VIP_NOT_DONE);
    CU_ASSERT_EQUAL(seen_count(&s), 1);
out:
    tc_pair_close(&p);
    seen_fini(&s);
}

/* ---- arguments -------------------------------------------------------------------------- */

static void test_bad_arguments(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_CQ_HANDLE cq = NULL;
    uint32_t garbage[64] = {0x777};
    struct seen s;
    seen_init(&s, 1, 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(VipCreateCQ(t.nic, 4, &cq), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, cq, cq, &vi), VIP_SUCCESS);
    TERR(VipSendNotify(NULL, &s, on_desc), VIP_INVALID_PARAMETER);
    TERR(VipSendNotify((VIP_VI_HANDLE)garbage, &s, on_desc), VIP_INVALID_PARAMETER);
    TERR(VipSendNotify(vi, &s, NULL), VIP_INVALID_PARAMETER);
    TERR(VipRecvNotify((VIP_VI_HANDLE)garbage, &s, on_desc), VIP_INVALID_PARAMETER);
    TERR(VipRecvNotify(vi, &s, NULL), VIP_INVALID_PARAMETER);
    TERR(VipCQNotify(NULL, &s, on_cq), VIP_INVALID_PARAMETER);
    TERR(VipCQNotify((VIP_CQ_HANDLE)garbage, &s, on_cq), VIP_INVALID_PARAMETER);
    TERR(VipCQNotify(cq, &s, NULL), VIP_INVALID_PARAMETER);
    /* a NULL context is the program's business */
    TRC_SOFT(VipCQNotify(cq, NULL, on_cq), VIP_SUCCESS);
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    vi = NULL;
    TRC_SOFT(VipDestroyCQ(cq), VIP_SUCCESS);
    cq = NULL;
    CU_ASSERT_EQUAL(seen_count(&s), 0);
out:
    if (vi)
        VipDestroyVi(vi);
    if (cq)
        VipDestroyCQ(cq);
    tl_close(&t);
    seen_fini(&s);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_recv_one_shot),
        TL_TEST(test_send_one_shot),
        TL_TEST(test_recv_order),
        TL_TEST(test_send_order),
        TL_TEST(test_cq_two_vis),
        TL_TEST(test_pending_at_end),
        TL_TEST(test_completed_before),
        TL_TEST(test_notify_and_done),
        TL_TEST(test_bad_arguments),
        TL_END,
    };
    return tl_main(argc, argv, "conf_notify", tests);
}

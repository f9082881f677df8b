/*
 * test_conf_error.c - VIPL conformance, chapter "asynchronous errors":
 * VipErrorCallback and the VIP_ERROR_DESCRIPTOR a handler gets: every
 * field for a descriptor error, a lost connection, a message with no
 * receive posted, a descriptor the NIC cannot read; one call per error,
 * on the thread that polled or posted, free to call VIPL (even to
 * disconnect the VI); handlers per NIC handle; the default handler.
 *
 * Chapter errors: also covered by test_errors.c: the code, VI and context
 * of POST_DESC, CONN_LOST and RECVQ_EMPTY between two processes, NULL and
 * garbage NIC handles; test_kill.c: CONN_LOST when the peer process dies;
 * test_conf_cq.c: the catastrophic error of a CQ overflow; test_rdma.c:
 * RDMA protection errors. Vague points: spec-notes/conformance.md.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/tconf.h"

#define TX(p) (&(p)->e[0])
#define RX(p) (&(p)->e[1])

/* Poll the VI until its handler has run n times (bounded); the count. */
static unsigned poll_until(struct tc_errlog *log, VIP_VI_HANDLE vi, unsigned n)
{
    uint64_t until = tl_now_ms() + 5000;
    VIP_DESCRIPTOR *d;
    while (tc_errlog_count(log) < n && tl_now_ms() < until)
        VipRecvDone(vi, &d);
    return tc_errlog_count(log);
}

/* Poll the VI n times (a repeated report would come at the first). */
static void poll_n(VIP_VI_HANDLE vi, unsigned n)
{
    VIP_DESCRIPTOR *d;
    while (n--)
        VipRecvDone(vi, &d);
}

static int pair(struct tc_pair *p, VIP_RELIABILITY_LEVEL rel)
{
    if (tc_pair_open(p, "via0", "via1") || tc_pair_vis(p, rel))
        return -1;
    return tc_pair_connect(p);
}

/* A handler that records, then asks VIPL about the VI it was told of. */
static struct tc_errlog qlog;
static VIP_VI_STATE qstate;
static VIP_RETURN qrc;
static void query_handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    tc_errlog_handler(ctx, e);
    qrc = VipQueryVi(e->ViHandle, &qstate, NULL, NULL, NULL);
}

/* A handler that disconnects the VI it was told of. */
static VIP_RETURN drc = VIP_NOT_DONE;
static void disconnect_handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    tc_errlog_handler(ctx, e);
    drc = VipDisconnect(e->ViHandle);
}

/* ---- registration ------------------------------------------------------------------ */

/* Handlers belong to a NIC handle; a new one replaces the old; errors of
 * a VI go to its NIC handle's handler only. */
static void test_registration(void)
{
    struct tc_pair p;
    struct tc_errlog a, b, other;
    uint32_t garbage[32] = {0x777};
    tc_errlog_init(&a);
    tc_errlog_init(&b);
    tc_errlog_init(&other);
    TERR(VipErrorCallback(NULL, &a, tc_errlog_handler), VIP_INVALID_PARAMETER);
    TERR(VipErrorCallback((VIP_NIC_HANDLE)garbage, &a, tc_errlog_handler),
         VIP_INVALID_PARAMETER);
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    TRC(VipErrorCallback(TX(&p)->t.nic, &a, tc_errlog_handler), VIP_SUCCESS);
    TRC(VipErrorCallback(TX(&p)->t.nic, &b, tc_errlog_handler), VIP_SUCCESS);
    TRC(VipErrorCallback(RX(&p)->t.nic, &other, tc_errlog_handler), VIP_SUCCESS);
    /* the peer leaves: our VI's connection is lost */
    TRC(VipDisconnect(RX(&p)->vi), VIP_SUCCESS);
    TCHK(poll_until(&b, TX(&p)->vi, 1) == 1);
    VIP_ERROR_DESCRIPTOR *e = &b.e[0];
    CU_ASSERT_EQUAL(e->ErrorCode, VIP_ERROR_CONN_LOST);
    CU_ASSERT_EQUAL(e->ResourceCode, VIP_RESOURCE_VI);
    CU_ASSERT_PTR_EQUAL(e->NicHandle, TX(&p)->t.nic);
    CU_ASSERT_PTR_EQUAL(e->ViHandle, TX(&p)->vi);
    CU_ASSERT_PTR_NULL(e->CQHandle);
    CU_ASSERT_PTR_NULL(e->DescriptorPtr);
    CU_ASSERT(pthread_equal(b.thread[0], pthread_self()));
    /* once per error, however often the VI is polled or posted on */
    poll_n(TX(&p)->vi, 100);
    TRC(tc_post_send(TX(&p), 0, 8, 1), VIP_SUCCESS);
    CU_ASSERT_PTR_NOT_NULL(tc_wait(TX(&p)->vi, 0, 5000));
    CU_ASSERT_EQUAL(tc_errlog_count(&b), 1);
    CU_ASSERT_EQUAL(tc_errlog_count(&a), 0);
    CU_ASSERT_EQUAL(tc_errlog_count(&other), 0);
    /* NULL: the default handler again */
    TRC_SOFT(VipErrorCallback(TX(&p)->t.nic, NULL, NULL), VIP_SUCCESS);
out:
    tc_pair_close(&p);
}

/* ---- the contents, error by error ------------------------------------------------------- */

/* A bad descriptor on a reliable VI: POST_DESC naming it at the sender,
 * whose handler may call VIPL; CONN_LOST at the peer, whose handler
 * disconnects its VI. */
static void test_post_desc(void)
{
    struct tc_pair p;
    struct tc_errlog peer;
    tc_errlog_init(&qlog);
    tc_errlog_init(&peer);
    qrc = VIP_NOT_DONE;
    drc = VIP_NOT_DONE;
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    TRC(VipErrorCallback(TX(&p)->t.nic, (VIP_PVOID)&qlog, query_handler), VIP_SUCCESS);
    TRC(VipErrorCallback(RX(&p)->t.nic, &peer, disconnect_handler), VIP_SUCCESS);
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    VIP_DESCRIPTOR *bad = tc_desc(TX(&p), 0), *d;
    tl_desc_1(bad, tc_data(TX(&p), 0), 10, 0x7fff1234u); /* no such memory handle */
    TRC(VipPostSend(TX(&p)->vi, bad, TX(&p)->b.mh), VIP_SUCCESS);
    TCHK((d = tc_wait(TX(&p)->vi, 0, 5000)) == bad);
    CU_ASSERT_EQUAL(bad->CS.Status & VIP_STATUS_ERROR_MASK, VIP_STATUS_PROTECTION_ERROR);
    TCHK(tc_errlog_count(&qlog) == 1);
    VIP_ERROR_DESCRIPTOR *e = &qlog.e[0];
    CU_ASSERT_EQUAL(e->ErrorCode, VIP_ERROR_POST_DESC);
    CU_ASSERT_EQUAL(e->ResourceCode, VIP_RESOURCE_DESCRIPTOR);
    CU_ASSERT_PTR_EQUAL(e->DescriptorPtr, bad);
    CU_ASSERT_PTR_EQUAL(e->ViHandle, TX(&p)->vi);
    CU_ASSERT_PTR_EQUAL(e->NicHandle, TX(&p)->t.nic);
    CU_ASSERT_PTR_NULL(e->CQHandle);
    CU_ASSERT(pthread_equal(qlog.thread[0], pthread_self()));
    /* the handler's own VIPL call saw the VI in ERROR */
    CU_ASSERT_EQUAL(qrc, VIP_SUCCESS);
    CU_ASSERT_EQUAL(qstate, VIP_STATE_ERROR);
    /* the peer: its receive is flushed, its handler hears CONN_LOST and
     * disconnects, which leaves its VI IDLE */
    TCHK((d = tc_wait(RX(&p)->vi, 1, 5000)) == tc_desc(RX(&p), 0));
    CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, VIP_STATUS_DESC_FLUSHED_ERROR);
    TCHK(poll_until(&peer, RX(&p)->vi, 1) == 1);
    e = &peer.e[0];
    CU_ASSERT_EQUAL(e->ErrorCode, VIP_ERROR_CONN_LOST);
    CU_ASSERT_EQUAL(e->ResourceCode, VIP_RESOURCE_VI);
    CU_ASSERT_PTR_NULL(e->DescriptorPtr);
    CU_ASSERT_PTR_EQUAL(e->ViHandle, RX(&p)->vi);
    CU_ASSERT_PTR_EQUAL(e->NicHandle, RX(&p)->t.nic);
    CU_ASSERT_EQUAL(drc, VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(RX(&p)->vi), VIP_STATE_IDLE);
    CU_ASSERT_EQUAL(tc_errlog_count(&qlog), 1);
    poll_n(RX(&p)->vi, 100);
    CU_ASSERT_EQUAL(tc_errlog_count(&peer), 1);
out:
    tc_pair_close(&p);
}

/* A message for a reliable-reception VI with no receive posted:
 * RECVQ_EMPTY at the receiver (the VI, no descriptor); the sender's send
 * completes in error and its VI hears CONN_LOST. */
static void test_recvq_empty(void)
{
    struct tc_pair p;
    struct tc_errlog tx, rx;
    tc_errlog_init(&tx);
    tc_errlog_init(&rx);
    if (pair(&p, VIP_SERVICE_RELIABLE_RECEPTION))
        goto out;
    TRC(VipErrorCallback(TX(&p)->t.nic, &tx, tc_errlog_handler), VIP_SUCCESS);
    TRC(VipErrorCallback(RX(&p)->t.nic, &rx, tc_errlog_handler), VIP_SUCCESS);
    TRC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    VIP_DESCRIPTOR *d = tc_wait(TX(&p)->vi, 0, 5000);
    TCHK(d == tc_desc(TX(&p), 0));
    CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, VIP_STATUS_TRANSPORT_ERROR);
    TCHK(poll_until(&rx, RX(&p)->vi, 1) == 1);
    VIP_ERROR_DESCRIPTOR *e = &rx.e[0];
    CU_ASSERT_EQUAL(e->ErrorCode, VIP_ERROR_RECVQ_EMPTY);
    CU_ASSERT_EQUAL(e->ResourceCode, VIP_RESOURCE_VI);
    CU_ASSERT_PTR_NULL(e->DescriptorPtr);
    CU_ASSERT_PTR_EQUAL(e->ViHandle, RX(&p)->vi);
    CU_ASSERT_PTR_EQUAL(e->NicHandle, RX(&p)->t.nic);
    CU_ASSERT_EQUAL(tl_vi_state(RX(&p)->vi), VIP_STATE_ERROR);
    TCHK(poll_until(&tx, TX(&p)->vi, 1) == 1);
    e = &tx.e[0];
    CU_ASSERT_EQUAL(e->ErrorCode, VIP_ERROR_CONN_LOST);
    CU_ASSERT_PTR_EQUAL(e->ViHandle, TX(&p)->vi);
    CU_ASSERT_EQUAL(e->ResourceCode,
                    e->DescriptorPtr ? VIP_RESOURCE_DESCRIPTOR : VIP_RESOURCE_VI);
    CU_ASSERT_EQUAL(tl_vi_state(TX(&p)->vi), VIP_STATE_ERROR);
    CU_ASSERT_EQUAL(tc_errlog_count(&tx), 1);
    CU_ASSERT_EQUAL(tc_errlog_count(&rx), 1);
out:
    tc_pair_close(&p);
}

/* A descriptor outside the memory handle it is posted with: the NIC could
 * not write its status, so the post refuses it (VIP_INVALID_PARAMETER),
 * queues nothing and writes nothing there; the queue goes on. */
static void test_unreadable_descriptor(void)
{
    struct tc_pair p;
    struct tc_errlog tx;
    struct tl_buf other = {0};
    tc_errlog_init(&tx);
    if (pair(&p, VIP_SERVICE_UNRELIABLE))
        goto out;
    TRC(tl_buf_alloc(&TX(&p)->t, &other, 4096), VIP_SUCCESS);
    TRC(VipErrorCallback(TX(&p)->t.nic, &tx, tc_errlog_handler), VIP_SUCCESS);
    TRC(tc_post_recv(RX(&p), 0, 100), VIP_SUCCESS);
    VIP_DESCRIPTOR *bad = tc_desc(TX(&p), 0);
    tl_desc_1(bad, tc_data(TX(&p), 0), 10, TX(&p)->b.mh);
    bad->CS.Status = 0x5a5a0000u;
    CU_ASSERT_EQUAL(VipPostSend(TX(&p)->vi, bad, other.mh), VIP_INVALID_PARAMETER);
    CU_ASSERT_EQUAL(VipPostRecv(TX(&p)->vi, bad, other.mh), VIP_INVALID_PARAMETER);
    CU_ASSERT_EQUAL(bad->CS.Status, 0x5a5a0000u); /* not queued, not touched */
    VIP_BOOLEAN sq_empty = VIP_FALSE, rq_empty = VIP_FALSE;
    TRC(VipQueryVi(TX(&p)->vi, NULL, NULL, &sq_empty, &rq_empty), VIP_SUCCESS);
    CU_ASSERT_TRUE(sq_empty && rq_empty);
    TRC(tc_post_send(TX(&p), 1, 10, 1), VIP_SUCCESS);
    VIP_DESCRIPTOR *got = NULL;
    TRC(VipSendWait(TX(&p)->vi, 5000, &got), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(got, tc_desc(TX(&p), 1));
    CU_ASSERT_EQUAL(got->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    VIP_DESCRIPTOR *d = tc_wait(RX(&p)->vi, 1, 5000);
    TCHK(d == tc_desc(RX(&p), 0));
    CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), 0), 10, 1), -1);
    CU_ASSERT_EQUAL(tc_errlog_count(&tx), 0);
    CU_ASSERT_EQUAL(tl_vi_state(TX(&p)->vi), VIP_STATE_CONNECTED);
out:
    tl_buf_free(&other);
    tc_pair_close(&p);
}

/* A receive whose descriptor's memory is deregistered while it is posted:
 * when a message comes the NIC cannot write its status (it writes nothing
 * there), drops the message and reports POST_DESC; on an unreliable VI the
 * connection stays up. The descriptor leaves the queue untaken (the
 * library writes no status either), and the next receive gets the next
 * message. */
static void test_descriptor_deregistered_after_post(void)
{
    struct tc_pair p;
    struct tc_errlog rx;
    struct tl_buf gone = {0};
    tc_errlog_init(&rx);
    if (pair(&p, VIP_SERVICE_UNRELIABLE))
        goto out;
    TRC(tl_buf_alloc(&RX(&p)->t, &gone, 4096), VIP_SUCCESS);
    TRC(VipErrorCallback(RX(&p)->t.nic, &rx, tc_errlog_handler), VIP_SUCCESS);
    VIP_DESCRIPTOR *lost = (VIP_DESCRIPTOR *)(void *)gone.p;
    tl_desc_1(lost, tc_data(RX(&p), 0), 100, RX(&p)->b.mh);
    TRC(VipPostRecv(RX(&p)->vi, lost, gone.mh), VIP_SUCCESS);
    TRC(tc_post_recv(RX(&p), 1, 100), VIP_SUCCESS);
    TRC(VipDeregisterMem(RX(&p)->t.nic, gone.p, gone.mh), VIP_SUCCESS);
    gone.nic = NULL; /* deregistered: tl_buf_free only frees */
    TRC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    TCHK(tc_wait(TX(&p)->vi, 0, 5000) == tc_desc(TX(&p), 0));
    TCHK(poll_until(&rx, RX(&p)->vi, 1) == 1);
    CU_ASSERT_EQUAL(rx.e[0].ErrorCode, VIP_ERROR_POST_DESC);
    CU_ASSERT_EQUAL(tl_vi_state(RX(&p)->vi), VIP_STATE_CONNECTED);
    VIP_DESCRIPTOR *d = NULL;
    CU_ASSERT_EQUAL(VipRecvDone(RX(&p)->vi, &d), VIP_NOT_DONE);
    TRC(tc_post_send(TX(&p), 1, 10, 2), VIP_SUCCESS);
    d = tc_wait(RX(&p)->vi, 1, 5000);
    TCHK(d == tc_desc(RX(&p), 1));
    CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), 1), 10, 2), -1);
    CU_ASSERT_EQUAL(lost->CS.Status, 0); /* nobody wrote it */
    VIP_BOOLEAN rq_empty = VIP_FALSE;
    TRC(VipQueryVi(RX(&p)->vi, NULL, NULL, NULL, &rq_empty), VIP_SUCCESS);
    CU_ASSERT_TRUE(rq_empty);
out:
    tl_buf_free(&gone);
    tc_pair_close(&p);
}

/* ---- the default handler ---------------------------------------------------------------- */

/* Without a handler of the program's (and without VIP_QUIET) the library
 * reports an asynchronous error on stderr, naming it; a peer's orderly
 * VipDisconnect is not an error, and it says nothing of it. A child
 * process, so that its stderr can be a file. */
struct default_case {
    const char *path;
    bool orderly; /* the peer disconnects; else it breaks the connection */
};

static int default_child(void *arg)
{
    const struct default_case *c = arg;
    int fd = open(c->path, O_WRONLY | O_TRUNC);
    TC_CHECK(fd >= 0 && dup2(fd, 2) == 2);
    close(fd);
    unsetenv("VIP_QUIET");
    unsetenv("VIP_DEBUG");
    struct tc_pair p;
    TC_CHECK(pair(&p, c->orderly ? VIP_SERVICE_RELIABLE_DELIVERY
                                 : VIP_SERVICE_RELIABLE_RECEPTION) == 0);
    if (c->orderly)
        TC_RC(VipDisconnect(RX(&p)->vi), VIP_SUCCESS);
    else /* no receive posted: RX breaks the connection (RECVQ_EMPTY) */
        TC_RC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    /* poll until the sender's VI has heard and taken it (bounded) */
    VIP_DESCRIPTOR *d;
    uint64_t until = tl_now_ms() + 5000;
    while (tl_vi_state(TX(&p)->vi) != VIP_STATE_ERROR && tl_now_ms() < until)
        VipRecvDone(TX(&p)->vi, &d);
    TC_CHECK(tl_vi_state(TX(&p)->vi) == VIP_STATE_ERROR);
    for (int i = 0; i < 10; i++) {
        VipRecvDone(TX(&p)->vi, &d);
        if (!c->orderly)
            VipRecvDone(RX(&p)->vi, &d);
    }
    tc_pair_close(&p);
    return 0;
}

static void default_handler_says(bool orderly, char *buf, size_t cap)
{
    char path[] = "/tmp/vipl-conf-err.XXXXXX";
    struct tl_child ch = {.pid = -1};
    buf[0] = 0;
    int fd = mkstemp(path);
    TCHK(fd >= 0);
    close(fd);
    struct default_case c = {path, orderly};
    TCHK(tl_spawn(&ch, default_child, &c) == 0);
    TCHILD_OK(&ch, 20000);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, cap - 1, f);
        buf[n] = 0;
        fclose(f);
    }
out:
    unlink(path);
}

static void test_default_handler(void)
{
    char buf[4096];
    default_handler_says(false, buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "connection was lost"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "no receive posted"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "VipDisconnect"));
    default_handler_says(true, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "");
    if (buf[0])
        fprintf(stderr, "\n  an orderly disconnect printed: %s", buf);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_registration),
        TL_TEST(test_post_desc),
        TL_TEST(test_recvq_empty),
        TL_TEST(test_unreadable_descriptor),
        TL_TEST(test_descriptor_deregistered_after_post),
        TL_TEST(test_default_handler),
        TL_END,
    };
    return tl_main(argc, argv, "conf_error", tests);
}

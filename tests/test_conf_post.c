/*
 * test_conf_post.c - VIPL conformance, chapter "data transfer": VipPostSend,
 * VipPostRecv, VipSendDone/Wait, VipRecvDone/Wait; the descriptor format
 * (control segment fields, up to MaxSegmentsPerDesc data segments, each
 * with its own memory handle), the status word the NIC writes, immediate
 * data, completion order, work queue depth, and every argument error.
 * One process, two NICs (via0 -> via1); the VI pair of tconf.h.
 *
 * Chapter data transfer: also covered by test_pingpong.c: 0..1 MiB
 * messages verified byte by byte, 1..16 segments each side, immediate
 * data, all reliability levels; by test_errors.c: the status of every bad
 * send descriptor (alignment, handles, ptags, length, 17 segments,
 * reserved control bits), receives too short, no receive posted; by
 * test_basic.c: posting on an idle VI, Done/Wait on empty queues; by
 * test_multi.c: wait timeouts on a connected VI.
 * Vague points: spec-notes/conformance.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tconf.h"
#include "via_abi.h" /* VIA_DB_SLOTS: how many tokens a doorbell ring holds */

static int pair(struct tc_pair *p, VIP_RELIABILITY_LEVEL rel)
{
    if (tc_pair_open(p, "via0", "via1") || tc_pair_vis(p, rel))
        return -1;
    return tc_pair_connect(p);
}

#define TX(p) (&(p)->e[0])
#define RX(p) (&(p)->e[1])

/* ---- the status word ------------------------------------------------------------ */

static void test_status_bits(void)
{
    struct tc_pair p;
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    /* a plain send: DONE and the operation, nothing else */
    VIP_DESCRIPTOR *rd = tc_desc(RX(&p), 0), *sd = tc_desc(TX(&p), 0), *d;
    TRC(tc_post_recv(RX(&p), 0, 1000), VIP_SUCCESS);
    rd->CS.ImmediateData = 0xdeadbeef;
    TRC(tc_post_send(TX(&p), 0, 100, 1), VIP_SUCCESS);
    TCHK((d = tc_wait(TX(&p)->vi, 0, 5000)) == sd);
    CU_ASSERT_EQUAL(sd->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
    TCHK((d = tc_wait(RX(&p)->vi, 1, 5000)) == rd);
    CU_ASSERT_EQUAL(rd->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
    CU_ASSERT_EQUAL(rd->CS.Length, 100);
    CU_ASSERT_EQUAL(rd->CS.ImmediateData, 0xdeadbeef); /* no immediate data: untouched */
    CU_ASSERT_EQUAL(rd->DS[0].Local.Length, 1000);     /* segments are the program's */
    CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), 0), 100, 1), -1);
    /* with immediate data: IMMEDIATE on both sides, the word delivered */
    TRC(tc_post_recv(RX(&p), 1, 1000), VIP_SUCCESS);
    tl_fill(tc_data(TX(&p), 1), 33, 2);
    tl_desc_1(tc_desc(TX(&p), 1), tc_data(TX(&p), 1), 33, TX(&p)->b.mh);
    tc_desc(TX(&p), 1)->CS.Control = VIP_CONTROL_OP_SENDRECV | VIP_CONTROL_IMMEDIATE;
    tc_desc(TX(&p), 1)->CS.ImmediateData = 0x12345678;
    TRC(VipPostSend(TX(&p)->vi, tc_desc(TX(&p), 1), TX(&p)->b.mh), VIP_SUCCESS);
    TCHK((d = tc_wait(TX(&p)->vi, 0, 5000)) == tc_desc(TX(&p), 1));
    CU_ASSERT_EQUAL(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND | VIP_STATUS_IMMEDIATE);
    TCHK((d = tc_wait(RX(&p)->vi, 1, 5000)) == tc_desc(RX(&p), 1));
    CU_ASSERT_EQUAL(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_IMMEDIATE);
    CU_ASSERT_EQUAL(d->CS.ImmediateData, 0x12345678);
    CU_ASSERT_EQUAL(d->CS.Length, 33);
    /* no segments at all: a 0-byte message carrying only immediate data */
    TRC(tc_post_recv(RX(&p), 2, 1000), VIP_SUCCESS);
    sd = tc_desc(TX(&p), 2);
    memset(sd, 0, sizeof *sd);
    sd->CS.Control = VIP_CONTROL_IMMEDIATE;
    sd->CS.ImmediateData = 42;
    TRC(VipPostSend(TX(&p)->vi, sd, TX(&p)->b.mh), VIP_SUCCESS);
    TCHK(tc_wait(TX(&p)->vi, 0, 5000) == sd);
    CU_ASSERT_EQUAL(sd->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    TCHK((d = tc_wait(RX(&p)->vi, 1, 5000)) == tc_desc(RX(&p), 2));
    CU_ASSERT_EQUAL(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_IMMEDIATE);
    CU_ASSERT_EQUAL(d->CS.Length, 0);
    CU_ASSERT_EQUAL(d->CS.ImmediateData, 42);
out:
    tc_pair_close(&p);
}

/* VipPost* clears Status: a reused descriptor never looks done early. */
static void test_status_cleared_on_post(void)
{
    struct tc_pair p;
    VIP_DESCRIPTOR *d;
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    VIP_DESCRIPTOR *rd = tc_desc(RX(&p), 0);
    tl_desc_1(rd, tc_data(RX(&p), 0), 256, RX(&p)->b.mh);
    rd->CS.Status = VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE; /* stale, from "before" */
    TRC(VipPostRecv(RX(&p)->vi, rd, RX(&p)->b.mh), VIP_SUCCESS);
    CU_ASSERT_EQUAL(rd->CS.Status & VIP_STATUS_DONE, 0);
    TRC_SOFT(VipRecvDone(RX(&p)->vi, &d), VIP_NOT_DONE);
    TRC(tc_post_send(TX(&p), 0, 10, 1), VIP_SUCCESS);
    TCHK(tc_wait(RX(&p)->vi, 1, 5000) == rd);
    /* the same descriptor again, as programs reuse them */
    TRC(VipPostRecv(RX(&p)->vi, rd, RX(&p)->b.mh), VIP_SUCCESS);
    TRC_SOFT(VipRecvDone(RX(&p)->vi, &d), VIP_NOT_DONE);
    TCHK(tc_wait(TX(&p)->vi, 0, 5000) == tc_desc(TX(&p), 0));
    TRC(tc_post_send(TX(&p), 0, 20, 2), VIP_SUCCESS);
    TCHK(tc_wait(RX(&p)->vi, 1, 5000) == rd);
    CU_ASSERT_EQUAL(rd->CS.Length, 20);
    CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), 0), 20, 2), -1);
out:
    tc_pair_close(&p);
}

/* ---- segments ----------------------------------------------------------------------- */

/* Gather from MaxSegmentsPerDesc segments in two registrations (each
 * segment names its own handle) into MaxSegmentsPerDesc receive segments
 * of other sizes: the message is laid out in segment order, nothing
 * beyond it is written. */
static void test_scatter_gather_16(void)
{
    struct tc_pair p;
    struct tl_buf extra = {0};
    enum { NS = 16 };
    uint8_t *sptr[NS], *rptr[NS];
    uint32_t slen[NS], rlen[NS], total = 0, room = 0;
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    TCHK(TX(&p)->t.attr.MaxSegmentsPerDesc == NS);
    TRC(tl_buf_alloc(&TX(&p)->t, &extra, 65536), VIP_SUCCESS);
    for (unsigned i = 0; i < NS; i++) {
        slen[i] = 1 + 37 * i;                       /* 1 .. 556 */
        rlen[i] = 3 + 41 * (NS - 1 - i);            /* 618 .. 3 */
        sptr[i] = (i % 2 ? extra.p : tc_data(TX(&p), 0)) + 1000 * i + i;
        rptr[i] = tc_data(RX(&p), 0) + 1024 * i + 5; /* gaps between segments */
        total += slen[i];
        room += rlen[i];
    }
    TCHK(room >= total + 100);
    /* the message: pattern 3 laid over the send segments in order */
    uint8_t *msg = malloc(total);
    TCHK(msg != NULL);
    tl_fill(msg, total, 3);
    for (unsigned i = 0, off = 0; i < NS; off += slen[i], i++)
        memcpy(sptr[i], msg + off, slen[i]);
    memset(tc_data(RX(&p), 0), 0xEE, TC_SLOT_DATA);
    VIP_DESCRIPTOR *sd = tc_desc(TX(&p), 0), *rd = tc_desc(RX(&p), 0);
    tl_desc_build(rd, VIP_CONTROL_OP_SENDRECV, 0, NS, rptr, rlen, RX(&p)->b.mh);
    tl_desc_build(sd, VIP_CONTROL_OP_SENDRECV, 0, NS, sptr, slen, TX(&p)->b.mh);
    for (unsigned i = 1; i < NS; i += 2)
        tl_seg(sd, i)->Handle = extra.mh;
    TRC(VipPostRecv(RX(&p)->vi, rd, RX(&p)->b.mh), VIP_SUCCESS);
    TRC(VipPostSend(TX(&p)->vi, sd, TX(&p)->b.mh), VIP_SUCCESS);
    TCHK(tc_wait(TX(&p)->vi, 0, 5000) == sd);
    CU_ASSERT_EQUAL(sd->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    TCHK(tc_wait(RX(&p)->vi, 1, 5000) == rd);
    CU_ASSERT_EQUAL(rd->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(rd->CS.Length, total);
    uint32_t off = 0;
    for (unsigned i = 0; i < NS; i++) {
        uint32_t k = off >= total ? 0 : total - off < rlen[i] ? total - off : rlen[i];
        CU_ASSERT_EQUAL(memcmp(rptr[i], msg + off, k), 0);
        for (uint32_t j = k; j < rlen[i]; j++)
            if (rptr[i][j] != 0xEE) {
                CU_FAIL("a receive byte beyond the message was written");
                break;
            }
        CU_ASSERT_EQUAL(rptr[i][-1], 0xEE);          /* the gap before it */
        CU_ASSERT_EQUAL(tl_seg(rd, i)->Length, rlen[i]);
        off += k;
    }
    free(msg);
out:
    tl_buf_free(&extra);
    tc_pair_close(&p);
}

/* Receive descriptors the NIC refuses, on an unreliable VI (that message
 * only): 17 segments (FORMAT_ERROR), no segments for 1 byte (LENGTH_ERROR);
 * no segments for 0 bytes is a good receive. */
static void test_receive_formats(void)
{
    struct tc_pair p;
    VIP_DESCRIPTOR *d;
    if (pair(&p, VIP_SERVICE_UNRELIABLE))
        goto out;
    struct tc_end *r = RX(&p);
    tl_desc_split(tc_desc(r, 0), tc_data(r, 0), 170, 17, r->b.mh);
    memset(tc_desc(r, 1), 0, 64);
    memset(tc_desc(r, 2), 0, 64);
    for (unsigned i = 0; i < 3; i++)
        TRC(VipPostRecv(r->vi, tc_desc(r, i), r->b.mh), VIP_SUCCESS);
    TRC(tc_post_recv(r, 3, 64), VIP_SUCCESS);
    static const uint32_t len[4] = {10, 1, 0, 5};
    for (unsigned i = 0; i < 4; i++) {
        TRC(tc_post_send(TX(&p), i, len[i], 10 + i), VIP_SUCCESS);
        TCHK(tc_wait(TX(&p)->vi, 0, 5000) == tc_desc(TX(&p), i));
    }
    static const uint32_t want[4] = {VIP_STATUS_FORMAT_ERROR, VIP_STATUS_LENGTH_ERROR, 0, 0};
    for (unsigned i = 0; i < 4; i++) {
        TCHK((d = tc_wait(r->vi, 1, 5000)) == tc_desc(r, i));
        CU_ASSERT(d->CS.Status & VIP_STATUS_DONE);
        CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, want[i]);
        CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
    }
    /* message i went to the i-th receive posted; the 0-byte one is good */
    CU_ASSERT_EQUAL(tc_desc(r, 2)->CS.Length, 0);
    CU_ASSERT_EQUAL(tl_verify(tc_data(r, 3), 5, 13), -1);
    CU_ASSERT_EQUAL(tl_vi_state(r->vi), VIP_STATE_CONNECTED);
    TRC_SOFT(VipRecvDone(r->vi, &d), VIP_NOT_DONE);
out:
    tc_pair_close(&p);
}

/* CS.Length of a send is not used: the message is the sum of its segments. */
static void test_send_length_field(void)
{
    struct tc_pair p;
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    TRC(tc_post_recv(RX(&p), 0, 4096), VIP_SUCCESS);
    tl_fill(tc_data(TX(&p), 0), 100, 5);
    tl_desc_1(tc_desc(TX(&p), 0), tc_data(TX(&p), 0), 100, TX(&p)->b.mh);
    tc_desc(TX(&p), 0)->CS.Length = 99999;
    TRC(VipPostSend(TX(&p)->vi, tc_desc(TX(&p), 0), TX(&p)->b.mh), VIP_SUCCESS);
    VIP_DESCRIPTOR *d = tc_wait(RX(&p)->vi, 1, 5000);
    TCHK(d == tc_desc(RX(&p), 0));
    CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(d->CS.Length, 100);
    CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), 0), 100, 5), -1);
out:
    tc_pair_close(&p);
}

/* ---- queues -------------------------------------------------------------------------- */

/* Done and Wait take descriptors in the order they were posted; the
 * queue-empty flags of VipQueryVi follow. */
static void test_completion_order(void)
{
    struct tc_pair p;
    enum { N = 8 };
    VIP_BOOLEAN se, re;
    VIP_DESCRIPTOR *d;
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    TRC(VipQueryVi(RX(&p)->vi, NULL, NULL, &se, &re), VIP_SUCCESS);
    CU_ASSERT_TRUE(se);
    CU_ASSERT_TRUE(re);
    for (unsigned i = 0; i < N; i++)
        TRC(tc_post_recv(RX(&p), i, 2000), VIP_SUCCESS);
    TRC(VipQueryVi(RX(&p)->vi, NULL, NULL, &se, &re), VIP_SUCCESS);
    CU_ASSERT_TRUE(se);
    CU_ASSERT_FALSE(re);
    for (unsigned i = 0; i < N; i++)
        TRC(tc_post_send(TX(&p), i, 100 + 10 * i, 20 + i), VIP_SUCCESS);
    for (unsigned i = 0; i < N; i++) {
        TCHK((d = tc_wait(TX(&p)->vi, 0, 5000)) == tc_desc(TX(&p), i));
        CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    }
    TRC(VipQueryVi(TX(&p)->vi, NULL, NULL, &se, &re), VIP_SUCCESS);
    CU_ASSERT_TRUE(se);
    /* every message has arrived (reliable delivery: sent ones are placed
     * in order); they come off the queue in posting order */
    for (unsigned i = 0; i < N; i++) {
        TCHK((d = tc_wait(RX(&p)->vi, 1, 5000)) == tc_desc(RX(&p), i));
        CU_ASSERT_EQUAL(d->CS.Length, 100 + 10 * i);
        CU_ASSERT_EQUAL(tl_verify(tc_data(RX(&p), i), 100 + 10 * i, 20 + i), -1);
        TRC(VipQueryVi(RX(&p)->vi, NULL, NULL, &se, &re), VIP_SUCCESS);
        CU_ASSERT_EQUAL(re, i == N - 1);
    }
    TRC_SOFT(VipRecvDone(RX(&p)->vi, &d), VIP_NOT_DONE);
    TRC_SOFT(VipSendDone(TX(&p)->vi, &d), VIP_NOT_DONE);
out:
    tc_pair_close(&p);
}

/* Many receives outstanding at once, more than a doorbell ring holds (the
 * host rings R1 without the NIC's lock until its ring is full; the NIC
 * then takes tokens into its queue first): every message lands in its own
 * buffer, whole, and the receives complete in posting order. */
static void test_many_receives_outstanding(void)
{
    struct tc_pair p;
    enum { N = 3 * VIA_DB_SLOTS + 17, LEN = 48 };
    struct tl_buf rb = {0}, sb = {0};
    VIP_DESCRIPTOR *d;
    if (pair(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    TRC(tl_buf_alloc(&RX(&p)->t, &rb, (size_t)N * (64 + LEN)), VIP_SUCCESS);
    TRC(tl_buf_alloc(&TX(&p)->t, &sb, (size_t)N * (64 + LEN)), VIP_SUCCESS);
    for (unsigned i = 0; i < N; i++) {
        VIP_DESCRIPTOR *r = (VIP_DESCRIPTOR *)(void *)(rb.p + 64 * i);
        tl_desc_1(r, rb.p + 64 * N + LEN * i, LEN, rb.mh);
        TRC(VipPostRecv(RX(&p)->vi, r, rb.mh), VIP_SUCCESS);
    }
    for (unsigned i = 0; i < N; i++) {
        VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)(sb.p + 64 * i);
        uint32_t len = 1 + i % LEN;
        tl_fill(sb.p + 64 * N + LEN * i, len, i);
        tl_desc_1(sd, sb.p + 64 * N + LEN * i, len, sb.mh);
        TRC(VipPostSend(TX(&p)->vi, sd, sb.mh), VIP_SUCCESS);
        TCHK((d = tc_wait(TX(&p)->vi, 0, 5000)) == sd);
    }
    for (unsigned i = 0; i < N; i++) {
        TCHK((d = tc_wait(RX(&p)->vi, 1, 5000)) == (VIP_DESCRIPTOR *)(void *)(rb.p + 64 * i));
        CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(d->CS.Length, 1 + i % LEN);
        CU_ASSERT_EQUAL(tl_verify(rb.p + 64 * N + LEN * i, 1 + i % LEN, i), -1);
    }
    TRC_SOFT(VipRecvDone(RX(&p)->vi, &d), VIP_NOT_DONE);
out:
    tc_pair_close(&p);
    tl_buf_free(&rb);
    tl_buf_free(&sb);
}

/* MaxDescriptorsPerQueue descriptors may be outstanding on a work queue;
 * one more is refused until one completes. */
static void test_queue_depth(void)
{
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_DESCRIPTOR *d;
    unsigned n = 0;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    size_t depth = t.attr.MaxDescriptorsPerQueue;
    TRC(tl_buf_alloc(&t, &b, 64 * (depth + 1) + 4096), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    uint8_t *data = b.p + 64 * (depth + 1);
    for (; n <= depth; n++)
        tl_desc_1((VIP_DESCRIPTOR *)(void *)(b.p + 64 * n), data, 64, b.mh);
    for (n = 0; n < depth; n++)
        TRC(VipPostRecv(vi, (VIP_DESCRIPTOR *)(void *)(b.p + 64 * n), b.mh), VIP_SUCCESS);
    TERR(VipPostRecv(vi, (VIP_DESCRIPTOR *)(void *)(b.p + 64 * depth), b.mh),
         VIP_ERROR_RESOURCE);
    /* a disconnect completes them all (flushed); the queue has room again */
    TRC(VipDisconnect(vi), VIP_SUCCESS);
    for (n = 0; n < depth; n++) {
        TRC(VipRecvDone(vi, &d), VIP_SUCCESS);
        TCHK(d == (VIP_DESCRIPTOR *)(void *)(b.p + 64 * n));
    }
    TRC_SOFT(VipPostRecv(vi, (VIP_DESCRIPTOR *)(void *)(b.p + 64 * depth), b.mh), VIP_SUCCESS);
out:
    if (vi)
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    tl_buf_free(&b);
    tl_close(&t);
}

/* ---- arguments ------------------------------------------------------------------------ */

static void test_bad_arguments(void)
{
    struct tc_pair p;
    VIP_DESCRIPTOR *d;
    uint32_t garbage[64] = {0x12345};
    VIP_VI_HANDLE g = (VIP_VI_HANDLE)garbage;
    if (tc_pair_open(&p, "via0", "via1") || tc_pair_vis(&p, VIP_SERVICE_RELIABLE_DELIVERY))
        goto out;
    VIP_VI_HANDLE vi = TX(&p)->vi;
    VIP_DESCRIPTOR *sd = tc_desc(TX(&p), 0);
    VIP_MEM_HANDLE mh = TX(&p)->b.mh;
    tl_desc_1(sd, tc_data(TX(&p), 0), 10, mh);
    TERR(VipPostSend(NULL, sd, mh), VIP_INVALID_PARAMETER);
    TERR(VipPostSend(g, sd, mh), VIP_INVALID_PARAMETER);
    TERR(VipPostSend(vi, NULL, mh), VIP_INVALID_PARAMETER);
    TERR(VipPostRecv(NULL, sd, mh), VIP_INVALID_PARAMETER);
    TERR(VipPostRecv(g, sd, mh), VIP_INVALID_PARAMETER);
    TERR(VipPostRecv(vi, NULL, mh), VIP_INVALID_PARAMETER);
    TERR(VipSendDone(vi, NULL), VIP_INVALID_PARAMETER);
    TERR(VipSendDone(g, &d), VIP_INVALID_PARAMETER);
    TERR(VipRecvDone(NULL, &d), VIP_INVALID_PARAMETER);
    TERR(VipRecvDone(vi, NULL), VIP_INVALID_PARAMETER);
    TERR(VipSendWait(vi, 10, NULL), VIP_INVALID_PARAMETER);
    TERR(VipSendWait(NULL, 10, &d), VIP_INVALID_PARAMETER);
    TERR(VipRecvWait(g, 10, &d), VIP_INVALID_PARAMETER);
    TERR(VipRecvWait(vi, 10, NULL), VIP_INVALID_PARAMETER);
    /* timeouts say so */
    TERR(VipRecvWait(vi, 0, &d), VIP_TIMEOUT);
    TERR(VipSendWait(vi, 1, &d), VIP_TIMEOUT);
    /* none of it touched the queues */
    VIP_BOOLEAN se, re;
    TRC_SOFT(VipQueryVi(vi, NULL, NULL, &se, &re), VIP_SUCCESS);
    CU_ASSERT_TRUE(se && re);
out:
    tc_pair_close(&p);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_status_bits),
        TL_TEST(test_status_cleared_on_post),
        TL_TEST(test_scatter_gather_16),
        TL_TEST(test_receive_formats),
        TL_TEST(test_send_length_field),
        TL_TEST(test_completion_order),
        TL_TEST(test_many_receives_outstanding),
        TL_TEST(test_queue_depth),
        TL_TEST(test_bad_arguments),
        TL_END,
    };
    return tl_main(argc, argv, "conf_post", tests);
}

/*
 * test_errors.c - bad input on a connected VI: descriptor status bits, VI
 * state, flushed descriptors, the peer's error state and error callbacks.
 *
 * The parent is the client of every connection and does the bad thing; a
 * child process is the server peer and checks what it sees. Tokens on the
 * pipes order the two: the child posts 'c' (connected; then its memory
 * handle as 4 bytes), 's' (sent), 'k' (checked); the parent posts 'g' (go
 * check) and 'q' (quit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "via_abi.h"

enum { EXP_NONE, EXP_MSG, EXP_ERROR };

struct peer {
    VIP_RELIABILITY_LEVEL rel;
    char disc[17];
    unsigned nrecv;     /* receives posted before connecting */
    uint32_t send_len;  /* != 0: send one message right after connecting */
    int send_zero;      /* send a 0-byte message instead */
    int send_second;    /* after 'g': send a 200-byte message */
    int expect;         /* after 'g' (and any second send) */
    uint32_t expect_len;
};

/* ---- error callbacks ---------------------------------------------------------- */
static volatile int cb_count;
static volatile VIP_ERROR_CODE cb_code;
static VIP_VI_HANDLE volatile cb_vi;
static void *volatile cb_ctx;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    cb_count++;
    cb_code = e->ErrorCode;
    cb_vi = e->ViHandle;
    cb_ctx = ctx;
}

static void cb_reset(void)
{
    cb_count = 0;
    cb_code = (VIP_ERROR_CODE)-1;
    cb_vi = NULL;
    cb_ctx = NULL;
}

/* ---- the peer (child) --------------------------------------------------------------- */
static uint8_t dummies[8];

static int peer_main(void *arg)
{
    const struct peer *p = arg;
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    VIP_MEM_HANDLE dm[8];
    cb_reset();
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(VipErrorCallback(t.nic, (VIP_PVOID)0x77, on_error), VIP_SUCCESS);
    /* Some registrations first, so that our data handle is not one the
     * parent's session has issued. */
    for (int i = 0; i < 8; i++) {
        VIP_MEM_ATTRIBUTES ma = {.Ptag = t.ptag};
        TC_RC(VipRegisterMem(t.nic, &dummies[i], 1, &ma, &dm[i]), VIP_SUCCESS);
    }
    TC_RC(tl_buf_alloc(&t, &b, 2u << 20), VIP_SUCCESS);
    TC_RC(tl_vi(&t, p->rel, NULL, NULL, &vi), VIP_SUCCESS);
    for (unsigned k = 0; k < p->nrecv; k++) {
        VIP_DESCRIPTOR *rd = (VIP_DESCRIPTOR *)(void *)(b.p + 512 * (k + 1));
        tl_desc_1(rd, b.p + (64u << 10) * (k + 1), 64u << 10, b.mh);
        TC_RC(VipPostRecv(vi, rd, b.mh), VIP_SUCCESS);
    }
    TC_RC(tl_accept(&t, vi, p->disc, 15000), VIP_SUCCESS);
    TC_CHECK(tl_vi_state(vi) == VIP_STATE_CONNECTED);
    TC_CHECK(tl_child_post('c') == 0);
    for (int i = 0; i < 4; i++)
        TC_CHECK(tl_child_post((char)(b.mh >> (8 * i))) == 0);
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)b.p, *d;
    uint8_t *sdata = b.p + (1u << 20);
    if (p->send_len || p->send_zero) {
        tl_fill(sdata, p->send_len, 1);
        tl_desc_1(sd, sdata, p->send_len, b.mh);
        TC_RC(VipPostSend(vi, sd, b.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(vi, 10000, &d), VIP_SUCCESS);
        TC_CHECK(d->CS.Status & VIP_STATUS_DONE);
        TC_CHECK(tl_child_post('s') == 0);
    }
    TC_CHECK(tl_child_take(20000) == 'g');
    if (p->send_second) {
        tl_fill(sdata, 200, 2);
        tl_desc_1(sd, sdata, 200, b.mh);
        TC_RC(VipPostSend(vi, sd, b.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(vi, 10000, &d), VIP_SUCCESS);
        TC_CHECK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
    }
    if (p->expect == EXP_MSG) {
        TC_RC(VipRecvWait(vi, 10000, &d), VIP_SUCCESS);
        uint32_t st = d->CS.Status;
        if ((st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) !=
            (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE))
            tl_child_fail(__FILE__, __LINE__, "peer receive status 0x%x", st);
        if (d->CS.Length != p->expect_len)
            tl_child_fail(__FILE__, __LINE__, "peer received %u bytes, expected %u",
                          d->CS.Length, p->expect_len);
        TC_CHECK(tl_verify(b.p + (64u << 10), p->expect_len, 3) == -1);
        TC_CHECK(tl_vi_state(vi) == VIP_STATE_CONNECTED);
        if (cb_count)
            tl_child_fail(__FILE__, __LINE__, "peer error callback ran (code %d)", cb_code);
    } else if (p->expect == EXP_ERROR) {
        VIP_RETURN rc = VipRecvWait(vi, 10000, &d);
        if (rc != VIP_SUCCESS)
            tl_child_fail(__FILE__, __LINE__,
                          "peer: VipRecvWait %s: its queued receive was not flushed (state %d)",
                          vip_strerror(rc), (int)tl_vi_state(vi));
        if (!(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR))
            tl_child_fail(__FILE__, __LINE__, "peer receive status 0x%x, expected flushed",
                          d->CS.Status);
        VIP_VI_STATE s = tl_vi_state(vi);
        if (s != VIP_STATE_ERROR)
            tl_child_fail(__FILE__, __LINE__, "peer VI state %d, expected ERROR", (int)s);
        /* the callback runs when the VI is next polled */
        for (int i = 0; i < 2000 && !cb_count; i++) {
            VipRecvDone(vi, &d);
            usleep(1000);
        }
        if (cb_count < 1 || cb_code != VIP_ERROR_CONN_LOST || cb_vi != vi ||
            cb_ctx != (void *)0x77)
            tl_child_fail(__FILE__, __LINE__,
                          "peer error callback: %d calls, code %d (expected CONN_LOST=%d)",
                          cb_count, cb_code, VIP_ERROR_CONN_LOST);
    }
    TC_CHECK(tl_child_post('k') == 0);
    TC_CHECK(tl_child_take(20000) == 'q');
    TC_RC(VipDisconnect(vi), VIP_SUCCESS);
    TC_CHECK(tl_vi_state(vi) == VIP_STATE_IDLE);
    TC_RC(VipDestroyVi(vi), VIP_SUCCESS);
    tl_buf_free(&b);
    tl_close(&t);
    return 0;
}

/* ---- the parent's side of a pair ----------------------------------------------------- */
struct pair {
    struct peer pc;
    struct tl_child ch;
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    uint32_t peer_mh;
    uint32_t first_recv_len; /* length of the first receive posted (0: 64 KiB) */
    int went, acked;
};

#define DESC(pr, i) ((VIP_DESCRIPTOR *)(void *)((pr)->b.p + 512u * (i)))
#define DATA(pr) ((pr)->b.p + (64u << 10))

static int pair_open(struct pair *pr, VIP_RELIABILITY_LEVEL rel)
{
    memset(pr, 0, sizeof *pr);
    pr->ch.pid = -1;
    pr->pc.rel = rel;
    tl_discrim(pr->pc.disc, "e");
    if (pr->pc.nrecv == 0)
        pr->pc.nrecv = 2;
    return 0;
}

/* Spawn the peer (configured in pr->pc), connect; 0 on success. */
static int pair_connect(struct pair *pr, VIP_ULONG mtu, unsigned nrecv_parent)
{
    VIP_RETURN rc;
    if (tl_spawn(&pr->ch, peer_main, &pr->pc)) {
        CU_FAIL("fork");
        return -1;
    }
    cb_reset();
    if ((rc = tl_open(&pr->t, "via0")) != VIP_SUCCESS ||
        (rc = VipErrorCallback(pr->t.nic, (VIP_PVOID)0x55, on_error)) != VIP_SUCCESS ||
        (rc = tl_buf_alloc(&pr->t, &pr->b, 2u << 20)) != VIP_SUCCESS) {
        tl_report_rc(__FILE__, __LINE__, "open/register", rc, VIP_SUCCESS);
        CU_FAIL("setup");
        return -1;
    }
    VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = pr->pc.rel,
                           .MaxTransferSize = mtu ? mtu : (1u << 20), .Ptag = pr->t.ptag};
    if ((rc = VipCreateVi(pr->t.nic, &a, NULL, NULL, &pr->vi)) != VIP_SUCCESS) {
        pr->vi = NULL;
        tl_report_rc(__FILE__, __LINE__, "VipCreateVi", rc, VIP_SUCCESS);
        CU_FAIL("create VI");
        return -1;
    }
    for (unsigned k = 0; k < nrecv_parent; k++) {
        VIP_DESCRIPTOR *rd = DESC(pr, 64 + k);
        uint32_t len = k == 0 && pr->first_recv_len ? pr->first_recv_len : 64u << 10;
        tl_desc_1(rd, pr->b.p + (1u << 20) + (64u << 10) * k, len, pr->b.mh);
        if ((rc = VipPostRecv(pr->vi, rd, pr->b.mh)) != VIP_SUCCESS) {
            CU_FAIL("post receive");
            return -1;
        }
    }
    if ((rc = tl_request(&pr->t, pr->vi, "via0", pr->pc.disc, 15000)) != VIP_SUCCESS) {
        tl_report_rc(__FILE__, __LINE__, "connect", rc, VIP_SUCCESS);
        CU_FAIL("connect");
        return -1;
    }
    if (tl_parent_take(&pr->ch, 15000) != 'c') {
        CU_FAIL("peer did not report connected");
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        int x = tl_parent_take(&pr->ch, 5000);
        if (x < 0) {
            CU_FAIL("peer handle");
            return -1;
        }
        pr->peer_mh |= (uint32_t)x << (8 * i);
    }
    /* A peer that sends at once may already have broken a reliable VI: the
     * NIC places (or refuses) arrivals by itself, not at our next poll. */
    VIP_VI_STATE vs = tl_vi_state(pr->vi);
    CU_ASSERT(vs == VIP_STATE_CONNECTED || (pr->pc.send_len && vs == VIP_STATE_ERROR));
    return 0;
}

/* Let the peer check ('g'), wait for its verdict, tear everything down. */
static void pair_close(struct pair *pr)
{
    if (pr->ch.pid > 0) {
        if (!pr->went)
            tl_parent_post(&pr->ch, 'g');
        if (!pr->acked && tl_parent_take(&pr->ch, 20000) == 'k')
            tl_parent_post(&pr->ch, 'q');
    }
    if (pr->vi) {
        VipDisconnect(pr->vi);
        TRC_SOFT(VipDestroyVi(pr->vi), VIP_SUCCESS);
    }
    tl_buf_free(&pr->b);
    tl_close(&pr->t);
    TCHILD_OK(&pr->ch, 20000);
}

static void go(struct pair *pr)
{
    pr->went = 1;
    tl_parent_post(&pr->ch, 'g');
}

/* Send d (already built) and return its completed status (0 on no completion). */
static uint32_t send_status(struct pair *pr, VIP_DESCRIPTOR *d)
{
    VIP_DESCRIPTOR *got = NULL;
    VIP_RETURN rc = VipPostSend(pr->vi, d, pr->b.mh);
    if (rc != VIP_SUCCESS) {
        tl_report_rc(__FILE__, __LINE__, "VipPostSend", rc, VIP_SUCCESS);
        return 0;
    }
    rc = VipSendWait(pr->vi, 5000, &got);
    if (rc != VIP_SUCCESS || got != d) {
        tl_report_rc(__FILE__, __LINE__, "VipSendWait", rc, VIP_SUCCESS);
        return 0;
    }
    return got->CS.Status;
}

#define EXPECT_STATUS(st, bits)                                                            \
    do {                                                                                   \
        uint32_t st_ = (st);                                                               \
        CU_ASSERT(st_ & VIP_STATUS_DONE);                                                  \
        CU_ASSERT_EQUAL(st_ & VIP_STATUS_ERROR_MASK, (bits));                              \
        if ((st_ & VIP_STATUS_ERROR_MASK) != (uint32_t)(bits))                             \
            fprintf(stderr, "\n  %s:%d: status 0x%x, expected error bits 0x%x\n",          \
                    __FILE__, __LINE__, st_, (unsigned)(bits));                            \
    } while (0)

/* ---- unreliable: a bad send affects that descriptor only ----------------------------- */
typedef VIP_DESCRIPTOR *(*build_fn)(struct pair *pr);

static void bad_send_unreliable(build_fn build, uint32_t expect_bits, VIP_ULONG mtu)
{
    struct pair pr;
    pair_open(&pr, VIP_SERVICE_UNRELIABLE);
    pr.pc.expect = EXP_MSG;
    pr.pc.expect_len = 777;
    if (pair_connect(&pr, mtu, 0) == 0) {
        VIP_DESCRIPTOR *bad = build(&pr);
        EXPECT_STATUS(send_status(&pr, bad), expect_bits);
        /* the operation the descriptor names, even when it is refused */
        CU_ASSERT_EQUAL(bad->CS.Status & VIP_STATUS_OP_MASK,
                        (bad->CS.Control & VIP_CONTROL_OP_MASK) == VIP_CONTROL_OP_RDMAREAD
                            ? VIP_STATUS_OP_RDMA_READ
                            : VIP_STATUS_OP_SEND);
        CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_CONNECTED);
        CU_ASSERT_EQUAL(cb_count, 0);
        /* the VI goes on: a good message reaches the peer */
        VIP_DESCRIPTOR *good = DESC(&pr, 10);
        tl_fill(DATA(&pr), 777, 3);
        tl_desc_1(good, DATA(&pr), 777, pr.b.mh);
        EXPECT_STATUS(send_status(&pr, good), 0);
        go(&pr);
    }
    pair_close(&pr);
}

static VIP_DESCRIPTOR *b_misaligned(struct pair *pr)
{
    VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(void *)(pr->b.p + 512 * 3 + 8);
    tl_desc_1(d, DATA(pr), 10, pr->b.mh);
    return d;
}
static VIP_DESCRIPTOR *b_garbage_handle(struct pair *pr)
{
    tl_desc_1(DESC(pr, 3), DATA(pr), 10, 0x12345678u);
    return DESC(pr, 3);
}
static VIP_DESCRIPTOR *b_foreign_handle(struct pair *pr)
{
    tl_desc_1(DESC(pr, 3), DATA(pr), 10, pr->peer_mh);
    return DESC(pr, 3);
}
static uint8_t stale_buf[4096];
static VIP_DESCRIPTOR *b_stale_handle(struct pair *pr)
{
    VIP_MEM_ATTRIBUTES ma = {.Ptag = pr->t.ptag};
    VIP_MEM_HANDLE mh = 0;
    CU_ASSERT_EQUAL(VipRegisterMem(pr->t.nic, stale_buf, sizeof stale_buf, &ma, &mh),
                    VIP_SUCCESS);
    CU_ASSERT_EQUAL(VipDeregisterMem(pr->t.nic, stale_buf, mh), VIP_SUCCESS);
    tl_desc_1(DESC(pr, 3), stale_buf, 10, mh);
    return DESC(pr, 3);
}
static VIP_DESCRIPTOR *b_beyond(struct pair *pr)
{
    tl_desc_1(DESC(pr, 3), pr->b.p + pr->b.len - 10, 11, pr->b.mh);
    return DESC(pr, 3);
}
static uint8_t other_ptag_buf[4096];
static VIP_DESCRIPTOR *b_other_ptag(struct pair *pr)
{
    VIP_PROTECTION_HANDLE p2;
    VIP_MEM_HANDLE mh = 0;
    CU_ASSERT_EQUAL(VipCreatePtag(pr->t.nic, &p2), VIP_SUCCESS);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = p2};
    CU_ASSERT_EQUAL(VipRegisterMem(pr->t.nic, other_ptag_buf, sizeof other_ptag_buf, &ma, &mh),
                    VIP_SUCCESS);
    tl_desc_1(DESC(pr, 3), other_ptag_buf, 10, mh);
    return DESC(pr, 3);
}
static VIP_DESCRIPTOR *b_too_long(struct pair *pr)
{
    tl_desc_split(DESC(pr, 3), DATA(pr), 4097, 3, pr->b.mh);
    return DESC(pr, 3);
}
static VIP_DESCRIPTOR *b_17_segments(struct pair *pr)
{
    tl_desc_split(DESC(pr, 3), DATA(pr), 170, 17, pr->b.mh);
    return DESC(pr, 3);
}
static VIP_DESCRIPTOR *b_reserved_control(struct pair *pr)
{
    tl_desc_1(DESC(pr, 3), DATA(pr), 10, pr->b.mh);
    DESC(pr, 3)->CS.Control = 0x0100;
    return DESC(pr, 3);
}
/* An RDMA read on an unreliable VI: it could never wait for its data. */
static VIP_DESCRIPTOR *b_rdma_read(struct pair *pr)
{
    tl_desc_1(DESC(pr, 3), DATA(pr), 10, pr->b.mh);
    DESC(pr, 3)->CS.Control = VIP_CONTROL_OP_RDMAREAD;
    return DESC(pr, 3);
}

static void test_misaligned_descriptor(void)
{
    bad_send_unreliable(b_misaligned, VIP_STATUS_FORMAT_ERROR, 0);
}
static void test_garbage_memory_handle(void)
{
    bad_send_unreliable(b_garbage_handle, VIP_STATUS_PROTECTION_ERROR, 0);
}
static void test_foreign_memory_handle(void)
{
    bad_send_unreliable(b_foreign_handle, VIP_STATUS_PROTECTION_ERROR, 0);
}
static void test_stale_memory_handle(void)
{
    bad_send_unreliable(b_stale_handle, VIP_STATUS_PROTECTION_ERROR, 0);
}
static void test_segment_beyond_registration(void)
{
    bad_send_unreliable(b_beyond, VIP_STATUS_PROTECTION_ERROR, 0);
}
static void test_region_of_other_ptag(void)
{
    bad_send_unreliable(b_other_ptag, VIP_STATUS_PROTECTION_ERROR, 0);
}
static void test_length_above_vi_mtu(void)
{
    bad_send_unreliable(b_too_long, VIP_STATUS_LENGTH_ERROR, 4096);
}
static void test_too_many_segments(void)
{
    bad_send_unreliable(b_17_segments, VIP_STATUS_FORMAT_ERROR, 0);
}
static void test_reserved_control_bits(void)
{
    bad_send_unreliable(b_reserved_control, VIP_STATUS_FORMAT_ERROR, 0);
}
static void test_rdma_read_unreliable(void)
{
    bad_send_unreliable(b_rdma_read, VIP_STATUS_FORMAT_ERROR, 0);
}

/* ---- reliable: an error breaks the connection ---------------------------------------- */
static void bad_send_reliable(VIP_RELIABILITY_LEVEL rel)
{
    struct pair pr;
    pair_open(&pr, rel);
    pr.pc.expect = EXP_ERROR;
    if (pair_connect(&pr, 0, 2) == 0) {
        VIP_DESCRIPTOR *bad = DESC(&pr, 3), *next = DESC(&pr, 4), *later = DESC(&pr, 5), *d;
        tl_desc_1(bad, DATA(&pr), 10, 0x12345678u);
        tl_desc_1(next, DATA(&pr), 10, pr.b.mh);
        tl_desc_1(later, DATA(&pr), 10, pr.b.mh);
        TRC_SOFT(VipPostSend(pr.vi, bad, pr.b.mh), VIP_SUCCESS);
        TRC_SOFT(VipPostSend(pr.vi, next, pr.b.mh), VIP_SUCCESS);
        TRC_SOFT(VipSendWait(pr.vi, 5000, &d), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(d, bad);
        EXPECT_STATUS(bad->CS.Status, VIP_STATUS_PROTECTION_ERROR);
        TRC_SOFT(VipSendWait(pr.vi, 5000, &d), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(d, next);
        EXPECT_STATUS(next->CS.Status, VIP_STATUS_DESC_FLUSHED_ERROR);
        CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_ERROR);
        /* our queued receives are flushed too */
        for (int k = 0; k < 2; k++) {
            TRC_SOFT(VipRecvWait(pr.vi, 5000, &d), VIP_SUCCESS);
            EXPECT_STATUS(d->CS.Status, VIP_STATUS_DESC_FLUSHED_ERROR);
            CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
        }
        /* descriptors posted later complete flushed */
        TRC_SOFT(VipPostSend(pr.vi, later, pr.b.mh), VIP_SUCCESS);
        TRC_SOFT(VipSendWait(pr.vi, 5000, &d), VIP_SUCCESS);
        EXPECT_STATUS(later->CS.Status, VIP_STATUS_DESC_FLUSHED_ERROR);
        /* our callback: a descriptor error of this VI */
        CU_ASSERT_EQUAL(cb_count, 1);
        CU_ASSERT_EQUAL(cb_code, VIP_ERROR_POST_DESC);
        CU_ASSERT_PTR_EQUAL(cb_vi, pr.vi);
        CU_ASSERT_PTR_EQUAL(cb_ctx, (void *)0x55);
        go(&pr); /* the peer checks it is in error, flushed, called back */
        /* VipDisconnect returns the VI to IDLE */
        if (tl_parent_take(&pr.ch, 20000) == 'k') {
            TRC_SOFT(VipDisconnect(pr.vi), VIP_SUCCESS);
            CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_IDLE);
            tl_parent_post(&pr.ch, 'q');
        }
        pr.acked = 1;
    }
    pair_close(&pr);
}

/* The library's default handler (no VipErrorCallback of the program's)
 * says which descriptor failed and why: the status bits in words and the
 * segment it named, not only "a posted descriptor was in error". */
static void test_default_handler_says_why(void)
{
    struct pair pr;
    char path[] = "/tmp/vipl-stderr.XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    static char text[8192];
    text[0] = 0;
    pair_open(&pr, VIP_SERVICE_RELIABLE_DELIVERY);
    pr.pc.expect = EXP_ERROR;
    if (fd >= 0 && saved >= 0 && pair_connect(&pr, 0, 2) == 0) {
        VIP_DESCRIPTOR *bad = DESC(&pr, 3), *d;
        tl_desc_1(bad, DATA(&pr), 10, 0x12345678u);
        TRC_SOFT(VipErrorCallback(pr.t.nic, NULL, NULL), VIP_SUCCESS); /* the default */
        unsetenv("VIP_QUIET");
        fflush(stderr);
        dup2(fd, 2);
        TRC_SOFT(VipPostSend(pr.vi, bad, pr.b.mh), VIP_SUCCESS);
        TRC_SOFT(VipSendWait(pr.vi, 5000, &d), VIP_SUCCESS);
        for (int i = 0; i < 500 && !strstr(text, "segment 0"); i++) { /* handler: async */
            usleep(10000);
            ssize_t n = pread(fd, text, sizeof text - 1, 0);
            text[n > 0 ? n : 0] = 0;
        }
        fflush(stderr);
        dup2(saved, 2);
        setenv("VIP_QUIET", "1", 1);
        if (!strstr(text, "PROTECTION_ERROR") || !strstr(text, "memory handle 305419896"))
            fprintf(stderr, "\n  the default handler said:\n%s", text);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "a posted descriptor was in error"));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "PROTECTION_ERROR"));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "segment 0: address"));
        CU_ASSERT_PTR_NOT_NULL(strstr(text, "memory handle 305419896"));
        go(&pr);
        if (tl_parent_take(&pr.ch, 20000) == 'k') {
            TRC_SOFT(VipDisconnect(pr.vi), VIP_SUCCESS);
            tl_parent_post(&pr.ch, 'q');
        }
        pr.acked = 1;
    }
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    setenv("VIP_QUIET", "1", 1);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    pair_close(&pr);
}

static void test_reliable_delivery_bad_send(void)
{
    bad_send_reliable(VIP_SERVICE_RELIABLE_DELIVERY);
}
static void test_reliable_reception_bad_send(void)
{
    bad_send_reliable(VIP_SERVICE_RELIABLE_RECEPTION);
}

/* ---- receive side errors ----------------------------------------------------------------- */

/* The receive buffer is smaller than the message. */
static void recv_too_small(VIP_RELIABILITY_LEVEL rel)
{
    struct pair pr;
    pair_open(&pr, rel);
    pr.pc.send_len = 100;
    pr.pc.expect = rel == VIP_SERVICE_UNRELIABLE ? EXP_MSG : EXP_ERROR;
    pr.pc.expect_len = 777;
    pr.first_recv_len = 99;
    if (pair_connect(&pr, 0, 2) == 0) {
        VIP_DESCRIPTOR *rd = DESC(&pr, 64), *rd2 = DESC(&pr, 65), *d = NULL;
        CU_ASSERT_EQUAL(tl_parent_take(&pr.ch, 10000), 's');
        TRC_SOFT(VipRecvWait(pr.vi, 5000, &d), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(d, rd);
        EXPECT_STATUS(rd->CS.Status, VIP_STATUS_LENGTH_ERROR);
        CU_ASSERT_EQUAL(rd->CS.Status & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
        if (rel == VIP_SERVICE_UNRELIABLE) {
            CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_CONNECTED);
            CU_ASSERT_EQUAL(cb_count, 0);
            tl_fill(DATA(&pr) + 8192, 777, 3);
            tl_desc_1(DESC(&pr, 10), DATA(&pr) + 8192, 777, pr.b.mh);
            EXPECT_STATUS(send_status(&pr, DESC(&pr, 10)), 0);
        } else {
            TRC_SOFT(VipRecvWait(pr.vi, 5000, &d), VIP_SUCCESS);
            CU_ASSERT_PTR_EQUAL(d, rd2);
            EXPECT_STATUS(rd2->CS.Status, VIP_STATUS_DESC_FLUSHED_ERROR);
            CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_ERROR);
            CU_ASSERT_EQUAL(cb_count, 1);
            CU_ASSERT_EQUAL(cb_code, VIP_ERROR_POST_DESC);
        }
        go(&pr);
    }
    pair_close(&pr);
}

static void test_recv_too_small_unreliable(void) { recv_too_small(VIP_SERVICE_UNRELIABLE); }
static void test_recv_too_small_reliable(void) { recv_too_small(VIP_SERVICE_RELIABLE_DELIVERY); }

/* A message arrives with no receive posted. */
/* Packets the NICs refused for `why` so far, by vipctl counters' named
 * receive checks ("refused on viaN: 2 no_recv, 1 seq"), summed over NICs. */
static unsigned long long refused_for(const char *why)
{
    static char out[1 << 16];
    unsigned long long sum = 0;
    if (tl_vipctl("counters", out, sizeof out) != 0)
        return 0;
    for (const char *l = strstr(out, "refused on "); l; l = strstr(l + 1, "refused on ")) {
        const char *eol = strchr(l, '\n');
        for (const char *p = strchr(l, ':'); p && (!eol || p < eol); p = strchr(p + 1, ',')) {
            unsigned long long n;
            char name[32];
            if (sscanf(p + 1, " %llu %31[a-z_]", &n, name) == 2 && !strcmp(name, why))
                sum += n;
        }
    }
    return sum;
}

static void no_receive(VIP_RELIABILITY_LEVEL rel)
{
    struct pair pr;
    int unrel = rel == VIP_SERVICE_UNRELIABLE;
    unsigned long long before = refused_for("no_recv");
    pair_open(&pr, rel);
    pr.pc.send_len = 100;
    pr.pc.send_second = unrel;
    pr.pc.expect = unrel ? EXP_NONE : EXP_ERROR;
    if (pair_connect(&pr, 0, 0) == 0) {
        VIP_DESCRIPTOR *d = NULL, *rd = DESC(&pr, 70);
        CU_ASSERT_EQUAL(tl_parent_take(&pr.ch, 10000), 's');
        /* the message has reached our NIC (by itself, or at this poll) */
        TRC_SOFT(VipRecvDone(pr.vi, &d), VIP_NOT_DONE);
        if (unrel) {
            CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_CONNECTED);
            CU_ASSERT_EQUAL(cb_count, 0);
            /* dropped, not kept for a later receive: the next one gets msg 2 */
            tl_desc_1(rd, DATA(&pr), 4096, pr.b.mh);
            TRC_SOFT(VipPostRecv(pr.vi, rd, pr.b.mh), VIP_SUCCESS);
            go(&pr);
            TRC_SOFT(VipRecvWait(pr.vi, 10000, &d), VIP_SUCCESS);
            CU_ASSERT_PTR_EQUAL(d, rd);
            EXPECT_STATUS(rd->CS.Status, 0);
            CU_ASSERT_EQUAL(rd->CS.Length, 200);
            CU_ASSERT_EQUAL(tl_verify(DATA(&pr), 200, 2), -1);
            char out[1 << 16];
            CU_ASSERT_EQUAL(tl_vipctl("vis", out, sizeof out), 0);
        } else {
            CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_ERROR);
            CU_ASSERT_EQUAL(cb_count, 1);
            CU_ASSERT_EQUAL(cb_code, VIP_ERROR_RECVQ_EMPTY);
            CU_ASSERT_PTR_EQUAL(cb_vi, pr.vi);
            go(&pr);
        }
        /* vipctl counters says why the NIC refused it */
        CU_ASSERT(refused_for("no_recv") >= before + 1);
    }
    pair_close(&pr);
}

static void test_no_receive_unreliable(void) { no_receive(VIP_SERVICE_UNRELIABLE); }
static void test_no_receive_reliable(void) { no_receive(VIP_SERVICE_RELIABLE_DELIVERY); }

/* VipDisconnect flushes what is queued and returns the VI to IDLE; the peer
 * loses its connection. */
static void test_disconnect_flushes(void)
{
    struct pair pr;
    pair_open(&pr, VIP_SERVICE_RELIABLE_DELIVERY);
    pr.pc.expect = EXP_ERROR;
    if (pair_connect(&pr, 0, 3) == 0) {
        VIP_DESCRIPTOR *d;
        TRC_SOFT(VipRecvDone(pr.vi, &d), VIP_NOT_DONE);
        TRC_SOFT(VipDisconnect(pr.vi), VIP_SUCCESS);
        CU_ASSERT_EQUAL(tl_vi_state(pr.vi), VIP_STATE_IDLE);
        for (unsigned k = 0; k < 3; k++) {
            TRC_SOFT(VipRecvDone(pr.vi, &d), VIP_SUCCESS);
            if (d) {
                CU_ASSERT_PTR_EQUAL(d, DESC(&pr, 64 + k));
                EXPECT_STATUS(d->CS.Status, VIP_STATUS_DESC_FLUSHED_ERROR);
            }
            d = NULL;
        }
        TRC_SOFT(VipRecvDone(pr.vi, &d), VIP_NOT_DONE);
        /* flushed is not in error: our VI's ERRS column (vipctl vis) stays 0 */
        static char vis[1 << 16];
        char pid[24];
        snprintf(pid, sizeof pid, " %d ", (int)getpid());
        CU_ASSERT_EQUAL(tl_vipctl("vis", vis, sizeof vis), 0);
        const char *line = strstr(vis, pid);
        const char *eol = line ? strchr(line, '\n') : NULL;
        const char *last = line ? line : "";
        for (const char *c = line; c && c < (eol ? eol : line + strlen(line)); c++)
            if (*c == ' ' && c[1] != ' ')
                last = c + 1;
        CU_ASSERT(line && atoi(last) == 0);
        /* idle again: sending is refused, receiving may be posted */
        tl_desc_1(DESC(&pr, 3), DATA(&pr), 10, pr.b.mh);
        TRC_SOFT(VipPostSend(pr.vi, DESC(&pr, 3), pr.b.mh), VIP_INVALID_STATE);
        go(&pr);
    }
    pair_close(&pr);
}

/* The same VI can connect again after a disconnect. */
static void test_reconnect_after_disconnect(void)
{
    struct pair p2;
    pair_open(&p2, VIP_SERVICE_UNRELIABLE);
    p2.pc.expect = EXP_NONE;
    if (pair_connect(&p2, 0, 0) == 0) {
        go(&p2);
        if (tl_parent_take(&p2.ch, 20000) == 'k')
            tl_parent_post(&p2.ch, 'q');
        TRC_SOFT(VipDisconnect(p2.vi), VIP_SUCCESS);
        TCHILD_OK(&p2.ch, 20000);
        /* connect the same VI to a new peer */
        p2.went = 0;
        tl_discrim(p2.pc.disc, "r");
        p2.pc.expect = EXP_MSG;
        p2.pc.expect_len = 777;
        if (tl_spawn(&p2.ch, peer_main, &p2.pc) == 0) {
            TRC_SOFT(tl_request(&p2.t, p2.vi, "via0", p2.pc.disc, 15000), VIP_SUCCESS);
            CU_ASSERT_EQUAL(tl_parent_take(&p2.ch, 15000), 'c');
            for (int i = 0; i < 4; i++)
                tl_parent_take(&p2.ch, 5000);
            tl_fill(DATA(&p2), 777, 3);
            tl_desc_1(DESC(&p2, 10), DATA(&p2), 777, p2.b.mh);
            EXPECT_STATUS(send_status(&p2, DESC(&p2, 10)), 0);
        }
    }
    pair_close(&p2);
}

/* Server VI and client VI of different reliability: the accept is refused;
 * the server may then reject, and the client learns VIP_REJECT. */
static int mismatch_server(void *arg)
{
    const struct peer *p = arg;
    struct tl_nic t;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_vi(&t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &vi), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(t.nic, "localhost", p->disc);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + 16);
    TC_CHECK(local && remote);
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES ra;
    TC_RC(VipConnectWait(t.nic, local, 15000, remote, &ra, &conn), VIP_SUCCESS);
    TC_CHECK(ra.ReliabilityLevel == VIP_SERVICE_RELIABLE_DELIVERY);
    TC_CHECK(remote->HostAddressLen == 6);
    TC_RC(VipConnectAccept(conn, vi), VIP_INVALID_RELIABILITY_LEVEL);
    TC_CHECK(tl_vi_state(vi) == VIP_STATE_IDLE);
    TC_RC(VipConnectReject(conn), VIP_SUCCESS);
    TC_RC(VipDestroyVi(vi), VIP_SUCCESS);
    free(local);
    free(remote);
    tl_close(&t);
    return 0;
}

static void test_reliability_mismatch_and_reject(void)
{
    struct peer p = {.rel = VIP_SERVICE_RELIABLE_DELIVERY};
    struct tl_child ch;
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    tl_discrim(p.disc, "m");
    TCHK(tl_spawn(&ch, mismatch_server, &p) == 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TRC_SOFT(tl_request(&t, vi, "via0", p.disc, 15000), VIP_REJECT);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_IDLE);
out:
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
    TCHILD_OK(&ch, 20000);
}

/* Bad handles and arguments to the connection calls. */
static void test_bad_connection_arguments(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    uint32_t garbage[64] = {0x434f4e30u, 1, 2};
    VIP_NET_ADDRESS *a = NULL;
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES ra;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    a = tl_addr(t.nic, "localhost", "x");
    TCHK(a != NULL);
    TRC_SOFT(VipConnectAccept(NULL, vi), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectAccept((VIP_CONN_HANDLE)garbage, vi), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectReject(NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectReject((VIP_CONN_HANDLE)garbage), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(NULL, a, a, 10, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest((VIP_VI_HANDLE)garbage, a, a, 10, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectRequest(vi, a, NULL, 10, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectWait(NULL, a, 10, NULL, &ra, &conn), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectWait(t.nic, NULL, 10, NULL, &ra, &conn), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipConnectWait(t.nic, a, 10, NULL, &ra, NULL), VIP_INVALID_PARAMETER);
    a->DiscriminatorLen = 17; /* above MaxDiscriminatorLen */
    TRC_SOFT(VipConnectWait(t.nic, a, 10, NULL, &ra, &conn), VIP_INVALID_PARAMETER);
    a->DiscriminatorLen = 1;
    a->HostAddressLen = 4; /* not a NIC address of this provider */
    TRC_SOFT(VipConnectRequest(vi, NULL, a, 10, &ra), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipDisconnect((VIP_VI_HANDLE)garbage), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipErrorCallback(NULL, NULL, on_error), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipErrorCallback((VIP_NIC_HANDLE)garbage, NULL, on_error), VIP_INVALID_PARAMETER);
out:
    free(a);
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_misaligned_descriptor),
        TL_TEST(test_garbage_memory_handle),
        TL_TEST(test_foreign_memory_handle),
        TL_TEST(test_stale_memory_handle),
        TL_TEST(test_segment_beyond_registration),
        TL_TEST(test_region_of_other_ptag),
        TL_TEST(test_length_above_vi_mtu),
        TL_TEST(test_too_many_segments),
        TL_TEST(test_reserved_control_bits),
        TL_TEST(test_rdma_read_unreliable),
        TL_TEST(test_reliable_delivery_bad_send), TL_TEST(test_default_handler_says_why),
        TL_TEST(test_reliable_reception_bad_send),
        TL_TEST(test_recv_too_small_unreliable),
        TL_TEST(test_recv_too_small_reliable),
        TL_TEST(test_no_receive_unreliable),
        TL_TEST(test_no_receive_reliable),
        TL_TEST(test_disconnect_flushes),
        TL_TEST(test_reconnect_after_disconnect),
        TL_TEST(test_reliability_mismatch_and_reject),
        TL_TEST(test_bad_connection_arguments),
        TL_END,
    };
    return tl_main(argc, argv, "errors", tests);
}

/*
 * test_ext.c - the short-message extensions deliver what the standard path
 * delivers: same bytes, same descriptor statuses, for every size up to the
 * threshold; above it (and for what does not qualify) they fall back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tlib.h"
#include "vipl_int.h"

#define MAXMSG 2048u
#define NRECV 8u

static const uint32_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 31, 63, 64, 100, 127, 128,
                                 200, 255, 256, 257, 300, 511, 1024, 2048};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct echo_cfg {
    char disc[17];
    unsigned nmsgs;
    VIP_RELIABILITY_LEVEL rel;
};

/* Server: echo every message back (standard sends), preserving immediate data. */
static int echo_server(void *arg)
{
    const struct echo_cfg *c = arg;
    struct tl_nic t;
    struct tl_buf desc, data;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &desc, 64 * (NRECV + 1)), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &data, (size_t)MAXMSG * (NRECV + 1)), VIP_SUCCESS);
    TC_RC(tl_vi(&t, c->rel, NULL, NULL, &vi), VIP_SUCCESS);
    for (unsigned k = 0; k < NRECV; k++) {
        VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(void *)(desc.p + 64 * k);
        tl_desc_1(d, data.p + MAXMSG * k, MAXMSG, data.mh);
        TC_RC(VipPostRecv(vi, d, desc.mh), VIP_SUCCESS);
    }
    TC_RC(tl_accept(&t, vi, c->disc, 20000), VIP_SUCCESS);
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)(desc.p + 64 * NRECV);
    for (unsigned i = 0; i < c->nmsgs; i++) {
        VIP_DESCRIPTOR *d;
        TC_RC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
        uint32_t len = d->CS.Length, st = d->CS.Status;
        uint8_t *p = d->DS[0].Local.Data.Address;
        tl_desc_1(sd, data.p + MAXMSG * NRECV, len, data.mh);
        memcpy(data.p + MAXMSG * NRECV, p, len);
        if (st & VIP_STATUS_IMMEDIATE) {
            sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
            sd->CS.ImmediateData = d->CS.ImmediateData;
        }
        TC_RC(VipPostRecv(vi, d, desc.mh), VIP_SUCCESS);
        TC_RC(VipPostSend(vi, sd, desc.mh), VIP_SUCCESS);
        VIP_DESCRIPTOR *s;
        TC_RC(VipSendWait(vi, 20000, &s), VIP_SUCCESS);
        TC_CHECK((s->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
    }
    /* The client disconnects only after this: a paced NIC completes the last
     * echo (T6) a little after the client has it, and a disconnect would
     * flush it. */
    TC_CHECK(tl_child_post('d') == 0);
    TC_CHECK(tl_child_take(20000) == 'q');
    VipDisconnect(vi);
    VipDestroyVi(vi);
    tl_buf_free(&desc);
    tl_buf_free(&data);
    tl_close(&t);
    return 0;
}

/* Data segments of each send (1, or 2: a header and a payload). */
static unsigned g_segs = 1;

/* Client: send every size (with and without immediate data) in `mode`;
 * record statuses; check the echo. Returns sends that took a fast path. */
static void run_mode(VIP_EXT_MODE mode, VIP_ULONG max, uint32_t st_send[][2],
                     uint32_t st_recv[][2], uint64_t *fast)
{
    struct echo_cfg cfg = {.nmsgs = 2 * NSIZES, .rel = VIP_SERVICE_RELIABLE_DELIVERY};
    tl_discrim(cfg.disc, "ext");
    struct tl_child ch = {0};
    struct tl_nic t = {0};
    struct tl_buf desc = {0}, data = {0};
    VIP_VI_HANDLE vi = NULL;
    *fast = 0;
    TCHK(tl_spawn(&ch, echo_server, &cfg) == 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &desc, 64 * 2), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &data, 2 * MAXMSG), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TRC(VipExtSetMode(vi, mode, max), VIP_SUCCESS);
    VIP_DESCRIPTOR *rd = (VIP_DESCRIPTOR *)(void *)desc.p, *sd = rd + 1;
    tl_desc_1(rd, data.p + MAXMSG, MAXMSG, data.mh);
    TRC(VipPostRecv(vi, rd, desc.mh), VIP_SUCCESS);
    TRC(tl_request(&t, vi, "localhost", cfg.disc, 20000), VIP_SUCCESS);
    for (unsigned i = 0; i < NSIZES; i++) {
        for (unsigned imm = 0; imm < 2; imm++) {
            uint32_t n = sizes[i], seq = i * 2 + imm;
            tl_fill(data.p, n, seq);
            if (g_segs == 2)
                tl_desc_split(sd, data.p, n, 2, data.mh);
            else
                tl_desc_1(sd, data.p, n, data.mh);
            if (imm) {
                sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
                sd->CS.ImmediateData = 0xabc00000u + seq;
            }
            TRC(VipPostSend(vi, sd, desc.mh), VIP_SUCCESS);
            VIP_DESCRIPTOR *d;
            TRC(VipSendWait(vi, 20000, &d), VIP_SUCCESS);
            TCHK(d == sd);
            st_send[i][imm] = d->CS.Status;
            TRC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
            TCHK(d == rd);
            st_recv[i][imm] = d->CS.Status;
            TCHK(d->CS.Length == n);
            TCHK(tl_verify(data.p + MAXMSG, n, seq) < 0);
            if (imm)
                TCHK(d->CS.ImmediateData == 0xabc00000u + seq);
            TRC(VipPostRecv(vi, rd, desc.mh), VIP_SUCCESS);
        }
    }
    TCHK(tl_parent_take(&ch, 20000) == 'd'); /* the server's last echo completed */
    struct vip_vi *v = vipl_vi(vi); /* (libvipl.a: the handle table is internal) */
    *fast = atomic_load(&v->db->cnt.tx_descless) + atomic_load(&v->db->cnt.tx_merged);
out:
    if (ch.pid)
        tl_parent_post(&ch, 'q');
    if (vi) {
        VipDisconnect(vi);
        VipDestroyVi(vi);
    }
    if (ch.pid)
        TCHILD_OK(&ch, 20000);
    tl_buf_free(&desc);
    tl_buf_free(&data);
    if (t.nic)
        tl_close(&t);
}

static void check_mode(VIP_EXT_MODE mode, VIP_ULONG max, uint64_t expect_fast)
{
    uint32_t ss[NSIZES][2], sr[NSIZES][2], es[NSIZES][2], er[NSIZES][2];
    uint64_t fast, fast_std;
    memset(ss, 0, sizeof ss);
    memset(es, 0, sizeof es);
    run_mode(VIP_EXT_STANDARD, 0, ss, sr, &fast_std);
    run_mode(mode, max, es, er, &fast);
    CU_ASSERT_EQUAL(fast_std, 0);
    CU_ASSERT_EQUAL(fast, expect_fast);
    for (unsigned i = 0; i < NSIZES; i++)
        for (unsigned imm = 0; imm < 2; imm++) {
            CU_ASSERT_EQUAL(es[i][imm], ss[i][imm]);
            CU_ASSERT_EQUAL(er[i][imm], sr[i][imm]);
            CU_ASSERT(ss[i][imm] & VIP_STATUS_DONE);
        }
}

static unsigned count_upto(uint32_t max)
{
    unsigned k = 0;
    for (unsigned i = 0; i < NSIZES; i++)
        k += sizes[i] <= max;
    return k;
}

/* Descriptorless sends carry immediate data too (a word beside the slot):
 * with and without, every size up to the threshold goes the short way. */
static void test_descless_same_as_standard(void)
{
    check_mode(VIP_EXT_DESCRIPTORLESS, 256, 2 * count_upto(256));
}

static void test_descless_threshold(void)
{
    check_mode(VIP_EXT_DESCRIPTORLESS, 16, 2 * count_upto(16));
}

/* Two data segments whose total fits: the library gathers them into the
 * short message (descriptorless and merged alike). */
static void test_two_segments_gathered(void)
{
    g_segs = 2;
    check_mode(VIP_EXT_DESCRIPTORLESS, 256, 2 * count_upto(256));
    check_mode(VIP_EXT_MERGED, 1024, 2 * count_upto(1024));
    g_segs = 1;
}

static void test_merged_same_as_standard(void)
{
    check_mode(VIP_EXT_MERGED, 1024, 2 * count_upto(1024));
}

static void test_merged_threshold(void)
{
    check_mode(VIP_EXT_MERGED, 100, 2 * count_upto(100));
}

static void test_set_mode_arguments(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_EXT_MODE m;
    VIP_ULONG max;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TRC(VipExtGetMode(vi, &m, &max), VIP_SUCCESS);
    TRC(VipExtSetMode(vi, VIP_EXT_DESCRIPTORLESS, VIP_EXT_DESCRIPTORLESS_MAX + 1),
        VIP_INVALID_PARAMETER);
    TRC(VipExtSetMode(vi, (VIP_EXT_MODE)7, 0), VIP_INVALID_PARAMETER);
    TRC(VipExtSetMode(NULL, VIP_EXT_MERGED, 0), VIP_INVALID_PARAMETER);
    TRC(VipExtSetMode(vi, VIP_EXT_MERGED, 0), VIP_SUCCESS);
    TRC(VipExtGetMode(vi, &m, &max), VIP_SUCCESS);
    TCHK(m == VIP_EXT_MERGED && max == VIP_EXT_MAX_DEFAULT);
out:
    if (vi)
        VipDestroyVi(vi);
    if (t.nic)
        tl_close(&t);
}

/* A bad segment handle does not qualify: the standard path reports it. */
static void test_bad_handle_falls_back(void)
{
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &b, 4096), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &vi), VIP_SUCCESS);
    TRC(VipExtSetMode(vi, VIP_EXT_DESCRIPTORLESS, 0), VIP_SUCCESS);
    struct vip_vi *v = vipl_vi(vi); /* (libvipl.a: the handle table is internal) */
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)b.p;
    tl_desc_1(sd, b.p + 1024, 4, 0x12345678u);
    /* Not connected: the library refuses before any path is chosen. */
    TRC(VipPostSend(vi, sd, b.mh), VIP_INVALID_STATE);
    TCHK(atomic_load(&v->db->cnt.tx_descless) == 0);
    TCHK(!atomic_load(&v->db->descless_busy[0]));
out:
    if (vi)
        VipDestroyVi(vi);
    tl_buf_free(&b);
    if (t.nic)
        tl_close(&t);
}

/* Descriptorless sends posted back to back on a reliable-reception VI: a
 * slot stays busy until the message sent from it is acknowledged, and the
 * receiver's NIC does not run (VIP_PROGRESS=manual, and the server waits)
 * until every send is posted. The first VIA_DESCLESS_NSLOTS sends take the
 * slots, the rest fall back to standard tokens; none may refill a slot the
 * NIC has not sent from (that would send another message's bytes). */
#define PIPE_N 8u
#define PIPE_LEN 200u

static int pipelined_server(void *arg)
{
    const char *disc = arg;
    struct tl_nic t;
    struct tl_buf desc, data;
    VIP_VI_HANDLE vi;
    setenv("VIP_PROGRESS", "manual", 1); /* the NIC runs only inside our calls */
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &desc, 64 * PIPE_N), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &data, 4096 * PIPE_N), VIP_SUCCESS);
    TC_RC(tl_vi(&t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, NULL, &vi), VIP_SUCCESS);
    for (unsigned k = 0; k < PIPE_N; k++) {
        VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(void *)(desc.p + 64 * k);
        tl_desc_1(d, data.p + 4096 * k, 4096, data.mh);
        TC_RC(VipPostRecv(vi, d, desc.mh), VIP_SUCCESS);
    }
    TC_RC(tl_accept(&t, vi, disc, 20000), VIP_SUCCESS);
    TC_CHECK(tl_child_take(20000) == 'g'); /* every send is posted */
    for (unsigned k = 0; k < PIPE_N; k++) {
        VIP_DESCRIPTOR *d;
        TC_RC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
        TC_CHECK(d == (VIP_DESCRIPTOR *)(void *)(desc.p + 64 * k));
        TC_CHECK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
        TC_CHECK(d->CS.Length == PIPE_LEN);
        long bad = tl_verify(data.p + 4096 * k, PIPE_LEN, 500 + k);
        if (bad >= 0)
            tl_child_fail(__FILE__, __LINE__, "message %u arrived with wrong bytes from %ld", k,
                          bad);
    }
    TC_CHECK(tl_child_take(20000) == 'q');
    VipDisconnect(vi);
    VipDestroyVi(vi);
    tl_buf_free(&desc);
    tl_buf_free(&data);
    tl_close(&t);
    return 0;
}

static void test_descless_pipelined(void)
{
    char disc[17];
    tl_discrim(disc, "dlp");
    struct tl_child ch = {0};
    struct tl_nic t = {0};
    struct tl_buf desc = {0}, data = {0};
    VIP_VI_HANDLE vi = NULL;
    TCHK(tl_spawn(&ch, pipelined_server, disc) == 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &desc, 64 * PIPE_N), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &data, 4096 * PIPE_N), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_RECEPTION, NULL, NULL, &vi), VIP_SUCCESS);
    TRC(VipExtSetMode(vi, VIP_EXT_DESCRIPTORLESS, PIPE_LEN), VIP_SUCCESS);
    TRC(tl_request(&t, vi, "localhost", disc, 20000), VIP_SUCCESS);
    for (unsigned k = 0; k < PIPE_N; k++) {
        VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)(desc.p + 64 * k);
        tl_fill(data.p + 4096 * k, PIPE_LEN, 500 + k);
        tl_desc_1(sd, data.p + 4096 * k, PIPE_LEN, data.mh);
        TRC(VipPostSend(vi, sd, desc.mh), VIP_SUCCESS);
    }
    struct vip_vi *v = vipl_vi(vi); /* (libvipl.a: the handle table is internal) */
    /* nothing acknowledged yet: only the free slots were used */
    TCHK(atomic_load(&v->db->cnt.tx_descless) <= VIA_DESCLESS_NSLOTS);
    TCHK(tl_parent_post(&ch, 'g') == 0);
    for (unsigned k = 0; k < PIPE_N; k++) {
        VIP_DESCRIPTOR *d;
        TRC(VipSendWait(vi, 20000, &d), VIP_SUCCESS);
        TCHK(d == (VIP_DESCRIPTOR *)(void *)(desc.p + 64 * k));
        TCHK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
    }
    TCHK(atomic_load(&v->db->cnt.tx_descless) == VIA_DESCLESS_NSLOTS);
out:
    if (ch.pid)
        tl_parent_post(&ch, 'q');
    if (vi) {
        VipDisconnect(vi);
        VipDestroyVi(vi);
    }
    if (ch.pid)
        TCHILD_OK(&ch, 20000);
    tl_buf_free(&desc);
    tl_buf_free(&data);
    if (t.nic)
        tl_close(&t);
}

static const struct tl_test tests[] = {
    TL_TEST(test_descless_same_as_standard),
    TL_TEST(test_descless_threshold),
    TL_TEST(test_merged_same_as_standard),
    TL_TEST(test_merged_threshold),
    TL_TEST(test_set_mode_arguments),
    TL_TEST(test_bad_handle_falls_back),
    TL_TEST(test_descless_pipelined),
    TL_TEST(test_two_segments_gathered),
    TL_END,
};

int main(int argc, char **argv)
{
    return tl_main(argc, argv, "extensions", tests);
}

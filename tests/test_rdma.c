/*
 * test_rdma.c - RDMA through VIPL between two processes: writes with and
 * without immediate data, reads, QFENCE, and every protection violation a
 * program can commit, against a target that computes or sleeps and calls
 * no VIPL function while the data move.
 *
 * The child is the target. It registers three regions (RDMA-enabled, not
 * enabled, and enabled but under another ptag), accepts the parent's VI,
 * tells it the regions in a first message, and then spends its time as the
 * test says. The parent initiates and reports; the child checks its own
 * memory and VI.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lib/tlib.h"

#define REG_LEN (1u << 20)
#define SEQ_WRITE 31u
#define SEQ_READ 70u
#define SEQ_AFTER 99u

/* R_STALE was registered and deregistered before the initiator hears of it. */
enum tgt_region { R_GOOD, R_NO_RDMA, R_OTHER_PTAG, R_STALE, R_N };

/* What the target tells the initiator in its first message. */
struct tgt_info {
    uint64_t addr[R_N];
    uint32_t mh[R_N];
};

/* How the target spends the time while the initiator works. */
enum tgt_mode {
    TGT_SLEEP,   /* blocked in read(2) on a pipe until the parent says 'v' */
    TGT_COMPUTE, /* spins over its memory until the write is there */
    TGT_FENCE,   /* waits for a message, then overwrites the read region */
    TGT_BROKEN,  /* sleeps; then its VI must be in the error state */
    TGT_IMM,     /* waits for the receive an RDMA write with immediate data completes */
    TGT_DEREG,   /* deregisters R_GOOD while the initiator's RDMA runs, then makes
                  * it unreachable (PROT_NONE): a later NIC copy would kill it */
};

struct tgt_cfg {
    VIP_RELIABILITY_LEVEL rel;
    enum tgt_mode mode;
    bool vi_rdma; /* the target VI's RDMA enables */
    uint32_t len; /* bytes the initiator writes at R_GOOD + off */
    uint32_t off;
    uint32_t imm;
    char disc[17];
};

static VIP_RETURN reg_region(struct tl_nic *t, VIP_PROTECTION_HANDLE ptag, bool rdma, uint8_t **p,
                             VIP_MEM_HANDLE *mh)
{
    *p = aligned_alloc(4096, REG_LEN);
    if (!*p)
        return VIP_ERROR_RESOURCE;
    memset(*p, 0, REG_LEN);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = ptag, .EnableRdmaWrite = rdma, .EnableRdmaRead = rdma};
    return VipRegisterMem(t->nic, *p, REG_LEN, &ma, mh);
}

static int target(void *arg)
{
    const struct tgt_cfg *c = arg;
    struct tl_nic t;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    VIP_PROTECTION_HANDLE other;
    TC_RC(VipCreatePtag(t.nic, &other), VIP_SUCCESS);
    uint8_t *reg[R_N];
    VIP_MEM_HANDLE mh[R_N];
    TC_RC(reg_region(&t, t.ptag, true, &reg[R_GOOD], &mh[R_GOOD]), VIP_SUCCESS);
    TC_RC(reg_region(&t, t.ptag, false, &reg[R_NO_RDMA], &mh[R_NO_RDMA]), VIP_SUCCESS);
    TC_RC(reg_region(&t, other, true, &reg[R_OTHER_PTAG], &mh[R_OTHER_PTAG]), VIP_SUCCESS);
    TC_RC(reg_region(&t, t.ptag, true, &reg[R_STALE], &mh[R_STALE]), VIP_SUCCESS);
    TC_RC(VipDeregisterMem(t.nic, reg[R_STALE], mh[R_STALE]), VIP_SUCCESS);
    tl_fill(reg[R_GOOD], REG_LEN, SEQ_READ);
    struct tl_buf ctl;
    TC_RC(tl_buf_alloc(&t, &ctl, 8192), VIP_SUCCESS);
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)ctl.p, *rd = sd + 1;
    struct tgt_info *info = (struct tgt_info *)(void *)(ctl.p + 4096);
    uint8_t *rbuf = ctl.p + 6144;

    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = c->rel, .MaxTransferSize = t.attr.MaxTransferSize,
                            .Ptag = t.ptag, .EnableRdmaWrite = c->vi_rdma,
                            .EnableRdmaRead = c->vi_rdma && c->rel != VIP_SERVICE_UNRELIABLE};
    VIP_VI_HANDLE vi;
    TC_RC(VipCreateVi(t.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
    tl_desc_1(rd, rbuf, 64, ctl.mh);
    TC_RC(VipPostRecv(vi, rd, ctl.mh), VIP_SUCCESS);
    TC_RC(tl_accept(&t, vi, c->disc, 20000), VIP_SUCCESS);
    for (unsigned i = 0; i < R_N; i++) {
        info->addr[i] = (uint64_t)(uintptr_t)reg[i];
        info->mh[i] = mh[i];
    }
    tl_desc_1(sd, info, sizeof *info, ctl.mh);
    VIP_DESCRIPTOR *done;
    TC_RC(VipPostSend(vi, sd, ctl.mh), VIP_SUCCESS);
    TC_RC(VipSendWait(vi, 10000, &done), VIP_SUCCESS);

    /* From here on no VIPL call until the parent's token. */
    switch (c->mode) {
    case TGT_SLEEP:
        TC_CHECK(tl_child_take(-1) == 'v');
        TC_CHECK(tl_verify(reg[R_GOOD] + c->off, c->len, SEQ_WRITE) == -1);
        break;
    case TGT_COMPUTE: {
        uint64_t end = tl_now_ms() + 10000;
        volatile uint8_t *last = reg[R_GOOD] + c->off + c->len - 1;
        uint8_t want = tl_pat(SEQ_WRITE, c->len - 1);
        while (*last != want && tl_now_ms() < end)
            ;
        TC_CHECK(*last == want);
        TC_CHECK(tl_verify(reg[R_GOOD] + c->off, c->len, SEQ_WRITE) == -1);
        TC_CHECK(tl_child_post('d') == 0);
        TC_CHECK(tl_child_take(-1) == 'v');
        break;
    }
    case TGT_FENCE:
        /* The fenced message: the read before it has taken its data. */
        TC_RC(VipRecvWait(vi, 20000, &done), VIP_SUCCESS);
        TC_CHECK(done == rd && (rd->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
        tl_fill(reg[R_GOOD], REG_LEN, SEQ_AFTER);
        TC_CHECK(tl_child_post('f') == 0);
        TC_CHECK(tl_child_take(-1) == 'v');
        break;
    case TGT_IMM:
        TC_RC(VipRecvWait(vi, 20000, &done), VIP_SUCCESS);
        TC_CHECK(done == rd);
        TC_CHECK((rd->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) == VIP_STATUS_DONE);
        TC_CHECK((rd->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_REMOTE_RDMA_WRITE);
        TC_CHECK(rd->CS.Status & VIP_STATUS_IMMEDIATE);
        TC_CHECK(rd->CS.ImmediateData == c->imm);
        TC_CHECK(rd->CS.Length == c->len);
        TC_CHECK(tl_verify(reg[R_GOOD] + c->off, c->len, SEQ_WRITE) == -1);
        TC_CHECK(tl_child_post('f') == 0);
        TC_CHECK(tl_child_take(-1) == 'v');
        break;
    case TGT_DEREG: {
        TC_CHECK(tl_child_take(-1) == 'g'); /* the initiator's RDMA is running */
        TC_RC(VipDeregisterMem(t.nic, reg[R_GOOD], mh[R_GOOD]), VIP_SUCCESS);
        /* what a deregistration promises: no NIC touches the region again */
        TC_CHECK(mprotect(reg[R_GOOD], REG_LEN, PROT_NONE) == 0);
        TC_CHECK(tl_child_post('d') == 0);
        uint64_t end = tl_now_ms() + 10000;
        while (tl_vi_state(vi) != VIP_STATE_ERROR && tl_now_ms() < end)
            ;
        TC_CHECK(tl_vi_state(vi) == VIP_STATE_ERROR); /* the refused RDMA broke it */
        TC_CHECK(tl_child_take(-1) == 'v');
        TC_CHECK(mprotect(reg[R_GOOD], REG_LEN, PROT_READ | PROT_WRITE) == 0);
        break;
    }
    case TGT_BROKEN: {
        TC_CHECK(tl_child_take(-1) == 'v');
        /* The NIC NAKs the violation, then moves the VI to the error
         * state: the parent's token may come between the two. */
        uint64_t end = tl_now_ms() + 5000;
        while (tl_vi_state(vi) != VIP_STATE_ERROR && tl_now_ms() < end)
            ;
        TC_CHECK(tl_vi_state(vi) == VIP_STATE_ERROR);
        TC_CHECK(tl_verify(reg[R_GOOD], REG_LEN, SEQ_READ) == -1);
        for (unsigned i = R_NO_RDMA; i < R_N; i++)
            for (uint32_t k = 0; k < REG_LEN; k++)
                TC_CHECK(reg[i][k] == 0);
        break;
    }
    }
    VipDisconnect(vi);
    VipDestroyVi(vi);
    for (unsigned i = 0; i < R_N; i++) {
        if (i != R_STALE)
            VipDeregisterMem(t.nic, reg[i], mh[i]);
        free(reg[i]);
    }
    tl_buf_free(&ctl);
    VipDestroyPtag(t.nic, other);
    tl_close(&t);
    return 0;
}

/* The initiator's side of one connection. */
struct init {
    struct tgt_cfg cfg;
    struct tl_child ch;
    struct tl_nic t;
    struct tl_buf buf; /* descriptors at 0, data from 64 KiB */
    VIP_VI_HANDLE vi;
    struct tgt_info info;
    bool up;
};

static VIP_DESCRIPTOR *idesc(struct init *in, unsigned k)
{
    return (VIP_DESCRIPTOR *)(void *)(in->buf.p + 1024 * k);
}
static uint8_t *idata(struct init *in) { return in->buf.p + 65536; }

static int init_open(struct init *in, const struct tgt_cfg *cfg)
{
    memset(in, 0, sizeof *in);
    in->cfg = *cfg;
    VIP_RELIABILITY_LEVEL rel = cfg->rel;
    tl_discrim(in->cfg.disc, "rd");
    if (tl_spawn(&in->ch, target, &in->cfg) != 0) {
        CU_FAIL("fork");
        return -1;
    }
    in->up = true;
    TRC(tl_open(&in->t, "via1"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&in->t, &in->buf, 65536 + 2 * REG_LEN), VIP_SUCCESS);
    TRC(tl_vi(&in->t, rel, NULL, NULL, &in->vi), VIP_SUCCESS);
    VIP_DESCRIPTOR *rd = idesc(in, 0), *d;
    tl_desc_1(rd, idata(in), sizeof in->info, in->buf.mh);
    TRC(VipPostRecv(in->vi, rd, in->buf.mh), VIP_SUCCESS);
    TRC(tl_request(&in->t, in->vi, "via0", in->cfg.disc, 20000), VIP_SUCCESS);
    TRC(VipRecvWait(in->vi, 20000, &d), VIP_SUCCESS);
    memcpy(&in->info, idata(in), sizeof in->info);
    return 0;
out:
    return -1;
}

static void init_close(struct init *in)
{
    if (in->vi) {
        VipDisconnect(in->vi);
        VipDestroyVi(in->vi);
    }
    tl_buf_free(&in->buf);
    if (in->t.nic)
        tl_close(&in->t);
    if (in->up)
        TCHILD_OK(&in->ch, 20000);
}

/* An RDMA descriptor: DS[0] the remote range, then one local segment per
 * 64 KiB of local data (at most 15). */
static void rdma_desc(VIP_DESCRIPTOR *d, uint16_t control, uint64_t raddr, VIP_MEM_HANDLE rkey,
                      uint8_t *local, uint32_t len, VIP_MEM_HANDLE mh)
{
    unsigned nseg = len / 65536 + 1;
    if (nseg > 15)
        nseg = 15;
    memset(d, 0, tl_desc_size(nseg + 1));
    d->CS.Control = control;
    d->CS.SegCount = (VIP_UINT16)(nseg + 1);
    d->CS.Length = len;
    d->DS[0].Remote.Data.AddressBits = raddr;
    d->DS[0].Remote.Handle = rkey;
    uint32_t off = 0;
    for (unsigned i = 0; i < nseg; i++) {
        uint32_t l = len / nseg + (i < len % nseg ? 1 : 0);
        VIP_DATA_SEGMENT *s = tl_seg(d, i + 1);
        s->Data.Address = local + off;
        s->Handle = mh;
        s->Length = l;
        off += l;
    }
}

/* Post d and wait for it; its status. */
static uint32_t post_wait(struct init *in, VIP_DESCRIPTOR *d)
{
    VIP_DESCRIPTOR *got = NULL;
    VIP_RETURN rc = VipPostSend(in->vi, d, in->buf.mh);
    if (rc == VIP_SUCCESS)
        rc = VipSendWait(in->vi, 20000, &got);
    if (rc != VIP_SUCCESS || got != d) {
        tl_report_rc(__FILE__, __LINE__, "post and wait", rc, VIP_SUCCESS);
        return 0;
    }
    return d->CS.Status;
}

/* ---- writes --------------------------------------------------------------------- */

/* An RDMA write lands in a target that sleeps (reliable levels: placed
 * when the initiator's descriptor completes) or computes (it sees the data
 * appear in its memory, unreliable included). */
static void write_case(VIP_RELIABILITY_LEVEL rel, enum tgt_mode mode, uint32_t len, uint32_t off)
{
    struct init in;
    struct tgt_cfg c = {.rel = rel, .mode = mode, .vi_rdma = true, .len = len, .off = off};
    if (init_open(&in, &c) == 0) {
        tl_fill(idata(&in), len, SEQ_WRITE);
        VIP_DESCRIPTOR *d = idesc(&in, 1);
        rdma_desc(d, VIP_CONTROL_OP_RDMAWRITE, in.info.addr[R_GOOD] + off, in.info.mh[R_GOOD],
                  idata(&in), len, in.buf.mh);
        uint32_t st = post_wait(&in, d);
        CU_ASSERT_EQUAL(st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK), VIP_STATUS_DONE);
        CU_ASSERT_EQUAL(st & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RDMA_WRITE);
        if (mode == TGT_COMPUTE)
            CU_ASSERT_EQUAL(tl_parent_take(&in.ch, 15000), 'd');
        CU_ASSERT_EQUAL(tl_parent_post(&in.ch, 'v'), 0);
    }
    init_close(&in);
}

/* The target deregisters its region while the initiator writes (or reads)
 * it again and again, 1 MiB at a time, and at once makes it unreachable:
 * the operation that meets the closed entry fails, and the target, which
 * would die on any later copy, lives. */
static void dereg_case(uint16_t op)
{
    struct init in;
    struct tgt_cfg c = {.rel = VIP_SERVICE_RELIABLE_DELIVERY, .mode = TGT_DEREG, .vi_rdma = true};
    if (init_open(&in, &c) == 0) {
        uint32_t len = REG_LEN, st = 0;
        tl_fill(idata(&in), len, SEQ_WRITE);
        VIP_DESCRIPTOR *d = idesc(&in, 1);
        for (unsigned n = 0; n < 1000000; n++) {
            rdma_desc(d, op, in.info.addr[R_GOOD], in.info.mh[R_GOOD], idata(&in), len,
                      in.buf.mh);
            st = post_wait(&in, d);
            if (n == 0)
                CU_ASSERT_EQUAL(tl_parent_post(&in.ch, 'g'), 0);
            if (!st || (st & VIP_STATUS_ERROR_MASK))
                break;
        }
        /* It fails. (Met on its first fragment: the protection error; met
         * mid-way, the target's refusal breaks the connection while the
         * initiator still sends, and its descriptor is flushed or gets
         * the transport error before the NAK is read: spec-notes/rdma.md.) */
        uint32_t failed = VIP_STATUS_RDMA_PROT_ERROR | VIP_STATUS_TRANSPORT_ERROR |
                          VIP_STATUS_DESC_FLUSHED_ERROR;
        CU_ASSERT(st & failed);
        if (!(st & failed))
            fprintf(stderr, "\n  op 0x%x after the deregistration: status 0x%x\n", op, st);
        CU_ASSERT_EQUAL(tl_parent_take(&in.ch, 15000), 'd');
        CU_ASSERT_EQUAL(tl_parent_post(&in.ch, 'v'), 0);
    }
    init_close(&in);
}

static void test_deregistered_under_rdma(void)
{
    dereg_case(VIP_CONTROL_OP_RDMAWRITE);
    dereg_case(VIP_CONTROL_OP_RDMAREAD);
}

static void test_write_target_sleeps(void)
{
    write_case(VIP_SERVICE_RELIABLE_DELIVERY, TGT_SLEEP, 300000, 4096);
    write_case(VIP_SERVICE_RELIABLE_RECEPTION, TGT_SLEEP, 1000, 8);
}

static void test_write_target_computes(void)
{
    write_case(VIP_SERVICE_UNRELIABLE, TGT_COMPUTE, 200000, 100);
    write_case(VIP_SERVICE_RELIABLE_DELIVERY, TGT_COMPUTE, REG_LEN - 4096, 4096);
}

/* With immediate data the target's next receive completes as the remote
 * write, with the immediate value and the write's length. */
static void test_write_immediate(void)
{
    static const VIP_RELIABILITY_LEVEL rels[] = {VIP_SERVICE_UNRELIABLE,
                                                 VIP_SERVICE_RELIABLE_DELIVERY,
                                                 VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned r = 0; r < 3; r++) {
        struct init in;
        struct tgt_cfg c = {.rel = rels[r], .mode = TGT_IMM, .vi_rdma = true, .len = 5000,
                            .off = 64, .imm = 0xFEED0000u + r};
        if (init_open(&in, &c) == 0) {
            tl_fill(idata(&in), 5000, SEQ_WRITE);
            VIP_DESCRIPTOR *d = idesc(&in, 1);
            rdma_desc(d, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE,
                      in.info.addr[R_GOOD] + 64, in.info.mh[R_GOOD], idata(&in), 5000,
                      in.buf.mh);
            d->CS.ImmediateData = c.imm;
            uint32_t st = post_wait(&in, d);
            CU_ASSERT_EQUAL(st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK), VIP_STATUS_DONE);
            CU_ASSERT_EQUAL(st & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RDMA_WRITE);
            CU_ASSERT(st & VIP_STATUS_IMMEDIATE);
            CU_ASSERT_EQUAL(tl_parent_take(&in.ch, 15000), 'f');
            CU_ASSERT_EQUAL(tl_parent_post(&in.ch, 'v'), 0);
        }
        init_close(&in);
    }
}

/* ---- reads ------------------------------------------------------------------------ */

/* Reads from a target that sleeps: its NIC answers alone. */
static void test_read_target_sleeps(void)
{
    static const uint32_t lens[] = {0, 1, 4096, 100000, REG_LEN};
    static const VIP_RELIABILITY_LEVEL rels[] = {VIP_SERVICE_RELIABLE_DELIVERY,
                                                 VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned r = 0; r < 2; r++) {
        struct init in;
        struct tgt_cfg c = {.rel = rels[r], .mode = TGT_SLEEP, .vi_rdma = true};
        if (init_open(&in, &c) == 0) {
            for (unsigned i = 0; i < sizeof lens / sizeof lens[0]; i++) {
                uint32_t len = lens[i], off = len == REG_LEN ? 0 : 8 * i;
                memset(idata(&in), 0xEE, len + 4096);
                VIP_DESCRIPTOR *d = idesc(&in, 1);
                rdma_desc(d, VIP_CONTROL_OP_RDMAREAD, in.info.addr[R_GOOD] + off,
                          in.info.mh[R_GOOD], idata(&in), len, in.buf.mh);
                uint32_t st = post_wait(&in, d);
                CU_ASSERT_EQUAL(st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK), VIP_STATUS_DONE);
                CU_ASSERT_EQUAL(st & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RDMA_READ);
                bool same = true;
                for (uint32_t k = 0; k < len && same; k++)
                    same = idata(&in)[k] == tl_pat(SEQ_READ, off + k);
                CU_ASSERT_TRUE(same);
                uint8_t *after = idata(&in) + len;
                bool untouched = true;
                for (uint32_t k = 0; k < 4096 && untouched; k++)
                    untouched = after[k] == 0xEE;
                CU_ASSERT_TRUE(untouched);
            }
        }
        CU_ASSERT_EQUAL(tl_parent_post(&in.ch, 'v'), 0);
        init_close(&in);
    }
}

/* QFENCE: a message fenced behind a read is not started before the read
 * has its data; the target overwrites the region as soon as the message is
 * there, so a read that finished later would see the new bytes. */
static void test_qfence(void)
{
    struct init in;
    struct tgt_cfg c = {.rel = VIP_SERVICE_RELIABLE_DELIVERY, .mode = TGT_FENCE, .vi_rdma = true};
    if (init_open(&in, &c) == 0) {
        VIP_DESCRIPTOR *rdd = idesc(&in, 1), *sd = idesc(&in, 40), *got;
        rdma_desc(rdd, VIP_CONTROL_OP_RDMAREAD, in.info.addr[R_GOOD], in.info.mh[R_GOOD],
                  idata(&in), REG_LEN, in.buf.mh);
        tl_desc_1(sd, idata(&in) + REG_LEN, 16, in.buf.mh);
        sd->CS.Control |= VIP_CONTROL_QFENCE;
        TRC(VipPostSend(in.vi, rdd, in.buf.mh), VIP_SUCCESS);
        TRC(VipPostSend(in.vi, sd, in.buf.mh), VIP_SUCCESS);
        TRC(VipSendWait(in.vi, 20000, &got), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(got, rdd);
        TRC(VipSendWait(in.vi, 20000, &got), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(got, sd);
        CU_ASSERT_EQUAL(rdd->CS.Status & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(sd->CS.Status & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(tl_verify(idata(&in), REG_LEN, SEQ_READ), -1);
        CU_ASSERT_EQUAL(tl_parent_take(&in.ch, 15000), 'f');
        /* a read now sees what the target wrote after the message */
        rdma_desc(rdd, VIP_CONTROL_OP_RDMAREAD, in.info.addr[R_GOOD], in.info.mh[R_GOOD],
                  idata(&in), 4096, in.buf.mh);
        CU_ASSERT_EQUAL(post_wait(&in, rdd) & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(tl_verify(idata(&in), 4096, SEQ_AFTER), -1);
    }
out:
    tl_parent_post(&in.ch, 'v');
    init_close(&in);
}

/* ---- protection --------------------------------------------------------------------- */

enum violation {
    V_REGION_NOT_ENABLED,
    V_VI_NOT_ENABLED,
    V_OTHER_PTAG,
    V_STALE_HANDLE, /* deregistered */
    V_PAST_END,
    V_WRAP,
    V_N
};
static const char *const violation_name[V_N] = {"region not enabled", "VI not enabled",
                                                "region of another ptag", "stale handle",
                                                "past the region's end", "address wrap-around"};

/* The initiator's descriptor completes with the RDMA protection error, its
 * VI and the target's go to the error state, the target's memory is as it
 * was, and nothing of it reaches the initiator. */
static void violation_case(uint16_t op, enum violation v)
{
    struct init in;
    struct tgt_cfg c = {.rel = VIP_SERVICE_RELIABLE_DELIVERY, .mode = TGT_BROKEN,
                        .vi_rdma = v != V_VI_NOT_ENABLED};
    if (init_open(&in, &c) == 0) {
        uint64_t raddr = in.info.addr[R_GOOD];
        VIP_MEM_HANDLE rkey = in.info.mh[R_GOOD];
        uint32_t len = 8192;
        switch (v) {
        case V_REGION_NOT_ENABLED:
            raddr = in.info.addr[R_NO_RDMA];
            rkey = in.info.mh[R_NO_RDMA];
            break;
        case V_OTHER_PTAG:
            raddr = in.info.addr[R_OTHER_PTAG];
            rkey = in.info.mh[R_OTHER_PTAG];
            break;
        case V_STALE_HANDLE:
            raddr = in.info.addr[R_STALE];
            rkey = in.info.mh[R_STALE];
            break;
        case V_PAST_END:
            raddr += REG_LEN - 4096;
            break;
        case V_WRAP:
            raddr = UINT64_MAX - 4095;
            break;
        default:
            break;
        }
        memset(idata(&in), 0xEE, len);
        tl_fill(idata(&in) + len, len, SEQ_WRITE);
        VIP_DESCRIPTOR *d = idesc(&in, 1);
        rdma_desc(d, op, raddr, rkey, idata(&in) + (op == VIP_CONTROL_OP_RDMAWRITE ? len : 0), len,
                  in.buf.mh);
        uint32_t st = post_wait(&in, d);
        CU_ASSERT_EQUAL(st & VIP_STATUS_ERROR_MASK, VIP_STATUS_RDMA_PROT_ERROR);
        if ((st & VIP_STATUS_ERROR_MASK) != VIP_STATUS_RDMA_PROT_ERROR)
            fprintf(stderr, "\n  RDMA %s, %s: status 0x%x\n",
                    op == VIP_CONTROL_OP_RDMAWRITE ? "write" : "read", violation_name[v], st);
        CU_ASSERT_EQUAL(tl_vi_state(in.vi), VIP_STATE_ERROR);
        bool untouched = true;
        for (uint32_t k = 0; k < len && untouched; k++)
            untouched = idata(&in)[k] == 0xEE;
        CU_ASSERT_TRUE(untouched);
    }
    tl_parent_post(&in.ch, 'v');
    init_close(&in);
}

static void test_write_violations(void)
{
    for (unsigned v = 0; v < V_N; v++)
        violation_case(VIP_CONTROL_OP_RDMAWRITE, (enum violation)v);
}

static void test_read_violations(void)
{
    for (unsigned v = 0; v < V_N; v++)
        violation_case(VIP_CONTROL_OP_RDMAREAD, (enum violation)v);
}

/* RDMAReadSupport names the levels that read; a VI asking for reads at
 * another level is refused. */
static void test_read_support(void)
{
    struct tl_nic t;
    VIP_VI_HANDLE vi = NULL;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    CU_ASSERT_EQUAL(t.attr.RDMAReadSupport,
                    VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION);
    VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = VIP_SERVICE_UNRELIABLE,
                           .MaxTransferSize = t.attr.MaxTransferSize, .Ptag = t.ptag,
                           .EnableRdmaRead = VIP_TRUE};
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_RDMAREAD);
    a.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_SUCCESS);
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
out:;
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_read_support),
        TL_TEST(test_write_target_sleeps),
        TL_TEST(test_write_target_computes),
        TL_TEST(test_write_immediate),
        TL_TEST(test_read_target_sleeps),
        TL_TEST(test_qfence),
        TL_TEST(test_write_violations),
        TL_TEST(test_read_violations),
        TL_TEST(test_deregistered_under_rdma),
        TL_END,
    };
    return tl_main(argc, argv, "RDMA", tests);
}

/*
 * test_cma.c - large SENDs and RDMA writes in one copy (lanai-fw/fw_cma.c):
 * the sending NIC publishes a SEND_RTS (WRITE_RTS) naming its segments, the
 * receiving NIC pulls the bytes with process_vm_readv and its ACK completes
 * the descriptor.
 *
 * The firmware fixture (tests/lib/tfw.h) with both VIs' peer named by a
 * pidfd of this process, as vipd names the peer process of a local
 * connection; the pull then reads this process's memory, which the kernel
 * always allows; VIP_CMA=1 turns it on (off by default). The kernel's
 * refusal (EPERM) cannot be had as root, so the tests refuse the way a
 * receiving NIC with it off does: the same return of fw_cma_pull, the
 * same fallback. run_tests.sh runs multi-process tests with VIP_CMA=1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/tfw.h"

/* pidfd_open(2) unknown here (valgrind does not know the call): the NIC
 * cannot name its peer and no connection may pull; the tests say so and
 * stop. */
static bool pidfd_known(void)
{
    int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (fd >= 0)
        close(fd);
    if (fd < 0 && errno == ENOSYS) {
        fprintf(stderr, " (skipped: pidfd_open is not known here, e.g. under valgrind) ");
        return false;
    }
    return true;
}

/* VIP_CMA=1 (the NIC reads it when it is built), both peers known; false
 * (nothing set up) where the kernel cannot give the NIC its peer. */
static bool setup_cma(uint32_t rel, bool cq)
{
    if (!pidfd_known())
        return false;
    setenv("VIP_CMA", "1", 1);
    setup_opts(&(struct opts){.rel = rel, .connect = true, .cq = cq, .cma = true});
    unsetenv("VIP_CMA");
    return true;
}

/* B answered with a NAK of `why`; A takes it: its send completes with the
 * transport error, its VI breaks, its program hears CONN_LOST. */
static void nak_fails_sender(uint32_t why, VIP_DESCRIPTOR *sd)
{
    struct via_wire_hdr h;
    CU_ASSERT_TRUE_FATAL(look(1, &h));
    CU_ASSERT_EQUAL(h.type, VIA_PKT_NAK);
    CU_ASSERT_EQUAL(h.imm, why);
    progress(F.a);
    ERR_EXPECT(status_of(sd), VIP_STATUS_TRANSPORT_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    EXPECT_ERROR(F.a, VIP_ERROR_CONN_LOST, false);
}

/* The type of the next packet A has put on the link, left there. */
static uint8_t next_from_a(void)
{
    struct via_wire_hdr h;
    return look(0, &h) ? h.type : 0;
}

/* One message of len bytes, ss send and rs receive segments: posted, the
 * packet type A chose checked, then pumped and checked whole (tfw's xfer
 * does the same checks; here the type is looked at between post and pump). */
static void rdv_xfer(uint32_t rel, uint32_t len, unsigned ss, unsigned rs, int imm,
                     uint8_t want_type)
{
    if (!setup_cma(rel, false))
        return;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    uint8_t *sdata = F.mem + OFF_SDATA, *rdata = F.mem + OFF_RDATA;
    tl_fill(sdata, len, len);
    memset(rdata, 0xEE, len + 164);
    tl_desc_split(sd, sdata, len, ss, F.mh);
    if (imm) {
        sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
        sd->CS.ImmediateData = 0xC0DE0000u + len;
    }
    tl_desc_split(rd, rdata, len + 100, rs, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(next_from_a(), want_type);
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump_nic(w, 2), 0);
    CU_ASSERT_EQUAL(status_of(sd) & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(status_of(rd) & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(status_of(sd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_SEND);
    CU_ASSERT_EQUAL(status_of(rd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
    CU_ASSERT_EQUAL(rd->CS.Length, len);
    CU_ASSERT_EQUAL(tl_verify(rdata, len, len), -1);
    CU_ASSERT_EQUAL(rdata[len], 0xEE); /* not a byte more */
    if (imm) {
        CU_ASSERT(status_of(rd) & VIP_STATUS_IMMEDIATE);
        CU_ASSERT_EQUAL(rd->CS.ImmediateData, 0xC0DE0000u + len);
    }
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 0);
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    teardown();
}

/* From FW_CMA_MIN bytes a SEND goes as a SEND_RTS, below it through the
 * ring; either way every byte arrives, in every segment layout. */
static void test_large_sends_intact(void)
{
    static const uint32_t rels[] = {VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned r = 0; r < 2; r++) {
        rdv_xfer(rels[r], FW_CMA_MIN - 64, 3, 2, 0, VIA_PKT_SEND);
        rdv_xfer(rels[r], FW_CMA_MIN, 1, 1, 0, VIA_PKT_SEND_RTS);
        rdv_xfer(rels[r], FW_CMA_MIN + 4097, 16, 5, 1, VIA_PKT_SEND_RTS);
        rdv_xfer(rels[r], 1u << 20, 7, 16, 1, VIA_PKT_SEND_RTS);
        rdv_xfer(rels[r], (1u << 20) - 3, 16, 1, 0, VIA_PKT_SEND_RTS);
    }
}

/* An unreliable VI and a paced NIC keep the ring. */
static void test_ring_kept(void)
{
    rdv_xfer(VIP_SERVICE_UNRELIABLE, 1u << 20, 2, 2, 0, VIA_PKT_SEND);
}

#define MANY 4u
#define MANY_LEN FW_CMA_MIN

/* Sends and receives posted MANY at a time, through a CQ of 4 slots (half
 * of what they complete) the test empties as it goes: every byte arrives, each descriptor completes
 * once, with its CQ entry, and the sends complete in order. */
static void test_many_outstanding_cq(void)
{
    if (!setup_cma(VIP_SERVICE_RELIABLE_DELIVERY, true))
        return;
    VIP_DESCRIPTOR *sd[MANY], *rd[MANY];
    for (unsigned i = 0; i < MANY; i++) {
        sd[i] = at(OFF_SDESC + 512 * i);
        rd[i] = at(OFF_RDESC + 512 * i);
        tl_fill(F.mem + OFF_SDATA + i * MANY_LEN, MANY_LEN, 100 + i);
        memset(F.mem + OFF_RDATA + i * MANY_LEN, 0xEE, MANY_LEN);
        tl_desc_split(sd[i], F.mem + OFF_SDATA + i * MANY_LEN, MANY_LEN, 1 + i, F.mh);
        tl_desc_split(rd[i], F.mem + OFF_RDATA + i * MANY_LEN, MANY_LEN, MANY - i, F.mh);
        post_recv(F.b, rd[i], F.mh);
    }
    for (unsigned i = 0; i < MANY; i++)
        post_send(F.a, sd[i], F.mh);
    unsigned sends = 0, recvs = 0, order_bad = 0;
    for (unsigned it = 0; it < 100000 && (sends < MANY || recvs < MANY); it++) {
        (void)nic_progress(F.nic, false);
        uint32_t id;
        uint16_t gen;
        bool recv;
        while (nic_cq_pop(F.cq, &id, &gen, &recv)) {
            CU_ASSERT_EQUAL(id, recv ? VI_B : VI_A);
            if (recv) {
                recvs++;
                continue;
            }
            /* the send completed now is the oldest: every earlier one is
             * done, no later one is */
            for (unsigned j = 0; j < MANY; j++)
                if (((status_of(sd[j]) & VIP_STATUS_DONE) != 0) != (j <= sends))
                    order_bad++;
            sends++;
        }
    }
    CU_ASSERT_EQUAL(sends, MANY);
    CU_ASSERT_EQUAL(recvs, MANY);
    CU_ASSERT_EQUAL(order_bad, 0);
    CU_ASSERT_EQUAL(atomic_load(&F.cq_ring->overflow), 0);
    for (unsigned i = 0; i < MANY; i++) {
        CU_ASSERT_EQUAL(status_of(sd[i]), VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
        CU_ASSERT_EQUAL(status_of(rd[i]) & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(rd[i]->CS.Length, MANY_LEN);
        CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA + i * MANY_LEN, MANY_LEN, 100 + i), -1);
    }
    teardown();
}

/* The receiving side refuses to pull (as with VIP_CMA off there, or the kernel's
 * EPERM): the sender hears a NAK and sends the message again through the
 * ring, and the connection's next messages go there at once; nothing is
 * lost, no error. */
static void refused(uint32_t rel)
{
    if (!setup_cma(rel, false))
        return;
    F.b->cma = false;
    VIP_DESCRIPTOR *sd[3], *rd[3];
    const uint32_t len = FW_CMA_MIN + 1000;
    for (unsigned i = 0; i < 3; i++) {
        sd[i] = at(OFF_SDESC + 512 * i);
        rd[i] = at(OFF_RDESC + 512 * i);
        tl_fill(F.mem + OFF_SDATA + i * len, len, 7 + i);
        memset(F.mem + OFF_RDATA + i * len, 0xEE, len);
        tl_desc_split(sd[i], F.mem + OFF_SDATA + i * len, len, 3, F.mh);
        tl_desc_split(rd[i], F.mem + OFF_RDATA + i * len, len, 2, F.mh);
        post_recv(F.b, rd[i], F.mh);
    }
    post_send(F.a, sd[0], F.mh);
    CU_ASSERT_EQUAL(next_from_a(), VIA_PKT_SEND_RTS);
    progress(F.b);
    struct via_wire_hdr h;
    CU_ASSERT_TRUE_FATAL(look(1, &h));
    CU_ASSERT_EQUAL(h.type, VIA_PKT_NAK);
    CU_ASSERT_EQUAL(h.imm, VIA_NAK_PULL_REFUSED);
    CU_ASSERT_EQUAL(status_of(rd[0]), 0); /* not used up by the refusal */
    post_send(F.a, sd[1], F.mh);
    post_send(F.a, sd[2], F.mh);
    void *w[] = {sd[0], sd[1], sd[2], rd[0], rd[1], rd[2]};
    CU_ASSERT_EQUAL_FATAL(pump(w, 6), 0);
    CU_ASSERT_FALSE(F.a->cma); /* the rest of the connection: the ring */
    for (unsigned i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(status_of(sd[i]) & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(status_of(rd[i]) & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(rd[i]->CS.Length, len);
        CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA + i * len, len, 7 + i), -1);
    }
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
    teardown();
}

static void test_refused_falls_back(void)
{
    refused(VIP_SERVICE_RELIABLE_DELIVERY);
    refused(VIP_SERVICE_RELIABLE_RECEPTION);
}

/* Without VIP_CMA=1 (unset, or 0) the NIC never sends a SEND_RTS. */
static void test_env_off(void)
{
    if (!pidfd_known())
        return;
    for (int i = 0; i < 2; i++) {
        if (i)
            setenv("VIP_CMA", "0", 1);
        setup_opts(&(struct opts){.rel = VIP_SERVICE_RELIABLE_DELIVERY, .connect = true,
                                  .cma = true});
        unsetenv("VIP_CMA");
        VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
        tl_fill(F.mem + OFF_SDATA, 1u << 20, 5);
        tl_desc_split(sd, F.mem + OFF_SDATA, 1u << 20, 4, F.mh);
        tl_desc_split(rd, F.mem + OFF_RDATA, 1u << 20, 4, F.mh);
        post_recv(F.b, rd, F.mh);
        post_send(F.a, sd, F.mh);
        CU_ASSERT_EQUAL(next_from_a(), VIA_PKT_SEND);
        void *w[] = {sd, rd};
        CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
        CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA, 1u << 20, 5), -1);
        teardown();
    }
}

/* The sender's bytes cannot be read when the receiver pulls (here: the
 * program took away access to its buffer after posting): the receive and
 * the send complete with TRANSPORT_ERROR, the receiver breaks the link as
 * for a bad packet (the agent hears), the sender loses it; nothing else is
 * touched. */
static void test_source_unreadable(void)
{
    if (!setup_cma(VIP_SERVICE_RELIABLE_DELIVERY, false))
        return;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC), *rd2 = at(OFF_RDESC + 512);
    const uint32_t len = FW_CMA_MIN;
    uint8_t *src = F.mem + OFF_SDATA, *dst = F.mem + OFF_RDATA;
    memset(dst, 0xEE, 2 * len);
    tl_desc_split(sd, src, len, 2, F.mh);
    tl_desc_1(rd, dst, len, F.mh);
    tl_desc_1(rd2, dst + len, len, F.mh);
    post_recv(F.b, rd, F.mh);
    post_recv(F.b, rd2, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL_FATAL(next_from_a(), VIA_PKT_SEND_RTS);
    CU_ASSERT_EQUAL_FATAL(mprotect(src + len / 2, len / 2, PROT_NONE), 0);
    progress(F.b);
    CU_ASSERT_EQUAL(mprotect(src + len / 2, len / 2, PROT_READ | PROT_WRITE), 0);
    ERR_EXPECT(status_of(rd), VIP_STATUS_TRANSPORT_ERROR);
    ERR_EXPECT(status_of(rd2), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(first_not(dst + len, len, 0xEE), -1); /* the next buffer untouched */
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_CATASTROPHIC, true); /* it broke the link: vipd hears */
    nak_fails_sender(VIA_NAK_PULL_FAULT, sd);
    teardown();
}

/* A peer NIC that lies: a SEND_RTS naming an address that is not mapped
 * fails the connection as above; one whose table does not add up to its
 * length, or comes on an unreliable VI, is a transport error, and no
 * receive descriptor takes a byte. */
static void hostile_rts(uint32_t rel, struct via_rts_seg *tab, unsigned n, uint32_t msg_len,
                        uint32_t want_rd, uint32_t want_err)
{
    if (!setup_cma(rel, false))
        return;
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    uint8_t *dst = F.mem + OFF_RDATA;
    memset(dst, 0xEE, 1u << 20);
    tl_desc_1(rd, dst, 1u << 20, F.mh);
    post_recv(F.b, rd, F.mh);
    struct via_wire_hdr h = hdr(0, VIA_PKT_SEND_RTS);
    h.flags = VIA_PKT_FIRST | VIA_PKT_LAST;
    h.msg_seq = 1;
    h.msg_len = msg_len;
    h.frag_len = n * (uint32_t)sizeof *tab;
    inject(0, h, tab);
    progress(F.b);
    if (want_rd)
        ERR_EXPECT(status_of(rd), want_rd);
    CU_ASSERT_EQUAL(first_not(dst, 1u << 20, 0xEE), -1);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    EXPECT_ERROR(F.b, want_err, true);
    teardown();
}

static void test_hostile_rts(void)
{
    void *hole = mmap(NULL, 1u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_NOT_EQUAL_FATAL(hole, MAP_FAILED);
    struct via_rts_seg bad[2] = {{(uint64_t)(uintptr_t)hole, 65536}, {4096, 65536}};
    hostile_rts(VIP_SERVICE_RELIABLE_DELIVERY, bad, 1, 65536, VIP_STATUS_TRANSPORT_ERROR,
                VIP_ERROR_CATASTROPHIC);
    hostile_rts(VIP_SERVICE_RELIABLE_DELIVERY, bad + 1, 1, 65536, VIP_STATUS_TRANSPORT_ERROR,
                VIP_ERROR_CATASTROPHIC);
    munmap(hole, 1u << 20);
    struct via_rts_seg odd[2] = {{(uint64_t)(uintptr_t)(F.mem), 65536}, {0, 0}};
    odd[0].va = 0; /* the table is refused before any address is used */
    hostile_rts(VIP_SERVICE_RELIABLE_DELIVERY, odd, 1, 65537, VIP_STATUS_DESC_FLUSHED_ERROR,
                VIP_ERROR_CATASTROPHIC);
    hostile_rts(VIP_SERVICE_RELIABLE_DELIVERY, odd, 2, 65536, VIP_STATUS_DESC_FLUSHED_ERROR,
                VIP_ERROR_CATASTROPHIC); /* an empty segment */
    hostile_rts(VIP_SERVICE_UNRELIABLE, odd, 1, 65536, VIP_STATUS_DESC_FLUSHED_ERROR,
                VIP_ERROR_CATASTROPHIC);
}

/* No receive posted: the receiver does what it does for a ring SEND
 * (dropped, VIP_ERROR_RECVQ_EMPTY, a NAK); the sender's descriptor, which
 * waits for the pull, fails with TRANSPORT_ERROR. */
static void test_no_receive(void)
{
    if (!setup_cma(VIP_SERVICE_RELIABLE_DELIVERY, false))
        return;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, FW_CMA_MIN, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(next_from_a(), VIA_PKT_SEND_RTS);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* waits for the receiver's answer */
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 1);
    EXPECT_ERROR(F.b, VIP_ERROR_RECVQ_EMPTY, true);
    nak_fails_sender(VIA_NAK_NO_RECV, sd);
    teardown();
}

/* A receive too short: LENGTH_ERROR as for a ring SEND, and the send fails. */
static void test_receive_too_short(void)
{
    if (!setup_cma(VIP_SERVICE_RELIABLE_DELIVERY, false))
        return;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    uint8_t *dst = F.mem + OFF_RDATA;
    memset(dst, 0xEE, FW_CMA_MIN);
    tl_desc_1(sd, F.mem + OFF_SDATA, FW_CMA_MIN, F.mh);
    tl_desc_1(rd, dst, FW_CMA_MIN - 1, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    progress(F.b);
    ERR_EXPECT(status_of(rd), VIP_STATUS_LENGTH_ERROR);
    CU_ASSERT_EQUAL(first_not(dst, FW_CMA_MIN, 0xEE), -1);
    EXPECT_ERROR(F.b, VIP_ERROR_POST_DESC, true);
    progress(F.a);
    ERR_EXPECT(status_of(sd), VIP_STATUS_TRANSPORT_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    teardown();
}

/* ---- RDMA write ------------------------------------------------------------------ */

/* A writes RDMA_LEN bytes into B's region in three segments: a WRITE_RTS,
 * the target pulls after its checks; with immediate data B's receive
 * completes as the remote write. refuse: B refuses the pull (the EPERM
 * path), and the write goes again through the ring. */
static void write_pulled(uint32_t rel, bool imm, bool refuse)
{
    if (!setup_cma(rel, false))
        return;
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    if (refuse)
        F.b->cma = false;
    /* the fixture's RDMA region is below FW_CMA_MIN: one of our own */
    const uint32_t len = FW_CMA_MIN + 3000;
    uint8_t *tgt = zalloc(4096, len + 4096);
    uint32_t mh_tgt = reg(IDX_STAGING + 1, 2, PTAG_A, tgt, len + 4096, VIA_TPT_RDMA_WRITE);
    memset(tgt, 0xEE, len + 4096);
    uint8_t *src = F.mem + OFF_SDATA;
    tl_fill(src, len, 43);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    rdma_desc(sd, VIP_CONTROL_OP_RDMAWRITE | (imm ? VIP_CONTROL_IMMEDIATE : 0),
              (uint64_t)(uintptr_t)tgt, mh_tgt, src, len, 3);
    sd->CS.ImmediateData = 0xC0FFEEu;
    tl_desc_1(rd, F.mem + OFF_RDATA, 16, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(next_from_a(), VIA_PKT_WRITE_RTS);
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump(w, imm ? 2 : 1), 0);
    ERR_EXPECT(status_of(sd), 0);
    CU_ASSERT_EQUAL(status_of(sd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RDMA_WRITE);
    CU_ASSERT_EQUAL(tl_verify(tgt, len, 43), -1);
    CU_ASSERT_EQUAL(first_not(tgt + len, 4096, 0xEE), -1);
    if (imm) {
        ERR_EXPECT(status_of(rd), 0);
        CU_ASSERT_EQUAL(status_of(rd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_REMOTE_RDMA_WRITE);
        CU_ASSERT_EQUAL(rd->CS.ImmediateData, 0xC0FFEEu);
    } else {
        progress(F.b);
        CU_ASSERT_EQUAL(status_of(rd), 0); /* not consumed */
    }
    CU_ASSERT_EQUAL(F.a->cma, !refuse);
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    teardown();
    free(tgt);
}

static void test_write_pulled(void)
{
    write_pulled(VIP_SERVICE_RELIABLE_DELIVERY, false, false);
    write_pulled(VIP_SERVICE_RELIABLE_DELIVERY, true, false);
    write_pulled(VIP_SERVICE_RELIABLE_RECEPTION, true, false);
    write_pulled(VIP_SERVICE_RELIABLE_DELIVERY, true, true);
    write_pulled(VIP_SERVICE_RELIABLE_RECEPTION, false, true);
}

/* A WRITE_RTS to memory the target may not write (registered without the
 * RDMA-write enable): nothing is pulled, A's write fails with the
 * protection error, both VIs break, as for a ring RDMA write. */
static void test_write_protection(void)
{
    if (!setup_cma(VIP_SERVICE_RELIABLE_DELIVERY, false))
        return;
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    uint8_t *dst = F.mem + OFF_RDATA;
    memset(dst, 0xEE, FW_CMA_MIN);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    rdma_desc(sd, VIP_CONTROL_OP_RDMAWRITE, (uint64_t)(uintptr_t)dst, F.mh, F.mem + OFF_SDATA,
              FW_CMA_MIN, 2);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(next_from_a(), VIA_PKT_WRITE_RTS);
    void *w[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 1), 0);
    ERR_EXPECT(status_of(sd), VIP_STATUS_RDMA_PROT_ERROR);
    CU_ASSERT_EQUAL(first_not(dst, FW_CMA_MIN, 0xEE), -1);
    EXPECT_ERROR(F.b, VIP_ERROR_RDMAW_PROT, true);
    EXPECT_ERROR(F.a, VIP_ERROR_RDMAW_PROT, true); /* as for a ring write */
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_large_sends_intact),
        TL_TEST(test_ring_kept),
        TL_TEST(test_many_outstanding_cq),
        TL_TEST(test_refused_falls_back),
        TL_TEST(test_env_off),
        TL_TEST(test_source_unreadable),
        TL_TEST(test_hostile_rts),
        TL_TEST(test_no_receive),
        TL_TEST(test_receive_too_short),
        TL_TEST(test_write_pulled),
        TL_TEST(test_write_protection),
        TL_END,
    };
    return tl_main(argc, argv, "one copy by cross-memory attach", tests);
}

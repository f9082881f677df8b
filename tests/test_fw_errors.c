/*
 * test_fw_errors.c - unit tests of the NIC firmware's error handling
 * (lanai-fw/), no vipd needed: bad send and receive descriptors, tokens
 * naming memory outside the TPT, the error rules of each reliability level,
 * ACK and NAK, a corrupt or closed link. RDMA: test_fw_rdma.c.
 *
 * The fixture (one in-memory NIC, two VIs on one channel) is tests/lib/tfw.c;
 * a test that plays the hostile peer publishes its own packets with inject().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tfw.h"

/* ---- bad descriptors ---------------------------------------------------------------- */

#define IDX_CUT 6u /* a registration that ends inside a descriptor */

/* Post sd on A (and let B run); return sd's status. */
static uint32_t send_bad(VIP_DESCRIPTOR *sd, uint32_t desc_mh)
{
    post_send(F.a, sd, desc_mh);
    progress(F.b);
    return status_of(sd);
}

/* A send whose descriptor the NIC may not write to (it fails the TPT, or
 * is misaligned): it is left as it was, nothing is sent, the VI counts a
 * descriptor error and moves on to the next token. */
static void send_unwritten(const void *desc, uint32_t desc_mh, int line)
{
    struct snap s;
    snap(&s, desc, sizeof(VIP_DESCRIPTOR));
    uint64_t errs = atomic_load(&F.dba->cnt.desc_errors);
    uint64_t done = atomic_load(&F.dba->cnt.sq_done);
    uint64_t head = ring_head(0);
    post_send(F.a, desc, desc_mh);
    progress(F.b);
    bool same = unchanged(&s);
    CU_ASSERT_TRUE(same);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.desc_errors), errs + 1);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.sq_done), done + 1);
    CU_ASSERT_EQUAL(ring_head(0), head);
    CU_ASSERT_EQUAL(F.a->req.sq.head, F.a->req.sq.tail);
    if (!same)
        fprintf(stderr, "\n  line %d: the NIC wrote to a descriptor it may not (status 0x%x)\n",
                line, status_of(desc));
}
#define SEND_UNWRITTEN(desc, mh) send_unwritten((desc), (mh), __LINE__)

static void test_bad_descriptors_unreliable(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    uint8_t *data = F.mem + OFF_SDATA;
    uint32_t seq = 1;

    /* misaligned descriptor (in registered memory: the error is told there) */
    VIP_DESCRIPTOR *mis = (VIP_DESCRIPTOR *)(void *)(F.mem + 200 * 4096 + 8);
    tl_desc_1(mis, data, 10, F.mh);
    ERR_EXPECT(send_bad(mis, F.mh), VIP_STATUS_FORMAT_ERROR);
    still_works(seq++);

    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    /* segment with a garbage handle */
    tl_desc_1(sd, data, 10, 0x12345678u);
    ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_PROTECTION_ERROR);
    still_works(seq++);
    /* stale handle: the region was deregistered (generation moved on) */
    uint32_t stale = reg(IDX_STALE, 1, PTAG_A, F.other, 4096, 0);
    atomic_store(&F.tpt[IDX_STALE].gen, 0);
    tl_desc_1(sd, F.other, 10, stale);
    ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_PROTECTION_ERROR);
    still_works(seq++);
    /* range beyond the registration */
    tl_desc_1(sd, F.mem + MEM_LEN - 5, 10, F.mh);
    ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_PROTECTION_ERROR);
    still_works(seq++);
    /* region of another ptag */
    tl_desc_1(sd, F.other, 10, F.mh_other);
    ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_PROTECTION_ERROR);
    still_works(seq++);
    /* descriptor itself under a wrong handle: not written; with no status
     * to wait for, the program is told by an error record (VI unharmed) */
    tl_desc_1(sd, data, 10, F.mh);
    SEND_UNWRITTEN(sd, F.mh_other);
    {
        struct nic_error e;
        CU_ASSERT_TRUE(nic_vi_take_error(F.a, &e));
        CU_ASSERT_EQUAL(e.code, VIP_ERROR_POST_DESC);
        CU_ASSERT_EQUAL(e.desc_va, 0);
    }
    still_works(seq++);
    /* a registration that ends inside the descriptor: its control
     * segment is in (so the error is told there), its segment table is
     * not. One data segment (the fetch's short path) and two (the general
     * one), in regions of 40 and 56 bytes: the last segment sticks out. */
    for (unsigned nseg = 1; nseg <= 2; nseg++) {
        VIP_DESCRIPTOR *cut = (VIP_DESCRIPTOR *)(void *)(F.mem + OFF_SPARE);
        uint32_t cut_mh = reg(IDX_CUT, 1, PTAG_A, cut, 32 + 16 * nseg - 8, 0);
        tl_desc_split(cut, data, 10 * nseg, nseg, F.mh);
        ERR_EXPECT(send_bad(cut, cut_mh), VIP_STATUS_PROTECTION_ERROR);
        atomic_store(&F.tpt[IDX_CUT].gen, 0);
        still_works(seq++);
    }
    /* total length above the VI's MaxTransferSize */
    set_vi(F.a, PTAG_A, 1000, false);
    tl_desc_split(sd, data, 1001, 3, F.mh);
    ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_LENGTH_ERROR);
    tl_desc_split(sd, data, 1000, 3, F.mh);
    CU_ASSERT_EQUAL(send_bad(sd, F.mh) & VIP_STATUS_ERROR_MASK, 0);
    set_vi(F.a, PTAG_A, VIA_MAX_TRANSFER, false); /* (that message was dropped: no receive) */
    still_works(seq++);
    /* 17 segments */
    VIP_DESCRIPTOR *big = at(64 * 4096); /* room for 17 segments */
    tl_desc_split(big, data, 170, 17, F.mh);
    ERR_EXPECT(send_bad(big, F.mh), VIP_STATUS_FORMAT_ERROR);
    still_works(seq++);
    /* reserved control bits */
    tl_desc_1(sd, data, 10, F.mh);
    sd->CS.Control = 0x0010;
    ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_FORMAT_ERROR);
    still_works(seq++);
    /* the reserved operation; an RDMA read on an unreliable VI (it cannot
     * wait for the answer); an RDMA operation without its address segment */
    static const uint16_t ops[] = {VIP_CONTROL_OP_RESERVED, VIP_CONTROL_OP_RDMAREAD,
                                   VIP_CONTROL_OP_RDMAWRITE};
    for (unsigned i = 0; i < 3; i++) {
        tl_desc_1(sd, data, 10, F.mh);
        sd->CS.Control = ops[i];
        if (i == 2)
            sd->CS.SegCount = 0;
        ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_FORMAT_ERROR);
    }
    still_works(seq++);
    CU_ASSERT(atomic_load(&F.dba->cnt.desc_errors) >= 14);
    CU_ASSERT_TRUE(no_error(F.a)); /* unreliable: a bad descriptor is not the VI's error */
    teardown();
}

/* Errors on a receive descriptor, and a message too large for the receive. */
static void test_bad_receives_unreliable(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    uint8_t *data = F.mem + OFF_SDATA;
    /* receive buffer too small: LENGTH error on the receive */
    tl_fill(data, 100, 1);
    tl_desc_1(sd, data, 100, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 10, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
    ERR_EXPECT(status_of(rd), VIP_STATUS_LENGTH_ERROR);
    CU_ASSERT_EQUAL(status_of(rd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
    CU_ASSERT_EQUAL(status_of(sd) & VIP_STATUS_ERROR_MASK, 0);
    still_works(10);
    /* receive segment with a bad handle */
    tl_desc_1(sd, data, 100, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, 0x12345678u);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
    ERR_EXPECT(status_of(rd), VIP_STATUS_PROTECTION_ERROR);
    still_works(11);
    /* receive descriptor misaligned */
    VIP_DESCRIPTOR *mis = (VIP_DESCRIPTOR *)(void *)(F.mem + 200 * 4096 + 32);
    tl_desc_1(sd, data, 100, F.mh);
    tl_desc_1(mis, F.mem + OFF_RDATA, 100, F.mh);
    post_recv(F.b, mis, F.mh);
    post_send(F.a, sd, F.mh);
    void *w2[] = {sd, mis};
    CU_ASSERT_EQUAL_FATAL(pump(w2, 2), 0);
    ERR_EXPECT(status_of(mis), VIP_STATUS_FORMAT_ERROR);
    CU_ASSERT_EQUAL(F.b->resp.rq.head, F.b->resp.rq.tail);
    still_works(12);
    /* no receive posted: dropped, VI stays connected */
    tl_desc_1(sd, data, 100, F.mh);
    post_send(F.a, sd, F.mh);
    void *w3[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w3, 1), 0);
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 4);
    /* and why, check by check: three bad receives, then none posted */
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->rx_refused[VIA_RXC_RECV_ERROR]), 3);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->rx_refused[VIA_RXC_NO_RECV]), 1);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
    CU_ASSERT_FALSE(look(1, &(struct via_wire_hdr){0})); /* unreliable: no NAK */
    still_works(13);
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    teardown();
}

/* A standard token naming a descriptor outside the VI's registered memory:
 * nothing is written there, on any path, and the VI records the error. */
static void test_standard_token_outside_memory(void)
{
    /* unreliable: the descriptor error is counted, the VI goes on */
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *vd = (VIP_DESCRIPTOR *)(void *)F.victim;
    tl_desc_1(vd, F.mem + OFF_SDATA, 10, F.mh);
    SEND_UNWRITTEN(vd, F.mh);                 /* not registered at all */
    VIP_DESCRIPTOR *od = (VIP_DESCRIPTOR *)(void *)F.other;
    tl_desc_1(od, F.mem + OFF_SDATA, 10, F.mh);
    SEND_UNWRITTEN(od, F.mh_other);           /* another ptag's memory */
    SEND_UNWRITTEN(od, F.mh);                 /* ... under our handle */
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 10, F.mh);
    SEND_UNWRITTEN(sd, 0x12345678u);          /* a handle that names nothing */
    SEND_UNWRITTEN(sd, VIA_MH_MAKE(9, IDX_MEM)); /* a forged generation */
    VIP_DESCRIPTOR *vmis = (VIP_DESCRIPTOR *)(void *)(F.victim + 2048 + 8);
    tl_desc_1(vmis, F.mem + OFF_SDATA, 10, F.mh);
    SEND_UNWRITTEN(vmis, F.mh);               /* misaligned, and not registered */
    still_works(1);
    /* a receive descriptor outside registered memory */
    VIP_DESCRIPTOR *rvd = (VIP_DESCRIPTOR *)(void *)(F.victim + 1024);
    tl_desc_1(rvd, F.mem + OFF_RDATA, 100, F.mh);
    struct snap s;
    snap(&s, rvd, sizeof *rvd);
    uint64_t errs = atomic_load(&F.dbb->cnt.desc_errors);
    post_recv(F.b, rvd, F.mh);
    post_send(F.a, sd, F.mh);
    progress(F.b);
    CU_ASSERT_TRUE(unchanged(&s));
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.desc_errors), errs + 1);
    still_works(2);
    teardown();

    /* reliable: the VI goes to error, and says which error */
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    vd = (VIP_DESCRIPTOR *)(void *)F.victim;
    tl_desc_1(vd, F.mem + OFF_SDATA, 10, F.mh);
    snap(&s, vd, sizeof *vd);
    post_send(F.a, vd, F.mh);
    CU_ASSERT_TRUE(unchanged(&s));
    CU_ASSERT_EQUAL(ring_head(0), 0);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    EXPECT_ERROR(F.a, VIP_ERROR_POST_DESC, true);
    teardown();

    /* flushed on a VI not connected: still nothing written there */
    setup(VIP_SERVICE_UNRELIABLE, 0);
    vd = (VIP_DESCRIPTOR *)(void *)F.victim;
    tl_desc_1(vd, F.mem + OFF_SDATA, 10, F.mh);
    snap(&s, vd, sizeof *vd);
    post_send(F.a, vd, F.mh);
    post_recv(F.a, (uint8_t *)vd + 512, F.mh);
    nic_vi_disconnect(F.a);
    CU_ASSERT_TRUE(unchanged(&s));
    CU_ASSERT_EQUAL(first_not(F.victim + 512, 64, 0), -1);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.sq_done), 1);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.rq_done), 1);
    teardown();
}

/* A VI that is not connected completes sends flushed. */
static void test_not_connected_flush(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 0);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 10, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 10, F.mh);
    post_recv(F.a, rd, F.mh);
    post_send(F.a, sd, F.mh);
    ERR_EXPECT(status_of(sd), VIP_STATUS_DESC_FLUSHED_ERROR);
    progress(F.a);
    CU_ASSERT_EQUAL(status_of(rd), 0); /* receives wait for a connection */
    nic_vi_disconnect(F.a);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(status_of(rd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
    CU_ASSERT_TRUE(no_error(F.a));
    teardown();
}

/* Reliable: an error puts the VI in ERROR, flushes the rest, breaks the
 * channel, is recorded for the agent, and the peer goes to error with its
 * receives flushed. */
static void reliable_error(uint32_t rel)
{
    setup(rel, 1);
    VIP_DESCRIPTOR *bad = at(OFF_SDESC), *next = at(OFF_SDESC + 512);
    VIP_DESCRIPTOR *ra = at(OFF_RDESC), *rb1 = at(OFF_RDESC + 512), *rb2 = at(OFF_RDESC + 1024);
    tl_desc_1(bad, F.mem + OFF_SDATA, 10, 0x12345678u);
    tl_desc_1(next, F.mem + OFF_SDATA, 10, F.mh);
    tl_desc_1(ra, F.mem + OFF_RDATA, 10, F.mh);
    tl_desc_1(rb1, F.mem + OFF_RDATA, 10, F.mh);
    tl_desc_1(rb2, F.mem + OFF_RDATA, 10, F.mh);
    post_recv(F.a, ra, F.mh);
    post_recv(F.b, rb1, F.mh);
    post_recv(F.b, rb2, F.mh);
    ring_raw(&F.dba->sq, bad, F.mh); /* both queued before the NIC looks */
    ring_raw(&F.dba->sq, next, F.mh);
    progress(F.a);
    ERR_EXPECT(status_of(bad), VIP_STATUS_PROTECTION_ERROR);
    ERR_EXPECT(status_of(next), VIP_STATUS_DESC_FLUSHED_ERROR);
    ERR_EXPECT(status_of(ra), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    struct nic_error e;
    CU_ASSERT_TRUE_FATAL(nic_vi_take_error(F.a, &e));
    CU_ASSERT_EQUAL(e.code, VIP_ERROR_POST_DESC);
    CU_ASSERT_EQUAL(e.desc_va, (uint64_t)(uintptr_t)bad);
    CU_ASSERT_TRUE(e.tell_agent);
    CU_ASSERT_FALSE(nic_vi_take_error(F.a, &e)); /* taken once */
    /* later posts on the VI in error complete flushed */
    VIP_DESCRIPTOR *later = at(OFF_SDESC + 1024);
    tl_desc_1(later, F.mem + OFF_SDATA, 10, F.mh);
    post_send(F.a, later, F.mh);
    ERR_EXPECT(status_of(later), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_TRUE(no_error(F.a));
    /* the peer notices at its next progress */
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    ERR_EXPECT(status_of(rb1), VIP_STATUS_DESC_FLUSHED_ERROR);
    ERR_EXPECT(status_of(rb2), VIP_STATUS_DESC_FLUSHED_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_CONN_LOST, false); /* a lost connection is not re-reported */
    teardown();
}

static void test_reliable_delivery_error(void) { reliable_error(VIP_SERVICE_RELIABLE_DELIVERY); }
static void test_reliable_reception_error(void) { reliable_error(VIP_SERVICE_RELIABLE_RECEPTION); }

/* Reliable: a bad send that is the only one queued. The error flush must
 * not complete a token that was never posted (the slot after it in the
 * NIC's queue) nor move the queue head past its tail. */
static void test_reliable_bad_send_alone(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    VIP_DESCRIPTOR *bad = at(OFF_SDESC), *sentinel = at(OFF_SDESC + 512);
    tl_desc_1(bad, F.mem + OFF_SDATA, 10, 0x12345678u);
    tl_desc_1(sentinel, F.mem + OFF_SDATA, 10, F.mh);
    /* Stale content of the next NIC queue slot: never rung by the host. */
    F.a->req.sq.tok[1] = std_token(sentinel, F.mh);
    post_send(F.a, bad, F.mh);
    ERR_EXPECT(status_of(bad), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(status_of(sentinel), 0);
    CU_ASSERT_EQUAL(F.a->req.sq.head, F.a->req.sq.tail);
    if (status_of(sentinel) || F.a->req.sq.head != F.a->req.sq.tail)
        fprintf(stderr, "\n  the error flush completed a slot never posted "
                        "(status 0x%x), sq head %u tail %u\n",
                status_of(sentinel), F.a->req.sq.head, F.a->req.sq.tail);
    teardown();
}

/* Reliable: a message with no receive posted breaks the connection, and the
 * receiver refuses it with a NAK. */
static void test_reliable_recvq_empty(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *ra = at(OFF_RDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 10, F.mh);
    tl_desc_1(ra, F.mem + OFF_RDATA, 10, F.mh);
    post_recv(F.a, ra, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(status_of(sd), VIP_STATUS_DONE);
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 1);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->rx_refused[VIA_RXC_NO_RECV]), 1);
    EXPECT_ERROR(F.b, VIP_ERROR_RECVQ_EMPTY, true);
    struct via_wire_hdr h;
    CU_ASSERT_TRUE_FATAL(look(1, &h));
    CU_ASSERT_EQUAL(h.type, VIA_PKT_NAK);
    CU_ASSERT_EQUAL(h.ack_seq, 1);
    CU_ASSERT_EQUAL(h.dst_vi, VI_A);
    CU_ASSERT_EQUAL(h.frag_len, 0);
    /* the sender's VI learns it at its next progress */
    progress(F.a);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    ERR_EXPECT(status_of(ra), VIP_STATUS_DESC_FLUSHED_ERROR);
    EXPECT_ERROR(F.a, VIP_ERROR_CONN_LOST, false);
    teardown();
}

/* Reliable: a receive too small is an error of the receiving VI, which
 * refuses the message with a NAK; on a reliable-reception VI the send must
 * not complete successfully: the data never reached the receiver's memory. */
static void test_reliable_recv_too_small(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC), *rd2 = at(OFF_RDESC + 512);
    tl_desc_1(sd, F.mem + OFF_SDATA, 100, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 99, F.mh);
    tl_desc_1(rd2, F.mem + OFF_RDATA, 1000, F.mh);
    post_recv(F.b, rd, F.mh);
    post_recv(F.b, rd2, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* waiting for the acknowledgement */
    progress(F.b);
    ERR_EXPECT(status_of(rd), VIP_STATUS_LENGTH_ERROR);
    ERR_EXPECT(status_of(rd2), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_POST_DESC, true);
    struct via_wire_hdr h;
    CU_ASSERT_TRUE_FATAL(look(1, &h));
    CU_ASSERT_EQUAL(h.type, VIA_PKT_NAK);
    CU_ASSERT_EQUAL(h.ack_seq, 1);
    CU_ASSERT_EQUAL(status_of(sd), 0);
    progress(F.a);
    uint32_t st = status_of(sd);
    CU_ASSERT(st & VIP_STATUS_DONE);
    CU_ASSERT_NOT_EQUAL(st & VIP_STATUS_ERROR_MASK, 0);
    if (!(st & VIP_STATUS_ERROR_MASK))
        fprintf(stderr, "\n  reliable reception: send of a message the receiver refused "
                        "completed with status 0x%x (no error bit)\n", st);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    teardown();
}

/* A NAK alone (the channel still open) fails the send waiting for it. */
static void test_nak_fails_send(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 100, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(status_of(sd), 0);
    struct via_wire_hdr h = hdr(1, VIA_PKT_NAK);
    h.ack_seq = 1;
    h.imm = VIA_NAK_NO_RECV;
    inject(1, h, NULL);
    progress(F.a);
    ERR_EXPECT(status_of(sd), VIP_STATUS_TRANSPORT_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    struct nic_error e;
    CU_ASSERT_TRUE(nic_vi_take_error(F.a, &e));
    teardown();
}

/* An ACK for a message the VI never sent (or already had acknowledged) is a
 * protocol error: a transport error, and the VI goes to error. */
static void ack_refused(uint32_t sent, uint32_t pump_first, uint32_t ack_seq, uint32_t frag_len)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    VIP_DESCRIPTOR *ra = at(OFF_RDESC + 2048);
    tl_desc_1(ra, F.mem + OFF_RDATA, 10, F.mh);
    post_recv(F.a, ra, F.mh);
    void *w[4];
    for (uint32_t i = 0; i < sent; i++) {
        VIP_DESCRIPTOR *sd = at(OFF_SDESC + 64 * i), *rd = at(OFF_RDESC + 64 * i);
        tl_desc_1(sd, F.mem + OFF_SDATA, 10, F.mh);
        tl_desc_1(rd, F.mem + OFF_RDATA, 10, F.mh);
        post_recv(F.b, rd, F.mh);
        post_send(F.a, sd, F.mh);
        w[i] = sd;
    }
    if (pump_first)
        CU_ASSERT_EQUAL_FATAL(pump(w, pump_first), 0);
    uint8_t junk[64] = {0};
    struct via_wire_hdr h = hdr(1, VIA_PKT_ACK);
    h.ack_seq = ack_seq;
    h.frag_len = frag_len;
    inject(1, h, junk);
    progress(F.a);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->rx_refused[VIA_RXC_ANSWER]), 1); /* why, by name */
    EXPECT_ERROR(F.a, VIP_ERROR_CATASTROPHIC, true);
    ERR_EXPECT(status_of(ra), VIP_STATUS_DESC_FLUSHED_ERROR);
    for (uint32_t i = pump_first; i < sent; i++) {
        uint32_t st = status_of(w[i]);
        CU_ASSERT(st & VIP_STATUS_DONE);
        CU_ASSERT_NOT_EQUAL(st & VIP_STATUS_ERROR_MASK, 0); /* never a success */
    }
    teardown();
}

static void test_ack_never_sent(void)
{
    ack_refused(0, 0, 1, 0);          /* nothing sent at all */
    ack_refused(1, 0, 2, 0);          /* one outstanding, the ACK names the next */
    ack_refused(1, 0, 0x80000001u, 0); /* far ahead */
    ack_refused(1, 1, 1, 0);          /* acknowledged already: each once */
    ack_refused(1, 0, 1, 64);         /* an ACK carries no payload */
}

/* A corrupted packet on the link is a transport error, even unreliable. */
static void test_corrupt_link(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 100, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    struct via_wire_hdr *h = (struct via_wire_hdr *)(void *)F.chan->dir[0].ring;
    h->crc ^= 1; /* no longer the seal of its place in the ring */
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_CATASTROPHIC, true);
    teardown();
}

/* A channel the peer closed (VipDisconnect) or broke: the VI goes to
 * error, queued receives flushed, CONN_LOST. Only the close is orderly
 * (the default handler keeps quiet about it). */
static void chan_ended(uint32_t how)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, F.mh);
    post_recv(F.b, rd, F.mh);
    progress(F.b);
    CU_ASSERT_EQUAL(status_of(rd), 0);
    atomic_store(&F.chan->state, how);
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    struct nic_error e;
    bool got = nic_vi_take_error(F.b, &e);
    CU_ASSERT(got);
    if (got) {
        CU_ASSERT_EQUAL(e.code, VIP_ERROR_CONN_LOST);
        CU_ASSERT_FALSE(e.tell_agent);
        CU_ASSERT_EQUAL(e.orderly, how == VIA_CHAN_CLOSED);
    }
    CU_ASSERT(no_error(F.b));
    teardown();
}

static void test_chan_closed(void)
{
    chan_ended(VIA_CHAN_CLOSED);
}

static void test_chan_broken(void)
{
    chan_ended(VIA_CHAN_BROKEN);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_bad_descriptors_unreliable),
        TL_TEST(test_bad_receives_unreliable),
        TL_TEST(test_standard_token_outside_memory),
        TL_TEST(test_not_connected_flush),
        TL_TEST(test_reliable_delivery_error),
        TL_TEST(test_reliable_reception_error),
        TL_TEST(test_reliable_bad_send_alone),
        TL_TEST(test_reliable_recvq_empty),
        TL_TEST(test_reliable_recv_too_small),
        TL_TEST(test_nak_fails_send),
        TL_TEST(test_ack_never_sent),
        TL_TEST(test_corrupt_link),
        TL_TEST(test_chan_closed),
        TL_TEST(test_chan_broken),
        TL_END,
    };
    return tl_main(argc, argv, "firmware errors", tests);
}

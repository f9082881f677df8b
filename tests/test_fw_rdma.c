/*
 * test_fw_rdma.c - unit tests of the NIC firmware's RDMA (lanai-fw/), no
 * vipd needed: the initiator (RDMA write with and without immediate data,
 * RDMA read, their completions), the responder's checks of the target
 * region before a byte moves, and a hostile peer's RDMA packets.
 *
 * The fixture (one in-memory NIC, VIs A and B on one channel) is
 * tests/lib/tfw.c; A initiates, B is the target unless a test says other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tfw.h"

/* ---- RDMA write: the responder ------------------------------------------------------ */

static struct via_wire_hdr rdma_hdr(uint32_t seq, uint8_t flags, uint32_t msg_len, uint32_t off,
                                    uint32_t len, uint32_t rkey, uint64_t raddr)
{
    struct via_wire_hdr h = hdr(0, VIA_PKT_RDMA_WRITE);
    h.flags = flags;
    h.msg_seq = seq;
    h.msg_len = msg_len;
    h.frag_off = off;
    h.frag_len = len;
    h.rkey = rkey;
    h.raddr = raddr;
    return h;
}

/* To an enabled region of an rdma_write VI: each fragment lands at
 * raddr + frag_off; no receive descriptor is consumed. */
static void test_rdma_write_lands(void)
{
    static const uint32_t rels[] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                    VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned r = 0; r < 3; r++) {
        setup(rels[r], 1);
        set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
        memset(F.rdma, 0xEE, RDMA_LEN);
        VIP_DESCRIPTOR *rd = at(OFF_RDESC);
        uint8_t *rdata = F.mem + OFF_RDATA;
        tl_desc_1(rd, rdata, 4096, F.mh);
        post_recv(F.b, rd, F.mh);
        uint8_t src[1500];
        tl_fill(src, sizeof src, 11);
        uint64_t raddr = (uint64_t)(uintptr_t)F.rdma + 100;
        inject(0, rdma_hdr(1, VIA_PKT_FIRST, 1500, 0, 1000, F.mh_rdma, raddr), src);
        inject(0, rdma_hdr(1, VIA_PKT_LAST, 1500, 1000, 500, F.mh_rdma, raddr), src + 1000);
        progress(F.b);
        CU_ASSERT_EQUAL(tl_verify(F.rdma + 100, 1500, 11), -1);
        CU_ASSERT_EQUAL(first_not(F.rdma, 100, 0xEE), -1);
        CU_ASSERT_EQUAL(first_not(F.rdma + 1600, RDMA_LEN - 1600, 0xEE), -1);
        CU_ASSERT_EQUAL(status_of(rd), 0); /* the receive is not consumed */
        CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rq_done), 0);
        CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
        CU_ASSERT_TRUE(no_error(F.b));
        CU_ASSERT_EQUAL(atomic_load(&F.chan->dir[0].tail), ring_head(0));
        struct via_wire_hdr h;
        if (rels[r] != VIP_SERVICE_UNRELIABLE) {
            CU_ASSERT_TRUE_FATAL(look(1, &h));
            CU_ASSERT_EQUAL(h.type, VIA_PKT_ACK);
            CU_ASSERT_EQUAL(h.ack_seq, 1);
        } else {
            CU_ASSERT_FALSE(look(1, &h));
        }
        /* the receive is there for the next SEND */
        uint8_t msg[10];
        tl_fill(msg, sizeof msg, 12);
        struct via_wire_hdr s = hdr(0, VIA_PKT_SEND);
        s.flags = VIA_PKT_FIRST | VIA_PKT_LAST;
        s.msg_seq = 2;
        s.msg_len = s.frag_len = sizeof msg;
        inject(0, s, msg);
        progress(F.b);
        ERR_EXPECT(status_of(rd), 0);
        CU_ASSERT_EQUAL(rd->CS.Length, sizeof msg);
        CU_ASSERT_EQUAL(tl_verify(rdata, sizeof msg, 12), -1);
        CU_ASSERT_EQUAL(tl_verify(F.rdma + 100, 1500, 11), -1);
        teardown();
    }
}

enum rdma_bad {
    BAD_REGION_NO_ENABLE,
    BAD_REGION_READ_ONLY,
    BAD_VI_NO_ENABLE,
    BAD_PAST_END,
    BAD_BELOW_START,
    BAD_FOREIGN_HANDLE,
    BAD_GARBAGE_HANDLE,
    BAD_STALE_HANDLE,
    BAD_NKINDS
};
static const char *const rdma_bad_name[BAD_NKINDS] = {
    "region without the RDMA-write enable", "region enabled for RDMA read only",
    "VI without rdma_write", "range past the region's end", "range below the region",
    "handle of another ptag", "handle naming nothing", "stale handle"};

/* Refused before a byte is written. Reliable levels: the VI goes to error
 * and the requester hears a NAK. Unreliable: the write is dropped, as a
 * message would be, and the VI stays connected. */
static void rdma_refused(uint32_t rel, enum rdma_bad k)
{
    setup(rel, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, k != BAD_VI_NO_ENABLE);
    uint32_t rkey = F.mh_rdma;
    uint64_t raddr = (uint64_t)(uintptr_t)F.rdma + 512;
    switch (k) {
    case BAD_REGION_NO_ENABLE:
        rkey = F.mh;
        raddr = (uint64_t)(uintptr_t)(F.mem + OFF_SPARE);
        break;
    case BAD_REGION_READ_ONLY:
        F.tpt[IDX_RDMA].flags = VIA_TPT_RDMA_READ;
        break;
    case BAD_PAST_END:
        raddr = (uint64_t)(uintptr_t)F.rdma + RDMA_LEN - 1000; /* half of it beyond */
        break;
    case BAD_BELOW_START:
        rkey = F.mh;
        raddr = (uint64_t)(uintptr_t)F.mem - 64;
        F.tpt[IDX_MEM].flags = VIA_TPT_RDMA_WRITE; /* enabled: only the bounds are wrong */
        break;
    case BAD_FOREIGN_HANDLE:
        rkey = F.mh_other;
        raddr = (uint64_t)(uintptr_t)F.other + 512;
        break;
    case BAD_GARBAGE_HANDLE:
        rkey = 0x12345678u;
        break;
    case BAD_STALE_HANDLE:
        rkey = VIA_MH_MAKE(2, IDX_RDMA);
        break;
    default:
        break;
    }
    memset(F.rdma, 0xEE, RDMA_LEN);
    memset(F.other, 0xEE, OTHER_LEN);
    memset(F.mem + OFF_SPARE, 0xEE, SPARE_LEN);
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    tl_desc_1(rd, F.mem + OFF_RDATA, 4096, F.mh);
    post_recv(F.b, rd, F.mh);
    uint8_t src[2000];
    tl_fill(src, sizeof src, 21);
    inject(0, rdma_hdr(1, VIA_PKT_FIRST, 2000, 0, 1000, rkey, raddr), src);
    inject(0, rdma_hdr(1, VIA_PKT_LAST, 2000, 1000, 1000, rkey, raddr), src + 1000);
    progress(F.b);
    bool clean = first_not(F.rdma, RDMA_LEN, 0xEE) < 0 &&
                 first_not(F.other, OTHER_LEN, 0xEE) < 0 &&
                 first_not(F.mem + OFF_SPARE, SPARE_LEN, 0xEE) < 0;
    CU_ASSERT_TRUE(clean);
    struct nic_error e = {0};
    struct via_wire_hdr h = {0};
    bool got, nak;
    if (rel == VIP_SERVICE_UNRELIABLE) {
        CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
        CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_OPEN);
        CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 1);
        CU_ASSERT_EQUAL(atomic_load(&F.dbb->rx_refused[VIA_RXC_RDMAW_PROT]), 1);
        got = !no_error(F.b);
        CU_ASSERT_FALSE(got);
        nak = look(1, &h);
        CU_ASSERT_FALSE(nak);
        CU_ASSERT_EQUAL(status_of(rd), 0); /* still posted */
        if (!clean || got || nak)
            fprintf(stderr, "\n  unreliable RDMA write to a %s: %s, %s, %s\n", rdma_bad_name[k],
                    clean ? "nothing written" : "WRITTEN", got ? "VI error" : "no error",
                    nak ? "answered" : "unanswered");
        teardown();
        return;
    }
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    got = nic_vi_take_error(F.b, &e);
    CU_ASSERT_TRUE(got);
    CU_ASSERT_EQUAL(e.code, VIP_ERROR_RDMAW_PROT);
    CU_ASSERT_TRUE(e.tell_agent);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    nak = look(1, &h) && h.type == VIA_PKT_NAK && h.ack_seq == 1 && h.dst_vi == VI_A &&
          h.imm == VIA_NAK_PROTECTION;
    CU_ASSERT_TRUE(nak);
    if (!clean || !got || e.code != VIP_ERROR_RDMAW_PROT || !nak)
        fprintf(stderr, "\n  RDMA write to a %s (reliability %u): %s, error %s code %u, %s\n",
                rdma_bad_name[k], rel, clean ? "nothing written" : "WRITTEN",
                got ? "recorded" : "not recorded", e.code, nak ? "NAK sent" : "no NAK");
    teardown();
}

static void test_rdma_write_refused(void)
{
    static const uint32_t rels[] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                    VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned r = 0; r < 3; r++)
        for (unsigned k = 0; k < BAD_NKINDS; k++)
            rdma_refused(rels[r], (enum rdma_bad)k);
}

/* The range checked with the first fragment binds the later ones: a peer
 * may not move raddr, nor grow msg_len, once the write was accepted. */
static void test_rdma_write_later_fragments_in_range(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    memset(F.rdma, 0xEE, RDMA_LEN);
    memset(F.victim, 0xEE, VICTIM_LEN);
    uint8_t src[2000];
    tl_fill(src, sizeof src, 31);
    uint64_t raddr = (uint64_t)(uintptr_t)F.rdma + 512;
    /* the last fragment names another address (unregistered memory) */
    inject(0, rdma_hdr(1, VIA_PKT_FIRST, 2000, 0, 1000, F.mh_rdma, raddr), src);
    inject(0, rdma_hdr(1, VIA_PKT_LAST, 2000, 1000, 1000, F.mh_rdma,
                       (uint64_t)(uintptr_t)F.victim),
           src + 1000);
    progress(F.b);
    long v = first_not(F.victim, VICTIM_LEN, 0xEE);
    CU_ASSERT_EQUAL(v, -1);
    CU_ASSERT_EQUAL(first_not(F.rdma + 1512, RDMA_LEN - 1512, 0xEE), -1);
    if (v >= 0)
        fprintf(stderr, "\n  RDMA write: a later fragment's raddr was used unchecked "
                        "(unregistered memory written at +%ld)\n", v);
    teardown();

    setup(VIP_SERVICE_UNRELIABLE, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    memset(F.rdma, 0xEE, RDMA_LEN);
    raddr = (uint64_t)(uintptr_t)F.rdma + 512;
    /* the last fragment claims a longer message than the one checked */
    inject(0, rdma_hdr(1, VIA_PKT_FIRST, 1000, 0, 500, F.mh_rdma, raddr), src);
    inject(0, rdma_hdr(1, VIA_PKT_LAST, 40000, 30000, 1000, F.mh_rdma, raddr), src + 1000);
    progress(F.b);
    long o = first_not(F.rdma + 1512, RDMA_LEN - 1512, 0xEE);
    CU_ASSERT_EQUAL(o, -1);
    if (o >= 0)
        fprintf(stderr, "\n  RDMA write: a later fragment wrote %ld bytes past the range "
                        "checked with the first\n", o);
    teardown();
}

/* The target deregisters its region between two fragments of a write (the
 * entry closed, as vipd closes it): the later fragment is checked again,
 * writes nothing, and the write fails with a protection error. */
static void test_rdma_write_after_deregistration(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    memset(F.rdma, 0xEE, RDMA_LEN);
    uint8_t src[2000];
    tl_fill(src, sizeof src, 7);
    uint64_t raddr = (uint64_t)(uintptr_t)F.rdma;
    inject(0, rdma_hdr(1, VIA_PKT_FIRST, 2000, 0, 1000, F.mh_rdma, raddr), src);
    progress(F.b);
    CU_ASSERT_EQUAL(memcmp(F.rdma, src, 1000), 0); /* the first fragment, checked, lands */
    atomic_store(&F.tpt[IDX_RDMA].gen, 0);         /* VipDeregisterMem */
    inject(0, rdma_hdr(1, VIA_PKT_LAST, 2000, 1000, 1000, F.mh_rdma, raddr), src + 1000);
    progress(F.b);
    long v = first_not(F.rdma + 1000, RDMA_LEN - 1000, 0xEE);
    CU_ASSERT_EQUAL(v, -1);
    if (v >= 0)
        fprintf(stderr, "\n  RDMA write: a fragment landed in deregistered memory (+%ld)\n",
                1000 + v);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_RDMAW_PROT, true);
    struct via_wire_hdr h; /* B's answer to A: the protection NAK */
    CU_ASSERT(look(1, &h) && h.type == VIA_PKT_NAK && h.imm == VIA_NAK_PROTECTION);
    teardown();
}

/* A read request on an unreliable VI (which never issues one), and a read
 * response for no read in flight, are protocol errors: nothing is read,
 * nothing answered, the link is broken. */
static void read_packet_refused(uint32_t rel, uint8_t type)
{
    setup(rel, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    F.tpt[IDX_RDMA].flags = VIA_TPT_RDMA_READ | VIA_TPT_RDMA_WRITE;
    memset(F.rdma, 0xEE, RDMA_LEN);
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, F.mh);
    post_recv(F.b, rd, F.mh);
    uint8_t payload[64];
    memset(payload, 0x55, sizeof payload);
    struct via_wire_hdr h = hdr(0, type);
    h.flags = VIA_PKT_FIRST | VIA_PKT_LAST;
    h.msg_seq = 1;
    h.msg_len = 64;
    h.frag_len = type == VIA_PKT_RDMA_READ_RESP ? 64 : 0;
    h.rkey = F.mh_rdma;
    h.raddr = (uint64_t)(uintptr_t)F.rdma;
    inject(0, h, payload);
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_CATASTROPHIC, true);
    CU_ASSERT_EQUAL(first_not(F.rdma, RDMA_LEN, 0xEE), -1);
    CU_ASSERT_EQUAL(ring_head(1), 0); /* nothing is answered */
    teardown();
}

static void test_rdma_read_packets_refused(void)
{
    read_packet_refused(VIP_SERVICE_UNRELIABLE, VIA_PKT_RDMA_READ_REQ);
    read_packet_refused(VIP_SERVICE_UNRELIABLE, VIA_PKT_RDMA_READ_RESP);
    read_packet_refused(VIP_SERVICE_RELIABLE_RECEPTION, VIA_PKT_RDMA_READ_RESP);
}


/* ---- the initiator --------------------------------------------------------------- */

/* A writes into B's region (in three segments, several link fragments);
 * with immediate data B's next receive completes as the remote write. On
 * the reliable levels A's descriptor waits for B's ACK. */
static void write_round(uint32_t rel, bool imm)
{
    setup(rel, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    memset(F.rdma, 0xEE, RDMA_LEN);
    const uint32_t len = 40000, off = 300;
    uint8_t *src = F.mem + OFF_SDATA;
    tl_fill(src, len, 41);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    rdma_desc(sd, VIP_CONTROL_OP_RDMAWRITE, (uint64_t)(uintptr_t)F.rdma + off, F.mh_rdma, src,
              len, 3);
    if (imm) {
        sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
        sd->CS.ImmediateData = 0xC0FFEEu;
    }
    tl_desc_1(rd, F.mem + OFF_RDATA, 16, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    void *w[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 1), 0);
    uint32_t st = status_of(sd);
    ERR_EXPECT(st, 0);
    CU_ASSERT_EQUAL(st & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RDMA_WRITE);
    CU_ASSERT_EQUAL(tl_verify(F.rdma + off, len, 41), -1);
    CU_ASSERT_EQUAL(first_not(F.rdma, off, 0xEE), -1);
    CU_ASSERT_EQUAL(first_not(F.rdma + off + len, RDMA_LEN - off - len, 0xEE), -1);
    if (imm) {
        void *r[] = {rd};
        CU_ASSERT_EQUAL_FATAL(pump(r, 1), 0);
        uint32_t rs = status_of(rd);
        ERR_EXPECT(rs, 0);
        CU_ASSERT_EQUAL(rs & VIP_STATUS_OP_MASK, VIP_STATUS_OP_REMOTE_RDMA_WRITE);
        CU_ASSERT(rs & VIP_STATUS_IMMEDIATE);
        CU_ASSERT_EQUAL(rd->CS.ImmediateData, 0xC0FFEEu);
    } else {
        progress(F.b);
        CU_ASSERT_EQUAL(status_of(rd), 0); /* not consumed */
    }
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    teardown();
}

static void test_rdma_write_initiator(void)
{
    static const uint32_t rels[] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                    VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned r = 0; r < 3; r++) {
        write_round(rels[r], false);
        write_round(rels[r], true);
    }
}

/* A reliable VI's write to a region B may not write: A's descriptor
 * completes with the RDMA protection error, both VIs break, nothing lands.
 * Unreliable: A's descriptor is done when sent, B drops the write. */
static void write_violation(uint32_t rel)
{
    setup(rel, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, true);
    F.tpt[IDX_RDMA].flags = VIA_TPT_RDMA_READ; /* not writable remotely */
    memset(F.rdma, 0xEE, RDMA_LEN);
    uint8_t *src = F.mem + OFF_SDATA;
    tl_fill(src, 5000, 43);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *sd2 = at(OFF_SDESC + 256);
    rdma_desc(sd, VIP_CONTROL_OP_RDMAWRITE, (uint64_t)(uintptr_t)F.rdma, F.mh_rdma, src, 5000, 1);
    tl_desc_1(sd2, src, 10, F.mh);
    post_send(F.a, sd, F.mh);
    post_send(F.a, sd2, F.mh);
    void *w[] = {sd, sd2};
    CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
    CU_ASSERT_EQUAL(first_not(F.rdma, RDMA_LEN, 0xEE), -1);
    if (rel == VIP_SERVICE_UNRELIABLE) {
        ERR_EXPECT(status_of(sd), 0);
        CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
        CU_ASSERT_TRUE(no_error(F.b));
        teardown();
        return;
    }
    ERR_EXPECT(status_of(sd), VIP_STATUS_RDMA_PROT_ERROR);
    ERR_EXPECT(status_of(sd2), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    EXPECT_ERROR(F.a, VIP_ERROR_RDMAW_PROT, true);
    EXPECT_ERROR(F.b, VIP_ERROR_RDMAW_PROT, true);
    teardown();
}

static void test_rdma_write_violation(void)
{
    write_violation(VIP_SERVICE_UNRELIABLE);
    write_violation(VIP_SERVICE_RELIABLE_DELIVERY);
    write_violation(VIP_SERVICE_RELIABLE_RECEPTION);
}

/* A reads len bytes of B's region into nseg local segments; the response
 * comes in fragments as the link makes room. */
static void read_round(uint32_t rel, uint32_t len, unsigned nseg)
{
    setup(rel, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, false);
    F.b->rdma_read = true;
    F.tpt[IDX_RDMA].flags = VIA_TPT_RDMA_READ;
    const uint32_t off = 64;
    tl_fill(F.rdma + off, len, 51);
    uint8_t *dst = F.mem + OFF_RDATA;
    memset(dst, 0xEE, len + 4096);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    rdma_desc(sd, VIP_CONTROL_OP_RDMAREAD, (uint64_t)(uintptr_t)F.rdma + off, F.mh_rdma, dst, len,
              nseg);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* waits for the data */
    void *w[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 1), 0);
    uint32_t st = status_of(sd);
    ERR_EXPECT(st, 0);
    CU_ASSERT_EQUAL(st & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RDMA_READ);
    CU_ASSERT_EQUAL(tl_verify(dst, len, 51), -1);
    CU_ASSERT_EQUAL(first_not(dst + len, 4096, 0xEE), -1);
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    /* the VI goes on: a send after the read */
    VIP_DESCRIPTOR *s2 = at(OFF_SDESC + 512), *rd = at(OFF_RDESC);
    tl_desc_1(s2, F.mem + OFF_SDATA, 10, F.mh);
    tl_desc_1(rd, F.mem + OFF_SPARE, 10, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, s2, F.mh);
    void *w2[] = {s2, rd};
    CU_ASSERT_EQUAL(pump(w2, 2), 0);
    ERR_EXPECT(status_of(rd), 0);
    teardown();
}

static void test_rdma_read(void)
{
    read_round(VIP_SERVICE_RELIABLE_DELIVERY, 0, 1);
    read_round(VIP_SERVICE_RELIABLE_DELIVERY, 1, 1);
    read_round(VIP_SERVICE_RELIABLE_DELIVERY, RDMA_LEN - 64, 5);
    read_round(VIP_SERVICE_RELIABLE_RECEPTION, 40000, 15);
}

/* Reads B may not serve: A's descriptor fails with the RDMA protection
 * error, both VIs break, and no byte of B's memory reaches A. */
enum read_bad { RB_REGION, RB_VI, RB_PAST_END, RB_FOREIGN, RB_NKINDS };

static void read_violation(enum read_bad k)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, false);
    F.b->rdma_read = k != RB_VI;
    F.tpt[IDX_RDMA].flags = k == RB_REGION ? VIA_TPT_RDMA_WRITE : VIA_TPT_RDMA_READ;
    F.tpt[IDX_OTHER].flags = VIA_TPT_RDMA_READ;
    memset(F.rdma, 0x77, RDMA_LEN);
    memset(F.other, 0x77, OTHER_LEN);
    uint64_t raddr = (uint64_t)(uintptr_t)F.rdma;
    uint32_t rkey = F.mh_rdma, len = 3000;
    if (k == RB_PAST_END)
        raddr += RDMA_LEN - 1000;
    if (k == RB_FOREIGN) {
        raddr = (uint64_t)(uintptr_t)F.other;
        rkey = F.mh_other;
    }
    uint8_t *dst = F.mem + OFF_RDATA;
    memset(dst, 0xEE, len);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    rdma_desc(sd, VIP_CONTROL_OP_RDMAREAD, raddr, rkey, dst, len, 1);
    post_send(F.a, sd, F.mh);
    void *w[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 1), 0);
    ERR_EXPECT(status_of(sd), VIP_STATUS_RDMA_PROT_ERROR);
    CU_ASSERT_EQUAL(first_not(dst, len, 0xEE), -1);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    EXPECT_ERROR(F.a, VIP_ERROR_RDMAR_PROT, true);
    EXPECT_ERROR(F.b, VIP_ERROR_RDMAR_PROT, true);
    teardown();
}

static void test_rdma_read_violation(void)
{
    for (unsigned k = 0; k < RB_NKINDS; k++)
        read_violation((enum read_bad)k);
}

/* A read and B's own long send share the B-to-A direction of the link:
 * their fragments interleave and each arrives whole. */
static void test_rdma_read_beside_send(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    set_vi(F.b, PTAG_A, VIA_MAX_TRANSFER, false);
    F.b->rdma_read = true;
    F.tpt[IDX_RDMA].flags = VIA_TPT_RDMA_READ;
    tl_fill(F.rdma, RDMA_LEN, 61);
    const uint32_t mlen = 200000;
    uint8_t *bsrc = F.mem + OFF_SPARE, *adst = F.mem + OFF_RDATA;
    tl_fill(bsrc, mlen, 62);
    VIP_DESCRIPTOR *bs = at(OFF_RDESC + 1024), *ar = at(OFF_RDESC), *sd = at(OFF_SDESC);
    tl_desc_1(bs, bsrc, mlen, F.mh);
    tl_desc_1(ar, adst, mlen, F.mh);
    uint8_t *rdst = F.mem + OFF_SDATA;
    rdma_desc(sd, VIP_CONTROL_OP_RDMAREAD, (uint64_t)(uintptr_t)F.rdma, F.mh_rdma, rdst, RDMA_LEN,
              2);
    post_recv(F.a, ar, F.mh);
    post_send(F.b, bs, F.mh); /* B starts its message, A's read comes in between */
    post_send(F.a, sd, F.mh);
    void *w[] = {sd, ar, bs};
    CU_ASSERT_EQUAL_FATAL(pump(w, 3), 0);
    ERR_EXPECT(status_of(sd), 0);
    ERR_EXPECT(status_of(ar), 0);
    CU_ASSERT_EQUAL(tl_verify(rdst, RDMA_LEN, 61), -1);
    CU_ASSERT_EQUAL(tl_verify(adst, mlen, 62), -1);
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    teardown();
}

/* A read with immediate data, or posted as a receive, is malformed. */
static void test_rdma_malformed(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    rdma_desc(rd, VIP_CONTROL_OP_RDMAWRITE, (uint64_t)(uintptr_t)F.rdma, F.mh_rdma,
              F.mem + OFF_RDATA, 100, 1);
    post_recv(F.b, rd, F.mh);
    uint8_t *src = F.mem + OFF_SDATA;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    tl_desc_1(sd, src, 10, F.mh);
    post_send(F.a, sd, F.mh);
    void *w[] = {rd};
    CU_ASSERT_EQUAL(pump(w, 1), 0);
    ERR_EXPECT(status_of(rd), VIP_STATUS_FORMAT_ERROR);
    teardown();

    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    sd = at(OFF_SDESC);
    rdma_desc(sd, VIP_CONTROL_OP_RDMAREAD | VIP_CONTROL_IMMEDIATE, (uint64_t)(uintptr_t)F.rdma,
              F.mh_rdma, F.mem + OFF_RDATA, 100, 1);
    post_send(F.a, sd, F.mh);
    ERR_EXPECT(status_of(sd), VIP_STATUS_FORMAT_ERROR);
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_rdma_write_lands),
        TL_TEST(test_rdma_write_refused),
        TL_TEST(test_rdma_write_later_fragments_in_range),
        TL_TEST(test_rdma_write_after_deregistration),
        TL_TEST(test_rdma_read_packets_refused),
        TL_TEST(test_rdma_write_initiator),
        TL_TEST(test_rdma_write_violation),
        TL_TEST(test_rdma_read),
        TL_TEST(test_rdma_read_violation),
        TL_TEST(test_rdma_read_beside_send),
        TL_TEST(test_rdma_malformed),
        TL_END,
    };
    return tl_main(argc, argv, "firmware RDMA", tests);
}

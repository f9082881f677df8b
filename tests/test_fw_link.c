/*
 * test_fw_link.c - unit tests of the NIC firmware's checks and link layer
 * (lanai-fw/), no vipd needed: the TPT checks of local and RDMA accesses,
 * the shared-memory link ring (reserve, publish, peek, consume, wrap, full,
 * bad packets), the wire header's check word, and the receiver working from
 * its one copy of each header however the sender rewrites the ring.
 *
 * The fixture (one in-memory NIC, two VIs on one channel) is tests/lib/tfw.c.
 */
#include <signal.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fw_hal.h"
#include "lib/tfw.h"

/* ---- TPT -------------------------------------------------------------------------- */

static void test_tpt_check(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 0);
    uint64_t base = (uint64_t)(uintptr_t)F.mem;
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base, MEM_LEN), 0);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base + 100, 1), 0);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base + MEM_LEN - 1, 1), 0);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base + MEM_LEN, 0), 0);
    /* wrong generation (stale or forged handle) */
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, VIA_MH_MAKE(2, IDX_MEM), base, 1),
                    VIP_STATUS_PROTECTION_ERROR);
    /* generation 0 is never issued */
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, VIA_MH_MAKE(0, IDX_MEM), base, 1),
                    VIP_STATUS_PROTECTION_ERROR);
    /* an index never written */
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, VIA_MH_MAKE(1, 100), base, 1),
                    VIP_STATUS_PROTECTION_ERROR);
    /* wrong ptag: memory of another protection domain */
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh_other, (uint64_t)(uintptr_t)F.other, 1),
                    VIP_STATUS_PROTECTION_ERROR);
    set_vi(F.a, PTAG_B, VIA_MAX_TRANSFER, false);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh_other, (uint64_t)(uintptr_t)F.other, 1), 0);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base, 1), VIP_STATUS_PROTECTION_ERROR);
    set_vi(F.a, PTAG_A, VIA_MAX_TRANSFER, false);
    /* out of range: below, beyond the end, straddling, wrapping */
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base - 1, 1), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base + MEM_LEN, 1), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base + MEM_LEN - 10, 11),
                    VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base, MEM_LEN + 1ull), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base + 16, UINT64_MAX - 8),
                    VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, UINT64_MAX - 4, 8), VIP_STATUS_PROTECTION_ERROR);
    /* index out of the table */
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, VIA_MH_MAKE(1, VIA_MAX_TPT), base, 1),
                    VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, VIA_MH_MAKE(1, 0xFFFF), base, 1),
                    VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, 0x12345678u, base, 1), VIP_STATUS_PROTECTION_ERROR);
    /* the library's view is the NIC's */
    CU_ASSERT_EQUAL(nic_tpt_check(F.a, F.mh, base, 1), 0);
    CU_ASSERT_EQUAL(nic_tpt_check(F.a, F.mh, base - 1, 1), VIP_STATUS_PROTECTION_ERROR);
    /* invalidated entry (deregistered: vipd bumps the generation) */
    atomic_store(&F.tpt[IDX_MEM].gen, 2);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base, 1), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, VIA_MH_MAKE(2, IDX_MEM), base, 1), 0);
    teardown();
}

/* The responder's check: the TPT check, and the region's enable bit. */
static void test_tpt_check_rdma(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 0);
    uint64_t r = (uint64_t)(uintptr_t)F.rdma;
    const uint32_t W = VIA_TPT_RDMA_WRITE, R = VIA_TPT_RDMA_READ;
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_rdma, r, RDMA_LEN, W), 0);
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_rdma, r + 1, RDMA_LEN, W),
                    VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_rdma, r - 1, 2, W), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_rdma, r, 1, R), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_rdma, r, 1, W | R), VIP_STATUS_PROTECTION_ERROR);
    /* a region registered without the enable */
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, (uint64_t)(uintptr_t)F.mem, 1), 0);
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh, (uint64_t)(uintptr_t)F.mem, 1, W),
                    VIP_STATUS_PROTECTION_ERROR);
    /* enabled, but another ptag's */
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_other, (uint64_t)(uintptr_t)F.other, 1, W),
                    VIP_STATUS_PROTECTION_ERROR);
    F.tpt[IDX_RDMA].flags = W | R;
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_rdma, r, 1, R), 0);
    CU_ASSERT_EQUAL(fw_tpt_check_rdma(F.a, F.mh_rdma, r, 1, W | R), 0);
    teardown();
}

/* ---- link ring ------------------------------------------------------------------------ */

static struct via_wire_hdr *put(struct via_chan_dir *d, uint32_t payload, uint32_t seq)
{
    struct via_wire_hdr *h = fw_link_reserve(d, NULL, payload);
    if (!h)
        return NULL;
    memset(h + 1, (int)(seq & 0xFF), payload);
    *h = (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = VIA_PKT_SEND,
                               .flags = VIA_PKT_FIRST | VIA_PKT_LAST, .dst_vi = 1,
                               .conn_id = 5, .msg_seq = seq, .msg_len = payload,
                               .frag_len = payload};
    fw_link_publish(d, h);
    return h;
}

static void test_link_ring(void)
{
    struct via_chan_dir *d = zalloc(64, sizeof *d);
    struct via_wire_hdr h;
    const uint8_t *pl = NULL;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);

    /* reserve/publish/peek/consume, sizes rounded to 64 */
    uint32_t sizes[] = {0, 1, 63, 64, 65, 1000, VIA_MTU};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t h0 = atomic_load(&d->head);
        struct via_wire_hdr *w = put(d, sizes[i], i + 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        CU_ASSERT_EQUAL(atomic_load(&d->head) - h0, 64 + ((sizes[i] + 63) & ~63u));
        CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
        CU_ASSERT_EQUAL(h.type, VIA_PKT_SEND);
        CU_ASSERT_EQUAL(h.msg_seq, i + 1);
        CU_ASSERT_EQUAL(h.frag_len, sizes[i]);
        CU_ASSERT_PTR_EQUAL(pl, (const uint8_t *)(w + 1));
        CU_ASSERT_EQUAL(atomic_load(&d->tail), h0); /* a peek takes nothing */
        if (sizes[i])
            CU_ASSERT(pl[sizes[i] - 1] == (uint8_t)(i + 1));
        fw_link_consume(d, &h);
        CU_ASSERT_EQUAL(atomic_load(&d->tail), atomic_load(&d->head));
    }

    /* PAD at the wrap, skipped inside peek: fill up to near the end */
    uint32_t pkt = 64 + VIA_MTU;
    while ((atomic_load(&d->head) % VIA_CHAN_RING) + pkt <= VIA_CHAN_RING) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(put(d, VIA_MTU, 100));
        CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
        fw_link_consume(d, &h);
    }
    uint32_t to_end = VIA_CHAN_RING - (uint32_t)(atomic_load(&d->head) % VIA_CHAN_RING);
    CU_ASSERT(to_end < pkt);
    uint64_t t0 = atomic_load(&d->tail);
    CU_ASSERT_PTR_NOT_NULL_FATAL(put(d, VIA_MTU, 200));
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.type, VIA_PKT_SEND);
    CU_ASSERT_EQUAL(h.msg_seq, 200);
    CU_ASSERT_PTR_EQUAL(pl, d->ring + 64);
    CU_ASSERT_EQUAL(atomic_load(&d->tail), t0 + to_end); /* the PAD is released */
    fw_link_consume(d, &h);
    CU_ASSERT_EQUAL(atomic_load(&d->tail), atomic_load(&d->head));

    /* full ring: reserve fails with NULL, nothing is overwritten */
    memset(d, 0, sizeof *d);
    unsigned n = 0;
    while (put(d, 4096 - 64, 1000 + n) && n < 1000)
        n++;
    CU_ASSERT_EQUAL(n, VIA_CHAN_RING / 4096);
    CU_ASSERT_EQUAL(atomic_load(&d->head) - atomic_load(&d->tail), VIA_CHAN_RING);
    CU_ASSERT_PTR_NULL(fw_link_reserve(d, NULL, 0));
    /* drain one, then there is room for one again */
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.msg_seq, 1000);
    fw_link_consume(d, &h);
    CU_ASSERT_PTR_NOT_NULL(put(d, 4096 - 64, 5000));
    CU_ASSERT_PTR_NULL(fw_link_reserve(d, NULL, 0));
    for (unsigned i = 1; i <= n; i++) {
        CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
        CU_ASSERT_EQUAL(h.msg_seq, i < n ? 1000 + i : 5000);
        fw_link_consume(d, &h);
    }
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);

    /* a published header whose seal is not its place's is flagged bad and
     * not consumed */
    struct via_wire_hdr *w = put(d, 128, 7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    uint64_t tail = atomic_load(&d->tail);
    uint32_t seal = w->crc;
    w->crc ^= 0x100;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    CU_ASSERT_EQUAL(atomic_load(&d->tail), tail);
    w->crc = seal; /* restored: valid again */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    /* the seal is the ring's, not a check word over the fields: what the
     * sender wrote is what it sent, and the VI judges the fields */
    w->msg_len = 99999;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.msg_len, 99999);
    w->msg_len = 128;
    w->version = 1; /* wire format 1 is gone */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->version = VIA_WIRE_VERSION;
    /* a sealed header of an impossible length is refused */
    w->frag_len = VIA_MTU + 64;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    /* unknown types */
    w->frag_len = 128;
    w->type = 77;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->type = 0;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->type = VIA_PKT_NTYPES;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    /* every opcode of version 2 passes the link (the VI judges it) */
    static const uint8_t types[] = {VIA_PKT_SEND, VIA_PKT_RDMA_WRITE, VIA_PKT_RDMA_READ_REQ,
                                    VIA_PKT_RDMA_READ_RESP, VIA_PKT_ACK, VIA_PKT_NAK};
    for (unsigned i = 0; i < sizeof types; i++) {
        w->type = types[i];
        CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
        CU_ASSERT_EQUAL(h.type, types[i]);
    }
    /* head is the sender's count: the receiver goes by the tag and the
     * seal alone, so a lying head (beyond the ring, or behind) changes
     * nothing, and a slot not sealed is empty whatever head says */
    w->type = VIA_PKT_SEND;
    uint64_t head = atomic_load(&d->head);
    atomic_store(&d->head, atomic_load(&d->tail) + VIA_CHAN_RING + 64);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    atomic_store(&d->head, atomic_load(&d->tail));
    CU_ASSERT(fw_link_ready(d));
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    atomic_store(&d->head, head);
    uint8_t tag = w->lap;
    w->lap = 0; /* not published: the tag is the publication */
    CU_ASSERT(!fw_link_ready(d));
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);
    w->lap = (uint8_t)(tag + 1); /* another lap's tag */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);
    w->lap = tag;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    free(d);
}

/* Nobody clears the ring: what an earlier lap left at the receiver's tail
 * (a payload byte that happens to equal this lap's tag, an old header) is
 * not a packet. It reads as empty while head says nothing was published,
 * and only a header the sender did publish (head past tail) that fails
 * its checks breaks the link. */
static void test_link_old_bytes(void)
{
    struct via_chan_dir *d = zalloc(64, sizeof *d);
    struct via_wire_hdr h;
    const uint8_t *pl = NULL;
    /* lap 1 filled every byte with 0x02, lap 2's tag */
    struct via_wire_hdr *w = put(d, 1000, 9);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    uint8_t tag1 = w->lap;
    memset(d->ring, 0x02, VIA_CHAN_RING);
    CU_ASSERT_EQUAL(tag1, 1);
    for (uint64_t at = VIA_CHAN_RING; at < VIA_CHAN_RING + 4096; at += 64) {
        atomic_store(&d->tail, at); /* lap 2: whatever the next packet's place */
        atomic_store(&d->head, at);
        CU_ASSERT(fw_link_ready(d)); /* looks tagged, */
        CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY); /* is not a packet */
    }
    /* an old header of lap 1 left at a lap-2 place: its tag is lap 1's */
    atomic_store(&d->tail, VIA_CHAN_RING);
    atomic_store(&d->head, VIA_CHAN_RING);
    w = put(d, 64, 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(w->lap, 2);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    w->lap = tag1;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);
    /* The receiver takes a packet by its tag, before the sender stores
     * head: head then lags behind tail, and old bytes at the new tail that
     * look tagged are still not a packet (nothing was published there). */
    w->lap = 2;
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    fw_link_consume(d, &h);
    memset(d->ring + 128, 0x02, 64); /* a payload byte of lap 1 at the lap tag */
    atomic_store(&d->head, VIA_CHAN_RING); /* the sender's store of head is late */
    CU_ASSERT(fw_link_ready(d)); /* looks tagged, */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY); /* is not a packet */
    atomic_store(&d->tail, VIA_CHAN_RING);
    atomic_store(&d->head, VIA_CHAN_RING + 128);
    /* published (head past tail) but failing its checks: the sender's fault */
    w->frag_len = VIA_MTU + 64;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    free(d);

    /* A header left 255 laps back, where the lap tags repeat: its tag is
     * this lap's and it was a valid packet of its own place, so only the
     * seal (of the whole position) tells it from a new one. */
    d = zalloc(64, sizeof *d);
    w = put(d, 64, 11);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    uint64_t later = 255ull * VIA_CHAN_RING;
    atomic_store(&d->tail, later);
    atomic_store(&d->head, later);
    CU_ASSERT_EQUAL(w->lap, 1); /* lap 255's tag is lap 0's */
    CU_ASSERT(fw_link_ready(d)); /* looks tagged, */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY); /* is not a packet */
    /* the sender's next packet there is */
    w = put(d, 64, 12);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.msg_seq, 12);
    free(d);
}

/* A network link's frame (UDP, libfabric): its check word covers every
 * field of wire format 2, rkey, ack_seq and raddr included. */
static void test_wire_check_v2_fields(void)
{
    struct via_wire_hdr w = {.version = VIA_WIRE_VERSION, .type = VIA_PKT_RDMA_WRITE,
                             .flags = VIA_PKT_FIRST | VIA_PKT_LAST, .dst_vi = 1, .conn_id = 5,
                             .msg_seq = 3, .msg_len = 64, .frag_len = 64, .rkey = 0x10001,
                             .ack_seq = 17, .raddr = 0x0000123456789000ull};
    w.crc = via_wire_check(&w);
    CU_ASSERT_FATAL(fw_link_frame_ok(&w, 64));
    CU_ASSERT(!fw_link_frame_ok(&w, 65)); /* the frame's length is the header's */
    w.rkey ^= 0x100;
    CU_ASSERT(!fw_link_frame_ok(&w, 64));
    w.rkey ^= 0x100;
    w.ack_seq ^= 1;
    CU_ASSERT(!fw_link_frame_ok(&w, 64));
    w.ack_seq ^= 1;
    w.raddr ^= 0x40; /* low word */
    CU_ASSERT(!fw_link_frame_ok(&w, 64));
    w.raddr ^= 0x40;
    w.raddr ^= 1ull << 40; /* high word */
    CU_ASSERT(!fw_link_frame_ok(&w, 64));
    w.raddr ^= 1ull << 40;
    w.msg_len ^= 2;
    CU_ASSERT(!fw_link_frame_ok(&w, 64));
    w.msg_len ^= 2;
    CU_ASSERT(fw_link_frame_ok(&w, 64));
}

/* peek copies the header out once: a rewrite of the ring after the peek
 * changes nothing of what the receiver uses, consume included. */
static void test_link_peek_copies_once(void)
{
    struct via_chan_dir *d = zalloc(64, sizeof *d);
    struct via_wire_hdr h;
    const uint8_t *pl;
    CU_ASSERT_PTR_NOT_NULL_FATAL(put(d, 1000, 1));
    CU_ASSERT_PTR_NOT_NULL_FATAL(put(d, 200, 2));
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.frag_len, 1000);
    /* the sender rewrites what it published (the seal stays valid) */
    struct via_wire_hdr *w = (struct via_wire_hdr *)(void *)d->ring;
    w->frag_len = 64;
    w->msg_len = 64;
    w->msg_seq = 99;
    CU_ASSERT_EQUAL(h.frag_len, 1000);
    CU_ASSERT_EQUAL(h.msg_seq, 1);
    fw_link_consume(d, &h);
    CU_ASSERT_EQUAL(atomic_load(&d->tail), 64 + 1024); /* by the copy */
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.msg_seq, 2);
    CU_ASSERT_EQUAL(h.frag_len, 200);
    CU_ASSERT_PTR_EQUAL(pl, d->ring + 64 + 1024 + 64);
    /* and the other way: a rewrite to a longer packet */
    w = (struct via_wire_hdr *)(void *)(d->ring + 64 + 1024);
    w->frag_len = VIA_MTU;
    fw_link_consume(d, &h);
    CU_ASSERT_EQUAL(atomic_load(&d->tail), atomic_load(&d->head));
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);
    free(d);
}

/* A link whose far end rewrites each header right after the receiver's one
 * read of it (the shared-memory ring otherwise). */
static bool scribble_on;

static struct via_wire_hdr *fwd_reserve(struct fw_link *l, uint32_t payload)
{
    return fw_link_reserve(l->tx, NULL, payload);
}

static void fwd_publish(struct fw_link *l, struct via_wire_hdr *h)
{
    fw_link_publish(l->tx, h);
}

static void fwd_consume(struct fw_link *l, const struct via_wire_hdr *h)
{
    fw_link_consume(l->rx, h);
}

static bool fwd_pending(const struct fw_link *l)
{
    return atomic_load(&l->rx->head) != atomic_load(&l->rx->tail);
}

static enum fw_link_peek_rc scribble_peek(struct fw_link *l, struct via_wire_hdr *h,
                                          const uint8_t **payload)
{
    enum fw_link_peek_rc rc = fw_link_peek(l->rx, h, payload);
    if (rc == FW_LINK_PACKET && scribble_on) {
        struct via_wire_hdr *w = (struct via_wire_hdr *)(uintptr_t)(*payload - sizeof *w);
        w->frag_len = VIA_MTU;
        w->msg_len = VIA_MTU;
        w->flags = VIA_PKT_FIRST | VIA_PKT_LAST | VIA_PKT_IMM;
        w->imm = 0xBADBADu;
    }
    return rc;
}

static void fwd_stall(struct fw_link *l)
{
    fw_link_shm_ops.stall(l);
}

static bool fwd_drained(struct fw_link *l, unsigned n)
{
    return fw_link_shm_ops.drained(l, n);
}

static const struct fw_link_ops scribble_ops = {
    .name = "scribble",
    .reserve = fwd_reserve,
    .publish = fwd_publish,
    .peek = scribble_peek,
    .consume = fwd_consume,
    .pending = fwd_pending,
    .stall = fwd_stall,
    .drained = fwd_drained,
};


/* The receiving NIC places and consumes by its copy of the header. */
static void test_rx_uses_header_copy(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    F.b->link.ops = &scribble_ops;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    uint8_t *sdata = F.mem + OFF_SDATA, *rdata = F.mem + OFF_RDATA;
    tl_fill(sdata, 100, 1);
    memset(rdata, 0xEE, 2 * VIA_MTU);
    tl_desc_1(sd, sdata, 100, F.mh);
    tl_desc_1(rd, rdata, 2 * VIA_MTU, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    scribble_on = true;
    progress(F.b);
    scribble_on = false;
    uint32_t st = status_of(rd);
    ERR_EXPECT(st, 0);
    CU_ASSERT_EQUAL(st & VIP_STATUS_IMMEDIATE, 0);
    CU_ASSERT_EQUAL(rd->CS.Length, 100);
    CU_ASSERT_EQUAL(tl_verify(rdata, 100, 1), -1);
    long over = first_not(rdata + 100, 2 * VIA_MTU - 100, 0xEE);
    CU_ASSERT_EQUAL(over, -1);
    if (over >= 0 || rd->CS.Length != 100)
        fprintf(stderr, "\n  receiver used the rewritten header: Length %u, byte %ld written\n",
                rd->CS.Length, over + 100);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->dir[0].tail), atomic_load(&F.chan->dir[0].head));
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
    CU_ASSERT_TRUE(no_error(F.b));
    /* the ring is where the sender thinks it is: the next message goes through */
    void *w[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 1), 0);
    ERR_EXPECT(status_of(sd), 0);
    xfer(3000, 2, 1, 1, 2);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    teardown();
}

/* A link that announces its own MTU (as the libfabric link does, larger
 * than VIA_MTU): the ring underneath, packets counted as they leave. */
#define SMALL_MTU 1000u
static unsigned mtu_pkts;
static uint32_t mtu_largest;

static void count_publish(struct fw_link *l, struct via_wire_hdr *h)
{
    if (h->frag_len) {
        mtu_pkts++;
        if (h->frag_len > mtu_largest)
            mtu_largest = h->frag_len;
    }
    fw_link_publish(l->tx, h);
}

static enum fw_link_peek_rc fwd_peek(struct fw_link *l, struct via_wire_hdr *h,
                                     const uint8_t **payload)
{
    return fw_link_peek(l->rx, h, payload);
}

static const struct fw_link_ops small_mtu_ops = {
    .name = "small-mtu",
    .mtu = SMALL_MTU,
    .reserve = fwd_reserve,
    .publish = count_publish,
    .peek = fwd_peek,
    .consume = fwd_consume,
    .pending = fwd_pending,
    .stall = fwd_stall,
    .drained = fwd_drained,
};

/* The send pipeline fragments at its link's MTU; the message arrives whole. */
static void test_link_mtu(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    F.a->link.ops = &small_mtu_ops;
    F.b->link.ops = &small_mtu_ops;
    CU_ASSERT_EQUAL(fw_link_mtu(&F.a->link), SMALL_MTU);
    CU_ASSERT_EQUAL(fw_link_mtu(&F.b->link), SMALL_MTU);
    enum { LEN = 4500 }; /* four full packets and a short one */
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    uint8_t *sdata = F.mem + OFF_SDATA, *rdata = F.mem + OFF_RDATA;
    tl_fill(sdata, LEN, 7);
    memset(rdata, 0xEE, LEN + 64);
    tl_desc_1(sd, sdata, LEN, F.mh);
    tl_desc_1(rd, rdata, LEN + 64, F.mh);
    mtu_pkts = 0;
    mtu_largest = 0;
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    progress(F.b);
    progress(F.a);
    ERR_EXPECT(status_of(sd), 0);
    ERR_EXPECT(status_of(rd), 0);
    CU_ASSERT_EQUAL(rd->CS.Length, LEN);
    CU_ASSERT_EQUAL(tl_verify(rdata, LEN, 7), -1);
    CU_ASSERT_EQUAL(first_not(rdata + LEN, 64, 0xEE), -1);
    CU_ASSERT_EQUAL(mtu_pkts, (LEN + SMALL_MTU - 1) / SMALL_MTU);
    CU_ASSERT_EQUAL(mtu_largest, SMALL_MTU);
    /* the shared-memory ring keeps VIA_MTU */
    F.a->link.ops = &fw_link_shm_ops;
    CU_ASSERT_EQUAL(fw_link_mtu(&F.a->link), VIA_MTU);
    teardown();
}

/* The UDP link's CRC-32C (fw_net.c): its check value, and the three-lane
 * hardware path equal to the byte-wise one at every length around its
 * block sizes (3 x 2048, 3 x 256), start offset and seed. */
static void test_crc32c_lanes(void)
{
    CU_ASSERT_EQUAL(via_crc32c(0, "123456789", 9), 0xE3069283u);
    enum { MAX = 3 * 2048 * 3 + 3 * 256 * 2 + 64 };
    uint8_t *b = malloc(MAX + 8);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    uint32_t x = 12345;
    for (unsigned i = 0; i < MAX + 8; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (uint8_t)(x >> 16);
    }
    static const unsigned edge[] = {0, 1, 7, 8, 767, 768, 769, 1535, 1536, 6143, 6144, 6145,
                                    6144 + 768, 12288 + 1600, 16448, MAX};
    unsigned bad = 0;
    for (unsigned e = 0; e < sizeof edge / sizeof edge[0]; e++)
        for (unsigned off = 0; off < 8; off += 3)
            for (unsigned d = 0; d < 3 && edge[e] + d <= MAX; d++) {
                uint32_t seed = off * 0x9E3779B9u;
                if (via_crc32c(seed, b + off, edge[e] + d) !=
                    via_crc32c_ref(seed, b + off, edge[e] + d))
                    bad++;
            }
    CU_ASSERT_EQUAL(bad, 0);
    free(b);
}

/* The gather into the ring by streaming stores (hal_dma_from_host_stream):
 * every byte of the range copied, none beside it touched, at every
 * destination alignment a packet's payload or a later segment can have,
 * and lengths on each side of its head (to a line boundary), body (whole
 * lines) and tail steps. */
static void test_stream_copy(void)
{
    enum { MAXLEN = 16384 + 130, PAD = 128 };
    uint8_t *src = malloc(MAXLEN + 64), *dst = malloc(MAXLEN + 64 + 2 * PAD);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dst);
    for (unsigned i = 0; i < MAXLEN + 64; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    static const uint32_t lens[] = {0,    1,    15,   16,   17,   63,   64,   65,    127,
                                    8191, 8192, 8193, 8255, 8256, 8257, 16384, MAXLEN};
    static const unsigned dalign[] = {0, 1, 8, 15, 16, 17, 48, 63};
    static const unsigned salign[] = {0, 1, 4, 17};
    unsigned bad = 0;
    for (unsigned l = 0; l < sizeof lens / sizeof *lens; l++)
        for (unsigned a = 0; a < sizeof dalign / sizeof *dalign; a++)
            for (unsigned b = 0; b < sizeof salign / sizeof *salign; b++) {
                uint8_t *d = dst + PAD + dalign[a];
                const uint8_t *sp = src + salign[b];
                memset(dst, 0xEE, MAXLEN + 64 + 2 * PAD);
                hal_dma_from_host_stream(d, (uint64_t)(uintptr_t)sp, lens[l]);
                if (memcmp(d, sp, lens[l]) != 0 || first_not(dst, PAD + dalign[a], 0xEE) >= 0 ||
                    first_not(d + lens[l], PAD, 0xEE) >= 0)
                    bad++;
            }
    CU_ASSERT_EQUAL(bad, 0);
    /* the shared ring streams, a fabric's send slots do not */
    CU_ASSERT_EQUAL(fw_link_shm_ops.stream, true);
    free(src);
    free(dst);
}

/* The DMA engine's copy (hal_copy): every length up to 40 bytes (the
 * overlapping small-copy steps and their edges, 3/4, 7/8, 16/17), at odd
 * alignments on both sides, in both directions; not a byte beside the
 * range is touched. */
static void test_small_copy(void)
{
    enum { PAD = 32, MAXLEN = 40 };
    uint8_t src[MAXLEN + 8], dst[MAXLEN + 8 + 2 * PAD];
    for (unsigned i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 13 + 5);
    unsigned bad = 0;
    for (uint32_t len = 0; len <= MAXLEN; len++)
        for (unsigned a = 0; a < 8; a += 3)
            for (unsigned b = 0; b < 8; b += 5)
                for (int to_host = 0; to_host < 2; to_host++) {
                    uint8_t *d = dst + PAD + a;
                    const uint8_t *sp = src + b;
                    memset(dst, 0xEE, sizeof dst);
                    if (to_host)
                        hal_dma_to_host((uint64_t)(uintptr_t)d, sp, len);
                    else
                        hal_dma_from_host(d, (uint64_t)(uintptr_t)sp, len);
                    if (memcmp(d, sp, len) != 0 || first_not(dst, PAD + a, 0xEE) >= 0 ||
                        first_not(d + len, PAD, 0xEE) >= 0)
                        bad++;
                }
    CU_ASSERT_EQUAL(bad, 0);
}

/* Liveness takes only proof of death: a pidfd of an exited process. A
 * live process's pidfd, and a readable fd that is no pidfd (a pipe with
 * data: what a pidfd's number closed elsewhere and reused may become),
 * are not death. */
static void test_live_exited_needs_proof(void)
{
#ifdef SYS_pidfd_open
    pid_t kid = fork();
    CU_ASSERT_FATAL(kid >= 0);
    if (kid == 0) {
        pause();
        _exit(0);
    }
    int fd = (int)syscall(SYS_pidfd_open, kid, 0);
    if (fd < 0 && errno == ENOSYS) {
        /* a kernel (or valgrind) without pidfds: vipd hands none over,
         * and nothing here can be checked */
        fprintf(stderr, "\n  pidfd_open: not here (ENOSYS): nothing to check\n");
        kill(kid, SIGKILL);
        waitpid(kid, NULL, 0);
        return;
    }
    if (fd < 0)
        kill(kid, SIGKILL);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(!hal_pidfd_exited(fd)); /* alive */
    kill(kid, SIGKILL);
    int st;
    CU_ASSERT(waitpid(kid, &st, 0) == kid);
    CU_ASSERT(hal_pidfd_exited(fd)); /* gone */
    close(fd);
    int pp[2];
    CU_ASSERT_FATAL(pipe(pp) == 0);
    CU_ASSERT(write(pp[1], "x", 1) == 1);
    CU_ASSERT(!hal_pidfd_exited(pp[0])); /* readable, but no process's end */
    close(pp[0]);
    close(pp[1]);
#endif
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_live_exited_needs_proof),
        TL_TEST(test_tpt_check),
        TL_TEST(test_tpt_check_rdma),
        TL_TEST(test_link_ring),
        TL_TEST(test_link_old_bytes),
        TL_TEST(test_wire_check_v2_fields),
        TL_TEST(test_link_peek_copies_once),
        TL_TEST(test_rx_uses_header_copy),
        TL_TEST(test_link_mtu),
        TL_TEST(test_crc32c_lanes),
        TL_TEST(test_stream_copy),
        TL_TEST(test_small_copy),
        TL_END,
    };
    return tl_main(argc, argv, "firmware link", tests);
}

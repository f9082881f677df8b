/*
 * fuzz_wire.c - libFuzzer target: the NIC's receive side against a hostile
 * peer NIC. The link validation (fw_link_peek: the one copy of the header,
 * version, the seal of its place, type, lengths), the per-VI header checks
 * (fw_rx_check_header) and the opcode table (rx_ops: SEND, RDMA_WRITE, READ_REQ,
 * READ_RESP, ACK, NAK) with everything behind them: descriptor fetch, TPT
 * and RDMA checks, scatter, completion, ACK/NAK and read responses.
 *
 * The fixture of the firmware unit tests (tests/lib/tfw.c) builds one
 * native NIC and the connected VIs A (3) and B (9); the input plays the
 * host of B (posting receives and sends) and the peer NIC behind A: it
 * publishes packets of its choosing on A's direction of the link, sealed
 * for their place unless it asks otherwise, and takes what B sends back.
 *
 * The oracle, besides ASan/UBSan:
 *   - no byte of host memory changes outside what B's host let the NIC
 *     write: its receive descriptors and their segments, its send
 *     descriptors and RDMA-read buffers, and the RDMA-write region when B
 *     enables RDMA writes. The other regions (another ptag's, a never
 *     registered "victim", a read-only one, the rest of B's memory) are
 *     canaries and must stay as they were;
 *   - every packet B puts on the link passes the receiver's own validation
 *     and is addressed to A on this connection;
 *   - a read response carries exactly the bytes of a range the peer asked
 *     for, inside a region with RDMA read enabled, and only if B enables
 *     RDMA reads.
 *
 * Input: config:u8 then records (op = first byte % 5).
 * config: % 3 the reliability level; 0x04 B enables RDMA write, 0x08 RDMA
 *   read (reliable levels only); 0x10 a CQ; 0x20 a paced NIC (tiny costs)
 *   0 packet:  op type flags target seq:u32 msg_len:u32 frag_off:u32
 *              frag_len:u16 roff:u16 imm:u32 ack:u32 raw:u32, payload[frag_len]
 *              flags: low 3 bits the header's; 0x08 a bad seal; 0x10
 *              another connection; 0x20 another VI; 0x40 wire version 1;
 *              0x80 modelled arrival roff * 16 ns from now
 *              target: rkey/raddr = 0 rdma region, 1 another ptag's,
 *              2 victim (unregistered), 3 B's memory (no RDMA), 4 the read-only
 *              region, else raw (rkey = raw, raddr = raw << 12 | roff)
 *   1 receive: op segs len:u16 flags (0x1 wrong-ptag handle, 0x2 a segment
 *              in the victim)
 *   2 progress: op n
 *   3 send:    op ctl len:u16 rkey:u32 roff:u16 (ctl & 3: send, RDMA write,
 *              RDMA read; 0x4 immediate data)
 *   4 take:    op (B's packets are read and checked)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tfw.h"

/* The harness's own checks are not what the fuzzer should learn from. */
#define NO_COV __attribute__((no_sanitize("coverage")))

#define NSLOT 8
#define RBUF (128u << 10)  /* receive buffer per slot */
#define SBUF (128u << 10)  /* send / RDMA-read buffer per slot */
#define IDX_READ 6u        /* a region with RDMA read enabled: F.mem's spare part */
#define MAX_READS 64

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz_wire: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

/* A paced NIC whose stages take nanoseconds: the paced receive path
 * (rx_due, the scheduler, read responses' arrival times) runs, and what it
 * holds is due before the input ends. */
static const struct via_profile quick_paced = {
    .name = "quick", .paced = 1, .hw_doorbell = 1, .lanai_mhz = 1000, .bell_ns = 1,
    .desc_ns = 2, .data_ns = 2, .xmit_ns = 1, .recv_ns = 1, .updt_ns = 1, .dma_h2n_start_ns = 1,
    .dma_n2h_start_ns = 1,
    .h2n_ns_per_byte = 0.001, .n2h_ns_per_byte = 0.001, .link_ns_per_byte = 0.001,
    .switch_ns = 5, .wire_header = 16, .sram_bytes = 1 << 20};

static uint8_t *shadow_mem, *shadow_other, *shadow_rdma, *shadow_victim;
static uint8_t *may_write; /* one byte per byte of F.mem: the NIC may write it */
static uint32_t mh_read;
static bool b_rdma_write, b_rdma_read;
static bool rslot_busy[NSLOT], sslot_busy[NSLOT];
static unsigned rnext, snext;

/* Read requests the peer made: what a response may carry. */
struct read_req {
    uint32_t seq, rkey, len;
    uint64_t raddr;
};
static struct read_req reads[MAX_READS];
static unsigned nreads;

static uint32_t rd16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(const uint8_t *p)
{
    return rd16(p) | rd16(p + 2) << 16;
}

static void allow(const void *p, size_t n)
{
    size_t off = (size_t)((const uint8_t *)p - F.mem);
    CHECK(off < MEM_LEN && n <= MEM_LEN - off);
    memset(may_write + off, 1, n);
}

/* ---- the peer NIC ----------------------------------------------------------------- */

static uint64_t region_base(unsigned target, uint32_t *rkey)
{
    switch (target) {
    case 0: *rkey = F.mh_rdma; return (uint64_t)(uintptr_t)F.rdma;
    case 1: *rkey = F.mh_other; return (uint64_t)(uintptr_t)F.other;
    case 2: *rkey = F.mh_rdma; return (uint64_t)(uintptr_t)F.victim;
    case 3: *rkey = F.mh; return (uint64_t)(uintptr_t)F.mem;
    default: *rkey = mh_read; return (uint64_t)(uintptr_t)(F.mem + OFF_SPARE);
    }
}

static void take(void);

static size_t packet(const uint8_t *r, size_t left)
{
    if (left < 32)
        return left;
    uint8_t type = r[1], flags = r[2], target = r[3];
    struct via_wire_hdr h = {.version = (flags & 0x40) ? 1 : VIA_WIRE_VERSION,
                             .type = type % 8,
                             .flags = flags & 7,
                             .src_nic = 0,
                             .dst_nic = 0,
                             .dst_vi = (flags & 0x20) ? VI_A : VI_B,
                             .conn_id = (flags & 0x10) ? CONN_ID + 1 : CONN_ID,
                             .msg_seq = rd32(r + 4),
                             .msg_len = rd32(r + 8),
                             .frag_off = rd32(r + 12),
                             .frag_len = rd16(r + 16),
                             .imm = rd32(r + 20),
                             .ack_seq = rd32(r + 24)};
    uint32_t roff = rd16(r + 18), raw = rd32(r + 28);
    if (flags & 0x80) /* paced: the modelled arrival, up to 1 ms ahead */
        h.arrive_ns = nic_now_ns() + (uint64_t)roff * 16u;
    if (target < 5) {
        h.raddr = region_base(target, &h.rkey) + roff;
    } else {
        h.rkey = raw;
        h.raddr = (uint64_t)raw << 12 | roff;
    }
    size_t used = 32;
    const uint8_t *payload = r + 32;
    uint32_t have = left - used < h.frag_len ? (uint32_t)(left - used) : h.frag_len;
    used += have;

    struct via_chan_dir *d = &F.chan->dir[0];
    struct via_wire_hdr *w = fw_link_reserve(d, NULL, h.frag_len);
    if (!w) {
        /* The ring is full: B takes what it can first, as a real link waits. */
        progress(F.b);
        take();
        if (!(w = fw_link_reserve(d, NULL, h.frag_len)))
            return used;
    }
    memcpy(w + 1, payload, have);
    memset((uint8_t *)(w + 1) + have, 0, h.frag_len - have);
    *w = h;
    fw_link_publish(d, w);
    if (flags & 0x08)
        w->crc ^= 0x1u; /* a peer that rewrites what it published */
    if (h.type == VIA_PKT_RDMA_READ_REQ && nreads < MAX_READS)
        reads[nreads++] = (struct read_req){h.msg_seq, h.rkey, h.msg_len, h.raddr};
    return used;
}

/* What B sends back: each packet must be one a correct receiver accepts. */
static void take(void)
{
    struct via_chan_dir *d = &F.chan->dir[1];
    for (;;) {
        struct via_wire_hdr h;
        const uint8_t *payload;
        enum fw_link_peek_rc rc = fw_link_peek(d, &h, &payload);
        if (rc == FW_LINK_EMPTY)
            break;
        CHECK(rc == FW_LINK_PACKET);
        CHECK(h.dst_vi == VI_A && h.conn_id == CONN_ID);
        CHECK(h.frag_len <= VIA_MTU);
        if (h.type == VIA_PKT_RDMA_READ_RESP) {
            /* Some request of the peer's named exactly these bytes. */
            CHECK(b_rdma_read);
            uint64_t lo = (uint64_t)(uintptr_t)(F.mem + OFF_SPARE), hi = lo + SPARE_LEN;
            bool found = false;
            for (unsigned i = 0; i < nreads && !found; i++) {
                const struct read_req *q = &reads[i];
                found = q->seq == h.msg_seq && q->rkey == mh_read && q->raddr >= lo &&
                        q->raddr <= hi && q->len <= hi - q->raddr && h.msg_len == q->len &&
                        h.frag_off <= q->len && h.frag_len <= q->len - h.frag_off &&
                        memcmp(payload, (const void *)(uintptr_t)(q->raddr + h.frag_off),
                               h.frag_len) == 0;
            }
            CHECK(found);
        }
        fw_link_consume(d, &h);
    }
}

/* ---- B's host ------------------------------------------------------------------------ */

static size_t post_receive(const uint8_t *r, size_t left)
{
    if (left < 5)
        return left;
    unsigned segs = 1 + r[1] % 4, flags = r[4];
    uint32_t len = rd16(r + 2) * 2u % (RBUF / segs + 1);
    unsigned i = rnext++ % NSLOT;
    VIP_DESCRIPTOR *rd = at(OFF_RDESC + 256 * i);
    if (rslot_busy[i] && !(status_of(rd) & VIP_STATUS_DONE))
        return 5; /* still the NIC's */
    uint8_t *buf = F.mem + OFF_RDATA + i * RBUF;
    memset(&rd->CS, 0, sizeof rd->CS);
    rd->CS.SegCount = (uint16_t)segs;
    VIP_DATA_SEGMENT *seg = (VIP_DATA_SEGMENT *)&rd->DS[0];
    for (unsigned s = 0; s < segs; s++) {
        seg[s].Data.AddressBits = (uint64_t)(uintptr_t)(buf + s * len);
        seg[s].Handle = (flags & 1) && s == 0 ? F.mh_other : F.mh;
        seg[s].Length = len;
        allow(buf + s * len, len);
    }
    if ((flags & 2) && segs > 1)
        seg[segs - 1].Data.AddressBits = (uint64_t)(uintptr_t)F.victim;
    allow(rd, 256);
    rslot_busy[i] = true;
    post_recv(F.b, rd, F.mh);
    return 5;
}

static size_t post_send_b(const uint8_t *r, size_t left)
{
    if (left < 10)
        return left;
    unsigned ctl = r[1];
    uint32_t len = rd16(r + 2) * 2u % (SBUF + 1), rkey = rd32(r + 4), roff = rd16(r + 8);
    unsigned i = snext++ % NSLOT;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC + 256 * i);
    if (sslot_busy[i] && !(status_of(sd) & VIP_STATUS_DONE))
        return 10;
    uint8_t *buf = F.mem + OFF_SDATA + i * SBUF;
    memset(sd, 0, 256);
    unsigned op = ctl & 3;
    if (op == 3)
        op = VIP_CONTROL_OP_SENDRECV;
    sd->CS.Control = (uint16_t)(op | ((ctl & 4) ? VIP_CONTROL_IMMEDIATE : 0));
    sd->CS.ImmediateData = 0xC0DE0000u | i;
    VIP_DATA_SEGMENT *seg = (VIP_DATA_SEGMENT *)&sd->DS[0];
    unsigned n = 0;
    if (op != VIP_CONTROL_OP_SENDRECV) {
        VIP_ADDRESS_SEGMENT *as = (VIP_ADDRESS_SEGMENT *)&seg[n++];
        as->Data.AddressBits = 0x10000000ull + roff; /* the peer's memory */
        as->Handle = rkey;
    }
    seg[n].Data.AddressBits = (uint64_t)(uintptr_t)buf;
    seg[n].Handle = F.mh;
    seg[n].Length = len;
    n++;
    sd->CS.SegCount = (uint16_t)n;
    if (op == VIP_CONTROL_OP_RDMAREAD)
        allow(buf, len); /* the read's response lands here */
    allow(sd, 256);
    sslot_busy[i] = true;
    post_send(F.b, sd, F.mh);
    return 10;
}

/* ---- one input ---------------------------------------------------------------------------- */

/* The NIC, its CQ and the connected VIs A and B, anew for every input; the
 * fixture's memory is allocated once (LLVMFuzzerInitialize) and put back
 * as it was after each input (fresh allocations cost more than the run). */
static void begin(uint8_t config)
{
    static const uint32_t rels[3] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY,
                                     VIP_SERVICE_RELIABLE_RECEPTION};
    uint32_t rel = rels[config % 3];
    memset(F.ev, 0, sizeof *F.ev);
    memset(F.st, 0, sizeof *F.st);
    memset(F.np, 0, sizeof *F.np);
    if (config & 0x20)
        F.np->prof = quick_paced;
    memset(F.dba, 0, sizeof *F.dba);
    memset(F.dbb, 0, sizeof *F.dbb);
    for (int d = 0; d < 2; d++) {
        /* A channel is fresh memory (vipd makes one per connection): the
         * last input's packets, tagged for lap 1, must not be found again. */
        uint64_t used = atomic_load(&F.chan->dir[d].head);
        memset(F.chan->dir[d].ring, 0, used < VIA_CHAN_RING ? used + 64 : VIA_CHAN_RING);
        atomic_store(&F.chan->dir[d].head, 0);
        atomic_store(&F.chan->dir[d].tail, 0);
        atomic_store(&F.chan->dir[d].tx_waiting, 0);
    }
    atomic_store(&F.chan->state, VIA_CHAN_OPEN);
    F.chan->reliability = rel;
    memset(F.cq_ring, 0, sizeof *F.cq_ring);
    F.cq_ring->nslots = 4;
    struct nic_params np = {.nic_index = 0, .tpt = F.tpt, .ev = F.ev, .st = F.st, .np = F.np,
                            .own_thread = false};
    if (!(F.nic = nic_create(&np)))
        abort();
    F.cq = (config & 0x10) ? nic_cq_create(F.nic, F.cq_ring) : NULL;
    b_rdma_write = config & 0x04;
    /* vipd grants RDMA read only on the reliable levels. */
    b_rdma_read = (config & 0x08) && rel != VIP_SERVICE_UNRELIABLE;
    struct nic_vi_params pa = {.vi_id = VI_A, .ptag = PTAG_A, .reliability = rel,
                               .max_transfer = VIA_MAX_TRANSFER};
    struct nic_vi_params pb = {.vi_id = VI_B, .ptag = PTAG_A, .reliability = rel,
                               .max_transfer = VIA_MAX_TRANSFER, .rdma_write = b_rdma_write,
                               .rdma_read = b_rdma_read};
    F.a = nic_vi_create(F.nic, F.dba, &pa, F.cq, NULL);
    F.b = nic_vi_create(F.nic, F.dbb, &pb, NULL, F.cq);
    if (!F.a || !F.b)
        abort();
    nic_vi_connect(F.a, F.chan, 0, VI_B, F.ev, -1, -1);
    nic_vi_connect(F.b, F.chan, 1, VI_A, F.ev, -1, -1);
    memset(may_write, 0, MEM_LEN);
    memset(rslot_busy, 0, sizeof rslot_busy);
    memset(sslot_busy, 0, sizeof sslot_busy);
    rnext = snext = nreads = 0;
}

static void end(void)
{
    nic_vi_destroy(F.a);
    nic_vi_destroy(F.b);
    nic_cq_destroy(F.cq);
    nic_destroy(F.nic);
    F.a = F.b = NULL;
    F.cq = NULL;
    F.nic = NULL;
}

/* No byte changed that the NIC may not write (destroying the VIs flushed
 * their queues too); then the memory is put back. */
NO_COV static void check_memory(void)
{
    CHECK(memcmp(F.other, shadow_other, OTHER_LEN) == 0);
    CHECK(memcmp(F.victim, shadow_victim, VICTIM_LEN) == 0);
    if (!b_rdma_write)
        CHECK(memcmp(F.rdma, shadow_rdma, RDMA_LEN) == 0);
    for (size_t b = 0; b < MEM_LEN; b += 4096) {
        if (memcmp(F.mem + b, shadow_mem + b, 4096) == 0)
            continue;
        for (size_t i = b; i < b + 4096; i++)
            if (F.mem[i] != shadow_mem[i] && !may_write[i]) {
                fprintf(stderr, "fuzz_wire: the NIC wrote byte %zu of B's memory (0x%02x -> 0x%02x)\n",
                        i, shadow_mem[i], F.mem[i]);
                abort();
            }
        memcpy(F.mem + b, shadow_mem + b, 4096);
    }
    memcpy(F.rdma, shadow_rdma, RDMA_LEN);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* The fixture's memory and TPT; its NIC objects are made per input. */
    setup_opts(&(struct opts){.rel = VIP_SERVICE_RELIABLE_DELIVERY, .connect = true, .cq = true});
    nic_vi_destroy(F.a);
    nic_vi_destroy(F.b);
    nic_cq_destroy(F.cq);
    nic_destroy(F.nic);
    mh_read = reg(IDX_READ, 2, PTAG_A, F.mem + OFF_SPARE, SPARE_LEN, VIA_TPT_RDMA_READ);
    for (uint32_t i = 0; i < SPARE_LEN; i++)
        F.mem[OFF_SPARE + i] = (uint8_t)(i * 7 + 1);
    memset(F.other, 0xA5, OTHER_LEN);
    memset(F.rdma, 0x5A, RDMA_LEN);
    memset(F.victim, 0xC3, VICTIM_LEN);
    shadow_mem = malloc(MEM_LEN);
    shadow_other = malloc(OTHER_LEN);
    shadow_rdma = malloc(RDMA_LEN);
    shadow_victim = malloc(VICTIM_LEN);
    may_write = malloc(MEM_LEN);
    if (!shadow_mem || !shadow_other || !shadow_rdma || !shadow_victim || !may_write)
        abort();
    memcpy(shadow_mem, F.mem, MEM_LEN);
    memcpy(shadow_other, F.other, OTHER_LEN);
    memcpy(shadow_rdma, F.rdma, RDMA_LEN);
    memcpy(shadow_victim, F.victim, VICTIM_LEN);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    begin(data[0]);
    size_t pos = 1;
    while (pos < size) {
        const uint8_t *r = data + pos;
        size_t left = size - pos;
        switch (r[0] % 5) {
        case 0: pos += packet(r, left); break;
        case 1: pos += post_receive(r, left); break;
        case 2:
            for (unsigned n = 0; n <= r[left > 1 ? 1 : 0] % 4; n++)
                progress(F.b);
            pos += 2;
            break;
        case 3: pos += post_send_b(r, left); break;
        default:
            take();
            pos += 1;
            break;
        }
    }
    /* B finishes what it can; a paced NIC is given up to 2 ms of real time
     * for what it holds. */
    uint64_t until = nic_now_ns() + 2000000u;
    for (int n = 0; n < 4 || (nic_vi_progress(F.b, false) && nic_now_ns() < until); n++) {
        progress(F.b);
        take();
    }
    struct nic_error e;
    while (nic_vi_take_error(F.b, &e))
        ;
    end();
    check_memory();
    return 0;
}

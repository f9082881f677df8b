/*
 * test_fw_pipeline.c - unit tests of the NIC firmware's send and receive
 * stages (lanai-fw/) and of the host side of the short-message extensions
 * (extensions/ext_host.c), no vipd needed: doorbells, the NIC's VI table,
 * messages of every size and segmentation at each reliability level,
 * fragments, link backpressure, ACKs, the extensions' doorbell token kinds,
 * completion queues, and the paced (profiled) scheduling.
 *
 * The fixture (one in-memory NIC, two VIs on one channel) is tests/lib/tfw.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tfw.h"

/* ---- doorbell ------------------------------------------------------------------------- */

static void test_bell_take(void)
{
    struct via_db_queue *q = zalloc(64, sizeof *q);
    struct fw_wq *wq = calloc(1, sizeof *wq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wq);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 0);
    for (uint32_t i = 0; i < 10; i++)
        ring_raw(q, (void *)(uintptr_t)(0x1000 + 64 * i), i);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 10);
    CU_ASSERT_EQUAL(atomic_load(&q->cons), 10);
    CU_ASSERT_EQUAL(wq->tail - wq->head, 10);
    for (uint32_t i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL(wq->tok[i].desc_va, 0x1000 + 64 * i);
        CU_ASSERT_EQUAL(wq->tok[i].mem_handle, i);
    }
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 0);

    /* a host claiming more than the ring holds: bounded by the slots */
    atomic_store(&q->prod, atomic_load(&q->cons) + 1000);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), VIA_DB_SLOTS);
    CU_ASSERT_EQUAL(wq->tail - wq->head, 10 + VIA_DB_SLOTS);

    /* bounded by the NIC queue's space */
    atomic_store(&q->prod, atomic_load(&q->cons));
    wq->head = 0;
    wq->tail = VIA_QUEUE_DEPTH - 3;
    for (int i = 0; i < 10; i++)
        ring_raw(q, (void *)(uintptr_t)0x4000, 77);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 3);
    CU_ASSERT_EQUAL(wq->tail - wq->head, VIA_QUEUE_DEPTH);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 0);
    wq->head += 5;
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 5);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 0); /* full again */
    wq->head += 100;
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 2);
    CU_ASSERT_EQUAL(atomic_load(&q->cons), atomic_load(&q->prod));
    /* wrap of the free-running counters */
    atomic_store(&q->prod, UINT32_MAX - 1);
    atomic_store(&q->cons, UINT32_MAX - 1);
    wq->head = wq->tail = 0;
    for (int i = 0; i < 4; i++)
        ring_raw(q, (void *)(uintptr_t)(0x8000 + 64 * i), 1);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 4);
    CU_ASSERT_EQUAL(atomic_load(&q->cons), 2);
    CU_ASSERT_EQUAL(wq->tok[3].desc_va, 0x8000 + 64 * 3);
    free(q);
    free(wq);
}

/* ---- the NIC component ------------------------------------------------------------------ */

/* VIs live in the NIC's table, one per id. */
static void test_nic_vi_table(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 0);
    CU_ASSERT_FALSE(nic_paced(F.nic));
    CU_ASSERT_EQUAL(memcmp(nic_profile(F.nic), &F.np->prof, sizeof F.np->prof), 0);
    CU_ASSERT_PTR_EQUAL(F.nic->vis[VI_A], F.a);
    CU_ASSERT_PTR_EQUAL(F.nic->vis[VI_B], F.b);
    struct via_vi_page *db = zalloc(VIA_PAGE_SIZE, sizeof *db);
    struct nic_vi_params p = {.vi_id = VI_A, .ptag = PTAG_A,
                              .reliability = VIP_SERVICE_RELIABLE_DELIVERY, .max_transfer = 1000};
    CU_ASSERT_PTR_NULL(nic_vi_create(F.nic, db, &p, NULL, NULL)); /* id taken */
    CU_ASSERT_PTR_EQUAL(F.nic->vis[VI_A], F.a);
    p.vi_id = VIA_MAX_VI;
    CU_ASSERT_PTR_NULL(nic_vi_create(F.nic, db, &p, NULL, NULL));
    p.vi_id = 100;
    struct fw_vi *v = nic_vi_create(F.nic, db, &p, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_PTR_EQUAL(F.nic->vis[100], v);
    CU_ASSERT_EQUAL(v->max_transfer, 1000);
    CU_ASSERT_EQUAL(v->reliability, VIP_SERVICE_RELIABLE_DELIVERY);
    CU_ASSERT_FALSE(v->rdma_write);
    p.rdma_write = true;
    nic_vi_set_params(v, &p);
    CU_ASSERT_TRUE(v->rdma_write);
    CU_ASSERT_EQUAL(nic_vi_progress(v, true), 0); /* nothing to do, nothing held */
    nic_vi_destroy(v);
    CU_ASSERT_PTR_NULL(F.nic->vis[100]);
    free(db);
    teardown();
}

/* ---- send -> receive through the channel -------------------------------------------- */

static void run_xfers(uint32_t rel)
{
    setup(rel, 1);
    static const uint32_t sizes[] = {0,     1,     7,          63,         64,    65,
                                     4096,  16383, VIA_MTU,    VIA_MTU + 1, 40000, 100000,
                                     262144, 300001, VIA_MAX_TRANSFER};
    static const unsigned segs[][2] = {{1, 1}, {2, 1}, {1, 3}, {3, 5}, {16, 16}, {16, 1}};
    uint32_t seq = 1;
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (unsigned s = 0; s < sizeof segs / sizeof *segs; s++)
            xfer(sizes[i], segs[s][0], segs[s][1], (seq % 3) == 0, seq), seq++;
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.tx_msgs), seq - 1);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_msgs), seq - 1);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.desc_errors), 0);
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    if (rel == VIP_SERVICE_RELIABLE_RECEPTION)
        CU_ASSERT_EQUAL(F.a->comp.acked, seq - 1); /* every message acknowledged */
    teardown();
}

static void test_xfer_unreliable(void) { run_xfers(VIP_SERVICE_UNRELIABLE); }
static void test_xfer_reliable_delivery(void) { run_xfers(VIP_SERVICE_RELIABLE_DELIVERY); }
static void test_xfer_reliable_reception(void) { run_xfers(VIP_SERVICE_RELIABLE_RECEPTION); }

/* Both directions at once, many messages queued in the doorbell rings
 * before the NIC runs. */
static void test_xfer_queued_both_ways(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    enum { N = 40, LEN = 5000 };
    void *w[4 * N];
    for (unsigned i = 0; i < N; i++) {
        for (int side = 0; side < 2; side++) {
            uint32_t base = 4096u * 64 * (unsigned)side;
            VIP_DESCRIPTOR *sd = at(base + 128 * i), *rd = at(base + 128 * (N + i));
            uint8_t *sb = F.mem + (1u << 20) + (uint32_t)side * (512u << 10) + i * 2 * 6144u;
            uint8_t *rb = sb + 6144;
            tl_fill(sb, LEN, i * 2 + (uint32_t)side);
            tl_desc_1(sd, sb, LEN, F.mh);
            tl_desc_1(rd, rb, LEN, F.mh);
            ring_raw(side ? &F.dbb->sq : &F.dba->sq, sd, F.mh);
            ring_raw(side ? &F.dba->rq : &F.dbb->rq, rd, F.mh);
            w[4 * i + 2 * (unsigned)side] = sd;
            w[4 * i + 2 * (unsigned)side + 1] = rd;
        }
    }
    CU_ASSERT_EQUAL_FATAL(pump(w, 4 * N), 0);
    for (unsigned i = 0; i < 4 * N; i++)
        CU_ASSERT_EQUAL(status_of(w[i]) & VIP_STATUS_ERROR_MASK, 0);
    for (unsigned i = 0; i < N; i++)
        for (int side = 0; side < 2; side++) {
            uint8_t *rb = F.mem + (1u << 20) + (uint32_t)side * (512u << 10) + i * 2 * 6144u +
                          6144;
            CU_ASSERT_EQUAL(tl_verify(rb, LEN, i * 2 + (uint32_t)side), -1);
        }
    CU_ASSERT_EQUAL(F.a->comp.acked, N);
    CU_ASSERT_EQUAL(F.b->comp.acked, N);
    teardown();
}

/* Fragmentation: the wire carries MTU-sized SEND fragments, FIRST/LAST flagged. */
static void test_fragments(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    uint32_t len = 2 * VIA_MTU + 7000;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    tl_fill(F.mem + OFF_SDATA, len, 5);
    tl_desc_split(sd, F.mem + OFF_SDATA, len, 4, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT(status_of(sd) & VIP_STATUS_DONE);
    struct via_chan_dir *d = &F.chan->dir[0];
    uint32_t expect[] = {VIA_MTU, VIA_MTU, 7000}, off = 0;
    for (unsigned i = 0; i < 3; i++) {
        struct via_wire_hdr h;
        const uint8_t *pl;
        CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
        CU_ASSERT_EQUAL(h.type, VIA_PKT_SEND);
        CU_ASSERT_EQUAL(h.frag_len, expect[i]);
        CU_ASSERT_EQUAL(h.frag_off, off);
        CU_ASSERT_EQUAL(h.msg_len, len);
        CU_ASSERT_EQUAL(h.msg_seq, 1);
        CU_ASSERT_EQUAL(h.dst_vi, VI_B);
        CU_ASSERT_EQUAL(h.conn_id, CONN_ID);
        CU_ASSERT_EQUAL(h.rkey, 0);
        CU_ASSERT_EQUAL(h.raddr, 0);
        CU_ASSERT_EQUAL(!!(h.flags & VIA_PKT_FIRST), i == 0);
        CU_ASSERT_EQUAL(!!(h.flags & VIA_PKT_LAST), i == 2);
        CU_ASSERT_EQUAL(memcmp(pl, F.mem + OFF_SDATA + off, h.frag_len), 0);
        off += h.frag_len;
        fw_link_consume(d, &h);
    }
    struct via_wire_hdr h;
    const uint8_t *pl;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);
    teardown();
}

/* A message larger than the ring: the sender stalls, asks to be woken,
 * and the receiver's draining sets its arrival bit. */
static void test_link_backpressure(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_fill(F.mem + OFF_SDATA, VIA_MAX_TRANSFER, 77);
    tl_desc_1(sd, F.mem + OFF_SDATA, VIA_MAX_TRANSFER, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, VIA_MAX_TRANSFER, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* stalled */
    CU_ASSERT_EQUAL(F.a->req.state, FW_TX_XDATA);
    CU_ASSERT(F.a->req.msg.off > 0 && F.a->req.msg.off < VIA_MAX_TRANSFER);
    CU_ASSERT(atomic_load(&F.chan->dir[0].head) - atomic_load(&F.chan->dir[0].tail) <=
              VIA_CHAN_RING);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->dir[0].tx_waiting), 1);
    CU_ASSERT(atomic_load(&F.ev->arrived[0]) & (1ull << VI_B));
    atomic_store(&F.ev->arrived[0], 0);
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->dir[0].tx_waiting), 0);
    CU_ASSERT(atomic_load(&F.ev->arrived[0]) & (1ull << VI_A)); /* the sender is woken */
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump_nic(w, 2), 0);
    CU_ASSERT_EQUAL(rd->CS.Length, VIA_MAX_TRANSFER);
    CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA, VIA_MAX_TRANSFER, 77), -1);
    teardown();
}

/* Reliable reception: the send completes when the receiver's ACK comes back. */
static void test_reliable_reception_ack(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_fill(F.mem + OFF_SDATA, 1000, 3);
    tl_desc_1(sd, F.mem + OFF_SDATA, 1000, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 1000, F.mh);
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* on the wire, not yet acknowledged */
    CU_ASSERT_EQUAL(F.a->req.state, FW_TX_UPDT);
    progress(F.a);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* no ACK: still waiting */
    progress(F.b);
    ERR_EXPECT(status_of(rd), 0);
    struct via_wire_hdr h;
    CU_ASSERT_TRUE_FATAL(look(1, &h));
    CU_ASSERT_EQUAL(h.type, VIA_PKT_ACK);
    CU_ASSERT_EQUAL(h.ack_seq, 1);
    CU_ASSERT_EQUAL(h.frag_len, 0);
    CU_ASSERT_EQUAL(h.dst_vi, VI_A);
    CU_ASSERT_EQUAL(h.conn_id, CONN_ID);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* the ACK is on its way */
    progress(F.a);
    CU_ASSERT_EQUAL(status_of(sd), VIP_STATUS_DONE);
    CU_ASSERT_EQUAL(F.a->comp.acked, 1);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->dir[1].tail), atomic_load(&F.chan->dir[1].head));
    teardown();
    /* unreliable and reliable delivery complete on transmit: no ACK is sent */
    static const uint32_t rels[] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY};
    for (unsigned i = 0; i < 2; i++) {
        setup(rels[i], 1);
        sd = at(OFF_SDESC);
        rd = at(OFF_RDESC);
        tl_desc_1(sd, F.mem + OFF_SDATA, 1000, F.mh);
        tl_desc_1(rd, F.mem + OFF_RDATA, 1000, F.mh);
        post_recv(F.b, rd, F.mh);
        post_send(F.a, sd, F.mh);
        CU_ASSERT_EQUAL(status_of(sd), VIP_STATUS_DONE);
        progress(F.b);
        ERR_EXPECT(status_of(rd), 0);
        CU_ASSERT_FALSE(look(1, &h));
        teardown();
    }
}

/* ---- doorbell token kinds --------------------------------------------------------------- */

/* A merged descriptor at md carrying n bytes, naming next/next_mh as the
 * program's descriptor (where T6 writes the status). */
static void build_merged(VIP_DESCRIPTOR *md, uint64_t next, uint32_t next_mh, uint32_t n,
                         uint32_t seq)
{
    memset(md, 0, sizeof *md);
    md->CS.Next.AddressBits = next;
    md->CS.NextHandle = next_mh;
    md->CS.Control = VIP_CONTROL_OP_SENDRECV;
    md->CS.SegCount = n ? 1 : 0;
    md->CS.Length = n;
    md->DS[0].Local.Data.Address = (uint8_t *)md + sizeof *md;
    md->DS[0].Local.Handle = F.mh;
    md->DS[0].Local.Length = n;
    tl_fill((uint8_t *)md + sizeof *md, n, seq);
}

static struct via_db_token merged_token(const VIP_DESCRIPTOR *md, uint32_t mh, uint32_t n)
{
    return (struct via_db_token){(uint64_t)(uintptr_t)md, mh,
                                 VIA_DB_WORD2(VIA_DB_MERGED, 0, sizeof *md + n)};
}

static void ring_merged(struct fw_vi *vi, const VIP_DESCRIPTOR *md, uint32_t mh, uint32_t n)
{
    struct via_db_token t = merged_token(md, mh, n);
    nic_ring(vi, false, &t, FW_EXT_MERGED, n, nic_now_ns());
}

/* A merged token whose Next points outside the VI's registered memory (or
 * whose NextHandle is not the VI's) completes with PROTECTION_ERROR in the
 * merged descriptor itself, which passed the TPT, never through Next. */
static void test_merged_hostile_next(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *md = at(OFF_SPARE), *pd = at(OFF_SPARE + 4096);
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    uint8_t *rdata = F.mem + OFF_RDATA;
    const uint32_t n = 100;
    /* a sane one first: the status goes to the program's descriptor */
    build_merged(md, (uint64_t)(uintptr_t)pd, F.mh, n, 1);
    memset(pd, 0, sizeof *pd);
    tl_desc_1(rd, rdata, 4096, F.mh);
    post_recv(F.b, rd, F.mh);
    ring_merged(F.a, md, F.mh, n);
    void *w[] = {pd, rd};
    CU_ASSERT_EQUAL_FATAL(pump_nic(w, 2), 0);
    ERR_EXPECT(status_of(pd), 0);
    CU_ASSERT_EQUAL(status_of(md), 0);
    ERR_EXPECT(status_of(rd), 0);
    CU_ASSERT_EQUAL(rd->CS.Length, n);
    CU_ASSERT_EQUAL(tl_verify(rdata, n, 1), -1);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.tx_merged), 1);

    const struct {
        const char *what;
        uint64_t next;
        uint32_t mh;
    } cases[] = {
        {"Next in unregistered memory", (uint64_t)(uintptr_t)F.victim, F.mh},
        {"Next in another ptag's memory", (uint64_t)(uintptr_t)F.other, F.mh_other},
        {"Next in another ptag's memory, our handle", (uint64_t)(uintptr_t)F.other, F.mh},
        {"NextHandle of another ptag", (uint64_t)(uintptr_t)pd, F.mh_other},
        {"NextHandle naming nothing", (uint64_t)(uintptr_t)F.victim, 0x12345678u},
        {"NextHandle stale", (uint64_t)(uintptr_t)pd, VIA_MH_MAKE(2, IDX_MEM)},
        {"Next not word-aligned", (uint64_t)(uintptr_t)pd + 2, F.mh},
        {"Next NULL", 0, F.mh},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
        memset(F.victim, 0xAB, VICTIM_LEN);
        memset(F.other, 0xAB, 256);
        memset(pd, 0xAB, 2 * sizeof *pd);
        build_merged(md, cases[i].next, cases[i].mh, n, 2 + i);
        uint64_t head = ring_head(0), errs = atomic_load(&F.dba->cnt.desc_errors);
        ring_merged(F.a, md, F.mh, n);
        progress(F.b);
        uint32_t st = status_of(md);
        bool clean = first_not(F.victim, VICTIM_LEN, 0xAB) < 0 &&
                     first_not(F.other, 256, 0xAB) < 0 &&
                     first_not((const uint8_t *)pd, 2 * sizeof *pd, 0xAB) < 0;
        CU_ASSERT_EQUAL(st, VIP_STATUS_DONE | VIP_STATUS_OP_SEND | VIP_STATUS_PROTECTION_ERROR);
        CU_ASSERT_TRUE(clean);
        CU_ASSERT_EQUAL(ring_head(0), head); /* nothing sent */
        CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.desc_errors), errs + 1);
        if (!clean || st != (VIP_STATUS_DONE | VIP_STATUS_PROTECTION_ERROR))
            fprintf(stderr, "\n  merged token, %s: merged descriptor status 0x%x, %s\n",
                    cases[i].what, st, clean ? "nothing else written" : "WRITTEN THROUGH Next");
    }
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.tx_merged), 1);
    still_works(50);
    teardown();

    /* flushed (a VI in error, a VI not connected): nothing through Next either */
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    md = at(OFF_SPARE);
    VIP_DESCRIPTOR *bad = at(OFF_SDESC);
    tl_desc_1(bad, F.mem + OFF_SDATA, 10, 0x12345678u);
    build_merged(md, (uint64_t)(uintptr_t)F.victim, F.mh, n, 9);
    memset(F.victim, 0xAB, VICTIM_LEN);
    ring_raw(&F.dba->sq, bad, F.mh);
    ring_tok(&F.dba->sq, merged_token(md, F.mh, n));
    progress(F.a);
    ERR_EXPECT(status_of(bad), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(first_not(F.victim, VICTIM_LEN, 0xAB), -1);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.sq_done), 2);
    teardown();
    setup(VIP_SERVICE_UNRELIABLE, 0);
    md = at(OFF_SPARE);
    build_merged(md, (uint64_t)(uintptr_t)F.victim, F.mh, n, 10);
    memset(F.victim, 0xAB, VICTIM_LEN);
    ring_merged(F.a, md, F.mh, n);
    CU_ASSERT_EQUAL(first_not(F.victim, VICTIM_LEN, 0xAB), -1);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.sq_done), 1);
    teardown();
}

/* Merged tokens that are malformed in themselves. */
static void test_merged_malformed(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *md = at(OFF_SPARE), *pd = at(OFF_SPARE + 4096);
    const uint32_t n = 100;
    /* Length disagrees with the token */
    build_merged(md, (uint64_t)(uintptr_t)pd, F.mh, n, 1);
    md->CS.Length = n + 1;
    memset(pd, 0, sizeof *pd);
    ring_merged(F.a, md, F.mh, n);
    ERR_EXPECT(status_of(pd), VIP_STATUS_FORMAT_ERROR);
    /* an RDMA operation */
    build_merged(md, (uint64_t)(uintptr_t)pd, F.mh, n, 1);
    md->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
    memset(pd, 0, sizeof *pd);
    ring_merged(F.a, md, F.mh, n);
    ERR_EXPECT(status_of(pd), VIP_STATUS_FORMAT_ERROR);
    /* above the VI's MaxTransferSize */
    set_vi(F.a, PTAG_A, 50, false);
    build_merged(md, (uint64_t)(uintptr_t)pd, F.mh, n, 1);
    memset(pd, 0, sizeof *pd);
    ring_merged(F.a, md, F.mh, n);
    ERR_EXPECT(status_of(pd), VIP_STATUS_LENGTH_ERROR);
    set_vi(F.a, PTAG_A, VIA_MAX_TRANSFER, false);
    /* the data runs past the region the token names: the merged descriptor
     * (its control segment is in registered memory) takes the error */
    VIP_DESCRIPTOR *end = at(MEM_LEN - 128);
    build_merged(end, (uint64_t)(uintptr_t)pd, F.mh, 64, 1);
    memset(pd, 0, sizeof *pd);
    struct via_db_token t = merged_token(end, F.mh, 4096);
    nic_ring(F.a, false, &t, FW_EXT_MERGED, 4096, nic_now_ns());
    CU_ASSERT_EQUAL(status_of(pd), 0);
    ERR_EXPECT(status_of(end), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(ring_head(0), 0);
    /* an unknown token kind: nowhere checked to write to */
    struct via_db_token u = std_token(pd, F.mh);
    u.word2 = VIA_DB_WORD2(VIA_DB_NKINDS, 0, 0);
    memset(pd, 0, sizeof *pd);
    nic_ring(F.a, false, &u, FW_EXT_STANDARD, 0, nic_now_ns());
    CU_ASSERT_EQUAL(status_of(pd), 0);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.desc_errors), 5);
    still_works(1);
    teardown();
}

/* Tokens of the short kinds that are malformed AND name a descriptor outside
 * the VI's registered memory: whatever their error, nothing is written to
 * that address (it never passed the TPT). */
static void test_short_tokens_outside_memory(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    const struct {
        const char *what;
        uint32_t off;   /* in F.victim */
        uint32_t word2;
    } cases[] = {
        {"merged, descriptor unregistered", 0, VIA_DB_WORD2(VIA_DB_MERGED, 0, 64 + 100)},
        {"merged, unregistered and misaligned", 512 + 8,
         VIA_DB_WORD2(VIA_DB_MERGED, 0, 64 + 100)},
        {"merged, shorter than a descriptor", 1024, VIA_DB_WORD2(VIA_DB_MERGED, 0, 10)},
        {"descriptorless, unregistered", 1536, VIA_DB_WORD2(VIA_DB_DESCLESS, 0, 16)},
        {"descriptorless, slot out of range", 2048, VIA_DB_WORD2(VIA_DB_DESCLESS, 7, 16)},
        {"descriptorless, too long", 2560,
         VIA_DB_WORD2(VIA_DB_DESCLESS, 0, VIA_DESCLESS_MAX + 1)},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
        VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(void *)(F.victim + cases[i].off);
        memset(F.victim, 0xAB, VICTIM_LEN);
        build_merged(d, (uint64_t)(uintptr_t)at(OFF_SPARE), F.mh, 100, 1);
        uint8_t copy[VICTIM_LEN];
        memcpy(copy, F.victim, VICTIM_LEN);
        uint64_t errs = atomic_load(&F.dba->cnt.desc_errors);
        struct via_db_token t = {(uint64_t)(uintptr_t)d, F.mh, cases[i].word2};
        enum fw_ext_mode m = VIA_DB_KIND(cases[i].word2) == VIA_DB_MERGED ? FW_EXT_MERGED
                                                                          : FW_EXT_DESCLESS;
        if (m == FW_EXT_DESCLESS)
            atomic_store(&F.dba->descless_busy[0], 1);
        nic_ring(F.a, false, &t, m, 16, nic_now_ns());
        progress(F.b);
        bool same = memcmp(copy, F.victim, VICTIM_LEN) == 0;
        CU_ASSERT_TRUE(same);
        CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.desc_errors), errs + 1);
        CU_ASSERT_EQUAL(ring_head(0), 0);
        if (!same)
            fprintf(stderr, "\n  %s token: unregistered memory written (status 0x%x)\n",
                    cases[i].what, status_of(d));
    }
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    teardown();
}

/* ---- host side of the extensions (ext_host.c) -------------------------------------------- */

/* Descriptorless: a slot the NIC has not sent from yet is never refilled;
 * the send falls back to a standard token instead. On a reliable-reception
 * VI the slot of a message stays busy until its ACK. */
static void test_ext_descless_busy_slot(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    enum { N = 8, LEN = 200 };
    struct ext_vi e = {.mode = FW_EXT_DESCLESS, .max = VIA_DESCLESS_MAX};
    struct ext_send_ctx c = {F.a, F.dba, VIA_MAX_TRANSFER};
    VIP_DESCRIPTOR *sd[N + 1], *rd[N + 1];
    void *w[2 * (N + 1)];
    enum fw_ext_mode mode[N + 1];
    for (unsigned i = 0; i <= N; i++) {
        rd[i] = at(OFF_RDESC + 64 * i);
        tl_desc_1(rd[i], F.mem + OFF_RDATA + 4096 * i, 4096, F.mh);
        post_recv(F.b, rd[i], F.mh);
    }
    for (unsigned i = 0; i < N; i++) {
        uint8_t *buf = F.mem + OFF_SDATA + 4096 * i;
        sd[i] = at(OFF_SDESC + 64 * i);
        tl_fill(buf, LEN, 100 + i);
        tl_desc_1(sd[i], buf, LEN, F.mh);
        struct via_db_token t;
        uint32_t bytes = 0;
        mode[i] = ext_prepare_send(&e, &c, sd[i], F.mh, &t, &bytes);
        CU_ASSERT_EQUAL(bytes, LEN);
        nic_ring(F.a, false, &t, mode[i], bytes, nic_now_ns());
        w[2 * i] = sd[i];
        w[2 * i + 1] = rd[i];
    }
    for (unsigned i = 0; i < N; i++)
        CU_ASSERT_EQUAL(mode[i], i < VIA_DESCLESS_NSLOTS ? FW_EXT_DESCLESS : FW_EXT_STANDARD);
    CU_ASSERT_EQUAL_FATAL(pump_nic(w, 2 * N), 0);
    for (unsigned i = 0; i < N; i++) {
        ERR_EXPECT(status_of(sd[i]), 0);
        ERR_EXPECT(status_of(rd[i]), 0);
        CU_ASSERT_EQUAL(rd[i]->CS.Length, LEN);
        long bad = tl_verify(F.mem + OFF_RDATA + 4096 * i, LEN, 100 + i);
        CU_ASSERT_EQUAL(bad, -1);
        if (bad >= 0)
            fprintf(stderr, "\n  message %u (sent %s) arrived corrupted at byte %ld\n", i,
                    fw_ext_mode_name[mode[i]], bad);
    }
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.tx_descless), VIA_DESCLESS_NSLOTS);
    for (unsigned s = 0; s < VIA_DESCLESS_NSLOTS; s++)
        CU_ASSERT_EQUAL(atomic_load(&F.dba->descless_busy[s]), 0);
    /* all sent: the slots are free again */
    uint8_t *buf = F.mem + OFF_SDATA + 4096 * N;
    sd[N] = at(OFF_SDESC + 64 * N);
    tl_fill(buf, LEN, 100 + N);
    tl_desc_1(sd[N], buf, LEN, F.mh);
    struct via_db_token t;
    uint32_t bytes = 0;
    mode[N] = ext_prepare_send(&e, &c, sd[N], F.mh, &t, &bytes);
    CU_ASSERT_EQUAL(mode[N], FW_EXT_DESCLESS);
    nic_ring(F.a, false, &t, mode[N], bytes, nic_now_ns());
    void *w2[] = {sd[N], rd[N]};
    CU_ASSERT_EQUAL_FATAL(pump_nic(w2, 2), 0);
    CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA + 4096 * N, LEN, 100 + N), -1);
    teardown();
}

/* Merged: the library's staging slot carries descriptor and data; the
 * status goes to the program's descriptor, immediate data included. */
static void test_ext_merged_delivers(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    size_t sz = ext_merged_bytes();
    uint8_t *stg = zalloc(4096, sz);
    uint32_t mh_stg = reg(IDX_STAGING, 1, PTAG_A, stg, sz, 0);
    struct ext_vi e = {.mode = FW_EXT_MERGED, .max = 1024};
    CU_ASSERT_EQUAL_FATAL(ext_merged_attach(&e, stg, mh_stg), 0);
    struct ext_send_ctx c = {F.a, F.dba, VIA_MAX_TRANSFER};
    static const uint32_t sizes[] = {0, 1, 100, 1024, 1025};
    unsigned fast = 0;
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint32_t n = sizes[i], seq = 200 + i;
        VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
        uint8_t *rdata = F.mem + OFF_RDATA;
        tl_fill(F.mem + OFF_SDATA, n, seq);
        tl_desc_1(sd, F.mem + OFF_SDATA, n, F.mh);
        if (i % 2) {
            sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
            sd->CS.ImmediateData = 0xFEED0000u + i;
        }
        tl_desc_1(rd, rdata, 4096, F.mh);
        post_recv(F.b, rd, F.mh);
        struct via_db_token t;
        uint32_t bytes = 0;
        atomic_fetch_add(&F.dba->cnt.sq_posted, 1); /* as the library counts */
        enum fw_ext_mode m = ext_prepare_send(&e, &c, sd, F.mh, &t, &bytes);
        CU_ASSERT_EQUAL(m, n <= 1024 ? FW_EXT_MERGED : FW_EXT_STANDARD);
        fast += m == FW_EXT_MERGED;
        nic_ring(F.a, false, &t, m, bytes, nic_now_ns());
        void *w[] = {sd, rd};
        CU_ASSERT_EQUAL_FATAL(pump_nic(w, 2), 0);
        uint32_t ss = status_of(sd), rs = status_of(rd);
        ERR_EXPECT(ss, 0);
        ERR_EXPECT(rs, 0);
        CU_ASSERT_EQUAL(!!(ss & VIP_STATUS_IMMEDIATE), i % 2);
        CU_ASSERT_EQUAL(!!(rs & VIP_STATUS_IMMEDIATE), i % 2);
        if (i % 2)
            CU_ASSERT_EQUAL(rd->CS.ImmediateData, 0xFEED0000u + i);
        CU_ASSERT_EQUAL(rd->CS.Length, n);
        CU_ASSERT_EQUAL(tl_verify(rdata, n, seq), -1);
    }
    CU_ASSERT_EQUAL(atomic_load(&F.dba->cnt.tx_merged), fast);
    CU_ASSERT_EQUAL(fast, 4);
    VIP_MEM_HANDLE mh = 0;
    CU_ASSERT_PTR_EQUAL(ext_merged_detach(&e, &mh), stg);
    CU_ASSERT_EQUAL(mh, mh_stg);
    teardown();
    free(stg);
}

/* ---- completion queue ---------------------------------------------------------------- */

/* Completions of both queues are appended in order; a full ring records an
 * overflow and overwrites nothing. */
static void test_cq_post(void)
{
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .connect = true, .cq = true});
    struct via_cq_ring *r = F.cq_ring;
    CU_ASSERT_EQUAL(nic_cq_slots(F.cq), 4);
    for (uint32_t i = 0; i < 2; i++)
        xfer(100, 1, 1, 0, i + 1);
    CU_ASSERT_EQUAL(atomic_load(&r->tail), 4);
    for (unsigned i = 0; i < 4; i++) {
        /* per message: send completes (A, send) before receive (B, recv) */
        CU_ASSERT_EQUAL(r->e[i].vi_id, i % 2 ? VI_B : VI_A);
        CU_ASSERT_EQUAL(r->e[i].is_recv, i % 2);
        CU_ASSERT_EQUAL(r->e[i].vi_gen, nic_vi_gen(i % 2 ? F.b : F.a));
    }
    CU_ASSERT_NOT_EQUAL(nic_vi_gen(F.a), nic_vi_gen(F.b)); /* incarnations differ */
    CU_ASSERT_FALSE(nic_cq_overflowed(F.cq));
    xfer(100, 1, 1, 0, 3); /* full: overflow recorded, nothing overwritten */
    CU_ASSERT_TRUE(nic_cq_overflowed(F.cq));
    CU_ASSERT_EQUAL(atomic_load(&r->tail), 4);
    for (unsigned i = 0; i < 4; i++) {
        uint32_t id = 0;
        uint16_t gen = 0;
        bool recv = false;
        CU_ASSERT_TRUE(nic_cq_pop(F.cq, &id, &gen, &recv));
        CU_ASSERT_EQUAL(id, i % 2 ? VI_B : VI_A);
        CU_ASSERT_EQUAL(gen, nic_vi_gen(i % 2 ? F.b : F.a));
        CU_ASSERT_EQUAL(recv, i % 2);
    }
    uint32_t id;
    uint16_t gen;
    bool recv;
    CU_ASSERT_FALSE(nic_cq_pop(F.cq, &id, &gen, &recv));
    teardown();
}

/* ---- paced profiles ------------------------------------------------------------------- */

/* Held effects are per VI: the earliest one not yet due is remembered. */
static void test_release_due(void)
{
    struct via_profile prof = {.paced = 1, .hw_doorbell = 1};
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .prof = &prof});
    CU_ASSERT_TRUE(nic_paced(F.nic));
    uint64_t now = nic_now_ns();
    F.a->held = 0;
    F.b->held = 0;
    CU_ASSERT_TRUE(fw_release_due(F.a, now - 1));
    CU_ASSERT_EQUAL(F.a->held, 0);
    CU_ASSERT_FALSE(fw_release_due(F.a, now + 3000000000ull));
    CU_ASSERT_EQUAL(F.a->held, now + 3000000000ull);
    CU_ASSERT_FALSE(fw_release_due(F.a, now + 4000000000ull));
    CU_ASSERT_EQUAL(F.a->held, now + 3000000000ull);
    CU_ASSERT_FALSE(fw_release_due(F.a, now + 2000000000ull));
    CU_ASSERT_EQUAL(F.a->held, now + 2000000000ull);
    CU_ASSERT_TRUE(fw_release_due(F.a, now));
    CU_ASSERT_EQUAL(F.a->held, now + 2000000000ull);
    CU_ASSERT_EQUAL(F.b->held, 0);
    teardown();
}

/* The linear doorbell scan: a send's doorbell is found when the scan
 * reaches the VI's pair, not when it is rung. */
static void test_sched_doorbell_scan(void)
{
    struct via_profile prof = {.paced = 1, .hw_doorbell = 0, .poll_ns = 1000.0};
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .prof = &prof});
    struct via_nic_page *np = F.np;
    atomic_store(&F.st->scan_slots, 8);
    atomic_store(&F.st->nvis, 9); /* 7 of other processes besides our 2 */
    /* The busy times below stand for other VIs' claims: the NIC believes
     * them up to one largest transaction per other VI past its own claims
     * (this profile has no costs: 1 ms each, by hand), so they are near now
     * (a fixed time would be "far future" on a machine just booted). */
    F.nic->vi_worst_ns = 1000000;
    const uint64_t busy = nic_now_ns() + 100000, dur = 5000;
    /* rung while the LANai is busy: the loop restarts from the first pair */
    atomic_store(&np->lanai_busy_until, busy);
    uint64_t s = fw_sched_send(F.nic, 3, busy - 10, dur, false);
    CU_ASSERT_EQUAL(s, busy + 4 * 1000);
    CU_ASSERT_EQUAL(atomic_load(&np->lanai_busy_until), s + dur);
    atomic_store(&np->lanai_busy_until, busy);
    s = fw_sched_send(F.nic, 100, busy, dur, false); /* beyond the pairs scanned: the last */
    CU_ASSERT_EQUAL(s, busy + 7 * 1000);
    /* rung while idle: found within one round, at a random point of it */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned i = 0; i < 200; i++) {
        atomic_store(&np->lanai_busy_until, 0);
        uint64_t ring = busy + (uint64_t)i * 1000;
        s = fw_sched_send(F.nic, 3, ring, dur, false);
        CU_ASSERT(s >= ring && s < ring + 8 * 1000);
        uint64_t d = s - ring;
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    CU_ASSERT(hi > lo && hi - lo > 4000);
    if (!(hi > lo && hi - lo > 4000))
        fprintf(stderr, "\n  doorbell found %llu..%llu ns after the ring (a round is 8000)\n",
                (unsigned long long)lo, (unsigned long long)hi);
    /* the extension firmware polls each VI's third doorbell too: a pair's
     * step is longer, the command queue's is not */
    F.nic->prof_own.ext_poll_ns = 250.0;
    atomic_store(&np->lanai_busy_until, busy);
    s = fw_sched_send(F.nic, 3, busy - 10, dur, true);
    CU_ASSERT_EQUAL(s, busy + 4 * 1250);
    hi = 0;
    for (unsigned i = 0; i < 400; i++) {
        atomic_store(&np->lanai_busy_until, 0);
        uint64_t ring = busy + (uint64_t)i * 1000;
        s = fw_sched_send(F.nic, 3, ring, dur, true);
        CU_ASSERT(s >= ring && s < ring + 8 * 1000 + 7 * 250);
        hi = s - ring > hi ? s - ring : hi;
    }
    CU_ASSERT(hi > 8000); /* beyond the base firmware's round: the third doorbells */
    F.nic->prof_own.ext_poll_ns = 0;
    /* hardware doorbells: no scan */
    F.nic->prof_own.hw_doorbell = 1;
    atomic_store(&np->lanai_busy_until, 0);
    CU_ASSERT_EQUAL(fw_sched_send(F.nic, 3, busy, dur, false), busy);
    atomic_store(&np->lanai_busy_until, busy + 500);
    CU_ASSERT_EQUAL(fw_sched_send(F.nic, 3, busy, dur, false), busy + 500);
    teardown();
}

/* The receiving loop looks at the network once a step: a packet that
 * arrives while the LANai is idle is noticed within one step, at a random
 * point of it; one that arrived while it was busy, one step after. */
static void test_sched_packet_noticed(void)
{
    struct via_profile prof = {.paced = 1, .hw_doorbell = 0, .poll_ns = 1000.0};
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .prof = &prof});
    struct via_nic_page *np = F.np;
    F.nic->vi_worst_ns = 1000000; /* as above: other VIs' claims are believed */
    atomic_store(&F.st->nvis, 9);
    const uint64_t base = nic_now_ns() + 100000, dur = 5000;
    atomic_store(&np->lanai_busy_until, base);
    atomic_store(&np->nrecv_busy_until, 0);
    uint64_t s = fw_sched_recv(F.nic, base - 10, dur);
    CU_ASSERT_EQUAL(s, base + 1000);
    CU_ASSERT_EQUAL(atomic_load(&np->lanai_busy_until), s + dur);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned i = 0; i < 200; i++) {
        atomic_store(&np->lanai_busy_until, 0);
        atomic_store(&np->nrecv_busy_until, 0);
        uint64_t at = base + (uint64_t)i * 10000;
        s = fw_sched_recv(F.nic, at, dur);
        CU_ASSERT(s >= at && s < at + 1000);
        lo = s - at < lo ? s - at : lo;
        hi = s - at > hi ? s - at : hi;
    }
    CU_ASSERT(hi > lo && hi - lo > 500);
    /* hardware doorbells: the NIC is told of the packet, no loop to wait for */
    F.nic->prof_own.hw_doorbell = 1;
    atomic_store(&np->lanai_busy_until, 0);
    atomic_store(&np->nrecv_busy_until, 0);
    CU_ASSERT_EQUAL(fw_sched_recv(F.nic, base, dur), base);
    teardown();
}

/* A paced NIC never shows an effect before its modelled time, and held
 * effects are found again by nic_progress without help. */
static void test_paced_never_early(void)
{
    struct via_profile prof;
    char err[256] = "";
    if (fw_profile_load("sbus", tl_profile_dir(), &prof, err, sizeof err)) {
        fprintf(stderr, "\n  %s\n", err);
        CU_FAIL_FATAL("the sbus profile loads");
    }
    CU_ASSERT_FATAL(prof.paced != 0);
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .connect = true, .prof = &prof});
    for (uint32_t k = 0; k < 3; k++) {
        VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
        uint32_t len = k == 1 ? 40000 : 64;
        tl_fill(F.mem + OFF_SDATA, len, 300 + k);
        tl_desc_1(sd, F.mem + OFF_SDATA, len, F.mh);
        tl_desc_1(rd, F.mem + OFF_RDATA, len, F.mh);
        post_recv(F.b, rd, F.mh);
        uint64_t t0 = nic_now_ns();
        struct via_db_token t = std_token(sd, F.mh);
        uint64_t cost = nic_ring(F.a, false, &t, FW_EXT_STANDARD, len, t0);
        CU_ASSERT(cost > 0); /* Build + Ring are the host's */
        uint64_t held = nic_vi_progress(F.a, false);
        if (held) {
            CU_ASSERT_EQUAL(held, F.a->req.msg.release);
        } else {
            CU_ASSERT(status_of(sd) & VIP_STATUS_DONE);
        }
        uint64_t seen_sd = 0, seen_rd = 0, limit = t0 + 2000000000ull;
        while ((!seen_sd || !seen_rd) && nic_now_ns() < limit) {
            (void)nic_progress(F.nic, false);
            uint64_t now = nic_now_ns();
            if (!seen_sd && (status_of(sd) & VIP_STATUS_DONE))
                seen_sd = now;
            if (!seen_rd && (status_of(rd) & VIP_STATUS_DONE))
                seen_rd = now;
        }
        CU_ASSERT_FATAL(seen_sd && seen_rd);
        CU_ASSERT(F.a->req.msg.release > t0);
        CU_ASSERT(seen_sd >= F.a->req.msg.release);
        CU_ASSERT(seen_rd >= F.b->resp.release);
        CU_ASSERT(F.b->resp.release >= F.a->req.msg.span_start);
        ERR_EXPECT(status_of(sd), 0);
        ERR_EXPECT(status_of(rd), 0);
        CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA, len, 300 + k), -1);
    }
    teardown();
}

/* The NIC's own thread beside a host thread that runs a VI (its lock held,
 * host_in: a poll or a post's inline send, a long turn on a network link):
 * it dozes, leaving the VI to the host, instead of re-flagging the VI and
 * announcing its sleep over and over (a membarrier each time). Without the
 * host_in check it never dozes here: nobody bumps the poll counters. */
static void test_thread_dozes_beside_host(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    fw_lock(&F.a->lock);
    atomic_store(&F.a->host_in, true);
    fw_want_visit(F.a);
    F.nic->own_thread = true;
    fw_thread_start(F.nic);
    bool dozed = false;
    for (int i = 0; i < 5000 && !dozed; i++) { /* 5 s at most; at once when right */
        dozed = atomic_load(&F.nic->thread_state) == FW_THREAD_DOZE;
        if (!dozed)
            usleep(1000);
    }
    atomic_store(&F.a->host_in, false);
    fw_unlock(&F.a->lock);
    fw_thread_stop(F.nic);
    CU_ASSERT_TRUE(dozed);
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_bell_take),
        TL_TEST(test_nic_vi_table),
        TL_TEST(test_xfer_unreliable),
        TL_TEST(test_xfer_reliable_delivery),
        TL_TEST(test_xfer_reliable_reception),
        TL_TEST(test_xfer_queued_both_ways),
        TL_TEST(test_fragments),
        TL_TEST(test_link_backpressure),
        TL_TEST(test_reliable_reception_ack),
        TL_TEST(test_merged_hostile_next),
        TL_TEST(test_merged_malformed),
        TL_TEST(test_short_tokens_outside_memory),
        TL_TEST(test_ext_descless_busy_slot),
        TL_TEST(test_ext_merged_delivers),
        TL_TEST(test_cq_post),
        TL_TEST(test_release_due),
        TL_TEST(test_sched_doorbell_scan),
    TL_TEST(test_sched_packet_noticed),
        TL_TEST(test_paced_never_early),
        TL_TEST(test_thread_dozes_beside_host),
        TL_END,
    };
    return tl_main(argc, argv, "firmware pipeline", tests);
}

/*
 * test_fw.c - unit tests of the NIC firmware (lanai-fw/), no vipd needed.
 *
 * Two fw_vi's of one in-memory fw_nic are joined by a via_chan allocated
 * here; the test plays the host library (it rings doorbells and lends the
 * NIC its CPU by calling fw_tx_progress/fw_rx_progress) and the kernel
 * agent (it writes the TPT). hal_report_vi_error (libvipl) talks to a fake
 * session whose control socket is one end of a socketpair: replies are
 * queued beforehand, and the test reads the VI_ERROR requests it sent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fw.h"
#include "fw_link.h"
#include "lib/tlib.h"
#include "vipl_int.h"

#define PTAG_A 7u
#define PTAG_B 8u
#define MEM_LEN (3u << 20)
#define OFF_SDESC 0u
#define OFF_RDESC 4096u
#define OFF_SDATA 8192u
#define OFF_RDATA (8192u + (1u << 20) + 4096u)
#define IDX_MEM 1u
#define IDX_OTHER 2u
#define IDX_STALE 3u
#define N_REPLIES 8

static struct {
    struct via_tpt_entry *tpt;
    struct via_event_page *ev;
    struct via_status_page *st;
    struct fw_nic nic;
    struct vip_nic *host;
    int sp[2];
    struct via_vi_page *dba, *dbb;
    struct fw_vi *a, *b;
    struct via_chan *chan;
    uint8_t *mem, *other;
    uint32_t mh, mh_other;
} F;

static uint32_t reg(uint32_t idx, uint32_t gen, uint32_t ptag, void *p, uint64_t len)
{
    struct via_tpt_entry *e = &F.tpt[idx];
    e->ptag = ptag;
    e->va = (uint64_t)(uintptr_t)p;
    e->len = len;
    e->flags = 0;
    atomic_store(&e->gen, gen);
    return VIA_MH_MAKE(gen, idx);
}

static struct fw_vi *mkvi(uint32_t id, struct via_vi_page **dbp, uint32_t rel)
{
    struct via_vi_page *db = aligned_alloc(VIA_PAGE_SIZE, sizeof *db);
    struct fw_vi *vi = calloc(1, sizeof *vi);
    if (!db || !vi)
        abort();
    memset(db, 0, sizeof *db);
    fw_vi_init(vi, &F.nic, id, db);
    vi->ptag = PTAG_A;
    vi->reliability = rel;
    vi->max_transfer = VIA_MAX_TRANSFER;
    *dbp = db;
    return vi;
}

/* Build the NIC, two VIs of reliability `rel`, connected when `connect`. */
static void setup(uint32_t rel, int connect)
{
    memset(&F, 0, sizeof F);
    F.tpt = calloc(VIA_MAX_TPT, sizeof *F.tpt);
    F.ev = aligned_alloc(VIA_PAGE_SIZE, sizeof *F.ev);
    F.st = aligned_alloc(VIA_PAGE_SIZE, sizeof *F.st);
    F.host = calloc(1, sizeof *F.host);
    F.chan = aligned_alloc(64, sizeof *F.chan);
    F.mem = aligned_alloc(4096, MEM_LEN);
    F.other = aligned_alloc(4096, 65536);
    if (!F.tpt || !F.ev || !F.st || !F.host || !F.chan || !F.mem || !F.other)
        abort();
    memset(F.ev, 0, sizeof *F.ev);
    memset(F.st, 0, sizeof *F.st);
    memset(F.chan, 0, sizeof *F.chan);
    memset(F.mem, 0, MEM_LEN);
    memset(F.other, 0, 65536);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, F.sp) < 0)
        abort();
    /* Replies for the VI_ERROR requests the NIC may send. */
    for (int i = 0; i < N_REPLIES; i++) {
        struct via_ctl_reply_hdr r = {.status = VIP_SUCCESS};
        if (write(F.sp[1], &r, sizeof r) != (ssize_t)sizeof r)
            abort();
    }
    F.host->magic = VIPL_MAGIC_NIC;
    F.host->sock = F.sp[0];
    pthread_mutex_init(&F.host->ctl_lock, NULL);
    pthread_mutex_init(&F.host->lock, NULL);
    F.nic = (struct fw_nic){.nic_index = 0, .tpt = F.tpt, .ev = F.ev, .st = F.st,
                            .host = F.host};
    F.mh = reg(IDX_MEM, 1, PTAG_A, F.mem, MEM_LEN);
    F.mh_other = reg(IDX_OTHER, 5, PTAG_B, F.other, 65536);
    F.a = mkvi(3, &F.dba, rel);
    F.b = mkvi(9, &F.dbb, rel);
    F.chan->magic = VIA_CHAN_MAGIC;
    F.chan->conn_id = 42;
    F.chan->reliability = rel;
    F.chan->vi_id[0] = 3;
    F.chan->vi_id[1] = 9;
    if (connect) {
        fw_vi_connect(F.a, F.chan, 0, 9, F.ev);
        fw_vi_connect(F.b, F.chan, 1, 3, F.ev);
    }
}

static void teardown(void)
{
    close(F.sp[0]);
    close(F.sp[1]);
    pthread_mutex_destroy(&F.host->ctl_lock);
    pthread_mutex_destroy(&F.host->lock);
    free(F.tpt);
    free(F.ev);
    free(F.st);
    free(F.host);
    free(F.chan);
    free(F.mem);
    free(F.other);
    free(F.dba);
    free(F.dbb);
    free(F.a);
    free(F.b);
}

/* The next VI_ERROR request the NIC sent: 1 and its vi/code, or 0. */
static int reported(uint32_t *vi, uint32_t *code)
{
    struct {
        struct via_ctl_hdr h;
        struct via_ctl_vi_error e;
    } m;
    ssize_t n = recv(F.sp[1], &m, sizeof m, MSG_DONTWAIT);
    if (n != (ssize_t)sizeof m || m.h.op != VIA_CTL_VI_ERROR)
        return 0;
    *vi = m.e.vi_id;
    *code = m.e.code;
    return 1;
}

static void ring(struct via_db_queue *q, const void *desc, uint32_t mh)
{
    uint32_t prod = atomic_load(&q->prod);
    q->tok[prod % VIA_DB_SLOTS] =
        (struct via_db_token){(uint64_t)(uintptr_t)desc, mh, VIA_DB_WORD2(VIA_DB_DESC, 0, 0)};
    atomic_store(&q->prod, prod + 1);
}

static uint32_t status_of(const void *desc)
{
    return __atomic_load_n(&((const VIP_DESCRIPTOR *)desc)->CS.Status, __ATOMIC_ACQUIRE);
}

/* Let both NICs run until every descriptor in `wait` is DONE (bounded). */
static int pump(void *const *wait, unsigned n)
{
    for (unsigned it = 0; it < 100000; it++) {
        fw_tx_progress(F.a);
        fw_rx_progress(F.b);
        fw_tx_progress(F.b);
        fw_rx_progress(F.a);
        unsigned done = 0;
        for (unsigned i = 0; i < n; i++)
            done += (status_of(wait[i]) & VIP_STATUS_DONE) != 0;
        if (done == n)
            return 0;
    }
    return -1;
}

static VIP_DESCRIPTOR *at(uint32_t off)
{
    return (VIP_DESCRIPTOR *)(void *)(F.mem + off);
}

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
    F.a->ptag = PTAG_B;
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh_other, (uint64_t)(uintptr_t)F.other, 1), 0);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base, 1), VIP_STATUS_PROTECTION_ERROR);
    F.a->ptag = PTAG_A;
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
    /* invalidated entry (deregistered: vipd bumps the generation) */
    atomic_store(&F.tpt[IDX_MEM].gen, 2);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, F.mh, base, 1), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(fw_tpt_check(F.a, VIA_MH_MAKE(2, IDX_MEM), base, 1), 0);
    teardown();
}

/* ---- link ring ------------------------------------------------------------------------ */

static struct via_wire_hdr *put(struct via_chan_dir *d, uint32_t payload, uint32_t seq)
{
    struct via_wire_hdr *h = fw_link_reserve(d, payload);
    if (!h)
        return NULL;
    memset(h + 1, (int)(seq & 0xFF), payload);
    *h = (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = VIA_PKT_DATA,
                               .flags = VIA_PKT_FIRST | VIA_PKT_LAST, .dst_vi = 1,
                               .conn_id = 5, .msg_seq = seq, .msg_len = payload,
                               .frag_len = payload};
    fw_link_publish(d, h);
    return h;
}

static void test_link_ring(void)
{
    struct via_chan_dir *d = aligned_alloc(64, sizeof *d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    memset(d, 0, sizeof *d);
    uint64_t tail;
    int bad;
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 0);

    /* reserve/publish/peek/consume, sizes rounded to 64 */
    uint32_t sizes[] = {0, 1, 63, 64, 65, 1000, VIA_MTU};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t h0 = atomic_load(&d->head);
        CU_ASSERT_PTR_NOT_NULL(put(d, sizes[i], i + 1));
        CU_ASSERT_EQUAL(atomic_load(&d->head) - h0, 64 + ((sizes[i] + 63) & ~63u));
        const struct via_wire_hdr *h = fw_link_peek(d, &tail, &bad);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(h->msg_seq, i + 1);
        CU_ASSERT_EQUAL(h->frag_len, sizes[i]);
        CU_ASSERT_EQUAL(tail, atomic_load(&d->tail));
        if (sizes[i])
            CU_ASSERT(fw_link_payload(h)[sizes[i] - 1] == (uint8_t)(i + 1));
        fw_link_consume(d, h);
        CU_ASSERT_EQUAL(atomic_load(&d->tail), atomic_load(&d->head));
    }

    /* PAD at the wrap: fill up to near the end with MTU packets */
    uint32_t pkt = 64 + VIA_MTU;
    while ((atomic_load(&d->head) % VIA_CHAN_RING) + pkt <= VIA_CHAN_RING) {
        CU_ASSERT_PTR_NOT_NULL_FATAL(put(d, VIA_MTU, 100));
        const struct via_wire_hdr *h = fw_link_peek(d, &tail, &bad);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        fw_link_consume(d, h);
    }
    uint32_t to_end = VIA_CHAN_RING - (uint32_t)(atomic_load(&d->head) % VIA_CHAN_RING);
    CU_ASSERT(to_end < pkt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(put(d, VIA_MTU, 200));
    const struct via_wire_hdr *h = fw_link_peek(d, &tail, &bad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(h->type, VIA_PKT_PAD);
    CU_ASSERT_EQUAL(h->frag_len + 64u, to_end);
    fw_link_consume(d, h);
    CU_ASSERT_EQUAL(atomic_load(&d->tail) % VIA_CHAN_RING, 0);
    h = fw_link_peek(d, &tail, &bad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(h->type, VIA_PKT_DATA);
    CU_ASSERT_EQUAL(h->msg_seq, 200);
    CU_ASSERT_EQUAL((const uint8_t *)h, d->ring);
    fw_link_consume(d, h);

    /* full ring: reserve fails with NULL, nothing is overwritten */
    memset(d, 0, sizeof *d);
    unsigned n = 0;
    while (put(d, 4096 - 64, 1000 + n) && n < 1000)
        n++;
    CU_ASSERT_EQUAL(n, VIA_CHAN_RING / 4096);
    CU_ASSERT_EQUAL(atomic_load(&d->head) - atomic_load(&d->tail), VIA_CHAN_RING);
    CU_ASSERT_PTR_NULL(fw_link_reserve(d, 0));
    /* drain one, then there is room for one again */
    h = fw_link_peek(d, &tail, &bad);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(h->msg_seq, 1000);
    fw_link_consume(d, h);
    CU_ASSERT_PTR_NOT_NULL(put(d, 4096 - 64, 5000));
    CU_ASSERT_PTR_NULL(fw_link_reserve(d, 0));
    for (unsigned i = 1; i <= n; i++) {
        h = fw_link_peek(d, &tail, &bad);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        CU_ASSERT_EQUAL(h->msg_seq, i < n ? 1000 + i : 5000);
        fw_link_consume(d, h);
    }
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 0);

    /* a corrupted header is flagged bad and not consumed */
    struct via_wire_hdr *w = put(d, 128, 7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    w->msg_len = 99999;
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 1);
    w->msg_len = 128; /* restored: valid again */
    CU_ASSERT_PTR_NOT_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 0);
    w->version = 9;
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 1);
    w->version = VIA_WIRE_VERSION;
    /* a valid crc over an impossible length is still refused */
    w->frag_len = VIA_MTU + 64;
    w->crc = via_wire_check(w);
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 1);
    /* unknown type */
    w->frag_len = 128;
    w->type = 77;
    w->crc = via_wire_check(w);
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 1);
    /* a head beyond the ring size (lying sender) */
    w->type = VIA_PKT_DATA;
    w->crc = via_wire_check(w);
    uint64_t head = atomic_load(&d->head);
    atomic_store(&d->head, atomic_load(&d->tail) + VIA_CHAN_RING + 64);
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    CU_ASSERT_EQUAL(bad, 1);
    atomic_store(&d->head, head);
    CU_ASSERT_PTR_NOT_NULL(fw_link_peek(d, &tail, &bad));
    free(d);
}

/* ---- doorbell ------------------------------------------------------------------------- */

static void test_bell_take(void)
{
    struct via_db_queue *q = aligned_alloc(64, sizeof *q);
    struct fw_wq *wq = calloc(1, sizeof *wq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(wq);
    memset(q, 0, sizeof *q);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 0);
    for (uint32_t i = 0; i < 10; i++)
        ring(q, (void *)(uintptr_t)(0x1000 + 64 * i), i);
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
        ring(q, (void *)(uintptr_t)0x4000, 77);
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
        ring(q, (void *)(uintptr_t)(0x8000 + 64 * i), 1);
    CU_ASSERT_EQUAL(fw_bell_take(q, wq, NULL), 4);
    CU_ASSERT_EQUAL(atomic_load(&q->cons), 2);
    CU_ASSERT_EQUAL(wq->tok[3].desc_va, 0x8000 + 64 * 3);
    free(q);
    free(wq);
}

/* ---- send -> receive through the channel -------------------------------------------- */

/* Send `len` bytes in `ss` segments, receive in `rs` segments (buffer
 * len + slack), with or without immediate data; check everything. */
static void xfer(uint32_t len, unsigned ss, unsigned rs, int imm, uint32_t seq)
{
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    uint8_t *sdata = F.mem + OFF_SDATA, *rdata = F.mem + OFF_RDATA;
    uint32_t slack = len + 100 <= VIA_MAX_TRANSFER ? 100 : 0;
    tl_fill(sdata, len, seq);
    memset(rdata, 0xEE, len + slack + 64);
    tl_desc_split(sd, sdata, len, ss, F.mh);
    if (imm) {
        sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
        sd->CS.ImmediateData = 0xC0DE0000u + seq;
    }
    tl_desc_split(rd, rdata, len + slack, rs, F.mh);
    rd->CS.ImmediateData = 0;
    ring(&F.dbb->rq, rd, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
    uint32_t ss_ = status_of(sd), rs_ = status_of(rd);
    CU_ASSERT_EQUAL(ss_ & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(rs_ & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(ss_ & VIP_STATUS_OP_MASK, VIP_STATUS_OP_SEND);
    CU_ASSERT_EQUAL(rs_ & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
    CU_ASSERT_EQUAL(rd->CS.Length, len);
    CU_ASSERT_EQUAL(tl_verify(rdata, len, seq), -1);
    CU_ASSERT_EQUAL(rdata[len], 0xEE); /* not a byte more */
    if (imm) {
        CU_ASSERT(rs_ & VIP_STATUS_IMMEDIATE);
        CU_ASSERT_EQUAL(rd->CS.ImmediateData, 0xC0DE0000u + seq);
    } else {
        CU_ASSERT_EQUAL(rs_ & VIP_STATUS_IMMEDIATE, 0);
    }
    if (tl_verify(rdata, len, seq) != -1 || rd->CS.Length != len)
        fprintf(stderr, "\n  xfer len %u segs %u/%u imm %d failed (Length %u, status 0x%x)\n",
                len, ss, rs, imm, rd->CS.Length, rs_);
}

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
    uint32_t v, c;
    CU_ASSERT_FALSE(reported(&v, &c));
    teardown();
}

static void test_xfer_unreliable(void) { run_xfers(VIP_SERVICE_UNRELIABLE); }
static void test_xfer_reliable_delivery(void) { run_xfers(VIP_SERVICE_RELIABLE_DELIVERY); }
static void test_xfer_reliable_reception(void) { run_xfers(VIP_SERVICE_RELIABLE_RECEPTION); }

/* Both directions at once, many messages queued before the NIC runs. */
static void test_xfer_queued_both_ways(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
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
            ring(side ? &F.dbb->sq : &F.dba->sq, sd, F.mh);
            ring(side ? &F.dba->rq : &F.dbb->rq, rd, F.mh);
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
    teardown();
}

/* Fragmentation: the wire carries MTU-sized fragments, FIRST/LAST flagged. */
static void test_fragments(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    uint32_t len = 2 * VIA_MTU + 7000;
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    tl_fill(F.mem + OFF_SDATA, len, 5);
    tl_desc_split(sd, F.mem + OFF_SDATA, len, 4, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    fw_tx_progress(F.a);
    CU_ASSERT(status_of(sd) & VIP_STATUS_DONE);
    struct via_chan_dir *d = &F.chan->dir[0];
    uint32_t expect[] = {VIA_MTU, VIA_MTU, 7000}, off = 0;
    for (unsigned i = 0; i < 3; i++) {
        uint64_t tail;
        int bad;
        const struct via_wire_hdr *h = fw_link_peek(d, &tail, &bad);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        CU_ASSERT_EQUAL(h->type, VIA_PKT_DATA);
        CU_ASSERT_EQUAL(h->frag_len, expect[i]);
        CU_ASSERT_EQUAL(h->frag_off, off);
        CU_ASSERT_EQUAL(h->msg_len, len);
        CU_ASSERT_EQUAL(h->msg_seq, 1);
        CU_ASSERT_EQUAL(h->dst_vi, 9);
        CU_ASSERT_EQUAL(h->conn_id, 42);
        CU_ASSERT_EQUAL(!!(h->flags & VIA_PKT_FIRST), i == 0);
        CU_ASSERT_EQUAL(!!(h->flags & VIA_PKT_LAST), i == 2);
        CU_ASSERT_EQUAL(memcmp(fw_link_payload(h), F.mem + OFF_SDATA + off, h->frag_len), 0);
        off += h->frag_len;
        fw_link_consume(d, h);
    }
    uint64_t tail;
    int bad;
    CU_ASSERT_PTR_NULL(fw_link_peek(d, &tail, &bad));
    teardown();
}

/* A message larger than the ring: the sender blocks until the receiver
 * drains, and resumes. */
static void test_link_backpressure(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_fill(F.mem + OFF_SDATA, VIA_MAX_TRANSFER, 77);
    tl_desc_1(sd, F.mem + OFF_SDATA, VIA_MAX_TRANSFER, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, VIA_MAX_TRANSFER, F.mh);
    ring(&F.dbb->rq, rd, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    CU_ASSERT_TRUE(fw_tx_progress(F.a)); /* stalled: work remains */
    CU_ASSERT_EQUAL(status_of(sd), 0);
    CU_ASSERT(atomic_load(&F.chan->dir[0].head) - atomic_load(&F.chan->dir[0].tail) <=
              VIA_CHAN_RING);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->dir[0].tx_waiting), 1);
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
    CU_ASSERT_EQUAL(rd->CS.Length, VIA_MAX_TRANSFER);
    CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA, VIA_MAX_TRANSFER, 77), -1);
    teardown();
}

/* Reliable reception: the send completes only once the data is placed. */
static void test_reliable_reception_ack(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_fill(F.mem + OFF_SDATA, 1000, 3);
    tl_desc_1(sd, F.mem + OFF_SDATA, 1000, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 1000, F.mh);
    ring(&F.dbb->rq, rd, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    fw_tx_progress(F.a);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* on the wire, not yet acknowledged */
    fw_rx_progress(F.b);
    CU_ASSERT(status_of(rd) & VIP_STATUS_DONE);
    fw_tx_progress(F.a);
    CU_ASSERT_EQUAL(status_of(sd), VIP_STATUS_DONE);
    /* unreliable/reliable delivery complete on transmit */
    teardown();
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    sd = at(OFF_SDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 1000, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    fw_tx_progress(F.a);
    CU_ASSERT_EQUAL(status_of(sd), VIP_STATUS_DONE);
    teardown();
}

/* ---- bad descriptors ---------------------------------------------------------------- */

/* Post sd on A (and a good receive on B); return sd's status. */
static uint32_t send_bad(VIP_DESCRIPTOR *sd, uint32_t desc_mh)
{
    ring(&F.dba->sq, sd, desc_mh);
    fw_tx_progress(F.a);
    fw_rx_progress(F.b);
    return status_of(sd);
}

/* After an error on an unreliable VI, a good message still goes through. */
static void still_works(uint32_t seq)
{
    xfer(3000, 2, 2, 1, seq);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
}

#define ERR_EXPECT(st, bit)                                                                \
    do {                                                                                   \
        uint32_t st_ = (st);                                                               \
        CU_ASSERT(st_ & VIP_STATUS_DONE);                                                  \
        CU_ASSERT_EQUAL(st_ & VIP_STATUS_ERROR_MASK, (bit));                               \
        if ((st_ & VIP_STATUS_ERROR_MASK) != (bit))                                        \
            fprintf(stderr, "\n  line %d: status 0x%x, expected error 0x%x\n", __LINE__,   \
                    st_, (unsigned)(bit));                                                 \
    } while (0)

static void test_bad_descriptors_unreliable(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    uint8_t *data = F.mem + OFF_SDATA;
    uint32_t seq = 1;

    /* misaligned descriptor */
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
    uint32_t stale = reg(IDX_STALE, 1, PTAG_A, F.other, 4096);
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
    /* descriptor itself under a wrong handle / outside registered memory */
    tl_desc_1(sd, data, 10, F.mh);
    ERR_EXPECT(send_bad(sd, F.mh_other), VIP_STATUS_PROTECTION_ERROR);
    still_works(seq++);
    /* total length above the VI's MaxTransferSize */
    F.a->max_transfer = 1000;
    tl_desc_split(sd, data, 1001, 3, F.mh);
    ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_LENGTH_ERROR);
    tl_desc_split(sd, data, 1000, 3, F.mh);
    CU_ASSERT_EQUAL(send_bad(sd, F.mh) & VIP_STATUS_ERROR_MASK, 0);
    F.a->max_transfer = VIA_MAX_TRANSFER; /* (that message was dropped: no receive) */
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
    /* RDMA operations */
    static const uint16_t ops[] = {VIP_CONTROL_OP_RDMAWRITE, VIP_CONTROL_OP_RDMAREAD,
                                   VIP_CONTROL_OP_RESERVED};
    for (unsigned i = 0; i < 3; i++) {
        tl_desc_1(sd, data, 10, F.mh);
        sd->CS.Control = ops[i];
        ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_FORMAT_ERROR);
    }
    still_works(seq++);
    CU_ASSERT(atomic_load(&F.dba->cnt.desc_errors) >= 12);
    uint32_t v, c;
    CU_ASSERT_FALSE(reported(&v, &c)); /* unreliable: nobody is told */
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
    ring(&F.dbb->rq, rd, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
    ERR_EXPECT(status_of(rd), VIP_STATUS_LENGTH_ERROR);
    CU_ASSERT_EQUAL(status_of(rd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
    CU_ASSERT_EQUAL(status_of(sd) & VIP_STATUS_ERROR_MASK, 0);
    still_works(10);
    /* receive segment with a bad handle */
    tl_desc_1(sd, data, 100, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, 0x12345678u);
    ring(&F.dbb->rq, rd, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    CU_ASSERT_EQUAL_FATAL(pump(w, 2), 0);
    ERR_EXPECT(status_of(rd), VIP_STATUS_PROTECTION_ERROR);
    still_works(11);
    /* receive descriptor misaligned */
    VIP_DESCRIPTOR *mis = (VIP_DESCRIPTOR *)(void *)(F.mem + 200 * 4096 + 32);
    tl_desc_1(sd, data, 100, F.mh);
    tl_desc_1(mis, F.mem + OFF_RDATA, 100, F.mh);
    ring(&F.dbb->rq, mis, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    void *w2[] = {sd, mis};
    CU_ASSERT_EQUAL_FATAL(pump(w2, 2), 0);
    ERR_EXPECT(status_of(mis), VIP_STATUS_FORMAT_ERROR);
    still_works(12);
    /* no receive posted: dropped, VI stays connected */
    tl_desc_1(sd, data, 100, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    void *w3[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w3, 1), 0);
    fw_rx_progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 4);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
    still_works(13);
    uint32_t v, c;
    CU_ASSERT_FALSE(reported(&v, &c));
    teardown();
}

/* A VI that is not connected completes sends flushed. */
static void test_not_connected_flush(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 0);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 10, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 10, F.mh);
    ring(&F.dba->rq, rd, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    fw_tx_progress(F.a);
    ERR_EXPECT(status_of(sd), VIP_STATUS_DESC_FLUSHED_ERROR);
    fw_rx_progress(F.a);
    CU_ASSERT_EQUAL(status_of(rd), 0); /* receives wait for a connection */
    fw_vi_disconnect(F.a);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(status_of(rd) & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
    teardown();
}

/* Reliable: an error puts the VI in ERROR, flushes the rest, breaks the
 * channel, tells vipd, and the peer goes to error with its receives flushed. */
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
    ring(&F.dba->rq, ra, F.mh);
    ring(&F.dbb->rq, rb1, F.mh);
    ring(&F.dbb->rq, rb2, F.mh);
    ring(&F.dba->sq, bad, F.mh);
    ring(&F.dba->sq, next, F.mh);
    fw_tx_progress(F.a);
    ERR_EXPECT(status_of(bad), VIP_STATUS_PROTECTION_ERROR);
    ERR_EXPECT(status_of(next), VIP_STATUS_DESC_FLUSHED_ERROR);
    ERR_EXPECT(status_of(ra), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    CU_ASSERT_TRUE(F.a->err_pending);
    CU_ASSERT_EQUAL(F.a->err_code, VIP_ERROR_POST_DESC);
    CU_ASSERT_EQUAL(F.a->err_desc, (uint64_t)(uintptr_t)bad);
    uint32_t v = 0, c = 0;
    CU_ASSERT_TRUE(reported(&v, &c));
    CU_ASSERT_EQUAL(v, 3);
    CU_ASSERT_EQUAL(c, VIP_ERROR_POST_DESC);
    /* later posts on the VI in error complete flushed */
    VIP_DESCRIPTOR *later = at(OFF_SDESC + 1024);
    tl_desc_1(later, F.mem + OFF_SDATA, 10, F.mh);
    ring(&F.dba->sq, later, F.mh);
    fw_tx_progress(F.a);
    ERR_EXPECT(status_of(later), VIP_STATUS_DESC_FLUSHED_ERROR);
    /* the peer notices at its next progress */
    fw_rx_progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    ERR_EXPECT(status_of(rb1), VIP_STATUS_DESC_FLUSHED_ERROR);
    ERR_EXPECT(status_of(rb2), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_TRUE(F.b->err_pending);
    CU_ASSERT_EQUAL(F.b->err_code, VIP_ERROR_CONN_LOST);
    CU_ASSERT_FALSE(reported(&v, &c)); /* a lost connection is not re-reported */
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
    F.a->sq.tok[1] = (struct via_db_token){(uint64_t)(uintptr_t)sentinel, F.mh, 0};
    ring(&F.dba->sq, bad, F.mh);
    fw_tx_progress(F.a);
    ERR_EXPECT(status_of(bad), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(status_of(sentinel), 0);
    CU_ASSERT_EQUAL(F.a->sq.head, F.a->sq.tail);
    if (status_of(sentinel) || F.a->sq.head != F.a->sq.tail)
        fprintf(stderr, "\n  fw_flush from tx_xdes completed a slot never posted "
                        "(status 0x%x), sq head %u tail %u\n",
                status_of(sentinel), F.a->sq.head, F.a->sq.tail);
    teardown();
}

/* Reliable: a message with no receive posted breaks the connection. */
static void test_reliable_recvq_empty(void)
{
    setup(VIP_SERVICE_RELIABLE_DELIVERY, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *ra = at(OFF_RDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 10, F.mh);
    tl_desc_1(ra, F.mem + OFF_RDATA, 10, F.mh);
    ring(&F.dba->rq, ra, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    fw_tx_progress(F.a);
    CU_ASSERT_EQUAL(status_of(sd), VIP_STATUS_DONE);
    fw_rx_progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(F.b->err_code, VIP_ERROR_RECVQ_EMPTY);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 1);
    uint32_t v = 0, c = 0;
    CU_ASSERT_TRUE(reported(&v, &c));
    CU_ASSERT_EQUAL(v, 9);
    CU_ASSERT_EQUAL(c, VIP_ERROR_RECVQ_EMPTY);
    /* the sender's VI learns it at its next progress */
    fw_rx_progress(F.a);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    ERR_EXPECT(status_of(ra), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(F.a->err_code, VIP_ERROR_CONN_LOST);
    teardown();
}

/* Reliable: a receive too small is an error of the receiving VI, and on a
 * reliable-reception VI the send must not complete successfully: the data
 * never reached the receiver's memory. The sender's NIC runs its send
 * pipeline right after the receiver refused the message (as it would when
 * the sending process polls VipSendDone first). */
static void test_reliable_recv_too_small(void)
{
    setup(VIP_SERVICE_RELIABLE_RECEPTION, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC), *rd2 = at(OFF_RDESC + 512);
    tl_desc_1(sd, F.mem + OFF_SDATA, 100, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 99, F.mh);
    tl_desc_1(rd2, F.mem + OFF_RDATA, 1000, F.mh);
    ring(&F.dbb->rq, rd, F.mh);
    ring(&F.dbb->rq, rd2, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    fw_tx_progress(F.a);
    CU_ASSERT_EQUAL(status_of(sd), 0); /* waiting for the acknowledgement */
    fw_rx_progress(F.b);
    ERR_EXPECT(status_of(rd), VIP_STATUS_LENGTH_ERROR);
    ERR_EXPECT(status_of(rd2), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    fw_tx_progress(F.a);
    uint32_t st = status_of(sd);
    CU_ASSERT(st & VIP_STATUS_DONE);
    CU_ASSERT_NOT_EQUAL(st & VIP_STATUS_ERROR_MASK, 0);
    if (!(st & VIP_STATUS_ERROR_MASK))
        fprintf(stderr, "\n  reliable reception: send of a message the receiver refused "
                        "completed with status 0x%x (no error bit)\n", st);
    fw_rx_progress(F.a);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    teardown();
}

/* A corrupted packet on the link is a transport error, even unreliable. */
static void test_corrupt_link(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *sd = at(OFF_SDESC), *rd = at(OFF_RDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 100, F.mh);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, F.mh);
    ring(&F.dbb->rq, rd, F.mh);
    ring(&F.dba->sq, sd, F.mh);
    fw_tx_progress(F.a);
    struct via_wire_hdr *h = (struct via_wire_hdr *)(void *)F.chan->dir[0].ring;
    h->msg_len ^= 1; /* crc no longer matches */
    fw_rx_progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(F.b->err_code, VIP_ERROR_CATASTROPHIC);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    uint32_t v = 0, c = 0;
    CU_ASSERT_TRUE(reported(&v, &c));
    CU_ASSERT_EQUAL(c, VIP_ERROR_CATASTROPHIC);
    teardown();
}

/* A closed channel (peer disconnected): the VI goes to error, queued flushed. */
static void test_chan_closed(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, F.mh);
    ring(&F.dbb->rq, rd, F.mh);
    fw_rx_progress(F.b);
    CU_ASSERT_EQUAL(status_of(rd), 0);
    atomic_store(&F.chan->state, VIA_CHAN_CLOSED);
    fw_rx_progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    CU_ASSERT_EQUAL(F.b->err_code, VIP_ERROR_CONN_LOST);
    teardown();
}

/* Completion queue: completions of both queues are appended in order. */
static void test_cq_post(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    size_t rlen = (sizeof(struct via_cq_ring) + 4 * sizeof(struct via_cq_entry) + 63) & ~(size_t)63;
    struct via_cq_ring *r = aligned_alloc(64, rlen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    memset(r, 0, rlen);
    r->nslots = 4;
    struct fw_cq cq;
    pthread_mutex_init(&cq.lock, NULL);
    cq.ring = r;
    F.a->scq = &cq;
    F.b->rcq = &cq;
    for (uint32_t i = 0; i < 2; i++)
        xfer(100, 1, 1, 0, i);
    CU_ASSERT_EQUAL(atomic_load(&r->tail), 4);
    for (unsigned i = 0; i < 4; i++) {
        /* per message: send completes (A, send) before receive (B, recv) */
        CU_ASSERT_EQUAL(r->e[i].vi_id, i % 2 ? 9u : 3u);
        CU_ASSERT_EQUAL(r->e[i].is_recv, i % 2);
    }
    CU_ASSERT_EQUAL(atomic_load(&r->overflow), 0);
    xfer(100, 1, 1, 0, 3); /* full: overflow recorded, nothing overwritten */
    CU_ASSERT_EQUAL(atomic_load(&r->overflow), 1);
    CU_ASSERT_EQUAL(atomic_load(&r->tail), 4);
    F.a->scq = F.b->rcq = NULL;
    pthread_mutex_destroy(&cq.lock);
    free(r);
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_tpt_check),
        TL_TEST(test_link_ring),
        TL_TEST(test_bell_take),
        TL_TEST(test_xfer_unreliable),
        TL_TEST(test_xfer_reliable_delivery),
        TL_TEST(test_xfer_reliable_reception),
        TL_TEST(test_xfer_queued_both_ways),
        TL_TEST(test_fragments),
        TL_TEST(test_link_backpressure),
        TL_TEST(test_reliable_reception_ack),
        TL_TEST(test_bad_descriptors_unreliable),
        TL_TEST(test_bad_receives_unreliable),
        TL_TEST(test_not_connected_flush),
        TL_TEST(test_reliable_delivery_error),
        TL_TEST(test_reliable_reception_error),
        TL_TEST(test_reliable_bad_send_alone),
        TL_TEST(test_reliable_recvq_empty),
        TL_TEST(test_reliable_recv_too_small),
        TL_TEST(test_corrupt_link),
        TL_TEST(test_chan_closed),
        TL_TEST(test_cq_post),
        TL_END,
    };
    return tl_main(argc, argv, "firmware", tests);
}

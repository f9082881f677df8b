/*
 * test_fw.c - unit tests of the NIC firmware (lanai-fw/) and of the host side
 * of the short-message extensions (extensions/ext_host.c), no vipd needed.
 *
 * One NIC is built with nic_create, without a thread of its own: the test
 * lends it its CPU. Two VIs of its table (ids 3 and 9) are joined by a
 * via_chan allocated here. The test plays the host library (it rings
 * doorbells with nic_ring, progresses with nic_vi_progress / nic_progress,
 * takes asynchronous errors with nic_vi_take_error), the kernel agent (it
 * writes the TPT), and, where a test says so, a hostile peer NIC (it
 * publishes packets of its own making on the channel).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext.h"
#include "fw.h"
#include "fw_link.h"
#include "fw_model.h"
#include "lib/tlib.h"

#define PTAG_A 7u
#define PTAG_B 8u
#define MEM_LEN (3u << 20)
#define OTHER_LEN 65536u
#define RDMA_LEN 65536u
#define VICTIM_LEN 4096u
#define OFF_SDESC 0u
#define OFF_RDESC 4096u
#define OFF_SDATA 8192u
#define OFF_RDATA (8192u + (1u << 20) + 4096u)
#define OFF_SPARE (9u << 18) /* 2.25 MiB: beyond every message buffer */
#define SPARE_LEN (256u << 10)
#define IDX_MEM 1u
#define IDX_OTHER 2u
#define IDX_STALE 3u
#define IDX_RDMA 4u
#define IDX_STAGING 5u
#define VI_A 3u
#define VI_B 9u
#define CONN_ID 42u

struct opts {
    uint32_t rel;                   /* VIP_SERVICE_* of both VIs */
    bool connect;
    bool cq;                        /* A's send queue and B's receive queue on one CQ */
    const struct via_profile *prof; /* paced NIC with this profile; NULL: native */
};

static struct {
    struct via_tpt_entry *tpt;
    struct via_event_page *ev;
    struct via_status_page *st;
    struct via_nic_page *np;
    struct fw_nic *nic;
    struct via_vi_page *dba, *dbb;
    struct fw_vi *a, *b;
    struct via_chan *chan;
    struct via_cq_ring *cq_ring;
    struct fw_cq *cq;
    uint8_t *mem;    /* registered, ptag A, no RDMA enable */
    uint8_t *other;  /* registered, ptag B (RDMA-write enabled) */
    uint8_t *rdma;   /* registered, ptag A, RDMA-write enabled */
    uint8_t *victim; /* never registered */
    uint32_t mh, mh_other, mh_rdma;
} F;

static void *zalloc(size_t align, size_t len)
{
    len = (len + align - 1) / align * align;
    void *p = aligned_alloc(align, len);
    if (!p)
        abort();
    memset(p, 0, len);
    return p;
}

static uint32_t reg(uint32_t idx, uint32_t gen, uint32_t ptag, void *p, uint64_t len,
                    uint32_t flags)
{
    struct via_tpt_entry *e = &F.tpt[idx];
    e->ptag = ptag;
    e->va = (uint64_t)(uintptr_t)p;
    e->len = len;
    e->flags = flags;
    atomic_store(&e->gen, gen);
    return VIA_MH_MAKE(gen, idx);
}

static struct fw_vi *mkvi(uint32_t id, struct via_vi_page **dbp, uint32_t rel, struct fw_cq *scq,
                          struct fw_cq *rcq)
{
    struct via_vi_page *db = zalloc(VIA_PAGE_SIZE, sizeof *db);
    struct nic_vi_params p = {.vi_id = id, .ptag = PTAG_A, .reliability = rel,
                              .max_transfer = VIA_MAX_TRANSFER};
    struct fw_vi *vi = nic_vi_create(F.nic, db, &p, scq, rcq);
    if (!vi)
        abort();
    *dbp = db;
    return vi;
}

/* Change a VI's attributes the way the library does (VipSetViAttributes). */
static void set_vi(struct fw_vi *vi, uint32_t ptag, uint32_t max_transfer, bool rdma_write)
{
    struct nic_vi_params p = {.vi_id = vi->vi_id, .ptag = ptag, .reliability = vi->reliability,
                              .max_transfer = max_transfer, .rdma_write = rdma_write,
                              .rdma_read = vi->rdma_read};
    nic_vi_set_params(vi, &p);
}

/* Build the NIC and its two VIs, connected when asked. */
static void setup_opts(const struct opts *o)
{
    memset(&F, 0, sizeof F);
    F.tpt = zalloc(64, VIA_TPT_BYTES);
    F.ev = zalloc(VIA_PAGE_SIZE, sizeof *F.ev);
    F.st = zalloc(VIA_PAGE_SIZE, sizeof *F.st);
    F.np = zalloc(VIA_PAGE_SIZE, sizeof *F.np);
    F.chan = zalloc(64, sizeof *F.chan);
    F.mem = zalloc(4096, MEM_LEN);
    F.other = zalloc(4096, OTHER_LEN);
    F.rdma = zalloc(4096, RDMA_LEN);
    F.victim = zalloc(4096, VICTIM_LEN);
    if (o->prof) {
        F.np->prof = *o->prof;
        atomic_store(&F.np->scan_slots, 2);
    }
    struct nic_params np = {.nic_index = 0, .tpt = F.tpt, .ev = F.ev, .st = F.st, .np = F.np,
                            .own_thread = false};
    if (!(F.nic = nic_create(&np)))
        abort();
    F.mh = reg(IDX_MEM, 1, PTAG_A, F.mem, MEM_LEN, 0);
    F.mh_other = reg(IDX_OTHER, 5, PTAG_B, F.other, OTHER_LEN, VIA_TPT_RDMA_WRITE);
    F.mh_rdma = reg(IDX_RDMA, 3, PTAG_A, F.rdma, RDMA_LEN, VIA_TPT_RDMA_WRITE);
    if (o->cq) {
        F.cq_ring = zalloc(64, sizeof(struct via_cq_ring) + 4 * sizeof(struct via_cq_entry));
        F.cq_ring->nslots = 4;
        if (!(F.cq = nic_cq_create(F.nic, F.cq_ring)))
            abort();
    }
    F.a = mkvi(VI_A, &F.dba, o->rel, F.cq, NULL);
    F.b = mkvi(VI_B, &F.dbb, o->rel, NULL, F.cq);
    F.chan->magic = VIA_CHAN_MAGIC;
    F.chan->conn_id = CONN_ID;
    F.chan->reliability = o->rel;
    F.chan->vi_id[0] = VI_A;
    F.chan->vi_id[1] = VI_B;
    if (o->connect) {
        nic_vi_connect(F.a, F.chan, 0, VI_B, F.ev);
        nic_vi_connect(F.b, F.chan, 1, VI_A, F.ev);
    }
}

static void setup(uint32_t rel, bool connect)
{
    setup_opts(&(struct opts){.rel = rel, .connect = connect});
}

static void teardown(void)
{
    nic_vi_destroy(F.a);
    nic_vi_destroy(F.b);
    nic_cq_destroy(F.cq);
    nic_destroy(F.nic);
    free(F.tpt);
    free(F.ev);
    free(F.st);
    free(F.np);
    free(F.chan);
    free(F.cq_ring);
    free(F.mem);
    free(F.other);
    free(F.rdma);
    free(F.victim);
    free(F.dba);
    free(F.dbb);
}

static VIP_DESCRIPTOR *at(uint32_t off)
{
    return (VIP_DESCRIPTOR *)(void *)(F.mem + off);
}

static struct via_db_token std_token(const void *desc, uint32_t mh)
{
    return (struct via_db_token){(uint64_t)(uintptr_t)desc, mh, VIA_DB_WORD2(VIA_DB_DESC, 0, 0)};
}

/* T1/R1 through the NIC's doorbell (nic_ring): a send runs the NIC inline. */
static void post_send(struct fw_vi *vi, const void *desc, uint32_t mh)
{
    struct via_db_token t = std_token(desc, mh);
    nic_ring(vi, false, &t, FW_EXT_STANDARD, 0, nic_now_ns());
}

static void post_recv(struct fw_vi *vi, const void *desc, uint32_t mh)
{
    struct via_db_token t = std_token(desc, mh);
    nic_ring(vi, true, &t, FW_EXT_STANDARD, 0, nic_now_ns());
}

/* A token written straight into a doorbell ring: the NIC is not told and
 * finds it at its next progress. */
static void ring_tok(struct via_db_queue *q, struct via_db_token t)
{
    uint32_t prod = atomic_load(&q->prod);
    q->tok[prod % VIA_DB_SLOTS] = t;
    atomic_store(&q->prod, prod + 1);
}

static void ring_raw(struct via_db_queue *q, const void *desc, uint32_t mh)
{
    ring_tok(q, std_token(desc, mh));
}

static void progress(struct fw_vi *vi)
{
    (void)nic_vi_progress(vi, false);
}

static uint32_t status_of(const void *desc)
{
    return __atomic_load_n(&((const VIP_DESCRIPTOR *)desc)->CS.Status, __ATOMIC_ACQUIRE);
}

static bool all_done(void *const *wait, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!(status_of(wait[i]) & VIP_STATUS_DONE))
            return false;
    return true;
}

/* Progress both VIs until every descriptor in `wait` is DONE (bounded). */
static int pump(void *const *wait, unsigned n)
{
    for (unsigned it = 0; it < 100000; it++) {
        progress(F.a);
        progress(F.b);
        if (all_done(wait, n))
            return 0;
    }
    return -1;
}

/* The same, but only through nic_progress: the NIC visits the VIs its
 * arrival and work bits name, so a lost bit shows up as a stall. */
static int pump_nic(void *const *wait, unsigned n)
{
    for (unsigned it = 0; it < 100000; it++) {
        (void)nic_progress(F.nic, false);
        if (all_done(wait, n))
            return 0;
    }
    return -1;
}

/* The VI's asynchronous error must be there, with `code`; tell: the agent
 * must hear of it (a VI that broke its connection, first report). */
static void expect_error(struct fw_vi *vi, uint32_t code, bool tell, int line)
{
    struct nic_error e;
    bool got = nic_vi_take_error(vi, &e);
    CU_ASSERT_TRUE(got);
    if (!got) {
        fprintf(stderr, "\n  line %d: VI %u recorded no error (expected code %u)\n", line,
                vi->vi_id, code);
        return;
    }
    CU_ASSERT_EQUAL(e.code, code);
    CU_ASSERT_EQUAL(e.tell_agent, tell);
    if (e.code != code || e.tell_agent != tell)
        fprintf(stderr, "\n  line %d: VI %u error code %u tell %d, expected %u tell %d\n", line,
                vi->vi_id, e.code, e.tell_agent, code, tell);
}
#define EXPECT_ERROR(vi, code, tell) expect_error((vi), (code), (tell), __LINE__)

static bool no_error(struct fw_vi *vi)
{
    struct nic_error e;
    return !nic_vi_take_error(vi, &e);
}

#define ERR_EXPECT(st, bit)                                                                \
    do {                                                                                   \
        uint32_t st_ = (st);                                                               \
        CU_ASSERT(st_ & VIP_STATUS_DONE);                                                  \
        CU_ASSERT_EQUAL(st_ & VIP_STATUS_ERROR_MASK, (bit));                               \
        if (!(st_ & VIP_STATUS_DONE) || (st_ & VIP_STATUS_ERROR_MASK) != (bit))            \
            fprintf(stderr, "\n  line %d: status 0x%x, expected DONE with error 0x%x\n",   \
                    __LINE__, st_, (unsigned)(bit));                                       \
    } while (0)

/* Index of the first byte of p[0..n) that is not v, or -1. */
static long first_not(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return (long)i;
    return -1;
}

/* A copy of host memory, to show the NIC left it alone. */
struct snap {
    const uint8_t *p;
    size_t n;
    uint8_t b[256];
};

static void snap(struct snap *s, const void *p, size_t n)
{
    s->p = p;
    s->n = n < sizeof s->b ? n : sizeof s->b;
    memcpy(s->b, p, s->n);
}

static bool unchanged(const struct snap *s)
{
    return memcmp(s->p, s->b, s->n) == 0;
}

/* ---- the peer NIC as the test plays it ----------------------------------------------- */

/* A header from side `from` for the other side's VI. */
static struct via_wire_hdr hdr(int from, uint8_t type)
{
    return (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = type,
                                 .dst_vi = from ? VI_A : VI_B, .conn_id = CONN_ID};
}

/* Publish a packet on direction `dir` as a peer NIC would, with any header
 * it likes and a valid check word. */
static void inject(int dir, struct via_wire_hdr h, const void *payload)
{
    struct via_chan_dir *d = &F.chan->dir[dir];
    struct via_wire_hdr *w = fw_link_reserve(d, h.frag_len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    if (h.frag_len)
        memcpy(w + 1, payload, h.frag_len);
    *w = h;
    fw_link_publish(d, w);
}

/* The next packet on direction `dir`, left where it is: true and its header. */
static bool look(int dir, struct via_wire_hdr *h)
{
    const uint8_t *p;
    return fw_link_peek(&F.chan->dir[dir], h, &p) == FW_LINK_PACKET;
}

static uint64_t ring_head(int dir)
{
    return atomic_load(&F.chan->dir[dir].head);
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
    struct via_wire_hdr *h = fw_link_reserve(d, payload);
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
    CU_ASSERT_PTR_NULL(fw_link_reserve(d, 0));
    /* drain one, then there is room for one again */
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.msg_seq, 1000);
    fw_link_consume(d, &h);
    CU_ASSERT_PTR_NOT_NULL(put(d, 4096 - 64, 5000));
    CU_ASSERT_PTR_NULL(fw_link_reserve(d, 0));
    for (unsigned i = 1; i <= n; i++) {
        CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
        CU_ASSERT_EQUAL(h.msg_seq, i < n ? 1000 + i : 5000);
        fw_link_consume(d, &h);
    }
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_EMPTY);

    /* a corrupted header is flagged bad and not consumed */
    struct via_wire_hdr *w = put(d, 128, 7);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    uint64_t tail = atomic_load(&d->tail);
    w->msg_len = 99999;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    CU_ASSERT_EQUAL(atomic_load(&d->tail), tail);
    w->msg_len = 128; /* restored: valid again */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    w->version = 1; /* wire format 1 is gone */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->version = VIA_WIRE_VERSION;
    /* a valid check word over an impossible length is still refused */
    w->frag_len = VIA_MTU + 64;
    w->crc = via_wire_check(w);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    /* unknown types */
    w->frag_len = 128;
    w->type = 77;
    w->crc = via_wire_check(w);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->type = 0;
    w->crc = via_wire_check(w);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->type = VIA_PKT_NTYPES;
    w->crc = via_wire_check(w);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    /* every opcode of version 2 passes the link (the VI judges it) */
    static const uint8_t types[] = {VIA_PKT_SEND, VIA_PKT_RDMA_WRITE, VIA_PKT_RDMA_READ_REQ,
                                    VIA_PKT_RDMA_READ_RESP, VIA_PKT_ACK, VIA_PKT_NAK};
    for (unsigned i = 0; i < sizeof types; i++) {
        w->type = types[i];
        w->crc = via_wire_check(w);
        CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
        CU_ASSERT_EQUAL(h.type, types[i]);
    }
    /* a head beyond the ring size (lying sender) */
    w->type = VIA_PKT_SEND;
    w->crc = via_wire_check(w);
    uint64_t head = atomic_load(&d->head);
    atomic_store(&d->head, atomic_load(&d->tail) + VIA_CHAN_RING + 64);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    atomic_store(&d->head, head);
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    free(d);
}

/* The check word covers the fields of wire format 2: rkey, ack_seq, raddr. */
static void test_wire_check_v2_fields(void)
{
    struct via_chan_dir *d = zalloc(64, sizeof *d);
    struct via_wire_hdr *w = put(d, 64, 3), h;
    const uint8_t *pl;
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    w->rkey = 0x10001;
    w->ack_seq = 17;
    w->raddr = 0x0000123456789000ull;
    w->crc = via_wire_check(w);
    CU_ASSERT_EQUAL_FATAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    CU_ASSERT_EQUAL(h.rkey, 0x10001);
    CU_ASSERT_EQUAL(h.ack_seq, 17);
    CU_ASSERT_EQUAL(h.raddr, 0x0000123456789000ull);
    w->rkey ^= 0x100;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->rkey ^= 0x100;
    w->ack_seq ^= 1;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->ack_seq ^= 1;
    w->raddr ^= 0x40; /* low word */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->raddr ^= 0x40;
    w->raddr ^= 1ull << 40; /* high word */
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_BAD);
    w->raddr ^= 1ull << 40;
    CU_ASSERT_EQUAL(fw_link_peek(d, &h, &pl), FW_LINK_PACKET);
    free(d);
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
    /* the sender rewrites what it published, with a valid check word */
    struct via_wire_hdr *w = (struct via_wire_hdr *)(void *)d->ring;
    w->frag_len = 64;
    w->msg_len = 64;
    w->msg_seq = 99;
    w->crc = via_wire_check(w);
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
    w->crc = via_wire_check(w);
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
    return fw_link_reserve(l->tx, payload);
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
        w->crc = via_wire_check(w);
    }
    return rc;
}

static const struct fw_link_ops scribble_ops = {
    .name = "scribble",
    .reserve = fwd_reserve,
    .publish = fwd_publish,
    .peek = scribble_peek,
    .consume = fwd_consume,
    .pending = fwd_pending,
};

static void xfer(uint32_t len, unsigned ss, unsigned rs, int imm, uint32_t seq);

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
    CU_ASSERT_PTR_EQUAL(nic_profile(F.nic), &F.np->prof);
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
    post_recv(F.b, rd, F.mh);
    post_send(F.a, sd, F.mh);
    void *w[] = {sd, rd};
    CU_ASSERT_EQUAL_FATAL(pump_nic(w, 2), 0);
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
        CU_ASSERT(ss_ & VIP_STATUS_IMMEDIATE);
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
    CU_ASSERT_TRUE(no_error(F.a));
    CU_ASSERT_TRUE(no_error(F.b));
    if (rel == VIP_SERVICE_RELIABLE_RECEPTION)
        CU_ASSERT_EQUAL(F.a->acked, seq - 1); /* every message acknowledged */
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
    CU_ASSERT_EQUAL(F.a->acked, N);
    CU_ASSERT_EQUAL(F.b->acked, N);
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
    CU_ASSERT_EQUAL(F.a->tx, FW_TX_XDATA);
    CU_ASSERT(F.a->tx_off > 0 && F.a->tx_off < VIA_MAX_TRANSFER);
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
    CU_ASSERT_EQUAL(F.a->tx, FW_TX_UPDT);
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
    CU_ASSERT_EQUAL(F.a->acked, 1);
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

/* ---- bad descriptors ---------------------------------------------------------------- */

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
    CU_ASSERT_EQUAL(F.a->sq.head, F.a->sq.tail);
    if (!same)
        fprintf(stderr, "\n  line %d: the NIC wrote to a descriptor it may not (status 0x%x)\n",
                line, status_of(desc));
}
#define SEND_UNWRITTEN(desc, mh) send_unwritten((desc), (mh), __LINE__)

/* After an error on an unreliable VI, a good message still goes through. */
static void still_works(uint32_t seq)
{
    xfer(3000, 2, 2, 1, seq);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
}

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
    /* RDMA operations are not issued by this NIC version */
    static const uint16_t ops[] = {VIP_CONTROL_OP_RDMAWRITE, VIP_CONTROL_OP_RDMAREAD,
                                   VIP_CONTROL_OP_RESERVED};
    for (unsigned i = 0; i < 3; i++) {
        tl_desc_1(sd, data, 10, F.mh);
        sd->CS.Control = ops[i];
        ERR_EXPECT(send_bad(sd, F.mh), VIP_STATUS_FORMAT_ERROR);
    }
    still_works(seq++);
    CU_ASSERT(atomic_load(&F.dba->cnt.desc_errors) >= 12);
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
    CU_ASSERT_EQUAL(F.b->rq.head, F.b->rq.tail);
    still_works(12);
    /* no receive posted: dropped, VI stays connected */
    tl_desc_1(sd, data, 100, F.mh);
    post_send(F.a, sd, F.mh);
    void *w3[] = {sd};
    CU_ASSERT_EQUAL_FATAL(pump(w3, 1), 0);
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->cnt.rx_dropped), 4);
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
    F.a->sq.tok[1] = std_token(sentinel, F.mh);
    post_send(F.a, bad, F.mh);
    ERR_EXPECT(status_of(bad), VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(status_of(sentinel), 0);
    CU_ASSERT_EQUAL(F.a->sq.head, F.a->sq.tail);
    if (status_of(sentinel) || F.a->sq.head != F.a->sq.tail)
        fprintf(stderr, "\n  the error flush completed a slot never posted "
                        "(status 0x%x), sq head %u tail %u\n",
                status_of(sentinel), F.a->sq.head, F.a->sq.tail);
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
    h->msg_len ^= 1; /* check word no longer matches */
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_CATASTROPHIC, true);
    teardown();
}

/* RDMA reads are defined on the wire but never issued by this NIC version:
 * receiving one is a protocol error. */
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
    read_packet_refused(VIP_SERVICE_RELIABLE_RECEPTION, VIA_PKT_RDMA_READ_REQ);
    read_packet_refused(VIP_SERVICE_UNRELIABLE, VIA_PKT_RDMA_READ_RESP);
}

/* A closed channel (peer disconnected): the VI goes to error, queued flushed. */
static void test_chan_closed(void)
{
    setup(VIP_SERVICE_UNRELIABLE, 1);
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, F.mh);
    post_recv(F.b, rd, F.mh);
    progress(F.b);
    CU_ASSERT_EQUAL(status_of(rd), 0);
    atomic_store(&F.chan->state, VIA_CHAN_CLOSED);
    progress(F.b);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    EXPECT_ERROR(F.b, VIP_ERROR_CONN_LOST, false);
    teardown();
}

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
        if (rels[r] == VIP_SERVICE_RELIABLE_RECEPTION) {
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

/* Refused before a byte is written: the VI goes to error (never benign) and
 * the requester hears a NAK. */
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
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_ERROR);
    CU_ASSERT_EQUAL(atomic_load(&F.chan->state), VIA_CHAN_BROKEN);
    struct nic_error e = {0};
    bool got = nic_vi_take_error(F.b, &e);
    CU_ASSERT_TRUE(got);
    CU_ASSERT_EQUAL(e.code, VIP_ERROR_RDMAW_PROT);
    CU_ASSERT_TRUE(e.tell_agent);
    ERR_EXPECT(status_of(rd), VIP_STATUS_DESC_FLUSHED_ERROR);
    struct via_wire_hdr h = {0};
    bool nak = look(1, &h) && h.type == VIA_PKT_NAK && h.ack_seq == 1 && h.dst_vi == VI_A;
    CU_ASSERT_TRUE(nak);
    if (!clean || !got || e.code != VIP_ERROR_RDMAW_PROT || !nak)
        fprintf(stderr, "\n  RDMA write to a %s (reliability %u): %s, error %s code %u, %s\n",
                rdma_bad_name[k], rel, clean ? "nothing written" : "WRITTEN",
                got ? "recorded" : "not recorded", e.code, nak ? "NAK sent" : "no NAK");
    teardown();
}

static void test_rdma_write_refused(void)
{
    static const uint32_t rels[] = {VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY};
    for (unsigned r = 0; r < 2; r++)
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
    atomic_store(&np->scan_slots, 8);
    const uint64_t busy = 1000000000000ull, dur = 5000;
    /* rung while the LANai is busy: the loop restarts from the first pair */
    atomic_store(&np->lanai_busy_until, busy);
    uint64_t s = fw_sched_send(F.nic, 3, busy - 10, dur);
    CU_ASSERT_EQUAL(s, busy + 4 * 1000);
    CU_ASSERT_EQUAL(atomic_load(&np->lanai_busy_until), s + dur);
    atomic_store(&np->lanai_busy_until, busy);
    s = fw_sched_send(F.nic, 100, busy, dur); /* beyond the pairs scanned: the last */
    CU_ASSERT_EQUAL(s, busy + 7 * 1000);
    /* rung while idle: found within one round, at a random point of it */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned i = 0; i < 200; i++) {
        atomic_store(&np->lanai_busy_until, 0);
        uint64_t ring = busy + (uint64_t)i * 100000;
        s = fw_sched_send(F.nic, 3, ring, dur);
        CU_ASSERT(s >= ring && s < ring + 8 * 1000);
        uint64_t d = s - ring;
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    CU_ASSERT(hi > lo && hi - lo > 4000);
    if (!(hi > lo && hi - lo > 4000))
        fprintf(stderr, "\n  doorbell found %llu..%llu ns after the ring (a round is 8000)\n",
                (unsigned long long)lo, (unsigned long long)hi);
    /* hardware doorbells: no scan */
    np->prof.hw_doorbell = 1;
    atomic_store(&np->lanai_busy_until, 0);
    CU_ASSERT_EQUAL(fw_sched_send(F.nic, 3, busy, dur), busy);
    atomic_store(&np->lanai_busy_until, busy + 500);
    CU_ASSERT_EQUAL(fw_sched_send(F.nic, 3, busy, dur), busy + 500);
    teardown();
}

static const char *profile_dir(void)
{
    const char *d = getenv("VIP_PROFILE_DIR");
    return d && *d ? d : "lanai-fw/profiles";
}

/* A paced NIC never shows an effect before its modelled time, and held
 * effects are found again by nic_progress without help. */
static void test_paced_never_early(void)
{
    struct via_profile prof;
    char err[256] = "";
    if (fw_profile_load("sbus", profile_dir(), &prof, err, sizeof err)) {
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
            CU_ASSERT_EQUAL(held, F.a->tx_release);
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
        CU_ASSERT(F.a->tx_release > t0);
        CU_ASSERT(seen_sd >= F.a->tx_release);
        CU_ASSERT(seen_rd >= F.b->rx_release);
        CU_ASSERT(F.b->rx_release >= F.a->tx_span_start);
        ERR_EXPECT(status_of(sd), 0);
        ERR_EXPECT(status_of(rd), 0);
        CU_ASSERT_EQUAL(tl_verify(F.mem + OFF_RDATA, len, 300 + k), -1);
    }
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_tpt_check),
        TL_TEST(test_tpt_check_rdma),
        TL_TEST(test_link_ring),
        TL_TEST(test_wire_check_v2_fields),
        TL_TEST(test_link_peek_copies_once),
        TL_TEST(test_rx_uses_header_copy),
        TL_TEST(test_bell_take),
        TL_TEST(test_nic_vi_table),
        TL_TEST(test_xfer_unreliable),
        TL_TEST(test_xfer_reliable_delivery),
        TL_TEST(test_xfer_reliable_reception),
        TL_TEST(test_xfer_queued_both_ways),
        TL_TEST(test_fragments),
        TL_TEST(test_link_backpressure),
        TL_TEST(test_reliable_reception_ack),
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
        TL_TEST(test_rdma_read_packets_refused),
        TL_TEST(test_chan_closed),
        TL_TEST(test_rdma_write_lands),
        TL_TEST(test_rdma_write_refused),
        TL_TEST(test_rdma_write_later_fragments_in_range),
        TL_TEST(test_merged_hostile_next),
        TL_TEST(test_merged_malformed),
        TL_TEST(test_short_tokens_outside_memory),
        TL_TEST(test_ext_descless_busy_slot),
        TL_TEST(test_ext_merged_delivers),
        TL_TEST(test_cq_post),
        TL_TEST(test_release_due),
        TL_TEST(test_sched_doorbell_scan),
        TL_TEST(test_paced_never_early),
        TL_END,
    };
    return tl_main(argc, argv, "firmware", tests);
}

/*
 * tfw.c - the fixture of the firmware unit tests (see tfw.h): the in-memory
 * NIC and its two VIs, the TPT, and the helpers through which a test plays
 * the host library, the kernel agent and the peer NIC.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tfw.h"

struct tfw_fixture F;

void *zalloc(size_t align, size_t len)
{
    len = (len + align - 1) / align * align;
    void *p = aligned_alloc(align, len);
    if (!p)
        abort();
    memset(p, 0, len);
    return p;
}

uint32_t reg(uint32_t idx, uint32_t gen, uint32_t ptag, void *p, uint64_t len, uint32_t flags)
{
    struct via_tpt_entry *e = &F.tpt[idx];
    e->ptag = ptag;
    e->va = (uint64_t)(uintptr_t)p;
    e->len = len;
    e->flags = flags;
    atomic_store(&e->gen, gen);
    return VIA_MH_MAKE(gen, idx);
}

struct fw_vi *mkvi(uint32_t id, struct via_vi_page **dbp, uint32_t rel, struct fw_cq *scq,
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
void set_vi(struct fw_vi *vi, uint32_t ptag, uint32_t max_transfer, bool rdma_write)
{
    struct nic_vi_params p = {.vi_id = vi->vi_id, .ptag = ptag, .reliability = vi->reliability,
                              .max_transfer = max_transfer, .rdma_write = rdma_write,
                              .rdma_read = vi->rdma_read};
    nic_vi_set_params(vi, &p);
}

/* Build the NIC and its two VIs, connected when asked. */
void setup_opts(const struct opts *o)
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
        atomic_store(&F.st->scan_slots, 2);
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
        int pa = o->cma ? (int)syscall(SYS_pidfd_open, getpid(), 0) : -1;
        int pb = o->cma ? (int)syscall(SYS_pidfd_open, getpid(), 0) : -1;
        if (o->cma && (pa < 0 || pb < 0))
            abort();
        nic_vi_connect(F.a, F.chan, 0, VI_B, F.ev, -1, pa);
        nic_vi_connect(F.b, F.chan, 1, VI_A, F.ev, -1, pb);
    }
}

void setup(uint32_t rel, bool connect)
{
    setup_opts(&(struct opts){.rel = rel, .connect = connect});
}

void teardown(void)
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

VIP_DESCRIPTOR *at(uint32_t off)
{
    return (VIP_DESCRIPTOR *)(void *)(F.mem + off);
}

struct via_db_token std_token(const void *desc, uint32_t mh)
{
    return (struct via_db_token){(uint64_t)(uintptr_t)desc, mh, VIA_DB_WORD2(VIA_DB_DESC, 0, 0)};
}

/* T1/R1 through the NIC's doorbell (nic_ring): a send runs the NIC inline. */
void post_send(struct fw_vi *vi, const void *desc, uint32_t mh)
{
    struct via_db_token t = std_token(desc, mh);
    nic_ring(vi, false, &t, FW_EXT_STANDARD, 0, nic_now_ns());
}

void post_recv(struct fw_vi *vi, const void *desc, uint32_t mh)
{
    struct via_db_token t = std_token(desc, mh);
    nic_ring(vi, true, &t, FW_EXT_STANDARD, 0, nic_now_ns());
}

/* A token written straight into a doorbell ring: the NIC is not told and
 * finds it at its next progress. */
void ring_tok(struct via_db_queue *q, struct via_db_token t)
{
    uint32_t prod = atomic_load(&q->prod);
    q->tok[prod % VIA_DB_SLOTS] = t;
    atomic_store(&q->prod, prod + 1);
}

void ring_raw(struct via_db_queue *q, const void *desc, uint32_t mh)
{
    ring_tok(q, std_token(desc, mh));
}

void progress(struct fw_vi *vi)
{
    (void)nic_vi_progress(vi, false);
}

uint32_t status_of(const void *desc)
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
int pump(void *const *wait, unsigned n)
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
int pump_nic(void *const *wait, unsigned n)
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
void expect_error(struct fw_vi *vi, uint32_t code, bool tell, int line)
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

bool no_error(struct fw_vi *vi)
{
    struct nic_error e;
    return !nic_vi_take_error(vi, &e);
}

/* Index of the first byte of p[0..n) that is not v, or -1. */
long first_not(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return (long)i;
    return -1;
}

void snap(struct snap *s, const void *p, size_t n)
{
    s->p = p;
    s->n = n < sizeof s->b ? n : sizeof s->b;
    memcpy(s->b, p, s->n);
}

bool unchanged(const struct snap *s)
{
    return memcmp(s->p, s->b, s->n) == 0;
}

/* ---- the peer NIC as the test plays it ----------------------------------------------- */

/* A header from side `from` for the other side's VI. */
struct via_wire_hdr hdr(int from, uint8_t type)
{
    return (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = type,
                                 .dst_vi = from ? VI_A : VI_B, .conn_id = CONN_ID};
}

/* Publish a packet on direction `dir` as a peer NIC would, with any header
 * it likes and a valid check word. */
void inject(int dir, struct via_wire_hdr h, const void *payload)
{
    struct via_chan_dir *d = &F.chan->dir[dir];
    struct via_wire_hdr *w = fw_link_reserve(d, NULL, h.frag_len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    if (h.frag_len)
        memcpy(w + 1, payload, h.frag_len);
    *w = h;
    fw_link_publish(d, w);
}

/* The next packet on direction `dir`, left where it is: true and its header. */
bool look(int dir, struct via_wire_hdr *h)
{
    const uint8_t *p;
    return fw_link_peek(&F.chan->dir[dir], h, &p) == FW_LINK_PACKET;
}

uint64_t ring_head(int dir)
{
    return atomic_load(&F.chan->dir[dir].head);
}

/* An RDMA descriptor at d: DS[0] the remote address segment, then the
 * local range [local, local + len) in nseg segments. */
void rdma_desc(VIP_DESCRIPTOR *d, uint16_t op, uint64_t raddr, uint32_t rkey,
                      uint8_t *local, uint32_t len, unsigned nseg)
{
    memset(d, 0, sizeof(VIP_CONTROL_SEGMENT) + (1 + nseg) * sizeof(VIP_DATA_SEGMENT));
    d->CS.Control = op;
    d->CS.SegCount = (uint16_t)(1 + nseg);
    VIP_ADDRESS_SEGMENT *as = &d->DS[0].Remote;
    as->Data.AddressBits = raddr;
    as->Handle = rkey;
    VIP_DATA_SEGMENT *ds = (VIP_DATA_SEGMENT *)(void *)(as + 1);
    uint32_t off = 0;
    for (unsigned i = 0; i < nseg; i++) {
        uint32_t l = len / nseg + (i < len % nseg ? 1 : 0);
        ds[i].Data.Address = local + off;
        ds[i].Handle = F.mh;
        ds[i].Length = l;
        off += l;
    }
    d->CS.Length = len;
}

/* ---- a whole message, A to B ---------------------------------------------------------- */

/* Send `len` bytes in `ss` segments, receive in `rs` segments (buffer
 * len + slack), with or without immediate data; check everything. */
void xfer(uint32_t len, unsigned ss, unsigned rs, int imm, uint32_t seq)
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

/* After an error on an unreliable VI, a good message still goes through. */
void still_works(uint32_t seq)
{
    xfer(3000, 2, 2, 1, seq);
    CU_ASSERT_EQUAL(atomic_load(&F.dba->state), VIA_VI_CONNECTED);
    CU_ASSERT_EQUAL(atomic_load(&F.dbb->state), VIA_VI_CONNECTED);
}

/*
 * tfw.h - the fixture of the firmware unit tests (test_fw_*.c), no vipd
 * needed.
 *
 * One NIC is built with nic_create, without a thread of its own: the test
 * lends it its CPU. Two VIs of its table (ids 3 and 9) are joined by a
 * via_chan allocated here. The test plays the host library (it rings
 * doorbells with nic_ring, progresses with nic_vi_progress / nic_progress,
 * takes asynchronous errors with nic_vi_take_error), the kernel agent (it
 * writes the TPT), and, where a test says so, a hostile peer NIC (it
 * publishes packets of its own making on the channel).
 *
 * tfw.c calls firmware internals that libvipl.so does not export, so the
 * Makefile links it only into the tests that link libvipl.a
 * (INTERNAL_TESTS), never into those that use the shared library.
 */
#ifndef TFW_H
#define TFW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ext.h"
#include "fw.h"
#include "fw_link.h"
#include "fw_model.h"
#include "tlib.h"

/* The layout of the fixture: protection tags, registered regions, where in
 * F.mem the tests put their descriptors and data, TPT indices, VI ids. */
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
    bool cma;                       /* each VI's peer is this process (a pidfd, as vipd
                                       gives): large SENDs may go by rendezvous */
};

struct tfw_fixture {
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
};
/* One fixture per process: each test sets it up and tears it down. */
extern struct tfw_fixture F;

/* ---- building and tearing down ------------------------------------------ */
/* Zeroed memory of len (rounded up to align) bytes; aborts when out of it. */
void *zalloc(size_t align, size_t len);
/* Write TPT entry idx as the kernel agent does; returns its handle. */
uint32_t reg(uint32_t idx, uint32_t gen, uint32_t ptag, void *p, uint64_t len, uint32_t flags);
struct fw_vi *mkvi(uint32_t id, struct via_vi_page **dbp, uint32_t rel, struct fw_cq *scq,
                   struct fw_cq *rcq);
/* Change a VI's attributes the way the library does (VipSetViAttributes). */
void set_vi(struct fw_vi *vi, uint32_t ptag, uint32_t max_transfer, bool rdma_write);
/* Build the NIC and its two VIs, connected when asked. */
void setup_opts(const struct opts *o);
void setup(uint32_t rel, bool connect);
void teardown(void);

/* ---- the host library as the test plays it ------------------------------- */
/* The descriptor at offset off of F.mem. */
VIP_DESCRIPTOR *at(uint32_t off);
struct via_db_token std_token(const void *desc, uint32_t mh);
/* T1/R1 through the NIC's doorbell (nic_ring): a send runs the NIC inline. */
void post_send(struct fw_vi *vi, const void *desc, uint32_t mh);
void post_recv(struct fw_vi *vi, const void *desc, uint32_t mh);
/* A token written straight into a doorbell ring: the NIC is not told and
 * finds it at its next progress. */
void ring_tok(struct via_db_queue *q, struct via_db_token t);
void ring_raw(struct via_db_queue *q, const void *desc, uint32_t mh);
void progress(struct fw_vi *vi);
uint32_t status_of(const void *desc);
/* Progress both VIs until every descriptor in `wait` is DONE (bounded);
 * 0, or -1 when they never all were. */
int pump(void *const *wait, unsigned n);
/* The same, but only through nic_progress: the NIC visits the VIs its
 * arrival and work bits name, so a lost bit shows up as a stall. */
int pump_nic(void *const *wait, unsigned n);

/* ---- checks -------------------------------------------------------------- */
/* The VI's asynchronous error must be there, with `code`; tell: the agent
 * must hear of it (a VI that broke its connection, first report). */
void expect_error(struct fw_vi *vi, uint32_t code, bool tell, int line);
#define EXPECT_ERROR(vi, code, tell) expect_error((vi), (code), (tell), __LINE__)
/* True when the VI recorded no asynchronous error (takes one if it did). */
bool no_error(struct fw_vi *vi);

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
long first_not(const uint8_t *p, size_t n, uint8_t v);

/* A copy of host memory, to show the NIC left it alone. */
struct snap {
    const uint8_t *p;
    size_t n;
    uint8_t b[256];
};
void snap(struct snap *s, const void *p, size_t n);
bool unchanged(const struct snap *s);

/* ---- the peer NIC as the test plays it ----------------------------------- */
/* A header from side `from` for the other side's VI. */
struct via_wire_hdr hdr(int from, uint8_t type);
/* Publish a packet on direction `dir` as a peer NIC would, with any header
 * it likes and a valid check word. */
void inject(int dir, struct via_wire_hdr h, const void *payload);
/* The next packet on direction `dir`, left where it is: true and its header. */
bool look(int dir, struct via_wire_hdr *h);
uint64_t ring_head(int dir);

/* An RDMA descriptor at d: DS[0] the remote address segment, then the
 * local range [local, local + len) in nseg segments (handle F.mh). */
void rdma_desc(VIP_DESCRIPTOR *d, uint16_t op, uint64_t raddr, uint32_t rkey,
               uint8_t *local, uint32_t len, unsigned nseg);

/* ---- a whole message, A to B --------------------------------------------- */
/* Send `len` bytes in `ss` segments, receive in `rs` segments (buffer
 * len + slack), with or without immediate data; check everything. */
void xfer(uint32_t len, unsigned ss, unsigned rs, int imm, uint32_t seq);
/* After an error on an unreliable VI, a good message still goes through. */
void still_works(uint32_t seq);

#endif

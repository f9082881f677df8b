/*
 * bench_rdma.h - what the RDMA benchmarks (vip_write_lat, vip_write_bw,
 * vip_read_lat) share on top of bench_util.h: one connected VI whose
 * region the peer reaches by RDMA, the exchange that tells each side the
 * other's region, small control messages, and RDMA descriptors.
 *
 * A VIA peer learns a remote address and memory handle only from a message
 * (VIA has no other way to publish them), so after connecting each side
 * sends its region (address, handle, length) in a first SEND, as
 * perftest's ib_write_* exchange their rkeys before the test.
 *
 * The receive queue holds BR_CTL_DEPTH small receives for the whole run:
 * the exchange, per-size synchronisation, the bye, and the receives an
 * RDMA write with immediate data consumes at the target.
 *
 * Header-only, like bench_util.h (every C file in bench/ is its own program).
 */
#ifndef BENCH_RDMA_H
#define BENCH_RDMA_H

#include "bench_util.h"

#define BR_CTL_DEPTH 8u

enum br_ctl_kind {
    BR_REGION = 1, /* addr/handle/len: the sender's RDMA region */
    BR_SYNC = 2,   /* value: a size is done (both sides' writes have landed) */
    BR_ACK = 3,    /* value: the messages of a round that arrived */
};

struct br_ctl {
    uint32_t kind;
    uint32_t value;
    uint64_t addr;
    uint32_t handle;
    uint32_t len;
};

struct br_params {
    const char *dev;  /* this side's NIC */
    const char *peer; /* the server's name for the client's VipNSGetHostByName */
    bool server;
    bool events; /* wait (VipRecvWait/VipSendWait) instead of polling */
    VIP_RELIABILITY_LEVEL rel;
    uint64_t disc;
    uint32_t max_msg;      /* the largest message of the run */
    size_t region_len;     /* the region the peer reaches */
    bool rdma_write;       /* ... by RDMA write */
    bool rdma_read;        /* ... by RDMA read */
    size_t local_len;      /* a region only this side uses (write sources), or 0 */
    unsigned ndesc;        /* descriptors for the program's RDMA operations */
    size_t vis;            /* idle VIs to create first */
};

struct br_end {
    struct bu_ep ep;
    bool events;
    VIP_DESCRIPTOR *desc;     /* ndesc, for the program's operations */
    VIP_DESCRIPTOR *ctl_rd;   /* BR_CTL_DEPTH control receives */
    VIP_DESCRIPTOR *ctl_sd;   /* one control send (and the bye) */
    struct br_ctl *cbuf;      /* BR_CTL_DEPTH + 1 slots: receives, then the send */
    uint8_t *region, *local;  /* the peer's target or source; ours alone */
    size_t region_len;
    VIP_MEM_HANDLE dmh, cmh, rmh, lmh;
    uint64_t ctl_head;        /* control receives completed */
    struct br_ctl peer;       /* the peer's region, from its BR_REGION message */
};

/* Open the NIC, register the regions, create the VI (RDMA enabled as
 * asked), post the control receives and connect. */
static inline void br_setup(struct br_end *e, const struct br_params *p)
{
    bu_open(&e->ep, p->dev, p->rel);
    e->events = p->events;
    e->ep.rdma_write = p->rdma_write;
    e->ep.rdma_read = p->rdma_read;
    if (p->rdma_read && !(e->ep.attrs.RDMAReadSupport & p->rel))
        bu_die("NIC %s does not read by RDMA on %s VIs (RDMAReadSupport 0x%x): use "
               "--reliability delivery or reception", e->ep.dev, bu_reliability_name(p->rel),
               (unsigned)e->ep.attrs.RDMAReadSupport);
    if (p->max_msg > e->ep.attrs.MaxTransferSize)
        bu_die("%u bytes exceed the MaxTransferSize of %s (%lu bytes)", p->max_msg, e->ep.dev,
               (unsigned long)e->ep.attrs.MaxTransferSize);
    if (p->ndesc + BR_CTL_DEPTH > e->ep.attrs.MaxDescriptorsPerQueue)
        bu_die("a queue of NIC %s holds %lu descriptors; %u needed", e->ep.dev,
               (unsigned long)e->ep.attrs.MaxDescriptorsPerQueue, p->ndesc + BR_CTL_DEPTH);
    e->desc = bu_alloc(&e->ep, (p->ndesc + BR_CTL_DEPTH + 1) * sizeof(VIP_DESCRIPTOR),
                       &e->dmh);
    e->ctl_rd = e->desc + p->ndesc;
    e->ctl_sd = e->ctl_rd + BR_CTL_DEPTH;
    e->cbuf = bu_alloc(&e->ep, (BR_CTL_DEPTH + 1) * sizeof(struct br_ctl), &e->cmh);
    e->region_len = p->region_len;
    e->region = bu_alloc_rdma(&e->ep, p->region_len, &e->rmh, p->rdma_write, p->rdma_read);
    if (p->local_len)
        e->local = bu_alloc(&e->ep, p->local_len, &e->lmh);
    bu_open_idle_vis(&e->ep, p->vis);
    e->ep.vi = bu_create_vi(&e->ep);
    /* Up before the connection exists: the peer's first message may come
     * at once. */
    for (unsigned i = 0; i < BR_CTL_DEPTH; i++) {
        bu_desc_init(&e->ctl_rd[i], &e->cbuf[i], e->cmh, sizeof(struct br_ctl));
        BU_CHECK(VipPostRecv(e->ep.vi, &e->ctl_rd[i], e->dmh));
    }
    bu_connect(&e->ep, p->server, p->peer, p->disc);
}

/* The next control receive to complete, waiting at most BU_WAIT_MS, or
 * (forever) as long as the peer lives: a passive target waits the whole
 * run. Checks its status; the caller looks at it, then br_repost. */
static inline VIP_DESCRIPTOR *br_ctl_next(struct br_end *e, bool forever, const char *what)
{
    VIP_DESCRIPTOR *d, *want = &e->ctl_rd[e->ctl_head % BR_CTL_DEPTH];
    VIP_RETURN rc;
    while ((rc = bu_next_desc(e->ep.vi, true, e->events, BU_WAIT_MS, &d)) == VIP_TIMEOUT &&
           forever)
        ;
    if (rc == VIP_TIMEOUT)
        bu_die("no %s from the peer for %u s: it is stuck", what, BU_WAIT_MS / 1000);
    if (rc != VIP_SUCCESS)
        bu_die("%s failed while waiting for the %s: %s: %s", bu_next_desc_call(true, e->events),
               what, vip_strerror(rc), vip_last_error());
    if (d != want)
        bu_die("%s returned an unexpected descriptor (out of order)",
               bu_next_desc_call(true, e->events));
    bu_check_desc(d, what);
    e->ctl_head++;
    return d;
}

static inline void br_repost(struct br_end *e, VIP_DESCRIPTOR *d)
{
    bu_desc_init(d, d->DS[0].Local.Data.Address, e->cmh, sizeof(struct br_ctl));
    BU_CHECK(VipPostRecv(e->ep.vi, d, e->dmh));
}

/* The next control message, which must be of `kind`. */
static inline struct br_ctl br_ctl_recv(struct br_end *e, uint32_t kind, bool forever,
                                        const char *what)
{
    VIP_DESCRIPTOR *d = br_ctl_next(e, forever, what);
    const struct br_ctl *m = d->DS[0].Local.Data.Address;
    if ((d->CS.Status & VIP_STATUS_OP_MASK) != VIP_STATUS_OP_RECEIVE ||
        d->CS.Length != sizeof *m || m->kind != kind)
        bu_die("expected the %s (a %zu-byte message of kind %u), got status 0x%08x, %u bytes, "
               "kind %u", what, sizeof *m, kind, (unsigned)d->CS.Status, (unsigned)d->CS.Length,
               d->CS.Length >= sizeof m->kind ? m->kind : 0);
    struct br_ctl got = *m;
    br_repost(e, d);
    return got;
}

/* Send one control message and wait until it is out. */
static inline void br_ctl_send(struct br_end *e, struct br_ctl m)
{
    struct br_ctl *slot = &e->cbuf[BR_CTL_DEPTH];
    *slot = m;
    bu_desc_init(e->ctl_sd, slot, e->cmh, sizeof *slot);
    BU_CHECK(VipPostSend(e->ep.vi, e->ctl_sd, e->dmh));
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = bu_next_desc(e->ep.vi, false, e->events, BU_WAIT_MS, &d);
    if (rc != VIP_SUCCESS)
        bu_die("sending a control message: %s: %s", vip_strerror(rc), vip_last_error());
    if (d != e->ctl_sd)
        bu_die("a control send completed out of order");
    bu_check_desc(d, "control send");
}

/* Tell the peer our region and learn its: both sides send first, then
 * receive (each has its receives posted since br_setup). */
static inline void br_exchange(struct br_end *e)
{
    br_ctl_send(e, (struct br_ctl){.kind = BR_REGION, .addr = (uintptr_t)e->region,
                                   .handle = e->rmh, .len = (uint32_t)e->region_len});
    e->peer = br_ctl_recv(e, BR_REGION, false, "peer's region");
}

/* An RDMA descriptor (op VIP_CONTROL_OP_RDMAWRITE or _RDMAREAD, with
 * VIP_CONTROL_IMMEDIATE or not): DS[0] the address segment at offset roff
 * of the peer's region, DS[1] the local data. SegCount counts both. */
static inline void br_desc_rdma(VIP_DESCRIPTOR *d, uint16_t control, const struct br_ctl *peer,
                                uint64_t roff, void *buf, VIP_MEM_HANDLE mh, uint32_t len,
                                uint32_t imm)
{
    memset(d, 0, sizeof *d);
    d->CS.Control = control;
    d->CS.SegCount = 2;
    d->CS.Length = len;
    d->CS.ImmediateData = imm;
    d->DS[0].Remote.Data.AddressBits = peer->addr + roff;
    d->DS[0].Remote.Handle = peer->handle;
    d->DS[1].Local.Data.Address = buf;
    d->DS[1].Local.Handle = mh;
    d->DS[1].Local.Length = len;
}

/* Reap the send-queue descriptor `want` (the only one in flight). */
static inline void br_reap(struct br_end *e, VIP_DESCRIPTOR *want, const char *what)
{
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = bu_next_desc(e->ep.vi, false, e->events, BU_WAIT_MS, &d);
    if (rc == VIP_TIMEOUT)
        bu_die("an %s did not complete in %u s", what, BU_WAIT_MS / 1000);
    if (rc != VIP_SUCCESS)
        bu_die("%s failed: %s: %s", bu_next_desc_call(false, e->events), vip_strerror(rc),
               vip_last_error());
    if (d != want)
        bu_die("%s returned descriptor %p, expected %p", bu_next_desc_call(false, e->events),
               (void *)d, (void *)want);
    bu_check_desc(d, what);
}

/*
 * Wait until *p holds `want`, the way ib_write_lat waits for the peer's
 * write: by reading memory. Between looks we lend the NIC our CPU with a
 * VipSendDone on the (empty) send queue, as any poll does; without it the
 * NIC's own thread places the write, a wake-up later (spec-notes/
 * architecture.md). `seq` and `size` are for the message.
 */
static inline void br_poll_byte(struct br_end *e, const volatile uint8_t *p, uint8_t want,
                                uint64_t seq, uint32_t size)
{
    uint64_t deadline = 0;
    for (unsigned i = 1; *p != want; i++) {
        VIP_DESCRIPTOR *d;
        VIP_RETURN rc = VipSendDone(e->ep.vi, &d);
        if (rc != VIP_NOT_DONE)
            bu_die("VipSendDone on an empty send queue returned %s: %s", vip_strerror(rc),
                   vip_last_error());
        if (i % 1024 == 0) {
            uint64_t now = bu_now_ns();
            if (!deadline)
                deadline = now + (uint64_t)BU_WAIT_MS * 1000000u;
            else if (now >= deadline)
                bu_die("write %" PRIu64 " of %u bytes did not land in %u s (last byte %u, "
                       "expected %u): the peer is stuck", seq, size, BU_WAIT_MS / 1000, *p,
                       want);
        }
    }
}

#endif /* BENCH_RDMA_H */

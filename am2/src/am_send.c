/*
 * am_send.c - requests and replies: short and medium messages through a
 * bounce buffer (header, then the medium payload), long ones by an RDMA
 * write into the destination's segment followed by the header.
 *
 * Flow control is the AM-II paper's: a request spends one of the K
 * credits its destination gave us (AM_CREDITS) and the answer to it
 * (reply, ACK when the handler did not reply, or the request returned)
 * gives it back. Answers need no credit: the receive they land in was
 * set aside by the request. So a receiver is never overrun and a handler's
 * reply never waits for the network.
 *
 * A long message's data and header go on the same reliable VI, data
 * first: the target places them in that order, so when the header's
 * handler runs the data are in the segment. The header carries the
 * generation of the destination's segment the sender wrote to; a segment
 * changed in between (AM_SetSeg) makes the destination return it.
 */
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "am_int.h"

#define SEND_SLOT ((sizeof(VIP_DESCRIPTOR) + AM_SLOT + 63) & ~(size_t)63)

struct am_pool {
    struct am_pool *next;
    uint8_t *mem;
    size_t len;
    VIP_MEM_HANDLE mh;
};

uint8_t *am_send_buf(VIP_DESCRIPTOR *d) { return (uint8_t *)d + sizeof(VIP_DESCRIPTOR); }

static VIP_MEM_HANDLE pool_mh(struct am2_ep *ep, VIP_DESCRIPTOR *d)
{
    for (struct am_pool *p = ep->pools; p; p = p->next)
        if ((uint8_t *)d >= p->mem && (uint8_t *)d < p->mem + p->len)
            return p->mh;
    return 0;
}

static int pool_grow(struct am2_ep *ep)
{
    struct am_pool *p = calloc(1, sizeof *p);
    VIP_DESCRIPTOR **fl = realloc(ep->send_free, (size_t)(ep->nsend + AM_NSEND) * sizeof *fl);
    if (!p || !fl) {
        free(p);
        if (fl)
            ep->send_free = fl;
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    }
    ep->send_free = fl;
    p->len = AM_NSEND * SEND_SLOT;
    p->mem = aligned_alloc(4096, (p->len + 4095) & ~(size_t)4095);
    if (!p->mem) {
        free(p);
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    }
    memset(p->mem, 0, p->len);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = am_g.ptag};
    VIP_RETURN rc = VipRegisterMem(am_g.nic, p->mem, p->len, &ma, &p->mh);
    if (rc != VIP_SUCCESS) {
        free(p->mem);
        free(p);
        return am_fail(AM_ERR_RESOURCE, "VipRegisterMem of send buffers: %d", (int)rc);
    }
    p->next = ep->pools;
    ep->pools = p;
    for (int i = AM_NSEND - 1; i >= 0; i--)
        ep->send_free[ep->nsend_free++] = (VIP_DESCRIPTOR *)(p->mem + (size_t)i * SEND_SLOT);
    ep->nsend += AM_NSEND;
    return AM_OK;
}

void am_send_free_all(struct am2_ep *ep)
{
    while (ep->pools) {
        struct am_pool *p = ep->pools;
        ep->pools = p->next;
        VipDeregisterMem(am_g.nic, p->mem, p->mh);
        free(p->mem);
        free(p);
    }
    free(ep->send_free);
    ep->send_free = NULL;
    ep->nsend = ep->nsend_free = 0;
}

/* Take back the sends the NIC finished. A request header that failed
 * (the VI broke under it) comes back to its sender. */
void am_send_reclaim(struct am2_ep *ep)
{
    for (struct am_peer *p = ep->peers; p; p = p->next) {
        VIP_DESCRIPTOR *d;
        while (p->sends_out > 0 && VipSendDone(p->vi, &d) == VIP_SUCCESS) {
            p->sends_out--;
            if ((d->CS.Status & VIP_STATUS_ERROR_MASK) &&
                (d->CS.Control & VIP_CONTROL_OP_MASK) == VIP_CONTROL_OP_SENDRECV) {
                /* a request among them is still recorded: it comes back */
                am_peer_broken(p, "a send failed");
            } else if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
                am_peer_broken(p, "an RDMA write failed");
            }
            ep->send_free[ep->nsend_free++] = d;
        }
    }
}

VIP_DESCRIPTOR *am_send_get(struct am2_ep *ep, bool may_poll)
{
    if (!ep->nsend_free)
        am_send_reclaim(ep);
    if (!ep->nsend_free && ep->nsend < 16 * AM_NSEND)
        pool_grow(ep);
    /* Sends complete on the NIC's own, whatever the peer does: waiting
     * for one cannot deadlock. (The clock is read only when waiting: it
     * costs as much as a tenth of a round trip.) */
    uint64_t end = ep->nsend_free ? 0 : am_now_ms() + am_g.congestion_ms;
    while (!ep->nsend_free) {
        if (may_poll && !am_g.cur)
            am_poll_bundle(ep->eb, 16);
        else
            sched_yield();
        am_send_reclaim(ep);
        if (am_now_ms() > end) {
            am_fail(AM_ERR_RESOURCE, "no send descriptor came back in %u ms", am_g.congestion_ms);
            return NULL;
        }
    }
    return ep->send_free[--ep->nsend_free];
}

int am_send_post(struct am_peer *p, VIP_DESCRIPTOR *d, size_t len)
{
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.Control = VIP_CONTROL_OP_SENDRECV;
    d->CS.SegCount = 1;
    d->CS.Length = (VIP_UINT32)len;
    d->DS[0].Local.Data.Address = am_send_buf(d);
    d->DS[0].Local.Handle = pool_mh(p->ep, d);
    d->DS[0].Local.Length = (VIP_UINT32)len;
    VIP_RETURN rc = VipPostSend(p->vi, d, d->DS[0].Local.Handle);
    if (rc != VIP_SUCCESS) {
        p->ep->send_free[p->ep->nsend_free++] = d;
        am_peer_broken(p, "VipPostSend failed");
        return am_fail(AM_ERR_RESOURCE, "VipPostSend failed with code %d", (int)rc);
    }
    p->sends_out++;
    return AM_OK;
}

/* Through the peer's shared-memory queue when it has one, else the NIC. */
int am_send_ctl(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len)
{
    if (am_shm_attach(p))
        return am_shm_send(p, w, payload, len);
    return am_send_nic(p, w, payload, len);
}

int am_send_nic(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len)
{
    VIP_DESCRIPTOR *d = am_send_get(p->ep, false);
    if (!d)
        return AM_ERR_RESOURCE;
    uint8_t *b = am_send_buf(d);
    memcpy(b, w, sizeof *w);
    if (len)
        memcpy(b + sizeof *w, payload, len);
    return am_send_post(p, d, sizeof *w + len);
}

/* Long messages from outside the segment: up to AM_LONG_COPY bytes are
 * copied into the send descriptor's own registered buffer and written from
 * there (no registration, and the source is free at once); larger ones
 * are written from where they are, through a registration of the
 * AM_REG_WINDOW-aligned window around them (kept in the endpoint's small
 * cache), so that the next source nearby needs none. Such a registration
 * allows no RDMA: peers reach nothing through it. */
#define AM_LONG_COPY AM2_MAX_MEDIUM
#define AM_REG_WINDOW ((uintptr_t)AM2_MAX_LONG)
#define AM_REG_PROBE ((uintptr_t)65536)

static bool in_segment(const struct am2_ep *ep, const void *src, size_t n)
{
    const uint8_t *s = src, *seg = ep->seg;
    return seg && s >= seg && s + n <= seg + ep->seg_len;
}

/* [*lo, *hi) grown from the pages of [s, s + n) by AM_REG_PROBE steps
 * while the memory is mapped, up to the window's bounds. */
static void reg_window(const uint8_t *s, size_t n, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)s & ~(pg - 1), b = ((uintptr_t)s + n + pg - 1) & ~(pg - 1);
    uintptr_t wlo = a & ~(AM_REG_WINDOW - 1), whi = (b + AM_REG_WINDOW - 1) & ~(AM_REG_WINDOW - 1);
    while (a > wlo) {
        uintptr_t step = a - wlo < AM_REG_PROBE ? a - wlo : AM_REG_PROBE;
        if (msync((void *)(a - step), step, MS_ASYNC))
            break;
        a -= step;
    }
    while (b < whi) {
        uintptr_t step = whi - b < AM_REG_PROBE ? whi - b : AM_REG_PROBE;
        if (msync((void *)b, step, MS_ASYNC))
            break;
        b += step;
    }
    *lo = a;
    *hi = b;
}

/* A memory handle for a long message's source outside the segment. */
static int source_mh(struct am2_ep *ep, const void *src, size_t n, VIP_MEM_HANDLE *mh)
{
    const uint8_t *s = src;
    unsigned nreg = sizeof ep->reg / sizeof ep->reg[0];
    for (unsigned i = 0; i < nreg; i++)
        if (ep->reg[i].p && s >= ep->reg[i].p && s + n <= ep->reg[i].p + ep->reg[i].len) {
            *mh = ep->reg[i].mh;
            return AM_OK;
        }
    struct am_reg *r = &ep->reg[ep->reg_next++ % nreg];
    if (r->p)
        VipDeregisterMem(am_g.nic, (VIP_PVOID)r->p, r->mh);
    r->p = NULL;
    VIP_MEM_ATTRIBUTES ma = {.Ptag = am_g.ptag};
    uintptr_t lo, hi;
    reg_window(s, n, &lo, &hi);
    /* The window, else (read-only pages in it, say) the source alone. */
    VIP_RETURN rc = VipRegisterMem(am_g.nic, (VIP_PVOID)lo, hi - lo, &ma, &r->mh);
    if (rc != VIP_SUCCESS) {
        lo = (uintptr_t)s;
        hi = lo + n;
        rc = VipRegisterMem(am_g.nic, (VIP_PVOID)src, n, &ma, &r->mh);
    }
    if (rc != VIP_SUCCESS)
        return am_fail(AM_ERR_RESOURCE, "the NIC cannot read the source (VipRegisterMem: %d)",
                       (int)rc);
    r->p = (const uint8_t *)lo;
    r->len = hi - lo;
    ep->st.registrations++;
    *mh = r->mh;
    return AM_OK;
}

/* Where a long message would land in the peer's segment, or the status
 * that returns it. */
static int seg_check(const struct am_peer *p, uint64_t off, size_t n)
{
    if (!p->seg_len || off > p->seg_len || (n && off >= p->seg_len))
        return EBADSEGOFF;
    if (n > p->seg_len - off)
        return EBADLENGTH;
    return 0;
}

/* RDMA write of the data, then the header; a blocking caller waits for
 * the write so that it may reuse the source (unless it was copied). */
static int send_long(struct am_peer *p, const struct am_wire *w, const void *src, bool wait)
{
    struct am2_ep *ep = p->ep;
    VIP_DESCRIPTOR *d = NULL;
    bool copied = false;
    if (w->nbytes) {
        VIP_MEM_HANDLE mh = 0;
        if (!(d = am_send_get(ep, false)))
            return AM_ERR_RESOURCE;
        if (in_segment(ep, src, w->nbytes)) {
            mh = ep->seg_mh;
        } else if (w->nbytes <= AM_LONG_COPY) {
            memcpy(am_send_buf(d), src, w->nbytes);
            src = am_send_buf(d);
            mh = pool_mh(ep, d);
            copied = true;
        } else if (source_mh(ep, src, w->nbytes, &mh) != AM_OK) {
            ep->send_free[ep->nsend_free++] = d;
            return AM_ERR_RESOURCE;
        }
        memset(d, 0, sizeof *d);
        d->CS.Control = VIP_CONTROL_OP_RDMAWRITE;
        d->CS.SegCount = 2;
        d->CS.Length = w->nbytes;
        d->DS[0].Remote.Data.AddressBits = p->seg_base + w->offset;
        d->DS[0].Remote.Handle = p->seg_mh;
        d->DS[1].Local.Data.Address = (VIP_PVOID)src;
        d->DS[1].Local.Handle = mh;
        d->DS[1].Local.Length = w->nbytes;
        VIP_RETURN rc = VipPostSend(p->vi, d, pool_mh(ep, d));
        if (rc != VIP_SUCCESS) {
            ep->send_free[ep->nsend_free++] = d;
            am_peer_broken(p, "VipPostSend of an RDMA write failed");
            return am_fail(AM_ERR_RESOURCE, "VipPostSend (RDMA write) failed: %d", (int)rc);
        }
        p->sends_out++;
    }
    int r = am_send_nic(p, w, NULL, 0); /* behind the data, on the same VI */
    if (r != AM_OK || !d || !wait || copied)
        return r;
    /* The write's status word, while reclaiming the VI's finished sends:
     * that lends the NIC our CPU (VipSendDone), where spinning on the word
     * alone left the write to the NIC's thread and its doze of up to 16 ms
     * (an AMLong round trip took milliseconds). The descriptor goes back
     * to the free list only once done, and nothing here takes one. */
    uint64_t end = am_now_ms() + am_g.congestion_ms;
    while (!(__atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE)) {
        am_send_reclaim(ep);
        if (am_now_ms() > end)
            return am_fail(AM_ERR_RESOURCE, "an RDMA write did not complete in %u ms",
                           am_g.congestion_ms);
    }
    return AM_OK;
}

/* A long message through shared memory: the data in pieces the
 * destination copies into its segment, then the header (one queue from
 * one sender keeps their order). The source may be reused at once. */
static int shm_long(struct am_peer *p, struct am_wire *w, const uint8_t *src)
{
    for (size_t off = 0; off < w->nbytes; off += AM2_MAX_MEDIUM) {
        size_t n = w->nbytes - off < AM2_MAX_MEDIUM ? w->nbytes - off : AM2_MAX_MEDIUM;
        struct am_wire d = {.kind = AMW_LONGDATA, .offset = w->offset + off, .nbytes = (uint32_t)n};
        int r = am_shm_send(p, &d, src + off, n);
        if (r != AM_OK)
            return r;
    }
    w->seg_gen = AM_GEN_PLACED;
    return am_shm_send(p, w, NULL, 0);
}

static int fill_wire(struct am_wire *w, int kind, int cat, handler_t h, size_t nbytes,
                     uint64_t off, int nargs, va_list ap)
{
    static const size_t max[AM2_NCAT] = {0, AM2_MAX_MEDIUM, AM2_MAX_LONG};
    if (nargs < 0 || nargs > AM2_MAX_SHORT)
        return am_fail(AM_ERR_BAD_ARG, "%d arguments (0..%d)", nargs, AM2_MAX_SHORT);
    if (nbytes > max[cat])
        return am_fail(AM_ERR_BAD_ARG, "%zu bytes (at most %zu)", nbytes, max[cat]);
    memset(w, 0, sizeof *w);
    w->kind = (uint8_t)kind;
    w->cat = (uint8_t)cat;
    w->handler = h;
    w->nargs = (uint8_t)nargs;
    w->nbytes = (uint32_t)nbytes;
    w->offset = off;
    for (int i = 0; i < nargs; i++)
        w->args[i] = (int32_t)va_arg(ap, int);
    return AM_OK;
}

static void count_sent(struct am2_ep *ep, const struct am_wire *w)
{
    if (w->kind == AMW_REQUEST) {
        ep->st.requests_sent[w->cat]++;
        ep->st.request_bytes_sent[w->cat] += w->nbytes;
        ep->st.request_args_sent[w->cat] += w->nargs;
    } else {
        ep->st.replies_sent[w->cat]++;
        ep->st.reply_args_sent[w->cat] += w->nargs;
    }
    ep->st.bytes_sent[w->cat] += w->nbytes;
}

/* Wait (polling) for a credit; ECONGESTION if none comes in time. */
static int take_credit(struct am_peer *p, bool async)
{
    if (p->credits > 0) {
        p->credits--;
        return 0;
    }
    if (async)
        return -1;
    p->ep->st.credit_waits++;
    uint64_t end = am_now_ms() + am_g.congestion_ms;
    while (p->credits == 0) {
        if (p->state == PEER_BROKEN || (!p->shmq && p->state != PEER_CONNECTED) ||
            !am_shm_peer_alive(p))
            return EBADENDPOINT;
        am_poll_bundle(p->ep->eb, 16);
        if (p->credits == 0 && am_now_ms() > end)
            return ECONGESTION;
    }
    p->credits--;
    return 0;
}

static int request(struct am2_ep *ep, int dest, int cat, handler_t h, void *src, size_t nbytes,
                   uint64_t off, bool async, int nargs, va_list ap)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ep))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    if (am_g.cur)
        return am_fail(AM_ERR_BAD_ARG, "a handler may not send requests (only one reply)");
    if (dest < 0 || dest >= ep->nxl || !ep->xl[dest].inuse)
        return am_fail(AM_ERR_BAD_ARG, "translation index %d is not mapped", dest);
    if (nbytes && !src)
        return am_fail(AM_ERR_BAD_ARG, "NULL source of %zu bytes", nbytes);
    struct am_wire w;
    int r = fill_wire(&w, AMW_REQUEST, cat, h, nbytes, off, nargs, ap);
    if (r != AM_OK)
        return r;
    struct am_xlate *x = &ep->xl[dest];
    w.tag = x->tag;
    /* Polls below run handlers, which may change the table: keep a copy. */
    const en_t name = x->name;
    /* An endpoint of this process, live or freed: no VI (am_local.c). */
    if (name.pid == ep->name.pid && !memcmp(name.nic, ep->name.nic, 6)) {
        count_sent(ep, &w);
        return am_local_send(ep, &name, &w, src);
    }
    if (!x->peer && !(x->peer = am_peer_get(ep, &name)))
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    struct am_peer *p = x->peer;
    bool shm = am_shm_attach(p);
    int st = shm                          ? (p->state == PEER_BROKEN ? EBADENDPOINT : 0)
             : p->state == PEER_CONNECTED ? 0
                                          : am_peer_connect(p, am_now_ms() + am_g.connect_ms);
    if (!st && !shm && cat == AM2_LONG && !p->hello) {
        uint64_t end = am_now_ms() + am_g.connect_ms;
        while (!p->hello && p->state == PEER_CONNECTED && am_now_ms() < end)
            am_poll_bundle(ep->eb, 16);
        st = p->hello ? 0 : EUNREACHABLE;
    }
    if (!st && !shm && p->state != PEER_CONNECTED)
        st = EBADENDPOINT;
    if (!st && !shm && cat == AM2_LONG)
        st = seg_check(p, off, nbytes);
    if (!st && (st = take_credit(p, async)) < 0)
        return am_fail(AM_ERR_NOT_SENT, "no credit for the destination now");
    if (st) {
        /* Undeliverable before it left: back to handler 0 at the next poll. */
        am_ret_push(ep, &w, &name, st);
        return AM_OK;
    }
    count_sent(ep, &w);
    am_out_add(p, &w);
    if (cat == AM2_LONG && shm) {
        r = shm_long(p, &w, src);
    } else if (cat == AM2_LONG) {
        w.seg_gen = p->seg_gen;
        r = send_long(p, &w, src, !async);
    } else {
        r = am_send_ctl(p, &w, src, nbytes);
    }
    if (r != AM_OK && p->state == PEER_BROKEN) {
        am_peer_broken(p, "a send failed"); /* returns it, if still recorded */
        return AM_OK;
    }
    if (r != AM_OK && am_out_done(p, w.rseq))
        p->credits++;
    return r;
}

int AM2_Request(ep_t ep, int dest, handler_t h, int nargs, ...)
{
    va_list ap;
    va_start(ap, nargs);
    int r = request(ep, dest, AM2_SHORT, h, NULL, 0, 0, false, nargs, ap);
    va_end(ap);
    return r;
}

int AM2_RequestI(ep_t ep, int dest, handler_t h, void *src, size_t nbytes, int nargs, ...)
{
    va_list ap;
    va_start(ap, nargs);
    int r = request(ep, dest, AM2_MEDIUM, h, src, nbytes, 0, false, nargs, ap);
    va_end(ap);
    return r;
}

int AM2_RequestXfer(ep_t ep, int dest, uintptr_t off, handler_t h, void *src, size_t nbytes,
                    int async, int nargs, ...)
{
    va_list ap;
    va_start(ap, nargs);
    int r = request(ep, dest, AM2_LONG, h, src, nbytes, off, async != 0, nargs, ap);
    va_end(ap);
    return r;
}

static int reply(void *token, int cat, handler_t h, void *src, size_t nbytes, uint64_t off,
                 int nargs, va_list ap)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    struct am_token *t = token;
    if (!t || t != am_g.cur)
        return am_fail(AM_ERR_BAD_ARG, "not the token of the running handler");
    if (!t->is_request || t->returned)
        return am_fail(AM_ERR_BAD_ARG, "a reply handler may not send");
    if (t->replied)
        return am_fail(AM_ERR_BAD_ARG, "a request handler replies at most once");
    if (nbytes && !src)
        return am_fail(AM_ERR_BAD_ARG, "NULL source of %zu bytes", nbytes);
    struct am_wire w;
    int r = fill_wire(&w, AMW_REPLY, cat, h, nbytes, off, nargs, ap);
    if (r != AM_OK)
        return r;
    struct am2_ep *ep = t->ep;
    if (t->src_idx >= 0 && t->src_idx < ep->nxl && ep->xl[t->src_idx].inuse)
        w.tag = ep->xl[t->src_idx].tag;
    w.rseq = t->w->rseq;
    t->replied = true;
    count_sent(ep, &w);
    if (!t->peer)
        return am_local_send(ep, &t->src, &w, src);
    struct am_peer *p = t->peer;
    if (cat != AM2_LONG)
        return am_send_ctl(p, &w, src, nbytes);
    if (am_shm_attach(p))
        return shm_long(p, &w, src);
    int st = seg_check(p, off, nbytes);
    if (st) {
        /* The requester still gets its credit back. */
        am_ret_push(ep, &w, &p->name, st);
        struct am_wire ack = {.kind = AMW_ACK, .rseq = w.rseq};
        return am_send_ctl(p, &ack, NULL, 0);
    }
    w.seg_gen = p->seg_gen;
    return send_long(p, &w, src, true);
}

int AM2_Reply(void *token, handler_t h, int nargs, ...)
{
    va_list ap;
    va_start(ap, nargs);
    int r = reply(token, AM2_SHORT, h, NULL, 0, 0, nargs, ap);
    va_end(ap);
    return r;
}

int AM2_ReplyI(void *token, handler_t h, void *src, size_t nbytes, int nargs, ...)
{
    va_list ap;
    va_start(ap, nargs);
    int r = reply(token, AM2_MEDIUM, h, src, nbytes, 0, nargs, ap);
    va_end(ap);
    return r;
}

int AM2_ReplyXfer(void *token, uintptr_t off, handler_t h, void *src, size_t nbytes, int nargs,
                  ...)
{
    va_list ap;
    va_start(ap, nargs);
    int r = reply(token, AM2_LONG, h, src, nbytes, off, nargs, ap);
    va_end(ap);
    return r;
}

/* Tell every connected peer of a new segment and wait until each has
 * answered, so nothing is written to the old one after this returns. */
int am_send_seg(struct am2_ep *ep)
{
    for (struct am_peer *p = ep->peers; p; p = p->next) {
        if (p->state != PEER_CONNECTED)
            continue;
        if (take_credit(p, false))
            continue;
        struct am_wire w = {.kind = AMW_SEG,
                            .offset = (uint64_t)(uintptr_t)ep->seg,
                            .seg_len = ep->seg_len,
                            .seg_mh = ep->seg_mh,
                            .seg_gen = ep->seg_gen};
        if (am_send_ctl(p, &w, NULL, 0) == AM_OK)
            p->seg_acks_owed++;
        else
            p->credits++;
    }
    uint64_t end = am_now_ms() + am_g.congestion_ms;
    for (;;) {
        bool owed = false;
        for (struct am_peer *p = ep->peers; p; p = p->next)
            owed |= p->seg_acks_owed > 0 && p->state == PEER_CONNECTED;
        if (!owed)
            return AM_OK;
        if (am_now_ms() > end)
            return am_fail(AM_ERR_RESOURCE, "peers did not acknowledge the new segment");
        am_poll_bundle(ep->eb, 16);
    }
}

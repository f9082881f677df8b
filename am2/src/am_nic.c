/*
 * am_nic.c - messages to a peer through the NIC: the endpoint's send
 * descriptors with their registered bounce buffers (grown on demand,
 * taken back once the NIC is done with them), short and medium messages
 * through those buffers, long ones by an RDMA write into the
 * destination's segment followed by the header.
 *
 * A long message's data and header go on the same reliable VI, data
 * first: the target places them in that order, so when the header's
 * handler runs the data are in the segment.
 *
 * Nothing here polls: waiting for a descriptor or a write lends the NIC
 * our CPU (VipSendDone) and nothing else, so the files that poll may
 * call this one.
 */
#include <sched.h>
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

VIP_DESCRIPTOR *am_send_get(struct am2_ep *ep)
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

int am_send_nic(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len)
{
    VIP_DESCRIPTOR *d = am_send_get(p->ep);
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

/* RDMA write of the data, then the header; a blocking caller waits for
 * the write so that it may reuse the source (unless it was copied). */
int am_send_long(struct am_peer *p, const struct am_wire *w, const void *src, bool wait)
{
    struct am2_ep *ep = p->ep;
    VIP_DESCRIPTOR *d = NULL;
    bool copied = false;
    if (w->nbytes) {
        VIP_MEM_HANDLE mh = 0;
        if (!(d = am_send_get(ep)))
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

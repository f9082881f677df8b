/*
 * am_send.c - requests and replies: to an endpoint of this process
 * (am_local.c), through a same-host peer's shared-memory queue (am_shm.c),
 * or through the NIC (am_nic.c), waiting for a connection or a credit.
 *
 * Flow control is the AM-II paper's: a request spends one of the K
 * credits its destination gave us (AM_CREDITS) and the answer to it
 * (reply, ACK when the handler did not reply, or the request returned)
 * gives it back. Answers need no credit: the receive they land in was
 * set aside by the request. So a receiver is never overrun and a handler's
 * reply never waits for the network.
 *
 * A long message's header carries the generation of the destination's
 * segment the sender wrote to; a segment changed in between (AM_SetSeg)
 * makes the destination return it.
 */
#include <stdarg.h>
#include <string.h>

#include "am_int.h"

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

/* Connect p, polling between the turns of asking (am_conn.c), so that
 * what comes meanwhile (the peer asking us, say) is handled. */
static int connect_peer(struct am_peer *p, uint64_t deadline)
{
    int st;
    while ((st = am_peer_ask(p)) == AM_CONN_AGAIN) {
        am_poll_bundle(p->ep->eb, 16);
        if (am_now_ms() >= deadline)
            return EUNREACHABLE;
    }
    return st;
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
                                          : connect_peer(p, am_now_ms() + am_g.connect_ms);
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
        r = am_shm_send_long(p, &w, src);
    } else if (cat == AM2_LONG) {
        w.seg_gen = p->seg_gen;
        r = am_send_long(p, &w, src, !async);
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
        return am_shm_send_long(p, &w, src);
    int st = seg_check(p, off, nbytes);
    if (st) {
        /* The requester still gets its credit back. */
        am_ret_push(ep, &w, &p->name, st);
        struct am_wire ack = {.kind = AMW_ACK, .rseq = w.rseq};
        return am_send_ctl(p, &ack, NULL, 0);
    }
    w.seg_gen = p->seg_gen;
    return am_send_long(p, &w, src, true);
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

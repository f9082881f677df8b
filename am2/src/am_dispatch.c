/*
 * am_dispatch.c - what a received message does, whichever way it came
 * (VI, shared memory, or from this process): the checks a request must
 * pass, running handlers, returning what cannot be delivered, and what a
 * token tells a handler.
 *
 * What happens to each kind of message is a table (kind_fn), one
 * function per kind. A request's checks run in a fixed order (tag, source
 * entry, arguments, handler, segment); the first that fails is the status
 * the request is returned with. A message comes back once: a returned
 * message is never returned again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

/* ---- calling handlers ----------------------------------------------------------------- */

typedef int32_t I;
#define T0
#define T1 , I
#define T2 T1, I
#define T3 T2, I
#define T4 T3, I
#define T5 T4, I
#define T6 T5, I
#define T7 T6, I
#define T8 T7, I
#define T9 T8, I
#define T10 T9, I
#define T11 T10, I
#define T12 T11, I
#define T13 T12, I
#define T14 T13, I
#define T15 T14, I
#define T16 T15, I
#define V0
#define V1 , a[0]
#define V2 V1, a[1]
#define V3 V2, a[2]
#define V4 V3, a[3]
#define V5 V4, a[4]
#define V6 V5, a[5]
#define V7 V6, a[6]
#define V8 V7, a[7]
#define V9 V8, a[8]
#define V10 V9, a[9]
#define V11 V10, a[10]
#define V12 V11, a[11]
#define V13 V12, a[12]
#define V14 V13, a[13]
#define V15 V14, a[14]
#define V16 V15, a[15]
#define CASE_S(n)                                                                          \
    case n:                                                                                \
        ((void (*)(void *T##n))fn)(tok V##n);                                              \
        break;
#define CASE_M(n)                                                                          \
    case n:                                                                                \
        ((void (*)(void *, void *, size_t T##n))fn)(tok, buf, nbytes V##n);                \
        break;
#define ALL_CASES(C)                                                                       \
    C(0) C(1) C(2) C(3) C(4) C(5) C(6) C(7) C(8) C(9) C(10) C(11) C(12) C(13) C(14) C(15) C(16)

static void call_handler(am2_handler_fn_t fn, void *tok, int cat, void *buf, size_t nbytes,
                         int nargs, const int32_t *a)
{
    if (cat == AM2_SHORT) {
        switch (nargs) { ALL_CASES(CASE_S) }
    } else {
        switch (nargs) { ALL_CASES(CASE_M) }
    }
}

op_t am_opcode(const struct am_wire *w)
{
    int kind = w->kind == AMW_RETURN ? w->rkind : w->kind;
    static const op_t req[AM2_NCAT] = {AM_REQUEST_M, AM_REQUEST_IM, AM_REQUEST_XFER_M};
    static const op_t rep[AM2_NCAT] = {AM_REPLY_M, AM_REPLY_IM, AM_REPLY_XFER_M};
    int cat = w->cat < AM2_NCAT ? w->cat : 0;
    return kind == AMW_REPLY ? rep[cat] : req[cat];
}

/* ---- checks ---------------------------------------------------------------------------- */

static int src_index(struct am2_ep *ep, struct am_peer *peer, const en_t *src)
{
    if (peer)
        return peer->xidx;
    for (int i = 0; i < ep->nxl; i++)
        if (ep->xl[i].inuse && memcmp(&ep->xl[i].name, src, sizeof *src) == 0)
            return i;
    return -1;
}

/* The part of the checks both requests and replies pass: arguments,
 * handler, segment. */
int am_check_body(struct am2_ep *ep, const struct am_wire *w)
{
    if (w->nargs > AM2_MAX_SHORT || w->cat >= AM2_NCAT ||
        (w->cat == AM2_MEDIUM && w->nbytes > AM2_MAX_MEDIUM) ||
        (w->cat == AM2_LONG && w->nbytes > AM2_MAX_LONG) || (w->cat == AM2_SHORT && w->nbytes))
        return EBADARGS;
    if (w->handler == 0 || !ep->handler[w->handler])
        return EBADHANDLER;
    if (w->cat == AM2_LONG) {
        if ((w->seg_gen != ep->seg_gen && w->seg_gen != AM_GEN_PLACED) || !ep->seg_len || w->offset > ep->seg_len ||
            (w->nbytes && w->offset >= ep->seg_len))
            return EBADSEGOFF;
        if (w->nbytes > ep->seg_len - w->offset)
            return EBADLENGTH;
    }
    return 0;
}

int am_check_request(struct am2_ep *ep, struct am_peer *peer, const struct am_wire *w,
                     const en_t *src, int *src_idx)
{
    *src_idx = src_index(ep, peer, src);
    if (ep->tag == AM_NONE || (ep->tag != AM_ALL && w->tag != ep->tag))
        return EBADTAG;
    if (*src_idx < 0)
        return EBADENTRY;
    return am_check_body(ep, w);
}

/* ---- running handlers ------------------------------------------------------------------ */

static void run(struct am_token *t, const struct am_wire *w, void *buf)
{
    struct am2_ep *ep = t->ep;
    void *data = w->cat == AM2_LONG ? (uint8_t *)ep->seg + w->offset : buf;
    am_g.cur = t;
    call_handler(ep->handler[w->handler], t, w->cat, data, w->nbytes, w->nargs, w->args);
    am_g.cur = NULL;
}

void am_dispatch(struct am2_ep *ep, struct am_peer *peer, const struct am_wire *w,
                 const void *payload, const en_t *src)
{
    struct am_token t = {.ep = ep, .peer = peer, .w = w, .src = *src, .msg_tag = w->tag,
                         .is_request = w->kind == AMW_REQUEST};
    t.src_idx = src_index(ep, peer, src);
    if (t.is_request)
        ep->st.requests_received[w->cat]++;
    else
        ep->st.replies_received[w->cat]++;
    ep->st.bytes_received[w->cat] += w->nbytes;
    run(&t, w, (void *)payload);
    if (t.is_request && !t.replied && peer) {
        struct am_wire ack = {.kind = AMW_ACK, .rseq = w->rseq};
        am_send_ctl(peer, &ack, NULL, 0);
    }
}

static void run_returned(struct am2_ep *ep, struct am_peer *peer, const struct am_wire *w,
                         const en_t *dest)
{
    struct am_token t = {.ep = ep, .peer = peer, .w = w, .src = *dest, .msg_tag = w->tag,
                         .returned = true, .src_idx = -1};
    ep->st.returned++;
    am_g.cur = &t;
    ((void (*)(int, op_t, void *))ep->handler[0])(w->status, am_opcode(w), &t);
    am_g.cur = NULL;
}

void am_run_returns(struct am2_ep *ep)
{
    while (ep->rets) {
        struct am_ret *r = ep->rets;
        ep->rets = r->next;
        if (!ep->rets)
            ep->rets_tail = &ep->rets;
        run_returned(ep, NULL, &r->w, &r->dest);
        free(r);
    }
}

/* ---- one message off the wire, by kind ---------------------------------------------------- */

static void send_return(struct am_peer *p, const struct am_wire *w, int status)
{
    struct am_wire r = *w;
    r.rkind = w->kind;
    r.kind = AMW_RETURN;
    r.status = (uint16_t)status;
    p->ep->st.refused++;
    am_send_ctl(p, &r, NULL, 0);
}

static void on_request(struct am_peer *p, const struct am_wire *w, void *buf)
{
    int idx;
    int st = am_check_request(p->ep, p, w, &p->name, &idx);
    if (st)
        send_return(p, w, st);
    else
        am_dispatch(p->ep, p, w, buf, &p->name);
}

static void on_reply(struct am_peer *p, const struct am_wire *w, void *buf)
{
    int st = am_check_body(p->ep, w);
    if (st) {
        /* The credit comes back with the RET_ACK of this return. */
        send_return(p, w, st);
        return;
    }
    p->credits++;
    am_out_done(p, w->rseq);
    am_dispatch(p->ep, p, w, buf, &p->name);
}

static void on_ack(struct am_peer *p, const struct am_wire *w, void *buf)
{
    (void)buf;
    p->credits++;
    am_out_done(p, w->rseq);
}

static void on_return(struct am_peer *p, const struct am_wire *w, void *buf)
{
    (void)buf;
    if (w->rkind == AMW_REQUEST) {
        p->credits++;
        am_out_done(p, w->rseq);
    }
    run_returned(p->ep, p, w, &p->name);
    if (w->rkind == AMW_REPLY) {
        struct am_wire ack = {.kind = AMW_RET_ACK, .rseq = w->rseq};
        am_send_ctl(p, &ack, NULL, 0);
    }
}

static void on_seg(struct am_peer *p, const struct am_wire *w, void *buf)
{
    (void)buf;
    p->seg_base = w->offset;
    p->seg_len = w->seg_len;
    p->seg_mh = w->seg_mh;
    p->seg_gen = w->seg_gen;
    if (w->kind == AMW_HELLO) {
        p->hello = true;
    } else {
        struct am_wire ack = {.kind = AMW_SEG_ACK};
        am_send_ctl(p, &ack, NULL, 0);
    }
}

static void on_seg_ack(struct am_peer *p, const struct am_wire *w, void *buf)
{
    (void)w;
    (void)buf;
    p->credits++;
    if (p->seg_acks_owed > 0)
        p->seg_acks_owed--;
}

/* A piece of a long message through shared memory: into the segment if
 * it fits (the header that follows is checked the same way and returned
 * if not). */
static void on_longdata(struct am_peer *p, const struct am_wire *w, void *buf)
{
    struct am2_ep *ep = p->ep;
    if (ep->seg_len && w->offset <= ep->seg_len && w->nbytes <= ep->seg_len - w->offset)
        memcpy((uint8_t *)ep->seg + w->offset, buf, w->nbytes);
}

static void (*const kind_fn[AMW_NKINDS])(struct am_peer *, const struct am_wire *, void *) = {
    [AMW_REQUEST] = on_request, [AMW_REPLY] = on_reply,   [AMW_ACK] = on_ack,
    [AMW_RETURN] = on_return,   [AMW_RET_ACK] = on_ack,   [AMW_HELLO] = on_seg,
    [AMW_SEG] = on_seg,         [AMW_SEG_ACK] = on_seg_ack, [AMW_LONGDATA] = on_longdata,
};

void am_handle_msg(struct am_peer *p, const struct am_wire *w, size_t len)
{
    bool data = w->kind == AMW_LONGDATA ||
                ((w->kind == AMW_REQUEST || w->kind == AMW_REPLY) && w->cat == AM2_MEDIUM);
    bool ok = len >= sizeof *w && w->kind > 0 && w->kind < AMW_NKINDS &&
              w->nbytes <= AM2_MAX_LONG && len == sizeof *w + (data ? w->nbytes : 0);
    if (ok)
        kind_fn[w->kind](p, w, (uint8_t *)w + sizeof *w);
    else if (len >= sizeof *w && w->kind == AMW_REQUEST)
        send_return(p, w, EBADARGS);
    else if (getenv("AM2_DEBUG"))
        fprintf(stderr, "am2: dropped a malformed message of %zu bytes\n", len);
}

/* ---- what a token says --------------------------------------------------------------------------- */

static struct am_token *tok_ok(void *token)
{
    return token && token == am_g.cur ? token : NULL;
}

int AM_GetSourceEndpoint(void *token, en_t *name)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    struct am_token *t = tok_ok(token);
    if (!t || !name)
        return am_fail(AM_ERR_BAD_ARG, "not the token of the running handler, or NULL name");
    *name = t->src;
    return AM_OK;
}

int AM_GetDestEndpoint(void *token, ep_t *endp)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    struct am_token *t = tok_ok(token);
    if (!t || !endp)
        return am_fail(AM_ERR_BAD_ARG, "not the token of the running handler, or NULL result");
    *endp = t->ep;
    return AM_OK;
}

int AM_GetMsgTag(void *token, tag_t *tag)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    struct am_token *t = tok_ok(token);
    if (!t || !tag)
        return am_fail(AM_ERR_BAD_ARG, "not the token of the running handler, or NULL tag");
    *tag = t->msg_tag;
    return AM_OK;
}

int AMX_GetSourceId(void *token, int *index)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    struct am_token *t = tok_ok(token);
    if (!t || !index)
        return am_fail(AM_ERR_BAD_ARG, "not the token of the running handler, or NULL index");
    if (t->src_idx < 0)
        return am_fail(AM_ERR_RESOURCE, "the source is not in the translation table");
    *index = t->src_idx;
    return AM_OK;
}

int AMX_GetReturned(void *token, handler_t *handler, int *nargs, int32_t *args, size_t *nbytes)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    struct am_token *t = tok_ok(token);
    if (!t || !t->returned)
        return am_fail(AM_ERR_BAD_ARG, "not the token of a running returned-message handler");
    if (handler)
        *handler = t->w->handler;
    if (nargs)
        *nargs = t->w->nargs;
    if (args)
        memcpy(args, t->w->args, (size_t)t->w->nargs * sizeof *args);
    if (nbytes)
        *nbytes = t->w->nbytes;
    return AM_OK;
}

/*
 * am_local.c - messages between endpoints of one process (an endpoint
 * mapped to itself, or to another endpoint of the same program).
 *
 * A VI cannot connect a process to itself while one thread both asks and
 * accepts, and a copy is all such a message needs: the sender copies the
 * header and medium payload into a queue of the destination endpoint
 * (long data straight into its segment, so the source may be reused at
 * once), and the destination's next AM_Poll runs the handler. The checks
 * are the network's (am_check_request), so a local message is returned
 * for exactly the reasons a remote one would be. No credits: the queue
 * grows as needed.
 */
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

struct am_msgq {
    struct am_msgq *next;
    struct am_wire w;
    en_t src;
    uint8_t payload[];
};

int am_local_send(struct am2_ep *from, const en_t *to, const struct am_wire *w,
                  const void *payload)
{
    struct am2_ep *dest = am_ep_by_name(to);
    if (!dest) {
        am_ret_push(from, w, to, EBADENDPOINT);
        return AM_OK;
    }
    size_t plen = w->cat == AM2_MEDIUM ? w->nbytes : 0;
    struct am_msgq *m = malloc(sizeof *m + plen);
    if (!m)
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    m->next = NULL;
    m->w = *w;
    m->src = from->name;
    if (plen)
        memcpy(m->payload, payload, plen);
    if (w->cat == AM2_LONG) {
        /* Bounds as the destination would check them; the data go now. */
        m->w.seg_gen = dest->seg_gen;
        int st = 0;
        if (!dest->seg_len || w->offset > dest->seg_len || (w->nbytes && w->offset >= dest->seg_len))
            st = EBADSEGOFF;
        else if (w->nbytes > dest->seg_len - w->offset)
            st = EBADLENGTH;
        if (st) {
            free(m);
            am_ret_push(from, w, to, st);
            return AM_OK;
        }
        if (w->nbytes)
            memmove((uint8_t *)dest->seg + w->offset, payload, w->nbytes);
    }
    if (!dest->localq_tail)
        dest->localq_tail = &dest->localq;
    *dest->localq_tail = m;
    dest->localq_tail = &m->next;
    am_shm_ring(dest); /* another thread may sleep on it (AM_PAR) */
    return AM_OK;
}

int am_local_poll(struct am2_ep *ep)
{
    int n = 0;
    /* Only what is queued now: handlers may queue more (replies to us). */
    struct am_msgq *q = ep->localq;
    ep->localq = NULL;
    ep->localq_tail = &ep->localq;
    while (q) {
        struct am_msgq *m = q;
        q = m->next;
        int idx, st;
        if (m->w.kind == AMW_REQUEST)
            st = am_check_request(ep, NULL, &m->w, &m->src, &idx);
        else
            st = am_check_body(ep, &m->w); /* replies: no tag or entry check */
        if (st) {
            struct am2_ep *sender = am_ep_by_name(&m->src);
            ep->st.refused++;
            if (sender)
                am_ret_push(sender, &m->w, &ep->name, st);
        } else {
            am_dispatch(ep, NULL, &m->w, m->payload, &m->src);
        }
        free(m);
        n++;
    }
    return n;
}

void am_local_drop(struct am2_ep *ep)
{
    while (ep->localq) {
        struct am_msgq *m = ep->localq;
        ep->localq = m->next;
        free(m);
    }
    ep->localq_tail = &ep->localq;
}

/*
 * am_peer.c - an endpoint's record of a remote endpoint, whichever way
 * messages go to it (shared memory or a VI): the peers by name, the
 * requests sent it and not answered yet (am_out), and what happens to
 * them when it breaks.
 *
 * The shared-memory path and the VI path both find peers and mark them
 * broken, so this record sits below both and calls only am_core.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

const char *const am_peer_state_name[PEER_NSTATES] = {
    [PEER_IDLE] = "idle", [PEER_CONNECTED] = "connected", [PEER_BROKEN] = "broken"};

struct am_peer *am_peer_find(struct am2_ep *ep, const en_t *name)
{
    for (struct am_peer *p = ep->peers; p; p = p->next)
        if (memcmp(&p->name, name, sizeof *name) == 0)
            return p;
    return NULL;
}

struct am_peer *am_peer_get(struct am2_ep *ep, const en_t *name)
{
    struct am_peer *p = am_peer_find(ep, name);
    if (p)
        return p;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->ep = ep;
    p->name = *name;
    p->xidx = -1;
    p->credits = AM_CREDITS;
    for (int i = 0; i < ep->nxl; i++)
        if (ep->xl[i].inuse && memcmp(&ep->xl[i].name, name, sizeof *name) == 0) {
            ep->xl[i].peer = p;
            if (p->xidx < 0)
                p->xidx = i;
        }
    p->next = ep->peers;
    ep->peers = p;
    return p;
}

/* The peer is gone (or its VI): every request it has not answered comes
 * back to handler 0 with EBADENDPOINT, and its credit with it. Called
 * again later it returns what was recorded since (a send under way). */
void am_peer_broken(struct am_peer *p, const char *why)
{
    if (p->state != PEER_BROKEN && getenv("AM2_DEBUG"))
        fprintf(stderr, "am2: the VI to endpoint %08x.%06x is broken: %s\n",
                (unsigned)p->name.pid, (unsigned)p->name.id, why);
    p->state = PEER_BROKEN;
    for (int i = 0; i < AM_CREDITS; i++)
        if (p->out[i].seq) {
            am_ret_push(p->ep, &p->out[i].w, &p->name, EBADENDPOINT);
            p->out[i].seq = 0;
            p->credits++;
        }
}

void am_out_add(struct am_peer *p, struct am_wire *w)
{
    if (++p->next_seq == 0)
        p->next_seq = 1;
    w->rseq = p->next_seq;
    for (int i = 0; i < AM_CREDITS; i++)
        if (!p->out[i].seq) {
            p->out[i].seq = w->rseq;
            p->out[i].w = *w;
            return;
        }
}

bool am_out_done(struct am_peer *p, uint32_t seq)
{
    for (int i = 0; seq && i < AM_CREDITS; i++)
        if (p->out[i].seq == seq) {
            p->out[i].seq = 0;
            return true;
        }
    return false;
}

bool am_peer_waiting(const struct am_peer *p)
{
    for (int i = 0; i < AM_CREDITS; i++)
        if (p->out[i].seq)
            return true;
    return false;
}

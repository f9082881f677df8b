/*
 * am_bundle.c - AM_Init/AM_Terminate, bundles, the event mask,
 * AM_WaitSema and AM_Poll.
 *
 * The process opens one NIC (AM2_NIC, default via0) and one ptag at the
 * first AM_Init. A bundle owns the completion queue every VI of its
 * endpoints completes receives on, so AM_Poll drains one queue and
 * AM_WaitSema sleeps in one VipCQWait.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

/* The AM2_* settings are read once, by AM_Init, before anything is
 * opened: a value this library would not understand is refused (said on
 * stderr and in AMX_LastError), never read as the default in silence. */
static int env_ms(const char *name, unsigned dflt, unsigned *out)
{
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v)
        return AM_OK;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*end || *v == '-' || n > 3600000ul) {
        fprintf(stderr, "am2: %s=%s: milliseconds, 0 to 3600000\n", name, v);
        return am_fail(AM_ERR_BAD_ARG, "%s=%s: milliseconds, 0 to 3600000", name, v);
    }
    *out = (unsigned)n;
    return AM_OK;
}

/* A switch that is on unless set to 0. */
static int env_flag(const char *name, bool *out)
{
    const char *v = getenv(name);
    *out = !v || !*v || strcmp(v, "0") != 0;
    if (v && *v && strcmp(v, "0") && strcmp(v, "1")) {
        fprintf(stderr, "am2: %s=%s: it is 0 or 1\n", name, v);
        return am_fail(AM_ERR_BAD_ARG, "%s=%s: it is 0 or 1", name, v);
    }
    return AM_OK;
}

/* VIPL's asynchronous errors (a peer's connection lost, mostly) are
 * AM's to handle: the VI's receives complete in error and the peer is
 * marked broken (am_peer.c, from am_poll.c's receive). Say them only
 * when asked. */
static void vi_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    (void)ctx;
    if (getenv("AM2_DEBUG"))
        fprintf(stderr, "am2: VIPL error %d on VI %p\n", (int)e->ErrorCode, e->ViHandle);
}

int AM_Init(void)
{
    AM_API_LOCK();
    if (am_g.init > 0) {
        am_g.init++;
        return AM_OK;
    }
    unsigned connect_ms, congestion_ms, spmd_ms;
    bool shm, direct;
    int bad;
    if ((bad = env_flag("AM2_SHM", &shm)) || (bad = env_flag("AM2_DIRECT", &direct)) ||
        (bad = env_ms("AM2_CONNECT_MS", 10000, &connect_ms)) ||
        (bad = env_ms("AM2_CONGESTION_MS", 30000, &congestion_ms)) ||
        (bad = env_ms("AM2_SPMD_TIMEOUT_MS", 0, &spmd_ms))) /* am_spmd.c's; checked here */
        return bad;
    const char *dev = getenv("AM2_NIC");
    if (!dev || !*dev)
        dev = "via0";
    VIP_RETURN rc = VipOpenNic(dev, &am_g.nic);
    if (rc != VIP_SUCCESS)
        return am_fail(AM_ERR_RESOURCE, "VipOpenNic(%s) failed with code %d", dev, (int)rc);
    if ((rc = VipQueryNic(am_g.nic, &am_g.attr)) != VIP_SUCCESS ||
        (rc = VipCreatePtag(am_g.nic, &am_g.ptag)) != VIP_SUCCESS) {
        VipCloseNic(am_g.nic);
        return am_fail(AM_ERR_RESOURCE, "opening %s: code %d", dev, (int)rc);
    }
    if (!(am_g.attr.ReliabilityLevelSupport & VIP_SERVICE_RELIABLE_DELIVERY)) {
        VipDestroyPtag(am_g.nic, am_g.ptag);
        VipCloseNic(am_g.nic);
        return am_fail(AM_ERR_RESOURCE, "%s offers no reliable delivery", dev);
    }
    VipErrorCallback(am_g.nic, NULL, vi_error);
    am_g.connect_ms = connect_ms;
    am_g.shm = shm;
    am_g.direct = direct;
    am_g.congestion_ms = congestion_ms;
    am_g.init = 1;
    return AM_OK;
}

int AM_Terminate(void)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (am_g.cur)
        return am_fail(AM_ERR_IN_USE, "AM_Terminate inside a handler");
    if (am_g.init > 1) {
        am_g.init--;
        return AM_OK;
    }
    while (am_g.bundles)
        AM_FreeBundle(am_g.bundles);
    VipDestroyPtag(am_g.nic, am_g.ptag);
    VipCloseNic(am_g.nic);
    memset(&am_g, 0, sizeof am_g);
    return AM_OK;
}

int AM_AllocateBundle(int type, eb_t *endb)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!endb || (type != AM_SEQ && type != AM_PAR))
        return am_fail(AM_ERR_BAD_ARG, "bundle type %d (AM_SEQ or AM_PAR) or NULL result", type);
    struct am2_bundle *b = calloc(1, sizeof *b);
    if (!b)
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    b->type = type;
    b->mask = AM_NOEVENTS;
    unsigned long n = am_g.attr.MaxCQEntries;
    b->cq_entries = n > 16384 ? 16384 : n;
    VIP_RETURN rc = VipCreateCQ(am_g.nic, b->cq_entries, &b->cq);
    if (rc != VIP_SUCCESS) {
        free(b);
        return am_fail(AM_ERR_RESOURCE, "VipCreateCQ failed with code %d", (int)rc);
    }
    b->next = am_g.bundles;
    am_g.bundles = b;
    *endb = b;
    /* Allocate AM_PAR bundles before the threads that share them start:
     * calls already under way when the first appears took no lock. */
    if (type == AM_PAR)
        am_api_par_add();
    return AM_OK;
}

int AM_FreeBundle(eb_t eb)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_bundle_ok(eb))
        return am_fail(AM_ERR_BAD_ARG, "not a bundle");
    if (am_g.cur && am_g.cur->ep->eb == eb)
        return am_fail(AM_ERR_IN_USE, "AM_FreeBundle of the bundle whose handler runs");
    while (eb->eps)
        AM_FreeEndpoint(eb->eps);
    for (struct am2_bundle **pp = &am_g.bundles; *pp; pp = &(*pp)->next)
        if (*pp == eb) {
            *pp = eb->next;
            break;
        }
    VipDestroyCQ(eb->cq);
    free(eb->stash);
    free(eb->vimap);
    if (eb->type == AM_PAR)
        am_api_par_remove(&am_locked_);
    free(eb);
    return AM_OK;
}

/* An endpoint's VIs complete on its bundle's CQ, chosen when they were
 * created: one that has VIs cannot move. */
int AM_MoveEndpoint(ep_t ea, eb_t from, eb_t to)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !am_bundle_ok(from) || !am_bundle_ok(to) || ea->eb != from)
        return am_fail(AM_ERR_BAD_ARG, "bad endpoint or bundle, or the endpoint is not in it");
    if (from == to)
        return AM_OK;
    for (struct am_peer *p = ea->peers; p; p = p->next)
        if (p->vi)
            return am_fail(AM_ERR_IN_USE,
                           "the endpoint has VIs on its bundle's completion queue");
    for (struct am2_ep **pp = &from->eps; *pp; pp = &(*pp)->next)
        if (*pp == ea) {
            *pp = ea->next;
            break;
        }
    ea->eb = to;
    ea->next = to->eps;
    to->eps = ea;
    return AM_OK;
}

int AM_SetEventMask(eb_t eb, int mask)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_bundle_ok(eb) || (mask != AM_NOEVENTS && mask != AM_NOTEMPTY))
        return am_fail(AM_ERR_BAD_ARG, "bad bundle or mask %d", mask);
    eb->mask = mask;
    eb->event = 0;
    return AM_OK;
}

int AM_GetEventMask(eb_t eb, int *mask)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_bundle_ok(eb) || !mask)
        return am_fail(AM_ERR_BAD_ARG, "bad bundle or NULL mask");
    *mask = eb->mask;
    return AM_OK;
}

/* Is anything already waiting for AM_Poll? */
static bool bundle_has_work(struct am2_bundle *eb)
{
    if (eb->nstash)
        return true;
    for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
        if (ep->rets || ep->localq || am_shm_pending(ep))
            return true;
    return false;
}

int AM_WaitSema(eb_t eb)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_bundle_ok(eb))
        return am_fail(AM_ERR_BAD_ARG, "not a bundle");
    if (am_g.cur)
        return am_fail(AM_ERR_BAD_ARG, "AM_WaitSema inside a handler");
    if (eb->mask == AM_NOEVENTS)
        return am_fail(AM_ERR_BAD_ARG, "no event is armed (AM_SetEventMask(AM_NOTEMPTY))");
    /* Sleep in the CQ until a receive completes or a connection is
     * asked for; the completion taken is kept for AM_Poll. A short bound
     * lets pending connection requests be accepted while we wait. */
    uint64_t last_accept = am_now_ms();
    VIP_ULONG shm_turn = 1;
    while (!eb->event && !bundle_has_work(eb)) {
        VIP_VI_HANDLE vi;
        VIP_BOOLEAN recvq;
        /* What a full queue made wait goes now: the peer may answer only
         * once it has all of it (a long message's last cell). */
        for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
            am_shm_flush_ep(ep);
        /* One endpoint and no VI: everything comes through its
         * shared-memory queue, whose senders ring it, or is a connection
         * request, which the listener rings it for. Sleep there. Not in
         * an AM_PAR bundle: another thread may poll the queue meanwhile
         * (its head is the lock holder's) and take what we wait for. */
        if (eb->type == AM_SEQ && !eb->nvis && eb->eps && !eb->eps->next && eb->eps->shmq) {
            am_api_sleep_begin(am_locked_);
            am_shm_sleep(eb->eps, 1000); /* a bound only: all that comes rings */
            am_api_sleep_end(am_locked_);
            am_accept_pending(eb->eps);
            continue;
        }
        /* Shared-memory messages ring no bell: with a queue, look again
         * after 1 ms, backing off to 8 ms while nothing comes. */
        bool shm = false;
        for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
            shm |= ep->shmq != NULL;
        am_api_sleep_begin(am_locked_);
        VIP_RETURN rc = VipCQWait(eb->cq, shm ? shm_turn : 50, &vi, &recvq);
        if (shm_turn < 8)
            shm_turn *= 2;
        am_api_sleep_end(am_locked_);
        if (rc == VIP_SUCCESS) {
            struct am_peer *p = am_peer_of_vi(eb, vi);
            VIP_DESCRIPTOR *d;
            if (p && recvq && am_cq_stale(p))
                continue; /* its receive was handled already: sleep on */
            if (p && recvq && VipRecvDone(vi, &d) == VIP_SUCCESS) {
                if (eb->nstash == eb->capstash) {
                    int cap = eb->capstash ? 2 * eb->capstash : 64;
                    struct am_stash *s = realloc(eb->stash, (size_t)cap * sizeof *s);
                    if (!s)
                        return am_fail(AM_ERR_RESOURCE, "out of memory");
                    eb->stash = s;
                    eb->capstash = cap;
                }
                eb->stash[eb->nstash++] = (struct am_stash){p, d};
            }
            break;
        }
        if (rc != VIP_TIMEOUT)
            return am_fail(AM_ERR_RESOURCE, "VipCQWait failed with code %d", (int)rc);
        if (am_now_ms() - last_accept >= 50) { /* the listener's queue: not every ms */
            last_accept = am_now_ms();
            for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
                am_accept_pending(ep);
        }
    }
    eb->mask = AM_NOEVENTS;
    eb->event = 0;
    return AM_OK;
}

int AM_Poll(eb_t eb)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_bundle_ok(eb))
        return am_fail(AM_ERR_BAD_ARG, "not a bundle");
    if (am_g.cur)
        return am_fail(AM_ERR_BAD_ARG, "AM_Poll inside a handler");
    int n = am_poll_bundle(eb, 256);
    return n < 0 ? AM_ERR_RESOURCE : AM_OK;
}

/*
 * am_poll.c - AM_Poll's work for a bundle: the receives its VIs completed
 * (one by one while it has few, else through its completion queue), its
 * endpoints' shared-memory queues, local messages and returns; each
 * message goes to am_dispatch.c.
 */
#include <string.h>

#include "am_int.h"

/* A receive off one of the bundle's VIs: its message, then the buffer
 * posted again. */
static void handle_recv(struct am_peer *p, VIP_DESCRIPTOR *d)
{
    if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
        am_peer_broken(p, "a receive completed in error (connection lost)");
        return;
    }
    am_handle_msg(p, (const struct am_wire *)d->DS[0].Local.Data.Address, d->CS.Length);
    if (p->state == PEER_CONNECTED && am_peer_repost(p, d) != AM_OK)
        am_peer_broken(p, "VipPostRecv failed");
}

/* ---- the bundle's poll ------------------------------------------------------------------------ */

/* A VI's CQ entries come in the order of its receives, which are taken in
 * that order too: while some were taken directly (cq_owed), the next
 * entry of that VI is one of theirs. */
bool am_cq_stale(struct am_peer *p)
{
    if (!p->cq_owed)
        return false;
    p->cq_owed--;
    p->ep->eb->cq_owed--;
    return true;
}

int am_poll_bundle(struct am2_bundle *eb, int budget)
{
    int n = 0;
    /* Accepting takes what the listener thread queued (a lock): every few ms; the
     * clock is read only every 64th poll (it costs as much as a poll). */
    static uint64_t last_accept, last_alive;
    static unsigned turn;
    if ((turn++ & 63) == 0) {
        uint64_t now = am_now_ms();
        if (now - last_accept >= 2) {
            last_accept = now;
            for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
                am_accept_pending(ep);
        }
        /* A same-host peer that died rings no bell (a VI's receives
         * complete in error): look for it while it owes us answers. */
        if (now - last_alive >= 20) {
            last_alive = now;
            for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
                for (struct am_peer *p = ep->peers; p; p = p->next)
                    if (p->shmq && p->state != PEER_BROKEN && am_peer_waiting(p))
                        am_shm_peer_alive(p);
        }
    }
    while (eb->nstash > 0 && n < budget) {
        struct am_stash s = eb->stash[0];
        memmove(eb->stash, eb->stash + 1, (size_t)--eb->nstash * sizeof *eb->stash);
        handle_recv(s.peer, s.d);
        n++;
    }
    /* Shared memory first; while it delivers and the NIC has been quiet,
     * look at the CQ only every 8th turn (the multi-protocol paper's
     * adaptive polling: the slower path must not tax the faster). */
    int from_shm = 0;
    for (struct am2_ep *ep = eb->eps; ep; ep = ep->next) {
        am_shm_flush_ep(ep);
        if (ep->shmq)
            from_shm += am_shm_poll(ep, budget - n - from_shm, am_handle_msg);
    }
    n += from_shm;
    bool skip_cq = from_shm && eb->cq_idle > 16 && (eb->cq_idle & 7);
    int from_cq = 0;
    bool settle_only = false;
    /* Few VIs: look at each one's receive queue, which lends the NIC one
     * VI's progress, rather than at the CQ, which progresses the whole NIC
     * and reads its clock on every empty look (a third of the AM layer's
     * round trip over the raw VIPL one). The CQ entries of receives taken
     * so come later and are skipped (am_cq_stale): the CQ is read only
     * while such entries are owed. */
    if (!skip_cq && eb->ndirect) {
        for (int i = 0; i < eb->ndirect && n < budget; i++) {
            struct am_peer *p = eb->direct[i];
            VIP_DESCRIPTOR *d;
            /* bounded: the CQ has room for AM_CREDITS entries owed */
            while (n < budget && eb->cq_owed < AM_CREDITS &&
                   VipRecvDone(p->vi, &d) == VIP_SUCCESS) {
                p->cq_owed++;
                eb->cq_owed++;
                handle_recv(p, d);
                n++;
                from_cq++;
            }
        }
        /* The owed entries are skipped in batches: popping an entry that
         * is there is cheap, the look that finds none is what costs. And
         * every 64th turn the CQ fully (insurance, cheap: its whole-NIC
         * progress also releases what a paced NIC holds until its
         * modelled time, should a VI's own progress leave that to the
         * NIC's dozing thread). */
        bool full = (++eb->direct_turn & 63) == 0;
        skip_cq = !full && eb->cq_owed < AM_CREDITS / 2;
        settle_only = !full;
    }
    while (!skip_cq && n < budget) {
        if (settle_only && !eb->cq_owed)
            break;
        VIP_VI_HANDLE vi;
        VIP_BOOLEAN recvq;
        VIP_RETURN rc = VipCQDone(eb->cq, &vi, &recvq);
        if (rc == VIP_NOT_DONE)
            break;
        if (rc != VIP_SUCCESS)
            return am_fail(-1, "VipCQDone failed with code %d", (int)rc);
        struct am_peer *p = am_peer_of_vi(eb, vi);
        VIP_DESCRIPTOR *d;
        if (!p || !recvq || am_cq_stale(p) || VipRecvDone(vi, &d) != VIP_SUCCESS)
            continue;
        handle_recv(p, d);
        n++;
        from_cq++;
    }
    eb->cq_idle = from_cq ? 0 : eb->cq_idle + 1;
    for (struct am2_ep *ep = eb->eps; ep; ep = ep->next) {
        /* Finished sends back to the free list (a failed request comes
         * back): when they run low, and now and then. */
        if (ep->nsend_free < ep->nsend / 2 || (++ep->polls & 63) == 0)
            am_send_reclaim(ep);
        if (ep->localq)
            n += am_local_poll(ep);
        if (ep->rets) {
            am_run_returns(ep);
            n++;
        }
    }
    if (n && eb->mask == AM_NOTEMPTY)
        eb->event = 1;
    return n;
}

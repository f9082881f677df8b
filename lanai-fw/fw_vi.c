/*
 * fw_vi.c - a VI's life cycle on the NIC: made (fw_vi_init), connected to
 * its peer over a link (fw_vi_connect), watched for the link's end
 * (fw_link_check, fw_link_failed), and disconnected (fw_vi_disconnect).
 *
 * Connect resets every role's per-connection state (requester, responder,
 * completer); disconnect flushes what is queued (fw_updt.c) and lets the
 * link go.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"
#include "fw_rx.h"

/* The VI has a link (or no more): fw_progress visits the linked VIs every
 * sweep whatever their arrival bits say. */
static void vi_linked_mark(struct fw_vi *vi, bool on)
{
    if (vi->vi_id >= VIA_MAX_VI)
        return;
    uint64_t bit = 1ull << (vi->vi_id % 64);
    if (on)
        atomic_fetch_or(&vi->nic->linked[vi->vi_id / 64], bit);
    else
        atomic_fetch_and(&vi->nic->linked[vi->vi_id / 64], ~bit);
}

/* The peer process of a local connection, watched by its pidfd (fw_live.c
 * looks at the watched ones now and then). */
void fw_live_watch(struct fw_vi *vi, int pidfd)
{
    fw_live_unwatch(vi);
    if (pidfd < 0)
        return;
    atomic_store(&vi->peer_pidfd, pidfd);
    atomic_fetch_add(&vi->nic->nlive, 1);
}

void fw_live_unwatch(struct fw_vi *vi)
{
    int fd = atomic_exchange(&vi->peer_pidfd, -1);
    if (fd < 0)
        return;
    close(fd);
    atomic_fetch_sub(&vi->nic->nlive, 1);
}

void fw_link_check(struct fw_vi *vi)
{
    if (!vi->chan)
        return;
    uint32_t cs = atomic_load_explicit(&vi->chan->state, memory_order_acquire);
    if (cs == VIA_CHAN_OPEN)
        return;
    /* Drain first: a peer that closed or broke the link may have left
     * answers for us on it (the NAK of the violation that broke it). */
    if (vi->link.ops->pending(&vi->link))
        return;
    bool was = vi->in_error;
    fw_vi_error(vi, VIP_ERROR_CONN_LOST, 0); /* never benign */
    /* The peer disconnected: the VI is disconnected, which the program
     * hears of as VIA says, but no error happened. */
    if (!was && cs == VIA_CHAN_CLOSED)
        vi->err_orderly = true;
}

/* No error on the VI: as made, and as each connection begins. */
static void vi_error_clear(struct fw_vi *vi)
{
    vi->err_reported = vi->err_told = vi->in_error = vi->err_orderly = false;
    atomic_store(&vi->err_pending, false);
}

void fw_vi_init(struct fw_vi *vi, struct fw_nic *nic, uint32_t vi_id, struct via_vi_page *db)
{
    vi->nic = nic;
    vi->vi_id = vi_id;
    vi->db = db;
    vi->chan = NULL;
    atomic_store(&vi->peer_pidfd, -1);
    vi->req.state = FW_TX_IDLE;
    vi->resp.state = FW_RX_IDLE;
    vi->req.sq.head = vi->req.sq.tail = 0;
    vi->resp.rq.head = vi->resp.rq.tail = 0;
    vi->req.seq = vi->resp.seq = 0;
    vi->comp = (struct fw_comp){0};
    vi_error_clear(vi);
    /* The doorbell rings may hold tokens from nobody: start where they are. */
    atomic_store(&db->sq.cons, atomic_load(&db->sq.prod));
    atomic_store(&db->rq.cons, atomic_load(&db->rq.prod));
}

bool fw_vi_connect(struct fw_vi *vi, struct via_chan *chan, int side, uint32_t peer_vi,
                   struct via_event_page *peer_ev, int sock)
{
    if (chan->link == VIA_LINK_UDP) {
        if (!fw_link_udp_init(&vi->link, vi->nic, chan, side, sock))
            return false;
        peer_ev = NULL; /* the peer is another host's: nobody to wake here */
    } else if (chan->link == VIA_LINK_OFI) {
        char why[256];
        if (!fw_link_ofi_init(&vi->link, vi->nic, chan, side, sock, why, sizeof why)) {
            /* The VI goes to the error state; the program sees that, and
             * the reason is said here, where it is known. */
            fprintf(stderr, "vipl: VI %u cannot reach its peer: %s\n", chan->vi_id[side], why);
            return false;
        }
        peer_ev = NULL;
    } else {
        fw_link_shm_init(&vi->link, chan, side);
    }
    vi->chan = chan;
    atomic_store(&vi->poll_chan, chan);
    /* NULL for a network link: no lock-free quiet check */
    atomic_store(&vi->poll_dir, vi->link.rx);
    atomic_store(&vi->wake_dir, vi->link.ops == &fw_link_shm_ops ? vi->link.rx : NULL);
    vi_linked_mark(vi, true);
    atomic_store(&vi->quiet, false);
    vi->side = side;
    vi->peer_vi = peer_vi;
    vi->peer_ev = peer_ev;
    vi->comp = (struct fw_comp){0}; /* the peer has answered nothing yet */
    vi->req.seq = vi->resp.seq = vi->resp.ack_owed = vi->resp.nak_owed = 0;
    vi->wake_peer = false;
    vi->cma = vi->req.msg.rdv = false; /* fw_cma_connect decides */
    vi->resp.pkts = 0;
    vi->resp.rd.active = false;
    vi->resp.sched_for = 0;
    vi->req.state = FW_TX_IDLE;
    vi->resp.state = FW_RX_IDLE;
    vi_error_clear(vi);
    fw_vclock_connected(vi);
    atomic_store(&vi->db->state, VIA_VI_CONNECTED);
    return true;
}

void fw_link_failed(struct fw_vi *vi)
{
    if (vi->req.state != FW_TX_IDLE) {
        fw_req_fail(vi, VIP_STATUS_TRANSPORT_ERROR);
    }
    uint32_t open = VIA_CHAN_OPEN;
    atomic_compare_exchange_strong(&vi->chan->state, &open, VIA_CHAN_BROKEN);
    fw_vi_error(vi, VIP_ERROR_CONN_LOST, 0);
    vi->err_told = true; /* the agent tells the peer's host, if it can still hear */
}

void fw_vi_disconnect(struct fw_vi *vi)
{
    /* The channel's mapping outlives this call (the library unmaps it
     * after vipd has heard): the link may watch its word while it closes. */
    const _Atomic uint32_t *state = vi->chan ? &vi->chan->state : NULL;
    fw_live_unwatch(vi);
    fw_flush(vi);
    atomic_store(&vi->quiet, false);
    atomic_store(&vi->poll_dir, NULL);
    atomic_store(&vi->wake_dir, NULL);
    vi_linked_mark(vi, false);
    atomic_store(&vi->poll_chan, NULL);
    vi->chan = NULL;
    if (vi->link.ops && vi->link.ops->fini)
        vi->link.ops->fini(&vi->link, state);
    vi->link = (struct fw_link){0};
    vi->peer_ev = NULL;
    vi->wake_peer = false;
    vi->in_error = false;
}

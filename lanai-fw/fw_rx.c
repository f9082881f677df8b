/*
 * fw_rx.c - the receive pipeline: R2 Bell -> R3 Receive -> R4 XDes ->
 * R5 XData -> R6 Updt.
 *
 * Receive doorbells are taken ahead of time (R2) into the NIC's queue.
 * When a packet arrives (R3) the NIC only then learns which VI it is for;
 * on the first fragment of a message it stages the next receive descriptor
 * of that VI (R4), scatters every fragment into the descriptor's segments
 * (R5), and completes it after the last one (R6).
 */
#include <vipl.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"

const char *const fw_rx_state_name[FW_RX_NSTATES] = {
    [FW_RX_IDLE] = "idle",
    [FW_RX_XDATA] = "xdata",
    [FW_RX_DISCARD] = "discard",
};

/* The peer sent something no correct NIC sends: the link is unusable. */
static void rx_transport_error(struct fw_vi *vi)
{
    if (vi->rx == FW_RX_XDATA) {
        fw_updt(vi, &vi->rxd, true, VIP_STATUS_TRANSPORT_ERROR, vi->rx_got);
        vi->rq.head++;
    }
    vi->rx = FW_RX_IDLE;
    uint32_t open = VIA_CHAN_OPEN;
    atomic_compare_exchange_strong(&vi->chan->state, &open, VIA_CHAN_BROKEN);
    /* Even an unreliable VI cannot go on without a usable link. */
    uint32_t rel = vi->reliability;
    vi->reliability = VIP_SERVICE_RELIABLE_DELIVERY;
    fw_vi_error(vi, VIP_ERROR_CATASTROPHIC, 0);
    vi->reliability = rel;
}

/* R3 Receive of a FIRST fragment, then R4 XDes. Returns the next state. */
static enum fw_rx_state rx_first(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    vi->rx_seq = h->msg_seq;
    FW_TRACE(vi->nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, h->msg_len);
    if (vi->in_error)
        return FW_RX_DISCARD;
    if (vi->rq.head == vi->rq.tail)
        fw_bell_take(&vi->db->rq, &vi->rq, NULL);
    if (vi->rq.head == vi->rq.tail) {
        /* No receive posted: VIA drops the message; reliable levels also
         * break the connection (VIP_ERROR_RECVQ_EMPTY). */
        fw_count(&vi->db->cnt.rx_dropped, 1);
        fw_vi_error(vi, VIP_ERROR_RECVQ_EMPTY, 0);
        return FW_RX_DISCARD;
    }
    const struct via_db_token *tok = &vi->rq.tok[vi->rq.head % VIA_QUEUE_DEPTH];
    fw_xdes_fetch(vi, tok, true, &vi->rxd);
    FW_TRACE(vi->nic, VIA_ST_R4_XDES, vi->vi_id, h->msg_seq, vi->rxd.total);
    uint32_t err = vi->rxd.status;
    if (!err && h->msg_len > vi->rxd.total)
        err = VIP_STATUS_LENGTH_ERROR; /* the buffers cannot hold the message */
    if (err) {
        fw_updt(vi, &vi->rxd, true, err, 0);
        vi->rq.head++;
        fw_count(&vi->db->cnt.rx_dropped, 1);
        fw_vi_error(vi, VIP_ERROR_POST_DESC, vi->rxd.va);
        return FW_RX_DISCARD;
    }
    vi->rx_got = 0;
    return FW_RX_XDATA;
}

/* R5 XData for one fragment, R6 Updt after the last. */
static enum fw_rx_state rx_xdata(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if (h->frag_off != vi->rx_got) {
        rx_transport_error(vi);
        return FW_RX_IDLE;
    }
    fw_xdata_copy(&vi->rxd, h->frag_off, (uint8_t *)(uintptr_t)fw_link_payload(h), h->frag_len,
                  true);
    vi->rx_got += h->frag_len;
    FW_TRACE(vi->nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len);
    if (!(h->flags & VIA_PKT_LAST))
        return FW_RX_XDATA;
    if (h->flags & VIA_PKT_IMM)
        vi->rxd.imm = h->imm;
    fw_updt(vi, &vi->rxd, true, (h->flags & VIA_PKT_IMM) ? VIP_STATUS_IMMEDIATE : 0,
            vi->rx_got);
    vi->rq.head++;
    /* Reliable reception: the sender's descriptor completes on this. */
    atomic_store_explicit(&vi->chan->dir[1 - vi->side].delivered, h->msg_seq,
                          memory_order_release);
    return FW_RX_IDLE;
}

/* Header checks that need the VI's view: right connection, in order. */
static bool rx_header_ok(const struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if (h->conn_id != vi->chan->conn_id || h->dst_vi != vi->vi_id ||
        h->msg_len > VIA_MAX_TRANSFER || h->frag_len > h->msg_len ||
        h->frag_off > h->msg_len - h->frag_len)
        return false;
    bool first = h->flags & VIA_PKT_FIRST;
    if (first != (vi->rx == FW_RX_IDLE))
        return false;
    if (first ? h->msg_seq != vi->rx_seq + 1 : h->msg_seq != vi->rx_seq)
        return false;
    return true;
}

/* Paced profiles: claim the receiving LANai for this packet's stages (R3
 * and R4 with the first fragment, R5 for its share of the data, R6 with
 * the last) from the moment it has arrived; false while real time has not
 * reached their end, i.e. the packet is not yet visible to the host. */
static bool rx_due(struct fw_vi *vi, const struct via_wire_hdr *h, uint64_t tail)
{
    struct fw_nic *nic = vi->nic;
    if (vi->rx_sched_for != tail + 1) {
        const struct via_profile *p = nic->prof;
        bool first = h->flags & VIA_PKT_FIRST, last = h->flags & VIA_PKT_LAST;
        uint32_t n = h->msg_len;
        double frac = n ? (double)h->frag_len / n : 1.0;
        double c3 = first ? fw_cost_stage(p, VIA_ST_R3_RECEIVE, FW_EXT_STANDARD, n, 1) : 0;
        double c4 = first ? fw_cost_stage(p, VIA_ST_R4_XDES, FW_EXT_STANDARD, n, 1) : 0;
        double c5 = frac * fw_cost_stage(p, VIA_ST_R5_XDATA, FW_EXT_STANDARD, n, n ? 1 : 0);
        double c6 = last ? fw_cost_stage(p, VIA_ST_R6_UPDT, FW_EXT_STANDARD, n, 1) : 0;
        uint64_t dur = (uint64_t)(c3 + c4 + c5 + c6);
        uint64_t start = fw_sched_recv(nic, h->arrive_ns ? h->arrive_ns : hal_now_ns(), dur);
        vi->rx_release = start + dur;
        vi->rx_sched_for = tail + 1;
        if (first) {
            fw_account(nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, n, c3);
            fw_account(nic, VIA_ST_R4_XDES, vi->vi_id, h->msg_seq, n, c4);
        }
        fw_account(nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len, c5);
        if (last)
            fw_account(nic, VIA_ST_R6_UPDT, vi->vi_id, h->msg_seq, n, c6);
    }
    return fw_release_due(nic, vi->rx_release);
}

static void rx_packets(struct fw_vi *vi)
{
    struct via_chan_dir *dir = &vi->chan->dir[1 - vi->side];
    unsigned n = 0;
    for (;;) {
        uint64_t tail;
        int bad;
        const struct via_wire_hdr *h = fw_link_peek(dir, &tail, &bad);
        if (!h) {
            if (bad)
                rx_transport_error(vi);
            break;
        }
        if (h->type == VIA_PKT_DATA) {
            if (!rx_header_ok(vi, h)) {
                rx_transport_error(vi);
                break;
            }
            if (vi->nic->paced && !rx_due(vi, h, tail))
                break;
            if (vi->rx == FW_RX_IDLE)
                vi->rx = rx_first(vi, h);
            if (vi->rx == FW_RX_XDATA)
                vi->rx = rx_xdata(vi, h);
            else if (vi->rx == FW_RX_DISCARD && (h->flags & VIA_PKT_LAST))
                vi->rx = FW_RX_IDLE;
        }
        fw_link_consume(dir, h);
        n++;
    }
    if (n && atomic_load_explicit(&dir->tx_waiting, memory_order_relaxed) &&
        atomic_exchange(&dir->tx_waiting, 0))
        fw_notify(vi->peer_ev, vi->peer_vi);
}

bool fw_rx_pending(const struct fw_vi *vi)
{
    if (!vi->chan)
        return false;
    const struct via_chan_dir *dir = &vi->chan->dir[1 - vi->side];
    return atomic_load_explicit(&dir->head, memory_order_acquire) !=
               atomic_load_explicit(&dir->tail, memory_order_relaxed) ||
           atomic_load_explicit(&vi->chan->state, memory_order_relaxed) != VIA_CHAN_OPEN;
}

void fw_rx_progress(struct fw_vi *vi)
{
    uint32_t took = fw_bell_take(&vi->db->rq, &vi->rq, NULL);
    if (took)
        FW_TRACE(vi->nic, VIA_ST_R2_BELL, vi->vi_id, vi->rx_seq, took);
    if (vi->in_error) {
        fw_flush(vi);
        return;
    }
    if (!vi->chan)
        return;
    /* Packets already on the link are delivered before a close is seen. */
    rx_packets(vi);
    fw_link_check(vi);
}

void fw_link_check(struct fw_vi *vi)
{
    if (!vi->chan)
        return;
    uint32_t cs = atomic_load_explicit(&vi->chan->state, memory_order_acquire);
    if (cs == VIA_CHAN_OPEN)
        return;
    if (cs == VIA_CHAN_CLOSED && fw_rx_pending(vi) &&
        atomic_load(&vi->chan->dir[1 - vi->side].head) !=
            atomic_load(&vi->chan->dir[1 - vi->side].tail))
        return; /* drain first */
    if (!vi->in_error) {
        uint32_t rel = vi->reliability;
        vi->reliability = VIP_SERVICE_RELIABLE_DELIVERY; /* conn loss is never benign */
        fw_vi_error(vi, VIP_ERROR_CONN_LOST, 0);
        vi->reliability = rel;
    }
}

void fw_vi_init(struct fw_vi *vi, struct fw_nic *nic, uint32_t vi_id, struct via_vi_page *db)
{
    vi->nic = nic;
    vi->vi_id = vi_id;
    vi->db = db;
    vi->chan = NULL;
    vi->tx = FW_TX_IDLE;
    vi->rx = FW_RX_IDLE;
    vi->sq.head = vi->sq.tail = 0;
    vi->rq.head = vi->rq.tail = 0;
    vi->tx_seq = vi->rx_seq = 0;
    vi->err_pending = vi->err_reported = vi->in_error = false;
    /* The doorbell rings may hold tokens from nobody: start where they are. */
    atomic_store(&db->sq.cons, atomic_load(&db->sq.prod));
    atomic_store(&db->rq.cons, atomic_load(&db->rq.prod));
}

void fw_vi_connect(struct fw_vi *vi, struct via_chan *chan, int side, uint32_t peer_vi,
                   struct via_event_page *peer_ev)
{
    vi->chan = chan;
    vi->side = side;
    vi->peer_vi = peer_vi;
    vi->peer_ev = peer_ev;
    vi->tx_seq = vi->rx_seq = 0;
    vi->tx = FW_TX_IDLE;
    vi->rx = FW_RX_IDLE;
    vi->err_pending = vi->err_reported = vi->in_error = false;
    atomic_store(&vi->db->state, VIA_VI_CONNECTED);
}

void fw_vi_disconnect(struct fw_vi *vi)
{
    fw_flush(vi);
    vi->chan = NULL;
    vi->peer_ev = NULL;
    vi->in_error = false;
}

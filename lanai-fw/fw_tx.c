/*
 * fw_tx.c - the send pipeline: T2 Bell -> T3 XDes -> T4 XData -> T5 Transmit
 * -> T6 Updt.
 *
 * A state machine with one helper per state; each helper returns the next
 * state, or FW_TX_BLOCKED when it must wait for the link (ring full) or, on
 * a reliable-reception VI, for the receiver's acknowledgement. Messages on a
 * VI go strictly in order, one at a time, like the Berkeley firmware.
 */
#include <vipl.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"

const char *const fw_tx_state_name[FW_TX_NSTATES] = {
    [FW_TX_IDLE] = "idle",
    [FW_TX_XDES] = "xdes",
    [FW_TX_XDATA] = "xdata",
    [FW_TX_UPDT] = "updt",
};

#define FW_TX_BLOCKED FW_TX_NSTATES

static bool vi_usable(const struct fw_vi *vi)
{
    return !vi->in_error && vi->chan &&
           atomic_load_explicit(&vi->chan->state, memory_order_acquire) == VIA_CHAN_OPEN;
}

/* T2 Bell: take the next token; flush it if the VI cannot send. */
static int tx_idle(struct fw_vi *vi)
{
    if (vi->sq.head == vi->sq.tail && !fw_bell_take(&vi->db->sq, &vi->sq))
        return FW_TX_BLOCKED;
    FW_TRACE(vi->nic, VIA_ST_T2_BELL, vi->vi_id, vi->tx_seq + 1, 0);
    if (!vi_usable(vi)) {
        fw_link_check(vi);
        if (!vi->in_error) {
            /* Sent on a VI that is not connected (it was, and the host
             * raced a disconnect): completes flushed, as queued ones do. */
            struct fw_xdes d = {.va = vi->sq.tok[vi->sq.head % VIA_QUEUE_DEPTH].desc_va};
            fw_updt(vi, &d, false, VIP_STATUS_DESC_FLUSHED_ERROR, 0);
            vi->sq.head++;
        } else {
            fw_flush(vi);
        }
        return FW_TX_IDLE;
    }
    return FW_TX_XDES;
}

/* T3 XDes: stage and validate the descriptor. */
static int tx_xdes(struct fw_vi *vi)
{
    const struct via_db_token *tok = &vi->sq.tok[vi->sq.head % VIA_QUEUE_DEPTH];
    fw_xdes_fetch(vi, tok, false, &vi->txd);
    FW_TRACE(vi->nic, VIA_ST_T3_XDES, vi->vi_id, vi->tx_seq + 1, vi->txd.total);
    if (vi->txd.status) {
        fw_updt(vi, &vi->txd, false, vi->txd.status, 0);
        vi->sq.head++;
        fw_vi_error(vi, VIP_ERROR_POST_DESC, vi->txd.va);
        return FW_TX_IDLE;
    }
    vi->tx_seq++;
    vi->tx_off = 0;
    return FW_TX_XDATA;
}

/* Gather `len` bytes at message offset `off` from the segments (T4). */
static void gather(const struct fw_xdes *d, uint32_t off, uint8_t *dst, uint32_t len)
{
    for (unsigned i = 0; i < d->segcount && len; i++) {
        uint32_t sl = d->seg[i].len;
        if (off >= sl) {
            off -= sl;
            continue;
        }
        uint32_t k = sl - off < len ? sl - off : len;
        hal_dma_from_host(dst, d->seg[i].va + off, k);
        dst += k;
        len -= k;
        off = 0;
    }
}

/* T4 XData + T5 Transmit, one fragment per turn until the message is out. */
static int tx_xdata(struct fw_vi *vi)
{
    struct via_chan_dir *dir = &vi->chan->dir[vi->side];
    struct fw_xdes *d = &vi->txd;
    do {
        uint32_t left = d->total - vi->tx_off;
        uint32_t frag = left < VIA_MTU ? left : VIA_MTU;
        struct via_wire_hdr *h = fw_link_reserve(dir, frag);
        if (!h) {
            /* Link full: ask the receiver to wake us when it drains. */
            atomic_store(&dir->tx_waiting, 1);
            fw_notify(vi->peer_ev, vi->peer_vi);
            if (!(h = fw_link_reserve(dir, frag)))
                return FW_TX_BLOCKED;
        }
        gather(d, vi->tx_off, (uint8_t *)(h + 1), frag);
        FW_TRACE(vi->nic, VIA_ST_T4_XDATA, vi->vi_id, vi->tx_seq, frag);
        uint8_t flags = (vi->tx_off == 0 ? VIA_PKT_FIRST : 0) |
                        (vi->tx_off + frag == d->total ? VIA_PKT_LAST : 0) |
                        ((d->control & VIP_CONTROL_IMMEDIATE) ? VIA_PKT_IMM : 0);
        *h = (struct via_wire_hdr){
            .version = VIA_WIRE_VERSION, .type = VIA_PKT_DATA, .flags = flags,
            .src_nic = vi->nic->nic_index, .dst_nic = vi->chan->nic[1 - vi->side],
            .dst_vi = vi->peer_vi, .conn_id = vi->chan->conn_id, .msg_seq = vi->tx_seq,
            .msg_len = d->total, .frag_off = vi->tx_off, .frag_len = frag, .imm = d->imm};
        fw_link_publish(dir, h);
        vi->tx_off += frag;
        FW_TRACE(vi->nic, VIA_ST_T5_TRANSMIT, vi->vi_id, vi->tx_seq, frag);
    } while (vi->tx_off < d->total);
    fw_notify(vi->peer_ev, vi->peer_vi);
    return FW_TX_UPDT;
}

/* T6 Updt: the message is on the wire (or, for reliable reception, in the
 * receiver's memory): write the status. */
static int tx_updt(struct fw_vi *vi)
{
    if (vi->reliability == VIP_SERVICE_RELIABLE_RECEPTION) {
        struct via_chan_dir *dir = &vi->chan->dir[vi->side];
        uint32_t got = atomic_load_explicit(&dir->delivered, memory_order_acquire);
        if ((int32_t)(got - vi->tx_seq) < 0) {
            if (atomic_load(&vi->chan->state) != VIA_CHAN_OPEN) {
                fw_updt(vi, &vi->txd, false, VIP_STATUS_TRANSPORT_ERROR, 0);
                vi->sq.head++;
                vi->tx = FW_TX_IDLE;
                fw_link_check(vi);
                return FW_TX_IDLE;
            }
            atomic_store(&dir->tx_waiting, 1);
            if ((int32_t)(atomic_load(&dir->delivered) - vi->tx_seq) < 0)
                return FW_TX_BLOCKED;
        }
    }
    uint32_t status = (vi->txd.control & VIP_CONTROL_IMMEDIATE) ? VIP_STATUS_IMMEDIATE : 0;
    fw_updt(vi, &vi->txd, false, status, vi->txd.total);
    vi->sq.head++;
    return FW_TX_IDLE;
}

typedef int (*tx_stage_fn)(struct fw_vi *);
static const tx_stage_fn tx_stage[FW_TX_NSTATES] = {
    [FW_TX_IDLE] = tx_idle,
    [FW_TX_XDES] = tx_xdes,
    [FW_TX_XDATA] = tx_xdata,
    [FW_TX_UPDT] = tx_updt,
};

bool fw_tx_progress(struct fw_vi *vi)
{
    for (;;) {
        int next = tx_stage[vi->tx](vi);
        if (next == FW_TX_BLOCKED)
            return vi->tx != FW_TX_IDLE || vi->sq.head != vi->sq.tail;
        vi->tx = (enum fw_tx_state)next;
    }
}

void fw_tx_doorbell(struct fw_vi *vi)
{
    fw_tx_progress(vi);
}

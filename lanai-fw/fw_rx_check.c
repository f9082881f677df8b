/*
 * fw_rx_check.c - R3's receive checks: each packet's header against the
 * VI's view (right connection, lengths, the order of fragments and
 * sequence numbers, answers only to what we sent), each check named (enum
 * via_rx_check in via_abi.h), counted per VI and traced, so a refused
 * packet says why; and what a failure does.
 *
 * A failed check on a reliable link means the peer sent what no correct
 * NIC sends: the link breaks (fw_rx_broken). On a lossy link (an
 * unreliable VI over the network) messages may be missing: a packet that
 * does not fit is dropped and counted (fw_rx_lossy_fit).
 *
 * Bottom of the receive side: calls nothing of fw_rx.c, fw_resp.c or
 * fw_comp.c.
 */
#include <errno.h>
#include <stdio.h>

#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"
#include "fw_rx.h"

/* The receive states the checks read (fw.h: enum fw_rx_state). */
const char *const fw_rx_state_name[FW_RX_NSTATES] = {
    [FW_RX_IDLE] = "idle",
    [FW_RX_XDATA] = "xdata",
    [FW_RX_DISCARD] = "discard",
    [FW_RX_PLACE] = "place",
};

/* The peer sent something no correct NIC sends: the link is unusable.
 * Said on stderr with the check that failed and the packet's header if
 * there is one: it never happens between correct NICs, and the program's
 * error callback hears only CATASTROPHIC. */
void fw_rx_broken(struct fw_vi *vi, const char *why, const struct via_wire_hdr *h)
{
    fprintf(stderr, "vipl: VI %u: the link broke: %s (rx %s, seq %u)", vi->vi_id, why,
            fw_rx_state_name[vi->resp.state], (unsigned)vi->resp.seq);
    if (h)
        fprintf(stderr, "; header: type %u conn %u (ours %u) dst_vi %u msg_seq %u frag %u+%u of %u",
                (unsigned)h->type, (unsigned)h->conn_id, (unsigned)vi->chan->conn_id,
                (unsigned)h->dst_vi, (unsigned)h->msg_seq, (unsigned)h->frag_off,
                (unsigned)h->frag_len, (unsigned)h->msg_len);
    fputc('\n', stderr);
    if (vi->resp.state == FW_RX_XDATA) {
        fw_updt(vi, &vi->resp.rxd, true, VIP_STATUS_TRANSPORT_ERROR, vi->resp.got);
        vi->resp.rq.head++;
    }
    vi->resp.state = FW_RX_IDLE;
    uint32_t open = VIA_CHAN_OPEN;
    atomic_compare_exchange_strong(&vi->chan->state, &open, VIA_CHAN_BROKEN);
    /* Even an unreliable VI cannot go on without a usable link (only
     * descriptor errors are benign on it: fw_vi_error). */
    fw_vi_error(vi, VIP_ERROR_CATASTROPHIC, 0);
}

/* The receive checks of a packet's header that need the VI's view (right
 * connection, lengths, and for messages the order of fragments and
 * sequence numbers), in order, each with its name (enum via_rx_check):
 * VIA_RXC_OK, or the first that fails. */
enum via_rx_check fw_rx_check_header(const struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if (h->conn_id != vi->chan->conn_id)
        return VIA_RXC_CONN;
    if (h->dst_vi != vi->vi_id)
        return VIA_RXC_DST_VI;
    if (h->type == VIA_PKT_ACK || h->type == VIA_PKT_NAK)
        /* Only a message we sent can be answered, and each once. */
        return h->frag_len == 0 && (int32_t)(h->ack_seq - vi->comp.acked) > 0 &&
                       (int32_t)(h->ack_seq - vi->req.seq) <= 0
                   ? VIA_RXC_OK
                   : VIA_RXC_ANSWER;
    if (h->msg_len > VIA_MAX_TRANSFER || h->frag_len > h->msg_len ||
        h->frag_off > h->msg_len - h->frag_len)
        return VIA_RXC_LENGTH;
    if (h->type == VIA_PKT_RDMA_READ_RESP)
        /* Only the read we have in flight, in order, and no more of it. */
        return vi->req.state == FW_TX_UPDT && vi->req.txd.op == VIP_CONTROL_OP_RDMAREAD &&
                       h->msg_seq == vi->req.seq && (int32_t)(vi->comp.acked - vi->req.seq) < 0 &&
                       h->msg_len == vi->req.txd.total && h->frag_off == vi->req.msg.rd_got &&
                       ((h->flags & VIA_PKT_FIRST) != 0) == (h->frag_off == 0) &&
                       ((h->flags & VIA_PKT_LAST) != 0) ==
                           (h->frag_off + h->frag_len == h->msg_len)
                   ? VIA_RXC_OK
                   : VIA_RXC_READ_RESP;
    if (h->type == VIA_PKT_RDMA_READ_REQ &&
        (h->flags != (VIA_PKT_FIRST | VIA_PKT_LAST) || h->frag_len || vi->resp.rd.active ||
         vi->reliability == VIP_SERVICE_UNRELIABLE))
        return VIA_RXC_READ_REQ; /* one header, one read at a time, from a VI that may read */
    bool first = h->flags & VIA_PKT_FIRST;
    if (first != (vi->resp.state == FW_RX_IDLE))
        return VIA_RXC_FIRST;
    if (!first && h->type != vi->resp.op)
        return VIA_RXC_KIND; /* a fragment of another kind of message than the one in progress */
    if (first && fw_rx_lossy(vi))
        /* messages may be missing */
        return (int32_t)(h->msg_seq - vi->resp.seq) > 0 ? VIA_RXC_OK : VIA_RXC_SEQ;
    if (first ? h->msg_seq != vi->resp.seq + 1 : h->msg_seq != vi->resp.seq)
        return VIA_RXC_SEQ;
    return VIA_RXC_OK;
}

/* A packet refused by the check `why`: counted (rx_dropped, and the VI's
 * fw_rx_refused[why], which vipctl counters shows by name) and traced
 * (VIA_ST_R_REFUSED, the reason in its length field). One writer: the VI's
 * receive side runs under its lock. */
void fw_rx_refused(struct fw_vi *vi, enum via_rx_check why, uint32_t seq)
{
    fw_count(&vi->db->cnt.rx_dropped, 1);
    _Atomic uint32_t *c = &vi->db->rx_refused[why];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    FW_TRACE(vi->nic, VIA_ST_R_REFUSED, vi->vi_id, seq, why);
}

/* An unreliable VI on a link that loses (a network link): its messages
 * may be missing, whole or in part. */
bool fw_rx_lossy(const struct fw_vi *vi)
{
    return vi->reliability == VIP_SERVICE_UNRELIABLE && vi->link.ops != &fw_link_shm_ops;
}

/* A lossy VI's packet that does not fit the message in progress: the
 * first fragment of a later message abandons a message whose last
 * fragments were lost (its receive descriptor serves the next one); any
 * other packet is dropped and counted. true: the packet is to be taken. */
bool fw_rx_lossy_fit(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if ((h->flags & VIA_PKT_FIRST) && vi->resp.state != FW_RX_IDLE &&
        (int32_t)(h->msg_seq - vi->resp.seq) > 0 && h->type != VIA_PKT_RDMA_READ_RESP) {
        vi->resp.state = FW_RX_IDLE;
        fw_rx_refused(vi, VIA_RXC_LOSSY_GONE, vi->resp.seq);
        return fw_rx_check_header(vi, h) == VIA_RXC_OK;
    }
    fw_rx_refused(vi, VIA_RXC_LOSSY_STRAY, h->msg_seq);
    return false;
}

/*
 * fw_rx.c - the receive pipeline (R2 Bell -> R3 Receive -> R4 XDes ->
 * R5 XData -> R6 Updt), the responder, and the completer's view of ACKs.
 *
 * Receive doorbells are taken ahead of time (R2) into the NIC's queue.
 * When a packet arrives (R3) the NIC only then learns which VI it is for
 * and what it asks; a table of packet opcodes dispatches it:
 *   SEND        on the first fragment of a message the NIC stages the next
 *               receive descriptor (R4), scatters every fragment into its
 *               segments (R5), and completes it after the last one (R6); a
 *               reliable-reception VI then acknowledges it with an ACK.
 *               With no receive posted it is dropped (NAK on reliable VIs).
 *   RDMA_WRITE  the responder checks the target region (memory handle,
 *               ptag, the region's and the VI's RDMA-write enables, bounds)
 *               before any byte is written; no receive descriptor is used
 *               unless the write carries immediate data. On the reliable
 *               levels it answers with an ACK (or a NAK of the violation).
 *   RDMA_READ_REQ  the responder checks the source region the same way
 *               (RDMA-read enables) and sends its bytes back as READ_RESP
 *               fragments, as the link makes room (rx_respond).
 *   RDMA_READ_RESP the initiator scatters them into the read descriptor's
 *               local segments; the last one completes it.
 *   ACK, NAK    the completer's: the peer placed (or refused) our message.
 *   SEND_RTS,   a large SEND or RDMA write of a process of this host
 *   WRITE_RTS   (native): the NIC pulls its bytes from the sender's memory
 *               (fw_cma.c), a write's after the RDMA_WRITE checks.
 */
#include <errno.h>
#include <stdio.h>

#include <vipl.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"

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
static void rx_transport_error(struct fw_vi *vi, const char *why, const struct via_wire_hdr *h)
{
    fprintf(stderr, "vipl: VI %u: the link broke: %s (rx %s, seq %u)", vi->vi_id, why,
            fw_rx_state_name[vi->rx], (unsigned)vi->rx_seq);
    if (h)
        fprintf(stderr, "; header: type %u conn %u (ours %u) dst_vi %u msg_seq %u frag %u+%u of %u",
                (unsigned)h->type, (unsigned)h->conn_id, (unsigned)vi->chan->conn_id,
                (unsigned)h->dst_vi, (unsigned)h->msg_seq, (unsigned)h->frag_off,
                (unsigned)h->frag_len, (unsigned)h->msg_len);
    fputc('\n', stderr);
    if (vi->rx == FW_RX_XDATA) {
        fw_updt(vi, &vi->rxd, true, VIP_STATUS_TRANSPORT_ERROR, vi->rx_got);
        vi->rq.head++;
    }
    vi->rx = FW_RX_IDLE;
    uint32_t open = VIA_CHAN_OPEN;
    atomic_compare_exchange_strong(&vi->chan->state, &open, VIA_CHAN_BROKEN);
    /* Even an unreliable VI cannot go on without a usable link (only
     * descriptor errors are benign on it: fw_vi_error). */
    fw_vi_error(vi, VIP_ERROR_CATASTROPHIC, 0);
}

/* ACK or NAK for a message of the peer's (the completer on the other
 * side waits for it). Owed until there is room on the link. */
static void rx_answer(struct fw_vi *vi)
{
    struct fw_link *l = &vi->link;
    while (vi->ack_owed || vi->nak_owed) {
        bool nak = vi->nak_owed != 0;
        struct via_wire_hdr *h = l->ops->reserve(l, 0);
        if (!h) {
            l->ops->stall(l);
            fw_want_visit(vi);
            return;
        }
        *h = fw_wire_hdr(vi, nak ? VIA_PKT_NAK : VIA_PKT_ACK);
        h->ack_seq = nak ? vi->nak_owed : vi->ack_owed;
        h->imm = nak ? vi->nak_reason : 0;
        l->ops->publish(l, h);
        if (nak)
            vi->nak_owed = 0;
        else
            vi->ack_owed = 0;
        fw_peer_published(vi);
    }
}

/* Paced profiles: the responder's LANai sends the read's bytes like a
 * message of its own (T3..T5 of `len` bytes from now); when the last byte
 * reaches the initiator. */
static uint64_t rresp_arrive(struct fw_vi *vi, uint32_t len)
{
    struct fw_nic *nic = vi->nic;
    if (!nic->paced)
        return 0;
    const struct via_profile *p = nic->prof;
    double c = fw_cost_stage(p, VIA_ST_T3_XDES, FW_EXT_STANDARD, len, 1) +
               fw_cost_stage(p, VIA_ST_T4_XDATA, FW_EXT_STANDARD, len, 1) +
               fw_cost_stage(p, VIA_ST_T5_TRANSMIT, FW_EXT_STANDARD, len, 1);
    uint64_t start = fw_sched_send(nic, vi->vi_id, hal_model_now_ns(), (uint64_t)c, false);
    return start + (uint64_t)c + (uint64_t)p->switch_ns;
}

static void rx_refuse(struct fw_vi *vi, uint32_t seq, uint32_t reason);
static void rx_refused(struct fw_vi *vi, enum via_rx_check why, uint32_t seq);

/* The responder's half of an RDMA read: the checked source range goes
 * back as READ_RESP fragments, as many as the link takes this turn. */
static void rx_respond(struct fw_vi *vi)
{
    struct fw_link *l = &vi->link;
    while (vi->rresp.active) {
        uint32_t left = vi->rresp.len - vi->rresp.off;
        uint32_t mtu = fw_link_mtu(l);
        uint32_t frag = left < mtu ? left : mtu;
        /* Each chunk's range is checked again as it is read: memory
         * deregistered meanwhile is never read (the check and the copy are
         * one turn under the VI's lock: nic_mem_fence). The read then
         * fails at the initiator with a protection error. */
        if (frag && fw_tpt_check_rdma(vi, vi->rresp.rkey, vi->rresp.raddr + vi->rresp.off, frag,
                                      VIA_TPT_RDMA_READ)) {
            vi->rresp.active = false;
            rx_refused(vi, VIA_RXC_RDMAR_PROT, vi->rresp.seq);
            rx_refuse(vi, vi->rresp.seq, VIA_NAK_PROTECTION);
            fw_vi_error(vi, VIP_ERROR_RDMAR_PROT, 0);
            return;
        }
        struct via_wire_hdr *h = l->ops->reserve(l, frag);
        if (!h) {
            l->ops->stall(l);
            fw_want_visit(vi);
            return;
        }
        if (frag)
            hal_dma_gather(h + 1, vi->rresp.raddr + vi->rresp.off, frag, fw_link_dma(l));
        bool last = vi->rresp.off + frag == vi->rresp.len;
        *h = fw_wire_hdr(vi, VIA_PKT_RDMA_READ_RESP);
        h->flags = (vi->rresp.off == 0 ? VIA_PKT_FIRST : 0) | (last ? VIA_PKT_LAST : 0);
        h->msg_seq = vi->rresp.seq;
        h->msg_len = vi->rresp.len;
        h->frag_off = vi->rresp.off;
        h->frag_len = frag;
        h->arrive_ns = vi->rresp.arrive_ns;
        l->ops->publish(l, h);
        vi->rresp.off += frag;
        vi->rresp.active = !last;
        fw_peer_published(vi);
    }
}

/* Refuse a message of a reliable VI: the peer hears it as a NAK. */
static void rx_refuse(struct fw_vi *vi, uint32_t seq, uint32_t reason)
{
    if (vi->reliability != VIP_SERVICE_UNRELIABLE) {
        vi->nak_owed = seq;
        vi->nak_reason = reason;
        rx_answer(vi);
    }
}

/* The next receive descriptor's token (R2 taken on demand), or NULL when
 * none is posted: then VIA drops the message, and the reliable levels also
 * break the connection (VIP_ERROR_RECVQ_EMPTY), with a NAK to the peer. */
static const struct via_db_token *rx_next_desc(struct fw_vi *vi, uint32_t seq)
{
    if (vi->rq.head == vi->rq.tail)
        fw_bell_take(&vi->db->rq, &vi->rq, NULL);
    if (vi->rq.head != vi->rq.tail)
        return &vi->rq.tok[vi->rq.head % VIA_QUEUE_DEPTH];
    rx_refused(vi, VIA_RXC_NO_RECV, seq);
    rx_refuse(vi, seq, VIA_NAK_NO_RECV);
    fw_vi_error(vi, VIP_ERROR_RECVQ_EMPTY, 0);
    return NULL;
}

/* R3 Receive of a FIRST fragment, then R4 XDes. Returns the next state. */
static enum fw_rx_state rx_first(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    vi->rx_seq = h->msg_seq;
    FW_TRACE(vi->nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, h->msg_len);
    if (vi->in_error)
        return FW_RX_DISCARD;
    const struct via_db_token *tok = rx_next_desc(vi, h->msg_seq);
    if (!tok)
        return FW_RX_DISCARD;
    fw_xdes_fetch(vi, tok, true, &vi->rxd);
    FW_TRACE(vi->nic, VIA_ST_R4_XDES, vi->vi_id, h->msg_seq, vi->rxd.total);
    uint32_t err = vi->rxd.status;
    if (!err && h->msg_len > vi->rxd.total)
        err = VIP_STATUS_LENGTH_ERROR; /* the buffers cannot hold the message */
    if (err) {
        fw_updt(vi, &vi->rxd, true, err, 0);
        vi->rq.head++;
        rx_refused(vi, VIA_RXC_RECV_ERROR, h->msg_seq);
        rx_refuse(vi, h->msg_seq, VIA_NAK_RECV_ERROR);
        fw_vi_error(vi, VIP_ERROR_POST_DESC, vi->rxd.va);
        return FW_RX_DISCARD;
    }
    vi->rx_got = 0;
    return FW_RX_XDATA;
}

/* R5 XData for one fragment, R6 Updt after the last. */
static enum fw_rx_state rx_xdata(struct fw_vi *vi, const struct via_wire_hdr *h,
                                 const uint8_t *payload)
{
    if (h->frag_off != vi->rx_got) {
        rx_transport_error(vi, "a fragment out of order", NULL);
        return FW_RX_IDLE;
    }
    fw_xdata_copy(&vi->rxd, h->frag_off, (uint8_t *)(uintptr_t)payload, h->frag_len,
                  HAL_DMA_TO_HOST);
    vi->rx_got += h->frag_len;
    FW_TRACE(vi->nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len);
    if (!(h->flags & VIA_PKT_LAST))
        return FW_RX_XDATA;
    if (h->flags & VIA_PKT_IMM)
        vi->rxd.imm = h->imm;
    fw_updt(vi, &vi->rxd, true, (h->flags & VIA_PKT_IMM) ? VIP_STATUS_IMMEDIATE : 0,
            vi->rx_got);
    vi->rq.head++;
    /* Reliable reception: the sender's descriptor completes on our ACK. */
    if (vi->reliability == VIP_SERVICE_RELIABLE_RECEPTION) {
        vi->ack_owed = h->msg_seq;
        rx_answer(vi);
    }
    return FW_RX_IDLE;
}

static bool rx_lossy(const struct fw_vi *vi);

/* The receive checks of a packet's header that need the VI's view (right
 * connection, lengths, and for messages the order of fragments and
 * sequence numbers), in order, each with its name (enum via_rx_check):
 * VIA_RXC_OK, or the first that fails. */
static enum via_rx_check rx_check_header(const struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if (h->conn_id != vi->chan->conn_id)
        return VIA_RXC_CONN;
    if (h->dst_vi != vi->vi_id)
        return VIA_RXC_DST_VI;
    if (h->type == VIA_PKT_ACK || h->type == VIA_PKT_NAK)
        /* Only a message we sent can be answered, and each once. */
        return h->frag_len == 0 && (int32_t)(h->ack_seq - vi->acked) > 0 &&
                       (int32_t)(h->ack_seq - vi->tx_seq) <= 0
                   ? VIA_RXC_OK
                   : VIA_RXC_ANSWER;
    if (h->msg_len > VIA_MAX_TRANSFER || h->frag_len > h->msg_len ||
        h->frag_off > h->msg_len - h->frag_len)
        return VIA_RXC_LENGTH;
    if (h->type == VIA_PKT_RDMA_READ_RESP)
        /* Only the read we have in flight, in order, and no more of it. */
        return vi->tx == FW_TX_UPDT && vi->txd.op == VIP_CONTROL_OP_RDMAREAD &&
                       h->msg_seq == vi->tx_seq && (int32_t)(vi->acked - vi->tx_seq) < 0 &&
                       h->msg_len == vi->txd.total && h->frag_off == vi->rd_got &&
                       ((h->flags & VIA_PKT_FIRST) != 0) == (h->frag_off == 0) &&
                       ((h->flags & VIA_PKT_LAST) != 0) ==
                           (h->frag_off + h->frag_len == h->msg_len)
                   ? VIA_RXC_OK
                   : VIA_RXC_READ_RESP;
    if (h->type == VIA_PKT_RDMA_READ_REQ &&
        (h->flags != (VIA_PKT_FIRST | VIA_PKT_LAST) || h->frag_len || vi->rresp.active ||
         vi->reliability == VIP_SERVICE_UNRELIABLE))
        return VIA_RXC_READ_REQ; /* one header, one read at a time, from a VI that may read */
    bool first = h->flags & VIA_PKT_FIRST;
    if (first != (vi->rx == FW_RX_IDLE))
        return VIA_RXC_FIRST;
    if (!first && h->type != vi->rx_op)
        return VIA_RXC_KIND; /* a fragment of another kind of message than the one in progress */
    if (first && rx_lossy(vi))
        /* messages may be missing */
        return (int32_t)(h->msg_seq - vi->rx_seq) > 0 ? VIA_RXC_OK : VIA_RXC_SEQ;
    if (first ? h->msg_seq != vi->rx_seq + 1 : h->msg_seq != vi->rx_seq)
        return VIA_RXC_SEQ;
    return VIA_RXC_OK;
}

/* A packet refused by the check `why`: counted (rx_dropped, and the VI's
 * rx_refused[why], which vipctl counters shows by name) and traced
 * (VIA_ST_R_REFUSED, the reason in its length field). One writer: the VI's
 * receive side runs under its lock. */
static void rx_refused(struct fw_vi *vi, enum via_rx_check why, uint32_t seq)
{
    fw_count(&vi->db->cnt.rx_dropped, 1);
    _Atomic uint32_t *c = &vi->db->rx_refused[why];
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    FW_TRACE(vi->nic, VIA_ST_R_REFUSED, vi->vi_id, seq, why);
}

/* An unreliable VI on a link that loses (a network link): its messages
 * may be missing, whole or in part. */
static bool rx_lossy(const struct fw_vi *vi)
{
    return vi->reliability == VIP_SERVICE_UNRELIABLE && vi->link.ops != &fw_link_shm_ops;
}

/* A lossy VI's packet that does not fit the message in progress: the
 * first fragment of a later message abandons a message whose last
 * fragments were lost (its receive descriptor serves the next one); any
 * other packet is dropped and counted. true: the packet is to be taken. */
static bool rx_lossy_fit(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if ((h->flags & VIA_PKT_FIRST) && vi->rx != FW_RX_IDLE &&
        (int32_t)(h->msg_seq - vi->rx_seq) > 0 && h->type != VIA_PKT_RDMA_READ_RESP) {
        vi->rx = FW_RX_IDLE;
        rx_refused(vi, VIA_RXC_LOSSY_GONE, vi->rx_seq);
        return rx_check_header(vi, h) == VIA_RXC_OK;
    }
    rx_refused(vi, VIA_RXC_LOSSY_STRAY, h->msg_seq);
    return false;
}

/* Paced profiles: claim the receiving LANai for this packet's stages (R3
 * and R4 with the first fragment, R5 for its share of the data, R6 with
 * the last) from the moment it has arrived; false while real time has not
 * reached their end, i.e. the packet is not yet visible to the host. */
static bool rx_due(struct fw_vi *vi, const struct via_wire_hdr *h, uint64_t key)
{
    struct fw_nic *nic = vi->nic;
    if (vi->rx_sched_for != key) {
        const struct via_profile *p = nic->prof;
        bool first = h->flags & VIA_PKT_FIRST, last = h->flags & VIA_PKT_LAST;
        /* A read's request carries no data (its response is paced as the
         * message it is). */
        uint32_t n = h->type == VIA_PKT_RDMA_READ_REQ ? 0 : h->msg_len;
        double frac = n ? (double)h->frag_len / n : 1.0;
        /* An RDMA write without immediate data uses no receive
         * descriptor: no R4 fetch, no R6 completion. */
        bool desc = h->type != VIA_PKT_RDMA_WRITE || (h->flags & VIA_PKT_IMM);
        double c3 = first ? fw_cost_stage(p, VIA_ST_R3_RECEIVE, FW_EXT_STANDARD, n, 1) : 0;
        double c4 = first && desc ? fw_cost_stage(p, VIA_ST_R4_XDES, FW_EXT_STANDARD, n, 1) : 0;
        double c5 = frac * fw_cost_stage(p, VIA_ST_R5_XDATA, FW_EXT_STANDARD, n, n ? 1 : 0);
        double c6 = last && desc ? fw_cost_stage(p, VIA_ST_R6_UPDT, FW_EXT_STANDARD, n, 1) : 0;
        uint64_t dur = (uint64_t)(c3 + c4 + c5 + c6);
        uint64_t start = fw_sched_recv(nic, h->arrive_ns ? h->arrive_ns : hal_model_now_ns(), dur);
        vi->rx_release = start + dur;
        vi->rx_sched_for = key;
        if (first) {
            fw_account(nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, n, c3);
            fw_account(nic, VIA_ST_R4_XDES, vi->vi_id, h->msg_seq, n, c4);
        }
        fw_account(nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len, c5);
        if (last)
            fw_account(nic, VIA_ST_R6_UPDT, vi->vi_id, h->msg_seq, n, c6);
    }
    return fw_release_due(vi, vi->rx_release);
}

/* ---- the opcode table ------------------------------------------------------- */

/* SEND: R3/R4 on the first fragment, R5 on each, R6 after the last. */
static void op_send(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    if (vi->rx == FW_RX_IDLE)
        vi->rx = rx_first(vi, h);
    if (vi->rx == FW_RX_XDATA)
        vi->rx = rx_xdata(vi, h, payload);
    else if (vi->rx == FW_RX_DISCARD && (h->flags & VIA_PKT_LAST))
        vi->rx = FW_RX_IDLE;
}

/* An RTS we cannot pull (VIP_CMA is not 1 here, the kernel's EPERM): the
 * sender hears it as a NAK and sends the message again through the ring,
 * with the same sequence number; no receive descriptor was used. */
static void rx_pull_refused(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    vi->cma = false;
    vi->rx_seq = h->msg_seq - 1;
    vi->nak_owed = h->msg_seq;
    vi->nak_reason = VIA_NAK_PULL_REFUSED;
    rx_answer(vi);
}

/* SEND_RTS: a SEND whose bytes stay in the sender's memory (fw_cma.c).
 * R3/R4 exactly as for a SEND (no descriptor, a bad or short one: the same
 * statuses and NAKs), R5 is one pull from the sender's segments into the
 * checked scatter list, R6, then the ACK that completes the sender's
 * descriptor. A source that cannot be read breaks the connection: the
 * receive and the send complete with TRANSPORT_ERROR. */
static void op_send_rts(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    struct via_rts_seg src[VIA_MAX_SEGS];
    unsigned n;
    if (!fw_cma_table_take(h, payload, src, &n) || vi->reliability == VIP_SERVICE_UNRELIABLE) {
        rx_transport_error(vi, "a bad pull request", NULL); /* no correct NIC sends it */
        return;
    }
    vi->rx = rx_first(vi, h);
    if (vi->rx != FW_RX_XDATA) {
        vi->rx = FW_RX_IDLE;
        return;
    }
    int err = fw_cma_pull(vi, src, n, h->msg_len, &vi->rxd);
    if (err == EPERM) {
        /* The kernel's refusal, or ours (VIP_CMA off, refused once): the
         * descriptor stays queued for the ring's copy. */
        vi->rx = FW_RX_IDLE;
        rx_pull_refused(vi, h);
        return;
    }
    FW_TRACE(vi->nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->msg_len);
    if (err) {
        /* What the sender named cannot be read (or the sender is gone):
         * the peer hears why, then the link breaks as for a bad packet. */
        rx_refused(vi, VIA_RXC_PULL_FAULT, h->msg_seq);
        rx_refuse(vi, h->msg_seq, VIA_NAK_PULL_FAULT);
        rx_transport_error(vi, "the sender's memory cannot be pulled", NULL);
        return;
    }
    vi->rx = FW_RX_IDLE;
    /* The ACK before the completion: once the program sees its receive it
     * may disconnect at once, and the send completes only on this ACK. */
    vi->ack_owed = h->msg_seq;
    rx_answer(vi);
    if (h->flags & VIA_PKT_IMM)
        vi->rxd.imm = h->imm;
    fw_updt(vi, &vi->rxd, true, (h->flags & VIA_PKT_IMM) ? VIP_STATUS_IMMEDIATE : 0,
            h->msg_len);
    vi->rq.head++;
}

static void rx_write_placed(struct fw_vi *vi, const struct via_wire_hdr *h);

/* The responder's check of an RDMA write's whole target range, before a
 * byte is written: false when nothing is to be written. */
static bool rx_write_target_ok(struct fw_vi *vi, const struct via_wire_hdr *h, uint64_t addr,
                               uint32_t len)
{
    uint32_t prot = vi->rdma_write ? fw_tpt_check_rdma(vi, h->rkey, addr, len, VIA_TPT_RDMA_WRITE)
                                   : VIP_STATUS_PROTECTION_ERROR;
    if (prot) {
        /* Reliable levels: the initiator's descriptor fails with the
         * protection error and both VIs break. Unreliable: the write is
         * dropped, as a message would be. */
        rx_refused(vi, VIA_RXC_RDMAW_PROT, h->msg_seq);
        if (vi->reliability != VIP_SERVICE_UNRELIABLE) {
            rx_refuse(vi, h->msg_seq, VIA_NAK_PROTECTION);
            fw_vi_error(vi, VIP_ERROR_RDMAW_PROT, 0);
        }
    }
    return !prot && !vi->in_error;
}

/* RDMA_WRITE: the responder places each fragment at raddr + frag_off after
 * checking the whole target range, and checks each later fragment's own
 * range again as it places it: memory deregistered meanwhile is never
 * written (the check and the copy are one turn under the VI's lock, which
 * a deregistration waits for: nic_mem_fence). With immediate data the last
 * fragment also completes a receive descriptor (no data goes into its
 * segments). */
static void op_rdma_write(struct fw_vi *vi, const struct via_wire_hdr *h,
                          const uint8_t *payload)
{
    bool first = h->flags & VIA_PKT_FIRST, last = h->flags & VIA_PKT_LAST;
    if (!first && (h->rkey != vi->rdma_rkey || h->raddr != vi->rdma_raddr ||
                   h->msg_len != vi->rdma_len || h->frag_off != vi->rx_got)) {
        /* Later fragments must be of the message whose whole range was
         * checked: the same target, in order. */
        rx_transport_error(vi, "an RDMA write fragment of another message", NULL);
        return;
    }
    vi->rx_got = first ? h->frag_len : vi->rx_got + h->frag_len;
    if (first) {
        vi->rx_seq = h->msg_seq;
        vi->rdma_rkey = h->rkey;
        vi->rdma_raddr = h->raddr;
        vi->rdma_len = h->msg_len;
        vi->rx = rx_write_target_ok(vi, h, h->raddr, h->msg_len) ? FW_RX_PLACE : FW_RX_DISCARD;
    } else if (vi->rx == FW_RX_PLACE && h->frag_len &&
               !rx_write_target_ok(vi, h, h->raddr + h->frag_off, h->frag_len)) {
        vi->rx = FW_RX_DISCARD;
    }
    if (vi->rx == FW_RX_PLACE && h->frag_len)
        hal_dma_to_host(h->raddr + h->frag_off, payload, h->frag_len);
    if (!last)
        return;
    bool placed = vi->rx == FW_RX_PLACE;
    vi->rx = FW_RX_IDLE;
    if (placed)
        rx_write_placed(vi, h);
}

/* An RDMA write's bytes are all in place: with immediate data a receive
 * descriptor completes; the reliable levels answer with an ACK. */
static void rx_write_placed(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if (h->flags & VIA_PKT_IMM) {
        const struct via_db_token *tok = rx_next_desc(vi, h->msg_seq);
        if (!tok)
            return;
        fw_xdes_fetch(vi, tok, true, &vi->rxd);
        vi->rxd.imm = h->imm;
        vi->rxd.op = VIP_CONTROL_OP_RDMAWRITE; /* reported as the remote's write */
        fw_updt(vi, &vi->rxd, true,
                vi->rxd.status ? vi->rxd.status : VIP_STATUS_IMMEDIATE, h->msg_len);
        vi->rq.head++;
        if (vi->rxd.status) {
            rx_refuse(vi, h->msg_seq, VIA_NAK_RECV_ERROR);
            fw_vi_error(vi, VIP_ERROR_POST_DESC, vi->rxd.va);
            return;
        }
    }
    if (vi->reliability != VIP_SERVICE_UNRELIABLE) {
        vi->ack_owed = h->msg_seq;
        rx_answer(vi);
    }
}

/* WRITE_RTS: an RDMA write whose bytes stay in the initiator's memory
 * (fw_cma.c): the target range is checked as for RDMA_WRITE, then pulled
 * into in one copy; refusals and faults as for SEND_RTS. */
static void op_write_rts(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    struct via_rts_seg src[VIA_MAX_SEGS];
    unsigned n;
    if (!fw_cma_table_take(h, payload, src, &n) || vi->reliability == VIP_SERVICE_UNRELIABLE) {
        rx_transport_error(vi, "a bad RDMA write pull request", NULL);
        return;
    }
    vi->rx_seq = h->msg_seq;
    if (!rx_write_target_ok(vi, h, h->raddr, h->msg_len))
        return;
    struct fw_xdes dst = {.segcount = 1, .seg[0] = {.va = h->raddr, .len = h->msg_len}};
    int err = fw_cma_pull(vi, src, n, h->msg_len, &dst);
    if (err == EPERM) {
        rx_pull_refused(vi, h);
        return;
    }
    if (err) {
        rx_refused(vi, VIA_RXC_PULL_FAULT, h->msg_seq);
        rx_refuse(vi, h->msg_seq, VIA_NAK_PULL_FAULT);
        rx_transport_error(vi, "the writer's memory cannot be pulled", NULL);
        return;
    }
    rx_write_placed(vi, h);
}

/* RDMA_READ_REQ: check the whole source range, then answer with its bytes
 * (rx_respond); a violation is NAKed and breaks both VIs. */
static void op_rdma_read_req(struct fw_vi *vi, const struct via_wire_hdr *h,
                             const uint8_t *payload)
{
    (void)payload;
    vi->rx_seq = h->msg_seq;
    FW_TRACE(vi->nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, 0);
    if (vi->in_error)
        return;
    uint32_t prot = vi->rdma_read && vi->reliability != VIP_SERVICE_UNRELIABLE
                        ? fw_tpt_check_rdma(vi, h->rkey, h->raddr, h->msg_len, VIA_TPT_RDMA_READ)
                        : VIP_STATUS_PROTECTION_ERROR;
    if (prot) {
        rx_refused(vi, VIA_RXC_RDMAR_PROT, h->msg_seq);
        rx_refuse(vi, h->msg_seq, VIA_NAK_PROTECTION);
        fw_vi_error(vi, VIP_ERROR_RDMAR_PROT, 0);
        return;
    }
    vi->rresp.active = true;
    vi->rresp.seq = h->msg_seq;
    vi->rresp.rkey = h->rkey;
    vi->rresp.raddr = h->raddr;
    vi->rresp.len = h->msg_len;
    vi->rresp.off = 0;
    vi->rresp.arrive_ns = rresp_arrive(vi, h->msg_len);
    rx_respond(vi);
}

/* RDMA_READ_RESP: the read in flight gets its bytes, in order; the last
 * fragment is the read's answer (tx_updt completes the descriptor). */
static void op_rdma_read_resp(struct fw_vi *vi, const struct via_wire_hdr *h,
                              const uint8_t *payload)
{
    fw_xdata_copy(&vi->txd, h->frag_off, (uint8_t *)(uintptr_t)payload, h->frag_len,
                  HAL_DMA_TO_HOST);
    vi->rd_got += h->frag_len;
    FW_TRACE(vi->nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len);
    if (h->flags & VIA_PKT_LAST)
        vi->acked = h->msg_seq;
}

/* ACK: the peer placed our messages up to ack_seq. */
static void op_ack(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    (void)payload;
    vi->acked = h->ack_seq;
}

/* NAK: the peer refused message ack_seq; the completer fails it. */
static void op_nak(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    (void)payload;
    vi->acked = h->ack_seq - 1;
    vi->naked = true;
    vi->naked_why = h->imm;
}

typedef void (*rx_op_fn)(struct fw_vi *, const struct via_wire_hdr *, const uint8_t *);
static const struct {
    rx_op_fn fn;
    bool message; /* carries a message (sequence, receive stages, pacing) */
} rx_ops[VIA_PKT_NTYPES] = {
    [VIA_PKT_SEND] = {op_send, true},
    [VIA_PKT_RDMA_WRITE] = {op_rdma_write, true},
    [VIA_PKT_RDMA_READ_REQ] = {op_rdma_read_req, true},
    [VIA_PKT_RDMA_READ_RESP] = {op_rdma_read_resp, true},
    [VIA_PKT_ACK] = {op_ack, false},
    [VIA_PKT_NAK] = {op_nak, false},
    [VIA_PKT_SEND_RTS] = {op_send_rts, true},
    [VIA_PKT_WRITE_RTS] = {op_write_rts, true},
};

static void rx_packets(struct fw_vi *vi)
{
    struct fw_link *l = &vi->link;
    unsigned n = 0;
    if (vi->ack_owed || vi->nak_owed)
        rx_answer(vi); /* what the link was too full to take last time */
    if (vi->rresp.active)
        rx_respond(vi);
    for (;;) {
        struct via_wire_hdr h;
        const uint8_t *payload;
        enum fw_link_peek_rc rc = l->ops->peek(l, &h, &payload);
        if (rc == FW_LINK_EMPTY)
            break;
        if (rc == FW_LINK_BAD || !rx_ops[h.type].fn) {
            rx_transport_error(vi, rc == FW_LINK_BAD ? "a packet failed the link's checks"
                                                     : "a packet of no known type", NULL);
            break;
        }
        enum via_rx_check why = rx_check_header(vi, &h);
        if (why != VIA_RXC_OK) {
            if (!rx_lossy(vi) || why == VIA_RXC_CONN || why == VIA_RXC_DST_VI) {
                rx_refused(vi, why, h.msg_seq);
                rx_transport_error(vi, "a packet whose header fails the receive checks", &h);
                break;
            }
            if (!rx_lossy_fit(vi, &h)) {
                l->ops->consume(l, &h);
                continue;
            }
        }
        if (rx_ops[h.type].message && vi->nic->paced && !rx_due(vi, &h, vi->rx_pkts + 1))
            break;
        if ((h.flags & VIA_PKT_FIRST) && h.type != VIA_PKT_RDMA_READ_RESP)
            vi->rx_op = h.type;
        rx_ops[h.type].fn(vi, &h, payload);
        l->ops->consume(l, &h);
        vi->rx_pkts++;
        n++;
    }
    if (l->ops->drained(l, n))
        fw_notify_peer(vi);
}

bool fw_rx_pending(const struct fw_vi *vi)
{
    if (!vi->chan)
        return false;
    return vi->link.ops->pending(&vi->link) ||
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
    /* Packets already on the link are taken before a close is seen (the
     * caller checks the link after the send side had its turn). */
    rx_packets(vi);
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

void fw_vi_init(struct fw_vi *vi, struct fw_nic *nic, uint32_t vi_id, struct via_vi_page *db)
{
    vi->nic = nic;
    vi->vi_id = vi_id;
    vi->db = db;
    vi->chan = NULL;
    atomic_store(&vi->peer_pidfd, -1);
    vi->tx = FW_TX_IDLE;
    vi->rx = FW_RX_IDLE;
    vi->sq.head = vi->sq.tail = 0;
    vi->rq.head = vi->rq.tail = 0;
    vi->tx_seq = vi->rx_seq = vi->acked = 0;
    vi->err_reported = vi->err_told = vi->in_error = vi->err_orderly = false;
    atomic_store(&vi->err_pending, false);
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
    atomic_store(&vi->poll_dir, vi->link.rx); /* NULL for a network link: no lock-free quiet check */
    atomic_store(&vi->wake_dir, vi->link.ops == &fw_link_shm_ops ? vi->link.rx : NULL);
    fw_linked_mark(vi, true);
    atomic_store(&vi->quiet, false);
    vi->side = side;
    vi->peer_vi = peer_vi;
    vi->peer_ev = peer_ev;
    vi->tx_seq = vi->rx_seq = vi->acked = vi->ack_owed = vi->nak_owed = 0;
    vi->naked = vi->wake_peer = false;
    vi->cma = vi->tx_rdv = false; /* fw_cma_connect decides */
    vi->rx_pkts = 0;
    vi->rresp.active = false;
    vi->naked_why = 0;
    vi->rx_sched_for = 0;
    vi->tx = FW_TX_IDLE;
    vi->rx = FW_RX_IDLE;
    vi->err_reported = vi->err_told = vi->in_error = vi->err_orderly = false;
    atomic_store(&vi->err_pending, false);
    fw_vclock_connected(vi);
    atomic_store(&vi->db->state, VIA_VI_CONNECTED);
    return true;
}

void fw_link_failed(struct fw_vi *vi)
{
    if (vi->tx != FW_TX_IDLE) {
        fw_updt(vi, &vi->txd, false, VIP_STATUS_TRANSPORT_ERROR, 0);
        vi->sq.head++;
        vi->tx = FW_TX_IDLE;
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
    fw_linked_mark(vi, false);
    atomic_store(&vi->poll_chan, NULL);
    vi->chan = NULL;
    if (vi->link.ops && vi->link.ops->fini)
        vi->link.ops->fini(&vi->link, state);
    vi->link = (struct fw_link){0};
    vi->peer_ev = NULL;
    vi->wake_peer = false;
    vi->in_error = false;
}

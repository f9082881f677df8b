/*
 * fw_rx.c - the receive pipeline's front: R2 Bell and R3 Receive.
 *
 * Receive doorbells are taken ahead of time (R2) into the NIC's queue.
 * When a packet arrives (R3) the NIC only then learns which VI it is for
 * and what it asks: its header passes the receive checks (fw_rx_check.c),
 * a paced profile claims the receiving LANai's time for it (rx_due), and
 * a table of packet opcodes hands it to its role: the responder
 * (fw_resp.c) for the peer's requests, the completer (fw_comp.c) for the
 * peer's answers to ours.
 */
#include <errno.h>
#include <stdio.h>

#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"
#include "fw_rx.h"

/* Paced profiles: claim the receiving LANai for this packet's stages (R3
 * and R4 with the first fragment, R5 for its share of the data, R6 with
 * the last) from the moment it has arrived; false while real time has not
 * reached their end, i.e. the packet is not yet visible to the host. */
static bool rx_due(struct fw_vi *vi, const struct via_wire_hdr *h, uint64_t key)
{
    struct fw_nic *nic = vi->nic;
    if (vi->resp.sched_for != key) {
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
        vi->resp.release = start + dur;
        vi->resp.sched_for = key;
        if (first) {
            fw_account(nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, n, c3);
            fw_account(nic, VIA_ST_R4_XDES, vi->vi_id, h->msg_seq, n, c4);
        }
        fw_account(nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len, c5);
        if (last)
            fw_account(nic, VIA_ST_R6_UPDT, vi->vi_id, h->msg_seq, n, c6);
    }
    return fw_release_due(vi, vi->resp.release);
}

typedef void (*rx_op_fn)(struct fw_vi *, const struct via_wire_hdr *, const uint8_t *);
static const struct {
    rx_op_fn fn;
    bool message; /* carries a message (sequence, receive stages, pacing) */
} rx_ops[VIA_PKT_NTYPES] = {
    [VIA_PKT_SEND] = {fw_resp_send, true},
    [VIA_PKT_RDMA_WRITE] = {fw_resp_write, true},
    [VIA_PKT_RDMA_READ_REQ] = {fw_resp_read_req, true},
    [VIA_PKT_RDMA_READ_RESP] = {fw_comp_read_resp, true},
    [VIA_PKT_ACK] = {fw_comp_ack, false},
    [VIA_PKT_NAK] = {fw_comp_nak, false},
    [VIA_PKT_SEND_RTS] = {fw_resp_send_rts, true},
    [VIA_PKT_WRITE_RTS] = {fw_resp_write_rts, true},
};

static void rx_packets(struct fw_vi *vi)
{
    struct fw_link *l = &vi->link;
    unsigned n = 0;
    if (vi->resp.ack_owed || vi->resp.nak_owed)
        fw_resp_answer(vi); /* what the link was too full to take last time */
    if (vi->resp.rd.active)
        fw_resp_respond(vi);
    for (;;) {
        struct via_wire_hdr h;
        const uint8_t *payload;
        enum fw_link_peek_rc rc = l->ops->peek(l, &h, &payload);
        if (rc == FW_LINK_EMPTY)
            break;
        if (rc == FW_LINK_BAD || !rx_ops[h.type].fn) {
            fw_rx_broken(vi, rc == FW_LINK_BAD ? "a packet failed the link's checks"
                                                     : "a packet of no known type", NULL);
            break;
        }
        enum via_rx_check why = fw_rx_check_header(vi, &h);
        if (why != VIA_RXC_OK) {
            if (!fw_rx_lossy(vi) || why == VIA_RXC_CONN || why == VIA_RXC_DST_VI) {
                fw_rx_refused(vi, why, h.msg_seq);
                fw_rx_broken(vi, "a packet whose header fails the receive checks", &h);
                break;
            }
            if (!fw_rx_lossy_fit(vi, &h)) {
                l->ops->consume(l, &h);
                continue;
            }
        }
        if (rx_ops[h.type].message && vi->nic->paced && !rx_due(vi, &h, vi->resp.pkts + 1))
            break;
        if ((h.flags & VIA_PKT_FIRST) && h.type != VIA_PKT_RDMA_READ_RESP)
            vi->resp.op = h.type;
        rx_ops[h.type].fn(vi, &h, payload);
        l->ops->consume(l, &h);
        vi->resp.pkts++;
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
    uint32_t took = fw_bell_take(&vi->db->rq, &vi->resp.rq, NULL);
    if (took)
        FW_TRACE(vi->nic, VIA_ST_R2_BELL, vi->vi_id, vi->resp.seq, took);
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

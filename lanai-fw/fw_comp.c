/*
 * fw_comp.c - the completer: the peer's answers to our messages (ACK, NAK,
 * an RDMA read's response), and T6's wait for them.
 *
 * Which messages complete only on an answer is fw_comp_needs_answer's
 * rule (fw_rx.h). Answers are cumulative: `acked` is the last of our
 * messages the peer placed; a NAK names the message it refused and why.
 * The send pipeline (fw_tx.c) asks fw_comp_wait what T6 does next while
 * its message awaits an answer.
 */
#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"
#include "fw_rx.h"

/* RDMA_READ_RESP: the read in flight gets its bytes, in order; the last
 * fragment is the read's answer (T6 in fw_tx.c completes the descriptor). */
void fw_comp_read_resp(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    fw_xdata_copy(&vi->req.txd, h->frag_off, (uint8_t *)(uintptr_t)payload, h->frag_len,
                  HAL_DMA_TO_HOST);
    vi->req.msg.rd_got += h->frag_len;
    FW_TRACE(vi->nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len);
    if (h->flags & VIA_PKT_LAST)
        vi->comp.acked = h->msg_seq;
}

/* ACK: the peer placed our messages up to ack_seq. */
void fw_comp_ack(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    (void)payload;
    vi->comp.acked = h->ack_seq;
}

/* NAK: the peer refused message ack_seq; the completer fails it. */
void fw_comp_nak(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    (void)payload;
    vi->comp.acked = h->ack_seq - 1;
    vi->comp.nak = true;
    vi->comp.nak_why = h->imm;
}

/* The peer refused the message (NAK): the descriptor's status and the
 * VI's error. */
static void comp_refused(struct fw_vi *vi)
{
    bool prot = vi->comp.nak_why == VIA_NAK_PROTECTION;
    uint32_t status = prot ? VIP_STATUS_RDMA_PROT_ERROR : VIP_STATUS_TRANSPORT_ERROR;
    uint32_t code = !prot ? VIP_ERROR_CONN_LOST
                    : vi->req.txd.op == VIP_CONTROL_OP_RDMAREAD ? VIP_ERROR_RDMAR_PROT
                                                                : VIP_ERROR_RDMAW_PROT;
    uint64_t va = vi->req.txd.va;
    fw_req_fail(vi, status);
    fw_vi_error(vi, code, prot ? va : 0);
}

int fw_comp_wait(struct fw_vi *vi)
{
    if (vi->comp.nak && vi->req.msg.rdv && vi->comp.nak_why == VIA_NAK_PULL_REFUSED) {
        /* The receiver cannot pull from us: this message and the
         * connection's next ones go through the ring. */
        vi->comp.nak = false;
        vi->req.msg.rdv = false;
        vi->cma = false;
        vi->req.msg.off = 0;
        return FW_TX_XDATA;
    }
    if (vi->comp.nak) {
        comp_refused(vi);
        fw_link_check(vi);
        return FW_TX_IDLE;
    }
    if (atomic_load(&vi->chan->state) != VIA_CHAN_OPEN && !vi->link.ops->pending(&vi->link)) {
        fw_req_fail(vi, VIP_STATUS_TRANSPORT_ERROR);
        fw_link_check(vi);
        return FW_TX_IDLE;
    }
    vi->link.awaiting_answer = true;
    return FW_TX_BLOCKED; /* the answer sets our arrival bit */
}

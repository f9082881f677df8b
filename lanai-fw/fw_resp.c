/*
 * fw_resp.c - the responder: what the NIC does with the peer's requests.
 *
 *   SEND        on the first fragment the NIC stages the next receive
 *               descriptor (R4), scatters every fragment into its segments
 *               (R5), and completes it after the last one (R6); a
 *               reliable-reception VI then acknowledges it with an ACK.
 *               With no receive posted it is dropped (NAK on reliable VIs).
 *   RDMA_WRITE  the target region is checked (memory handle, ptag, the
 *               region's and the VI's RDMA-write enables, bounds) before
 *               any byte is written; no receive descriptor is used unless
 *               the write carries immediate data. On the reliable levels
 *               the answer is an ACK (or a NAK of the violation).
 *   RDMA_READ_REQ  the source region is checked the same way (RDMA-read
 *               enables) and its bytes go back as READ_RESP fragments, as
 *               the link makes room (fw_resp_respond).
 *   SEND_RTS,   a large SEND or RDMA write of a process of this host
 *   WRITE_RTS   (native): the NIC pulls its bytes from the sender's memory
 *               (fw_cma.c), a write's after the RDMA_WRITE checks.
 *
 * Answers (ACK, NAK) are owed until the link has room (fw_resp_answer);
 * the completer at the other end waits for them.
 */
#include <errno.h>
#include <stdio.h>

#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"
#include "fw_rx.h"

/* ACK or NAK for a message of the peer's (the completer on the other
 * side waits for it). Owed until there is room on the link. */
void fw_resp_answer(struct fw_vi *vi)
{
    struct fw_link *l = &vi->link;
    while (vi->resp.ack_owed || vi->resp.nak_owed) {
        bool nak = vi->resp.nak_owed != 0;
        struct via_wire_hdr *h = l->ops->reserve(l, 0);
        if (!h) {
            l->ops->stall(l);
            fw_want_visit(vi);
            return;
        }
        *h = fw_wire_hdr(vi, nak ? VIA_PKT_NAK : VIA_PKT_ACK);
        h->ack_seq = nak ? vi->resp.nak_owed : vi->resp.ack_owed;
        h->imm = nak ? vi->resp.nak_reason : 0;
        l->ops->publish(l, h);
        if (nak)
            vi->resp.nak_owed = 0;
        else
            vi->resp.ack_owed = 0;
        fw_peer_published(vi);
    }
}

/* Refuse a message of a reliable VI: the peer hears it as a NAK. */
static void resp_refuse(struct fw_vi *vi, uint32_t seq, uint32_t reason)
{
    if (vi->reliability != VIP_SERVICE_UNRELIABLE) {
        vi->resp.nak_owed = seq;
        vi->resp.nak_reason = reason;
        fw_resp_answer(vi);
    }
}

/* Paced profiles: the responder's LANai sends the read's bytes like a
 * message of its own (T3..T5 of `len` bytes from now); when the last byte
 * reaches the initiator. */
static uint64_t resp_read_arrive(struct fw_vi *vi, uint32_t len)
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

/* The responder's half of an RDMA read: the checked source range goes
 * back as READ_RESP fragments, as many as the link takes this turn. */
void fw_resp_respond(struct fw_vi *vi)
{
    struct fw_link *l = &vi->link;
    while (vi->resp.rd.active) {
        uint32_t left = vi->resp.rd.len - vi->resp.rd.off;
        uint32_t mtu = fw_link_mtu(l);
        uint32_t frag = left < mtu ? left : mtu;
        /* Each chunk's range is checked again as it is read: memory
         * deregistered meanwhile is never read (the check and the copy are
         * one turn under the VI's lock: nic_mem_fence). The read then
         * fails at the initiator with a protection error. */
        if (frag && fw_tpt_check_rdma(vi, vi->resp.rd.rkey, vi->resp.rd.raddr + vi->resp.rd.off,
                                      frag, VIA_TPT_RDMA_READ)) {
            vi->resp.rd.active = false;
            fw_rx_refused(vi, VIA_RXC_RDMAR_PROT, vi->resp.rd.seq);
            resp_refuse(vi, vi->resp.rd.seq, VIA_NAK_PROTECTION);
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
            hal_dma_gather(h + 1, vi->resp.rd.raddr + vi->resp.rd.off, frag, fw_link_dma(l));
        bool last = vi->resp.rd.off + frag == vi->resp.rd.len;
        *h = fw_wire_hdr(vi, VIA_PKT_RDMA_READ_RESP);
        h->flags = (vi->resp.rd.off == 0 ? VIA_PKT_FIRST : 0) | (last ? VIA_PKT_LAST : 0);
        h->msg_seq = vi->resp.rd.seq;
        h->msg_len = vi->resp.rd.len;
        h->frag_off = vi->resp.rd.off;
        h->frag_len = frag;
        h->arrive_ns = vi->resp.rd.arrive_ns;
        l->ops->publish(l, h);
        vi->resp.rd.off += frag;
        vi->resp.rd.active = !last;
        fw_peer_published(vi);
    }
}

/* The next receive descriptor's token (R2 taken on demand), or NULL when
 * none is posted: then VIA drops the message, and the reliable levels also
 * break the connection (VIP_ERROR_RECVQ_EMPTY), with a NAK to the peer. */
static const struct via_db_token *resp_next_recv(struct fw_vi *vi, uint32_t seq)
{
    if (vi->resp.rq.head == vi->resp.rq.tail)
        fw_bell_take(&vi->db->rq, &vi->resp.rq, NULL);
    if (vi->resp.rq.head != vi->resp.rq.tail)
        return &vi->resp.rq.tok[vi->resp.rq.head % VIA_QUEUE_DEPTH];
    fw_rx_refused(vi, VIA_RXC_NO_RECV, seq);
    resp_refuse(vi, seq, VIA_NAK_NO_RECV);
    fw_vi_error(vi, VIP_ERROR_RECVQ_EMPTY, 0);
    return NULL;
}

/* R3 Receive of a FIRST fragment, then R4 XDes. Returns the next state. */
static enum fw_rx_state resp_first(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    vi->resp.seq = h->msg_seq;
    FW_TRACE(vi->nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, h->msg_len);
    if (vi->in_error)
        return FW_RX_DISCARD;
    const struct via_db_token *tok = resp_next_recv(vi, h->msg_seq);
    if (!tok)
        return FW_RX_DISCARD;
    fw_xdes_fetch(vi, tok, true, &vi->resp.rxd);
    FW_TRACE(vi->nic, VIA_ST_R4_XDES, vi->vi_id, h->msg_seq, vi->resp.rxd.total);
    uint32_t err = vi->resp.rxd.status;
    if (!err && h->msg_len > vi->resp.rxd.total)
        err = VIP_STATUS_LENGTH_ERROR; /* the buffers cannot hold the message */
    if (err) {
        fw_updt(vi, &vi->resp.rxd, true, err, 0);
        vi->resp.rq.head++;
        fw_rx_refused(vi, VIA_RXC_RECV_ERROR, h->msg_seq);
        resp_refuse(vi, h->msg_seq, VIA_NAK_RECV_ERROR);
        fw_vi_error(vi, VIP_ERROR_POST_DESC, vi->resp.rxd.va);
        return FW_RX_DISCARD;
    }
    vi->resp.got = 0;
    return FW_RX_XDATA;
}

/* R5 XData for one fragment, R6 Updt after the last. */
static enum fw_rx_state resp_xdata(struct fw_vi *vi, const struct via_wire_hdr *h,
                                   const uint8_t *payload) {
    if (h->frag_off != vi->resp.got) {
        fw_rx_broken(vi, "a fragment out of order", NULL);
        return FW_RX_IDLE;
    }
    fw_xdata_copy(&vi->resp.rxd, h->frag_off, (uint8_t *)(uintptr_t)payload, h->frag_len,
                  HAL_DMA_TO_HOST);
    vi->resp.got += h->frag_len;
    FW_TRACE(vi->nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->frag_len);
    if (!(h->flags & VIA_PKT_LAST))
        return FW_RX_XDATA;
    if (h->flags & VIA_PKT_IMM)
        vi->resp.rxd.imm = h->imm;
    fw_updt(vi, &vi->resp.rxd, true, (h->flags & VIA_PKT_IMM) ? VIP_STATUS_IMMEDIATE : 0,
            vi->resp.got);
    vi->resp.rq.head++;
    /* Reliable reception: the sender's descriptor completes on our ACK. */
    if (vi->reliability == VIP_SERVICE_RELIABLE_RECEPTION) {
        vi->resp.ack_owed = h->msg_seq;
        fw_resp_answer(vi);
    }
    return FW_RX_IDLE;
}

/* SEND: R3/R4 on the first fragment, R5 on each, R6 after the last. */
void fw_resp_send(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    if (vi->resp.state == FW_RX_IDLE)
        vi->resp.state = resp_first(vi, h);
    if (vi->resp.state == FW_RX_XDATA)
        vi->resp.state = resp_xdata(vi, h, payload);
    else if (vi->resp.state == FW_RX_DISCARD && (h->flags & VIA_PKT_LAST))
        vi->resp.state = FW_RX_IDLE;
}

/* An RTS we cannot pull (VIP_CMA is not 1 here, the kernel's EPERM): the
 * sender hears it as a NAK and sends the message again through the ring,
 * with the same sequence number; no receive descriptor was used. */
static void resp_pull_refused(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    vi->cma = false;
    vi->resp.seq = h->msg_seq - 1;
    vi->resp.nak_owed = h->msg_seq;
    vi->resp.nak_reason = VIA_NAK_PULL_REFUSED;
    fw_resp_answer(vi);
}

/* SEND_RTS: a SEND whose bytes stay in the sender's memory (fw_cma.c).
 * R3/R4 exactly as for a SEND (no descriptor, a bad or short one: the same
 * statuses and NAKs), R5 is one pull from the sender's segments into the
 * checked scatter list, R6, then the ACK that completes the sender's
 * descriptor. A source that cannot be read breaks the connection: the
 * receive and the send complete with TRANSPORT_ERROR. */
void fw_resp_send_rts(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    struct via_rts_seg src[VIA_MAX_SEGS];
    unsigned n;
    if (!fw_cma_table_take(h, payload, src, &n) || vi->reliability == VIP_SERVICE_UNRELIABLE) {
        fw_rx_broken(vi, "a bad pull request", NULL); /* no correct NIC sends it */
        return;
    }
    vi->resp.state = resp_first(vi, h);
    if (vi->resp.state != FW_RX_XDATA) {
        vi->resp.state = FW_RX_IDLE;
        return;
    }
    int err = fw_cma_pull(vi, src, n, h->msg_len, &vi->resp.rxd);
    if (err == EPERM) {
        /* The kernel's refusal, or ours (VIP_CMA off, refused once): the
         * descriptor stays queued for the ring's copy. */
        vi->resp.state = FW_RX_IDLE;
        resp_pull_refused(vi, h);
        return;
    }
    FW_TRACE(vi->nic, VIA_ST_R5_XDATA, vi->vi_id, h->msg_seq, h->msg_len);
    if (err) {
        /* What the sender named cannot be read (or the sender is gone):
         * the peer hears why, then the link breaks as for a bad packet. */
        fw_rx_refused(vi, VIA_RXC_PULL_FAULT, h->msg_seq);
        resp_refuse(vi, h->msg_seq, VIA_NAK_PULL_FAULT);
        fw_rx_broken(vi, "the sender's memory cannot be pulled", NULL);
        return;
    }
    vi->resp.state = FW_RX_IDLE;
    /* The ACK before the completion: once the program sees its receive it
     * may disconnect at once, and the send completes only on this ACK. */
    vi->resp.ack_owed = h->msg_seq;
    fw_resp_answer(vi);
    if (h->flags & VIA_PKT_IMM)
        vi->resp.rxd.imm = h->imm;
    fw_updt(vi, &vi->resp.rxd, true, (h->flags & VIA_PKT_IMM) ? VIP_STATUS_IMMEDIATE : 0,
            h->msg_len);
    vi->resp.rq.head++;
}

/* The responder's check of an RDMA write's whole target range, before a
 * byte is written: false when nothing is to be written. */
static bool resp_write_target_ok(struct fw_vi *vi, const struct via_wire_hdr *h, uint64_t addr,
                                 uint32_t len) {
    uint32_t prot = vi->rdma_write ? fw_tpt_check_rdma(vi, h->rkey, addr, len, VIA_TPT_RDMA_WRITE)
                                   : VIP_STATUS_PROTECTION_ERROR;
    if (prot) {
        /* Reliable levels: the initiator's descriptor fails with the
         * protection error and both VIs break. Unreliable: the write is
         * dropped, as a message would be. */
        fw_rx_refused(vi, VIA_RXC_RDMAW_PROT, h->msg_seq);
        if (vi->reliability != VIP_SERVICE_UNRELIABLE) {
            resp_refuse(vi, h->msg_seq, VIA_NAK_PROTECTION);
            fw_vi_error(vi, VIP_ERROR_RDMAW_PROT, 0);
        }
    }
    return !prot && !vi->in_error;
}

/* An RDMA write's bytes are all in place: with immediate data a receive
 * descriptor completes; the reliable levels answer with an ACK. */
static void resp_write_placed(struct fw_vi *vi, const struct via_wire_hdr *h)
{
    if (h->flags & VIA_PKT_IMM) {
        const struct via_db_token *tok = resp_next_recv(vi, h->msg_seq);
        if (!tok)
            return;
        fw_xdes_fetch(vi, tok, true, &vi->resp.rxd);
        vi->resp.rxd.imm = h->imm;
        vi->resp.rxd.op = VIP_CONTROL_OP_RDMAWRITE; /* reported as the remote's write */
        fw_updt(vi, &vi->resp.rxd, true,
                vi->resp.rxd.status ? vi->resp.rxd.status : VIP_STATUS_IMMEDIATE, h->msg_len);
        vi->resp.rq.head++;
        if (vi->resp.rxd.status) {
            resp_refuse(vi, h->msg_seq, VIA_NAK_RECV_ERROR);
            fw_vi_error(vi, VIP_ERROR_POST_DESC, vi->resp.rxd.va);
            return;
        }
    }
    if (vi->reliability != VIP_SERVICE_UNRELIABLE) {
        vi->resp.ack_owed = h->msg_seq;
        fw_resp_answer(vi);
    }
}

/* RDMA_WRITE: the responder places each fragment at raddr + frag_off after
 * checking the whole target range, and checks each later fragment's own
 * range again as it places it: memory deregistered meanwhile is never
 * written (the check and the copy are one turn under the VI's lock, which
 * a deregistration waits for: nic_mem_fence). With immediate data the last
 * fragment also completes a receive descriptor (no data goes into its
 * segments). */
void fw_resp_write(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload) {
    bool first = h->flags & VIA_PKT_FIRST, last = h->flags & VIA_PKT_LAST;
    if (!first && (h->rkey != vi->resp.wr.rkey || h->raddr != vi->resp.wr.raddr ||
                   h->msg_len != vi->resp.wr.len || h->frag_off != vi->resp.got)) {
        /* Later fragments must be of the message whose whole range was
         * checked: the same target, in order. */
        fw_rx_broken(vi, "an RDMA write fragment of another message", NULL);
        return;
    }
    vi->resp.got = first ? h->frag_len : vi->resp.got + h->frag_len;
    if (first) {
        vi->resp.seq = h->msg_seq;
        vi->resp.wr.rkey = h->rkey;
        vi->resp.wr.raddr = h->raddr;
        vi->resp.wr.len = h->msg_len;
        vi->resp.state =
            resp_write_target_ok(vi, h, h->raddr, h->msg_len) ? FW_RX_PLACE : FW_RX_DISCARD;
    } else if (vi->resp.state == FW_RX_PLACE && h->frag_len &&
               !resp_write_target_ok(vi, h, h->raddr + h->frag_off, h->frag_len)) {
        vi->resp.state = FW_RX_DISCARD;
    }
    if (vi->resp.state == FW_RX_PLACE && h->frag_len)
        hal_dma_to_host(h->raddr + h->frag_off, payload, h->frag_len);
    if (!last)
        return;
    bool placed = vi->resp.state == FW_RX_PLACE;
    vi->resp.state = FW_RX_IDLE;
    if (placed)
        resp_write_placed(vi, h);
}

/* WRITE_RTS: an RDMA write whose bytes stay in the initiator's memory
 * (fw_cma.c): the target range is checked as for RDMA_WRITE, then pulled
 * into in one copy; refusals and faults as for SEND_RTS. */
void fw_resp_write_rts(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload)
{
    struct via_rts_seg src[VIA_MAX_SEGS];
    unsigned n;
    if (!fw_cma_table_take(h, payload, src, &n) || vi->reliability == VIP_SERVICE_UNRELIABLE) {
        fw_rx_broken(vi, "a bad RDMA write pull request", NULL);
        return;
    }
    vi->resp.seq = h->msg_seq;
    if (!resp_write_target_ok(vi, h, h->raddr, h->msg_len))
        return;
    struct fw_xdes dst = {.segcount = 1, .seg[0] = {.va = h->raddr, .len = h->msg_len}};
    int err = fw_cma_pull(vi, src, n, h->msg_len, &dst);
    if (err == EPERM) {
        resp_pull_refused(vi, h);
        return;
    }
    if (err) {
        fw_rx_refused(vi, VIA_RXC_PULL_FAULT, h->msg_seq);
        resp_refuse(vi, h->msg_seq, VIA_NAK_PULL_FAULT);
        fw_rx_broken(vi, "the writer's memory cannot be pulled", NULL);
        return;
    }
    resp_write_placed(vi, h);
}

/* RDMA_READ_REQ: check the whole source range, then answer with its bytes
 * (fw_resp_respond); a violation is NAKed and breaks both VIs. */
void fw_resp_read_req(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload) {
    (void)payload;
    vi->resp.seq = h->msg_seq;
    FW_TRACE(vi->nic, VIA_ST_R3_RECEIVE, vi->vi_id, h->msg_seq, 0);
    if (vi->in_error)
        return;
    uint32_t prot = vi->rdma_read && vi->reliability != VIP_SERVICE_UNRELIABLE
                        ? fw_tpt_check_rdma(vi, h->rkey, h->raddr, h->msg_len, VIA_TPT_RDMA_READ)
                        : VIP_STATUS_PROTECTION_ERROR;
    if (prot) {
        fw_rx_refused(vi, VIA_RXC_RDMAR_PROT, h->msg_seq);
        resp_refuse(vi, h->msg_seq, VIA_NAK_PROTECTION);
        fw_vi_error(vi, VIP_ERROR_RDMAR_PROT, 0);
        return;
    }
    vi->resp.rd.active = true;
    vi->resp.rd.seq = h->msg_seq;
    vi->resp.rd.rkey = h->rkey;
    vi->resp.rd.raddr = h->raddr;
    vi->resp.rd.len = h->msg_len;
    vi->resp.rd.off = 0;
    vi->resp.rd.arrive_ns = resp_read_arrive(vi, h->msg_len);
    fw_resp_respond(vi);
}

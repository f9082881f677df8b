/*
 * fw_tx.c - the send pipeline: T2 Bell -> T3 XDes -> T4 XData -> T5 Transmit
 * -> T6 Updt.
 *
 * A state machine with one helper per state; each helper returns the next
 * state, or FW_TX_BLOCKED when it must wait: for room on the link, for the
 * receiver's acknowledgement (reliable reception), or, in a paced profile,
 * for real time to reach the modelled end of T6. Messages on a VI go
 * strictly in order, one at a time, like the Berkeley firmware.
 *
 * The token says how the message reached the NIC (fw_token.c's table of
 * kinds); after T3 every kind travels the same way. Packets leave through
 * the VI's link (fw_link.h) as SEND packets; on a reliable-reception VI the
 * descriptor completes when the peer's ACK for it comes back (the
 * completer, fw_comp.c, takes ACK and NAK packets).
 */
#include <string.h>

#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"
#include "fw_rx.h"

const char *const fw_tx_state_name[FW_TX_NSTATES] = {
    [FW_TX_IDLE] = "idle",
    [FW_TX_XDES] = "xdes",
    [FW_TX_XDATA] = "xdata",
    [FW_TX_UPDT] = "updt",
};

static bool vi_usable(const struct fw_vi *vi)
{
    return !vi->in_error && vi->chan &&
           atomic_load_explicit(&vi->chan->state, memory_order_acquire) == VIA_CHAN_OPEN;
}

static const struct via_db_token *tx_token(const struct fw_vi *vi)
{
    return &vi->req.sq.tok[vi->req.sq.head % VIA_QUEUE_DEPTH];
}

/* A token on a VI that cannot send: its error is the VI's, or (it was
 * connected, and the host raced a disconnect) it completes flushed, as
 * queued ones do. Out of line: the pipeline's own path stays small. */
static __attribute__((noinline)) void tx_flush_unusable(struct fw_vi *vi)
{
    fw_link_check(vi);
    if (vi->in_error) {
        fw_flush(vi);
        return;
    }
    const struct via_db_token *tok = tx_token(vi);
    const struct fw_token_kind *k = fw_token_kind(tok);
    if (k && k->sent)
        k->sent(vi, tok);
    struct fw_xdes d = {.va = k ? k->status_va(vi, tok) : 0};
    fw_updt(vi, &d, false, VIP_STATUS_DESC_FLUSHED_ERROR, 0);
    vi->req.sq.head++;
}

/* T2 Bell: take the next token; flush it if the VI cannot send. */
static int tx_idle(struct fw_vi *vi)
{
    if (vi->req.sq.head == vi->req.sq.tail &&
        !fw_bell_take(&vi->db->sq, &vi->req.sq, vi->db_ring_ns))
        return FW_TX_BLOCKED;
    FW_TRACE(vi->nic, VIA_ST_T2_BELL, vi->vi_id, vi->req.seq + 1, 0);
    if (!vi_usable(vi)) {
        tx_flush_unusable(vi);
        return FW_TX_IDLE;
    }
    return FW_TX_XDES;
}

/* Paced profiles: claim the LANai for the whole transaction and fix the
 * modelled time of every stage. */
static void tx_schedule(struct fw_vi *vi)
{
    const struct via_profile *p = vi->nic->prof;
    enum fw_ext_mode m = vi->req.msg.mode;
    /* A read's request carries no data; its response is the peer's work. */
    bool read = vi->req.txd.op == VIP_CONTROL_OP_RDMAREAD;
    uint32_t n = read ? 0 : vi->req.txd.total;
    unsigned segs = read ? 0 : vi->req.txd.segcount;
    /* T3 fetches every segment of the descriptor: an RDMA one's address
     * segment too (the model counts it, bench/vip_model.c). */
    unsigned desc_segs =
        vi->req.txd.segcount + (vi->req.txd.op != VIP_CONTROL_OP_SENDRECV ? 1u : 0u);
    double c2 = fw_cost_stage(p, VIA_ST_T2_BELL, m, n, segs);
    double c3 = fw_cost_stage(p, VIA_ST_T3_XDES, m, n, desc_segs);
    double c4 = fw_cost_stage(p, VIA_ST_T4_XDATA, m, n, segs);
    double c5 = fw_cost_stage(p, VIA_ST_T5_TRANSMIT, m, n, segs);
    double c6 = fw_cost_stage(p, VIA_ST_T6_UPDT, m, n, segs);
    uint64_t total = (uint64_t)(c2 + c3 + c4 + c5 + c6);
    uint64_t start =
        fw_sched_send(vi->nic, vi->vi_id, vi->req.sq.ring_ns[vi->req.sq.head % VIA_QUEUE_DEPTH],
                      total, m != FW_EXT_STANDARD);
    vi->req.msg.span_start = start + (uint64_t)(c2 + c3);
    vi->req.msg.span_ns = (uint64_t)(c4 + c5);
    vi->req.msg.release = start + total;
    struct fw_nic *nic = vi->nic;
    fw_account(nic, VIA_ST_T2_BELL, vi->vi_id, vi->req.seq, n, c2);
    fw_account(nic, VIA_ST_T3_XDES, vi->vi_id, vi->req.seq, n, c3);
    fw_account(nic, VIA_ST_T4_XDATA, vi->vi_id, vi->req.seq, n, c4);
    fw_account(nic, VIA_ST_T5_TRANSMIT, vi->vi_id, vi->req.seq, n, c5);
    fw_account(nic, VIA_ST_T6_UPDT, vi->vi_id, vi->req.seq, n, c6);
}

/* T3 XDes: stage and validate the descriptor. */
static int tx_xdes(struct fw_vi *vi)
{
    const struct via_db_token *tok = tx_token(vi);
    const struct fw_token_kind *k = fw_token_kind(tok);
    if (k) {
        vi->req.msg.mode = k->mode;
        k->xdes(vi, tok, &vi->req.txd);
    } else {
        /* A kind no NIC knows: nowhere checked to write to. */
        vi->req.msg.mode = FW_EXT_STANDARD;
        vi->req.txd = (struct fw_xdes){.va = 0, .status = VIP_STATUS_FORMAT_ERROR};
    }
    FW_TRACE(vi->nic, VIA_ST_T3_XDES, vi->vi_id, vi->req.seq + 1, vi->req.txd.total);
    if (vi->req.txd.status) {
        fw_req_fail(vi, vi->req.txd.status); /* idle: the flush must not complete it again */
        fw_vi_error(vi, VIP_ERROR_POST_DESC, vi->req.txd.va);
        return FW_TX_IDLE;
    }
    vi->req.seq++;
    vi->req.msg.off = 0;
    vi->req.msg.rdv = false;
    if (vi->nic->paced)
        tx_schedule(vi);
    return FW_TX_XDATA;
}

/* Paced: when the message's last byte reaches the receiving NIC (the link
 * is cut-through, so it trails the transmission by the switch). The
 * modelled NIC sends a message as one packet and the receiver stores it
 * whole before R3, so every fragment of ours carries that same time: the
 * emulation's fragmenting must not let the receiver start early. */
static uint64_t arrive_time(const struct fw_vi *vi)
{
    if (!vi->nic->paced)
        return 0;
    return vi->req.msg.span_start + vi->req.msg.span_ns + (uint64_t)vi->nic->prof->switch_ns;
}

/* The packet type a descriptor's operation travels as. */
static const uint8_t tx_pkt_type[4] = {
    [VIP_CONTROL_OP_SENDRECV] = VIA_PKT_SEND,
    [VIP_CONTROL_OP_RDMAWRITE] = VIA_PKT_RDMA_WRITE,
    [VIP_CONTROL_OP_RDMAREAD] = VIA_PKT_RDMA_READ_REQ,
};

/* The header of one packet of the message in vi->req.txd: the connection's
 * addressing, then what every fragment of the message repeats (sequence,
 * length, immediate data, the RDMA target) and this fragment's place. */
static inline struct via_wire_hdr tx_msg_hdr(const struct fw_vi *vi, uint8_t type,
                                             uint8_t flags, uint32_t off, uint32_t len)
{
    const struct fw_xdes *d = &vi->req.txd;
    struct via_wire_hdr h = fw_wire_hdr(vi, type);
    h.flags = flags | ((d->control & VIP_CONTROL_IMMEDIATE) ? VIA_PKT_IMM : 0);
    h.msg_seq = vi->req.seq;
    h.msg_len = d->total;
    h.frag_off = off;
    h.frag_len = len;
    h.imm = d->imm;
    h.rkey = d->rkey;
    h.raddr = d->raddr;
    return h;
}

/* Room on the link for a packet of `payload` bytes, or NULL. */
static struct via_wire_hdr *tx_reserve(struct fw_vi *vi, uint32_t payload)
{
    struct fw_link *l = &vi->link;
    struct via_wire_hdr *h = l->ops->reserve(l, payload);
    if (!h) {
        /* Link full: ask the receiver to wake us when it drains. The
         * store, then the re-check, are ordered by fw_notify's fence. */
        l->ops->stall(l);
        fw_notify_peer(vi);
        h = l->ops->reserve(l, payload);
    }
    return h;
}

/* T4 + T5 of a large SEND or RDMA write in one copy (fw_cma.c): the
 * segment table goes out, the peer NIC pulls the bytes, and its ACK
 * completes the descriptor. */
static int tx_rts(struct fw_vi *vi)
{
    struct fw_xdes *d = &vi->req.txd;
    struct via_rts_seg tab[VIA_MAX_SEGS];
    uint32_t bytes = fw_cma_table(d, tab);
    struct via_wire_hdr *h = tx_reserve(vi, bytes);
    if (!h)
        return FW_TX_BLOCKED;
    memcpy(h + 1, tab, bytes);
    bool write = d->op == VIP_CONTROL_OP_RDMAWRITE;
    *h = tx_msg_hdr(vi, write ? VIA_PKT_WRITE_RTS : VIA_PKT_SEND_RTS,
                    VIA_PKT_FIRST | VIA_PKT_LAST, 0, bytes);
    vi->link.ops->publish(&vi->link, h);
    vi->req.msg.rdv = true;
    vi->req.msg.rd_got = 0;
    FW_TRACE(vi->nic, VIA_ST_T5_TRANSMIT, vi->vi_id, vi->req.seq, bytes);
    fw_peer_published(vi);
    return FW_TX_UPDT;
}

/* T4 XData + T5 Transmit, one fragment per turn until the message is out.
 * An RDMA read's request is one header: its data come back (fw_comp.c). */
static int tx_xdata(struct fw_vi *vi)
{
    struct fw_link *l = &vi->link;
    struct fw_xdes *d = &vi->req.txd;
    bool read = d->op == VIP_CONTROL_OP_RDMAREAD;
    if (vi->req.msg.off == 0 && fw_cma_wanted(vi, d))
        return tx_rts(vi);
    do {
        uint32_t left = read ? 0 : d->total - vi->req.msg.off;
        uint32_t mtu = fw_link_mtu(l);
        uint32_t frag = left < mtu ? left : mtu;
        struct via_wire_hdr *h = tx_reserve(vi, frag);
        if (!h)
            return FW_TX_BLOCKED;
        fw_xdata_copy(d, vi->req.msg.off, (uint8_t *)(h + 1), frag, fw_link_dma(l));
        FW_TRACE(vi->nic, VIA_ST_T4_XDATA, vi->vi_id, vi->req.seq, frag);
        uint8_t flags = (vi->req.msg.off == 0 ? VIA_PKT_FIRST : 0) |
                        (vi->req.msg.off + frag == d->total || read ? VIA_PKT_LAST : 0);
        *h = tx_msg_hdr(vi, tx_pkt_type[d->op], flags, vi->req.msg.off, frag);
        h->arrive_ns = arrive_time(vi);
        l->ops->publish(l, h);
        vi->req.msg.off += frag;
        FW_TRACE(vi->nic, VIA_ST_T5_TRANSMIT, vi->vi_id, vi->req.seq, frag);
    } while (vi->req.msg.off < d->total && !read);
    vi->req.msg.rd_got = 0;
    fw_peer_published(vi);
    return FW_TX_UPDT;
}

/* T6 Updt: the message is on the wire (or, when it waits for an answer,
 * answered): write the status, at its modelled time. */
static int tx_updt(struct fw_vi *vi)
{
    vi->link.awaiting_answer = false;
    if (fw_comp_awaits(vi))
        return fw_comp_wait(vi); /* completes on the peer's answer (fw_comp.c) */
    if (vi->nic->paced && !fw_release_due(vi, vi->req.msg.release))
        return FW_TX_BLOCKED;
    const struct via_db_token *tok = tx_token(vi);
    const struct fw_token_kind *k = fw_token_kind(tok);
    if (k && k->sent)
        k->sent(vi, tok);
    if (vi->req.msg.mode == FW_EXT_DESCLESS) {
        fw_count(&vi->db->cnt.tx_descless, 1);
    } else if (vi->req.msg.mode == FW_EXT_MERGED) {
        fw_count(&vi->db->cnt.tx_merged, 1);
    }
    uint32_t status = (vi->req.txd.control & VIP_CONTROL_IMMEDIATE) ? VIP_STATUS_IMMEDIATE : 0;
    fw_updt(vi, &vi->req.txd, false, status, vi->req.txd.total);
    vi->req.sq.head++;
    return FW_TX_IDLE;
}

/* One helper per state, chosen by a switch (as rxe's requester does), not a
 * table of pointers: the compiler then joins the stages into one function,
 * and a message pays one call and one frame for its whole pipeline, not one
 * per stage. */
static inline int tx_run_stage(struct fw_vi *vi)
{
    switch (vi->req.state) {
    case FW_TX_IDLE:
        return tx_idle(vi);
    case FW_TX_XDES:
        return tx_xdes(vi);
    case FW_TX_XDATA:
        return tx_xdata(vi);
    case FW_TX_UPDT:
    default:
        return tx_updt(vi);
    }
}

bool fw_tx_progress(struct fw_vi *vi)
{
    for (;;) {
        int next = tx_run_stage(vi);
        if (next == FW_TX_BLOCKED)
            return vi->req.state != FW_TX_IDLE || vi->req.sq.head != vi->req.sq.tail;
        vi->req.state = (enum fw_tx_state)next;
    }
}

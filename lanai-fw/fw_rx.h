/*
 * fw_rx.h - the roles behind the receive pipeline, as the packet loop
 * (fw_rx.c) and the send pipeline (fw_tx.c) see them:
 *   fw_rx_check.c  the receive checks, named, counted and traced
 *   fw_resp.c      the responder: the peer's requests (SEND, RDMA write,
 *                  RDMA read) and our answers to them (ACK, NAK)
 *   fw_comp.c      the completer: the peer's answers to our messages
 * Each packet opcode has one handler below (the rx_op_fn signature); the
 * loop's table dispatches to them. Calls go down: fw_rx.c and fw_tx.c ->
 * fw_resp.c, fw_comp.c -> fw_rx_check.c.
 */
#ifndef FW_RX_H
#define FW_RX_H

#include "via_spec.h"

#include "fw.h"

/* ---- the receive checks (fw_rx_check.c) ---------------------------------- */

/* VIA_RXC_OK, or the first check the header fails. */
enum via_rx_check fw_rx_check_header(const struct fw_vi *vi, const struct via_wire_hdr *h);
/* Count and trace a packet refused by the check `why`. */
void fw_rx_refused(struct fw_vi *vi, enum via_rx_check why, uint32_t seq);
/* The peer sent what no correct NIC sends: the link breaks (said on
 * stderr with the packet's header when there is one). */
void fw_rx_broken(struct fw_vi *vi, const char *why, const struct via_wire_hdr *h);
/* An unreliable VI on a link that loses: messages may be missing. */
bool fw_rx_lossy(const struct fw_vi *vi);
/* A lossy VI's packet that failed the checks: true when it is taken
 * after all (it starts a later message), false when it is dropped. */
bool fw_rx_lossy_fit(struct fw_vi *vi, const struct via_wire_hdr *h);

/* ---- the responder (fw_resp.c) --------------------------------------------- */

void fw_resp_send(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);
void fw_resp_send_rts(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);
void fw_resp_write(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);
void fw_resp_write_rts(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);
void fw_resp_read_req(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);
/* Send the ACK or NAK owed, as far as the link has room. */
void fw_resp_answer(struct fw_vi *vi);
/* Send the RDMA read response in progress, as far as the link has room. */
void fw_resp_respond(struct fw_vi *vi);

/* ---- the completer (fw_comp.c) --------------------------------------------- */

void fw_comp_ack(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);
void fw_comp_nak(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);
void fw_comp_read_resp(struct fw_vi *vi, const struct via_wire_hdr *h, const uint8_t *payload);

/* Does the message in flight complete only on the peer's answer? Reliable
 * reception waits for every message's ACK; on both reliable levels an RDMA
 * write waits for the responder's verdict on the target region (so a
 * protection error is the initiator's descriptor's); a read, for its data;
 * a message sent as an RTS, for the receiver's pull. */
static inline bool fw_comp_needs_answer(const struct fw_vi *vi)
{
    if (vi->req.msg.rdv || vi->reliability == VIP_SERVICE_RELIABLE_RECEPTION ||
        vi->req.txd.op == VIP_CONTROL_OP_RDMAREAD)
        return true;
    return vi->req.txd.op == VIP_CONTROL_OP_RDMAWRITE && vi->reliability != VIP_SERVICE_UNRELIABLE;
}

/* T6 of a message that needs an answer the peer has not yet given. */
static inline bool fw_comp_awaits(const struct fw_vi *vi)
{
    return fw_comp_needs_answer(vi) && (int32_t)(vi->comp.acked - vi->req.seq) < 0;
}

/* T6's next state while the message awaits its answer: a NAK fails it
 * (or, for a pull the receiver cannot make, sends it again through the
 * ring: FW_TX_XDATA), a link that ended fails it, else FW_TX_BLOCKED. */
int fw_comp_wait(struct fw_vi *vi);

#endif

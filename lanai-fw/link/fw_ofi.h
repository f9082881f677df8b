/*
 * fw_ofi.h - frames over a libfabric reliable-datagram endpoint.
 *
 * The NIC's third way to reach another NIC, beside the shared-memory ring
 * (fw_link_shm.c) and UDP: a libfabric FI_EP_RDM endpoint. The fabric keeps
 * each frame whole, delivers it once, and in send order per peer
 * (FI_ORDER_SAS is asked for), so the NIC-to-NIC transport of the UDP link
 * is not needed over it: on clusters with real fabrics the emulated NIC
 * rides them and reliability is the fabric's.
 *
 * libfabric is loaded when the first endpoint opens (dlopen of
 * libfabric.so.1), so programs that never use this link do not load it
 * and libvipl has no link-time dependency on it. The provider is
 * FI_PROVIDER's when set, else "tcp;ofi_rxm" (which works over loopback).
 *
 * Buffers (both pools are the endpoint's, registered once when the
 * provider wants local registration):
 *   - send: FW_OFI_NSEND slots of max_frame bytes; a frame is copied into a
 *     free slot (or injected when small) and the slot comes back with its
 *     send completion. No slot free: -EAGAIN, progress with fw_ofi_recv.
 *   - receive: FW_OFI_NRECV slots posted at open. fw_ofi_recv hands out
 *     filled slots; each stays the caller's until fw_ofi_repost.
 * One thread uses an endpoint at a time (the NIC's lock).
 */
#ifndef FW_OFI_H
#define FW_OFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Slots per pool: with the link's 64 KiB frames, 2 MiB in flight each way. */
#define FW_OFI_NSEND 32
#define FW_OFI_NRECV 32
#define FW_OFI_NAME_MAX 64 /* bytes of an endpoint address (fi_getname) */

struct fw_ofi;

/* A received frame: data valid until fw_ofi_repost(o, rx). */
struct fw_ofi_rx {
    const uint8_t *data;
    uint32_t len;
    uint32_t slot; /* the receive slot, for repost */
};

/* Open an endpoint whose frames are at most max_frame bytes. node: the
 * local address to bind (NULL: the provider's choice). On failure returns
 * a negative errno and a sentence in err. */
int fw_ofi_open(struct fw_ofi **out, const char *node, uint32_t max_frame, char *err,
                size_t errlen);
void fw_ofi_close(struct fw_ofi *o);

/* This endpoint's address, for the peer's fw_ofi_peer. */
int fw_ofi_name(struct fw_ofi *o, void *name, size_t *len);
/* A peer's address into the address vector; *peer names it in sends. */
int fw_ofi_peer(struct fw_ofi *o, const void *name, size_t len, uint64_t *peer);

/* Send hdr then payload as one frame: 0, -EAGAIN (no slot or the provider
 * is busy: progress and retry), -EMSGSIZE, or another negative errno. */
int fw_ofi_send(struct fw_ofi *o, uint64_t peer, const void *hdr, size_t hlen,
                const void *payload, size_t plen);
/* The same without a copy: take a free send slot (its index, or -EAGAIN)
 * and fill *buf; send it (0; -EAGAIN: the slot stays taken, send it again
 * later); or drop it unsent. A sent slot comes back with its completion. */
int fw_ofi_slot_take(struct fw_ofi *o, uint8_t **buf);
int fw_ofi_slot_send(struct fw_ofi *o, uint64_t peer, int slot, uint32_t len);
void fw_ofi_slot_drop(struct fw_ofi *o, int slot);

/* Progress: reap completions; up to max received frames into rx. Returns
 * their number, or a negative errno when the endpoint failed. */
int fw_ofi_recv(struct fw_ofi *o, struct fw_ofi_rx *rx, int max);
/* Only hand out frames already reaped (no progress, no system call). */
int fw_ofi_take(struct fw_ofi *o, struct fw_ofi_rx *rx, int max);
/* Hand a received slot back to the fabric. */
int fw_ofi_repost(struct fw_ofi *o, const struct fw_ofi_rx *rx);

/* Received frames reaped but not yet handed out by fw_ofi_recv. */
unsigned fw_ofi_frames_held(const struct fw_ofi *o);

/* Sends not yet completed (a caller draining before close waits for 0). */
unsigned fw_ofi_sends_pending(const struct fw_ofi *o);
/* Frames the fabric has taken for good so far (injected or completed):
 * a count that stops moving while sends wait means the peer takes none. */
uint64_t fw_ofi_sent(const struct fw_ofi *o);
/* The provider in use, e.g. "tcp;ofi_rxm". */
const char *fw_ofi_provider(const struct fw_ofi *o);

#endif

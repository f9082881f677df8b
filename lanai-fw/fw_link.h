/*
 * fw_link.h - packet ring operations of a channel direction (fw_link.c).
 */
#ifndef FW_LINK_H
#define FW_LINK_H

#include "via_abi.h"

/* Sender: room for a packet with `payload` bytes, or NULL when full. */
struct via_wire_hdr *fw_link_reserve(struct via_chan_dir *d, uint32_t payload);
/* Sender: seal the header and make the packet visible (T5 Transmit). */
void fw_link_publish(struct via_chan_dir *d, struct via_wire_hdr *h);
/* Receiver: next packet, validated, or NULL (*bad set if malformed). */
const struct via_wire_hdr *fw_link_peek(struct via_chan_dir *d, uint64_t *tail, int *bad);
/* Receiver: release the packet's bytes to the sender. */
void fw_link_consume(struct via_chan_dir *d, const struct via_wire_hdr *h);

static inline const uint8_t *fw_link_payload(const struct via_wire_hdr *h)
{
    return (const uint8_t *)(h + 1);
}

#endif

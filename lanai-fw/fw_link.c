/*
 * fw_link.c - the link: one byte ring of packets per channel direction.
 *
 * A connection's channel is the path through the emulated switch between
 * two NIC ports (see via_abi.h for the ring rules). The sender NIC reserves
 * room for header + payload, fills it (that is the staging buffer of T4),
 * and publishes it (T5 Transmit). The receiver NIC validates every header
 * before trusting a byte of it: the other end is another process.
 */
#include "fw_link.h"

#include <vipl.h>

#include "fw_hal.h"

static inline uint32_t pkt_bytes(uint32_t payload)
{
    return (uint32_t)sizeof(struct via_wire_hdr) + ((payload + 63u) & ~63u);
}

struct via_wire_hdr *fw_link_reserve(struct via_chan_dir *d, uint32_t payload)
{
    uint64_t head = atomic_load_explicit(&d->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&d->tail, memory_order_acquire);
    uint32_t need = pkt_bytes(payload);
    uint32_t off = (uint32_t)(head % VIA_CHAN_RING);
    uint32_t to_end = VIA_CHAN_RING - off;
    if (to_end < need) {
        /* The packet would wrap: fill the rest of the ring with a PAD. */
        if (VIA_CHAN_RING - (head - tail) < to_end + need)
            return NULL;
        struct via_wire_hdr *pad = (struct via_wire_hdr *)(d->ring + off);
        *pad = (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = VIA_PKT_PAD,
                                     .frag_len = to_end - (uint32_t)sizeof *pad};
        pad->crc = via_wire_check(pad);
        head += to_end;
        atomic_store_explicit(&d->head, head, memory_order_release);
        off = 0;
    } else if (VIA_CHAN_RING - (head - tail) < need) {
        return NULL;
    }
    return (struct via_wire_hdr *)(d->ring + off);
}

void fw_link_publish(struct via_chan_dir *d, struct via_wire_hdr *h)
{
    h->crc = via_wire_check(h);
    uint64_t head = atomic_load_explicit(&d->head, memory_order_relaxed);
    atomic_store_explicit(&d->head, head + pkt_bytes(h->frag_len), memory_order_release);
}

const struct via_wire_hdr *fw_link_peek(struct via_chan_dir *d, uint64_t *tail_out,
                                        int *bad)
{
    uint64_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&d->head, memory_order_acquire);
    *bad = 0;
    *tail_out = tail;
    if (head == tail)
        return NULL;
    uint32_t off = (uint32_t)(tail % VIA_CHAN_RING);
    const struct via_wire_hdr *h = (const struct via_wire_hdr *)(d->ring + off);
    uint64_t avail = head - tail;
    if (avail > VIA_CHAN_RING || avail < sizeof *h || off % 64 ||
        h->version != VIA_WIRE_VERSION || h->crc != via_wire_check(h)) {
        *bad = 1;
        return NULL;
    }
    uint64_t len = h->type == VIA_PKT_PAD ? sizeof *h + (uint64_t)h->frag_len
                                          : pkt_bytes(h->frag_len);
    if ((h->type != VIA_PKT_DATA && h->type != VIA_PKT_PAD) || len > avail ||
        off + len > VIA_CHAN_RING || (h->type == VIA_PKT_DATA && h->frag_len > VIA_MTU)) {
        *bad = 1;
        return NULL;
    }
    return h;
}

void fw_link_consume(struct via_chan_dir *d, const struct via_wire_hdr *h)
{
    uint64_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
    uint64_t len = h->type == VIA_PKT_PAD ? sizeof *h + (uint64_t)h->frag_len
                                          : pkt_bytes(h->frag_len);
    atomic_store_explicit(&d->tail, tail + len, memory_order_release);
}

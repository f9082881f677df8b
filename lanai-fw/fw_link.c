/*
 * fw_link.c - the shared-memory link: one byte ring of packets per channel
 * direction (the in-memory switch between two NIC ports).
 *
 * A connection's channel is the path through the emulated switch between
 * two NIC ports (see via_abi.h for the ring rules). The sender NIC reserves
 * room for header + payload, fills it (that is the staging buffer of T4),
 * and publishes it (T5 Transmit). The receiver NIC copies each header out
 * once and validates the copy before trusting a byte of it: the other end
 * is another process, and may rewrite the ring after we looked.
 */
#include "fw_link.h"

#include <string.h>

static inline uint32_t pkt_bytes(uint32_t payload)
{
    return (uint32_t)sizeof(struct via_wire_hdr) + ((payload + 63u) & ~63u);
}

/* Bytes a packet occupies in the ring, from its (validated) header copy. */
static inline uint64_t ring_bytes(const struct via_wire_hdr *h)
{
    return h->type == VIA_PKT_PAD ? sizeof *h + (uint64_t)h->frag_len : pkt_bytes(h->frag_len);
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

static bool type_known(uint8_t t)
{
    return t >= VIA_PKT_SEND && t < VIA_PKT_NTYPES;
}

enum fw_link_peek_rc fw_link_peek(struct via_chan_dir *d, struct via_wire_hdr *h,
                                  const uint8_t **payload)
{
    for (;;) {
        uint64_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
        uint64_t head = atomic_load_explicit(&d->head, memory_order_acquire);
        if (head == tail)
            return FW_LINK_EMPTY;
        uint32_t off = (uint32_t)(tail % VIA_CHAN_RING);
        uint64_t avail = head - tail;
        if (avail > VIA_CHAN_RING || avail < sizeof *h || off % 64)
            return FW_LINK_BAD;
        memcpy(h, d->ring + off, sizeof *h); /* the one read of the peer's header */
        if (h->version != VIA_WIRE_VERSION || h->crc != via_wire_check(h) ||
            !type_known(h->type))
            return FW_LINK_BAD;
        uint64_t len = ring_bytes(h);
        if (len > avail || off + len > VIA_CHAN_RING ||
            (h->type != VIA_PKT_PAD && h->frag_len > VIA_MTU))
            return FW_LINK_BAD;
        if (h->type == VIA_PKT_PAD) {
            atomic_store_explicit(&d->tail, tail + len, memory_order_release);
            continue;
        }
        *payload = d->ring + off + sizeof *h;
        return FW_LINK_PACKET;
    }
}

void fw_link_consume(struct via_chan_dir *d, const struct via_wire_hdr *h)
{
    uint64_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
    atomic_store_explicit(&d->tail, tail + ring_bytes(h), memory_order_release);
}

/* ---- the operations table of the shared-memory link ----------------------------- */

static struct via_wire_hdr *shm_reserve(struct fw_link *l, uint32_t payload)
{
    return fw_link_reserve(l->tx, payload);
}

static void shm_publish(struct fw_link *l, struct via_wire_hdr *h)
{
    fw_link_publish(l->tx, h);
}

static enum fw_link_peek_rc shm_peek(struct fw_link *l, struct via_wire_hdr *h,
                                     const uint8_t **payload)
{
    return fw_link_peek(l->rx, h, payload);
}

static void shm_consume(struct fw_link *l, const struct via_wire_hdr *h)
{
    fw_link_consume(l->rx, h);
}

static bool shm_pending(const struct fw_link *l)
{
    return atomic_load_explicit(&l->rx->head, memory_order_acquire) !=
           atomic_load_explicit(&l->rx->tail, memory_order_relaxed);
}

const struct fw_link_ops fw_link_shm_ops = {
    .name = "shm",
    .reserve = shm_reserve,
    .publish = shm_publish,
    .peek = shm_peek,
    .consume = shm_consume,
    .pending = shm_pending,
};

void fw_link_shm_init(struct fw_link *l, struct via_chan *chan, int side)
{
    l->ops = &fw_link_shm_ops;
    l->tx = &chan->dir[side];
    l->rx = &chan->dir[1 - side];
}

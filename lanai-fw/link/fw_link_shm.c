/*
 * fw_link_shm.c - the shared-memory link: one byte ring of packets per channel
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

/* The lap tag of a ring position (via_abi.h): 1..255, and consecutive
 * laps differ. */
static inline uint8_t lap_tag(uint64_t pos)
{
    return (uint8_t)(1u + (pos / VIA_CHAN_RING) % 255u);
}

/* The seal of a ring position (via_abi.h): a 32-bit mix of the whole
 * position, so the seal of one place never passes for another's, not even
 * 255 laps apart, where the lap tags repeat. */
static inline uint32_t ring_seal(uint64_t pos)
{
    return (uint32_t)((pos * 0x9E3779B97F4A7C15ull) >> 32);
}

/* Publication (see via_abi.h): the seal, then the tag, last, with
 * release. */
static inline void seal(struct via_wire_hdr *h, uint64_t pos)
{
    h->crc = ring_seal(pos);
    __atomic_store_n(&h->lap, lap_tag(pos), __ATOMIC_RELEASE);
}

static inline const struct via_wire_hdr *slot(const struct via_chan_dir *d, uint64_t pos)
{
    return (const struct via_wire_hdr *)(d->ring + (uint32_t)(pos % VIA_CHAN_RING));
}

static inline bool tagged(const struct via_chan_dir *d, uint64_t tail)
{
    return __atomic_load_n(&slot(d, tail)->lap, __ATOMIC_ACQUIRE) == lap_tag(tail);
}

/* Room for `need` bytes at head? The receiver's tail is a line it writes
 * at every packet; reading it costs the sender a cache miss, so the last
 * value read (*seen) answers first, and tail is read again only when that
 * value says the ring is too full (a stale tail only underestimates room). */
static bool ring_room(struct via_chan_dir *d, uint64_t *seen, uint64_t head, uint64_t need)
{
    if (VIA_CHAN_RING - (head - *seen) >= need)
        return true;
    *seen = atomic_load_explicit(&d->tail, memory_order_acquire);
    return VIA_CHAN_RING - (head - *seen) >= need;
}

struct via_wire_hdr *fw_link_reserve(struct via_chan_dir *d, uint64_t *tail_seen,
                                     uint32_t payload)
{
    uint64_t local = 0, *seen = tail_seen ? tail_seen : &local;
    if (!tail_seen)
        local = atomic_load_explicit(&d->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&d->head, memory_order_relaxed);
    uint32_t need = pkt_bytes(payload);
    uint32_t off = (uint32_t)(head % VIA_CHAN_RING);
    uint32_t to_end = VIA_CHAN_RING - off;
    if (to_end < need) {
        /* The packet would wrap: fill the rest of the ring with a PAD. */
        if (!ring_room(d, seen, head, (uint64_t)to_end + need))
            return NULL;
        struct via_wire_hdr *pad = (struct via_wire_hdr *)(d->ring + off);
        *pad = (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = VIA_PKT_PAD,
                                     .frag_len = to_end - (uint32_t)sizeof *pad};
        seal(pad, head);
        head += to_end;
        atomic_store_explicit(&d->head, head, memory_order_release);
        off = 0;
    } else if (!ring_room(d, seen, head, need)) {
        return NULL;
    }
    return (struct via_wire_hdr *)(d->ring + off);
}

void fw_link_publish(struct via_chan_dir *d, struct via_wire_hdr *h)
{
    uint64_t head = atomic_load_explicit(&d->head, memory_order_relaxed);
    seal(h, head);
    atomic_store_explicit(&d->head, head + pkt_bytes(h->frag_len), memory_order_release);
}

static bool type_known(uint8_t t)
{
    return t >= VIA_PKT_SEND && t < VIA_PKT_NTYPES;
}

bool fw_link_ready(const struct via_chan_dir *d)
{
    uint64_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
    /* A tail off its alignment (the peer may scribble on the channel) is
     * news too: peek reports the link bad. */
    return tail % 64 || tagged(d, tail);
}

/* The header copy's own checks: version, the seal of its place, type,
 * lengths. */
static bool hdr_ok(const struct via_wire_hdr *h, uint64_t pos)
{
    uint32_t off = (uint32_t)(pos % VIA_CHAN_RING);
    if (h->version != VIA_WIRE_VERSION || h->crc != ring_seal(pos) || !type_known(h->type))
        return false;
    return off + ring_bytes(h) <= VIA_CHAN_RING &&
           (h->type == VIA_PKT_PAD || h->frag_len <= VIA_MTU);
}

bool fw_link_frame_ok(const struct via_wire_hdr *h, uint64_t payload_len)
{
    return h->version == VIA_WIRE_VERSION && h->crc == via_wire_check(h) &&
           type_known(h->type) && h->type != VIA_PKT_PAD && h->frag_len == payload_len;
}

enum fw_link_peek_rc fw_link_peek(struct via_chan_dir *d, struct via_wire_hdr *h,
                                  const uint8_t **payload)
{
    for (;;) {
        uint64_t tail = atomic_load_explicit(&d->tail, memory_order_relaxed);
        uint32_t off = (uint32_t)(tail % VIA_CHAN_RING);
        if (off % 64)
            return FW_LINK_BAD;
        if (!tagged(d, tail))
            return FW_LINK_EMPTY;
        /* The payload's first line is wanted right after the header's checks:
         * ask for it now, so the two misses overlap instead of following. */
        if (off + sizeof *h < VIA_CHAN_RING)
            __builtin_prefetch(d->ring + off + sizeof *h);
        memcpy(h, d->ring + off, sizeof *h); /* the one read of the peer's header */
        if (!hdr_ok(h, tail)) {
            /* Old bytes that only look tagged, unless head (stored after
             * the tag) says this slot was published: then look once more
             * (the packet may have been sealed since the first look), and a
             * header that still fails is the sender's. Head may lag behind
             * tail: we take a packet by its tag, before its sender stores
             * head; a head not past tail says nothing was published here. */
            if ((int64_t)(atomic_load_explicit(&d->head, memory_order_acquire) - tail) <= 0)
                return FW_LINK_EMPTY;
            if (!tagged(d, tail))
                return FW_LINK_BAD;
            memcpy(h, d->ring + off, sizeof *h);
            if (!hdr_ok(h, tail))
                return FW_LINK_BAD;
        }
        if (h->type == VIA_PKT_PAD) {
            fw_link_consume(d, h);
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
    return fw_link_reserve(l->tx, &l->tx_tail_seen, payload);
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
    return fw_link_ready(l->rx);
}

static void shm_stall(struct fw_link *l)
{
    atomic_store(&l->tx->tx_waiting, 1);
}

static bool shm_drained(struct fw_link *l, unsigned n)
{
    return n && atomic_load_explicit(&l->rx->tx_waiting, memory_order_relaxed) &&
           atomic_exchange(&l->rx->tx_waiting, 0);
}

const struct fw_link_ops fw_link_shm_ops = {
    .name = "shm",
    .stream = true,
    .reserve = shm_reserve,
    .publish = shm_publish,
    .peek = shm_peek,
    .consume = shm_consume,
    .pending = shm_pending,
    .stall = shm_stall,
    .drained = shm_drained,
};

void fw_link_shm_init(struct fw_link *l, struct via_chan *chan, int side)
{
    l->ops = &fw_link_shm_ops;
    l->tx = &chan->dir[side];
    l->rx = &chan->dir[1 - side];
    l->tx_tail_seen = atomic_load_explicit(&l->tx->tail, memory_order_acquire);
}

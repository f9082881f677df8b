/*
 * fw_link.h - the link between two NIC ports, as an interface.
 *
 * A VI's connection reaches the peer NIC through a struct fw_link: an
 * operations table and the state of one implementation. The first is the
 * shared-memory ring of a channel (link/fw_link_shm.c, the in-memory
 * switch); the network links stand beside it with the same operations:
 * UDP (link/fw_link_udp.c over the reliable transport, link/fw_rtx.c) and
 * libfabric (link/fw_link_ofi.c). This header is all the rest of the NIC
 * sees of lanai-fw/link/; link/fw_net.h and link/fw_ofi.h are the
 * links' own.
 *
 * Rules every implementation keeps:
 *   - reserve/publish are the sender's (T5): reserve room for a packet of
 *     `payload` bytes (NULL when full), fill header and payload, publish.
 *     Packets are delivered whole and in order, or the link is broken.
 *   - peek/consume are the receiver's (R3): peek copies the next packet's
 *     header out ONCE and validates the copy (version, type, lengths
 *     within the link, and what tells a packet from old bytes: the ring
 *     slot's seal, a frame's check word); only the copy is used afterwards, since the
 *     other end may rewrite what it published. consume releases it.
 */
#ifndef FW_LINK_H
#define FW_LINK_H

#include <stdbool.h>
#include <stddef.h>

#include "fw_hal.h"
#include "via_abi.h"

struct fw_link;

enum fw_link_peek_rc {
    FW_LINK_EMPTY = 0,
    FW_LINK_PACKET = 1,
    FW_LINK_BAD = -1, /* malformed: the link is unusable */
};

struct fw_link_ops {
    const char *name;
    /* Payload bytes a packet of this link carries at most (0: VIA_MTU):
     * the pipelines fragment messages and read responses at it. A link
     * whose per-packet cost is high (a fabric message, a progress call)
     * carries more a packet; the receiving pipelines take any size. */
    uint32_t mtu;
    /* The packets are memory the peer's core reads next (the shared ring):
     * large payloads go in by streaming stores (hal_dma_from_host_stream).
     * Not for a fabric's buffers, which the provider reads on this core. */
    bool stream;
    struct via_wire_hdr *(*reserve)(struct fw_link *l, uint32_t payload);
    void (*publish)(struct fw_link *l, struct via_wire_hdr *h);
    /* Next packet: its validated header copy and payload (PAD packets are
     * skipped inside). */
    enum fw_link_peek_rc (*peek)(struct fw_link *l, struct via_wire_hdr *h,
                                 const uint8_t **payload);
    void (*consume)(struct fw_link *l, const struct via_wire_hdr *h);
    /* Anything to receive? (a cheap check for pollers) */
    bool (*pending)(const struct fw_link *l);
    /* reserve found no room: ask the receiver to tell us when it drains
     * (the caller then wakes the peer and tries reserve once more). */
    void (*stall)(struct fw_link *l);
    /* The receiver took n packets: true if the sender asked to be woken. */
    bool (*drained)(struct fw_link *l, unsigned n);
    /* End of the NIC's turn on the VI (NULL: nothing to do): send what
     * was published, answer, retransmit what is due. Returns the time the
     * link wants to be visited again (0: only when something arrives), or
     * UINT64_MAX when the link has failed (the peer is unreachable). */
    uint64_t (*turn)(struct fw_link *l);
    /* The VI lets go of the link (NULL: nothing to free). What is in
     * flight is worth a bounded wait for the peer to take it while the
     * connection is open (*state, the channel's word: NULL, no channel);
     * a peer that ended it, or a broken link, answers nothing. */
    void (*fini)(struct fw_link *l, const _Atomic uint32_t *state);
};

/* A channel's word says the connection is open (NULL: no channel, as
 * good as open to a link that closes on its own). */
static inline bool fw_chan_open(const _Atomic uint32_t *state)
{
    return !state || atomic_load_explicit(state, memory_order_acquire) == VIA_CHAN_OPEN;
}

struct fw_udp;
struct fw_ofil;

struct fw_link {
    const struct fw_link_ops *ops;
    struct via_chan_dir *tx, *rx; /* shared-memory ring: our direction, theirs */
    uint64_t tx_tail_seen;        /* the last tail of tx read (fw_link_reserve) */
    struct fw_udp *udp;           /* the UDP link's state (link/fw_link_udp.c) */
    struct fw_ofil *ofi;          /* the libfabric link's state (link/fw_link_ofi.c) */
    /* The send pipeline waits for the peer NIC's answer to a message (an
     * ACK, a read's response): set and cleared by its T6 (fw_tx.c). A link
     * that cannot see its peer stop (the libfabric one) times it out. */
    bool awaiting_answer;
};

/* The payload bytes a packet of l carries at most. */
static inline uint32_t fw_link_mtu(const struct fw_link *l)
{
    return l->ops->mtu ? l->ops->mtu : VIA_MTU;
}

/* How the send pipelines gather a payload into l's packets
 * (hal_dma_gather): by streaming stores into a link whose packets the
 * peer's core reads next (fw_link_ops.stream). */
static inline enum hal_dma fw_link_dma(const struct fw_link *l)
{
    return l->ops->stream ? HAL_DMA_FROM_HOST_STREAM : HAL_DMA_FROM_HOST;
}

/* The shared-memory ring of a channel (link/fw_link_shm.c). */
extern const struct fw_link_ops fw_link_shm_ops;
void fw_link_shm_init(struct fw_link *l, struct via_chan *chan, int side);

/* The UDP link to a NIC of another host (link/fw_link_udp.c): sock is the
 * connected datagram socket vipd made for the connection (the link owns
 * it from now on); false when out of memory (sock closed). */
struct fw_nic;
bool fw_link_udp_init(struct fw_link *l, struct fw_nic *nic, struct via_chan *chan,
                      int side, int sock);
extern const struct fw_link_ops fw_link_udp_ops;

/* The libfabric link to a NIC of another host (link/fw_link_ofi.c): sock, vipd's
 * connected UDP socket of the connection, carries the endpoints' names
 * (the link owns it from now on); false with a sentence in why. */
bool fw_link_ofi_init(struct fw_link *l, struct fw_nic *nic, struct via_chan *chan, int side,
                      int sock, char *why, size_t whylen);
extern const struct fw_link_ops fw_link_ofi_ops;

/* The ring operations themselves, on one direction (also used by tests). */
/* tail_seen: the sender's last read of the receiver's tail (NULL: read it now). */
struct via_wire_hdr *fw_link_reserve(struct via_chan_dir *d, uint64_t *tail_seen,
                                     uint32_t payload);
void fw_link_publish(struct via_chan_dir *d, struct via_wire_hdr *h);
enum fw_link_peek_rc fw_link_peek(struct via_chan_dir *d, struct via_wire_hdr *h,
                                  const uint8_t **payload);
void fw_link_consume(struct via_chan_dir *d, const struct via_wire_hdr *h);
/* A packet (or PAD) published at the receiver's tail? One load of one line. */
bool fw_link_ready(const struct via_chan_dir *d);

/* The checks of a packet from a network link, which delivers frames whole
 * (UDP, libfabric): the header copy's version, check word, a type a frame
 * may carry (not PAD), and a frag_len that is the frame's payload_len. */
bool fw_link_frame_ok(const struct via_wire_hdr *h, uint64_t payload_len);

/* The network links' NIC-wide waker (link/fw_net.c). Somebody will sleep
 * on the NIC's event page: the waker must watch the sockets (it stops
 * while host threads poll); one eventfd write, and only when it does not
 * watch them. */
void fw_net_will_sleep(struct fw_nic *nic);
/* The NIC's waker thread goes with the NIC (nic_destroy). */
void fw_net_nic_fini(struct fw_nic *nic);

#endif

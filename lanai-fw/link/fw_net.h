/*
 * fw_net.h - the UDP link's parts, inside the firmware:
 *   fw_net.c       the NIC's datagram I/O (batched sendmmsg/recvmmsg), the
 *                  waker that watches the sockets while nobody polls, CRC-32C
 *   fw_rtx.c       the NIC-to-NIC reliable transport (AM-II transport paper,
 *                  section 4): channels, sequence numbers, acks, NACKs,
 *                  retransmission, duplicate suppression
 *   fw_fault.c     fault injection on the way out
 *   fw_link_udp.c  the link operations (fw_link.h) over all that
 * One struct fw_udp per connected VI, touched only under that VI's lock,
 * except due_ns and the waker's registration (fw_net.c).
 */
#ifndef FW_NET_H
#define FW_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "fw_link.h"
#include "via_abi.h"

#define FW_RTX_WIN 128u  /* frames in flight per connection: one per logical channel */
#define FW_NET_BATCH 32u /* frames per sendmmsg / recvmmsg */
#define FW_NET_FRAME_MAX \
    ((uint32_t)(sizeof(struct via_net_hdr) + sizeof(struct via_wire_hdr) + VIA_MTU + \
                VIA_NET_MAC_BYTES))

/* A frame held back by fault injection (reordered or delayed). */
struct fw_held_frame {
    uint8_t *buf;
    uint32_t len;
    uint64_t due_ns; /* delayed: when it goes; reordered: 0 = after the next frame */
};

struct fw_fault {
    struct via_net_faults rates;
    bool on;
    uint64_t rng;
    struct fw_held_frame held[8];
    unsigned nheld;
};

struct fw_rtx_slot {
    uint8_t *buf;       /* frame: via_net_hdr + wire header + payload */
    uint32_t len;
    uint32_t tries;     /* times sent */
    uint64_t sent_ns;   /* last sent */
    uint64_t first_ns;  /* first sent: the give-up clock */
};

/* What the waker watches for one VI of a network link: a descriptor that
 * turns readable when something arrives, and a time to visit the VI at.
 * due_ns is the link's to set (0: never); visit_on_arm too: the VI wants a
 * visit when the waker starts watching (nobody polls any more), to tell
 * its peer how to wake it (the libfabric link). fd and vi_id are fixed
 * while watched; next is the waker's (under its lock). */
struct fw_watch {
    int fd;
    uint32_t vi_id;
    _Atomic uint64_t due_ns;
    _Atomic bool visit_on_arm;
    struct fw_watch *next;
};

struct fw_udp {
    int sock;
    struct fw_nic *nic;
    struct via_net_counters *cnt;
    uint32_t vi_id, conn_id, peer_vi;
    uint64_t token;         /* the connection's secret: every frame carries it */
    bool mac;               /* every frame carries a MAC under mac_key */
    uint8_t mac_key[32];
    bool reliable;          /* the reliable transport; else losses are counted */
    bool failed;            /* given up on the peer */
    bool fail_told;         /* turn() has reported it */
    uint64_t timeout_ns;    /* VIP_NET_TIMEOUT_MS */
    uint64_t rto_ns;        /* first retransmission after this long (VIP_NET_RTO_MS) */

    /* send side: frames [snd_una, snd_next) unacknowledged, of which
     * [snd_sent, snd_next) not yet handed to the kernel */
    uint32_t snd_una, snd_sent, snd_next;
    struct fw_rtx_slot tx[FW_RTX_WIN];
    bool reserved;          /* reserve handed out tx[snd_next] */

    /* receive side: rcv_next is the next frame to deliver; frames after it
     * wait in their channel's slot until the gap before them is filled */
    uint32_t rcv_next;
    uint32_t rx_high;       /* the highest frame seen */
    uint8_t *rx[FW_RTX_WIN];
    uint32_t rx_len[FW_RTX_WIN];
    bool rx_have[FW_RTX_WIN];
    uint8_t *spare[FW_NET_BATCH]; /* recvmmsg lands here; swapped into rx[] */
    bool ack_owed;          /* frames taken since our last ack went out */
    uint32_t ack_sent;      /* the ack our last frame carried */
    uint64_t ack_since;     /* when the ack became owed (0: not owed) */
    uint32_t nacked;        /* rcv_next + 1 when a GAP NACK for it went out, else 0 */
    bool want_ack_at_turn;

    struct fw_fault fault;
    struct fw_watch watch;  /* the waker's: the socket and the retransmission time */
};

/* ---- fw_net.c ---------------------------------------------------------------- */
/* How long a network link waits for its peer before it gives up
 * (VIP_NET_TIMEOUT_MS overrides it). */
#define FW_NET_TIMEOUT_MS 3000u
/* A duration in ms from the environment: dflt when unset, malformed or 0. */
uint64_t fw_net_env_ms(const char *name, uint64_t dflt);

/* Send frames (each buf/len) in one sendmmsg where possible. */
void fw_net_send(struct fw_udp *u, uint8_t *const *buf, const uint32_t *len, unsigned n);
/* Receive up to FW_NET_BATCH frames into u->spare[]: their count (0 none). */
unsigned fw_net_recv(struct fw_udp *u, uint32_t *len);
/* The waker: watches w's descriptor and time while nobody polls, and
 * then sets the VI's arrival bit and wakes its sleepers (fw_notify). */
bool fw_net_watch(struct fw_nic *nic, struct fw_watch *w);
void fw_net_unwatch(struct fw_nic *nic, struct fw_watch *w);
/* Is the waker watching the sockets (nobody polls, or a thread sleeps)? */
bool fw_net_armed(struct fw_nic *nic);
/* fw_net_will_sleep and fw_net_nic_fini, which the rest of the NIC
 * calls, are declared in fw_link.h. */
static inline void fw_net_count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- fw_rtx.c ----------------------------------------------------------------- */
bool fw_rtx_init(struct fw_udp *u);
void fw_rtx_fini(struct fw_udp *u);
/* The link's reserve/publish/peek/consume on the transport. */
struct via_wire_hdr *fw_rtx_reserve(struct fw_udp *u, uint32_t payload);
void fw_rtx_publish(struct fw_udp *u, struct via_wire_hdr *h);
bool fw_rtx_ready(struct fw_udp *u, struct via_wire_hdr *h, const uint8_t **payload);
void fw_rtx_consume(struct fw_udp *u);
/* A packet ready for fw_rtx_ready, after a look at the socket? */
bool fw_rtx_poll(struct fw_udp *u);
/* Closing: see what was sent acknowledged (retransmitting as need be), for
 * at most the link's timeout (2 s at most), as a socket lingers, and only
 * while the connection is open (fw_chan_open(state)). */
void fw_rtx_linger(struct fw_udp *u, const _Atomic uint32_t *state);
/* Send, answer, retransmit; 0, or UINT64_MAX once when the peer is given up. */
uint64_t fw_rtx_turn(struct fw_udp *u);

/* ---- fw_fault.c ----------------------------------------------------------------- */
/* Rates from the channel (vipd --faults), else VIP_FAULTS. */
void fw_fault_init(struct fw_fault *f, const struct via_net_faults *chan_rates, uint32_t salt);
/* fw_fault_parse: nic.h (vipd calls it). */
/* Hand n frames to the wire through the faults (drop, duplicate, corrupt,
 * reorder, delay), and whatever held frame is due. */
void fw_fault_send(struct fw_udp *u, uint8_t *const *buf, const uint32_t *len, unsigned n);
void fw_fault_fini(struct fw_fault *f);

#endif

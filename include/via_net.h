/*
 * via_net.h - what crosses a host boundary: the UDP link's frame header,
 * the messages between vipds, and the counters of a session's network
 * links. Included by via_abi.h; sizes pinned with static_assert.
 *
 * Frame (spec-notes/wire.md): a 40-byte via_net_hdr, then for DATA a link
 * packet exactly as the shared-memory ring carries it (via_wire_hdr +
 * payload, unpadded). Every integer is little-endian (the hosts this runs
 * on); crc is CRC-32C over the whole frame with crc taken as 0.
 */
#ifndef VIA_NET_H
#define VIA_NET_H

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>

#define VIA_NET_VERSION 2u

enum via_net_kind {
    VIA_NET_DATA = 1, /* seq = this frame's; carries a link packet */
    VIA_NET_ACK = 2,  /* nothing but the acknowledgement below */
    VIA_NET_NACK = 3, /* seq = a frame the receiver could not take (why) */
    VIA_NET_NKINDS
};

enum via_net_nack_why {
    VIA_NACK_GAP = 1,  /* frames before seq are missing: resend from seq */
    VIA_NACK_FULL = 2, /* no room for seq in the receiver's window: resend later */
};

#define VIA_NET_RELIABLE 0x1 /* flags: the frame belongs to the reliable transport */
#define VIA_NET_MAC 0x2      /* flags: a VIA_NET_MAC_BYTES MAC of the frame follows it */
#define VIA_NET_MAC_BYTES 16u

struct via_net_hdr {
    uint8_t version;  /* VIA_NET_VERSION */
    uint8_t kind;     /* enum via_net_kind */
    uint8_t chan;     /* logical channel of the sender (seq % channels) */
    uint8_t flags;
    uint32_t len;     /* bytes after this header */
    uint32_t conn_id; /* the connection (both vipds agree on it) */
    uint32_t dst_vi;  /* VI on the receiving NIC */
    uint32_t seq;
    uint32_t ack;     /* every frame: all frames before ack were received */
    uint32_t why;     /* NACK: enum via_net_nack_why */
    uint32_t crc;     /* CRC-32C of the frame, this field 0 */
    uint64_t token;   /* the connection's secret (vipd derives it from the cluster key) */
};
static_assert(sizeof(struct via_net_hdr) == 40, "net frame header");

/* Fault injection rates of a link, in 1/65536 (fw_fault.c). */
struct via_net_faults {
    uint16_t drop, dup, reorder, corrupt, delay;
    uint16_t delay_ms;
    uint32_t seed;
    uint32_t pad[3];
};
static_assert(sizeof(struct via_net_faults) == 28, "net faults");

/* A session's network links, summed (the NIC writes, vipctl net reads). */
struct via_net_counters {
    _Atomic uint64_t tx_frames, rx_frames, tx_batches, rx_batches;
    _Atomic uint64_t retransmits, acks_sent, nacks_sent, nacks_got;
    _Atomic uint64_t dup_dropped;   /* a frame already received */
    _Atomic uint64_t bad_short, bad_crc, bad_version, bad_vi; /* dropped, never trusted */
    _Atomic uint64_t lost;          /* unreliable VIs: frames that never came */
    _Atomic uint64_t timeouts;      /* links given up on (VIP_NET_TIMEOUT_MS) */
    _Atomic uint64_t f_drop, f_dup, f_reorder, f_corrupt, f_delay; /* injected */
};
static_assert(sizeof(struct via_net_counters) == 20 * 8, "net counters");

/* VIA_CTL_NET_STATS reply: the counters (the sessions' now and those of
 * sessions gone, summed; as uint64_t in via_net_counters' order), the
 * fault rates of --faults, then nhosts via_net_host_info. */
#define VIA_NET_NCOUNTERS 20u
struct via_net_host_info {
    char name[64];
    uint32_t host_id, ip; /* ip: network byte order */
    uint16_t port, up;
    uint32_t conns;       /* connections to it now */
};
static_assert(sizeof(struct via_net_host_info) == 80, "net host info");
struct via_ctl_net_stats_r {
    uint64_t cnt[VIA_NET_NCOUNTERS];
    struct via_net_faults faults;
    uint32_t host_id, nhosts;
};
static_assert(sizeof(struct via_ctl_net_stats_r) == 20 * 8 + 28 + 8 + 4, "net stats");

/* ---- between vipds (a TCP connection each way pair; kdriver/kd_host.c) ----
 * Each message is a via_host_msg then len bytes of body. A link starts
 * with the handshake (HELLO from the connecting vipd, CHALLENGE back,
 * PROOF), which proves both hold the cluster key; every later message is
 * followed by VIA_HOST_MAC_BYTES of MAC (kdriver/kd_auth.h) over its
 * number on the link and its bytes. */
#define VIA_HOST_MAGIC 0x56495048u /* "VIPH" */
#define VIA_HOST_MAC_BYTES 32u
enum via_host_type {
    VIA_HOST_HELLO = 1, /* body: via_host_hello */
    VIA_HOST_PING,      /* heartbeat, no body */
    VIA_HOST_CONN_REQ,  /* via_host_conn_req */
    VIA_HOST_CONN_ACC,  /* via_host_conn_acc */
    VIA_HOST_CONN_REJ,  /* via_host_conn_rej */
    VIA_HOST_CONN_END,  /* via_host_conn_end */
    VIA_HOST_CONN_CANCEL, /* via_host_conn_cancel: the requester's timeout fired */
    VIA_HOST_CHALLENGE, /* via_host_challenge: the acceptor's answer to HELLO */
    VIA_HOST_PROOF,     /* via_host_proof: the connector's answer to CHALLENGE */
    VIA_HOST_NTYPES
};
struct via_host_msg {
    uint32_t magic;
    uint16_t version; /* VIA_NET_VERSION */
    uint16_t type;
    uint32_t len;
    uint32_t pad;
};
static_assert(sizeof(struct via_host_msg) == 16, "host msg");

struct via_host_hello {
    uint32_t host_id;
    uint32_t link;  /* enum via_link_kind of the sender (vipd --link): both must agree */
    uint32_t to_id; /* the host it means to reach */
    uint32_t pad;
    uint8_t nonce[32];
};
static_assert(sizeof(struct via_host_hello) == 48, "hello");
/* The acceptor's nonce and its proof (a MAC of both nonces, both ids and
 * the link kind under the cluster key). */
struct via_host_challenge {
    uint32_t host_id;
    uint32_t pad;
    uint8_t nonce[32];
    uint8_t mac[32];
};
static_assert(sizeof(struct via_host_challenge) == 72, "challenge");
struct via_host_proof {
    uint8_t mac[32];
};

/* A connection request for a NIC of the receiving vipd. peer: the request
 * is VipConnectPeerRequest's (matched with a peer request, not a wait). */
struct via_host_conn_req {
    uint32_t req_id; /* the requester vipd's; also the wire conn_id */
    uint32_t req_vi;
    uint16_t dst_nic, src_nic;
    uint32_t udp_ip; /* the requester's socket (network byte order) */
    uint16_t udp_port;
    uint8_t dlen, req_dlen;
    uint32_t peer;
    uint8_t discrim[16];     /* the target's */
    uint8_t req_discrim[16]; /* the requester's own */
    uint32_t reliability, max_transfer, rdma_write, rdma_read;
    uint8_t salt[16];   /* the requester's half of the frame secrets' input */
    uint32_t frame_mac; /* the requester wants a MAC on every frame */
    uint32_t pad;
};
static_assert(sizeof(struct via_host_conn_req) == 96, "conn req");

struct via_host_conn_acc {
    uint32_t req_id;
    uint32_t acc_vi;
    uint16_t acc_nic, udp_port;
    uint32_t udp_ip;
    uint32_t reliability, max_transfer, rdma_write, rdma_read;
    uint8_t salt[16];   /* the acceptor's half */
    uint32_t frame_mac; /* MACs on the frames (either side asked) */
    uint32_t pad;
};
static_assert(sizeof(struct via_host_conn_acc) == 56, "conn acc");

struct via_host_conn_rej {
    uint32_t req_id;
    int32_t status; /* VIP_NO_MATCH, VIP_REJECT, VIP_INVALID_RELIABILITY_LEVEL ... */
};

/* The requester's timeout fired while its request waits at the acceptor's
 * vipd: withdraw it and answer CONN_REJ (status VIP_TIMEOUT), unless it
 * was accepted already (the CONN_ACC on its way then wins). A vipd that
 * does not know this message ignores it; the requester then gives up
 * after the host timeout, as before. */
struct via_host_conn_cancel {
    uint32_t req_id;
    uint32_t pad;
};
static_assert(sizeof(struct via_host_conn_cancel) == 8, "conn cancel");

struct via_host_conn_end {
    uint32_t conn_id; /* the wire id */
    uint32_t broken;  /* 1: an error or death (BROKEN), 0: a disconnect (CLOSED) */
    uint32_t from_requester;
    uint32_t pad;
};

/* ---- CRC-32C (Castagnoli), with the SSE4.2 instruction where there is one */
uint32_t via_crc32c(uint32_t crc, const void *buf, uint64_t len);
/* The same, a byte at a time (what tests hold the fast one to). */
uint32_t via_crc32c_ref(uint32_t crc, const void *buf, uint64_t len);

#endif

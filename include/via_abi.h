/*
 * via_abi.h - every layout that crosses a process boundary.
 *
 * Included by vipl/ (host library), kdriver/ (vipd, vipctl), lanai-fw/
 * (the firmware) and tests/. Nothing here holds a pointer: shared memory
 * is mapped at different addresses in different processes. Every size is
 * pinned with static_assert; change one and bump VIA_ABI_VERSION.
 *
 * Shared objects (each its own memfd, created by vipd, passed by SCM_RIGHTS):
 *   per session (one VipOpenNic):
 *     - the TPT segment   : vipd writes, client maps read-only (sealed)
 *     - the event page    : futex word + arrival bitmap; the client, its
 *                           connected peers and vipd write it, so it is
 *                           a hint only (VI waits sleep on their
 *                           connection's word: via_chan_dir.rx_wake)
 *     - the status page   : counters and stage trace ring, client writes,
 *                           vipd/vipctl read
 *   per VI:  the doorbell page (one 4 KiB page; only the owner gets the fd)
 *   per CQ:  the completion ring
 *   per connection: the channel (one byte ring per direction; the "link"
 *            through the emulated switch, mapped by the two endpoints)
 */
#ifndef VIA_ABI_H
#define VIA_ABI_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "via_net.h"

/* 4: the channel names its link (shm, UDP, libfabric), net counters; 5: the
 * channel directions' wake words (rx_sleepers, rx_wake); 6: those words on
 * a line of their own; 7: a shared-memory ring's headers carry the seal of
 * their position, not the check word; 8: the profile's host costs (Done),
 * DMA start by direction, copyback and the extension firmware's costs; 9:
 * virtual time (the NIC page's clock, a channel direction's vt_bound); 10:
 * the profile's host_cpu_scale; 11: vt_bound's futex word (vt_seq,
 * vt_sleepers). */
#define VIA_ABI_VERSION 13u
#define VIA_PAGE_SIZE 4096u
#define VIA_CACHELINE 64u

/* ---- true limits of the emulated NIC (VipQueryNic reports these) ------ */
#define VIA_MAX_NICS 64u
#define VIA_MAX_VI 4096u            /* VIs per NIC (VI ids 0..4095) */
#define VIA_MAX_TPT 8192u           /* registrations per session */
#define VIA_MAX_PTAGS 256u          /* ptags per session */
#define VIA_MAX_CQ 256u             /* CQs per session */
#define VIA_MAX_CQ_ENTRIES 65536u
#define VIA_MAX_SEGS 16u            /* data segments per descriptor */
#define VIA_MAX_TRANSFER (1u << 20) /* bytes per message */
#define VIA_MTU 16384u              /* payload bytes per link packet */
#define VIA_QUEUE_DEPTH 1024u       /* descriptors per work queue */
#define VIA_MAX_REGISTER_BYTES (1ull << 34)
#define VIA_MAX_DISCRIM 16u
#define VIA_NIC_ADDR_LEN 6u
/* Reliability levels (VIP_SERVICE_* bits) whose VIs may enable RDMA read:
 * VipQueryNic reports it as RDMAReadSupport and vipd refuses EnableRdmaRead
 * on a VI of any other level (VIP_INVALID_RDMAREAD). Both reliable levels:
 * a read's response is an answer, which an unreliable VI never waits for. */
#define VIA_RDMA_READ_LEVELS 0x6u

/* ---- doorbells ----------------------------------------------------------
 * A doorbell token names a descriptor: its host virtual address and the
 * memory handle it was posted with (VipPostSend's MemoryHandle). The third
 * word carries the token kind and, for the short-message extensions, a
 * length (spec-notes/extensions.md).
 */
enum via_db_kind {
    VIA_DB_DESC = 0,     /* standard: descriptor address + handle */
    VIA_DB_MERGED = 1,   /* merged descriptor: word2 low 16 bits = length */
    VIA_DB_DESCLESS = 2, /* descriptorless: data in the VI's SRAM slot */
    VIA_DB_NKINDS
};

struct via_db_token {
    uint64_t desc_va;
    uint32_t mem_handle;
    uint32_t word2; /* kind << 24 | length */
};
static_assert(sizeof(struct via_db_token) == 16, "doorbell token is 16 bytes");

#define VIA_DB_KIND(w2) ((w2) >> 24)
#define VIA_DB_LEN(w2) ((w2)&0x7FFFu)
/* DESCLESS: the send carries immediate data, in the slot's descless_imm. */
#define VIA_DB_IMM 0x8000u
#define VIA_DB_SLOT(w2) (((w2) >> 16) & 0xFFu)
#define VIA_DB_WORD2(kind, slot, len)                                           \
    (((uint32_t)(kind) << 24) | (((uint32_t)(slot)&0xFFu) << 16) | ((uint32_t)(len)&0xFFFFu))

/*
 * One doorbell queue (send or receive) of a VI.
 * Rules: VIA_DB_SLOTS slots, a power of two. prod and cons are free-running
 * counters (slot = counter % VIA_DB_SLOTS). Only the host library writes
 * prod and the token slots; only the NIC writes cons. The host fills a
 * slot, then publishes it with a release store of prod; the NIC reads prod
 * with acquire, takes the token, then releases the slot by storing cons.
 * Full when prod - cons == VIA_DB_SLOTS.
 */
#define VIA_DB_SLOTS 64u
struct via_db_queue {
    _Alignas(64) _Atomic uint32_t prod;
    _Alignas(64) _Atomic uint32_t cons;
    _Alignas(64) struct via_db_token tok[VIA_DB_SLOTS];
};
static_assert(sizeof(struct via_db_queue) == 128 + 16 * VIA_DB_SLOTS, "db queue");

/* Per-VI counters, written by the NIC, read by vipctl. */
struct via_vi_counters {
    _Atomic uint64_t tx_msgs, tx_bytes, rx_msgs, rx_bytes;
    _Atomic uint64_t rx_dropped;  /* refused on arrival (via_vi_page.rx_refused says why) */
    _Atomic uint64_t desc_errors; /* descriptors completed in error (not only flushed) */
    _Atomic uint64_t sq_posted, sq_done, rq_posted, rq_done;
    _Atomic uint64_t tx_descless, tx_merged; /* sends that took an extension path */
    /* Completions whose descriptor the NIC could not write (its control
     * segment failed the TPT: memory deregistered after the post, since a
     * post checks it): counted before sq_done/rq_done, so the library,
     * finding the NIC's count past a descriptor whose Status is not DONE,
     * knows it is one of these and lets it leave the queue untaken. */
    _Atomic uint64_t sq_unwritten, rq_unwritten;
    uint64_t reserved[2];
};
static_assert(sizeof(struct via_vi_counters) == 128, "vi counters");

/* The SRAM slots of the descriptorless extension: the host writes a short
 * message into a free slot by programmed I/O (and its immediate data, if
 * any, into the slot's word) and rings a DESCLESS token (word2 = kind |
 * slot << 16 | VIA_DB_IMM | length); the NIC sends from the slot and
 * clears its busy flag. Slots are used in order, round robin. */
#define VIA_DESCLESS_SLOT 1024u
#define VIA_DESCLESS_NSLOTS 4u
#define VIA_DESCLESS_MAX (VIA_DESCLESS_SLOT / VIA_DESCLESS_NSLOTS)

/* Why the receiving NIC refused a packet, check by check (fw_rx.c), as
 * rxe names its responder's checks: each refusal counts in rx_dropped and
 * in the VI's rx_refused[reason], and is traced (VIA_ST_R_REFUSED). The
 * names are kdriver/vipctl.c's rx_check_name. */
enum via_rx_check {
    VIA_RXC_OK = 0,
    VIA_RXC_CONN,        /* another connection's packet (conn id) */
    VIA_RXC_DST_VI,      /* addressed to another VI */
    VIA_RXC_ANSWER,      /* an ACK/NAK of nothing we sent, or answered already */
    VIA_RXC_LENGTH,      /* lengths that do not add up, or over the maximum */
    VIA_RXC_READ_RESP,   /* a read response of no read in flight, or out of order */
    VIA_RXC_READ_REQ,    /* a read request that is malformed or not allowed here */
    VIA_RXC_FIRST,       /* a first fragment mid-message, or a middle one with none begun */
    VIA_RXC_KIND,        /* a fragment of another kind of message than the one in progress */
    VIA_RXC_SEQ,         /* a message out of sequence */
    VIA_RXC_NO_RECV,     /* no receive descriptor posted */
    VIA_RXC_RECV_ERROR,  /* the receive descriptor is malformed or too short */
    VIA_RXC_RDMAW_PROT,  /* an RDMA write's target refused (handle, ptag, enable, bounds) */
    VIA_RXC_RDMAR_PROT,  /* an RDMA read's source refused */
    VIA_RXC_PULL_FAULT,  /* the one-copy pull could not read the sender's memory */
    VIA_RXC_LOSSY_GONE,  /* lossy VI: a message abandoned for a later one */
    VIA_RXC_LOSSY_STRAY, /* lossy VI: a packet of no message in progress */
    VIA_RXC_N
};

/* The doorbell page: one per VI, 4 KiB, mapped only by its owner and vipd. */
struct via_vi_page {
    struct via_db_queue sq;
    struct via_db_queue rq;
    struct via_vi_counters cnt;
    _Atomic uint32_t state; /* enum via_vi_state, mirrored for vipctl */
    uint32_t vi_id;
    _Atomic uint32_t descless_busy[VIA_DESCLESS_NSLOTS]; /* host sets, NIC clears */
    uint32_t descless_imm[VIA_DESCLESS_NSLOTS]; /* a slot's immediate data (VIA_DB_IMM) */
    _Atomic uint32_t rx_refused[VIA_RXC_N];     /* packets refused, by reason (NIC writes) */
    uint8_t pad[VIA_PAGE_SIZE - 2 * sizeof(struct via_db_queue) - 128 - 8 -
                8 * VIA_DESCLESS_NSLOTS - 4 * VIA_RXC_N - VIA_DESCLESS_SLOT];
    uint8_t descless[VIA_DESCLESS_SLOT];
};
static_assert(sizeof(struct via_vi_page) == VIA_PAGE_SIZE, "doorbell page is one page");

/* VI states (VIA 1.0, plus the internal PENDING of a request in flight). */
enum via_vi_state {
    VIA_VI_IDLE = 0,
    VIA_VI_CONNECTED = 1,
    VIA_VI_PENDING = 2,
    VIA_VI_ERROR = 3,
};

/* ---- translation and protection table --------------------------------------
 * Handle = generation << 16 | index; index < VIA_MAX_TPT, generation != 0.
 * An entry is valid when its gen field equals the handle's generation.
 * vipd writes entries (gen last, with release); the NIC reads gen first
 * with acquire and checks every segment against [va, va + len) and ptag.
 */
#define VIA_TPT_RDMA_WRITE 0x1u
#define VIA_TPT_RDMA_READ 0x2u
struct via_tpt_entry {
    _Atomic uint32_t gen;
    uint32_t ptag;
    uint64_t va;
    uint64_t len;
    uint32_t flags;
    uint32_t pad;
};
static_assert(sizeof(struct via_tpt_entry) == 32, "tpt entry");
#define VIA_TPT_BYTES (VIA_MAX_TPT * sizeof(struct via_tpt_entry))
#define VIA_MH_INDEX(h) ((h)&0xFFFFu)
#define VIA_MH_GEN(h) ((h) >> 16)
#define VIA_MH_MAKE(gen, idx) (((uint32_t)(gen) << 16) | (uint32_t)(idx))

/* ---- event page -------------------------------------------------------------
 * Wake-up protocol: a waiter reads seq, increments sleepers, re-checks its
 * condition, then futex-waits on seq; it decrements sleepers when it wakes.
 * A producer (a peer NIC that delivered a packet, vipd breaking a channel)
 * sets the VI's bit in arrived[], increments seq, and calls FUTEX_WAKE only
 * when sleepers != 0. So a busy receiver costs the producer no system call.
 * The bits are level-triggered: a consumer clears one only when the VI has
 * been idle a while, then looks at the VI once more.
 */
struct via_event_page {
    _Alignas(64) _Atomic uint32_t seq;
    _Atomic uint32_t sleepers;
    /* Set by the page's process when its waiters pay a membarrier across
     * processes after announcing themselves: a producer registered for it
     * then needs no fence of its own (lanai-fw/fw_updt.c). */
    _Atomic uint32_t waiters_barrier;
    _Alignas(64) _Atomic uint64_t arrived[VIA_MAX_VI / 64]; /* by local VI id */
    uint8_t pad[VIA_PAGE_SIZE - 64 - 8 * (VIA_MAX_VI / 64)];
};
static_assert(sizeof(struct via_event_page) == VIA_PAGE_SIZE, "event page");

/* ---- status page: counters and the stage trace -------------------------------
 * Trace ring rules: VIA_TRACE_SLOTS records, power of two; the NIC of this
 * session is the only writer (head is free-running); readers copy the
 * last VIA_TRACE_SLOTS records and may see a record being overwritten
 * (they check seq_begin/seq_end equality per record).
 */
enum via_stage {
    VIA_ST_BUILD = 0,
    VIA_ST_T1_RING, VIA_ST_T2_BELL, VIA_ST_T3_XDES, VIA_ST_T4_XDATA,
    VIA_ST_T5_TRANSMIT, VIA_ST_T6_UPDT,
    VIA_ST_R1_RING, VIA_ST_R2_BELL, VIA_ST_R3_RECEIVE, VIA_ST_R4_XDES,
    VIA_ST_R5_XDATA, VIA_ST_R6_UPDT,
    VIA_ST_R_REFUSED, /* not a stage: a packet refused; its length field is the reason */
    VIA_ST_NSTAGES
};

struct via_trace_rec {
    _Atomic uint32_t seq_begin;
    uint16_t stage;
    uint16_t vi_id;
    uint64_t t_ns; /* CLOCK_MONOTONIC at the end of the stage */
    uint32_t msg_seq;
    uint32_t len;
    _Atomic uint32_t seq_end;
    uint32_t dur_ns; /* modelled duration of the stage (paced profiles), else 0 */
};
static_assert(sizeof(struct via_trace_rec) == 32, "trace record");

#define VIA_ST_NSTAGES_MAX 16u
static_assert(VIA_ST_NSTAGES <= VIA_ST_NSTAGES_MAX, "stage table");

#define VIA_TRACE_SLOTS 2048u
struct via_status_page {
    _Atomic uint32_t trace_on; /* set by vipd (vipctl trace on) */
    _Atomic uint32_t pid;
    _Atomic uint64_t trace_head;
    _Atomic uint64_t progress_calls;
    /* What vipd alone decides for this session's NIC, here and not in the
     * NIC page (which every process on the NIC writes): the doorbell pairs
     * the firmware scans (vipd updates it as VIs come and go) and the clock. */
    _Atomic uint32_t scan_slots;
    uint32_t clock;          /* enum via_clock */
    _Atomic uint32_t nvis;   /* VIs on the NIC, every process's */
    uint32_t pad0;
    struct via_net_counters net; /* the session's UDP links (via_net.h) */
    /* TPT entries the process's registration cache closed while vipd keeps
     * them (the process's NIC refuses them; vipctl mem leaves them out). */
    _Atomic uint64_t tpt_closed[VIA_MAX_TPT / 64];
    uint8_t pad[VIA_PAGE_SIZE - 40 - sizeof(struct via_net_counters) - VIA_MAX_TPT / 8];
    struct via_trace_rec trace[VIA_TRACE_SLOTS];
};
static_assert(sizeof(struct via_status_page) == VIA_PAGE_SIZE + 32 * VIA_TRACE_SLOTS,
              "status page");

/* ---- completion queue ---------------------------------------------------------
 * Rules: nslots (power of two >= EntryCount) entries; head/tail free-running.
 * Only the NIC writes entries and tail (release); only the host consumer
 * advances head. The NIC never overwrites an unconsumed entry: when the ring
 * is full it records overflow, a catastrophic CQ error (VIA 1.0).
 * VipResizeCQ replaces the ring by a new object (VIA_CTL_RESIZE_CQ) whose
 * head and tail continue the old one's, the entries not yet taken copied to
 * the same positions (modulo the new nslots).
 */
struct via_cq_entry {
    uint32_t vi_id;
    uint16_t is_recv;
    uint16_t vi_gen; /* which incarnation of that VI id (ids are reused) */
};
static_assert(sizeof(struct via_cq_entry) == 8, "cq entry");

struct via_cq_ring {
    _Alignas(64) _Atomic uint64_t tail; /* NIC */
    _Atomic uint32_t overflow;
    uint32_t nslots;
    _Alignas(64) _Atomic uint64_t head; /* host */
    uint8_t pad[56];
    struct via_cq_entry e[];
};
static_assert(sizeof(struct via_cq_ring) == 128, "cq ring header");

/* ---- the link: wire header and channel -----------------------------------------
 * Packet = header + payload, padded to 64 bytes, laid in a byte ring.
 * Wire format version 2; see spec-notes/wire.md. The opcodes follow a
 * requester / responder / completer split: SEND and RDMA_WRITE carry a
 * message (fragmented at VIA_MTU), RDMA_READ_REQ asks the responder for
 * bytes that come back as RDMA_READ_RESP, ACK and NAK answer a message
 * (ack_seq names it), PAD fills the end of a ring.
 */
enum via_pkt_type {
    VIA_PKT_SEND = 1,
    VIA_PKT_PAD = 2, /* filler to the end of the ring; skip it */
    VIA_PKT_RDMA_WRITE = 3,
    VIA_PKT_RDMA_READ_REQ = 4,
    VIA_PKT_RDMA_READ_RESP = 5,
    VIA_PKT_ACK = 6,
    VIA_PKT_NAK = 7,
    VIA_PKT_SEND_RTS = 8, /* native, same host: a SEND's segment table, not its
                             bytes; the receiver pulls them (spec-notes/cma.md) */
    VIA_PKT_WRITE_RTS = 9, /* the same for an RDMA write (rkey/raddr the target's) */
    VIA_PKT_NTYPES
};
#define VIA_PKT_FIRST 0x1u
#define VIA_PKT_LAST 0x2u
#define VIA_PKT_IMM 0x4u
#define VIA_WIRE_VERSION 2u

/* NAK reasons (in imm of a NAK packet). */
enum via_nak_reason {
    VIA_NAK_NO_RECV = 1,    /* no receive descriptor posted */
    VIA_NAK_RECV_ERROR = 2, /* the receive descriptor was malformed or too short */
    VIA_NAK_PROTECTION = 3, /* RDMA target: handle, ptag, enable or bounds refused */
    VIA_NAK_PULL_REFUSED = 4, /* SEND_RTS: cannot pull here; send it again through the ring */
    VIA_NAK_PULL_FAULT = 5,   /* SEND_RTS: the named source could not be read */
};

/* The payload of a SEND_RTS or WRITE_RTS packet: one entry per gather segment, in the
 * sender's address space (frag_len = entries * 16; msg_len their sum). */
struct via_rts_seg {
    uint64_t va;
    uint64_t len;
};
static_assert(sizeof(struct via_rts_seg) == 16, "rts segment");

struct via_wire_hdr {
    uint8_t version;
    uint8_t type;
    uint8_t flags;
    uint8_t lap;       /* shared-memory ring: the lap tag, the publication (below) */
    uint16_t src_nic, dst_nic;
    uint32_t dst_vi;
    uint32_t conn_id;
    uint32_t msg_seq;  /* per direction, from 1 (messages, not ACK/NAK) */
    uint32_t msg_len;  /* whole message */
    uint32_t frag_off; /* offset of this fragment in the message */
    uint32_t frag_len;
    uint32_t imm;      /* immediate data (IMM), or the NAK reason */
    uint32_t crc;      /* network links: the header check word (via_wire_check());
                          shared-memory ring: the seal of the packet's position */
    uint32_t rkey;     /* RDMA: the target's memory handle */
    uint32_t ack_seq;  /* ACK/NAK: the message answered */
    uint64_t arrive_ns; /* paced profiles: modelled time the last byte reaches
                           the receiving NIC (CLOCK_MONOTONIC); 0 = now */
    uint64_t raddr;    /* RDMA: the target address of this fragment's message */
};
static_assert(sizeof(struct via_wire_hdr) == 64, "wire header is one cache line");

/*
 * One direction of a channel: a byte ring of packets.
 * Rules: VIA_CHAN_RING bytes, power of two; head (sender NIC) and tail
 * (receiver NIC) are free-running byte counters, multiples of 64. The
 * sender writes header and payload, then publishes the packet with a
 * release store of the header's lap tag: 1 + (lap % 255), lap = the
 * packet's position / VIA_CHAN_RING, so never 0 (a fresh ring) and never
 * the tag of the lap before (an old packet). The receiver looks at the
 * tag of the slot at tail only (acquire), so a packet costs it one line,
 * not the head line and then the packet's; nobody writes the ring but the
 * sender. Before the tag the sender stores the position's seal in the
 * header's crc field (a 32-bit mix of the whole 64-bit position, the ring's
 * own; the check word is for the network links' frames): old bytes that
 * happen to look like the tag, and an old header of a lap with the same
 * tag, fail the seal; only if head (stored after the tag) is past tail is
 * a header that fails its checks the sender's fault (head may lag behind
 * tail: the receiver takes a packet by its tag, before the sender's store
 * of head). head is otherwise
 * the sender's count (room, diagnostics). The receiver releases space
 * with a store of tail. A packet never wraps:
 * when it would not fit before the end, the sender first emits a PAD
 * packet covering the rest.
 * tx_waiting asks the receiver to wake the sender's event page when it
 * frees space.
 * rx_sleepers / rx_wake: the receiver's own wake-up word for waits on its
 * VI (VipRecvWait, VipSendWait), used as the event page's sleepers/seq
 * are: its waiters count themselves in rx_sleepers and FUTEX_WAIT on
 * rx_wake; whoever may have completed something for the receiver's VI
 * (the sender after publishing or freeing room, the receiver's own NIC,
 * vipd or the NIC ending the channel) bumps rx_wake and wakes them when
 * rx_sleepers != 0. Only this connection's two ends map it, so no other
 * peer of the receiver can keep these wake-ups from happening (the event
 * page, which every peer writes, is a hint for the NIC's thread and CQ
 * waits only).
 * Lines: head is the sender's; tail and tx_waiting the receiver's, which
 * it writes at every consume; rx_sleepers and rx_wake a line of their own,
 * written only around a sleep and read by the sender after every publish,
 * so it stays shared in both caches (beside tail it moved between the
 * cores twice a message: vip_send_bw -s 8 spent 16% in fw_wake_dir's load
 * and fw_link_consume's store).
 */
#define VIA_CHAN_RING (256u * 1024u)
struct via_chan_dir {
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) _Atomic uint64_t tail;
    _Atomic uint32_t tx_waiting;
    _Alignas(64) _Atomic uint32_t rx_sleepers;
    _Atomic uint32_t rx_wake;
    /* Virtual time (VIP_CLOCK=virtual): the sender's promise that nothing
     * it sends arrives before this time; only the sender writes it, and it
     * only grows (lanai-fw/fw_vclock.c). */
    _Atomic uint64_t vt_bound;
    /* ... and whether it is outside the library now (its process, vt_pid,
     * may then be blocked elsewhere and can send nothing until it is back). */
    _Atomic uint32_t vt_pid;
    _Atomic uint32_t vt_outside;
    /* set by the receiver when it went on without the sender's promise
     * (the sender was blocked outside the library) */
    _Atomic uint32_t vt_skipped;
    /* vt_bound's futex word, used as rx_wake is: the sender bumps vt_seq
     * after each raise of vt_bound and wakes it when vt_sleepers != 0; a
     * receiver its promise holds back counts itself in vt_sleepers and
     * sleeps on vt_seq (a yield would give a busy machine's CPU to
     * anything runnable, not to the sender). */
    _Atomic uint32_t vt_seq;
    _Atomic uint32_t vt_sleepers;
    _Alignas(64) uint8_t ring[VIA_CHAN_RING];
};
static_assert(sizeof(struct via_chan_dir) == 3 * 64 + VIA_CHAN_RING, "chan dir: three lines, ring");

enum via_chan_state {
    VIA_CHAN_OPEN = 0,
    VIA_CHAN_CLOSED = 1, /* one side disconnected */
    VIA_CHAN_BROKEN = 2, /* error or a side died */
};

/* Channel: side 0 is the requester (VipConnectRequest), side 1 the acceptor.
 * dir[s] carries packets sent BY side s. */
struct via_chan {
    _Alignas(64) _Atomic uint32_t state;
    uint32_t magic;
    uint32_t conn_id;
    uint32_t reliability;
    uint32_t vi_id[2];  /* VI id of each side on its NIC */
    uint16_t nic[2];
    /* VIA_LINK_SHM: dir[] is the link. VIA_LINK_UDP: the peer is on
     * another host; the link is a UDP socket vipd handed over with the
     * channel (its fd in place of the peer's event page), dir[] unused,
     * and faults are the rates vipd --faults set for it (via_net.h). */
    uint32_t link;
    struct via_net_faults faults;
    /* VIA_LINK_UDP: what binds a frame to this connection (vipd derives
     * both from the cluster key): the token every frame carries, and the
     * key of the frames' MACs when frame_mac is set (vipd --frame-mac). */
    uint32_t frame_mac;
    uint64_t frame_token;
    uint8_t frame_key[32];
    struct via_chan_dir dir[2];
};
enum via_link_kind { VIA_LINK_SHM = 0, VIA_LINK_UDP = 1, VIA_LINK_OFI = 2 };
#define VIA_CHAN_MAGIC 0x56494143u /* "VIAC" */

/* ---- the NIC page: timing profile and modelled resources --------------------
 * One per NIC, created by vipd, mapped read-write by every session on that
 * NIC (their firmware reserves the NIC's resources here). vipd writes prof
 * once at start-up; scan_slots whenever VIs come and go. Times are
 * CLOCK_MONOTONIC nanoseconds. Costs are stored already converted to ns
 * (see lanai-fw/fw_profile.c for the units of the profile files).
 */
struct via_profile {
    char name[32];
    uint32_t paced;        /* 0: no costs, no pacing (native) */
    uint32_t hw_doorbell;  /* 1: doorbells reach the NIC directly; 0: linear scan */
    double lanai_mhz;
    double lanai_cpi;      /* LANai cycles per firmware instruction */
    double host_mhz;
    /* host costs, charged to the calling thread (spec-notes/timing-model.md) */
    double host_build_ns;  /* Build: the library's post path and its lock */
    double host_done_ns;   /* Done: taking a completion, its lock, the status line's miss */
    double mem_ns;         /* a host load that misses to memory */
    double pio_write_ns;   /* host -> NIC SRAM, per 32-bit word */
    double pio_read_ns;    /* NIC SRAM -> host, per 32-bit word */
    /* firmware steps */
    double poll_ns;        /* poll one doorbell pair (and the network, once) */
    double bell_ns, desc_ns, data_ns, xmit_ns, recv_ns, updt_ns;
    double ext_bell_ns;    /* extension firmware: a token's kind, every message */
    double ext_poll_ns;    /* extension firmware: each VI's third doorbell */
    /* host DMA */
    double dma_h2n_start_ns, dma_n2h_start_ns; /* one transaction's start */
    double copyback_ns;    /* a DMA read of a line dirty in the host's cache */
    double h2n_ns_per_byte, n2h_ns_per_byte;
    double link_ns_per_byte;
    double switch_ns;
    double wire_header;    /* bytes on the wire per packet besides payload */
    double sram_bytes;
    /* virtual time: the program's computation is its CPU time here times
     * this (1: the emulated host computes as fast as this machine) */
    double host_cpu_scale;
};
static_assert(sizeof(struct via_profile) == 32 + 8 + 27 * 8, "profile");

/* How a paced NIC's model time passes (vipd --clock, VIP_CLOCK): waited
 * out on CLOCK_MONOTONIC, or virtual (spec-notes/virtual-time.md). */
enum via_clock { VIA_CLOCK_REAL = 0, VIA_CLOCK_VIRTUAL = 1 };

struct via_nic_page {
    struct via_profile prof;
    /* Only what every process on the NIC must share: the modelled
     * resources' busy times, claimed without a lock (fw_sched.c). */
    _Alignas(64) uint32_t pad0[4];
    _Atomic uint64_t lanai_busy_until;    /* LANai processor */
    _Atomic uint64_t lanai_idle_since;
    _Atomic uint64_t hdma_busy_until;     /* host DMA engine and I/O bus */
    _Atomic uint64_t nsend_busy_until;    /* net send DMA and outbound link */
    _Atomic uint64_t nrecv_busy_until;    /* net receive DMA */
    _Atomic uint64_t stage_ns[VIA_ST_NSTAGES_MAX]; /* modelled time per stage */
    _Atomic uint64_t stage_cnt[VIA_ST_NSTAGES_MAX];
    uint8_t pad[VIA_PAGE_SIZE - 256 - 56 - 2 * 8 * 16];
};
static_assert(sizeof(struct via_profile) <= 256, "the profile fits before the lock's line");
static_assert(sizeof(struct via_nic_page) == VIA_PAGE_SIZE, "NIC page is one page");

/* ---- control messages (Unix socket, vipd <-> client) -------------------------- */
#define VIA_SOCK_NAME "vipd.sock"

enum via_ctl_op {
    VIA_CTL_HELLO = 1,      /* open a session on a NIC */
    VIA_CTL_ATTACH,         /* side socket for a blocking call of a session */
    VIA_CTL_QUERY_NIC,
    VIA_CTL_CREATE_PTAG, VIA_CTL_DESTROY_PTAG,
    VIA_CTL_REG_MEM, VIA_CTL_DEREG_MEM, VIA_CTL_SET_MEM,
    VIA_CTL_CREATE_VI, VIA_CTL_DESTROY_VI, VIA_CTL_SET_VI,
    VIA_CTL_CREATE_CQ, VIA_CTL_DESTROY_CQ,
    VIA_CTL_CONN_WAIT, VIA_CTL_CONN_ACCEPT, VIA_CTL_CONN_REJECT,
    VIA_CTL_CONN_REQUEST, VIA_CTL_DISCONNECT,
    VIA_CTL_VI_ERROR,       /* the NIC put a VI in error: break its channel */
    VIA_CTL_NS_LOOKUP,
    /* management (vipctl) */
    VIA_CTL_LIST_NICS, VIA_CTL_LIST_VIS, VIA_CTL_LIST_MEM,
    VIA_CTL_TRACE, VIA_CTL_SHUTDOWN, VIA_CTL_PING,
    VIA_CTL_GET_PROFILE,    /* a NIC's profile, VI bound and modelled stage totals */
    VIA_CTL_RESIZE_CQ,      /* a replacement ring for a CQ (prepare, commit, abort) */
    /* peer-to-peer connections (kdriver/kd_peer.c) */
    VIA_CTL_PEER_REQUEST,   /* post a request (never blocks) */
    VIA_CTL_PEER_DONE,      /* its outcome, or VIP_NOT_DONE */
    VIA_CTL_PEER_WAIT,      /* its outcome (deferred reply, side socket) */
    VIA_CTL_NS_REVERSE,     /* a name for a NIC address */
    VIA_CTL_SMI_NICS,       /* the NIC addresses the switch reaches (autodiscovery) */
    VIA_CTL_NET_STATS,      /* the UDP links' counters and the other hosts (vipctl net) */
    VIA_CTL_NOPS
};

struct via_ctl_hdr {
    uint32_t op;
    uint32_t len; /* bytes of body that follow */
    uint64_t cookie;
};
static_assert(sizeof(struct via_ctl_hdr) == 16, "ctl header");

struct via_ctl_reply_hdr {
    int32_t status; /* a VIP_RETURN */
    uint32_t len;
    uint64_t cookie;
    char msg[112]; /* human-readable reason when status != VIP_SUCCESS */
};
static_assert(sizeof(struct via_ctl_reply_hdr) == 128, "ctl reply header");

/* Bodies. Requests first, replies (_r) after. fds ride in SCM_RIGHTS. */
struct via_net_addr {
    uint8_t host[VIA_NIC_ADDR_LEN]; /* host id (4, big-endian) + nic (2) */
    uint16_t discrim_len;
    uint8_t discrim[VIA_MAX_DISCRIM];
};
static_assert(sizeof(struct via_net_addr) == 24, "net addr");

struct via_vi_attr {
    uint32_t reliability;
    uint32_t max_transfer;
    uint32_t ptag; /* 0 = none */
    uint32_t rdma_write;
    uint32_t rdma_read;
    uint32_t pad;
};
static_assert(sizeof(struct via_vi_attr) == 24, "vi attr");

struct via_ctl_hello {
    uint32_t abi;
    uint32_t nic; /* index */
    uint32_t pid;
    uint32_t flags; /* VIA_HELLO_*; other bits are refused */
    char progname[32];
};
/* Opened as /dev/via_ethN: NIC N only if the host has network interface N. */
#define VIA_HELLO_HOST_IF 1u
struct via_ctl_hello_r { /* fds: tpt, event page, status page */
    uint32_t session_id;
    uint32_t nic;
    uint8_t nic_addr[VIA_NIC_ADDR_LEN];
    uint16_t pad;
    uint32_t nnics;
    char profile[32];
    /* The NIC's profile as vipd loaded it. The NIC models its costs from
     * this copy, never from the shared NIC page, which every process on
     * the NIC may write. */
    struct via_profile prof;
    /* The hosts file vipd read (its real path, cut to fit), or "" for
     * none: a program's VIPD_HOSTS must name the same (vipl_env.c). */
    char hosts[256];
};
struct via_ctl_attach {
    uint32_t session_id;
    uint32_t pad;
};

struct via_ctl_ptag_r { uint32_t ptag; uint32_t pad; };
struct via_ctl_ptag { uint32_t ptag; uint32_t pad; };

struct via_ctl_reg_mem {
    uint64_t va;
    uint64_t len;
    uint32_t ptag;
    uint32_t flags; /* VIA_TPT_* */
};
struct via_ctl_reg_mem_r { uint32_t handle; uint32_t pad; };
struct via_ctl_dereg_mem { uint64_t va; uint32_t handle; uint32_t pad; };
struct via_ctl_set_mem { uint64_t va; uint32_t handle; uint32_t ptag; uint32_t flags; uint32_t pad; };

struct via_ctl_create_vi {
    struct via_vi_attr attr;
    uint32_t send_cq; /* CQ id + 1, 0 = none */
    uint32_t recv_cq;
};
struct via_ctl_create_vi_r { uint32_t vi_id; uint32_t pad; }; /* fd: doorbell page */
struct via_ctl_vi { uint32_t vi_id; uint32_t pad; };
struct via_ctl_set_vi { uint32_t vi_id; uint32_t pad; struct via_vi_attr attr; };

struct via_ctl_create_cq { uint32_t entries; uint32_t pad; };
struct via_ctl_create_cq_r { uint32_t cq_id; uint32_t nslots; }; /* fd: cq ring */
struct via_ctl_cq { uint32_t cq_id; uint32_t pad; };
/* VipResizeCQ in two steps, so that vipd's record of the ring is the one
 * the process uses: PREPARE makes a ring of `entries` (reply: create_cq_r
 * and its fd) held aside; once the NIC has switched to it, COMMIT makes it
 * the CQ's ring (the old one is freed); if the NIC refused, ABORT drops it. */
enum via_cq_resize_step { VIA_CQ_RESIZE_PREPARE, VIA_CQ_RESIZE_COMMIT, VIA_CQ_RESIZE_ABORT };
struct via_ctl_resize_cq { uint32_t cq_id; uint32_t entries; uint32_t step; uint32_t pad; };

struct via_ctl_conn_wait {
    struct via_net_addr local;
    uint32_t timeout_ms; /* 0xFFFFFFFF = infinite */
    uint32_t pad;
};
struct via_ctl_conn_wait_r {
    uint32_t conn_id;
    uint32_t pad;
    struct via_net_addr remote;
    struct via_vi_attr remote_attr;
};
struct via_ctl_conn_accept { uint32_t conn_id; uint32_t vi_id; };
/* accept reply and request reply carry the channel fd and the peer's event page fd */
struct via_ctl_conn_done_r {
    uint32_t conn_id;
    uint32_t side;      /* 0 requester, 1 acceptor */
    uint32_t peer_vi;
    uint32_t pad;
    struct via_vi_attr remote_attr;
};
struct via_ctl_conn_reject { uint32_t conn_id; uint32_t pad; };
struct via_ctl_conn_request {
    uint32_t vi_id;
    uint32_t timeout_ms;
    struct via_net_addr local;
    struct via_net_addr remote;
};
struct via_ctl_vi_error { uint32_t vi_id; uint32_t code; }; /* code: VIP_ERROR_CODE */

/* NS_LOOKUP: the index-th address of a name (VipNSGetHostByName's NameIndex). */
struct via_ctl_ns_lookup { char name[64]; uint32_t index; uint32_t pad; };
struct via_ctl_ns_lookup_r { uint8_t nic_addr[VIA_NIC_ADDR_LEN]; uint16_t pad; };
struct via_ctl_ns_reverse { uint8_t nic_addr[VIA_NIC_ADDR_LEN]; uint16_t pad; };
struct via_ctl_ns_reverse_r { char name[96]; };

/* SMI_NICS reply: every NIC of this vipd but the asking session's own. */
struct via_ctl_smi_nics_r {
    uint32_t count;
    uint32_t pad;
    uint8_t nic_addr[VIA_MAX_NICS][8]; /* VIA_NIC_ADDR_LEN bytes used */
};

/* PEER_REQUEST takes a struct via_ctl_conn_request; PEER_DONE and PEER_WAIT
 * a struct via_ctl_vi and answer like CONN_REQUEST (struct
 * via_ctl_conn_done_r, fds: channel, peer's event page). */

struct via_ctl_query_nic_r {
    char name[64];
    uint8_t nic_addr[VIA_NIC_ADDR_LEN];
    uint16_t pad;
    uint32_t max_vi, max_cq, max_cq_entries, max_ptags;
    uint32_t max_tpt, max_segs, max_transfer, mtu, queue_depth;
    uint32_t pad2;
    uint64_t max_register_bytes;
    char profile[32];
};

struct via_ctl_trace { uint32_t on; uint32_t pad; };

struct via_ctl_get_profile { uint32_t nic; uint32_t pad; };
struct via_ctl_profile_r {
    struct via_profile prof;
    uint32_t max_vi;
    uint32_t scan_slots;
    uint64_t stage_ns[VIA_ST_NSTAGES_MAX];  /* modelled time charged per stage */
    uint64_t stage_cnt[VIA_ST_NSTAGES_MAX]; /* since the NIC's last idle reset */
};

/* Management replies: fixed records, the reply body is an array. */
struct via_nic_info {
    char name[16];
    char profile[32];
    uint32_t index;
    uint32_t sessions, vis, regions;
    uint32_t conns;
    uint8_t nic_addr[VIA_NIC_ADDR_LEN];
    uint16_t pad;
    uint64_t tx_msgs, tx_bytes, rx_msgs, rx_bytes, rx_dropped, desc_errors;
    uint64_t rx_refused[VIA_RXC_N]; /* rx_dropped by reason (enum via_rx_check) */
};
struct via_vi_info {
    uint32_t nic, vi_id, owner_pid, state;
    uint32_t reliability, peer_nic, peer_vi, conn_id;
    uint32_t sq_depth, rq_depth; /* posted minus completed */
    uint64_t tx_msgs, rx_msgs, tx_bytes, rx_bytes, rx_dropped, desc_errors;
    char progname[32];
};
struct via_mem_info {
    uint32_t nic, owner_pid, handle, ptag;
    uint64_t va, len;
    uint32_t flags, pad;
};

/* Largest reply body vipctl accepts in one message. */
#define VIA_CTL_MAX_BODY (1u << 20)

/* The wire header check word: a cheap hash over the header's fixed fields
 * (all but crc, lap and arrive_ns). Both NICs compute it for every packet,
 * so it is four independent lanes of three words each, combined at the
 * end: a chain of four multiply rounds instead of twelve. Each lane is a
 * bijection of its words, so a change of any one field changes the word. */
static inline uint32_t via_wire_mix(uint32_t x)
{
    x *= 0x85EBCA6Bu;
    return x ^ (x >> 13);
}
static inline uint32_t via_wire_check(const struct via_wire_hdr *h)
{
    const uint32_t w[] = {(uint32_t)h->src_nic << 16 | h->dst_nic, h->dst_vi, h->conn_id,
                          h->msg_seq, h->msg_len, h->frag_off, h->frag_len, h->imm,
                          h->rkey, h->ack_seq, (uint32_t)h->raddr,
                          (uint32_t)(h->raddr >> 32)};
    uint32_t a = 0x9E3779B9u ^ ((uint32_t)h->version << 24 | (uint32_t)h->type << 16 |
                                (uint32_t)h->flags << 8),
             b = 0x7F4A7C15u, c = 0xC2B2AE35u, d = 0x27D4EB2Fu;
    for (unsigned i = 0; i < sizeof w / sizeof w[0]; i += 4) {
        a = via_wire_mix(a ^ w[i]);
        b = via_wire_mix(b ^ w[i + 1]);
        c = via_wire_mix(c ^ w[i + 2]);
        d = via_wire_mix(d ^ w[i + 3]);
    }
    /* Rotations keep the lanes apart before they are folded together. */
    return via_wire_mix(a ^ (b << 8 | b >> 24) ^ (c << 16 | c >> 16) ^ (d << 24 | d >> 8));
}

#endif /* VIA_ABI_H */

/*
 * fw.h - the NIC firmware: internal interface.
 *
 * The firmware walks doorbell -> descriptor -> data for every message, in
 * the stages of the Berkeley VIA paper (Figures 3 and 4):
 *   send:    T2 Bell, T3 XDes, T4 XData, T5 Transmit, T6 Updt   (fw_tx.c)
 *   receive: R2 Bell, R3 Receive, R4 XDes, R5 XData, R6 Updt     (fw_rx.c,
 *            fw_resp.c)
 * and by role, as rxe: the requester (fw_tx.c), the responder and the
 * receive checks (fw_resp.c, fw_rx_check.c), the completer (fw_comp.c),
 * the VI's life cycle (fw_vi.c); fw_vi carries each role's state as its
 * own sub-struct.
 * T1 Ring and R1 Ring (and Build) are the host's, in vipl/.
 *
 * It reaches host memory only through fw_hal.h (DMA, stores, clock; all
 * static inline, so the fast path has no indirect call), and the link
 * only through struct fw_link (fw_link.h). The host library sees none of
 * this: its interface is nic.h.
 *
 * Locking: every fw_vi is driven under its own lock (fw_vi.lock), taken by
 * the progress entry points of fw_progress.c whichever thread lends the NIC its
 * CPU; a CQ has its own lock; the VI table of a NIC has nic->lock, and a
 * VI found there is held by a reference until its visitor is done.
 */
#ifndef FW_H
#define FW_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fw_link.h"
#include "fw_lock.h"
#include "fw_model.h"
#include "nic.h"
#include "via_abi.h"

/* ---- send pipeline state machine (one message in flight per VI) ------- */
enum fw_tx_state {
    FW_TX_IDLE,     /* nothing taken: T2 Bell takes the next token */
    FW_TX_XDES,     /* T3: fetch and validate the descriptor */
    FW_TX_XDATA,    /* T4+T5: gather one fragment into the link, transmit */
    FW_TX_UPDT,     /* T6: write status; reliable reception waits for the ack */
    FW_TX_NSTATES
};
extern const char *const fw_tx_state_name[FW_TX_NSTATES];
/* What a state's helper returns when the message must wait (fw_tx.c, and
 * the completer's fw_comp_wait), instead of the next state. */
#define FW_TX_BLOCKED FW_TX_NSTATES

/* ---- receive pipeline state (per VI, across fragments) ------------------ */
enum fw_rx_state {
    FW_RX_IDLE,     /* between messages: R3 waits for a FIRST fragment */
    FW_RX_XDATA,    /* R5: fragments of an accepted message are scattered */
    FW_RX_DISCARD,  /* fragments of a refused message are dropped */
    FW_RX_PLACE,    /* RDMA write: fragments placed at the checked target */
    FW_RX_NSTATES
};
extern const char *const fw_rx_state_name[FW_RX_NSTATES];

/* A descriptor as the NIC staged it: control segment + segments (T3/R4). */
struct fw_xdes {
    uint64_t va;            /* host address of the descriptor */
    uint32_t mem_handle;
    uint16_t segcount;      /* local data segments (the address segment not counted) */
    uint16_t control;
    uint16_t op;            /* VIP_CONTROL_OP_*: send, RDMA write or RDMA read */
    uint32_t rkey;          /* RDMA: the address segment (DS[0]): the remote */
    uint64_t raddr;         /* region's memory handle and address */
    uint32_t imm;
    uint32_t total;         /* sum of the data segment lengths */
    uint32_t status;        /* error bits found so far */
    struct {
        uint64_t va;
        uint32_t len;
    } seg[VIA_MAX_SEGS];
};

/* A NIC-side work queue: tokens taken from the doorbell ring (T2/R2),
 * with the time each was rung (paced profiles find it by scanning). */
struct fw_wq {
    struct via_db_token tok[VIA_QUEUE_DEPTH];
    uint64_t ring_ns[VIA_QUEUE_DEPTH];
    uint32_t head, tail;    /* free-running; count = tail - head */
};

/*
 * A completion queue. The ring is host memory the NIC appends to; the host
 * may replace it by a larger or smaller one at any time (VipResizeCQ), so
 * the ring is touched only under the lock. A poll that finds nothing must
 * cost no lock: it compares the mirrors of the ring's tail and head kept
 * here, in the NIC's own memory, which outlives every ring.
 */
struct fw_cq {
    pthread_mutex_t lock;
    struct via_cq_ring *ring;        /* under lock */
    uint32_t nslots;                 /* of ring; under lock */
    struct fw_nic *nic;
    _Alignas(64) _Atomic uint64_t posted; /* = ring->tail, stored after it (NIC) */
    _Atomic uint32_t overflow;            /* = ring->overflow */
    _Alignas(64) _Atomic uint64_t taken;  /* = ring->head, stored after it (host) */
};

struct fw_nic;

/* The message the requester has in flight (messages on a VI go one at a
 * time): how it reached the NIC and how far it has gone. T3 sets it up
 * for each message. */
struct fw_tx_msg {
    enum fw_ext_mode mode;  /* how it reached the NIC (fw_token.c's kinds) */
    uint32_t off;           /* bytes transmitted */
    bool rdv;               /* it went as a SEND_RTS or WRITE_RTS (fw_cma.c) */
    uint32_t rd_got;        /* an RDMA read: bytes of the response placed */
    uint64_t span_start;    /* paced: model time T4 begins */
    uint64_t span_ns;       /* paced: T4 + T5 of the whole message */
    uint64_t release;       /* paced: model time T6 ends */
};

/* The requester: the send queue, its state machine, the descriptor in
 * flight. */
struct fw_req {
    struct fw_wq sq;
    enum fw_tx_state state;
    struct fw_xdes txd;     /* the NIC's copy of the descriptor in flight */
    struct fw_tx_msg msg;
    uint32_t seq;           /* last message sequence number used */
};

/* The completer: the peer's answers to our messages. */
struct fw_comp {
    uint32_t acked;         /* last message the peer placed (its ACKs, or the
                               last fragment of an RDMA read's response) */
    bool nak;               /* the peer refused message acked + 1 (NAK) */
    uint32_t nak_why;       /* the enum via_nak_reason it gave */
};

/* The receive side: the packet loop's place in the link, and the
 * responder's state for the peer's requests. */
struct fw_resp {
    struct fw_wq rq;
    enum fw_rx_state state;
    struct fw_xdes rxd;     /* the receive descriptor being filled */
    uint32_t seq;           /* sequence of the message being received */
    uint32_t got;           /* bytes placed so far */
    uint8_t op;             /* opcode of the message in progress (its later fragments') */
    uint32_t ack_owed;      /* reliable reception: last message placed, not yet acked */
    uint32_t nak_owed;      /* a refused message the peer is yet to hear of */
    uint32_t nak_reason;    /* enum via_nak_reason of it */
    struct {                /* the RDMA write being placed: its checked target */
        uint32_t rkey, len;
        uint64_t raddr;
    } wr;
    /* An RDMA read being answered: the checked source range, sent back as
     * READ_RESP fragments when the link has room (fw_resp_respond). */
    struct {
        bool active;
        uint32_t seq, rkey, len, off;
        uint64_t raddr;
        uint64_t arrive_ns; /* paced: modelled arrival of the whole response */
    } rd;
    uint64_t pkts;          /* packets taken off the link */
    uint64_t sched_for;     /* paced: pkts + 1 of the packet scheduled */
    uint64_t release;       /* paced: model time its last stage ends */
};

struct fw_vi {
    struct fw_lock lock;        /* whoever runs this VI's stages holds it */
    _Atomic uint32_t refs;      /* the table's, plus one per visitor */
    struct fw_nic *nic;
    uint32_t vi_id;
    uint16_t gen;           /* incarnation of this id on the NIC (CQ entries carry it) */
    uint32_t ptag;
    uint32_t reliability;   /* VIP_SERVICE_* */
    uint32_t max_transfer;
    bool rdma_write, rdma_read; /* the VI's RDMA enables (responder checks) */
    struct via_vi_page *db; /* doorbell page */
    struct fw_cq *scq, *rcq;

    /* connection */
    struct via_chan *chan;
    struct fw_link link;    /* the path to the peer NIC */
    int side;               /* 0 requester, 1 acceptor */
    uint32_t peer_vi;
    struct via_event_page *peer_ev;
    _Atomic int peer_pidfd; /* the peer process (fw_live.c), -1 if not watched */
    /* One copy for large SENDs (fw_cma.c): the receiver pulls the bytes
     * from the sender's memory. Set at connect, cleared on a refusal. */
    bool cma;               /* this connection may use the rendezvous */
    int cma_pid;            /* the peer process in our pid namespace (vipd's pidfd) */
    bool wake_peer;         /* paced: a packet was published; the peer's wake is owed */
    bool owe_peer, owe_local; /* wakes owed at the end of this turn (fw_vi_wakes) */
    /* For a host's poll without the lock (nic_vi_progress): the last run
     * left nothing to do but wait for the link, and what to look at. */
    _Atomic bool quiet;
    _Atomic uint32_t host_polls; /* bumped by host threads polling this VI */
    _Atomic uint64_t busy_ns;    /* a visit last moved it (fw_progress.c's arrival bits) */
    uint32_t thread_seen;        /* the NIC thread's last look at host_polls */
    _Atomic bool host_in;        /* a host thread runs this VI under its lock (its poll, a post) */
    _Atomic(struct via_chan *) poll_chan;
    _Atomic(struct via_chan_dir *) poll_dir;
    /* Our end of a shared-memory link, whose wake word (rx_wake) the host's
     * waits on this VI sleep on (nic_vi_wake_dir); NULL otherwise. */
    _Atomic(struct via_chan_dir *) wake_dir;
    /* Virtual time: threads asleep on the peer's promise in that direction
     * (nic_vt_hold); a disconnect wakes them and waits for them to leave. */
    _Atomic uint32_t vt_holders;

    /* host side of the doorbell: when each slot was rung (T1) */
    uint64_t db_ring_ns[VIA_DB_SLOTS];
    uint64_t held;          /* earliest held effect found by this progress, 0 = none */

    struct fw_req req;      /* the requester (fw_tx.c) */
    struct fw_comp comp;    /* the completer (fw_comp.c) */
    struct fw_resp resp;    /* the receive side: loop (fw_rx.c) and responder (fw_resp.c) */

    /* The NIC's own view of the error state. The doorbell page's state word
     * is a mirror for vipctl, which vipd also writes; never trust it here. */
    bool in_error;
    /* asynchronous error waiting to be taken by the host library */
    _Atomic bool err_pending; /* read without the lock as a hint (nic_vi_take_error) */
    bool err_told;          /* the agent must hear of it (first error that broke the link) */
    bool err_reported;
    bool err_orderly;       /* CONN_LOST because the peer disconnected: not an error */
    uint32_t err_code;      /* VIP_ERROR_CODE */
    uint64_t err_desc;
};

struct fw_nic {
    uint16_t nic_index;
    const struct via_tpt_entry *tpt; /* read-only view of the TPT */
    struct via_event_page *ev;       /* our event page */
    struct via_status_page *st;      /* counters and trace */
    struct via_nic_page *np;         /* profile and modelled resources */
    const struct via_profile *prof;  /* &prof_own */
    struct via_profile prof_own;     /* ours: the shared page's copy is anyone's to edit */
    bool paced;
    bool cma_on;                     /* VIP_CMA=1: the rendezvous is allowed */
    /* The word a stage looks at to know whether to trace: the status page's
     * switch, or (paced: fw_account traces instead) a word that stays 0. */
    const _Atomic uint32_t *stage_trace;

    /* The VI table, and which VIs the NIC must visit besides those whose
     * arrival bit a peer set (a held effect, a stalled send, a wake owed). */
    pthread_mutex_t lock;
    struct fw_vi *vis[VIA_MAX_VI];
    uint16_t vi_gen;                 /* incarnations handed out so far */
    _Atomic uint64_t work[VIA_MAX_VI / 64];
    _Atomic uint64_t held[VIA_MAX_VI / 64];
    _Atomic uint64_t held_min;       /* earliest held effect of those, or UINT64_MAX */
    _Atomic uint32_t vt_released;    /* virtual time: effects released so far */
    _Atomic uint32_t vt_readers;     /* threads walking the linked VIs' channels (fw_vclock.c) */

    /* The NIC's own thread (fw_thread.c). */
    _Atomic uint32_t thread_state;   /* enum fw_thread_state */
    bool own_thread;
    bool thread_started;
    pthread_t thread;
    _Atomic uint32_t stop;
    _Atomic uint32_t host_polls;     /* bumped by host threads that progress */
    _Atomic uint32_t host_polls_all; /* ... all VIs at once (CQ polls) */
    _Atomic uint32_t doze;           /* futex word the thread dozes on */

    /* The arrival bits are hints (any peer may clear them): the VIs with a
     * link, which fw_progress visits every FW_SWEEP_NS whatever the bits. */
    _Atomic uint64_t linked[VIA_MAX_VI / 64];
    _Atomic uint64_t sweep_next;

    /* Liveness of local peers (fw_live.c). */
    _Atomic uint32_t nlive;          /* VIs whose peer process is watched */
    _Atomic uint64_t live_next;      /* earliest time of the next look */

    _Atomic(struct fw_waker *) waker; /* network links: watches them (fw_net.c) */

    /* Paced: what this process claimed of the shared resources (fw_sched.c),
     * private, so its own backlog is believed whole, and the LANai time of
     * the largest transaction one VI may have claimed (0: not known yet). */
    _Atomic uint64_t own_until;
    uint64_t vi_worst_ns;
    _Atomic uint32_t nvis_own;       /* VIs of this NIC handle (nic_vi_create) */

};

/* The VI of an id with a reference (NULL if none), and its release. */
struct fw_vi *fw_vi_get(struct fw_nic *nic, unsigned id);
void fw_vi_put(struct fw_vi *vi);

/* ---- liveness of local peers (fw_vi.c, fw_live.c; vi->lock held) ------------ */
/* Watch the peer process of a new connection (pidfd < 0: nothing to watch). */
void fw_live_watch(struct fw_vi *vi, int pidfd);
/* The connection ends: stop watching. */
void fw_live_unwatch(struct fw_vi *vi);

/* ---- one copy by cross-memory attach (fw_cma.c) -------------------------------- */
/* Messages from this size on go by rendezvous. Measured (spec-notes/cma.md):
 * below it one pull at a time per VI loses to the two pipelined ring copies
 * (64 KiB ping-pong, 128 KiB streams). */
#define FW_CMA_MIN (256u << 10)
/* Read VIP_CMA once for the NIC (1: on; otherwise off). */
void fw_cma_init(struct fw_nic *nic);
/* At connect (before fw_live_watch takes the pidfd): may this connection
 * use the rendezvous? Native profile, shared-memory link, a reliable
 * level, a peer process vipd named. */
void fw_cma_connect(struct fw_vi *vi, int peer_pidfd);
/* The sender: does this send or RDMA write go as a SEND_RTS / WRITE_RTS? */
bool fw_cma_wanted(const struct fw_vi *vi, const struct fw_xdes *d);
/* The sender: the RTS payload of d's gather list into out (room for
 * VIA_MAX_SEGS); returns its bytes. */
uint32_t fw_cma_table(const struct fw_xdes *d, struct via_rts_seg *out);
/* The receiver: copy a SEND_RTS's table out of the link and check it
 * against its header; false: no correct NIC sent it. */
bool fw_cma_table_take(const struct via_wire_hdr *h, const uint8_t *payload,
                       struct via_rts_seg *out, unsigned *n);
/* The receiver: move the message (total bytes) from the sender's segments
 * into the checked scatter list of dst. 0, EPERM (the kernel refuses:
 * fall back to the ring), or another errno (the source cannot be read). */
int fw_cma_pull(struct fw_vi *vi, const struct via_rts_seg *src, unsigned n, uint32_t total,
                const struct fw_xdes *dst);

/* ---- per-VI pipelines (called with vi->lock held) ------------------------- */
void fw_vi_init(struct fw_vi *vi, struct fw_nic *nic, uint32_t vi_id, struct via_vi_page *db);
bool fw_vi_connect(struct fw_vi *vi, struct via_chan *chan, int side, uint32_t peer_vi,
                   struct via_event_page *peer_ev, int sock);
/* The link gave up on the peer (a network link's transport): the message
 * in flight completes with the transport error, the VI goes to error. */
void fw_link_failed(struct fw_vi *vi);
/* Local disconnect or destroy: flush every queued descriptor, detach. */
void fw_vi_disconnect(struct fw_vi *vi);

/* Both pipelines of a VI as far as they go (fw_progress.c); may_wake: the
 * caller may pay for a wake owed to the peer. */
void fw_vi_run(struct fw_vi *vi, bool may_wake);
/* Only the send pipeline (a post's turn). */
void fw_vi_run_tx(struct fw_vi *vi);
/* Run the send pipeline as far as it can go; true if work remains. */
bool fw_tx_progress(struct fw_vi *vi);
/* R2: take receive doorbells; R3-R6: drain arrived packets. */
void fw_rx_progress(struct fw_vi *vi);
/* Cheap check used by spinning waiters: may fw_rx_progress find work? */
bool fw_rx_pending(const struct fw_vi *vi);
/* Notice a closed/broken channel and move the VI to the error state. */
void fw_link_check(struct fw_vi *vi);

/* ---- stage helpers shared by the send and receive sides ---------------------- */
/* A packet header of this VI's connection: version, type, and the
 * addressing every packet the VI sends carries (our NIC, the peer's NIC
 * and VI, the connection); the caller adds what is the packet's own. The
 * one place a header is begun (fw_tx.c: messages and RTS; fw_resp.c: ACK,
 * NAK, read responses). */
static inline struct via_wire_hdr fw_wire_hdr(const struct fw_vi *vi, uint8_t type)
{
    return (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = type,
                                 .src_nic = vi->nic->nic_index,
                                 .dst_nic = vi->chan->nic[1 - vi->side],
                                 .dst_vi = vi->peer_vi, .conn_id = vi->chan->conn_id};
}

/* One token into the NIC's work queue (room checked by the caller). */
static inline void wq_put(struct fw_wq *wq, const struct via_db_token *tok, uint64_t ring_ns)
{
    wq->tok[wq->tail % VIA_QUEUE_DEPTH] = *tok;
    wq->ring_ns[wq->tail % VIA_QUEUE_DEPTH] = ring_ns;
    wq->tail++;
}

/* T2/R2 Bell: move tokens from the doorbell ring into the NIC work queue;
 * ring_ns (may be NULL) gives the time each doorbell slot was rung. The
 * look at an empty ring (every turn has one) is inline. */
uint32_t fw_bell_take_rung(struct via_db_queue *q, struct fw_wq *wq, const uint64_t *ring_ns);
static inline uint32_t fw_bell_take(struct via_db_queue *q, struct fw_wq *wq,
                                    const uint64_t *ring_ns)
{
    if (atomic_load_explicit(&q->prod, memory_order_relaxed) ==
        atomic_load_explicit(&q->cons, memory_order_relaxed))
        return 0;
    return fw_bell_take_rung(q, wq, ring_ns);
}
/* T3/R4 XDes: fetch the descriptor named by a token and validate it. */
void fw_xdes_fetch(struct fw_vi *vi, const struct via_db_token *tok, bool recv,
                   struct fw_xdes *d);

/* Doorbell token kinds (fw_token.c): how T3 stages what a token names, and
 * what the NIC does once the message has left (T6). Indexed by kind. */
struct fw_token_kind {
    const char *name;
    enum fw_ext_mode mode;
    void (*xdes)(struct fw_vi *vi, const struct via_db_token *tok, struct fw_xdes *d);
    /* checked address its completion goes to when it is flushed, 0 = none */
    uint64_t (*status_va)(const struct fw_vi *vi, const struct via_db_token *tok);
    void (*sent)(struct fw_vi *vi, const struct via_db_token *tok); /* may be NULL */
};
/* The kind of a token, or NULL for one no NIC knows. */
const struct fw_token_kind *fw_token_kind(const struct via_db_token *tok);
/* T4/R5 data movement: copy `len` bytes at message offset `off` between NIC
 * staging and the descriptor's segments: scatter to the host, or gather
 * from it (into a link's packet: fw_link_dma says how). */
void fw_xdata_copy_segs(const struct fw_xdes *d, uint32_t off, uint8_t *nic, uint32_t len,
                        enum hal_dma dir);
/* One piece of a segment, either way. */
static inline void fw_seg_copy(uint64_t host_va, uint8_t *nic, uint32_t len, enum hal_dma dir)
{
    if (dir == HAL_DMA_TO_HOST)
        hal_dma_to_host(host_va, nic, len);
    else
        hal_dma_gather(nic, host_va, len, dir);
}
/* The usual case, one segment holding the whole range, is one copy and
 * inline (a small message's copy is then a few loads and stores, no call);
 * a range across segments goes round them out of line. */
static inline void fw_xdata_copy(const struct fw_xdes *d, uint32_t off, uint8_t *nic,
                                 uint32_t len, enum hal_dma dir)
{
    if (d->segcount == 1 && len <= d->seg[0].len && off <= d->seg[0].len - len)
        fw_seg_copy(d->seg[0].va + off, nic, len, dir);
    else
        fw_xdata_copy_segs(d, off, nic, len, dir);
}
/* TPT check of one host range; returns 0 or VIP_STATUS_PROTECTION_ERROR. */
uint32_t fw_tpt_check(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len);
/* The same, giving the entry that allowed it (NULL: refused), so that more
 * ranges under the same handle cost only fw_tpt_within (a TPT cache line
 * the NIC keeps for the descriptor it is staging). */
const struct via_tpt_entry *fw_tpt_find(const struct fw_vi *vi, uint32_t handle, uint64_t va,
                                        uint64_t len);
static inline bool fw_tpt_within(const struct via_tpt_entry *e, uint64_t va, uint64_t len)
{
    /* beyond the registered region (wrap-around included) */
    return va >= e->va && len <= e->len && va - e->va <= e->len - len;
}
/* The responder's check of an RDMA target range: the same, and the
 * region's enable bit `need` (VIA_TPT_RDMA_WRITE or _READ). */
uint32_t fw_tpt_check_rdma(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len,
                           uint32_t need);
/* T6/R6 Updt: write Length/Status (and ImmediateData), post to the CQ. */
void fw_updt(struct fw_vi *vi, const struct fw_xdes *d, bool recv, uint32_t status,
             uint32_t length);
/* The message in flight fails with status (no bytes sent): T6 for it,
 * and the send queue moves on. */
static inline void fw_req_fail(struct fw_vi *vi, uint32_t status)
{
    fw_updt(vi, &vi->req.txd, false, status, 0);
    vi->req.sq.head++;
    vi->req.state = FW_TX_IDLE;
}
/* Complete every queued descriptor of both queues with DESC_FLUSHED. */
void fw_flush(struct fw_vi *vi);
/* Error rules of the VI's reliability level (VIA 1.0 section 2.6). */
void fw_vi_error(struct fw_vi *vi, uint32_t code, uint64_t desc_va);
/* Set vi_id's arrival bit on an event page (UINT32_MAX: none) and wake a
 * sleeper of that page if one asked to be woken. */
void fw_notify(struct via_event_page *ev, uint32_t vi_id);
/* fw_notify of the peer's VI, and the wake word of its end of the link
 * (via_chan_dir.rx_wake), which its VI waits sleep on. */
void fw_notify_peer(struct fw_vi *vi);
/* Wake the host's waits asleep on a link end's word (fence (2) done); the
 * look for a sleeper, every turn's, is inline. */
void fw_wake_dir_sleepers(struct via_chan_dir *d);
static inline void fw_wake_dir(struct via_chan_dir *d)
{
    if (d && atomic_load_explicit(&d->rx_sleepers, memory_order_relaxed))
        fw_wake_dir_sleepers(d);
}
/* The asymmetric fence of the wake-up protocol (fw_updt.c): register this
 * process once (nic_create), and the waiter's side, after (a). */
void fw_asym_init(void);
void fw_sleep_fence(void);
/* Registered for membarrier within the process (fw_lock_barrier makes
 * every running thread of it execute a full barrier: the VI lock's bias,
 * fw_lock.h), and across processes (our event page's waiters pay for the
 * producers' fence, and clearing an arrival bit pays fw_bits_barrier). */
bool fw_asym_on(void);
bool fw_asym_global(void);
void fw_lock_barrier(void);
void fw_bits_barrier(void);
/* The wakes owed by this turn of the NIC (vi->lock held): called at the
 * end of every turn (fw_progress.c). */
void fw_vi_wakes(struct fw_vi *vi);
/* A packet for the peer is on the link: set its arrival bit now, and wake
 * it now (native) or leave the wake to the NIC's next turn (paced: the
 * host's post pays only Build + Ring). */
void fw_peer_published(struct fw_vi *vi);
/* Ask the NIC to visit this VI again (a held effect, a stalled send). */
void fw_want_visit(struct fw_vi *vi);

/* ---- paced profiles: the real-time scheduler (fw_sched.c) ---------------------- */
/* Claim the LANai for `dur` ns from the first moment >= ready it is free;
 * returns the start. A send's doorbell is found by the linear scan first. */
uint64_t fw_sched_send(struct fw_nic *nic, uint32_t vi_id, uint64_t ring_ns, uint64_t dur,
                       bool ext_fw);
uint64_t fw_sched_recv(struct fw_nic *nic, uint64_t arrive_ns, uint64_t dur);
/* How far past now (and past this process's own claims) a time read from
 * the NIC page or a peer's packet is believed: the model's worst case,
 * one largest transaction of each other VI on the NIC. */
uint64_t fw_sched_window_ns(struct fw_nic *nic);
/* Hold a host-visible effect until real time reaches t; false while held
 * (and vi->held then names the earliest such time). */
bool fw_release_due(struct fw_vi *vi, uint64_t t);
/* Add a stage's modelled time to the NIC's totals and the trace. */
void fw_account(struct fw_nic *nic, enum via_stage st, uint32_t vi, uint32_t seq,
                uint32_t len, double dur_ns);

/* ---- the NIC's own thread (fw_thread.c) ------------------------------------------ */
enum fw_thread_state {
    FW_THREAD_RUN,   /* visiting VIs with work */
    FW_THREAD_DOZE,  /* host threads progress; look again later, unannounced */
    FW_THREAD_SLEEP, /* nobody polls: announced, with a timer */
    FW_THREAD_DEEP,  /* long idle: announced, no timer */
    FW_THREAD_NSTATES
};
extern const char *const fw_thread_state_name[FW_THREAD_NSTATES];
void fw_thread_start(struct fw_nic *nic);
void fw_thread_stop(struct fw_nic *nic);
/* Work was left for the thread by a path that may not wait for it. */
void fw_thread_kick(struct fw_nic *nic);
/* One pass over the VIs with work (fw_progress.c); *did set if any moved.
 * left (the NIC thread's, NULL: none): skip (and flag again) a VI a host
 * thread polls or is in, and set *left when one was. */
uint64_t fw_progress(struct fw_nic *nic, bool *did, bool *left);

/* ---- trace ------------------------------------------------------------------ */
void fw_trace(struct fw_nic *nic, enum via_stage st, uint32_t vi, uint32_t seq, uint32_t len,
              uint32_t dur_ns);
static inline bool fw_tracing(const struct fw_nic *nic)
{
    return atomic_load_explicit(&nic->st->trace_on, memory_order_relaxed) != 0;
}
/* A stage's own trace record (native NICs; one load and a branch when off). */
#define FW_TRACE(nic, st, vi, seq, len)                                              \
    do {                                                                             \
        if (atomic_load_explicit((nic)->stage_trace, memory_order_relaxed))          \
            fw_trace((nic), (st), (vi), (seq), (len), 0);                            \
    } while (0)

/* Single-writer counter bump: no locked instruction on the fast path. */
static inline void fw_count(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

extern const char *const via_stage_name[VIA_ST_NSTAGES];

#endif

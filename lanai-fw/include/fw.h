/*
 * fw.h - the NIC firmware: internal interface.
 *
 * The firmware walks doorbell -> descriptor -> data for every message, in
 * the stages of the Berkeley VIA paper (Figures 3 and 4):
 *   send:    T2 Bell, T3 XDes, T4 XData, T5 Transmit, T6 Updt   (fw_tx.c)
 *   receive: R2 Bell, R3 Receive, R4 XDes, R5 XData, R6 Updt     (fw_rx.c)
 * T1 Ring and R1 Ring (and Build) are the host's, in vipl/.
 *
 * It reaches host memory only through fw_hal.h (DMA, clock, reporting), so
 * the same stage code can run on the host CPU of the owning process (the
 * `native` profile: hardware doorbells, no pacing) or, later, inside vipd
 * on the discrete-event scheduler of the paced profiles.
 *
 * Locking: every fw_vi is driven under its owner's lock (vipl holds
 * fw_vi.lock around every call into fw_vi_*); a CQ has its own lock.
 */
#ifndef FW_H
#define FW_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fw_model.h"
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

/* ---- receive pipeline state (per VI, across fragments) ------------------ */
enum fw_rx_state {
    FW_RX_IDLE,     /* between messages: R3 waits for a FIRST fragment */
    FW_RX_XDATA,    /* R5: fragments of an accepted message are scattered */
    FW_RX_DISCARD,  /* fragments of a refused message are dropped */
    FW_RX_NSTATES
};
extern const char *const fw_rx_state_name[FW_RX_NSTATES];

/* A descriptor as the NIC staged it: control segment + segments (T3/R4). */
struct fw_xdes {
    uint64_t va;            /* host address of the descriptor */
    uint32_t mem_handle;
    uint16_t segcount;
    uint16_t control;
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

struct fw_cq {
    pthread_mutex_t lock;
    struct via_cq_ring *ring;
};

struct fw_nic;

struct fw_vi {
    struct fw_nic *nic;
    uint32_t vi_id;
    uint32_t ptag;
    uint32_t reliability;   /* VIP_SERVICE_* */
    uint32_t max_transfer;
    struct via_vi_page *db; /* doorbell page */
    struct fw_cq *scq, *rcq;

    /* connection */
    struct via_chan *chan;
    int side;               /* 0 requester, 1 acceptor */
    uint32_t peer_vi;
    struct via_event_page *peer_ev;

    /* host side of the doorbell: when each slot was rung (T1) */
    uint64_t db_ring_ns[VIA_DB_SLOTS];

    /* send side */
    struct fw_wq sq;
    enum fw_ext_mode tx_mode;   /* how the current message reached the NIC */
    uint64_t tx_span_start;     /* paced: model time T4 begins */
    uint64_t tx_span_ns;        /* paced: T4 + T5 of the whole message */
    uint64_t tx_release;        /* paced: model time T6 ends */
    enum fw_tx_state tx;
    struct fw_xdes txd;
    uint32_t tx_off;        /* bytes of the current message transmitted */
    uint32_t tx_seq;        /* last message sequence number used */

    /* receive side */
    struct fw_wq rq;
    enum fw_rx_state rx;
    struct fw_xdes rxd;
    uint32_t rx_seq;        /* sequence of the message being received */
    uint32_t rx_got;        /* bytes placed so far */
    uint64_t rx_sched_for;      /* paced: tail offset + 1 of the scheduled packet */
    uint64_t rx_release;        /* paced: model time its last stage ends */

    /* short-message extensions chosen for this VI (extensions/) */
    enum fw_ext_mode ext_mode;
    uint32_t ext_max;
    uint32_t descless_next;     /* next SRAM slot the host fills */

    /* The NIC's own view of the error state. The doorbell page's state word
     * is a mirror for vipctl, which vipd also writes; never trust it here. */
    bool in_error;
    /* asynchronous error waiting to be reported by the host library */
    bool err_pending;
    bool err_reported;      /* vipd already told (VI_ERROR sent) */
    uint32_t err_code;      /* VIP_ERROR_CODE */
    uint64_t err_desc;
};

struct fw_nic {
    uint16_t nic_index;
    const struct via_tpt_entry *tpt; /* read-only view of the TPT */
    struct via_event_page *ev;       /* our event page */
    struct via_status_page *st;      /* counters and trace */
    struct via_nic_page *np;         /* profile and modelled resources */
    const struct via_profile *prof;  /* &np->prof */
    bool paced;
    uint64_t next_release;           /* paced: earliest held effect, 0 = none */
    void *host;                      /* owner context passed to the HAL */
};

/* ---- entry points used by the host library -------------------------------- */
void fw_vi_init(struct fw_vi *vi, struct fw_nic *nic, uint32_t vi_id, struct via_vi_page *db);
void fw_vi_connect(struct fw_vi *vi, struct via_chan *chan, int side, uint32_t peer_vi,
                   struct via_event_page *peer_ev);
/* Local disconnect or destroy: flush every queued descriptor, detach. */
void fw_vi_disconnect(struct fw_vi *vi);

/* Hardware doorbell: the NIC is pointed at this VI's send queue (native). */
void fw_tx_doorbell(struct fw_vi *vi);
/* Run the send pipeline as far as it can go; true if work remains. */
bool fw_tx_progress(struct fw_vi *vi);
/* R2: take receive doorbells; R3-R6: drain arrived packets. */
void fw_rx_progress(struct fw_vi *vi);
/* Cheap check used by spinning waiters: may fw_rx_progress find work? */
bool fw_rx_pending(const struct fw_vi *vi);
/* Notice a closed/broken channel and move the VI to the error state. */
void fw_link_check(struct fw_vi *vi);

/* ---- stage helpers shared by fw_tx.c and fw_rx.c ----------------------------- */
/* T2/R2 Bell: move tokens from the doorbell ring into the NIC work queue;
 * ring_ns (may be NULL) gives the time each doorbell slot was rung. */
uint32_t fw_bell_take(struct via_db_queue *q, struct fw_wq *wq, const uint64_t *ring_ns);
/* T3/R4 XDes: fetch the descriptor named by a token and validate it. */
void fw_xdes_fetch(struct fw_vi *vi, const struct via_db_token *tok, bool recv,
                   struct fw_xdes *d);
/* T4/R5 data movement: copy `len` bytes at message offset `off` between NIC
 * staging and the descriptor's segments (gather when to_host is false). */
void fw_xdata_copy(const struct fw_xdes *d, uint32_t off, uint8_t *nic, uint32_t len,
                   bool to_host);
/* TPT check of one host range; returns 0 or VIP_STATUS_PROTECTION_ERROR. */
uint32_t fw_tpt_check(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len);
/* T6/R6 Updt: write Length/Status (and ImmediateData), post to the CQ. */
void fw_updt(struct fw_vi *vi, const struct fw_xdes *d, bool recv, uint32_t status,
             uint32_t length);
/* Complete every queued descriptor of both queues with DESC_FLUSHED. */
void fw_flush(struct fw_vi *vi);
/* Error rules of the VI's reliability level (VIA 1.0 section 2.6). */
void fw_vi_error(struct fw_vi *vi, uint32_t code, uint64_t desc_va);
/* Wake a sleeper of an event page if it asked to be woken. */
void fw_notify(struct via_event_page *ev, uint32_t vi_id);

/* ---- paced profiles: the real-time scheduler (fw_sched.c) ---------------------- */
/* Claim the LANai for `dur` ns from the first moment >= ready it is free;
 * returns the start. A send's doorbell is found by the linear scan first. */
uint64_t fw_sched_send(struct fw_nic *nic, uint32_t vi_id, uint64_t ring_ns, uint64_t dur);
uint64_t fw_sched_recv(struct fw_nic *nic, uint64_t arrive_ns, uint64_t dur);
/* Hold a host-visible effect until real time reaches t; false while held. */
bool fw_release_due(struct fw_nic *nic, uint64_t t);
/* Busy-wait until real time t: host costs charged to the calling thread. */
void fw_spin_until(uint64_t t);
/* Add a stage's modelled time to the NIC's totals and the trace. */
void fw_account(struct fw_nic *nic, enum via_stage st, uint32_t vi, uint32_t seq,
                uint32_t len, double dur_ns);

/* ---- extensions (extensions/ext_fw.c) ------------------------------------------ */
/* T3 for DESCLESS and MERGED tokens; same contract as fw_xdes_fetch. */
void ext_xdes_fetch(struct fw_vi *vi, const struct via_db_token *tok, struct fw_xdes *d);
/* After T5 of a DESCLESS message: the NIC clears its SRAM slot. */
void ext_descless_done(struct fw_vi *vi, const struct via_db_token *tok);

/* ---- trace ------------------------------------------------------------------ */
void fw_trace(struct fw_nic *nic, enum via_stage st, uint32_t vi, uint32_t seq, uint32_t len,
              uint32_t dur_ns);
static inline bool fw_tracing(const struct fw_nic *nic)
{
    return atomic_load_explicit(&nic->st->trace_on, memory_order_relaxed) != 0;
}
#define FW_TRACE(nic, st, vi, seq, len)                                              \
    do {                                                                             \
        if (!(nic)->paced && fw_tracing(nic))                                        \
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

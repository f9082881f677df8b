/*
 * fw_nic.c - the NIC as a component (nic.h): its VIs and CQs, the doorbell
 * the host rings, and progress.
 *
 * Whoever lends the NIC a CPU (a host thread in a VIPL call, or the NIC's
 * own thread) enters through nic_vi_progress / nic_progress and runs a VI's
 * stages under that VI's lock. Which VIs need a visit is kept in three
 * bitmaps by VI id:
 *   ev->arrived  set by the peer NIC after it published a packet for us
 *                (or freed room we waited for), on our event page;
 *   work         set by ourselves: a stalled send, a wake owed to a peer,
 *                an answer the link had no room for;
 *   held         a paced effect held until its modelled time; visited
 *                only once real time reaches held_min.
 * A visitor takes a bit with an atomic exchange before it looks at the VI,
 * so work published after the exchange sets the bit again (fw_updt.c
 * states the ordering).
 *
 * VIs are reference-counted: the table holds one reference and each
 * visitor one more while it runs the VI, so nic_vi_destroy on one thread
 * never frees a VI another thread is progressing.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "via_spec.h"

#include "fw.h"
#include "fw_link.h"
#include "fw_hal.h"

/* ---- the NIC ---------------------------------------------------------------- */

struct fw_nic *nic_create(const struct nic_params *p)
{
    struct fw_nic *nic = calloc(1, sizeof *nic);
    if (!nic)
        return NULL;
    nic->nic_index = p->nic_index;
    nic->tpt = p->tpt;
    nic->ev = p->ev;
    nic->st = p->st;
    nic->np = p->np;
    nic->prof_own = p->prof ? *p->prof : p->np->prof;
    nic->prof = &nic->prof_own;
    nic->paced = nic->prof_own.paced != 0;
    if (nic->paced && p->st && p->st->clock == VIA_CLOCK_VIRTUAL)
        fw_vclock_start(nic->prof);
    static const _Atomic uint32_t never;
    nic->stage_trace = nic->paced ? &never : &nic->st->trace_on;
    nic->own_thread = p->own_thread;
    fw_cma_init(nic);
    atomic_store(&nic->held_min, UINT64_MAX);
    pthread_mutex_init(&nic->lock, NULL);
    fw_asym_init();
    return nic;
}

void nic_sleep_fence(void)
{
    fw_sleep_fence();
}

void nic_destroy(struct fw_nic *nic)
{
    if (!nic)
        return;
    fw_thread_stop(nic);
    fw_net_nic_fini(nic);
    pthread_mutex_destroy(&nic->lock);
    free(nic);
}

bool nic_paced(const struct fw_nic *nic)
{
    return nic->paced;
}

const struct via_profile *nic_profile(const struct fw_nic *nic)
{
    return nic->prof;
}

/* ---- VIs: the table and references -------------------------------------------- */

struct fw_vi *fw_vi_get(struct fw_nic *nic, unsigned id)
{
    pthread_mutex_lock(&nic->lock);
    struct fw_vi *vi = id < VIA_MAX_VI ? nic->vis[id] : NULL;
    if (vi)
        atomic_fetch_add_explicit(&vi->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&nic->lock);
    return vi;
}

void fw_vi_put(struct fw_vi *vi)
{
    atomic_fetch_sub_explicit(&vi->refs, 1, memory_order_release);
}

struct fw_vi *nic_vi_create(struct fw_nic *nic, struct via_vi_page *db,
                            const struct nic_vi_params *p, struct fw_cq *scq, struct fw_cq *rcq)
{
    if (p->vi_id >= VIA_MAX_VI)
        return NULL;
    struct fw_vi *vi = calloc(1, sizeof *vi);
    if (!vi)
        return NULL;
    atomic_store(&vi->refs, 1);
    fw_vi_init(vi, nic, p->vi_id, db);
    vi->scq = scq;
    vi->rcq = rcq;
    nic_vi_set_params(vi, p);
    pthread_mutex_lock(&nic->lock);
    if (nic->vis[p->vi_id]) {
        pthread_mutex_unlock(&nic->lock);
        free(vi);
        return NULL;
    }
    vi->gen = ++nic->vi_gen;
    nic->vis[p->vi_id] = vi;
    atomic_fetch_add(&nic->nvis_own, 1);
    pthread_mutex_unlock(&nic->lock);
    return vi;
}

void nic_vi_destroy(struct fw_vi *vi)
{
    struct fw_nic *nic = vi->nic;
    pthread_mutex_lock(&nic->lock);
    nic->vis[vi->vi_id] = NULL;
    atomic_fetch_sub(&nic->nvis_own, 1);
    pthread_mutex_unlock(&nic->lock);
    /* Nobody finds it any more; wait for those who already did. */
    while (atomic_load_explicit(&vi->refs, memory_order_acquire) != 1)
        sched_yield();
    fw_lock(&vi->lock);
    if (vi->chan)
        fw_vi_disconnect(vi);
    fw_vi_wakes(vi);
    fw_unlock(&vi->lock);
    free(vi);
}

void nic_vi_set_params(struct fw_vi *vi, const struct nic_vi_params *p)
{
    fw_lock(&vi->lock);
    vi->ptag = p->ptag;
    vi->reliability = p->reliability;
    vi->max_transfer = p->max_transfer;
    vi->rdma_write = p->rdma_write;
    vi->rdma_read = p->rdma_read;
    fw_unlock(&vi->lock);
}

bool nic_vi_connect(struct fw_vi *vi, struct via_chan *chan, int side, uint32_t peer_vi,
                    struct via_event_page *peer_ev, int sock, int peer_pidfd)
{
    struct fw_nic *nic = vi->nic;
    fw_lock(&vi->lock);
    bool ok = fw_vi_connect(vi, chan, side, peer_vi, peer_ev, sock);
    if (ok) {
        fw_cma_connect(vi, peer_pidfd);
        fw_live_watch(vi, peer_pidfd);
    }
    else if (peer_pidfd >= 0)
        close(peer_pidfd);
    fw_unlock(&vi->lock);
    if (!ok)
        return false;
    /* The NIC needs a CPU of its own from the first connection on. */
    pthread_mutex_lock(&nic->lock);
    fw_thread_start(nic);
    pthread_mutex_unlock(&nic->lock);
    fw_want_visit(vi); /* packets may be waiting already */
    return true;
}

void nic_vi_disconnect(struct fw_vi *vi)
{
    fw_lock(&vi->lock);
    /* A wait of another thread may sleep on the link's word: the flush
     * must wake it there (the mapping outlives us: nic_vi_wake_dir). */
    struct via_chan_dir *wd = atomic_load(&vi->wake_dir);
    fw_vi_disconnect(vi);
    fw_vi_wakes(vi);
    atomic_thread_fence(memory_order_seq_cst); /* (2) */
    fw_wake_dir(wd);
    fw_unlock(&vi->lock);
    if (wd)
        fw_vclock_unhold(vi, wd);
}

const _Atomic bool *nic_vi_error_flag(const struct fw_vi *vi)
{
    return &vi->err_pending;
}

bool nic_vi_take_error(struct fw_vi *vi, struct nic_error *e)
{
    if (!atomic_load_explicit(&vi->err_pending, memory_order_acquire))
        return false; /* a hint only: the lock below decides */
    fw_lock(&vi->lock);
    bool got = vi->err_pending;
    if (got) {
        *e = (struct nic_error){vi->err_code, vi->err_desc, vi->err_told, vi->err_orderly};
        vi->err_pending = false;
        vi->err_told = false;
        vi->err_orderly = false;
    }
    fw_unlock(&vi->lock);
    return got;
}

/* ---- T1/R1 Ring --------------------------------------------------------------------- */

/* The token into the VI's doorbell ring, published by prod (vi->lock
 * held: the host is the ring's only producer). A full ring is first
 * emptied into the NIC's queue (the NIC takes tokens whenever asked).
 * at_ns: when the programmed I/O completes (send rings only). */
static inline void ring_put(struct fw_vi *vi, bool recv, const struct via_db_token *tok,
                            uint64_t at_ns)
{
    struct via_db_queue *q = recv ? &vi->db->rq : &vi->db->sq;
    uint64_t *ring_ns = recv ? NULL : vi->db_ring_ns;
    uint32_t prod = atomic_load_explicit(&q->prod, memory_order_relaxed);
    if (prod - atomic_load_explicit(&q->cons, memory_order_acquire) >= VIA_DB_SLOTS)
        fw_bell_take(q, recv ? &vi->resp.rq : &vi->req.sq, ring_ns);
    q->tok[prod % VIA_DB_SLOTS] = *tok;
    if (ring_ns)
        ring_ns[prod % VIA_DB_SLOTS] = at_ns;
    atomic_store_explicit(&q->prod, prod + 1, memory_order_release);
}

/* A native send's token, with the NIC's lock held: the NIC runs now and
 * would take it off the doorbell ring at once, so it goes straight into the
 * NIC's queue (a hardware doorbell queue), unless older tokens wait in the
 * ring (they go first) or the queue is full. */
static bool queue_direct(const struct fw_vi *vi)
{
    return atomic_load_explicit(&vi->db->sq.prod, memory_order_relaxed) ==
               atomic_load_explicit(&vi->db->sq.cons, memory_order_relaxed) &&
           vi->req.sq.tail - vi->req.sq.head < VIA_QUEUE_DEPTH;
}

struct fw_lock *nic_vi_lock(struct fw_vi *vi)
{
    return &vi->lock;
}

uint64_t nic_ring_locked(struct fw_vi *vi, bool recv, const struct via_db_token *tok,
                         enum fw_ext_mode mode, uint32_t bytes, uint64_t rung_ns)
{
    struct fw_nic *nic = vi->nic;
    enum via_stage st = recv ? VIA_ST_R1_RING : VIA_ST_T1_RING;
    if (recv && !nic->paced) {
        /* R1 on a native NIC: no model to keep and nothing to run now (the
         * NIC takes the token at its next turn). */
        ring_put(vi, true, tok, 0);
        FW_TRACE(nic, st, vi->vi_id, 0, bytes);
        return 0;
    }
    uint64_t cost = 0;
    if (nic->paced) {
        double c = fw_cost_post(nic->prof, recv ? FW_EXT_STANDARD : mode, bytes);
        fw_account(nic, st, vi->vi_id, recv ? 0 : vi->req.seq + 1, bytes, c);
        cost = (uint64_t)c;
    }
    if (!recv && !nic->paced && queue_direct(vi))
        wq_put(&vi->req.sq, tok, 0);
    else
        ring_put(vi, recv, tok, rung_ns + cost);
    FW_TRACE(nic, st, vi->vi_id, recv ? 0 : vi->req.seq + 1, bytes);
    if (!recv && !nic->paced) {
        /* Hardware doorbells: the NIC is pointed at this VI and runs at once,
         * on this CPU (the fastest path; native has no model to keep). */
        atomic_store_explicit(&vi->host_in, true, memory_order_relaxed);
        fw_vi_run_tx(vi);
        atomic_store_explicit(&vi->host_in, false, memory_order_relaxed);
    } else if (!recv && fw_vclock_on()) {
        /* Virtual time: the NIC's work costs the host no virtual time, so
         * it runs now and its packet is on the link before the post
         * returns (what it promises its peers counts on it). */
        atomic_store_explicit(&vi->host_in, true, memory_order_relaxed);
        fw_vi_run_tx(vi);
        atomic_store_explicit(&vi->host_in, false, memory_order_relaxed);
    } else if (!recv) {
        /* A paced NIC finds the doorbell by its own scan, at a time its model
         * derives from rung_ns; its stages are the LANai's time, not the
         * host's, so they run at its next turn (the host's next poll, or its
         * own thread), never inside the post: the post costs Build + Ring. */
        atomic_store_explicit(&vi->quiet, false, memory_order_relaxed);
        fw_want_visit(vi);
        fw_thread_kick(nic); /* only a thread in deep sleep needs telling */
    }
    return cost;
}

uint64_t nic_ring(struct fw_vi *vi, bool recv, const struct via_db_token *tok,
                  enum fw_ext_mode mode, uint32_t bytes, uint64_t rung_ns)
{
    fw_lock(&vi->lock);
    uint64_t cost = nic_ring_locked(vi, recv, tok, mode, bytes, rung_ns);
    fw_unlock(&vi->lock);
    return cost;
}

uint64_t nic_done_cost(const struct fw_vi *vi)
{
    return vi->nic->paced ? (uint64_t)fw_cost_done(vi->nic->prof) : 0;
}

/* ---- progress ------------------------------------------------------------------------ */

/* A cheap fingerprint of a VI's pipeline positions: did a visit move it? */
static uint64_t vi_sig(const struct fw_vi *vi)
{
    return (uint64_t)vi->req.sq.head * 31u + vi->resp.rq.head * 17u + vi->req.sq.tail * 7u +
           vi->resp.rq.tail * 5u + vi->resp.pkts * 3u + vi->req.msg.off + vi->comp.acked + (uint64_t)vi->req.state + vi->resp.rd.off +
           (vi->wake_peer ? 1u : 0u);
}

static void held_note(struct fw_vi *vi)
{
    struct fw_nic *nic = vi->nic;
    unsigned id = vi->vi_id;
    atomic_fetch_or_explicit(&nic->held[id / 64], 1ull << (id % 64), memory_order_release);
    uint64_t cur = atomic_load_explicit(&nic->held_min, memory_order_relaxed);
    while (vi->held < cur &&
           !atomic_compare_exchange_weak_explicit(&nic->held_min, &cur, vi->held,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

static void vi_settle(struct fw_vi *vi)
{
    if (vi->chan && vi->link.ops->turn && vi->link.ops->turn(&vi->link) == UINT64_MAX)
        fw_link_failed(vi);
    fw_vi_wakes(vi);
    if (vi->held)
        held_note(vi);
    atomic_store_explicit(&vi->quiet,
                          vi->chan && !vi->held && !vi->wake_peer && vi->req.state == FW_TX_IDLE &&
                              vi->req.sq.head == vi->req.sq.tail && !vi->resp.ack_owed && !vi->resp.nak_owed &&
                              !vi->resp.rd.active && !vi->in_error,
                          memory_order_release);
}

/* The send doorbell's turn (vi->lock held): only the send pipeline. The
 * receive side is not looked at on a post: its link's head is a line the
 * peer writes, and reading it would cost a post a cache miss for nothing. */
void fw_vi_run_tx(struct fw_vi *vi)
{
    vi->held = 0;
    fw_tx_progress(vi);
    vi_settle(vi);
}

/* Run one VI's pipelines as far as they go (vi->lock held). may_wake:
 * the caller may pay for a wake owed to the peer (not a post). */
void fw_vi_run(struct fw_vi *vi, bool may_wake)
{
    vi->held = 0;
    if (vi->wake_peer && may_wake) {
        vi->wake_peer = false;
        fw_notify_peer(vi);
    }
    bool tx_work = vi->req.state != FW_TX_IDLE || vi->req.sq.head != vi->req.sq.tail ||
                   atomic_load_explicit(&vi->db->sq.prod, memory_order_acquire) !=
                       atomic_load_explicit(&vi->db->sq.cons, memory_order_relaxed);
    if (tx_work)
        fw_tx_progress(vi);
    fw_rx_progress(vi);
    /* An ACK or NAK just taken may complete a send waiting for it; only
     * then is a closed or broken link the VI's error. */
    if (vi->req.state != FW_TX_IDLE)
        fw_tx_progress(vi);
    fw_link_check(vi);
    vi_settle(vi);
}

/* Nothing for the NIC to do on this VI but wait for the link? Read without
 * the VI's lock: every word is one the NIC would look at first anyway
 * (doorbell rings, the link's head and tail, the channel state), and the
 * quiet flag says the last run left nothing pending besides. A host that
 * polls in a loop then pays a few loads per turn, not a lock. */
static bool vi_quiet(struct fw_vi *vi)
{
    if (!atomic_load_explicit(&vi->quiet, memory_order_acquire))
        return false;
    struct via_chan *chan = atomic_load_explicit(&vi->poll_chan, memory_order_relaxed);
    struct via_chan_dir *in = atomic_load_explicit(&vi->poll_dir, memory_order_relaxed);
    if (!chan || !in)
        return false;
    const struct via_vi_page *db = vi->db;
    return !fw_link_ready(in) &&
           atomic_load_explicit(&db->rq.prod, memory_order_relaxed) ==
               atomic_load_explicit(&db->rq.cons, memory_order_relaxed) &&
           atomic_load_explicit(&db->sq.prod, memory_order_relaxed) ==
               atomic_load_explicit(&db->sq.cons, memory_order_relaxed) &&
           atomic_load_explicit(&chan->state, memory_order_relaxed) == VIA_CHAN_OPEN;
}

static uint64_t visit(struct fw_nic *nic, unsigned id, bool *did, bool *left)
{
    struct fw_vi *vi = fw_vi_get(nic, id);
    if (!vi)
        return 0;
    if (left) {
        /* The NIC's thread leaves alone a VI a host thread polls (it is
         * looked after), and never waits for one that is in it: it looks
         * again later (the bit stays set). */
        uint32_t hp = atomic_load_explicit(&vi->host_polls, memory_order_relaxed);
        bool polled = hp != vi->thread_seen;
        vi->thread_seen = hp;
        if (polled || !fw_trylock(&vi->lock)) {
            fw_want_visit(vi);
            /* A host thread that polls the VI, or runs it now (a long
             * turn: a network link's system calls), looks after it; a
             * paced post that holds the lock a moment does not, nor does
             * a CQ's poller, which visits only the VIs flagged for it (a
             * network link's arrivals flag none while the waker leaves
             * its descriptors to pollers: AM-2 across hosts lost peers). */
            if (polled || atomic_load_explicit(&vi->host_in, memory_order_relaxed))
                *left = true;
            fw_vi_put(vi);
            return 0;
        }
    } else {
        fw_lock(&vi->lock);
    }
    uint64_t before = vi_sig(vi);
    fw_vi_run(vi, true);
    if (vi_sig(vi) != before)
        *did = true;
    uint64_t held = vi->held;
    fw_unlock(&vi->lock);
    fw_vi_put(vi);
    return held;
}

static inline uint64_t take(_Atomic uint64_t *w)
{
    return atomic_load_explicit(w, memory_order_relaxed) ? atomic_exchange(w, 0) : 0;
}

/* Every connected VI gets a visit this often, whatever the arrival bits
 * say: they are on the event page, which every peer of ours may write
 * (clearing them would otherwise hide the other peers' packets for good). */
#define FW_SWEEP_NS 100000000u

static bool sweep_due(struct fw_nic *nic, uint64_t now)
{
    uint64_t next = atomic_load_explicit(&nic->sweep_next, memory_order_relaxed);
    return now >= next &&
           atomic_compare_exchange_strong(&nic->sweep_next, &next, now + FW_SWEEP_NS);
}

uint64_t fw_progress(struct fw_nic *nic, bool *did, bool *left)
{
    uint64_t now = hal_now_ns(), held_min = 0;
    uint64_t model_now = fw_vclock_on() ? fw_vclock_now() : now; /* one clock read */
    bool held_due = atomic_load_explicit(&nic->held_min, memory_order_relaxed) <= model_now;
    if (held_due)
        atomic_store_explicit(&nic->held_min, UINT64_MAX, memory_order_relaxed);
    bool sweep = sweep_due(nic, now);
    for (unsigned w = 0; w < VIA_MAX_VI / 64; w++) {
        uint64_t bits = take(&nic->ev->arrived[w]) | take(&nic->work[w]);
        if (held_due)
            bits |= take(&nic->held[w]);
        if (sweep)
            bits |= atomic_load_explicit(&nic->linked[w], memory_order_relaxed);
        while (bits) {
            unsigned id = w * 64 + (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            uint64_t h = visit(nic, id, did, left);
            if (h && (!held_min || h < held_min))
                held_min = h;
        }
    }
    uint64_t pending = atomic_load_explicit(&nic->held_min, memory_order_relaxed);
    if (pending != UINT64_MAX && (!held_min || pending < held_min))
        held_min = pending;
    return held_min;
}

/* Lossy when threads race, which is fine: the NIC thread only asks
 * whether a counter moved. */
static inline void bump(_Atomic uint32_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void host_polled(struct fw_nic *nic)
{
    bump(&nic->host_polls);
}

void nic_mem_fence(struct fw_nic *nic)
{
    if (!nic)
        return;
    /* Only a linked VI can be in a turn that copies a peer's RDMA (it is
     * linked and unlinked under its lock): one word per 64 VIs to read. */
    for (unsigned w = 0; w < VIA_MAX_VI / 64; w++)
        for (uint64_t b = atomic_load_explicit(&nic->linked[w], memory_order_acquire); b;
             b &= b - 1) {
            struct fw_vi *vi = fw_vi_get(nic, w * 64 + (unsigned)__builtin_ctzll(b));
            if (!vi)
                continue;
            fw_lock(&vi->lock);
            fw_unlock(&vi->lock);
            fw_vi_put(vi);
        }
}

uint64_t nic_progress(struct fw_nic *nic, bool host)
{
    bool did = false;
    if (host) {
        host_polled(nic);
        bump(&nic->host_polls_all); /* every VI is looked after */
    }
    return fw_progress(nic, &did, NULL);
}

struct via_chan_dir *nic_vi_wake_dir(struct fw_vi *vi)
{
    return atomic_load_explicit(&vi->wake_dir, memory_order_acquire);
}

bool nic_vi_busy(struct fw_vi *vi, bool host)
{
    if (host) {
        host_polled(vi->nic);
        bump(&vi->host_polls);
    }
    return !vi_quiet(vi);
}

uint64_t nic_vi_turn_locked(struct fw_vi *vi, bool host)
{
    atomic_store_explicit(&vi->host_in, host, memory_order_relaxed);
    fw_vi_run(vi, true);
    atomic_store_explicit(&vi->host_in, false, memory_order_relaxed);
    return vi->held;
}

uint64_t nic_vi_progress(struct fw_vi *vi, bool host)
{
    if (!nic_vi_busy(vi, host))
        return 0;
    fw_lock(&vi->lock);
    uint64_t held = nic_vi_turn_locked(vi, host);
    fw_unlock(&vi->lock);
    return held;
}

/* ---- completion queues -------------------------------------------------------------- */

struct fw_cq *nic_cq_create(struct fw_nic *nic, struct via_cq_ring *ring)
{
    /* aligned: the mirrors sit on cache lines of their own */
    struct fw_cq *cq = aligned_alloc(_Alignof(struct fw_cq), sizeof *cq);
    if (!cq)
        return NULL;
    memset(cq, 0, sizeof *cq);
    pthread_mutex_init(&cq->lock, NULL);
    cq->ring = ring;
    cq->nslots = ring->nslots;
    cq->nic = nic;
    atomic_store(&cq->posted, atomic_load(&ring->tail));
    atomic_store(&cq->taken, atomic_load(&ring->head));
    atomic_store(&cq->overflow, atomic_load(&ring->overflow));
    return cq;
}

void nic_cq_destroy(struct fw_cq *cq)
{
    if (!cq)
        return;
    pthread_mutex_destroy(&cq->lock);
    free(cq);
}

uint16_t nic_vi_gen(const struct fw_vi *vi)
{
    return vi->gen;
}

bool nic_cq_pop(struct fw_cq *cq, uint32_t *vi_id, uint16_t *gen, bool *recv)
{
    bool got = false;
    /* Empty is the common case of a poll: look (at the mirrors, never at a
     * ring a resize may be replacing) before locking. */
    if (atomic_load_explicit(&cq->posted, memory_order_acquire) ==
        atomic_load_explicit(&cq->taken, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&cq->lock);
    struct via_cq_ring *r = cq->ring;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (atomic_load_explicit(&r->tail, memory_order_relaxed) != head) {
        struct via_cq_entry e = r->e[head & (cq->nslots - 1)];
        atomic_store_explicit(&r->head, head + 1, memory_order_relaxed);
        atomic_store_explicit(&cq->taken, head + 1, memory_order_release);
        *vi_id = e.vi_id;
        *gen = e.vi_gen;
        *recv = e.is_recv != 0;
        got = true;
    }
    pthread_mutex_unlock(&cq->lock);
    return got;
}

bool nic_cq_overflowed(const struct fw_cq *cq)
{
    return atomic_load(&cq->overflow) != 0;
}

uint32_t nic_cq_slots(struct fw_cq *cq)
{
    pthread_mutex_lock(&cq->lock);
    uint32_t n = cq->nslots;
    pthread_mutex_unlock(&cq->lock);
    return n;
}

uint32_t nic_cq_queued(struct fw_cq *cq)
{
    pthread_mutex_lock(&cq->lock);
    uint64_t n = atomic_load_explicit(&cq->ring->tail, memory_order_relaxed) -
                 atomic_load_explicit(&cq->ring->head, memory_order_relaxed);
    pthread_mutex_unlock(&cq->lock);
    return (uint32_t)n;
}

bool nic_cq_resize(struct fw_cq *cq, struct via_cq_ring *ring, uint32_t entries,
                   struct via_cq_ring **old, uint32_t *queued)
{
    uint32_t n = ring->nslots;
    if (n < entries || !n || (n & (n - 1)))
        return false; /* the caller's ring is not one (vipl_vi.c checks) */
    pthread_mutex_lock(&cq->lock);
    struct via_cq_ring *r = cq->ring;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    *queued = (uint32_t)(tail - head);
    if (tail - head > entries) {
        pthread_mutex_unlock(&cq->lock);
        return false;
    }
    /* The free-running positions carry over, so an entry keeps its number:
     * order is kept by construction, whatever the two sizes. */
    for (uint64_t i = head; i != tail; i++)
        ring->e[i & (n - 1)] = r->e[i & (cq->nslots - 1)];
    atomic_store_explicit(&ring->head, head, memory_order_relaxed);
    atomic_store_explicit(&ring->tail, tail, memory_order_relaxed);
    atomic_store_explicit(&ring->overflow, atomic_load(&r->overflow), memory_order_relaxed);
    cq->ring = ring;
    cq->nslots = n;
    pthread_mutex_unlock(&cq->lock);
    *old = r;
    return true;
}

/*
 * fw_nic.c - the NIC as a component (nic.h): made and destroyed, its VIs
 * and CQs, and the doorbell the host rings (T1/R1). Progress, the NIC's
 * visits of its VIs, is fw_progress.c's.
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
    if (nic->ev)
        atomic_store(&nic->ev->waiters_barrier, fw_asym_global() ? 1u : 0u);
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

/* A native NIC's token, with the VI's lock held: the NIC would take it off
 * the doorbell ring at its next look, so it goes straight into the NIC's
 * work queue (a hardware doorbell queue: the post's index is the queue's),
 * unless older tokens wait in the ring (they go first) or the queue is
 * full. The ring carries tokens of a paced NIC, whose doorbell scan the
 * model times. */
static bool queue_direct(const struct fw_vi *vi, bool recv)
{
    const struct via_db_queue *q = recv ? &vi->db->rq : &vi->db->sq;
    const struct fw_wq *wq = recv ? &vi->resp.rq : &vi->req.sq;
    return atomic_load_explicit(&q->prod, memory_order_relaxed) ==
               atomic_load_explicit(&q->cons, memory_order_relaxed) &&
           wq->tail - wq->head < VIA_QUEUE_DEPTH;
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
        /* R1 on a native NIC: no model to keep and nothing to run now (R2
         * finds the token in the queue at the NIC's next turn). */
        if (queue_direct(vi, true))
            wq_put(&vi->resp.rq, tok, 0);
        else
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
    if (!recv && !nic->paced && queue_direct(vi, false))
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

struct via_chan_dir *nic_vi_wake_dir(struct fw_vi *vi)
{
    return atomic_load_explicit(&vi->wake_dir, memory_order_acquire);
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

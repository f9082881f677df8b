/*
 * fw_updt.c - T6/R6 Updt, completion queues, flushing and the error rules.
 *
 * The NIC completes a descriptor by writing its control segment (Length,
 * ImmediateData for receives, then Status with DONE last, with release, so a
 * host that sees DONE sees the rest) and, when the work queue is bound to a
 * CQ, by appending (VI, queue) to the CQ ring.
 */
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"

#define CS_IMM 20
#define CS_LENGTH 24
#define CS_STATUS 28

/*
 * Wake-up ordering (every producer, every waiter):
 *   producer: (1) publish the work (link head, CQ tail, status word: a
 *             release store); (2) full fence; (3) if the arrival bit is
 *             clear, set it (a seq_cst RMW) and fence again (4); (5) load
 *             sleepers; if it is non-zero, bump seq and FUTEX_WAKE.
 *   waiter:   (a) increment sleepers (an RMW) and fence, (b) re-check its
 *             condition (exchange of the arrival bits, loads of the link
 *             head and the status words), (c) FUTEX_WAIT on seq only if
 *             seq is still what it read before (a).
 * (2) with (a) is the StoreLoad pair: either (b) sees (1), or (5) sees the
 * sleeper and wakes it. (2) also keeps (1) before the load of the bit:
 * without it the load could be satisfied early, see a bit a CQ poller is
 * about to clear, skip setting it, and leave work with no bit (the hang of
 * programs that wait only through CQs). (4) orders a bit we set before (5)
 * for waiters that look only at bits. On the hot path (bit already set)
 * this is one fence and two loads of lines nobody else writes, which stay
 * shared between the cores; RMWs there would bounce them per message.
 */
/*
 * The asymmetric form of (2). Instead of every producer paying a full
 * fence per turn, a waiter about to sleep pays a membarrier after (a): it
 * makes every running thread of the processes it covers execute a full
 * barrier, so either the producer's publish came before that barrier (and
 * (b) sees it) or its load of sleepers comes after it (and sees the
 * waiter).
 *   - wakes owed to our own process (a completion of ours): its waiters
 *     are threads of this process, and MEMBARRIER_CMD_PRIVATE_EXPEDITED
 *     covers them;
 *   - wakes owed to a peer (a packet published): the peer's waiters pay
 *     MEMBARRIER_CMD_GLOBAL_EXPEDITED, which reaches every process that
 *     registered for it, ours included. The peer says so on its event
 *     page (waiters_barrier), and we skip (2) for it only if we are
 *     registered ourselves. The arrival bits are then level-triggered:
 *     a consumer clears one only with a barrier after it and a look at
 *     the VI again (fw_progress.c), so a bit a producer saw set cannot be
 *     cleared behind a packet it has not yet made visible.
 * Registered once per process (again in a child after fork: registration
 * is not inherited); where the kernel has no membarrier every side keeps
 * the full fence.
 */
enum { ASYM_UNKNOWN, ASYM_ON, ASYM_OFF };
static _Atomic int asym = ASYM_UNKNOWN;
static _Atomic bool asym_global;
static pthread_mutex_t asym_lock = PTHREAD_MUTEX_INITIALIZER;
static bool asym_atfork;

static void asym_child(void)
{
    atomic_store(&asym, ASYM_UNKNOWN);
    atomic_store(&asym_global, false);
}

static bool membarrier_cmd(int cmd)
{
    return syscall(SYS_membarrier, cmd, 0, 0) == 0;
}

void fw_asym_init(void)
{
    if (atomic_load(&asym) != ASYM_UNKNOWN)
        return;
    pthread_mutex_lock(&asym_lock);
    if (atomic_load(&asym) == ASYM_UNKNOWN) {
        if (!asym_atfork)
            asym_atfork = pthread_atfork(NULL, NULL, asym_child) == 0;
        bool ok = asym_atfork && membarrier_cmd(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
        atomic_store(&asym_global,
                     ok && membarrier_cmd(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED));
        atomic_store(&asym, ok ? ASYM_ON : ASYM_OFF);
    }
    pthread_mutex_unlock(&asym_lock);
}

bool fw_asym_on(void)
{
    return atomic_load_explicit(&asym, memory_order_relaxed) == ASYM_ON;
}

bool fw_asym_global(void)
{
    return atomic_load_explicit(&asym_global, memory_order_relaxed);
}

void fw_lock_barrier(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (fw_asym_on())
        membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

void fw_sleep_fence(void)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (fw_asym_global())
        membarrier_cmd(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
    else if (fw_asym_on())
        membarrier_cmd(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

void fw_bits_barrier(void)
{
    if (fw_asym_global())
        membarrier_cmd(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
}

/* (2) for a turn that owes a wake to our own process only. */
static inline void local_fence(void)
{
    if (fw_asym_on())
        atomic_signal_fence(memory_order_seq_cst); /* the waiter's membarrier pays */
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* (2) for a turn that owes a wake to the peer (and perhaps to us); pe is
 * the peer's event page, NULL for a peer across a network link. */
static inline void peer_fence(const struct via_event_page *pe)
{
    if (pe && fw_asym_global() &&
        atomic_load_explicit(&pe->waiters_barrier, memory_order_relaxed))
        atomic_signal_fence(memory_order_seq_cst); /* the peer's waiters' membarrier pays */
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* (3) and (4): the bit, only if a consumer has cleared it. */
static void set_arrived(struct via_event_page *ev, uint32_t vi_id)
{
    if (vi_id >= VIA_MAX_VI)
        return;
    _Atomic uint64_t *w = &ev->arrived[vi_id / 64];
    uint64_t bit = 1ull << (vi_id % 64);
    if (!(atomic_load_explicit(w, memory_order_relaxed) & bit)) {
        atomic_fetch_or_explicit(w, bit, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
    }
}

/* (5): a system call only for a sleeper that asked to be woken. */
static void wake_sleepers(struct via_event_page *ev)
{
    if (atomic_load_explicit(&ev->sleepers, memory_order_relaxed)) {
        atomic_fetch_add(&ev->seq, 1);
        syscall(SYS_futex, &ev->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

/* The same for a connection's receiving end (via_chan_dir's wake word),
 * once fw_wake_dir (fw.h) has seen a sleeper: the (2) fence is the caller's. */
void fw_wake_dir_sleepers(struct via_chan_dir *d)
{
    atomic_fetch_add(&d->rx_wake, 1);
    syscall(SYS_futex, &d->rx_wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Our direction of the link, where the peer is the receiver; our peer's
 * direction, where we are. NULL unless the link is a shared channel. */
static struct via_chan_dir *peer_rx_dir(const struct fw_vi *vi)
{
    return vi->chan && vi->link.ops == &fw_link_shm_ops ? vi->link.tx : NULL;
}
static struct via_chan_dir *own_rx_dir(const struct fw_vi *vi)
{
    return vi->chan && vi->link.ops == &fw_link_shm_ops ? vi->link.rx : NULL;
}

void fw_notify_peer(struct fw_vi *vi)
{
    fw_notify(vi->peer_ev, vi->peer_vi);
    fw_wake_dir(peer_rx_dir(vi));
}

void fw_notify(struct via_event_page *ev, uint32_t vi_id)
{
    if (!ev)
        return;
    atomic_thread_fence(memory_order_seq_cst); /* (2) */
    set_arrived(ev, vi_id);
    wake_sleepers(ev);
}

/*
 * The wakes a turn of the NIC owes (its packets published to the peer, its
 * completions and errors recorded here), done once at the end of the turn:
 * one fence (2) covers every publish and status store of the turn, on the
 * hot path of a ping-pong one fence for both the peer's wake-up and ours.
 */
void fw_vi_wakes(struct fw_vi *vi)
{
    if (!vi->owe_peer && !vi->owe_local)
        return;
    if (vi->owe_peer)
        peer_fence(vi->peer_ev); /* (2) */
    else
        local_fence(); /* (2), paid by our own sleepers */
    struct via_event_page *pe = vi->owe_peer ? vi->peer_ev : NULL;
    bool me = vi->owe_local;
    vi->owe_peer = vi->owe_local = false;
    if (pe) {
        set_arrived(pe, vi->peer_vi);
        wake_sleepers(pe);
        fw_wake_dir(peer_rx_dir(vi));
    }
    if (me) {
        wake_sleepers(vi->nic->ev);
        fw_wake_dir(own_rx_dir(vi));
    }
}

void fw_peer_published(struct fw_vi *vi)
{
    if (!vi->nic->paced) {
        vi->owe_peer = true; /* at the end of this turn (fw_vi_wakes) */
        return;
    }
    /* The bit now (a polling peer sees the packet at once), the wake later. */
    if (vi->peer_ev) {
        atomic_thread_fence(memory_order_seq_cst); /* (2) */
        set_arrived(vi->peer_ev, vi->peer_vi);
    }
    vi->wake_peer = true;
    fw_want_visit(vi);
}

void fw_want_visit(struct fw_vi *vi)
{
    if (vi->vi_id >= VIA_MAX_VI)
        return;
    _Atomic uint64_t *w = &vi->nic->work[vi->vi_id / 64];
    uint64_t bit = 1ull << (vi->vi_id % 64);
    if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
        atomic_fetch_or_explicit(w, bit, memory_order_release);
}

/* The ring only under the CQ's lock: VipResizeCQ may be replacing it
 * (fw_nic.c, nic_cq_resize); the mirror `posted` is what polls look at. */
static void cq_post(struct fw_vi *vi, struct fw_cq *cq, bool recv)
{
    pthread_mutex_lock(&cq->lock);
    struct via_cq_ring *r = cq->ring;
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (tail - head >= cq->nslots) {
        /* VIA 1.0: a CQ overrun is catastrophic; never overwrite an entry. */
        atomic_store(&r->overflow, 1);
        atomic_store(&cq->overflow, 1);
    } else {
        r->e[tail & (cq->nslots - 1)] = (struct via_cq_entry){vi->vi_id, recv, vi->gen};
        atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
        atomic_store_explicit(&cq->posted, tail + 1, memory_order_release);
    }
    pthread_mutex_unlock(&cq->lock);
}

/* The operation a completion reports, by queue and descriptor operation (a
 * receive descriptor's op is RDMA write when an RDMA write with immediate
 * data consumed it). */
static const uint32_t updt_op[2][4] = {
    [0] = {[VIP_CONTROL_OP_SENDRECV] = VIP_STATUS_OP_SEND,
           [VIP_CONTROL_OP_RDMAWRITE] = VIP_STATUS_OP_RDMA_WRITE,
           [VIP_CONTROL_OP_RDMAREAD] = VIP_STATUS_OP_RDMA_READ},
    [1] = {[VIP_CONTROL_OP_SENDRECV] = VIP_STATUS_OP_RECEIVE,
           [VIP_CONTROL_OP_RDMAWRITE] = VIP_STATUS_OP_REMOTE_RDMA_WRITE},
};

void fw_updt(struct fw_vi *vi, const struct fw_xdes *d, bool recv, uint32_t status,
             uint32_t length)
{
    uint32_t op = updt_op[recv][d->op & VIP_CONTROL_OP_MASK];
    /* d->va passed the TPT (fw_xdes.c, fw_token.c); 0 means it did not, and
     * nothing is written: the VI's error says what happened. */
    if (d->va) {
        if (recv) {
            hal_host_store32(d->va + CS_LENGTH, length, 0);
            if (status & VIP_STATUS_IMMEDIATE)
                hal_host_store32(d->va + CS_IMM, d->imm, 0);
        }
        hal_host_store32(d->va + CS_STATUS, VIP_STATUS_DONE | op | status, 1);
    }

    struct via_vi_counters *c = &vi->db->cnt;
    /* A descriptor flushed by a disconnect (or behind a broken VI's first
     * error) was not itself in error: the count is of the ones that were. */
    if (status & VIP_STATUS_ERROR_MASK & ~VIP_STATUS_DESC_FLUSHED_ERROR)
        fw_count(&c->desc_errors, 1);
    if (!d->va) {
        /* Nothing written: the library lets it leave the queue (via_abi.h). */
        fw_count(recv ? &c->rq_unwritten : &c->sq_unwritten, 1);
        atomic_thread_fence(memory_order_release);
    }
    if (recv) {
        fw_count(&c->rq_done, 1);
        if (!(status & VIP_STATUS_ERROR_MASK)) {
            fw_count(&c->rx_msgs, 1);
            fw_count(&c->rx_bytes, length);
        }
    } else {
        fw_count(&c->sq_done, 1);
        if (!(status & VIP_STATUS_ERROR_MASK)) {
            fw_count(&c->tx_msgs, 1);
            fw_count(&c->tx_bytes, length);
        }
    }
    FW_TRACE(vi->nic, recv ? VIA_ST_R6_UPDT : VIA_ST_T6_UPDT, vi->vi_id,
             recv ? vi->resp.seq : vi->req.seq, length);
    /* A CQ entry names a completion Done will hand back: not one the NIC
     * could not write, which leaves the queue untaken (vipl_wait.c). */
    struct fw_cq *cq = recv ? vi->rcq : vi->scq;
    if (cq && d->va)
        cq_post(vi, cq, recv);
    /* A thread of this process may sleep in a wait (per VI or on a CQ):
     * woken at the end of this turn (fw_vi_wakes). */
    vi->owe_local = true;
}

/* Complete a token that never got its descriptor staged. */
static void flush_token(struct fw_vi *vi, const struct via_db_token *tok, bool recv)
{
    /* Written only where the TPT allows, like every other completion. */
    const struct fw_token_kind *k = fw_token_kind(tok);
    if (recv && VIA_DB_KIND(tok->word2) != VIA_DB_DESC)
        k = NULL; /* receives are standard */
    if (!recv && k && k->sent)
        k->sent(vi, tok);
    struct fw_xdes d = {.va = k ? k->status_va(vi, tok) : 0, .mem_handle = tok->mem_handle};
    fw_updt(vi, &d, recv, VIP_STATUS_DESC_FLUSHED_ERROR, 0);
}

static void flush_queue(struct fw_vi *vi, struct via_db_queue *q, struct fw_wq *wq, bool recv)
{
    do {
        while (wq->head != wq->tail) {
            flush_token(vi, &wq->tok[wq->head % VIA_QUEUE_DEPTH], recv);
            wq->head++;
        }
    } while (fw_bell_take(q, wq, NULL));
}

void fw_flush(struct fw_vi *vi)
{
    /* A message half sent or half received is completed first. */
    if (vi->req.state == FW_TX_XDES)
        flush_token(vi, &vi->req.sq.tok[vi->req.sq.head % VIA_QUEUE_DEPTH], false);
    else if (vi->req.state != FW_TX_IDLE) {
        const struct via_db_token *tok = &vi->req.sq.tok[vi->req.sq.head % VIA_QUEUE_DEPTH];
        const struct fw_token_kind *k = fw_token_kind(tok);
        if (k && k->sent)
            k->sent(vi, tok);
        fw_updt(vi, &vi->req.txd, false, VIP_STATUS_DESC_FLUSHED_ERROR, 0);
    }
    if (vi->req.state != FW_TX_IDLE) {
        vi->req.state = FW_TX_IDLE;
        vi->req.sq.head++;
    }
    if (vi->resp.state == FW_RX_XDATA) {
        fw_updt(vi, &vi->resp.rxd, true, VIP_STATUS_DESC_FLUSHED_ERROR, 0);
        vi->resp.rq.head++;
    }
    vi->resp.state = FW_RX_IDLE;
    vi->resp.rd.active = false; /* a read we were answering: the peer fails it */
    flush_queue(vi, &vi->db->sq, &vi->req.sq, false);
    flush_queue(vi, &vi->db->rq, &vi->resp.rq, true);
}

static bool is_descriptor_error(uint32_t code)
{
    return code == VIP_ERROR_POST_DESC || code == VIP_ERROR_RECVQ_EMPTY;
}

void fw_vi_error(struct fw_vi *vi, uint32_t code, uint64_t desc_va)
{
    /* Unreliable service: a bad descriptor or a dropped message affects that
     * message only; the VI stays connected (VIA 1.0, reliability levels).
     * Every other error (a lost or broken link, an RDMA protection error)
     * puts any VI in the error state. */
    if (vi->reliability == VIP_SERVICE_UNRELIABLE && is_descriptor_error(code)) {
        if (code == VIP_ERROR_POST_DESC && !desc_va && !vi->err_pending) {
            /* A descriptor outside the VI's memory: no status could be
             * written, so the program hears of it here, VI unharmed. */
            vi->err_pending = true;
            vi->err_code = code;
            vi->err_desc = 0;
            vi->owe_local = true; /* woken at the end of this turn */
        }
        return;
    }
    if (vi->in_error)
        return;
    vi->in_error = true;
    atomic_store(&vi->db->state, VIA_VI_ERROR);
    if (vi->chan && code != VIP_ERROR_CONN_LOST) {
        uint32_t open = VIA_CHAN_OPEN;
        atomic_compare_exchange_strong(&vi->chan->state, &open, VIA_CHAN_BROKEN);
        fw_notify_peer(vi);
    }
    fw_flush(vi);
    /* Recorded only: the host library reports it (to the kernel agent, then
     * to the program) after it has dropped its locks (nic_vi_take_error). */
    vi->err_pending = true;
    vi->err_code = code;
    vi->err_desc = desc_va;
    if (!vi->err_reported) {
        vi->err_reported = true;
        vi->err_told = code != VIP_ERROR_CONN_LOST;
    }
    vi->owe_local = true; /* a sleeper of ours hears of it at the end of this turn */
}

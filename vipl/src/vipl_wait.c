/*
 * vipl_wait.c - completion: VipSendDone/Wait, VipRecvDone/Wait,
 * VipCQDone/Wait, and the error callback.
 *
 * The NIC completes a work queue in order, so Done looks only at the
 * descriptor at the head of the host's queue. Before looking, the caller's
 * thread lends the NIC its CPU (nic_vi_progress, nic_progress): the send
 * pipeline continues where the link had stalled it, receive doorbells are
 * taken, and arrived packets are placed. (The NIC also has a thread of its
 * own for when nobody polls; a polling host is faster, and costs no wake.)
 *
 * Waiting spins briefly (a message usually arrives within microseconds),
 * then sleeps on a futex (a VI's wait on its connection's wake word, a
 * CQ's on the event page and its VIs' words: sleep_set below); a peer NIC,
 * our own NIC completing a descriptor, or vipd wakes the sleeper only if
 * it asked (sleepers != 0), so a busy receiver costs nobody a system call.
 * The ordering argument is beside fw_notify (lanai-fw/fw_updt.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vipl_int.h"

/*
 * How long a waiter polls before it sleeps. On a quiet machine a message
 * comes within microseconds, and polling is what makes it fast. But when
 * the machine has more busy threads than cores, a poller holds the core the
 * peer needs to send: a wait that had to sleep halves the budget (down to
 * SPIN_MIN_NS), and each wait that polling satisfied earns some back (up to
 * SPIN_MAX_NS). Only waits that sleep make system calls.
 */
#define SPIN_MAX_NS 1000000u
#define SPIN_MIN_NS 5000u
#define SPIN_START_NS 100000u

/*
 * After a wait that slept and was woken by what it waited for, `slept_ns`
 * says how long the peer took to answer while we slept. If that was short
 * (under SPIN_MAX_NS), polling a little longer would have caught it
 * without two sleeps and two wake-ups: the budget grows to twice it. This
 * is what keeps two processes from settling into a mode where each sleeps
 * because the other was asleep (each wake-up costing tens of
 * microseconds): the budget climbs above the wake-up time and both stay
 * awake. A wait that slept long (the peer really was slow, or the machine
 * oversubscribed) halves it, so pollers step aside for the peer they wait
 * for. A wait satisfied while polling earns a little back.
 */
static void spin_adapt(struct vip_nic *n, bool slept, uint64_t slept_ns)
{
    if (n->spin_fixed)
        return;
    uint32_t s = atomic_load_explicit(&n->spin_ns, memory_order_relaxed);
    uint64_t t;
    if (!slept)
        t = (uint64_t)s + s / 8 + 1000;
    else if (slept_ns < SPIN_MAX_NS)
        t = 2 * slept_ns > s ? 2 * slept_ns : s;
    else
        t = s / 2;
    if (t < SPIN_MIN_NS)
        t = SPIN_MIN_NS;
    if (t > SPIN_MAX_NS)
        t = SPIN_MAX_NS;
    if (t != s)
        atomic_store_explicit(&n->spin_ns, (uint32_t)t, memory_order_relaxed);
}

void vipl_take_error(struct vip_vi *vi)
{
    struct nic_error ne;
    if (!nic_vi_take_error(vi->hw, &ne))
        return;
    if (ne.tell_agent) {
        /* The kernel agent breaks the connection and tells the peer. Not
         * waited for: the NIC has already broken the link and woken the
         * peer, and a wait must keep its timeout whatever vipd does. */
        vipl_report_vi_error(vi->nic, vi->id, ne.code);
    }
    VIP_ERROR_DESCRIPTOR e = {
        .NicHandle = vi->nic->handle,
        .ViHandle = vi->handle,
        .DescriptorPtr = (VIP_DESCRIPTOR *)(uintptr_t)ne.desc_va,
        .ResourceCode = ne.desc_va ? VIP_RESOURCE_DESCRIPTOR : VIP_RESOURCE_VI,
        .ErrorCode = (VIP_ERROR_CODE)ne.code,
    };
    pthread_mutex_lock(&vi->nic->lock);
    void (*fn)(VIP_PVOID, VIP_ERROR_DESCRIPTOR *) = vi->nic->err_handler;
    VIP_PVOID ctx = vi->nic->err_ctx;
    pthread_mutex_unlock(&vi->nic->lock);
    /* A peer's VipDisconnect is an orderly end, not an error: a handler
     * of the program's hears of it (the VI is disconnected, as VIA says),
     * the default one says nothing but under VIP_DEBUG. */
    if (ne.orderly && fn == vipl_default_error_handler) {
        vipl_debug("VI %u: the peer disconnected", vi->id);
        return;
    }
    if (fn)
        fn(ctx, &e);
}

VIP_VI_HANDLE vipl_vi_handle_by_id(struct vip_nic *n, uint32_t id, uint16_t gen)
{
    if (id >= VIA_MAX_VI)
        return NULL;
    /* The handle is read under the table's lock: once the lock is let go,
     * VipDestroyVi on another thread may free the VI. */
    pthread_mutex_lock(&n->lock);
    struct vip_vi *vi = n->vis[id];
    VIP_VI_HANDLE h = vi && vi->gen == gen ? vi->handle : NULL;
    pthread_mutex_unlock(&n->lock);
    return h;
}

/* Can a Done find something? Looked at without the lock: the NIC
 * completes a queue in order and counts completions (after writing the
 * status), so nothing can be done while its count equals our head. (Not
 * the descriptor itself: once taken by another thread it is the
 * program's again.) A poll that finds nothing done costs no lock. */
static inline bool done_waiting(const struct vip_vi *vi, bool recv)
{
    const struct vip_queue *q = recv ? &vi->rq : &vi->sq;
    const struct via_vi_counters *cnt = &vi->db->cnt;
    uint32_t done_n = (uint32_t)atomic_load_explicit(recv ? &cnt->rq_done : &cnt->sq_done,
                                                     memory_order_relaxed);
    return done_n != atomic_load_explicit(&q->head, memory_order_relaxed);
}

/* Take a completed descriptor off the head of one of a VI's queues (the
 * VI's lock held). The NIC writes every status; a descriptor it counted
 * done without writing (its memory was deregistered after the post, so
 * its control segment failed the TPT: the NIC reported POST_DESC) is not
 * the program's to take: it leaves the queue, and the next one is looked
 * at. */
static inline bool take_locked(struct vip_vi *vi, bool recv, VIP_DESCRIPTOR **out)
{
    struct vip_queue *q = recv ? &vi->rq : &vi->sq;
    const struct via_vi_counters *cnt = &vi->db->cnt;
    uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
    for (; h != q->tail; h++) {
        VIP_DESCRIPTOR *d = q->desc[h % VIA_QUEUE_DEPTH];
        if (!(__atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE)) {
            /* The NIC counts an unwritten one before its completion: a
             * count past those taken means this one, unless it completed
             * meanwhile (and the count is of a later one). */
            uint64_t u = atomic_load_explicit(recv ? &cnt->rq_unwritten : &cnt->sq_unwritten,
                                              memory_order_acquire);
            if (u <= q->unwritten_taken)
                break;
            if (!(__atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE)) {
                q->unwritten_taken++;
                continue;
            }
        }
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
        *out = d;
        return true;
    }
    atomic_store_explicit(&q->head, h, memory_order_release);
    return false;
}

static inline bool pop_done(struct vip_vi *vi, bool recv, VIP_DESCRIPTOR **out)
{
    if (!done_waiting(vi, recv))
        return false;
    fw_lock(vi->lock);
    bool got = take_locked(vi, recv, out);
    fw_unlock(vi->lock);
    return got;
}

/*
 * A program that polls Done in a loop holds its core while nothing comes.
 * When the machine has more busy threads than cores (both ends of a
 * connection on one core, for a while), the peer it waits for may be
 * queued behind it on that very core, and a poll cannot succeed before the
 * scheduler's next tick: each such slice moves only what the peer produced
 * in its last one (a window of sends). So a thread whose polls found
 * nothing IDLE_POLLS times in a row on a VI (tens of microseconds of spinning)
 * offers its core once (sched_yield, as MPI libraries do when idle). With
 * a core of its own it gets it straight back: one system call per that
 * many empty polls, and none while completions keep coming.
 */
#define IDLE_POLLS 1024u

/* A poll found something: the VI's count of empty polls starts again (a
 * store only when the count is not 0 already). */
static inline void polls_found(struct vip_vi *vi)
{
    if (atomic_load_explicit(&vi->idle_polls, memory_order_relaxed))
        atomic_store_explicit(&vi->idle_polls, 0, memory_order_relaxed);
}

/* Progress one VI and pop a completed descriptor of one of its queues.
 * *held: a paced effect that is known but held until its modelled time.
 * A native NIC's completion already there (a stream's earlier turns
 * complete descriptors by the window) is taken first, inline, with no call
 * and so no saved registers (done); the NIC's turn is lent only when
 * nothing is done (done_progress), since a turn that finds nothing to do
 * still costs a look at every ring of the VI. A paced NIC is always lent
 * the CPU first: its effects wait for their modelled time, and a poll is
 * when they come due. */
/* Virtual time: a poll (of a queue or a CQ) is a wait's round. It
 * begins by charging the program's time and reading the horizon... */
static void vt_poll_begin(struct fw_nic *hw)
{
    nic_vt_enter();
    nic_vt_inside(hw);
    nic_vt_look(hw);
}

/* ...and one that finds nothing moves the clock to the next event (held:
 * what its progress reported). Held back by a peer, it offers the CPU:
 * the peer moves first (inside the library: not the program's time). */
static void vt_poll_empty(struct fw_nic *hw, uint64_t held)
{
    if (!nic_vt_wait(hw, nic_vt_next_event(hw, held)))
        nic_vt_hold(hw);
    nic_vt_polled_empty();
}

static __attribute__((noinline)) VIP_RETURN done_progress(struct vip_vi *vi, bool recv,
                                                         VIP_DESCRIPTOR **out, uint64_t *held)
{
    bool vt = vi->paced && nic_virtual_time;
    if (vt)
        vt_poll_begin(vi->nic->hw);
    /* The NIC's turn and the take under one hold of the VI's lock. A
     * paced host pays Done's modelled cost for what it takes; the
     * library's own work of taking it happens inside that cost. */
    uint64_t h = 0, t0 = 0;
    bool got;
    if (nic_vi_busy(vi->hw, true)) {
        fw_lock(vi->lock);
        h = nic_vi_turn_locked(vi->hw, true);
        t0 = vi->paced ? nic_model_now_ns() : 0;
        got = done_waiting(vi, recv) && take_locked(vi, recv, out);
        fw_unlock(vi->lock);
    } else {
        t0 = vi->paced ? nic_model_now_ns() : 0;
        got = pop_done(vi, recv, out);
    }
    if (held)
        *held = h;
    vipl_deliver_error(vi);
    if (got) {
        if (vt)
            nic_vt_spend(t0 + nic_done_cost(vi->hw));
        else if (vi->paced)
            vipl_spend_until(t0 + nic_done_cost(vi->hw));
        polls_found(vi);
        if (vt)
            nic_vt_leave(vi->nic->hw);
        return VIP_SUCCESS;
    }
    if (vt) {
        /* A wait of ours steps for itself: held is then ours to report. */
        if (!held)
            vt_poll_empty(vi->nic->hw, h);
        nic_vt_leave(vi->nic->hw);
        return VIP_NOT_DONE;
    }
    /* Counted per VI, with plain loads and stores: threads polling one VI
     * at once may lose counts, which only moves a yield. */
    uint32_t idle = atomic_load_explicit(&vi->idle_polls, memory_order_relaxed) + 1;
    if (idle >= IDLE_POLLS) {
        atomic_store_explicit(&vi->idle_polls, 0, memory_order_relaxed);
        sched_yield();
    } else {
        atomic_store_explicit(&vi->idle_polls, idle, memory_order_relaxed);
    }
    return VIP_NOT_DONE;
}

static inline VIP_RETURN done(struct vip_vi *vi, bool recv, VIP_DESCRIPTOR **out, uint64_t *held)
{
    if (vi->paced || !pop_done(vi, recv, out))
        return done_progress(vi, recv, out, held);
    if (held)
        *held = 0;
    polls_found(vi);
    vipl_deliver_error(vi);
    return VIP_SUCCESS;
}

VIP_RETURN VipSendDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr)
{
    NIC_VT_SITE();
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || !DescriptorPtr)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipSendDone");
    return done(vi, false, DescriptorPtr, NULL);
}

VIP_RETURN VipRecvDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr)
{
    NIC_VT_SITE();
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || !DescriptorPtr)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipRecvDone");
    return done(vi, true, DescriptorPtr, NULL);
}

/* ---- waiting ------------------------------------------------------------------ */

/*
 * Where a wait sleeps. Every word it sleeps on is one of fw_notify's
 * protocol: a futex word and a count of its sleepers. A VI's wait sleeps
 * on the wake word of its own connection (via_chan_dir.rx_wake), which
 * only that peer, our NIC and vipd write; a CQ's wait on the event page
 * (our NIC's completions, vipd) and on the connection words of the VIs
 * bound to the CQ (up to SLEEP_MAX - 1 of them, by futex_waitv). So a peer
 * that writes our event page, which every peer maps, cannot keep another
 * peer's wake-ups from reaching a wait that sleeps on that peer's word.
 * A VI whose connection word we sleep on is pinned (dir_sleepers): its
 * channel stays mapped until we leave (vipl_vi_unpin_wait).
 */
#define SLEEP_MAX 64 /* futex_waitv takes up to 128 */

struct sleep_set {
    unsigned n;
    struct futex_waitv wv[SLEEP_MAX];
    _Atomic uint32_t *sleepers[SLEEP_MAX];
    struct vip_vi *pinned[SLEEP_MAX];
};

static void set_add(struct sleep_set *s, _Atomic uint32_t *word, _Atomic uint32_t *sleepers,
                    struct vip_vi *pin)
{
    s->wv[s->n] = (struct futex_waitv){.val = atomic_load(word), .uaddr = (uintptr_t)word,
                                       .flags = FUTEX_32};
    s->sleepers[s->n] = sleepers;
    s->pinned[s->n] = pin;
    s->n++;
    atomic_fetch_add(sleepers, 1); /* after reading the word: (a) */
}

/* The connection word of vi, pinned; false if it has none. */
static bool add_vi(struct sleep_set *s, struct vip_vi *vi)
{
    atomic_fetch_add(&vi->dir_sleepers, 1);
    struct via_chan_dir *d = nic_vi_wake_dir(vi->hw);
    if (!d) {
        atomic_fetch_sub(&vi->dir_sleepers, 1);
        return false;
    }
    set_add(s, &d->rx_wake, &d->rx_sleepers, vi);
    return true;
}

static void sleep_set_build(struct sleep_set *s, struct vip_nic *n, struct vip_vi *vi,
                            struct vip_cq *cq)
{
    s->n = 0;
    if (vi && add_vi(s, vi))
        return;
    set_add(s, &n->ev->seq, &n->ev->sleepers, NULL);
    if (!cq || !atomic_load_explicit(&cq->nvis, memory_order_relaxed))
        return;
    pthread_mutex_lock(&n->lock);
    for (unsigned id = 0; id < VIA_MAX_VI && s->n < SLEEP_MAX; id++) {
        struct vip_vi *v = n->vis[id];
        if (v && (v->scq == cq || v->rcq == cq))
            add_vi(s, v);
    }
    pthread_mutex_unlock(&n->lock);
}

/* futex_waitv(2) is missing (a kernel before 5.16, or valgrind): a CQ's
 * wait sleeps on its first word, the event page, at most this long at a
 * time, so that a wake on a connection word is seen late but seen. */
#define WAITV_MISSING_SLICE_NS 1000000u
static _Atomic bool waitv_missing;

static void sleep_set_wait(struct sleep_set *s, uint64_t ns)
{
    if (s->n > 1 && !atomic_load_explicit(&waitv_missing, memory_order_relaxed)) {
        uint64_t until = nic_now_ns() + ns;
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        if (syscall(SYS_futex_waitv, s->wv, s->n, 0, &ts, CLOCK_MONOTONIC) >= 0 ||
            errno != ENOSYS)
            return;
        atomic_store_explicit(&waitv_missing, true, memory_order_relaxed);
    }
    if (s->n > 1 && ns > WAITV_MISSING_SLICE_NS)
        ns = WAITV_MISSING_SLICE_NS;
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    syscall(SYS_futex, (void *)(uintptr_t)s->wv[0].uaddr, FUTEX_WAIT, s->wv[0].val, &ts, NULL,
            0);
}

static void sleep_set_leave(struct sleep_set *s)
{
    for (unsigned i = 0; i < s->n; i++) {
        atomic_fetch_sub(s->sleepers[i], 1);
        if (s->pinned[i])
            atomic_fetch_sub(&s->pinned[i]->dir_sleepers, 1);
    }
}

void vipl_vi_unpin_wait(struct vip_vi *vi)
{
    if (!atomic_load(&vi->dir_sleepers))
        return;
    struct via_chan *chs[2] = {vi->chan, vi->chan_old};
    for (unsigned c = 0; c < 2; c++)
        for (unsigned d = 0; chs[c] && d < 2; d++) {
            atomic_fetch_add(&chs[c]->dir[d].rx_wake, 1);
            syscall(SYS_futex, &chs[c]->dir[d].rx_wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        }
    while (atomic_load(&vi->dir_sleepers))
        sched_yield();
}

static uint64_t deadline_of(VIP_ULONG timeout_ms)
{
    if (timeout_ms >= VIP_INFINITE)
        return UINT64_MAX;
    return nic_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

/*
 * A wait in virtual time: never sleeps in real time. Each round takes what
 * is ready, else moves the clock to the next event (an effect the NIC
 * holds, the deadline), as far as the peers' promises allow; held back,
 * it lets the peer move first (nic_vt_hold). The timeout is virtual.
 */
static VIP_RETURN wait_virtual(struct vip_nic *n, VIP_ULONG timeout_ms, vipl_ready_fn ready,
                               void *arg, const char *what)
{
    nic_vt_enter();
    nic_vt_inside(n->hw);
    uint64_t deadline = UINT64_MAX, start = nic_model_now_ns();
    uint64_t real_deadline = UINT64_MAX;
    if (timeout_ms < VIP_INFINITE) {
        deadline = start + (uint64_t)timeout_ms * 1000000u;
        real_deadline = nic_now_ns() + (uint64_t)timeout_ms * 1000000u;
    }
    VIP_RETURN rc = VIP_SUCCESS;
    for (;;) {
        uint64_t held = 0;
        nic_vt_look(n->hw);
        if (ready(arg, &held))
            break;
        uint64_t next = nic_vt_next_event(n->hw, held);
        if (next == UINT64_MAX && nic_vt_alone(n->hw)) {
            /* Nothing held and no peer linked: a peer that has yet to
             * connect cannot be waited for in virtual time, so this wait
             * waits in real time, its timeout too (then the clock is put
             * at the virtual deadline). */
            if (nic_now_ns() >= real_deadline)
                nic_vt_spend(deadline);
            else {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        if (nic_model_now_ns() >= deadline) {
            rc = vipl_fail(VIP_TIMEOUT, "%s: nothing completed within %lu ms of virtual time "
                                        "(the peer sent nothing that could complete it)",
                           what, (unsigned long)timeout_ms);
            break;
        }
        if (deadline < next)
            next = deadline;
        if (!nic_vt_wait(n->hw, next))
            nic_vt_hold(n->hw);
    }
    nic_vt_leave(n->hw);
    return rc;
}

VIP_RETURN vipl_wait(struct vip_nic *n, struct vip_vi *vi, struct vip_cq *cq,
                     VIP_ULONG timeout_ms, vipl_ready_fn ready, void *arg, const char *what)
{
    uint64_t held = 0;
    if (nic_virtual_time && nic_paced(n->hw))
        return wait_virtual(n, timeout_ms, ready, arg, what);
    if (ready(arg, &held))
        return VIP_SUCCESS;
    uint64_t start = nic_now_ns();
    if (timeout_ms == 0)
        return vipl_fail(VIP_TIMEOUT, "%s: not done (timeout 0)", what);
    uint64_t deadline = deadline_of(timeout_ms);
    uint64_t spin_until = start + atomic_load_explicit(&n->spin_ns, memory_order_relaxed);
    bool slept = false;
    uint64_t slept_ns = 0;
    unsigned sleeps = 0;
    for (unsigned i = 0;; i++) {
        held = 0;
        if (ready(arg, &held)) {
            spin_adapt(n, slept, slept_ns);
            return VIP_SUCCESS;
        }
        if ((i & 63) != 63)
            continue;
        uint64_t now = nic_now_ns();
        if (now >= deadline)
            return vipl_fail(VIP_TIMEOUT,
                             "%s: nothing completed within %lu ms (%u sleeps; "
                             "the peer sent nothing that could complete it)",
                             what, (unsigned long)timeout_ms, sleeps);
        if (now < spin_until)
            continue;
        /* A paced NIC holds an effect until its modelled time: keep
         * polling rather than sleep past it. */
        if (held && held < now + 50000000u)
            continue;
        /* Sleep: announce ourselves, re-check, then wait for a word to move. */
        struct sleep_set ss;
        sleep_set_build(&ss, n, vi, cq); /* (a) of fw_notify's protocol */
        nic_will_sleep(n->hw); /* network links' waker watches again */
        nic_sleep_fence();
        held = 0;
        if (ready(arg, &held)) { /* (b) */
            sleep_set_leave(&ss);
            spin_adapt(n, slept, slept_ns);
            return VIP_SUCCESS;
        }
        if (held) {
            /* What we wait for has arrived and is held until its modelled
             * time: nobody will wake us for it, so do not sleep. */
            sleep_set_leave(&ss);
            continue;
        }
        uint64_t left = deadline - now;
        /* Wake at least once a second: bounds the cost of any lost wake-up. */
        if (left > 1000000000u)
            left = 1000000000u;
        uint64_t t_sleep = nic_now_ns();
        sleep_set_wait(&ss, left); /* (c) */
        sleep_set_leave(&ss);
        /* A peer that died while vipd could not tell us (nic.h). */
        nic_peers_check(n->hw);
        sleeps++;
        slept = true;
        slept_ns = nic_now_ns() - t_sleep;
        spin_until = nic_now_ns() + SPIN_MIN_NS;
    }
}

struct vi_wait {
    struct vip_vi *vi;
    bool recv;
    VIP_DESCRIPTOR **out;
};

static bool vi_ready(void *arg, uint64_t *held)
{
    struct vi_wait *w = arg;
    return done(w->vi, w->recv, w->out, held) == VIP_SUCCESS;
}

static VIP_RETURN vi_wait(VIP_VI_HANDLE h, VIP_ULONG timeout, VIP_DESCRIPTOR **out, bool recv)
{
    struct vip_vi *vi = vipl_vi(h);
    if (!vi || !out)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to a wait");
    struct vi_wait w = {vi, recv, out};
    return vipl_wait(vi->nic, vi, NULL, timeout, vi_ready, &w,
                     recv ? "VipRecvWait" : "VipSendWait");
}

VIP_RETURN VipSendWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr)
{
    NIC_VT_SITE();
    return vi_wait(ViHandle, Timeout, DescriptorPtr, false);
}

VIP_RETURN VipRecvWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr)
{
    NIC_VT_SITE();
    return vi_wait(ViHandle, Timeout, DescriptorPtr, true);
}

/* ---- completion queues ----------------------------------------------------------- */

struct cq_wait {
    struct vip_cq *cq;
    VIP_VI_HANDLE *vi;
    VIP_BOOLEAN *recv;
};

static bool cq_pop(struct vip_cq *cq, VIP_VI_HANDLE *vi, VIP_BOOLEAN *recv)
{
    uint32_t id;
    uint16_t gen;
    bool r;
    while (nic_cq_pop(cq->hw, &id, &gen, &r)) {
        VIP_VI_HANDLE h = vipl_vi_handle_by_id(cq->nic, id, gen);
        if (h) { /* an entry of a VI destroyed since is skipped */
            *vi = h;
            *recv = r ? VIP_TRUE : VIP_FALSE;
            return true;
        }
    }
    return false;
}

/* The NIC works for every VI that has work (not only this CQ's: the CQ
 * cannot know which VI the next completion comes from). */
static bool cq_ready(void *arg, uint64_t *held)
{
    struct cq_wait *w = arg;
    if (cq_pop(w->cq, w->vi, w->recv))
        return true;
    uint64_t h = nic_progress(w->cq->nic->hw, true);
    if (held)
        *held = h;
    return cq_pop(w->cq, w->vi, w->recv);
}

/* A CQ that overflowed has lost completions, a catastrophic error of the
 * CQ (VIA 1.0). The NIC only records it; the program's error callback
 * hears of it once, from the first CQ call that finds it (not under any
 * lock of ours: the handler may call VIPL). */
static bool cq_overflowed(struct vip_cq *cq)
{
    if (!nic_cq_overflowed(cq->hw))
        return false;
    if (!atomic_exchange(&cq->overflow_told, 1)) {
        VIP_ERROR_DESCRIPTOR e = {.NicHandle = cq->nic->handle, .CQHandle = cq->handle,
                                  .ResourceCode = VIP_RESOURCE_CQ,
                                  .ErrorCode = VIP_ERROR_CATASTROPHIC};
        pthread_mutex_lock(&cq->nic->lock);
        void (*fn)(VIP_PVOID, VIP_ERROR_DESCRIPTOR *) = cq->nic->err_handler;
        VIP_PVOID ctx = cq->nic->err_ctx;
        pthread_mutex_unlock(&cq->nic->lock);
        if (fn)
            fn(ctx, &e);
    }
    return true;
}

/* A CQ poll in virtual time is a wait's round, as a queue's poll is
 * (done_progress). */
static VIP_RETURN cq_done_virtual(struct cq_wait *w, struct fw_nic *hw)
{
    vt_poll_begin(hw);
    uint64_t held = 0;
    bool got = cq_ready(w, &held);
    if (!got)
        vt_poll_empty(hw, held);
    nic_vt_leave(hw);
    return got ? VIP_SUCCESS : VIP_NOT_DONE;
}

VIP_RETURN VipCQDone(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE *ViHandle, VIP_BOOLEAN *RecvQueue)
{
    NIC_VT_SITE();
    struct vip_cq *cq = vipl_cq(CQHandle);
    if (!cq || !ViHandle || !RecvQueue)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipCQDone");
    if (cq_overflowed(cq))
        return vipl_fail(VIP_ERROR_RESOURCE, "CQ overflowed: completions were lost "
                                             "(create it with more entries)");
    struct cq_wait w = {cq, ViHandle, RecvQueue};
    if (nic_virtual_time && nic_paced(cq->nic->hw))
        return cq_done_virtual(&w, cq->nic->hw);
    return cq_ready(&w, NULL) ? VIP_SUCCESS : VIP_NOT_DONE;
}

VIP_RETURN VipCQWait(VIP_CQ_HANDLE CQHandle, VIP_ULONG Timeout, VIP_VI_HANDLE *ViHandle,
                     VIP_BOOLEAN *RecvQueue)
{
    NIC_VT_SITE();
    struct vip_cq *cq = vipl_cq(CQHandle);
    if (!cq || !ViHandle || !RecvQueue)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipCQWait");
    if (cq_overflowed(cq))
        return vipl_fail(VIP_ERROR_RESOURCE, "CQ overflowed: completions were lost "
                                             "(create it with more entries)");
    struct cq_wait w = {cq, ViHandle, RecvQueue};
    return vipl_wait(cq->nic, NULL, cq, Timeout, cq_ready, &w, "VipCQWait");
}

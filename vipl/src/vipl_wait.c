/*
 * vipl_wait.c - completion: VipSendDone/Wait, VipRecvDone/Wait,
 * VipCQDone/Wait, and the error callback.
 *
 * The NIC completes a work queue in order, so Done looks only at the
 * descriptor at the head of the host's queue. Before looking, the caller's
 * thread lends the NIC its CPU (progress): the send pipeline continues where
 * the link had stalled it, receive doorbells are taken, and arrived packets
 * are placed.
 *
 * Waiting spins briefly (a message usually arrives within microseconds),
 * then sleeps on the session's event page futex; a peer NIC or vipd wakes
 * the sleeper only if it asked (sleepers != 0), so a busy receiver costs
 * nobody a system call.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fw_hal.h"
#include "vipl_int.h"

/*
 * How long a waiter polls before it sleeps. On a quiet machine a message
 * comes within microseconds, and polling is what makes it fast. But when
 * the machine has more busy threads than cores, a poller holds the core the
 * peer needs to send: a wait that had to sleep halves the budget (down to
 * SPIN_MIN_NS), and each wait that polling satisfied earns some back (up to
 * SPIN_MAX_NS). Only waits that sleep make system calls.
 */
#define SPIN_MAX_NS 100000u
#define SPIN_MIN_NS 5000u

static void spin_adapt(struct vip_nic *n, bool slept)
{
    uint32_t s = atomic_load_explicit(&n->spin_ns, memory_order_relaxed);
    uint32_t t = slept ? s / 2 : s + s / 8 + 1000;
    if (t < SPIN_MIN_NS)
        t = SPIN_MIN_NS;
    if (t > SPIN_MAX_NS)
        t = SPIN_MAX_NS;
    if (t != s)
        atomic_store_explicit(&n->spin_ns, t, memory_order_relaxed);
}

void vipl_deliver_error(struct vip_vi *vi)
{
    pthread_mutex_lock(&vi->lock);
    bool pending = vi->fw.err_pending;
    VIP_ERROR_DESCRIPTOR e = {
        .NicHandle = vi->nic,
        .ViHandle = vi,
        .DescriptorPtr = (VIP_DESCRIPTOR *)(uintptr_t)vi->fw.err_desc,
        .ResourceCode = vi->fw.err_desc ? VIP_RESOURCE_DESCRIPTOR : VIP_RESOURCE_VI,
        .ErrorCode = (VIP_ERROR_CODE)vi->fw.err_code,
    };
    vi->fw.err_pending = false;
    pthread_mutex_unlock(&vi->lock);
    if (!pending)
        return;
    pthread_mutex_lock(&vi->nic->lock);
    void (*fn)(VIP_PVOID, VIP_ERROR_DESCRIPTOR *) = vi->nic->err_handler;
    VIP_PVOID ctx = vi->nic->err_ctx;
    pthread_mutex_unlock(&vi->nic->lock);
    if (fn)
        fn(ctx, &e);
}

/* Progress one VI and pop a completed descriptor of one of its queues. */
static VIP_RETURN done(struct vip_vi *vi, bool recv, VIP_DESCRIPTOR **out)
{
    struct vip_queue *q = recv ? &vi->rq : &vi->sq;
    pthread_mutex_lock(&vi->lock);
    /* A send parked on a full link continues whatever the caller waits for:
     * a ping-pong of large messages waits for the receive while the rest of
     * its own send is still to go. */
    if (vi->fw.tx != FW_TX_IDLE || vi->fw.sq.head != vi->fw.sq.tail)
        fw_tx_progress(&vi->fw);
    if (recv)
        fw_rx_progress(&vi->fw);
    else
        fw_link_check(&vi->fw);
    VIP_RETURN rc = VIP_NOT_DONE;
    if (q->head != q->tail) {
        VIP_DESCRIPTOR *d = q->desc[q->head % VIA_QUEUE_DEPTH];
        if (__atomic_load_n(&d->CS.Status, __ATOMIC_ACQUIRE) & VIP_STATUS_DONE) {
            q->head++;
            *out = d;
            rc = VIP_SUCCESS;
        }
    }
    bool err = vi->fw.err_pending;
    pthread_mutex_unlock(&vi->lock);
    if (err)
        vipl_deliver_error(vi);
    return rc;
}

VIP_RETURN VipSendDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || !DescriptorPtr)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipSendDone");
    return done(vi, false, DescriptorPtr);
}

VIP_RETURN VipRecvDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR **DescriptorPtr)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || !DescriptorPtr)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipRecvDone");
    return done(vi, true, DescriptorPtr);
}

/* ---- waiting ------------------------------------------------------------------ */

static uint64_t deadline_of(VIP_ULONG timeout_ms)
{
    if (timeout_ms >= VIP_INFINITE)
        return UINT64_MAX;
    return hal_now_ns() + (uint64_t)timeout_ms * 1000000u;
}

VIP_RETURN vipl_wait(struct vip_nic *n, VIP_ULONG timeout_ms, vipl_ready_fn ready, void *arg)
{
    if (ready(arg))
        return VIP_SUCCESS;
    if (timeout_ms == 0)
        return VIP_TIMEOUT;
    uint64_t deadline = deadline_of(timeout_ms);
    uint64_t spin_until = hal_now_ns() + atomic_load_explicit(&n->spin_ns, memory_order_relaxed);
    bool slept = false;
    for (unsigned i = 0;; i++) {
        n->fw.next_release = 0;
        if (ready(arg)) {
            spin_adapt(n, slept);
            return VIP_SUCCESS;
        }
        if ((i & 63) != 63)
            continue;
        uint64_t now = hal_now_ns();
        if (now >= deadline)
            return VIP_TIMEOUT;
        if (now < spin_until)
            continue;
        /* A paced NIC holds an effect until its modelled time: keep
         * polling rather than sleep past it. */
        uint64_t held = n->fw.next_release;
        if (held && held < now + 50000000u)
            continue;
        /* Sleep: announce ourselves, re-check, then wait for seq to move. */
        struct via_event_page *ev = n->ev;
        uint32_t seq = atomic_load(&ev->seq);
        atomic_fetch_add(&ev->sleepers, 1);
        n->fw.next_release = 0;
        if (ready(arg)) {
            atomic_fetch_sub(&ev->sleepers, 1);
            spin_adapt(n, slept);
            return VIP_SUCCESS;
        }
        if (n->fw.next_release) {
            /* What we wait for has arrived and is held until its modelled
             * time: nobody will wake us for it, so do not sleep. */
            atomic_fetch_sub(&ev->sleepers, 1);
            continue;
        }
        uint64_t left = deadline - now;
        /* Wake at least once a second: bounds the cost of any lost wake-up. */
        if (left > 1000000000u)
            left = 1000000000u;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        syscall(SYS_futex, &ev->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
        atomic_fetch_sub(&ev->sleepers, 1);
        slept = true;
        spin_until = hal_now_ns() + SPIN_MIN_NS;
    }
}

struct vi_wait {
    struct vip_vi *vi;
    bool recv;
    VIP_DESCRIPTOR **out;
};

static bool vi_ready(void *arg)
{
    struct vi_wait *w = arg;
    return done(w->vi, w->recv, w->out) == VIP_SUCCESS;
}

static VIP_RETURN vi_wait(VIP_VI_HANDLE h, VIP_ULONG timeout, VIP_DESCRIPTOR **out, bool recv)
{
    struct vip_vi *vi = vipl_vi(h);
    if (!vi || !out)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to a wait");
    struct vi_wait w = {vi, recv, out};
    return vipl_wait(vi->nic, timeout, vi_ready, &w);
}

VIP_RETURN VipSendWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr)
{
    return vi_wait(ViHandle, Timeout, DescriptorPtr, false);
}

VIP_RETURN VipRecvWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR **DescriptorPtr)
{
    return vi_wait(ViHandle, Timeout, DescriptorPtr, true);
}

/* ---- completion queues ----------------------------------------------------------- */

/* Progress every VI whose arrival bit is set on this session's event page. */
static void progress_arrivals(struct vip_nic *n)
{
    for (unsigned w = 0; w < VIA_MAX_VI / 64; w++) {
        if (!atomic_load_explicit(&n->ev->arrived[w], memory_order_relaxed))
            continue;
        uint64_t bits = atomic_exchange(&n->ev->arrived[w], 0);
        while (bits) {
            unsigned id = w * 64 + (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            pthread_mutex_lock(&n->lock);
            struct vip_vi *vi = n->vis[id];
            pthread_mutex_unlock(&n->lock);
            if (!vi)
                continue;
            pthread_mutex_lock(&vi->lock);
            if (vi->fw.tx != FW_TX_IDLE || vi->fw.sq.head != vi->fw.sq.tail)
                fw_tx_progress(&vi->fw);
            fw_rx_progress(&vi->fw);
            bool err = vi->fw.err_pending;
            pthread_mutex_unlock(&vi->lock);
            if (err)
                vipl_deliver_error(vi);
        }
    }
}

struct cq_wait {
    struct vip_cq *cq;
    VIP_VI_HANDLE *vi;
    VIP_BOOLEAN *recv;
};

static bool cq_pop(struct vip_cq *cq, VIP_VI_HANDLE *vi, VIP_BOOLEAN *recv)
{
    struct via_cq_ring *r = cq->fw.ring;
    bool got = false;
    pthread_mutex_lock(&cq->fw.lock);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (atomic_load_explicit(&r->tail, memory_order_acquire) != head) {
        struct via_cq_entry e = r->e[head % r->nslots];
        atomic_store_explicit(&r->head, head + 1, memory_order_release);
        struct vip_vi *v = e.vi_id < VIA_MAX_VI ? cq->nic->vis[e.vi_id] : NULL;
        if (v) {
            *vi = v;
            *recv = e.is_recv ? VIP_TRUE : VIP_FALSE;
            got = true;
        }
    }
    pthread_mutex_unlock(&cq->fw.lock);
    return got;
}

static bool cq_ready(void *arg)
{
    struct cq_wait *w = arg;
    if (cq_pop(w->cq, w->vi, w->recv))
        return true;
    progress_arrivals(w->cq->nic);
    return cq_pop(w->cq, w->vi, w->recv);
}

VIP_RETURN VipCQDone(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE *ViHandle, VIP_BOOLEAN *RecvQueue)
{
    struct vip_cq *cq = vipl_cq(CQHandle);
    if (!cq || !ViHandle || !RecvQueue)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipCQDone");
    if (atomic_load(&cq->fw.ring->overflow))
        return vipl_fail(VIP_ERROR_RESOURCE, "CQ overflowed: completions were lost "
                                             "(create it with more entries)");
    struct cq_wait w = {cq, ViHandle, RecvQueue};
    return cq_ready(&w) ? VIP_SUCCESS : VIP_NOT_DONE;
}

VIP_RETURN VipCQWait(VIP_CQ_HANDLE CQHandle, VIP_ULONG Timeout, VIP_VI_HANDLE *ViHandle,
                     VIP_BOOLEAN *RecvQueue)
{
    struct vip_cq *cq = vipl_cq(CQHandle);
    if (!cq || !ViHandle || !RecvQueue)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipCQWait");
    if (atomic_load(&cq->fw.ring->overflow))
        return vipl_fail(VIP_ERROR_RESOURCE, "CQ overflowed: completions were lost");
    struct cq_wait w = {cq, ViHandle, RecvQueue};
    return vipl_wait(cq->nic, Timeout, cq_ready, &w);
}

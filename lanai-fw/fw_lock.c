/*
 * fw_lock.c - the VI lock's slow paths (fw_lock.h): waiting for the real
 * lock, revoking another thread's bias, granting one.
 */
#include <sched.h>

#include "fw.h"

_Thread_local struct fw_lock_thread *fw_lock_self __attribute__((tls_model("initial-exec")));

/* One record per thread that ever took a VI lock, never reused: a
 * revoker may look at the record of a thread that has ended (its `in` is
 * then NULL for good). Threads beyond these never get a bias. */
#define FW_LOCK_THREADS 1024u
static struct fw_lock_thread threads[FW_LOCK_THREADS];
static _Atomic uint32_t nthreads;

static struct fw_lock_thread *self(void)
{
    if (!fw_lock_self && atomic_load_explicit(&nthreads, memory_order_relaxed) < FW_LOCK_THREADS) {
        uint32_t i = atomic_fetch_add(&nthreads, 1);
        if (i < FW_LOCK_THREADS)
            fw_lock_self = &threads[i];
    }
    return fw_lock_self;
}

/* Spin a little, then give the CPU away: the one we wait for may be
 * preempted on a busy machine. */
static void pause_for(unsigned *spins)
{
    if (++*spins > 256) {
        sched_yield();
        *spins = 0;
    }
}

void fw_lock_contended(struct fw_lock *l)
{
    for (unsigned spins = 0;; ) {
        while (atomic_load_explicit(&l->held, memory_order_relaxed))
            pause_for(&spins);
        if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
            return;
    }
}

bool fw_lock_biasing(void)
{
#if defined(__SANITIZE_THREAD__)
    return false; /* ThreadSanitizer cannot see the membarrier's ordering */
#else
    return fw_asym_on();
#endif
}

bool fw_lock_settle(struct fw_lock *l, bool try)
{
    struct fw_lock_thread *me = self();
    struct fw_lock_thread *o = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (o && o == me)
        return true;
    if (o) {
        /* Another thread's lock: a trylock leaves an owner that is in it
         * (it is busy with the VI right now). */
        if (try && atomic_load_explicit(&o->in, memory_order_relaxed) == l) {
            atomic_store_explicit(&l->held, 0, memory_order_release);
            return false;
        }
        atomic_store(&l->owner, NULL);
        fw_lock_barrier(); /* every thread of ours: see fw_lock.h */
        unsigned spins = 0;
        while (atomic_load_explicit(&o->in, memory_order_acquire) == l)
            pause_for(&spins);
        l->last = me;
        l->streak = 1;
        return true;
    }
    if (l->last != me) {
        l->last = me;
        l->streak = 1;
    } else if (me && fw_lock_biasing()) {
        atomic_store_explicit(&l->owner, me, memory_order_relaxed); /* ours from the next take */
    }
    return true;
}

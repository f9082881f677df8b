/*
 * fw_lock.h - the VI's lock, the one lock of the data path: whoever runs
 * a VI's stages holds it (the NIC's turn), and the host library's record
 * of the VI's queues is under it too (a post, a Done that takes a
 * descriptor). Held for a few hundred nanoseconds at a time.
 *
 * Two ways in:
 *
 *   the real lock: a test-and-set word whose release is a plain store, so
 *     an uncontended lock/unlock costs one locked instruction. A waiter
 *     that does not get it soon yields its CPU (the holder may have been
 *     preempted on a busy machine).
 *
 *   the owner's way: a lock taken FW_LOCK_BIAS_AFTER times in a row by one
 *     thread is biased to that thread, which from then on enters with
 *     plain stores and loads, no locked instruction: it marks itself in
 *     (its fw_lock_thread.in names the lock), then checks that the lock is
 *     still its own. Any other thread takes the real lock and revokes the
 *     bias: it clears owner, makes every running thread of the process
 *     execute a full barrier (membarrier, fw_lock_settle), and waits until
 *     the owner is not in. Either the owner's mark came before that
 *     barrier (the revoker sees it and waits) or its check comes after it
 *     (it sees owner cleared and takes the real lock). So a VI used by one
 *     thread, the usual program, costs no locked instruction per post or
 *     poll; a second thread pays one system call when it first comes.
 *
 * Rules: owner changes only under the real lock (granted by the thread
 * itself, cleared by a revoker); a thread's `in` is written only by that
 * thread. Where the kernel has no membarrier (or under ThreadSanitizer,
 * which cannot see it) no lock is ever biased. A thread holds at most one
 * lock by its bias: a second one, taken while it holds one, goes by the
 * real lock.
 */
#ifndef FW_LOCK_H
#define FW_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct fw_lock;

/* A thread that has taken a lock (fw_lock.c gives each its record, for
 * the life of the process). */
struct fw_lock_thread {
    _Atomic(struct fw_lock *) in; /* the lock it holds by its bias, or NULL */
};
extern _Thread_local struct fw_lock_thread *fw_lock_self
    __attribute__((tls_model("initial-exec")));

#define FW_LOCK_BIAS_AFTER 64u

struct fw_lock {
    _Atomic uint32_t held;                   /* the real lock */
    _Atomic(struct fw_lock_thread *) owner;  /* biased to, or NULL */
    struct fw_lock_thread *last;             /* under held: its last taker */
    uint32_t streak;                         /* under held: last's takes in a row */
};

/* Out of line (fw_lock.c): wait for a held lock; after the real lock is
 * taken, revoke another thread's bias or grant ours (false: a trylock
 * found the owner in, and the real lock is let go again). */
void fw_lock_contended(struct fw_lock *l);
bool fw_lock_settle(struct fw_lock *l, bool try);
/* Are locks biased in this process (membarrier registered, no TSan)? */
bool fw_lock_biasing(void);

/* The owner's way in (true: entered). */
static inline bool fw_lock_owned(struct fw_lock *l)
{
    struct fw_lock_thread *me = fw_lock_self;
    /* (in already set: another lock taken this way is held; this one goes
     * by the real lock, so that `in` keeps naming that one) */
    if (!me || atomic_load_explicit(&l->owner, memory_order_relaxed) != me ||
        atomic_load_explicit(&me->in, memory_order_relaxed))
        return false;
    atomic_store_explicit(&me->in, l, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst); /* the revoker's membarrier orders it */
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == me)
        return true;
    atomic_store_explicit(&me->in, NULL, memory_order_release);
    return false;
}

/* After the real lock is taken: anything to settle about the bias? */
static inline bool fw_lock_unsettled(struct fw_lock *l)
{
    return atomic_load_explicit(&l->owner, memory_order_relaxed) || !fw_lock_self ||
           l->last != fw_lock_self || ++l->streak == FW_LOCK_BIAS_AFTER;
}

static inline void fw_lock(struct fw_lock *l)
{
    if (fw_lock_owned(l))
        return;
    if (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        fw_lock_contended(l);
    if (fw_lock_unsettled(l))
        fw_lock_settle(l, false);
}
static inline bool fw_trylock(struct fw_lock *l)
{
    if (fw_lock_owned(l))
        return true;
    if (atomic_load_explicit(&l->held, memory_order_relaxed) ||
        atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        return false;
    return !fw_lock_unsettled(l) || fw_lock_settle(l, true);
}
static inline void fw_unlock(struct fw_lock *l)
{
    struct fw_lock_thread *me = fw_lock_self;
    if (me && atomic_load_explicit(&me->in, memory_order_relaxed) == l)
        atomic_store_explicit(&me->in, NULL, memory_order_release);
    else
        atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif

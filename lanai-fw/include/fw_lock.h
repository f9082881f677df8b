/*
 * fw_lock.h - the short lock of the data path: a test-and-set lock whose
 * release is a plain store, so an uncontended lock/unlock costs one
 * locked instruction, not the two (and a call) of a mutex. Held for a few
 * hundred nanoseconds at a time: the NIC's state of a VI (one pass over
 * its stages) and the host library's record of a VI's queues (a post, a
 * Done that takes a descriptor); taken on every post and poll. A waiter
 * that does not get it soon yields its CPU (the holder may have been
 * preempted on a busy machine).
 */
#ifndef FW_LOCK_H
#define FW_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct fw_lock {
    _Atomic uint32_t held;
};
/* The lock was held: wait for it out of line, so that the uncontended
 * path of a caller needs no call and no saved registers. */
static __attribute__((noinline, cold)) void fw_lock_contended(struct fw_lock *l)
{
    for (unsigned spins = 0;; spins++) {
        while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
            if (++spins > 256) {
                sched_yield();
                spins = 0;
            }
        }
        if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
            return;
    }
}
static inline void fw_lock(struct fw_lock *l)
{
    if (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        fw_lock_contended(l);
}
static inline bool fw_trylock(struct fw_lock *l)
{
    return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
           !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}
static inline void fw_unlock(struct fw_lock *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif

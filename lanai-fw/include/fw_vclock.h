/*
 * fw_vclock.h - virtual time for the paced profiles (spec-notes/virtual-time.md).
 *
 * Under VIP_CLOCK=virtual a process has one virtual clock. It advances by
 * the modelled costs the host pays (Build, Ring, Done), by the program's
 * own computation between VIPL calls (its threads' CPU time), and by waits,
 * which jump to the next event instead of passing in real time. Every
 * modelled time of the NIC (its stages, when an effect becomes visible) is
 * read against it.
 *
 * Synchronisation is conservative, per connection: each side of a
 * channel promises in its direction's vt_bound that nothing it sends will
 * arrive before that time. A process may advance its clock only up to the
 * smallest promise of its peers (its horizon), so it never runs past a
 * message it has not been shown.
 */
#ifndef FW_VCLOCK_H
#define FW_VCLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct fw_nic;

struct fw_vclock {
    _Atomic uint64_t now;    /* the process's virtual time, ns; only grows */
};
extern struct fw_vclock fw_vclock;
/* Set once, by the first virtual NIC of the process (nic.h reads it). */
extern bool nic_virtual_time;

/* Turn virtual time on for this process (idempotent; the first NIC's
 * profile sets how the program's computation is scaled). */
struct via_profile;
void fw_vclock_start(const struct via_profile *p);

static inline bool fw_vclock_on(void)
{
    return nic_virtual_time;
}

static inline uint64_t fw_vclock_now(void)
{
    return atomic_load_explicit(&fw_vclock.now, memory_order_acquire);
}

/* A VI's connection is made (fw_vi_connect): its direction gets our
 * first promise, and says who we are. */
struct fw_vi;
void fw_vclock_connected(struct fw_vi *vi);

/* One pass of the NIC over its VIs (fw_progress): the clock runs it
 * without calling up into the NIC's files. */
typedef uint64_t fw_progress_fn(struct fw_nic *nic, bool *did, bool *left);
/* The NIC's thread, while every thread of the program is outside the
 * library (computing, or polling memory): move the clock by the CPU time
 * they used since, up to the next held effect and the horizon, with a
 * pass of progress between the horizon and the next event. 2: an effect
 * is due (run the NIC, then fw_vclock_released); 1: it moved; -1: it
 * moved as far as a peer's promise allows, the program computes on (look
 * again soon); 0: nothing to do. */
int fw_vclock_outside(struct fw_nic *nic, fw_progress_fn *progress);
/* The NIC's thread made due effects visible: each thread outside notes
 * its CPU clock now (a poll loop that comes back at once was polling for
 * them: what it spun since they were due is not charged). */
void fw_vclock_released(void);
/* A VI's link is going (nic_vi_disconnect, after it is no longer linked):
 * wake any thread asleep on its peer's promise in rx and wait until it
 * has left, so the mapping may go. */
struct via_chan_dir;
void fw_vclock_unhold(struct fw_vi *vi, struct via_chan_dir *rx);

/* The host library's side (entering and leaving the library, spending a
 * host cost, a wait's step, reading the clock) is nic.h's nic_vt_*. */

#endif

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

/* Turn virtual time on for this process (idempotent). */
void fw_vclock_start(void);

static inline bool fw_vclock_on(void)
{
    return nic_virtual_time;
}

static inline uint64_t fw_vclock_now(void)
{
    return atomic_load_explicit(&fw_vclock.now, memory_order_acquire);
}

/* Advance the clock to t if it is behind (monotonic). */
void fw_vclock_raise(uint64_t t);
/* Charge the calling thread's CPU time since it last left the library
 * (the program's computation), then note nothing more: the library's own
 * work until fw_vclock_leave is not charged. */
void fw_vclock_enter(void);
/* The same, charging at least least_ns (a call that is itself the
 * program's work, such as reading the clock in a loop). */
void fw_vclock_enter_min(uint64_t least_ns);
/* A VI's connection is made (fw_vi_connect): its direction gets our
 * first promise, and says who we are. */
struct fw_vi;
void fw_vclock_connected(struct fw_vi *vi);
/* Inside the library with this NIC: its peers hear we are back, and if
 * one went on without our promise meanwhile, the clock starts from the
 * horizon. */
void fw_vclock_inside(struct fw_nic *nic);
/* Leave the library: the thread's CPU clock is marked, and the NIC's
 * peers are promised nothing before now + lookahead. */
void fw_vclock_leave(struct fw_nic *nic);
/* The call now leaving was a poll that found nothing: a short gap until
 * the next call is the poll loop going round, not computation. */
void fw_vclock_polled_empty(void);

/* The earliest time any peer connected to this NIC may still deliver
 * something: the smallest promise of their channel directions towards us
 * (UINT64_MAX: none). */
uint64_t fw_vclock_horizon(struct fw_nic *nic);
/* Promise every peer of this NIC that nothing we send arrives before `at`. */
void fw_vclock_promise(struct fw_nic *nic, uint64_t at);
/* The least time between a process's now and the arrival at a peer of
 * anything it sends (the profile's switch and transmit step). */
uint64_t fw_vclock_lookahead(const struct fw_nic *nic);

/*
 * A wait with nothing to take: advance the clock towards `next` (the next
 * event we know of: an effect held until its time, a timeout), as far as
 * the horizon allows, and promise our peers what we can. True when the
 * clock reached `next`; false when a peer's promise holds it back (the
 * caller yields the CPU and tries again: the peer has to move first).
 */
bool fw_vclock_wait(struct fw_nic *nic, uint64_t next);

#endif

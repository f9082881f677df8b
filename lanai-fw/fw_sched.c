/*
 * fw_sched.c - the real-time discrete-event scheduler of the paced profiles.
 *
 * Every stage's cost (fw_model.c) is charged to a modelled resource of the
 * NIC, kept in the NIC page shared by all processes on that NIC: the LANai
 * processor is claimed for a whole send (T2-T6) or receive (R3-R6), since
 * the firmware completes each transaction in strict sequence and waits for
 * its DMAs. An effect a host can see (a status word, a received byte) is
 * held until real time reaches its modelled time (fw_release_due), so a
 * program can never observe the NIC being faster than the model.
 *
 * Claims are made in the order the NIC code reaches them; the lock is a
 * spinlock holding the claimer's pid, taken over if that process died.
 */
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"

static void np_lock(struct via_nic_page *np)
{
    uint32_t me = (uint32_t)getpid(), spins = 0;
    for (;;) {
        uint32_t free_ = 0;
        if (atomic_compare_exchange_weak_explicit(&np->lock, &free_, me, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        if (++spins % 100000 == 0) {
            /* Held for long: if its holder is gone, nobody will free it. */
            uint32_t holder = atomic_load(&np->lock);
            if (holder && kill((pid_t)holder, 0) < 0 && errno == ESRCH)
                atomic_compare_exchange_strong(&np->lock, &holder, 0);
        }
        __builtin_ia32_pause();
    }
}

static void np_unlock(struct via_nic_page *np)
{
    atomic_store_explicit(&np->lock, 0, memory_order_release);
}

static uint64_t ld(_Atomic uint64_t *x)
{
    return atomic_load_explicit(x, memory_order_relaxed);
}

/*
 * When does the linear doorbell scan find a doorbell rung at ring_ns?
 * The firmware polls the doorbell pairs one after another (VI 0, 1, ...,
 * then its command queue), poll_ns each, from the moment it last became
 * idle; while it is busy it polls nothing. A VI in slot s is looked at
 * (s + 1) * poll_ns into each round.
 */
static uint64_t doorbell_found(const struct via_nic_page *np, uint32_t vi_id, uint64_t ring_ns,
                               uint64_t idle_since)
{
    const struct via_profile *p = &np->prof;
    if (p->hw_doorbell)
        return ring_ns;
    uint32_t slots = atomic_load_explicit(&np->scan_slots, memory_order_relaxed);
    if (slots < 2)
        slots = 2;
    if (slots > VIA_MAX_VI + 1)
        slots = VIA_MAX_VI + 1;
    uint32_t slot = vi_id < slots - 1 ? vi_id : slots - 2;
    double period = slots * p->poll_ns;
    double at = (slot + 1) * p->poll_ns;
    if (ring_ns <= idle_since)
        return idle_since + (uint64_t)at;
    double since = (double)(ring_ns - idle_since) - at;
    double rounds = since <= 0 ? 0 : __builtin_ceil(since / period);
    return idle_since + (uint64_t)(at + rounds * period);
}

static uint64_t claim(struct via_nic_page *np, uint64_t ready, uint64_t dur)
{
    uint64_t busy = ld(&np->lanai_busy_until);
    uint64_t start = ready > busy ? ready : busy;
    atomic_store_explicit(&np->lanai_busy_until, start + dur, memory_order_relaxed);
    atomic_store_explicit(&np->lanai_idle_since, start + dur, memory_order_relaxed);
    return start;
}

uint64_t fw_sched_send(struct fw_nic *nic, uint32_t vi_id, uint64_t ring_ns, uint64_t dur)
{
    struct via_nic_page *np = nic->np;
    np_lock(np);
    uint64_t idle = ld(&np->lanai_idle_since);
    uint64_t busy = ld(&np->lanai_busy_until);
    /* Rung while the LANai was busy: found when it is back in its loop. */
    uint64_t found = doorbell_found(np, vi_id, ring_ns > busy ? ring_ns : busy,
                                    ring_ns > busy ? idle : busy);
    uint64_t start = claim(np, found, dur);
    atomic_store_explicit(&np->hdma_busy_until, start + dur, memory_order_relaxed);
    np_unlock(np);
    return start;
}

uint64_t fw_sched_recv(struct fw_nic *nic, uint64_t arrive_ns, uint64_t dur)
{
    struct via_nic_page *np = nic->np;
    np_lock(np);
    /* The net receive DMA takes packets one at a time as they arrive. */
    uint64_t nrecv = ld(&np->nrecv_busy_until);
    if (arrive_ns < nrecv)
        arrive_ns = nrecv;
    atomic_store_explicit(&np->nrecv_busy_until, arrive_ns, memory_order_relaxed);
    uint64_t start = claim(np, arrive_ns, dur);
    np_unlock(np);
    return start;
}

bool fw_release_due(struct fw_nic *nic, uint64_t t)
{
    if (hal_now_ns() >= t)
        return true;
    if (!nic->next_release || t < nic->next_release)
        nic->next_release = t;
    return false;
}

void fw_spin_until(uint64_t t)
{
    while (hal_now_ns() < t)
        __builtin_ia32_pause();
}

void fw_account(struct fw_nic *nic, enum via_stage st, uint32_t vi, uint32_t seq,
                uint32_t len, double dur_ns)
{
    if (!nic->np || st >= VIA_ST_NSTAGES)
        return;
    atomic_fetch_add_explicit(&nic->np->stage_ns[st], (uint64_t)dur_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&nic->np->stage_cnt[st], 1, memory_order_relaxed);
    if (fw_tracing(nic))
        fw_trace(nic, st, vi, seq, len, (uint32_t)dur_ns);
}

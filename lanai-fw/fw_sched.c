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
 *
 * Everything here is in a page every process on the NIC may write, and a
 * process may distort its own timing but never stop the others': a time
 * read from the page (or from a peer's packet) is taken no further ahead
 * of now than FW_SCHED_AHEAD_NS, and a lock held longer than
 * FW_SCHED_LOCK_NS by anyone, alive or not, is taken over (a legitimate
 * holder keeps it for a few hundred nanoseconds).
 */
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"

#define FW_SCHED_AHEAD_NS 1000000000ull /* 1 s: more backlog than any real NIC queue */
/* Virtual time: a peer may be far ahead of us (it computed meanwhile). */
#define FW_SCHED_AHEAD_VIRTUAL_NS 3600000000000ull /* an hour */
#define FW_SCHED_LOCK_NS 20000000ull    /* 20 ms */

static void np_lock(struct via_nic_page *np)
{
    uint32_t me = (uint32_t)getpid(), spins = 0;
    uint64_t since = 0;
    for (;;) {
        uint32_t free_ = 0;
        if (atomic_compare_exchange_weak_explicit(&np->lock, &free_, me, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        if (++spins % 1024 == 0) {
            uint64_t now = hal_now_ns();
            if (!since)
                since = now;
            /* Held for long: its holder died, or holds it to stop us. */
            uint32_t holder = atomic_load(&np->lock);
            bool dead = holder && kill((pid_t)holder, 0) < 0 && errno == ESRCH;
            if (holder && (dead || now - since > FW_SCHED_LOCK_NS) &&
                atomic_compare_exchange_strong(&np->lock, &holder, me))
                return;
        }
        hal_cpu_relax();
    }
}

/* A time read from shared state, no further ahead than the window. */
static uint64_t ahead_bounded(uint64_t t, uint64_t now)
{
    uint64_t w = fw_vclock_on() ? FW_SCHED_AHEAD_VIRTUAL_NS : FW_SCHED_AHEAD_NS;
    return t > now + w ? now + w : t;
}

static void np_unlock(struct via_nic_page *np)
{
    atomic_store_explicit(&np->lock, 0, memory_order_release);
}

/* A busy-until time of the shared page, bounded. */
static uint64_t ld(_Atomic uint64_t *x)
{
    return ahead_bounded(atomic_load_explicit(x, memory_order_relaxed), hal_model_now_ns());
}

/* A uniform draw in [0, 1): the phase of an unsynchronised clock. In
 * virtual time the sequence is the same every run, so a run repeats. */
static double phase(void)
{
    static _Thread_local uint64_t x;
    if (!x)
        x = fw_vclock_on() ? 0x9e3779b97f4a7c15ull
                           : (hal_now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (double)(x >> 11) / 9007199254740992.0;
}

/*
 * When does the linear doorbell scan find a doorbell rung at ring_ns?
 * The firmware polls the doorbell pairs one after another (VI 0, 1, ...,
 * then its command queue), a step of its loop each (fw_pair_poll: on the
 * extension firmware a VI has a third doorbell); while it is busy with a
 * message it polls nothing. A doorbell rung while the LANai is idle is
 * found somewhere within one round: host and NIC run on unsynchronised
 * clocks, so the scan's position at that moment is uniform (the paper:
 * from zero if rung just before it is polled, to a whole round if just
 * after). One rung while the LANai is busy is found when the loop,
 * restarted from the first pair, reaches its slot.
 */
static uint64_t doorbell_found(const struct fw_nic *nic, uint32_t vi_id, uint64_t ring_ns,
                               uint64_t busy_until, bool ext_fw)
{
    const struct via_profile *p = nic->prof;
    const struct via_nic_page *np = nic->np;
    if (p->hw_doorbell)
        return ring_ns;
    uint32_t slots = atomic_load_explicit(&np->scan_slots, memory_order_relaxed);
    if (slots < 2)
        slots = 2;
    if (slots > VIA_MAX_VI + 1)
        slots = VIA_MAX_VI + 1;
    uint32_t slot = vi_id < slots - 1 ? vi_id : slots - 2;
    if (ring_ns <= busy_until)
        return busy_until + (uint64_t)((slot + 1) * fw_pair_poll(p, ext_fw));
    return ring_ns + (uint64_t)(phase() * fw_scan_round(p, slots, ext_fw));
}

/*
 * When does the firmware notice a packet that arrived at arrive_ns? Its
 * loop looks at the network once per step (after each doorbell pair): a
 * packet arriving while the LANai is idle is noticed within one step,
 * uniformly; one that arrived while it was busy, one step after it is free.
 */
static uint64_t packet_noticed(const struct fw_nic *nic, uint64_t arrive_ns, uint64_t busy_until)
{
    const struct via_profile *p = nic->prof;
    double step = fw_pair_poll(p, false);
    if (arrive_ns <= busy_until)
        return busy_until + (uint64_t)step;
    return arrive_ns + (uint64_t)(phase() * step);
}

static uint64_t claim(struct via_nic_page *np, uint64_t ready, uint64_t dur)
{
    uint64_t busy = ld(&np->lanai_busy_until);
    uint64_t start = ready > busy ? ready : busy;
    atomic_store_explicit(&np->lanai_busy_until, start + dur, memory_order_relaxed);
    atomic_store_explicit(&np->lanai_idle_since, start + dur, memory_order_relaxed);
    return start;
}

uint64_t fw_sched_send(struct fw_nic *nic, uint32_t vi_id, uint64_t ring_ns, uint64_t dur,
                       bool ext_fw)
{
    struct via_nic_page *np = nic->np;
    np_lock(np);
    uint64_t found = doorbell_found(nic, vi_id, ring_ns, ld(&np->lanai_busy_until), ext_fw);
    uint64_t start = claim(np, found, dur);
    atomic_store_explicit(&np->hdma_busy_until, start + dur, memory_order_relaxed);
    np_unlock(np);
    return start;
}

uint64_t fw_sched_recv(struct fw_nic *nic, uint64_t arrive_ns, uint64_t dur)
{
    struct via_nic_page *np = nic->np;
    /* A peer's packet says when it arrives: believed within the window. */
    arrive_ns = ahead_bounded(arrive_ns, hal_model_now_ns());
    np_lock(np);
    /* The net receive DMA takes packets one at a time as they arrive. */
    uint64_t nrecv = ld(&np->nrecv_busy_until);
    if (arrive_ns < nrecv)
        arrive_ns = nrecv;
    atomic_store_explicit(&np->nrecv_busy_until, arrive_ns, memory_order_relaxed);
    uint64_t seen = packet_noticed(nic, arrive_ns, ld(&np->lanai_busy_until));
    uint64_t start = claim(np, seen, dur);
    np_unlock(np);
    return start;
}

bool fw_release_due(struct fw_vi *vi, uint64_t t)
{
    if (hal_model_now_ns() >= t) {
        /* counted for the waits: the host may be polling memory for it */
        if (fw_vclock_on())
            atomic_fetch_add_explicit(&vi->nic->vt_released, 1, memory_order_release);
        return true;
    }
    if (!vi->held || t < vi->held)
        vi->held = t;
    return false;
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

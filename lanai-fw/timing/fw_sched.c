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
 * Claims are made in the order the NIC code reaches them, each a
 * compare-and-swap on its resource's word: there is no lock for a process
 * to hold.
 *
 * Everything here is in a page every process on the NIC may write, and a
 * process may distort its own timing but never delay another's message by
 * more than the model's own worst case: a busy time read from the page is
 * believed only up to the end of this process's own claims (kept
 * privately) plus one largest transaction of every other VI on the NIC
 * (each VI's pipelines hold one claim at a time; the VI count is vipd's,
 * in this session's status page, less this NIC handle's own VIs); a
 * peer's packet's arrival time, up to that and one largest transaction
 * more (the peer's own backlog). A forged time is then
 * overwritten by the next claim: a process with no VI of its own delays
 * nobody, one with VIs no more than its VIs' largest messages could.
 */
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"

/* Virtual time: a peer may be far ahead of us (it computed meanwhile). */
#define FW_SCHED_AHEAD_VIRTUAL_NS 3600000000000ull /* an hour */

/* The doorbell pairs the firmware scans, as vipd says (our status page). */
static uint32_t scan_slots(const struct fw_nic *nic)
{
    uint32_t slots = nic->st ? atomic_load_explicit(&nic->st->scan_slots, memory_order_relaxed) : 0;
    if (slots < 2)
        slots = 2;
    return slots > VIA_MAX_VI + 1 ? VIA_MAX_VI + 1 : slots;
}

/* The LANai time one VI may hold claimed at once: a send (or the read
 * response it serves: the same stages) and a receive, of the largest size. */
static uint64_t vi_worst(struct fw_nic *nic)
{
    if (!nic->vi_worst_ns) {
        const struct via_profile *p = nic->prof;
        double send = 0, recv = 0;
        for (enum via_stage st = VIA_ST_T2_BELL; st <= VIA_ST_T6_UPDT; st++)
            send += fw_cost_stage(p, st, FW_EXT_STANDARD, VIA_MAX_TRANSFER, VIA_MAX_SEGS);
        for (enum via_stage st = VIA_ST_R3_RECEIVE; st <= VIA_ST_R6_UPDT; st++)
            recv += fw_cost_stage(p, st, FW_EXT_STANDARD, VIA_MAX_TRANSFER, VIA_MAX_SEGS);
        nic->vi_worst_ns = (uint64_t)(send + recv) + 1;
    }
    return nic->vi_worst_ns;
}

uint64_t fw_sched_window_ns(struct fw_nic *nic)
{
    uint32_t all = nic->st ? atomic_load_explicit(&nic->st->nvis, memory_order_relaxed) : 0;
    uint32_t own = atomic_load_explicit(&nic->nvis_own, memory_order_relaxed);
    if (all > VIA_MAX_VI)
        all = VIA_MAX_VI;
    return all > own ? (uint64_t)(all - own) * vi_worst(nic) : 0;
}

/* The latest time a shared busy word may hold that we believe. */
static uint64_t belief(struct fw_nic *nic, uint64_t now)
{
    if (fw_vclock_on())
        return now + FW_SCHED_AHEAD_VIRTUAL_NS;
    uint64_t own = atomic_load_explicit(&nic->own_until, memory_order_relaxed);
    return (own > now ? own : now) + fw_sched_window_ns(nic);
}

static uint64_t bounded(uint64_t t, uint64_t limit)
{
    return t > limit ? limit : t;
}

/* A busy-until word of the shared page, as far as it is believed (limit:
 * belief() of this claim). */
static uint64_t ld(_Atomic uint64_t *x, uint64_t limit)
{
    return bounded(atomic_load_explicit(x, memory_order_relaxed), limit);
}

/* *w = max(*w, t). */
static void raise_word(_Atomic uint64_t *w, uint64_t t)
{
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);
    while (t > cur &&
           !atomic_compare_exchange_weak_explicit(w, &cur, t, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

/* Take `dur` of the resource *w from the first moment >= ready it is free
 * (as far as believed): the start. A forged far time is overwritten. */
static uint64_t take(struct fw_nic *nic, _Atomic uint64_t *w, uint64_t ready, uint64_t dur,
                     uint64_t limit)
{
    uint64_t cur = atomic_load_explicit(w, memory_order_relaxed), start;
    do {
        uint64_t busy = bounded(cur, limit);
        start = ready > busy ? ready : busy;
    } while (!atomic_compare_exchange_weak_explicit(w, &cur, start + dur, memory_order_relaxed,
                                                    memory_order_relaxed));
    raise_word(&nic->own_until, start + dur);
    return start;
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
    if (p->hw_doorbell)
        return ring_ns;
    uint32_t slots = scan_slots(nic);
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

/* The LANai for dur from ready: the start. */
static uint64_t claim(struct fw_nic *nic, uint64_t ready, uint64_t dur, uint64_t limit)
{
    struct via_nic_page *np = nic->np;
    uint64_t start = take(nic, &np->lanai_busy_until, ready, dur, limit);
    atomic_store_explicit(&np->lanai_idle_since, start + dur, memory_order_relaxed);
    return start;
}

uint64_t fw_sched_send(struct fw_nic *nic, uint32_t vi_id, uint64_t ring_ns, uint64_t dur,
                       bool ext_fw)
{
    struct via_nic_page *np = nic->np;
    uint64_t limit = belief(nic, hal_model_now_ns());
    uint64_t found = doorbell_found(nic, vi_id, ring_ns, ld(&np->lanai_busy_until, limit), ext_fw);
    uint64_t start = claim(nic, found, dur, limit);
    /* the host DMA engine and I/O bus serve the send meanwhile */
    raise_word(&np->hdma_busy_until, start + dur);
    return start;
}

uint64_t fw_sched_recv(struct fw_nic *nic, uint64_t arrive_ns, uint64_t dur)
{
    struct via_nic_page *np = nic->np;
    /* A peer's packet says when it arrives: believed as far as the page,
     * and one largest transaction of the peer's further (its NIC's backlog:
     * a peer that lies delays us no more than its largest messages could). */
    uint64_t limit = belief(nic, hal_model_now_ns());
    arrive_ns = bounded(arrive_ns, limit + vi_worst(nic));
    /* The net receive DMA takes packets one at a time as they arrive. */
    arrive_ns = take(nic, &np->nrecv_busy_until, arrive_ns, 0, limit);
    uint64_t seen = packet_noticed(nic, arrive_ns, ld(&np->lanai_busy_until, limit));
    return claim(nic, seen, dur, limit);
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

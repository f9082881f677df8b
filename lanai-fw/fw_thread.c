/*
 * fw_thread.c - the NIC's own thread: the LANai's main loop, for when no
 * host thread lends the NIC a CPU.
 *
 * A host thread that polls or waits in VIPL does the NIC's work inline (no
 * hand-over, no system call). This thread covers the rest: a receiver that
 * watches a descriptor's Status word in memory, a sender that computes
 * after posting, a process asleep outside VIPL. It must cost the polling
 * case nothing, so it runs a small state machine:
 *
 *   RUN    visit every VI with work (arrival bits, held effects, stalled
 *          sends, wakes owed) until there is none for FW_SPIN_NS;
 *   DOZE   host threads are progressing (their poll counter moves): let
 *          them, and look again after FW_DOZE_NS, not announced, so peers
 *          pay no wake-up; a look that finds nothing doubles the next doze
 *          (up to FW_DOZE_MAX_NS). A VI nobody polls waits at most that long;
 *   SLEEP  nobody polls: announce ourselves on the event page (sleepers),
 *          so a peer that publishes, or a local completion, wakes us; wake
 *          by ourselves at the next held effect, and (paced profiles) every
 *          FW_DOZE_NS while work was recent, since a paced post leaves the
 *          peer's wake to us instead of paying for it;
 *   DEEP   SLEEP after FW_DEEP_NS without work: no timer (but one of a
 *          second while a local peer is watched: fw_live.c); a paced
 *          post that leaves us work wakes us (once, not per message).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"

#define FW_SPIN_NS 20000u     /* poll for work this long before sleeping */
#define FW_DOZE_NS 500000u    /* look again this often while the host polls ... */
#define FW_DOZE_MAX_NS 16000000u /* ... backing off to this while it finds nothing */
#define FW_DEEP_NS 20000000u  /* no work for this long: sleep with no timer ... */
#define FW_LIVE_SLEEP_NS 1000000000u /* ... but this one while a peer is watched */

const char *const fw_thread_state_name[FW_THREAD_NSTATES] = {
    [FW_THREAD_RUN] = "run",
    [FW_THREAD_DOZE] = "doze",
    [FW_THREAD_SLEEP] = "sleep",
    [FW_THREAD_DEEP] = "deep",
};

static void futex_wait_ns(_Atomic uint32_t *w, uint32_t val, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    syscall(SYS_futex, w, FUTEX_WAIT, val, ns == UINT64_MAX ? NULL : &ts, NULL, 0);
}

/* (b) of the wake-up protocol: anything to do? Our own work bits, and one
 * pass over the VIs (an arrival bit stays set while its VI is only idle,
 * so a set bit is not work: fw_progress.c). */
static bool work_found(struct fw_nic *nic)
{
    for (unsigned w = 0; w < VIA_MAX_VI / 64; w++)
        if (atomic_load_explicit(&nic->work[w], memory_order_relaxed))
            return true;
    bool did = false;
    (void)fw_progress(nic, &did, NULL);
    return did;
}

struct fw_loop {
    struct fw_nic *nic;
    uint32_t polls_seen;
    uint64_t last_work;  /* when we last found something to do */
    uint64_t held;       /* earliest held effect, 0 = none */
    uint32_t all_seen;   /* host_polls_all when the doze began */
    uint64_t doze_ns;    /* how long the next doze lasts */
    uint32_t released;   /* virtual time: the NIC's count of released effects */
};

static void set_state(struct fw_nic *nic, enum fw_thread_state s)
{
    atomic_store_explicit(&nic->thread_state, s, memory_order_seq_cst);
}

static enum fw_thread_state st_run(struct fw_loop *lp)
{
    struct fw_nic *nic = lp->nic;
    bool did = false, left = false;
    lp->held = fw_progress(nic, &did, &left);
    /* Virtual time: a held effect comes due when the host's clock gets
     * there, not as real time passes here. The host's clock moves in its
     * calls, and here by the CPU time of a program that stays outside the
     * library (polling memory, computing): we keep running while it does. */
    if (fw_vclock_on()) {
        lp->held = 0;
        int o = fw_vclock_outside(nic, fw_progress);
        if (o == 2) {
            bool d2 = false;
            (void)fw_progress(nic, &d2, NULL);
        }
        uint32_t rel = atomic_load_explicit(&nic->vt_released, memory_order_acquire);
        if (o == 2 || rel != lp->released) {
            lp->released = rel;
            fw_vclock_released();
        }
        if (o < 0)
            nic_vt_hold(nic); /* a peer is behind: let it move */
        if (o)
            did = true;
    }
    uint64_t now = hal_now_ns();
    /* A host thread is progressing: leave it the work, even while there is
     * work. Two parties on one VI's stream only take turns at its lock,
     * and on two cores they take the CPU from the peer. A VI the pass left
     * to a host thread says so too: a host inside a long turn (a network
     * link's system calls) bumps no counter meanwhile, and without it we
     * would spin into SLEEP, find our own work bit and go round again,
     * a membarrier each time. */
    uint32_t polls = atomic_load_explicit(&nic->host_polls, memory_order_relaxed);
    if (polls != lp->polls_seen || left) {
        lp->polls_seen = polls;
        /* Each look that found a VI nobody polled keeps the doze short;
         * each that found nothing doubles it: a stream whose host polls
         * its only VI is then disturbed every 16 ms, not every 0.5 ms
         * (the wake-ups cost it a sixth of its bandwidth on this VM). */
        if (did) {
            lp->last_work = now;
            lp->doze_ns = FW_DOZE_NS;
        } else if (lp->doze_ns < FW_DOZE_MAX_NS) {
            lp->doze_ns *= 2;
        }
        return FW_THREAD_DOZE;
    }
    lp->doze_ns = FW_DOZE_NS;
    if (did) {
        lp->last_work = now;
        return FW_THREAD_RUN;
    }
    if (lp->held && lp->held <= now + FW_SPIN_NS)
        return FW_THREAD_RUN; /* a held effect is due any moment */
    if (now - lp->last_work < FW_SPIN_NS) {
        hal_cpu_relax();
        return FW_THREAD_RUN;
    }
    return now - lp->last_work < FW_DEEP_NS ? FW_THREAD_SLEEP : FW_THREAD_DEEP;
}

static enum fw_thread_state st_doze(struct fw_loop *lp)
{
    struct fw_nic *nic = lp->nic;
    lp->all_seen = atomic_load_explicit(&nic->host_polls_all, memory_order_relaxed);
    uint64_t ns = lp->doze_ns, now = hal_now_ns();
    if (lp->held && lp->held > now && lp->held - now < ns)
        ns = lp->held - now;
    set_state(nic, FW_THREAD_DOZE);
    futex_wait_ns(&nic->doze, 0, ns);
    set_state(nic, FW_THREAD_RUN);
    nic_peers_check(nic);
    /* A host thread that polls the CQs looks after every VI: doze on. */
    if (atomic_load_explicit(&nic->host_polls_all, memory_order_relaxed) != lp->all_seen &&
        !atomic_load_explicit(&nic->stop, memory_order_relaxed))
        return FW_THREAD_DOZE;
    return FW_THREAD_RUN; /* one pass: a VI nobody polls waits at most a doze */
}

/* SLEEP and DEEP: announced, so producers wake us (fw_notify's protocol). */
static enum fw_thread_state sleep_announced(struct fw_loop *lp, bool deep)
{
    struct fw_nic *nic = lp->nic;
    struct via_event_page *ev = nic->ev;
    uint32_t seq = atomic_load(&ev->seq);
    set_state(nic, deep ? FW_THREAD_DEEP : FW_THREAD_SLEEP);
    atomic_fetch_add(&ev->sleepers, 1); /* (a) */
    fw_net_will_sleep(nic);
    fw_sleep_fence();
    if (!atomic_load(&nic->stop) && !work_found(nic)) { /* (b) */
        uint64_t ns = UINT64_MAX, now = hal_now_ns();
        if (lp->held)
            ns = lp->held > now ? lp->held - now : 0;
        if (!deep && nic->paced && ns > FW_DOZE_NS)
            ns = FW_DOZE_NS;
        /* a watched peer may die with nobody to tell us (fw_live.c) */
        if (atomic_load_explicit(&nic->nlive, memory_order_relaxed) && ns > FW_LIVE_SLEEP_NS)
            ns = FW_LIVE_SLEEP_NS;
        if (ns)
            futex_wait_ns(&ev->seq, seq, ns); /* (c) */
    }
    atomic_fetch_sub(&ev->sleepers, 1);
    nic_peers_check(nic);
    set_state(nic, FW_THREAD_RUN);
    lp->polls_seen = atomic_load_explicit(&nic->host_polls, memory_order_relaxed);
    return FW_THREAD_RUN;
}

static enum fw_thread_state st_sleep(struct fw_loop *lp)
{
    return sleep_announced(lp, false);
}

static enum fw_thread_state st_deep(struct fw_loop *lp)
{
    return sleep_announced(lp, true);
}

typedef enum fw_thread_state (*fw_thread_fn)(struct fw_loop *);
static const fw_thread_fn thread_state_fn[FW_THREAD_NSTATES] = {
    [FW_THREAD_RUN] = st_run,
    [FW_THREAD_DOZE] = st_doze,
    [FW_THREAD_SLEEP] = st_sleep,
    [FW_THREAD_DEEP] = st_deep,
};

static void *fw_main(void *arg)
{
    struct fw_loop lp = {.nic = arg, .last_work = hal_now_ns(), .doze_ns = FW_DOZE_NS};
    enum fw_thread_state s = FW_THREAD_RUN;
    while (!atomic_load_explicit(&lp.nic->stop, memory_order_acquire))
        s = thread_state_fn[s](&lp);
    return NULL;
}

void fw_thread_start(struct fw_nic *nic)
{
    if (!nic->own_thread || nic->thread_started)
        return;
    if (pthread_create(&nic->thread, NULL, fw_main, nic) == 0)
        nic->thread_started = true;
}

void fw_thread_stop(struct fw_nic *nic)
{
    if (!nic->thread_started)
        return;
    atomic_store_explicit(&nic->stop, 1, memory_order_release);
    atomic_fetch_add(&nic->doze, 1);
    syscall(SYS_futex, &nic->doze, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    atomic_fetch_add(&nic->ev->seq, 1);
    syscall(SYS_futex, &nic->ev->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    pthread_join(nic->thread, NULL);
    nic->thread_started = false;
}

void fw_thread_kick(struct fw_nic *nic)
{
    /* Only a thread in DEEP sleep has no timer that would find the work.
     * The caller's work bit, then our load of the state; the thread's state
     * store, then its load of the work bits: a fence on each side. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&nic->thread_state, memory_order_seq_cst) != FW_THREAD_DEEP)
        return;
    atomic_fetch_add(&nic->ev->seq, 1);
    syscall(SYS_futex, &nic->ev->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

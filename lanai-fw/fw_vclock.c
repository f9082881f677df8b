/*
 * fw_vclock.c - a process's virtual clock and the promises between peers
 * (fw_vclock.h; the scheme and why: spec-notes/virtual-time.md).
 *
 * The promises are Chandy-Misra-Bryant null messages kept in shared
 * memory: the word vt_bound of a channel direction is written only by
 * that direction's sender and only grows; its receiver reads it. A peer
 * that computes keeps its promise at its clock + the lookahead; a peer
 * that waits promises up to its own next event or its horizon, whichever
 * is first, + the lookahead. Since the lookahead is more than zero, the
 * promises of waiting peers climb each other's and the smallest next
 * event of all is always reached: no deadlock while every party is inside
 * a VIPL wait or computing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <string.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_vclock.h"

struct fw_vclock fw_vclock;
bool nic_virtual_time;

/* The CPU clock of this thread when it last left the library (0: never),
 * how deep in the library it is (a wait calls Done: counted once), and
 * whether its last call was a poll that found nothing. */
static _Thread_local uint64_t tl_left_cpu, tl_left_wall;
static _Thread_local unsigned tl_depth;
static _Thread_local bool tl_polled_empty;
/* How many rounds in a row a peer's promise held this thread back. */
static _Thread_local unsigned tl_held_back;

/* Held back this many rounds by a peer outside the library, a waiter looks
 * whether that peer is blocked in the kernel (asleep in waitpid, read, a
 * lock...): it can send nothing until it is back, and then it starts from
 * its horizon. */
#define FW_VCLOCK_LOOK_ROUNDS 2000u

static uint64_t horizon(struct fw_nic *nic, bool skip_blocked);
static bool promise(struct fw_nic *nic, uint64_t at, uint32_t outside);

/* What one read of the thread's CPU clock (a system call) and of the
 * monotonic clock (the vDSO) cost, taken off every charge. */
static uint64_t read_cost_ns, wall_cost_ns;

/* A gap shorter than this in real time was spent on the CPU (a thread
 * that lost its CPU meanwhile shows a scheduler's slice): it is measured
 * with the cheap monotonic clock; a longer one with the thread's CPU clock. */
#define FW_VCLOCK_WALL_NS 20000u

/* After a poll that found nothing, a gap shorter than this is the
 * program's poll loop going round, which in real time depends on how
 * fast a peer moves: waiting, not computation. */
#define FW_VCLOCK_SPIN_NS 2000u

static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void fw_vclock_start(void)
{
    if (nic_virtual_time)
        return;
    /* The typical cost of a read (the median of back-to-back pairs): a
     * charge is the CPU time between two reads, less one read. */
    enum { N = 2001 };
    static uint64_t d[N];
    for (unsigned i = 0; i < N; i++) {
        uint64_t a = thread_cpu_ns(), b = thread_cpu_ns();
        d[i] = b - a;
    }
    qsort(d, N, sizeof d[0], cmp_u64);
    read_cost_ns = d[N / 2];
    for (unsigned i = 0; i < N; i++) {
        uint64_t a = hal_now_ns(), b = hal_now_ns();
        d[i] = b - a;
    }
    qsort(d, N, sizeof d[0], cmp_u64);
    wall_cost_ns = d[N / 2];
    nic_virtual_time = true;
}

void nic_vt_polled_empty(void)
{
    tl_polled_empty = true;
}

static void raise_to(uint64_t t)
{
    uint64_t cur = atomic_load_explicit(&fw_vclock.now, memory_order_relaxed);
    while (cur < t && !atomic_compare_exchange_weak_explicit(&fw_vclock.now, &cur, t,
                                                            memory_order_acq_rel,
                                                            memory_order_relaxed))
        ;
}

/* Charge the calling thread's computation since it last left the library,
 * at least least_ns (a call that is itself the program's work, such as a
 * clock read in a loop); the library's own work until nic_vt_leave is not
 * charged. */
static void enter_min(uint64_t least_ns)
{
    if (!nic_virtual_time || tl_depth++ || !tl_left_cpu)
        return;

    uint64_t wall = hal_now_ns(), d;
    if (wall - tl_left_wall < FW_VCLOCK_WALL_NS) {
        d = wall - tl_left_wall > wall_cost_ns ? wall - tl_left_wall - wall_cost_ns : 0;
    } else {
        uint64_t cpu = thread_cpu_ns();
        d = cpu > tl_left_cpu + read_cost_ns ? cpu - tl_left_cpu - read_cost_ns : 0;
    }
    if (tl_polled_empty && d < FW_VCLOCK_SPIN_NS)
        d = 0;
    if (d < least_ns)
        d = least_ns;
    if (d)
        atomic_fetch_add_explicit(&fw_vclock.now, d, memory_order_acq_rel);
    tl_left_cpu = 0;
    tl_polled_empty = false;
}

static uint64_t lookahead(const struct fw_nic *nic)
{
    uint64_t la = (uint64_t)(nic->prof->switch_ns + nic->prof->xmit_ns);
    return la ? la : 1;
}

/* Each linked VI with an open shared-memory channel, and the direction
 * `from` of it: ours (true) or the peer's. */
#define FOR_LINKED(nic, vi, w, b)                                                       \
    for (unsigned w = 0; w < VIA_MAX_VI / 64; w++)                                      \
        for (uint64_t b = atomic_load_explicit(&(nic)->linked[w], memory_order_acquire); \
             b; b &= b - 1)                                                              \
            for (struct fw_vi *vi = (nic)->vis[w * 64 + (unsigned)__builtin_ctzll(b)];   \
                 vi; vi = NULL)

static struct via_chan_dir *dir_of(const struct fw_vi *vi, bool ours)
{
    struct via_chan *c = vi->chan;
    if (!c || c->link != VIA_LINK_SHM ||
        atomic_load_explicit(&c->state, memory_order_acquire) != VIA_CHAN_OPEN)
        return NULL;
    return &c->dir[ours ? vi->side : 1 - vi->side];
}

/* Is the process pid asleep in the kernel (state S or D of its main
 * thread)? A peer outside the library that is, waits for something
 * other than us. */
static bool blocked(uint32_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    return p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D');
}

static uint64_t horizon(struct fw_nic *nic, bool skip_blocked)
{
    uint64_t h = UINT64_MAX;
    FOR_LINKED(nic, vi, w, b) {
        const struct via_chan_dir *d = dir_of(vi, false);
        if (!d)
            continue;
        uint64_t p = atomic_load_explicit(&d->vt_bound, memory_order_acquire);
        if (p >= h)
            continue;
        if (skip_blocked && atomic_load_explicit(&d->vt_outside, memory_order_acquire) &&
            blocked(atomic_load_explicit(&d->vt_pid, memory_order_relaxed))) {
            atomic_store_explicit((_Atomic uint32_t *)&d->vt_skipped, 1, memory_order_release);
            continue;
        }
        h = p;
    }
    return h;
}

/* Promise every peer of this NIC that nothing we send arrives before `at`
 * (0: promise nothing new), and say whether we are outside the library.
 * True if a peer went on without our promise meanwhile (told once). */
static bool promise(struct fw_nic *nic, uint64_t at, uint32_t outside)
{
    uint32_t me = (uint32_t)getpid();
    bool skipped = false;
    FOR_LINKED(nic, vi, w, b) {
        struct via_chan_dir *d = dir_of(vi, true);
        if (!d)
            continue;
        /* only ever grows: a promise once made is kept */
        uint64_t cur = atomic_load_explicit(&d->vt_bound, memory_order_relaxed);
        if (at > cur)
            atomic_store_explicit(&d->vt_bound, at, memory_order_release);
        if (atomic_load_explicit(&d->vt_pid, memory_order_relaxed) != me)
            atomic_store_explicit(&d->vt_pid, me, memory_order_relaxed);
        if (atomic_load_explicit(&d->vt_outside, memory_order_relaxed) != outside)
            atomic_store_explicit(&d->vt_outside, outside, memory_order_release);
        if (!outside && atomic_load_explicit(&d->vt_skipped, memory_order_acquire))
            skipped |= atomic_exchange(&d->vt_skipped, 0) != 0;
    }
    return skipped;
}

void fw_vclock_connected(struct fw_vi *vi)
{
    if (!nic_virtual_time)
        return;
    /* A new connection starts with our promise, our pid, and "outside":
     * the program goes back to its own work from here. */
    struct via_chan *c = vi->chan;
    if (!c || c->link != VIA_LINK_SHM)
        return;
    struct via_chan_dir *d = &c->dir[vi->side];
    atomic_store_explicit(&d->vt_pid, (uint32_t)getpid(), memory_order_relaxed);
    atomic_store_explicit(&d->vt_bound, fw_vclock_now() + lookahead(vi->nic),
                          memory_order_release);
    atomic_store_explicit(&d->vt_outside, 1, memory_order_release);
}

void nic_vt_inside(struct fw_nic *nic)
{
    if (!nic_virtual_time)
        return;
    /* A peer that went on without our promise while we were blocked
     * elsewhere says so: we start no earlier than the peers may still
     * deliver, so nothing we send lands in their past. */
    if (promise(nic, 0, 0)) {
        uint64_t h = horizon(nic, false);
        uint64_t la = lookahead(nic);
        if (h != UINT64_MAX && h > la)
            raise_to(h - la);
    }
}

void nic_vt_leave(struct fw_nic *nic)
{
    if (!nic_virtual_time || (tl_depth && --tl_depth))
        return;
    if (nic)
        (void)promise(nic, fw_vclock_now() + lookahead(nic), 1);
    tl_left_cpu = thread_cpu_ns();
    if (!tl_left_cpu)
        tl_left_cpu = 1;
    tl_left_wall = hal_now_ns(); /* last: the gap starts here */
}

/* A wait with nothing to take: the clock moves towards `next` (the next
 * event known: an effect held until its time, a timeout) as far as the
 * horizon allows, and the peers are promised what we can. True when the
 * clock reached `next`; false when a peer's promise holds it back. */
bool nic_vt_wait(struct fw_nic *nic, uint64_t next)
{
    bool look = tl_held_back >= FW_VCLOCK_LOOK_ROUNDS;
    uint64_t h = horizon(nic, look), now = fw_vclock_now();
    uint64_t to = next < h ? next : h;
    /* UINT64_MAX: no event and no peer, nothing to wait for in time (a
     * wait without a deadline stays where it is) */
    if (to > now && to != UINT64_MAX)
        raise_to(to);
    now = fw_vclock_now();
    /* Nothing of ours arrives before our next event or anything the peers
     * may still send us (each answered at the earliest then) + lookahead. */
    uint64_t until = to > now && to != UINT64_MAX ? to : now;
    uint64_t la = lookahead(nic);
    (void)promise(nic, until > UINT64_MAX - la ? UINT64_MAX : until + la, 0);
    tl_held_back = now >= next ? 0 : look ? 0 : tl_held_back + 1;
    return now >= next;
}

/* ---- the host library's side (nic.h) ----------------------------------------------- */

void nic_vt_enter(void)
{
    enter_min(0);
}

void nic_vt_spend(uint64_t until_ns)
{
    raise_to(until_ns);
}

/* A native clock read through the vDSO costs about this much; a loop that
 * spins on the clock must see it move. */
#define FW_VCLOCK_CLOCK_READ_NS 20u

uint64_t nic_vt_clock_read(void)
{
    enter_min(FW_VCLOCK_CLOCK_READ_NS);
    uint64_t t = fw_vclock_now();
    nic_vt_leave(NULL);
    return t;
}

uint64_t nic_vt_next_event(struct fw_nic *nic, uint64_t held)
{
    /* Only times still ahead count: one already due is released by the
     * next progress (a NIC-wide minimum may be stale). */
    uint64_t now = fw_vclock_now(), m = atomic_load_explicit(&nic->held_min, memory_order_acquire);
    uint64_t next = UINT64_MAX;
    if (m > now)
        next = m;
    if (held > now && held < next)
        next = held;
    return next;
}

uint64_t nic_model_now_ns(void)
{
    return hal_model_now_ns();
}

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
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_link.h"
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
/* The NIC's count of released effects when this thread last waited. */
static _Thread_local uint32_t tl_released;
/* The peers' promises, read before this round looked for arrivals. */
static _Thread_local uint64_t tl_horizon;
static _Thread_local bool tl_looked;
/* The peer direction whose promise made the last horizon this thread read,
 * and that promise. */
static _Thread_local struct via_chan_dir *tl_limit;
static _Thread_local unsigned tl_limit_vi;
static _Thread_local uint64_t tl_limit_bound;
/* The program's call site of the call in progress and of the last call
 * left (warm_gap); whether each was a clock read. */
_Thread_local const void *nic_vt_site;
static _Thread_local const void *tl_call_site, *tl_left_site;
static _Thread_local bool tl_call_clock, tl_left_clock;

/* Held back this many rounds by a peer outside the library, a waiter looks
 * whether that peer is blocked in the kernel (asleep in waitpid, read, a
 * lock...): it can send nothing until it is back, and then it starts from
 * its horizon. */
#define FW_VCLOCK_LOOK_ROUNDS 2000u

static uint64_t horizon(struct fw_nic *nic, bool skip_blocked);
static bool promise(struct fw_nic *nic, uint64_t at, uint32_t outside);
static uint32_t self_pid(void);

/*
 * The program's threads as the NIC's thread sees them. While every one is
 * outside the library, the NIC's thread moves the clock by the CPU time
 * they used since they left (a program polling a status word or an RDMA
 * write's last byte in memory calls nothing that would). A slot's base is
 * the thread's CPU clock up to which its computation is counted, or
 * VT_INSIDE while the thread is in the library (it then counts its own,
 * from the base it takes). A slot is claimed at a thread's first leave and
 * given back when the thread ends.
 */
#define FW_VCLOCK_THREADS 64
#define VT_INSIDE (1ull << 63)
struct vt_thread {
    _Atomic bool used;
    clockid_t cpu;          /* the thread's CPU clock, readable by any thread */
    _Atomic uint64_t base;
    _Atomic uint64_t pre;   /* its CPU clock when the NIC's thread found an
                             * effect due while it was outside ... */
    _Atomic uint64_t seen;  /* ... and when that effect was visible */
};
static struct vt_thread vt_threads[FW_VCLOCK_THREADS];
static _Atomic uint32_t vt_inside; /* threads inside the library */
static _Thread_local int tl_slot = -1;
static pthread_key_t vt_key;
static pthread_once_t vt_key_once = PTHREAD_ONCE_INIT;
static _Atomic uint32_t vt_self_pid; /* self_pid() */

/* What one read of the thread's CPU clock (a system call) and of the
 * monotonic clock (the vDSO) cost, taken off every charge. */
static uint64_t read_cost_ns, wall_cost_ns;
/* The profile's host_cpu_scale: virtual ns per ns of the program's CPU. */
static double cpu_scale = 1.0;

static uint64_t scaled(uint64_t cpu_ns)
{
    return cpu_scale == 1.0 ? cpu_ns : (uint64_t)((double)cpu_ns * cpu_scale);
}

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

void fw_vclock_start(const struct via_profile *p)
{
    if (nic_virtual_time)
        return;
    if (p->host_cpu_scale > 0)
        cpu_scale = p->host_cpu_scale;
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

/*
 * The same code between the same two calls, measured warm. A short gap's
 * CPU time depends on what else the machine runs: a thread that lost its
 * CPU inside the library comes back to caches its neighbours filled, and
 * a neighbour on the sibling hardware thread evicts them anyway. Beside
 * a parallel build a gap that takes 100 ns idle takes several to tens of
 * times that in a good share of the calls. A gap shorter than FW_VCLOCK_WALL_NS between two known
 * call sites (the program's return addresses, nic_vt_site) is therefore
 * charged the least of it and the last FW_VCLOCK_GAP_WINDOW gaps between
 * the same two sites: what that code costs when nothing disturbs it
 * (32 gaps: a disturbed spell outlasts eight round trips of a ping-pong).
 * Longer computation is charged as measured.
 */
#define FW_VCLOCK_GAP_WINDOW 32

/* A burst of computation shorter than this is not charged at all. It is
 * the program's bookkeeping around its calls (filling a descriptor,
 * testing a status), which the model's host costs (Build, Done) already
 * price; measured on a shared machine it shows the cache's state, not the
 * program: beside a parallel build a 100 ns gap reads several times that
 * for whole seconds at a time, warm or not. SimGrid's SMPI drops bursts
 * below a threshold for the same reason (smpi/cpu-threshold, 1 us). */
#define FW_VCLOCK_BURST_NS 1000u
#define FW_VCLOCK_GAP_SLOTS 64

struct gap_sites {
    const void *from, *to;
    uint32_t ns[FW_VCLOCK_GAP_WINDOW];
    uint8_t n, next;
};
static _Thread_local struct gap_sites tl_gaps[FW_VCLOCK_GAP_SLOTS];

static uint64_t warm_gap(const void *from, const void *to, uint64_t d)
{
    /* Two clock reads are one site to us (vipclock reads for the program
     * from its own code): a program timing its own loops is not filtered. */
    if (!from || !to || (tl_call_clock && tl_left_clock))
        return d;
    uintptr_t h = (uintptr_t)from * 0x9E3779B1u ^ (uintptr_t)to;
    struct gap_sites *g = &tl_gaps[(h ^ h >> 17) % FW_VCLOCK_GAP_SLOTS];
    if (g->from != from || g->to != to) {
        g->from = from;
        g->to = to;
        g->n = g->next = 0;
    }
    g->ns[g->next] = d < UINT32_MAX ? (uint32_t)d : UINT32_MAX;
    g->next = (uint8_t)((g->next + 1) % FW_VCLOCK_GAP_WINDOW);
    if (g->n < FW_VCLOCK_GAP_WINDOW)
        g->n++;
    for (unsigned i = 0; i < g->n; i++)
        if (g->ns[i] < d)
            d = g->ns[i];
    return d;
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
    if (!nic_virtual_time || tl_depth++)
        return;
    /* The gap ends here, before any of the library's own work (the
     * atomics below touch lines the NIC's thread shares). */
    uint64_t wall = hal_now_ns(), cpu = 0;
    if (tl_left_cpu && wall - tl_left_wall >= FW_VCLOCK_WALL_NS)
        cpu = thread_cpu_ns();
    const void *site = nic_vt_site, *left_site = tl_left_site;
    tl_call_site = site;
    tl_call_clock = least_ns != 0;
    nic_vt_site = NULL;
    atomic_fetch_add_explicit(&vt_inside, 1, memory_order_acq_rel);
    /* What the NIC's thread already counted of this gap (fw_vclock_outside) */
    bool slot = tl_slot >= 0 && tl_slot < FW_VCLOCK_THREADS;
    uint64_t base = slot ? atomic_exchange(&vt_threads[tl_slot].base, VT_INSIDE) : 0;
    uint64_t pre = slot ? atomic_exchange(&vt_threads[tl_slot].pre, 0) : 0;
    uint64_t seen = slot ? atomic_exchange(&vt_threads[tl_slot].seen, 0) : 0;
    if (!tl_left_cpu)
        return;
    uint64_t counted = base > tl_left_cpu && !(base & VT_INSIDE) ? base - tl_left_cpu : 0;
    /* Back within moments of an effect the NIC's thread made visible (or
     * while it did): the program was polling memory for it. What it spun
     * beyond the clock (held back by a peer, or while the NIC's thread was
     * late to the effect) was waiting, not computation. ("Moments": the
     * CPU clock of a thread just scheduled back in shows some us.) */
    if (pre || seen) {
        uint64_t c = thread_cpu_ns();
        uint64_t upto = !seen || c - seen < FW_VCLOCK_WALL_NS ? c : 0;
        if (upto > tl_left_cpu + counted)
            counted = upto - tl_left_cpu;
    }

    uint64_t d;
    if (!cpu)
        d = wall - tl_left_wall > wall_cost_ns ? wall - tl_left_wall - wall_cost_ns : 0;
    else
        d = cpu > tl_left_cpu + read_cost_ns ? cpu - tl_left_cpu - read_cost_ns : 0;
    if (!counted && d < FW_VCLOCK_WALL_NS)
        d = warm_gap(left_site, site, d);
    if (d < (tl_polled_empty ? FW_VCLOCK_SPIN_NS : FW_VCLOCK_BURST_NS))
        d = 0;
    d = d > counted ? scaled(d - counted) : 0;
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

/* A thread walking the linked VIs' channels counts itself in vt_readers
 * first: a disconnect unlinks the VI and then waits for the count to be
 * 0 before its channel may be unmapped and the VI freed
 * (fw_vclock_unhold). Nothing sleeps while counted. */
static void links_enter(struct fw_nic *nic)
{
    atomic_fetch_add(&nic->vt_readers, 1);
    atomic_thread_fence(memory_order_seq_cst); /* before the linked bits are read */
}

static void links_leave(struct fw_nic *nic)
{
    atomic_fetch_sub_explicit(&nic->vt_readers, 1, memory_order_release);
}

static struct via_chan_dir *dir_of(const struct fw_vi *vi, bool ours)
{
    struct via_chan *c = vi->chan;
    if (!c || c->link != VIA_LINK_SHM ||
        atomic_load_explicit(&c->state, memory_order_acquire) != VIA_CHAN_OPEN)
        return NULL;
    return &c->dir[ours ? vi->side : 1 - vi->side];
}

/* Is every thread of the process pid asleep in the kernel (state S or D)?
 * A peer outside the library whose threads all are waits for something
 * other than us. (Every thread: one asleep in waitpid or a pipe while
 * another computes can still send.) */
static bool blocked(uint32_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%u/task", pid);
    DIR *dir = opendir(path);
    if (!dir)
        return false;
    bool asleep = true, any = false;
    for (struct dirent *e; asleep && (e = readdir(dir));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%u/task/%.20s/stat", pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* gone meanwhile */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *p = strrchr(buf, ')'); /* the name may hold spaces */
        asleep = p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D');
        any = true;
    }
    closedir(dir);
    return asleep && any;
}

static uint64_t horizon(struct fw_nic *nic, bool skip_blocked)
{
    uint64_t h = UINT64_MAX;
    tl_limit = NULL;
    links_enter(nic);
    FOR_LINKED(nic, vi, w, b) {
        struct via_chan_dir *d = dir_of(vi, false);
        if (!d) {
            /* A link the peer closed with nothing left on it counts as a
             * promise of now until our NIC has seen it close: the flush of
             * its queues is an effect at this time, which a wait must not
             * pass. (A packet still on it is a held effect of its own, and
             * the close is seen after it.) */
            struct via_chan *c = vi->chan;
            if (c && c->link == VIA_LINK_SHM &&
                !__atomic_load_n(&vi->in_error, __ATOMIC_ACQUIRE) &&
                !fw_link_ready(&c->dir[1 - vi->side])) {
                uint64_t now = fw_vclock_now();
                if (now < h) {
                    h = now;
                    tl_limit = NULL;
                }
            }
            continue;
        }
        uint64_t p = atomic_load_explicit(&d->vt_bound, memory_order_acquire);
        if (p >= h)
            continue;
        if (skip_blocked && atomic_load_explicit(&d->vt_outside, memory_order_acquire) &&
            blocked(atomic_load_explicit(&d->vt_pid, memory_order_relaxed))) {
            atomic_store_explicit((_Atomic uint32_t *)&d->vt_skipped, 1, memory_order_release);
            continue;
        }
        h = p;
        tl_limit = d;
        tl_limit_vi = vi->vi_id;
    }
    links_leave(nic);
    tl_limit_bound = h;
    return h;
}

/* Promise every peer of this NIC that nothing we send arrives before `at`
 * (0: promise nothing new), and say whether we are outside the library
 * (PROMISE_ONLY: say nothing of it: the NIC's thread cannot know). True if
 * a peer went on without our promise meanwhile (told once). */
#define PROMISE_ONLY 2u
static bool promise(struct fw_nic *nic, uint64_t at, uint32_t outside)
{
    uint32_t me = self_pid();
    bool skipped = false;
    links_enter(nic);
    FOR_LINKED(nic, vi, w, b) {
        struct via_chan_dir *d = dir_of(vi, true);
        if (!d)
            continue;
        /* only ever grows: a promise once made is kept */
        uint64_t cur = atomic_load_explicit(&d->vt_bound, memory_order_relaxed);
        if (at > cur) {
            atomic_store_explicit(&d->vt_bound, at, memory_order_release);
            atomic_fetch_add(&d->vt_seq, 1);
            if (atomic_load(&d->vt_sleepers))
                syscall(SYS_futex, &d->vt_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        }
        if (atomic_load_explicit(&d->vt_pid, memory_order_relaxed) != me)
            atomic_store_explicit(&d->vt_pid, me, memory_order_relaxed);
        if (outside != PROMISE_ONLY &&
            atomic_load_explicit(&d->vt_outside, memory_order_relaxed) != outside)
            atomic_store_explicit(&d->vt_outside, outside, memory_order_release);
        if (!outside && atomic_load_explicit(&d->vt_skipped, memory_order_acquire))
            skipped |= atomic_exchange(&d->vt_skipped, 0) != 0;
    }
    links_leave(nic);
    return skipped;
}

void fw_vclock_connected(struct fw_vi *vi)
{
    if (!nic_virtual_time)
        return;
    /* A new connection starts with our promise, our pid, and "outside"
     * if no other thread of ours is in the library: the calling thread goes
     * back to the program's own work from here (its call to vipd promises
     * nothing as it leaves), and one waiting in the library can send. */
    struct via_chan *c = vi->chan;
    if (!c || c->link != VIA_LINK_SHM)
        return;
    struct via_chan_dir *d = &c->dir[vi->side];
    atomic_store_explicit(&d->vt_pid, self_pid(), memory_order_relaxed);
    atomic_store_explicit(&d->vt_bound, fw_vclock_now() + lookahead(vi->nic),
                          memory_order_release);
    uint32_t others = atomic_load_explicit(&vt_inside, memory_order_acquire) - (tl_depth ? 1 : 0);
    atomic_store_explicit(&d->vt_outside, others == 0, memory_order_release);
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

static void slot_free(void *v)
{
    atomic_store_explicit(&vt_threads[(intptr_t)v - 1].used, false, memory_order_release);
}

/* A child of fork has one thread, none of whose CPU clocks are ours. */
static void slots_after_fork(void)
{
    for (int i = 0; i < FW_VCLOCK_THREADS; i++)
        atomic_store_explicit(&vt_threads[i].used, false, memory_order_relaxed);
    atomic_store_explicit(&vt_inside, tl_depth ? 1 : 0, memory_order_relaxed);
    tl_slot = -1;
    atomic_store_explicit(&vt_self_pid, 0, memory_order_relaxed);
}

static void key_make(void)
{
    (void)pthread_key_create(&vt_key, slot_free);
    (void)pthread_atfork(NULL, NULL, slots_after_fork);
}

/* Our pid, asked of the kernel once per process (a promise notes it at
 * every call's end; getpid is a system call). */
static uint32_t self_pid(void)
{
    uint32_t p = atomic_load_explicit(&vt_self_pid, memory_order_relaxed);
    if (!p) {
        pthread_once(&vt_key_once, key_make); /* forgotten in a child */
        p = (uint32_t)getpid();
        atomic_store_explicit(&vt_self_pid, p, memory_order_relaxed);
    }
    return p;
}

/* A slot for the calling thread, claimed once (none left: its computation
 * outside is counted only when it comes back, as before). */
static void slot_claim(void)
{
    pthread_once(&vt_key_once, key_make);
    clockid_t cpu;
    if (pthread_getcpuclockid(pthread_self(), &cpu) != 0)
        return;
    for (int i = 0; i < FW_VCLOCK_THREADS; i++) {
        bool f = false;
        if (atomic_compare_exchange_strong(&vt_threads[i].used, &f, true)) {
            vt_threads[i].cpu = cpu;
            atomic_store_explicit(&vt_threads[i].base, VT_INSIDE, memory_order_release);
            tl_slot = i;
            (void)pthread_setspecific(vt_key, (void *)(intptr_t)(i + 1));
            return;
        }
    }
    tl_slot = FW_VCLOCK_THREADS; /* do not look again */
}

void nic_vt_leave(struct fw_nic *nic)
{
    if (!nic_virtual_time)
        return;
    if (tl_depth) {
        if (--tl_depth)
            return;
        atomic_fetch_sub_explicit(&vt_inside, 1, memory_order_acq_rel);
    }
    tl_left_site = tl_call_site;
    tl_left_clock = tl_call_clock;
    /* Outside: no thread of ours is in the library any more (another
     * one may be waiting in it, and can send whenever it wakes). */
    if (nic)
        (void)promise(nic, fw_vclock_now() + lookahead(nic),
                      atomic_load_explicit(&vt_inside, memory_order_acquire) == 0);
    tl_left_cpu = thread_cpu_ns();
    if (!tl_left_cpu)
        tl_left_cpu = 1;
    if (tl_slot < 0)
        slot_claim();
    if (tl_slot >= 0 && tl_slot < FW_VCLOCK_THREADS) {
        atomic_store_explicit(&vt_threads[tl_slot].pre, 0, memory_order_relaxed);
        atomic_store_explicit(&vt_threads[tl_slot].seen, 0, memory_order_relaxed);
        atomic_store_explicit(&vt_threads[tl_slot].base, tl_left_cpu, memory_order_release);
    }
    tl_left_wall = hal_now_ns(); /* last: the gap starts here */
}

static uint64_t cpu_of(clockid_t c)
{
    struct timespec t;
    if (clock_gettime(c, &t) != 0)
        return 0;
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* An effect is due while the threads are outside: each notes its CPU
 * clock (fw_vclock_released notes the other end). */
static int due(const uint64_t *cpu)
{
    for (int i = 0; i < FW_VCLOCK_THREADS; i++)
        if (cpu[i]) {
            atomic_store_explicit(&vt_threads[i].seen, 0, memory_order_relaxed);
            atomic_store_explicit(&vt_threads[i].pre, cpu[i], memory_order_release);
        }
    return 2;
}

int fw_vclock_outside(struct fw_nic *nic, fw_progress_fn *progress)
{
    if (!nic_virtual_time || atomic_load_explicit(&vt_inside, memory_order_acquire))
        return 0;
    uint64_t base[FW_VCLOCK_THREADS], cpu[FW_VCLOCK_THREADS], avail = 0;
    for (int i = 0; i < FW_VCLOCK_THREADS; i++) {
        base[i] = cpu[i] = 0;
        if (!atomic_load_explicit(&vt_threads[i].used, memory_order_acquire))
            continue;
        base[i] = atomic_load_explicit(&vt_threads[i].base, memory_order_acquire);
        if (base[i] & VT_INSIDE)
            return 0; /* back in the library: it counts for itself */
        cpu[i] = cpu_of(vt_threads[i].cpu);
        /* Just shown an effect: it may be polling for it, and must look at
         * the clock of the effect before the clock moves on. */
        uint64_t seen = atomic_load_explicit(&vt_threads[i].seen, memory_order_acquire);
        if (seen && cpu[i] - seen < FW_VCLOCK_WALL_NS)
            return 0;
        if (cpu[i] > base[i])
            avail += cpu[i] - base[i];
    }
    if (!avail)
        return 0; /* nobody computes (blocked elsewhere): nothing moves */
    bool look = tl_held_back >= FW_VCLOCK_LOOK_ROUNDS;
    uint64_t h = horizon(nic, look); /* first: see nic_vt_look */
    if (look)
        tl_held_back = 0;
    bool did = false;
    uint64_t held = progress(nic, &did, NULL);
    uint64_t now = fw_vclock_now(), next = nic_vt_next_event(nic, held);
    if (next <= now)
        return due(cpu); /* the NIC's next turn releases it */
    if (h <= now) {
        tl_held_back++;
        return -1; /* a peer is behind us: it moves first */
    }
    if (next == UINT64_MAX && h == UINT64_MAX)
        return 0; /* nothing ahead to reach */
    uint64_t cap = next < h ? next : h;
    uint64_t want = scaled(avail) < cap - now ? scaled(avail) : cap - now, got = 0;
    for (int i = 0; i < FW_VCLOCK_THREADS && got < want; i++) {
        if (cpu[i] <= base[i])
            continue;
        uint64_t give = cpu[i] - base[i]; /* CPU ns: virtual ns / cpu_scale */
        uint64_t need = (uint64_t)((double)(want - got) / cpu_scale) + 1;
        if (give > need)
            give = need;
        uint64_t b = base[i];
        if (atomic_compare_exchange_strong(&vt_threads[i].base, &b, base[i] + give)) {
            uint64_t v = scaled(give);
            got += v < want - got ? v : want - got;
        }
    }
    if (!got)
        return 0;
    raise_to(now + got);
    /* A thread may have come back in meanwhile: the flag is theirs. */
    (void)promise(nic, fw_vclock_now() + lookahead(nic), PROMISE_ONLY);
    if (now + got >= next) {
        tl_held_back = 0;
        return due(cpu);
    }
    bool held_back = now + got >= h;
    tl_held_back = held_back ? tl_held_back + 1 : 0;
    return held_back ? -1 : 1;
}

void fw_vclock_released(void)
{
    for (int i = 0; i < FW_VCLOCK_THREADS; i++) {
        if (!atomic_load_explicit(&vt_threads[i].used, memory_order_acquire) ||
            (atomic_load_explicit(&vt_threads[i].base, memory_order_acquire) & VT_INSIDE))
            continue;
        uint64_t c = cpu_of(vt_threads[i].cpu);
        if (c && !(atomic_load_explicit(&vt_threads[i].base, memory_order_acquire) & VT_INSIDE))
            atomic_store_explicit(&vt_threads[i].seen, c, memory_order_release);
    }
}

/* A wait with nothing to take: the clock moves towards `next` (the next
 * event known: an effect held until its time, a timeout) as far as the
 * horizon allows, and the peers are promised what we can. True when the
 * clock reached `next`; false when a peer's promise holds it back. */
/* Before a round looks for arrivals: a packet sent before a promise is on
 * the link before the promise is made (the sender posts, then leaves), so
 * a horizon read first never passes a packet the round then misses. */
void nic_vt_look(struct fw_nic *nic)
{
    tl_horizon = horizon(nic, tl_held_back >= FW_VCLOCK_LOOK_ROUNDS);
    tl_looked = true;
}

bool nic_vt_wait(struct fw_nic *nic, uint64_t next)
{
    /* The NIC released something since this thread last waited: a status
     * word or an RDMA write's bytes, which the program may be polling for
     * in memory. It gets one look at the clock of the release before the
     * clock moves on (otherwise it would see them up to a lookahead late). */
    uint32_t rel = atomic_load_explicit(&nic->vt_released, memory_order_acquire);
    if (rel != tl_released) {
        tl_released = rel;
        return true;
    }
    bool look = tl_held_back >= FW_VCLOCK_LOOK_ROUNDS;
    uint64_t h = tl_looked ? tl_horizon : horizon(nic, look), now = fw_vclock_now();
    tl_looked = false;
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

/*
 * A peer's promise holds this thread back (nic_vt_wait said false): the
 * peer must move first. With a core to spare, a yield lets it at once and
 * costs a microsecond. On a busy machine a yield hands the CPU to whatever
 * else is runnable for a whole slice, and a round trip needs a dozen such
 * hand-offs (the clocks climb each other's promises a lookahead at a
 * time): a yield that kept the CPU from us longer than
 * FW_VCLOCK_YIELD_LOST_NS makes the next FW_VCLOCK_SLEEP_ROUNDS holds sleep
 * on the promise's futex word instead, until the peer raises it (a woken
 * sleeper is scheduled at once). A sleep lasts at most FW_VCLOCK_HOLD_NS: a
 * peer blocked elsewhere raises nothing, and is looked at (blocked()) after
 * FW_VCLOCK_LOOK_ROUNDS rounds, of which a timed-out sleep counts 1/16.
 */
#define FW_VCLOCK_YIELD_LOST_NS 50000u
#define FW_VCLOCK_SLEEP_ROUNDS 4096u
#define FW_VCLOCK_HOLD_NS 1000000u
static _Thread_local unsigned tl_sleep_rounds;

/* VIP_VT_HOLD: adapt (the default, as above), sleep (always: a machine
 * known to be oversubscribed) or yield (never sleep); read once per
 * thread. */
enum vt_hold_mode { HOLD_UNREAD, HOLD_ADAPT, HOLD_SLEEP, HOLD_YIELD };
static _Thread_local enum vt_hold_mode tl_hold_mode;

static enum vt_hold_mode hold_mode(void)
{
    if (tl_hold_mode == HOLD_UNREAD) {
        const char *e = getenv("VIP_VT_HOLD");
        tl_hold_mode = e && !strcmp(e, "sleep")   ? HOLD_SLEEP
                       : e && !strcmp(e, "yield") ? HOLD_YIELD
                                                  : HOLD_ADAPT;
    }
    return tl_hold_mode;
}

void nic_vt_hold(struct fw_nic *nic)
{
    struct via_chan_dir *d = tl_limit;
    enum vt_hold_mode mode = hold_mode();
    if (!d || mode == HOLD_YIELD || (mode == HOLD_ADAPT && !tl_sleep_rounds)) {
        uint64_t t0 = hal_now_ns();
        sched_yield();
        if (d && hal_now_ns() - t0 > FW_VCLOCK_YIELD_LOST_NS)
            tl_sleep_rounds = FW_VCLOCK_SLEEP_ROUNDS;
        return;
    }
    if (tl_sleep_rounds)
        tl_sleep_rounds--;
    /* The VI found still linked to this direction, and pinned, while we
     * count as a reader: a disconnect unlinks it, waits for the readers,
     * then wakes the pinned and waits for them (fw_vclock_unhold), so the
     * VI and the mapping stay while we sleep on it. */
    unsigned id = tl_limit_vi;
    struct fw_vi *vi = NULL;
    links_enter(nic);
    if (id < VIA_MAX_VI && (atomic_load(&nic->linked[id / 64]) >> (id % 64) & 1)) {
        vi = nic->vis[id];
        if (vi && dir_of(vi, false) == d)
            atomic_fetch_add(&vi->vt_holders, 1);
        else
            vi = NULL;
    }
    links_leave(nic);
    if (!vi) {
        sched_yield();
        return;
    }
    /* Counted first, then the word read, then the promise and the link: a
     * raise (or an unlink) after our look bumps vt_seq after it, so the
     * sleep returns at once or is woken (the sender reads vt_sleepers after
     * its bump). */
    atomic_fetch_add(&d->vt_sleepers, 1);
    uint32_t seq = atomic_load(&d->vt_seq);
    if (atomic_load(&d->vt_bound) <= tl_limit_bound &&
        (atomic_load(&nic->linked[id / 64]) >> (id % 64) & 1)) {
        struct timespec ts = {0, FW_VCLOCK_HOLD_NS};
        if (syscall(SYS_futex, &d->vt_seq, FUTEX_WAIT, seq, &ts, NULL, 0) != 0 &&
            errno == ETIMEDOUT)
            tl_held_back += FW_VCLOCK_LOOK_ROUNDS / 16;
    }
    atomic_fetch_sub(&d->vt_sleepers, 1);
    atomic_fetch_sub(&vi->vt_holders, 1);
}

void fw_vclock_unhold(struct fw_vi *vi, struct via_chan_dir *rx)
{
    if (!nic_virtual_time)
        return;
    while (atomic_load(&vi->nic->vt_readers))
        sched_yield();
    atomic_fetch_add(&rx->vt_seq, 1);
    syscall(SYS_futex, &rx->vt_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    while (atomic_load(&vi->vt_holders))
        sched_yield();
}

/* ---- the host library's side (nic.h) ----------------------------------------------- */

bool nic_vt_alone(struct fw_nic *nic)
{
    return horizon(nic, false) == UINT64_MAX;
}

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

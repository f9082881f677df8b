/*
 * vipclock.c - libvipclock.so: an unmodified VIPL program reads virtual
 * time through its own clock calls (spec-notes/virtual-time.md).
 *
 *   vipclock PROG ARGS     (LD_PRELOAD of this library, VIP_CLOCK=virtual)
 *
 * clock_gettime of the monotonic and real-time clocks, gettimeofday and
 * time answer with the process's virtual clock (VipExtClockNs), offset so
 * that they start where the real clocks stood when the program started.
 * Before the program's first NIC is open, and for every other clock, the
 * real clock answers. libvipl's own clock reads (its protocol timers, the
 * virtual clock's measurement of the program's computation) must see real
 * time: a call from inside libvipl's code is passed through.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "vipl.h"
#include "vipl_ext.h"

typedef int (*cgt_fn)(clockid_t, struct timespec *);
static cgt_fn real_cgt;
static uintptr_t lib_lo, lib_hi;           /* libvipl's code */
static uint64_t start_mono, start_real;    /* the real clocks at our start */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint64_t ns_of(const struct timespec *t)
{
    return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

/* The executable segment of the object holding `addr`. */
struct seg_find {
    uintptr_t addr, lo, hi;
};

static int seg_of(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct seg_find *f = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (f->addr >= lo && f->addr < hi) {
            f->lo = lo;
            f->hi = hi;
            return 1;
        }
    }
    return 0;
}

static void init(void)
{
    real_cgt = (cgt_fn)dlsym(RTLD_NEXT, "clock_gettime");
    struct seg_find f = {(uintptr_t)&VipExtClockNs, 0, 0};
    dl_iterate_phdr(seg_of, &f);
    lib_lo = f.lo;
    lib_hi = f.hi;
    struct timespec t;
    real_cgt(CLOCK_MONOTONIC, &t);
    start_mono = ns_of(&t);
    real_cgt(CLOCK_REALTIME, &t);
    start_real = ns_of(&t);
}

static bool from_libvipl(const void *ra)
{
    return (uintptr_t)ra >= lib_lo && (uintptr_t)ra < lib_hi;
}

/* Virtual time as the given clock would show it, or false: real time. */
static bool virtual_ns(clockid_t id, uint64_t *out)
{
    bool mono = id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW ||
                id == CLOCK_MONOTONIC_COARSE || id == CLOCK_BOOTTIME;
    bool real = id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE;
    if (!mono && !real)
        return false;
    if (!VipExtClockVirtual())
        return false; /* no NIC open in virtual time (yet): the real clock */
    /* the virtual clock starts at 0: shown from where the real one stood */
    *out = (mono ? start_mono : start_real) + VipExtClockNs();
    return true;
}

/* Inside an answer of ours already: the clock read that answer makes
 * (through a sanitizer's interceptor, where the caller's address is not
 * libvipl's) is a real one. */
static _Thread_local unsigned tl_inside;

int clock_gettime(clockid_t id, struct timespec *ts)
{
    pthread_once(&once, init);
    uint64_t v;
    if (tl_inside || from_libvipl(__builtin_return_address(0)))
        return real_cgt(id, ts);
    tl_inside++;
    bool virt = virtual_ns(id, &v);
    tl_inside--;
    if (!virt)
        return real_cgt(id, ts);
    ts->tv_sec = (time_t)(v / 1000000000u);
    ts->tv_nsec = (long)(v % 1000000000u);
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    pthread_once(&once, init);
    struct timespec t;
    uint64_t v;
    tl_inside++;
    bool virt = virtual_ns(CLOCK_REALTIME, &v);
    tl_inside--;
    if (virt) {
        t.tv_sec = (time_t)(v / 1000000000u);
        t.tv_nsec = (long)(v % 1000000000u);
    } else {
        real_cgt(CLOCK_REALTIME, &t);
    }
    tv->tv_sec = t.tv_sec; /* glibc declares tv nonnull */
    tv->tv_usec = t.tv_nsec / 1000;
    if (tz)
        memset(tz, 0, sizeof(struct timezone));
    return 0;
}

time_t time(time_t *out)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    if (out)
        *out = tv.tv_sec;
    return tv.tv_sec;
}

/*
 * fw_hal.h - the firmware's hardware abstraction.
 *
 * The firmware never dereferences a host address itself: it asks the DMA
 * engine. The emulated NIC runs on a CPU of the owning process (a host
 * thread lending it, or the NIC's own thread), so a host DMA is a copy
 * within that address space; every address has already passed the TPT
 * check (fw_tpt_check) before it gets here. All static inline: the fast
 * path makes no indirect call.
 */
#ifndef FW_HAL_H
#define FW_HAL_H

#include "fw_vclock.h"
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* len bytes, w <= len <= 2w, as the first and the last w bytes (they
 * overlap when len < 2w): two loads, then two stores. w is a constant at
 * every call, so each copy is one load or store of that width. */
static inline void hal_copy_ends(uint8_t *d, const uint8_t *s, uint32_t len, uint32_t w)
{
    uint64_t a, b;
    memcpy(&a, s, w);
    memcpy(&b, s + len - w, w);
    memcpy(d, &a, w);
    memcpy(d + len - w, &b, w);
}

/* The DMA engine's copy. A small message's data (up to 16 bytes) moves in
 * two loads and two stores that may overlap, with no call: a call to
 * memcpy costs more than the bytes. Constant lengths fold to one branch. */
static inline void hal_copy(void *dst, const void *src, uint32_t len)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if (len > 16) {
        memcpy(d, s, len);
    } else if (len >= 8) {
        hal_copy_ends(d, s, len, 8);
    } else if (len >= 4) {
        hal_copy_ends(d, s, len, 4);
    } else {
        for (uint32_t i = 0; i < len; i++)
            d[i] = s[i];
    }
}

/* Host -> NIC (descriptor fetch, send data) and NIC -> host (receive data). */
static inline void hal_dma_from_host(void *nic_dst, uint64_t host_va, uint32_t len)
{
    hal_copy(nic_dst, (const void *)(uintptr_t)host_va, len);
}

/*
 * Host -> NIC into memory another core reads next (the shared-memory
 * ring): streaming (non-temporal) stores. A plain copy first reads each
 * ring line for ownership, and the receiving core holds those lines from
 * its last lap, so every line crosses twice; streaming stores skip that
 * read and leave the lines where the reader's misses find them. Below
 * 8 KiB a plain copy is faster (the reader's misses then go to memory), so
 * the gathers stream only chunks of FW_STREAM_MIN bytes or more
 * (hal_dma_gather; spec-notes/native-speed.md says why). The stores
 * are made visible (sfence) before return: the packet's publication that
 * follows is an ordinary release store, which does not order them.
 */
#define FW_STREAM_MIN 8192u
static inline void hal_dma_from_host_stream(void *nic_dst, uint64_t host_va, uint32_t len)
{
#if defined(__SSE2__)
    const uint8_t *s = (const uint8_t *)(uintptr_t)host_va;
    uint8_t *d = nic_dst;
    uint32_t head = (uint32_t)(-(uintptr_t)d & 63u);
    if (head > len)
        head = len;
    memcpy(d, s, head); /* up to a line boundary: whole lines then leave by write-combining */
    d += head, s += head, len -= head;
    uint32_t body = len & ~63u;
    for (uint32_t i = 0; i < body; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        _mm_stream_si128((__m128i *)(void *)(d + i), a);
        _mm_stream_si128((__m128i *)(void *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(void *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(void *)(d + i + 48), e);
    }
    memcpy(d + body, s + body, len - body);
    _mm_sfence();
#else
    memcpy(nic_dst, (const void *)(uintptr_t)host_va, len);
#endif
}

/* Which way a copy between the host's memory and the NIC goes; a gather
 * into memory the peer's core reads next may stream (fw_link_dma). */
enum hal_dma {
    HAL_DMA_TO_HOST,
    HAL_DMA_FROM_HOST,
    HAL_DMA_FROM_HOST_STREAM,
};

/* A gather (host -> NIC) the way `how` says: streaming stores only for a
 * chunk of FW_STREAM_MIN bytes or more, where they are faster. */
static inline void hal_dma_gather(void *nic_dst, uint64_t host_va, uint32_t len,
                                  enum hal_dma how)
{
    if (how == HAL_DMA_FROM_HOST_STREAM && len >= FW_STREAM_MIN)
        hal_dma_from_host_stream(nic_dst, host_va, len);
    else
        hal_dma_from_host(nic_dst, host_va, len);
}

static inline void hal_dma_to_host(uint64_t host_va, const void *nic_src, uint32_t len)
{
    hal_copy((void *)(uintptr_t)host_va, nic_src, len);
}

/* Host-visible 32-bit word written by the NIC (status, length). */
static inline void hal_host_store32(uint64_t host_va, uint32_t v, int release)
{
    if (release)
        __atomic_store_n((uint32_t *)(uintptr_t)host_va, v, __ATOMIC_RELEASE);
    else
        *(volatile uint32_t *)(uintptr_t)host_va = v;
}

/* A polite busy-wait step. */
static inline void hal_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline uint64_t hal_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The time the model's stages are laid against: real time, or the
 * process's virtual clock under VIP_CLOCK=virtual. Protocol timers
 * (retransmission, liveness) stay on hal_now_ns. */
static inline uint64_t hal_model_now_ns(void)
{
    return fw_vclock_on() ? fw_vclock_now() : hal_now_ns();
}

/* A pidfd polls readable once its process has exited; the kernel then
 * confirms it (a signal 0 to an exited process fails with ESRCH). Only
 * both are death: an fd that is not a pidfd (its number closed elsewhere
 * and taken by a readable pipe or socket) fails the signal with EBADF or
 * EINVAL and proves nothing, and a peer that is merely slow is neither. */
static inline bool hal_pidfd_exited(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    if (pidfd < 0 || poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
        return false;
#ifdef SYS_pidfd_send_signal
    return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0 && errno == ESRCH;
#else
    return true;
#endif
}

#endif

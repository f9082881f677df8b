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

#include <stdint.h>
#include <string.h>
#include <time.h>

/* Host -> NIC (descriptor fetch, send data) and NIC -> host (receive data). */
static inline void hal_dma_from_host(void *nic_dst, uint64_t host_va, uint32_t len)
{
    memcpy(nic_dst, (const void *)(uintptr_t)host_va, len);
}

static inline void hal_dma_to_host(uint64_t host_va, const void *nic_src, uint32_t len)
{
    memcpy((void *)(uintptr_t)host_va, nic_src, len);
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

#endif

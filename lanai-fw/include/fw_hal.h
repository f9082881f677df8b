/*
 * fw_hal.h - the firmware's hardware abstraction.
 *
 * The firmware never dereferences a host address itself: it asks the DMA
 * engine. In the native profile the "NIC" runs on the owning process's CPU
 * and a host DMA is a copy within that address space; every address has
 * already passed the TPT check (fw_tpt_check) before it gets here.
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

/*
 * The NIC put a reliable VI into the error state: tell the kernel agent so
 * it breaks the connection and informs the peer. Provided by the host
 * library (it owns the control channel).
 */
struct fw_vi;
void hal_report_vi_error(struct fw_vi *vi, uint32_t code);

#endif

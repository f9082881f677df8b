/*
 * fw_tpt.c - the translation and protection table check.
 *
 * Every segment of every descriptor, and the descriptor itself, passes here
 * before the DMA engine touches it. The TPT is written only by the kernel
 * agent (vipd) and mapped read-only into the NIC's view.
 */
#include <vipl.h>

#include "fw.h"

const struct via_tpt_entry *fw_tpt_find(const struct fw_vi *vi, uint32_t handle, uint64_t va,
                                        uint64_t len)
{
    uint32_t idx = VIA_MH_INDEX(handle), gen = VIA_MH_GEN(handle);
    if (idx >= VIA_MAX_TPT || gen == 0)
        return NULL;
    const struct via_tpt_entry *e = &vi->nic->tpt[idx];
    if (atomic_load_explicit(&e->gen, memory_order_acquire) != gen)
        return NULL; /* stale, foreign or never issued */
    if (e->ptag != vi->ptag)
        return NULL; /* VIA: memory and VI ptags must match */
    return fw_tpt_within(e, va, len) ? e : NULL;
}

uint32_t fw_tpt_check(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len)
{
    return fw_tpt_find(vi, handle, va, len) ? 0 : VIP_STATUS_PROTECTION_ERROR;
}

uint32_t fw_tpt_check_rdma(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len,
                           uint32_t need)
{
    const struct via_tpt_entry *e = fw_tpt_find(vi, handle, va, len);
    if (!e || (e->flags & need) != need)
        return VIP_STATUS_PROTECTION_ERROR;
    return 0;
}

uint32_t nic_tpt_check(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len)
{
    return fw_tpt_check(vi, handle, va, len);
}

/*
 * fw_tpt.c - the translation and protection table check.
 *
 * Every segment of every descriptor, and the descriptor itself, passes here
 * before the DMA engine touches it. The TPT is written only by the kernel
 * agent (vipd) and mapped read-only into the NIC's view; the library may
 * close an entry for this NIC alone (its registration cache).
 */
#include "via_spec.h"

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
    if (nic_mem_revoked(vi->nic, idx))
        return NULL; /* deregistered, kept by the registration cache */
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

void nic_mem_revoke(struct fw_nic *nic, uint32_t idx, bool closed)
{
    if (idx >= VIA_MAX_TPT)
        return;
    uint64_t bit = 1ull << (idx % 64);
    if (closed)
        atomic_fetch_or_explicit(&nic->st->tpt_closed[idx / 64], bit, memory_order_seq_cst);
    else
        atomic_fetch_and_explicit(&nic->st->tpt_closed[idx / 64], ~bit, memory_order_seq_cst);
}

bool nic_mem_revoked(const struct fw_nic *nic, uint32_t idx)
{
    return idx < VIA_MAX_TPT &&
           (atomic_load_explicit(&nic->st->tpt_closed[idx / 64], memory_order_acquire) >>
            (idx % 64)) & 1u;
}

uint32_t nic_tpt_check(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len)
{
    return fw_tpt_check(vi, handle, va, len);
}

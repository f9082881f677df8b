/*
 * vipl_post.c - Build and Ring: posting descriptors.
 *
 * VipPostSend/VipPostRecv check that the NIC can write the descriptor's
 * status, record it in the host's queue, clear its status, and ring the
 * VI's doorbell (T1/R1): a token naming the descriptor goes to the NIC
 * (nic_ring_locked: the VI's one lock covers the library's queue and the
 * NIC's stages). The host pays what the profile says the host pays, Build
 * plus the programmed-I/O writes of the token, and nothing of the NIC's
 * time: the NIC's stages run against its own modelled resources, on this
 * thread only as far as they can go without waiting (nic.h), and the
 * peer's wake-up is the NIC's to pay.
 */
#include "vipl_int.h"

/* One writer per VI (the VI's lock): no locked instruction needed. */
static inline void count1(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Build and Ring, the host's modelled cost starting at t0 (the library's
 * own work happens inside it, not on top of it). */
static VIP_RETURN post_in(struct vip_vi *vi, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, bool recv,
                          bool vt)
{
    bool paced = vi->paced;
    uint64_t t0 = paced ? nic_model_now_ns() : 0, cost;
    fw_lock(vi->lock);
    uint32_t st = atomic_load_explicit(&vi->db->state, memory_order_relaxed);
    if (!recv && (st == VIA_VI_IDLE || st == VIA_VI_PENDING)) {
        fw_unlock(vi->lock);
        return vipl_fail(VIP_INVALID_STATE, "VI %u is not connected: cannot send", vi->id);
    }
    /* The NIC writes a descriptor's status only where the memory handle it
     * was posted with allows (its control segment, in registered memory
     * of the VI's ptag), and it is the status's only writer: a descriptor
     * whose status it could not write is refused here, as the NIC would
     * check it. */
    uint32_t bad = (uintptr_t)d % 4 ? VIP_STATUS_FORMAT_ERROR
                                    : nic_tpt_check(vi->hw, mh, (uintptr_t)d, sizeof d->CS);
    if (bad) {
        fw_unlock(vi->lock);
        const char *call = recv ? "VipPostRecv" : "VipPostSend";
        if (bad == VIP_STATUS_FORMAT_ERROR)
            return vipl_fail(VIP_INVALID_PARAMETER, "%s on VI %u: the descriptor at %p is not "
                             "4-byte aligned", call, vi->id, (void *)d);
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "%s on VI %u: memory handle %u does not cover the descriptor's control "
                         "segment at %p with the VI's ptag", call, vi->id, (unsigned)mh,
                         (void *)d);
    }
    struct vip_queue *q = recv ? &vi->rq : &vi->sq;
    if (q->tail - q->head >= VIA_QUEUE_DEPTH) {
        fw_unlock(vi->lock);
        return vipl_fail(VIP_ERROR_RESOURCE,
                         "%s queue of VI %u is full (%u descriptors outstanding)",
                         recv ? "receive" : "send", vi->id, VIA_QUEUE_DEPTH);
    }
    q->desc[q->tail % VIA_QUEUE_DEPTH] = d;
    q->tail++;
    __atomic_store_n(&d->CS.Status, 0, __ATOMIC_RELAXED);
    struct via_vi_counters *c = &vi->db->cnt;
    struct via_db_token tok;
    enum fw_ext_mode m = FW_EXT_STANDARD;
    uint32_t n = 0;
    if (recv) {
        tok = (struct via_db_token){.desc_va = (uintptr_t)d, .mem_handle = mh,
                                    .word2 = VIA_DB_WORD2(VIA_DB_DESC, 0, 0)};
        count1(&c->rq_posted);
    } else {
        struct ext_send_ctx ec = {vi->hw, vi->db, (uint32_t)vi->attr.MaxTransferSize};
        m = ext_prepare_send(&vi->ext, &ec, d, mh, &tok, &n);
        count1(&c->sq_posted);
    }
    cost = nic_ring_locked(vi->hw, recv, &tok, m, n, t0);
    fw_unlock(vi->lock);
    if (cost && vt)
        nic_vt_spend(t0 + cost); /* virtual time: the clock moves, nobody waits */
    else if (cost)
        vipl_spend_until(t0 + cost);
    vipl_deliver_error(vi);
    return VIP_SUCCESS;
}

static VIP_RETURN post(VIP_VI_HANDLE h, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, bool recv)
{
    if (!nic_virtual_time) {
        struct vip_vi *vi = vipl_vi(h);
        if (!vi || !d)
            return vipl_fail(VIP_INVALID_PARAMETER, "%s", !vi ? "not a VI handle"
                                                              : "descriptor pointer is NULL");
        return post_in(vi, d, mh, recv, false);
    }
    /* Virtual time (every NIC of the process is paced): the program's
     * computation since its last call is charged first, before any of the
     * library's own work, which is not charged until we leave. */
    nic_vt_enter();
    struct vip_vi *vi = vipl_vi(h);
    if (vi)
        nic_vt_inside(vi->nic->hw);
    VIP_RETURN rc = !vi || !d ? vipl_fail(VIP_INVALID_PARAMETER, "%s",
                                          !vi ? "not a VI handle" : "descriptor pointer is NULL")
                              : post_in(vi, d, mh, recv, true);
    nic_vt_leave(vi ? vi->nic->hw : NULL);
    return rc;
}

VIP_RETURN VipPostSend(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle)
{
    NIC_VT_SITE();
    return post(ViHandle, DescriptorPtr, MemoryHandle, false);
}

VIP_RETURN VipPostRecv(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle)
{
    NIC_VT_SITE();
    return post(ViHandle, DescriptorPtr, MemoryHandle, true);
}

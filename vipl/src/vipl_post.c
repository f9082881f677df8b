/*
 * vipl_post.c - Build and Ring: posting descriptors.
 *
 * VipPostSend/VipPostRecv record the descriptor in the host's queue, clear
 * its status, and ring the VI's doorbell (T1/R1): a token naming the
 * descriptor goes into the doorbell page. A paced profile charges the host
 * side of that (building the descriptor, the programmed-I/O writes of the
 * token) to the calling thread, since that is send overhead. In the native
 * profile the doorbell is "hardware": ringing the send doorbell points the
 * NIC at this VI at once (fw_tx_doorbell), with no scan.
 */
#include "fw_hal.h"
#include "vipl_int.h"

/* T1/R1 Ring: one token into the VI's doorbell ring; rung_ns is when the
 * host's programmed I/O of it completes (paced profiles). */
static void ring_doorbell(struct via_db_queue *q, struct fw_wq *wq,
                          const struct via_db_token *tok, uint64_t *ring_ns, uint64_t rung_ns)
{
    uint32_t prod = atomic_load_explicit(&q->prod, memory_order_relaxed);
    if (prod - atomic_load_explicit(&q->cons, memory_order_acquire) >= VIA_DB_SLOTS)
        fw_bell_take(q, wq, ring_ns); /* our NIC takes tokens whenever asked */
    q->tok[prod % VIA_DB_SLOTS] = *tok;
    if (ring_ns)
        ring_ns[prod % VIA_DB_SLOTS] = rung_ns;
    atomic_store_explicit(&q->prod, prod + 1, memory_order_release);
}

/*
 * Host costs of a paced profile (Build, and the programmed I/O of Ring)
 * keep the calling thread busy until t0 + cost. The emulated NIC's own work
 * runs on this thread meanwhile (it is the LANai's time, not the host's),
 * so only what is left of the cost is spent spinning afterwards.
 */
static uint64_t host_cost(struct vip_vi *vi, enum via_stage st, enum fw_ext_mode m, uint32_t n)
{
    struct fw_nic *nic = &vi->nic->fw;
    if (!nic->paced)
        return 0;
    double c = fw_cost_post(nic->prof, m, n);
    fw_account(nic, st, vi->fw.vi_id, st == VIA_ST_T1_RING ? vi->fw.tx_seq + 1 : 0, n, c);
    return (uint64_t)c;
}

static VIP_RETURN post(VIP_VI_HANDLE h, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, bool recv)
{
    struct vip_vi *vi = vipl_vi(h);
    if (!vi || !d)
        return vipl_fail(VIP_INVALID_PARAMETER, "%s", !vi ? "not a VI handle"
                                                          : "descriptor pointer is NULL");
    uint64_t t0 = vi->nic->fw.paced ? hal_now_ns() : 0, cost = 0;
    pthread_mutex_lock(&vi->lock);
    uint32_t st = atomic_load_explicit(&vi->db->state, memory_order_relaxed);
    if (!recv && (st == VIA_VI_IDLE || st == VIA_VI_PENDING)) {
        pthread_mutex_unlock(&vi->lock);
        return vipl_fail(VIP_INVALID_STATE, "VI %u is not connected: cannot send",
                         vi->fw.vi_id);
    }
    struct vip_queue *q = recv ? &vi->rq : &vi->sq;
    if (q->tail - q->head >= VIA_QUEUE_DEPTH) {
        pthread_mutex_unlock(&vi->lock);
        return vipl_fail(VIP_ERROR_RESOURCE,
                         "%s queue of VI %u is full (%u descriptors outstanding)",
                         recv ? "receive" : "send", vi->fw.vi_id, VIA_QUEUE_DEPTH);
    }
    q->desc[q->tail % VIA_QUEUE_DEPTH] = d;
    q->tail++;
    __atomic_store_n(&d->CS.Status, 0, __ATOMIC_RELAXED);
    struct via_vi_counters *c = &vi->db->cnt;
    if (recv) {
        struct via_db_token tok = {.desc_va = (uintptr_t)d, .mem_handle = mh,
                                   .word2 = VIA_DB_WORD2(VIA_DB_DESC, 0, 0)};
        cost = host_cost(vi, VIA_ST_R1_RING, FW_EXT_STANDARD, 0);
        fw_count(&c->rq_posted, 1);
        ring_doorbell(&vi->db->rq, &vi->fw.rq, &tok, NULL, 0);
        FW_TRACE(&vi->nic->fw, VIA_ST_R1_RING, vi->fw.vi_id, 0, 0);
    } else {
        struct via_db_token tok;
        uint32_t n = 0;
        enum fw_ext_mode m = ext_prepare_send(vi, d, mh, &tok, &n);
        cost = host_cost(vi, VIA_ST_T1_RING, m, n);
        fw_count(&c->sq_posted, 1);
        ring_doorbell(&vi->db->sq, &vi->fw.sq, &tok, vi->fw.db_ring_ns, t0 + cost);
        FW_TRACE(&vi->nic->fw, VIA_ST_T1_RING, vi->fw.vi_id, vi->fw.tx_seq + 1, n);
        /* The NIC code runs now; in a scanning profile the time the scan
         * takes to find this doorbell is part of the model (fw_sched.c). */
        fw_tx_doorbell(&vi->fw);
    }
    bool err = vi->fw.err_pending;
    pthread_mutex_unlock(&vi->lock);
    if (cost)
        fw_spin_until(t0 + cost);
    if (err)
        vipl_deliver_error(vi);
    return VIP_SUCCESS;
}

VIP_RETURN VipPostSend(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle)
{
    return post(ViHandle, DescriptorPtr, MemoryHandle, false);
}

VIP_RETURN VipPostRecv(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR *DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle)
{
    return post(ViHandle, DescriptorPtr, MemoryHandle, true);
}

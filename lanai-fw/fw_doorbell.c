/*
 * fw_doorbell.c - T2/R2 Bell: the NIC takes doorbell tokens.
 *
 * The host rang (T1/R1) by filling a slot of the VI's doorbell ring and
 * publishing prod. Taking a token moves it into the NIC's own work queue
 * and frees the ring slot, so the host can queue more without waiting for
 * the NIC to finish the earlier messages (spec-notes/design.md, "Doorbell pages").
 *
 * In the native profile there is no linear scan of every VI's doorbells:
 * ringing points the NIC at the VI directly (a hardware doorbell queue,
 * nic_ring in fw_nic.c).
 */
#include "fw.h"

uint32_t fw_bell_take_rung(struct via_db_queue *q, struct fw_wq *wq, const uint64_t *ring_ns)
{
    uint32_t cons = atomic_load_explicit(&q->cons, memory_order_relaxed);
    uint32_t prod = atomic_load_explicit(&q->prod, memory_order_acquire);
    uint32_t n = 0;
    /* A host that lies about prod can only make us take garbage tokens of
     * its own VI; bound the walk by the ring size and by our queue space. */
    if (prod - cons > VIA_DB_SLOTS)
        prod = cons + VIA_DB_SLOTS;
    while (cons != prod && wq->tail - wq->head < VIA_QUEUE_DEPTH) {
        wq_put(wq, &q->tok[cons % VIA_DB_SLOTS], ring_ns ? ring_ns[cons % VIA_DB_SLOTS] : 0);
        cons++;
        n++;
    }
    if (n)
        atomic_store_explicit(&q->cons, cons, memory_order_release);
    return n;
}

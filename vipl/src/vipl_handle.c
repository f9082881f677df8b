/*
 * vipl_handle.c - the opaque VIPL handles.
 *
 * A handle is not a pointer: it names a slot of this table and the slot's
 * generation (vipl_int.h: vipl_handle_obj decodes it). Freeing an object
 * empties its slot, and the slot's next object gets the next generation,
 * so a handle used after its VipDestroyVi / VipDestroyCQ / VipCloseNic
 * (twice, or from a stale copy) names nothing and is refused with
 * VIP_INVALID_PARAMETER instead of reaching freed memory.
 *
 * Rules: a slot word is 0 (empty) or gen << 48 | object address (user
 * addresses fit in 48 bits); it is written under the table's lock and read
 * without it, by one acquire load per lookup. Generations run 1..0xffff and
 * are never 0, so an empty slot matches no handle.
 */
#include "vipl_int.h"

_Atomic uint64_t vipl_handle_slot[VIPL_HANDLE_SLOTS];

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint16_t slot_gen[VIPL_HANDLE_SLOTS];
static uint32_t next_fresh;             /* slots never used are taken in order */
/* Freed slots, oldest first: a slot is reused as late as possible, so its
 * 16-bit generation wraps only after that many objects came and went. */
static uint32_t free_ring[VIPL_HANDLE_SLOTS];
static uint32_t free_head, free_tail;   /* free-running */

VIP_PVOID vipl_handle_new(void *obj)
{
    uintptr_t a = (uintptr_t)obj;
    if (!obj || (a >> 48))
        return NULL;
    pthread_mutex_lock(&table_lock);
    uint32_t idx;
    if (free_tail != free_head) {
        idx = free_ring[free_head++ % VIPL_HANDLE_SLOTS];
    } else if (next_fresh < VIPL_HANDLE_SLOTS) {
        idx = next_fresh++;
    } else {
        pthread_mutex_unlock(&table_lock);
        return NULL;
    }
    uint16_t gen = (uint16_t)(slot_gen[idx] + 1);
    if (gen == 0)
        gen = 1;
    slot_gen[idx] = gen;
    atomic_store_explicit(&vipl_handle_slot[idx], (uint64_t)gen << 48 | a, memory_order_release);
    pthread_mutex_unlock(&table_lock);
    return (VIP_PVOID)(uintptr_t)((uint64_t)gen << VIPL_HANDLE_IDX_BITS | idx);
}

void vipl_handle_free(VIP_PVOID h)
{
    uintptr_t v = (uintptr_t)h;
    uint32_t idx = (uint32_t)(v & (VIPL_HANDLE_SLOTS - 1));
    if (!vipl_handle_obj(h))
        return;
    pthread_mutex_lock(&table_lock);
    atomic_store_explicit(&vipl_handle_slot[idx], 0, memory_order_release);
    free_ring[free_tail++ % VIPL_HANDLE_SLOTS] = idx;
    pthread_mutex_unlock(&table_lock);
}

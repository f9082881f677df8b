/*
 * vipl_rcache.c - the registration cache: memory registration at memory
 * speed for programs that register and deregister around every message.
 *
 * VipDeregisterMem closes the region at once for this NIC (nic_mem_revoke:
 * every check of the table fails for its handle from then on, and
 * nic_mem_fence waits out a copy that passed its check before) but keeps
 * vipd's registration; VipRegisterMem of exactly that region again (same
 * address, length, ptag and RDMA rights) reopens it without a round trip
 * to vipd. The NIC that checks the table is this process's own, so the
 * closed entry protects exactly as an invalidated one: no peer reaches the
 * memory between the two calls. What vipd still holds is given back when
 * the cache holds 64 regions or 256 MiB (the oldest first; a larger region
 * is not kept: the user's registration limit is shared by the user's
 * processes), when vipd refuses a registration for lack of room (the
 * user's limits, the TPT), before VipDestroyPtag, and at VipCloseNic (vipd
 * frees the session). VIP_RCACHE=0 turns it off.
 *
 * Rules: slots[] holds only closed registrations; every vipd REG_MEM and
 * DEREG_MEM of this NIC handle is made under lock, so an index vipd hands
 * out again is never one still marked closed.
 */
#include "vipl_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static bool rcache_on(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("VIP_RCACHE");
        on = !(e && !strcmp(e, "0"));
    }
    return on;
}

void vipl_rcache_init(struct vip_nic *n)
{
    memset(&n->rc, 0, sizeof n->rc);
    pthread_mutex_init(&n->rc.lock, NULL);
}

void vipl_rcache_fini(struct vip_nic *n)
{
    pthread_mutex_destroy(&n->rc.lock);
}

/* Slot i leaves the cache; the others keep their order (oldest first). */
static void take_slot(struct vip_nic *n, unsigned i)
{
    n->rc.bytes -= n->rc.slot[i].len;
    memmove(&n->rc.slot[i], &n->rc.slot[i + 1], (n->rc.n - i - 1) * sizeof n->rc.slot[0]);
    n->rc.n--;
}

/* vipd's registration of slot i given back (rc.lock held); the slot empties. */
static void give_back(struct vip_nic *n, unsigned i)
{
    struct vipl_rcache_slot *s = &n->rc.slot[i];
    struct via_ctl_dereg_mem q = {.va = s->va, .handle = s->handle};
    vipl_call(n, VIA_CTL_DEREG_MEM, &q, sizeof q, NULL, 0, NULL, NULL);
    nic_mem_revoke(n->hw, VIA_MH_INDEX(s->handle), false); /* vipd's now: invalid there */
    take_slot(n, i);
}

/* Give back every kept registration of ptag (0: of all); how many. */
static unsigned flush_locked(struct vip_nic *n, uint32_t ptag)
{
    unsigned freed = 0;
    for (unsigned i = n->rc.n; i-- > 0;)
        if (!ptag || n->rc.slot[i].ptag == ptag) {
            give_back(n, i);
            freed++;
        }
    return freed;
}

void vipl_rcache_flush(struct vip_nic *n, uint32_t ptag)
{
    pthread_mutex_lock(&n->rc.lock);
    flush_locked(n, ptag);
    pthread_mutex_unlock(&n->rc.lock);
}

/* Is [va, va + len) still mapped? (A kept region's pages were checked when
 * it was registered; one call finds them gone. Their protection is the
 * program's, as it is while a region is registered.) */
static bool still_mapped(uintptr_t va, size_t len)
{
    static uintptr_t page;
    if (!page)
        page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = va & ~(page - 1);
    return msync((void *)lo, va + len - lo, MS_ASYNC) == 0 || errno != ENOMEM;
}

VIP_RETURN vipl_rcache_register(struct vip_nic *n, uintptr_t va, size_t len, uint32_t ptag,
                                uint32_t flags, VIP_MEM_HANDLE *h,
                                VIP_RETURN (*check)(uintptr_t va, size_t len))
{
    pthread_mutex_lock(&n->rc.lock);
    if (rcache_on())
        for (unsigned i = 0; i < n->rc.n; i++) {
            struct vipl_rcache_slot *s = &n->rc.slot[i];
            if (s->va != va || s->len != len || s->ptag != ptag || s->flags != flags ||
                !still_mapped(va, len))
                continue;
            *h = s->handle;
            nic_mem_revoke(n->hw, VIA_MH_INDEX(s->handle), false);
            take_slot(n, i);
            n->rc.hits++;
            pthread_mutex_unlock(&n->rc.lock);
            return VIP_SUCCESS;
        }
    VIP_RETURN rc = check(va, len);
    if (rc == VIP_SUCCESS) {
        struct via_ctl_reg_mem q = {.va = va, .len = len, .ptag = ptag, .flags = flags};
        struct via_ctl_reg_mem_r r;
        rc = vipl_call(n, VIA_CTL_REG_MEM, &q, sizeof q, &r, sizeof r, NULL, NULL);
        /* Out of room (the TPT, the user's limits): what we keep goes first. */
        if (rc == VIP_ERROR_RESOURCE && flush_locked(n, 0))
            rc = vipl_call(n, VIA_CTL_REG_MEM, &q, sizeof q, &r, sizeof r, NULL, NULL);
        if (rc == VIP_SUCCESS)
            *h = r.handle;
    }
    pthread_mutex_unlock(&n->rc.lock);
    return rc;
}

/* The TPT entry of a handle, read from the NIC's table, if it is live and
 * not closed by the registration cache. */
const struct via_tpt_entry *vipl_tpt_lookup(struct vip_nic *n, VIP_MEM_HANDLE h)
{
    uint32_t idx = VIA_MH_INDEX(h);
    if (idx >= VIA_MAX_TPT || VIA_MH_GEN(h) == 0 || nic_mem_revoked(n->hw, idx))
        return NULL;
    const struct via_tpt_entry *e = &((const struct via_tpt_entry *)n->tpt_map)[idx];
    return atomic_load_explicit(&e->gen, memory_order_acquire) == VIA_MH_GEN(h) ? e : NULL;
}

VIP_RETURN vipl_rcache_deregister(struct vip_nic *n, uintptr_t va, VIP_MEM_HANDLE h)
{
    pthread_mutex_lock(&n->rc.lock);
    if (nic_mem_revoked(n->hw, VIA_MH_INDEX(h))) {
        pthread_mutex_unlock(&n->rc.lock);
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "memory handle 0x%08x is not a registration of this NIC handle "
                         "(it was deregistered already)", (unsigned)h);
    }
    const struct via_tpt_entry *e = vipl_tpt_lookup(n, h);
    /* A region larger than the cache keeps goes back at once: what a
     * process keeps counts against its user's registration limit, which
     * the user's other processes share. */
    if (!rcache_on() || !e || e->va != va || e->len > VIPL_RCACHE_BYTES) {
        /* Not one to keep (or an error vipd explains): vipd decides. */
        struct via_ctl_dereg_mem q = {.va = va, .handle = h};
        VIP_RETURN rc = vipl_call(n, VIA_CTL_DEREG_MEM, &q, sizeof q, NULL, 0, NULL, NULL);
        pthread_mutex_unlock(&n->rc.lock);
        /* vipd has closed the entry; an RDMA of a peer's that passed its
         * check before may still be copying: when it is done, the memory
         * is ours alone (the caller may unmap it at once). */
        if (rc == VIP_SUCCESS)
            nic_mem_fence(n->hw);
        return rc;
    }
    nic_mem_revoke(n->hw, VIA_MH_INDEX(h), true);
    while (n->rc.n && (n->rc.n == VIPL_RCACHE_SLOTS || n->rc.bytes + e->len > VIPL_RCACHE_BYTES))
        give_back(n, 0); /* the oldest kept */
    n->rc.slot[n->rc.n++] = (struct vipl_rcache_slot){
        .va = va, .len = e->len, .ptag = e->ptag, .flags = e->flags, .handle = h};
    n->rc.bytes += e->len;
    pthread_mutex_unlock(&n->rc.lock);
    nic_mem_fence(n->hw); /* a copy that passed its check before is done */
    return VIP_SUCCESS;
}

/*
 * vipl_mem.c - protection tags and memory registration.
 *
 * Registration asks the kernel agent for a TPT entry (memory handle ->
 * owner, ptag, range, RDMA enables). The NIC of the native profile runs on
 * this process's CPU and walks this process's virtual addresses, much as
 * the S-Bus LANai used virtually addressed DMA, so any mapped buffer
 * (heap, static, stack, any alignment) can be registered without moving
 * pages; see spec-notes/memory-registration.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vipl_int.h"

struct vip_ptag *vipl_ptag(struct vip_nic *n, VIP_PROTECTION_HANDLE h)
{
    struct vip_ptag *p = vipl_handle_obj(h);
    if (!p || p->magic != VIPL_MAGIC_PTAG || p->nic != n)
        return NULL;
    return p;
}

struct vip_ptag *vipl_ptag_by_id(struct vip_nic *n, uint32_t id)
{
    struct vip_ptag *p;
    pthread_mutex_lock(&n->lock);
    for (p = n->ptags; p && p->id != id; p = p->next)
        ;
    pthread_mutex_unlock(&n->lock);
    return p;
}

VIP_RETURN VipCreatePtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE *Ptag)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !Ptag)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipCreatePtag");
    struct via_ctl_ptag_r r;
    VIP_RETURN rc = vipl_call(n, VIA_CTL_CREATE_PTAG, NULL, 0, &r, sizeof r, NULL, NULL);
    if (rc != VIP_SUCCESS)
        return rc;
    struct vip_ptag *p = calloc(1, sizeof *p);
    if (!p) {
        struct via_ctl_ptag q = {.ptag = r.ptag};
        vipl_call(n, VIA_CTL_DESTROY_PTAG, &q, sizeof q, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "out of memory");
    }
    *p = (struct vip_ptag){.magic = VIPL_MAGIC_PTAG, .id = r.ptag, .nic = n};
    if (!(p->handle = vipl_handle_new(p))) {
        struct via_ctl_ptag q = {.ptag = r.ptag};
        vipl_call(n, VIA_CTL_DESTROY_PTAG, &q, sizeof q, NULL, 0, NULL, NULL);
        free(p);
        return vipl_fail(VIP_ERROR_RESOURCE, "this process has %u VIPL objects (the limit)",
                         VIPL_HANDLE_SLOTS);
    }
    pthread_mutex_lock(&n->lock);
    p->next = n->ptags;
    n->ptags = p;
    pthread_mutex_unlock(&n->lock);
    *Ptag = p->handle;
    return VIP_SUCCESS;
}

VIP_RETURN VipDestroyPtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE Ptag)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a NIC handle");
    struct vip_ptag *p = vipl_ptag(n, Ptag);
    if (!p)
        return vipl_fail(VIP_INVALID_PTAG, "not a protection tag of this NIC");
    struct via_ctl_ptag q = {.ptag = p->id};
    vipl_rcache_flush(n, p->id); /* registrations kept closed are no reason to refuse */
    VIP_RETURN rc = vipl_call(n, VIA_CTL_DESTROY_PTAG, &q, sizeof q, NULL, 0, NULL, NULL);
    if (rc != VIP_SUCCESS)
        return rc;
    pthread_mutex_lock(&n->lock);
    for (struct vip_ptag **pp = &n->ptags; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    pthread_mutex_unlock(&n->lock);
    vipl_handle_free(p->handle);
    p->magic = VIPL_DEAD;
    free(p);
    return VIP_SUCCESS;
}

/* Is all of [va, va+len) mapped readable and writable? The NIC reads
 * send data and writes receive data, status words and RDMA targets there:
 * a PROT_NONE or read-only page would fault inside the NIC's copy, in the
 * owner's process. 0 if so; else why not, in why. */
static int range_usable(uintptr_t va, size_t len, char *why, size_t cap)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) {
        snprintf(why, cap, "cannot read /proc/self/maps to check the region: %s",
                 strerror(errno));
        return -1;
    }
    uintptr_t at = va, end = va + len;
    char line[512];
    /* The mappings come in address order; walk them over [va, end). */
    while (at < end && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perm[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) != 3 || hi <= at)
            continue;
        if (lo > at)
            break; /* a hole */
        if (perm[0] != 'r' || perm[1] != 'w') {
            snprintf(why, cap, "the page at 0x%lx is mapped %s, not read-write", (unsigned long)at,
                     perm[0] == '-' && perm[1] == '-' ? "without access" : "read-only");
            fclose(f);
            return -1;
        }
        at = hi;
    }
    fclose(f);
    if (at < end) {
        snprintf(why, cap, "nothing is mapped at 0x%lx", (unsigned long)at);
        return -1;
    }
    return 0;
}

/* range_usable as the registration cache calls it: VIP_SUCCESS, or the
 * failure with its reason. */
static VIP_RETURN region_check(uintptr_t va, size_t len)
{
    char why[160];
    if (range_usable(va, len, why, sizeof why) < 0)
        return vipl_fail(VIP_INVALID_PARAMETER, "region %p + %zu cannot be registered: %s",
                         (void *)va, len, why);
    return VIP_SUCCESS;
}

static uint32_t mem_flags(const VIP_MEM_ATTRIBUTES *a)
{
    return (a->EnableRdmaWrite ? VIA_TPT_RDMA_WRITE : 0u) |
           (a->EnableRdmaRead ? VIA_TPT_RDMA_READ : 0u);
}

VIP_RETURN VipRegisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_ULONG Length,
                          VIP_MEM_ATTRIBUTES *MemAttribs, VIP_MEM_HANDLE *MemoryHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !MemAttribs || !MemoryHandle)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipRegisterMem");
    struct vip_ptag *p = vipl_ptag(n, MemAttribs->Ptag);
    if (!p)
        return vipl_fail(VIP_INVALID_PTAG, "MemAttribs->Ptag is not a protection tag of "
                                           "this NIC (create one with VipCreatePtag)");
    uintptr_t va = (uintptr_t)VirtualAddress;
    if (!va || Length == 0 || va + Length < va)
        return vipl_fail(VIP_INVALID_PARAMETER, "bad region %p + %lu", VirtualAddress,
                         (unsigned long)Length);
    if (Length > n->attr.max_register_bytes)
        return vipl_fail(VIP_ERROR_RESOURCE, "region of %lu bytes exceeds MaxRegisterBytes",
                         (unsigned long)Length);
    return vipl_rcache_register(n, va, Length, p->id, mem_flags(MemAttribs), MemoryHandle,
                                region_check);
}

VIP_RETURN VipDeregisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress,
                            VIP_MEM_HANDLE MemoryHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a NIC handle");
    return vipl_rcache_deregister(n, (uintptr_t)VirtualAddress, MemoryHandle);
}

VIP_RETURN VipQueryMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID Address, VIP_MEM_HANDLE MemHandle,
                       VIP_MEM_ATTRIBUTES *MemAttribs)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !MemAttribs)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipQueryMem");
    const struct via_tpt_entry *e = vipl_tpt_lookup(n, MemHandle);
    uintptr_t a = (uintptr_t)Address;
    if (!e || a < e->va || a - e->va >= e->len)
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "memory handle 0x%x does not cover %p in this process", MemHandle,
                         Address);
    struct vip_ptag *p = vipl_ptag_by_id(n, e->ptag);
    MemAttribs->Ptag = p ? p->handle : NULL;
    MemAttribs->EnableRdmaWrite = (e->flags & VIA_TPT_RDMA_WRITE) ? VIP_TRUE : VIP_FALSE;
    MemAttribs->EnableRdmaRead = (e->flags & VIA_TPT_RDMA_READ) ? VIP_TRUE : VIP_FALSE;
    return VIP_SUCCESS;
}

VIP_RETURN VipSetMemAttributes(VIP_NIC_HANDLE NicHandle, VIP_PVOID Address,
                               VIP_MEM_HANDLE MemHandle, VIP_MEM_ATTRIBUTES *MemAttribs)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !MemAttribs)
        return vipl_fail(VIP_INVALID_PARAMETER, "VipSetMemAttributes: %s",
                         !n ? "not a NIC handle" : "MemAttribs is NULL");
    struct vip_ptag *p = vipl_ptag(n, MemAttribs->Ptag);
    if (!p)
        return vipl_fail(VIP_INVALID_PTAG,
                         "VipSetMemAttributes: MemAttribs->Ptag is not a ptag of this NIC");
    /* Deregistered, though vipd still holds it for the registration cache:
     * as dead to the program as one vipd freed. */
    if (nic_mem_revoked(n->hw, VIA_MH_INDEX(MemHandle)))
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "memory handle 0x%08x is not a registration of this NIC handle "
                         "(it was deregistered)", (unsigned)MemHandle);
    struct via_ctl_set_mem q = {.va = (uintptr_t)Address, .handle = MemHandle, .ptag = p->id,
                                .flags = mem_flags(MemAttribs)};
    return vipl_call(n, VIA_CTL_SET_MEM, &q, sizeof q, NULL, 0, NULL, NULL);
}

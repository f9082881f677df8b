/*
 * ext_host.c - host side of the short-message extensions.
 *
 * An unmodified VipPostSend reaches here. If the VI has an extension mode
 * and the message qualifies (one data segment or none, SEND, at most the
 * VI's threshold, and every check the NIC would make on the standard path
 * passes), the library sends it the short way:
 *   descriptorless: copies the data into a free SRAM slot of the VI's
 *     doorbell page (programmed I/O on the real card) and rings a token
 *     carrying the slot and size;
 *   merged: copies descriptor and data into a contiguous, registered
 *     staging slot and rings a token with the combined length.
 * Otherwise it rings a standard token. Either way the program's descriptor
 * completes with the same status, so the choice is invisible to it.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vipl_ext.h"
#include "vipl_int.h"

#define MERGED_SLOTS 64u

struct ext_merged {
    uint8_t *buf;                 /* MERGED_SLOTS slots of `stride` bytes */
    size_t stride;
    VIP_MEM_HANDLE mh;
    uint64_t post_no[MERGED_SLOTS]; /* send (by posting order) using the slot, +1 */
    uint32_t next;
};

static struct ext_merged *merged_staging(struct vip_vi *vi);

static uint32_t mode_cap(enum fw_ext_mode m)
{
    return m == FW_EXT_DESCLESS ? VIP_EXT_DESCRIPTORLESS_MAX : VIP_EXT_MERGED_MAX;
}

void ext_vi_init(struct vip_vi *vi)
{
    const char *m = getenv("VIP_EXT_MODE"), *mx = getenv("VIP_EXT_MAX");
    enum fw_ext_mode mode = FW_EXT_STANDARD;
    if (m && !strcasecmp(m, "descriptorless"))
        mode = FW_EXT_DESCLESS;
    else if (m && !strcasecmp(m, "merged"))
        mode = FW_EXT_MERGED;
    uint32_t max = VIP_EXT_MAX_DEFAULT;
    if (mx && *mx)
        max = (uint32_t)strtoul(mx, NULL, 10);
    if (mode != FW_EXT_STANDARD && max > mode_cap(mode))
        max = mode_cap(mode);
    vi->fw.ext_mode = mode;
    vi->fw.ext_max = max;
    if (mode == FW_EXT_MERGED)
        merged_staging(vi); /* register it now, not on the first send */
}

void ext_vi_fini(struct vip_vi *vi)
{
    struct ext_merged *mg = vi->merged;
    if (!mg)
        return;
    VipDeregisterMem(vi->nic, mg->buf, mg->mh);
    free(mg->buf);
    free(mg);
    vi->merged = NULL;
}

VIP_RETURN VipExtSetMode(VIP_VI_HANDLE ViHandle, VIP_EXT_MODE Mode, VIP_ULONG MaxBytes)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || (unsigned)Mode >= FW_EXT_NMODES)
        return vipl_fail(VIP_INVALID_PARAMETER, "bad VI handle or extension mode %d", (int)Mode);
    enum fw_ext_mode m = (enum fw_ext_mode)Mode;
    uint32_t max = MaxBytes ? (uint32_t)MaxBytes : VIP_EXT_MAX_DEFAULT;
    if (m != FW_EXT_STANDARD && (MaxBytes > mode_cap(m) || max > mode_cap(m)))
        return vipl_fail(VIP_INVALID_PARAMETER, "%s messages are at most %u bytes",
                         fw_ext_mode_name[m], mode_cap(m));
    pthread_mutex_lock(&vi->lock);
    vi->fw.ext_mode = m;
    vi->fw.ext_max = max;
    pthread_mutex_unlock(&vi->lock);
    if (m == FW_EXT_MERGED && !merged_staging(vi))
        return vipl_fail(VIP_ERROR_RESOURCE, "cannot register the merged-descriptor staging "
                                             "area: %s", vip_last_error());
    return VIP_SUCCESS;
}

VIP_RETURN VipExtGetMode(VIP_VI_HANDLE ViHandle, VIP_EXT_MODE *Mode, VIP_ULONG *MaxBytes)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || !Mode || !MaxBytes)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipExtGetMode");
    *Mode = (VIP_EXT_MODE)vi->fw.ext_mode;
    *MaxBytes = vi->fw.ext_max;
    return VIP_SUCCESS;
}

const char *VipExtProfileName(VIP_NIC_HANDLE NicHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    return n ? n->attr.profile : NULL;
}

/* Would the standard path complete this descriptor without error? Only
 * then may it go the short way (an error must look the same either way). */
static bool qualifies(struct vip_vi *vi, const VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh,
                      uint32_t *bytes)
{
    uintptr_t va = (uintptr_t)d;
    if (va % VIP_DESCRIPTOR_ALIGNMENT || d->CS.SegCount > 1 ||
        (d->CS.Control & ~(uint16_t)VIP_CONTROL_IMMEDIATE) != VIP_CONTROL_OP_SENDRECV)
        return false;
    if (fw_tpt_check(&vi->fw, mh, va, 32u + 16u * d->CS.SegCount))
        return false;
    uint32_t n = d->CS.SegCount ? d->DS[0].Local.Length : 0;
    if (n > vi->fw.ext_max || n > vi->fw.max_transfer)
        return false;
    if (n && fw_tpt_check(&vi->fw, d->DS[0].Local.Handle, d->DS[0].Local.Data.AddressBits, n))
        return false;
    *bytes = n;
    return true;
}

static bool descless(struct vip_vi *vi, VIP_DESCRIPTOR *d, uint32_t n, VIP_MEM_HANDLE mh,
                     struct via_db_token *tok)
{
    if (d->CS.Control & VIP_CONTROL_IMMEDIATE)
        return false; /* the token is only a size: no room for immediate data */
    uint32_t slot = vi->fw.descless_next % VIA_DESCLESS_NSLOTS;
    _Atomic uint32_t *busy = &vi->db->descless_busy[slot];
    if (atomic_load_explicit(busy, memory_order_acquire)) {
        fw_tx_progress(&vi->fw); /* the NIC may be done with it by now */
        if (atomic_load_explicit(busy, memory_order_acquire))
            return false;
    }
    if (n)
        memcpy(vi->db->descless + slot * VIA_DESCLESS_MAX,
               (const void *)(uintptr_t)d->DS[0].Local.Data.AddressBits, n);
    atomic_store_explicit(busy, 1, memory_order_relaxed);
    vi->fw.descless_next++;
    *tok = (struct via_db_token){.desc_va = (uintptr_t)d, .mem_handle = mh,
                                 .word2 = VIA_DB_WORD2(VIA_DB_DESCLESS, slot, n)};
    return true;
}

static struct ext_merged *merged_staging(struct vip_vi *vi)
{
    if (vi->merged)
        return vi->merged;
    struct ext_merged *mg = calloc(1, sizeof *mg);
    if (!mg)
        return NULL;
    mg->stride = sizeof(VIP_DESCRIPTOR) + ((VIP_EXT_MERGED_MAX + 63u) & ~63u);
    if (posix_memalign((void **)&mg->buf, VIP_DESCRIPTOR_ALIGNMENT, mg->stride * MERGED_SLOTS)) {
        free(mg);
        return NULL;
    }
    VIP_MEM_ATTRIBUTES ma = {.Ptag = vi->attr.Ptag};
    if (VipRegisterMem(vi->nic, mg->buf, mg->stride * MERGED_SLOTS, &ma, &mg->mh) != VIP_SUCCESS) {
        free(mg->buf);
        free(mg);
        return NULL;
    }
    return vi->merged = mg;
}

static bool merged(struct vip_vi *vi, VIP_DESCRIPTOR *d, uint32_t n, struct via_db_token *tok)
{
    struct ext_merged *mg = merged_staging(vi);
    if (!mg)
        return false;
    uint32_t k = mg->next % MERGED_SLOTS;
    /* The NIC completes sends in order: the slot is free once as many sends
     * have completed as had been posted before the one that used it. The
     * program's descriptor cannot tell: it may already be posted again. */
    uint64_t done = atomic_load_explicit(&vi->db->cnt.sq_done, memory_order_acquire);
    if (mg->post_no[k] && done < mg->post_no[k])
        return false; /* all slots in flight */
    uint8_t *slot = mg->buf + (size_t)k * mg->stride;
    VIP_DESCRIPTOR *md = (VIP_DESCRIPTOR *)slot;
    memset(md, 0, sizeof *md);
    md->CS.Next.AddressBits = (uintptr_t)d; /* where T6 writes the status */
    md->CS.Control = d->CS.Control;
    md->CS.ImmediateData = d->CS.ImmediateData;
    md->CS.SegCount = n ? 1 : 0;
    md->CS.Length = n;
    md->DS[0].Local.Data.Address = slot + sizeof *md;
    md->DS[0].Local.Handle = mg->mh;
    md->DS[0].Local.Length = n;
    if (n)
        memcpy(slot + sizeof *md, (const void *)(uintptr_t)d->DS[0].Local.Data.AddressBits, n);
    mg->post_no[k] = atomic_load_explicit(&vi->db->cnt.sq_posted, memory_order_relaxed) + 1;
    mg->next++;
    *tok = (struct via_db_token){.desc_va = (uintptr_t)slot, .mem_handle = mg->mh,
                                 .word2 = VIA_DB_WORD2(VIA_DB_MERGED, 0, sizeof *md + n)};
    return true;
}

enum fw_ext_mode ext_prepare_send(struct vip_vi *vi, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh,
                                  struct via_db_token *tok, uint32_t *bytes)
{
    uint32_t n = 0;
    enum fw_ext_mode m = vi->fw.ext_mode;
    if (m != FW_EXT_STANDARD && qualifies(vi, d, mh, &n)) {
        if (m == FW_EXT_DESCLESS && descless(vi, d, n, mh, tok)) {
            *bytes = n;
            return m;
        }
        if (m == FW_EXT_MERGED && merged(vi, d, n, tok)) {
            *bytes = n;
            return m;
        }
    }
    *tok = (struct via_db_token){.desc_va = (uintptr_t)d, .mem_handle = mh,
                                 .word2 = VIA_DB_WORD2(VIA_DB_DESC, 0, 0)};
    *bytes = 0;
    for (unsigned i = 0; i < d->CS.SegCount && i < 2; i++)
        *bytes += d->DS[i].Local.Length;
    return FW_EXT_STANDARD;
}

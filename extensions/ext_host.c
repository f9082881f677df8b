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

#include "ext.h"
#include "vipl_ext.h"

#define MERGED_SLOTS 64u

struct ext_merged {
    uint8_t *buf;                 /* MERGED_SLOTS slots of `stride` bytes */
    size_t stride;
    VIP_MEM_HANDLE mh;
    uint64_t post_no[MERGED_SLOTS]; /* send (by posting order) using the slot, +1 */
    uint32_t next;
};

static size_t merged_stride(void)
{
    return sizeof(VIP_DESCRIPTOR) + ((VIP_EXT_MERGED_MAX + 63u) & ~63u);
}

uint32_t ext_mode_cap(enum fw_ext_mode m)
{
    return m == FW_EXT_DESCLESS ? VIP_EXT_DESCRIPTORLESS_MAX : VIP_EXT_MERGED_MAX;
}

void ext_vi_init(struct ext_vi *e)
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
    if (mode != FW_EXT_STANDARD && max > ext_mode_cap(mode))
        max = ext_mode_cap(mode);
    *e = (struct ext_vi){.mode = mode, .max = max};
}

size_t ext_merged_bytes(void)
{
    return merged_stride() * MERGED_SLOTS;
}

int ext_merged_attach(struct ext_vi *e, void *buf, VIP_MEM_HANDLE mh)
{
    if (e->merged)
        return 0;
    struct ext_merged *mg = calloc(1, sizeof *mg);
    if (!mg)
        return -1;
    mg->buf = buf;
    mg->stride = merged_stride();
    mg->mh = mh;
    e->merged = mg;
    return 0;
}

void *ext_merged_detach(struct ext_vi *e, VIP_MEM_HANDLE *mh)
{
    struct ext_merged *mg = e->merged;
    if (!mg)
        return NULL;
    void *buf = mg->buf;
    *mh = mg->mh;
    free(mg);
    e->merged = NULL;
    return buf;
}

/* Would the standard path complete this descriptor without error? Only
 * then may it go the short way (an error must look the same either way).
 * Up to two data segments (a header and a payload, as message-passing
 * libraries send): the library gathers them into the short message. */
static bool qualifies(const struct ext_vi *e, const struct ext_send_ctx *c,
                      const VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh, uint32_t *bytes)
{
    uintptr_t va = (uintptr_t)d;
    if (va % VIP_DESCRIPTOR_ALIGNMENT || d->CS.SegCount > 2 ||
        (d->CS.Control & ~(uint16_t)VIP_CONTROL_IMMEDIATE) != VIP_CONTROL_OP_SENDRECV)
        return false;
    if (nic_tpt_check(c->hw, mh, va, 32u + 16u * d->CS.SegCount))
        return false;
    uint64_t n = 0;
    for (unsigned i = 0; i < d->CS.SegCount; i++) {
        uint32_t len = d->DS[i].Local.Length;
        if (len && nic_tpt_check(c->hw, d->DS[i].Local.Handle, d->DS[i].Local.Data.AddressBits,
                                 len))
            return false;
        n += len;
    }
    if (n > e->max || n > c->max_transfer || n != d->CS.Length)
        return false;
    *bytes = (uint32_t)n;
    return true;
}

/* The descriptor's data segments, one after the other, into dst. */
static void gather(const VIP_DESCRIPTOR *d, uint8_t *dst)
{
    for (unsigned i = 0; i < d->CS.SegCount; i++) {
        uint32_t len = d->DS[i].Local.Length;
        if (len)
            memcpy(dst, (const void *)(uintptr_t)d->DS[i].Local.Data.AddressBits, len);
        dst += len;
    }
}

static bool descless(struct ext_vi *e, const struct ext_send_ctx *c, VIP_DESCRIPTOR *d,
                     uint32_t n, VIP_MEM_HANDLE mh, struct via_db_token *tok)
{
    uint32_t slot = e->descless_next % VIA_DESCLESS_NSLOTS;
    _Atomic uint32_t *busy = &c->db->descless_busy[slot];
    if (atomic_load_explicit(busy, memory_order_acquire)) {
        nic_vi_turn_locked(c->hw, true); /* the NIC may be done with it by now */
        if (atomic_load_explicit(busy, memory_order_acquire))
            return false;
    }
    gather(d, c->db->descless + slot * VIA_DESCLESS_MAX);
    /* Immediate data: one more word of programmed I/O, beside the slot. */
    bool imm = d->CS.Control & VIP_CONTROL_IMMEDIATE;
    if (imm)
        c->db->descless_imm[slot] = d->CS.ImmediateData;
    atomic_store_explicit(busy, 1, memory_order_relaxed);
    e->descless_next++;
    *tok = (struct via_db_token){.desc_va = (uintptr_t)d, .mem_handle = mh,
                                 .word2 = VIA_DB_WORD2(VIA_DB_DESCLESS, slot, n) |
                                          (imm ? VIA_DB_IMM : 0)};
    return true;
}

static bool merged(struct ext_vi *e, const struct ext_send_ctx *c, VIP_DESCRIPTOR *d,
                   uint32_t n, VIP_MEM_HANDLE mh, struct via_db_token *tok)
{
    struct ext_merged *mg = e->merged;
    if (!mg)
        return false;
    uint32_t k = mg->next % MERGED_SLOTS;
    /* The NIC completes sends in order: the slot is free once as many sends
     * have completed as had been posted before the one that used it. The
     * program's descriptor cannot tell: it may already be posted again. */
    uint64_t done = atomic_load_explicit(&c->db->cnt.sq_done, memory_order_acquire);
    if (mg->post_no[k] && done < mg->post_no[k])
        return false; /* all slots in flight */
    uint8_t *slot = mg->buf + (size_t)k * mg->stride;
    VIP_DESCRIPTOR *md = (VIP_DESCRIPTOR *)slot;
    memset(md, 0, sizeof *md);
    md->CS.Next.AddressBits = (uintptr_t)d; /* where T6 writes the status */
    md->CS.NextHandle = mh;                 /* ... checked against the TPT */
    md->CS.Control = d->CS.Control;
    md->CS.ImmediateData = d->CS.ImmediateData;
    md->CS.SegCount = n ? 1 : 0;
    md->CS.Length = n;
    md->DS[0].Local.Data.Address = slot + sizeof *md;
    md->DS[0].Local.Handle = mg->mh;
    md->DS[0].Local.Length = n;
    gather(d, slot + sizeof *md);
    mg->post_no[k] = atomic_load_explicit(&c->db->cnt.sq_posted, memory_order_relaxed) + 1;
    mg->next++;
    *tok = (struct via_db_token){.desc_va = (uintptr_t)slot, .mem_handle = mg->mh,
                                 .word2 = VIA_DB_WORD2(VIA_DB_MERGED, 0, sizeof *md + n)};
    return true;
}

enum fw_ext_mode ext_prepare_send(struct ext_vi *e, const struct ext_send_ctx *c,
                                  VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh,
                                  struct via_db_token *tok, uint32_t *bytes)
{
    uint32_t n = 0;
    enum fw_ext_mode m = e->mode;
    if (m != FW_EXT_STANDARD && qualifies(e, c, d, mh, &n)) {
        if (m == FW_EXT_DESCLESS && descless(e, c, d, n, mh, tok)) {
            /* priced as the programmed I/O it is: the immediate word too */
            *bytes = n + ((d->CS.Control & VIP_CONTROL_IMMEDIATE) ? 4u : 0u);
            return m;
        }
        if (m == FW_EXT_MERGED && merged(e, c, d, n, mh, tok)) {
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

/*
 * fw_token.c - doorbell token kinds: what T3 stages for each kind of token,
 * and what the NIC does when the message has left.
 *
 * The NIC's send pipeline (fw_tx.c) looks a token's kind up here and never
 * names a kind itself. Three kinds exist:
 *
 *   standard:        the token names a descriptor in registered memory;
 *                    T3 fetches it, T4 gathers the data it points to.
 *   merged:          the token names a descriptor followed by its data and
 *                    carries their combined length: one DMA brings both
 *                    (T3), T4 moves nothing. The merged descriptor's
 *                    Next/NextHandle name the program's own descriptor,
 *                    where T6 writes the status; that address is checked
 *                    against the TPT like any other before it is written.
 *   descriptorless:  the data is already in the VI's SRAM slot (written by
 *                    the host with programmed I/O); the token is only the
 *                    slot and the size. Nothing crosses the I/O bus; the NIC
 *                    clears the slot once the message is on the wire.
 *
 * The short kinds are the Berkeley VIA paper's extensions ("VIA
 * Extensions"); extensions/ext_host.c builds their tokens. Each checks what
 * a standard descriptor is checked for, so a program sees the same statuses
 * whichever way its message went.
 */
#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"

/* The checked address of the descriptor a token's completion is written
 * to, or 0 when it fails the TPT (then nothing is written: the error is
 * the VI's). */
static uint64_t status_at(const struct fw_vi *vi, uint32_t handle, uint64_t va)
{
    if (!va || va % 4 || fw_tpt_check(vi, handle, va, sizeof(VIP_CONTROL_SEGMENT)))
        return 0;
    return va;
}

static uint64_t status_plain(const struct fw_vi *vi, const struct via_db_token *tok)
{
    return status_at(vi, tok->mem_handle, tok->desc_va);
}

static uint64_t status_merged(const struct fw_vi *vi, const struct via_db_token *tok)
{
    VIP_CONTROL_SEGMENT cs;
    if (!status_at(vi, tok->mem_handle, tok->desc_va))
        return 0;
    hal_dma_from_host(&cs, tok->desc_va, sizeof cs);
    return status_at(vi, cs.NextHandle, cs.Next.AddressBits);
}

static void xdes_standard(struct fw_vi *vi, const struct via_db_token *tok, struct fw_xdes *d)
{
    fw_xdes_fetch(vi, tok, false, d);
}

static void xdes_descless(struct fw_vi *vi, const struct via_db_token *tok, struct fw_xdes *d)
{
    uint32_t len = VIA_DB_LEN(tok->word2), slot = VIA_DB_SLOT(tok->word2);
    /* Even an error is written only where the TPT allows. */
    *d = (struct fw_xdes){.va = status_plain(vi, tok), .mem_handle = tok->mem_handle};
    if (slot >= VIA_DESCLESS_NSLOTS || len > VIA_DESCLESS_MAX || len > vi->max_transfer) {
        d->status = VIP_STATUS_FORMAT_ERROR;
        return;
    }
    /* The status goes to the program's descriptor: check it like any other. */
    if (!d->va) {
        d->status = VIP_STATUS_PROTECTION_ERROR;
        return;
    }
    d->segcount = len ? 1 : 0;
    d->seg[0].va = (uintptr_t)(vi->db->descless + slot * VIA_DESCLESS_MAX);
    d->seg[0].len = len;
    d->total = len;
    if (tok->word2 & VIA_DB_IMM) {
        d->control = VIP_CONTROL_IMMEDIATE;
        d->imm = vi->db->descless_imm[slot];
    }
}

static void sent_descless(struct fw_vi *vi, const struct via_db_token *tok)
{
    uint32_t slot = VIA_DB_SLOT(tok->word2);
    if (slot < VIA_DESCLESS_NSLOTS)
        atomic_store_explicit(&vi->db->descless_busy[slot], 0, memory_order_release);
}

/* Merged: [control segment][one data segment][data], `len` bytes in all. */
static void xdes_merged(struct fw_vi *vi, const struct via_db_token *tok, struct fw_xdes *d)
{
    uint32_t len = VIA_DB_LEN(tok->word2);
    VIP_DESCRIPTOR md;
    /* Until Next has passed the TPT, errors go to the merged descriptor,
     * and only if it is in registered memory itself. */
    *d = (struct fw_xdes){.va = status_plain(vi, tok), .mem_handle = tok->mem_handle};
    if (len < sizeof md || tok->desc_va % VIP_DESCRIPTOR_ALIGNMENT) {
        d->status = VIP_STATUS_FORMAT_ERROR;
        return;
    }
    if (fw_tpt_check(vi, tok->mem_handle, tok->desc_va, len)) {
        d->status = VIP_STATUS_PROTECTION_ERROR;
        return;
    }
    hal_dma_from_host(&md, tok->desc_va, sizeof md);
    /* Where T6 will write: the program's descriptor, named by Next. An
     * address outside the VI's registered memory is never written through;
     * the merged descriptor itself (checked above) takes the error. */
    uint64_t status_va = status_at(vi, md.CS.NextHandle, md.CS.Next.AddressBits);
    if (!status_va) {
        d->status = VIP_STATUS_PROTECTION_ERROR;
        return;
    }
    d->va = status_va;
    d->mem_handle = md.CS.NextHandle;
    d->control = md.CS.Control;
    d->imm = md.CS.ImmediateData;
    uint32_t n = len - (uint32_t)sizeof md;
    if ((md.CS.Control & VIP_CONTROL_RESERVED) ||
        (md.CS.Control & VIP_CONTROL_OP_MASK) != VIP_CONTROL_OP_SENDRECV || md.CS.Length != n) {
        d->status = VIP_STATUS_FORMAT_ERROR;
        return;
    }
    if (n > vi->max_transfer) {
        d->status = VIP_STATUS_LENGTH_ERROR;
        return;
    }
    d->segcount = n ? 1 : 0;
    d->seg[0].va = tok->desc_va + sizeof md;
    d->seg[0].len = n;
    d->total = n;
}

static const struct fw_token_kind token_kinds[VIA_DB_NKINDS] = {
    [VIA_DB_DESC] = {"standard", FW_EXT_STANDARD, xdes_standard, status_plain, NULL},
    [VIA_DB_MERGED] = {"merged", FW_EXT_MERGED, xdes_merged, status_merged, NULL},
    [VIA_DB_DESCLESS] = {"descriptorless", FW_EXT_DESCLESS, xdes_descless, status_plain,
                         sent_descless},
};

const struct fw_token_kind *fw_token_kind(const struct via_db_token *tok)
{
    uint32_t k = VIA_DB_KIND(tok->word2);
    return k < VIA_DB_NKINDS ? &token_kinds[k] : NULL;
}

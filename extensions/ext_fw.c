/*
 * ext_fw.c - firmware side of the short-message extensions (Berkeley VIA
 * paper, "VIA Extensions"; DESIGN.md section 6).
 *
 * Descriptorless: the token is only a size (and which SRAM slot): the data
 * is already in the NIC's memory, written there by the host with
 * programmed I/O, so T3 and T4 move nothing across the I/O bus. The NIC
 * clears the slot once the message is on the wire.
 *
 * Merged: the token carries the combined length of a descriptor followed by
 * its data, in registered memory; one DMA brings both (T3), so T4 moves
 * nothing. The descriptor's Next field holds the address of the program's
 * own descriptor, where T6 writes the status (the host library built the
 * merged copy for an unmodified VipPostSend; see ext_host.c).
 *
 * Both check what a standard descriptor is checked for, so a program sees
 * the same statuses whichever way its message went.
 */
#include <vipl.h>

#include "fw.h"
#include "fw_hal.h"

void ext_xdes_fetch(struct fw_vi *vi, const struct via_db_token *tok, struct fw_xdes *d)
{
    uint32_t kind = VIA_DB_KIND(tok->word2), len = VIA_DB_LEN(tok->word2);
    *d = (struct fw_xdes){.va = tok->desc_va, .mem_handle = tok->mem_handle};

    if (kind == VIA_DB_DESCLESS) {
        uint32_t slot = VIA_DB_SLOT(tok->word2);
        if (slot >= VIA_DESCLESS_NSLOTS || len > VIA_DESCLESS_MAX || len > vi->max_transfer) {
            d->status = VIP_STATUS_FORMAT_ERROR;
            return;
        }
        d->segcount = len ? 1 : 0;
        d->seg[0].va = (uintptr_t)(vi->db->descless + slot * VIA_DESCLESS_MAX);
        d->seg[0].len = len;
        d->total = len;
        return;
    }

    /* Merged: [control segment][one data segment][data]. */
    VIP_DESCRIPTOR md;
    if (len < sizeof md || fw_tpt_check(vi, tok->mem_handle, tok->desc_va, len)) {
        d->status = len < sizeof md ? VIP_STATUS_FORMAT_ERROR : VIP_STATUS_PROTECTION_ERROR;
        return;
    }
    if (tok->desc_va % VIP_DESCRIPTOR_ALIGNMENT) {
        d->status = VIP_STATUS_FORMAT_ERROR;
        return;
    }
    hal_dma_from_host(&md, tok->desc_va, sizeof md);
    d->va = md.CS.Next.AddressBits; /* the program's descriptor */
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

void ext_descless_done(struct fw_vi *vi, const struct via_db_token *tok)
{
    uint32_t slot = VIA_DB_SLOT(tok->word2);
    if (slot < VIA_DESCLESS_NSLOTS)
        atomic_store_explicit(&vi->db->descless_busy[slot], 0, memory_order_release);
}

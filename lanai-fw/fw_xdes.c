/*
 * fw_xdes.c - T3/R4 XDes: the descriptor crosses the I/O bus.
 *
 * The second hop of VIA's double indirection: the doorbell token gave the
 * descriptor's address and memory handle; here the NIC checks that range
 * against the TPT, DMAs the control segment and the data segments into its
 * staging area, and validates them (the guards a device model keeps against
 * bogus host values). Problems are recorded as VIA status bits in d->status;
 * the caller completes the descriptor with them.
 */
#include <stddef.h>

#include <vipl.h>

#include "fw.h"
#include "fw_hal.h"

static_assert(sizeof(VIP_CONTROL_SEGMENT) == 32, "control segment");
static_assert(sizeof(VIP_DATA_SEGMENT) == 16, "data segment");
static_assert(sizeof(VIP_DESCRIPTOR) == 64, "descriptor");
static_assert(offsetof(VIP_CONTROL_SEGMENT, Status) == 28, "status offset");
static_assert(offsetof(VIP_CONTROL_SEGMENT, Length) == 24, "length offset");
static_assert(offsetof(VIP_CONTROL_SEGMENT, ImmediateData) == 20, "imm offset");

void fw_xdata_copy(const struct fw_xdes *d, uint32_t off, uint8_t *nic, uint32_t len,
                   bool to_host)
{
    for (unsigned i = 0; i < d->segcount && len; i++) {
        uint32_t sl = d->seg[i].len;
        if (off >= sl) {
            off -= sl;
            continue;
        }
        uint32_t k = sl - off < len ? sl - off : len;
        if (to_host)
            hal_dma_to_host(d->seg[i].va + off, nic, k);
        else
            hal_dma_from_host(nic, d->seg[i].va + off, k);
        nic += k;
        len -= k;
        off = 0;
    }
}

void fw_xdes_fetch(struct fw_vi *vi, const struct via_db_token *tok, bool recv,
                   struct fw_xdes *d)
{
    VIP_CONTROL_SEGMENT cs;

    d->va = tok->desc_va;
    d->mem_handle = tok->mem_handle;
    d->segcount = 0;
    d->control = 0;
    d->imm = 0;
    d->total = 0;
    d->status = 0;

    /* The control segment must lie in registered memory of this VI's ptag. */
    d->status = fw_tpt_check(vi, tok->mem_handle, d->va, sizeof cs);
    if (d->status) {
        /* Not a descriptor of this VI's memory: nothing may be written
         * there, not even the error (the error is the VI's). */
        d->va = 0;
        return;
    }
    if (d->va % VIP_DESCRIPTOR_ALIGNMENT) {
        d->status = VIP_STATUS_FORMAT_ERROR; /* in registered memory: told there */
        return;
    }
    hal_dma_from_host(&cs, d->va, sizeof cs);
    d->control = cs.Control;
    d->imm = cs.ImmediateData;

    if (cs.SegCount > VIA_MAX_SEGS || (cs.Control & VIP_CONTROL_RESERVED) ||
        (cs.Control & VIP_CONTROL_OP_MASK) != VIP_CONTROL_OP_SENDRECV) {
        /* RDMA operations are not issued yet (the wire and the responder
         * have them): refused as malformed, not lost. */
        d->status = VIP_STATUS_FORMAT_ERROR;
        return;
    }
    uint64_t seg_bytes = (uint64_t)cs.SegCount * sizeof(VIP_DATA_SEGMENT);
    d->status = fw_tpt_check(vi, tok->mem_handle, d->va, sizeof cs + seg_bytes);
    if (d->status)
        return;

    VIP_DATA_SEGMENT seg[VIA_MAX_SEGS];
    if (seg_bytes)
        hal_dma_from_host(seg, d->va + sizeof cs, (uint32_t)seg_bytes);
    d->segcount = cs.SegCount;

    uint64_t total = 0;
    for (unsigned i = 0; i < cs.SegCount; i++) {
        uint64_t a = seg[i].Data.AddressBits;
        uint32_t len = seg[i].Length;
        d->seg[i].va = a;
        d->seg[i].len = len;
        total += len;
        if (len && fw_tpt_check(vi, seg[i].Handle, a, len)) {
            d->status = VIP_STATUS_PROTECTION_ERROR;
            return;
        }
    }
    if (!recv && total > vi->max_transfer) {
        d->status = VIP_STATUS_LENGTH_ERROR;
        return;
    }
    /* A receive buffer larger than a message can ever be is fine; cap it. */
    d->total = total > VIA_MAX_TRANSFER ? VIA_MAX_TRANSFER : (uint32_t)total;
}

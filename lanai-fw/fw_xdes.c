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

#include "via_spec.h"

#include "fw.h"
#include "fw_hal.h"

static_assert(sizeof(VIP_CONTROL_SEGMENT) == 32, "control segment");
static_assert(sizeof(VIP_DATA_SEGMENT) == 16, "data segment");
static_assert(sizeof(VIP_DESCRIPTOR) == 64, "descriptor");
static_assert(offsetof(VIP_CONTROL_SEGMENT, Status) == 28, "status offset");
static_assert(offsetof(VIP_CONTROL_SEGMENT, Length) == 24, "length offset");
static_assert(offsetof(VIP_CONTROL_SEGMENT, ImmediateData) == 20, "imm offset");

void fw_xdata_copy_segs(const struct fw_xdes *d, uint32_t off, uint8_t *nic, uint32_t len,
                        enum hal_dma dir)
{
    for (unsigned i = 0; i < d->segcount && len; i++) {
        uint32_t sl = d->seg[i].len;
        if (off >= sl) {
            off -= sl;
            continue;
        }
        uint32_t k = sl - off < len ? sl - off : len;
        fw_seg_copy(d->seg[i].va + off, nic, k, dir);
        nic += k;
        len -= k;
        off = 0;
    }
}

/* Stage local data segment k of d from host address seg_va, add its length
 * to *total; false if the TPT refuses it. The entry that allowed the
 * descriptor (de) answers for segments under the descriptor's own handle. */
static inline bool take_seg(const struct fw_vi *vi, const struct via_tpt_entry *de,
                            uint32_t handle, uint64_t seg_va, struct fw_xdes *d, unsigned k,
                            uint64_t *total)
{
    VIP_DATA_SEGMENT seg;
    hal_dma_from_host(&seg, seg_va, sizeof seg);
    uint64_t a = seg.Data.AddressBits;
    uint32_t len = seg.Length;
    d->seg[k].va = a;
    d->seg[k].len = len;
    *total += len;
    if (!len)
        return true;
    return seg.Handle == handle ? fw_tpt_within(de, a, len)
                                : fw_tpt_find(vi, seg.Handle, a, len) != NULL;
}

/* The segments' total: a send's must fit the VI's MaxTransferSize; a
 * receive buffer larger than a message can ever be is fine, capped. The
 * status it leaves; *total is 0 after a length error. */
static inline uint32_t check_total(const struct fw_vi *vi, bool recv, uint64_t *total)
{
    if (!recv && *total > vi->max_transfer) {
        *total = 0;
        return VIP_STATUS_LENGTH_ERROR;
    }
    if (*total > VIA_MAX_TRANSFER)
        *total = VIA_MAX_TRANSFER;
    return 0;
}

/* The staged descriptor's fixed part, each field written once (the
 * segment table is filled only as far as segcount). */
static inline void xdes_head(struct fw_xdes *d, uint64_t va, uint32_t mem_handle,
                             uint16_t segcount, uint16_t control, uint32_t imm, uint32_t total,
                             uint32_t status)
{
    d->va = va;
    d->mem_handle = mem_handle;
    d->segcount = segcount;
    d->control = control;
    d->op = VIP_CONTROL_OP_SENDRECV;
    d->rkey = 0;
    d->raddr = 0;
    d->imm = imm;
    d->total = total;
    d->status = status;
}

void fw_xdes_fetch(struct fw_vi *vi, const struct via_db_token *tok, bool recv,
                   struct fw_xdes *d)
{
    VIP_CONTROL_SEGMENT cs;
    uint64_t va = tok->desc_va;
    uint32_t mh = tok->mem_handle;

    /* The control segment must lie in registered memory of this VI's ptag.
     * The entry that allowed it is kept for the rest of the descriptor and
     * for segments under the same handle (the usual case: one region). */
    const struct via_tpt_entry *de = fw_tpt_find(vi, mh, va, sizeof cs);
    if (!de) {
        /* Not a descriptor of this VI's memory: nothing may be written
         * there, not even the error (the error is the VI's). */
        xdes_head(d, 0, mh, 0, 0, 0, 0, VIP_STATUS_PROTECTION_ERROR);
        return;
    }
    if (va % VIP_DESCRIPTOR_ALIGNMENT) {
        /* In registered memory: told there. */
        xdes_head(d, va, mh, 0, 0, 0, 0, VIP_STATUS_FORMAT_ERROR);
        return;
    }
    hal_dma_from_host(&cs, va, sizeof cs);
    if (cs.SegCount == 1 && !(cs.Control & (VIP_CONTROL_RESERVED | VIP_CONTROL_OP_MASK))) {
        /* The usual descriptor, a send or receive of one data segment: the
         * general path's checks below, for that shape alone (no format
         * check to make, no loop; about 40 instructions fewer a fetch). */
        uint64_t total = 0;
        uint16_t segs = 0;
        uint32_t status = VIP_STATUS_PROTECTION_ERROR;
        if (fw_tpt_within(de, va, sizeof cs + sizeof(VIP_DATA_SEGMENT))) {
            segs = 1;
            if (take_seg(vi, de, mh, va + sizeof cs, d, 0, &total))
                status = check_total(vi, recv, &total);
            else
                total = 0;
        }
        xdes_head(d, va, mh, segs, cs.Control, cs.ImmediateData, (uint32_t)total, status);
        return;
    }
    xdes_head(d, va, mh, 0, cs.Control, cs.ImmediateData, 0, 0);
    d->op = cs.Control & VIP_CONTROL_OP_MASK;

    /* RDMA is the send queue's: DS[0] is then the remote address segment,
     * the local data segments follow it. A read has no immediate data and
     * needs a level that answers (VIP_NIC_ATTRIBUTES.RDMAReadSupport). */
    bool rdma = d->op == VIP_CONTROL_OP_RDMAWRITE || d->op == VIP_CONTROL_OP_RDMAREAD;
    if (cs.SegCount > VIA_MAX_SEGS || (cs.Control & VIP_CONTROL_RESERVED) ||
        d->op == VIP_CONTROL_OP_RESERVED || (rdma && (recv || cs.SegCount == 0)) ||
        (d->op == VIP_CONTROL_OP_RDMAREAD &&
         ((cs.Control & VIP_CONTROL_IMMEDIATE) || vi->reliability == VIP_SERVICE_UNRELIABLE))) {
        d->status = VIP_STATUS_FORMAT_ERROR;
        return;
    }
    uint64_t seg_va = va + sizeof cs;
    if (!fw_tpt_within(de, va, sizeof cs + (uint64_t)cs.SegCount * sizeof(VIP_DATA_SEGMENT))) {
        d->status = VIP_STATUS_PROTECTION_ERROR;
        return;
    }

    unsigned first = 0;
    if (rdma) {
        /* The remote range is the responder's to check (fw_resp.c). */
        VIP_ADDRESS_SEGMENT as;
        hal_dma_from_host(&as, seg_va, sizeof as);
        d->raddr = as.Data.AddressBits;
        d->rkey = as.Handle;
        first = 1;
    }
    d->segcount = (uint16_t)(cs.SegCount - first);

    uint64_t total = 0;
    for (unsigned i = first; i < cs.SegCount; i++) {
        if (!take_seg(vi, de, mh, seg_va + i * sizeof(VIP_DATA_SEGMENT), d, i - first,
                      &total)) {
            d->status = VIP_STATUS_PROTECTION_ERROR;
            return;
        }
    }
    d->status = check_total(vi, recv, &total);
    d->total = (uint32_t)total;
}

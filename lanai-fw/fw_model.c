/*
 * fw_model.c - stage costs of the timing model, and what they predict.
 *
 * The firmware completes each transaction in strict sequence (as the
 * Berkeley firmware did: no pipelining of the DMA engines), so a stage's
 * cost is the LANai's own work (cycles) plus the transfer it waits for:
 * a host DMA (set-up + bytes at the I/O bus rate of its direction) or the
 * link (bytes at the link rate). Host costs (Build, Ring by programmed
 * I/O) are charged to the host thread. See spec-notes/timing-model.md.
 */
#include <math.h>

#include "fw_model.h"

uint32_t fw_desc_bytes(unsigned segs)
{
    /* Only the control words the NIC needs (Control, SegCount, Length,
     * ImmediateData: 16 bytes) and the segments cross the bus, as in the
     * Berkeley implementation. */
    return 16u + 16u * segs;
}

static double dma(const struct via_profile *p, double bytes, double ns_per_byte)
{
    return p->dma_setup_ns + bytes * ns_per_byte;
}

double fw_cost_post(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes)
{
    if (!p->paced)
        return 0;
    switch (m) {
    case FW_EXT_DESCLESS:
        /* No descriptor: the data words and a size token go by PIO. */
        return (1.0 + ceil(bytes / 4.0)) * p->pio_write_ns;
    case FW_EXT_MERGED:
        /* Descriptor with the data appended; the token adds a length word. */
        return p->host_build_ns + 3.0 * p->pio_write_ns;
    default:
        /* Descriptor in host memory; token = address + memory handle. */
        return p->host_build_ns + 2.0 * p->pio_write_ns;
    }
}

double fw_cost_stage(const struct via_profile *p, enum via_stage st, enum fw_ext_mode m,
                     uint32_t bytes, unsigned segs)
{
    if (!p->paced)
        return 0;
    double nsegs = segs;
    switch (st) {
    case VIA_ST_T1_RING:
    case VIA_ST_R1_RING:
        return fw_cost_post(p, st == VIA_ST_T1_RING ? m : FW_EXT_STANDARD, bytes);
    case VIA_ST_T2_BELL:
        return p->bell_ns;
    case VIA_ST_T3_XDES:
        if (m == FW_EXT_DESCLESS)
            return 0;
        if (m == FW_EXT_MERGED) /* one DMA brings descriptor and data */
            return p->desc_ns + dma(p, fw_desc_bytes(1) + (double)bytes, p->h2n_ns_per_byte);
        return p->desc_ns + dma(p, fw_desc_bytes(segs), p->h2n_ns_per_byte);
    case VIA_ST_T4_XDATA:
        if (m != FW_EXT_STANDARD || bytes == 0)
            return 0;
        return nsegs * (p->data_ns + p->dma_setup_ns) + bytes * p->h2n_ns_per_byte;
    case VIA_ST_T5_TRANSMIT:
        return p->xmit_ns + (p->wire_header + bytes) * p->link_ns_per_byte;
    case VIA_ST_T6_UPDT:
        if (m == FW_EXT_DESCLESS) /* clear the SRAM slot: no host DMA */
            return p->updt_ns;
        return p->updt_ns + dma(p, 4, p->n2h_ns_per_byte);
    case VIA_ST_R2_BELL:
        return p->bell_ns;
    case VIA_ST_R3_RECEIVE:
        return p->recv_ns;
    case VIA_ST_R4_XDES:
        return p->desc_ns + dma(p, fw_desc_bytes(segs), p->h2n_ns_per_byte);
    case VIA_ST_R5_XDATA:
        if (bytes == 0)
            return 0;
        return nsegs * (p->data_ns + p->dma_setup_ns) + bytes * p->n2h_ns_per_byte;
    case VIA_ST_R6_UPDT:
        return p->updt_ns + dma(p, 8, p->n2h_ns_per_byte);
    default:
        return 0;
    }
}

void fw_predict(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes,
                unsigned nscan, struct fw_prediction *out)
{
    unsigned segs = bytes ? 1 : 0;
#define C(st, mode) fw_cost_stage(p, (st), (mode), bytes, segs)
    double o_s = fw_cost_post(p, m, bytes);
    double o_r = fw_cost_post(p, FW_EXT_STANDARD, bytes);
    /* A doorbell rung at a random moment waits half a scan of all pairs. */
    double wait = p->hw_doorbell || !p->paced ? 0 : 0.5 * nscan * p->poll_ns;
    double send = C(VIA_ST_T2_BELL, m) + C(VIA_ST_T3_XDES, m) + C(VIA_ST_T4_XDATA, m) +
                  C(VIA_ST_T5_TRANSMIT, m);
    double recv = C(VIA_ST_R3_RECEIVE, m) + C(VIA_ST_R4_XDES, m) + C(VIA_ST_R5_XDATA, m) +
                  C(VIA_ST_R6_UPDT, m);
    double flight = p->paced ? p->switch_ns : 0;
    out->o_s = o_s;
    out->o_r = o_r;
    out->latency = wait + send + flight + recv;
    /* Ping-pong: the reflector re-posts its receive, then posts the send. */
    out->oneway = o_r + o_s + out->latency;
    /* A stream: the host overlaps the NIC; a doorbell rung while the NIC is
     * busy is found one poll after it returns to its loop. */
    double find = p->hw_doorbell || !p->paced ? 0 : p->poll_ns;
    double send_occ = find + send + C(VIA_ST_T6_UPDT, m);
    double g = o_s;
    if (send_occ > g)
        g = send_occ;
    if (recv > g)
        g = recv;
    out->gap = g;
    out->bw_mbps = g > 0 ? bytes * 8.0 * 1000.0 / g : 0;
    /* The paper's formulas: its XDes, XData and Updt are one stage each,
     * counted twice where both NICs do them (the send side's values). */
    double xdes = C(VIA_ST_T3_XDES, m), xdata = C(VIA_ST_T4_XDATA, m);
    out->L_paper = o_s + C(VIA_ST_T2_BELL, m) + 2 * xdes + 2 * xdata +
                   C(VIA_ST_T5_TRANSMIT, m) + flight + C(VIA_ST_T6_UPDT, m);
    out->g_paper = o_s + C(VIA_ST_T2_BELL, m) + xdes + xdata + C(VIA_ST_T5_TRANSMIT, m) +
                   C(VIA_ST_T6_UPDT, m);
#undef C
}

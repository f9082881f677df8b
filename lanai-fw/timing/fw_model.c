/*
 * fw_model.c - stage costs of the timing model, and what they predict.
 *
 * The firmware completes each transaction in strict sequence (as the
 * Berkeley firmware did: no pipelining of the DMA engines), so a stage's
 * cost is the LANai's own work (instructions at the firmware's cycles per
 * instruction) plus the transfer it waits for: a host DMA (its start, by
 * direction, + bytes at the I/O bus rate of its direction) or the link
 * (bytes at the link rate). Host costs (Build, Ring by programmed I/O,
 * Done) are charged to the host thread. Every parameter and its source:
 * spec-notes/timing-model.md.
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

/* A DMA that reads the host's memory: its start, the copyback of a line
 * the host has just written (descriptors: the host built them), bytes. */
static double dma_read(const struct via_profile *p, double bytes, bool dirty)
{
    return p->dma_h2n_start_ns + (dirty ? p->copyback_ns : 0) + bytes * p->h2n_ns_per_byte;
}

static double dma_write(const struct via_profile *p, double bytes)
{
    return p->dma_n2h_start_ns + bytes * p->n2h_ns_per_byte;
}

double fw_cost_build(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes)
{
    (void)m, (void)bytes;
    /* The library's post path is the same whatever the token: the
     * descriptor's own words are the program's stores. */
    return p->paced ? p->host_build_ns : 0;
}

double fw_cost_ring(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes)
{
    if (!p->paced)
        return 0;
    switch (m) {
    case FW_EXT_DESCLESS:
        /* No descriptor: the data words and a size token go by PIO. */
        return (1.0 + ceil(bytes / 4.0)) * p->pio_write_ns;
    case FW_EXT_MERGED:
        /* The token adds the combined length word. */
        return 3.0 * p->pio_write_ns;
    default:
        /* Token = descriptor address + memory handle. */
        return 2.0 * p->pio_write_ns;
    }
}

double fw_cost_post(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes)
{
    return fw_cost_build(p, m, bytes) + fw_cost_ring(p, m, bytes);
}

double fw_cost_done(const struct via_profile *p)
{
    return p->paced ? p->host_done_ns : 0;
}

double fw_pair_poll(const struct via_profile *p, bool ext_fw)
{
    if (!p->paced || p->hw_doorbell)
        return 0;
    return p->poll_ns + (ext_fw ? p->ext_poll_ns : 0);
}

double fw_scan_round(const struct via_profile *p, unsigned nscan, bool ext_fw)
{
    if (!p->paced || p->hw_doorbell || nscan == 0)
        return 0;
    return nscan * p->poll_ns + (ext_fw ? (nscan - 1) * p->ext_poll_ns : 0);
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
        /* The extension firmware looks at the token's kind first. */
        return p->bell_ns + (m != FW_EXT_STANDARD ? p->ext_bell_ns : 0);
    case VIA_ST_T3_XDES:
        if (m == FW_EXT_DESCLESS)
            return 0;
        if (m == FW_EXT_MERGED) /* one DMA brings descriptor and data */
            return p->desc_ns + dma_read(p, fw_desc_bytes(1) + (double)bytes, true);
        return p->desc_ns + dma_read(p, fw_desc_bytes(segs), true);
    case VIA_ST_T4_XDATA:
        if (m != FW_EXT_STANDARD || bytes == 0)
            return 0;
        return nsegs * (p->data_ns + p->dma_h2n_start_ns) + bytes * p->h2n_ns_per_byte;
    case VIA_ST_T5_TRANSMIT:
        return p->xmit_ns + (p->wire_header + bytes) * p->link_ns_per_byte;
    case VIA_ST_T6_UPDT:
        if (m == FW_EXT_DESCLESS) /* clear the SRAM slot: no host DMA */
            return p->updt_ns;
        return p->updt_ns + dma_write(p, 4);
    case VIA_ST_R2_BELL:
        return p->bell_ns;
    case VIA_ST_R3_RECEIVE:
        return p->recv_ns;
    case VIA_ST_R4_XDES:
        return p->desc_ns + dma_read(p, fw_desc_bytes(segs), true);
    case VIA_ST_R5_XDATA:
        if (bytes == 0)
            return 0;
        return nsegs * (p->data_ns + p->dma_n2h_start_ns) + bytes * p->n2h_ns_per_byte;
    case VIA_ST_R6_UPDT:
        return p->updt_ns + dma_write(p, 8);
    default:
        return 0;
    }
}

void fw_predict_on(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes,
                   unsigned nscan, bool ext_fw, struct fw_prediction *out)
{
    unsigned segs = bytes ? 1 : 0;
#define C(st, mode) fw_cost_stage(p, (st), (mode), bytes, segs)
    /* A standard send on the extension firmware pays its token's look too. */
    double ext_bell = ext_fw && m == FW_EXT_STANDARD && p->paced ? p->ext_bell_ns : 0;
    out->build = fw_cost_build(p, m, bytes);
    out->ring = fw_cost_ring(p, m, bytes);
    out->o_s = out->build + out->ring;
    out->o_r = fw_cost_post(p, FW_EXT_STANDARD, bytes);
    out->done = fw_cost_done(p);
    /* A doorbell rung at a random moment waits half a scan of all pairs;
     * a packet arriving at a random moment waits half a step of the loop
     * for its look at the network (the receive side's loop is charged at
     * the base firmware's step: timing-model.md). */
    out->wait = 0.5 * fw_scan_round(p, nscan, ext_fw);
    out->rdet = 0.5 * fw_pair_poll(p, false);
    out->send = C(VIA_ST_T2_BELL, m) + ext_bell + C(VIA_ST_T3_XDES, m) +
                C(VIA_ST_T4_XDATA, m) + C(VIA_ST_T5_TRANSMIT, m);
    out->recv = C(VIA_ST_R3_RECEIVE, m) + C(VIA_ST_R4_XDES, m) + C(VIA_ST_R5_XDATA, m) +
                C(VIA_ST_R6_UPDT, m);
    out->flight = p->paced ? p->switch_ns : 0;
    out->latency = out->done + out->wait + out->send + out->flight + out->rdet + out->recv;
    /* Ping-pong: the reflector takes the receive (Done), re-posts it (o_r)
     * and posts the send (o_s); the rest is the latency. */
    out->oneway = out->o_r + out->o_s + out->latency;
    /* A stream: the host overlaps the NIC. A doorbell rung while the LANai
     * is busy is found one step after it returns to its loop, and so is a
     * packet that arrived meanwhile. */
    out->gap_host = out->o_s + out->done;
    out->gap_send_nic = fw_pair_poll(p, ext_fw) + out->send + C(VIA_ST_T6_UPDT, m);
    out->gap_recv_nic = fw_pair_poll(p, false) + out->recv;
    double g = out->gap_host;
    if (out->gap_send_nic > g)
        g = out->gap_send_nic;
    if (out->gap_recv_nic > g)
        g = out->gap_recv_nic;
    out->gap = g;
    out->bw_mbps = g > 0 ? bytes * 8.0 * 1000.0 / g : 0;
    /* The paper's formulas: its XDes, XData and Updt are one stage each,
     * counted twice where both NICs do them (the send side's values); its
     * L's Updt is the receiver's R6, its G's the sender's T6. */
    double xdes = C(VIA_ST_T3_XDES, m), xdata = C(VIA_ST_T4_XDATA, m);
    double bell = C(VIA_ST_T2_BELL, m) + ext_bell;
    out->L_paper = out->o_s + bell + 2 * xdes + 2 * xdata + C(VIA_ST_T5_TRANSMIT, m) +
                   out->flight + C(VIA_ST_R6_UPDT, m);
    out->g_paper = out->o_s + bell + xdes + xdata + C(VIA_ST_T5_TRANSMIT, m) +
                   C(VIA_ST_T6_UPDT, m);
#undef C
}

void fw_predict(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes,
                unsigned nscan, struct fw_prediction *out)
{
    fw_predict_on(p, m, bytes, nscan, m != FW_EXT_STANDARD, out);
}

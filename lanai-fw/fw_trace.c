/*
 * fw_trace.c - the stage trace: one timestamp per pipeline stage.
 *
 * Records go to the session's status page, which vipd reads for
 * `vipctl trace dump`. Only this NIC writes the ring (see via_abi.h for the
 * rules); a reader that races a writer sees seq_begin != seq_end and skips
 * the record.
 */
#include "fw.h"
#include "fw_hal.h"

const char *const via_stage_name[VIA_ST_NSTAGES] = {
    [VIA_ST_BUILD] = "Build",         [VIA_ST_T1_RING] = "T1_Ring",
    [VIA_ST_T2_BELL] = "T2_Bell",     [VIA_ST_T3_XDES] = "T3_XDes",
    [VIA_ST_T4_XDATA] = "T4_XData",   [VIA_ST_T5_TRANSMIT] = "T5_Transmit",
    [VIA_ST_T6_UPDT] = "T6_Updt",     [VIA_ST_R1_RING] = "R1_Ring",
    [VIA_ST_R2_BELL] = "R2_Bell",     [VIA_ST_R3_RECEIVE] = "R3_Receive",
    [VIA_ST_R4_XDES] = "R4_XDes",     [VIA_ST_R5_XDATA] = "R5_XData",
    [VIA_ST_R6_UPDT] = "R6_Updt",     [VIA_ST_R_REFUSED] = "R_Refused",
};

void fw_trace(struct fw_nic *nic, enum via_stage st, uint32_t vi, uint32_t seq, uint32_t len,
              uint32_t dur_ns)
{
    struct via_status_page *sp = nic->st;
    uint64_t idx = atomic_fetch_add_explicit(&sp->trace_head, 1, memory_order_relaxed);
    struct via_trace_rec *r = &sp->trace[idx % VIA_TRACE_SLOTS];
    uint32_t tag = (uint32_t)idx + 1;
    atomic_store_explicit(&r->seq_begin, tag, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    r->stage = (uint16_t)st;
    r->vi_id = (uint16_t)vi;
    r->t_ns = hal_now_ns();
    r->msg_seq = seq;
    r->len = len;
    r->dur_ns = dur_ns;
    atomic_store_explicit(&r->seq_end, tag, memory_order_release);
}

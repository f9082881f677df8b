/*
 * fw_model.h - the NIC timing model: profiles and stage costs.
 *
 * A profile (lanai-fw/profiles/NAME.conf) gives physical parameters; the
 * model turns them into the cost of each stage of the paper's Figure 4.
 * The paced firmware charges exactly these costs to the modelled
 * resources (fw_sched.c), and the analytic predictions below are sums of
 * the same costs, so model and measurement can be compared stage by stage.
 */
#ifndef FW_MODEL_H
#define FW_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "via_abi.h"

/* How a send reaches the NIC (spec-notes/extensions.md). */
enum fw_ext_mode {
    FW_EXT_STANDARD = 0,  /* doorbell -> descriptor -> data */
    FW_EXT_DESCLESS = 1,  /* data written by PIO into NIC SRAM, token = size */
    FW_EXT_MERGED = 2,    /* descriptor and data contiguous, one DMA */
    FW_EXT_NMODES
};
extern const char *const fw_ext_mode_name[FW_EXT_NMODES];

/* Parse profile text. 0 on success; -1 with a message naming the line. */
int fw_profile_parse(const char *text, const char *fname, struct via_profile *out, char *err,
                     size_t errlen);
/* Load NAME (a file path, or a name looked up as DIR/NAME.conf). */
int fw_profile_load(const char *name, const char *dir, struct via_profile *out, char *err,
                    size_t errlen);

/* Host costs, charged to the calling thread. */
double fw_cost_post(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes);
/* Firmware stage costs (ns) for a message of `bytes` in `segs` segments. */
double fw_cost_stage(const struct via_profile *p, enum via_stage st, enum fw_ext_mode m,
                     uint32_t bytes, unsigned segs);
/* Descriptor bytes the NIC moves: the used control words and the segments. */
uint32_t fw_desc_bytes(unsigned segs);

/* Analytic predictions (ns). nscan = doorbell pairs the firmware scans. */
struct fw_prediction {
    double oneway;    /* ping-pong RTT/2, expected doorbell wait included */
    double o_s, o_r;  /* LogP send / receive overhead */
    double gap;       /* per-message interval of a stream (bottleneck) */
    double latency;   /* LogP L (paper's formula) */
    double bw_mbps;   /* streaming bandwidth = bytes / gap */
    /* The paper's LogP formulas, as sums of its named stages:
     *   L = Build + Ring + Bell + 2 XDes + 2 XData + Transmit + Flight + Updt
     *   G = Build + Ring + Bell + XDes + XData + Transmit + Updt   */
    double L_paper, g_paper;
};
void fw_predict(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes,
                unsigned nscan, struct fw_prediction *out);

#endif

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

#include <stdbool.h>
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

/* The source tags a profile line may start its comment with (NULL-ended). */
extern const char *const fw_profile_sources[];

/* Parse profile text. 0 on success; -1 with a message naming the line. */
int fw_profile_parse(const char *text, const char *fname, struct via_profile *out, char *err,
                     size_t errlen);
/* Load NAME (a file path, or a name looked up as DIR/NAME.conf). */
int fw_profile_load(const char *name, const char *dir, struct via_profile *out, char *err,
                    size_t errlen);

/* Host costs (ns), charged to the calling thread: Build (the library's
 * post path), Ring (the token's programmed-I/O words), their sum (a post),
 * and Done (taking one completion). */
double fw_cost_build(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes);
double fw_cost_ring(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes);
double fw_cost_post(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes);
double fw_cost_done(const struct via_profile *p);
/* Firmware stage costs (ns) for a message of `bytes` in `segs` segments. */
double fw_cost_stage(const struct via_profile *p, enum via_stage st, enum fw_ext_mode m,
                     uint32_t bytes, unsigned segs);
/* Descriptor bytes the NIC moves: the used control words and the segments. */
uint32_t fw_desc_bytes(unsigned segs);
/* One step of the firmware's loop: a VI's doorbells (a third one on the
 * extension firmware) and one look at the network. */
double fw_pair_poll(const struct via_profile *p, bool ext_fw);
/* A whole round of the doorbell scan: nscan pairs, the last the command
 * queue (which has no descriptorless doorbell). */
double fw_scan_round(const struct via_profile *p, unsigned nscan, bool ext_fw);

/* Analytic predictions (ns). nscan = doorbell pairs the firmware scans;
 * ext_fw: the NIC runs the extension firmware (every mode but standard
 * does; fw_predict_on can put a standard send on it too). */
struct fw_prediction {
    double build, ring;  /* the send's Build and Ring */
    double o_s, o_r;     /* LogP overheads: Build + Ring of a send, of a receive */
    double done;         /* Done: the host takes the receive's completion */
    double wait;         /* expected doorbell-scan wait (half a round) */
    double send;         /* T2 Bell .. T5 Transmit */
    double flight;       /* the switch: T5's last byte to the receiving NIC */
    double rdet;         /* expected wait for the receiving loop to look (half a step) */
    double recv;         /* R3 Receive .. R6 Updt */
    double oneway;       /* ping-pong RTT/2 = o_r + o_s + the rest */
    double latency;      /* LogP L as micro-benchmarks measure it: oneway - o_s - o_r */
    /* a stream: the largest per-message occupancy of the sending host
     * (o_s + Done), the sending LANai (a step + T2..T6) and the receiving
     * LANai (a step + R3..R6); bandwidth = bytes / gap */
    double gap, gap_host, gap_send_nic, gap_recv_nic;
    double bw_mbps;
    /* The paper's LogP formulas, as sums of its named stages:
     *   L = Build + Ring + Bell + 2 XDes + 2 XData + Transmit + Flight + Updt
     *   G = Build + Ring + Bell + XDes + XData + Transmit + Updt   */
    double L_paper, g_paper;
};
void fw_predict(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes,
                unsigned nscan, struct fw_prediction *out);
void fw_predict_on(const struct via_profile *p, enum fw_ext_mode m, uint32_t bytes,
                   unsigned nscan, bool ext_fw, struct fw_prediction *out);

#endif

/*
 * vip_model.c - what the timing model predicts, without running anything.
 *
 * Prints, for a profile, the sums of the stage costs that the paced
 * firmware charges: ping-pong one-way latency and its per-byte slope,
 * streaming bandwidth, the LogP parameters, the extension savings and the
 * doorbell-scan scaling, and the same for RDMA write (rdma_write below).
 * `make bench` prints these beside the measurements.
 *
 *   vip_model [-d PROFILE_DIR] [--csv] [--vis N]... PROFILE...
 *   vip_model [-d PROFILE_DIR] --validate [--results DIR] [--markdown]
 *
 * --validate: the model (and, with --results, the paced emulation's
 * measurements of run_paced.sh) against every published figure it can
 * speak to (model_validate.c); exits 1 when any is outside its tolerance.
 *
 * --vis N (repeatable): print only the predicted 4-byte one-way latency
 * with N VIs on each NIC, the doorbell-scan scaling at the VI counts a
 * measurement used (compare_native.sh's scan line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"
#include "model_validate.h"
#include "vipl_ext.h"

/*
 * RDMA write, as the stage model has it (spec-notes/timing-model.md, "RDMA
 * write"). The initiator runs the send stages T2..T6 for a descriptor of
 * two segments, the address segment and one data segment: XDes fetches
 * both, XData gathers the one. The target's NIC runs R3 Receive and R5
 * XData only: the packet names its target, so no receive descriptor is
 * fetched (R4) or completed (R6); with immediate data it is (R4, R6).
 *   ping-pong one-way (ib_write_lat: each side polls its memory, so the
 *   reflector posts nothing but its write):
 *       o_s + doorbell wait + T2..T5 + flight + R3 + R5 [+ R4 + R6]
 *   stream gap: the largest of o_s, the initiator's LANai (one poll + T2..T6)
 *   and the target's (R3 + R5 [+ R4 + R6]).
 * The ACK a reliable VI waits for is not a stage of the model: it costs
 * the responder nothing modelled, and the initiator's LANai is free once
 * T6's status is written (fw_predict's sends likewise ignore ACKs).
 */
struct rdma_prediction {
    double oneway, gap, bw_mbps;
};

static void rdma_write(const struct via_profile *p, uint32_t bytes, unsigned nscan, int imm,
                       struct rdma_prediction *out)
{
    const enum fw_ext_mode m = FW_EXT_STANDARD; /* the extensions carry sends only */
    struct fw_prediction s;
    fw_predict(p, m, bytes, nscan, &s); /* the host's and the loop's terms */
    double send = fw_cost_stage(p, VIA_ST_T2_BELL, m, bytes, 2) +
                  fw_cost_stage(p, VIA_ST_T3_XDES, m, bytes, 2) +
                  fw_cost_stage(p, VIA_ST_T4_XDATA, m, bytes, 1) +
                  fw_cost_stage(p, VIA_ST_T5_TRANSMIT, m, bytes, 1);
    double recv = fw_cost_stage(p, VIA_ST_R3_RECEIVE, m, bytes, 1) +
                  fw_cost_stage(p, VIA_ST_R5_XDATA, m, bytes, 1);
    double done = 0;
    if (imm) {
        recv += fw_cost_stage(p, VIA_ST_R4_XDES, m, bytes, 0) +
                fw_cost_stage(p, VIA_ST_R6_UPDT, m, bytes, 0);
        done = s.done; /* the target takes the immediate data's completion */
    }
    out->oneway = s.o_s + s.wait + send + s.flight + s.rdet + recv + done;
    double g = fw_pair_poll(p, false) + send + fw_cost_stage(p, VIA_ST_T6_UPDT, m, bytes, 2);
    double host = s.o_s + s.done; /* the initiator posts and takes each completion */
    g = g > host ? g : host;
    double target = fw_pair_poll(p, false) + recv;
    g = g > target ? g : target;
    out->gap = g;
    out->bw_mbps = g > 0 ? bytes * 8.0 * 1000.0 / g : 0;
}

/* Which stages each LogP parameter sums (spec-notes/timing-model.md). */
static void stage_sums(const struct fw_prediction *a)
{
    printf("  stage sums, 4 B (us):\n");
    printf("    o_s = o_r = Build %.2f + Ring %.2f = %.2f\n", a->build / 1000, a->ring / 1000,
           a->o_s / 1000);
    printf("    L = Done %.2f + scan wait %.2f + T2..T5 %.2f + flight %.2f + look %.2f + "
           "R3..R6 %.2f = %.2f\n", a->done / 1000, a->wait / 1000, a->send / 1000,
           a->flight / 1000, a->rdet / 1000, a->recv / 1000, a->latency / 1000);
    printf("    one-way = o_r + o_s + L = %.2f\n", a->oneway / 1000);
    printf("    g = max(host o_s + Done %.2f, sending LANai step + T2..T6 %.2f, receiving "
           "LANai step + R3..R6 %.2f) = %.2f\n", a->gap_host / 1000, a->gap_send_nic / 1000,
           a->gap_recv_nic / 1000, a->gap / 1000);
}

static void one(const struct via_profile *p, int csv)
{
    struct fw_prediction a, b, m;
    /* One VI on each NIC: the scan polls it and the command queue. */
    fw_predict(p, FW_EXT_STANDARD, 4, 2, &a);
    fw_predict(p, FW_EXT_STANDARD, 4096, 2, &b);
    double slope = (b.oneway - a.oneway) > 0 ? 4092 * 8000.0 / (b.oneway - a.oneway) : 0;
    if (csv) {
        printf("# profile,quantity,value,unit\n");
        printf("%s,oneway_4B,%.3f,us\n", p->name, a.oneway / 1000);
        printf("%s,slope,%.1f,Mbit/s\n", p->name, slope);
        printf("%s,L_paper,%.3f,us\n%s,g_paper,%.3f,us\n", p->name, a.L_paper / 1000,
               p->name, a.g_paper / 1000);
        printf("%s,o_s,%.3f,us\n%s,o_r,%.3f,us\n%s,g,%.3f,us\n%s,L,%.3f,us\n", p->name,
               a.o_s / 1000, p->name, a.o_r / 1000, p->name, a.gap / 1000, p->name,
               a.latency / 1000);
        printf("%s,build,%.3f,us\n%s,ring,%.3f,us\n%s,done,%.3f,us\n", p->name,
               a.build / 1000, p->name, a.ring / 1000, p->name, a.done / 1000);
        /* Each mode as VIP_EXT_MODE sends: the short path up to the default
         * threshold, the standard one beyond it (what run_paced.sh runs). */
        for (int e = 0; e < FW_EXT_NMODES; e++)
            for (uint32_t n = 4; n <= 32768; n *= 2) {
                enum fw_ext_mode em = n <= VIP_EXT_MAX_DEFAULT ? (enum fw_ext_mode)e
                                                               : FW_EXT_STANDARD;
                fw_predict(p, em, n, 2, &m);
                printf("%s,lat_%s_%u,%.3f,us\n", p->name, fw_ext_mode_name[e], n,
                       m.oneway / 1000);
            }
        for (uint32_t n = 4; n <= 32768; n *= 2) {
            fw_predict(p, FW_EXT_STANDARD, n, 2, &m);
            printf("%s,bw_%u,%.1f,Mbit/s\n", p->name, n, m.bw_mbps);
        }
        for (int e = 0; e < FW_EXT_NMODES; e++) {
            fw_predict(p, (enum fw_ext_mode)e, 4, 2, &m);
            printf("%s,ext_%s_4B,%.3f,us\n", p->name, fw_ext_mode_name[e], m.oneway / 1000);
        }
        fw_predict_on(p, FW_EXT_STANDARD, 4, 2, true, &m);
        printf("%s,ext_standard_on_ext_fw_4B,%.3f,us\n", p->name, m.oneway / 1000);
        for (unsigned v = 1; v <= 16; v *= 2) {
            fw_predict(p, FW_EXT_STANDARD, 4, v + 1, &m);
            printf("%s,scan_%uvi_4B,%.3f,us\n", p->name, v, m.oneway / 1000);
        }
        for (uint32_t n = 4; n <= 32768; n *= 2) {
            struct rdma_prediction r;
            rdma_write(p, n, 2, 0, &r);
            printf("%s,rdma_write_oneway_%u,%.3f,us\n%s,rdma_write_bw_%u,%.1f,Mbit/s\n",
                   p->name, n, r.oneway / 1000, p->name, n, r.bw_mbps);
        }
        return;
    }
    printf("profile %s\n", p->name);
    printf("  ping-pong one-way, 4 B:        %8.2f us\n", a.oneway / 1000);
    printf("  per-byte slope (4 B..4 KB):    %8.1f Mbit/s\n", slope);
    printf("  LogP, 4 B: o_s %.2f us  o_r %.2f us  g %.2f us  L %.2f us\n", a.o_s / 1000,
           a.o_r / 1000, a.gap / 1000, a.latency / 1000);
    printf("  paper's formulas, 4 B: o = Build + Ring %.2f us  L %.2f us  G %.2f us\n",
           a.o_s / 1000, a.L_paper / 1000, a.g_paper / 1000);
    stage_sums(&a);
    printf("  streaming bandwidth:");
    for (uint32_t n = 256; n <= 16384; n *= 4) {
        fw_predict(p, FW_EXT_STANDARD, n, 2, &m);
        printf("  %u B %.0f", n, m.bw_mbps);
    }
    fw_predict(p, FW_EXT_STANDARD, 4096, 2, &m);
    printf(" Mbit/s (4 KB: %.0f)\n", m.bw_mbps);
    printf("  extensions, 4 B one-way:");
    for (int e = 0; e < FW_EXT_NMODES; e++) {
        fw_predict(p, (enum fw_ext_mode)e, 4, 2, &m);
        printf("  %s %.2f us", fw_ext_mode_name[e], m.oneway / 1000);
    }
    fw_predict_on(p, FW_EXT_STANDARD, 4, 2, true, &m);
    printf("\n  (all three on the extension firmware: standard %.2f us)", m.oneway / 1000);
    printf("\n  doorbell scan, 4 B one-way:");
    for (unsigned v = 1; v <= 16; v *= 2) {
        fw_predict(p, FW_EXT_STANDARD, 4, v + 1, &m);
        printf("  %u VI %.2f", v, m.oneway / 1000);
    }
    printf(" us\n");
    struct rdma_prediction r4, r4k;
    rdma_write(p, 4, 2, 0, &r4);
    rdma_write(p, 4096, 2, 0, &r4k);
    printf("  RDMA write one-way (ping-pong polling memory): 4 B %.2f us  4 KB %.2f us\n",
           r4.oneway / 1000, r4k.oneway / 1000);
    printf("  RDMA write streaming bandwidth:");
    for (uint32_t n = 256; n <= 16384; n *= 4) {
        struct rdma_prediction r;
        rdma_write(p, n, 2, 0, &r);
        printf("  %u B %.0f", n, r.bw_mbps);
    }
    printf(" Mbit/s (4 KB: %.0f)\n", r4k.bw_mbps);
}

/* The scan lines alone: 4-byte one-way with each of vis[0..nvis) VIs per
 * NIC (the firmware's loop polls them and the command queue). */
static void scan_only(const struct via_profile *p, int csv, const unsigned *vis, size_t nvis)
{
    if (csv)
        printf("# profile,quantity,value,unit\n");
    else
        printf("profile %s\n  doorbell scan, 4 B one-way:", p->name);
    for (size_t i = 0; i < nvis; i++) {
        struct fw_prediction m;
        fw_predict(p, FW_EXT_STANDARD, 4, vis[i] + 1, &m);
        if (csv)
            printf("%s,scan_%uvi_4B,%.3f,us\n", p->name, vis[i], m.oneway / 1000);
        else
            printf("  %u VI %.2f", vis[i], m.oneway / 1000);
    }
    if (!csv)
        printf(" us\n");
}

#define USAGE                                                                            \
    "usage: vip_model [-d PROFILE_DIR] [--csv] [--vis N]... PROFILE...\n"                 \
    "       vip_model [-d PROFILE_DIR] --validate [--results DIR] [--markdown]\n"

int main(int argc, char **argv)
{
    const char *dir = "lanai-fw/profiles", *results = NULL;
    int csv = 0, any = 0, validate = 0, markdown = 0;
    unsigned vis[16];
    size_t nvis = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc) {
            dir = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--vis") && i + 1 < argc) {
            char *end;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end || end == argv[i] || v < 1 || v > 4096 || nvis == 16) {
                fprintf(stderr, "vip_model: --vis: '%s' is not a VI count in 1..4096 (at most "
                        "16 of them)\n", argv[i]);
                return 2;
            }
            vis[nvis++] = (unsigned)v;
            continue;
        }
        if (!strcmp(argv[i], "--csv")) {
            csv = 1;
            continue;
        }
        if (!strcmp(argv[i], "--validate")) {
            validate = 1;
            continue;
        }
        if (!strcmp(argv[i], "--markdown")) {
            markdown = 1;
            continue;
        }
        if (!strcmp(argv[i], "--results") && i + 1 < argc) {
            results = argv[++i];
            continue;
        }
        if (validate) {
            fprintf(stderr, "vip_model: --validate takes no profile ('%s')\n" USAGE, argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf(USAGE);
            return 0;
        }
        struct via_profile p;
        char err[256];
        if (fw_profile_load(argv[i], dir, &p, err, sizeof err) < 0) {
            fprintf(stderr, "vip_model: %s\n", err);
            return 1;
        }
        if (nvis)
            scan_only(&p, csv, vis, nvis);
        else
            one(&p, csv);
        any = 1;
    }
    if (validate) {
        int bad = model_validate(stdout, dir, results, markdown);
        return bad < 0 ? 2 : bad > 0;
    }
    if (!any) {
        fprintf(stderr, USAGE);
        return 2;
    }
    return 0;
}

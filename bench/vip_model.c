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
 *
 * --vis N (repeatable): print only the predicted 4-byte one-way latency
 * with N VIs on each NIC, the doorbell-scan scaling at the VI counts a
 * measurement used (compare_native.sh's scan line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"

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
    double o_s = fw_cost_post(p, m, bytes);
    double wait = p->hw_doorbell || !p->paced ? 0 : 0.5 * nscan * p->poll_ns;
    double send = fw_cost_stage(p, VIA_ST_T2_BELL, m, bytes, 2) +
                  fw_cost_stage(p, VIA_ST_T3_XDES, m, bytes, 2) +
                  fw_cost_stage(p, VIA_ST_T4_XDATA, m, bytes, 1) +
                  fw_cost_stage(p, VIA_ST_T5_TRANSMIT, m, bytes, 1);
    double recv = fw_cost_stage(p, VIA_ST_R3_RECEIVE, m, bytes, 1) +
                  fw_cost_stage(p, VIA_ST_R5_XDATA, m, bytes, 1);
    if (imm)
        recv += fw_cost_stage(p, VIA_ST_R4_XDES, m, bytes, 0) +
                fw_cost_stage(p, VIA_ST_R6_UPDT, m, bytes, 0);
    double flight = p->paced ? p->switch_ns : 0;
    out->oneway = o_s + wait + send + flight + recv;
    double find = p->hw_doorbell || !p->paced ? 0 : p->poll_ns;
    double g = find + send + fw_cost_stage(p, VIA_ST_T6_UPDT, m, bytes, 2);
    g = g > o_s ? g : o_s;
    g = g > recv ? g : recv;
    out->gap = g;
    out->bw_mbps = g > 0 ? bytes * 8.0 * 1000.0 / g : 0;
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
        for (uint32_t n = 4; n <= 32768; n *= 2) {
            fw_predict(p, FW_EXT_STANDARD, n, 2, &m);
            printf("%s,bw_%u,%.1f,Mbit/s\n", p->name, n, m.bw_mbps);
        }
        for (int e = 0; e < FW_EXT_NMODES; e++) {
            fw_predict(p, (enum fw_ext_mode)e, 4, 2, &m);
            printf("%s,ext_%s_4B,%.3f,us\n", p->name, fw_ext_mode_name[e], m.oneway / 1000);
        }
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

#define USAGE "usage: vip_model [-d PROFILE_DIR] [--csv] [--vis N]... PROFILE...\n"

int main(int argc, char **argv)
{
    const char *dir = "lanai-fw/profiles";
    int csv = 0, any = 0;
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
    if (!any) {
        fprintf(stderr, USAGE);
        return 2;
    }
    return 0;
}

/*
 * vip_model.c - what the timing model predicts, without running anything.
 *
 * Prints, for a profile, the sums of the stage costs that the paced
 * firmware charges: ping-pong one-way latency and its per-byte slope,
 * streaming bandwidth, the LogP parameters, the extension savings and the
 * doorbell-scan scaling. `make bench` prints these beside the measurements.
 *
 *   vip_model [-d PROFILE_DIR] [--csv] PROFILE...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"

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
}

int main(int argc, char **argv)
{
    const char *dir = "lanai-fw/profiles";
    int csv = 0, any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc) {
            dir = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--csv")) {
            csv = 1;
            continue;
        }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: vip_model [-d PROFILE_DIR] [--csv] PROFILE...\n");
            return 0;
        }
        struct via_profile p;
        char err[256];
        if (fw_profile_load(argv[i], dir, &p, err, sizeof err) < 0) {
            fprintf(stderr, "vip_model: %s\n", err);
            return 1;
        }
        one(&p, csv);
        any = 1;
    }
    if (!any) {
        fprintf(stderr, "usage: vip_model [-d PROFILE_DIR] [--csv] PROFILE...\n");
        return 2;
    }
    return 0;
}

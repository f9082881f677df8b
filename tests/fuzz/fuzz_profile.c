/*
 * fuzz_profile.c - libFuzzer target: the strict parser of hardware profiles
 * (lanai-fw/timing/fw_profile.c), and what the timing model makes of a profile it
 * accepted.
 *
 * The input is a profile file's text. fw_profile_parse must refuse it with
 * a message naming the file, or accept it; an accepted profile must give
 * costs the paced NIC can use: every stage of every extension mode, for the
 * largest message in the most segments, is a finite number of nanoseconds
 * that fits the uint64_t the scheduler converts it to (UBSan checks the
 * conversions below as the firmware does them), and the predictions are
 * finite. Every few accepted inputs, fw_profile_load reads the same text
 * from a file and must agree (and name the profile after the file).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_model.h"

#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "fuzz_profile: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

static char dir[64];

/* A modelled time as the scheduler takes it: ns since the NIC's clock
 * started, added to a CLOCK_MONOTONIC time. A profile may be slow, but not
 * so slow that one message takes centuries. */
static void usable(double ns)
{
    CHECK(isfinite(ns) && ns >= 0);
    CHECK(ns < 1e18); /* < 31 years: start + ns cannot wrap */
    volatile uint64_t t = (uint64_t)ns;
    (void)t;
}

static void check_model(const struct via_profile *p)
{
    const double *f = &p->lanai_mhz;
    for (unsigned i = 0; i < 26; i++)
        CHECK(isfinite(f[i]) && f[i] >= 0);
    CHECK(p->paced <= 1 && p->hw_doorbell <= 1);
    CHECK(memchr(p->name, 0, sizeof p->name));
    static const uint32_t sizes[] = {0, 4, 4096, VIA_MTU, VIA_MAX_TRANSFER};
    for (unsigned m = 0; m < FW_EXT_NMODES; m++)
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            usable(fw_cost_post(p, (enum fw_ext_mode)m, sizes[s]));
            usable(fw_cost_done(p));
            double sum = 0;
            for (unsigned st = 0; st < VIA_ST_NSTAGES; st++) {
                double c = fw_cost_stage(p, (enum via_stage)st, (enum fw_ext_mode)m, sizes[s],
                                         VIA_MAX_SEGS);
                usable(c);
                sum += c;
            }
            usable(sum);
            struct fw_prediction pr;
            fw_predict(p, (enum fw_ext_mode)m, sizes[s], VIA_MAX_VI + 1, &pr);
            usable(pr.oneway);
            usable(pr.latency);
            usable(pr.gap);
            CHECK(isfinite(pr.bw_mbps) && isfinite(pr.L_paper) && isfinite(pr.g_paper));
        }
    /* The doorbell scan: every slot of the largest NIC polled once. */
    usable(fw_scan_round(p, VIA_MAX_VI + 1, true));
    usable(p->switch_ns);
}

static void check_load(const char *text, size_t len, const struct via_profile *want)
{
    char path[128];
    snprintf(path, sizeof path, "%s/fz.conf", dir);
    FILE *f = fopen(path, "w");
    CHECK(f);
    CHECK(fwrite(text, 1, len, f) == len);
    CHECK(fclose(f) == 0);
    struct via_profile got;
    char err[256];
    CHECK(fw_profile_load("fz", dir, &got, err, sizeof err) == 0);
    CHECK(strcmp(got.name, "fz") == 0);
    CHECK(got.paced == want->paced && got.hw_doorbell == want->hw_doorbell);
    CHECK(memcmp(&got.lanai_mhz, &want->lanai_mhz, 26 * sizeof(double)) == 0);
}

static void cleanup(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/fz.conf", dir);
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fuzz_profile.XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir))
        abort();
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = 0;
    struct via_profile p;
    memset(&p, 0xEE, sizeof p);
    char err[256];
    memset(err, 0, sizeof err);
    int rc = fw_profile_parse(text, "fz.conf", &p, err, sizeof err);
    if (rc == 0) {
        check_model(&p);
        static unsigned accepted;
        /* The file path reads what the NUL ends, and up to 16 KiB. */
        if (accepted++ % 16 == 0 && size < 16000)
            check_load(text, strlen(text), &p);
    } else {
        CHECK(rc == -1);
        CHECK(err[0] && memchr(err, 0, sizeof err));
        CHECK(strncmp(err, "fz.conf", 7) == 0); /* names the file */
    }
    free(text);
    return 0;
}

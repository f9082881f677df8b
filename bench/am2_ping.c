/*
 * am2_ping - AM-2 request/reply round trip, short, medium and long, between
 * two ranks of an SPMD job: `amrun -np 2 am2_ping [-n ITERS] [--csv]`.
 * A long request goes from rank 0's segment into rank 1's, and its reply
 * (as long) from there back into rank 0's.
 *
 * Rank 0 sends a request and polls until the reply's handler has run,
 * ITERS times per message kind and size (after ITERS/10 unmeasured);
 * rank 1 polls and replies from its request handler with the same kind
 * and size. Printed: median and mean round trip, and half the median (the
 * one-way latency the AM-II paper quotes). The two ranks share this host,
 * so they talk through shared memory unless AM2_SHM=0; the NIC is AM2_NIC
 * (default via0: run it against a vipd with paced NICs for the 1998 hosts).
 * --outside: rank 0's long requests come from a heap buffer outside its
 * segment, at an offset that moves by 4 KiB each time (a runtime putting
 * from user memory): what registering each source would cost shows.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <am2_spmd.h>
#include <vipl_ext.h>

static volatile int replies;
static uint8_t buf[AM2_MAX_MEDIUM];

static void die(const char *what)
{
    fprintf(stderr, "am2_ping: %s failed: %s\n", what, AMX_LastError());
    exit(1);
}

static void req_short(void *token, int32_t a, int32_t b, int32_t c, int32_t d)
{
    AM_Reply4(token, 2, a, b, c, d);
}
static void rep_short(void *token, int32_t a, int32_t b, int32_t c, int32_t d)
{
    (void)token, (void)a, (void)b, (void)c, (void)d;
    replies++;
}
static void req_medium(void *token, void *p, size_t n, int32_t a)
{
    AM_ReplyI1(token, 4, p, n, a);
}
static void rep_medium(void *token, void *p, size_t n, int32_t a)
{
    (void)token, (void)p, (void)n, (void)a;
    replies++;
}
static void req_long(void *token, void *p, size_t n, int32_t a)
{
    AM_ReplyXfer1(token, 0, 6, p, n, a);
}
static void rep_long(void *token, void *p, size_t n, int32_t a)
{
    (void)token, (void)p, (void)n, (void)a;
    replies++;
}

/* The NIC's clock: virtual time under VIP_CLOCK=virtual, else monotonic. */
static double now_us(void)
{
    return (double)VipExtClockNs() / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    eb_t eb;
    ep_t ep;
    int iters = 20000, csv = 0, outside = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv"))
            csv = 1;
        else if (!strcmp(argv[i], "--outside"))
            outside = 1;
    }
    if (am2_spmd_startup(&argc, &argv, &eb, &ep) != AM_OK)
        die("am2_spmd_startup");
    if (am2_spmd_nranks() != 2) {
        fprintf(stderr, "am2_ping: run it as amrun -np 2 am2_ping\n");
        am2_spmd_exit(2);
    }
    if (AM_SetHandler(ep, 1, req_short) || AM_SetHandler(ep, 2, rep_short) ||
        AM_SetHandler(ep, 3, req_medium) || AM_SetHandler(ep, 4, rep_medium) ||
        AM_SetHandler(ep, 5, req_long) || AM_SetHandler(ep, 6, rep_long))
        die("AM_SetHandler");
    uint8_t *seg = calloc(1, AM2_MAX_LONG);
    /* the sources of --outside: 2 MiB of heap, not the segment */
    uint8_t *out = outside ? calloc(1, 2 * AM2_MAX_LONG) : NULL;
    if (outside && !out)
        die("calloc");
    if (!seg || AM_SetSeg(ep, seg, AM2_MAX_LONG) != AM_OK)
        die("AM_SetSeg");
    /* k = 0: short; then the medium sizes; then the long ones */
    static const size_t sizes[] = {0, 4, 64, 256, 1024, 4096, 8192, AM2_MAX_MEDIUM};
    static const size_t lsizes[] = {4096, 65536, AM2_MAX_LONG};
    int nmed = (int)(sizeof sizes / sizeof sizes[0]);
    int nk = 1 + nmed + (int)(sizeof lsizes / sizeof lsizes[0]);
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!t)
        die("malloc");
    const char *nic = getenv("AM2_NIC") ? getenv("AM2_NIC") : "via0";
    if (am2_spmd_rank() == 0)
        printf(csv ? "# nic,kind,bytes,median_rtt_us,mean_rtt_us,oneway_us\n"
                   : "%-6s %-8s %7s %12s %12s %12s\n",
               "nic", "kind", "bytes", "rtt_med_us", "rtt_mean_us", "oneway_us");
    for (int k = 0; k < nk; k++) {
        if (am2_spmd_barrier() != AM_OK)
            die("barrier");
        if (am2_spmd_rank() == 1)
            continue;
        int warm = iters / 10 > 200 ? iters / 10 : 200;
        bool lng = k > nmed;
        size_t n = lng ? lsizes[k - 1 - nmed] : k ? sizes[k - 1] : 16;
        int it = lng && n > 65536 ? iters / 10 : iters; /* 1 MiB: fewer */
        if (it < 100)
            it = 100 < iters ? 100 : iters;
        /* One clock read per round trip, between consecutive requests (as
         * vip_send_lat times its posts), so the two are measured alike. */
        double t0 = now_us();
        if (lng)
            warm = it / 10 > 20 ? it / 10 : 20;
        for (int i = -warm; i < it; i++) {
            int want = replies + 1;
            uint8_t *src = out ? out + ((size_t)(i & 255) << 12) : seg;
            int r = lng ? AM_RequestXfer1(ep, 1, 0, 5, src, n, i)
                    : k ? AM_RequestI1(ep, 1, 3, buf, n, i)
                        : AM_Request4(ep, 1, 1, i, 0, 0, 0);
            if (r != AM_OK)
                die("request");
            while (replies < want)
                if (AM_Poll(eb) != AM_OK)
                    die("AM_Poll");
            double t1 = now_us();
            if (i >= 0)
                t[i] = t1 - t0;
            t0 = t1;
        }
        double sum = 0;
        for (int i = 0; i < it; i++)
            sum += t[i];
        qsort(t, (size_t)it, sizeof *t, cmp);
        double med = t[it / 2];
        printf(csv ? "%s,%s,%zu,%.2f,%.2f,%.2f\n" : "%-6s %-8s %7zu %12.2f %12.2f %12.2f\n", nic,
               lng ? (out ? "long-out" : "long") : k ? "medium" : "short", n, med, sum / it,
               med / 2);
        fflush(stdout);
    }
    /* rank 1 leaves its loop at once: it serves in the barriers' polls and here */
    if (am2_spmd_barrier() != AM_OK)
        die("barrier");
    free(t);
    AM_SetSeg(ep, NULL, 0);
    free(seg);
    free(out);
    am2_spmd_exit(0);
}

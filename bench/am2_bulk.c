/*
 * am2_bulk - AM-2 long-message bandwidth between two ranks:
 * `amrun -np 2 am2_bulk [-m MBYTES] [--csv]`.
 *
 * Rank 0 streams AM_RequestXferAsync messages of each size into rank 1's
 * segment (rotating through it), as many in flight as the credits allow
 * (it polls when one is AM_ERR_NOT_SENT), then waits for the last reply.
 * Each size moves about MBYTES MiB (default 64). Printed: MB/s (10^6
 * bytes per second) and messages per second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <am2_spmd.h>
#include <vipl_ext.h>

#define SEG (4u << 20)

static volatile int replies;

static void die(const char *what)
{
    fprintf(stderr, "am2_bulk: %s failed: %s\n", what, AMX_LastError());
    exit(1);
}

static void req_long(void *token, void *p, size_t n, int32_t a)
{
    (void)p, (void)n;
    AM_Reply1(token, 2, a);
}

static void rep(void *token, int32_t a)
{
    (void)token, (void)a;
    replies++;
}

/* The NIC's clock: virtual time under VIP_CLOCK=virtual, else monotonic. */
static double now_s(void)
{
    return (double)VipExtClockNs() / 1e9;
}

int main(int argc, char **argv)
{
    eb_t eb;
    ep_t ep;
    double mbytes = 64;
    int csv = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc)
            mbytes = atof(argv[++i]);
        else if (!strcmp(argv[i], "--csv"))
            csv = 1;
    }
    if (am2_spmd_startup(&argc, &argv, &eb, &ep) != AM_OK)
        die("am2_spmd_startup");
    if (am2_spmd_nranks() != 2) {
        fprintf(stderr, "am2_bulk: run it as amrun -np 2 am2_bulk\n");
        am2_spmd_exit(2);
    }
    uint8_t *seg = aligned_alloc(4096, SEG), *src = aligned_alloc(4096, AM2_MAX_LONG);
    if (!seg || !src)
        die("malloc");
    memset(seg, 0, SEG);
    memset(src, 0x5a, AM2_MAX_LONG);
    if (AM_SetSeg(ep, seg, SEG) || AM_SetHandler(ep, 1, req_long) || AM_SetHandler(ep, 2, rep))
        die("set-up");
    const char *nic = getenv("AM2_NIC") ? getenv("AM2_NIC") : "via0";
    if (am2_spmd_rank() == 0)
        printf(csv ? "# nic,bytes,MB_per_s,msgs_per_s\n" : "%-6s %8s %10s %12s\n", "nic", "bytes",
               "MB/s", "msgs/s");
    for (size_t sz = 4096; sz <= AM2_MAX_LONG; sz *= 4) {
        if (am2_spmd_barrier() != AM_OK)
            die("barrier");
        if (am2_spmd_rank() == 1)
            continue;
        long n = (long)(mbytes * 1048576.0 / (double)sz);
        if (n < 16)
            n = 16;
        int base = replies;
        double t0 = now_s();
        size_t off = 0;
        for (long i = 0; i < n; i++) {
            if (off + sz > SEG)
                off = 0;
            int r;
            while ((r = AM_RequestXferAsync1(ep, 1, off, 1, src, sz, (int32_t)i)) == AM_ERR_NOT_SENT)
                if (AM_Poll(eb) != AM_OK)
                    die("AM_Poll");
            if (r != AM_OK)
                die("AM_RequestXferAsync1");
            off += sz;
        }
        while (replies < base + n)
            if (AM_Poll(eb) != AM_OK)
                die("AM_Poll");
        double dt = now_s() - t0;
        printf(csv ? "%s,%zu,%.1f,%.0f\n" : "%-6s %8zu %10.1f %12.0f\n", nic, sz,
               (double)n * (double)sz / dt / 1e6, (double)n / dt);
        fflush(stdout);
    }
    if (am2_spmd_barrier() != AM_OK)
        die("barrier");
    free(seg);
    free(src);
    am2_spmd_exit(0);
}

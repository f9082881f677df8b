/*
 * am2_contend - contention at one server endpoint, after the AM-II paper's
 * Figures 7 and 8: `amrun -np N+1 am2_contend [-n MSGS]`.
 *
 * Ranks 1..N are clients: each sends MSGS short requests with 4 arguments
 * to rank 0 as fast as its credits allow, and counts the replies. Rank 0
 * only serves (it polls in the closing barrier). Printed by rank 0: the
 * clients' aggregate message rate (all requests over the slowest client's
 * time) and the mean and lowest per-client rate. Set AM2_SHM=0 to go
 * through the NIC instead of shared memory.
 *
 * -y: a client whose poll brought no reply yields the CPU (sched_yield)
 * instead of spinning, and keeps its own count of the K = 16 requests it
 * may have outstanding (so it never spins inside AM_Request4 for a
 * credit). For hosts with fewer cores than ranks, where spinning clients
 * starve the server and the rates measure the scheduler.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <am2_spmd.h>
#include <vipl_ext.h>

static volatile int replies;

static void die(const char *what)
{
    fprintf(stderr, "am2_contend: %s failed: %s\n", what, AMX_LastError());
    exit(1);
}

static void req(void *token, int32_t a, int32_t b, int32_t c, int32_t d)
{
    AM_Reply1(token, 2, a + b + c + d);
}

static void rep(void *token, int32_t s)
{
    (void)token, (void)s;
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
    int msgs = 20000, yield = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            msgs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-y"))
            yield = 1;
    if (am2_spmd_startup(&argc, &argv, &eb, &ep) != AM_OK)
        die("am2_spmd_startup");
    int me = am2_spmd_rank(), n = am2_spmd_nranks();
    if (n < 2) {
        fprintf(stderr, "am2_contend: run it as amrun -np CLIENTS+1 am2_contend\n");
        am2_spmd_exit(2);
    }
    if (AM_SetHandler(ep, 1, req) || AM_SetHandler(ep, 2, rep))
        die("AM_SetHandler");
    double *el = calloc((size_t)n, sizeof *el), mine = 0;
    if (!el)
        die("calloc");
    if (am2_spmd_barrier())
        die("barrier");
    if (me > 0) {
        double t0 = now_s();
        for (int i = 0; i < msgs; i++) {
            while (yield && i - replies >= 16) {
                int before = replies;
                if (AM_Poll(eb) != AM_OK)
                    die("AM_Poll");
                if (replies == before)
                    sched_yield();
            }
            if (AM_Request4(ep, 0, 1, i, me, 0, 0) != AM_OK)
                die("AM_Request4");
        }
        while (replies < msgs) {
            int before = replies;
            if (AM_Poll(eb) != AM_OK)
                die("AM_Poll");
            if (yield && replies == before)
                sched_yield();
        }
        mine = now_s() - t0;
    }
    if (am2_spmd_allgather(&mine, el, sizeof mine))
        die("all-gather");
    if (me == 0) {
        double worst = 0, sum = 0, low = 1e30;
        for (int r = 1; r < n; r++) {
            double rate = msgs / el[r];
            worst = el[r] > worst ? el[r] : worst;
            sum += rate;
            low = rate < low ? rate : low;
        }
        printf("clients %3d  aggregate %10.0f msg/s  per client: mean %10.0f  lowest %10.0f\n",
               n - 1, (double)msgs * (n - 1) / worst, sum / (n - 1), low);
    }
    fflush(stdout);
    free(el);
    /* rank 0 has printed: the first am2_spmd_exit ends the job */
    if (am2_spmd_barrier())
        die("barrier");
    am2_spmd_exit(0);
}

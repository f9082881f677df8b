/*
 * amudp_check.c - an AM-2 program written for AMUDP, the way AMUDP's own
 * test programs are: it knows amudp_spmd.h and the AMX_* names, not
 * libam2, and is built by `pkg-config --cflags --libs am2` against an
 * installed prefix (the Makefile stages one).
 *
 *   master: amudp_check NPROC [L|S] ITERS [MODE]
 *   worker: amudp_check ITERS [MODE]          (under amrun, or a master's)
 *
 * Every rank pings every other with short requests, echoes medium ones
 * of up to AM_MaxMedium() bytes, and writes long ones into the next
 * rank's segment, each checked; a handler at index 250 counts the pings
 * (all 256 indices are the program's). The ranks all-gather their
 * statistics, rank 0 sums and prints them and checks the sums; the job
 * ends through AMX_SPMDExit(0), each rank through its exit callback and
 * the kill hook (which print "rank R leaves with C" and "rank R killed
 * with C"). MODE exit3: rank 1 ends the job with AMX_SPMDExit(3) while
 * the others wait for messages that never come. Any failed check exits
 * with 10 + the line's last two digits. AMUDP_CHECK_MASTER in the
 * master's environment must reach the workers through getenvMaster.
 */
#include <amudp_spmd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c)                                                                           \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "amudp_check: rank %d: %s:%d: %s\n", AMX_SPMDMyProc(),        \
                    __FILE__, __LINE__, #c);                                              \
            AMX_SPMDExit(10 + __LINE__ % 100);                                             \
        }                                                                                  \
    } while (0)
#define AM_Safe(call) CHECK((call) == AM_OK)

enum { H_PING = 1, H_PONG, H_ECHO, H_ECHOED, H_LONG, H_LONGED, H_COUNT = 250 };
#define SEG_BYTES (1 << 20)

static eb_t eb;
static ep_t ep;
static int myproc, numprocs;
static volatile int pongs, echoes, longs_in, longs_acked, counted;
static uint8_t *seg;

static uint8_t pattern(int proc, int i, size_t k) { return (uint8_t)(proc * 31 + i * 7 + k); }

static void ping_handler(void *token, int32_t from, int32_t i)
{
    AM_Safe(AM_Reply2(token, H_PONG, from, i));
}
static void pong_handler(void *token, int32_t from, int32_t i)
{
    (void)token;
    (void)i;
    CHECK(from == myproc);
    pongs++;
}
static void count_handler(void *token) { (void)token; counted++; }

/* Medium: the payload back as it came. */
static void echo_handler(void *token, void *buf, size_t nbytes, int32_t from, int32_t i)
{
    AM_Safe(AM_ReplyI2(token, H_ECHOED, buf, nbytes, from, i));
}
static void echoed_handler(void *token, void *buf, size_t nbytes, int32_t from, int32_t i)
{
    (void)token;
    const uint8_t *b = buf;
    CHECK(from == myproc);
    for (size_t k = 0; k < nbytes; k++)
        CHECK(b[k] == pattern(from, i, k));
    echoes++;
}

/* Long: the data sit in our segment when the handler runs. */
static void long_handler(void *token, void *buf, size_t nbytes, int32_t from, int32_t i)
{
    const uint8_t *b = buf;
    CHECK(b >= seg && b + nbytes <= seg + SEG_BYTES);
    for (size_t k = 0; k < nbytes; k++)
        CHECK(b[k] == pattern(from, i, k));
    longs_in++;
    AM_Safe(AM_Reply0(token, H_LONGED));
}
static void longed_handler(void *token) { (void)token; longs_acked++; }

static void on_exit_cb(int code)
{
    printf("amudp_check: rank %d leaves with %d\n", myproc, code);
}

static void kill_me(int code)
{
    printf("amudp_check: rank %d killed with %d\n", myproc, code);
    fflush(stdout);
    _exit(code);
}

static void wait_for(volatile int *v, int want)
{
    while (*v < want) {
        AM_Safe(AM_SetEventMask(eb, AM_NOTEMPTY));
        AM_Safe(AM_WaitSema(eb));
        AM_Safe(AM_Poll(eb));
    }
}

int main(int argc, char **argv)
{
    uint64_t networkpid = 0;
    AMX_VerboseErrors = 1;
    AMX_SPMDkillmyprocess = kill_me;
    if (AMX_SPMDIsWorker(argv)) {
        AM_Safe(AMX_SPMDStartup(&argc, &argv, 0, &networkpid, &eb, &ep));
    } else {
        if (argc < 3) {
            fprintf(stderr, "usage: %s NPROC [L|S] ITERS [exit3]\n", argv[0]);
            exit(2);
        }
        AM_Safe(AMUDP_SPMDStartup(&argc, &argv, 0, 0, NULL, &networkpid, &eb, &ep));
        CHECK(!"the master's start-up returned");
    }
    CHECK(argc >= 2);
    int iters = atoi(argv[1]);
    const char *mode = argc > 2 ? argv[2] : "";
    myproc = AMX_SPMDMyProc();
    numprocs = AMX_SPMDNumProcs();
    CHECK(numprocs >= 1 && myproc >= 0 && myproc < numprocs);
    CHECK(AM_MaxMedium() >= 65000 && AM_MaxLong() >= 65000 && AM_MaxShort() >= 16);
    const char *m = AMX_SPMDgetenvMaster("AMUDP_CHECK_MASTER");
    CHECK(m && !strcmp(m, "from the master"));
    AM_Safe(AMX_SPMDSetExitCallback(on_exit_cb));

    seg = calloc(1, SEG_BYTES);
    CHECK(seg);
    AM_Safe(AM_SetSeg(ep, seg, SEG_BYTES));
    AM_Safe(AM_SetHandler(ep, H_PING, ping_handler));
    AM_Safe(AM_SetHandler(ep, H_PONG, pong_handler));
    AM_Safe(AM_SetHandler(ep, H_ECHO, echo_handler));
    AM_Safe(AM_SetHandler(ep, H_ECHOED, echoed_handler));
    AM_Safe(AM_SetHandler(ep, H_LONG, long_handler));
    AM_Safe(AM_SetHandler(ep, H_LONGED, (amx_handler_fn_t)longed_handler));
    AM_Safe(AM_SetHandler(ep, H_COUNT, (amx_handler_fn_t)count_handler));
    AM_Safe(AMX_SPMDBarrier());

    /* the job's number is one number */
    uint64_t *pids = malloc(sizeof *pids * (size_t)numprocs);
    CHECK(pids);
    AM_Safe(AMX_SPMDAllGather(&networkpid, pids, sizeof networkpid));
    for (int p = 0; p < numprocs; p++)
        CHECK(pids[p] == networkpid);

    if (!strcmp(mode, "exit3")) {
        if (myproc == 1)
            AMX_SPMDExit(3);
        wait_for(&pongs, 1); /* none comes: rank 1's exit ends us */
        CHECK(!"still here after another rank ended the job");
    }

    int peers = numprocs;
    static uint8_t medium[70000];
    uint8_t *src = malloc(SEG_BYTES);
    CHECK(src);
    for (int i = 0; i < iters; i++) {
        for (int p = 0; p < numprocs; p++) {
            AM_Safe(AM_Request2(ep, p, H_PING, myproc, i));
            AM_Safe(AM_Request0(ep, p, H_COUNT));
        }
        size_t mlen = (size_t)(i * 9973) % (AM_MaxMedium() + 1);
        if (i == 0)
            mlen = AM_MaxMedium();
        for (size_t k = 0; k < mlen; k++)
            medium[k] = pattern(myproc, i, k);
        for (int p = 0; p < numprocs; p++)
            AM_Safe(AM_RequestI2(ep, p, H_ECHO, medium, mlen, myproc, i));
        /* a long into the next rank's segment, at our own slice of it */
        size_t llen = i == 0 ? (size_t)(SEG_BYTES / numprocs) : (size_t)(i * 7919) % 65536;
        size_t off = (size_t)myproc * (SEG_BYTES / numprocs);
        for (size_t k = 0; k < llen; k++)
            src[k] = pattern(myproc, i, k);
        AM_Safe(AM_RequestXfer2(ep, (myproc + 1) % numprocs, off, H_LONG, src, llen, myproc, i));
        wait_for(&longs_acked, i + 1); /* the slice is free again */
        wait_for(&pongs, (i + 1) * peers);
        wait_for(&echoes, (i + 1) * peers);
    }
    AM_Safe(AMX_SPMDBarrier());
    CHECK(counted == iters * numprocs && longs_in == iters);

    /* statistics: everyone's, summed at rank 0 */
    amx_stats_t mine, *all = malloc(sizeof *all * (size_t)numprocs);
    CHECK(all);
    AM_Safe(AMX_GetEndpointStatistics(ep, &mine));
    AM_Safe(AMX_SPMDAllGather(&mine, all, sizeof mine));
    if (myproc == 0) {
        amx_stats_t sum = AMX_initial_stats;
        for (int p = 0; p < numprocs; p++)
            AM_Safe(AMX_AggregateStatistics(&sum, &all[p]));
        const char *text = AMX_DumpStatistics(stdout, &sum, 1);
        CHECK(text && strstr(text, "Requests"));
        uint64_t n = (uint64_t)numprocs * (uint64_t)iters;
        CHECK(sum.RequestsSent[amudp_Short] == 2 * n * (uint64_t)numprocs);
        CHECK(sum.RequestsSent[amudp_Medium] == n * (uint64_t)numprocs);
        CHECK(sum.RequestsSent[amudp_Long] == n);
        CHECK(sum.RepliesSent[amudp_Short] == n * (uint64_t)numprocs + n);
        for (int c = 0; c < amudp_NumCategories; c++)
            CHECK(sum.RequestsReceived[c] == sum.RequestsSent[c] &&
                  sum.RepliesReceived[c] == sum.RepliesSent[c]);
        CHECK(sum.ReturnedMessages == 0 && sum.TotalBytesSent > sum.RequestDataBytesSent[1]);
        printf("amudp_check: %d ranks, %d iterations: ok\n", numprocs, iters);
    }
    AM_Safe(AMX_SPMDBarrier());
    AMX_SPMDExit(0);
    return 1;
}

/*
 * am2_spmd_worker.c - an SPMD program that test_am2_spmd runs under amrun:
 *   ok     start-up, rank checks, barrier, all-gather, a ring of short,
 *          medium and long requests to the next rank checked byte for
 *          byte, a many-to-one burst at rank 0 on handlers 250 and 255
 *          (every index is the program's: the SPMD layer has an endpoint
 *          of its own), the endpoint's statistics counting exactly the
 *          program's messages, then exit 0;
 *   fail   like ok until the first barrier, then rank 1 leaves with 3
 *          (the job must end with 3) while the others wait in a barrier;
 *   hang   polls for ever (amrun's -t must end it);
 *   exit0  like fail, but rank 1 calls am2_spmd_exit(0) with an exit
 *          handler of its own registered that calls it too, as AMUDP
 *          programs' runtimes do (the job must end with 0 at once, and the
 *          handler must not run: if it does, it exits with 7).
 * Any check that fails exits with 10 + the line's last two digits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <am2_spmd.h>

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "rank %d: %s:%d: %s (%s)\n", am2_spmd_rank(), __FILE__, __LINE__, \
                    #c, AMX_LastError());                                                  \
            exit(10 + __LINE__ % 100);                                                    \
        }                                                                                 \
    } while (0)

#define SEG (256 * 1024)
static int replies, requests, burst;
static uint8_t *seg;

static void returned(int status, op_t op, void *token)
{
    (void)token;
    fprintf(stderr, "rank %d: a message came back (status %d, opcode %d)\n", am2_spmd_rank(),
            status, op);
    exit(9);
}

static void ring_req(void *token, void *buf, size_t n, int32_t from, int32_t seq)
{
    for (size_t i = 0; i < n; i++)
        if (((uint8_t *)buf)[i] != (uint8_t)(from * 31 + seq + i))
            exit(8);
    requests++;
    AM_Reply2(token, 2, from, seq);
}

static void ring_rep(void *token, int32_t from, int32_t seq)
{
    (void)token;
    (void)from;
    (void)seq;
    replies++;
}

static void short_req(void *token, int32_t a)
{
    burst++;
    AM_Reply2(token, 255, a, a);
}

/* An exit handler that would end the job again (a runtime's, registered
 * for a program that returns from main): am2_spmd_exit must not run it. */
static void exit_from_handler(void)
{
    _exit(7);
}

int main(int argc, char **argv)
{
    eb_t eb;
    ep_t ep;
    CHECK(am2_spmd_startup(&argc, &argv, &eb, &ep) == AM_OK);
    int me = am2_spmd_rank(), n = am2_spmd_nranks();
    CHECK(n >= 1 && me >= 0 && me < n && am2_spmd_is_worker());
    if (getenv("AM2_TEST_NRANKS")) /* the job the test meant to start */
        CHECK(n == atoi(getenv("AM2_TEST_NRANKS")));
    if (getenv("AM2_TEST_RDV")) /* amrun --hosts: names came by TCP, not a directory */
        CHECK(getenv("AM2_SPMD_RDV") && !getenv("AM2_SPMD_DIR"));
    if (getenv("AM2_TEST_MASTER")) { /* amrun's own environment, not ours */
        const char *v = am2_spmd_getenv_master("AMTEST_MASTER");
        unsetenv("AMTEST_MASTER");
        CHECK(v && !strcmp(v, "m a 'ster'") &&
              !strcmp(am2_spmd_getenv_master("AMTEST_MASTER"), "m a 'ster'"));
        CHECK(!am2_spmd_getenv_master("AMTEST_NOT_SET") && !am2_spmd_getenv_master("AM="));
    }
    CHECK(AM_SetHandler(ep, 0, returned) == AM_OK);
    CHECK(AM_SetHandler(ep, 1, ring_req) == AM_OK);
    CHECK(AM_SetHandler(ep, 2, ring_rep) == AM_OK);
    CHECK(AM_SetHandler(ep, 250, short_req) == AM_OK);
    CHECK(AM_SetHandler(ep, 255, ring_rep) == AM_OK);
    CHECK((seg = calloc(1, SEG)) != NULL);
    CHECK(AM_SetSeg(ep, seg, SEG) == AM_OK);
    CHECK(am2_spmd_barrier() == AM_OK);
    while (argc > 1 && !strcmp(argv[1], "hang"))
        CHECK(AM_Poll(eb) == AM_OK);
    if (argc > 1 && !strcmp(argv[1], "exit0")) {
        if (me == 1) {
            CHECK(atexit(exit_from_handler) == 0);
            am2_spmd_exit(0);
        }
        am2_spmd_barrier(); /* never completes: amrun ends the job */
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "fail")) {
        if (me == 1) {
            CHECK(AM_SetSeg(ep, NULL, 0) == AM_OK);
            free(seg);
            am2_spmd_exit(3);
        }
        am2_spmd_barrier(); /* never completes: amrun ends the job */
        return 0;
    }
    /* all-gather of 20000 bytes per rank (several medium messages each) */
    size_t gl = 20000;
    uint8_t *mine = malloc(gl), *all = malloc(gl * (size_t)n);
    CHECK(mine && all);
    for (size_t i = 0; i < gl; i++)
        mine[i] = (uint8_t)(me * 7 + i);
    CHECK(am2_spmd_allgather(mine, all, gl) == AM_OK);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < gl; i++)
            CHECK(all[(size_t)r * gl + i] == (uint8_t)(r * 7 + i));
    /* the ring: medium requests to the next rank, and long ones into its
     * segment at my slot */
    int next = (me + 1) % n, rounds = 200;
    uint8_t buf[AM2_MAX_MEDIUM];
    for (int s = 0; s < rounds; s++) {
        size_t len = (size_t)(s * 37) % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)(me * 31 + s + i);
        CHECK(AM_RequestI2(ep, next, 1, buf, len, me, s) == AM_OK);
    }
    size_t slot = SEG / (size_t)n;
    uint8_t *lsrc = malloc(slot);
    CHECK(lsrc);
    for (size_t i = 0; i < slot; i++)
        lsrc[i] = (uint8_t)(me * 31 + 0 + i);
    CHECK(AM_RequestXfer2(ep, next, slot * (size_t)me, 1, lsrc, slot, me, 0) == AM_OK);
    while (replies < rounds + 1)
        CHECK(AM_Poll(eb) == AM_OK);
    CHECK(am2_spmd_barrier() == AM_OK);
    /* many to one: everyone sends 500 short requests to rank 0, on the
     * handler indices the SPMD layer once kept for itself */
    replies = 0;
    for (int i = 0; i < 500; i++)
        CHECK(AM_Request1(ep, 0, 250, i) == AM_OK);
    while (replies < 500)
        CHECK(AM_Poll(eb) == AM_OK);

    CHECK(AM_SetSeg(ep, NULL, 0) == AM_OK); /* the peers acknowledge while polling */
    CHECK(am2_spmd_barrier() == AM_OK);
    /* the program's messages only: no barrier's, no all-gather's */
    amx_stats_t st;
    CHECK(AMX_GetEndpointStatistics(ep, &st) == AM_OK);
    CHECK(st.requests_sent[AM2_SHORT] == 500 && st.requests_sent[AM2_MEDIUM] == 200 &&
          st.requests_sent[AM2_LONG] == 1);
    CHECK(st.replies_received[AM2_SHORT] == 500 + 200 + 1);
    CHECK(st.requests_received[AM2_SHORT] == (me == 0 ? 500u * (unsigned)n : 0) &&
          st.requests_received[AM2_MEDIUM] == 200 && st.requests_received[AM2_LONG] == 1);
    free(seg);
    if (me == 0)
        CHECK(burst == 500 * n && requests == 200 + 1);
    free(mine);
    free(all);
    free(lsrc);
    CHECK(am2_spmd_barrier() == AM_OK); /* the first exit ends the job */
    am2_spmd_exit(0);
}

/*
 * am2_stress.c - many overlapping AM-II requests and replies in both
 * directions, the traffic a global-address-space runtime makes: run by
 * test_am2_spmd under amrun (`am2_stress [REQUESTS]`).
 *
 * Every rank keeps up to OUTSTANDING requests in flight to peers drawn at
 * random, of three kinds, each answered in kind:
 *   short   two arguments; the reply carries them back;
 *   medium  0..AM_MaxMedium bytes; the reply echoes them;
 *   long    1 B..AM_MaxLong into the peer's segment (the slot of the
 *           requester); the reply writes them back into the requester's
 *           segment (the slot of the peer), at most one long in flight
 *           per pair so that the slots are not overwritten under a check.
 * Every byte is checked where it lands. At the end each rank checks that
 * all its requests were answered and, after a barrier, that it served
 * exactly what the others sent it (an all-gather of the counts).
 * Any failure exits with 10 + the line's last two digits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <am2_spmd.h>

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "am2_stress rank %d: %s:%d: %s (%s)\n", am2_spmd_rank(),      \
                    __FILE__, __LINE__, #c, AMX_LastError());                             \
            exit(10 + __LINE__ % 100);                                                    \
        }                                                                                 \
    } while (0)

#define OUTSTANDING 8
#define MAX_RANKS 16
#define SLOT ((size_t)AM2_MAX_LONG)

enum { H_RETURNED, H_SHORT, H_SHORT_REP, H_MEDIUM, H_MEDIUM_REP, H_LONG, H_LONG_REP };

static int me, nranks;
static uint8_t *seg; /* [0, n * SLOT): longs from rank r at r * SLOT; then their echoes */
static uint64_t answered, served[MAX_RANKS];
static int long_busy[MAX_RANKS];

static uint8_t pattern(int from, int32_t seq, size_t i)
{
    return (uint8_t)(from * 131 + seq * 7 + (int32_t)i);
}

static int source(void *token)
{
    int src = -1;
    CHECK(AMX_GetSourceId(token, &src) == AM_OK && src >= 0 && src < nranks);
    return src;
}

static void returned(int status, op_t op, void *token)
{
    (void)token;
    fprintf(stderr, "am2_stress rank %d: a message came back (status %d, opcode %d)\n", me,
            status, op);
    exit(9);
}

static void h_short(void *token, int32_t from, int32_t seq)
{
    CHECK(source(token) == from);
    served[from]++;
    CHECK(AM_Reply2(token, H_SHORT_REP, seq, from ^ seq) == AM_OK);
}

static void h_short_rep(void *token, int32_t seq, int32_t x)
{
    (void)token;
    CHECK((x ^ seq) == me);
    answered++;
}

static void h_medium(void *token, void *buf, size_t n, int32_t from, int32_t seq)
{
    CHECK(source(token) == from);
    for (size_t i = 0; i < n; i++)
        CHECK(((uint8_t *)buf)[i] == pattern(from, seq, i));
    served[from]++;
    CHECK(AM_ReplyI2(token, H_MEDIUM_REP, buf, n, from, seq) == AM_OK);
}

static void h_medium_rep(void *token, void *buf, size_t n, int32_t from, int32_t seq)
{
    (void)token;
    CHECK(from == me);
    for (size_t i = 0; i < n; i++)
        CHECK(((uint8_t *)buf)[i] == pattern(me, seq, i));
    answered++;
}

static void h_long(void *token, void *buf, size_t n, int32_t from, int32_t seq)
{
    CHECK(source(token) == from && (uint8_t *)buf == seg + (size_t)from * SLOT);
    for (size_t i = 0; i < n; i++)
        CHECK(((uint8_t *)buf)[i] == pattern(from, seq, i));
    served[from]++;
    /* back into the requester's echo area, at our slot */
    size_t off = (size_t)nranks * SLOT + (size_t)me * SLOT;
    CHECK(AM_ReplyXfer2(token, off, H_LONG_REP, buf, n, me, seq) == AM_OK);
}

static void h_long_rep(void *token, void *buf, size_t n, int32_t peer, int32_t seq)
{
    CHECK(source(token) == peer &&
          (uint8_t *)buf == seg + (size_t)nranks * SLOT + (size_t)peer * SLOT);
    for (size_t i = 0; i < n; i++)
        CHECK(((uint8_t *)buf)[i] == pattern(me, seq, i));
    long_busy[peer] = 0;
    answered++;
}

int main(int argc, char **argv)
{
    eb_t eb;
    ep_t ep;
    CHECK(am2_spmd_startup(&argc, &argv, &eb, &ep) == AM_OK);
    me = am2_spmd_rank();
    nranks = am2_spmd_nranks();
    CHECK(nranks >= 2 && nranks <= MAX_RANKS);
    long requests = argc > 1 ? atol(argv[1]) : 2000;
    CHECK(requests > 0);
    static const struct {
        handler_t h;
        void (*fn)();
    } hs[] = {{H_RETURNED, (void (*)())returned}, {H_SHORT, (void (*)())h_short},
              {H_SHORT_REP, (void (*)())h_short_rep}, {H_MEDIUM, (void (*)())h_medium},
              {H_MEDIUM_REP, (void (*)())h_medium_rep}, {H_LONG, (void (*)())h_long},
              {H_LONG_REP, (void (*)())h_long_rep}};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        CHECK(AM_SetHandler(ep, hs[i].h, hs[i].fn) == AM_OK);
    size_t seglen = 2 * (size_t)nranks * SLOT;
    CHECK((seg = calloc(1, seglen)) != NULL);
    CHECK(AM_SetSeg(ep, seg, seglen) == AM_OK);
    CHECK(am2_spmd_barrier() == AM_OK);

    static uint8_t buf[AM2_MAX_LONG];
    uint64_t sent = 0, sent_to[MAX_RANKS] = {0};
    unsigned rnd = 0x9E3779B9u * (unsigned)(me + 1);
    for (int32_t seq = 0; seq < requests; seq++) {
        while (sent - answered >= OUTSTANDING)
            CHECK(AM_Poll(eb) == AM_OK);
        rnd = rnd * 1103515245u + 12345u;
        int peer = (me + 1 + (int)((rnd >> 8) % (unsigned)(nranks - 1))) % nranks;
        unsigned kind = (rnd >> 20) % 3;
        if (kind == 2 && long_busy[peer])
            kind = 1;
        if (kind == 0) {
            CHECK(AM_Request2(ep, peer, H_SHORT, me, seq) == AM_OK);
        } else if (kind == 1) {
            size_t n = (rnd >> 4) % (AM2_MAX_MEDIUM + 1);
            for (size_t i = 0; i < n; i++)
                buf[i] = pattern(me, seq, i);
            CHECK(AM_RequestI2(ep, peer, H_MEDIUM, buf, n, me, seq) == AM_OK);
        } else {
            size_t n = (size_t)1 << ((rnd >> 3) % 21); /* 1 B .. 1 MiB */
            for (size_t i = 0; i < n; i++)
                buf[i] = pattern(me, seq, i);
            long_busy[peer] = 1;
            CHECK(AM_RequestXfer2(ep, peer, (size_t)me * SLOT, H_LONG, buf, n, me, seq) ==
                  AM_OK);
        }
        sent++;
        sent_to[peer]++;
    }
    while (answered < sent)
        CHECK(AM_Poll(eb) == AM_OK);
    /* everyone's count of what it sent each rank, against what each served */
    uint64_t *all = calloc((size_t)nranks * MAX_RANKS, sizeof *all);
    CHECK(all != NULL);
    CHECK(am2_spmd_allgather(sent_to, all, sizeof sent_to) == AM_OK);
    for (int r = 0; r < nranks; r++)
        CHECK(all[(size_t)r * MAX_RANKS + (size_t)me] == served[r]);
    free(all);
    CHECK(AM_SetSeg(ep, NULL, 0) == AM_OK);
    CHECK(am2_spmd_barrier() == AM_OK);
    free(seg);
    if (me == 0)
        printf("am2_stress: %d ranks, %ld requests each, all answered\n", nranks, requests);
    fflush(stdout);
    CHECK(am2_spmd_barrier() == AM_OK);
    am2_spmd_exit(0);
}

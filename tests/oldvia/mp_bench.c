/*
 * mp_bench.c - a ping-pong and a bandwidth sweep on the message-passing
 * layer of mp.h, every byte verified: the kind of program the VIA
 * message-passing libraries shipped with. Two ranks, one process each:
 *
 *   mp_bench -r RANK -d DEV0,DEV1 [-j JOB] [-n ITERS] [-w WINDOW] [-x MAXSIZE]
 *
 * Prints one line per size and test, and the layer's counters; exits 0
 * when every message arrived intact.
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mp.h"

static unsigned char pat(unsigned seq, size_t k)
{
    return (unsigned char)(seq * 131u + k * 7u + (k >> 8));
}

static void fill(unsigned char *p, size_t n, unsigned seq)
{
    for (size_t k = 0; k < n; k++)
        p[k] = pat(seq, k);
}

static int intact(const unsigned char *p, size_t n, unsigned seq)
{
    for (size_t k = 0; k < n; k++)
        if (p[k] != pat(seq, k))
            return 0;
    return 1;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* 0, 1, 4, 16, ... up to max, and both sides of the eager limit. */
static size_t next_size(size_t s, size_t max)
{
    size_t n = s == 0 ? 1 : s * 4;
    if (s < MP_EAGER_MAX && n > MP_EAGER_MAX)
        n = MP_EAGER_MAX;
    else if (s == MP_EAGER_MAX)
        n = MP_EAGER_MAX + 1;
    else if (s == MP_EAGER_MAX + 1)
        n = 4 * MP_EAGER_MAX;
    return n > max && s < max ? max : n;
}

static int die(struct mp *m, const char *what)
{
    fprintf(stderr, "mp_bench: %s: %s\n", what, mp_error());
    (void)m;
    return 1;
}

int main(int argc, char **argv)
{
    int rank = -1, iters = 20, window = 32;
    size_t max = 1 << 20;
    const char *job = "mpb";
    char devbuf[64] = "via0,via1";
    int opt;
    while ((opt = getopt(argc, argv, "r:d:j:n:w:x:")) != -1) {
        switch (opt) {
        case 'r': rank = atoi(optarg); break;
        case 'd': snprintf(devbuf, sizeof devbuf, "%s", optarg); break;
        case 'j': job = optarg; break;
        case 'n': iters = atoi(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'x': max = (size_t)atol(optarg); break;
        default:
            fprintf(stderr, "usage: mp_bench -r RANK -d DEV0,DEV1 [-j JOB] [-n ITERS] "
                            "[-w WINDOW] [-x MAXSIZE]\n");
            return 2;
        }
    }
    char *comma = strchr(devbuf, ',');
    if ((rank != 0 && rank != 1) || !comma || iters < 1 || window < 1) {
        fprintf(stderr, "mp_bench: need -r 0|1 and -d DEV0,DEV1\n");
        return 2;
    }
    *comma = '\0';
    const char *devs[2] = {devbuf, comma + 1};
    struct mp *m = mp_init(devs[rank], rank, 2, devs, job, 30000);
    if (!m)
        return die(NULL, "mp_init");
    int peer = 1 - rank;
    unsigned char *sbuf = malloc(max + 1), *rbuf = malloc(max + 1);
    if (!sbuf || !rbuf)
        return die(m, "malloc");
    unsigned seq = 0;
    size_t got;

    /* Ping-pong: rank 0 sends, rank 1 checks and sends it back. */
    for (size_t sz = 0; sz <= max; sz = next_size(sz, max)) {
        double t0 = now_us();
        for (int i = 0; i < iters; i++, seq++) {
            if (rank == 0) {
                fill(sbuf, sz, seq);
                if (mp_send(m, peer, sbuf, sz) || mp_recv(m, peer, rbuf, max, &got))
                    return die(m, "ping-pong");
            } else {
                if (mp_recv(m, peer, rbuf, max, &got))
                    return die(m, "ping-pong");
                if (got == sz && intact(rbuf, got, seq) && mp_send(m, peer, rbuf, got))
                    return die(m, "ping-pong echo");
            }
            if (got != sz || !intact(rbuf, got, seq)) {
                fprintf(stderr, "mp_bench: ping-pong message %u of %zu bytes arrived %s\n", seq,
                        sz, got != sz ? "with the wrong length" : "corrupt");
                return 1;
            }
        }
        if (rank == 0)
            printf("pingpong %8zu bytes %10.2f us\n", sz, (now_us() - t0) / iters / 2);
        if (sz == max)
            break;
    }

    /* Bandwidth: rank 0 streams a window of messages, rank 1 answers each
     * window with an empty message. */
    for (size_t sz = 1; sz <= max; sz = next_size(sz, max)) {
        double t0 = now_us();
        for (int w = 0; w < window; w++, seq++) {
            if (rank == 0) {
                fill(sbuf, sz, seq);
                if (mp_send(m, peer, sbuf, sz))
                    return die(m, "stream");
            } else {
                if (mp_recv(m, peer, rbuf, max, &got))
                    return die(m, "stream");
                if (got != sz || !intact(rbuf, got, seq)) {
                    fprintf(stderr, "mp_bench: streamed message %u of %zu bytes arrived %s\n",
                            seq, sz, got != sz ? "with the wrong length" : "corrupt");
                    return 1;
                }
            }
        }
        if (rank == 0 ? mp_recv(m, peer, rbuf, max, &got) : mp_send(m, peer, NULL, 0))
            return die(m, "window answer");
        if (rank == 0)
            printf("bandwidth %8zu bytes %10.2f MB/s\n", sz,
                   (double)sz * window / (now_us() - t0));
        if (sz == max)
            break;
    }
    struct mp_stats st;
    mp_stats(m, &st);
    printf("rank %d stats eager %lu rendezvous %lu credit_msgs %lu reg_hits %lu reg_misses %lu\n",
           rank, st.eager, st.rendezvous, st.credit_msgs, st.reg_cache_hits,
           st.reg_cache_misses);
    mp_finalize(m);
    free(sbuf);
    free(rbuf);
    return 0;
}

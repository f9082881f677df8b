/*
 * vip_ring.c - a token passed round a ring of emulated hosts.
 *
 * N processes, rank r on NIC via(r mod NICS), each with two VIs: one
 * connected to rank r+1 (it sends there) and one to rank r-1 (it receives
 * from there). Rank 0 sends a token of -s bytes; each rank takes it,
 * re-posts its receive, passes it on and reaps its send while the token
 * travels. Rank 0 times each round with the program's clock (virtual time
 * under VIP_CLOCK=virtual) and reports the time per hop: one host's
 * receive, the hand-over and the next send, which is a pair's one-way time
 * when every NIC has the same two VIs. A ring of 2 is therefore the pair
 * to compare a ring of 32 with, like for like (the same VIs per NIC, so
 * the same doorbell scan).
 *
 * The wall-clock time of the run is printed too: in virtual time it is
 * what a bigger machine costs (bench/run_virtual.sh).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define RING_TAG 0x52494e47u /* "RING" */
#define RING_POSTED 4u       /* receives kept posted on the VI from r-1 */

struct ring {
    unsigned hosts, nics, rank;
    uint32_t size;
    uint64_t rounds, warmup;
    uint64_t disc0; /* rank r accepts under disc0 + r */
    struct bu_ep ep;
    VIP_VI_HANDLE next, prev;
    VIP_MEM_HANDLE mh;
    VIP_DESCRIPTOR *rd;  /* RING_POSTED receive descriptors */
    VIP_DESCRIPTOR *sd;  /* the send descriptor */
    uint8_t *buf;        /* receive buffers, then the send buffer */
};

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void nic_name(const struct ring *g, unsigned rank, char *out, size_t len)
{
    snprintf(out, len, "via%u", rank % g->nics);
}

static void post_recv(struct ring *g, unsigned slot)
{
    bu_desc_init(&g->rd[slot], g->buf + (size_t)slot * g->size, g->mh, g->size);
    BU_CHECK(VipPostRecv(g->prev, &g->rd[slot], g->mh));
}

/* Rank r: NIC, memory, both VIs, receives posted; then the two
 * connections. Rank 0 accepts first and the others request first, so the
 * requests resolve one after another round the ring. */
static void ring_open(struct ring *g)
{
    char dev[16], peer[16];
    nic_name(g, g->rank, dev, sizeof dev);
    nic_name(g, (g->rank + 1) % g->hosts, peer, sizeof peer);
    bu_open(&g->ep, dev, VIP_SERVICE_RELIABLE_DELIVERY);
    size_t need = (RING_POSTED + 1) * sizeof(VIP_DESCRIPTOR) + (RING_POSTED + 1) * (size_t)g->size;
    uint8_t *mem = bu_alloc(&g->ep, need + 64, &g->mh);
    g->rd = (VIP_DESCRIPTOR *)(void *)mem;
    g->sd = g->rd + RING_POSTED;
    g->buf = mem + (RING_POSTED + 1) * sizeof(VIP_DESCRIPTOR);
    g->next = bu_create_vi(&g->ep);
    g->prev = bu_create_vi(&g->ep);
    for (unsigned i = 0; i < RING_POSTED; i++)
        post_recv(g, i);
    bool accept_first = g->rank == 0;
    for (int step = 0; step < 2; step++) {
        bool accept = (step == 0) == accept_first;
        g->ep.vi = accept ? g->prev : g->next;
        bu_connect(&g->ep, accept, peer, g->disc0 + (accept ? g->rank : (g->rank + 1) % g->hosts));
    }
    g->ep.vi = NULL;
}

/* Take the token from r-1 (its first byte: 1 = go on, 0 = stop), post its
 * receive again and hand the token on. */
static uint8_t pass(struct ring *g, unsigned *slot, uint8_t go)
{
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = VipRecvWait(g->prev, BU_WAIT_MS, &d);
    if (rc != VIP_SUCCESS)
        bu_die("rank %u: waiting for the token: %s: %s", g->rank, vip_strerror(rc),
               vip_last_error());
    bu_check_desc(d, "the token");
    if (d != &g->rd[*slot])
        bu_die("rank %u: the token came in descriptor %p, expected %p", g->rank, (void *)d,
               (void *)&g->rd[*slot]);
    uint8_t got = g->size ? g->buf[(size_t)*slot * g->size] : go;
    post_recv(g, *slot);
    *slot = (*slot + 1) % RING_POSTED;
    return got;
}

static void send_token(struct ring *g, uint8_t go)
{
    uint8_t *sbuf = g->buf + (size_t)RING_POSTED * g->size;
    if (g->size)
        sbuf[0] = go;
    bu_desc_init(g->sd, sbuf, g->mh, g->size);
    BU_CHECK(VipPostSend(g->next, g->sd, g->mh));
}

static void reap_send(struct ring *g)
{
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = VipSendWait(g->next, BU_WAIT_MS, &d);
    if (rc != VIP_SUCCESS)
        bu_die("rank %u: sending the token: %s: %s", g->rank, vip_strerror(rc), vip_last_error());
    bu_check_desc(d, "the token's send");
}

/* Ranks 1..N-1: pass the token on until the stop token has gone by
 * twice: after its first round everybody knows the end is near (a
 * neighbour's disconnect is then no error to report), after its second
 * each may go. */
static void member(struct ring *g)
{
    unsigned slot = 0, stops = 0;
    while (stops < 2) {
        uint8_t go = pass(g, &slot, 1);
        if (!go) {
            g->ep.closing = 1;
            stops++;
        }
        send_token(g, go);
        reap_send(g);
    }
}

/* Rank 0: warm-up and timed rounds, then the stop token round the ring.
 * Fills hop_ns[rounds]. */
static void leader(struct ring *g, double *hop_ns)
{
    unsigned slot = 0;
    for (uint64_t i = 0; i < g->warmup + g->rounds; i++) {
        uint64_t t0 = bu_now_ns();
        send_token(g, 1);
        reap_send(g);
        (void)pass(g, &slot, 1);
        uint64_t t1 = bu_now_ns();
        if (i >= g->warmup)
            hop_ns[i - g->warmup] = (double)(t1 - t0) / g->hosts;
    }
    g->ep.closing = 1;
    for (int round = 0; round < 2; round++) {
        send_token(g, 0);
        reap_send(g);
        (void)pass(g, &slot, 0);
    }
}

/* Everyone has seen the stop token: disconnect both VIs (the peer's
 * disconnect may come first), destroy them and close. */
static void ring_close(struct ring *g)
{
    g->ep.closing = 1;
    VipDisconnect(g->next);
    VipDisconnect(g->prev);
    BU_CHECK(VipDestroyVi(g->next));
    BU_CHECK(VipDestroyVi(g->prev));
    bu_close(&g->ep);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vip_ring [-H hosts] [-N nics] [-s bytes] [-n rounds] [-w warmup] [--csv]\n"
            "  A token round a ring of HOSTS processes (default 8), rank r on NIC\n"
            "  via(r mod NICS) (default: one NIC each). Prints the time per hop (one\n"
            "  host's receive, hand-over and send; the program's clock, virtual under\n"
            "  VIP_CLOCK=virtual) and the run's wall-clock time.\n");
}

int main(int argc, char **argv)
{
    bu_prog = "vip_ring";
    struct ring g = {.hosts = 8, .size = 4, .rounds = 200, .warmup = 20};
    bool csv = false;
    static const struct option lo[] = {{"csv", no_argument, NULL, 'c'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "H:N:s:n:w:h", lo, NULL)) != -1) {
        switch (c) {
        case 'H': g.hosts = (unsigned)bu_parse_count(optarg, "-H", 2, 1024); break;
        case 'N': g.nics = (unsigned)bu_parse_count(optarg, "-N", 1, 1024); break;
        case 's': g.size = (uint32_t)bu_parse_size(optarg, "-s"); break;
        case 'n': g.rounds = bu_parse_count(optarg, "-n", 1, 100000000); break;
        case 'w': g.warmup = bu_parse_count(optarg, "-w", 0, 100000000); break;
        case 'c': csv = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!g.nics)
        g.nics = g.hosts;
    if (!g.size)
        bu_die("-s: the token needs a byte (it says whether to go on)");
    /* rank r accepts under disc0 + r: unique to this run */
    g.disc0 = (uint64_t)RING_TAG << 32 | (uint64_t)getpid() << 12;
    double w0 = wall_s();
    pid_t *kids = calloc(g.hosts, sizeof *kids);
    if (!kids)
        bu_die("out of memory");
    fflush(stdout);
    for (unsigned r = 1; r < g.hosts; r++) {
        pid_t p = fork();
        if (p < 0)
            bu_die("fork: %s", strerror(errno));
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            g.rank = r;
            static char role[32];
            snprintf(role, sizeof role, "rank %u", r);
            bu_role = role;
            ring_open(&g);
            member(&g);
            ring_close(&g);
            exit(0);
        }
        kids[r] = p;
    }
    bu_role = "rank 0";
    double *hop = calloc(g.rounds, sizeof *hop);
    if (!hop)
        bu_die("out of memory");
    ring_open(&g);
    leader(&g, hop);
    ring_close(&g);
    bool ok = true;
    for (unsigned r = 1; r < g.hosts; r++) {
        int st;
        if (waitpid(kids[r], &st, 0) != kids[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            ok = false;
    }
    double wall = wall_s() - w0;
    if (!ok)
        bu_die("a rank failed (see above)");
    struct bu_stats s = bu_stats_of(hop, g.rounds);
    if (csv) {
        printf("hosts,nics,bytes,rounds,min_us,median_us,p90_us,max_us,wall_s\n");
        printf("%u,%u,%u,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f,%.2f\n", g.hosts, g.nics, g.size,
               g.rounds, s.min / 1e3, s.median / 1e3, s.p90 / 1e3, s.max / 1e3, wall);
    } else {
        printf("ring of %u hosts on %u NICs, %u-byte token, %" PRIu64 " rounds (%s time)\n",
               g.hosts, g.nics, g.size, g.rounds, VipExtClockVirtual() ? "virtual" : "real");
        printf("per hop: min %.3f  median %.3f  p90 %.3f  max %.3f us; wall clock %.2f s\n",
               s.min / 1e3, s.median / 1e3, s.p90 / 1e3, s.max / 1e3, wall);
    }
    free(hop);
    free(kids);
    return 0;
}

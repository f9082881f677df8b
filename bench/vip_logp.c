/*
 * vip_logp.c - LogP parameters of VIA sends, after Culler et al.,
 * "Assessing Fast Network Interfaces" (IEEE Micro 1996).
 *
 * Two processes (client on one NIC, server on another), 4-byte messages
 * by default:
 *   L phase:  ping-pong; one-way time = RTT/2.
 *   o phase:  the client posts sends one at a time, well apart, and times
 *             the VipPostSend call (o_s) and the VipPostRecv that re-arms a
 *             receive (o_r: in VIA receiving costs the host a Build + Ring;
 *             the descriptor is filled by the NIC).
 *   g phase:  the client posts a burst of M sends back to back; the server
 *             acknowledges after the last; g = (burst time - one-way) / M.
 *   L = one-way - o_s - o_r.
 *
 *   vip_logp [-s SIZE] [-n ITERS] [-m BURST] [-d SERVER_NIC] [--csv]
 */
#include "bench_util.h"

#define RQ 1024u
#define CREDIT 256u /* o phase: the server acknowledges every CREDIT messages */

struct lopts {
    uint32_t size;
    unsigned iters, burst;
    const char *server_dev, *client_dev;
    uint64_t disc;
    int csv;
};

struct side {
    struct bu_ep ep;
    VIP_DESCRIPTOR *rd, *sd;
    uint8_t *buf;
    VIP_MEM_HANDLE dmh, bmh;
    unsigned rhead, shead, stail;
};

static void side_setup(struct side *s, const struct lopts *o, bool server)
{
    bu_open(&s->ep, server ? o->server_dev : o->client_dev, VIP_SERVICE_RELIABLE_DELIVERY);
    s->rd = bu_alloc(&s->ep, sizeof(VIP_DESCRIPTOR) * 2 * RQ, &s->dmh);
    s->sd = s->rd + RQ;
    s->buf = bu_alloc(&s->ep, 2 * (size_t)(o->size + 64), &s->bmh);
    s->ep.vi = bu_create_vi(&s->ep);
    for (unsigned i = 0; i < RQ; i++) {
        bu_desc_init(&s->rd[i], s->buf, s->bmh, o->size);
        BU_CHECK(VipPostRecv(s->ep.vi, &s->rd[i], s->dmh));
    }
    const char *peer = strcmp(o->server_dev, o->client_dev) == 0 ? "localhost" : o->server_dev;
    bu_connect(&s->ep, server, peer, o->disc);
}

/* Median cost (us) of reading the clock once, from pairs of back-to-back reads. */
static double clock_overhead_us(void)
{
    enum { N = 2001 };
    static double d[N];
    for (unsigned i = 0; i < N; i++) {
        uint64_t a = bu_now_ns(), b = bu_now_ns();
        d[i] = (double)(b - a) / 1000.0;
    }
    return bu_stats_of(d, N).median;
}

/* Wait for a receive and re-arm it; returns the ns spent re-arming
 * (VipPostRecv: the host's Build + Ring of a receive, i.e. o_r). */
static uint64_t recv_one(struct side *s)
{
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = VipRecvWait(s->ep.vi, BU_WAIT_MS, &d);
    if (rc != VIP_SUCCESS)
        bu_die("VipRecvWait: %s: %s", vip_strerror(rc), vip_last_error());
    bu_check_desc(d, "receive");
    uint64_t t0 = bu_now_ns();
    BU_CHECK(VipPostRecv(s->ep.vi, d, s->dmh));
    return bu_now_ns() - t0;
}

/* Post a send from the ring of send descriptors; returns ns spent posting. */
static uint64_t send_one(struct side *s, uint32_t size)
{
    VIP_DESCRIPTOR *d = &s->sd[s->shead++ % RQ];
    bu_desc_init(d, s->buf + size + 64, s->bmh, size);
    uint64_t t0 = bu_now_ns();
    BU_CHECK(VipPostSend(s->ep.vi, d, s->dmh));
    return bu_now_ns() - t0;
}

static void reap_sends(struct side *s)
{
    while (s->stail != s->shead) {
        VIP_DESCRIPTOR *d;
        VIP_RETURN rc = VipSendWait(s->ep.vi, BU_WAIT_MS, &d);
        if (rc != VIP_SUCCESS)
            bu_die("VipSendWait: %s: %s", vip_strerror(rc), vip_last_error());
        bu_check_desc(d, "send");
        s->stail++;
    }
}

static void server(void *arg)
{
    const struct lopts *o = arg;
    struct side s = {0};
    side_setup(&s, o, true);
    for (unsigned i = 0; i < o->iters + 100; i++) { /* L phase */
        recv_one(&s);
        send_one(&s, o->size);
        reap_sends(&s);
    }
    for (unsigned i = 0; i < o->iters; i++) { /* o phase */
        recv_one(&s);
        if (i % CREDIT == CREDIT - 1) { /* flow control: see the client */
            send_one(&s, 4);
            reap_sends(&s);
        }
    }
    for (unsigned r = 0; r < 3; r++) { /* g phase, three bursts */
        for (unsigned i = 0; i < o->burst; i++)
            recv_one(&s);
        send_one(&s, 4);
        reap_sends(&s);
    }
    bu_bye_wait(&s.ep);
    bu_close(&s.ep);
}

int main(int argc, char **argv)
{
    bu_prog = "vip_logp";
    struct lopts o = {.size = 4, .iters = 2000, .burst = 256, .server_dev = "via1",
                      .client_dev = "via0"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-s") && i + 1 < argc)
            o.size = (uint32_t)bu_parse_size(argv[++i], "-s");
        else if (!strcmp(a, "-n") && i + 1 < argc)
            o.iters = (unsigned)bu_parse_count(argv[++i], "-n", 10, 1000000);
        else if (!strcmp(a, "-m") && i + 1 < argc)
            o.burst = (unsigned)bu_parse_count(argv[++i], "-m", 8, RQ / 2);
        else if (!strcmp(a, "-d") && i + 1 < argc)
            o.server_dev = argv[++i];
        else if (!strcmp(a, "--csv"))
            o.csv = 1;
        else {
            fprintf(stderr, "usage: vip_logp [-s SIZE] [-n ITERS] [-m BURST] [-d SERVER_NIC] "
                            "[--csv]\n");
            return !strcmp(a, "-h") || !strcmp(a, "--help") ? 0 : 2;
        }
    }
    if (o.size > 65536)
        bu_die("-s: LogP is measured for small messages (at most 64 KiB)");
    o.disc = bu_discriminator(0x4c6f6750);
    bu_fork_server(server, &o);
    bu_role = "client";
    struct side s = {0};
    side_setup(&s, &o, false);

    /* L phase: ping-pong; the re-arming of each receive gives o_r. */
    double *rtt = calloc(o.iters, sizeof *rtt), *os = calloc(o.iters, sizeof *os),
           *orr = calloc(o.iters, sizeof *orr), gap[3];
    if (!rtt || !os || !orr)
        bu_die("out of memory");
    for (unsigned i = 0; i < o.iters + 100; i++) {
        uint64_t t0 = bu_now_ns();
        send_one(&s, o.size);
        uint64_t post_r = recv_one(&s);
        if (i >= 100) {
            rtt[i - 100] = (double)(bu_now_ns() - t0) / 2000.0;
            orr[i - 100] = (double)post_r / 1000.0;
        }
        reap_sends(&s);
    }
    struct bu_stats oneway = bu_stats_of(rtt, o.iters);
    /* The clock read that brackets a call is not the call's overhead: take
     * the median cost of one (two reads back to back) off o_s and o_r, as
     * perftest calibrates its cycle counter. */
    double clk = clock_overhead_us();
    for (unsigned i = 0; i < o.iters; i++)
        orr[i] = orr[i] > clk ? orr[i] - clk : 0;
    struct bu_stats o_r = bu_stats_of(orr, o.iters);

    /* o phase: sends well apart (four one-way times), so each one finds
     * the NIC idle and VipPostSend costs only the host's share. */
    for (unsigned i = 0; i < o.iters; i++) {
        os[i] = (double)send_one(&s, o.size) / 1000.0;
        reap_sends(&s);
        /* A NIC that places messages by itself uses up the server's posted
         * receives as fast as they come; the server re-posts them only as
         * fast as it runs. Wait for its credit every CREDIT sends so a
         * descheduled server is never overrun (outside the timed calls). */
        if (i % CREDIT == CREDIT - 1)
            recv_one(&s);
        uint64_t until = bu_now_ns() + (uint64_t)(4000.0 * oneway.median);
        while (bu_now_ns() < until)
            ;
    }
    for (unsigned i = 0; i < o.iters; i++)
        os[i] = os[i] > clk ? os[i] - clk : 0;
    struct bu_stats o_s = bu_stats_of(os, o.iters);

    /* g phase: bursts back to back; the server acknowledges the last. */
    for (unsigned r = 0; r < 3; r++) {
        uint64_t t0 = bu_now_ns();
        for (unsigned i = 0; i < o.burst; i++) {
            send_one(&s, o.size);
            if (s.shead - s.stail >= RQ / 2)
                reap_sends(&s);
        }
        recv_one(&s);
        uint64_t t1 = bu_now_ns();
        reap_sends(&s);
        gap[r] = ((double)(t1 - t0) / 1000.0 - oneway.median) / o.burst;
    }
    struct bu_stats g = bu_stats_of(gap, 3);
    bu_bye_send(&s.ep, &s.sd[s.shead++ % RQ], s.dmh);
    s.stail++;
    bu_wait_server();
    bu_close(&s.ep);

    double L = oneway.median - o_s.median - o_r.median;
    if (o.csv) {
        printf("# vip_logp: LogP parameters of %u-byte VIA sends, microseconds (medians)\n",
               o.size);
        printf("# server NIC %s, client NIC %s, reliable delivery; o_s, o_r less one clock read "
               "(%.3f us)\n", o.server_dev, o.client_dev, clk);
        printf("bytes,oneway_us,o_s_us,o_r_us,g_us,L_us\n");
        printf("%u,%.3f,%.3f,%.3f,%.3f,%.3f\n", o.size, oneway.median, o_s.median,
               o_r.median, g.median, L);
    } else {
        printf("LogP of %u-byte sends (server %s, client %s), medians in microseconds:\n",
               o.size, o.server_dev, o.client_dev);
        printf("  one-way (RTT/2)   %9.3f\n", oneway.median);
        printf("  o_s  send overhead    %9.3f   (time in VipPostSend, less one clock read of "
               "%.3f)\n", o_s.median, clk);
        printf("  o_r  receive overhead %9.3f   (time in VipPostRecv re-arming a receive)\n",
               o_r.median);
        printf("  g    gap              %9.3f   (burst of %u)\n", g.median, o.burst);
        printf("  L    latency          %9.3f   (one-way - o_s - o_r)\n", L);
    }
    free(rtt);
    free(os);
    free(orr);
    return 0;
}

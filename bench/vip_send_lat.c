/*
 * vip_send_lat - one-way latency of VIA send/receive, ping-pong style
 * (after perftest's ib_send_lat).
 *
 * The program runs both ends: it forks a server (the reflector) and is
 * itself the client. Each process opens its NIC after the fork. Every
 * iteration the client posts a send, the server's pre-posted receive takes
 * it and the server sends the same number of bytes back; the client's
 * cycle time between consecutive posts is one round trip, and the reported
 * latency is half of it (RTT/2), as perftest reports it.
 *
 * Completions are polled (VipRecvDone/VipSendDone, never sleeping), as
 * perftest polls by default; with -e (events, as perftest's -e) both ends
 * block in VipRecvWait/VipSendWait instead, which poll briefly and then
 * sleep until the NIC wakes them.
 *
 * Every message carries its iteration number in its first and last byte;
 * both ends check it, the length and the descriptor status of everything
 * they complete, and stop with a message on the first mismatch.
 */
#include <getopt.h>

#include "bench_util.h"

#define RQ_DEPTH 4u      /* receives kept posted on each side */
#define DISC_TAG 0x4c41u /* "LA" */

struct opts {
    uint32_t size;
    bool all;
    uint64_t iters;  /* 0: chosen per size */
    uint64_t warmup; /* UINT64_MAX: chosen per size */
    const char *server_dev;
    const char *client_dev;
    size_t vis;
    bool csv;
    bool events; /* -e: block in VipRecvWait/VipSendWait instead of polling */
    VIP_RELIABILITY_LEVEL rel;
    uint64_t disc;
    uint32_t sizes[32];
    size_t nsizes;
};

/* Iterations for one size: 100000 for small messages, fewer for large ones
 * so that a size takes about a second or less. */
static uint64_t iters_for(const struct opts *o, uint32_t size)
{
    if (o->iters)
        return o->iters;
    if (size <= 16384)
        return 100000;
    uint64_t n = 100000ull * 16384 / size;
    return n < 1000 ? 1000 : n;
}

static uint64_t warmup_for(const struct opts *o, uint32_t size)
{
    if (o->warmup != UINT64_MAX)
        return o->warmup;
    uint64_t n = iters_for(o, size) / 10;
    return n > 1000 ? 1000 : n;
}

/* One end: a connected VI, RQ_DEPTH receives of the largest size, and one
 * send descriptor and buffer. */
struct end {
    struct bu_ep ep;
    VIP_DESCRIPTOR *sdesc, *rdesc; /* rdesc[RQ_DEPTH] */
    uint8_t *sbuf, *rbuf;          /* rbuf: RQ_DEPTH slots of max bytes */
    VIP_MEM_HANDLE dmh, smh, rmh;
    uint32_t max;
    uint64_t rhead; /* receives completed so far */
    bool events;    /* wait (-e) or poll for completions */
};

static void end_setup(struct end *e, const struct opts *o, bool server)
{
    bu_open(&e->ep, server ? o->server_dev : o->client_dev, o->rel);
    e->events = o->events;
    e->max = o->sizes[o->nsizes - 1];
    if (e->max > e->ep.attrs.MaxTransferSize)
        bu_die("%u bytes exceed the MaxTransferSize of %s (%lu bytes)", e->max, e->ep.dev,
               (unsigned long)e->ep.attrs.MaxTransferSize);
    if (RQ_DEPTH > e->ep.attrs.MaxDescriptorsPerQueue)
        bu_die("NIC %s queues hold only %lu descriptors", e->ep.dev,
               (unsigned long)e->ep.attrs.MaxDescriptorsPerQueue);
    size_t slot = e->max ? e->max : 1;
    e->sdesc = bu_alloc(&e->ep, (RQ_DEPTH + 1) * sizeof(VIP_DESCRIPTOR), &e->dmh);
    e->rdesc = e->sdesc + 1;
    e->sbuf = bu_alloc(&e->ep, slot, &e->smh);
    e->rbuf = bu_alloc(&e->ep, RQ_DEPTH * slot, &e->rmh);
    bu_open_idle_vis(&e->ep, o->vis);
    e->ep.vi = bu_create_vi(&e->ep);
    /* Receives go up before the connection exists: nothing can arrive
     * without one. */
    for (unsigned i = 0; i < RQ_DEPTH; i++) {
        bu_desc_init(&e->rdesc[i], e->rbuf + i * slot, e->rmh, e->max);
        BU_CHECK(VipPostRecv(e->ep.vi, &e->rdesc[i], e->dmh));
    }
    const char *peer = strcmp(o->server_dev, o->client_dev) == 0 ? "localhost" : o->server_dev;
    bu_connect(&e->ep, server, peer, o->disc);
}

/* Wait for the next receive, check it carries message `seq` of `size`
 * bytes, and post it again. */
static void recv_one(struct end *e, uint32_t size, uint64_t seq)
{
    VIP_DESCRIPTOR *d, *want = &e->rdesc[e->rhead % RQ_DEPTH];
    VIP_RETURN rc = bu_next_desc(e->ep.vi, true, e->events, BU_WAIT_MS, &d);
    if (rc == VIP_TIMEOUT)
        bu_die("no message for %u s (message %" PRIu64 " of %u bytes): the peer is stuck",
               BU_WAIT_MS / 1000, seq, size);
    if (rc != VIP_SUCCESS)
        bu_die("%s failed: %s: %s", bu_next_desc_call(true, e->events), vip_strerror(rc),
               vip_last_error());
    if (d != want)
        bu_die("%s returned descriptor %p, expected %p (completions out of order)",
               bu_next_desc_call(true, e->events), (void *)d, (void *)want);
    bu_check_desc(d, "receive");
    if (d->CS.Length != size)
        bu_die("message %" PRIu64 ": received %u bytes, expected %u", seq,
               (unsigned)d->CS.Length, size);
    if (size) {
        const uint8_t *p = d->DS[0].Local.Data.Address;
        uint8_t tag = (uint8_t)seq;
        if (p[0] != tag || p[size - 1] != tag)
            bu_die("message %" PRIu64 " of %u bytes: payload carries %u/%u, expected %u", seq,
                   size, p[0], p[size - 1], tag);
    }
    BU_CHECK(VipPostRecv(e->ep.vi, d, e->dmh));
    e->rhead++;
}

static void post_send(struct end *e, uint32_t size, uint64_t seq)
{
    if (size) {
        e->sbuf[0] = (uint8_t)seq;
        e->sbuf[size - 1] = (uint8_t)seq;
    }
    bu_desc_init(e->sdesc, e->sbuf, e->smh, size);
    BU_CHECK(VipPostSend(e->ep.vi, e->sdesc, e->dmh));
}

/* Reap the one send in flight. */
static void reap_send(struct end *e)
{
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = bu_next_desc(e->ep.vi, false, e->events, BU_WAIT_MS, &d);
    if (rc == VIP_TIMEOUT)
        bu_die("a send did not complete in %u s", BU_WAIT_MS / 1000);
    if (rc != VIP_SUCCESS)
        bu_die("%s failed: %s: %s", bu_next_desc_call(false, e->events), vip_strerror(rc),
               vip_last_error());
    if (d != e->sdesc)
        bu_die("%s returned descriptor %p, expected %p", bu_next_desc_call(false, e->events),
               (void *)d, (void *)e->sdesc);
    bu_check_desc(d, "send");
}

static void server(void *arg)
{
    const struct opts *o = arg;
    struct end e = {0};
    end_setup(&e, o, true);
    for (size_t k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        uint64_t total = warmup_for(o, size) + iters_for(o, size);
        for (uint64_t i = 0; i < total; i++) {
            recv_one(&e, size, i);
            post_send(&e, size, i);
            reap_send(&e);
        }
    }
    bu_bye_wait(&e.ep);
    bu_close(&e.ep);
}

static void print_header(const struct opts *o)
{
    if (o->csv) {
        printf("# vip_send_lat: one-way latency (RTT/2) in microseconds\n");
        printf("# server NIC %s, client NIC %s, %s, %zu idle VIs per process, completions %s\n",
               o->server_dev, o->client_dev, bu_reliability_name(o->rel), o->vis,
               o->events ? "by events (VipRecvWait/VipSendWait)"
                         : "by polling (VipRecvDone/VipSendDone)");
        printf("bytes,iters,min_us,median_us,p90_us,p99_us,max_us,avg_us\n");
        return;
    }
    const char *line = "-----------------------------------------------------------------"
                       "--------------------------";
    printf("%s\n", line);
    printf("                           VIA Send Latency Test\n");
    printf(" Server NIC      : %-8s  Client NIC : %s\n", o->server_dev, o->client_dev);
    printf(" Reliability     : %s\n", bu_reliability_name(o->rel));
    printf(" Idle VIs        : %zu per process\n", o->vis);
    printf(" Completions     : %s\n",
           o->events ? "events: block in VipRecvWait/VipSendWait (poll <= 100 us, then sleep)"
                     : "polling: VipRecvDone/VipSendDone until done (never sleep)");
    printf(" Method          : ping-pong, one-way latency = RTT/2, in microseconds (usec)\n");
    printf("%s\n", line);
    printf(" %-9s %-12s %-11s %-14s %-11s %-11s %-11s %-11s\n", "#bytes", "#iterations",
           "t_min[us]", "t_median[us]", "t_p90[us]", "t_p99[us]", "t_max[us]", "t_avg[us]");
    fflush(stdout);
}

static void print_row(const struct opts *o, uint32_t size, uint64_t n, const struct bu_stats *s)
{
    if (o->csv)
        printf("%u,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", size, n, s->min, s->median,
               s->p90, s->p99, s->max, s->avg);
    else
        printf(" %-9u %-12" PRIu64 " %-11.2f %-14.2f %-11.2f %-11.2f %-11.2f %-11.2f\n", size, n,
               s->min, s->median, s->p90, s->p99, s->max, s->avg);
    fflush(stdout);
}

static void client(const struct opts *o)
{
    uint64_t most = 0;
    for (size_t k = 0; k < o->nsizes; k++) {
        uint64_t t = warmup_for(o, o->sizes[k]) + iters_for(o, o->sizes[k]);
        most = t > most ? t : most;
    }
    uint64_t *t = malloc((most + 1) * sizeof *t);
    double *lat = malloc(most * sizeof *lat);
    if (!t || !lat)
        bu_die("out of memory for %" PRIu64 " samples", most);

    struct end e = {0};
    end_setup(&e, o, false);
    print_header(o);
    for (size_t k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        uint64_t warm = warmup_for(o, size), n = iters_for(o, size), total = warm + n;
        for (uint64_t i = 0; i < total; i++) {
            t[i] = bu_now_ns();
            post_send(&e, size, i);
            /* A message larger than the link's ring is still partly to go
             * here: waiting for the reply must move it on (VipRecvDone and
             * VipRecvWait progress the VI's send queue too). */
            recv_one(&e, size, i);
            reap_send(&e);
        }
        t[total] = bu_now_ns();
        for (uint64_t i = 0; i < n; i++)
            lat[i] = (double)(t[warm + i + 1] - t[warm + i]) / 2e3;
        struct bu_stats s = bu_stats_of(lat, n);
        print_row(o, size, n, &s);
    }
    if (!o->csv)
        printf("-------------------------------------------------------------------------"
               "------------------\n");
    bu_bye_send(&e.ep, e.sdesc, e.dmh);
    bu_close(&e.ep);
    free(t);
    free(lat);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vip_send_lat [options]\n"
            "  One-way latency (RTT/2 of a ping-pong) of VIA send/receive. Forks the server\n"
            "  (reflector); the client is this process on NIC via0.\n"
            "  -s, --size BYTES        message size (default 4; K/M suffixes)\n"
            "  -a, --all               all sizes 4 B .. 1 MiB in powers of two\n"
            "  -n, --iters N           measured iterations per size (default 100000 up to\n"
            "                          16 KiB, then fewer so a size takes about a second)\n"
            "  -w, --warmup N          unmeasured iterations first (default iters/10, <= 1000)\n"
            "  -d, --dev NIC           the server's NIC (default via0; via1 crosses the switch)\n"
            "      --vis N             create N extra idle VIs in each process first\n"
            "      --reliability L     unreliable | delivery (default) | reception\n"
            "  -e, --events            wait for completions in VipRecvWait/VipSendWait (they\n"
            "                          poll briefly, then sleep) instead of polling\n"
            "                          VipRecvDone/VipSendDone (the default)\n"
            "      --csv               CSV output (units in the '#' header)\n"
            "  -h, --help              this text\n"
            "  Environment: VIPD_SOCKET (vipd's socket), VIPD_AUTOSTART=0 (do not start vipd).\n");
}

int main(int argc, char **argv)
{
    bu_prog = "vip_send_lat";
    struct opts o = {.size = 4, .warmup = UINT64_MAX, .server_dev = "via0",
                     .client_dev = "via0", .rel = VIP_SERVICE_RELIABLE_DELIVERY};
    static const struct option lo[] = {
        {"size", required_argument, NULL, 's'},  {"all", no_argument, NULL, 'a'},
        {"iters", required_argument, NULL, 'n'}, {"warmup", required_argument, NULL, 'w'},
        {"dev", required_argument, NULL, 'd'},   {"vis", required_argument, NULL, 'V'},
        {"csv", no_argument, NULL, 'C'},         {"reliability", required_argument, NULL, 'R'},
        {"events", no_argument, NULL, 'e'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "s:an:w:d:eh", lo, NULL)) != -1) {
        switch (c) {
        case 's': {
            uint64_t v = bu_parse_size(optarg, "-s");
            if (v > BU_MAX_SIZE)
                bu_die("-s: %" PRIu64 " bytes is more than the %u-byte maximum transfer", v,
                       BU_MAX_SIZE);
            o.size = (uint32_t)v;
            break;
        }
        case 'a': o.all = true; break;
        case 'n': o.iters = bu_parse_count(optarg, "-n", 1, 1000000000); break;
        case 'w': o.warmup = bu_parse_count(optarg, "-w", 0, 1000000000); break;
        case 'd': o.server_dev = optarg; break;
        case 'V': o.vis = (size_t)bu_parse_count(optarg, "--vis", 0, 4000); break;
        case 'C': o.csv = true; break;
        case 'R': o.rel = bu_parse_reliability(optarg); break;
        case 'e': o.events = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vip_send_lat: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    o.nsizes = bu_sizes(o.all, o.size, BU_MAX_SIZE, o.sizes, sizeof o.sizes / sizeof o.sizes[0]);
    o.disc = bu_discriminator(DISC_TAG);

    bu_fork_server(server, &o);
    client(&o);
    bu_wait_server();
    return 0;
}

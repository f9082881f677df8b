/*
 * vip_read_lat - latency of VIA RDMA read (after perftest's ib_read_lat).
 *
 * The program runs both ends: it forks the server (the target, whose region
 * holds a known pattern and allows RDMA read) and is itself the client.
 * After connecting the server tells the client its region. Every iteration
 * the client posts one RDMA read of `size` bytes from the server's region
 * and waits for its completion; one read is outstanding at a time. The
 * reported latency is the whole read, post to completion (request out,
 * data back), not halved: ib_read_lat reports it so, as a read has no
 * second leg to divide.
 *
 * The server's host does nothing but lend its NIC a CPU: it polls for the
 * client's bye (VipRecvDone), or with -e sleeps in VipRecvWait and leaves
 * the answering to its NIC thread. RDMA read needs a reliable VI.
 *
 * Each read is checked: the client marks the first and last byte of its
 * destination before posting, and both must hold the pattern afterwards.
 */
#include "bench_rdma.h"

#define DISC_TAG 0x524cu /* "RL" */

/* The server's pattern at byte j of its region. */
static uint8_t pattern(size_t j)
{
    return (uint8_t)(j * 7u + 3u);
}

static void end_setup(struct br_end *e, const struct bu_opts *o, bool server)
{
    uint32_t max = o->sizes[o->nsizes - 1];
    /* The server's region is the source; the client's, the destination
     * (nobody reads it remotely). */
    struct br_params p = {.dev = server ? o->server_dev : o->client_dev,
                          .peer = bu_peer_name(o), .server = server, .events = o->events,
                          .rel = o->rel, .disc = o->disc, .max_msg = max, .region_len = max,
                          .rdma_read = server, .ndesc = server ? 0 : 1};
    br_setup(e, &p);
    if (server)
        for (size_t j = 0; j < max; j++)
            e->region[j] = pattern(j);
    br_exchange(e);
    if (!server && e->peer.len < max)
        bu_die("the server's region holds %u bytes; %u needed", e->peer.len, max);
}

static void server(void *arg)
{
    const struct bu_opts *o = arg;
    struct br_end e = {0};
    end_setup(&e, o, true);
    /* Passive for the whole run, however long: wait for the bye as long
     * as the client lives (it would take us with it). */
    e.ep.closing = 1;
    VIP_DESCRIPTOR *d = br_ctl_next(&e, true, "client's bye");
    if (d->CS.Length != 0)
        bu_die("expected the client's empty bye, got %u bytes", (unsigned)d->CS.Length);
    bu_close(&e.ep);
}

/* One read of `size` bytes into the client's region; checks it. */
static void read_one(struct br_end *e, uint32_t size, uint64_t seq)
{
    uint8_t first = pattern(0), last = pattern(size - 1);
    e->region[0] = (uint8_t)~first;
    e->region[size - 1] = (uint8_t)~last;
    br_desc_rdma(e->desc, VIP_CONTROL_OP_RDMAREAD, &e->peer, 0, e->region, e->rmh, size, 0);
    BU_CHECK(VipPostSend(e->ep.vi, e->desc, e->dmh));
    br_reap(e, e->desc, "RDMA read");
    if (e->desc->CS.Length != size)
        bu_die("read %" PRIu64 ": %u bytes arrived, %u asked", seq,
               (unsigned)e->desc->CS.Length, size);
    if (e->region[0] != first || e->region[size - 1] != last)
        bu_die("read %" PRIu64 " of %u bytes brought %u/%u, expected %u/%u", seq, size,
               e->region[0], e->region[size - 1], first, last);
}

static void client(const struct bu_opts *o)
{
    struct bu_samples sm = bu_samples_new(o);
    struct br_end e = {0};
    end_setup(&e, o, false);
    const char *how = bu_completions(o, "by polling (VipSendDone; the server polls VipRecvDone)",
                                     "by events (VipSendWait; the server sleeps in VipRecvWait)");
    char setup[160], cmpl[128];
    snprintf(setup, sizeof setup, "one read outstanding, completions %s", how);
    snprintf(cmpl, sizeof cmpl, "Completions     : %s", how);
    const char *about[] = {
        cmpl, "Method          : one read at a time; latency = post to completion, in microseconds",
        NULL};
    bu_lat_header(o, "RDMA read latency (post to completion, not halved) in microseconds", setup,
                  "VIA RDMA Read Latency Test", about);
    uint64_t seq = 0;
    for (size_t k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        uint64_t warm = bu_lat_warmup(o, size), n = bu_lat_iters(o, size);
        for (uint64_t i = 0; i < warm + n; i++, seq++) {
            sm.t[i] = bu_now_ns();
            read_one(&e, size, seq);
        }
        sm.t[warm + n] = bu_now_ns();
        bu_lat_report(o, &sm, size, warm, n, 1);
    }
    bu_client_end(o, BU_LAT_RULE, &e.ep, e.ctl_sd, e.dmh);
    bu_samples_free(&sm);
}

static void usage(FILE *f)
{
    bu_usage(f, &(struct bu_usage){
        .about = "  Latency of VIA RDMA read, one outstanding: post to completion, not halved.\n"
                 "  Forks the server (the target); the client is this process on NIC via0.\n",
        .size = "default 4, at least 1",
        .unit = "reads",
        .peer = "server's",
        .rel = "delivery (default) | reception (reads need a reliable VI)",
        .events = "wait in VipSendWait (the server in VipRecvWait, its NIC\n"
                  "                          thread answering) instead of polling"});
}

int main(int argc, char **argv)
{
    bu_prog = "vip_read_lat";
    struct bu_opts o;
    bu_parse_args(&o,
                  &(struct bu_args){.size = 4, .min_size = 1, .max_iters = 1000000000,
                                    .usage = usage, .disc_tag = DISC_TAG},
                  argc, argv);
    if (o.rel == VIP_SERVICE_UNRELIABLE)
        bu_die("--reliability unreliable: VIA reads only on reliable VIs (delivery, reception)");
    bu_fork_server(server, &o);
    client(&o);
    bu_wait_server();
    return 0;
}

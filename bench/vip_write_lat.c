/*
 * vip_write_lat - one-way latency of VIA RDMA write, ping-pong style
 * (after perftest's ib_write_lat).
 *
 * The program runs both ends: it forks the server and is itself the
 * client. After connecting, each side tells the other its target region
 * (bench_rdma.h). Every iteration the client RDMA-writes a message into
 * the server's region; the server, which watches the last byte of its
 * region in memory, sees it land and writes the same number of bytes back
 * into the client's region, where the client watches its own last byte.
 * No receive descriptor is used: the only completions are each side's own
 * writes (VipSendDone, after each post, as ib_write_lat polls its send CQ;
 * on a reliable VI a write completes when the target's NIC acknowledges
 * it). The client's cycle between consecutive posts is one round trip; the
 * reported latency is half of it (RTT/2), as perftest reports it.
 *
 * Each write carries a tag in its first and last byte (the last byte is
 * what the peer polls for). After the last iteration of a size both sides
 * exchange a control message, which travels behind their last write, and
 * check that the whole final write (its first byte too) has landed.
 */
#include "bench_rdma.h"

#define DISC_TAG 0x574cu /* "WL" */


/* Tags run 1..255 over the whole run: never 0 (fresh memory), never the
 * previous iteration's. */
static uint8_t tag_of(uint64_t seq)
{
    return (uint8_t)(seq % 255 + 1);
}

/* One end: its region (the peer's target) and a source buffer of the
 * largest size, one descriptor for its writes. */
static void end_setup(struct br_end *e, const struct bu_opts *o, bool server)
{
    uint32_t max = o->sizes[o->nsizes - 1];
    struct br_params p = {.dev = server ? o->server_dev : o->client_dev,
                          .peer = bu_peer_name(o), .server = server,
                          .events = o->events, .rel = o->rel, .disc = o->disc,
                          .max_msg = max, .region_len = max, .rdma_write = true,
                          .local_len = max, .ndesc = 1, .vis = o->vis};
    br_setup(e, &p);
    br_exchange(e);
    if (e->peer.len < max)
        bu_die("the peer's region holds %u bytes; %u needed", e->peer.len, max);
}

/* Write message `seq` of `size` bytes into the peer's region and reap it. */
static void write_one(struct br_end *e, uint32_t size, uint64_t seq)
{
    e->local[0] = e->local[size - 1] = tag_of(seq);
    br_desc_rdma(e->desc, VIP_CONTROL_OP_RDMAWRITE, &e->peer, 0, e->local, e->lmh, size, 0);
    BU_CHECK(VipPostSend(e->ep.vi, e->desc, e->dmh));
    br_reap(e, e->desc, "RDMA write");
}

/* The end of a size: each side's control message follows its last write,
 * so once the peer's is here the peer's last write has landed whole. The
 * server checks before it answers, the client after the answer: either
 * way the peer writes nothing more into the region until it is checked. */
static void size_done(struct br_end *e, bool server, uint32_t size, uint64_t last)
{
    if (!server)
        br_ctl_send(e, (struct br_ctl){.kind = BR_SYNC, .value = size});
    struct br_ctl m = br_ctl_recv(e, BR_SYNC, false, "end-of-size message");
    if (m.value != size)
        bu_die("the peer ended size %u, we %u", m.value, size);
    uint8_t t = tag_of(last);
    if (e->region[0] != t || e->region[size - 1] != t)
        bu_die("the last write of %u bytes left %u/%u in our region, expected %u", size,
               e->region[0], e->region[size - 1], t);
    if (server)
        br_ctl_send(e, (struct br_ctl){.kind = BR_SYNC, .value = size});
}

static void server(void *arg)
{
    const struct bu_opts *o = arg;
    struct br_end e = {0};
    end_setup(&e, o, true);
    uint64_t seq = 0;
    for (size_t k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        uint64_t total = bu_lat_warmup(o, size) + bu_lat_iters(o, size);
        for (uint64_t i = 0; i < total; i++, seq++) {
            br_poll_byte(&e, &e.region[size - 1], tag_of(seq), seq, size);
            write_one(&e, size, seq);
        }
        /* After the last size's exchange the client may say bye and
         * disconnect at once: from here its leaving is no error. */
        if (k == o->nsizes - 1)
            e.ep.closing = 1;
        size_done(&e, true, size, seq - 1);
    }
    bu_bye_wait(&e.ep);
    bu_close(&e.ep);
}

static void client(const struct bu_opts *o)
{
    struct bu_samples sm = bu_samples_new(o);
    struct br_end e = {0};
    end_setup(&e, o, false);
    char setup[160], vis[64];
    snprintf(setup, sizeof setup,
             "%zu idle VIs per process; each side polls the last byte of its region", o->vis);
    snprintf(vis, sizeof vis, "Idle VIs        : %zu per process", o->vis);
    const char *about[] = {
        vis, "Completions     : the target polls the last byte of its region in memory",
        "Method          : ping-pong, one-way latency = RTT/2, in microseconds (usec)", NULL};
    bu_lat_header(o, "RDMA write one-way latency (RTT/2) in microseconds", setup,
                  "VIA RDMA Write Latency Test", about);
    uint64_t seq = 0;
    for (size_t k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        uint64_t warm = bu_lat_warmup(o, size), n = bu_lat_iters(o, size);
        for (uint64_t i = 0; i < warm + n; i++, seq++) {
            sm.t[i] = bu_now_ns();
            write_one(&e, size, seq);
            br_poll_byte(&e, &e.region[size - 1], tag_of(seq), seq, size);
        }
        sm.t[warm + n] = bu_now_ns();
        bu_lat_report(o, &sm, size, warm, n, 2);
        size_done(&e, false, size, seq - 1);
    }
    bu_client_end(o, BU_LAT_RULE, &e.ep, e.ctl_sd, e.dmh);
    bu_samples_free(&sm);
}

static void usage(FILE *f)
{
    bu_usage(f, &(struct bu_usage){
        .about = "  One-way latency (RTT/2 of a ping-pong) of VIA RDMA write: each side writes\n"
                 "  into the other's region and polls the last byte of its own. Forks the server;\n"
                 "  the client is this process on NIC via0.\n",
        .size = "default 4, at least 1",
        .unit = "iterations",
        .peer = "server's", .vis = true,
        .events = "reap each write's completion in VipSendWait (it polls\n"
                  "                          briefly, then sleeps) instead of polling\n"
                  "                          VipSendDone"});
}

int main(int argc, char **argv)
{
    bu_prog = "vip_write_lat";
    struct bu_opts o;
    bu_parse_args(&o,
                  &(struct bu_args){.size = 4, .min_size = 1, .max_iters = 1000000000,
                                    .vis = true, .usage = usage, .disc_tag = DISC_TAG},
                  argc, argv);
    bu_fork_server(server, &o);
    client(&o);
    bu_wait_server();
    return 0;
}

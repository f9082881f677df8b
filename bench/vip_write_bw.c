/*
 * vip_write_bw - streaming bandwidth of VIA RDMA write (after perftest's
 * ib_write_bw).
 *
 * The program runs both ends: it forks the target (server) and is itself
 * the writer (client). After connecting, the server tells the client its
 * region: tx_depth slots of the largest size. The client keeps up to
 * tx_depth writes in flight, write k from its source slot k % tx_depth
 * into the server's slot k % tx_depth, and reaps completions with
 * VipSendDone (on a reliable VI a write completes when the target's NIC
 * acknowledges it; unreliable, when it is on the wire).
 *
 * A write consumes no receive descriptor, so unlike vip_send_bw no credits
 * are needed. The last write of each round carries immediate data (the
 * round's message count): that one completes a receive at the server,
 * which checks the marks of the last slot written and answers with an
 * acknowledgement. Timing, as vip_send_bw's: from the first post of a
 * round until that acknowledgement arrives at the client.
 *
 * Completions are polled by default (never sleeping), as perftest polls.
 * With -e the client blocks in VipSendWait whenever its window is full and
 * both sides wait for control messages in VipRecvWait.
 */
#include "bench_rdma.h"

#define DISC_TAG 0x5742u /* "WB" */

struct wopts {
    struct bu_opts c;
    uint32_t tx_depth;
};

/* The payload mark of slot k (first and last byte of its message). */
static uint8_t mark_of(uint64_t k)
{
    return (uint8_t)(k * 37u + 1u);
}

static void end_setup(struct br_end *e, const struct wopts *o, bool server)
{
    uint32_t max = o->c.sizes[o->c.nsizes - 1];
    size_t slots = (size_t)o->tx_depth * max;
    /* The server's region is the target; the client's region is only its
     * sources (nobody writes there), so it is the client's RDMA region
     * with no RDMA enabled. */
    struct br_params p = {.dev = server ? o->c.server_dev : o->c.client_dev,
                          .peer = bu_peer_name(&o->c), .server = server,
                          .events = o->c.events, .rel = o->c.rel, .disc = o->c.disc,
                          .max_msg = max, .region_len = slots, .rdma_write = server,
                          .ndesc = server ? 0 : o->tx_depth};
    br_setup(e, &p);
    br_exchange(e);
    if (!server && e->peer.len < slots)
        bu_die("the server's region holds %u bytes; %zu needed", e->peer.len, slots);
}

/* ---- target ------------------------------------------------------------------------- */

/* One round: the write with immediate data that ends it, then the ack. A
 * round may take longer than any fixed bound on a busy machine, so the
 * target waits as long as the writer lives (which has bounds of its own). */
static void target_round(struct br_end *e, uint32_t size, uint64_t n, uint32_t tx_depth,
                         size_t slot)
{
    VIP_DESCRIPTOR *d = br_ctl_next(e, true, "round's last write (with immediate data)");
    VIP_UINT32 st = d->CS.Status;
    if ((st & VIP_STATUS_OP_MASK) != VIP_STATUS_OP_REMOTE_RDMA_WRITE ||
        !(st & VIP_STATUS_IMMEDIATE))
        bu_die("expected the remote RDMA write with immediate data that ends a round, got "
               "%s", bu_status_str(st));
    if (d->CS.ImmediateData != (VIP_UINT32)n || d->CS.Length != size)
        bu_die("the round's last write says %u messages of %u bytes; %" PRIu64 " of %u were "
               "sent", (unsigned)d->CS.ImmediateData, (unsigned)d->CS.Length, n, size);
    br_repost(e, d);
    /* Every write of the round has landed before it (one link, in order). */
    const uint8_t *p = e->region + ((n - 1) % tx_depth) * slot;
    uint8_t m = mark_of((n - 1) % tx_depth);
    if (p[0] != m || p[size - 1] != m)
        bu_die("the last slot written holds %u/%u, expected %u (wrong data)", p[0],
               p[size - 1], m);
    br_ctl_send(e, (struct br_ctl){.kind = BR_ACK, .value = (uint32_t)n});
}

static void server(void *arg)
{
    const struct wopts *o = arg;
    struct br_end e = {0};
    end_setup(&e, o, true);
    size_t slot = o->c.sizes[o->c.nsizes - 1];
    for (size_t k = 0; k < o->c.nsizes; k++) {
        uint32_t size = o->c.sizes[k];
        uint64_t warm = bu_bw_warmup(&o->c, size);
        if (warm)
            target_round(&e, size, warm, o->tx_depth, slot);
        target_round(&e, size, bu_bw_iters(&o->c, size), o->tx_depth, slot);
    }
    bu_bye_wait(&e.ep);
    bu_close(&e.ep);
}

/* ---- writer ------------------------------------------------------------------------- */

/* Take the completed writes (waiting for one if `need`). */
static uint64_t reap(struct br_end *e, uint64_t done, uint32_t depth, bool need)
{
    VIP_DESCRIPTOR *d;
    for (;;) {
        VIP_RETURN rc = need ? bu_next_desc(e->ep.vi, false, e->events, BU_WAIT_MS, &d)
                             : VipSendDone(e->ep.vi, &d);
        if (rc == VIP_NOT_DONE)
            return done;
        if (rc == VIP_TIMEOUT)
            bu_die("no write completed for %u s (%" PRIu64 " done)", BU_WAIT_MS / 1000, done);
        if (rc != VIP_SUCCESS)
            bu_die("%s failed: %s: %s", bu_next_desc_call(false, need && e->events),
                   vip_strerror(rc), vip_last_error());
        if (d != &e->desc[done % depth])
            bu_die("a write completed out of order");
        bu_check_desc(d, "RDMA write");
        done++;
        need = false;
    }
}

/* Write n messages of `size` bytes; returns the seconds until the ack. */
static double write_round(struct br_end *e, uint32_t size, uint64_t n, uint32_t depth,
                          size_t slot)
{
    uint64_t sent = 0, done = 0;
    uint64_t start = bu_now_ns();
    while (sent < n) {
        while (sent < n && sent - done < depth) {
            uint32_t k = (uint32_t)(sent % depth);
            VIP_DESCRIPTOR *d = &e->desc[k];
            bool last = sent == n - 1;
            br_desc_rdma(d, VIP_CONTROL_OP_RDMAWRITE | (last ? VIP_CONTROL_IMMEDIATE : 0),
                         &e->peer, k * slot, e->region + k * slot, e->rmh, size,
                         last ? (uint32_t)n : 0);
            BU_CHECK(VipPostSend(e->ep.vi, d, e->dmh));
            sent++;
        }
        /* A full window waits for a completion (in VipSendWait with -e). */
        done = reap(e, done, depth, sent - done == depth);
    }
    struct br_ctl m = br_ctl_recv(e, BR_ACK, false, "target's acknowledgement");
    uint64_t stop = bu_now_ns();
    if (m.value != n)
        bu_die("the target acknowledged %u messages, %" PRIu64 " were sent", m.value, n);
    while (done < n)
        done = reap(e, done, depth, true);
    return (double)(stop - start) / 1e9;
}

static void client(const struct wopts *o)
{
    struct br_end e = {0};
    end_setup(&e, o, false);
    size_t slot = o->c.sizes[o->c.nsizes - 1];
    char setup[192], depth[64];
    snprintf(setup, sizeof setup,
             "tx depth %u, completions %s; seconds from the first write to the target's ack of "
             "the last",
             o->tx_depth,
             bu_completions(&o->c, "by polling (VipSendDone)", "by events (VipSendWait)"));
    snprintf(depth, sizeof depth, "TX depth        : %u (no receives used but the last)",
             o->tx_depth);
    const char *about[] = {
        depth,
        bu_completions(&o->c, "Completions     : polling: VipSendDone (never sleeps)",
                       "Completions     : events: VipSendWait when the window is full"),
        NULL};
    bu_bw_header(&o->c, "RDMA write streaming bandwidth", setup, "VIA RDMA Write Bandwidth Test",
                 about);
    for (size_t k = 0; k < o->c.nsizes; k++) {
        uint32_t size = o->c.sizes[k];
        for (uint32_t i = 0; i < o->tx_depth; i++) {
            uint8_t *p = e.region + i * slot;
            p[0] = p[size - 1] = mark_of(i);
        }
        uint64_t warm = bu_bw_warmup(&o->c, size), n = bu_bw_iters(&o->c, size);
        if (warm)
            write_round(&e, size, warm, o->tx_depth, slot);
        bu_bw_row(&o->c, size, n, write_round(&e, size, n, o->tx_depth, slot));
    }
    bu_client_end(&o->c, BU_BW_RULE, &e.ep, e.ctl_sd, e.dmh);
}

static void usage(FILE *f)
{
    bu_usage(f, &(struct bu_usage){
        .about = "  Streaming bandwidth of VIA RDMA write. Forks the target (server); the writer\n"
                 "  is this process on NIC via0.\n",
        .size = "default 65536, at least 1",
        .unit = "messages", .bw = true,
        .peer = "target's",
        .events = "block in VipSendWait when the window is full (and in\n"
                  "                          VipRecvWait for control messages) instead of polling",
        .own = "  -t, --tx-depth N        writes in flight (default 64)\n"});
}

static bool own_opt(int c, const char *arg, void *ctx)
{
    struct wopts *o = ctx;
    if (c != 't')
        return false;
    o->tx_depth = (uint32_t)bu_parse_count(arg, "-t", 1, 992);
    return true;
}

int main(int argc, char **argv)
{
    bu_prog = "vip_write_bw";
    struct wopts o = {.tx_depth = 64};
    static const struct option lo[] = {{"tx-depth", required_argument, NULL, 't'},
                                       {NULL, 0, NULL, 0}};
    bu_parse_args(&o.c,
                  &(struct bu_args){.size = 65536, .min_size = 1, .max_iters = 4000000000u,
                                    .shortopts = "t:", .longopts = lo, .own = own_opt,
                                    .ctx = &o, .usage = usage, .disc_tag = DISC_TAG},
                  argc, argv);
    bu_fork_server(server, &o);
    client(&o);
    bu_wait_server();
    return 0;
}

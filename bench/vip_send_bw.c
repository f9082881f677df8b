/*
 * vip_send_bw - streaming bandwidth of VIA send/receive (after perftest's
 * ib_send_bw).
 *
 * The program runs both ends: it forks the receiver (server) and is itself
 * the sender (client). The receiver keeps a deep window of receives posted;
 * the sender keeps up to TX_DEPTH sends in flight, each from its own
 * buffer (or from -b N shared ones), and reaps completions with VipSendDone.
 *
 * Completions are polled by default (VipSendDone/VipRecvDone, never
 * sleeping), as perftest polls. With -e (events, as perftest's -e) nobody
 * polls: the sender's send and receive queues complete to one CQ and it
 * blocks in VipCQWait whenever it can post nothing more, then takes that
 * completion and whatever else the CQ holds (VipCQDone), the way perftest
 * takes a CQ event and then polls the CQ empty; the receiver blocks in
 * VipRecvWait and VipSendWait. The library's waits poll briefly (at most
 * 100 us, adapting) and then sleep on a futex until the NIC wakes them.
 *
 * Flow control. A send completes when its message is on the wire, not when
 * the receiver has taken it, and a message that finds no receive posted
 * breaks a reliable connection (VIA_ERROR_RECVQ_EMPTY). So the sender holds
 * credits, one per receive the receiver has posted: every message costs
 * one, and the receiver returns them in small credit messages as it posts
 * its receives again, as VIA programs (MPI over VIA, AM-II) do.
 *
 * Timing: from the first send of a size until the receiver's acknowledgement
 * that it has received the last message arrives at the sender. Payload is
 * not touched in the loop; the receiver checks the first and last byte of
 * the last message of each size, and the length and status of every one.
 */
#include "bench_util.h"

#define DISC_TAG 0x4257u /* "BW" */
#define CTL_DEPTH 32u    /* control receives (sender) / control sends (receiver) */
#define CTL_CREDIT 1u
#define CTL_ACK 2u

struct ctl_msg {
    uint32_t kind;
    uint32_t value; /* credits returned, or messages received */
};

struct opts {
    struct bu_opts c;
    uint32_t tx_depth, rx_depth;
    uint32_t bufs; /* -b: data buffers per side (0: one per descriptor) */
};

/* The payload mark of data slot k (first and last byte of the message). */
static uint8_t mark_of(uint64_t k)
{
    return (uint8_t)(k * 37u + 1u);
}

/*
 * One end. Data descriptors: the sender's tx_depth sends, or the
 * receiver's rx_depth receives, one buffer slot of the largest size each.
 * Control descriptors: the sender's receives for credits and acks, or the
 * receiver's sends of them.
 */
struct end {
    struct bu_ep ep;
    VIP_DESCRIPTOR *data, *ctl;
    uint8_t *buf;
    struct ctl_msg *cbuf;
    VIP_MEM_HANDLE dmh, bmh, cmh;
    uint32_t depth, max;
    uint32_t bufs; /* data buffers: descriptor i uses buffer i % bufs */
    uint64_t ctl_posted, ctl_done; /* control descriptors posted / completed */
    bool events;                   /* -e */
};

static void end_setup(struct end *e, const struct opts *o, bool server)
{
    bu_open(&e->ep, server ? o->c.server_dev : o->c.client_dev, o->c.rel);
    e->max = o->c.sizes[o->c.nsizes - 1];
    e->depth = server ? o->rx_depth : o->tx_depth;
    e->bufs = o->bufs && o->bufs < e->depth ? o->bufs : e->depth;
    e->events = o->c.events;
    if (e->max > e->ep.attrs.MaxTransferSize)
        bu_die("%u bytes exceed the MaxTransferSize of %s (%lu bytes)", e->max, e->ep.dev,
               (unsigned long)e->ep.attrs.MaxTransferSize);
    if (e->depth > e->ep.attrs.MaxDescriptorsPerQueue - CTL_DEPTH)
        bu_die("a queue of NIC %s holds %lu descriptors: use -t/-r of at most %lu", e->ep.dev,
               (unsigned long)e->ep.attrs.MaxDescriptorsPerQueue,
               (unsigned long)e->ep.attrs.MaxDescriptorsPerQueue - CTL_DEPTH);
    size_t slot = e->max ? e->max : 1;
    e->data = bu_alloc(&e->ep, (e->depth + CTL_DEPTH) * sizeof(VIP_DESCRIPTOR), &e->dmh);
    e->ctl = e->data + e->depth;
    e->buf = bu_alloc(&e->ep, e->bufs * slot, &e->bmh);
    e->cbuf = bu_alloc(&e->ep, CTL_DEPTH * sizeof(struct ctl_msg), &e->cmh);
    if (!server && o->c.events) {
        /* Room for every descriptor that can be outstanding at once: the
         * sends in flight, the control receives and the final bye. */
        bu_create_cq(&e->ep, e->depth + CTL_DEPTH + 1);
    }
    e->ep.vi = bu_create_vi_cq(&e->ep, e->ep.cq);
    for (uint32_t i = 0; i < e->depth; i++)
        bu_desc_init(&e->data[i], e->buf + (i % e->bufs) * slot, e->bmh, e->max);
    for (uint32_t i = 0; i < CTL_DEPTH; i++)
        bu_desc_init(&e->ctl[i], &e->cbuf[i], e->cmh, sizeof(struct ctl_msg));
    /* Every receive is up before the connection exists. */
    if (server) {
        for (uint32_t i = 0; i < e->depth; i++)
            BU_CHECK(VipPostRecv(e->ep.vi, &e->data[i], e->dmh));
    } else {
        for (uint32_t i = 0; i < CTL_DEPTH; i++)
            BU_CHECK(VipPostRecv(e->ep.vi, &e->ctl[i], e->dmh));
        e->ctl_posted = CTL_DEPTH;
    }
    bu_connect(&e->ep, server, bu_peer_name(&o->c), o->c.disc);
}

/* ---- receiver ----------------------------------------------------------------------- */

/* Reap control sends that have completed; wait for the oldest if `need`. */
static void reap_ctl_sends(struct end *e, bool need)
{
    VIP_DESCRIPTOR *d;
    for (;;) {
        VIP_RETURN rc = VipSendDone(e->ep.vi, &d);
        if (rc == VIP_NOT_DONE && need)
            rc = bu_next_desc(e->ep.vi, false, e->events, BU_WAIT_MS, &d);
        if (rc == VIP_NOT_DONE)
            return;
        if (rc != VIP_SUCCESS)
            bu_die("reaping a control send: %s: %s", vip_strerror(rc), vip_last_error());
        if (d != &e->ctl[e->ctl_done % CTL_DEPTH])
            bu_die("VipSendDone returned an unexpected descriptor");
        bu_check_desc(d, "control send");
        e->ctl_done++;
        need = false;
    }
}

static void send_ctl(struct end *e, uint32_t kind, uint32_t value)
{
    reap_ctl_sends(e, e->ctl_posted - e->ctl_done == CTL_DEPTH);
    uint32_t k = (uint32_t)(e->ctl_posted % CTL_DEPTH);
    e->cbuf[k] = (struct ctl_msg){kind, value};
    bu_desc_init(&e->ctl[k], &e->cbuf[k], e->cmh, sizeof(struct ctl_msg));
    BU_CHECK(VipPostSend(e->ep.vi, &e->ctl[k], e->dmh));
    e->ctl_posted++;
}

struct rx_state {
    uint64_t head;  /* data receives completed */
    uint32_t fresh; /* receives posted again, not yet returned as credits */
};

static void receive_round(struct end *e, struct rx_state *s, uint32_t size, uint64_t n,
                          uint32_t tx_depth,
                          uint32_t tx_bufs)
{
    uint32_t batch = e->depth / 4 ? e->depth / 4 : 1;
    for (uint64_t i = 0; i < n; i++) {
        VIP_DESCRIPTOR *d, *want = &e->data[s->head % e->depth];
        VIP_RETURN rc = bu_next_desc(e->ep.vi, true, e->events, BU_WAIT_MS, &d);
        if (rc == VIP_TIMEOUT)
            bu_die("no message for %u s (%" PRIu64 " of %" PRIu64 " of %u bytes received)",
                   BU_WAIT_MS / 1000, i, n, size);
        if (rc != VIP_SUCCESS)
            bu_die("%s failed: %s: %s", bu_next_desc_call(true, e->events), vip_strerror(rc),
                   vip_last_error());
        if (d != want)
            bu_die("%s returned an unexpected descriptor (out of order)",
                   bu_next_desc_call(true, e->events));
        bu_check_desc(d, "receive");
        if (d->CS.Length != size)
            bu_die("message %" PRIu64 ": %u bytes received, %u sent", i,
                   (unsigned)d->CS.Length, size);
        if (i == n - 1 && size) { /* the end check: the last message's marks */
            const uint8_t *p = d->DS[0].Local.Data.Address;
            uint8_t m = mark_of(i % tx_depth % tx_bufs);
            if (p[0] != m || p[size - 1] != m)
                bu_die("the last message of %u bytes carries %u/%u, expected %u (wrong data)",
                       size, p[0], p[size - 1], m);
        }
        BU_CHECK(VipPostRecv(e->ep.vi, d, e->dmh));
        s->head++;
        if (++s->fresh >= batch) {
            send_ctl(e, CTL_CREDIT, s->fresh);
            s->fresh = 0;
        }
    }
    send_ctl(e, CTL_ACK, (uint32_t)n);
}

static void server(void *arg)
{
    const struct opts *o = arg;
    struct end e = {0};
    struct rx_state s = {0};
    end_setup(&e, o, true);
    uint32_t tx_bufs = o->bufs && o->bufs < o->tx_depth ? o->bufs : o->tx_depth; /* the sender's */
    for (size_t k = 0; k < o->c.nsizes; k++) {
        uint32_t size = o->c.sizes[k];
        uint64_t warm = bu_bw_warmup(&o->c, size);
        if (warm)
            receive_round(&e, &s, size, warm, o->tx_depth, tx_bufs);
        receive_round(&e, &s, size, bu_bw_iters(&o->c, size), o->tx_depth, tx_bufs);
    }
    reap_ctl_sends(&e, false);
    while (e.ctl_done < e.ctl_posted)
        reap_ctl_sends(&e, true);
    bu_bye_wait(&e.ep);
    bu_close(&e.ep);
}

/* ---- sender ----------------------------------------------------------------------------- */

/* Take one completed control receive: a credit, or the ack of a round
 * (returns true for it, checking it counts `n` messages); post it again. */
static bool take_ctl_one(struct end *e, VIP_DESCRIPTOR *d, uint64_t *credits, uint64_t n)
{
    bool acked = false;
    if (d != &e->ctl[e->ctl_done % CTL_DEPTH])
        bu_die("VipRecvDone returned an unexpected descriptor (out of order)");
    bu_check_desc(d, "control receive");
    const struct ctl_msg *m = d->DS[0].Local.Data.Address;
    if (d->CS.Length != sizeof *m)
        bu_die("control message of %u bytes (expected %zu)", (unsigned)d->CS.Length,
               sizeof *m);
    if (m->kind == CTL_CREDIT) {
        *credits += m->value;
    } else if (m->kind == CTL_ACK) {
        if (m->value != n)
            bu_die("the receiver acknowledged %u messages, %" PRIu64 " were sent", m->value,
                   n);
        acked = true;
    } else {
        bu_die("unknown control message %u", m->kind);
    }
    BU_CHECK(VipPostRecv(e->ep.vi, d, e->dmh));
    e->ctl_done++;
    return acked;
}

/* Take the control messages that have arrived (polling); true if the ack
 * of the round was among them. */
static bool take_ctl(struct end *e, uint64_t *credits, uint64_t n)
{
    bool acked = false;
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc;
    while ((rc = VipRecvDone(e->ep.vi, &d)) == VIP_SUCCESS)
        acked |= take_ctl_one(e, d, credits, n);
    if (rc != VIP_NOT_DONE)
        bu_die("VipRecvDone failed: %s: %s", vip_strerror(rc), vip_last_error());
    return acked;
}

/* Send n messages of `size` bytes; returns the seconds until the ack. */
static double send_round(struct end *e, uint64_t *credits, uint32_t size, uint64_t n)
{
    uint64_t sent = 0, done = 0, idle = 0, stop = 0;
    uint64_t start = bu_now_ns(), last = start;
    while (done < n || !stop) {
        bool moved = false;
        while (sent < n && sent - done < e->depth && *credits) {
            BU_CHECK(VipPostSend(e->ep.vi, &e->data[sent % e->depth], e->dmh));
            sent++;
            (*credits)--;
            moved = true;
        }
        VIP_DESCRIPTOR *d;
        VIP_RETURN rc;
        while ((rc = VipSendDone(e->ep.vi, &d)) == VIP_SUCCESS) {
            if (d != &e->data[done % e->depth])
                bu_die("VipSendDone returned an unexpected descriptor (out of order)");
            bu_check_desc(d, "send");
            done++;
            moved = true;
        }
        if (rc != VIP_NOT_DONE)
            bu_die("VipSendDone failed: %s: %s", vip_strerror(rc), vip_last_error());
        if (take_ctl(e, credits, n)) {
            stop = bu_now_ns();
            if (done < n) /* every message was received, so each is on the wire */
                moved = true;
        }
        if (moved) {
            idle = 0;
        } else if (++idle % 4096 == 0) {
            uint64_t now = bu_now_ns();
            if (idle == 4096)
                last = now;
            else if (now - last > (uint64_t)BU_WAIT_MS * 1000000u)
                bu_die("no progress for %u s (%" PRIu64 " of %" PRIu64 " messages of %u bytes "
                       "sent, %" PRIu64 " complete, %" PRIu64 " credits)",
                       BU_WAIT_MS / 1000, sent, n, size, done, *credits);
        }
    }
    return (double)(stop - start) / 1e9;
}

/*
 * send_round in events mode (-e): post what the window and the credits
 * allow, then block in VipCQWait for the next completion of either queue,
 * take it and every other one the CQ holds (VipCQDone), and go round again.
 * Every completion is taken through the CQ, one CQ entry per descriptor,
 * so the CQ never fills.
 */
static double send_round_events(struct end *e, uint64_t *credits, uint32_t size, uint64_t n)
{
    uint64_t sent = 0, done = 0, stop = 0;
    uint64_t start = bu_now_ns();
    while (done < n || !stop) {
        while (sent < n && sent - done < e->depth && *credits) {
            BU_CHECK(VipPostSend(e->ep.vi, &e->data[sent % e->depth], e->dmh));
            sent++;
            (*credits)--;
        }
        VIP_VI_HANDLE vi;
        VIP_BOOLEAN recvq;
        VIP_RETURN rc = VipCQWait(e->ep.cq, BU_WAIT_MS, &vi, &recvq);
        if (rc == VIP_TIMEOUT)
            bu_die("no completion for %u s (%" PRIu64 " of %" PRIu64 " messages of %u bytes "
                   "sent, %" PRIu64 " complete, %" PRIu64 " credits)",
                   BU_WAIT_MS / 1000, sent, n, size, done, *credits);
        while (rc == VIP_SUCCESS) {
            if (vi != e->ep.vi)
                bu_die("VipCQWait/VipCQDone named a VI that is not ours");
            VIP_DESCRIPTOR *d;
            rc = recvq ? VipRecvDone(e->ep.vi, &d) : VipSendDone(e->ep.vi, &d);
            if (rc != VIP_SUCCESS)
                bu_die("the CQ has a %s completion but %s says %s: %s",
                       recvq ? "receive" : "send", recvq ? "VipRecvDone" : "VipSendDone",
                       vip_strerror(rc), vip_last_error());
            if (recvq) {
                if (take_ctl_one(e, d, credits, n))
                    stop = bu_now_ns();
            } else {
                if (d != &e->data[done % e->depth])
                    bu_die("VipSendDone returned an unexpected descriptor (out of order)");
                bu_check_desc(d, "send");
                done++;
            }
            rc = VipCQDone(e->ep.cq, &vi, &recvq);
        }
        if (rc != VIP_NOT_DONE)
            bu_die("VipCQWait/VipCQDone failed: %s: %s", vip_strerror(rc), vip_last_error());
    }
    return (double)(stop - start) / 1e9;
}

static void print_header(const struct opts *o)
{
    char setup[256], depth[80];
    snprintf(setup, sizeof setup,
             "tx depth %u, rx depth %u, completions %s; seconds from the first send to the "
             "receiver's ack of the last",
             o->tx_depth, o->rx_depth,
             bu_completions(&o->c, "by polling (VipSendDone/VipRecvDone)",
                            "by events (sender VipCQWait, receiver VipRecvWait)"));
    snprintf(depth, sizeof depth,
             "TX depth        : %u   RX depth : %u (credit-based flow control)", o->tx_depth,
             o->rx_depth);
    const char *about[] = {
        depth,
        bu_completions(&o->c,
                       "Completions     : polling: VipSendDone/VipRecvDone (receiver never "
                       "sleeps)",
                       "Completions     : events: sender blocks in VipCQWait, receiver in "
                       "VipRecvWait"),
        NULL};
    bu_bw_header(&o->c, "streaming bandwidth", setup, "VIA Send Bandwidth Test", about);
}

static void client(const struct opts *o)
{
    struct end e = {0};
    end_setup(&e, o, false);
    uint64_t credits = o->rx_depth;
    size_t slot = e.max ? e.max : 1;
    print_header(o);
    for (size_t k = 0; k < o->c.nsizes; k++) {
        uint32_t size = o->c.sizes[k];
        for (uint32_t i = 0; i < e.depth; i++) {
            uint8_t *p = e.buf + (i % e.bufs) * slot;
            bu_desc_init(&e.data[i], p, e.bmh, size);
            if (size)
                p[0] = p[size - 1] = mark_of(i % e.bufs);
        }
        uint64_t warm = bu_bw_warmup(&o->c, size), n = bu_bw_iters(&o->c, size);
        double (*round)(struct end *, uint64_t *, uint32_t, uint64_t) =
            o->c.events ? send_round_events : send_round;
        if (warm)
            round(&e, &credits, size, warm);
        bu_bw_row(&o->c, size, n, round(&e, &credits, size, n));
    }
    bu_client_end(&o->c, BU_BW_RULE, &e.ep, &e.data[0], e.dmh);
}

static void usage(FILE *f)
{
    bu_usage(f, &(struct bu_usage){
        .about = "  Streaming bandwidth of VIA send/receive. Forks the receiver (server); the\n"
                 "  sender is this process on NIC via0.\n",
        .size = "default 65536",
        .unit = "messages", .bw = true,
        .peer = "receiver's",
        .events = "block for completions (sender: VipCQWait on a CQ of\n"
                  "                          both queues; receiver: VipRecvWait/VipSendWait)\n"
                  "                          instead of polling VipSendDone/VipRecvDone (the\n"
                  "                          default)",
        .own = "  -t, --tx-depth N        sends in flight (default 64)\n"
               "  -r, --rx-depth N        receives kept posted by the receiver (default 128)\n"
               "  -b, --buffers N         data buffers per side (default: one per descriptor);\n"
               "                          -b 1 sends every message from one buffer and\n"
               "                          receives every one into one, as ucx_perftest and\n"
               "                          fi_pingpong do (the data stays in the cache)\n"});
}

static bool own_opt(int c, const char *arg, void *ctx)
{
    struct opts *o = ctx;
    switch (c) {
    case 't': o->tx_depth = (uint32_t)bu_parse_count(arg, "-t", 1, 992); return true;
    case 'r': o->rx_depth = (uint32_t)bu_parse_count(arg, "-r", 1, 992); return true;
    case 'b': o->bufs = (uint32_t)bu_parse_count(arg, "-b", 1, 992); return true;
    default: return false;
    }
}

int main(int argc, char **argv)
{
    bu_prog = "vip_send_bw";
    struct opts o = {.tx_depth = 64, .rx_depth = 128};
    static const struct option lo[] = {{"tx-depth", required_argument, NULL, 't'},
                                       {"rx-depth", required_argument, NULL, 'r'},
                                       {"buffers", required_argument, NULL, 'b'},
                                       {NULL, 0, NULL, 0}};
    bu_parse_args(&o.c,
                  &(struct bu_args){.size = 65536, .min_size = 0, .max_iters = 4000000000u,
                                    .shortopts = "t:r:b:", .longopts = lo, .own = own_opt,
                                    .ctx = &o, .usage = usage, .disc_tag = DISC_TAG},
                  argc, argv);
    bu_fork_server(server, &o);
    client(&o);
    bu_wait_server();
    return 0;
}

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
 * With --active N each process connects N VIs and the ping-pong goes round
 * them: iteration i uses VI i mod N, so every VI of both NICs carries
 * traffic (--vis only adds idle ones). One message is in flight at a time,
 * so all VIs share the send descriptor and the receive buffers; each keeps
 * its own RQ_DEPTH receives posted.
 *
 * Completions are polled (VipRecvDone/VipSendDone, never sleeping), as
 * perftest polls by default; with -e (events, as perftest's -e) both ends
 * block in VipRecvWait/VipSendWait instead, which poll briefly and then
 * sleep until the NIC wakes them.
 *
 * With --imm every message also carries its iteration number as immediate
 * data (VIP_CONTROL_IMMEDIATE), as message-passing libraries of the VIA era
 * put a sequence number in every message's; the receiver checks it.
 *
 * Every message carries its iteration number in its first and last byte;
 * both ends check it, the length and the descriptor status of everything
 * they complete, and stop with a message on the first mismatch.
 */
#include "bench_util.h"

#define RQ_DEPTH 4u      /* receives kept posted on each side */
#define DISC_TAG 0x4c41u /* "LA" */


struct opts {
    struct bu_opts c;
    size_t active; /* --active: connected VIs per process, used in turn */
    bool reg_per_msg; /* --reg-per-msg: register each send's buffer around it */
    bool imm;         /* --imm: each message carries its sequence number as immediate data */
};

/* One end: `nvi` connected VIs (the first is ep.vi), RQ_DEPTH receives of
 * the largest size on each, and one send descriptor and buffer. */
struct end {
    struct bu_ep ep;
    size_t nvi;
    VIP_VI_HANDLE *vis;            /* vis[0] == ep.vi */
    uint64_t *rhead;               /* per VI: receives completed so far */
    VIP_DESCRIPTOR *sdesc, *rdesc; /* rdesc[nvi * RQ_DEPTH] */
    uint8_t *sbuf, *rbuf;          /* rbuf: RQ_DEPTH slots of max bytes, shared by the VIs */
    VIP_MEM_HANDLE dmh, smh, rmh;
    uint32_t max;
    bool events; /* wait (-e) or poll for completions */
    /* --reg-per-msg: the send buffer is a user buffer, registered before
     * each send and deregistered when it completed, as message-passing
     * libraries of the VIA era did (smh_now: this send's handle). */
    bool reg_per_msg;
    VIP_MEM_HANDLE smh_now;
    /* --imm: every message carries its sequence number in the immediate
     * data, as message-passing libraries of the era did; checked on
     * arrival. */
    bool imm;
};

/* VI k's discriminator: the program's, with k in the top bits. */
static uint64_t vi_disc(const struct opts *o, size_t k)
{
    return o->c.disc ^ (uint64_t)k << 48;
}

static void end_setup(struct end *e, const struct opts *op, bool server)
{
    const struct bu_opts *o = &op->c;
    bu_open(&e->ep, server ? o->server_dev : o->client_dev, o->rel);
    e->events = o->events;
    e->reg_per_msg = op->reg_per_msg;
    e->imm = op->imm;
    e->nvi = op->active;
    e->max = o->sizes[o->nsizes - 1];
    if (e->max > e->ep.attrs.MaxTransferSize)
        bu_die("%u bytes exceed the MaxTransferSize of %s (%lu bytes)", e->max, e->ep.dev,
               (unsigned long)e->ep.attrs.MaxTransferSize);
    if (RQ_DEPTH > e->ep.attrs.MaxDescriptorsPerQueue)
        bu_die("NIC %s queues hold only %lu descriptors", e->ep.dev,
               (unsigned long)e->ep.attrs.MaxDescriptorsPerQueue);
    size_t slot = e->max ? e->max : 1;
    e->sdesc = bu_alloc(&e->ep, (e->nvi * RQ_DEPTH + 1) * sizeof(VIP_DESCRIPTOR), &e->dmh);
    e->rdesc = e->sdesc + 1;
    e->sbuf = bu_alloc(&e->ep, slot, &e->smh);
    e->rbuf = bu_alloc(&e->ep, RQ_DEPTH * slot, &e->rmh);
    e->vis = calloc(e->nvi, sizeof *e->vis);
    e->rhead = calloc(e->nvi, sizeof *e->rhead);
    if (!e->vis || !e->rhead)
        bu_die("out of memory");
    bu_open_idle_vis(&e->ep, o->vis);
    for (size_t k = 0; k < e->nvi; k++) {
        e->ep.vi = e->vis[k] = bu_create_vi(&e->ep);
        /* Receives go up before the connection exists: nothing can arrive
         * without one. */
        for (unsigned i = 0; i < RQ_DEPTH; i++) {
            VIP_DESCRIPTOR *d = &e->rdesc[k * RQ_DEPTH + i];
            bu_desc_init(d, e->rbuf + i * slot, e->rmh, e->max);
            BU_CHECK(VipPostRecv(e->vis[k], d, e->dmh));
        }
        bu_connect(&e->ep, server, bu_peer_name(o), vi_disc(op, k));
    }
    e->ep.vi = e->vis[0];
}

/* Tear down the VIs beyond the first (bu_close does the first). The
 * server disconnects them once it has the bye; the client after its bye
 * went out, by which time they may be disconnected already. */
static void end_close_extra(struct end *e)
{
    for (size_t k = 1; k < e->nvi; k++) {
        VIP_RETURN rc = VipDisconnect(e->vis[k]);
        if (rc != VIP_SUCCESS && rc != VIP_INVALID_STATE)
            bu_die("VipDisconnect failed: %s: %s", vip_strerror(rc), vip_last_error());
        BU_CHECK(VipDestroyVi(e->vis[k]));
    }
    free(e->vis);
    free(e->rhead);
}

/* Wait for the next receive on VI k, check it carries message `seq` of
 * `size` bytes, and post it again. */
static void recv_one(struct end *e, size_t k, uint32_t size, uint64_t seq)
{
    VIP_DESCRIPTOR *d, *want = &e->rdesc[k * RQ_DEPTH + e->rhead[k] % RQ_DEPTH];
    VIP_RETURN rc = bu_next_desc(e->vis[k], true, e->events, BU_WAIT_MS, &d);
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
    if (e->imm &&
        (!(d->CS.Status & VIP_STATUS_IMMEDIATE) || d->CS.ImmediateData != (uint32_t)seq))
        bu_die("message %" PRIu64 ": immediate data %s%u, expected %u", seq,
               d->CS.Status & VIP_STATUS_IMMEDIATE ? "" : "absent, word ",
               (unsigned)d->CS.ImmediateData, (unsigned)(uint32_t)seq);
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
    BU_CHECK(VipPostRecv(e->vis[k], d, e->dmh));
    e->rhead[k]++;
}

static void post_send(struct end *e, size_t k, uint32_t size, uint64_t seq)
{
    if (size) {
        e->sbuf[0] = (uint8_t)seq;
        e->sbuf[size - 1] = (uint8_t)seq;
    }
    e->smh_now = e->smh;
    if (e->reg_per_msg) {
        VIP_MEM_ATTRIBUTES ma = {.Ptag = e->ep.ptag};
        BU_CHECK(VipRegisterMem(e->ep.nic, e->sbuf, size ? size : 1, &ma, &e->smh_now));
    }
    bu_desc_init(e->sdesc, e->sbuf, e->smh_now, size);
    if (e->imm) {
        e->sdesc->CS.Control |= VIP_CONTROL_IMMEDIATE;
        e->sdesc->CS.ImmediateData = (uint32_t)seq;
    }
    BU_CHECK(VipPostSend(e->vis[k], e->sdesc, e->dmh));
}

/* Reap the one send in flight, on VI k. */
static void reap_send(struct end *e, size_t k)
{
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = bu_next_desc(e->vis[k], false, e->events, BU_WAIT_MS, &d);
    if (rc == VIP_TIMEOUT)
        bu_die("a send did not complete in %u s", BU_WAIT_MS / 1000);
    if (rc != VIP_SUCCESS)
        bu_die("%s failed: %s: %s", bu_next_desc_call(false, e->events), vip_strerror(rc),
               vip_last_error());
    if (d != e->sdesc)
        bu_die("%s returned descriptor %p, expected %p", bu_next_desc_call(false, e->events),
               (void *)d, (void *)e->sdesc);
    bu_check_desc(d, "send");
    if (e->reg_per_msg)
        BU_CHECK(VipDeregisterMem(e->ep.nic, e->sbuf, e->smh_now));
}

static void server(void *arg)
{
    const struct opts *op = arg;
    const struct bu_opts *o = &op->c;
    struct end e = {0};
    end_setup(&e, op, true);
    for (size_t k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        uint64_t total = bu_lat_warmup(o, size) + bu_lat_iters(o, size);
        for (uint64_t i = 0; i < total; i++) {
            size_t v = (size_t)(i % e.nvi);
            recv_one(&e, v, size, i);
            post_send(&e, v, size, i);
            /* A large send may complete only on the client's answer, after
             * the client has its last message, said bye and gone: from the
             * last send on, a lost connection is the client leaving. */
            if (k + 1 == o->nsizes && i + 1 == total)
                e.ep.closing = 1;
            reap_send(&e, v);
        }
    }
    bu_bye_wait(&e.ep);
    end_close_extra(&e);
    bu_close(&e.ep);
}

static void client(const struct opts *op)
{
    const struct bu_opts *o = &op->c;
    struct bu_samples sm = bu_samples_new(o);
    struct end e = {0};
    end_setup(&e, op, false);
    const char *how = bu_completions(o, "by polling (VipRecvDone/VipSendDone)",
                                     "by events (VipRecvWait/VipSendWait)");
    char setup[200], vis[96];
    snprintf(setup, sizeof setup,
             "%zu active VIs (used in turn) and %zu idle VIs per process, completions %s",
             e.nvi, o->vis, how);
    snprintf(vis, sizeof vis, "VIs             : %zu active (used in turn), %zu idle, per process",
             e.nvi, o->vis);
    const char *about[] = {
        vis,
        bu_completions(o,
                       "Completions     : polling: VipRecvDone/VipSendDone until done (never "
                       "sleep)",
                       "Completions     : events: block in VipRecvWait/VipSendWait (poll <= 100 "
                       "us, then sleep)"),
        "Method          : ping-pong, one-way latency = RTT/2, in microseconds (usec)", NULL};
    bu_lat_header(o, "one-way latency (RTT/2) in microseconds", setup,
                  "VIA Send Latency Test", about);
    for (size_t k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        uint64_t warm = bu_lat_warmup(o, size), n = bu_lat_iters(o, size);
        for (uint64_t i = 0; i < warm + n; i++) {
            size_t v = (size_t)(i % e.nvi);
            sm.t[i] = bu_now_ns();
            post_send(&e, v, size, i);
            /* A message larger than the link's ring is still partly to go
             * here: waiting for the reply must move it on (VipRecvDone and
             * VipRecvWait progress the VI's send queue too). */
            recv_one(&e, v, size, i);
            reap_send(&e, v);
        }
        sm.t[warm + n] = bu_now_ns();
        bu_lat_report(o, &sm, size, warm, n, 2);
    }
    if (!o->csv)
        printf("%s\n", BU_LAT_RULE);
    bu_bye_send(&e.ep, e.sdesc, e.dmh);
    end_close_extra(&e);
    bu_close(&e.ep);
    bu_samples_free(&sm);
}

static void usage(FILE *f)
{
    bu_usage(f, &(struct bu_usage){
        .about = "  One-way latency (RTT/2 of a ping-pong) of VIA send/receive. Forks the server\n"
                 "  (reflector); the client is this process on NIC via0.\n",
        .size = "default 4",
        .unit = "iterations",
        .peer = "server's", .vis = true,
        .own = "      --active N          connect N VIs in each process and go round them,\n"
               "                          one ping-pong each in turn (default 1)\n"
               "      --reg-per-msg       register each send's buffer before the send and\n"
               "                          deregister it after (a user buffer, as message-\n"
               "                          passing libraries of the VIA era did)\n"
               "      --imm               each message carries its sequence number as\n"
               "                          immediate data (checked on arrival), as message-\n"
               "                          passing libraries of the VIA era did\n",
        .events = "wait for completions in VipRecvWait/VipSendWait (they\n"
                  "                          poll briefly, then sleep) instead of polling\n"
                  "                          VipRecvDone/VipSendDone (the default)"});
}

static bool own_opt(int c, const char *arg, void *ctx)
{
    struct opts *o = ctx;
    if (c == 0x1a0) {
        o->reg_per_msg = true;
        return true;
    }
    if (c == 0x1a1) {
        o->imm = true;
        return true;
    }
    if (c != 'A')
        return false;
    o->active = (size_t)bu_parse_count(arg, "--active", 1, 2000);
    return true;
}

int main(int argc, char **argv)
{
    bu_prog = "vip_send_lat";
    struct opts o = {.active = 1};
    static const struct option lo[] = {{"active", required_argument, NULL, 'A'},
                                       {"reg-per-msg", no_argument, NULL, 0x1a0},
                                       {"imm", no_argument, NULL, 0x1a1},
                                       {NULL, 0, NULL, 0}};
    bu_parse_args(&o.c,
                  &(struct bu_args){.size = 4, .min_size = 0, .max_iters = 1000000000,
                                    .vis = true, .shortopts = "", .longopts = lo,
                                    .own = own_opt, .ctx = &o, .usage = usage,
                                    .disc_tag = DISC_TAG},
                  argc, argv);
    bu_fork_server(server, &o);
    client(&o);
    bu_wait_server();
    return 0;
}

/*
 * vip_wake_lat - how long a VIA message takes to reach a receiver that is
 * asleep in VipRecvWait, and how long one takes to be delivered while its
 * sender computes. wake_util.h has the method and the report; os_wake_lat
 * measures the same over a pipe and over a UDP socket pair, for reference.
 *
 * The program forks the sender; the receiver is this process. Each opens
 * its NIC after the fork: the sender's VI on the NIC of -d (default via0)
 * waits for the connection (VipConnectWait/VipConnectAccept), the
 * receiver's VI on via0 requests it. Data goes from the sender to the
 * receiver, one message at a time into the receiver's one posted receive;
 * the receiver answers each with an 8-byte ack carrying the message's
 * number into the sender's one posted receive. At the end the sender sends
 * the empty bye and the receiver disconnects only once it has it (VIA
 * flushes a VI's queues when its peer disconnects). Every completed
 * descriptor's status and length are checked, and so are the number and
 * last byte of every message.
 *
 * The receiver waits in VipRecvWait, which polls for the library's spin
 * budget (adaptive, 5 to 100 us) and then sleeps on the session's futex;
 * the sender's pause (1500 us by default) is far longer, so every wait of
 * the wake test sleeps (the slept column shows it). In the compute test the
 * receiver waits the same way (or polls with VipRecvDone, --compute-rx
 * poll), and the sender's first VIPL call after posting is the VipSendWait
 * that reaps the send once its computation is over: whatever the NIC has not
 * moved by then waits for that call.
 */
#include <getopt.h>

#include "wake_util.h"

#define DISC_TAG 0x574bu /* "WK" */
#define ACK_LEN 8u

struct opts {
    struct wk_opts wk;
    const char *server_dev, *client_dev; /* sender's, receiver's */
    VIP_RELIABILITY_LEVEL rel;
    uint64_t disc;
};

/* One end: a connected VI, one send and one receive descriptor, and a
 * buffer for each (one message is in flight at a time, each way). */
struct end {
    struct bu_ep ep;
    VIP_DESCRIPTOR *sdesc, *rdesc;
    uint8_t *sbuf, *rbuf;
    VIP_MEM_HANDLE dmh, smh, rmh;
    VIP_DESCRIPTOR *got; /* the message recv() returned, until release() */
};

static void end_setup(struct end *e, const struct opts *o, bool sender)
{
    bu_open(&e->ep, sender ? o->server_dev : o->client_dev, o->rel);
    uint32_t size = o->wk.size;
    if (size > e->ep.attrs.MaxTransferSize)
        bu_die("%u bytes exceed the MaxTransferSize of %s (%lu bytes)", size, e->ep.dev,
               (unsigned long)e->ep.attrs.MaxTransferSize);
    uint32_t sslot = sender ? size : ACK_LEN, rslot = sender ? ACK_LEN : size;
    e->sdesc = bu_alloc(&e->ep, 2 * sizeof(VIP_DESCRIPTOR), &e->dmh);
    e->rdesc = e->sdesc + 1;
    e->sbuf = bu_alloc(&e->ep, sslot, &e->smh);
    e->rbuf = bu_alloc(&e->ep, rslot, &e->rmh);
    e->ep.vi = bu_create_vi(&e->ep);
    /* The receive goes up before the connection exists. */
    bu_desc_init(e->rdesc, e->rbuf, e->rmh, rslot);
    BU_CHECK(VipPostRecv(e->ep.vi, e->rdesc, e->dmh));
    const char *peer = strcmp(o->server_dev, o->client_dev) == 0 ? "localhost" : o->server_dev;
    bu_connect(&e->ep, sender, peer, o->disc);
}

/* The next receive, checked to hold len bytes; NULL on timeout. */
static VIP_DESCRIPTOR *next_recv(struct end *e, uint32_t len, bool poll, uint64_t timeout_ms)
{
    VIP_DESCRIPTOR *d, *want = e->rdesc;
    VIP_RETURN rc = bu_next_desc(e->ep.vi, true, !poll, (VIP_ULONG)timeout_ms, &d);
    if (rc == VIP_TIMEOUT)
        return NULL;
    if (rc != VIP_SUCCESS)
        bu_die("%s failed: %s: %s", bu_next_desc_call(true, !poll), vip_strerror(rc),
               vip_last_error());
    if (d != want)
        bu_die("%s returned descriptor %p, expected %p (completions out of order)",
               bu_next_desc_call(true, !poll), (void *)d, (void *)want);
    bu_check_desc(d, "receive");
    if (d->CS.Length != len)
        bu_die("received %u bytes, expected %u", (unsigned)d->CS.Length, len);
    return d;
}

static void repost(struct end *e, VIP_DESCRIPTOR *d)
{
    BU_CHECK(VipPostRecv(e->ep.vi, d, e->dmh));
}

/* Post the send descriptor over sbuf[0..len) and, if `reap`, wait for it. */
static void send_now(struct end *e, uint32_t len, bool reap)
{
    bu_desc_init(e->sdesc, e->sbuf, e->smh, len);
    BU_CHECK(VipPostSend(e->ep.vi, e->sdesc, e->dmh));
    if (!reap)
        return;
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = VipSendWait(e->ep.vi, BU_WAIT_MS, &d);
    if (rc != VIP_SUCCESS)
        bu_die("VipSendWait failed: %s: %s", vip_strerror(rc), vip_last_error());
    if (d != e->sdesc)
        bu_die("VipSendWait returned descriptor %p, expected %p", (void *)d, (void *)e->sdesc);
    bu_check_desc(d, "send");
}

/* ---- the transport for wake_util.h -------------------------------------------------------- */

static uint8_t *via_buf(void *c)
{
    return ((struct end *)c)->sbuf;
}

static void via_post(void *c, uint32_t len)
{
    send_now(c, len, false);
}

/* The sender's first VIPL call after posting (and, in the compute test,
 * after computing): reap the send. */
static void via_complete(void *c)
{
    struct end *e = c;
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = VipSendWait(e->ep.vi, BU_WAIT_MS, &d);
    if (rc == VIP_TIMEOUT)
        bu_die("a send did not complete in %u s", BU_WAIT_MS / 1000);
    if (rc != VIP_SUCCESS)
        bu_die("VipSendWait failed: %s: %s", vip_strerror(rc), vip_last_error());
    if (d != e->sdesc)
        bu_die("VipSendWait returned descriptor %p, expected %p", (void *)d, (void *)e->sdesc);
    bu_check_desc(d, "send");
}

static void via_wait_ack(void *c, uint64_t seq)
{
    struct end *e = c;
    VIP_DESCRIPTOR *d = next_recv(e, ACK_LEN, false, BU_WAIT_MS);
    if (!d)
        bu_die("no ack of message %#" PRIx64 " in %u s", seq, BU_WAIT_MS / 1000);
    uint64_t got;
    memcpy(&got, d->DS[0].Local.Data.Address, sizeof got);
    if (got != seq)
        bu_die("ack of message %#" PRIx64 ", expected %#" PRIx64, got, seq);
    repost(e, d);
}

static const uint8_t *via_recv(void *c, uint32_t len, bool poll, uint64_t timeout_ms)
{
    struct end *e = c;
    e->got = next_recv(e, len, poll, timeout_ms);
    return e->got ? e->got->DS[0].Local.Data.Address : NULL;
}

static void via_release(void *c)
{
    struct end *e = c;
    repost(e, e->got);
    e->got = NULL;
}

static void via_ack(void *c, uint64_t seq)
{
    struct end *e = c;
    memcpy(e->sbuf, &seq, sizeof seq);
    send_now(e, ACK_LEN, true);
}

static struct wk_transport via_transport(struct end *e)
{
    return (struct wk_transport){
        .name = "via", .wait_call = "VipRecvWait", .poll_call = "VipRecvDone", .ctx = e,
        .buf = via_buf, .post = via_post, .complete = via_complete, .wait_ack = via_wait_ack,
        .recv = via_recv, .release = via_release, .ack = via_ack};
}

/* ---- the two processes ------------------------------------------------------------------- */

static void sender(void *arg)
{
    const struct opts *o = arg;
    bu_role = "sender";
    struct end e = {0};
    end_setup(&e, o, true);
    struct wk_transport tr = via_transport(&e);
    wk_sender(&o->wk, &tr);
    bu_bye_send(&e.ep, e.sdesc, e.dmh);
    bu_close(&e.ep);
}

static void receiver(const struct opts *o)
{
    bu_role = "receiver";
    struct end e = {0};
    end_setup(&e, o, false);
    struct wk_transport tr = via_transport(&e);
    snprintf(tr.what, sizeof tr.what,
             "VIA send/receive, sender on NIC %s, receiver on %s, %s, profile %s", o->server_dev,
             o->client_dev, bu_reliability_name(o->rel), VipExtProfileName(e.ep.nic));
    wk_receiver(&o->wk, &tr, "vip_wake_lat");
    bu_bye_wait(&e.ep);
    bu_close(&e.ep);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vip_wake_lat [options]\n"
            "  One-way time from a sender's VipPostSend to the receiver's return from\n"
            "  VipRecvWait when the receiver was asleep (wake test), and to the receiver\n"
            "  getting the message while the sender computes after posting (compute test).\n"
            "  Forks the sender; the receiver is this process on NIC via0. Microseconds.\n");
    wk_usage_common(f);
    fprintf(f,
            "  -d, --dev NIC           the sender's NIC (default via0; via1 crosses the switch)\n"
            "      --reliability L     unreliable | delivery (default) | reception\n"
            "  Environment: VIPD_SOCKET (vipd's socket), VIPD_AUTOSTART=0 (do not start vipd).\n"
            "  References measured the same way: os_wake_lat -t pipe | udp.\n");
}

int main(int argc, char **argv)
{
    bu_prog = "vip_wake_lat";
    struct opts o = {.server_dev = "via0", .client_dev = "via0",
                     .rel = VIP_SERVICE_RELIABLE_DELIVERY};
    wk_defaults(&o.wk);
    static const struct option lo[] = {WK_LONGOPTS,
                                       {"dev", required_argument, NULL, 'd'},
                                       {"reliability", required_argument, NULL, 'R'},
                                       {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, WK_SHORTOPTS "d:", lo, NULL)) != -1) {
        if (wk_parse_common(&o.wk, c, optarg))
            continue;
        switch (c) {
        case 'd': o.server_dev = optarg; break;
        case 'R': o.rel = bu_parse_reliability(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "vip_wake_lat: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    o.disc = bu_discriminator(DISC_TAG);

    bu_fork_server(sender, &o);
    receiver(&o);
    bu_wait_server();
    return 0;
}

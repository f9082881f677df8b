/*
 * vip_self - both ends of one connection in one thread: what the VIA
 * pipeline of a small message costs in software alone, with no second core,
 * no cache line crossing and no waiting.
 *
 * Two VIs of one NIC are joined peer to peer (VipConnectPeerRequest on each,
 * in this thread). Each step is run to its end before the next, so the work
 * is the same in every run: the instructions and stores of a message are a
 * property of the code (bench/instr_count.sh counts them under valgrind),
 * and the time per message is the library's and the NIC's software at this
 * core's speed.
 *
 *   -m stream    (default) post a window of sends on A (-w, 16), reap them,
 *                then take the window's messages on B, each receive posted
 *                again at once: vip_send_bw's pattern.
 *   -m pingpong  A sends, B takes it, posts its receive again, answers and
 *                reaps its send; A takes the answer, posts its receive again
 *                and reaps its send: vip_send_lat's pattern, both sides.
 *
 * Every completion is checked: its descriptor (in order), status, length,
 * and the first and last byte of the message.
 *
 * Output: mode, size, count (messages, or round trips), and nanoseconds per
 * message (stream) or per round trip (pingpong).
 */
#include <getopt.h>

#include "bench_util.h"

#define RQ 64u     /* receives posted on B (stream) */
#define WMAX 64u   /* the largest window */
#define SLOT 4096u /* bytes of buffer per descriptor */

struct self {
    struct bu_ep ep;
    VIP_VI_HANDLE vi[2]; /* A sends, B receives (and answers, ping-pong) */
    VIP_MEM_HANDLE mh;
    VIP_DESCRIPTOR *sd[2], *rd[2]; /* per VI: send and receive descriptors */
    uint8_t *sbuf[2], *rbuf[2];
    uint64_t rhead[2];           /* receives completed, per VI */
    unsigned nrecv[2];           /* receives each VI keeps posted */
};

static void connect_self(struct self *s)
{
    for (int k = 0; k < 2; k++) {
        VIP_NET_ADDRESS *l = bu_addr_new(&s->ep), *r = bu_addr_new(&s->ep);
        l->HostAddressLen = r->HostAddressLen = s->ep.attrs.NicAddressLen;
        memcpy(l->HostAddress, s->ep.attrs.LocalNicAddress, s->ep.attrs.NicAddressLen);
        memcpy(r->HostAddress, s->ep.attrs.LocalNicAddress, s->ep.attrs.NicAddressLen);
        uint64_t disc = ((uint64_t)getpid() << 8) | 0x5e00u;
        bu_addr_set_disc(l, disc + (uint64_t)k);
        bu_addr_set_disc(r, disc + (uint64_t)(1 - k));
        BU_CHECK(VipConnectPeerRequest(s->vi[k], l, r, BU_WAIT_MS));
        free(l);
        free(r);
    }
    VIP_VI_ATTRIBUTES ra;
    for (int k = 0; k < 2; k++)
        BU_CHECK(VipConnectPeerWait(s->vi[k], &ra));
}

static void setup(struct self *s, const char *dev, uint32_t size, bool pingpong)
{
    bu_open(&s->ep, dev, VIP_SERVICE_RELIABLE_DELIVERY);
    s->vi[0] = bu_create_vi(&s->ep);
    s->vi[1] = bu_create_vi(&s->ep);
    /* per VI: WMAX send and RQ receive descriptors, then a slot for each */
    size_t ndesc = WMAX + RQ, desc_bytes = 2 * ndesc * sizeof(VIP_DESCRIPTOR);
    uint8_t *mem = bu_alloc(&s->ep, desc_bytes + 2 * ndesc * SLOT, &s->mh);
    for (int k = 0; k < 2; k++) {
        s->sd[k] = (VIP_DESCRIPTOR *)(void *)(mem + (size_t)k * ndesc * sizeof(VIP_DESCRIPTOR));
        s->rd[k] = s->sd[k] + WMAX;
        s->sbuf[k] = mem + desc_bytes + (size_t)k * ndesc * SLOT;
        s->rbuf[k] = s->sbuf[k] + (size_t)WMAX * SLOT;
        s->nrecv[k] = k == 1 || pingpong ? RQ : 0;
        for (unsigned j = 0; j < s->nrecv[k]; j++) {
            bu_desc_init(&s->rd[k][j], s->rbuf[k] + (size_t)j * SLOT, s->mh, size);
            BU_CHECK(VipPostRecv(s->vi[k], &s->rd[k][j], s->mh));
        }
    }
    connect_self(s);
}

static uint8_t mark(uint64_t i)
{
    return (uint8_t)(i * 37u + 1u);
}

/* A send of `size` bytes carrying message i's mark, in send slot j of VI k. */
static void send_msg(struct self *s, int k, unsigned j, uint32_t size, uint64_t i)
{
    uint8_t *p = s->sbuf[k] + (size_t)j * SLOT;
    if (size) {
        p[0] = mark(i);
        p[size - 1] = mark(i);
    }
    bu_desc_init(&s->sd[k][j], p, s->mh, size);
    BU_CHECK(VipPostSend(s->vi[k], &s->sd[k][j], s->mh));
}

static void reap_send(struct self *s, int k, unsigned j)
{
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc;
    while ((rc = VipSendDone(s->vi[k], &d)) == VIP_NOT_DONE)
        ;
    if (rc != VIP_SUCCESS)
        bu_die("VipSendDone failed: %s: %s", vip_strerror(rc), vip_last_error());
    if (d != &s->sd[k][j])
        bu_die("VipSendDone returned an unexpected descriptor (out of order)");
    bu_check_desc(d, "send");
}

/* Take message i on VI k (its receives complete in order) and post the
 * receive again. */
static void recv_msg(struct self *s, int k, uint32_t size, uint64_t i)
{
    VIP_DESCRIPTOR *d, *want = &s->rd[k][s->rhead[k] % s->nrecv[k]];
    VIP_RETURN rc;
    while ((rc = VipRecvDone(s->vi[k], &d)) == VIP_NOT_DONE)
        ;
    if (rc != VIP_SUCCESS)
        bu_die("VipRecvDone failed: %s: %s", vip_strerror(rc), vip_last_error());
    if (d != want)
        bu_die("VipRecvDone returned an unexpected descriptor (out of order)");
    bu_check_desc(d, "receive");
    if (d->CS.Length != size)
        bu_die("message %" PRIu64 ": %u bytes received, %u sent", i, (unsigned)d->CS.Length,
               size);
    const uint8_t *p = d->DS[0].Local.Data.Address;
    if (size && (p[0] != mark(i) || p[size - 1] != mark(i)))
        bu_die("message %" PRIu64 " carries %u/%u, expected %u", i, p[0], p[size - 1], mark(i));
    s->rhead[k]++;
    BU_CHECK(VipPostRecv(s->vi[k], d, s->mh));
}

static void stream(struct self *s, uint32_t size, unsigned w, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += w) {
        unsigned m = n - i < w ? (unsigned)(n - i) : w;
        for (unsigned j = 0; j < m; j++)
            send_msg(s, 0, j, size, i + j);
        for (unsigned j = 0; j < m; j++)
            reap_send(s, 0, j);
        for (unsigned j = 0; j < m; j++)
            recv_msg(s, 1, size, i + j);
    }
}

static void pingpong(struct self *s, uint32_t size, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        send_msg(s, 0, 0, size, i);
        recv_msg(s, 1, size, i);
        send_msg(s, 1, 0, size, i);
        reap_send(s, 1, 0);
        recv_msg(s, 0, size, i);
        reap_send(s, 0, 0);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vip_self [-m stream|pingpong] [-s bytes] [-n count] [-w window] [-d nic]\n"
               "  both ends of one connection in this thread; prints nanoseconds per message\n"
               "  (stream, a window of -w sends, default 16) or per round trip (pingpong)\n");
}

int main(int argc, char **argv)
{
    bu_prog = "vip_self";
    const char *dev = "via0";
    bool pp = false;
    uint32_t size = 8;
    unsigned w = 16;
    uint64_t n = 100000;
    int c;
    while ((c = getopt(argc, argv, "m:s:n:w:d:h")) != -1) {
        switch (c) {
        case 'm':
            if (strcmp(optarg, "stream") && strcmp(optarg, "pingpong"))
                bu_die("-m: stream or pingpong, not \"%s\"", optarg);
            pp = !strcmp(optarg, "pingpong");
            break;
        case 's': {
            uint64_t v = bu_parse_size(optarg, "-s");
            if (v > SLOT)
                bu_die("-s: at most %u bytes", SLOT);
            size = (uint32_t)v;
            break;
        }
        case 'n':
            n = bu_parse_count(optarg, "-n", 1, UINT32_MAX);
            break;
        case 'w':
            w = (unsigned)bu_parse_count(optarg, "-w", 1, WMAX);
            break;
        case 'd':
            dev = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    struct self s = {0};
    setup(&s, dev, size, pp);
    uint64_t t0 = bu_now_ns();
    if (pp)
        pingpong(&s, size, n);
    else
        stream(&s, size, w, n);
    double ns = (double)(bu_now_ns() - t0) / (double)n;
    printf("%s,%u,%" PRIu64 ",%.1f\n", pp ? "pingpong" : "stream", size, n, ns);
    s.ep.closing = 1; /* each end sees the other leave */
    BU_CHECK(VipDisconnect(s.vi[1]));
    BU_CHECK(VipDestroyVi(s.vi[1]));
    s.ep.vi = s.vi[0];
    bu_close(&s.ep);
    return 0;
}

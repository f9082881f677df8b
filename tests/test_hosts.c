/*
 * test_hosts.c - VIPL programs across emulated hosts: two and three vipds
 * on 127.0.0.1 (different ports, each --listen with one hosts file), their
 * NICs joined by the UDP link.
 *
 *   name service: VipNSGetHostByName / ByAddr on the hosts file's names
 *   client-server connect across hosts; a refusal (no wait: VIP_NO_MATCH;
 *   a host whose vipd is not there: VIP_NOT_REACHABLE)
 *   verified ping-pong (small, 1 MiB) at each reliability level
 *   three hosts: two clients on two hosts, one server host
 *   one way for longer than the link's timeout (nothing comes back: on a
 *   reliable-delivery VI no answer is owed, so the link must not give up)
 *   a receiver asleep in VipRecvWait for a peer that sends after 2 s: the
 *   message wakes it, and the sleep costs next to no CPU (a watch that
 *   woke its process in a loop would cost the whole 2 s)
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/thosts.h"
#include "lib/tlib.h"
#include "lib/tpp.h"

/* ---- one side of a ping-pong, in a child, on host `host` ----------------------------- */

struct side {
    struct tpp_cfg c;
    const struct thosts *h;
    unsigned host;
    int server;
};

static int side_child(void *arg)
{
    struct side *s = arg;
    thosts_use(s->h, s->host);
    char err[512];
    if (tpp_side(&s->c, s->server, err, sizeof err))
        tl_child_fail(__FILE__, __LINE__, "%s on host%u: %s", s->server ? "server" : "client",
                      s->host, err);
    return 0;
}

/* A ping-pong of cfg between a server on host srv and a client on host cli. */
static void pp_across(const struct thosts *h, struct tpp_cfg *c, unsigned srv, unsigned cli)
{
    snprintf(c->srv_host, sizeof c->srv_host, "host%u", srv);
    struct side s = {*c, h, srv, 1}, k = {*c, h, cli, 0};
    struct tl_child cs, cc;
    if (tl_spawn(&cs, side_child, &s) != 0) {
        CU_FAIL("fork");
        return;
    }
    if (tl_spawn(&cc, side_child, &k) != 0) {
        CU_FAIL("fork");
        tl_child_kill(&cs);
        return;
    }
    TCHILD_OK(&cc, 120000);
    TCHILD_OK(&cs, 120000);
}

static void pp_two_hosts(VIP_RELIABILITY_LEVEL rel, unsigned n, enum tpp_kind kind)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    struct tpp_cfg c;
    tpp_defaults(&c, rel, n, kind);
    pp_across(&h, &c, 1, 0);
    thosts_stop(&h);
}

static void test_pingpong_small_reliable_delivery(void)
{
    pp_two_hosts(VIP_SERVICE_RELIABLE_DELIVERY, 2000, TPP_SMALL);
}

static void test_pingpong_small_reliable_reception(void)
{
    pp_two_hosts(VIP_SERVICE_RELIABLE_RECEPTION, 1000, TPP_SMALL);
}

static void test_pingpong_small_unreliable(void)
{
    pp_two_hosts(VIP_SERVICE_UNRELIABLE, 1000, TPP_SMALL);
}

static void test_stream_1mib_reliable_delivery(void)
{
    pp_two_hosts(VIP_SERVICE_RELIABLE_DELIVERY, 30, TPP_LARGE);
}

static void test_three_hosts(void)
{
    struct thosts h;
    if (thosts_start(&h, 3, NULL) != 0) {
        CU_FAIL("could not start three vipds");
        return;
    }
    /* host0 and host1 each have a client of a server on host2, at once. */
    struct tpp_cfg a, b;
    tpp_defaults(&a, VIP_SERVICE_RELIABLE_DELIVERY, 500, TPP_MIXED);
    tpp_defaults(&b, VIP_SERVICE_RELIABLE_RECEPTION, 500, TPP_SMALL);
    snprintf(a.srv_host, sizeof a.srv_host, "host2");
    snprintf(b.srv_host, sizeof b.srv_host, "host2");
    struct side sa = {a, &h, 2, 1}, ca = {a, &h, 0, 0}, sb = {b, &h, 2, 1}, cb = {b, &h, 1, 0};
    struct tl_child ch[4];
    struct side *sides[4] = {&sa, &sb, &ca, &cb};
    unsigned started = 0;
    for (; started < 4; started++)
        if (tl_spawn(&ch[started], side_child, sides[started]) != 0)
            break;
    CU_ASSERT_EQUAL(started, 4);
    for (unsigned i = started; i-- > 0;)
        TCHILD_OK(&ch[i], 120000);
    thosts_stop(&h);
}

/* ---- name service and connection set-up, in the test process -------------------------- */

static void test_names_across_hosts(void)
{
    struct thosts h;
    struct tl_nic t = {0};
    thosts_host_words(0, "eth1=10.77.0.2");
    thosts_host_words(1, "eth0=10.77.1.1 eth1=10.77.1.2");
    if (thosts_start(&h, 2, NULL) != 0) {
        thosts_host_words(0, NULL);
        thosts_host_words(1, NULL);
        CU_FAIL("could not start two vipds");
        return;
    }
    thosts_use(&h, 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    {
        _Alignas(8) uint8_t buf1[sizeof(VIP_NET_ADDRESS) + 16], buf2[sizeof(VIP_NET_ADDRESS) + 16];
        VIP_NET_ADDRESS *own = (VIP_NET_ADDRESS *)buf1, *b = (VIP_NET_ADDRESS *)buf2;
        uint8_t ownh[6], bh[6];
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"localhost", own, 0), VIP_SUCCESS);
        memcpy(ownh, tl_host_bytes(own), 6);
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"host1", b, 0), VIP_SUCCESS);
        TCHK(b->HostAddressLen == 6);
        memcpy(bh, tl_host_bytes(b), 6);
        TCHK(memcmp(ownh, bh, 4) != 0); /* another host */
        TCHK(bh[4] == 0 && bh[5] == 0);  /* its via0 */
        /* host0 is this host: its name gives our own address. */
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"host0", b, 0), VIP_SUCCESS);
        TCHK(memcmp(tl_host_bytes(b), ownh, 6) == 0);
        /* HOST:DEV of another host */
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"host1:via1", b, 0), VIP_SUCCESS);
        TCHK(memcmp(tl_host_bytes(b), bh, 4) == 0 && tl_host_bytes(b)[5] == 1);
        VIP_CHAR name[128];
        VIP_ULONG nlen = sizeof name;
        TRC(VipNSGetHostByAddr(t.nic, b, name, &nlen), VIP_SUCCESS);
        TCHK(strcmp((char *)name, "host1:via1") == 0);
        memcpy(tl_host_bytes(b), bh, 6);
        nlen = sizeof name;
        TRC(VipNSGetHostByAddr(t.nic, b, name, &nlen), VIP_SUCCESS);
        TCHK(strcmp((char *)name, "host1") == 0);
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"host7", b, 0), VIP_ERROR_NAMESERVICE);
        /* Addresses the hosts file gives the hosts' interfaces (host1:
         * eth0, eth1; this host: eth1) name those NICs, as /dev/via_ethN
         * opens NIC N: the peer's second interface is its via1. */
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"10.77.1.2", b, 0), VIP_SUCCESS);
        TCHK(memcmp(tl_host_bytes(b), bh, 4) == 0 && tl_host_bytes(b)[5] == 1);
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"10.77.1.1", b, 0), VIP_SUCCESS);
        TCHK(memcmp(tl_host_bytes(b), bh, 6) == 0);
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"10.77.0.2", b, 0), VIP_SUCCESS);
        TCHK(memcmp(tl_host_bytes(b), ownh, 4) == 0 && tl_host_bytes(b)[5] == 1);
        TRC(VipNSGetHostByName(t.nic, (VIP_CHAR *)"10.77.9.9", b, 0), VIP_ERROR_NAMESERVICE);
    }
out:
    tl_close(&t);
    thosts_stop(&h);
    thosts_host_words(0, NULL);
    thosts_host_words(1, NULL);
}

static void test_refusals_across_hosts(void)
{
    struct thosts h;
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_NET_ADDRESS *local = NULL, *remote = NULL;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    thosts_use(&h, 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    local = tl_addr(t.nic, "localhost", "");
    remote = tl_addr(t.nic, "host1", "nobody-waits");
    TCHK(local && remote);
    VIP_VI_ATTRIBUTES ra;
    /* Nobody waits on host1: VIP_NO_MATCH, and the VI is IDLE again. */
    TRC(VipConnectRequest(vi, local, remote, 5000, &ra), VIP_NO_MATCH);
    /* host1's vipd goes: its NICs are not reachable. */
    tvipd_stop(&h.v[1]);
    thosts_use(&h, 0);
    TRC(VipConnectRequest(vi, local, remote, 5000, &ra), VIP_NOT_REACHABLE);
out:
    free(local);
    free(remote);
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
    thosts_stop(&h);
}

/* Send len bytes from d's slot (the payload at d + 128) and wait for the
 * send to complete: its status. */
static uint32_t k_send(VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d, uint32_t len, VIP_MEM_HANDLE mh)
{
    VIP_DESCRIPTOR *done;
    tl_desc_1(d, (uint8_t *)d + 128, len, mh);
    TC_RC(VipPostSend(vi, d, mh), VIP_SUCCESS);
    TC_RC(VipSendWait(vi, 20000, &done), VIP_SUCCESS);
    return done->CS.Status;
}

/* ---- a request's timeout against its accept ------------------------------------------ */

/* The requester's timeout and the acceptor's VipConnectAccept race across
 * two vipds. Round 0 settles it: the acceptor holds the request until the
 * requester's VipConnectRequest has returned VIP_TIMEOUT, then accepts,
 * which must fail (the request was withdrawn) rather than connect a VI
 * whose peer gave up (it broke at once: the AM-II job across hosts lost
 * its first messages so). Later rounds accept at delays around the
 * timeout: either order may win, and both sides must agree; a connection
 * both have carries a message. */
#define RACE_ROUNDS 12u
#define RACE_TIMEOUT_MS 20u

struct krace {
    const struct thosts *h;
    char disc[RACE_ROUNDS][17];
};

/* A race child's NIC on host `host` and a page for its descriptor and data. */
static void race_open(const struct krace *k, unsigned host, struct tl_nic *t, struct tl_buf *b)
{
    thosts_use(k->h, host);
    TC_RC(tl_open(t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(t, b, 4096), VIP_SUCCESS);
}

static int race_acceptor(void *arg)
{
    const struct krace *k = arg;
    struct tl_nic t;
    struct tl_buf b;
    race_open(k, 1, &t, &b);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 64);
    TC_CHECK(remote != NULL);
    for (unsigned i = 0; i < RACE_ROUNDS; i++) {
        VIP_VI_HANDLE vi;
        VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)b.p, *x;
        TC_RC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
        tl_desc_1(d, b.p + 128, 256, b.mh);
        TC_RC(VipPostRecv(vi, d, b.mh), VIP_SUCCESS);
        VIP_NET_ADDRESS *local = tl_addr(t.nic, "localhost", k->disc[i]);
        VIP_VI_ATTRIBUTES ra;
        VIP_CONN_HANDLE conn;
        TC_RC(VipConnectWait(t.nic, local, 20000, remote, &ra, &conn), VIP_SUCCESS);
        free(local);
        if (i == 0)
            TC_CHECK(tl_child_take(20000) == 'g'); /* the requester has its VIP_TIMEOUT */
        else
            usleep((i % 6) * RACE_TIMEOUT_MS * 500u); /* 0 to 2.5 timeouts */
        VIP_RETURN rc = VipConnectAccept(conn, vi);
        if (rc == VIP_SUCCESS) { /* the requester's message comes */
            TC_RC(VipRecvWait(vi, 20000, &x), VIP_SUCCESS);
            TC_CHECK(!(x->CS.Status & VIP_STATUS_ERROR_MASK));
        }
        tl_child_post(rc == VIP_SUCCESS ? 'a' : 'x');
        tl_vi_end(vi);
    }
    free(remote);
    tl_end(&t, NULL, &b);
    return 0;
}

static int race_requester(void *arg)
{
    const struct krace *k = arg;
    struct tl_nic t;
    struct tl_buf b;
    race_open(k, 0, &t, &b);
    VIP_NET_ADDRESS *local = tl_addr(t.nic, "localhost", "");
    TC_CHECK(local != NULL);
    for (unsigned i = 0; i < RACE_ROUNDS; i++) {
        VIP_VI_HANDLE vi;
        TC_RC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
        VIP_NET_ADDRESS *remote = tl_addr(t.nic, "host1", k->disc[i]);
        VIP_VI_ATTRIBUTES ra;
        VIP_RETURN rc;
        uint64_t end = tl_now_ms() + 20000;
        do /* VIP_NO_MATCH: the acceptor does not wait yet */
            rc = VipConnectRequest(vi, local, remote, i == 0 ? 5 * RACE_TIMEOUT_MS
                                                             : RACE_TIMEOUT_MS, &ra);
        while (rc == VIP_NO_MATCH && tl_now_ms() < end && usleep(1000) == 0);
        free(remote);
        tl_child_post(rc == VIP_SUCCESS ? 'c' : rc == VIP_TIMEOUT ? 't' : 'e');
        if (rc == VIP_SUCCESS) {
            TC_CHECK(!(k_send(vi, (VIP_DESCRIPTOR *)b.p, 8, b.mh) & VIP_STATUS_ERROR_MASK));
            TC_CHECK(tl_child_take(20000) == 'n'); /* the acceptor has it: ours may go */
        }
        tl_vi_end(vi);
    }
    free(local);
    tl_end(&t, NULL, &b);
    return 0;
}

static void test_request_timeout_against_accept(void)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    struct krace k = {.h = &h};
    for (unsigned i = 0; i < RACE_ROUNDS; i++)
        tl_discrim(k.disc[i], "race");
    struct tl_child a, r;
    bool a_up = tl_spawn(&a, race_acceptor, &k) == 0;
    bool r_up = a_up && tl_spawn(&r, race_requester, &k) == 0;
    CU_ASSERT(a_up && r_up);
    for (unsigned i = 0; r_up && i < RACE_ROUNDS; i++) {
        int req = tl_parent_take(&r, 30000);
        if (i == 0) {
            CU_ASSERT_EQUAL(req, 't');
            tl_parent_post(&a, 'g');
        }
        int acc = tl_parent_take(&a, 30000);
        if (i == 0)
            CU_ASSERT_EQUAL(acc, 'x'); /* withdrawn before the accept */
        CU_ASSERT(req == 'c' || req == 't');
        CU_ASSERT((req == 'c') == (acc == 'a')); /* never one side only */
        if (req == 'c' && acc == 'a')
            tl_parent_post(&r, 'n');
        if (req != 'c' && req != 't')
            break;
    }
    if (r_up)
        TCHILD_OK(&r, 30000);
    if (a_up)
        TCHILD_OK(&a, 30000);
    thosts_stop(&h);
}

/* ---- a host, or a peer, that goes away ------------------------------------------------- */

#define KSLOT 512u
struct kstream {
    const struct thosts *h;
    char disc[17];
    VIP_RELIABILITY_LEVEL rel;
};

static volatile int errors_seen;
static VIP_ERROR_CODE error_code;

static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    (void)ctx;
    error_code = e->ErrorCode;
    errors_seen++;
}

/* Post receives of 256 bytes in the buffer's slots [from, to). */
static VIP_RETURN post_slots(VIP_VI_HANDLE vi, const struct tl_buf *b, unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++) {
        VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(b->p + i * KSLOT);
        tl_desc_1(d, b->p + i * KSLOT + 128, 256, b->mh);
        VIP_RETURN rc = VipPostRecv(vi, d, b->mh);
        if (rc != VIP_SUCCESS)
            return rc;
    }
    return VIP_SUCCESS;
}

/* Receiver on host1: answers each message with a short reply (so the
 * sender never has more than two messages ahead of the receives it posts
 * again) until its connection ends or the parent kills it. */
static int k_receiver(void *arg)
{
    const struct kstream *k = arg;
    thosts_use(k->h, 1);
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &b, 20 * KSLOT), VIP_SUCCESS);
    TC_RC(tl_vi(&t, k->rel, NULL, NULL, &vi), VIP_SUCCESS);
    TC_RC(post_slots(vi, &b, 0, 16), VIP_SUCCESS);
    TC_RC(tl_accept(&t, vi, k->disc, 20000), VIP_SUCCESS);
    for (unsigned n = 0;; n++) {
        VIP_DESCRIPTOR *d, *s = (VIP_DESCRIPTOR *)(b.p + (16 + n % 4) * KSLOT), *x;
        if (VipRecvWait(vi, 60000, &d) != VIP_SUCCESS || (d->CS.Status & VIP_STATUS_ERROR_MASK))
            return 0;
        tl_desc_1(d, (uint8_t *)d + 128, 256, b.mh);
        VipPostRecv(vi, d, b.mh);
        tl_desc_1(s, (uint8_t *)s + 128, 4, b.mh);
        if (VipPostSend(vi, s, b.mh) != VIP_SUCCESS || VipSendWait(vi, 60000, &x) != VIP_SUCCESS)
            return 0;
    }
}

/* Sender on host0: sends 64-byte messages, each posted before the reply
 * to the one before is awaited; says 's' once they flow, then goes on
 * until a descriptor completes in error, checks that error, and says 't'
 * (a send completed with the transport error) or 'f' (flushed).
 * A reply not come within REPLY_WAIT_MS is left owed and the next message
 * goes: the peer's NIC may have taken (and answered) our last message
 * just before its process stopped, and a VI that waits only to receive
 * waits for nothing the transport could time out (a stopped peer is
 * noticed by the send that waits for its answer, fw_link_ofi.c). */
#define REPLY_WAIT_MS 1000
static int k_sender(void *arg)
{
    const struct kstream *k = arg;
    thosts_use(k->h, 0);
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(VipErrorCallback(t.nic, NULL, on_error), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &b, 12 * KSLOT), VIP_SUCCESS);
    TC_RC(tl_vi(&t, k->rel, NULL, NULL, &vi), VIP_SUCCESS);
    TC_RC(post_slots(vi, &b, 4, 12), VIP_SUCCESS);
    TC_RC(tl_request(&t, vi, "host1", k->disc, 20000), VIP_SUCCESS);
    uint64_t end = tl_now_ms() + 30000;
    uint32_t status = 0;
    for (unsigned n = 0; tl_now_ms() < end; n++) {
        VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(b.p + (n % 4) * KSLOT), *done;
        tl_desc_1(d, (uint8_t *)d + 128, 64, b.mh);
        if (VipPostSend(vi, d, b.mh) != VIP_SUCCESS)
            break; /* the VI is in error already */
        TC_RC(VipSendWait(vi, 20000, &done), VIP_SUCCESS);
        status = done->CS.Status;
        if (!(status & VIP_STATUS_ERROR_MASK) && n > 0) {
            /* the reply to the message before (or to one before it) */
            VIP_RETURN rc = VipRecvWait(vi, REPLY_WAIT_MS, &done);
            if (rc != VIP_TIMEOUT) {
                TC_RC(rc, VIP_SUCCESS);
                if (done->CS.Status & VIP_STATUS_ERROR_MASK)
                    status = done->CS.Status;
                tl_desc_1(done, (uint8_t *)done + 128, 256, b.mh);
                if (!(status & VIP_STATUS_ERROR_MASK))
                    VipPostRecv(vi, done, b.mh);
            }
        }
        if (n < 200 && (status & VIP_STATUS_ERROR_MASK))
            tl_child_fail(__FILE__, __LINE__, "message %u failed (%#x) before anything was "
                          "done to the peer", n, (unsigned)status);
        if (status & VIP_STATUS_ERROR_MASK)
            break;
        if (n == 200)
            tl_child_post('s');
    }
    TC_CHECK(status & (VIP_STATUS_TRANSPORT_ERROR | VIP_STATUS_DESC_FLUSHED_ERROR));
    VIP_VI_STATE st;
    VIP_VI_ATTRIBUTES va;
    VIP_BOOLEAN sq, rq;
    TC_RC(VipQueryVi(vi, &st, &va, &sq, &rq), VIP_SUCCESS);
    TC_CHECK(st == VIP_STATE_ERROR);
    /* the program's error callback heard of it */
    VIP_DESCRIPTOR *x;
    for (uint64_t e2 = tl_now_ms() + 5000; !errors_seen && tl_now_ms() < e2;)
        VipSendDone(vi, &x);
    TC_CHECK(errors_seen > 0 && error_code == VIP_ERROR_CONN_LOST);
    tl_child_post(status & VIP_STATUS_TRANSPORT_ERROR ? 't' : 'f');
    tl_end(&t, vi, &b);
    return 0;
}

/* ---- one way, longer than the link's timeout ------------------------------------------- */

/* VIP_NET_TIMEOUT_MS is 2 s under thosts: OW_MSGS one every OW_GAP_MS is
 * 3 s of a stream on which the receiver never sends. */
#define OW_MSGS 600u
#define OW_GAP_MS 5u

/* One end on host `host` (host1 accepts, host0 requests): a NIC, a buffer
 * of `slots` slots with receives posted in the first `nrecv`, a connected
 * VI. */
static VIP_VI_HANDLE k_end(const struct kstream *k, unsigned host, unsigned slots,
                           unsigned nrecv, struct tl_nic *t, struct tl_buf *b)
{
    VIP_VI_HANDLE vi;
    thosts_use(k->h, host);
    TC_RC(tl_open(t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(t, b, slots * KSLOT), VIP_SUCCESS);
    TC_RC(tl_vi(t, k->rel, NULL, NULL, &vi), VIP_SUCCESS);
    TC_RC(post_slots(vi, b, 0, nrecv), VIP_SUCCESS);
    if (host == 1)
        TC_RC(tl_accept(t, vi, k->disc, 20000), VIP_SUCCESS);
    else
        TC_RC(tl_request(t, vi, "host1", k->disc, 20000), VIP_SUCCESS);
    return vi;
}

/* A receiver on host1 and a sender on host0, in children; `ready` nonzero:
 * the receiver says so once connected. */
static void k_pair(const char *tag, VIP_RELIABILITY_LEVEL rel, int (*receiver)(void *),
                   int (*sender)(void *), char ready)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    struct kstream k = {&h, "", rel};
    tl_discrim(k.disc, tag);
    struct tl_child r, w;
    bool r_up = tl_spawn(&r, receiver, &k) == 0;
    bool w_up = r_up && tl_spawn(&w, sender, &k) == 0;
    CU_ASSERT(r_up && w_up);
    if (r_up && ready)
        CU_ASSERT_EQUAL(tl_parent_take(&r, 30000), ready);
    if (w_up)
        TCHILD_OK(&w, 60000);
    if (r_up)
        TCHILD_OK(&r, 60000);
    thosts_stop(&h);
}

/* Receiver on host1: every receive posted before the connection (so the
 * pace of the two sides cannot break it), then each message checked in
 * order. It sends nothing. */
static int ow_receiver(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi = k_end(arg, 1, OW_MSGS, OW_MSGS, &t, &b);
    for (uint32_t n = 0; n < OW_MSGS; n++) {
        VIP_DESCRIPTOR *d;
        TC_RC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
        TC_CHECK(!(d->CS.Status & VIP_STATUS_ERROR_MASK));
        TC_CHECK(d == (VIP_DESCRIPTOR *)(b.p + n * KSLOT)); /* in order */
        uint32_t got;
        memcpy(&got, (uint8_t *)d + 128, sizeof got);
        TC_CHECK(got == n && d->CS.Length == 64);
    }
    tl_end(&t, vi, &b);
    return 0;
}

/* Sender on host0: OW_MSGS messages of 64 bytes, one every OW_GAP_MS, each
 * completing without error. */
static int ow_sender(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi = k_end(arg, 0, 1, 0, &t, &b);
    for (uint32_t n = 0; n < OW_MSGS; n++) {
        struct timespec gap = {0, OW_GAP_MS * 1000000L};
        nanosleep(&gap, NULL); /* the stimulus: a slow one-way stream */
        memcpy(b.p + 128, &n, sizeof n);
        uint32_t st = k_send(vi, (VIP_DESCRIPTOR *)b.p, 64, b.mh);
        if (st & VIP_STATUS_ERROR_MASK)
            tl_child_fail(__FILE__, __LINE__, "message %u of a one-way stream failed (%#x)", n,
                          (unsigned)st);
    }
    tl_end(&t, vi, &b);
    return 0;
}

static void test_one_way_outlasts_link_timeout(void)
{
    k_pair("oneway", VIP_SERVICE_RELIABLE_DELIVERY, ow_receiver, ow_sender, 0);
}

/* ---- a receiver asleep --------------------------------------------------------------- */

#define SLEEPER_GAP_MS 2000u

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* every thread: the host's, the NIC's, the waker */
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int sl_receiver(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi = k_end(arg, 1, 1, 1, &t, &b);
    tl_child_post('a');
    double c0 = cpu_s();
    uint64_t t0 = tl_now_ms();
    VIP_DESCRIPTOR *d;
    TC_RC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
    double cpu = cpu_s() - c0;
    uint64_t took = tl_now_ms() - t0;
    TC_CHECK(!(d->CS.Status & VIP_STATUS_ERROR_MASK) && d->CS.Length == 64);
    if (!tl_under_valgrind() && took >= SLEEPER_GAP_MS / 2 && cpu > 0.25 * (double)took / 1000)
        tl_child_fail(__FILE__, __LINE__, "asleep for %llu ms, the process used %.2f s of CPU",
                      (unsigned long long)took, cpu);
    tl_end(&t, vi, &b);
    return 0;
}

static int sl_sender(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi = k_end(arg, 0, 1, 0, &t, &b);
    struct timespec gap = {SLEEPER_GAP_MS / 1000, (SLEEPER_GAP_MS % 1000) * 1000000L};
    nanosleep(&gap, NULL); /* the stimulus: a peer that takes its time */
    TC_CHECK(!(k_send(vi, (VIP_DESCRIPTOR *)b.p, 64, b.mh) & VIP_STATUS_ERROR_MASK));
    tl_end(&t, vi, &b);
    return 0;
}

static void test_sleeping_receiver_woken(void)
{
    k_pair("sleeper", VIP_SERVICE_RELIABLE_DELIVERY, sl_receiver, sl_sender, 'a');
}

/* ---- a ping-pong whose every wait sleeps ---------------------------------------------- */

/* Both ends sleep in every wait (VIP_WAIT_SPIN_US=0): each message must
 * wake a peer asleep, through the link's own means. A missed wake-up is
 * caught only by vipl_wait's one-second look, or by a link's timer: the
 * round trips take 20-60 us each when woken, so SP_ROUNDS of them in
 * under SP_BOUND_MS leaves about 3 ms a round trip for a loaded machine. */
#define SP_ROUNDS 300u
#define SP_BOUND_MS 1000u

static int sp_echo(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    setenv("VIP_WAIT_SPIN_US", "0", 1);
    VIP_VI_HANDLE vi = k_end(arg, 1, 4, 2, &t, &b);
    for (unsigned n = 0; n < SP_ROUNDS; n++) {
        VIP_DESCRIPTOR *d, *s = (VIP_DESCRIPTOR *)(b.p + (2 + n % 2) * KSLOT);
        TC_RC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
        TC_CHECK(!(d->CS.Status & VIP_STATUS_ERROR_MASK));
        tl_desc_1(d, (uint8_t *)d + 128, 256, b.mh);
        TC_RC(VipPostRecv(vi, d, b.mh), VIP_SUCCESS);
        TC_CHECK(!(k_send(vi, s, 4, b.mh) & VIP_STATUS_ERROR_MASK));
    }
    tl_end(&t, vi, &b);
    return 0;
}

static int sp_ping(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    setenv("VIP_WAIT_SPIN_US", "0", 1);
    VIP_VI_HANDLE vi = k_end(arg, 0, 4, 2, &t, &b);
    uint64_t t0 = tl_now_ms(), worst = 0;
    for (unsigned n = 0; n < SP_ROUNDS; n++) {
        VIP_DESCRIPTOR *d, *s = (VIP_DESCRIPTOR *)(b.p + (2 + n % 2) * KSLOT);
        uint64_t r0 = tl_now_ms();
        TC_CHECK(!(k_send(vi, s, 4, b.mh) & VIP_STATUS_ERROR_MASK));
        TC_RC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
        TC_CHECK(!(d->CS.Status & VIP_STATUS_ERROR_MASK));
        tl_desc_1(d, (uint8_t *)d + 128, 256, b.mh);
        TC_RC(VipPostRecv(vi, d, b.mh), VIP_SUCCESS);
        if (tl_now_ms() - r0 > worst)
            worst = tl_now_ms() - r0;
    }
    uint64_t took = tl_now_ms() - t0;
    if (!tl_under_valgrind() && took >= SP_BOUND_MS)
        tl_child_fail(__FILE__, __LINE__,
                      "%u round trips, every wait asleep, took %llu ms (the slowest %llu ms)",
                      SP_ROUNDS, (unsigned long long)took, (unsigned long long)worst);
    tl_end(&t, vi, &b);
    return 0;
}

static void test_sleeping_pingpong_woken(void)
{
    k_pair("sleepp", VIP_SERVICE_RELIABLE_DELIVERY, sp_echo, sp_ping, 0);
}

/* ---- disconnecting across hosts --------------------------------------------------------- */

/* A stream of messages; the receiver disconnects on the last, perhaps
 * before its NIC acknowledged it; the sender, which did not wait for that
 * send's completion, disconnects once its VI has heard (the error state).
 * That second VipDisconnect has nobody to deliver to: it returns at once,
 * not after the link's bounded wait for acknowledgements (2 s here). */
#define DC_BOUND_MS 1000u
#define DC_MSGS 8

static int dc_first(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi = k_end(arg, 1, DC_MSGS, DC_MSGS, &t, &b);
    VIP_DESCRIPTOR *d;
    for (int i = 0; i < DC_MSGS; i++) {
        TC_RC(VipRecvWait(vi, 20000, &d), VIP_SUCCESS);
        TC_CHECK(!(d->CS.Status & VIP_STATUS_ERROR_MASK));
    }
    TC_RC(VipDisconnect(vi), VIP_SUCCESS);
    tl_end(&t, vi, &b);
    return 0;
}

static int dc_second(void *arg)
{
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi = k_end(arg, 0, 2, 0, &t, &b);
    for (int i = 0; i < DC_MSGS - 1; i++)
        TC_CHECK(!(k_send(vi, (VIP_DESCRIPTOR *)b.p, 4, b.mh) & VIP_STATUS_ERROR_MASK));
    VIP_DESCRIPTOR *last = (VIP_DESCRIPTOR *)(b.p + KSLOT), *d;
    tl_desc_1(last, (uint8_t *)last + 128, 4, b.mh);
    TC_RC(VipPostSend(vi, last, b.mh), VIP_SUCCESS);
    uint64_t until = tl_now_ms() + 20000;
    while (tl_vi_state(vi) != VIP_STATE_ERROR && tl_now_ms() < until)
        (void)VipSendDone(vi, &d);
    TC_CHECK(tl_vi_state(vi) == VIP_STATE_ERROR);
    uint64_t t0 = tl_now_ms();
    TC_RC(VipDisconnect(vi), VIP_SUCCESS);
    uint64_t took = tl_now_ms() - t0;
    if (took >= DC_BOUND_MS)
        tl_child_fail(__FILE__, __LINE__, "the second VipDisconnect took %llu ms",
                      (unsigned long long)took);
    tl_end(&t, vi, &b);
    return 0;
}

static void test_second_disconnect_at_once(void)
{
    k_pair("dc", VIP_SERVICE_RELIABLE_DELIVERY, dc_first, dc_second, 0);
}

enum kill_how { KILL_VIPD, STOP_VIPD, STOP_PEER };

static void peer_goes(enum kill_how how)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    struct kstream k = {&h, "", VIP_SERVICE_RELIABLE_RECEPTION};
    tl_discrim(k.disc, "kill");
    struct tl_child r, w;
    bool r_up = tl_spawn(&r, k_receiver, &k) == 0;
    bool w_up = r_up && tl_spawn(&w, k_sender, &k) == 0;
    CU_ASSERT(r_up && w_up);
    if (w_up) {
        CU_ASSERT_EQUAL(tl_parent_take(&w, 20000), 's'); /* streaming */
        uint64_t t0 = tl_now_ms();
        if (how == KILL_VIPD)
            kill(h.v[1].pid, SIGKILL);
        else if (how == STOP_VIPD)
            kill(h.v[1].pid, SIGSTOP);
        else
            kill(r.pid, SIGSTOP);
        int tok = tl_parent_take(&w, 15000);
        uint64_t took = tl_now_ms() - t0;
        /* bounded: the host timeout (1 s here) or the link's (1 s), plus slack
         * for a loaded machine */
        CU_ASSERT(tok == 't' || tok == 'f');
        CU_ASSERT(took < 8000);
        if (how == STOP_PEER) /* the transport gave up: the in-flight send says so */
            CU_ASSERT_EQUAL(tok, 't');
        TCHILD_OK(&w, 20000);
        if (how != STOP_PEER) {
            /* host0's vipd says host1 is down (before host1 may come back) */
            char out[4096];
            thosts_use(&h, 0);
            const char *line = tl_vipctl("net", out, sizeof out) == 0 ? strstr(out, "host host1")
                                                                      : NULL;
            CU_ASSERT(line && strstr(line, "down"));
        }
        if (how == STOP_VIPD)
            kill(h.v[1].pid, SIGCONT);
        if (how == STOP_PEER)
            kill(r.pid, SIGCONT);
    }
    if (r_up)
        tl_child_kill(&r);
    /* host0's vipd serves on: a ping-pong of two of its own processes */
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_DELIVERY, 200, TPP_SMALL);
    pp_across(&h, &c, 0, 0);
    thosts_stop(&h);
}

static void test_peer_vipd_killed_mid_stream(void)
{
    peer_goes(KILL_VIPD);
}

static void test_peer_vipd_hangs_heartbeat(void)
{
    peer_goes(STOP_VIPD);
}

static void test_peer_process_hangs_transport_timeout(void)
{
    peer_goes(STOP_PEER);
}

static const struct tl_test tests[] = {
    TL_TEST(test_names_across_hosts),
    TL_TEST(test_refusals_across_hosts),
    TL_TEST(test_request_timeout_against_accept),
    TL_TEST(test_pingpong_small_reliable_delivery),
    TL_TEST(test_pingpong_small_reliable_reception),
    TL_TEST(test_pingpong_small_unreliable),
    TL_TEST(test_stream_1mib_reliable_delivery),
    TL_TEST(test_three_hosts),
    TL_TEST(test_one_way_outlasts_link_timeout),
    TL_TEST(test_sleeping_receiver_woken),
    TL_TEST(test_sleeping_pingpong_woken),
    TL_TEST(test_second_disconnect_at_once),
    TL_TEST(test_peer_vipd_killed_mid_stream),
    TL_TEST(test_peer_vipd_hangs_heartbeat),
    TL_TEST(test_peer_process_hangs_transport_timeout),
    TL_END,
};

int main(int argc, char **argv)
{
    thosts_quick_failures();
    return tl_main(argc, argv, "hosts", tests);
}

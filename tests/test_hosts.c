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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    if (thosts_start(&h, 2, NULL) != 0) {
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
    }
out:
    tl_close(&t);
    thosts_stop(&h);
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

static const struct tl_test tests[] = {
    TL_TEST(test_names_across_hosts),
    TL_TEST(test_refusals_across_hosts),
    TL_TEST(test_pingpong_small_reliable_delivery),
    TL_TEST(test_pingpong_small_reliable_reception),
    TL_TEST(test_pingpong_small_unreliable),
    TL_TEST(test_stream_1mib_reliable_delivery),
    TL_TEST(test_three_hosts),
    TL_END,
};

int main(int argc, char **argv)
{
    return tl_main(argc, argv, "hosts", tests);
}

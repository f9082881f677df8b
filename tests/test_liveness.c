/*
 * test_liveness.c - liveness on the control path: what vipd does, stopped
 * or killed, never holds a program beyond its own timeouts, and a peer
 * that dies is noticed without vipd.
 *
 *   error_report_keeps_timeout: vipd stopped (SIGSTOP), a reliable VI goes
 *       to the error state; its report to vipd is not waited for, so the
 *       waits on the VI keep their timeouts (it held a 1000 ms
 *       VipRecvWait for the control timeout, 10 s, before);
 *   connect_wait_stopped_vipd: VipConnectWait with a timeout, and one
 *       with none, return VIP_ERROR_RESOURCE with a reason within a
 *       ping or two of vipd stopping (they waited for good before);
 *   dead_peer_without_vipd: vipd killed, then the peer process: the
 *       survivor's VI goes to the error state, its receives are flushed,
 *       its waits return (reliable and unreliable).
 *   disconnect_wakes_waiter: a VipRecvWait asleep (on its connection's
 *       wake word) returns at once with its descriptor flushed when
 *       another thread disconnects the VI.
 * Each test runs a vipd of its own (tests/lib/tvipd.c).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tvipd.h"

/* The client: connect to the parent's discriminator, say 'c', then wait
 * for 'q' (or be killed). */
struct peer_cfg {
    VIP_RELIABILITY_LEVEL rel;
    char disc[17];
};

static int peer_main(void *arg)
{
    const struct peer_cfg *p = arg;
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &b, 1u << 16), VIP_SUCCESS);
    TC_RC(tl_vi(&t, p->rel, NULL, NULL, &vi), VIP_SUCCESS);
    for (unsigned k = 0; k < 2; k++) {
        VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(void *)(b.p + 128 * k);
        tl_desc_1(d, b.p + 4096 + 4096 * k, 4096, b.mh);
        TC_RC(VipPostRecv(vi, d, b.mh), VIP_SUCCESS);
    }
    TC_RC(tl_request(&t, vi, "via0", p->disc, 15000), VIP_SUCCESS);
    tl_child_post('c');
    tl_child_take(-1);
    return 0;
}

struct side {
    struct tvipd v;
    struct tl_child ch;
    struct peer_cfg pc;
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
};

#define RDESC(s, k) ((VIP_DESCRIPTOR *)(void *)((s)->b.p + 128 * (k)))

/* A vipd of our own, a peer connected to our VI with two receives posted. */
static int side_up(struct side *s, VIP_RELIABILITY_LEVEL rel, unsigned nrecv)
{
    memset(s, 0, sizeof *s);
    s->ch.pid = -1;
    s->v.pid = -1;
    s->pc.rel = rel;
    tl_discrim(s->pc.disc, "l");
    if (tvipd_start(&s->v, NULL, 0) != 0) {
        CU_FAIL("could not start a vipd of the test's own");
        return -1;
    }
    if (tl_open(&s->t, "via0") != VIP_SUCCESS || tl_buf_alloc(&s->t, &s->b, 1u << 16) ||
        tl_vi(&s->t, rel, NULL, NULL, &s->vi) != VIP_SUCCESS) {
        CU_FAIL("open, register, create VI");
        return -1;
    }
    for (unsigned k = 0; k < nrecv; k++) {
        tl_desc_1(RDESC(s, k), s->b.p + 4096 + 4096 * k, 4096, s->b.mh);
        if (VipPostRecv(s->vi, RDESC(s, k), s->b.mh) != VIP_SUCCESS) {
            CU_FAIL("post receive");
            return -1;
        }
    }
    if (tl_spawn(&s->ch, peer_main, &s->pc) != 0) {
        CU_FAIL("fork");
        return -1;
    }
    VIP_RETURN rc = tl_accept(&s->t, s->vi, s->pc.disc, 15000);
    CU_ASSERT_EQUAL(rc, VIP_SUCCESS);
    if (rc != VIP_SUCCESS || tl_parent_take(&s->ch, 15000) != 'c') {
        CU_FAIL("connect");
        return -1;
    }
    return 0;
}

/* Whatever vipd's state: the peer goes, then vipd, then our objects (their
 * calls fail at once on a dead vipd; only their memory is freed). */
static void side_down(struct side *s)
{
    if (s->ch.pid > 0) {
        tl_parent_post(&s->ch, 'q');
        tl_child_wait(&s->ch, 5000);
    }
    if (s->v.pid > 0)
        kill(s->v.pid, SIGCONT);
    if (s->vi) {
        VipDisconnect(s->vi);
        VipDestroyVi(s->vi);
    }
    if (s->b.p)
        tl_buf_free(&s->b);
    if (s->t.nic)
        tl_close(&s->t);
    if (s->v.pid > 0)
        tvipd_stop(&s->v);
}

static void test_error_report_keeps_timeout(void)
{
    struct side s;
    unsetenv("VIPD_CTL_TIMEOUT_MS"); /* the default, 10 s: what a wait once paid */
    if (side_up(&s, VIP_SERVICE_RELIABLE_DELIVERY, 0) == 0) {
        kill(s.v.pid, SIGSTOP);
        /* a send with a handle that names nothing: a descriptor error,
         * which on a reliable VI breaks the connection (and is reported) */
        VIP_DESCRIPTOR *bad = RDESC(&s, 4), *d = NULL;
        tl_desc_1(bad, s.b.p + 8192, 10, 0x12345678u);
        uint64_t t0 = tl_now_ms();
        TRC_SOFT(VipPostSend(s.vi, bad, s.b.mh), VIP_SUCCESS);
        TRC_SOFT(VipSendWait(s.vi, 1000, &d), VIP_SUCCESS);
        uint64_t t1 = tl_now_ms();
        CU_ASSERT_PTR_EQUAL(d, bad);
        CU_ASSERT(bad->CS.Status & VIP_STATUS_PROTECTION_ERROR);
        /* nothing to receive: the wait times out in its 1000 ms */
        TRC_SOFT(VipRecvWait(s.vi, 1000, &d), VIP_TIMEOUT);
        uint64_t t2 = tl_now_ms();
        CU_ASSERT(t1 - t0 < 1000);
        CU_ASSERT(t2 - t1 >= 990 && t2 - t1 < 3000);
        if (t1 - t0 >= 1000 || t2 - t1 >= 3000)
            fprintf(stderr, "\n  with vipd stopped: VipPostSend + VipSendWait took %llu ms, VipRecvWait(1000) "
                            "%llu ms\n",
                    (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1));
        kill(s.v.pid, SIGCONT);
        /* vipd, going on, hears of the broken VI from the queued report
         * and the session works: the next call is answered (the report's
         * reply is not taken for it) */
        VIP_VI_ATTRIBUTES a;
        VIP_BOOLEAN q;
        VIP_VI_STATE st;
        TRC_SOFT(VipQueryVi(s.vi, &st, &a, &q, &q), VIP_SUCCESS);
        CU_ASSERT_EQUAL(st, VIP_STATE_ERROR);
    }
    side_down(&s);
}

/* In a child (a wait that hangs is then killed, not the test): open the
 * NIC, say 'r', wait for 'g' (vipd is stopped then), VipConnectWait. */
static int connect_waiter(void *arg)
{
    VIP_ULONG timeout = *(const VIP_ULONG *)arg;
    VIP_NIC_HANDLE nic;
    char disc[17];
    tl_discrim(disc, "w");
    TC_RC(VipOpenNic("via0", &nic), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(nic, "via0", disc);
    TC_CHECK(local != NULL);
    tl_child_post('r');
    TC_CHECK(tl_child_take(10000) == 'g');
    VIP_CONN_HANDLE c;
    VIP_VI_ATTRIBUTES ra;
    uint64_t t0 = tl_now_ms();
    VIP_RETURN rc = VipConnectWait(nic, local, timeout, NULL, &ra, &c);
    uint64_t dt = tl_now_ms() - t0;
    /* a timed wait: its timeout and a ping or two; untimed: pings only */
    uint64_t bound = (timeout == VIP_INFINITE ? 0u : timeout) + 2500u;
    if (rc != VIP_ERROR_RESOURCE || dt >= bound || !strstr(vip_last_error(), "stopped"))
        tl_child_fail(__FILE__, __LINE__, "VipConnectWait(%lu) on a stopped vipd: code %d "
                      "after %llu ms (%s)", (unsigned long)timeout, (int)rc,
                      (unsigned long long)dt, vip_last_error());
    tl_child_post('d');
    TC_CHECK(tl_child_take(10000) == 'c'); /* vipd goes on */
    /* and serves the program again */
    TC_RC(VipConnectWait(nic, local, 100, NULL, &ra, &c), VIP_TIMEOUT);
    free(local);
    VipCloseNic(nic);
    return 0;
}

static void connect_wait_stopped(VIP_ULONG timeout)
{
    struct tvipd v;
    struct tl_child ch = {.pid = -1};
    setenv("VIPD_PING_MS", "500", 1);
    if (tvipd_start(&v, NULL, 0) != 0) {
        CU_FAIL("could not start a vipd of the test's own");
        unsetenv("VIPD_PING_MS");
        return;
    }
    if (tl_spawn(&ch, connect_waiter, &timeout) == 0) {
        if (tl_parent_take(&ch, 10000) == 'r') {
            kill(v.pid, SIGSTOP);
            tl_parent_post(&ch, 'g');
            /* bounded here whatever the library does: 10 s, then killed */
            CU_ASSERT_EQUAL(tl_parent_take(&ch, 10000), 'd');
            kill(v.pid, SIGCONT);
            tl_parent_post(&ch, 'c');
        }
        kill(v.pid, SIGCONT);
        TCHILD_OK(&ch, 10000);
    } else {
        CU_FAIL("fork");
    }
    tvipd_stop(&v);
    unsetenv("VIPD_PING_MS");
}

static void test_connect_wait_stopped_vipd(void)
{
    connect_wait_stopped(1000);
    connect_wait_stopped(VIP_INFINITE);
}

static void dead_peer(VIP_RELIABILITY_LEVEL rel)
{
    struct side s;
    if (side_up(&s, rel, 2) == 0) {
        tvipd_stop(&s.v); /* SIGKILL: nobody will tell us anything */
        s.v.pid = -1;
        tl_child_kill(&s.ch);
        s.ch.pid = -1;
        /* both receives complete, flushed, within a couple of seconds;
         * (the 10 s timeouts only keep a broken build from hanging) */
        uint64_t t0 = tl_now_ms();
        for (unsigned k = 0; k < 2; k++) {
            VIP_DESCRIPTOR *d = NULL;
            TRC_SOFT(VipRecvWait(s.vi, 10000, &d), VIP_SUCCESS);
            CU_ASSERT_PTR_EQUAL(d, RDESC(&s, k));
            if (d)
                CU_ASSERT(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
        }
        uint64_t dt = tl_now_ms() - t0;
        CU_ASSERT(dt < 5000);
        if (dt >= 5000)
            fprintf(stderr, "\n  the dead peer was noticed after %llu ms\n",
                    (unsigned long long)dt);
        /* and what is posted now completes at once, flushed */
        VIP_DESCRIPTOR *d = NULL;
        tl_desc_1(RDESC(&s, 2), s.b.p + 12288, 4096, s.b.mh);
        TRC_SOFT(VipPostRecv(s.vi, RDESC(&s, 2), s.b.mh), VIP_SUCCESS);
        TRC_SOFT(VipRecvWait(s.vi, 10000, &d), VIP_SUCCESS);
        if (d)
            CU_ASSERT(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
    }
    side_down(&s);
}

static void test_dead_peer_without_vipd(void)
{
    dead_peer(VIP_SERVICE_RELIABLE_DELIVERY);
    dead_peer(VIP_SERVICE_UNRELIABLE);
}

/* vipd shut down by hand (`vipctl shutdown`) under a connected VI: what
 * the program had posted completes flushed, not with a protection error
 * (vipd drops the memory registrations as it goes). */
static void test_shutdown_flushes(void)
{
    struct side s;
    if (side_up(&s, VIP_SERVICE_RELIABLE_DELIVERY, 2) == 0) {
        char args[160], out[256];
        snprintf(args, sizeof args, "-s '%s' shutdown", s.v.sock);
        tl_vipctl(args, out, sizeof out);
        for (unsigned k = 0; k < 2; k++) {
            VIP_DESCRIPTOR *d = NULL;
            TRC_SOFT(VipRecvWait(s.vi, 10000, &d), VIP_SUCCESS);
            CU_ASSERT_PTR_EQUAL(d, RDESC(&s, k));
            if (d) {
                CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK,
                                VIP_STATUS_DESC_FLUSHED_ERROR);
                if ((d->CS.Status & VIP_STATUS_ERROR_MASK) != VIP_STATUS_DESC_FLUSHED_ERROR)
                    fprintf(stderr, "\n  receive %u after vipctl shutdown: status 0x%x\n", k,
                            (unsigned)d->CS.Status);
            }
        }
    }
    side_down(&s);
}

struct waiter {
    VIP_VI_HANDLE vi;
    VIP_RETURN rc;
    VIP_DESCRIPTOR *d;
    uint64_t done_ms;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->rc = VipRecvWait(w->vi, 5000, &w->d);
    w->done_ms = tl_now_ms();
    return NULL;
}

static void test_disconnect_wakes_waiter(void)
{
    struct side s;
    if (side_up(&s, VIP_SERVICE_RELIABLE_DELIVERY, 1) == 0) {
        struct waiter w = {.vi = s.vi};
        pthread_t th;
        if (pthread_create(&th, NULL, wait_thread, &w) == 0) {
            usleep(200000); /* the condition under test: the waiter is asleep */
            uint64_t t0 = tl_now_ms();
            TRC_SOFT(VipDisconnect(s.vi), VIP_SUCCESS);
            pthread_join(th, NULL);
            CU_ASSERT_EQUAL(w.rc, VIP_SUCCESS);
            CU_ASSERT_PTR_EQUAL(w.d, RDESC(&s, 0));
            if (w.d)
                CU_ASSERT(w.d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
            /* woken by the flush, not by its one-second timer */
            CU_ASSERT(w.done_ms - t0 < 400);
            if (w.done_ms - t0 >= 400)
                fprintf(stderr, "\n  the waiter returned %llu ms after VipDisconnect\n",
                        (unsigned long long)(w.done_ms - t0));
        } else {
            CU_FAIL("pthread_create");
        }
    }
    side_down(&s);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_error_report_keeps_timeout),
        TL_TEST(test_connect_wait_stopped_vipd),
        TL_TEST(test_dead_peer_without_vipd),
        TL_TEST(test_disconnect_wakes_waiter),
        TL_TEST(test_shutdown_flushes),
        TL_END,
    };
    return tl_main(argc, argv, "liveness", tests);
}

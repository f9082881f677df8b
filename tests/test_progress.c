/*
 * test_progress.c - programs written the way VIPL programs are written, and
 * a NIC that makes progress on its own.
 *
 * 1. Completion through completion queues only (tests/lib/tcq.c): server and
 *    client, on the two NICs of a pair, each have ONE CQ that both work
 *    queues of four VIs complete into; a verified ping-pong rotating over
 *    the VIs, and a credit-controlled stream with 32 sends outstanding; every
 *    completion learned from VipCQDone (polling) or VipCQWait (sleeping,
 *    VIP_WAIT_SPIN_US=0), then taken with VipSendDone/VipRecvDone. 10^6
 *    round trips (messages) native, 2*10^4 paced; the ping-pong once more
 *    beside two busy-looping processes (a tenth of that).
 * 2. The NIC progresses while its host does not call VIPL:
 *    (a) a receiver posts receives, then only reads the descriptors' Status
 *        words in memory (5 s at most): the messages must arrive whole;
 *    (b) a sender posts, then computes for 300 ms without calling VIPL; the
 *        receiver, waiting in VipRecvWait from when all is posted, must have
 *        the messages at least 100 ms before that computation ends (one
 *        small message, eight of 4 bytes to 100 KB, one of 1 MiB: more than
 *        the link holds).
 *    Each with every VIP_EXT_MODE.
 *
 * Every test in each profile: NIC pairs via0/via1 native (TL_PROFILE maps
 * them onto a paced pair, tlib.h), via2/via3 sbus, via4/via5 pci, as
 * tests/run_tests.sh starts vipd. Counts: TL_FULL=1, TL_SCALE (tlib.h).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "lib/tcq.h"
#include "lib/tlib.h"

/* ---- 1. completion through CQs only -------------------------------------------- */

static void cq_case(const char *srv, const char *cli, int stream, int sleep, unsigned hogs)
{
    struct tcq_cfg c;
    if (tcq_defaults(&c, srv, cli) != 0) {
        fprintf(stderr, "\n  cannot learn the profiles of %s and %s (vipctl profile)\n",
                tl_dev(srv), tl_dev(cli));
        CU_FAIL("NIC profiles");
        return;
    }
    c.stream = stream;
    c.sleep = sleep;
    c.hogs = hogs;
    /* Beside the hogs a poller gets the core it waits on once a time slice:
     * a tenth of the round trips (10^5 native, 2*10^3 paced). */
    if (hogs && c.n >= 10)
        c.n /= 10;
    tcq_run(&c);
}

#define CQ_TESTS(prof, srv, cli)                                                          \
    static void test_cq_pingpong_poll_##prof(void) { cq_case(srv, cli, 0, 0, 0); }         \
    static void test_cq_pingpong_wait_##prof(void) { cq_case(srv, cli, 0, 1, 0); }         \
    static void test_cq_stream_poll_##prof(void) { cq_case(srv, cli, 1, 0, 0); }           \
    static void test_cq_stream_wait_##prof(void) { cq_case(srv, cli, 1, 1, 0); }           \
    static void test_cq_pingpong_hogs_poll_##prof(void) { cq_case(srv, cli, 0, 0, 2); }    \
    static void test_cq_pingpong_hogs_wait_##prof(void) { cq_case(srv, cli, 0, 1, 2); }

CQ_TESTS(native, "via0", "via1")
CQ_TESTS(sbus, "via2", "via3")
CQ_TESTS(pci, "via4", "via5")

/* ---- 2. progress without the host ------------------------------------------------- */

#define NP_MAX 8u
#define POLL_MS 5000u    /* (a): how long the receiver reads status words */
#define COMPUTE_MS 400u  /* (b): how long the sender computes after posting */
#define MARGIN_MS 50u    /* (b): the messages are in at least this long before it ends (a NIC
                          * that waited for the sender's host delivers after it) */

static const char *const modes[] = {"standard", "descriptorless", "merged"};

struct np_cfg {
    char rdev[16], sdev[16]; /* receiver's and sender's NIC */
    char disc[17];
    const char *mode;        /* VIP_EXT_MODE of both */
    unsigned nmsg;
    uint32_t len[NP_MAX];
    int poll_status;         /* (a); else (b) */
};

/* Written by the children, read by the parent (shared mapping). */
struct np_times {
    _Atomic uint64_t posted_ns, computed_ns, received_ns;
};

struct np_arg {
    const struct np_cfg *c;
    struct np_times *tm;
};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static size_t np_total(const struct np_cfg *c)
{
    size_t n = 0;
    for (unsigned k = 0; k < c->nmsg; k++)
        n += c->len[k];
    return n;
}

/* Buffer layout of both sides: NP_MAX descriptors, then the payloads. */
struct np_side {
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
};

static VIP_DESCRIPTOR *np_desc(struct np_side *s, unsigned k)
{
    return (VIP_DESCRIPTOR *)(void *)(s->b.p + 64u * k);
}

static uint8_t *np_data(struct np_side *s, const struct np_cfg *c, unsigned k)
{
    uint8_t *p = s->b.p + 64u * NP_MAX;
    for (unsigned i = 0; i < k; i++)
        p += c->len[i];
    return p;
}

static void np_open(struct np_side *s, const struct np_cfg *c, const char *dev)
{
    TC_CHECK(tl_desc_size(1) <= 64);
    setenv("VIP_EXT_MODE", c->mode, 1);
    TC_RC(tl_open(&s->t, dev), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&s->t, &s->b, 64u * NP_MAX + np_total(c)), VIP_SUCCESS);
    TC_RC(tl_vi(&s->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &s->vi), VIP_SUCCESS);
}

static void np_close(struct np_side *s)
{
    TC_CHECK(tl_child_post('d') == 0 && tl_child_take(60000) == 'q');
    VipDisconnect(s->vi);
    VipDestroyVi(s->vi);
    tl_buf_free(&s->b);
    tl_close(&s->t);
}

/* Receive k landed in descriptor d: status, length, payload. */
static void np_check(struct np_side *s, const struct np_cfg *c, unsigned k, VIP_DESCRIPTOR *d)
{
    uint32_t st = d->CS.Status;
    if (st != (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE))
        tl_child_fail(__FILE__, __LINE__, "%s: message %u: status 0x%x", c->mode, k, st);
    if (d->CS.Length != c->len[k])
        tl_child_fail(__FILE__, __LINE__, "%s: message %u: Length %u, expected %u", c->mode, k,
                      d->CS.Length, c->len[k]);
    long bad = tl_verify(np_data(s, c, k), c->len[k], 1000u + k);
    if (bad >= 0)
        tl_child_fail(__FILE__, __LINE__, "%s: message %u (%u bytes): payload differs at %ld",
                      c->mode, k, c->len[k], bad);
}

static int np_receiver(void *arg)
{
    const struct np_arg *a = arg;
    const struct np_cfg *c = a->c;
    struct np_side s = {0};
    np_open(&s, c, c->rdev);
    for (unsigned k = 0; k < c->nmsg; k++) {
        tl_desc_1(np_desc(&s, k), np_data(&s, c, k), c->len[k], s.b.mh);
        TC_RC(VipPostRecv(s.vi, np_desc(&s, k), s.b.mh), VIP_SUCCESS);
    }
    TC_RC(tl_accept(&s.t, s.vi, c->disc, 20000), VIP_SUCCESS);
    TC_CHECK(tl_child_post('r') == 0);
    if (c->poll_status) {
        /* From here on no VIPL call until every status word says DONE. */
        uint64_t deadline = tl_now_ms() + POLL_MS;
        unsigned done = 0;
        while (done < c->nmsg && tl_now_ms() < deadline) {
            done = 0;
            for (unsigned k = 0; k < c->nmsg; k++)
                done += (__atomic_load_n(&np_desc(&s, k)->CS.Status, __ATOMIC_ACQUIRE) &
                         VIP_STATUS_DONE) != 0;
        }
        if (done < c->nmsg)
            tl_child_fail(__FILE__, __LINE__,
                          "%s: after %u ms of reading status words, %u of %u receives are "
                          "DONE: the NIC did not place them while the host stayed out of VIPL",
                          c->mode, POLL_MS, done, c->nmsg);
        for (unsigned k = 0; k < c->nmsg; k++) {
            np_check(&s, c, k, np_desc(&s, k));
            VIP_DESCRIPTOR *d = NULL;
            TC_RC(VipRecvDone(s.vi, &d), VIP_SUCCESS);
            TC_CHECK(d == np_desc(&s, k));
        }
    } else {
        /* Wait only once the sender has posted everything: a message larger
         * than the link then needs the sender's NIC while its host computes. */
        TC_CHECK(tl_child_take(30000) == 'p');
        for (unsigned k = 0; k < c->nmsg; k++) {
            VIP_DESCRIPTOR *d = NULL;
            VIP_RETURN rc = VipRecvWait(s.vi, 10000, &d);
            if (rc != VIP_SUCCESS)
                tl_child_fail(__FILE__, __LINE__, "%s: message %u: VipRecvWait: %s", c->mode, k,
                              vip_strerror(rc));
            if (k + 1 == c->nmsg)
                atomic_store(&a->tm->received_ns, now_ns());
            TC_CHECK(d == np_desc(&s, k));
            np_check(&s, c, k, d);
        }
    }
    np_close(&s);
    return 0;
}

static int np_sender(void *arg)
{
    const struct np_arg *a = arg;
    const struct np_cfg *c = a->c;
    struct np_side s = {0};
    np_open(&s, c, c->sdev);
    TC_RC(tl_request(&s.t, s.vi, c->rdev, c->disc, 20000), VIP_SUCCESS);
    for (unsigned k = 0; k < c->nmsg; k++) {
        tl_fill(np_data(&s, c, k), c->len[k], 1000u + k);
        tl_desc_1(np_desc(&s, k), np_data(&s, c, k), c->len[k], s.b.mh);
    }
    TC_CHECK(tl_child_take(30000) == 'g'); /* the receiver has stopped calling VIPL */
    atomic_store(&a->tm->posted_ns, now_ns());
    for (unsigned k = 0; k < c->nmsg; k++)
        TC_RC(VipPostSend(s.vi, np_desc(&s, k), s.b.mh), VIP_SUCCESS);
    if (!c->poll_status) {
        TC_CHECK(tl_child_post('p') == 0);
        /* Compute: no VIPL call, no system call but the clock's. */
        uint64_t end = now_ns() + COMPUTE_MS * 1000000ull;
        volatile uint64_t x = 0;
        while (now_ns() < end)
            for (unsigned i = 0; i < 1000; i++)
                x = x * 31u + i;
        atomic_store(&a->tm->computed_ns, now_ns());
    }
    for (unsigned k = 0; k < c->nmsg; k++) {
        VIP_DESCRIPTOR *d = NULL;
        TC_RC(VipSendWait(s.vi, 10000, &d), VIP_SUCCESS);
        TC_CHECK(d == np_desc(&s, k));
        if ((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) != VIP_STATUS_DONE)
            tl_child_fail(__FILE__, __LINE__, "%s: send %u: status 0x%x", c->mode, k,
                          d->CS.Status);
    }
    np_close(&s);
    return 0;
}

/* One exchange; returns 0 if it passed (CUnit failures recorded either way). */
static int np_run(const struct np_cfg *c)
{
    struct np_times *tm = mmap(NULL, sizeof *tm, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (tm == MAP_FAILED) {
        CU_FAIL("mmap");
        return -1;
    }
    struct np_arg a = {c, tm};
    struct tl_child ch[2] = {{.pid = -1}, {.pid = -1}};
    int ok = tl_spawn(&ch[0], np_receiver, &a) == 0;
    if (ok && tl_spawn(&ch[1], np_sender, &a) != 0) {
        tl_child_kill(&ch[0]);
        ok = 0;
    }
    CU_ASSERT_TRUE(ok);
    if (!ok)
        goto out;
    /* The sender posts only once the receiver has stopped calling VIPL (a)
     * or is about to wait (b); in (b) the receiver waits once all is posted. */
    ok = tl_parent_take(&ch[0], 30000) == 'r' && tl_parent_post(&ch[1], 'g') == 0;
    if (ok && !c->poll_status)
        ok = tl_parent_take(&ch[1], 30000) == 'p' && tl_parent_post(&ch[0], 'p') == 0;
    ok = ok && tl_gather(ch, 2, 'd', 60000, NULL, NULL) == 0;
    if (ok) {
        tl_parent_post(&ch[0], 'q');
        tl_parent_post(&ch[1], 'q');
    }
    for (int i = 0; i < 2; i++) {
        /* after a failure, the other side may be waiting for it: stop it */
        int r = tl_child_wait(&ch[i], ok ? 30000 : 1000);
        if (r)
            fprintf(stderr, "\n  %s->%s %s, %s: %s", tl_dev(c->sdev), tl_dev(c->rdev), c->mode,
                    i ? "sender" : "receiver", ch[i].msg);
        CU_ASSERT_EQUAL(r, 0);
        ok = ok && r == 0;
    }
    if (ok && !c->poll_status) {
        double got = (double)(atomic_load(&tm->received_ns) - atomic_load(&tm->posted_ns)) / 1e6;
        double end = (double)(atomic_load(&tm->computed_ns) - atomic_load(&tm->posted_ns)) / 1e6;
        int early = got + MARGIN_MS < end;
        if (!early)
            fprintf(stderr,
                    "\n  %s->%s %s: %u messages received %.1f ms after posting; the sender "
                    "computed until %.1f ms (the NIC waited for the sender's host)",
                    tl_dev(c->sdev), tl_dev(c->rdev), c->mode, c->nmsg, got, end);
        CU_ASSERT_TRUE(early);
        ok = early;
    }
out:
    munmap(tm, sizeof *tm);
    return ok ? 0 : -1;
}

enum np_kind { NP_ONE, NP_MANY, NP_LARGE };

/* Every extension mode, receiver on `rdev`, sender on `sdev`. */
static void np_case(const char *rdev, const char *sdev, int poll_status, enum np_kind kind)
{
    if (tl_under_valgrind())
        return; /* whether the NIC moves data in time is a matter of timing */
    static const uint32_t many[NP_MAX] = {4, 64, 200, 256, 1000, 4096, 16385, 100000};
    unsigned failed = 0;
    for (unsigned m = 0; m < sizeof modes / sizeof *modes; m++) {
        struct np_cfg c = {.mode = modes[m], .poll_status = poll_status};
        snprintf(c.rdev, sizeof c.rdev, "%s", rdev);
        snprintf(c.sdev, sizeof c.sdev, "%s", sdev);
        tl_discrim(c.disc, "np");
        if (kind == NP_ONE) {
            c.nmsg = 1;
            c.len[0] = 64;
        } else if (kind == NP_LARGE) {
            c.nmsg = 1;
            c.len[0] = 1u << 20; /* more than the link holds */
        } else {
            c.nmsg = NP_MAX;
            memcpy(c.len, many, sizeof many);
        }
        failed += np_run(&c) != 0;
    }
    if (failed)
        fprintf(stderr, "\n  %u of %u extension modes failed\n", failed,
                (unsigned)(sizeof modes / sizeof *modes));
}

#define NP_TESTS(prof, rdev, sdev)                                                          \
    static void test_status_poll_one_##prof(void) { np_case(rdev, sdev, 1, NP_ONE); }         \
    static void test_status_poll_many_##prof(void) { np_case(rdev, sdev, 1, NP_MANY); }       \
    static void test_send_compute_one_##prof(void) { np_case(rdev, sdev, 0, NP_ONE); }        \
    static void test_send_compute_many_##prof(void) { np_case(rdev, sdev, 0, NP_MANY); }      \
    static void test_send_compute_large_##prof(void) { np_case(rdev, sdev, 0, NP_LARGE); }

NP_TESTS(native, "via0", "via1")
NP_TESTS(sbus, "via2", "via3")
NP_TESTS(pci, "via4", "via5")

#define CQ_ENTRIES(prof)                                                                    \
    TL_TEST(test_cq_pingpong_poll_##prof), TL_TEST(test_cq_pingpong_wait_##prof),           \
        TL_TEST(test_cq_stream_poll_##prof), TL_TEST(test_cq_stream_wait_##prof),           \
        TL_TEST(test_cq_pingpong_hogs_poll_##prof), TL_TEST(test_cq_pingpong_hogs_wait_##prof)
#define NP_ENTRIES(prof)                                                                    \
    TL_TEST(test_status_poll_one_##prof), TL_TEST(test_status_poll_many_##prof),            \
        TL_TEST(test_send_compute_one_##prof), TL_TEST(test_send_compute_many_##prof),      \
        TL_TEST(test_send_compute_large_##prof)

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        CQ_ENTRIES(native), CQ_ENTRIES(sbus), CQ_ENTRIES(pci),
        NP_ENTRIES(native), NP_ENTRIES(sbus), NP_ENTRIES(pci),
        TL_END,
    };
    return tl_main(argc, argv, "progress", tests);
}

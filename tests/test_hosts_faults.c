/*
 * test_hosts_faults.c - the reliable transport of the UDP link under
 * injected faults (vipd --faults on both emulated hosts).
 *
 *   reliable delivery: 100,000 messages under 10% drop + 5% duplicate +
 *     5% reorder + 1% corrupt arrive exactly once, in order, intact; the
 *     counters show the faults happened and were repaired
 *   unreliable: under the same faults every message that arrives is intact
 *     and newer than the last, some do not arrive, and the NIC counts them
 *   a corrupt frame is never delivered (100% corrupt: nothing arrives, the
 *     CRC drops every frame)
 *
 * A sender on host0 streams numbered messages (8..256 bytes, the pattern of
 * their number) to a receiver on host1; on reliable VIs the receiver hands
 * back a credit every CREDIT messages, so the sender never has more than
 * WINDOW messages the receiver has no descriptor for.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/thosts.h"
#include "lib/tlib.h"

#define NRECV 64u
#define CREDIT 32u
#define WINDOW 64u
#define MSG_MAX 256u
#define STRIDE 512u /* bytes per descriptor + message slot */
#define END_IMM 0xE0Du

struct stream {
    const struct thosts *h;
    VIP_RELIABILITY_LEVEL rel;
    unsigned n;         /* messages */
    char disc[17];
    int expect_none;    /* unreliable, 100% corrupt: nothing may arrive */
};

static uint32_t msg_len(uint32_t seq)
{
    return 8 + (seq * 37u) % (MSG_MAX - 8 + 1);
}

struct ends {
    struct tl_nic t;
    struct tl_buf b; /* [0, NRECV) receive slots, [NRECV, 2*NRECV) send slots */
    VIP_VI_HANDLE vi;
};

static VIP_DESCRIPTOR *slot_desc(struct ends *e, unsigned i)
{
    return (VIP_DESCRIPTOR *)(e->b.p + (size_t)i * STRIDE);
}

static uint8_t *slot_data(struct ends *e, unsigned i)
{
    return e->b.p + (size_t)i * STRIDE + 128;
}

static void post_recv(struct ends *e, unsigned i)
{
    tl_desc_1(slot_desc(e, i), slot_data(e, i), MSG_MAX, e->b.mh);
    TC_RC(VipPostRecv(e->vi, slot_desc(e, i), e->b.mh), VIP_SUCCESS);
}

/* Send one message from send slot NRECV + k and wait for its completion. */
static void send_one(struct ends *e, unsigned k, uint32_t seq, uint32_t len, uint32_t imm)
{
    unsigned i = NRECV + k;
    uint8_t *p = slot_data(e, i);
    memcpy(p, &seq, 4);
    tl_fill(p + 4, len - 4, seq);
    VIP_DESCRIPTOR *d = slot_desc(e, i);
    tl_desc_1(d, p, len, e->b.mh);
    if (imm) {
        d->CS.Control |= VIP_CONTROL_IMMEDIATE;
        d->CS.ImmediateData = imm;
    }
    TC_RC(VipPostSend(e->vi, d, e->b.mh), VIP_SUCCESS);
    VIP_DESCRIPTOR *done;
    TC_RC(VipSendWait(e->vi, 20000, &done), VIP_SUCCESS);
    TC_CHECK(done == d && (done->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
}

static void open_ends(struct ends *e, const struct stream *s)
{
    TC_RC(tl_open(&e->t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&e->t, &e->b, 2 * NRECV * STRIDE), VIP_SUCCESS);
    TC_RC(tl_vi(&e->t, s->rel, NULL, NULL, &e->vi), VIP_SUCCESS);
    for (unsigned i = 0; i < NRECV; i++)
        post_recv(e, i);
}

/* The number of the net counter `name` in `vipctl net` of this host. */
static unsigned long long net_counter(const char *name)
{
    char out[4096];
    if (tl_vipctl("net", out, sizeof out) != 0)
        return 0;
    char key[40];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(out, key);
    if (!p && strncmp(out, key + 1, strlen(key) - 1) == 0)
        p = out - 1;
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static int receiver(void *arg)
{
    const struct stream *s = arg;
    thosts_use(s->h, 1);
    struct ends e;
    open_ends(&e, s);
    TC_RC(tl_accept(&e.t, e.vi, s->disc, 20000), VIP_SUCCESS);
    uint32_t expect = 0, got = 0, credits = 0;
    int64_t last = -1;
    for (;;) {
        VIP_DESCRIPTOR *d;
        VIP_RETURN rc = VipRecvWait(e.vi, s->rel == VIP_SERVICE_UNRELIABLE ? 3000 : 20000, &d);
        if (rc == VIP_TIMEOUT && s->rel == VIP_SERVICE_UNRELIABLE)
            break; /* the sender is done (its end marker may be lost too) */
        if (rc == VIP_TIMEOUT && getenv("DBG_NET")) {
            char out[4096];
            tl_vipctl("net", out, sizeof out);
            fprintf(stderr, "receiver host net after %u:\n%s", got, out);
            thosts_use(s->h, 0);
            tl_vipctl("net", out, sizeof out);
            fprintf(stderr, "sender host net:\n%s", out);
        }
        TC_RC(rc, VIP_SUCCESS);
        if (d->CS.Status & VIP_STATUS_ERROR_MASK)
            tl_child_fail(__FILE__, __LINE__, "receive status %#x after %u messages",
                          (unsigned)d->CS.Status, got);
        unsigned i = (unsigned)(((uint8_t *)d - e.b.p) / STRIDE);
        TC_CHECK(i < NRECV);
        if (d->CS.Status & VIP_STATUS_IMMEDIATE) {
            TC_CHECK(d->CS.ImmediateData == END_IMM);
            break;
        }
        uint8_t *p = slot_data(&e, i);
        uint32_t seq;
        memcpy(&seq, p, 4);
        TC_CHECK(d->CS.Length == msg_len(seq));
        TC_CHECK(tl_verify(p + 4, d->CS.Length - 4, seq) == -1); /* intact */
        if (s->rel == VIP_SERVICE_UNRELIABLE) {
            TC_CHECK((int64_t)seq > last); /* never twice, never older */
            last = seq;
        } else {
            if (seq != expect)
                tl_child_fail(__FILE__, __LINE__, "message %u arrived, %u expected", seq,
                              expect);
            expect++;
        }
        got++;
        post_recv(&e, i);
        if (s->rel != VIP_SERVICE_UNRELIABLE && got == s->n)
            break;
        if (s->rel != VIP_SERVICE_UNRELIABLE && got % CREDIT == 0)
            send_one(&e, credits++ % NRECV, got, 8, 0);
    }
    if (s->rel != VIP_SERVICE_UNRELIABLE) {
        TC_CHECK(got == s->n);
        /* the faults happened, and were repaired; with thousands of
         * messages every kind is certain (a scaled-down run, valgrind's,
         * may see no 1% corruption at all) */
        if (s->n >= 2000) {
            TC_CHECK(net_counter("fault_drop") > 0 && net_counter("retransmits") > 0);
            TC_CHECK(net_counter("bad_crc") > 0 && net_counter("dup_dropped") > 0);
        }
        send_one(&e, credits++ % NRECV, got, 8, END_IMM); /* all of it came */
    } else if (s->expect_none) {
        TC_CHECK(got == 0);
        TC_CHECK(net_counter("bad_crc") > 0);
    } else {
        TC_CHECK(got > 0 && got < s->n);
        TC_CHECK(net_counter("lost") > 0);
    }
    tl_end(&e.t, e.vi, &e.b);
    return 0;
}

static int sender(void *arg)
{
    const struct stream *s = arg;
    thosts_use(s->h, 0);
    struct ends e;
    open_ends(&e, s);
    TC_RC(tl_request(&e.t, e.vi, "host1", s->disc, 20000), VIP_SUCCESS);
    uint32_t credited = 0;
    bool reliable = s->rel != VIP_SERVICE_UNRELIABLE;
    for (uint32_t seq = 0; seq < s->n; seq++) {
        while (reliable && seq - credited >= WINDOW) {
            VIP_DESCRIPTOR *d;
            TC_RC(VipRecvWait(e.vi, 20000, &d), VIP_SUCCESS);
            TC_CHECK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
            unsigned i = (unsigned)(((uint8_t *)d - e.b.p) / STRIDE);
            memcpy(&credited, slot_data(&e, i), 4);
            post_recv(&e, i);
        }
        send_one(&e, seq % NRECV, seq, msg_len(seq), 0);
    }
    if (reliable) {
        /* The receiver's END says everything came. */
        for (;;) {
            VIP_DESCRIPTOR *d;
            TC_RC(VipRecvWait(e.vi, 30000, &d), VIP_SUCCESS);
            TC_CHECK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
            if (d->CS.Status & VIP_STATUS_IMMEDIATE)
                break;
            unsigned i = (unsigned)(((uint8_t *)d - e.b.p) / STRIDE);
            post_recv(&e, i);
        }
    } else {
        for (unsigned k = 0; k < 20; k++)
            send_one(&e, k % NRECV, s->n, 8, END_IMM); /* some get through */
        TC_CHECK(tl_child_take(10000) == 'q'); /* the receiver is done */
    }
    tl_end(&e.t, e.vi, &e.b);
    return 0;
}

static void run(const char *faults, VIP_RELIABILITY_LEVEL rel, unsigned n, int expect_none)
{
    const char *extra[] = {"--faults", faults, NULL};
    struct thosts h;
    /* A lost frame of a ping-pong's last message waits for the timer:
     * keep it short on loopback. */
    setenv("VIP_NET_RTO_MS", "2", 1);
    if (thosts_start(&h, 2, extra) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    struct stream s = {&h, rel, n, "", expect_none};
    tl_discrim(s.disc, "flt");
    struct tl_child r, w;
    if (tl_spawn(&r, receiver, &s) != 0) {
        CU_FAIL("fork");
        thosts_stop(&h);
        return;
    }
    if (tl_spawn(&w, sender, &s) != 0) {
        CU_FAIL("fork");
        tl_child_kill(&r);
        thosts_stop(&h);
        return;
    }
    TCHILD_OK(&r, 300000);
    tl_parent_post(&w, 'q');
    TCHILD_OK(&w, 300000);
    thosts_stop(&h);
}

static void test_reliable_100k_under_faults(void)
{
    run("drop=0.1,dup=0.05,reorder=0.05,corrupt=0.01", VIP_SERVICE_RELIABLE_DELIVERY,
        tl_count(100000, 100000), 0);
}

static void test_reliable_reception_under_faults(void)
{
    run("drop=0.1,dup=0.05,reorder=0.05,corrupt=0.01", VIP_SERVICE_RELIABLE_RECEPTION,
        tl_count(5000, 20000), 0);
}

static void test_unreliable_counts_losses(void)
{
    run("drop=0.1,dup=0.05,reorder=0.05,corrupt=0.01", VIP_SERVICE_UNRELIABLE,
        tl_count(5000, 20000), 0);
}

static void test_unreliable_never_delivers_corrupt(void)
{
    run("corrupt=1", VIP_SERVICE_UNRELIABLE, 200, 1);
}

static const struct tl_test tests[] = {
    TL_TEST(test_unreliable_never_delivers_corrupt),
    TL_TEST(test_unreliable_counts_losses),
    TL_TEST(test_reliable_reception_under_faults),
    TL_TEST(test_reliable_100k_under_faults),
    TL_END,
};

int main(int argc, char **argv)
{
    return tl_main(argc, argv, "hosts under faults", tests);
}

/*
 * test_multi.c - many processes and many VIs at once: 4 pairs sharing a NIC,
 * one process with 64 connected VIs driven through completion queues, wait
 * timeouts, rejection (the order of client and server: test_connect.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tpp.h"

/* ---- several pairs of processes on one NIC at once ---------------------------- */
static void test_four_pairs_concurrent(void)
{
    enum { NP = 4 };
    struct tpp_cfg cfg[NP];
    struct tl_child srv[NP], cli[NP];
    static const VIP_RELIABILITY_LEVEL rel[NP] = {
        VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_RECEPTION,
        VIP_SERVICE_RELIABLE_DELIVERY};
    for (int i = 0; i < NP; i++) {
        srv[i].pid = cli[i].pid = -1;
        tpp_defaults(&cfg[i], rel[i], 3000, TPP_MIXED);
        cfg[i].sseg = 1 + (unsigned)i;
        cfg[i].rseg = 4 - (unsigned)i;
        cfg[i].imm_every = 5;
        cfg[i].nrecv = 2;
        if (i == 3) /* one pair across the two NICs */
            snprintf(cfg[i].srv_dev, sizeof cfg[i].srv_dev, "via1");
    }
    for (int i = 0; i < NP; i++) {
        CU_ASSERT_EQUAL(tl_spawn(&srv[i], tpp_child_server, &cfg[i]), 0);
        CU_ASSERT_EQUAL(tl_spawn(&cli[i], tpp_child_client, &cfg[i]), 0);
    }
    for (int i = 0; i < NP; i++) {
        TCHILD_OK(&srv[i], 120000);
        TCHILD_OK(&cli[i], 120000);
    }
}

/* ---- one process with many VIs, completion through CQs --------------------------- */
enum { NVI = 64, ROUNDS = 10, MSG = 1000 };

struct many {
    char disc[NVI][17];
};

struct side {
    struct tl_nic t;
    struct tl_buf b;
    VIP_CQ_HANDLE scq, rcq;
    VIP_VI_HANDLE vi[NVI];
};

#define RDESC(s, i) ((VIP_DESCRIPTOR *)(void *)((s)->b.p + 128u * (i)))
#define SDESC(s, i) ((VIP_DESCRIPTOR *)(void *)((s)->b.p + 128u * (NVI + (i))))
#define RDATA(s, i) ((s)->b.p + 65536u + 4096u * (i))
#define SDATA(s, i) ((s)->b.p + 65536u + 4096u * (NVI + (i)))

static int vi_index(struct side *s, VIP_VI_HANDLE v)
{
    for (int i = 0; i < NVI; i++)
        if (s->vi[i] == v)
            return i;
    return -1;
}

static VIP_RETURN many_setup(struct side *s, const char *dev)
{
    VIP_RETURN rc;
    memset(s, 0, sizeof *s);
    if ((rc = tl_open(&s->t, dev)) != VIP_SUCCESS ||
        (rc = tl_buf_alloc(&s->t, &s->b, 65536u + 4096u * 2 * NVI)) != VIP_SUCCESS ||
        (rc = VipCreateCQ(s->t.nic, 4 * NVI, &s->scq)) != VIP_SUCCESS ||
        (rc = VipCreateCQ(s->t.nic, 4 * NVI, &s->rcq)) != VIP_SUCCESS)
        return rc;
    for (int i = 0; i < NVI; i++) {
        if ((rc = tl_vi(&s->t, VIP_SERVICE_RELIABLE_DELIVERY, s->scq, s->rcq, &s->vi[i])) !=
            VIP_SUCCESS)
            return rc;
        tl_desc_1(RDESC(s, i), RDATA(s, i), 4096, s->b.mh);
        if ((rc = VipPostRecv(s->vi[i], RDESC(s, i), s->b.mh)) != VIP_SUCCESS)
            return rc;
    }
    return VIP_SUCCESS;
}

static void many_teardown(struct side *s)
{
    for (int i = 0; i < NVI; i++)
        if (s->vi[i]) {
            VipDisconnect(s->vi[i]);
            VipDestroyVi(s->vi[i]);
        }
    if (s->scq)
        VipDestroyCQ(s->scq);
    if (s->rcq)
        VipDestroyCQ(s->rcq);
    tl_buf_free(&s->b);
    tl_close(&s->t);
}

/* Send the message (vi i, round r) on VI i; its completion goes to the send CQ. */
static VIP_RETURN many_send(struct side *s, int i, unsigned r)
{
    uint32_t seq = (uint32_t)i * 1000u + r;
    tl_fill(SDATA(s, i), MSG, seq);
    tl_desc_1(SDESC(s, i), SDATA(s, i), MSG, s->b.mh);
    SDESC(s, i)->CS.Control |= VIP_CONTROL_IMMEDIATE;
    SDESC(s, i)->CS.ImmediateData = seq;
    return VipPostSend(s->vi[i], SDESC(s, i), s->b.mh);
}

/* Take one receive completion through the CQ; check it; repost; returns
 * the VI index or -1 with a reason. */
static int many_recv(struct side *s, unsigned r, char *why, size_t cap)
{
    VIP_VI_HANDLE v;
    VIP_BOOLEAN isr;
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc;
    for (;;) {
        rc = VipCQWait(s->rcq, 10000, &v, &isr);
        if (rc != VIP_SUCCESS) {
            snprintf(why, cap, "VipCQWait(recv): %s (%s)", vip_strerror(rc), vip_last_error());
            return -1;
        }
        if (isr)
            break;
        snprintf(why, cap, "send completion on the receive CQ");
        return -1;
    }
    int i = vi_index(s, v);
    if (i < 0) {
        snprintf(why, cap, "CQ named an unknown VI %p", v);
        return -1;
    }
    if ((rc = VipRecvDone(v, &d)) != VIP_SUCCESS || d != RDESC(s, i)) {
        snprintf(why, cap, "VI %d: VipRecvDone after the CQ entry: %s", i, vip_strerror(rc));
        return -1;
    }
    uint32_t seq = (uint32_t)i * 1000u + r;
    if ((d->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_DONE)) != VIP_STATUS_DONE ||
        d->CS.Length != MSG || !(d->CS.Status & VIP_STATUS_IMMEDIATE) ||
        d->CS.ImmediateData != seq || tl_verify(RDATA(s, i), MSG, seq) != -1) {
        snprintf(why, cap, "VI %d round %u: status 0x%x length %u imm %u (expected %u)", i, r,
                 d->CS.Status, d->CS.Length, d->CS.ImmediateData, seq);
        return -1;
    }
    tl_desc_1(RDESC(s, i), RDATA(s, i), 4096, s->b.mh);
    if ((rc = VipPostRecv(v, RDESC(s, i), s->b.mh)) != VIP_SUCCESS) {
        snprintf(why, cap, "repost: %s", vip_strerror(rc));
        return -1;
    }
    return i;
}

/* Reap n send completions through the send CQ. */
static int many_reap_sends(struct side *s, int n, char *why, size_t cap)
{
    for (int k = 0; k < n; k++) {
        VIP_VI_HANDLE v;
        VIP_BOOLEAN isr;
        VIP_DESCRIPTOR *d;
        VIP_RETURN rc = VipCQWait(s->scq, 10000, &v, &isr);
        if (rc != VIP_SUCCESS || isr) {
            snprintf(why, cap, "VipCQWait(send): %s isRecv %d", vip_strerror(rc), isr);
            return -1;
        }
        int i = vi_index(s, v);
        if (i < 0 || VipSendDone(v, &d) != VIP_SUCCESS || d != SDESC(s, i) ||
            (d->CS.Status & VIP_STATUS_ERROR_MASK)) {
            snprintf(why, cap, "send completion of VI %d bad", i);
            return -1;
        }
    }
    return 0;
}

/* The client: connects its 64 VIs, then each round sends on every VI and
 * collects every echo through the CQ. */
static int many_client(void *arg)
{
    struct many *m = arg;
    struct side s;
    char why[256];
    /* on the other NIC: a paced profile's SRAM holds too few doorbell pages
     * for both sides' VIs on one NIC (pci: 112) */
    TC_RC(many_setup(&s, "via1"), VIP_SUCCESS);
    for (int i = 0; i < NVI; i++)
        TC_RC(tl_request(&s.t, s.vi[i], "via0", m->disc[i], 20000), VIP_SUCCESS);
    for (unsigned r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < NVI; i++)
            TC_RC(many_send(&s, i, r), VIP_SUCCESS);
        if (many_reap_sends(&s, NVI, why, sizeof why))
            tl_child_fail(__FILE__, __LINE__, "client: %s", why);
        unsigned long seen[NVI] = {0};
        for (int k = 0; k < NVI; k++) {
            int i = many_recv(&s, r, why, sizeof why);
            if (i < 0)
                tl_child_fail(__FILE__, __LINE__, "client round %u: %s", r, why);
            if (seen[i]++)
                tl_child_fail(__FILE__, __LINE__, "VI %d completed twice in a round", i);
        }
    }
    /* nothing left over */
    VIP_VI_HANDLE v;
    VIP_BOOLEAN isr;
    TC_RC(VipCQDone(s.rcq, &v, &isr), VIP_NOT_DONE);
    TC_RC(VipCQDone(s.scq, &v, &isr), VIP_NOT_DONE);
    /* Only now may the server disconnect: that flushes our posted receives,
     * and their completions would land in the CQ checked above. */
    TC_CHECK(tl_child_post('d') == 0);
    TC_CHECK(tl_child_take(30000) == 'q');
    many_teardown(&s);
    return 0;
}

static void test_many_vis_with_cqs(void)
{
    struct many m;
    struct side s;
    struct tl_child ch = {.pid = -1};
    char why[256];
    for (int i = 0; i < NVI; i++)
        tl_discrim(m.disc[i], "v");
    TCHK(tl_spawn(&ch, many_client, &m) == 0);
    TRC(many_setup(&s, "via0"), VIP_SUCCESS);
    for (int i = 0; i < NVI; i++)
        TRC(tl_accept(&s.t, s.vi[i], m.disc[i], 20000), VIP_SUCCESS);
    for (int i = 0; i < NVI; i++)
        CU_ASSERT_EQUAL(tl_vi_state(s.vi[i]), VIP_STATE_CONNECTED);
    /* 64 VIs of this process and 64 of the child appear in vipctl vis */
    char *out = malloc(1 << 20);
    TCHK(out != NULL);
    CU_ASSERT_EQUAL(tl_vipctl("vis", out, 1 << 20), 0);
    unsigned lines = 0;
    for (char *p = out; (p = strstr(p, "CONNECTED")); p++)
        lines++;
    CU_ASSERT(lines >= 2 * NVI);
    free(out);
    for (unsigned r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < NVI; k++) {
            int i = many_recv(&s, r, why, sizeof why);
            if (i < 0) {
                fprintf(stderr, "\n  server round %u: %s\n", r, why);
                CU_FAIL("server receive");
                goto out;
            }
            /* echo: the same message back on the same VI */
            TRC(many_send(&s, i, r), VIP_SUCCESS);
        }
        if (many_reap_sends(&s, NVI, why, sizeof why)) {
            fprintf(stderr, "\n  server: %s\n", why);
            CU_FAIL("server send completions");
            goto out;
        }
    }
    TCHK(tl_parent_take(&ch, 30000) == 'd'); /* the client has checked its CQs */
    tl_parent_post(&ch, 'q');
out:
    many_teardown(&s);
    TCHILD_OK(&ch, 60000);
}

/* ---- timeouts ---------------------------------------------------------------------- */
static int idle_server(void *arg)
{
    const char *disc = arg;
    struct tl_nic t;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TC_RC(tl_accept(&t, vi, disc, 20000), VIP_SUCCESS);
    TC_CHECK(tl_child_take(30000) == 'q');
    VipDisconnect(vi);
    VipDestroyVi(vi);
    tl_close(&t);
    return 0;
}

static void test_wait_timeouts_connected(void)
{
    char disc[17];
    struct tl_child ch = {.pid = -1};
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_CQ_HANDLE cq = NULL;
    VIP_DESCRIPTOR *d;
    tl_discrim(disc, "t");
    TCHK(tl_spawn(&ch, idle_server, disc) == 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &b, 8192), VIP_SUCCESS);
    TRC(VipCreateCQ(t.nic, 8, &cq), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, cq, &vi), VIP_SUCCESS);
    tl_desc_1((VIP_DESCRIPTOR *)(void *)b.p, b.p + 4096, 4096, b.mh);
    TRC(VipPostRecv(vi, (VIP_DESCRIPTOR *)(void *)b.p, b.mh), VIP_SUCCESS);
    TRC(tl_request(&t, vi, "via0", disc, 20000), VIP_SUCCESS);
    uint64_t t0 = tl_now_ms();
    TRC_SOFT(VipRecvWait(vi, 50, &d), VIP_TIMEOUT);
    uint64_t dt = tl_now_ms() - t0;
    CU_ASSERT(dt >= 45 && dt < 2000);
    TRC_SOFT(VipRecvDone(vi, &d), VIP_NOT_DONE);
    TRC_SOFT(VipSendDone(vi, &d), VIP_NOT_DONE);
    VIP_VI_HANDLE v;
    VIP_BOOLEAN isr;
    t0 = tl_now_ms();
    TRC_SOFT(VipCQWait(cq, 80, &v, &isr), VIP_TIMEOUT);
    dt = tl_now_ms() - t0;
    CU_ASSERT(dt >= 75 && dt < 2000);
    TRC_SOFT(VipCQDone(cq, &v, &isr), VIP_NOT_DONE);
    t0 = tl_now_ms();
    TRC_SOFT(VipRecvWait(vi, 0, &d), VIP_TIMEOUT);
    CU_ASSERT(tl_now_ms() - t0 < 1000);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_CONNECTED);
    tl_parent_post(&ch, 'q');
out:
    if (vi) {
        VipDisconnect(vi);
        VipDestroyVi(vi);
    }
    if (cq)
        VipDestroyCQ(cq);
    tl_buf_free(&b);
    tl_close(&t);
    if (ch.pid > 0)
        tl_parent_post(&ch, 'q');
    TCHILD_OK(&ch, 30000);
}

static void test_connect_wait_timeout(void)
{
    struct tl_nic t = {0};
    char disc[17];
    VIP_NET_ADDRESS *local = NULL, *remote = NULL;
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES ra;
    tl_discrim(disc, "w");
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    local = tl_addr(t.nic, "localhost", disc);
    remote = calloc(1, sizeof *remote + 6 + 16);
    TCHK(local && remote);
    uint64_t t0 = tl_now_ms();
    TRC_SOFT(VipConnectWait(t.nic, local, 100, remote, &ra, &conn), VIP_TIMEOUT);
    uint64_t dt = tl_now_ms() - t0;
    CU_ASSERT(dt >= 90 && dt < 3000);
    /* twice in a row: the first wait left nothing behind */
    TRC_SOFT(VipConnectWait(t.nic, local, 50, remote, &ra, &conn), VIP_TIMEOUT);
out:
    free(local);
    free(remote);
    tl_close(&t);
}

static int rejecting_server(void *arg)
{
    const char *disc = arg;
    struct tl_nic t;
    TC_RC(tl_open(&t, "via1"), VIP_SUCCESS);
    VIP_NET_ADDRESS *local = tl_addr(t.nic, "localhost", disc);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + 16);
    TC_CHECK(local && remote);
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES ra;
    TC_RC(VipConnectWait(t.nic, local, 20000, remote, &ra, &conn), VIP_SUCCESS);
    TC_CHECK(remote->HostAddressLen == 6 && remote->DiscriminatorLen <= 16);
    TC_RC(VipConnectReject(conn), VIP_SUCCESS);
    free(local);
    free(remote);
    tl_close(&t);
    return 0;
}

static void test_reject(void)
{
    char disc[17];
    struct tl_child ch = {.pid = -1};
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    tl_discrim(disc, "j");
    TCHK(tl_spawn(&ch, rejecting_server, disc) == 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &vi), VIP_SUCCESS);
    TRC_SOFT(tl_request(&t, vi, "via1", disc, 20000), VIP_REJECT);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_IDLE);
out:
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
    TCHILD_OK(&ch, 30000);
}

/* ---- notifications -------------------------------------------------------------- */

struct note_cfg {
    char disc[17];
};

/* Peer: connect, send one 4-byte message, wait for the parent's 'q'. */
static int note_client(void *arg)
{
    const struct note_cfg *c = arg;
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &b, 4096), VIP_SUCCESS);
    TC_RC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TC_RC(tl_request(&t, vi, "localhost", c->disc, 20000), VIP_SUCCESS);
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)b.p;
    memcpy(b.p + 1024, "note", 4);
    tl_desc_1(sd, b.p + 1024, 4, b.mh);
    TC_RC(VipPostSend(vi, sd, b.mh), VIP_SUCCESS);
    VIP_DESCRIPTOR *d;
    TC_RC(VipSendWait(vi, 20000, &d), VIP_SUCCESS);
    TC_CHECK(tl_child_take(30000) == 'q');
    VipDisconnect(vi);
    VipDestroyVi(vi);
    tl_buf_free(&b);
    tl_close(&t);
    return 0;
}

struct note_seen {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    VIP_DESCRIPTOR *desc;
    VIP_VI_HANDLE vi;
    int calls;
};

static void on_recv(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
    (void)nic;
    struct note_seen *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->desc = d;
    s->vi = vi;
    s->calls++;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void on_never(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d)
{
    (void)nic;
    (void)vi;
    (void)d;
    ((struct note_seen *)ctx)->calls++;
}

/* VipRecvNotify runs its handler once, with the completed descriptor; a
 * notification still pending when the VI is destroyed never runs. */
static void test_recv_notify(void)
{
    struct note_cfg cfg;
    tl_discrim(cfg.disc, "nt");
    struct note_seen seen = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    struct note_seen never = {0};
    struct tl_child ch = {0};
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL, idle = NULL;
    TCHK(tl_spawn(&ch, note_client, &cfg) == 0);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &b, 4096), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &idle), VIP_SUCCESS);
    VIP_DESCRIPTOR *rd = (VIP_DESCRIPTOR *)(void *)b.p;
    tl_desc_1(rd, b.p + 1024, 64, b.mh);
    TRC(VipPostRecv(vi, rd, b.mh), VIP_SUCCESS);
    TRC(VipRecvNotify(vi, &seen, on_recv), VIP_SUCCESS);
    TRC(VipRecvNotify(idle, &never, on_never), VIP_SUCCESS);
    TRC(VipRecvNotify(NULL, &seen, on_recv), VIP_INVALID_PARAMETER);
    TRC(VipRecvNotify(vi, &seen, NULL), VIP_INVALID_PARAMETER);
    TRC(tl_accept(&t, vi, cfg.disc, 20000), VIP_SUCCESS);
    pthread_mutex_lock(&seen.lock);
    uint64_t until = tl_now_ms() + 20000;
    while (!seen.calls && tl_now_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&seen.cond, &seen.lock, &ts);
    }
    pthread_mutex_unlock(&seen.lock);
    TCHK(seen.calls == 1);
    TCHK(seen.desc == rd && seen.vi == vi);
    TCHK(rd->CS.Status == (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE));
    TCHK(rd->CS.Length == 4 && memcmp(b.p + 1024, "note", 4) == 0);
    VIP_DESCRIPTOR *d;
    TRC(VipRecvDone(vi, &d), VIP_NOT_DONE); /* the handler took it */
    TRC(VipDestroyVi(idle), VIP_SUCCESS);   /* joins its pending notification */
    idle = NULL;
    TCHK(never.calls == 0);
out:
    if (ch.pid)
        tl_parent_post(&ch, 'q');
    if (idle)
        VipDestroyVi(idle);
    if (vi) {
        VipDisconnect(vi);
        VipDestroyVi(vi);
    }
    if (ch.pid)
        TCHILD_OK(&ch, 30000);
    tl_buf_free(&b);
    if (t.nic)
        tl_close(&t);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_four_pairs_concurrent),
        TL_TEST(test_many_vis_with_cqs),
        TL_TEST(test_wait_timeouts_connected),
        TL_TEST(test_connect_wait_timeout),
        TL_TEST(test_reject),
        TL_TEST(test_recv_notify),
        TL_END,
    };
    return tl_main(argc, argv, "multi", tests);
}

/*
 * test_threads.c - several POSIX threads of one process (on via0) using one
 * NIC handle at once, as multi-threaded VIPL programs do; peers are forked
 * children on via1. Threads never call CUnit: they report (treport), a fatal
 * report makes every thread leave, and the test asserts once it joined them.
 * TL_SCALE=n divides the message and iteration counts (ASan, TSan, valgrind).
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/tlib.h"

enum { DSZ = 256, NVMAX = 4, MAXIT = 600, CHK = 6, CLEN = 200 };

/* ---- what the threads report ------------------------------------------------------ */
static struct { pthread_mutex_t lock; unsigned n; char msg[4][300]; } tf = {
    .lock = PTHREAD_MUTEX_INITIALIZER};
static atomic_int g_stop;    /* a thread failed: every thread leaves */
static atomic_int g_quiesce; /* test D: stop making traffic */

/* Record a failure; a fatal one stops every thread (and only the first
 * fatal one is recorded: the others follow from it). */
static void treport(int fatal, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void treport(int fatal, int line, const char *fmt, ...)
{
    va_list ap;
    if (fatal && atomic_exchange(&g_stop, 1))
        return;
    pthread_mutex_lock(&tf.lock);
    if (tf.n < 4) {
        int k = snprintf(tf.msg[tf.n], sizeof tf.msg[0], "line %d: ", line);
        va_start(ap, fmt);
        vsnprintf(tf.msg[tf.n] + k, sizeof tf.msg[0] - (size_t)k, fmt, ap);
        va_end(ap);
    }
    tf.n++;
    pthread_mutex_unlock(&tf.lock);
}

static int rc_is(VIP_RETURN got, VIP_RETURN want, int line, const char *call)
{
    if (got != want)
        treport(1, line, "%s returned %s, expected %s (%s)", call, vip_strerror(got),
                vip_strerror(want), vip_last_error());
    return got == want;
}
#define TFAIL(...) do { treport(1, __LINE__, __VA_ARGS__); goto out; } while (0)
#define TREQ(call, want) do { if (!rc_is((call), (want), __LINE__, #call)) goto out; } while (0)

/* After joining: print the threads' reports; how many there were. */
static unsigned th_reports(void)
{
    pthread_mutex_lock(&tf.lock);
    unsigned n = tf.n;
    for (unsigned i = 0; i < n && i < 4; i++)
        fprintf(stderr, "\n  thread: %s", tf.msg[i]);
    if (n)
        fprintf(stderr, "%s\n", n > 4 ? "\n  (and more)" : "");
    tf.n = 0;
    pthread_mutex_unlock(&tf.lock);
    return n;
}
#define TH_CHECK() do { if (th_reports()) { CU_FAIL("a thread failed"); goto out; } } while (0)

struct thset { pthread_t t[8]; unsigned n; };

static void th_start(struct thset *s, void *(*fn)(void *), void *arg)
{
    if (s->n < sizeof s->t / sizeof s->t[0] && pthread_create(&s->t[s->n], NULL, fn, arg) == 0)
        s->n++;
    else
        treport(1, __LINE__, "cannot start a thread");
}

static void th_join(struct thset *s)
{
    while (s->n)
        pthread_join(s->t[--s->n], NULL);
}

static unsigned scaled(unsigned n, unsigned min)
{
    const char *e = getenv("TL_SCALE");
    long d = e ? strtol(e, NULL, 10) : 1;
    unsigned v = n / (unsigned)(d < 1 ? 1 : d);
    return v < min ? min : v;
}

/* The next completion of a work queue: VipSendWait/VipRecvWait in slices,
 * or with spin VipSendDone/VipRecvDone in a loop; up to 20 s, and not long
 * after another thread failed. */
static VIP_RETURN next_done(VIP_VI_HANDLE vi, int recv, int spin, VIP_DESCRIPTOR **d)
{
    uint64_t until = tl_now_ms() + 20000;
    for (;;) {
        VIP_RETURN rc = spin ? (recv ? VipRecvDone(vi, d) : VipSendDone(vi, d))
                             : (recv ? VipRecvWait(vi, 100, d) : VipSendWait(vi, 100, d));
        if ((rc != VIP_TIMEOUT && rc != VIP_NOT_DONE) || atomic_load(&g_stop) ||
            tl_now_ms() > until)
            return rc;
        if (spin)
            sched_yield();
    }
}

#define status_ok(d)                                                                      \
    (((d)->CS.Status & (VIP_STATUS_ERROR_MASK | VIP_STATUS_DONE)) == VIP_STATUS_DONE)

/* ---- endpoints: a VI of the parent with w send and w receive slots ----------------- */
/* Message seq of endpoint idx: its length (every 8th the maximum) and its
 * tag (immediate data and payload seed). */
#define msg_len(idx, seq, max)                                                            \
    ((seq) % 8 == 3 ? (max) : 1u + ((seq) * 2654435761u + (idx) * 40503u) % (max))
#define msg_tag(idx, seq) ((uint32_t)(idx) << 24 | (seq))

struct ep {
    VIP_VI_HANDLE vi;
    unsigned idx, w, cap; /* cap: messages to send (test D: at most) */
    uint32_t maxlen, stride;
    uint8_t *base;
    VIP_MEM_HANDLE mh;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned sent, credited;   /* under lock: sends posted, echoes taken */
    unsigned sposted, sreaped; /* the sending thread's own */
    atomic_uint received;
    atomic_int sender_done;
    _Atomic unsigned char *seen; /* per seq: how often its echo was taken */
};

#define SDESC(e, k) ((VIP_DESCRIPTOR *)(void *)((e)->base + DSZ * (size_t)(k)))
#define RDESC(e, k) ((VIP_DESCRIPTOR *)(void *)((e)->base + DSZ * (size_t)((e)->w + (k))))
#define SDATA(e, k) ((e)->base + 2u * DSZ * (e)->w + (size_t)(e)->stride * (k))
#define RDATA(e, k) ((e)->base + 2u * DSZ * (e)->w + (size_t)(e)->stride * ((e)->w + (k)))

#define ep_bytes(w, maxlen) (2u * (w) * (DSZ + (size_t)(((maxlen) + 63u) & ~63u)))

static VIP_RETURN ep_post_recv(struct ep *e, unsigned k)
{
    tl_desc_split(RDESC(e, k), RDATA(e, k), e->maxlen, 2, e->mh);
    return VipPostRecv(e->vi, RDESC(e, k), e->mh);
}

/* Post message seq from send slot seq % w (whose last use the caller reaped). */
static VIP_RETURN ep_send(struct ep *e, unsigned seq)
{
    unsigned k = seq % e->w;
    uint32_t len = msg_len(e->idx, seq, e->maxlen), tag = msg_tag(e->idx, seq);
    tl_fill(SDATA(e, k), len, tag);
    tl_desc_1(SDESC(e, k), SDATA(e, k), len, e->mh);
    SDESC(e, k)->CS.Control |= VIP_CONTROL_IMMEDIATE;
    SDESC(e, k)->CS.ImmediateData = tag;
    pthread_mutex_lock(&e->lock); /* first: the echo may come before VipPostSend returns */
    e->sent++;
    pthread_mutex_unlock(&e->lock);
    e->sposted++;
    return VipPostSend(e->vi, SDESC(e, k), e->mh);
}

/* Sends complete in order: d must be the oldest unreaped one. */
static int ep_reaped(struct ep *e, VIP_DESCRIPTOR *d)
{
    VIP_DESCRIPTOR *want = SDESC(e, e->sreaped % e->w);
    if (d != want || !status_ok(d)) {
        treport(1, __LINE__, "VI %u: send %u completed as %p status 0x%x, expected %p",
                e->idx, e->sreaped, (void *)d, d->CS.Status, (void *)want);
        return -1;
    }
    e->sreaped++;
    return 0;
}

/* Check the echo in receive descriptor d (once per seq): its seq, or -1. */
static long ep_echo(struct ep *e, VIP_DESCRIPTOR *d)
{
    ptrdiff_t off = (uint8_t *)d - (uint8_t *)RDESC(e, 0);
    uint32_t tag = d->CS.ImmediateData, seq = tag & 0xFFFFFFu, len;
    long bad = 0;
    if (off < 0 || off % DSZ || off / DSZ >= (ptrdiff_t)e->w)
        treport(1, __LINE__, "VI %u: descriptor %p is none of its receives", e->idx,
                (void *)d);
    else if (!status_ok(d) || !(d->CS.Status & VIP_STATUS_IMMEDIATE) || tag >> 24 != e->idx ||
             seq >= e->cap)
        treport(1, __LINE__, "VI %u: receive status 0x%x immediate 0x%x", e->idx,
                d->CS.Status, tag);
    else if (d->CS.Length != (len = msg_len(e->idx, seq, e->maxlen)) ||
             (bad = tl_verify(RDATA(e, off / DSZ), len, tag)) != -1)
        treport(1, __LINE__, "VI %u message %u: length %u (expected %u), bad byte %ld",
                e->idx, seq, d->CS.Length, len, bad);
    else if (atomic_fetch_add(&e->seen[seq], 1))
        treport(1, __LINE__, "VI %u: the echo of message %u was taken twice", e->idx, seq);
    else
        return (long)seq;
    return -1;
}

/* Repost receive d and let the sender send one more. */
static VIP_RETURN ep_credit(struct ep *e, VIP_DESCRIPTOR *d)
{
    VIP_RETURN rc = ep_post_recv(e, (unsigned)(((uint8_t *)d - (uint8_t *)RDESC(e, 0)) / DSZ));
    atomic_fetch_add(&e->received, 1);
    pthread_mutex_lock(&e->lock);
    e->credited++;
    pthread_cond_signal(&e->cond);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

/* Wait (up to 30 s) until fewer than w messages are unanswered; 1 if so. */
static int ep_may_send(struct ep *e)
{
    uint64_t until = tl_now_ms() + 30000;
    pthread_mutex_lock(&e->lock);
    while (e->sent - e->credited >= e->w && !atomic_load(&g_stop) && tl_now_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000;
        ts.tv_sec += ts.tv_nsec / 1000000000;
        ts.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&e->cond, &e->lock, &ts);
    }
    int ok = e->sent - e->credited < e->w;
    pthread_mutex_unlock(&e->lock);
    return ok;
}

/* Every sender is done and every echo it asked for was taken. */
static int all_echoed(struct ep *e, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        pthread_mutex_lock(&e[i].lock);
        unsigned s = e[i].sent;
        pthread_mutex_unlock(&e[i].lock);
        if (!atomic_load(&e[i].sender_done) || atomic_load(&e[i].received) != s)
            return 0;
    }
    return 1;
}

/* ---- the echo peer: a child on via1 that sends every message back --------------------- */
struct echo_cfg {
    unsigned nvi, slots, maxlen;
    VIP_RELIABILITY_LEVEL rel;
    char disc[NVMAX][17];
};

static int echo_child(void *arg)
{
    const struct echo_cfg *c = arg;
    struct tl_nic t;
    struct tl_buf b;
    VIP_CQ_HANDLE cq;
    VIP_VI_HANDLE vi[NVMAX];
    size_t stride = (c->maxlen + 63u) & ~(size_t)63u, per = c->slots * (2u * DSZ + stride);
#define ERD(i, k) ((VIP_DESCRIPTOR *)(void *)(b.p + per * (i) + DSZ * (size_t)(k)))
#define ESD(i, k) ((VIP_DESCRIPTOR *)(void *)(b.p + per * (i) + DSZ * (size_t)(c->slots + (k))))
#define EDATA(i, k) (b.p + per * (i) + 2u * DSZ * c->slots + stride * (k))
    TC_RC(tl_open(&t, "via1"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &b, per * c->nvi), VIP_SUCCESS);
    TC_RC(VipCreateCQ(t.nic, 2u * c->nvi * c->slots + 8u, &cq), VIP_SUCCESS);
    for (unsigned i = 0; i < c->nvi; i++) {
        TC_RC(tl_vi(&t, c->rel, NULL, cq, &vi[i]), VIP_SUCCESS);
        for (unsigned k = 0; k < c->slots; k++) {
            tl_desc_split(ERD(i, k), EDATA(i, k), c->maxlen, 2, b.mh);
            TC_RC(VipPostRecv(vi[i], ERD(i, k), b.mh), VIP_SUCCESS);
        }
    }
    for (unsigned i = 0; i < c->nvi; i++)
        TC_RC(tl_accept(&t, vi[i], c->disc[i], 20000), VIP_SUCCESS);
    uint64_t until = tl_now_ms() + 240000;
    pid_t parent = getppid();
    for (;;) {
        VIP_VI_HANDLE v;
        VIP_BOOLEAN isr;
        VIP_DESCRIPTOR *d, *sd;
        unsigned i = 0;
        VIP_RETURN rc = VipCQWait(cq, 50, &v, &isr);
        if (rc == VIP_TIMEOUT) { /* idle: 'q' comes once the parent's threads are done */
            if (tl_child_take(0) == 'q')
                break;
            TC_CHECK(getppid() == parent && tl_now_ms() < until); /* the parent lives */
            continue;
        }
        TC_RC(rc, VIP_SUCCESS);
        while (i < c->nvi && vi[i] != v)
            i++;
        TC_CHECK(i < c->nvi && isr);
        TC_RC(VipRecvDone(v, &d), VIP_SUCCESS);
        size_t k = (size_t)((uint8_t *)d - (uint8_t *)ERD(i, 0)) / DSZ;
        TC_CHECK(k < c->slots && d == ERD(i, k));
        uint32_t len = d->CS.Length, tag = d->CS.ImmediateData;
        TC_CHECK(status_ok(d) && (d->CS.Status & VIP_STATUS_IMMEDIATE) && len <= c->maxlen &&
                 tl_verify(EDATA(i, k), len, tag) == -1);
        tl_desc_1(ESD(i, k), EDATA(i, k), len, b.mh);
        ESD(i, k)->CS.Control |= VIP_CONTROL_IMMEDIATE;
        ESD(i, k)->CS.ImmediateData = tag;
        TC_RC(VipPostSend(v, ESD(i, k), b.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(v, 20000, &sd), VIP_SUCCESS);
        TC_CHECK(sd == ESD(i, k) && status_ok(sd));
        tl_desc_split(d, EDATA(i, k), c->maxlen, 2, b.mh);
        TC_RC(VipPostRecv(v, d, b.mh), VIP_SUCCESS);
    }
    for (unsigned i = 0; i < c->nvi; i++) {
        VipDisconnect(vi[i]);
        TC_RC(VipDestroyVi(vi[i]), VIP_SUCCESS);
    }
    TC_RC(VipDestroyCQ(cq), VIP_SUCCESS);
    tl_buf_free(&b);
    tl_close(&t);
    return 0;
}

/* The parent's side: the echo child, via0, the endpoints, their CQ. */
struct rig {
    struct echo_cfg cfg;
    struct tl_child ch;
    struct tl_nic t;
    struct tl_buf b;
    struct ep e[NVMAX];
    unsigned laid, made;
    VIP_CQ_HANDLE cq;
};

/* Start a test's threads' bookkeeping and the echo child, open via0, lay out
 * n endpoints (the first nbound with their receives on r->cq) and extra
 * bytes after them, post every receive, connect. */
static VIP_RETURN rig_up(struct rig *r, unsigned n, unsigned w, uint32_t maxlen,
                         VIP_RELIABILITY_LEVEL rel, unsigned cap, size_t extra, unsigned nbound)
{
    VIP_RETURN rc;
    pthread_mutex_lock(&tf.lock);
    tf.n = 0;
    pthread_mutex_unlock(&tf.lock);
    atomic_store(&g_stop, 0);
    atomic_store(&g_quiesce, 0);
    memset(r, 0, sizeof *r);
    r->cfg = (struct echo_cfg){.nvi = n, .slots = w + 2, .maxlen = maxlen, .rel = rel};
    for (unsigned i = 0; i < n; i++)
        tl_discrim(r->cfg.disc[i], "e");
    if (tl_spawn(&r->ch, echo_child, &r->cfg) != 0)
        return VIP_ERROR_RESOURCE;
    if ((rc = tl_open(&r->t, "via0")) != VIP_SUCCESS ||
        (rc = tl_buf_alloc(&r->t, &r->b, n * ep_bytes(w, maxlen) + extra)) != VIP_SUCCESS ||
        (nbound && (rc = VipCreateCQ(r->t.nic, 2048, &r->cq)) != VIP_SUCCESS))
        return rc;
    for (unsigned i = 0; i < n; i++) {
        struct ep *e = &r->e[i];
        *e = (struct ep){.idx = i, .w = w, .cap = cap, .maxlen = maxlen, .mh = r->b.mh,
                         .stride = (maxlen + 63u) & ~63u,
                         .base = r->b.p + i * ep_bytes(w, maxlen)};
        pthread_mutex_init(&e->lock, NULL);
        pthread_cond_init(&e->cond, NULL);
        r->laid++;
        if (!(e->seen = calloc(cap, sizeof *e->seen)))
            return VIP_ERROR_RESOURCE;
        if ((rc = tl_vi(&r->t, rel, NULL, i < nbound ? r->cq : NULL, &e->vi)) != VIP_SUCCESS)
            return rc;
        r->made++;
        for (unsigned k = 0; k < w; k++)
            if ((rc = ep_post_recv(e, k)) != VIP_SUCCESS)
                return rc;
    }
    for (unsigned i = 0; i < n; i++)
        if ((rc = tl_request(&r->t, r->e[i].vi, "via1", r->cfg.disc[i], 20000)) != VIP_SUCCESS)
            return rc;
    return VIP_SUCCESS;
}

/* Stop the peer first (it is idle: the threads are joined), so that it never
 * sees our disconnects; then take everything down. */
static void rig_down(struct rig *r, int ok)
{
    if (r->ch.pid > 0) {
        tl_parent_post(&r->ch, 'q');
        TCHILD_OK(&r->ch, ok ? 60000 : 3000);
    }
    for (unsigned i = 0; i < r->made; i++) {
        VipDisconnect(r->e[i].vi);
        CU_ASSERT_EQUAL(VipDestroyVi(r->e[i].vi), VIP_SUCCESS);
    }
    if (r->cq)
        CU_ASSERT_EQUAL(VipDestroyCQ(r->cq), VIP_SUCCESS);
    for (unsigned i = 0; i < r->laid; i++) {
        pthread_mutex_destroy(&r->e[i].lock);
        pthread_cond_destroy(&r->e[i].cond);
        free((void *)r->e[i].seen);
    }
    tl_buf_free(&r->b);
    tl_close(&r->t);
}

/* ---- A, B: a thread posting sends and one waiting for receives, per VI --------------- */
/* Sends cap messages (test D: until quiesced), w at most unanswered, reaping
 * with VipSendWait before a send slot is used again. */
static void *pair_sender(void *arg)
{
    struct ep *e = arg;
    VIP_DESCRIPTOR *d;
    for (unsigned seq = 0; seq < e->cap && !atomic_load(&g_quiesce); seq++) {
        if (e->sposted - e->sreaped == e->w) {
            TREQ(next_done(e->vi, 0, 0, &d), VIP_SUCCESS);
            if (ep_reaped(e, d))
                goto out;
        }
        if (!ep_may_send(e))
            TFAIL("VI %u: no echo within 30 s (%u sent)", e->idx, seq);
        TREQ(ep_send(e, seq), VIP_SUCCESS);
    }
    while (e->sreaped < e->sposted) {
        TREQ(next_done(e->vi, 0, 0, &d), VIP_SUCCESS);
        if (ep_reaped(e, d))
            goto out;
    }
out:
    atomic_store(&e->sender_done, 1);
    return NULL;
}

static void *pair_receiver(void *arg)
{
    struct ep *e = arg;
    VIP_DESCRIPTOR *d;
    for (unsigned n = 0; n < e->cap; n++) {
        TREQ(next_done(e->vi, 1, 0, &d), VIP_SUCCESS);
        if (d != RDESC(e, n % e->w)) /* a VI's receives complete in order */
            TFAIL("VI %u: echo %u completed descriptor %p, expected %p", e->idx, n,
                  (void *)d, (void *)RDESC(e, n % e->w));
        long seq = ep_echo(e, d);
        if (seq < 0)
            goto out;
        if (seq != (long)n)
            TFAIL("VI %u: echo %u carries message %ld", e->idx, n, seq);
        TREQ(ep_credit(e, d), VIP_SUCCESS);
    }
out:
    return NULL;
}

static void run_pairs(unsigned n, unsigned w, uint32_t maxlen, VIP_RELIABILITY_LEVEL rel,
                      unsigned nmsgs)
{
    struct rig r;
    struct thset ts = {.n = 0};
    VIP_DESCRIPTOR *d;
    int ok = 0;
    TRC(rig_up(&r, n, w, maxlen, rel, nmsgs, 0, 0), VIP_SUCCESS);
    for (unsigned i = 0; i < n; i++) {
        th_start(&ts, pair_receiver, &r.e[i]);
        th_start(&ts, pair_sender, &r.e[i]);
    }
    th_join(&ts);
    TH_CHECK();
    for (unsigned i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(atomic_load(&r.e[i].received), nmsgs);
        CU_ASSERT_EQUAL(r.e[i].sreaped, nmsgs);
        CU_ASSERT_EQUAL(VipRecvDone(r.e[i].vi, &d), VIP_NOT_DONE);
        CU_ASSERT_EQUAL(VipSendDone(r.e[i].vi, &d), VIP_NOT_DONE);
    }
    ok = 1;
out:
    atomic_store(&g_stop, 1);
    th_join(&ts);
    rig_down(&r, ok);
}

/* Four VIs, a thread posting sends and another waiting for receives on each
 * (eight threads); the peer echoes; every payload is checked. */
static void test_send_recv_threads_per_vi(void)
{
    run_pairs(4, 8, 4096, VIP_SERVICE_RELIABLE_DELIVERY, scaled(2000, 20));
}

/* Two threads share ONE VI: one posts sends and reaps them with VipSendWait,
 * the other posts receives and waits with VipRecvWait. Messages up to 192 KiB,
 * three in flight, overfill the link: the send pipeline parks and is carried
 * on by whichever of the two threads lends the NIC its CPU. */
static void test_two_threads_one_vi(void)
{
    run_pairs(1, 3, 192 * 1024, VIP_SERVICE_RELIABLE_RECEPTION, scaled(400, 8));
}

/* ---- C: several threads waiting on one CQ ------------------------------------------- */
/* Test D's VIs (below) may feed the CQ too; each is recorded: LIVE, DYING
 * while VipDestroyVi runs, GONE after (stamped with an epoch). */
enum { LIVE, DYING, GONE };

struct churn {
    pthread_mutex_t lock;
    struct crec { VIP_VI_HANDLE h; int state, armed, mode; unsigned seen; unsigned long gone; }
        r[MAXIT];
    unsigned nrec;
    atomic_ulong epoch;
    atomic_uint conn_lost; /* VIP_ERROR_CONN_LOST callbacks */
    atomic_int collect;    /* the error callback is ours */
    VIP_VI_HANDLE stable[NVMAX];
    struct rig *rig; /* the rest for the churn thread */
    uint8_t *base;
    const char *disc;
    unsigned iters;
};
static void churn_note(struct churn *ch, VIP_VI_HANDLE h, unsigned long e0);

struct cqw {
    VIP_CQ_HANDLE cq;
    struct ep *e;     /* ne endpoints */
    unsigned ne, spin; /* spin: VipCQDone in a loop rather than VipCQWait */
    struct churn *ch; /* test D: churn VIs feed the CQ too */
    unsigned long taken;
};

/* Take the endpoints' receive completions from the CQ until all are echoed. */
static void *cq_waiter(void *arg)
{
    struct cqw *w = arg;
    uint64_t until = tl_now_ms() + 120000;
    while (!atomic_load(&g_stop)) {
        VIP_VI_HANDLE h = NULL;
        VIP_BOOLEAN isr = VIP_FALSE;
        VIP_DESCRIPTOR *d;
        struct ep *e = NULL;
        unsigned long e0 = w->ch ? atomic_load(&w->ch->epoch) : 0;
        VIP_RETURN rc = w->spin ? VipCQDone(w->cq, &h, &isr) : VipCQWait(w->cq, 20, &h, &isr);
        if (rc == VIP_NOT_DONE || rc == VIP_TIMEOUT) {
            if (all_echoed(w->e, w->ne))
                break;
            if (tl_now_ms() > until)
                TFAIL("CQ waiter: echoes still missing after 120 s");
            if (w->spin)
                sched_yield();
            continue;
        }
        TREQ(rc, VIP_SUCCESS);
        if (!isr)
            TFAIL("a send completion (VI %p) on a receive CQ", (void *)h);
        for (unsigned i = 0; i < w->ne; i++)
            if (w->e[i].vi == h)
                e = &w->e[i];
        if (!e && !w->ch)
            TFAIL("the CQ named VI %p, none of its VIs", (void *)h);
        if (!e) {
            churn_note(w->ch, h, e0);
            continue;
        }
        TREQ(VipRecvDone(h, &d), VIP_SUCCESS); /* the CQ named it: one is there */
        if (ep_echo(e, d) < 0)
            goto out;
        TREQ(ep_credit(e, d), VIP_SUCCESS);
        w->taken++;
    }
out:
    return NULL;
}

/* Four VIs feed their receive completions to ONE CQ; three threads wait on it
 * (two in VipCQWait, one spinning in VipCQDone) while a thread per VI sends.
 * Each completion is taken exactly once overall: every echo is seen once,
 * the takes add up to the messages sent, and the CQ is empty at the end. */
static void test_waiters_share_one_cq(void)
{
    enum { N = 4, W = 6, NW = 3 };
    unsigned nmsgs = scaled(1500, 15);
    unsigned long taken = 0;
    struct rig r;
    struct thset ts = {.n = 0};
    struct cqw w[NW];
    VIP_VI_HANDLE h;
    VIP_BOOLEAN isr;
    int ok = 0;
    TRC(rig_up(&r, N, W, 1024, VIP_SERVICE_RELIABLE_DELIVERY, nmsgs, 0, N), VIP_SUCCESS);
    for (unsigned i = 0; i < NW; i++) {
        w[i] = (struct cqw){.cq = r.cq, .e = r.e, .ne = N, .spin = i == NW - 1};
        th_start(&ts, cq_waiter, &w[i]);
    }
    for (unsigned i = 0; i < N; i++)
        th_start(&ts, pair_sender, &r.e[i]);
    th_join(&ts);
    TH_CHECK();
    for (unsigned i = 0; i < NW; i++)
        taken += w[i].taken;
    CU_ASSERT_EQUAL(taken, (unsigned long)N * nmsgs);
    for (unsigned i = 0; i < N; i++) /* with no echo taken twice (ep_echo): each once */
        CU_ASSERT_EQUAL(atomic_load(&r.e[i].received), nmsgs);
    CU_ASSERT_EQUAL(VipCQDone(r.cq, &h, &isr), VIP_NOT_DONE);
    ok = 1;
out:
    atomic_store(&g_stop, 1);
    th_join(&ts);
    rig_down(&r, ok);
}

/* ---- D: VIs destroyed while other threads progress the NIC ----------------------------- */
/*
 * A CQ entry naming churn VI h, taken by a call that began at epoch e0. Churn
 * VIs tend to reuse one address and VI id. Acceptable: some VI at h was
 * destroyed after e0 (h is not used then); or the VI at h is live or dying,
 * "armed" (something could complete on it) and has had no more entries than
 * receives (if live, h is used: the lock keeps it from being destroyed).
 * Else the entry names a VI destroyed before the call began. A bad entry is
 * reported but not fatal: the test goes on destroying VIs.
 */
static void churn_note(struct churn *ch, VIP_VI_HANDLE h, unsigned long e0)
{
    struct crec *live = NULL;
    int late = 0;
    VIP_VI_STATE st;
    VIP_VI_ATTRIBUTES a;
    VIP_BOOLEAN se, re;
    pthread_mutex_lock(&ch->lock);
    for (unsigned i = 0; i < ch->nrec; i++) {
        if (ch->r[i].h == h && ch->r[i].state != GONE)
            live = &ch->r[i];
        late |= ch->r[i].h == h && ch->r[i].state == GONE && ch->r[i].gone > e0;
    }
    if (!late && !live)
        treport(0, __LINE__, "the CQ named VI %p, destroyed before the wait began", (void *)h);
    else if (!late && (!live->armed || ++live->seen > CHK))
        treport(0, __LINE__, "the CQ named churn VI %u (mode %d) %s", (unsigned)(live - ch->r),
                live->mode, live->armed ? "more often than it had receives"
                                        : "before anything could complete on it");
    else if (!late && live->state == LIVE && VipQueryVi(h, &st, &a, &se, &re) != VIP_SUCCESS)
        treport(0, __LINE__, "VipQueryVi on the live churn VI the CQ named: %s",
                vip_last_error());
    pthread_mutex_unlock(&ch->lock);
}

static void churn_set(struct churn *ch, struct crec *r, int state)
{
    pthread_mutex_lock(&ch->lock);
    if (state == GONE)
        r->gone = atomic_fetch_add(&ch->epoch, 1) + 1;
    r->armed = 1; /* its receives may complete from now on (or as it is destroyed) */
    r->state = state;
    pthread_mutex_unlock(&ch->lock);
}

/* The error callback: a stable VI must never fail; a churn VI may only lose
 * its connection, which only the mode-4 VIs (whose peer leaves) do. */
static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *ed)
{
    struct churn *ch = ctx;
    if (!atomic_load(&ch->collect))
        return;
    for (unsigned i = 0; i < NVMAX; i++)
        if (ch->stable[i] && ed->ViHandle == ch->stable[i])
            treport(1, __LINE__, "asynchronous error %d on stable VI %u", (int)ed->ErrorCode, i);
    if (ed->ErrorCode == VIP_ERROR_CONN_LOST && ed->ResourceCode == VIP_RESOURCE_VI)
        atomic_fetch_add(&ch->conn_lost, 1);
    else
        treport(1, __LINE__, "asynchronous error %d (resource %d)", (int)ed->ErrorCode,
                (int)ed->ResourceCode);
}

/* The churn peer (via1): accepts each connection with a fresh unreliable VI
 * and streams CLEN-byte messages (tag = seq) until the connection goes, or
 * sends close_after of them and disconnects first. */
struct churn_cfg {
    char disc[17];
    unsigned nconn;
    unsigned char close_after[MAXIT];
};

static int churn_peer(void *arg)
{
    const struct churn_cfg *c = arg;
    struct tl_nic t;
    struct tl_buf b;
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer cannot follow a thread created in a child forked from
     * a threaded process ("dup thread"); this peer polls in its own calls,
     * so its NIC needs no thread. What is under test is the parent. */
    setenv("VIP_PROGRESS", "manual", 1);
#endif
    TC_RC(tl_open(&t, "via1"), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &b, 4096), VIP_SUCCESS);
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)b.p, *d;
    for (unsigned n = 0; n < c->nconn; n++) {
        VIP_VI_HANDLE vi;
        TC_RC(tl_vi(&t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &vi), VIP_SUCCESS);
        TC_RC(tl_accept(&t, vi, c->disc, 20000), VIP_SUCCESS);
        uint64_t until = tl_now_ms() + 20000;
        for (uint32_t seq = 0; !c->close_after[n] || seq < c->close_after[n]; seq++) {
            tl_fill(b.p + 1024, CLEN, seq);
            tl_desc_1(sd, b.p + 1024, CLEN, b.mh);
            sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
            sd->CS.ImmediateData = seq;
            TC_RC(VipPostSend(vi, sd, b.mh), VIP_SUCCESS);
            TC_RC(VipSendWait(vi, 20000, &d), VIP_SUCCESS);
            TC_CHECK(d == sd && tl_now_ms() < until);
            if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
                TC_CHECK(!c->close_after[n]); /* the parent disconnected */
                break;
            }
        }
        TC_RC(VipDisconnect(vi), VIP_SUCCESS);
        TC_RC(VipDestroyVi(vi), VIP_SUCCESS);
    }
    tl_buf_free(&b);
    tl_close(&t);
    return 0;
}

#define CDESC(a, k) ((VIP_DESCRIPTOR *)(void *)((a)->base + DSZ * (size_t)(k)))
#define CDATA(a, k) ((a)->base + DSZ * (size_t)(CHK + (k)))

/* Receive k of a churn VI: 1 if it holds message k, 2 if flushed, else 0. */
static int churn_got(struct churn *a, VIP_DESCRIPTOR *d, unsigned k, int data, int flush)
{
    if (d == CDESC(a, k) && data && status_ok(d) && (d->CS.Status & VIP_STATUS_IMMEDIATE) &&
        d->CS.ImmediateData == k && d->CS.Length == CLEN && tl_verify(CDATA(a, k), CLEN, k) == -1)
        return 1;
    if (d == CDESC(a, k) && flush && (d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR))
        return 2;
    treport(1, __LINE__, "churn receive %u: descriptor %p status 0x%x imm %u length %u", k,
            (void *)d, d->CS.Status, d->CS.ImmediateData, d->CS.Length);
    return 0;
}

/* Iteration it, mode it % 5, CHK receives posted to the shared CQ. Never
 * connected: 0 VipDisconnect (flushes them), reap, destroy; 3 destroy (nothing
 * completes). Connected, the peer streaming: 1 take one, disconnect, reap,
 * destroy; 2 disconnect, destroy (its entries may still be in the CQ). 4 the
 * peer sends 3 and leaves: reap, disconnect, destroy. */
static void *churn_thread(void *arg)
{
    struct churn *a = arg, *ch = arg;
    VIP_VI_HANDLE vi = NULL;
    struct crec *r = NULL;
    VIP_DESCRIPTOR *d;
    for (unsigned it = 0; it < a->iters && !atomic_load(&g_stop); it++) {
        int mode = (int)(it % 5), flushed = 0, got;
        unsigned k = 0;
        TREQ(tl_vi(&a->rig->t, VIP_SERVICE_UNRELIABLE, NULL, a->rig->cq, &vi), VIP_SUCCESS);
        pthread_mutex_lock(&ch->lock);
        r = &ch->r[ch->nrec++];
        *r = (struct crec){.h = vi, .state = LIVE, .mode = mode};
        pthread_mutex_unlock(&ch->lock);
        for (unsigned j = 0; j < CHK; j++) {
            tl_desc_1(CDESC(a, j), CDATA(a, j), DSZ, a->rig->b.mh);
            TREQ(VipPostRecv(vi, CDESC(a, j), a->rig->b.mh), VIP_SUCCESS);
        }
        if (mode != 3)
            churn_set(ch, r, LIVE); /* armed */
        if (mode == 1 || mode == 2 || mode == 4)
            TREQ(tl_request(&a->rig->t, vi, "via1", a->disc, 20000), VIP_SUCCESS);
        for (; (mode == 1 && k < 1) || (mode == 4 && k < CHK); k++) {
            TREQ(next_done(vi, 1, 0, &d), VIP_SUCCESS);
            if (!churn_got(a, d, k, mode == 1 || k < 3, mode == 4 && k >= 3))
                goto out;
        }
        if (mode == 4 && tl_vi_state(vi) != VIP_STATE_ERROR)
            TFAIL("churn VI %u: its peer left, but it is in state %d", it,
                  (int)tl_vi_state(vi));
        if (mode != 3)
            TREQ(VipDisconnect(vi), VIP_SUCCESS);
        for (; (mode == 0 || mode == 1) && k < CHK; k++) {
            TREQ(VipRecvDone(vi, &d), VIP_SUCCESS);
            if (!(got = churn_got(a, d, k, mode == 1 && !flushed, 1)))
                goto out;
            flushed |= got == 2;
        }
        if (mode == 0 || mode == 1)
            TREQ(VipRecvDone(vi, &d), VIP_NOT_DONE);
        churn_set(ch, r, DYING);
        TREQ(VipDestroyVi(vi), VIP_SUCCESS);
        vi = NULL;
        churn_set(ch, r, GONE);
    }
out:
    if (vi) {
        VipDisconnect(vi);
        churn_set(ch, r, DYING);
        if (VipDestroyVi(vi) == VIP_SUCCESS)
            churn_set(ch, r, GONE);
    }
    return NULL;
}

/* A VI of its own, on no CQ: one message at a time, its completions found
 * by spinning in VipSendDone and VipRecvDone. */
static void *own_spinner(void *arg)
{
    struct ep *e = arg;
    VIP_DESCRIPTOR *d;
    for (unsigned seq = 0; seq < e->cap && !atomic_load(&g_quiesce); seq++) {
        TREQ(ep_send(e, seq), VIP_SUCCESS);
        TREQ(next_done(e->vi, 0, 1, &d), VIP_SUCCESS);
        if (ep_reaped(e, d))
            goto out;
        TREQ(next_done(e->vi, 1, 1, &d), VIP_SUCCESS);
        if (d != RDESC(e, seq % e->w) || ep_echo(e, d) != (long)seq)
            TFAIL("own VI: echo %u in descriptor %p is not message %u", seq, (void *)d, seq);
        TREQ(ep_credit(e, d), VIP_SUCCESS);
    }
out:
    atomic_store(&e->sender_done, 1);
    return NULL;
}

/*
 * One thread creates, connects, disconnects and destroys VIs with receives on
 * a CQ (modes above) while two threads wait on that CQ (VipCQWait; VipCQDone
 * spinning) for the echoes of two stable VIs two threads send on, and one
 * spins in VipSendDone/VipRecvDone on a VI of its own. Nothing may crash;
 * each stable echo is taken once; no CQ entry may name a VI destroyed before
 * the call that returned it; only VIs whose peer left lose their connection.
 */
static void test_destroy_while_progressing(void)
{
    enum { NS = 2, W = 4, MAXLEN = 512, CAP = 1u << 17 };
    static struct churn ch;
    static struct churn_cfg cc;
    unsigned iters = scaled(MAXIT, 10), n4 = 0;
    struct rig r;
    struct tl_child peer = {.pid = -1};
    struct thset ts = {.n = 0}, tc = {.n = 0};
    struct cqw w[2];
    VIP_VI_HANDLE h;
    VIP_BOOLEAN isr;
    int ok = 0;
    memset(&ch, 0, sizeof ch);
    pthread_mutex_init(&ch.lock, NULL);
    memset(&cc, 0, sizeof cc);
    tl_discrim(cc.disc, "c");
    for (unsigned it = 0; it < iters; it++) {
        if (it % 5 == 1 || it % 5 == 2 || it % 5 == 4)
            cc.close_after[cc.nconn++] = it % 5 == 4 ? 3 : 0;
        n4 += it % 5 == 4;
    }
    TRC(rig_up(&r, NS + 1, W, MAXLEN, VIP_SERVICE_RELIABLE_DELIVERY, CAP, 2u * CHK * DSZ, NS),
        VIP_SUCCESS);
    TCHK(tl_spawn(&peer, churn_peer, &cc) == 0);
    for (unsigned i = 0; i <= NS; i++)
        ch.stable[i] = r.e[i].vi;
    TRC(VipErrorCallback(r.t.nic, &ch, on_error), VIP_SUCCESS);
    atomic_store(&ch.collect, 1);
    ch.rig = &r;
    ch.disc = cc.disc;
    ch.iters = iters;
    ch.base = r.b.p + (NS + 1) * ep_bytes(W, MAXLEN);
    for (unsigned i = 0; i < NS; i++) {
        w[i] = (struct cqw){.cq = r.cq, .e = r.e, .ne = NS, .spin = i == 1, .ch = &ch};
        th_start(&ts, cq_waiter, &w[i]);
        th_start(&ts, pair_sender, &r.e[i]);
    }
    th_start(&ts, own_spinner, &r.e[NS]);
    th_start(&tc, churn_thread, &ch);
    th_join(&tc);
    atomic_store(&g_quiesce, 1);
    th_join(&ts);
    atomic_store(&ch.collect, 0);
    if (th_reports())
        CU_FAIL("a thread reported a failure");
    if (atomic_load(&g_stop))
        goto out; /* a fatal one: what follows would mean nothing */
    CU_ASSERT_EQUAL(ch.nrec, iters);
    for (unsigned i = 0; i < ch.nrec; i++)
        CU_ASSERT_EQUAL(ch.r[i].state, GONE);
    CU_ASSERT(atomic_load(&ch.conn_lost) <= n4); /* VIP_ERROR_CONN_LOST callbacks */
    for (unsigned i = 0; i <= NS; i++) /* with no echo taken twice (ep_echo): each once */
        CU_ASSERT_EQUAL(atomic_load(&r.e[i].received), r.e[i].sent);
    CU_ASSERT_EQUAL(VipCQDone(r.cq, &h, &isr), VIP_NOT_DONE);
    ok = 1;
out:
    atomic_store(&g_stop, 1);
    atomic_store(&g_quiesce, 1);
    th_join(&tc);
    th_join(&ts);
    atomic_store(&ch.collect, 0);
    if (peer.pid > 0)
        TCHILD_OK(&peer, ok ? 60000 : 1000);
    rig_down(&r, ok);
    pthread_mutex_destroy(&ch.lock);
}

/* VipQueryNic (in tl_open) reports that the library is thread-safe. */
static void test_query_nic_thread_safe(void)
{
    struct tl_nic t;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    CU_ASSERT_EQUAL(t.attr.ThreadSafe, VIP_TRUE);
    tl_close(&t);
out:;
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_query_nic_thread_safe),
        TL_TEST(test_send_recv_threads_per_vi),
        TL_TEST(test_two_threads_one_vi),
        TL_TEST(test_waiters_share_one_cq),
        TL_TEST(test_destroy_while_progressing),
        TL_END,
    };
    return tl_main(argc, argv, "threads", tests);
}

/*
 * tcq.c - ping-pong and streaming over VIs that complete through one CQ
 * per process (see tcq.h).
 */
#include "tcq.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define DSTRIDE 64u   /* bytes per descriptor (one data segment) */
#define MAXMSG 4096u  /* largest message, and the size of every buffer slot */
#define NRECV 16u     /* receives posted per VI */
#define NSEND 16u     /* send slots per VI */

/* Shared by the coordinator and its children (mapped before the fork). */
struct tcq_shared {
    _Atomic uint32_t at[2]; /* messages completed: [0] server, [1] client */
};

struct side {
    const struct tcq_cfg *c;
    int server;
    struct tcq_shared *sh;
    struct tl_nic t;
    struct tl_buf b;
    VIP_CQ_HANDLE cq;
    VIP_VI_HANDLE vi[TCQ_MAXVI];
    uint32_t rpost[TCQ_MAXVI], rdone[TCQ_MAXVI]; /* receives posted, completed */
    uint32_t spost[TCQ_MAXVI], sdone[TCQ_MAXVI]; /* sends posted, completed */
    char err[512];
};

uint32_t tcq_size(uint32_t i)
{
    if (i % 257 == 256)
        return 1000u + (i * 13u) % (MAXMSG - 999u); /* 1000 .. 4096 */
    return (i * 29u) % 301u;                         /* 0 .. 300: both sides of 256 */
}

static int fail(struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct side *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- layout: per VI, NRECV receive then NSEND send descriptors, then data ---- */
static VIP_DESCRIPTOR *desc_at(struct side *s, unsigned v, unsigned k)
{
    return (VIP_DESCRIPTOR *)(void *)(s->b.p + DSTRIDE * ((size_t)v * (NRECV + NSEND) + k));
}
static uint8_t *data_at(struct side *s, unsigned v, unsigned k)
{
    size_t descs = (size_t)DSTRIDE * TCQ_MAXVI * (NRECV + NSEND);
    return s->b.p + descs + (size_t)MAXMSG * ((size_t)v * (NRECV + NSEND) + k);
}
#define RDESC(s, v, j) desc_at((s), (v), (j) % NRECV)
#define RDATA(s, v, j) data_at((s), (v), (j) % NRECV)
#define SDESC(s, v, j) desc_at((s), (v), NRECV + (j) % NSEND)
#define SDATA(s, v, j) data_at((s), (v), NRECV + (j) % NSEND)

static int post_recv(struct side *s, unsigned v)
{
    uint32_t j = s->rpost[v];
    tl_desc_1(RDESC(s, v, j), RDATA(s, v, j), MAXMSG, s->b.mh);
    VIP_RETURN rc = VipPostRecv(s->vi[v], RDESC(s, v, j), s->b.mh);
    if (rc != VIP_SUCCESS)
        return fail(s, "VI %u: VipPostRecv: %s (%s)", v, vip_strerror(rc), vip_last_error());
    s->rpost[v]++;
    return 0;
}

/* Send len bytes at data on VI v; message i carries immediate data when i % 5 == 0. */
static int post_send(struct side *s, unsigned v, uint8_t *data, uint32_t len, int imm,
                     uint32_t i)
{
    uint32_t j = s->spost[v];
    if (j - s->sdone[v] >= NSEND)
        return fail(s, "VI %u: no free send slot (test bug)", v);
    VIP_DESCRIPTOR *d = SDESC(s, v, j);
    tl_desc_1(d, data, len, s->b.mh);
    if (imm) {
        d->CS.Control |= VIP_CONTROL_IMMEDIATE;
        d->CS.ImmediateData = i;
    }
    VIP_RETURN rc = VipPostSend(s->vi[v], d, s->b.mh);
    if (rc != VIP_SUCCESS)
        return fail(s, "msg %u VI %u: VipPostSend: %s (%s)", i, v, vip_strerror(rc),
                    vip_last_error());
    s->spost[v]++;
    return 0;
}

/* The next completion, from the CQ only: its VI index and queue. */
static int next_cq(struct side *s, uint32_t at, unsigned *v, int *recv)
{
    VIP_VI_HANDLE h = NULL;
    VIP_BOOLEAN r = VIP_FALSE;
    VIP_RETURN rc;
    if (s->c->sleep) {
        rc = VipCQWait(s->cq, s->c->wait_ms, &h, &r);
    } else {
        uint64_t deadline = tl_now_ms() + s->c->wait_ms;
        for (unsigned k = 1;; k++) {
            rc = VipCQDone(s->cq, &h, &r);
            if (rc != VIP_NOT_DONE)
                break;
            if (k % 4096 == 0 && tl_now_ms() > deadline) {
                rc = VIP_TIMEOUT;
                break;
            }
        }
    }
    if (rc != VIP_SUCCESS)
        return fail(s, "at message %u of %u: %s: %s (%s)", at, s->c->n,
                    s->c->sleep ? "VipCQWait" : "VipCQDone polled", vip_strerror(rc),
                    rc == VIP_TIMEOUT ? "no completion within the wait bound" : vip_last_error());
    for (unsigned k = 0; k < s->c->nvi; k++)
        if (s->vi[k] == h) {
            *v = k;
            *recv = r == VIP_TRUE;
            return 0;
        }
    return fail(s, "at message %u: the CQ named an unknown VI %p", at, (void *)h);
}

/* The CQ said VI v's send queue completed: take that descriptor. */
static int take_send(struct side *s, unsigned v, uint32_t at)
{
    VIP_DESCRIPTOR *d = NULL;
    VIP_RETURN rc = VipSendDone(s->vi[v], &d);
    if (rc != VIP_SUCCESS)
        return fail(s, "at message %u: the CQ named VI %u's send queue, VipSendDone: %s", at,
                    v, vip_strerror(rc));
    if (d != SDESC(s, v, s->sdone[v]))
        return fail(s, "at message %u: VI %u completed send %p, expected %p", at, v,
                    (void *)d, (void *)SDESC(s, v, s->sdone[v]));
    uint32_t st = d->CS.Status;
    if ((st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) !=
        (VIP_STATUS_DONE | VIP_STATUS_OP_SEND))
        return fail(s, "at message %u: VI %u send status 0x%x", at, v, st);
    s->sdone[v]++;
    return 0;
}

/* The CQ said VI v's receive queue completed: take that descriptor. */
static int take_recv(struct side *s, unsigned v, uint32_t at, VIP_DESCRIPTOR **out)
{
    VIP_DESCRIPTOR *d = NULL;
    VIP_RETURN rc = VipRecvDone(s->vi[v], &d);
    if (rc != VIP_SUCCESS)
        return fail(s, "at message %u: the CQ named VI %u's receive queue, VipRecvDone: %s",
                    at, v, vip_strerror(rc));
    if (d != RDESC(s, v, s->rdone[v]))
        return fail(s, "at message %u: VI %u completed receive %p, expected %p", at, v,
                    (void *)d, (void *)RDESC(s, v, s->rdone[v]));
    uint32_t st = d->CS.Status;
    if ((st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) !=
        (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE))
        return fail(s, "at message %u: VI %u receive status 0x%x", at, v, st);
    s->rdone[v]++;
    *out = d;
    return 0;
}

/* Message i landed in receive j of VI v (descriptor d): check all of it. */
static int check_msg(struct side *s, unsigned v, uint32_t j, VIP_DESCRIPTOR *d, uint32_t i)
{
    uint32_t len = tcq_size(i), st = d->CS.Status;
    int imm = i % 5 == 0;
    if (d->CS.Length != len)
        return fail(s, "msg %u on VI %u: Length %u, expected %u", i, v, d->CS.Length, len);
    if (!!(st & VIP_STATUS_IMMEDIATE) != imm || (imm && d->CS.ImmediateData != i))
        return fail(s, "msg %u on VI %u: status 0x%x ImmediateData %u", i, v, st,
                    d->CS.ImmediateData);
    long bad = tl_verify(RDATA(s, v, j), len, i);
    if (bad >= 0)
        return fail(s, "msg %u on VI %u (%u bytes): payload differs at byte %ld", i, v, len,
                    bad);
    return 0;
}

static void progress(struct side *s, uint32_t done)
{
    atomic_store_explicit(&s->sh->at[s->server ? 0 : 1], done, memory_order_relaxed);
}

/* ---- ping-pong ---------------------------------------------------------------------- */
static int pp_client(struct side *s)
{
    const struct tcq_cfg *c = s->c;
    for (uint32_t i = 0; i < c->n; i++) {
        unsigned v = i % c->nvi;
        uint8_t *p = SDATA(s, v, s->spost[v]);
        tl_fill(p, tcq_size(i), i);
        if (post_send(s, v, p, tcq_size(i), i % 5 == 0, i))
            return -1;
        int sent = 0, echoed = 0;
        while (!sent || !echoed) {
            unsigned k;
            int recv;
            VIP_DESCRIPTOR *d = NULL;
            if (next_cq(s, i, &k, &recv))
                return -1;
            uint32_t j = s->rdone[k];
            /* take it first: a completion in error says more than its VI */
            if (recv ? take_recv(s, k, i, &d) : take_send(s, k, i))
                return -1;
            if (k != v || (recv ? echoed : sent))
                return fail(s, "msg %u: unexpected %s completion on VI %u (sent on VI %u)", i,
                            recv ? "receive" : "send", k, v);
            if (recv && (check_msg(s, v, j, d, i) || post_recv(s, v)))
                return -1;
            *(recv ? &echoed : &sent) = 1;
        }
        progress(s, i + 1);
    }
    return 0;
}

static int pp_server(struct side *s)
{
    const struct tcq_cfg *c = s->c;
    uint32_t i = 0, echoes = 0;
    while (i < c->n || echoes < c->n) {
        unsigned k;
        int recv;
        if (next_cq(s, i, &k, &recv))
            return -1;
        if (!recv) {
            /* an echo went out: its receive buffer may take a message again */
            if (take_send(s, k, i) || post_recv(s, k))
                return -1;
            echoes++;
            continue;
        }
        VIP_DESCRIPTOR *d;
        uint32_t j = s->rdone[k];
        if (take_recv(s, k, i, &d))
            return -1;
        if (i >= c->n || k != i % c->nvi)
            return fail(s, "message %u arrived on VI %u, expected VI %u", i, k, i % c->nvi);
        if (check_msg(s, k, j, d, i) ||
            post_send(s, k, RDATA(s, k, j), d->CS.Length, i % 5 == 0, i))
            return -1;
        progress(s, ++i);
    }
    return 0;
}

/* ---- streaming with credits -------------------------------------------------------- */
/*
 * VIA orders completions per VI only: messages of different VIs may come out
 * of the CQ in any order. So credit number c (sent on VI c % nvi) says
 * "every message below min(credit * (c + 1), n) has been checked and its
 * receive reposted"; the server sends it once that prefix is consumed. The
 * client counts a credit only when all earlier ones are in too. Then each
 * server VI has receives posted for its messages below credited + cap,
 * which is as far as the client sends, and at most cap / credit credits are
 * ever unconsumed, spread over the VIs (fewer than NRECV each).
 */
static uint32_t credit_value(const struct tcq_cfg *c, uint32_t no)
{
    uint64_t v = (uint64_t)c->credit * (no + 1);
    return v < c->n ? (uint32_t)v : c->n;
}

static uint32_t credits_total(const struct tcq_cfg *c)
{
    return (c->n + c->credit - 1) / c->credit;
}

/* The first message (or credit) number not yet seen, when VI v has seen
 * seen[v] of the numbers v, v + nvi, v + 2 nvi, ... */
static uint32_t seen_prefix(const uint32_t *seen, unsigned nvi, uint32_t cap)
{
    uint32_t p = cap;
    for (unsigned v = 0; v < nvi; v++)
        if (seen[v] * nvi + v < p)
            p = seen[v] * nvi + v;
    return p;
}

static int st_client(struct side *s)
{
    const struct tcq_cfg *c = s->c;
    const uint32_t cap = NRECV * c->nvi; /* receives the server keeps posted */
    const uint32_t ncred = credits_total(c);
    uint32_t sent = 0, done = 0, credited = 0;
    while (done < c->n || credited < c->n) {
        for (;;) {
            unsigned v = sent % c->nvi;
            if (sent >= c->n || sent - done >= c->window || sent - credited >= cap ||
                s->spost[v] - s->sdone[v] >= NSEND)
                break;
            uint8_t *p = SDATA(s, v, s->spost[v]);
            tl_fill(p, tcq_size(sent), sent);
            if (post_send(s, v, p, tcq_size(sent), sent % 5 == 0, sent))
                return -1;
            sent++;
        }
        unsigned k;
        int recv;
        if (next_cq(s, done, &k, &recv))
            return -1;
        if (!recv) {
            if (take_send(s, k, done))
                return -1;
            progress(s, ++done);
            continue;
        }
        VIP_DESCRIPTOR *d;
        uint32_t j = s->rdone[k], no = j * c->nvi + k; /* the VI's j-th credit */
        if (take_recv(s, k, done, &d))
            return -1;
        uint64_t value;
        memcpy(&value, RDATA(s, k, j), sizeof value);
        if (no >= ncred || d->CS.Length != sizeof value || value != credit_value(c, no))
            return fail(s, "credit %u (VI %u): Length %u, value %llu, expected %u", no, k,
                        d->CS.Length, (unsigned long long)value,
                        no < ncred ? credit_value(c, no) : 0);
        if (value > sent)
            return fail(s, "credit %u for %llu messages, only %u sent", no,
                        (unsigned long long)value, sent);
        if (post_recv(s, k))
            return -1;
        uint32_t all = seen_prefix(s->rdone, c->nvi, ncred);
        if (all)
            credited = credit_value(c, all - 1);
    }
    return 0;
}

static int st_server(struct side *s)
{
    const struct tcq_cfg *c = s->c;
    const uint32_t ncred = credits_total(c);
    uint32_t prefix = 0, csent = 0, cdone = 0;
    while (prefix < c->n || csent < ncred || cdone < csent) {
        unsigned k;
        int recv;
        if (next_cq(s, prefix, &k, &recv))
            return -1;
        if (recv) {
            uint32_t j = s->rdone[k], i = j * c->nvi + k; /* the VI's j-th message */
            VIP_DESCRIPTOR *d;
            if (i >= c->n)
                return fail(s, "VI %u: a message beyond the %u sent", k, c->n);
            if (take_recv(s, k, i, &d) || check_msg(s, k, j, d, i) || post_recv(s, k))
                return -1;
            prefix = seen_prefix(s->rdone, c->nvi, c->n);
            progress(s, prefix);
        } else {
            if (take_send(s, k, prefix))
                return -1;
            cdone++;
        }
        /* every credit now due, while its VI has a free send slot */
        for (unsigned v = csent % c->nvi;
             csent < ncred && credit_value(c, csent) <= prefix && s->spost[v] - s->sdone[v] < NSEND;
             v = csent % c->nvi) {
            uint64_t value = credit_value(c, csent);
            uint8_t *p = SDATA(s, v, s->spost[v]);
            memcpy(p, &value, sizeof value);
            if (post_send(s, v, p, sizeof value, 0, csent))
                return -1;
            csent++;
        }
    }
    return 0;
}

/* ---- one side, start to end ------------------------------------------------------------ */
static int side_setup(struct side *s)
{
    const struct tcq_cfg *c = s->c;
    const char *dev = s->server ? c->srv_dev : c->cli_dev;
    VIP_RETURN rc;
    if (tl_desc_size(1) > DSTRIDE || c->nvi < 1 || c->nvi > TCQ_MAXVI)
        return fail(s, "bad configuration");
    if ((rc = tl_open(&s->t, dev)) != VIP_SUCCESS)
        return fail(s, "open %s: %s (%s)", tl_dev(dev), vip_strerror(rc), vip_last_error());
    size_t len = (size_t)(DSTRIDE + MAXMSG) * TCQ_MAXVI * (NRECV + NSEND);
    if ((rc = tl_buf_alloc(&s->t, &s->b, len)) != VIP_SUCCESS)
        return fail(s, "buffer: %s (%s)", vip_strerror(rc), vip_last_error());
    if ((rc = VipCreateCQ(s->t.nic, 4 * TCQ_MAXVI * (NRECV + NSEND), &s->cq)) != VIP_SUCCESS) {
        s->cq = NULL;
        return fail(s, "VipCreateCQ: %s (%s)", vip_strerror(rc), vip_last_error());
    }
    for (unsigned v = 0; v < c->nvi; v++) {
        /* both work queues of every VI complete into the one CQ */
        if ((rc = tl_vi(&s->t, VIP_SERVICE_RELIABLE_DELIVERY, s->cq, s->cq, &s->vi[v])) !=
            VIP_SUCCESS) {
            s->vi[v] = NULL;
            return fail(s, "VipCreateVi %u: %s (%s)", v, vip_strerror(rc), vip_last_error());
        }
        for (unsigned k = 0; k < NRECV; k++)
            if (post_recv(s, v))
                return -1;
    }
    for (unsigned v = 0; v < c->nvi; v++) {
        rc = s->server ? tl_accept(&s->t, s->vi[v], c->disc[v], 20000)
                       : tl_request(&s->t, s->vi[v], c->srv_dev, c->disc[v], 20000);
        if (rc != VIP_SUCCESS)
            return fail(s, "VI %u: %s: %s (%s)", v, s->server ? "accept" : "request",
                        vip_strerror(rc), vip_last_error());
    }
    return 0;
}

static void side_teardown(struct side *s)
{
    for (unsigned v = 0; v < TCQ_MAXVI; v++)
        if (s->vi[v]) {
            VipDisconnect(s->vi[v]);
            VipDestroyVi(s->vi[v]);
            s->vi[v] = NULL;
        }
    if (s->cq)
        VipDestroyCQ(s->cq);
    s->cq = NULL;
    tl_buf_free(&s->b);
    tl_close(&s->t);
}

static int side_run(struct side *s)
{
    const struct tcq_cfg *c = s->c;
    if (c->sleep)
        setenv("VIP_WAIT_SPIN_US", "0", 1);
    if (c->ext_mode)
        setenv("VIP_EXT_MODE", c->ext_mode, 1);
    if (side_setup(s))
        return -1;
    int r = c->stream ? (s->server ? st_server(s) : st_client(s))
                      : (s->server ? pp_server(s) : pp_client(s));
    if (r)
        return -1;
    VIP_VI_HANDLE h;
    VIP_BOOLEAN isr;
    if (VipCQDone(s->cq, &h, &isr) != VIP_NOT_DONE)
        return fail(s, "a completion is left over in the CQ (%s queue)", isr ? "receive" : "send");
    /* Disconnecting flushes the peer's posted receives into its CQ: only
     * once both sides are through. */
    if (tl_child_post('d') || tl_child_take(60000) != 'q')
        return fail(s, "no go-ahead to disconnect");
    return 0;
}

struct role {
    const struct tcq_cfg *c;
    struct tcq_shared *sh;
    int server;
};

static int side_child(void *arg)
{
    const struct role *ro = arg;
    struct side *s = calloc(1, sizeof *s);
    if (!s)
        tl_child_fail(__FILE__, __LINE__, "out of memory");
    s->c = ro->c;
    s->sh = ro->sh;
    s->server = ro->server;
    int r = side_run(s);
    side_teardown(s);
    if (r)
        tl_child_fail(__FILE__, __LINE__, "%s: %s", s->server ? "server" : "client", s->err);
    free(s);
    return 0;
}

/* A child that keeps a core busy until it is killed (or its parent dies,
 * or the bound passes). */
static int hog_child(void *arg)
{
    const int *bound_ms = arg;
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        return 0;
    uint64_t end = tl_now_ms() + (uint64_t)*bound_ms + 60000;
    volatile uint64_t x = 0;
    while (tl_now_ms() < end)
        for (unsigned k = 0; k < 1000000; k++)
            x = x + k;
    return 0;
}

/* ---- the coordinator ------------------------------------------------------------------- */
int tcq_defaults(struct tcq_cfg *c, const char *srv, const char *cli)
{
    memset(c, 0, sizeof *c);
    snprintf(c->srv_dev, sizeof c->srv_dev, "%s", srv);
    snprintf(c->cli_dev, sizeof c->cli_dev, "%s", cli);
    c->nvi = 4;
    for (unsigned v = 0; v < TCQ_MAXVI; v++)
        tl_discrim(c->disc[v], "cq");
    c->window = 32;
    c->credit = 8;
    c->wait_ms = 5000;
    c->bound_ms = 240000;
    int paced = tl_dev_paced(srv);
    if (paced < 0 || tl_dev_paced(cli) != paced)
        return -1;
    c->n = tl_count(paced ? 20000 : 1000000, 1000000);
    return 0;
}

struct watch {
    struct tcq_shared *sh;
    uint32_t last[2];
    uint64_t since;
    int stall_ms;
};

/* Give up when neither side has completed anything for stall_ms. */
static int watch_tick(void *arg)
{
    struct watch *w = arg;
    uint32_t a = atomic_load(&w->sh->at[0]), b = atomic_load(&w->sh->at[1]);
    uint64_t now = tl_now_ms();
    if (a != w->last[0] || b != w->last[1]) {
        w->last[0] = a;
        w->last[1] = b;
        w->since = now;
        return 0;
    }
    return now - w->since > (uint64_t)w->stall_ms;
}

void tcq_run(const struct tcq_cfg *c)
{
    struct tcq_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        CU_FAIL("mmap");
        return;
    }
    struct tl_child ch[2], hog[4];
    struct role ro[2] = {{c, sh, 1}, {c, sh, 0}};
    unsigned nhog = c->hogs < 4 ? c->hogs : 4, spawned = 0;
    for (unsigned i = 0; i < 4; i++)
        hog[i].pid = -1;
    for (; spawned < nhog; spawned++)
        if (tl_spawn(&hog[spawned], hog_child, (void *)&c->bound_ms) != 0)
            break;
    CU_ASSERT_EQUAL(spawned, nhog);
    uint64_t t0 = tl_now_ms();
    int ok = spawned == nhog && tl_spawn(&ch[0], side_child, &ro[0]) == 0;
    if (ok && tl_spawn(&ch[1], side_child, &ro[1]) != 0) {
        tl_child_kill(&ch[0]);
        ok = 0;
    }
    if (ok) {
        struct watch w = {.sh = sh, .since = tl_now_ms(), .stall_ms = (int)c->wait_ms + 20000};
        int done = tl_gather(ch, 2, 'd', c->bound_ms, watch_tick, &w) == 0;
        double secs = (double)(tl_now_ms() - t0) / 1000.0;
        const char *mode = c->ext_mode ? c->ext_mode : getenv("VIP_EXT_MODE");
        if (done) {
            tl_parent_post(&ch[0], 'q');
            tl_parent_post(&ch[1], 'q');
            printf("\n    %s %s %s/%s x%u VIs, %s%s: %u %s in %.1f s ",
                   c->stream ? "stream" : "ping-pong", c->sleep ? "VipCQWait" : "VipCQDone",
                   tl_dev(c->srv_dev), tl_dev(c->cli_dev), c->nvi,
                   mode && *mode ? mode : "standard", nhog ? ", CPU hogs" : "", c->n,
                   c->stream ? "messages" : "round trips", secs);
        } else {
            fprintf(stderr, "\n  %s/%s: server at %u, client at %u of %u messages after %.1f s\n",
                    tl_dev(c->srv_dev), tl_dev(c->cli_dev), atomic_load(&sh->at[0]),
                    atomic_load(&sh->at[1]), c->n, secs);
            CU_FAIL("the exchange did not complete (stalled, failed or out of time)");
        }
        for (int i = 0; i < 2; i++) {
            /* after a failure, the other side may be waiting for it: stop it */
            int r = tl_child_wait(&ch[i], done ? 30000 : 1000);
            if (r)
                fprintf(stderr, "  %s: %s\n", i ? "client" : "server", ch[i].msg);
            CU_ASSERT_EQUAL(r, 0);
        }
    }
    for (unsigned i = 0; i < spawned; i++)
        tl_child_kill(&hog[i]);
    munmap(sh, sizeof *sh);
}

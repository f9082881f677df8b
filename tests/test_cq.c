/*
 * test_cq.c - completion queues as servers use them: large (4096 entries
 * and more), shared by many VIs for sends and receives, and resized while
 * in use (VipResizeCQ grows and shrinks a CQ with VIs bound, completions
 * queued, the NIC appending and another thread waiting in VipCQWait).
 *
 *   test_resize_args           the calls' error returns and sizes
 *   test_resize_pending_order  3050 completions queued in a known order
 *                              survive grows and shrinks, in order; a
 *                              shrink below what is queued is refused
 *   test_resize_under_load     a stream through one CQ that a thread waits
 *                              on while another resizes it over and over
 *   test_shared_64vi           64 VIs per side, one 4096-entry CQ each for
 *                              sends and receives; 2048 entries queued at
 *                              once, shrunk to exactly that, drained
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lib/tlib.h"

/* ---- a set of VIs on one NIC whose queues complete into one CQ -------------------- */
#define MAXV 64u

struct vset {
    struct tl_nic t;
    struct tl_buf b;
    VIP_CQ_HANDLE cq;
    unsigned nvi, ndesc; /* VIs; descriptors per VI */
    uint32_t dlen;       /* data bytes per descriptor */
    VIP_VI_HANDLE vi[MAXV];
};

static VIP_DESCRIPTOR *desc(struct vset *s, unsigned v, unsigned k)
{
    return (VIP_DESCRIPTOR *)(void *)(s->b.p + 64u * ((size_t)v * s->ndesc + k));
}

static uint8_t *data(struct vset *s, unsigned v, unsigned k)
{
    return s->b.p + 64u * (size_t)s->nvi * s->ndesc +
           (size_t)s->dlen * ((size_t)v * s->ndesc + k);
}

static int vindex(struct vset *s, VIP_VI_HANDLE h)
{
    for (unsigned v = 0; v < s->nvi; v++)
        if (s->vi[v] == h)
            return (int)v;
    return -1;
}

/* cq_entries 0: no CQ. send_cq: the send queues complete into it too. */
static VIP_RETURN vset_up(struct vset *s, const char *dev, unsigned nvi, unsigned ndesc,
                          uint32_t dlen, VIP_RELIABILITY_LEVEL rel, VIP_ULONG cq_entries,
                          int send_cq)
{
    VIP_RETURN rc;
    memset(s, 0, sizeof *s);
    s->nvi = nvi;
    s->ndesc = ndesc;
    s->dlen = dlen;
    if ((rc = tl_open(&s->t, dev)) != VIP_SUCCESS ||
        (rc = tl_buf_alloc(&s->t, &s->b, (64u + dlen) * (size_t)nvi * ndesc)) != VIP_SUCCESS)
        return rc;
    if (cq_entries && (rc = VipCreateCQ(s->t.nic, cq_entries, &s->cq)) != VIP_SUCCESS)
        return rc;
    for (unsigned v = 0; v < nvi; v++)
        if ((rc = tl_vi(&s->t, rel, send_cq ? s->cq : NULL, s->cq, &s->vi[v])) != VIP_SUCCESS)
            return rc;
    return VIP_SUCCESS;
}

static void vset_down(struct vset *s)
{
    for (unsigned v = 0; v < s->nvi; v++)
        if (s->vi[v]) {
            VipDisconnect(s->vi[v]);
            VipDestroyVi(s->vi[v]);
        }
    if (s->cq)
        VipDestroyCQ(s->cq);
    tl_buf_free(&s->b);
    tl_close(&s->t);
}

static VIP_RETURN post_recv(struct vset *s, unsigned v, unsigned k)
{
    tl_desc_1(desc(s, v, k), data(s, v, k), s->dlen, s->b.mh);
    return VipPostRecv(s->vi[v], desc(s, v, k), s->b.mh);
}

/* Message with immediate data `tag` and len bytes of tl_pat(tag, .). */
static VIP_RETURN post_send(struct vset *s, unsigned v, unsigned k, uint32_t len, uint32_t tag)
{
    VIP_DESCRIPTOR *d = desc(s, v, k);
    tl_fill(data(s, v, k), len, tag);
    tl_desc_1(d, data(s, v, k), len, s->b.mh);
    d->CS.Control |= VIP_CONTROL_IMMEDIATE;
    d->CS.ImmediateData = tag;
    return VipPostSend(s->vi[v], d, s->b.mh);
}

/* A completed receive is d, intact, carrying tag in len bytes. */
static int recv_ok(struct vset *s, VIP_DESCRIPTOR *d, uint8_t *buf, uint32_t len, uint32_t tag,
                   char *why, size_t cap)
{
    (void)s;
    if ((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) != VIP_STATUS_DONE ||
        !(d->CS.Status & VIP_STATUS_IMMEDIATE) || d->CS.ImmediateData != tag ||
        d->CS.Length != len || tl_verify(buf, len, tag) != -1) {
        snprintf(why, cap, "receive: status 0x%x imm %u length %u (expected tag %u, %u bytes)",
                 d->CS.Status, d->CS.ImmediateData, d->CS.Length, tag, len);
        return -1;
    }
    return 0;
}

/* ---- arguments and sizes -------------------------------------------------------------- */
static void test_resize_args(void)
{
    struct tl_nic t = {0};
    VIP_CQ_HANDLE cq = NULL, big = NULL;
    VIP_VI_HANDLE vi = NULL;
    VIP_VI_HANDLE got;
    VIP_BOOLEAN isr;
    uint32_t garbage[32] = {1, 2, 3};
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    CU_ASSERT(t.attr.MaxCQEntries >= 4096);
    TRC(VipCreateCQ(t.nic, 16, &cq), VIP_SUCCESS);
    TRC_SOFT(VipResizeCQ(NULL, 64), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "not a CQ"));
    TRC_SOFT(VipResizeCQ((VIP_CQ_HANDLE)garbage, 64), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipResizeCQ(cq, 0), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "EntryCount 0"));
    TRC_SOFT(VipResizeCQ(cq, t.attr.MaxCQEntries + 1), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "outside"));
    /* grow and shrink an idle CQ with a VI bound to both its queues */
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, cq, cq, &vi), VIP_SUCCESS);
    static const VIP_ULONG sizes[] = {1024, 4096, 8, 65536, 1, 1000, 4097, 16};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        TRC_SOFT(VipResizeCQ(cq, sizes[i]), VIP_SUCCESS);
        TRC_SOFT(VipCQDone(cq, &got, &isr), VIP_NOT_DONE);
    }
    TRC_SOFT(VipDestroyCQ(cq), VIP_INVALID_STATE); /* still bound */
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    vi = NULL;
    /* the largest CQ the NIC reports, and no larger */
    TRC_SOFT(VipCreateCQ(t.nic, t.attr.MaxCQEntries, &big), VIP_SUCCESS);
    TRC_SOFT(VipCreateCQ(t.nic, t.attr.MaxCQEntries + 1, &got), VIP_INVALID_PARAMETER);
out:
    if (vi)
        VipDestroyVi(vi);
    if (big)
        TRC_SOFT(VipDestroyCQ(big), VIP_SUCCESS);
    if (cq)
        TRC_SOFT(VipDestroyCQ(cq), VIP_SUCCESS);
    tl_close(&t);
}

/* ---- completions queued in a known order ----------------------------------------------
 * The child sends message k on VI k % OV with immediate data k, one at a
 * time at reliable reception: its send completes only once our NIC placed
 * the message, so our CQ holds the receives in the order k. */
enum { OV = 8, OPER = 400, OFIRST = 50, OMSG = 3050, OLEN = 64 };

struct ordered {
    char disc[OV][17];
};

static int ordered_sender(void *arg)
{
    const struct ordered *o = arg;
    struct vset s;
    TC_RC(vset_up(&s, "via1", OV, 1, OLEN, VIP_SERVICE_RELIABLE_RECEPTION, 0, 0), VIP_SUCCESS);
    for (unsigned v = 0; v < OV; v++)
        TC_RC(tl_request(&s.t, s.vi[v], "via0", o->disc[v], 20000), VIP_SUCCESS);
    uint32_t k = 0;
    for (;;) {
        int tok = tl_child_take(30000);
        if (tok == 'q')
            break;
        TC_CHECK(tok == 'a' || tok == 'b');
        for (uint32_t upto = tok == 'a' ? OFIRST : OMSG; k < upto; k++) {
            VIP_DESCRIPTOR *d;
            TC_RC(post_send(&s, k % OV, 0, OLEN, k), VIP_SUCCESS);
            TC_RC(VipSendWait(s.vi[k % OV], 10000, &d), VIP_SUCCESS);
            TC_CHECK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
        }
        TC_CHECK(tl_child_post((char)(tok - 'a' + 'A')) == 0);
    }
    vset_down(&s);
    return 0;
}

/* Take entry k off the CQ: it must be message k's receive. */
static int take_k(struct vset *s, uint32_t k, char *why, size_t cap)
{
    VIP_VI_HANDLE h;
    VIP_BOOLEAN isr;
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = VipCQDone(s->cq, &h, &isr);
    if (rc != VIP_SUCCESS) {
        snprintf(why, cap, "entry %u: VipCQDone: %s (%s)", k, vip_strerror(rc), vip_last_error());
        return -1;
    }
    int v = vindex(s, h);
    if (v != (int)(k % OV) || !isr) {
        snprintf(why, cap, "entry %u names VI %d (%s), expected VI %u's receive", k, v,
                 isr ? "receive" : "send", k % OV);
        return -1;
    }
    unsigned slot = k / OV;
    if ((rc = VipRecvDone(h, &d)) != VIP_SUCCESS || d != desc(s, (unsigned)v, slot)) {
        snprintf(why, cap, "entry %u: VipRecvDone: %s", k, vip_strerror(rc));
        return -1;
    }
    return recv_ok(s, d, data(s, (unsigned)v, slot), OLEN, k, why, cap);
}

static int take_range(struct vset *s, uint32_t from, uint32_t to)
{
    char why[256];
    for (uint32_t k = from; k < to; k++)
        if (take_k(s, k, why, sizeof why)) {
            fprintf(stderr, "\n  %s\n", why);
            return -1;
        }
    return 0;
}

static void test_resize_pending_order(void)
{
    struct ordered o;
    struct vset s;
    struct tl_child ch = {.pid = -1};
    VIP_VI_HANDLE h;
    VIP_BOOLEAN isr;
    memset(&s, 0, sizeof s);
    for (unsigned v = 0; v < OV; v++)
        tl_discrim(o.disc[v], "o");
    TCHK(tl_spawn(&ch, ordered_sender, &o) == 0);
    TRC(vset_up(&s, "via0", OV, OPER, OLEN, VIP_SERVICE_RELIABLE_RECEPTION, 64, 0),
        VIP_SUCCESS);
    for (unsigned v = 0; v < OV; v++) {
        for (unsigned k = 0; k < OPER; k++)
            TRC(post_recv(&s, v, k), VIP_SUCCESS);
        TRC(tl_accept(&s.t, s.vi[v], o.disc[v], 20000), VIP_SUCCESS);
    }
    tl_parent_post(&ch, 'a');
    TCHK(tl_parent_take(&ch, 30000) == 'A'); /* 50 queued */
    TRC_SOFT(VipResizeCQ(s.cq, 16), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "50 completions are queued"));
    TRC_SOFT(VipResizeCQ(s.cq, 49), VIP_INVALID_PARAMETER);
    TRC(VipResizeCQ(s.cq, 50), VIP_SUCCESS);
    TRC(VipResizeCQ(s.cq, 4096), VIP_SUCCESS);
    tl_parent_post(&ch, 'b');
    TCHK(tl_parent_take(&ch, 60000) == 'B'); /* 3050 queued */
    TRC_SOFT(VipResizeCQ(s.cq, OMSG - 1), VIP_INVALID_PARAMETER);
    TRC(VipResizeCQ(s.cq, 8192), VIP_SUCCESS);
    TRC(VipResizeCQ(s.cq, OMSG), VIP_SUCCESS); /* a new 4096-slot ring */
    TCHK(take_range(&s, 0, 1000) == 0);
    TRC(VipResizeCQ(s.cq, 2050), VIP_SUCCESS);
    TRC_SOFT(VipResizeCQ(s.cq, 2048), VIP_INVALID_PARAMETER);
    TCHK(take_range(&s, 1000, 1002) == 0);
    TRC(VipResizeCQ(s.cq, 2048), VIP_SUCCESS); /* exactly full */
    TCHK(take_range(&s, 1002, OMSG) == 0);
    TRC_SOFT(VipCQDone(s.cq, &h, &isr), VIP_NOT_DONE);
    tl_parent_post(&ch, 'q');
    TCHILD_OK(&ch, 30000);
out:
    tl_child_kill(&ch); /* a failure above left it waiting */
    vset_down(&s);
}

/* ---- resized over and over while a stream flows through it -----------------------------
 * The child streams n messages round-robin over LV VIs; it may send on a
 * VI only while we have a receive posted there for it: `reposted` (shared
 * memory) counts our reposts. One thread of ours takes every completion
 * with VipCQWait; the main thread resizes the CQ meanwhile between sizes
 * that always hold all LV * LR receives, so none may be refused. */
enum { LV = 8, LR = 8, LLEN = 256 };

struct load_sh {
    _Atomic uint32_t reposted[LV];
};

struct load {
    char disc[LV][17];
    unsigned n;
    struct load_sh *sh;
};

static uint32_t load_len(uint32_t i)
{
    return 1 + (i * 37u) % LLEN;
}

static int load_sender(void *arg)
{
    const struct load *l = arg;
    struct vset s;
    uint32_t sent[LV] = {0}, done[LV] = {0};
    TC_RC(vset_up(&s, "via1", LV, LR, LLEN, VIP_SERVICE_RELIABLE_DELIVERY, 0, 0), VIP_SUCCESS);
    for (unsigned v = 0; v < LV; v++)
        TC_RC(tl_request(&s.t, s.vi[v], "via0", l->disc[v], 20000), VIP_SUCCESS);
    uint64_t until = tl_now_ms() + 60000;
    for (uint32_t i = 0; i < l->n; i++) {
        unsigned v = i % LV;
        VIP_DESCRIPTOR *d;
        while (sent[v] >= LR + atomic_load(&l->sh->reposted[v])) {
            TC_CHECK(tl_now_ms() < until);
            sched_yield();
        }
        while (sent[v] - done[v] >= LR) {
            TC_RC(VipSendWait(s.vi[v], 10000, &d), VIP_SUCCESS);
            TC_CHECK(d == desc(&s, v, done[v] % LR));
            TC_CHECK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
            done[v]++;
        }
        TC_RC(post_send(&s, v, sent[v] % LR, load_len(i), i), VIP_SUCCESS);
        sent[v]++;
    }
    for (unsigned v = 0; v < LV; v++)
        for (; done[v] < sent[v]; done[v]++) {
            VIP_DESCRIPTOR *d;
            TC_RC(VipSendWait(s.vi[v], 10000, &d), VIP_SUCCESS);
        }
    TC_CHECK(tl_child_take(60000) == 'q');
    vset_down(&s);
    return 0;
}

struct consumer {
    struct vset *s;
    struct load *l;
    _Atomic int done;
    int failed;
    char why[256];
};

static void *consume(void *arg)
{
    struct consumer *c = arg;
    struct vset *s = c->s;
    uint32_t got[LV] = {0};
    for (uint32_t n = 0; n < c->l->n; n++) {
        VIP_VI_HANDLE h;
        VIP_BOOLEAN isr;
        VIP_DESCRIPTOR *d;
        VIP_RETURN rc = VipCQWait(s->cq, 10000, &h, &isr);
        int v = rc == VIP_SUCCESS ? vindex(s, h) : -1;
        if (v < 0 || !isr) {
            snprintf(c->why, sizeof c->why, "completion %u: VipCQWait %s (%s), VI %d, %s", n,
                     vip_strerror(rc), vip_last_error(), v, isr ? "receive" : "send");
            goto fail;
        }
        unsigned k = got[v] % LR;
        uint32_t i = got[v] * LV + (uint32_t)v; /* per VI in order: message i */
        if ((rc = VipRecvDone(h, &d)) != VIP_SUCCESS || d != desc(s, (unsigned)v, k)) {
            snprintf(c->why, sizeof c->why, "VI %d: VipRecvDone %s", v, vip_strerror(rc));
            goto fail;
        }
        if (recv_ok(s, d, data(s, (unsigned)v, k), load_len(i), i, c->why, sizeof c->why))
            goto fail;
        if ((rc = post_recv(s, (unsigned)v, k)) != VIP_SUCCESS) {
            snprintf(c->why, sizeof c->why, "repost: %s", vip_strerror(rc));
            goto fail;
        }
        got[v]++;
        atomic_store(&c->l->sh->reposted[v], got[v]);
    }
    atomic_store(&c->done, 1);
    return NULL;
fail:
    c->failed = 1;
    atomic_store(&c->done, 1);
    return NULL;
}

static void test_resize_under_load(void)
{
    struct load l = {.n = tl_count(100000, 1000000)};
    struct vset s;
    struct tl_child ch = {.pid = -1};
    struct consumer c = {.s = &s, .l = &l};
    pthread_t th;
    int started = 0;
    memset(&s, 0, sizeof s);
    l.sh = mmap(NULL, sizeof *l.sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    TCHK(l.sh != MAP_FAILED);
    memset(l.sh, 0, sizeof *l.sh);
    for (unsigned v = 0; v < LV; v++)
        tl_discrim(l.disc[v], "l");
    TCHK(tl_spawn(&ch, load_sender, &l) == 0);
    TRC(vset_up(&s, "via0", LV, LR, LLEN, VIP_SERVICE_RELIABLE_DELIVERY, LV * LR, 0),
        VIP_SUCCESS);
    for (unsigned v = 0; v < LV; v++) {
        for (unsigned k = 0; k < LR; k++)
            TRC(post_recv(&s, v, k), VIP_SUCCESS);
        TRC(tl_accept(&s.t, s.vi[v], l.disc[v], 20000), VIP_SUCCESS);
    }
    TCHK(pthread_create(&th, NULL, consume, &c) == 0);
    started = 1;
    static const VIP_ULONG sizes[] = {LV * LR, 4096, 100, 1024, LV * LR + 1, 65536, 128, 2048};
    unsigned resized = 0;
    for (unsigned i = 0; !atomic_load(&c.done); i++) {
        VIP_RETURN rc = VipResizeCQ(s.cq, sizes[i % (sizeof sizes / sizeof sizes[0])]);
        if (rc != VIP_SUCCESS) {
            tl_report_rc(__FILE__, __LINE__, "VipResizeCQ", rc, VIP_SUCCESS);
            CU_FAIL("a resize was refused under load");
            break;
        }
        resized++;
    }
    pthread_join(th, NULL);
    started = 0;
    if (c.failed)
        fprintf(stderr, "\n  consumer: %s\n", c.why);
    CU_ASSERT_FALSE(c.failed);
    CU_ASSERT(resized >= tl_count(10, 10)); /* fewer under TL_SCALE: a shorter stream */
    VIP_VI_HANDLE h;
    VIP_BOOLEAN isr;
    TRC_SOFT(VipCQDone(s.cq, &h, &isr), VIP_NOT_DONE);
    if (!c.failed) {
        tl_parent_post(&ch, 'q');
        TCHILD_OK(&ch, 60000);
    }
out:
    tl_child_kill(&ch); /* a failure above left it waiting */
    if (started)
        pthread_join(th, NULL); /* its wait ends with the connection */
    vset_down(&s);
    if (l.sh != MAP_FAILED && l.sh)
        munmap(l.sh, sizeof *l.sh);
}

/* ---- 64 VIs, one CQ per side for everything -------------------------------------------
 * Each round we post 16 receives and 16 sends on each of our 64 VIs; the
 * child echoes every message, its sends and receives also completing into
 * one CQ. At reliable reception the child's last echo send completes only
 * once our NIC placed it, so when it says so our CQ holds 2048 entries:
 * 1024 sends and 1024 receives. */
enum { SV = 64, SPER = 16, SLEN = 200, SROUNDS = 3 };

struct shared64 {
    char disc[SV][17];
    unsigned rounds;
};

#define STAG(r, v, k) (((uint32_t)(r) << 16) | ((uint32_t)(v) << 8) | (uint32_t)(k))

static int echo64(void *arg)
{
    const struct shared64 *m = arg;
    struct vset s;
    uint32_t rdone[SV] = {0}, sdone[SV] = {0};
    char why[256];
    TC_RC(vset_up(&s, "via1", SV, 2 * SPER, SLEN, VIP_SERVICE_RELIABLE_RECEPTION, 4096, 1),
          VIP_SUCCESS);
    for (unsigned v = 0; v < SV; v++) {
        for (unsigned k = 0; k < SPER; k++)
            TC_RC(post_recv(&s, v, k), VIP_SUCCESS);
        TC_RC(tl_accept(&s.t, s.vi[v], m->disc[v], 20000), VIP_SUCCESS);
    }
    for (unsigned r = 0; r < m->rounds; r++) {
        for (unsigned n = 0; n < 2 * SV * SPER; n++) {
            VIP_VI_HANDLE h;
            VIP_BOOLEAN isr;
            VIP_DESCRIPTOR *d;
            TC_RC(VipCQWait(s.cq, 10000, &h, &isr), VIP_SUCCESS);
            int v = vindex(&s, h);
            TC_CHECK(v >= 0);
            if (isr) {
                unsigned k = rdone[v]++ % SPER;
                TC_RC(VipRecvDone(h, &d), VIP_SUCCESS);
                TC_CHECK(d == desc(&s, (unsigned)v, k));
                if (recv_ok(&s, d, data(&s, (unsigned)v, k), SLEN, STAG(r, v, k), why,
                            sizeof why))
                    tl_child_fail(__FILE__, __LINE__, "echo VI %d: %s", v, why);
                /* the echo goes out of the receive buffer */
                VIP_DESCRIPTOR *e = desc(&s, (unsigned)v, SPER + k);
                tl_desc_1(e, data(&s, (unsigned)v, k), SLEN, s.b.mh);
                e->CS.Control |= VIP_CONTROL_IMMEDIATE;
                e->CS.ImmediateData = d->CS.ImmediateData;
                TC_RC(VipPostSend(h, e, s.b.mh), VIP_SUCCESS);
            } else {
                unsigned k = sdone[v]++ % SPER;
                TC_RC(VipSendDone(h, &d), VIP_SUCCESS);
                TC_CHECK(d == desc(&s, (unsigned)v, SPER + k));
                TC_CHECK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
                TC_RC(post_recv(&s, (unsigned)v, k), VIP_SUCCESS);
            }
        }
        TC_CHECK(tl_child_post('e') == 0);
        TC_CHECK(tl_child_take(30000) == 'n');
    }
    vset_down(&s);
    return 0;
}

static void test_shared_64vi(void)
{
    struct shared64 m = {.rounds = SROUNDS};
    struct vset s;
    struct tl_child ch = {.pid = -1};
    char why[256];
    memset(&s, 0, sizeof s);
    for (unsigned v = 0; v < SV; v++)
        tl_discrim(m.disc[v], "s");
    TCHK(tl_spawn(&ch, echo64, &m) == 0);
    TRC(vset_up(&s, "via0", SV, 2 * SPER, SLEN, VIP_SERVICE_RELIABLE_RECEPTION, 4096, 1),
        VIP_SUCCESS);
    for (unsigned v = 0; v < SV; v++)
        TRC(tl_request(&s.t, s.vi[v], "via1", m.disc[v], 20000), VIP_SUCCESS);
    for (unsigned r = 0; r < SROUNDS; r++) {
        for (unsigned v = 0; v < SV; v++)
            for (unsigned k = 0; k < SPER; k++)
                TRC(post_recv(&s, v, k), VIP_SUCCESS);
        for (unsigned k = 0; k < SPER; k++)
            for (unsigned v = 0; v < SV; v++)
                TRC(post_send(&s, v, SPER + k, SLEN, STAG(r, v, k)), VIP_SUCCESS);
        TCHK(tl_parent_take(&ch, 60000) == 'e');
        /* 2048 queued: not one entry fewer will do, exactly that will */
        TRC_SOFT(VipResizeCQ(s.cq, 2 * SV * SPER - 1), VIP_INVALID_PARAMETER);
        TRC(VipResizeCQ(s.cq, 2 * SV * SPER), VIP_SUCCESS);
        uint32_t rdone[SV] = {0}, sdone[SV] = {0};
        for (unsigned n = 0; n < 2 * SV * SPER; n++) {
            VIP_VI_HANDLE h;
            VIP_BOOLEAN isr;
            VIP_DESCRIPTOR *d;
            TRC(VipCQDone(s.cq, &h, &isr), VIP_SUCCESS);
            int v = vindex(&s, h);
            TCHK(v >= 0);
            if (isr) {
                unsigned k = rdone[v]++;
                TCHK(k < SPER);
                TRC(VipRecvDone(h, &d), VIP_SUCCESS);
                TCHK(d == desc(&s, (unsigned)v, k));
                if (recv_ok(&s, d, data(&s, (unsigned)v, k), SLEN, STAG(r, v, k), why,
                            sizeof why)) {
                    fprintf(stderr, "\n  round %u VI %d: %s\n", r, v, why);
                    CU_FAIL("echo");
                    goto out;
                }
            } else {
                unsigned k = sdone[v]++;
                TCHK(k < SPER);
                TRC(VipSendDone(h, &d), VIP_SUCCESS);
                TCHK(d == desc(&s, (unsigned)v, SPER + k));
                CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
            }
        }
        VIP_VI_HANDLE h;
        VIP_BOOLEAN isr;
        TRC_SOFT(VipCQDone(s.cq, &h, &isr), VIP_NOT_DONE);
        TRC(VipResizeCQ(s.cq, 4096), VIP_SUCCESS);
        tl_parent_post(&ch, 'n');
    }
    TCHILD_OK(&ch, 60000);
out:
    tl_child_kill(&ch); /* a failure above left it waiting */
    vset_down(&s);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_resize_args),
        TL_TEST(test_resize_pending_order),
        TL_TEST(test_resize_under_load),
        TL_TEST(test_shared_64vi),
        TL_END,
    };
    return tl_main(argc, argv, "cq", tests);
}

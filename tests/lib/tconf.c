/*
 * tconf.c - helpers of the conformance suite (see tconf.h).
 */
#include "tconf.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- reasons ---------------------------------------------------------------- */

static _Thread_local char primed[96];

void tc_err_prime(void)
{
    /* An unknown device name is refused before anything is opened, and its
     * reason quotes the name: a name of our own makes a text nobody else's. */
    static unsigned n;
    char name[48];
    snprintf(name, sizeof name, "tc-prime-%u", __atomic_add_fetch(&n, 1, __ATOMIC_RELAXED));
    VIP_NIC_HANDLE h;
    VipOpenNic(name, &h);
    snprintf(primed, sizeof primed, "%s", vip_last_error());
}

int tc_err_fresh(void)
{
    const char *e = vip_last_error();
    return e && *e && strncmp(e, primed, sizeof primed - 1) != 0;
}

/* ---- pairs ------------------------------------------------------------------------ */

int tc_pair_open(struct tc_pair *p, const char *dev0, const char *dev1)
{
    memset(p, 0, sizeof *p);
    const char *dev[2] = {dev0, dev1};
    for (int i = 0; i < 2; i++) {
        VIP_RETURN rc = tl_open(&p->e[i].t, dev[i]);
        if (rc == VIP_SUCCESS)
            rc = tl_buf_alloc(&p->e[i].t, &p->e[i].b, TC_BUF);
        if (rc != VIP_SUCCESS) {
            tl_report_rc(__FILE__, __LINE__, "open/register", rc, VIP_SUCCESS);
            CU_FAIL("tc_pair_open");
            return -1;
        }
    }
    return 0;
}

int tc_pair_vis(struct tc_pair *p, VIP_RELIABILITY_LEVEL rel)
{
    for (int i = 0; i < 2; i++) {
        struct tc_end *e = &p->e[i];
        VIP_RETURN rc = tl_vi(&e->t, rel, e->cq, e->cq, &e->vi);
        if (rc != VIP_SUCCESS) {
            e->vi = NULL;
            tl_report_rc(__FILE__, __LINE__, "VipCreateVi", rc, VIP_SUCCESS);
            CU_FAIL("tc_pair_vis");
            return -1;
        }
    }
    return 0;
}

void tc_dev_name(const struct tl_nic *t, char out[16])
{
    snprintf(out, 16, "via%u", t->attr.LocalNicAddress ? t->attr.LocalNicAddress[5] : 0u);
}

int tc_pair_connect(struct tc_pair *p)
{
    return tc_connect(&p->e[0].t, p->e[0].vi, &p->e[1].t, p->e[1].vi);
}

int tc_connect(struct tl_nic *a, VIP_VI_HANDLE va, struct tl_nic *b, VIP_VI_HANDLE vb)
{
    struct tc_call acc;
    char disc[17], host[16];
    tl_discrim(disc, "c");
    tc_dev_name(b, host);
    if (tc_call_start(&acc, 1, b, vb, NULL, disc, 20000)) {
        CU_FAIL("accept thread");
        return -1;
    }
    VIP_RETURN rc = tl_request(a, va, host, disc, 20000);
    VIP_RETURN arc = tc_call_join(&acc);
    if (rc != VIP_SUCCESS || arc != VIP_SUCCESS) {
        tl_report_rc(__FILE__, __LINE__, "connect (request, accept)", rc ? rc : arc,
                     VIP_SUCCESS);
        CU_FAIL("tc_connect");
        return -1;
    }
    return 0;
}

void tc_pair_close(struct tc_pair *p)
{
    for (int i = 0; i < 2; i++) {
        struct tc_end *e = &p->e[i];
        if (e->vi) {
            VipDisconnect(e->vi);
            VIP_RETURN rc = VipDestroyVi(e->vi);
            if (rc != VIP_SUCCESS)
                tl_report_rc(__FILE__, __LINE__, "VipDestroyVi", rc, VIP_SUCCESS);
            CU_ASSERT_EQUAL(rc, VIP_SUCCESS);
            e->vi = NULL;
        }
        if (e->cq) {
            VIP_RETURN rc = VipDestroyCQ(e->cq);
            CU_ASSERT_EQUAL(rc, VIP_SUCCESS);
            e->cq = NULL;
        }
        tl_buf_free(&e->b);
        tl_close(&e->t);
    }
}

VIP_RETURN tc_post_recv(struct tc_end *e, unsigned slot, uint32_t len)
{
    tl_desc_1(tc_desc(e, slot), tc_data(e, slot), len, e->b.mh);
    return VipPostRecv(e->vi, tc_desc(e, slot), e->b.mh);
}

VIP_RETURN tc_post_send(struct tc_end *e, unsigned slot, uint32_t len, uint32_t seq)
{
    tl_fill(tc_data(e, slot), len, seq);
    tl_desc_1(tc_desc(e, slot), tc_data(e, slot), len, e->b.mh);
    return VipPostSend(e->vi, tc_desc(e, slot), e->b.mh);
}

VIP_DESCRIPTOR *tc_wait(VIP_VI_HANDLE vi, int recv, VIP_ULONG ms)
{
    VIP_DESCRIPTOR *d = NULL;
    VIP_RETURN rc = recv ? VipRecvWait(vi, ms, &d) : VipSendWait(vi, ms, &d);
    return rc == VIP_SUCCESS ? d : NULL;
}

int tc_wait_state(VIP_VI_HANDLE vi, VIP_VI_STATE st, int ms)
{
    uint64_t until = tl_now_ms() + (uint64_t)ms;
    for (;;) {
        if (tl_vi_state(vi) == st)
            return 0;
        if (tl_now_ms() >= until)
            return -1;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* ---- connection calls on a thread ---------------------------------------------------------- */

static void *call_main(void *arg)
{
    struct tc_call *c = arg;
    c->rc = c->accept ? tl_accept(c->t, c->vi, c->disc, c->timeout)
                      : tl_request(c->t, c->vi, c->host, c->disc, c->timeout);
    return NULL;
}

int tc_call_start(struct tc_call *c, int accept, struct tl_nic *t, VIP_VI_HANDLE vi,
                  const char *host, const char *disc, VIP_ULONG timeout)
{
    memset(c, 0, sizeof *c);
    c->accept = accept;
    c->t = t;
    c->vi = vi;
    snprintf(c->host, sizeof c->host, "%s", host ? host : "");
    snprintf(c->disc, sizeof c->disc, "%s", disc);
    c->timeout = timeout;
    c->rc = VIP_ERROR_RESOURCE;
    if (pthread_create(&c->th, NULL, call_main, c) != 0)
        return -1;
    c->started = 1;
    return 0;
}

VIP_RETURN tc_call_join(struct tc_call *c)
{
    if (c->started) {
        pthread_join(c->th, NULL);
        c->started = 0;
    }
    return c->rc;
}

/* ---- error callbacks ------------------------------------------------------------------------ */

void tc_errlog_init(struct tc_errlog *l)
{
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
}

void tc_errlog_handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    struct tc_errlog *l = ctx;
    pthread_mutex_lock(&l->lock);
    if (l->n < sizeof l->e / sizeof l->e[0]) {
        l->e[l->n] = *e;
        l->thread[l->n] = pthread_self();
    }
    l->n++;
    pthread_mutex_unlock(&l->lock);
}

unsigned tc_errlog_count(struct tc_errlog *l)
{
    pthread_mutex_lock(&l->lock);
    unsigned n = l->n;
    pthread_mutex_unlock(&l->lock);
    return n;
}

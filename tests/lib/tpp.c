/*
 * tpp.c - a verified ping-pong between two processes (see tpp.h).
 */
#include "tpp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DSTRIDE 512u /* bytes per descriptor slot (16 segments fit) */

void tpp_defaults(struct tpp_cfg *c, VIP_RELIABILITY_LEVEL rel, unsigned nmsgs,
                  enum tpp_kind kind)
{
    memset(c, 0, sizeof *c);
    c->rel = rel;
    snprintf(c->srv_dev, sizeof c->srv_dev, "via0");
    snprintf(c->cli_dev, sizeof c->cli_dev, "via0");
    tl_discrim(c->disc, "pp");
    c->nmsgs = tl_count(nmsgs, nmsgs);
    c->kind = kind;
    c->sseg = 1;
    c->rseg = 1;
    c->nrecv = 4;
    c->timeout = 20000;
}

uint32_t tpp_size(const struct tpp_cfg *c, unsigned i)
{
    const uint32_t max = 1u << 20;
    switch (c->kind) {
    case TPP_SMALL:
        return (i * 7919u + (i >> 3)) % 4097u;
    case TPP_LARGE:
        if (i % 7 == 0)
            return max;
        return 65536u + (uint32_t)(((uint64_t)i * 104729u * 31u) % (max - 65536u));
    case TPP_MIXED:
        if (i % 16 == 15)
            return 65536u + (uint32_t)(((uint64_t)i * 7727u) % (max - 65536u + 1));
        return (i * 7919u) % 4097u;
    case TPP_FIXED:
    default:
        return c->fixed;
    }
}

struct side {
    const struct tpp_cfg *c;
    struct tl_nic t;
    struct tl_buf desc, sbuf, rbuf;
    VIP_VI_HANDLE vi;
    char *err;
    size_t cap;
};

static int fail(struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct side *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, s->cap, fmt, ap);
    va_end(ap);
    return -1;
}

static VIP_DESCRIPTOR *rdesc(struct side *s, unsigned k)
{
    return (VIP_DESCRIPTOR *)(void *)(s->desc.p + DSTRIDE * (k + 1));
}

static uint8_t *rdata(struct side *s, unsigned k)
{
    return s->rbuf.p + (size_t)k * (1u << 20);
}

static int post_recv(struct side *s, unsigned k)
{
    tl_desc_split(rdesc(s, k), rdata(s, k), 1u << 20, s->c->rseg, s->rbuf.mh);
    VIP_RETURN rc = VipPostRecv(s->vi, rdesc(s, k), s->desc.mh);
    if (rc != VIP_SUCCESS)
        return fail(s, "VipPostRecv: %s (%s)", vip_strerror(rc), vip_last_error());
    return 0;
}

/* Receive message i into slot k and check it. */
static int recv_check(struct side *s, unsigned i, unsigned k)
{
    VIP_DESCRIPTOR *d = NULL;
    VIP_RETURN rc = VipRecvWait(s->vi, s->c->timeout, &d);
    if (rc != VIP_SUCCESS)
        return fail(s, "msg %u: VipRecvWait: %s (%s)", i, vip_strerror(rc), vip_last_error());
    if (d != rdesc(s, k))
        return fail(s, "msg %u: receive completed out of order (%p, expected %p)", i,
                    (void *)d, (void *)rdesc(s, k));
    uint32_t len = tpp_size(s->c, i), st = d->CS.Status;
    if ((st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK | VIP_STATUS_OP_MASK)) !=
        (VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE))
        return fail(s, "msg %u (%u bytes): receive status 0x%x", i, len, st);
    if (d->CS.Length != len)
        return fail(s, "msg %u: Length %u, expected %u", i, d->CS.Length, len);
    int imm = s->c->imm_every && i % s->c->imm_every == 0;
    if (!!(st & VIP_STATUS_IMMEDIATE) != imm)
        return fail(s, "msg %u: IMMEDIATE status bit %d, expected %d", i,
                    !!(st & VIP_STATUS_IMMEDIATE), imm);
    if (imm && d->CS.ImmediateData != (0xA5000000u ^ i))
        return fail(s, "msg %u: ImmediateData 0x%x", i, d->CS.ImmediateData);
    long bad = tl_verify(rdata(s, k), len, i);
    if (bad >= 0)
        return fail(s, "msg %u (%u bytes): payload differs at byte %ld", i, len, bad);
    return 0;
}

/* Send len bytes at data as message i; wait for its completion. */
static int send_msg(struct side *s, unsigned i, uint8_t *data, VIP_MEM_HANDLE mh)
{
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)s->desc.p;
    uint32_t len = tpp_size(s->c, i);
    tl_desc_split(sd, data, len, s->c->sseg, mh);
    if (s->c->imm_every && i % s->c->imm_every == 0) {
        sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
        sd->CS.ImmediateData = 0xA5000000u ^ i;
    }
    VIP_RETURN rc = VipPostSend(s->vi, sd, s->desc.mh);
    if (rc != VIP_SUCCESS)
        return fail(s, "msg %u: VipPostSend: %s (%s)", i, vip_strerror(rc), vip_last_error());
    VIP_DESCRIPTOR *d = NULL;
    rc = VipSendWait(s->vi, s->c->timeout, &d);
    if (rc != VIP_SUCCESS)
        return fail(s, "msg %u: VipSendWait: %s (%s)", i, vip_strerror(rc), vip_last_error());
    if (d != sd)
        return fail(s, "msg %u: wrong send descriptor completed", i);
    uint32_t st = d->CS.Status;
    if (!(st & VIP_STATUS_DONE) || (st & VIP_STATUS_ERROR_MASK) ||
        (st & VIP_STATUS_OP_MASK) != VIP_STATUS_OP_SEND)
        return fail(s, "msg %u (%u bytes): send status 0x%x", i, len, st);
    return 0;
}

/*
 * Before either side disconnects: a paced NIC completes the server's last
 * echo (T6) a little after the client has it, and a disconnect flushes what
 * has not completed. So the server sends an empty message once that echo
 * has completed, and the client leaves only when it has that message. The
 * message itself may complete flushed: the client leaves as it lands.
 */
static int bye(struct side *s, int server)
{
    VIP_DESCRIPTOR *d = NULL;
    VIP_RETURN rc;
    if (server) {
        VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)s->desc.p;
        tl_desc_build(sd, VIP_CONTROL_OP_SENDRECV, 0, 0, NULL, NULL, 0);
        if ((rc = VipPostSend(s->vi, sd, s->desc.mh)) != VIP_SUCCESS)
            return fail(s, "bye: VipPostSend: %s (%s)", vip_strerror(rc), vip_last_error());
        if ((rc = VipSendWait(s->vi, s->c->timeout, &d)) != VIP_SUCCESS)
            return fail(s, "bye: VipSendWait: %s (%s)", vip_strerror(rc), vip_last_error());
        uint32_t st = d->CS.Status & ~(uint32_t)VIP_STATUS_DESC_FLUSHED_ERROR;
        if (d != sd || (st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) != VIP_STATUS_DONE)
            return fail(s, "bye: send status 0x%x", d->CS.Status);
        return 0;
    }
    if ((rc = VipRecvWait(s->vi, s->c->timeout, &d)) != VIP_SUCCESS)
        return fail(s, "bye: VipRecvWait: %s (%s)", vip_strerror(rc), vip_last_error());
    if (d != rdesc(s, s->c->nmsgs % s->c->nrecv) || d->CS.Length != 0 ||
        (d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) != VIP_STATUS_DONE)
        return fail(s, "bye: receive status 0x%x, Length %u", d->CS.Status, d->CS.Length);
    return 0;
}

static void side_close(struct side *s)
{
    if (s->vi) {
        VipDisconnect(s->vi);
        VipDestroyVi(s->vi);
        s->vi = NULL;
    }
    tl_buf_free(&s->desc);
    tl_buf_free(&s->sbuf);
    tl_buf_free(&s->rbuf);
    tl_close(&s->t);
}

int tpp_side(const struct tpp_cfg *c, int server, char *err, size_t cap)
{
    struct side s = {.c = c, .err = err, .cap = cap};
    int r = -1;
    VIP_RETURN rc;
    err[0] = 0;
    if ((rc = tl_open(&s.t, server ? c->srv_dev : c->cli_dev)) != VIP_SUCCESS) {
        fail(&s, "open %s: %s (%s)", server ? c->srv_dev : c->cli_dev, vip_strerror(rc),
             vip_last_error());
        return -1;
    }
    if (tl_buf_alloc(&s.t, &s.desc, DSTRIDE * 20) != VIP_SUCCESS ||
        (!server && tl_buf_alloc(&s.t, &s.sbuf, 1u << 20) != VIP_SUCCESS) ||
        tl_buf_alloc(&s.t, &s.rbuf, (size_t)c->nrecv << 20) != VIP_SUCCESS) {
        fail(&s, "buffers: %s", vip_last_error());
        goto out;
    }
    if ((rc = tl_vi(&s.t, c->rel, NULL, NULL, &s.vi)) != VIP_SUCCESS) {
        s.vi = NULL;
        fail(&s, "VipCreateVi: %s (%s)", vip_strerror(rc), vip_last_error());
        goto out;
    }
    for (unsigned k = 0; k < c->nrecv; k++)
        if (post_recv(&s, k))
            goto out;
    rc = server ? tl_accept(&s.t, s.vi, c->disc, c->timeout)
                : tl_request(&s.t, s.vi, c->srv_host[0] ? c->srv_host : c->srv_dev, c->disc,
                             c->timeout);
    if (rc != VIP_SUCCESS) {
        fail(&s, "%s: %s (%s)", server ? "accept" : "request", vip_strerror(rc),
             vip_last_error());
        goto out;
    }
    if (tl_vi_state(s.vi) != VIP_STATE_CONNECTED) {
        fail(&s, "VI not connected after %s", server ? "accept" : "request");
        goto out;
    }
    for (unsigned i = 0; i < c->nmsgs; i++) {
        unsigned k = i % c->nrecv;
        if (server) {
            if (recv_check(&s, i, k) || send_msg(&s, i, rdata(&s, k), s.rbuf.mh) ||
                post_recv(&s, k))
                goto out;
        } else {
            tl_fill(s.sbuf.p, tpp_size(c, i), i);
            if (send_msg(&s, i, s.sbuf.p, s.sbuf.mh) || recv_check(&s, i, k) ||
                post_recv(&s, k))
                goto out;
            if (c->notify_after && i + 1 == c->notify_after)
                tl_child_post('n');
        }
    }
    if (bye(&s, server))
        goto out;
    r = 0;
out:
    side_close(&s);
    return r;
}

static int child(void *arg, int server)
{
    char err[512];
    if (tpp_side(arg, server, err, sizeof err))
        tl_child_fail(__FILE__, __LINE__, "%s: %s", server ? "server" : "client", err);
    return 0;
}

int tpp_child_client(void *cfg)
{
    return child(cfg, 0);
}

int tpp_child_server(void *cfg)
{
    return child(cfg, 1);
}

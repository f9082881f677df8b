/*
 * techo.c - an echo peer in a child process (see techo.h).
 */
#include "techo.h"

#include <stdio.h>
#include <string.h>

#define ECHO_DESC(b, i) ((VIP_DESCRIPTOR *)(void *)((b)->p + 64u * (i)))
#define ECHO_SEND(b) ECHO_DESC(b, 32)
#define ECHO_DATA(b, i) ((b)->p + 4096u + (size_t)TECHO_MAX * (i))

static int echo_child(void *arg)
{
    const struct techo *e = arg;
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    TC_RC(tl_open(&t, e->dev), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&t, &b, 4096u + (size_t)TECHO_MAX * e->nrecv), VIP_SUCCESS);
    TC_RC(tl_vi(&t, e->rel, NULL, NULL, &vi), VIP_SUCCESS);
    for (unsigned i = 0; i < e->nrecv; i++) {
        tl_desc_1(ECHO_DESC(&b, i), ECHO_DATA(&b, i), TECHO_MAX, b.mh);
        TC_RC(VipPostRecv(vi, ECHO_DESC(&b, i), b.mh), VIP_SUCCESS);
    }
    TC_RC(tl_accept(&t, vi, e->disc, 20000), VIP_SUCCESS);
    for (;;) {
        VIP_DESCRIPTOR *d, *x;
        TC_RC(VipRecvWait(vi, 30000, &d), VIP_SUCCESS);
        unsigned i = (unsigned)(((uint8_t *)d - b.p) / 64);
        if (i >= e->nrecv || d != ECHO_DESC(&b, i))
            tl_child_fail(__FILE__, __LINE__, "echo: VipRecvWait gave %p", (void *)d);
        if ((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) != VIP_STATUS_DONE)
            tl_child_fail(__FILE__, __LINE__, "echo: receive status 0x%x", d->CS.Status);
        int imm = (d->CS.Status & VIP_STATUS_IMMEDIATE) != 0;
        if (imm && d->CS.ImmediateData == TECHO_QUIT)
            break;
        VIP_DESCRIPTOR *sd = ECHO_SEND(&b);
        tl_desc_1(sd, ECHO_DATA(&b, i), d->CS.Length, b.mh);
        if (imm) {
            sd->CS.Control |= VIP_CONTROL_IMMEDIATE;
            sd->CS.ImmediateData = d->CS.ImmediateData;
        }
        TC_RC(VipPostSend(vi, sd, b.mh), VIP_SUCCESS);
        TC_RC(VipSendWait(vi, 30000, &x), VIP_SUCCESS);
        if (x != sd || (x->CS.Status & VIP_STATUS_ERROR_MASK))
            tl_child_fail(__FILE__, __LINE__, "echo: send status 0x%x", x->CS.Status);
        tl_desc_1(d, ECHO_DATA(&b, i), TECHO_MAX, b.mh);
        TC_RC(VipPostRecv(vi, d, b.mh), VIP_SUCCESS);
    }
    TC_CHECK(tl_child_take(30000) == 'x');
    VipDisconnect(vi);
    VipDestroyVi(vi);
    tl_buf_free(&b);
    tl_close(&t);
    return 0;
}

int techo_start(struct techo *e, const char *dev, VIP_RELIABILITY_LEVEL rel)
{
    memset(e, 0, sizeof *e);
    e->child.pid = -1;
    snprintf(e->dev, sizeof e->dev, "%s", dev);
    tl_discrim(e->disc, "e");
    e->rel = rel;
    e->nrecv = 16;
    return tl_spawn(&e->child, echo_child, e);
}

void techo_stop(struct techo *e, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh)
{
    if (!vi) {
        tl_child_kill(&e->child);
        return;
    }
    VIP_DESCRIPTOR *x;
    tl_desc_build(d, VIP_CONTROL_IMMEDIATE, TECHO_QUIT, 0, NULL, NULL, mh);
    TRC_SOFT(VipPostSend(vi, d, mh), VIP_SUCCESS);
    TRC_SOFT(VipSendWait(vi, 10000, &x), VIP_SUCCESS);
    tl_parent_post(&e->child, 'x');
    TCHILD_OK(&e->child, 30000);
}

/*
 * am_endpoint.c - endpoints: allocation and names, tags, the segment,
 * the handler table, statistics.
 *
 * A name (en_t) is the NIC address plus (pid, endpoint number); the VIA
 * discriminator the endpoint listens on for connections is made from the
 * same two numbers, so a connection request says who asks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "am_int.h"

#define AM2_MAX_SEG ((uintptr_t)1 << 32)

/* The returned-message handler a program did not set: say so and stop, as
 * an unhandled error must not pass silently. */
static void default_returned(int status, op_t opcode, void *token)
{
    (void)token;
    fprintf(stderr, "am2: a message came back undelivered (status %d, opcode %d) and the "
                    "endpoint has no handler 0\n", status, opcode);
    abort();
}

int AM_AllocateEndpoint(eb_t eb, ep_t *endp, en_t *name)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_bundle_ok(eb) || !endp || !name)
        return am_fail(AM_ERR_BAD_ARG, "bad bundle or NULL result");
    struct am2_ep *ep = calloc(1, sizeof *ep);
    if (!ep)
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    ep->eb = eb;
    ep->tag = AM_NONE;
    ep->rets_tail = &ep->rets;
    ep->handler[0] = (am2_handler_fn_t)default_returned;
    memcpy(ep->name.nic, am_g.attr.LocalNicAddress,
           am_g.attr.NicAddressLen < 6 ? am_g.attr.NicAddressLen : 6);
    ep->name.magic = AM2_EN_MAGIC;
    ep->name.pid = (uint32_t)getpid();
    ep->name.id = ++am_g.next_ep_id & 0xFFFFFFu;
    am_en_disc(&ep->name, ep->disc);
    size_t dl = strlen(ep->disc);
    ep->listen = calloc(1, sizeof *ep->listen + 6 + dl);
    ep->nxl = 256;
    ep->xl = calloc((size_t)ep->nxl, sizeof *ep->xl);
    if (!ep->listen || !ep->xl) {
        free(ep->listen);
        free(ep->xl);
        free(ep);
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    }
    ep->listen->HostAddressLen = 6;
    ep->listen->DiscriminatorLen = (VIP_UINT16)dl;
    uint8_t *hb = (uint8_t *)ep->listen + offsetof(VIP_NET_ADDRESS, HostAddress);
    memcpy(hb, ep->name.nic, 6);
    memcpy(hb + 6, ep->disc, dl);
    if (am_listen_start(ep) != AM_OK) {
        free(ep->listen);
        free(ep->xl);
        free(ep);
        return AM_ERR_RESOURCE;
    }
    if (am_g.shm && am_shm_create(ep) != AM_OK && getenv("AM2_DEBUG"))
        fprintf(stderr, "am2: no shared-memory queue: %s\n", AMX_LastError());
    ep->next = eb->eps;
    eb->eps = ep;
    *endp = ep;
    *name = ep->name;
    return AM_OK;
}

static void am_ep_destroy(struct am2_ep *ep)
{
    am_listen_stop(ep); /* no new peers from here on */
    /* Disconnecting flushes what is still queued: let the NIC send it. */
    uint64_t end = am_now_ms() + 1000;
    for (bool busy = true; busy && am_now_ms() < end;) {
        am_send_reclaim(ep);
        busy = false;
        for (struct am_peer *p = ep->peers; p; p = p->next)
            busy |= p->sends_out > 0 && p->state == PEER_CONNECTED;
    }
    while (ep->peers) {
        struct am_peer *p = ep->peers;
        ep->peers = p->next;
        am_peer_destroy(p);
    }
    am_send_free_all(ep);
    am_local_drop(ep);
    am_shm_destroy(ep);
    while (ep->rets) {
        struct am_ret *r = ep->rets;
        ep->rets = r->next;
        free(r);
    }
    for (unsigned i = 0; i < sizeof ep->reg / sizeof ep->reg[0]; i++)
        if (ep->reg[i].p)
            VipDeregisterMem(am_g.nic, (VIP_PVOID)ep->reg[i].p, ep->reg[i].mh);
    if (ep->seg)
        VipDeregisterMem(am_g.nic, ep->seg, ep->seg_mh);
    free(ep->listen);
    free(ep->xl);
    free(ep);
}

int AM_FreeEndpoint(ep_t ea)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    if (am_g.cur && am_g.cur->ep == ea)
        return am_fail(AM_ERR_IN_USE, "AM_FreeEndpoint of the endpoint whose handler runs");
    struct am2_bundle *eb = ea->eb;
    for (struct am2_ep **pp = &eb->eps; *pp; pp = &(*pp)->next)
        if (*pp == ea) {
            *pp = ea->next;
            break;
        }
    /* Receives of its VIs taken off the CQ but not handled yet go too. */
    int k = 0;
    for (int i = 0; i < eb->nstash; i++)
        if (eb->stash[i].peer->ep != ea)
            eb->stash[k++] = eb->stash[i];
    eb->nstash = k;
    am_ep_destroy(ea);
    return AM_OK;
}

int AM_SetTag(ep_t ea, tag_t tag)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    ea->tag = tag;
    return AM_OK;
}

int AM_GetTag(ep_t ea, tag_t *tag)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !tag)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL tag");
    *tag = ea->tag;
    return AM_OK;
}

int AM_MaxSegLength(uintptr_t *nbytes)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!nbytes)
        return am_fail(AM_ERR_BAD_ARG, "NULL nbytes");
    *nbytes = AM2_MAX_SEG;
    return AM_OK;
}

/* The segment is registered for RDMA write: peers place long messages
 * there with the NIC. Peers already connected hear of a new segment
 * (SEG) before the old registration goes. */
int AM_SetSeg(ep_t ea, void *addr, uintptr_t nbytes)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    if ((addr == NULL) != (nbytes == 0) || nbytes > AM2_MAX_SEG)
        return am_fail(AM_ERR_BAD_ARG, "segment %p of %zu bytes (max %zu; NULL only with 0)",
                       addr, (size_t)nbytes, (size_t)AM2_MAX_SEG);
    if (am_g.cur)
        return am_fail(AM_ERR_IN_USE, "AM_SetSeg inside a handler");
    VIP_MEM_HANDLE mh = 0;
    if (addr) {
        VIP_MEM_ATTRIBUTES ma = {.Ptag = am_g.ptag, .EnableRdmaWrite = VIP_TRUE};
        VIP_RETURN rc = VipRegisterMem(am_g.nic, addr, nbytes, &ma, &mh);
        if (rc != VIP_SUCCESS)
            return am_fail(AM_ERR_RESOURCE, "the NIC cannot use the segment (VipRegisterMem: %d)",
                           (int)rc);
    }
    void *old = ea->seg;
    VIP_MEM_HANDLE old_mh = ea->seg_mh;
    ea->seg = addr;
    ea->seg_len = nbytes;
    ea->seg_mh = mh;
    ea->seg_gen++;
    int r = am_send_seg(ea);
    if (old)
        VipDeregisterMem(am_g.nic, old, old_mh);
    return r;
}

int AM_GetSeg(ep_t ea, void **addr, uintptr_t *nbytes)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !addr || !nbytes)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL result");
    *addr = ea->seg;
    *nbytes = ea->seg_len;
    return AM_OK;
}

int AM2_SetHandler(ep_t ea, handler_t h, am2_handler_fn_t fn)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !fn)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL function");
    ea->handler[h] = fn;
    return AM_OK;
}

int AM2_SetHandlerAny(ep_t ea, handler_t *h, am2_handler_fn_t fn)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !fn || !h)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL argument");
    for (int i = 1; i < AM2_MAX_HANDLERS; i++)
        if (!ea->handler[i]) {
            ea->handler[i] = fn;
            *h = (handler_t)i;
            return AM_OK;
        }
    return am_fail(AM_ERR_RESOURCE, "all %d handlers are set", AM2_MAX_HANDLERS);
}

int AM_GetNumHandlers(ep_t ea, int *n)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !n)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL result");
    *n = AM2_MAX_HANDLERS;
    return AM_OK;
}

/* The table has a fixed size: asking for it is fine, anything else is not. */
int AM_SetNumHandlers(ep_t ea, int n)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || n < 1)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or %d handlers", n);
    if (n != AM2_MAX_HANDLERS)
        return am_fail(AM_ERR_RESOURCE, "the handler table has %d entries", AM2_MAX_HANDLERS);
    return AM_OK;
}

int AMX_GetEndpointStatistics(ep_t ea, amx_stats_t *st)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ea) || !st)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL result");
    *st = ea->st;
    return AM_OK;
}

int AMX_DumpStatistics(void *f, ep_t ea)
{
    AM_API_LOCK();
    amx_stats_t s;
    int r = AMX_GetEndpointStatistics(ea, &s);
    if (r != AM_OK || !f)
        return r != AM_OK ? r : am_fail(AM_ERR_BAD_ARG, "NULL FILE");
    static const char *const cat[AM2_NCAT] = {"short", "medium", "long"};
    for (int c = 0; c < AM2_NCAT; c++)
        fprintf(f, "%-6s requests sent %llu received %llu, replies sent %llu received %llu, "
                   "bytes sent %llu received %llu\n",
                cat[c], (unsigned long long)s.requests_sent[c],
                (unsigned long long)s.requests_received[c], (unsigned long long)s.replies_sent[c],
                (unsigned long long)s.replies_received[c], (unsigned long long)s.bytes_sent[c],
                (unsigned long long)s.bytes_received[c]);
    fprintf(f, "returned %llu refused %llu credit waits %llu connections %llu retransmits %llu\n",
            (unsigned long long)s.returned, (unsigned long long)s.refused,
            (unsigned long long)s.credit_waits, (unsigned long long)s.connections,
            (unsigned long long)s.retransmits);
    return AM_OK;
}

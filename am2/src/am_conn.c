/*
 * am_conn.c - the VI to one remote endpoint (a peer, am_peer.c): its
 * pre-posted receives, and the connection set-up by name; and the choice,
 * per message, between that VI and the peer's shared-memory queue.
 *
 * Every endpoint listens on (its NIC, its discriminator). To reach a peer
 * an endpoint asks with VipConnectRequest, giving its own listening
 * address as the local one, so the side that accepts learns from the
 * request who asks. Either side may ask first and both may ask at once,
 * and a request blocks, so neither may wait long: the endpoint whose name
 * is larger asks in short turns (5 ms) and between turns accepts what is
 * pending for it; the smaller asks in longer turns (50 ms), during which
 * the larger finds its request pending and accepts it. One side always
 * gets through, and each side stops asking once connected, so a pair
 * never has two VIs. The turns are the caller's loop (am_send.c), which
 * polls between them: this file only asks and accepts, and calls nothing
 * that polls. A request meets the endpoint's listener thread
 * (am_listen.c), which holds it until the endpoint's thread accepts it in
 * an AM call; one that waits longer than its asker's turn is dropped, and
 * the asker asks again.
 *
 * Receives are posted before the VI connects, as VIA allows, so the first
 * message (HELLO: the sender's segment) always finds one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

void am_en_disc(const en_t *name, char out[17])
{
    snprintf(out, 17, "a%08x%06x", (unsigned)name->pid, (unsigned)(name->id & 0xFFFFFFu));
}

static bool en_from_addr(const VIP_NET_ADDRESS *a, en_t *name)
{
    const uint8_t *b = (const uint8_t *)a + offsetof(VIP_NET_ADDRESS, HostAddress);
    char disc[17] = {0};
    unsigned pid, id;
    if (a->HostAddressLen != 6 || a->DiscriminatorLen != 15)
        return false;
    memcpy(disc, b + 6, 15);
    if (sscanf(disc, "a%8x%6x", &pid, &id) != 2)
        return false;
    memset(name, 0, sizeof *name);
    memcpy(name->nic, b, 6);
    name->magic = AM2_EN_MAGIC;
    name->pid = pid;
    name->id = id;
    return true;
}

static unsigned vi_hash(VIP_VI_HANDLE vi, unsigned mask)
{
    return (unsigned)(((uint64_t)(uintptr_t)vi * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

struct am_peer *am_peer_of_vi(struct am2_bundle *eb, VIP_VI_HANDLE vi)
{
    if (eb->vimap) {
        for (unsigned i = vi_hash(vi, eb->vimask);; i = (i + 1) & eb->vimask) {
            if (eb->vimap[i].vi == vi)
                return eb->vimap[i].p;
            if (!eb->vimap[i].vi)
                return NULL;
        }
    }
    for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
        for (struct am_peer *p = ep->peers; p; p = p->next)
            if (p->vi == vi)
                return p;
    return NULL;
}

int am_peer_repost(struct am_peer *p, VIP_DESCRIPTOR *d)
{
    size_t i = (size_t)(d - p->rdesc);
    memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = p->rbuf + i * AM_SLOT;
    d->DS[0].Local.Handle = p->rmh;
    d->DS[0].Local.Length = (VIP_UINT32)AM_SLOT;
    VIP_RETURN rc = VipPostRecv(p->vi, d, p->rmh);
    return rc == VIP_SUCCESS ? AM_OK
                             : am_fail(AM_ERR_RESOURCE, "VipPostRecv failed with code %d", (int)rc);
}

/* The bundle's VIs changed (one made, or gone is being destroyed): the
 * list AM_Poll looks at one by one, while there are at most AM_DIRECT. */
void am_bundle_vis_changed(struct am2_bundle *eb, const struct am_peer *gone)
{
    int n = 0;
    for (struct am2_ep *ep = eb->eps; ep; ep = ep->next)
        for (struct am_peer *p = ep->peers; p; p = p->next)
            if (p->vi && p != gone) {
                if (n < AM_DIRECT)
                    eb->direct[n] = p;
                n++;
            }
    eb->ndirect = n <= AM_DIRECT && am_g.direct ? n : 0;
    eb->nvis = n;
    /* the VI map, anew (out of memory: none, the peers are walked) */
    unsigned cap = 8;
    while (cap < 2u * (unsigned)n)
        cap *= 2;
    free(eb->vimap);
    eb->vimap = calloc(cap, sizeof *eb->vimap);
    eb->vimask = cap - 1;
    for (struct am2_ep *ep = eb->eps; eb->vimap && ep; ep = ep->next)
        for (struct am_peer *p = ep->peers; p; p = p->next)
            if (p->vi && p != gone) {
                unsigned i = vi_hash(p->vi, eb->vimask);
                while (eb->vimap[i].vi)
                    i = (i + 1) & eb->vimask;
                eb->vimap[i] = (struct am_vislot){p->vi, p};
            }
}

/* A VI on the bundle's CQ with its receives posted. */
static int peer_make_vi(struct am_peer *p)
{
    if (p->vi)
        return AM_OK;
    struct am2_bundle *eb = p->ep->eb;
    /* Room for every receive, and for the entries of up to AM_CREDITS
     * receives AM_Poll took directly and has not skipped yet. */
    while (eb->cq_used + AM_NRECV + AM_CREDITS > eb->cq_entries) {
        unsigned long n = eb->cq_entries * 2;
        if (n > am_g.attr.MaxCQEntries ||
            VipResizeCQ(eb->cq, n) != VIP_SUCCESS)
            return am_fail(AM_ERR_RESOURCE, "the bundle's completion queue is full (%lu)",
                           eb->cq_entries);
        eb->cq_entries = n;
    }
    size_t len = AM_NRECV * (sizeof(VIP_DESCRIPTOR) + AM_SLOT);
    uint8_t *mem = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    if (!mem)
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    memset(mem, 0, len);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = am_g.ptag};
    VIP_RETURN rc = VipRegisterMem(am_g.nic, mem, len, &ma, &p->rmh);
    if (rc != VIP_SUCCESS) {
        free(mem);
        return am_fail(AM_ERR_RESOURCE, "VipRegisterMem of receive buffers: %d", (int)rc);
    }
    p->rdesc = (VIP_DESCRIPTOR *)mem;
    p->rbuf = mem + AM_NRECV * sizeof(VIP_DESCRIPTOR);
    unsigned long mts = AM2_MAX_LONG > AM_SLOT ? AM2_MAX_LONG : AM_SLOT;
    if (mts > am_g.attr.MaxTransferSize)
        mts = am_g.attr.MaxTransferSize;
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                            .MaxTransferSize = mts,
                            .Ptag = am_g.ptag,
                            .EnableRdmaWrite = VIP_TRUE};
    rc = VipCreateVi(am_g.nic, &va, NULL, eb->cq, &p->vi);
    if (rc != VIP_SUCCESS) {
        VipDeregisterMem(am_g.nic, mem, p->rmh);
        free(mem);
        p->rdesc = NULL;
        p->vi = NULL;
        return am_fail(AM_ERR_RESOURCE, "VipCreateVi failed with code %d", (int)rc);
    }
    for (int i = 0; i < AM_NRECV; i++)
        if (am_peer_repost(p, &p->rdesc[i]) != AM_OK)
            return AM_ERR_RESOURCE;
    eb->cq_used += AM_NRECV;
    am_bundle_vis_changed(eb, NULL);
    return AM_OK;
}

/* The way to the peer for one message: its shared-memory queue when it
 * has one, else its VI through the NIC. Here, below the dispatch and the
 * sends, because connecting sends too (HELLO). */
int am_send_ctl(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len)
{
    if (am_shm_attach(p))
        return am_shm_send(p, w, payload, len);
    return am_send_nic(p, w, payload, len);
}

static void peer_up(struct am_peer *p)
{
    struct am2_ep *ep = p->ep;
    p->state = PEER_CONNECTED;
    ep->st.connections++;
    struct am_wire w = {.kind = AMW_HELLO,
                        .offset = (uint64_t)(uintptr_t)ep->seg,
                        .seg_len = ep->seg_len,
                        .seg_mh = ep->seg_mh,
                        .seg_gen = ep->seg_gen};
    am_send_ctl(p, &w, NULL, 0);
}

void am_accept_pending(struct am2_ep *ep)
{
    for (;;) {
        struct {
            VIP_NET_ADDRESS a;
            uint8_t room[64];
        } ra;
        memset(&ra, 0, sizeof ra);
        VIP_CONN_HANDLE conn;
        if (!am_listen_take(ep, &conn, &ra.a, sizeof ra))
            return;
        en_t name;
        struct am_peer *p = NULL;
        if (en_from_addr(&ra.a, &name))
            p = am_peer_get(ep, &name);
        if (!p || p->state != PEER_IDLE || peer_make_vi(p) != AM_OK) {
            VipConnectReject(conn);
            continue;
        }
        VIP_RETURN rc = VipConnectAccept(conn, p->vi);
        if (rc == VIP_SUCCESS)
            peer_up(p);
        else if (rc == VIP_INVALID_RELIABILITY_LEVEL || rc == VIP_INVALID_STATE ||
                 rc == VIP_INVALID_MTU)
            VipConnectReject(conn); /* the request still waits: refuse it */
        /* else the request is gone (its asker gave up): it will ask again */
    }
}

int am_peer_ask(struct am_peer *p)
{
    /* Looked at every turn: the poll between turns may have accepted the
     * peer's own request, or found the peer broken. */
    if (p->state == PEER_CONNECTED)
        return AM_OK;
    if (p->state == PEER_BROKEN)
        return EBADENDPOINT;
    if (peer_make_vi(p) != AM_OK)
        return EUNREACHABLE;
    struct am2_ep *ep = p->ep;
    struct {
        VIP_NET_ADDRESS a;
        uint8_t room[32];
    } ra;
    memset(&ra, 0, sizeof ra);
    ra.a.HostAddressLen = 6;
    ra.a.DiscriminatorLen = 15;
    uint8_t *hb = (uint8_t *)&ra.a + offsetof(VIP_NET_ADDRESS, HostAddress);
    char disc[17];
    am_en_disc(&p->name, disc);
    memcpy(hb, p->name.nic, 6);
    memcpy(hb + 6, disc, 15);
    bool larger = memcmp(&ep->name, &p->name, sizeof ep->name) > 0;
    VIP_VI_ATTRIBUTES rattr;
    VIP_RETURN rc = VipConnectRequest(p->vi, ep->listen, &ra.a, larger ? 5 : 50, &rattr);
    if (rc == VIP_SUCCESS) {
        peer_up(p);
        return AM_OK;
    }
    if (rc != VIP_TIMEOUT && rc != VIP_NO_MATCH && rc != VIP_REJECT) {
        am_fail(AM_ERR_RESOURCE, "VipConnectRequest failed with code %d", (int)rc);
        return EUNREACHABLE;
    }
    am_accept_pending(ep);
    return p->state == PEER_CONNECTED ? AM_OK : AM_CONN_AGAIN;
}

void am_peer_destroy(struct am_peer *p)
{
    am_shm_detach(p);
    if (p->vi) {
        struct am2_bundle *eb = p->ep->eb;
        am_bundle_vis_changed(eb, p);
        eb->cq_owed -= p->cq_owed; /* its CQ entries go with the VI */
        VipDisconnect(p->vi);
        VIP_DESCRIPTOR *d;
        while (VipRecvDone(p->vi, &d) == VIP_SUCCESS)
            ;
        while (VipSendDone(p->vi, &d) == VIP_SUCCESS)
            ;
        VipDestroyVi(p->vi);
        p->ep->eb->cq_used -= AM_NRECV;
    }
    if (p->rdesc) {
        VipDeregisterMem(am_g.nic, p->rdesc, p->rmh);
        free(p->rdesc);
    }
    free(p);
}

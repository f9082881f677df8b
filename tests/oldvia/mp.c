/*
 * mp.c - the message-passing layer of mp.h, over VIPL alone.
 *
 * Memory: one registered pool holds the send descriptors (each with a
 * bounce buffer) and, per peer, the receive descriptors (each with one).
 * A bounce buffer starts with a struct mp_hdr.
 *
 * Flow control: each side keeps NRECV receives posted per peer; a sender
 * spends a credit per message (an RDMA write with immediate data spends
 * one too: it consumes a receive). Credits come back in every header, or
 * in a CREDIT message once half the window is owed. The last credit is
 * kept for CREDIT messages, so two senders never wait on each other.
 */
#define _DEFAULT_SOURCE
#include "mp.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vipl.h>

#define NSEND 64
#define NRECV 32
#define SLOT (sizeof(struct mp_hdr) + MP_EAGER_MAX)
#define NREG 16

enum mp_type { MP_EAGER = 1, MP_RTS, MP_CTS, MP_CREDIT, MP_FIN };

struct mp_hdr {
    uint32_t type;
    uint32_t len;     /* EAGER: payload bytes; RTS: the message's length */
    uint32_t credits; /* receives the sender reposted for us since its last header */
    uint32_t cookie;  /* CTS: the immediate data the RDMA write must carry */
    uint64_t addr;    /* CTS: where to write */
    uint32_t mh;      /* CTS: the region's memory handle */
    uint32_t pad;
};

struct peer {
    VIP_VI_HANDLE vi;
    int credits;                  /* messages we may still send it */
    int owed;                     /* receives reposted, not yet told */
    VIP_DESCRIPTOR *arr_head;     /* arrived receives, threaded through CS.Next */
    VIP_DESCRIPTOR *arr_tail;
    uint32_t cookie;
    int fin;                      /* its FIN has arrived */
    VIP_DESCRIPTOR *rdesc;        /* its NRECV receive descriptors */
    unsigned char *rbuf;
};

struct reg {
    const unsigned char *p;
    size_t len;
    VIP_MEM_HANDLE mh;
};

struct mp {
    int rank, nranks;
    int up;                       /* every pair connected */
    unsigned timeout_ms;
    VIP_NIC_HANDLE nic;
    VIP_PROTECTION_HANDLE ptag;
    VIP_CQ_HANDLE cq;
    unsigned char *pool;
    size_t pool_len;
    VIP_MEM_HANDLE mh;
    VIP_DESCRIPTOR *sdesc;        /* NSEND of them */
    unsigned char *sbuf;
    VIP_DESCRIPTOR *free_send;    /* the free list, threaded through CS.Next */
    int nfree;
    struct peer peer[MP_MAX_RANKS];
    struct reg reg[NREG];         /* registration cache for rendezvous buffers */
    unsigned reg_next;
    struct mp_stats st;
};

static char mp_err[512];

const char *mp_error(void) { return mp_err; }

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mp_err, sizeof mp_err, fmt, ap);
    va_end(ap);
    return -1;
}

static int fail_rc(const char *what, VIP_RETURN rc)
{
    return fail("%s failed with code %d", what, (int)rc);
}

static unsigned long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long)t.tv_sec * 1000ul + (unsigned long)(t.tv_nsec / 1000000);
}

/* ---- descriptors ------------------------------------------------------------ */

#define NEXT(d) ((VIP_DESCRIPTOR *)(d)->CS.Next.Address)

static void push_free(struct mp *m, VIP_DESCRIPTOR *d)
{
    d->CS.Next.Address = m->free_send;
    m->free_send = d;
    m->nfree++;
}

static unsigned char *send_buf(struct mp *m, VIP_DESCRIPTOR *d)
{
    return m->sbuf + (size_t)(d - m->sdesc) * SLOT;
}

static int repost(struct mp *m, struct peer *p, VIP_DESCRIPTOR *d)
{
    unsigned char *b = p->rbuf + (size_t)(d - p->rdesc) * SLOT;
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = b;
    d->DS[0].Local.Handle = m->mh;
    d->DS[0].Local.Length = (VIP_UINT32)SLOT;
    VIP_RETURN rc = VipPostRecv(p->vi, d, m->mh);
    if (rc != VIP_SUCCESS)
        return fail_rc("VipPostRecv", rc);
    p->owed++;
    return 0;
}

static struct peer *peer_of(struct mp *m, VIP_VI_HANDLE vi)
{
    for (int i = 0; i < m->nranks; i++)
        if (i != m->rank && m->peer[i].vi == vi)
            return &m->peer[i];
    return NULL;
}

/* One completion off the shared CQ: a send's descriptor goes back to the
 * free list; a receive joins its peer's arrived queue (credits it carries
 * count at once; a CREDIT message is used up here). Waits up to
 * wait_ms; 1 if it took one, 0 if none came, -1 on error. */
static int progress(struct mp *m, unsigned wait_ms)
{
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN recvq;
    VIP_RETURN rc = wait_ms ? VipCQWait(m->cq, wait_ms, &vi, &recvq)
                            : VipCQDone(m->cq, &vi, &recvq);
    if (rc == VIP_NOT_DONE || rc == VIP_TIMEOUT)
        return 0;
    if (rc != VIP_SUCCESS)
        return fail_rc("VipCQWait", rc);
    struct peer *p = peer_of(m, vi);
    if (!p)
        return fail("the CQ named a VI that is not ours");
    VIP_DESCRIPTOR *d;
    if (!recvq) {
        if ((rc = VipSendDone(vi, &d)) != VIP_SUCCESS)
            return fail_rc("VipSendDone after the CQ named the send queue", rc);
        if (d->CS.Status & VIP_STATUS_ERROR_MASK)
            return fail("a send completed with status 0x%x", (unsigned)d->CS.Status);
        push_free(m, d);
        return 1;
    }
    if ((rc = VipRecvDone(vi, &d)) != VIP_SUCCESS)
        return fail_rc("VipRecvDone after the CQ named the receive queue", rc);
    if (d->CS.Status & VIP_STATUS_ERROR_MASK)
        return fail("a receive completed with status 0x%x", (unsigned)d->CS.Status);
    if ((d->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RECEIVE) {
        const struct mp_hdr *h = (const struct mp_hdr *)d->DS[0].Local.Data.Address;
        p->credits += (int)h->credits;
        if (h->type == MP_CREDIT)
            return repost(m, p, d) ? -1 : 1;
        if (h->type == MP_FIN)
            p->fin = 1;
    }
    d->CS.Next.Address = NULL;
    if (p->arr_tail)
        p->arr_tail->CS.Next.Address = d;
    else
        p->arr_head = d;
    p->arr_tail = d;
    return 1;
}

/* Progress until cond(m, arg) holds, or the layer's timeout. */
static int wait_for(struct mp *m, int (*cond)(struct mp *, void *), void *arg, const char *what)
{
    unsigned long end = now_ms() + m->timeout_ms;
    while (!cond(m, arg)) {
        int r = progress(m, 100);
        if (r < 0)
            return -1;
        if (r == 0 && now_ms() > end)
            return fail("timed out waiting for %s", what);
    }
    return 0;
}

static int have_free(struct mp *m, void *arg)
{
    (void)arg;
    return m->free_send != NULL;
}

static int have_credit(struct mp *m, void *arg)
{
    (void)m;
    struct peer *p = arg;
    return p->credits > 1;
}

static VIP_DESCRIPTOR *get_send(struct mp *m)
{
    while (!m->free_send) {
        int r = progress(m, 0);
        if (r < 0 || (r == 0 && wait_for(m, have_free, NULL, "a free send descriptor")))
            return NULL;
    }
    VIP_DESCRIPTOR *d = m->free_send;
    m->free_send = NEXT(d);
    m->nfree--;
    return d;
}

/* A header (and up to MP_EAGER_MAX bytes) through a bounce buffer. A
 * CREDIT message may take the last credit; everything else leaves it. */
static int send_ctl(struct mp *m, int to, struct mp_hdr h, const void *payload, size_t len)
{
    struct peer *p = &m->peer[to];
    if (h.type != MP_CREDIT && wait_for(m, have_credit, p, "credits"))
        return -1;
    if (p->credits < 1)
        return fail("no credit left for a CREDIT message");
    VIP_DESCRIPTOR *d = get_send(m);
    if (!d)
        return -1;
    unsigned char *b = send_buf(m, d);
    h.credits = (uint32_t)p->owed;
    p->owed = 0;
    memcpy(b, &h, sizeof h);
    if (len)
        memcpy(b + sizeof h, payload, len);
    memset(&d->CS, 0, sizeof d->CS);
    d->CS.Control = VIP_CONTROL_OP_SENDRECV;
    d->CS.SegCount = 1;
    d->CS.Length = (VIP_UINT32)(sizeof h + len);
    d->DS[0].Local.Data.Address = b;
    d->DS[0].Local.Handle = m->mh;
    d->DS[0].Local.Length = (VIP_UINT32)(sizeof h + len);
    VIP_RETURN rc = VipPostSend(p->vi, d, m->mh);
    if (rc != VIP_SUCCESS)
        return fail_rc("VipPostSend", rc);
    p->credits--;
    return 0;
}

/* Give a consumed receive back; tell the peer once half the window is owed. */
static int consumed(struct mp *m, int from, VIP_DESCRIPTOR *d)
{
    struct peer *p = &m->peer[from];
    if (repost(m, p, d))
        return -1;
    if (p->owed >= NRECV / 2 && p->credits >= 1) {
        m->st.credit_msgs++;
        return send_ctl(m, from, (struct mp_hdr){.type = MP_CREDIT}, NULL, 0);
    }
    return 0;
}

/* Unlink the first arrived descriptor from `from` that match() accepts. */
static VIP_DESCRIPTOR *take_arrived(struct peer *p, int (*match)(VIP_DESCRIPTOR *, uint32_t),
                                    uint32_t key)
{
    VIP_DESCRIPTOR *prev = NULL;
    for (VIP_DESCRIPTOR *d = p->arr_head; d; prev = d, d = NEXT(d)) {
        if (!match(d, key))
            continue;
        if (prev)
            prev->CS.Next.Address = NEXT(d);
        else
            p->arr_head = NEXT(d);
        if (p->arr_tail == d)
            p->arr_tail = prev;
        return d;
    }
    return NULL;
}

static int is_any(VIP_DESCRIPTOR *d, uint32_t key)
{
    (void)key;
    return (d->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_RECEIVE;
}

static int is_cts(VIP_DESCRIPTOR *d, uint32_t key)
{
    (void)key;
    return is_any(d, 0) && ((struct mp_hdr *)d->DS[0].Local.Data.Address)->type == MP_CTS;
}

static int is_write(VIP_DESCRIPTOR *d, uint32_t cookie)
{
    return (d->CS.Status & VIP_STATUS_OP_MASK) == VIP_STATUS_OP_REMOTE_RDMA_WRITE &&
           (d->CS.Status & VIP_STATUS_IMMEDIATE) && d->CS.ImmediateData == cookie;
}

/* Progress until a descriptor from `from` matching (match, key) arrives. */
static VIP_DESCRIPTOR *await(struct mp *m, int from, int (*match)(VIP_DESCRIPTOR *, uint32_t),
                             uint32_t key, const char *what)
{
    unsigned long end = now_ms() + m->timeout_ms;
    for (;;) {
        VIP_DESCRIPTOR *d = take_arrived(&m->peer[from], match, key);
        if (d)
            return d;
        int r = progress(m, 100);
        if (r < 0)
            return NULL;
        if (r == 0 && now_ms() > end) {
            fail("timed out waiting for %s from rank %d", what, from);
            return NULL;
        }
    }
}

/* ---- the registration cache -------------------------------------------------- */

static int reg_lookup(struct mp *m, const void *buf, size_t len, VIP_MEM_HANDLE *mh)
{
    const unsigned char *b = buf;
    for (unsigned i = 0; i < NREG; i++) {
        struct reg *r = &m->reg[i];
        if (r->p && b >= r->p && b + len <= r->p + r->len) {
            m->st.reg_cache_hits++;
            *mh = r->mh;
            return 0;
        }
    }
    struct reg *r = &m->reg[m->reg_next++ % NREG];
    if (r->p)
        VipDeregisterMem(m->nic, (VIP_PVOID)r->p, r->mh);
    r->p = NULL;
    VIP_MEM_ATTRIBUTES a = {.Ptag = m->ptag, .EnableRdmaWrite = VIP_TRUE};
    VIP_RETURN rc = VipRegisterMem(m->nic, (VIP_PVOID)buf, len, &a, &r->mh);
    if (rc != VIP_SUCCESS)
        return fail_rc("VipRegisterMem of a rendezvous buffer", rc);
    r->p = b;
    r->len = len;
    *mh = r->mh;
    m->st.reg_cache_misses++;
    return 0;
}

/* ---- sending and receiving ------------------------------------------------------- */

int mp_send(struct mp *m, int to, const void *buf, size_t len)
{
    if (to < 0 || to >= m->nranks || to == m->rank)
        return fail("no rank %d", to);
    if (len <= MP_EAGER_MAX) {
        m->st.eager++;
        return send_ctl(m, to, (struct mp_hdr){.type = MP_EAGER, .len = (uint32_t)len}, buf,
                        len);
    }
    /* Rendezvous: RTS, wait for the CTS, one RDMA write with immediate data. */
    m->st.rendezvous++;
    VIP_MEM_HANDLE lmh;
    if (reg_lookup(m, buf, len, &lmh) ||
        send_ctl(m, to, (struct mp_hdr){.type = MP_RTS, .len = (uint32_t)len}, NULL, 0))
        return -1;
    VIP_DESCRIPTOR *c = await(m, to, is_cts, 0, "a CTS");
    if (!c)
        return -1;
    struct mp_hdr cts = *(const struct mp_hdr *)c->DS[0].Local.Data.Address;
    if (consumed(m, to, c))
        return -1;
    struct peer *p = &m->peer[to];
    if (wait_for(m, have_credit, p, "credits"))
        return -1;
    VIP_DESCRIPTOR *d = get_send(m);
    if (!d)
        return -1;
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE;
    d->CS.ImmediateData = cts.cookie;
    d->CS.SegCount = 2;
    d->CS.Length = (VIP_UINT32)len;
    d->DS[0].Remote.Data.AddressBits = cts.addr;
    d->DS[0].Remote.Handle = cts.mh;
    d->DS[1].Local.Data.Address = (VIP_PVOID)buf;
    d->DS[1].Local.Handle = lmh;
    d->DS[1].Local.Length = (VIP_UINT32)len;
    VIP_RETURN rc = VipPostSend(p->vi, d, m->mh);
    if (rc != VIP_SUCCESS)
        return fail_rc("VipPostSend of the RDMA write", rc);
    p->credits--;
    /* The program's buffer is the NIC's until the write is done: its
     * status word, polled in memory, says when. */
    unsigned long end = now_ms() + m->timeout_ms;
    while (!(((volatile VIP_CONTROL_SEGMENT *)&d->CS)->Status & VIP_STATUS_DONE)) {
        int r = progress(m, 0);
        if (r < 0)
            return -1;
        if (now_ms() > end)
            return fail("timed out waiting for the RDMA write to complete");
    }
    return 0;
}

int mp_recv(struct mp *m, int from, void *buf, size_t cap, size_t *len)
{
    if (from < 0 || from >= m->nranks || from == m->rank)
        return fail("no rank %d", from);
    VIP_DESCRIPTOR *d = await(m, from, is_any, 0, "a message");
    if (!d)
        return -1;
    struct mp_hdr h = *(const struct mp_hdr *)d->DS[0].Local.Data.Address;
    if (h.type == MP_EAGER) {
        if (h.len > cap)
            return fail("a %u-byte message for a %zu-byte buffer", h.len, cap);
        memcpy(buf, (const unsigned char *)d->DS[0].Local.Data.Address + sizeof h, h.len);
        *len = h.len;
        return consumed(m, from, d);
    }
    if (h.type != MP_RTS)
        return fail("unexpected message type %u from rank %d", h.type, from);
    if (h.len > cap)
        return fail("a %u-byte message for a %zu-byte buffer", h.len, cap);
    VIP_MEM_HANDLE mh;
    if (consumed(m, from, d) || reg_lookup(m, buf, h.len, &mh))
        return -1;
    uint32_t cookie = ++m->peer[from].cookie;
    struct mp_hdr cts = {.type = MP_CTS, .cookie = cookie, .addr = (uint64_t)(uintptr_t)buf,
                         .mh = mh};
    if (send_ctl(m, from, cts, NULL, 0))
        return -1;
    VIP_DESCRIPTOR *w = await(m, from, is_write, cookie, "the RDMA write");
    if (!w)
        return -1;
    if (w->CS.Length != h.len)
        return fail("the RDMA write carried %u bytes, the RTS said %u", w->CS.Length, h.len);
    *len = h.len;
    return consumed(m, from, w);
}

/* ---- set-up and tear-down ---------------------------------------------------------- */

static VIP_NET_ADDRESS *net_addr(VIP_NIC_HANDLE nic, const char *host, const char *disc)
{
    size_t dl = strlen(disc);
    VIP_NET_ADDRESS *a = calloc(1, sizeof *a + 64 + dl);
    if (!a)
        return NULL;
    if (VipNSGetHostByName(nic, (VIP_CHAR *)host, a, 0) != VIP_SUCCESS) {
        free(a);
        return NULL;
    }
    a->DiscriminatorLen = (VIP_UINT16)dl;
    memcpy(a->HostAddress + a->HostAddressLen, disc, dl);
    return a;
}

/* The lower rank waits, the higher asks, again and again while nobody
 * waits yet (VIP_NO_MATCH): start order does not matter. */
static int connect_pair(struct mp *m, int other, const char *const *devs, const char *job)
{
    int lo = m->rank < other ? m->rank : other, hi = m->rank ^ other ^ lo;
    char disc[32];
    snprintf(disc, sizeof disc, "%.10s.%d.%d", job, lo, hi);
    VIP_NET_ADDRESS *local = net_addr(m->nic, devs[m->rank], m->rank == lo ? disc : "");
    VIP_NET_ADDRESS *remote = m->rank == lo ? calloc(1, sizeof *remote + 64)
                                            : net_addr(m->nic, devs[other], disc);
    VIP_VI_ATTRIBUTES ra;
    VIP_RETURN rc = VIP_ERROR_RESOURCE;
    unsigned long end = now_ms() + m->timeout_ms;
    if (local && remote && m->rank == lo) {
        VIP_CONN_HANDLE conn;
        rc = VipConnectWait(m->nic, local, m->timeout_ms, remote, &ra, &conn);
        if (rc == VIP_SUCCESS)
            rc = VipConnectAccept(conn, m->peer[other].vi);
    } else if (local && remote) {
        while ((rc = VipConnectRequest(m->peer[other].vi, local, remote, 1000, &ra)) ==
                   VIP_NO_MATCH &&
               now_ms() < end)
            usleep(2000);
    }
    free(local);
    free(remote);
    if (rc != VIP_SUCCESS)
        return fail("connecting rank %d to rank %d: code %d", m->rank, other, (int)rc);
    return 0;
}

struct mp *mp_init(const char *dev, int rank, int nranks, const char *const *devs,
                   const char *job, unsigned timeout_ms)
{
    if (nranks < 2 || nranks > MP_MAX_RANKS || rank < 0 || rank >= nranks) {
        fail("bad rank %d of %d", rank, nranks);
        return NULL;
    }
    struct mp *m = calloc(1, sizeof *m);
    if (!m) {
        fail("out of memory");
        return NULL;
    }
    m->rank = rank;
    m->nranks = nranks;
    m->timeout_ms = timeout_ms;
    VIP_RETURN rc;
    VIP_NIC_ATTRIBUTES na;
    if ((rc = VipOpenNic(dev, &m->nic)) != VIP_SUCCESS) {
        fail_rc("VipOpenNic", rc);
        free(m);
        return NULL;
    }
    if ((rc = VipQueryNic(m->nic, &na)) != VIP_SUCCESS || (rc = VipCreatePtag(m->nic, &m->ptag)) ||
        (rc = VipCreateCQ(m->nic, (VIP_ULONG)(nranks * NRECV + NSEND + 64), &m->cq))) {
        fail_rc("opening the NIC", rc);
        goto bad;
    }
    /* Reliable delivery, the level the MPI devices over VIA chose. */
    VIP_RELIABILITY_LEVEL rel = VIP_SERVICE_RELIABLE_DELIVERY;
    if (!(na.ReliabilityLevelSupport & rel)) {
        fail("the NIC offers no reliable delivery");
        goto bad;
    }
    m->pool_len = NSEND * (sizeof(VIP_DESCRIPTOR) + SLOT) +
                  (size_t)nranks * NRECV * (sizeof(VIP_DESCRIPTOR) + SLOT);
    if (posix_memalign((void **)&m->pool, 4096, m->pool_len)) {
        fail("out of memory");
        goto bad;
    }
    memset(m->pool, 0, m->pool_len);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = m->ptag};
    if ((rc = VipRegisterMem(m->nic, m->pool, m->pool_len, &ma, &m->mh)) != VIP_SUCCESS) {
        fail_rc("VipRegisterMem of the pool", rc);
        goto bad;
    }
    unsigned char *q = m->pool;
    m->sdesc = (VIP_DESCRIPTOR *)q;
    q += NSEND * sizeof(VIP_DESCRIPTOR);
    m->sbuf = q;
    q += NSEND * SLOT;
    for (int i = NSEND - 1; i >= 0; i--)
        push_free(m, &m->sdesc[i]);
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = rel, .MaxTransferSize = na.MaxTransferSize,
                            .Ptag = m->ptag, .EnableRdmaWrite = VIP_TRUE};
    for (int i = 0; i < nranks; i++) {
        if (i == rank)
            continue;
        struct peer *p = &m->peer[i];
        p->rdesc = (VIP_DESCRIPTOR *)q;
        q += NRECV * sizeof(VIP_DESCRIPTOR);
        p->rbuf = q;
        q += NRECV * SLOT;
        if ((rc = VipCreateVi(m->nic, &va, m->cq, m->cq, &p->vi)) != VIP_SUCCESS) {
            fail_rc("VipCreateVi", rc);
            goto bad;
        }
        /* Receives go up before the connection, as VIA allows. */
        for (int k = 0; k < NRECV; k++)
            if (repost(m, p, &p->rdesc[k]))
                goto bad;
        p->owed = 0;
        p->credits = NRECV;
    }
    for (int i = 0; i < nranks; i++)
        if (i != rank && connect_pair(m, i, devs, job))
            goto bad;
    m->up = 1;
    return m;
bad:
    mp_finalize(m);
    return NULL;
}

static int all_sends_back(struct mp *m, void *arg)
{
    (void)arg;
    return m->nfree == NSEND;
}

static int fin_from(struct mp *m, void *arg)
{
    return m->peer[*(int *)arg].fin;
}

void mp_finalize(struct mp *m)
{
    if (!m)
        return;
    /* FIN to every peer, and theirs before anything is torn down: after
     * its FIN a peer sends nothing more. */
    char keep[sizeof mp_err];
    strcpy(keep, mp_err);
    for (int i = 0; i < m->nranks && m->up; i++)
        if (i != m->rank)
            send_ctl(m, i, (struct mp_hdr){.type = MP_FIN}, NULL, 0);
    for (int i = 0; i < m->nranks && m->up; i++)
        if (i != m->rank)
            wait_for(m, fin_from, &i, "FIN");
    if (m->up)
        wait_for(m, all_sends_back, NULL, "the last sends");
    strcpy(mp_err, keep);
    for (int i = 0; i < m->nranks; i++) {
        if (i == m->rank || !m->peer[i].vi)
            continue;
        VipDisconnect(m->peer[i].vi);
        VipDestroyVi(m->peer[i].vi);
    }
    for (unsigned i = 0; i < NREG; i++)
        if (m->reg[i].p)
            VipDeregisterMem(m->nic, (VIP_PVOID)m->reg[i].p, m->reg[i].mh);
    if (m->pool) {
        VipDeregisterMem(m->nic, m->pool, m->mh);
        free(m->pool);
    }
    if (m->cq)
        VipDestroyCQ(m->cq);
    if (m->ptag)
        VipDestroyPtag(m->nic, m->ptag);
    VipCloseNic(m->nic);
    free(m);
}

void mp_stats(const struct mp *m, struct mp_stats *s)
{
    *s = m->st;
}

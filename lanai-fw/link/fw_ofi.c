/*
 * fw_ofi.c - frames over a libfabric reliable-datagram endpoint (fw_ofi.h).
 *
 * What a frame costs here: a copy into a registered send slot (or an inject,
 * which the provider copies) and, at the receiver, the slot the fabric
 * filled, handed to the caller until it is reposted. Completions of both
 * directions come from one CQ in manual progress: libfabric's rxm moves
 * data only while someone reads the CQ, which the NIC does on every turn.
 * The CQ has no wait object: with one (FI_WAIT_FD) every completion also
 * signals it, a system call's cost on every message, so a sleeper is woken
 * by the link's own means (fw_link_ofi.c).
 */
#include "fw_ofi.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define OFI_DEFAULT_PROVIDER "tcp;ofi_rxm"
#define OFI_API FI_VERSION(1, 9)
#define OFI_CQ_BATCH 16
/* Frames up to this size go by fi_inject: no send completion to reap (a
 * completion costs the CQ's signal, a write and a read). rxm offers 64
 * bytes unless asked, less than a wire header with its first word. */
#define OFI_INJECT_WANT 512

/* The few real functions of libfabric (the rest are inline calls through
 * the objects' operation tables), found when the first endpoint opens. */
static struct {
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                   struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    char why[160]; /* empty when loaded */
} ofi;
static pthread_once_t ofi_once = PTHREAD_ONCE_INIT;

static uint32_t ofi_first_frame; /* the first endpoint's frames (ofi_load) */

static void ofi_load(void)
{
    /* rxm sends what exceeds its eager limit in segments or by
     * rendezvous, which move data only while the sender's endpoint
     * progresses; a sender asleep in a wait would hold its receiver up.
     * Frames are bounded: make every one eager, one message (unless the
     * user chose). libfabric reads these once, at its first use, which is
     * here. */
    if (!getenv("FI_OFI_RXM_BUFFER_SIZE")) {
        char eager[16];
        snprintf(eager, sizeof eager, "%u", (ofi_first_frame + 4095u) & ~4095u);
        setenv("FI_OFI_RXM_BUFFER_SIZE", eager, 0);
        setenv("FI_OFI_RXM_EAGER_LIMIT", eager, 0);
    }
    /* rxm gives each connection this many buffers of that size each way
     * (128 by default: a vip_send_lat pair's RSS 358 MB with 64 KiB
     * frames, 147 MB with 64); our pools keep at most FW_OFI_NSEND and
     * FW_OFI_NRECV frames in flight. */
    char depth[16];
    snprintf(depth, sizeof depth, "%u", 2u * FW_OFI_NRECV);
    setenv("FI_OFI_RXM_MSG_TX_SIZE", depth, 0);
    setenv("FI_OFI_RXM_MSG_RX_SIZE", depth, 0);
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(ofi.why, sizeof ofi.why,
                 "libfabric is not installed (Debian package libfabric1): %s", dlerror());
        return;
    }
    *(void **)&ofi.getinfo = dlsym(h, "fi_getinfo");
    *(void **)&ofi.freeinfo = dlsym(h, "fi_freeinfo");
    *(void **)&ofi.dupinfo = dlsym(h, "fi_dupinfo");
    *(void **)&ofi.fabric = dlsym(h, "fi_fabric");
    *(void **)&ofi.strerror = dlsym(h, "fi_strerror");
    if (!ofi.getinfo || !ofi.freeinfo || !ofi.dupinfo || !ofi.fabric || !ofi.strerror)
        snprintf(ofi.why, sizeof ofi.why, "libfabric.so.1 lacks the fi_* entry points");
}

enum slot_kind { SLOT_SEND, SLOT_RECV };

/* One buffer of a pool. The fi_context comes first: the completion's
 * op_context is the slot. */
struct ofi_slot {
    struct fi_context ctx;
    uint32_t idx;
    uint8_t kind;
};

struct fw_ofi {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc; /* the pools' registration, when the provider wants one */
    uint8_t *mem; /* FW_OFI_NSEND send slots, then FW_OFI_NRECV receive slots */
    size_t mem_len;
    uint32_t max_frame;
    size_t inject;
    struct ofi_slot send[FW_OFI_NSEND], recv[FW_OFI_NRECV];
    uint32_t free_send[FW_OFI_NSEND];
    unsigned nfree;
    uint64_t sent; /* frames the fabric took for good (injected, or completed) */
    uint32_t repost[FW_OFI_NRECV]; /* receive slots the provider could not take yet */
    unsigned nrepost;
    /* received frames reaped but not yet handed out: a FIFO of nheld from held_head */
    struct fw_ofi_rx held[FW_OFI_NRECV];
    unsigned held_head, nheld;
    char prov[64];
};

static uint8_t *slot_buf(const struct fw_ofi *o, const struct ofi_slot *s)
{
    size_t i = s->kind == SLOT_SEND ? s->idx : FW_OFI_NSEND + s->idx;
    return o->mem + i * o->max_frame;
}

static int fail(char *err, size_t errlen, int rc, const char *what)
{
    if (err && errlen)
        snprintf(err, errlen, "libfabric %s: %s", what,
                 ofi.strerror ? ofi.strerror(rc < 0 ? -rc : rc) : "failed");
    return rc < 0 ? rc : -rc;
}

/* Post receive slot idx; a provider too busy to take it now gets it again
 * at the next fw_ofi_recv (the slot waits in the repost list). */
static int post_recv(struct fw_ofi *o, uint32_t idx)
{
    struct ofi_slot *s = &o->recv[idx];
    ssize_t rc = fi_recv(o->ep, slot_buf(o, s), o->max_frame, o->desc, FI_ADDR_UNSPEC, &s->ctx);
    if (rc == -FI_EAGAIN) {
        o->repost[o->nrepost++] = idx;
        return 0;
    }
    return (int)rc;
}

static int post_waiting(struct fw_ofi *o)
{
    unsigned n = o->nrepost;
    o->nrepost = 0;
    for (unsigned i = 0; i < n; i++) {
        int rc = post_recv(o, o->repost[i]);
        if (rc)
            return rc;
    }
    return 0;
}

static struct fi_info *ofi_hints(void)
{
    struct fi_info *h = ofi.dupinfo(NULL);
    if (!h)
        return NULL;
    h->caps = FI_MSG;
    h->mode = FI_CONTEXT;
    h->ep_attr->type = FI_EP_RDM;
    /* frames of one peer in the order sent: a VI's packets must be */
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    const char *p = getenv("FI_PROVIDER");
    if (!p || !*p)
        h->fabric_attr->prov_name = strdup(OFI_DEFAULT_PROVIDER);
    return h;
}

/* The fabric objects, pools and posted receives of o (info chosen): 0, or
 * the error and the step that failed (o is then half made: close it). */
static int ofi_objects(struct fw_ofi *o, const char **step)
{
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_MSG,
                             .size = 2 * (FW_OFI_NSEND + FW_OFI_NRECV),
                             .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr ava = {.type = FI_AV_TABLE};
    int rc;
    if ((*step = "fabric", rc = ofi.fabric(o->info->fabric_attr, &o->fabric, NULL)) ||
        (*step = "domain", rc = fi_domain(o->fabric, o->info, &o->domain, NULL)))
        return rc;
    if ((*step = "completion queue", rc = fi_cq_open(o->domain, &cqa, &o->cq, NULL)) ||
        (*step = "address vector", rc = fi_av_open(o->domain, &ava, &o->av, NULL)) ||
        (*step = "endpoint", rc = fi_endpoint(o->domain, o->info, &o->ep, NULL)) ||
        (rc = fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (rc = fi_ep_bind(o->ep, &o->av->fid, 0)) || (rc = fi_enable(o->ep)))
        return rc;

    *step = "buffers";
    o->mem_len = (size_t)(FW_OFI_NSEND + FW_OFI_NRECV) * o->max_frame;
    o->mem = aligned_alloc(4096, (o->mem_len + 4095) & ~(size_t)4095);
    if (!o->mem)
        return -FI_ENOMEM;
    if (o->info->domain_attr->mr_mode & FI_MR_LOCAL) {
        *step = "memory registration";
        if ((rc = fi_mr_reg(o->domain, o->mem, o->mem_len, FI_SEND | FI_RECV, 0, 0, 0, &o->mr,
                            NULL)))
            return rc;
        o->desc = fi_mr_desc(o->mr);
    }
    for (uint32_t i = 0; i < FW_OFI_NSEND; i++) {
        o->send[i] = (struct ofi_slot){.idx = i, .kind = SLOT_SEND};
        o->free_send[o->nfree++] = FW_OFI_NSEND - 1 - i;
    }
    *step = "posting receives";
    for (uint32_t i = 0; i < FW_OFI_NRECV; i++) {
        o->recv[i] = (struct ofi_slot){.idx = i, .kind = SLOT_RECV};
        if ((rc = post_recv(o, i)))
            return rc;
    }
    return 0;
}

int fw_ofi_open(struct fw_ofi **out, const char *node, uint32_t max_frame, char *err,
                size_t errlen)
{
    *out = NULL;
    ofi_first_frame = max_frame;
    pthread_once(&ofi_once, ofi_load);
    if (ofi.why[0]) {
        snprintf(err, errlen, "%s", ofi.why);
        return -ENOSYS;
    }
    if (max_frame < 64) {
        snprintf(err, errlen, "libfabric link: frames of %u bytes are too small", max_frame);
        return -EINVAL;
    }
    struct fw_ofi *o = calloc(1, sizeof *o);
    struct fi_info *hints = ofi_hints();
    if (!o || !hints) {
        free(o);
        if (hints)
            ofi.freeinfo(hints);
        snprintf(err, errlen, "libfabric link: out of memory");
        return -ENOMEM;
    }
    o->max_frame = (max_frame + 63u) & ~63u;
    hints->tx_attr->inject_size = OFI_INJECT_WANT;
    int rc = ofi.getinfo(OFI_API, node, NULL, node ? FI_SOURCE : 0, hints, &o->info);
    if (rc) {
        hints->tx_attr->inject_size = 0; /* a provider that cannot: its own */
        rc = ofi.getinfo(OFI_API, node, NULL, node ? FI_SOURCE : 0, hints, &o->info);
    }
    ofi.freeinfo(hints);
    if (rc) {
        const char *p = getenv("FI_PROVIDER");
        char what[128];
        snprintf(what, sizeof what, "no reliable-datagram endpoint of provider \"%s\"%s%s",
                 p && *p ? p : OFI_DEFAULT_PROVIDER, node ? " at " : "", node ? node : "");
        fail(err, errlen, rc, what);
        free(o);
        return rc < 0 ? rc : -ENODEV;
    }
    if (o->info->ep_attr->max_msg_size < o->max_frame) {
        snprintf(err, errlen, "libfabric link: provider %s carries at most %zu bytes a message",
                 o->info->fabric_attr->prov_name, o->info->ep_attr->max_msg_size);
        fw_ofi_close(o);
        return -EMSGSIZE;
    }
    snprintf(o->prov, sizeof o->prov, "%s", o->info->fabric_attr->prov_name);
    o->inject = o->info->tx_attr->inject_size;

    const char *step = "";
    if ((rc = ofi_objects(o, &step))) {
        fail(err, errlen, rc, step);
        fw_ofi_close(o);
        return rc < 0 ? rc : -rc;
    }
    *out = o;
    return 0;
}

void fw_ofi_close(struct fw_ofi *o)
{
    if (!o)
        return;
    /* children before parents: the endpoint holds the CQ and AV */
    if (o->ep)
        fi_close(&o->ep->fid);
    if (o->mr)
        fi_close(&o->mr->fid);
    if (o->av)
        fi_close(&o->av->fid);
    if (o->cq)
        fi_close(&o->cq->fid);
    if (o->domain)
        fi_close(&o->domain->fid);
    if (o->fabric)
        fi_close(&o->fabric->fid);
    if (o->info)
        ofi.freeinfo(o->info);
    free(o->mem);
    free(o);
}

int fw_ofi_name(struct fw_ofi *o, void *name, size_t *len)
{
    int rc = fi_getname(&o->ep->fid, name, len);
    return rc < 0 ? rc : 0;
}

int fw_ofi_peer(struct fw_ofi *o, const void *name, size_t len, uint64_t *peer)
{
    (void)len; /* the provider knows its address format's length */
    fi_addr_t a = FI_ADDR_UNSPEC;
    int n = fi_av_insert(o->av, name, 1, &a, 0, NULL);
    if (n != 1)
        return n < 0 ? n : -EINVAL;
    *peer = a;
    return 0;
}

int fw_ofi_slot_take(struct fw_ofi *o, uint8_t **buf)
{
    if (!o->nfree)
        return -EAGAIN;
    uint32_t idx = o->free_send[--o->nfree];
    *buf = slot_buf(o, &o->send[idx]);
    return (int)idx;
}

void fw_ofi_slot_drop(struct fw_ofi *o, int slot)
{
    o->free_send[o->nfree++] = (uint32_t)slot;
}

int fw_ofi_slot_send(struct fw_ofi *o, uint64_t peer, int slot, uint32_t len)
{
    if (slot < 0 || slot >= FW_OFI_NSEND)
        return -EINVAL;
    if (len > o->max_frame)
        return -EMSGSIZE;
    struct ofi_slot *s = &o->send[slot];
    uint8_t *b = slot_buf(o, s);
    ssize_t rc;
    if (len <= o->inject) {
        /* small: the provider copies it, no completion, the slot is free */
        rc = fi_inject(o->ep, b, len, peer);
        if (rc == 0) {
            fw_ofi_slot_drop(o, slot);
            o->sent++;
        }
    } else {
        rc = fi_send(o->ep, b, len, o->desc, peer, &s->ctx);
    }
    return rc == -FI_EAGAIN ? -EAGAIN : (int)rc;
}

int fw_ofi_send(struct fw_ofi *o, uint64_t peer, const void *hdr, size_t hlen,
                const void *payload, size_t plen)
{
    size_t total = hlen + plen;
    if (total > o->max_frame)
        return -EMSGSIZE;
    uint8_t *b;
    int slot = fw_ofi_slot_take(o, &b);
    if (slot < 0)
        return slot;
    memcpy(b, hdr, hlen);
    if (plen)
        memcpy(b + hlen, payload, plen);
    int rc = fw_ofi_slot_send(o, peer, slot, (uint32_t)total);
    if (rc)
        fw_ofi_slot_drop(o, slot);
    return rc;
}

/* An error completion: a receive cancelled at close is nothing; a failed
 * send returns its slot and fails the endpoint (the fabric gave up). */
static int cq_error(struct fw_ofi *o)
{
    struct fi_cq_err_entry e = {0};
    if (fi_cq_readerr(o->cq, &e, 0) < 0)
        return 0;
    struct ofi_slot *s = e.op_context;
    if (s && s->kind == SLOT_SEND)
        o->free_send[o->nfree++] = s->idx;
    if (s && s->kind == SLOT_RECV && e.err == FI_ECANCELED)
        return 0;
    if (getenv("VIP_NET_DEBUG"))
        fprintf(stderr, "vipl: libfabric: a %s completed in error: %s (provider: %s)\n",
                !s ? "transfer" : s->kind == SLOT_SEND ? "send" : "receive", ofi.strerror(e.err),
                fi_cq_strerror(o->cq, e.prov_errno, e.err_data, NULL, 0));
    return -(e.err ? e.err : EIO);
}

int fw_ofi_recv(struct fw_ofi *o, struct fw_ofi_rx *rx, int max)
{
    if (o->nrepost) {
        int rc = post_waiting(o);
        if (rc)
            return rc;
    }
    /* Reap everything the CQ has, even when the caller takes no frame now:
     * send slots come back and the provider progresses. Received frames
     * wait in `held` (at most FW_OFI_NRECV: only posted slots complete). */
    for (;;) {
        struct fi_cq_msg_entry e[OFI_CQ_BATCH];
        ssize_t n = fi_cq_read(o->cq, e, OFI_CQ_BATCH);
        if (n == -FI_EAGAIN)
            break;
        if (n == -FI_EAVAIL) {
            int rc = cq_error(o);
            if (rc)
                return rc;
            continue;
        }
        if (n < 0)
            return (int)n;
        for (ssize_t i = 0; i < n; i++) {
            struct ofi_slot *s = e[i].op_context;
            if (s->kind == SLOT_SEND) {
                o->free_send[o->nfree++] = s->idx;
                o->sent++;
                continue;
            }
            unsigned t = (o->held_head + o->nheld++) % FW_OFI_NRECV;
            o->held[t] = (struct fw_ofi_rx){.data = slot_buf(o, s),
                                            .len = (uint32_t)e[i].len,
                                            .slot = s->idx};
        }
        if (n < OFI_CQ_BATCH)
            break;
    }
    return fw_ofi_take(o, rx, max);
}

int fw_ofi_take(struct fw_ofi *o, struct fw_ofi_rx *rx, int max)
{
    int got = 0;
    while (got < max && o->nheld) {
        rx[got++] = o->held[o->held_head];
        o->held_head = (o->held_head + 1) % FW_OFI_NRECV;
        o->nheld--;
    }
    return got;
}

int fw_ofi_repost(struct fw_ofi *o, const struct fw_ofi_rx *rx)
{
    if (rx->slot >= FW_OFI_NRECV)
        return -EINVAL;
    return post_recv(o, rx->slot);
}

unsigned fw_ofi_sends_pending(const struct fw_ofi *o)
{
    return FW_OFI_NSEND - o->nfree;
}

uint64_t fw_ofi_sent(const struct fw_ofi *o)
{
    return o->sent;
}

const char *fw_ofi_provider(const struct fw_ofi *o)
{
    return o->prov;
}

unsigned fw_ofi_frames_held(const struct fw_ofi *o)
{
    return o->nheld;
}

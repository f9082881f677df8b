/*
 * kd_vi.c - VIs (CREATE/DESTROY/SET_VI) and completion queues
 * (CREATE/DESTROY/RESIZE_CQ).
 *
 * A VI id is unique per NIC (lowest free, 0..VIA_MAX_VI-1): it is the
 * address a peer's packets carry. Its doorbell page is its own memfd, so
 * a process can map its own VIs' doorbells and nobody else's.
 */
#include "kd.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "via_spec.h"

static const char *const vi_state_name[] = {
    [VIA_VI_IDLE] = "IDLE",
    [VIA_VI_CONNECTED] = "CONNECTED",
    [VIA_VI_PENDING] = "PENDING",
    [VIA_VI_ERROR] = "ERROR",
};

const char *kd_vi_state_name(uint32_t st)
{
    return st < sizeof vi_state_name / sizeof vi_state_name[0] ? vi_state_name[st] : "?";
}

struct kd_vi *kd_vi_arg(const struct kd_session *s, uint32_t vi_id, struct kd_reply *r)
{
    struct kd_vi *vi = kd_vi_of(s, vi_id);
    if (!vi)
        kd_fail(r, VIP_INVALID_PARAMETER, "VI %u is not a VI of this NIC handle", vi_id);
    return vi;
}

struct kd_vi *kd_vi_of(const struct kd_session *s, uint32_t vi_id)
{
    if (vi_id >= VIA_MAX_VI)
        return NULL;
    struct kd_vi *vi = s->nic->vi[vi_id];
    return vi && vi->sess == s ? vi : NULL;
}

void kd_vi_set_state(struct kd_vi *vi, enum via_vi_state st)
{
    vi->state = st;
    /* The mirror in the doorbell page: the in-process firmware and vipctl
     * read it; vipd itself trusts only vi->state. */
    atomic_store_explicit(&vi->page->state, (uint32_t)st, memory_order_release);
}

/* Validate VI attributes (shared by CREATE_VI and SET_VI). */
static bool attr_ok(struct kd_session *s, struct via_vi_attr *a, struct kd_reply *r)
{
    uint32_t rel = a->reliability;
    if (rel != VIP_SERVICE_UNRELIABLE && rel != VIP_SERVICE_RELIABLE_DELIVERY &&
        rel != VIP_SERVICE_RELIABLE_RECEPTION) {
        kd_fail(r, VIP_INVALID_RELIABILITY_LEVEL,
                "reliability level 0x%x is not one of UNRELIABLE (1), RELIABLE_DELIVERY (2), "
                "RELIABLE_RECEPTION (4)",
                rel);
        return false;
    }
    if (a->max_transfer > VIA_MAX_TRANSFER) {
        kd_fail(r, VIP_INVALID_MTU, "max transfer size %u exceeds the NIC's %u bytes",
                a->max_transfer, VIA_MAX_TRANSFER);
        return false;
    }
    if (a->max_transfer == 0)
        a->max_transfer = VIA_MAX_TRANSFER;
    /* ptag 0 means "none" (via_abi.h): such a VI can move no registered memory. */
    if (a->ptag != 0 && !kd_ptag_owned(s, a->ptag)) {
        kd_fail(r, VIP_INVALID_PTAG, "ptag %u is not one of this NIC handle's ptags", a->ptag);
        return false;
    }
    /* What VipQueryNic reports as RDMAReadSupport, nothing more. */
    if (a->rdma_read && !(rel & VIA_RDMA_READ_LEVELS)) {
        kd_fail(r, VIP_INVALID_RDMAREAD,
                "EnableRdmaRead: this NIC does RDMA read only at the reliability levels of "
                "its RDMAReadSupport 0x%x (0: none), not at 0x%x",
                VIA_RDMA_READ_LEVELS, rel);
        return false;
    }
    a->rdma_write = a->rdma_write ? 1 : 0;
    a->rdma_read = a->rdma_read ? 1 : 0;
    a->pad = 0;
    return true;
}

static struct kd_cq *cq_of(struct kd_session *s, uint32_t id)
{
    return id < VIA_MAX_CQ ? s->cq[id] : NULL;
}

void kd_op_create_vi(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_create_vi *q = body;
    struct kd_session *s = c->sess;
    struct via_vi_attr attr = q->attr;
    if (!attr_ok(s, &attr, r))
        return;
    struct kd_cq *scq = NULL, *rcq = NULL;
    if (q->send_cq && !(scq = cq_of(s, q->send_cq - 1))) {
        kd_fail(r, VIP_INVALID_PARAMETER, "send CQ %u is not a CQ of this NIC handle",
                q->send_cq - 1);
        return;
    }
    if (q->recv_cq && !(rcq = cq_of(s, q->recv_cq - 1))) {
        kd_fail(r, VIP_INVALID_PARAMETER, "receive CQ %u is not a CQ of this NIC handle",
                q->recv_cq - 1);
        return;
    }
    if (!kd_user_may_create_vi(s->uid, r))
        return;
    struct kd_nic *nic = s->nic;
    uint32_t id = 0, max = kd_nic_max_vi(nic);
    while (id < max && nic->vi[id])
        id++;
    if (id == max) {
        kd_fail(r, VIP_ERROR_RESOURCE, "all %u VIs of via%u are in use%s", max, nic->index,
                max < VIA_MAX_VI ? " (its profile's SRAM holds no more doorbell pages)" : "");
        return;
    }
    struct kd_vi *vi = calloc(1, sizeof *vi);
    if (!vi) {
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory");
        return;
    }
    int fd;
    vi->page = kd_shm_create("via-doorbell", sizeof *vi->page, 0, &fd);
    if (!vi->page) {
        kd_fail(r, VIP_ERROR_RESOURCE, "cannot create the doorbell page: %s", strerror(errno));
        free(vi);
        return;
    }
    vi->nic = nic;
    vi->sess = s;
    vi->id = id;
    vi->attr = attr;
    vi->scq = scq;
    vi->rcq = rcq;
    vi->page->vi_id = id;
    kd_vi_set_state(vi, VIA_VI_IDLE);
    if (scq)
        scq->nbound++;
    if (rcq)
        rcq->nbound++;
    kd_ptag_ref(attr.ptag, 1, 0);
    nic->vi[id] = vi;
    nic->nvis++;
    s->nvis++;
    kd_nic_scan_update(nic);
    struct via_ctl_create_vi_r *a = kd_body(r, sizeof *a);
    if (a)
        a->vi_id = id;
    kd_add_fd(r, fd, true);
    kd_debug("session %u: VI %u on via%u created", s->id, id, nic->index);
}

/* What refers to a VI from above (its connection, its peer request) lets
 * it go before the VI is freed: kd_connect.c hands over how at start-up
 * (kd_vi_on_gone), as this file calls nothing above it. */
static kd_vi_gone_fn *vi_gone;

void kd_vi_on_gone(kd_vi_gone_fn *fn)
{
    vi_gone = fn;
}

/* died: the owner is gone (break its connection) rather than disconnecting. */
static void vi_free(struct kd_vi *vi, bool died)
{
    vi_gone(vi, died);
    if (vi->scq)
        vi->scq->nbound--;
    if (vi->rcq)
        vi->rcq->nbound--;
    kd_ptag_ref(vi->attr.ptag, -1, 0);
    struct via_vi_counters *k = &vi->page->cnt;
    struct kd_nic *nic = vi->nic;
    nic->gone_tx_msgs += atomic_load_explicit(&k->tx_msgs, memory_order_relaxed);
    nic->gone_tx_bytes += atomic_load_explicit(&k->tx_bytes, memory_order_relaxed);
    nic->gone_rx_msgs += atomic_load_explicit(&k->rx_msgs, memory_order_relaxed);
    nic->gone_rx_bytes += atomic_load_explicit(&k->rx_bytes, memory_order_relaxed);
    nic->gone_rx_dropped += atomic_load_explicit(&k->rx_dropped, memory_order_relaxed);
    nic->gone_desc_errors += atomic_load_explicit(&k->desc_errors, memory_order_relaxed);
    for (unsigned r = 0; r < VIA_RXC_N; r++)
        nic->gone_rx_refused[r] +=
            atomic_load_explicit(&vi->page->rx_refused[r], memory_order_relaxed);
    vi->nic->vi[vi->id] = NULL;
    vi->nic->nvis--;
    vi->sess->nvis--;
    kd_nic_scan_update(vi->nic);
    kd_shm_unmap(vi->page, sizeof *vi->page);
    free(vi);
}

void kd_op_destroy_vi(struct kd_client *c, uint64_t cookie, const void *body,
                      struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_vi *q = body;
    struct kd_vi *vi = kd_vi_arg(c->sess, q->vi_id, r);
    if (!vi)
        return;
    kd_debug("session %u: VI %u destroyed (was %s)", c->sess->id, vi->id,
             kd_vi_state_name(vi->state));
    vi_free(vi, false);
}

/*
 * What VipSetViAttributes may change in which VI state (spec-notes/
 * vi-attributes.md). The reliability level was matched with the peer's
 * when connecting, and the ptag is what the descriptors already posted are
 * checked against: both change only while the VI is Idle. The transfer
 * size and the RDMA enables are looked at per message, so they may change
 * on a connected VI (or one in error). Nothing changes while a connection
 * request is in flight: the peer is being shown the attributes. A field
 * given its current value is no change, allowed in every state.
 */
#define ST(s) (1u << (s))
static const struct vi_attr_rule {
    const char *name;
    size_t off; /* of its uint32_t in struct via_vi_attr */
    unsigned states;
} vi_attr_rules[] = {
    {"ReliabilityLevel", offsetof(struct via_vi_attr, reliability), ST(VIA_VI_IDLE)},
    {"Ptag", offsetof(struct via_vi_attr, ptag), ST(VIA_VI_IDLE)},
    {"MaxTransferSize", offsetof(struct via_vi_attr, max_transfer),
     ST(VIA_VI_IDLE) | ST(VIA_VI_CONNECTED) | ST(VIA_VI_ERROR)},
    {"EnableRdmaWrite", offsetof(struct via_vi_attr, rdma_write),
     ST(VIA_VI_IDLE) | ST(VIA_VI_CONNECTED) | ST(VIA_VI_ERROR)},
    {"EnableRdmaRead", offsetof(struct via_vi_attr, rdma_read),
     ST(VIA_VI_IDLE) | ST(VIA_VI_CONNECTED) | ST(VIA_VI_ERROR)},
};

static uint32_t attr_field(const struct via_vi_attr *a, size_t off)
{
    uint32_t v;
    memcpy(&v, (const char *)a + off, sizeof v);
    return v;
}

void kd_op_set_vi(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_set_vi *q = body;
    struct kd_vi *vi = kd_vi_arg(c->sess, q->vi_id, r);
    if (!vi)
        return;
    /* A value no VI may have is refused as such, whatever the state. */
    struct via_vi_attr attr = q->attr;
    if (!attr_ok(c->sess, &attr, r))
        return;
    for (size_t i = 0; i < sizeof vi_attr_rules / sizeof vi_attr_rules[0]; i++) {
        const struct vi_attr_rule *u = &vi_attr_rules[i];
        if (attr_field(&attr, u->off) == attr_field(&vi->attr, u->off) ||
            (u->states & ST(vi->state)))
            continue;
        kd_fail(r, VIP_INVALID_STATE, "VI %u is %s: its %s changes only while %s", vi->id,
                kd_vi_state_name(vi->state), u->name,
                u->states == ST(VIA_VI_IDLE) ? "IDLE" : "IDLE, CONNECTED or ERROR");
        return;
    }
    kd_ptag_ref(vi->attr.ptag, -1, 0);
    kd_ptag_ref(attr.ptag, 1, 0);
    vi->attr = attr;
}

/* A zeroed ring of at least `entries` slots, sealed; NULL with r failed. */
static struct via_cq_ring *cq_ring_make(uint32_t entries, size_t *bytes, uint32_t *nslots,
                                        int *fd, struct kd_reply *r)
{
    if (entries < 1 || entries > VIA_MAX_CQ_ENTRIES) {
        kd_fail(r, VIP_INVALID_PARAMETER, "CQ size %u is not in 1..%u", entries,
                VIA_MAX_CQ_ENTRIES);
        return NULL;
    }
    uint32_t n = 1;
    while (n < entries)
        n <<= 1;
    size_t b = sizeof(struct via_cq_ring) + (size_t)n * sizeof(struct via_cq_entry);
    struct via_cq_ring *ring = kd_shm_create("via-cq", b, 0, fd);
    if (!ring) {
        kd_fail(r, VIP_ERROR_RESOURCE, "cannot create a CQ ring of %u entries: %s", n,
                strerror(errno));
        return NULL;
    }
    ring->nslots = n;
    *bytes = b;
    *nslots = n;
    return ring;
}

void kd_op_create_cq(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_create_cq *q = body;
    struct kd_session *s = c->sess;
    uint32_t id = 0;
    while (id < VIA_MAX_CQ && s->cq[id])
        id++;
    if (id == VIA_MAX_CQ) {
        kd_fail(r, VIP_ERROR_RESOURCE, "this NIC handle already has %u CQs (the limit)",
                VIA_MAX_CQ);
        return;
    }
    struct kd_cq *cq = calloc(1, sizeof *cq);
    if (!cq) {
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory");
        return;
    }
    int fd;
    cq->ring = cq_ring_make(q->entries, &cq->bytes, &cq->nslots, &fd, r);
    if (!cq->ring) {
        free(cq);
        return;
    }
    cq->id = id;
    cq->sess = s;
    s->cq[id] = cq;
    s->ncqs++;
    struct via_ctl_create_cq_r *a = kd_body(r, sizeof *a);
    if (a) {
        a->cq_id = id;
        a->nslots = cq->nslots;
    }
    kd_add_fd(r, fd, true);
}

static void cq_drop_spare(struct kd_cq *cq)
{
    kd_shm_unmap(cq->spare, cq->spare_bytes);
    cq->spare = NULL;
    cq->spare_bytes = 0;
    cq->spare_nslots = 0;
}

static void cq_free(struct kd_session *s, struct kd_cq *cq)
{
    s->cq[cq->id] = NULL;
    s->ncqs--;
    cq_drop_spare(cq);
    kd_shm_unmap(cq->ring, cq->bytes);
    free(cq);
}

void kd_op_destroy_cq(struct kd_client *c, uint64_t cookie, const void *body,
                      struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_cq *q = body;
    struct kd_cq *cq = cq_of(c->sess, q->cq_id);
    if (!cq) {
        kd_fail(r, VIP_INVALID_PARAMETER, "CQ %u is not a CQ of this NIC handle", q->cq_id);
        return;
    }
    if (cq->nbound) {
        kd_fail(r, VIP_INVALID_STATE, "CQ %u still has %u work queues bound to it", cq->id,
                cq->nbound);
        return;
    }
    cq_free(c->sess, cq);
}

/* VipResizeCQ (via_abi.h: prepare, then commit or abort). Whether the
 * entries queued fit is the NIC's to decide, in the process, under the
 * CQ's lock: vipd never reads a ring. */
void kd_op_resize_cq(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_resize_cq *q = body;
    struct kd_cq *cq = cq_of(c->sess, q->cq_id);
    if (!cq) {
        kd_fail(r, VIP_INVALID_PARAMETER, "CQ %u is not a CQ of this NIC handle", q->cq_id);
        return;
    }
    switch (q->step) {
    case VIA_CQ_RESIZE_PREPARE: {
        int fd;
        size_t bytes;
        uint32_t nslots;
        struct via_cq_ring *ring = cq_ring_make(q->entries, &bytes, &nslots, &fd, r);
        if (!ring)
            return;
        cq_drop_spare(cq); /* an earlier resize that never finished */
        cq->spare = ring;
        cq->spare_bytes = bytes;
        cq->spare_nslots = nslots;
        struct via_ctl_create_cq_r *a = kd_body(r, sizeof *a);
        if (a) {
            a->cq_id = cq->id;
            a->nslots = nslots;
        }
        kd_add_fd(r, fd, true);
        return;
    }
    case VIA_CQ_RESIZE_COMMIT:
        if (!cq->spare) {
            kd_fail(r, VIP_INVALID_STATE, "CQ %u has no resize prepared to commit", cq->id);
            return;
        }
        kd_shm_unmap(cq->ring, cq->bytes);
        cq->ring = cq->spare;
        cq->bytes = cq->spare_bytes;
        cq->nslots = cq->spare_nslots;
        cq->spare = NULL;
        cq->spare_bytes = 0;
        cq->spare_nslots = 0;
        kd_debug("session %u: CQ %u resized to %u entries", c->sess->id, cq->id, cq->nslots);
        return;
    case VIA_CQ_RESIZE_ABORT:
        cq_drop_spare(cq);
        return;
    default:
        kd_fail(r, VIP_INVALID_PARAMETER, "RESIZE_CQ step %u is not prepare, commit or abort",
                q->step);
    }
}

void kd_vi_session_free(struct kd_session *s, unsigned *nvis, unsigned *ncqs)
{
    struct kd_nic *nic = s->nic;
    for (uint32_t id = 0; id < VIA_MAX_VI && s->nvis; id++) {
        struct kd_vi *vi = nic->vi[id];
        if (vi && vi->sess == s) {
            vi_free(vi, true);
            (*nvis)++;
        }
    }
    for (uint32_t id = 0; id < VIA_MAX_CQ; id++)
        if (s->cq[id]) {
            cq_free(s, s->cq[id]);
            (*ncqs)++;
        }
}

/*
 * vipl_vi.c - VIs and completion queues: create, destroy, query.
 *
 * A VI is created by the kernel agent, which hands this process the VI's
 * doorbell page (and nobody else); the NIC (nic.h) keeps its own state of
 * the VI, and the library its queues of posted descriptors.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vipl_ext.h"
#include "vipl_int.h"

void vipl_attr_to_wire(const VIP_VI_ATTRIBUTES *a, struct via_vi_attr *w)
{
    struct vip_ptag *p = vipl_handle_obj(a->Ptag);
    *w = (struct via_vi_attr){
        .reliability = a->ReliabilityLevel,
        .max_transfer = a->MaxTransferSize > 0xFFFFFFFFul ? 0xFFFFFFFFu
                                                          : (uint32_t)a->MaxTransferSize,
        .ptag = (p && p->magic == VIPL_MAGIC_PTAG) ? p->id : 0,
        .rdma_write = a->EnableRdmaWrite ? 1u : 0u,
        .rdma_read = a->EnableRdmaRead ? 1u : 0u};
}

void vipl_attr_from_wire(struct vip_nic *n, const struct via_vi_attr *w, VIP_VI_ATTRIBUTES *a)
{
    memset(a, 0, sizeof *a);
    a->ReliabilityLevel = (VIP_RELIABILITY_LEVEL)w->reliability;
    a->MaxTransferSize = w->max_transfer;
    struct vip_ptag *p = n ? vipl_ptag_by_id(n, w->ptag) : NULL;
    a->Ptag = p ? p->handle : NULL;
    a->EnableRdmaWrite = w->rdma_write ? VIP_TRUE : VIP_FALSE;
    a->EnableRdmaRead = w->rdma_read ? VIP_TRUE : VIP_FALSE;
}

VIP_RETURN VipCreateVi(VIP_NIC_HANDLE NicHandle, VIP_VI_ATTRIBUTES *ViAttribs,
                       VIP_CQ_HANDLE SendCQHandle, VIP_CQ_HANDLE RecvCQHandle,
                       VIP_VI_HANDLE *ViHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !ViAttribs || !ViHandle)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipCreateVi");
    struct vip_cq *scq = SendCQHandle ? vipl_cq(SendCQHandle) : NULL;
    struct vip_cq *rcq = RecvCQHandle ? vipl_cq(RecvCQHandle) : NULL;
    if ((SendCQHandle && (!scq || scq->nic != n)) || (RecvCQHandle && (!rcq || rcq->nic != n)))
        return vipl_fail(VIP_INVALID_PARAMETER, "CQ handle is not a CQ of this NIC");
    if (!vipl_ptag(n, ViAttribs->Ptag))
        return vipl_fail(VIP_INVALID_PTAG, "ViAttribs->Ptag is not a protection tag of "
                                           "this NIC");
    if (ViAttribs->QoS)
        return vipl_fail(VIP_INVALID_QOS, "QoS is not defined by VIA 1.0; pass NULL");

    struct via_ctl_create_vi q = {.send_cq = scq ? scq->id + 1 : 0,
                                  .recv_cq = rcq ? rcq->id + 1 : 0};
    vipl_attr_to_wire(ViAttribs, &q.attr);
    struct via_ctl_create_vi_r r;
    int fd, nfd = 1;
    VIP_RETURN rc = vipl_call(n, VIA_CTL_CREATE_VI, &q, sizeof q, &r, sizeof r, &fd, &nfd);
    if (rc != VIP_SUCCESS)
        return rc;
    struct vip_vi *vi = nfd == 1 ? calloc(1, sizeof *vi) : NULL;
    struct via_vi_page *db = vi ? vipl_map_fd(fd, sizeof *db, PROT_READ | PROT_WRITE) : NULL;
    if (!db || r.vi_id >= VIA_MAX_VI) {
        if (nfd == 1 && !vi)
            close(fd);
        free(vi);
        struct via_ctl_vi d = {.vi_id = r.vi_id};
        vipl_call(n, VIA_CTL_DESTROY_VI, &d, sizeof d, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "cannot map the VI's doorbell page");
    }
    vi->nic = n;
    vi->id = r.vi_id;
    vi->db = db;
    vi->attr = *ViAttribs;
    if (vi->attr.MaxTransferSize == 0)
        vi->attr.MaxTransferSize = VIA_MAX_TRANSFER;
    vi->scq = scq;
    vi->rcq = rcq;
    struct nic_vi_params np = {.vi_id = r.vi_id, .ptag = q.attr.ptag,
                               .reliability = q.attr.reliability,
                               .max_transfer = (uint32_t)vi->attr.MaxTransferSize,
                               .rdma_write = q.attr.rdma_write != 0,
                               .rdma_read = q.attr.rdma_read != 0};
    vi->hw = nic_vi_create(n->hw, db, &np, scq ? scq->hw : NULL, rcq ? rcq->hw : NULL);
    if (!vi->hw) {
        munmap(db, sizeof *db);
        free(vi);
        struct via_ctl_vi d = {.vi_id = r.vi_id};
        vipl_call(n, VIA_CTL_DESTROY_VI, &d, sizeof d, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "the NIC has no room for VI %u", r.vi_id);
    }
    vi->gen = nic_vi_gen(vi->hw);
    vi->lock = nic_vi_lock(vi->hw);
    if (!(vi->handle = vipl_handle_new(vi))) {
        nic_vi_destroy(vi->hw);
        munmap(db, sizeof *db);
        free(vi);
        struct via_ctl_vi d = {.vi_id = r.vi_id};
        vipl_call(n, VIA_CTL_DESTROY_VI, &d, sizeof d, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "this process has %u VIPL objects (the limit)",
                         VIPL_HANDLE_SLOTS);
    }
    vi->paced = nic_paced(n->hw);
    vi->err_flag = nic_vi_error_flag(vi->hw);
    vipl_notifiers_init(&vi->notify);
    if (scq)
        atomic_fetch_add(&scq->nvis, 1);
    if (rcq)
        atomic_fetch_add(&rcq->nvis, 1);
    vi->magic = VIPL_MAGIC_VI;
    vipl_ext_vi_init(vi);
    pthread_mutex_lock(&n->lock);
    n->vis[r.vi_id] = vi;
    pthread_mutex_unlock(&n->lock);
    *ViHandle = vi->handle;
    return VIP_SUCCESS;
}

void vipl_vi_attach_channel(struct vip_vi *vi, const struct via_ctl_conn_done_r *r,
                            int chan_fd, int peer_ev_fd, int peer_pidfd)
{
    vi->chan = vipl_map_fd(chan_fd, sizeof *vi->chan, PROT_READ | PROT_WRITE);
    bool net = vi->chan && (vi->chan->link == VIA_LINK_UDP || vi->chan->link == VIA_LINK_OFI);
    /* A channel to another host comes with the link's UDP socket in
     * place of the peer's event page: the NIC takes it. */
    vi->peer_ev = net ? NULL : vipl_map_fd(peer_ev_fd, sizeof *vi->peer_ev, PROT_READ | PROT_WRITE);
    bool ok = vi->chan && (net || vi->peer_ev) && vi->chan->magic == VIA_CHAN_MAGIC;
    if (ok) {
        ok = nic_vi_connect(vi->hw, vi->chan, (int)r->side, r->peer_vi, vi->peer_ev,
                            net ? peer_ev_fd : -1, peer_pidfd);
    } else {
        if (net)
            close(peer_ev_fd);
        if (peer_pidfd >= 0)
            close(peer_pidfd);
    }
    if (!ok)
        atomic_store(&vi->db->state, VIA_VI_ERROR);
}

void vipl_vi_detach_channel(struct vip_vi *vi)
{
    nic_vi_disconnect(vi->hw);
    atomic_store(&vi->db->state, VIA_VI_IDLE);
    vipl_vi_unpin_wait(vi);
    if (vi->chan_old)
        munmap(vi->chan_old, sizeof *vi->chan_old);
    vi->chan_old = vi->chan;
    if (vi->peer_ev)
        munmap(vi->peer_ev, sizeof *vi->peer_ev);
    vi->chan = NULL;
    vi->peer_ev = NULL;
}

VIP_RETURN VipDestroyVi(VIP_VI_HANDLE ViHandle)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a VI handle");
    /* A pending connection request is cancelled with the VI (vipd). */
    if (atomic_load(&vi->db->state) == VIA_VI_CONNECTED)
        return vipl_fail(VIP_INVALID_STATE, "VI %u is connected: VipDisconnect it first",
                         vi->id);
    struct vip_nic *n = vi->nic;
    vipl_notifiers_fini(&vi->notify); /* no handler may see the VI go */
    pthread_mutex_lock(&n->lock);
    n->vis[vi->id] = NULL;
    pthread_mutex_unlock(&n->lock);
    vipl_handle_free(vi->handle); /* from here on the handle names nothing */
    if (vi->chan)
        vipl_vi_detach_channel(vi);
    vipl_ext_vi_fini(vi);
    /* The NIC lets go of it first (waiting for any thread progressing it),
     * so the id vipd frees next is free in the NIC's table too. */
    nic_vi_destroy(vi->hw);
    struct via_ctl_vi q = {.vi_id = vi->id};
    VIP_RETURN rc = vipl_call(n, VIA_CTL_DESTROY_VI, &q, sizeof q, NULL, 0, NULL, NULL);
    if (rc != VIP_SUCCESS)
        vipl_set_error("VipDestroyVi: vipd did not free VI %u (%s); the handle is gone "
                       "all the same", vi->id, vip_strerror(rc));
    if (vi->scq)
        atomic_fetch_sub(&vi->scq->nvis, 1);
    if (vi->rcq)
        atomic_fetch_sub(&vi->rcq->nvis, 1);
    munmap(vi->db, sizeof *vi->db);
    vipl_vi_unpin_wait(vi);
    if (vi->chan_old)
        munmap(vi->chan_old, sizeof *vi->chan_old);
    vi->magic = VIPL_DEAD;
    free(vi);
    return VIP_SUCCESS;
}

static VIP_VI_STATE vip_state(uint32_t s)
{
    switch (s) {
    case VIA_VI_CONNECTED: return VIP_STATE_CONNECTED;
    case VIA_VI_PENDING: return VIP_STATE_CONNECT_PENDING;
    case VIA_VI_ERROR: return VIP_STATE_ERROR;
    default: return VIP_STATE_IDLE;
    }
}

VIP_RETURN VipQueryVi(VIP_VI_HANDLE ViHandle, VIP_VI_STATE *State, VIP_VI_ATTRIBUTES *ViAttribs,
                      VIP_BOOLEAN *ViSendQEmpty, VIP_BOOLEAN *ViRecvQEmpty)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a VI handle");
    fw_lock(vi->lock);
    if (State)
        *State = vip_state(atomic_load(&vi->db->state));
    if (ViAttribs)
        *ViAttribs = vi->attr;
    if (ViSendQEmpty)
        *ViSendQEmpty = vi->sq.head == vi->sq.tail;
    if (ViRecvQEmpty)
        *ViRecvQEmpty = vi->rq.head == vi->rq.tail;
    fw_unlock(vi->lock);
    return VIP_SUCCESS;
}

/* What may change in which state is vipd's to decide (kd_vi.c, with the
 * values' checks); the NIC then takes the new values under the VI's lock. */
VIP_RETURN VipSetViAttributes(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *ViAttribs)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi || !ViAttribs)
        return vipl_fail(VIP_INVALID_PARAMETER, "VipSetViAttributes: %s",
                         !vi ? "not a VI handle" : "ViAttribs is NULL");
    if (!vipl_ptag(vi->nic, ViAttribs->Ptag))
        return vipl_fail(VIP_INVALID_PTAG, "VipSetViAttributes: ViAttribs->Ptag is not a "
                                           "protection tag of this NIC");
    if (ViAttribs->QoS)
        return vipl_fail(VIP_INVALID_QOS, "VipSetViAttributes: QoS is not defined by VIA "
                                          "1.0; pass NULL");
    struct via_ctl_set_vi q = {.vi_id = vi->id};
    vipl_attr_to_wire(ViAttribs, &q.attr);
    VIP_RETURN rc = vipl_call(vi->nic, VIA_CTL_SET_VI, &q, sizeof q, NULL, 0, NULL, NULL);
    if (rc != VIP_SUCCESS)
        return rc;
    fw_lock(vi->lock);
    vi->attr = *ViAttribs;
    if (vi->attr.MaxTransferSize == 0)
        vi->attr.MaxTransferSize = VIA_MAX_TRANSFER;
    struct nic_vi_params np = {.vi_id = vi->id, .ptag = q.attr.ptag,
                               .reliability = q.attr.reliability,
                               .max_transfer = (uint32_t)vi->attr.MaxTransferSize,
                               .rdma_write = q.attr.rdma_write != 0,
                               .rdma_read = q.attr.rdma_read != 0};
    fw_unlock(vi->lock);
    nic_vi_set_params(vi->hw, &np);
    return VIP_SUCCESS;
}

/* ---- completion queues ------------------------------------------------------ */

/* Map a ring vipd sent (fd consumed); NULL unless it is what vipd said. */
static struct via_cq_ring *map_ring(int fd, uint32_t nslots, size_t *len)
{
    *len = sizeof(struct via_cq_ring) + (size_t)nslots * sizeof(struct via_cq_entry);
    struct via_cq_ring *ring = vipl_map_fd(fd, *len, PROT_READ | PROT_WRITE);
    if (ring && (ring->nslots != nslots || !nslots || (nslots & (nslots - 1)))) {
        munmap(ring, *len);
        ring = NULL;
    }
    return ring;
}

VIP_RETURN VipCreateCQ(VIP_NIC_HANDLE NicHandle, VIP_ULONG EntryCount, VIP_CQ_HANDLE *CQHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !CQHandle)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipCreateCQ");
    if (EntryCount == 0 || EntryCount > VIA_MAX_CQ_ENTRIES)
        return vipl_fail(VIP_INVALID_PARAMETER, "EntryCount %lu is outside 1..%u",
                         (unsigned long)EntryCount, VIA_MAX_CQ_ENTRIES);
    struct via_ctl_create_cq q = {.entries = (uint32_t)EntryCount};
    struct via_ctl_create_cq_r r;
    int fd, nfd = 1;
    VIP_RETURN rc = vipl_call(n, VIA_CTL_CREATE_CQ, &q, sizeof q, &r, sizeof r, &fd, &nfd);
    if (rc != VIP_SUCCESS)
        return rc;
    struct vip_cq *cq = nfd == 1 ? calloc(1, sizeof *cq) : NULL;
    size_t len = 0;
    struct via_cq_ring *ring = cq ? map_ring(fd, r.nslots, &len) : NULL;
    if (!ring) {
        if (nfd == 1 && !cq)
            close(fd);
        free(cq);
        struct via_ctl_cq d = {.cq_id = r.cq_id};
        vipl_call(n, VIA_CTL_DESTROY_CQ, &d, sizeof d, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "cannot map the CQ ring of %u entries", r.nslots);
    }
    cq->id = r.cq_id;
    cq->nic = n;
    cq->map_len = len;
    cq->ring = ring;
    cq->hw = nic_cq_create(n->hw, ring);
    if (!cq->hw) {
        munmap(ring, len);
        free(cq);
        struct via_ctl_cq d = {.cq_id = r.cq_id};
        vipl_call(n, VIA_CTL_DESTROY_CQ, &d, sizeof d, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "out of memory");
    }
    if (!(cq->handle = vipl_handle_new(cq))) {
        nic_cq_destroy(cq->hw);
        munmap(ring, len);
        free(cq);
        struct via_ctl_cq d = {.cq_id = r.cq_id};
        vipl_call(n, VIA_CTL_DESTROY_CQ, &d, sizeof d, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "this process has %u VIPL objects (the limit)",
                         VIPL_HANDLE_SLOTS);
    }
    pthread_mutex_init(&cq->resize_lock, NULL);
    vipl_notifiers_init(&cq->notify);
    atomic_fetch_add(&n->ncqs, 1);
    cq->magic = VIPL_MAGIC_CQ;
    *CQHandle = cq->handle;
    return VIP_SUCCESS;
}

VIP_RETURN VipDestroyCQ(VIP_CQ_HANDLE CQHandle)
{
    struct vip_cq *cq = vipl_cq(CQHandle);
    if (!cq)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a CQ handle");
    if (atomic_load(&cq->nvis))
        return vipl_fail(VIP_INVALID_STATE, "%u VIs still use this CQ",
                         (unsigned)atomic_load(&cq->nvis));
    vipl_notifiers_fini(&cq->notify);
    struct via_ctl_cq q = {.cq_id = cq->id};
    VIP_RETURN rc = vipl_call(cq->nic, VIA_CTL_DESTROY_CQ, &q, sizeof q, NULL, 0, NULL, NULL);
    if (rc != VIP_SUCCESS) {
        vipl_notifiers_init(&cq->notify);
        return rc;
    }
    nic_cq_destroy(cq->hw);
    munmap(cq->ring, cq->map_len);
    atomic_fetch_sub(&cq->nic->ncqs, 1);
    pthread_mutex_destroy(&cq->resize_lock);
    vipl_handle_free(cq->handle);
    cq->magic = VIPL_DEAD;
    free(cq);
    return VIP_SUCCESS;
}

static uint32_t ring_slots(VIP_ULONG entries)
{
    uint32_t n = 1;
    while (n < entries)
        n <<= 1;
    return n;
}

/*
 * A CQ in use may grow or shrink: VIs stay bound, completions keep coming,
 * other threads may be polling or waiting on it. vipd makes the new ring
 * (prepare); the NIC switches to it under the CQ's lock, copying what is
 * queued in order (nic_cq_resize), and only then is the old ring unmapped
 * and vipd told to keep the new one (commit). Asking for fewer entries than
 * are queued is refused with VIP_INVALID_PARAMETER (spec-notes/
 * completion-queues.md): the entry count is what is wrong, not a resource.
 */
VIP_RETURN VipResizeCQ(VIP_CQ_HANDLE CQHandle, VIP_ULONG EntryCount)
{
    struct vip_cq *cq = vipl_cq(CQHandle);
    if (!cq)
        return vipl_fail(VIP_INVALID_PARAMETER, "VipResizeCQ: not a CQ handle");
    if (EntryCount == 0 || EntryCount > VIA_MAX_CQ_ENTRIES)
        return vipl_fail(VIP_INVALID_PARAMETER, "VipResizeCQ: EntryCount %lu is outside 1..%u",
                         (unsigned long)EntryCount, VIA_MAX_CQ_ENTRIES);
    struct vip_nic *n = cq->nic;
    VIP_RETURN rc = VIP_SUCCESS;
    pthread_mutex_lock(&cq->resize_lock);
    uint32_t queued;
    if (ring_slots(EntryCount) == nic_cq_slots(cq->hw)) {
        /* The ring already has that size; only the count must fit. */
        if ((queued = nic_cq_queued(cq->hw)) > EntryCount)
            rc = vipl_fail(VIP_INVALID_PARAMETER,
                           "VipResizeCQ: %u completions are queued, more than the %lu "
                           "entries asked for; take some first", queued,
                           (unsigned long)EntryCount);
        goto out;
    }
    struct via_ctl_resize_cq q = {.cq_id = cq->id, .entries = (uint32_t)EntryCount,
                                  .step = VIA_CQ_RESIZE_PREPARE};
    struct via_ctl_create_cq_r r;
    int fd, nfd = 1;
    rc = vipl_call(n, VIA_CTL_RESIZE_CQ, &q, sizeof q, &r, sizeof r, &fd, &nfd);
    if (rc != VIP_SUCCESS)
        goto out; /* vipd's reason is set */
    size_t len = 0;
    struct via_cq_ring *ring = nfd == 1 ? map_ring(fd, r.nslots, &len) : NULL, *old;
    q.step = VIA_CQ_RESIZE_ABORT;
    if (!ring) {
        vipl_call(n, VIA_CTL_RESIZE_CQ, &q, sizeof q, NULL, 0, NULL, NULL);
        rc = vipl_fail(VIP_ERROR_RESOURCE, "VipResizeCQ: cannot map a ring of %u entries",
                       r.nslots);
        goto out;
    }
    if (!nic_cq_resize(cq->hw, ring, (uint32_t)EntryCount, &old, &queued)) {
        munmap(ring, len);
        vipl_call(n, VIA_CTL_RESIZE_CQ, &q, sizeof q, NULL, 0, NULL, NULL);
        rc = vipl_fail(VIP_INVALID_PARAMETER,
                       "VipResizeCQ: %u completions are queued, more than the %lu entries "
                       "asked for; take some first", queued, (unsigned long)EntryCount);
        goto out;
    }
    munmap(old, cq->map_len); /* the NIC no longer touches it */
    cq->ring = ring;
    cq->map_len = len;
    q.step = VIA_CQ_RESIZE_COMMIT;
    if (vipl_call(n, VIA_CTL_RESIZE_CQ, &q, sizeof q, NULL, 0, NULL, NULL) != VIP_SUCCESS)
        vipl_set_error("VipResizeCQ: the CQ has its new ring, but vipd did not record it "
                       "(%s)", vip_last_error());
out:
    pthread_mutex_unlock(&cq->resize_lock);
    return rc;
}

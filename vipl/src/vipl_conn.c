/*
 * vipl_conn.c - the connection models of VIA 1.0: client-server and
 * peer-to-peer.
 *
 * The kernel agent matches a VipConnectRequest with a VipConnectWait
 * already pending on the same NIC address and discriminator (the emulated
 * switch; none pending: VIP_NO_MATCH at once), and on accept hands both
 * ends the channel (the link between them) and the peer's event page, so
 * either NIC can wake the other without a system call on the fast path.
 * A VipConnectPeerRequest stays pending in the kernel agent until the
 * mirror request arrives or it times out; VipConnectPeerDone asks for the
 * outcome, VipConnectPeerWait waits for it, and either collects the channel.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vipl_int.h"

static VIP_RETURN addr_in(const VIP_NET_ADDRESS *a, struct via_net_addr *w, bool need_host)
{
    memset(w, 0, sizeof *w);
    if (!a)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL VIP_NET_ADDRESS");
    if (a->DiscriminatorLen > VIA_MAX_DISCRIM)
        return vipl_fail(VIP_INVALID_PARAMETER, "discriminator of %u bytes (max %u)",
                         a->DiscriminatorLen, VIA_MAX_DISCRIM);
    if (need_host && a->HostAddressLen != VIA_NIC_ADDR_LEN)
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "host address of %u bytes; this NIC's are %u (VipNSGetHostByName)",
                         a->HostAddressLen, VIA_NIC_ADDR_LEN);
    if (a->HostAddressLen == VIA_NIC_ADDR_LEN)
        memcpy(w->host, vipl_na_bytes(a), VIA_NIC_ADDR_LEN);
    w->discrim_len = a->DiscriminatorLen;
    memcpy(w->discrim, vipl_na_bytes(a) + a->HostAddressLen, a->DiscriminatorLen);
    return VIP_SUCCESS;
}

static void addr_out(const struct via_net_addr *w, VIP_NET_ADDRESS *a)
{
    uint16_t dl = w->discrim_len > VIA_MAX_DISCRIM ? VIA_MAX_DISCRIM : w->discrim_len;
    a->HostAddressLen = VIA_NIC_ADDR_LEN;
    a->DiscriminatorLen = dl;
    memcpy(vipl_na_bytes(a), w->host, VIA_NIC_ADDR_LEN);
    memcpy(vipl_na_bytes(a) + VIA_NIC_ADDR_LEN, w->discrim, dl);
}

/* The reply to an accept or a request carries the channel and the peer's
 * event page; with both, the VI is connected. A third fd, when vipd could
 * open one, is the peer process (its NIC watches it: fw_live.c). */
static VIP_RETURN attach(struct vip_vi *vi, const struct via_ctl_conn_done_r *r, int *fds,
                         int nfds)
{
    if (nfds != 2 && nfds != 3) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return vipl_fail(VIP_ERROR_RESOURCE, "vipd sent no channel for the connection");
    }
    vipl_vi_attach_channel(vi, r, fds[0], fds[1], nfds == 3 ? fds[2] : -1);
    return VIP_SUCCESS;
}

static uint32_t timeout_wire(VIP_ULONG t)
{
    return t >= VIP_INFINITE ? 0xFFFFFFFFu : (uint32_t)t;
}

/* The arguments of VipConnectRequest and VipConnectPeerRequest: their
 * errors are VIP_INVALID_PARAMETER, which comes before any other. */
static VIP_RETURN request_in(struct vip_vi *vi, const VIP_NET_ADDRESS *local, bool need_local,
                             const VIP_NET_ADDRESS *remote, VIP_ULONG timeout,
                             struct via_ctl_conn_request *q)
{
    memset(q, 0, sizeof *q);
    if (!vi)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a VI handle");
    if (timeout == 0)
        return vipl_fail(VIP_INVALID_PARAMETER, "a connection request's Timeout must not be 0");
    if (need_local && !local)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL LocalAddr: a peer is known by it");
    VIP_RETURN rc = addr_in(remote, &q->remote, true);
    if (rc == VIP_SUCCESS && local)
        rc = addr_in(local, &q->local, false);
    if (rc != VIP_SUCCESS)
        return rc;
    /* Our own host address is the VI's NIC, whatever the caller wrote. */
    memcpy(q->local.host, vi->nic->attr.nic_addr, VIA_NIC_ADDR_LEN);
    q->vi_id = vi->id;
    q->timeout_ms = timeout_wire(timeout);
    return VIP_SUCCESS;
}

VIP_RETURN VipConnectWait(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS *LocalAddr,
                          VIP_ULONG Timeout, VIP_NET_ADDRESS *RemoteAddr,
                          VIP_VI_ATTRIBUTES *RemoteViAttribs, VIP_CONN_HANDLE *ConnHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !ConnHandle)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipConnectWait");
    struct via_ctl_conn_wait q = {.timeout_ms = timeout_wire(Timeout)};
    VIP_RETURN rc = addr_in(LocalAddr, &q.local, false);
    if (rc != VIP_SUCCESS)
        return rc;
    struct via_ctl_conn_wait_r r;
    rc = vipl_call_side(n, VIA_CTL_CONN_WAIT, &q, sizeof q, &r, sizeof r, NULL, NULL,
                        Timeout);
    if (rc != VIP_SUCCESS)
        return rc;
    struct vip_conn *c = calloc(1, sizeof *c);
    if (c && !(c->handle = vipl_handle_new(c))) {
        free(c);
        c = NULL;
    }
    if (!c) {
        struct via_ctl_conn_reject j = {.conn_id = r.conn_id};
        vipl_call(n, VIA_CTL_CONN_REJECT, &j, sizeof j, NULL, 0, NULL, NULL);
        return vipl_fail(VIP_ERROR_RESOURCE, "out of memory");
    }
    c->magic = VIPL_MAGIC_CONN;
    c->conn_id = r.conn_id;
    c->nic = n;
    vipl_attr_from_wire(NULL, &r.remote_attr, &c->remote_attr);
    if (RemoteAddr)
        addr_out(&r.remote, RemoteAddr);
    if (RemoteViAttribs)
        *RemoteViAttribs = c->remote_attr;
    *ConnHandle = c->handle;
    return VIP_SUCCESS;
}

static struct vip_conn *conn_of(VIP_CONN_HANDLE h)
{
    struct vip_conn *c = vipl_handle_obj(h);
    return c && c->magic == VIPL_MAGIC_CONN ? c : NULL;
}

static void conn_free(struct vip_conn *c)
{
    vipl_handle_free(c->handle);
    c->magic = VIPL_DEAD;
    free(c);
}

VIP_RETURN VipConnectAccept(VIP_CONN_HANDLE ConnHandle, VIP_VI_HANDLE ViHandle)
{
    struct vip_conn *c = conn_of(ConnHandle);
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!c || !vi || vi->nic != c->nic)
        return vipl_fail(VIP_INVALID_PARAMETER, "bad connection or VI handle");
    struct via_ctl_conn_accept q = {.conn_id = c->conn_id, .vi_id = vi->id};
    struct via_ctl_conn_done_r r;
    int fds[3], nfds = 3;
    VIP_RETURN rc = vipl_call(c->nic, VIA_CTL_CONN_ACCEPT, &q, sizeof q, &r, sizeof r, fds,
                              &nfds);
    if (rc == VIP_INVALID_RELIABILITY_LEVEL || rc == VIP_INVALID_STATE ||
        rc == VIP_INVALID_MTU)
        return rc; /* the request still waits: the caller may accept or reject */
    conn_free(c);
    return rc != VIP_SUCCESS ? rc : attach(vi, &r, fds, nfds);
}

VIP_RETURN VipConnectReject(VIP_CONN_HANDLE ConnHandle)
{
    struct vip_conn *c = conn_of(ConnHandle);
    if (!c)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a connection handle");
    struct via_ctl_conn_reject q = {.conn_id = c->conn_id};
    VIP_RETURN rc = vipl_call(c->nic, VIA_CTL_CONN_REJECT, &q, sizeof q, NULL, 0, NULL, NULL);
    conn_free(c);
    return rc;
}

VIP_RETURN VipConnectRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS *LocalAddr,
                             VIP_NET_ADDRESS *RemoteAddr, VIP_ULONG Timeout,
                             VIP_VI_ATTRIBUTES *RemoteViAttribs)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    struct via_ctl_conn_request q;
    VIP_RETURN rc = request_in(vi, LocalAddr, false, RemoteAddr, Timeout, &q);
    if (rc != VIP_SUCCESS)
        return rc;
    struct via_ctl_conn_done_r r;
    int fds[3], nfds = 3;
    rc = vipl_call_side(vi->nic, VIA_CTL_CONN_REQUEST, &q, sizeof q, &r, sizeof r, fds, &nfds,
                        Timeout);
    if (rc == VIP_SUCCESS)
        rc = attach(vi, &r, fds, nfds);
    if (rc != VIP_SUCCESS)
        return rc;
    if (RemoteViAttribs)
        vipl_attr_from_wire(NULL, &r.remote_attr, RemoteViAttribs);
    return VIP_SUCCESS;
}

VIP_RETURN VipDisconnect(VIP_VI_HANDLE ViHandle)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a VI handle");
    /* Our NIC lets go first (queued descriptors complete with DESC_FLUSHED),
     * so it never mistakes the close it is about to see for the peer's. */
    if (vi->chan)
        nic_vi_disconnect(vi->hw);
    struct via_ctl_vi q = {.vi_id = vi->id};
    VIP_RETURN rc = vipl_call(vi->nic, VIA_CTL_DISCONNECT, &q, sizeof q, NULL, 0, NULL, NULL);
    if (rc != VIP_SUCCESS)
        return rc;
    /* The VI is Idle again. */
    vipl_vi_detach_channel(vi);
    return VIP_SUCCESS;
}


/* ---- peer-to-peer ------------------------------------------------------------------- */

VIP_RETURN VipConnectPeerRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS *LocalAddr,
                                 VIP_NET_ADDRESS *RemoteAddr, VIP_ULONG Timeout)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    struct via_ctl_conn_request q;
    VIP_RETURN rc = request_in(vi, LocalAddr, true, RemoteAddr, Timeout, &q);
    if (rc != VIP_SUCCESS)
        return rc;
    return vipl_call(vi->nic, VIA_CTL_PEER_REQUEST, &q, sizeof q, NULL, 0, NULL, NULL);
}

/* PEER_DONE or PEER_WAIT: the outcome of the VI's peer request. */
static VIP_RETURN peer_outcome(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *RemoteViAttribs,
                               bool wait)
{
    struct vip_vi *vi = vipl_vi(ViHandle);
    if (!vi)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a VI handle");
    struct via_ctl_vi q = {.vi_id = vi->id};
    struct via_ctl_conn_done_r r;
    int fds[3], nfds = 3;
    VIP_RETURN rc = wait ? vipl_call_side(vi->nic, VIA_CTL_PEER_WAIT, &q, sizeof q, &r,
                                          sizeof r, fds, &nfds, VIP_INFINITE)
                         : vipl_call(vi->nic, VIA_CTL_PEER_DONE, &q, sizeof q, &r, sizeof r,
                                     fds, &nfds);
    /* Not connected: vi is not touched (another thread may have destroyed
     * it, which is what ended a blocked wait). */
    if (rc != VIP_SUCCESS || (rc = attach(vi, &r, fds, nfds)) != VIP_SUCCESS)
        return rc;
    if (RemoteViAttribs)
        vipl_attr_from_wire(NULL, &r.remote_attr, RemoteViAttribs);
    return VIP_SUCCESS;
}

VIP_RETURN VipConnectPeerDone(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *RemoteViAttribs)
{
    return peer_outcome(ViHandle, RemoteViAttribs, false);
}

VIP_RETURN VipConnectPeerWait(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES *RemoteViAttribs)
{
    return peer_outcome(ViHandle, RemoteViAttribs, true);
}

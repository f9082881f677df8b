/*
 * kd_peer.c - the peer-to-peer connection model of VIA 1.0.
 *
 * VipConnectPeerRequest posts a request (PEER_REQUEST, never blocks;
 * checked as a client-server request is, in kd_connect.c): the VI's NIC and
 * local discriminator, the remote NIC and discriminator. Two
 * requests whose addresses mirror each other are connected through a
 * channel (kd_conn_link), whichever came first; until then the request is
 * PENDING and its VI CONNECT_PENDING, up to the request's timeout. The
 * outcome (CONNECTED, or FAILED with the code to report) is kept until
 * VipConnectPeerDone (PEER_DONE, never blocks) or VipConnectPeerWait
 * (PEER_WAIT, a deferred reply) tells it; a PEER_WAIT already blocked is
 * told at once. VipDisconnect and VipDestroyVi cancel a pending request.
 *
 * A request for a NIC of another host (remote_host) is matched by the two
 * vipds (kd_remote.c): the one with the lower host id sends its request
 * to the other, which keeps it until a mirror request of its own comes
 * (or the sender withdraws it: timeout, cancel) and then connects both.
 * So the two requests never cross on the wire and one connection results.
 */
#include "kd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "via_spec.h"

enum kd_peer_state {
    KD_PEER_PENDING,   /* waiting for the mirror request */
    KD_PEER_CONNECTED, /* connected; Done/Wait have not told it yet */
    KD_PEER_FAILED,    /* timed out; Done/Wait have not told it yet */
    KD_PEER_NSTATES
};

static const char *const peer_state_name[KD_PEER_NSTATES] = {
    [KD_PEER_PENDING] = "PENDING",
    [KD_PEER_CONNECTED] = "CONNECTED",
    [KD_PEER_FAILED] = "FAILED",
};

struct kd_peer {
    struct kd_vi *vi;
    enum kd_peer_state state;
    struct kd_host *remote_host; /* NULL: a NIC of this host */
    unsigned remote_nic;
    uint16_t local_dlen, remote_dlen;
    uint8_t local_discrim[VIA_MAX_DISCRIM], remote_discrim[VIA_MAX_DISCRIM];
    uint64_t deadline_ns; /* 0 = never */
    /* FAILED: the code and reason Done/Wait report */
    int32_t status;
    char msg[112];
    /* CONNECTED: what Done/Wait hand over: the reply, the channel (the
     * conn's chan_fd) and the peer's event page (vipd's copy, -1 if none;
     * across hosts the link's socket in its place) */
    struct via_ctl_conn_done_r done;
    int peer_ev_fd;
    int peer_pidfd;    /* the peer process (kd_conn_pidfd), -1 if none */
    /* the PEER_WAIT blocked on this request, if any */
    struct kd_client *waiter;
    uint64_t waiter_cookie;
    struct kd_peer *next;
};

static void peer_set_state(struct kd_peer *p, enum kd_peer_state st)
{
    kd_debug("peer request of VI %u on via%u: %s -> %s", p->vi->id, p->vi->nic->index,
             peer_state_name[p->state], peer_state_name[st]);
    p->state = st;
}

/* A CONNECTED side no longer needs the channel's fd: the last one closes it. */
static void chan_fd_release(struct kd_peer *p)
{
    struct kd_conn *cn = p->vi->conn;
    if (p->state != KD_PEER_CONNECTED || !cn || cn->chan_fd < 0)
        return;
    if (cn->chan_untold > 0)
        cn->chan_untold--;
    if (cn->chan_untold == 0) {
        close(cn->chan_fd);
        cn->chan_fd = -1;
    }
}

static void peer_free(struct kd_peer *p)
{
    for (struct kd_peer **pp = &kd.peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    /* A request sent to another host and not answered yet: withdrawn
     * (the request's end tells that host, through cn->far). */
    struct kd_conn *cn = p->vi->conn;
    if (p->state == KD_PEER_PENDING && cn && cn->peer && cn->state == KD_CONN_MATCHED)
        kd_conn_request_end(cn, KD_CONN_REJECTED, -1, NULL);
    chan_fd_release(p);
    if (p->peer_ev_fd >= 0)
        close(p->peer_ev_fd);
    if (p->peer_pidfd >= 0)
        close(p->peer_pidfd);
    p->vi->peer = NULL;
    free(p);
}

/* The connection a CONNECTED outcome hands over (NULL: it has gone, which
 * disconnecting or destroying the VI would have told first). */
static struct kd_conn *channel_of(const struct kd_peer *p)
{
    struct kd_conn *cn = p->vi->conn;
    return cn && cn->chan_fd >= 0 ? cn : NULL;
}

/* Tell client the outcome (as the reply to cookie) and forget the request;
 * kept if the client has gone meanwhile, for a later Done or Wait. */
static void tell(struct kd_peer *p, struct kd_client *c, uint64_t cookie)
{
    if (p->state == KD_PEER_CONNECTED && !channel_of(p)) {
        kd_send_status(c, cookie, VIP_INVALID_STATE, "the connection has gone");
    } else if (p->state == KD_PEER_CONNECTED) {
        int fds[3] = {p->vi->conn->chan_fd, p->peer_ev_fd, p->peer_pidfd};
        kd_send_reply(c, cookie, VIP_SUCCESS, NULL, &p->done, sizeof p->done, fds,
                      p->peer_pidfd >= 0 ? 3 : 2);
    } else {
        kd_send_reply(c, cookie, p->status, p->msg, NULL, 0, NULL, 0);
    }
    if (!c->dead)
        peer_free(p);
}

/* The outcome is decided: a PEER_WAIT already blocked learns it now. */
static void decided(struct kd_peer *p)
{
    struct kd_client *w = p->waiter;
    p->waiter = NULL;
    if (w && !w->dead)
        tell(p, w, p->waiter_cookie);
}

/* The oldest pending request that mirrors (vi's NIC, local) <-> (nic, remote). */
static struct kd_peer *mirror_of(const struct kd_vi *vi, unsigned nic,
                                 const struct via_ctl_conn_request *q)
{
    for (struct kd_peer *p = kd.peers; p; p = p->next)
        if (p->state == KD_PEER_PENDING && !p->remote_host && p->vi != vi &&
            p->vi->nic->index == nic &&
            p->remote_nic == vi->nic->index && p->local_dlen == q->remote.discrim_len &&
            p->remote_dlen == q->local.discrim_len &&
            memcmp(p->local_discrim, q->remote.discrim, p->local_dlen) == 0 &&
            memcmp(p->remote_discrim, q->local.discrim, p->remote_dlen) == 0)
            return p;
    return NULL;
}

static void fill_done(struct kd_peer *p, const struct kd_vi *other, uint32_t side,
                      uint32_t conn_id)
{
    p->done = (struct via_ctl_conn_done_r){
        .conn_id = conn_id, .side = side, .peer_vi = other->id, .remote_attr = other->attr};
}

/* Connect the pending request m (side 0) with the new request p (side 1). */
static bool connect_pair(struct kd_peer *m, struct kd_peer *p, struct kd_reply *r)
{
    /* Each side is handed the other's event page: copies taken first, so
     * nothing can fail once the channel exists. */
    int ev_of_p = fcntl(p->vi->sess->evfd, F_DUPFD_CLOEXEC, 3);
    int ev_of_m = fcntl(m->vi->sess->evfd, F_DUPFD_CLOEXEC, 3);
    struct kd_conn *cn = NULL;
    if (ev_of_p < 0 || ev_of_m < 0)
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of file descriptors: %s", strerror(errno));
    else
        cn = kd_conn_link(m->vi, p->vi, r);
    if (!cn) {
        if (ev_of_p >= 0)
            close(ev_of_p);
        if (ev_of_m >= 0)
            close(ev_of_m);
        return false;
    }
    cn->chan_untold = 2;
    m->peer_ev_fd = ev_of_p;
    p->peer_ev_fd = ev_of_m;
    m->peer_pidfd = kd_conn_pidfd(p->vi->sess);
    p->peer_pidfd = kd_conn_pidfd(m->vi->sess);
    fill_done(m, p->vi, 0, cn->id);
    fill_done(p, m->vi, 1, cn->id);
    peer_set_state(m, KD_PEER_CONNECTED);
    peer_set_state(p, KD_PEER_CONNECTED);
    return true;
}

/* ---- new requests, PEER_DONE / PEER_WAIT ------------------------------------------ */

bool kd_peer_request(struct kd_vi *vi, int nic, struct kd_host *h,
                     const struct via_ctl_conn_request *q, struct kd_reply *r)
{
    const uint8_t *hb = q->remote.host;
    struct kd_peer *m = h ? NULL : mirror_of(vi, (unsigned)nic, q);
    if (m && m->vi->attr.reliability != vi->attr.reliability) {
        kd_fail(r, VIP_INVALID_RELIABILITY_LEVEL,
                "reliability levels differ: this VI %u, the peer's %u (its request stays "
                "pending)",
                vi->attr.reliability, m->vi->attr.reliability);
        return false;
    }
    kd_peer_vi_gone(vi, NULL); /* an outcome nobody asked for goes */
    struct kd_peer *p = calloc(1, sizeof *p);
    if (!p) {
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory");
        return false;
    }
    p->vi = vi;
    p->state = KD_PEER_PENDING;
    p->peer_ev_fd = -1;
    p->peer_pidfd = -1;
    p->remote_host = h;
    p->remote_nic = h ? (unsigned)hb[4] << 8 | hb[5] : (unsigned)nic;
    p->local_dlen = q->local.discrim_len;
    memcpy(p->local_discrim, q->local.discrim, p->local_dlen);
    p->remote_dlen = q->remote.discrim_len;
    memcpy(p->remote_discrim, q->remote.discrim, p->remote_dlen);
    p->deadline_ns = kd_deadline_of(q->timeout_ms);
    if (m && !connect_pair(m, p, r)) {
        free(p);
        return false;
    }
    struct kd_peer **pp = &kd.peers; /* FIFO: the oldest request is matched first */
    while (*pp)
        pp = &(*pp)->next;
    *pp = p;
    vi->peer = p;
    if (h) {
        kd_vi_set_state(vi, VIA_VI_PENDING);
        return true;
    }
    if (m) {
        kd_debug("session %u: VI %u meets VI %u of pid %d (connection %u)", vi->sess->id,
                 vi->id, m->vi->id, (int)m->vi->sess->pid, vi->conn->id);
        decided(m);
    } else {
        kd_vi_set_state(vi, VIA_VI_PENDING);
        kd_debug("session %u: VI %u requests a peer connection with via%d", vi->sess->id,
                 vi->id, nic);
    }
    return true;
}

void kd_peer_retract(struct kd_vi *vi)
{
    peer_free(vi->peer);
    if (vi->state == VIA_VI_PENDING)
        kd_vi_set_state(vi, VIA_VI_IDLE);
}

/* The request of a PEER_DONE / PEER_WAIT, or NULL with r failed. */
static struct kd_peer *peer_arg(struct kd_client *c, const void *body, struct kd_reply *r)
{
    const struct via_ctl_vi *q = body;
    struct kd_vi *vi = kd_vi_arg(c->sess, q->vi_id, r);
    if (vi && !vi->peer)
        kd_fail(r, VIP_INVALID_STATE,
                "VI %u has no peer connection request (VipConnectPeerRequest first)", vi->id);
    return vi ? vi->peer : NULL;
}

/* Tell the outcome in the reply r itself (sent after the handler). */
static void tell_in(struct kd_peer *p, struct kd_reply *r)
{
    if (p->state == KD_PEER_FAILED) {
        kd_fail(r, p->status, "%s", p->msg);
        peer_free(p);
        return;
    }
    if (!channel_of(p)) {
        kd_fail(r, VIP_INVALID_STATE, "the connection has gone");
        peer_free(p);
        return;
    }
    /* The reply gets its own copy of the channel's fd (closed once sent):
     * peer_free may close the conn's before the reply goes out. */
    int chan = fcntl(p->vi->conn->chan_fd, F_DUPFD_CLOEXEC, 3);
    struct via_ctl_conn_done_r *a = chan >= 0 ? kd_body(r, sizeof *a) : NULL;
    if (!a) { /* told nothing: the outcome stays for the next call */
        if (chan < 0)
            kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of file descriptors: %s",
                    strerror(errno));
        else
            close(chan);
        return;
    }
    *a = p->done;
    kd_add_fd(r, chan, true);
    kd_add_fd(r, p->peer_ev_fd, true);
    p->peer_ev_fd = -1;
    if (p->peer_pidfd >= 0)
        kd_add_fd(r, p->peer_pidfd, true);
    p->peer_pidfd = -1;
    peer_free(p);
}

void kd_op_peer_done(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    struct kd_peer *p = peer_arg(c, body, r);
    if (!p)
        return;
    if (p->state == KD_PEER_PENDING) {
        kd_fail(r, VIP_NOT_DONE, "the peer has not made the mirror request yet");
        return;
    }
    tell_in(p, r);
}

void kd_op_peer_wait(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    struct kd_peer *p = peer_arg(c, body, r);
    if (!p)
        return;
    if (p->state != KD_PEER_PENDING) {
        tell_in(p, r);
        return;
    }
    if (p->waiter && !p->waiter->dead) {
        kd_fail(r, VIP_INVALID_STATE, "another thread already waits for VI %u's peer connection",
                p->vi->id);
        return;
    }
    p->waiter = c;
    p->waiter_cookie = cookie;
    r->deferred = true;
}

/* ---- cancellation, clients, timers ------------------------------------------------ */

void kd_peer_vi_gone(struct kd_vi *vi, const char *why)
{
    struct kd_peer *p = vi->peer;
    if (!p)
        return;
    if (p->waiter && !p->waiter->dead)
        kd_send_status(p->waiter, p->waiter_cookie, VIP_INVALID_STATE, "%s",
                       why ? why : "the request was replaced");
    if (p->state == KD_PEER_PENDING && vi->state == VIA_VI_PENDING)
        kd_vi_set_state(vi, VIA_VI_IDLE);
    kd_debug("peer request of VI %u on via%u (%s) dropped: %s", vi->id, vi->nic->index,
             peer_state_name[p->state], why ? why : "replaced");
    peer_free(p);
}

void kd_peer_client_gone(struct kd_client *c)
{
    for (struct kd_peer *p = kd.peers; p; p = p->next)
        if (p->waiter == c)
            p->waiter = NULL;
}

uint64_t kd_peer_next_deadline(void)
{
    uint64_t d = 0;
    for (struct kd_peer *p = kd.peers; p; p = p->next)
        if (p->state == KD_PEER_PENDING && p->deadline_ns && (!d || p->deadline_ns < d))
            d = p->deadline_ns;
    return d;
}

void kd_peer_expire(uint64_t now)
{
    for (struct kd_peer *p = kd.peers, *n; p; p = n) {
        n = p->next;
        if (p->state != KD_PEER_PENDING || !p->deadline_ns || p->deadline_ns > now)
            continue;
        struct kd_conn *cn = p->vi->conn;
        if (cn && cn->peer && cn->state == KD_CONN_MATCHED)
            kd_conn_request_end(cn, KD_CONN_REJECTED, -1, NULL); /* withdrawn there too */
        kd_vi_set_state(p->vi, VIA_VI_IDLE);
        p->status = VIP_TIMEOUT;
        snprintf(p->msg, sizeof p->msg,
                 "no peer made the mirror request before the timeout");
        peer_set_state(p, KD_PEER_FAILED);
        decided(p); /* may free p */
    }
}

/* ---- across hosts (kd_remote.c) ---------------------------------------------------- */

struct kd_vi *kd_peer_mirror_remote(const struct kd_host *h, const struct via_host_conn_req *q)
{
    for (struct kd_peer *p = kd.peers; p; p = p->next)
        if (p->state == KD_PEER_PENDING && p->remote_host == h &&
            p->vi->nic->index == q->dst_nic && p->remote_nic == q->src_nic &&
            p->local_dlen == q->dlen && p->remote_dlen == q->req_dlen &&
            memcmp(p->local_discrim, q->discrim, p->local_dlen) == 0 &&
            memcmp(p->remote_discrim, q->req_discrim, p->remote_dlen) == 0)
            return p->vi;
    return NULL;
}

void kd_peer_connected(struct kd_vi *vi, struct kd_conn *cn, uint32_t side, uint32_t peer_vi,
                       const struct via_vi_attr *attr, int sock)
{
    struct kd_peer *p = vi->peer;
    cn->chan_untold = 1;
    p->peer_ev_fd = sock;
    p->done = (struct via_ctl_conn_done_r){
        .conn_id = cn->id, .side = side, .peer_vi = peer_vi, .remote_attr = *attr};
    peer_set_state(p, KD_PEER_CONNECTED);
    decided(p);
}

void kd_peer_failed(struct kd_vi *vi, int32_t status, const char *msg)
{
    struct kd_peer *p = vi->peer;
    if (!p || p->state != KD_PEER_PENDING)
        return;
    if (vi->state == VIA_VI_PENDING)
        kd_vi_set_state(vi, VIA_VI_IDLE);
    p->status = status;
    snprintf(p->msg, sizeof p->msg, "%s", msg);
    peer_set_state(p, KD_PEER_FAILED);
    decided(p);
}

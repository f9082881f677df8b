/*
 * kd_connect.c - connection management as the clients see it: the
 * requests of the client-server model (CONN_WAIT, CONN_REQUEST,
 * CONN_ACCEPT, CONN_REJECT), PEER_REQUEST, DISCONNECT and VI_ERROR; what
 * the end of a VI, a client or a session does to its connections; the
 * connections' timers.
 *
 * Client-server model (VIA 1.0): a CONN_WAIT is a listener on its NIC and
 * discriminator. A CONN_REQUEST is matched at once with the oldest
 * listener for its target, or answered VIP_NO_MATCH (programs retry, as
 * VIA programs do); a matched request becomes a kd_conn in state MATCHED
 * and the listener is answered; the acceptor's CONN_ACCEPT creates the
 * channel (ACCEPTED) and answers both sides, CONN_REJECT or the
 * requester's timeout ends it (REJECTED, TIMED_OUT). After ACCEPTED the
 * conn lives on as long as either VI still refers to the channel.
 * Peer-to-peer requests (kd_peer.c) end in the same ACCEPTED conns.
 *
 * Both waits are deferred replies: the client blocks on its ATTACH socket
 * while the loop serves everybody else.
 *
 * This is the top of the connection files: it calls the books (kd_conn.c),
 * the peer-to-peer model (kd_peer.c) and the connections with other hosts
 * (kd_remote.c); the session dispatcher and the event loop call it, and
 * the VIs reach it only through the function it hands them at start-up
 * (kd_connect_init).
 */
#include "kd.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "via_spec.h"

static bool discrim_ok(const struct via_net_addr *a, const char *which, struct kd_reply *r)
{
    if (a->discrim_len > VIA_MAX_DISCRIM) {
        kd_fail(r, VIP_INVALID_PARAMETER, "%s discriminator is %u bytes; the NIC takes up to %u",
                which, a->discrim_len, VIA_MAX_DISCRIM);
        return false;
    }
    return true;
}

/* The host of the hosts file whose NICs the address a names, or NULL. */
static struct kd_host *host_of(const struct via_net_addr *a)
{
    const uint8_t *h = a->host;
    return kd_host_by_id((uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 |
                         h[3]);
}

/* The NIC of this vipd a target address names: its index; -1 (r failed,
 * VIP_INVALID_PARAMETER) for a NIC this host does not have; KD_FOREIGN (r
 * untouched) for another host's NIC, which the caller reports as
 * VIP_NOT_REACHABLE once the checks that come first have passed. */
#define KD_FOREIGN (-2)
static int target(const struct via_net_addr *a, struct kd_reply *r)
{
    const uint8_t *h = a->host;
    uint32_t host = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    unsigned nic = (unsigned)h[4] << 8 | h[5];
    if (host != kd.host_id)
        return KD_FOREIGN;
    if (nic >= kd.nnics) {
        kd_fail(r, VIP_INVALID_PARAMETER, "no such NIC via%u on this host (%u NICs)", nic,
                kd.nnics);
        return -1;
    }
    return (int)nic;
}

/* The checks a client-server and a peer-to-peer request share, in the
 * specification's order (parameters, state, reachability): the VI, and in
 * *nic the target NIC (KD_FOREIGN: another host's); NULL with r failed. */
static struct kd_vi *request_check(struct kd_session *s, const struct via_ctl_conn_request *q,
                                   const char *what, int *nic, struct kd_reply *r)
{
    struct kd_vi *vi = kd_vi_arg(s, q->vi_id, r);
    if (!vi)
        return NULL;
    if (!discrim_ok(&q->local, "local", r) || !discrim_ok(&q->remote, "remote", r))
        return NULL;
    if (q->timeout_ms == 0) {
        kd_fail(r, VIP_INVALID_PARAMETER, "a %s's timeout must not be 0", what);
        return NULL;
    }
    *nic = target(&q->remote, r);
    if (*nic == -1)
        return NULL;
    if (vi->state != VIA_VI_IDLE) {
        kd_fail(r, VIP_INVALID_STATE, "VI %u is %s: only an IDLE VI can connect", vi->id,
                kd_vi_state_name(vi->state));
        return NULL;
    }
    if (*nic == KD_FOREIGN && !host_of(&q->remote)) {
        kd_fail(r, VIP_NOT_REACHABLE,
                "host %02x%02x%02x%02x is not this vipd (%08x) and not a host of the hosts "
                "file (vipd --hosts)",
                q->remote.host[0], q->remote.host[1], q->remote.host[2], q->remote.host[3],
                kd.host_id);
        return NULL;
    }
    return vi;
}

/* ---- CONN_WAIT / CONN_REQUEST / PEER_REQUEST ------------------------------------- */

void kd_op_conn_wait(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    const struct via_ctl_conn_wait *q = body;
    struct kd_session *s = c->sess;
    if (!discrim_ok(&q->local, "local", r))
        return;
    uint16_t dlen = q->local.discrim_len;
    if (q->timeout_ms == 0) {
        kd_fail(r, VIP_TIMEOUT, "no connection request is pending for this discriminator");
        return;
    }
    if (!kd_listener_add(c, cookie, kd_deadline_of(q->timeout_ms), &q->local)) {
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory");
        return;
    }
    r->deferred = true;
    kd_debug("session %u: listening on via%u (discriminator %u bytes)", s->id, s->nic->index,
             dlen);
}

/*
 * Checks in the order of the specification's return codes: arguments
 * (VIP_INVALID_PARAMETER), the VI's state (VIP_INVALID_STATE), the target
 * (VIP_NOT_REACHABLE, VIP_NO_MATCH). Only a request some wait takes waits
 * (for the acceptor's answer, up to its timeout).
 */
void kd_op_conn_request(struct kd_client *c, uint64_t cookie, const void *body,
                        struct kd_reply *r)
{
    const struct via_ctl_conn_request *q = body;
    int nic;
    struct kd_vi *vi = request_check(c->sess, q, "connection request", &nic, r);
    if (!vi)
        return;
    if (nic == KD_FOREIGN) {
        kd_peer_vi_gone(vi, NULL);
        kd_remote_request(c, cookie, vi, host_of(&q->remote), q, r);
        return;
    }
    struct kd_listener *l = kd_listener_for((unsigned)nic, &q->remote);
    if (!l) {
        kd_fail(r, VIP_NO_MATCH, "nobody waits for connections on via%d with this "
                                 "discriminator (VipConnectWait); try again", nic);
        return;
    }
    kd_peer_vi_gone(vi, NULL); /* an outcome nobody asked for goes */
    struct kd_conn *cn = kd_conn_new(r);
    if (!cn)
        return;
    cn->req_sess = c->sess;
    cn->req_vi = vi;
    cn->req_client = c;
    cn->req_cookie = cookie;
    cn->deadline_ns = kd_deadline_of(q->timeout_ms);
    cn->dst_nic = (unsigned)nic;
    cn->dlen = q->remote.discrim_len;
    memcpy(cn->discrim, q->remote.discrim, cn->dlen);
    cn->req_dlen = q->local.discrim_len;
    memcpy(cn->req_discrim, q->local.discrim, cn->req_dlen);
    /* A listener whose process has just gone cannot take it: the next may. */
    while (l && !kd_listener_offer(l, cn))
        l = kd_listener_for((unsigned)nic, &q->remote);
    if (!l) {
        cn->req_client = NULL;
        kd_conn_free(cn);
        kd_fail(r, VIP_NO_MATCH, "the VipConnectWait on via%d has gone; try again", nic);
        return;
    }
    vi->conn = cn;
    vi->side = 0;
    kd_vi_set_state(vi, VIA_VI_PENDING);
    r->deferred = true;
    kd_debug("session %u: VI %u requests a connection to via%d (connection %u)", c->sess->id, vi->id,
             nic, cn->id);
}

/* Checked as a client-server request is; matched on this host by
 * kd_peer.c, with another host by kd_remote.c (kd_peer.c keeps it pending
 * meanwhile). */
void kd_op_peer_request(struct kd_client *c, uint64_t cookie, const void *body,
                        struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_conn_request *q = body;
    int nic;
    struct kd_vi *vi = request_check(c->sess, q, "peer connection request", &nic, r);
    if (!vi)
        return;
    struct kd_host *h = nic == KD_FOREIGN ? host_of(&q->remote) : NULL;
    if (kd_peer_request(vi, nic, h, q, r) && h && !kd_remote_peer_request(vi, h, q, r))
        kd_peer_retract(vi);
}

/* ---- CONN_ACCEPT / CONN_REJECT --------------------------------------------------- */

void kd_op_conn_accept(struct kd_client *c, uint64_t cookie, const void *body,
                       struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_conn_accept *q = body;
    struct kd_session *s = c->sess;
    struct kd_conn *cn = kd_conn_offered(s, q->conn_id, r);
    if (!cn)
        return;
    struct kd_vi *vi = kd_vi_arg(s, q->vi_id, r);
    if (!vi)
        return;
    if (vi->state != VIA_VI_IDLE) {
        kd_fail(r, VIP_INVALID_STATE, "VI %u is %s: only an IDLE VI can accept", vi->id,
                kd_vi_state_name(vi->state));
        return;
    }
    if (cn->remote_req) {
        kd_remote_accept(cn, vi, r);
        return;
    }
    struct kd_vi *rv = cn->req_vi;
    if (vi->attr.reliability != rv->attr.reliability) {
        kd_fail(r, VIP_INVALID_RELIABILITY_LEVEL,
                "reliability levels differ: this VI %u, the requester's %u", vi->attr.reliability,
                rv->attr.reliability);
        return;
    }
    int fd;
    if (!kd_conn_establish(cn, rv, vi, &fd, r))
        return;
    struct via_ctl_conn_done_r d = {
        .conn_id = cn->id, .side = 0, .peer_vi = vi->id, .remote_attr = vi->attr};
    int fds[3] = {fd, s->evfd, kd_conn_pidfd(s)};
    kd_send_reply(cn->req_client, cn->req_cookie, VIP_SUCCESS, NULL, &d, sizeof d, fds,
                  fds[2] >= 0 ? 3 : 2);
    if (fds[2] >= 0)
        close(fds[2]);
    cn->req_client = NULL;

    struct via_ctl_conn_done_r *a = kd_body(r, sizeof *a);
    if (a) {
        a->conn_id = cn->id;
        a->side = 1;
        a->peer_vi = rv->id;
        a->remote_attr = rv->attr;
    }
    kd_add_fd(r, fd, true);
    kd_add_fd(r, cn->req_sess->evfd, false);
    int pidfd = kd_conn_pidfd(cn->req_sess);
    if (pidfd >= 0)
        kd_add_fd(r, pidfd, true);
    kd_info("connection %u: via%u VI %u (pid %d) <-> via%u VI %u (pid %d)", cn->id,
            rv->nic->index, rv->id, (int)rv->sess->pid, vi->nic->index, vi->id, (int)s->pid);
}

void kd_op_conn_reject(struct kd_client *c, uint64_t cookie, const void *body,
                       struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_conn_reject *q = body;
    struct kd_conn *cn = kd_conn_offered(c->sess, q->conn_id, r);
    if (!cn)
        return;
    char msg[112];
    snprintf(msg, sizeof msg, "connection rejected by the remote side (pid %d)",
             (int)c->sess->pid);
    kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_REJECT, msg);
}

/* ---- DISCONNECT / VI_ERROR / the ends -------------------------------------------- */

/* Both ends' wake words of a channel (via_chan_dir.rx_wake): the VI waits
 * of each side sleep there, not on the event page. */
static void wake_channel(struct via_chan *ch)
{
    for (int d = 0; d < 2; d++) {
        atomic_fetch_add(&ch->dir[d].rx_wake, 1);
        if (atomic_load(&ch->dir[d].rx_sleepers) != 0)
            syscall(SYS_futex, &ch->dir[d].rx_wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
}

/* Take vi off its channel; the conn goes when neither side refers to it. */
static void detach(struct kd_vi *vi)
{
    struct kd_conn *cn = vi->conn;
    vi->conn = NULL;
    if (!cn)
        return;
    if (cn->vi[vi->side] == vi)
        cn->vi[vi->side] = NULL;
    if (!cn->vi[0] && !cn->vi[1])
        kd_conn_free(cn);
}

/* Mark the channel closed/broken (never downgrading BROKEN to CLOSED), put
 * the peer VI in ERROR and wake it. */
static void end_channel(struct kd_vi *vi, uint32_t chan_state)
{
    struct kd_conn *cn = vi->conn;
    if (cn->host)
        kd_remote_end(cn, vi->side, chan_state == VIA_CHAN_BROKEN);
    if (chan_state == VIA_CHAN_BROKEN) {
        atomic_store_explicit(&cn->chan->state, VIA_CHAN_BROKEN, memory_order_release);
    } else {
        uint32_t open = VIA_CHAN_OPEN;
        atomic_compare_exchange_strong(&cn->chan->state, &open, chan_state);
    }
    wake_channel(cn->chan);
    struct kd_vi *peer = cn->vi[1 - vi->side];
    if (peer && peer->state != VIA_VI_ERROR) {
        kd_vi_set_state(peer, VIA_VI_ERROR);
        kd_notify(peer->sess, peer->id);
        kd_debug("connection %u: peer VI %u on via%u (pid %d) -> ERROR", cn->id, peer->id,
                 peer->nic->index, (int)peer->sess->pid);
    }
}

void kd_op_disconnect(struct kd_client *c, uint64_t cookie, const void *body,
                      struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_vi *q = body;
    struct kd_vi *vi = kd_vi_arg(c->sess, q->vi_id, r);
    if (!vi)
        return;
    kd_peer_vi_gone(vi, "VipDisconnect cancelled the peer connection request");
    struct kd_conn *cn = vi->conn;
    if (cn && cn->state != KD_CONN_ACCEPTED) {
        kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_REJECT,
                    "the VI disconnected while its connection request was pending");
    } else if (cn) {
        end_channel(vi, VIA_CHAN_CLOSED);
        detach(vi);
    }
    kd_vi_set_state(vi, VIA_VI_IDLE);
}

void kd_op_vi_error(struct kd_client *c, uint64_t cookie, const void *body,
                    struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_vi_error *q = body;
    struct kd_vi *vi = kd_vi_arg(c->sess, q->vi_id, r);
    if (!vi)
        return;
    if (vi->state == VIA_VI_ERROR)
        return; /* already broken (e.g. the peer went first) */
    if (vi->state != VIA_VI_CONNECTED || !vi->conn) {
        kd_fail(r, VIP_INVALID_STATE, "VI %u is %s: only a connected VI can fail", vi->id,
                kd_vi_state_name(vi->state));
        return;
    }
    end_channel(vi, VIA_CHAN_BROKEN);
    kd_vi_set_state(vi, VIA_VI_ERROR);
    kd_info("connection %u broken by VI %u on via%u (pid %d): error code %u", vi->conn->id,
            vi->id, vi->nic->index, (int)vi->sess->pid, q->code);
}

/* A VI is being freed (kd_vi.c calls this through kd_vi_on_gone): cancel
 * its request, or close (died: break) its connection and tell the peer. */
static void vi_gone(struct kd_vi *vi, bool died)
{
    kd_peer_vi_gone(vi, "the VI was destroyed while its peer connection request was pending");
    struct kd_conn *cn = vi->conn;
    if (!cn)
        return;
    if (cn->state != KD_CONN_ACCEPTED) {
        kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_REJECT,
                    "the VI was destroyed while its connection request was pending");
        return;
    }
    end_channel(vi, died ? VIA_CHAN_BROKEN : VIA_CHAN_CLOSED);
    detach(vi);
}

void kd_conn_client_gone(struct kd_client *c)
{
    kd_peer_client_gone(c);
    for (struct kd_listener *l = kd.listeners, *n; l; l = n) {
        n = l->next;
        if (l->client == c)
            kd_listener_free(l);
    }
    for (struct kd_conn *cn = kd.conns, *n; cn; cn = n) {
        n = cn->next;
        if (cn->req_client == c && cn->state != KD_CONN_ACCEPTED)
            kd_conn_request_end(cn, KD_CONN_REJECTED, -1, NULL);
    }
}

void kd_conn_session_gone(struct kd_session *s)
{
    for (struct kd_listener *l = kd.listeners, *n; l; l = n) {
        n = l->next;
        if (l->sess == s)
            kd_listener_free(l);
    }
    for (struct kd_conn *cn = kd.conns, *n; cn; cn = n) {
        n = cn->next;
        if (cn->state == KD_CONN_ACCEPTED)
            continue; /* the VIs' teardown breaks these */
        if (cn->req_sess == s)
            kd_conn_request_end(cn, KD_CONN_REJECTED, -1, NULL);
        else if (cn->state == KD_CONN_MATCHED && cn->acc_sess == s)
            kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_REJECT, "acceptor exited");
    }
}

/* ---- timers ---------------------------------------------------------------------- */

uint64_t kd_conn_next_deadline(void)
{
    uint64_t d = kd_peer_next_deadline();
    for (struct kd_listener *l = kd.listeners; l; l = l->next)
        if (l->deadline_ns && (!d || l->deadline_ns < d))
            d = l->deadline_ns;
    for (struct kd_conn *cn = kd.conns; cn; cn = cn->next)
        if (cn->state != KD_CONN_ACCEPTED && cn->deadline_ns && (!d || cn->deadline_ns < d))
            d = cn->deadline_ns;
    return d;
}

void kd_conn_expire(uint64_t now)
{
    kd_peer_expire(now);
    for (struct kd_listener *l = kd.listeners, *n; l; l = n) {
        n = l->next;
        if (l->deadline_ns && l->deadline_ns <= now) {
            kd_send_status(l->client, l->cookie, VIP_TIMEOUT,
                           "no connection request arrived before the timeout");
            kd_listener_free(l);
        }
    }
    for (struct kd_conn *cn = kd.conns, *n; cn; cn = n) {
        n = cn->next;
        if (cn->state == KD_CONN_ACCEPTED || !cn->deadline_ns || cn->deadline_ns > now)
            continue;
        if (kd_remote_cancel(cn))
            continue; /* the other host answers: accepted meanwhile, or withdrawn */
        kd_conn_request_end(cn, KD_CONN_TIMED_OUT, VIP_TIMEOUT,
                    "the remote side did not accept or reject before the timeout");
    }
}

void kd_connect_init(void)
{
    kd_vi_on_gone(vi_gone);
}

/*
 * kd_conn.c - connection management: the emulated switch.
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
 */
#include "kd.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "via_spec.h"

const char *const kd_conn_state_name[KD_CONN_NSTATES] = {
    [KD_CONN_MATCHED] = "MATCHED",     [KD_CONN_ACCEPTED] = "ACCEPTED",
    [KD_CONN_REJECTED] = "REJECTED",   [KD_CONN_TIMED_OUT] = "TIMED_OUT",
    [KD_CONN_UNMATCHED] = "UNMATCHED",
};

/* ---- peer notification ---------------------------------------------------------- */

void kd_notify(struct kd_session *s, uint32_t vi_id)
{
    if (!s || vi_id >= VIA_MAX_VI)
        return;
    struct via_event_page *ev = s->ev;
    atomic_fetch_or(&ev->arrived[vi_id / 64], 1ull << (vi_id % 64));
    atomic_fetch_add(&ev->seq, 1);
    /* Shared futex (not PRIVATE): the sleeper is another process. */
    if (atomic_load(&ev->sleepers) != 0)
        syscall(SYS_futex, &ev->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int kd_conn_pidfd(const struct kd_session *s)
{
#ifdef SYS_pidfd_open
    /* Opened here, in vipd's pid namespace, where s->pid (SO_PEERCRED)
     * means that process: the peer could not be told a number to open. */
    return (int)syscall(SYS_pidfd_open, s->pid, 0);
#else
    (void)s;
    return -1;
#endif
}

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

/* ---- bookkeeping --------------------------------------------------------------------- */

static struct kd_conn *conn_find(uint32_t id)
{
    for (struct kd_conn *cn = kd.conns; cn; cn = cn->next)
        if (cn->id == id)
            return cn;
    return NULL;
}

void kd_conn_set_state(struct kd_conn *cn, enum kd_conn_state st)
{
    kd_debug("connection %u: %s -> %s", cn->id, kd_conn_state_name[cn->state],
             kd_conn_state_name[st]);
    cn->state = st;
}

void kd_conn_free(struct kd_conn *cn)
{
    for (struct kd_conn **pp = &kd.conns; *pp; pp = &(*pp)->next)
        if (*pp == cn) {
            *pp = cn->next;
            break;
        }
    kd_shm_unmap(cn->chan, sizeof *cn->chan);
    if (cn->chan_fd >= 0)
        close(cn->chan_fd);
    if (cn->udp_fd >= 0)
        close(cn->udp_fd);
    free(cn);
}

struct kd_conn *kd_conn_new(struct kd_reply *r)
{
    struct kd_conn *cn = calloc(1, sizeof *cn);
    if (!cn) {
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory");
        return NULL;
    }
    do
        cn->id = ++kd.next_conn_id;
    while (cn->id == 0 || conn_find(cn->id));
    cn->state = KD_CONN_UNMATCHED;
    cn->chan_fd = -1;
    cn->udp_fd = -1;
    cn->next = kd.conns;
    kd.conns = cn;
    return cn;
}

static void listener_free(struct kd_listener *l)
{
    for (struct kd_listener **pp = &kd.listeners; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    free(l);
}

static uint64_t deadline_of(uint32_t timeout_ms)
{
    if (timeout_ms == 0xFFFFFFFFu)
        return 0;
    return kd_now_ns() + (uint64_t)timeout_ms * 1000000ull + 1; /* never 0 */
}

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
    *nic = kd_conn_target(&q->remote, r);
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

/*
 * A request that will not become a connection: answer the requester
 * (status < 0: nobody to answer), put its VI back to IDLE, let the other
 * host know (cn->far), forget it.
 */
void kd_conn_request_end(struct kd_conn *cn, enum kd_conn_state st, int32_t status,
                         const char *msg)
{
    enum kd_conn_state was = cn->state;
    kd_conn_set_state(cn, st);
    /* VI state first: the requester may look at it as soon as it has the reply. */
    struct kd_vi *vi = cn->req_vi;
    if (vi && vi->conn == cn) {
        vi->conn = NULL;
        if (vi->state == VIA_VI_PENDING)
            kd_vi_set_state(vi, VIA_VI_IDLE);
    }
    if (status >= 0 && cn->req_client)
        kd_send_status(cn->req_client, cn->req_cookie, status, "%s", msg);
    if (cn->far)
        cn->far(cn, was, status, msg);
    kd_conn_free(cn);
}

static void fill_wait_r(const struct kd_conn *cn, struct via_ctl_conn_wait_r *a)
{
    memset(a, 0, sizeof *a);
    a->conn_id = cn->id;
    if (cn->remote_req) {
        const struct via_host_conn_req *q = &cn->rreq;
        uint32_t id = cn->host->host_id;
        uint8_t *h = a->remote.host;
        h[0] = (uint8_t)(id >> 24), h[1] = (uint8_t)(id >> 16), h[2] = (uint8_t)(id >> 8);
        h[3] = (uint8_t)id, h[4] = (uint8_t)(q->src_nic >> 8), h[5] = (uint8_t)q->src_nic;
        a->remote.discrim_len = q->req_dlen;
        memcpy(a->remote.discrim, q->req_discrim, q->req_dlen);
        a->remote_attr = (struct via_vi_attr){.reliability = q->reliability,
                                              .max_transfer = q->max_transfer,
                                              .rdma_write = q->rdma_write,
                                              .rdma_read = q->rdma_read};
        return;
    }
    kd_nic_addr(cn->req_sess->nic->index, a->remote.host);
    a->remote.discrim_len = cn->req_dlen;
    memcpy(a->remote.discrim, cn->req_discrim, cn->req_dlen);
    a->remote_attr = cn->req_vi->attr;
}

/* Offer cn to listener l (whose reply is deferred) and forget l. false
 * when l's client has gone meanwhile: cn is not offered. */
static bool offer(struct kd_conn *cn, struct kd_listener *l)
{
    struct via_ctl_conn_wait_r a;
    struct kd_client *c = l->client;
    uint64_t cookie = l->cookie;
    struct kd_session *s = l->sess;
    listener_free(l);
    if (c->dead)
        return false;
    fill_wait_r(cn, &a);
    kd_send_reply(c, cookie, VIP_SUCCESS, NULL, &a, sizeof a, NULL, 0);
    if (c->dead)
        return false;
    cn->acc_sess = s;
    kd_conn_set_state(cn, KD_CONN_MATCHED);
    return true;
}

static struct kd_listener *listener_for(unsigned nic, const struct via_net_addr *a);

bool kd_conn_offer(struct kd_conn *cn, unsigned nic, const uint8_t *discrim, uint16_t dlen)
{
    struct via_net_addr a = {.discrim_len = dlen};
    memcpy(a.discrim, discrim, dlen < VIA_MAX_DISCRIM ? dlen : VIA_MAX_DISCRIM);
    for (struct kd_listener *l = listener_for(nic, &a); l; l = listener_for(nic, &a))
        if (offer(cn, l))
            return true;
    return false;
}

/* ---- CONN_WAIT / CONN_REQUEST ------------------------------------------------------- */

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
    struct kd_listener *l = calloc(1, sizeof *l);
    if (!l) {
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory");
        return;
    }
    l->sess = s;
    l->client = c;
    l->cookie = cookie;
    l->deadline_ns = deadline_of(q->timeout_ms);
    l->dlen = dlen;
    memcpy(l->discrim, q->local.discrim, dlen);
    struct kd_listener **pp = &kd.listeners; /* FIFO: first listener served first */
    while (*pp)
        pp = &(*pp)->next;
    *pp = l;
    r->deferred = true;
    kd_debug("session %u: listening on via%u (discriminator %u bytes)", s->id, s->nic->index,
             dlen);
}

int kd_conn_target(const struct via_net_addr *a, struct kd_reply *r)
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

/* The oldest live listener for (nic, discriminator), or NULL. */
static struct kd_listener *listener_for(unsigned nic, const struct via_net_addr *a)
{
    for (struct kd_listener *l = kd.listeners; l; l = l->next)
        if (l->sess->nic->index == nic && l->dlen == a->discrim_len &&
            memcmp(l->discrim, a->discrim, l->dlen) == 0 && !l->client->dead)
            return l;
    return NULL;
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
    struct kd_listener *l = listener_for((unsigned)nic, &q->remote);
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
    cn->deadline_ns = deadline_of(q->timeout_ms);
    cn->dst_nic = (unsigned)nic;
    cn->dlen = q->remote.discrim_len;
    memcpy(cn->discrim, q->remote.discrim, cn->dlen);
    cn->req_dlen = q->local.discrim_len;
    memcpy(cn->req_discrim, q->local.discrim, cn->req_dlen);
    /* A listener whose process has just gone cannot take it: the next may. */
    while (l && !offer(cn, l))
        l = listener_for((unsigned)nic, &q->remote);
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

/* ---- CONN_ACCEPT / CONN_REJECT ----------------------------------------------------------- */

/* The channel between VIs a (side 0) and b (side 1): both CONNECTED. */
struct via_chan *kd_conn_chan_new(struct kd_conn *cn, int *fd, struct kd_reply *r)
{
    struct via_chan *ch = kd_shm_create("via-chan", sizeof *ch, 0, fd);
    if (!ch) {
        kd_fail(r, VIP_ERROR_RESOURCE, "cannot create the channel: %s", strerror(errno));
        return NULL;
    }
    ch->magic = VIA_CHAN_MAGIC;
    ch->conn_id = cn->host ? cn->wire_id : cn->id;
    ch->link = cn->host ? kd.link : VIA_LINK_SHM;
    if (cn->host)
        ch->faults = kd.faults;
    return ch;
}

static bool establish(struct kd_conn *cn, struct kd_vi *a, struct kd_vi *b, int *fd,
                      struct kd_reply *r)
{
    struct via_chan *ch = kd_conn_chan_new(cn, fd, r);
    if (!ch)
        return false;
    ch->reliability = b->attr.reliability;
    ch->vi_id[0] = a->id;
    ch->vi_id[1] = b->id;
    ch->nic[0] = (uint16_t)a->nic->index;
    ch->nic[1] = (uint16_t)b->nic->index;
    atomic_store_explicit(&ch->state, VIA_CHAN_OPEN, memory_order_release);

    cn->chan = ch;
    cn->vi[0] = a;
    cn->vi[1] = b;
    a->conn = cn;
    a->side = 0;
    b->conn = cn;
    b->side = 1;
    kd_vi_set_state(a, VIA_VI_CONNECTED);
    kd_vi_set_state(b, VIA_VI_CONNECTED);
    kd_conn_set_state(cn, KD_CONN_ACCEPTED);
    return true;
}

struct kd_conn *kd_conn_link(struct kd_vi *a, struct kd_vi *b, struct kd_reply *r)
{
    struct kd_conn *cn = kd_conn_new(r);
    if (!cn)
        return NULL;
    if (!establish(cn, a, b, &cn->chan_fd, r)) {
        kd_conn_free(cn);
        return NULL;
    }
    kd_info("connection %u (peer-to-peer): via%u VI %u (pid %d) <-> via%u VI %u (pid %d)",
            cn->id, a->nic->index, a->id, (int)a->sess->pid, b->nic->index, b->id,
            (int)b->sess->pid);
    return cn;
}

/* The request conn_id offered to session s, or NULL with r failed. */
static struct kd_conn *offered(struct kd_session *s, uint32_t conn_id, struct kd_reply *r)
{
    struct kd_conn *cn = conn_find(conn_id);
    if (!cn || cn->state != KD_CONN_MATCHED || cn->acc_sess != s) {
        kd_fail(r, VIP_INVALID_PARAMETER,
                "no connection request %u awaits this NIC handle's answer (timed out or "
                "withdrawn?)",
                conn_id);
        return NULL;
    }
    return cn;
}

void kd_op_conn_accept(struct kd_client *c, uint64_t cookie, const void *body,
                       struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_conn_accept *q = body;
    struct kd_session *s = c->sess;
    struct kd_conn *cn = offered(s, q->conn_id, r);
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
    if (!establish(cn, rv, vi, &fd, r))
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
    struct kd_conn *cn = offered(c->sess, q->conn_id, r);
    if (!cn)
        return;
    char msg[112];
    snprintf(msg, sizeof msg, "connection rejected by the remote side (pid %d)",
             (int)c->sess->pid);
    kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_REJECT, msg);
}

/* ---- DISCONNECT / VI_ERROR / teardown ---------------------------------------------------- */

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

void kd_conn_vi_gone(struct kd_vi *vi, bool died)
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
            listener_free(l);
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
            listener_free(l);
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

/* ---- timers -------------------------------------------------------------------------------- */

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
            listener_free(l);
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

/* An end of cn on nic that c may see. */
static bool end_seen(const struct kd_vi *vi, unsigned nic, const struct kd_client *c)
{
    return vi && vi->nic->index == nic && kd_user_sees(c, vi->sess->uid);
}

unsigned kd_conn_count(unsigned nic, const struct kd_client *c)
{
    unsigned n = 0;
    for (struct kd_conn *cn = kd.conns; cn; cn = cn->next) {
        if (cn->state != KD_CONN_ACCEPTED)
            continue;
        if (end_seen(cn->vi[0], nic, c) || end_seen(cn->vi[1], nic, c))
            n++;
    }
    return n;
}

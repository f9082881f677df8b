/*
 * kd_remote.c - connections whose two VIs are on different hosts.
 *
 * The client-server exchange of kd_connect.c, stretched over two vipds
 * (kd_host.c carries the messages):
 *
 *   requester's vipd A                      acceptor's vipd B
 *   CONN_REQUEST for a NIC of B:
 *     conn MATCHED, UDP socket uA    --CONN_REQ(uA)-->  a wait for it? offer
 *                                    <--CONN_REJ-----   none (VIP_NO_MATCH)
 *                                                       CONN_ACCEPT: channel,
 *     channel, uA -> uB, reply       <--CONN_ACC(uB)--  socket uB -> uA, reply
 *
 * The requester's timeout is a question, not a verdict: the acceptor may
 * be accepting as it fires, and a requester that gave up while the
 * acceptor's VipConnectAccept succeeded would leave a connection up on
 * one side only (broken at once). So the requester's vipd asks
 * (CONN_CANCEL) and the acceptor's answers in order on its connection:
 *
 *     timeout: CONN_CANCEL   --CONN_CANCEL-->    still offered: withdrawn
 *     VIP_TIMEOUT            <--CONN_REJ-----    (a later accept fails)
 *     or connected           <--CONN_ACC-----    accepted already
 *
 * Each side's channel is its own (a shared-memory object of its vipd,
 * link VIA_LINK_UDP) and holds the connection's state for its VI; the
 * UDP socket goes to the process with it, and from then on the two NICs
 * talk directly. A disconnect, a VI's error or death, is told to the
 * other vipd (CONN_END), which breaks its side as kd_connect.c does for a
 * peer on this host; a host that goes away breaks every connection to it.
 * Both channels carry the requester vipd's conn id (wire_id).
 */
#include "kd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "via_spec.h"

/* A UDP socket on the listen address, any port: its fd and *port. */
static int udp_socket(uint16_t *port, struct kd_reply *r)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        kd_fail(r, VIP_ERROR_RESOURCE, "cannot make the link's UDP socket: %s", strerror(errno));
        return -1;
    }
    /* Room for a window of full frames each way (fw_rtx.c). */
    int sz = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = kd.listen_ip};
    socklen_t sl = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
        kd_fail(r, VIP_ERROR_RESOURCE, "cannot bind the link's UDP socket: %s", strerror(errno));
        close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static bool udp_connect(int fd, uint32_t ip, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = ip};
    return connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
}

/* A link address another host names must be that host's own (the
 * hosts file's): an authenticated host still cannot point our socket at
 * a third party. */
static bool addr_of_host(const struct kd_host *h, uint32_t ip)
{
    if (h->ip == INADDR_ANY || ip == h->ip)
        return true;
    kd_warn("host %s named a link address that is not its own: refused", h->name);
    return false;
}

static struct kd_conn *conn_of(const struct kd_host *h, uint32_t wire_id, bool requester)
{
    for (struct kd_conn *cn = kd.conns; cn; cn = cn->next)
        if (cn->host == h && cn->wire_id == wire_id && cn->remote_req != requester)
            return cn;
    return NULL;
}

/* Every connection with another host carries this (cn->far): what the
 * other host must hear when its request ends here (below). */
static kd_conn_far_fn far_end;

/* ---- the requester's side ------------------------------------------------------------ */

/* Send vi's request (q) to host h: the conn (MATCHED, vi's), or NULL with r failed. */
static struct kd_conn *send_request(struct kd_vi *vi, struct kd_host *h,
                                    const struct via_ctl_conn_request *q, bool peer,
                                    struct kd_reply *r)
{
    struct kd_conn *cn = kd_conn_new(r);
    if (!cn)
        return NULL;
    uint16_t port;
    cn->udp_fd = udp_socket(&port, r);
    if (cn->udp_fd < 0) {
        kd_conn_free(cn);
        return NULL;
    }
    cn->host = h;
    cn->far = far_end;
    cn->wire_id = cn->id;
    cn->req_sess = vi->sess;
    cn->req_vi = vi;
    cn->peer = peer;
    cn->dst_nic = (unsigned)q->remote.host[4] << 8 | q->remote.host[5];
    struct via_host_conn_req m = {
        .req_id = cn->id, .req_vi = vi->id, .dst_nic = (uint16_t)cn->dst_nic,
        .src_nic = (uint16_t)vi->nic->index, .udp_ip = kd.listen_ip, .udp_port = port,
        .dlen = (uint8_t)q->remote.discrim_len, .req_dlen = (uint8_t)q->local.discrim_len,
        .peer = peer, .reliability = vi->attr.reliability,
        .max_transfer = vi->attr.max_transfer, .rdma_write = vi->attr.rdma_write,
        .rdma_read = vi->attr.rdma_read};
    memcpy(m.discrim, q->remote.discrim, q->remote.discrim_len);
    memcpy(m.req_discrim, q->local.discrim, q->local.discrim_len);
    kd_auth_random(cn->salt, sizeof cn->salt);
    memcpy(m.salt, cn->salt, sizeof m.salt);
    m.frame_mac = kd.frame_mac;
    if (!kd_host_send(h, VIA_HOST_CONN_REQ, &m, sizeof m)) {
        kd_conn_free(cn);
        kd_fail(r, VIP_NOT_REACHABLE, "host %s (%08x) does not answer: is its vipd running?",
                h->name, h->host_id);
        return NULL;
    }
    kd_conn_set_state(cn, KD_CONN_MATCHED);
    vi->conn = cn;
    vi->side = 0;
    kd_vi_set_state(vi, VIA_VI_PENDING);
    return cn;
}

void kd_remote_request(struct kd_client *c, uint64_t cookie, struct kd_vi *vi,
                       struct kd_host *h, const struct via_ctl_conn_request *q,
                       struct kd_reply *r)
{
    struct kd_conn *cn = send_request(vi, h, q, false, r);
    if (!cn)
        return;
    cn->req_client = c;
    cn->req_cookie = cookie;
    cn->deadline_ns = kd_deadline_of(q->timeout_ms);
    r->deferred = true;
    kd_debug("session %u: VI %u requests a connection to %s via%u (connection %u)",
             c->sess->id, vi->id, h->name, cn->dst_nic, cn->id);
}

static void on_accept(struct kd_host *h, const void *body)
{
    struct via_host_conn_acc m;
    memcpy(&m, body, sizeof m);
    struct kd_conn *cn = conn_of(h, m.req_id, true);
    if (!cn || cn->state != KD_CONN_MATCHED || (!cn->req_client && !cn->peer)) {
        /* Timed out or withdrawn meanwhile: the acceptor's side breaks. */
        struct via_host_conn_end e = {.conn_id = m.req_id, .broken = 1, .from_requester = 1};
        kd_host_send(h, VIA_HOST_CONN_END, &e, sizeof e);
        return;
    }
    struct kd_reply scratch = {0};
    int chan_fd = -1;
    struct via_chan *ch = NULL;
    if (!addr_of_host(h, m.udp_ip) || !udp_connect(cn->udp_fd, m.udp_ip, m.udp_port) ||
        !(ch = kd_conn_chan_new(cn, &chan_fd, &scratch))) {
        struct via_host_conn_end e = {.conn_id = m.req_id, .broken = 1, .from_requester = 1};
        kd_host_send(h, VIA_HOST_CONN_END, &e, sizeof e);
        kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_ERROR_RESOURCE,
                            "cannot set up the link to the other host");
        return;
    }
    struct kd_vi *vi = cn->req_vi;
    struct via_vi_attr ra = {.reliability = m.reliability, .max_transfer = m.max_transfer,
                             .rdma_write = m.rdma_write, .rdma_read = m.rdma_read};
    ch->reliability = vi->attr.reliability;
    ch->vi_id[0] = vi->id;
    ch->vi_id[1] = m.acc_vi;
    ch->nic[0] = (uint16_t)vi->nic->index;
    ch->nic[1] = m.acc_nic;
    ch->frame_mac = m.frame_mac != 0;
    kd_auth_frame_secret(kd.host_id, h->host_id, m.req_id, cn->salt, m.salt, &ch->frame_token,
                         ch->frame_key);
    atomic_store_explicit(&ch->state, VIA_CHAN_OPEN, memory_order_release);
    cn->chan = ch;
    cn->vi[0] = vi;
    kd_vi_set_state(vi, VIA_VI_CONNECTED);
    kd_conn_set_state(cn, KD_CONN_ACCEPTED);
    kd_info("connection %u: via%u VI %u (pid %d) <-> %s via%u VI %u%s", cn->id, vi->nic->index,
            vi->id, (int)vi->sess->pid, h->name, m.acc_nic, m.acc_vi,
            cn->peer ? " (peer-to-peer)" : "");
    int sock = cn->udp_fd;
    cn->udp_fd = -1;
    if (cn->peer) { /* told by VipConnectPeerDone/Wait, which take both fds */
        cn->chan_fd = chan_fd;
        kd_peer_connected(vi, cn, 0, m.acc_vi, &ra, sock);
        return;
    }
    struct via_ctl_conn_done_r d = {
        .conn_id = cn->id, .side = 0, .peer_vi = m.acc_vi, .remote_attr = ra};
    int fds[2] = {chan_fd, sock};
    kd_send_reply(cn->req_client, cn->req_cookie, VIP_SUCCESS, NULL, &d, sizeof d, fds, 2);
    cn->req_client = NULL;
    close(chan_fd);
    close(sock); /* the process has it now */
}

static void on_reject(struct kd_host *h, const void *body)
{
    struct via_host_conn_rej m;
    memcpy(&m, body, sizeof m);
    struct kd_conn *cn = conn_of(h, m.req_id, true);
    if (!cn || cn->state != KD_CONN_MATCHED)
        return;
    char msg[112];
    if (m.status == VIP_NO_MATCH)
        snprintf(msg, sizeof msg, "nobody on %.24s waits (VipConnectWait) for this "
                                  "discriminator; try again", h->name);
    else
        snprintf(msg, sizeof msg, "%.40s refused the connection (status %d)", h->name,
                 (int)m.status);
    if (cn->cancelling && m.status != VIP_NO_MATCH) { /* withdrawn at our timeout's request */
        kd_conn_request_end(cn, KD_CONN_TIMED_OUT, VIP_TIMEOUT,
                            "the remote side did not accept or reject before the timeout");
        return;
    }
    /* (cancelling, VIP_NO_MATCH: it was never offered, which is what the
     * program should hear, so that it asks again) */
    int32_t st = m.status;
    if (st != VIP_NO_MATCH && st != VIP_REJECT && st != VIP_INVALID_RELIABILITY_LEVEL &&
        st != VIP_INVALID_PARAMETER)
        st = VIP_REJECT; /* another vipd's word, not trusted further */
    kd_conn_request_end(cn, KD_CONN_REJECTED, st, msg);
}

/* cn's timeout fired: a client-server request of ours that another host
 * still holds is withdrawn by asking (CONN_CANCEL); its answer ends cn,
 * or, if none comes, the host timeout does. false: end it now. */
bool kd_remote_cancel(struct kd_conn *cn)
{
    if (!cn->host || cn->remote_req || cn->peer || cn->cancelling ||
        cn->state != KD_CONN_MATCHED || !cn->req_client)
        return false;
    struct via_host_conn_cancel m = {.req_id = cn->wire_id};
    if (!kd_host_send(cn->host, VIA_HOST_CONN_CANCEL, &m, sizeof m))
        return false;
    cn->cancelling = true;
    cn->deadline_ns = kd_now_ns() + kd.host_timeout_ns;
    kd_debug("connection %u: timed out; asking %s to withdraw it", cn->id, cn->host->name);
    return true;
}

/* ---- the acceptor's side ---------------------------------------------------------------- */

static void refuse(struct kd_host *h, uint32_t req_id, int32_t status)
{
    struct via_host_conn_rej m = {.req_id = req_id, .status = status};
    kd_host_send(h, VIA_HOST_CONN_REJ, &m, sizeof m);
}

static void on_cancel(struct kd_host *h, const void *body)
{
    struct via_host_conn_cancel m;
    memcpy(&m, body, sizeof m);
    struct kd_conn *cn = conn_of(h, m.req_id, false);
    if (cn && cn->state == KD_CONN_ACCEPTED)
        return; /* our CONN_ACC went first: the requester is connected */
    if (cn) /* answers CONN_REJ (far_end) */
        kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_TIMEOUT, NULL);
    else
        refuse(h, m.req_id, VIP_TIMEOUT); /* refused or never offered: say so again */
}

static void on_peer_request(struct kd_conn *cn);

static void on_request(struct kd_host *h, const void *body)
{
    struct via_host_conn_req q;
    memcpy(&q, body, sizeof q);
    if (q.dst_nic >= kd.nnics || q.dlen > VIA_MAX_DISCRIM || q.req_dlen > VIA_MAX_DISCRIM ||
        !addr_of_host(h, q.udp_ip)) {
        refuse(h, q.req_id, VIP_INVALID_PARAMETER);
        return;
    }
    if (conn_of(h, q.req_id, false))
        return; /* a request seen before */
    struct kd_reply scratch = {0};
    struct kd_conn *cn = kd_conn_new(&scratch);
    if (!cn) {
        refuse(h, q.req_id, VIP_REJECT);
        return;
    }
    cn->host = h;
    cn->far = far_end;
    cn->wire_id = q.req_id;
    cn->remote_req = true;
    cn->rreq = q;
    cn->dst_nic = q.dst_nic;
    if (q.peer) {
        on_peer_request(cn);
        return;
    }
    if (!kd_conn_offer(cn, q.dst_nic, q.discrim, q.dlen)) {
        kd_conn_free(cn);
        refuse(h, q.req_id, VIP_NO_MATCH);
        return;
    }
    kd_debug("connection request %u from %s offered on via%u (connection %u)", q.req_id,
             h->name, q.dst_nic, cn->id);
}

static struct via_vi_attr attr_of(const struct via_host_conn_req *q)
{
    return (struct via_vi_attr){.reliability = q->reliability, .max_transfer = q->max_transfer,
                                .rdma_write = q->rdma_write, .rdma_read = q->rdma_read};
}

/* The acceptor's half of cn for our vi, CONN_ACC sent: the channel's fd
 * in *chan_fd and the link's socket returned, or -1 with r failed. */
static int accept_side(struct kd_conn *cn, struct kd_vi *vi, int *chan_fd, struct kd_reply *r)
{
    const struct via_host_conn_req *q = &cn->rreq;
    if (vi->attr.reliability != q->reliability) {
        kd_fail(r, VIP_INVALID_RELIABILITY_LEVEL,
                "reliability levels differ: this VI %u, the requester's %u", vi->attr.reliability,
                q->reliability);
        return -1;
    }
    uint16_t port;
    int ufd = udp_socket(&port, r);
    if (ufd < 0)
        return -1;
    if (!udp_connect(ufd, q->udp_ip, q->udp_port)) {
        close(ufd);
        kd_fail(r, VIP_ERROR_RESOURCE, "cannot reach the requester's UDP port");
        return -1;
    }
    struct via_chan *ch = kd_conn_chan_new(cn, chan_fd, r);
    if (!ch) {
        close(ufd);
        return -1;
    }
    ch->reliability = vi->attr.reliability;
    ch->vi_id[0] = q->req_vi;
    ch->vi_id[1] = vi->id;
    ch->nic[0] = q->src_nic;
    ch->nic[1] = (uint16_t)vi->nic->index;
    struct via_host_conn_acc m = {
        .req_id = q->req_id, .acc_vi = vi->id, .acc_nic = (uint16_t)vi->nic->index,
        .udp_port = port, .udp_ip = kd.listen_ip, .reliability = vi->attr.reliability,
        .max_transfer = vi->attr.max_transfer, .rdma_write = vi->attr.rdma_write,
        .rdma_read = vi->attr.rdma_read, .frame_mac = q->frame_mac || kd.frame_mac};
    kd_auth_random(m.salt, sizeof m.salt);
    ch->frame_mac = m.frame_mac;
    kd_auth_frame_secret(cn->host->host_id, kd.host_id, q->req_id, q->salt, m.salt,
                         &ch->frame_token, ch->frame_key);
    atomic_store_explicit(&ch->state, VIA_CHAN_OPEN, memory_order_release);
    if (!kd_host_send(cn->host, VIA_HOST_CONN_ACC, &m, sizeof m)) {
        close(ufd);
        close(*chan_fd);
        kd_shm_unmap(ch, sizeof *ch);
        kd_fail(r, VIP_NOT_REACHABLE, "the requester's host %s went away", cn->host->name);
        return -1;
    }
    cn->chan = ch;
    cn->vi[1] = vi;
    vi->conn = cn;
    vi->side = 1;
    kd_vi_set_state(vi, VIA_VI_CONNECTED);
    kd_conn_set_state(cn, KD_CONN_ACCEPTED);
    kd_info("connection %u: %s via%u VI %u <-> via%u VI %u (pid %d)%s", cn->id, cn->host->name,
            q->src_nic, q->req_vi, vi->nic->index, vi->id, (int)vi->sess->pid,
            cn->peer ? " (peer-to-peer)" : "");
    return ufd;
}

void kd_remote_accept(struct kd_conn *cn, struct kd_vi *vi, struct kd_reply *r)
{
    const struct via_host_conn_req *q = &cn->rreq;
    int chan_fd;
    int ufd = accept_side(cn, vi, &chan_fd, r);
    if (ufd < 0)
        return;
    struct via_ctl_conn_done_r *a = kd_body(r, sizeof *a);
    if (a) {
        a->conn_id = cn->id;
        a->side = 1;
        a->peer_vi = q->req_vi;
        a->remote_attr = attr_of(q);
    }
    kd_add_fd(r, chan_fd, true);
    kd_add_fd(r, ufd, true);
}

/* ---- peer-to-peer across hosts ----------------------------------------------------------- */
/*
 * Of two hosts, the one with the lower host id sends its peer request
 * (CONN_REQ, peer = 1); the other keeps it (a conn MATCHED, remote_req)
 * until a mirror request of its own comes, then takes the acceptor's part.
 * The sender withdraws it (CONN_END) when its request times out or is
 * cancelled. So the requests never cross, and one connection results.
 */

/* Connect the kept request cn with our pending peer request of vi. */
static bool peer_join(struct kd_conn *cn, struct kd_vi *vi, struct kd_reply *r)
{
    int chan_fd;
    int ufd = accept_side(cn, vi, &chan_fd, r);
    if (ufd < 0)
        return false;
    cn->chan_fd = chan_fd;
    struct via_vi_attr ra = attr_of(&cn->rreq);
    kd_peer_connected(vi, cn, 1, cn->rreq.req_vi, &ra, ufd);
    return true;
}

static void on_peer_request(struct kd_conn *cn)
{
    cn->peer = true;
    kd_conn_set_state(cn, KD_CONN_MATCHED); /* kept until matched or withdrawn */
    struct kd_vi *vi = kd_peer_mirror_remote(cn->host, &cn->rreq);
    kd_debug("peer request %u from %s for via%u: %s", cn->wire_id, cn->host->name, cn->dst_nic,
             vi ? "matched" : "kept");
    if (!vi)
        return;
    struct kd_reply r = {0};
    if (peer_join(cn, vi, &r))
        return;
    /* As on one host, the later request gets the error; ours stays pending
     * unless this host could not make its side. */
    refuse(cn->host, cn->wire_id, r.status);
    kd_conn_free(cn);
    if (r.status != VIP_INVALID_RELIABILITY_LEVEL)
        kd_peer_failed(vi, r.status, r.msg);
}

/* The kept request from h that mirrors vi's request q (the oldest), or NULL. */
static struct kd_conn *kept_for(const struct kd_host *h, const struct kd_vi *vi,
                                const struct via_ctl_conn_request *q)
{
    struct kd_conn *found = NULL;
    unsigned rnic = (unsigned)q->remote.host[4] << 8 | q->remote.host[5];
    for (struct kd_conn *cn = kd.conns; cn; cn = cn->next) {
        const struct via_host_conn_req *k = &cn->rreq;
        if (cn->host == h && cn->remote_req && cn->peer && cn->state == KD_CONN_MATCHED &&
            k->dst_nic == vi->nic->index && k->src_nic == rnic &&
            k->dlen == q->local.discrim_len && k->req_dlen == q->remote.discrim_len &&
            memcmp(k->discrim, q->local.discrim, k->dlen) == 0 &&
            memcmp(k->req_discrim, q->remote.discrim, k->req_dlen) == 0)
            found = cn; /* the list is newest first */
    }
    return found;
}

bool kd_remote_peer_request(struct kd_vi *vi, struct kd_host *h,
                            const struct via_ctl_conn_request *q, struct kd_reply *r)
{
    if (kd.host_id < h->host_id) /* ours goes to h */
        return send_request(vi, h, q, true, r) != NULL;
    struct kd_conn *cn = kept_for(h, vi, q);
    if (!cn)
        return true; /* pending until h's request comes */
    if (peer_join(cn, vi, r))
        return true;
    if (r->status != VIP_INVALID_RELIABILITY_LEVEL) { /* h's request stays otherwise */
        refuse(h, cn->wire_id, VIP_REJECT);
        kd_conn_free(cn);
    }
    return false;
}

/* ---- the end of a connection ------------------------------------------------------------ */

void kd_remote_end(struct kd_conn *cn, int side, bool broken)
{
    if (cn->host->state != KD_HOST_UP)
        return;
    struct via_host_conn_end e = {.conn_id = cn->wire_id, .broken = broken,
                                  .from_requester = side == 0};
    kd_host_send(cn->host, VIA_HOST_CONN_END, &e, sizeof e);
}

/* cn's request ended here without a connection (kd_conn_request_end calls
 * this as cn->far, after the VI and the requester here were told; was:
 * cn's state until then): the other host hears of it, and our peer
 * request learns its outcome. */
static void far_end(struct kd_conn *cn, enum kd_conn_state was, int32_t status, const char *msg)
{
    /* Our peer request kept by another host: withdrawn there too (its
     * timeout, a cancel, the process's end), or a later mirror request
     * there would meet it. */
    if (cn->peer && !cn->remote_req && was == KD_CONN_MATCHED)
        kd_remote_end(cn, 0, true);
    if (cn->remote_req && status >= 0)
        refuse(cn->host, cn->wire_id, status); /* the requester is another host's */
    if (status >= 0 && cn->peer && cn->req_vi)
        kd_peer_failed(cn->req_vi, status, msg);
}

/* Our VI of cn breaks (or closes) because the other side's did. */
static void end_local(struct kd_conn *cn, bool broken)
{
    if (cn->state != KD_CONN_ACCEPTED) {
        if (cn->remote_req)
            kd_conn_request_end(cn, KD_CONN_REJECTED, -1, NULL);
        else
            kd_conn_request_end(cn, KD_CONN_REJECTED, VIP_NOT_REACHABLE,
                                "the other host went away before answering");
        return;
    }
    uint32_t st = broken ? VIA_CHAN_BROKEN : VIA_CHAN_CLOSED;
    if (st == VIA_CHAN_BROKEN) {
        atomic_store_explicit(&cn->chan->state, VIA_CHAN_BROKEN, memory_order_release);
    } else {
        uint32_t open = VIA_CHAN_OPEN;
        atomic_compare_exchange_strong(&cn->chan->state, &open, st);
    }
    struct kd_vi *vi = cn->vi[cn->remote_req ? 1 : 0];
    if (vi && vi->state != VIA_VI_ERROR) {
        kd_vi_set_state(vi, VIA_VI_ERROR);
        kd_notify(vi->sess, vi->id);
    }
}

static void on_end(struct kd_host *h, const void *body)
{
    struct via_host_conn_end m;
    memcpy(&m, body, sizeof m);
    /* from the requester: ours is the acceptor's side, and the other way round */
    struct kd_conn *cn = conn_of(h, m.conn_id, !m.from_requester);
    if (cn)
        end_local(cn, m.broken != 0);
}

/* h went down (kd_host_down): every connection and request with it breaks. */
static void host_down(struct kd_host *h)
{
    for (struct kd_conn *cn = kd.conns, *n; cn; cn = n) {
        n = cn->next;
        if (cn->host == h)
            end_local(cn, true);
    }
}

/* Connections or requests with h: only then is h watched (a heartbeat). */
static bool busy(const struct kd_host *h)
{
    for (const struct kd_conn *cn = kd.conns; cn; cn = cn->next)
        if (cn->host == h && (cn->state == KD_CONN_MATCHED || cn->state == KD_CONN_ACCEPTED))
            return true;
    return false;
}

/* ---- what other hosts' messages mean ------------------------------------------------------ */

static const struct kd_host_calls host_calls = {
    .msg =
        {
            [VIA_HOST_CONN_REQ] = {sizeof(struct via_host_conn_req), on_request},
            [VIA_HOST_CONN_ACC] = {sizeof(struct via_host_conn_acc), on_accept},
            [VIA_HOST_CONN_REJ] = {sizeof(struct via_host_conn_rej), on_reject},
            [VIA_HOST_CONN_END] = {sizeof(struct via_host_conn_end), on_end},
            [VIA_HOST_CONN_CANCEL] = {sizeof(struct via_host_conn_cancel), on_cancel},
        },
    .down = host_down,
    .busy = busy,
};

void kd_remote_init(void)
{
    kd_host_serve(&host_calls);
}

/*
 * kd_conn.c - the emulated switch's books: connections (struct kd_conn)
 * and the waits for them (struct kd_listener). A connection is made for a
 * request, offered to a wait, joined to its channel between two VIs, or
 * ended without one; a wait is kept in arrival order and answered by the
 * request it takes.
 *
 * Built on these books: the peer-to-peer model (kd_peer.c), connections
 * with other hosts (kd_remote.c), and above both what clients ask of the
 * switch and what the end of a VI, a client or a session does to its
 * connections (kd_connect.c). This file calls none of them: a connection
 * with another host carries kd_remote.c's part in its end (cn->far).
 */
#include "kd.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
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

/* ---- waking the processes -------------------------------------------------------- */

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

/* ---- connections ----------------------------------------------------------------- */

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

struct kd_conn *kd_conn_offered(struct kd_session *s, uint32_t conn_id, struct kd_reply *r)
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

/* ---- waits and offers ------------------------------------------------------------ */

void kd_listener_free(struct kd_listener *l)
{
    for (struct kd_listener **pp = &kd.listeners; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    free(l);
}

struct kd_listener *kd_listener_add(struct kd_client *c, uint64_t cookie, uint64_t deadline_ns,
                                    const struct via_net_addr *local)
{
    struct kd_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->sess = c->sess;
    l->client = c;
    l->cookie = cookie;
    l->deadline_ns = deadline_ns;
    l->dlen = local->discrim_len;
    memcpy(l->discrim, local->discrim, l->dlen);
    struct kd_listener **pp = &kd.listeners; /* FIFO: first listener served first */
    while (*pp)
        pp = &(*pp)->next;
    *pp = l;
    return l;
}

struct kd_listener *kd_listener_for(unsigned nic, const struct via_net_addr *a)
{
    for (struct kd_listener *l = kd.listeners; l; l = l->next)
        if (l->sess->nic->index == nic && l->dlen == a->discrim_len &&
            memcmp(l->discrim, a->discrim, l->dlen) == 0 && !l->client->dead)
            return l;
    return NULL;
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

bool kd_listener_offer(struct kd_listener *l, struct kd_conn *cn)
{
    struct via_ctl_conn_wait_r a;
    struct kd_client *c = l->client;
    uint64_t cookie = l->cookie;
    struct kd_session *s = l->sess;
    kd_listener_free(l);
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

bool kd_conn_offer(struct kd_conn *cn, unsigned nic, const uint8_t *discrim, uint16_t dlen)
{
    struct via_net_addr a = {.discrim_len = dlen};
    memcpy(a.discrim, discrim, dlen < VIA_MAX_DISCRIM ? dlen : VIA_MAX_DISCRIM);
    for (struct kd_listener *l = kd_listener_for(nic, &a); l; l = kd_listener_for(nic, &a))
        if (kd_listener_offer(l, cn))
            return true;
    return false;
}

/* ---- channels -------------------------------------------------------------------- */

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

bool kd_conn_establish(struct kd_conn *cn, struct kd_vi *a, struct kd_vi *b, int *fd,
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
    if (!kd_conn_establish(cn, a, b, &cn->chan_fd, r)) {
        kd_conn_free(cn);
        return NULL;
    }
    kd_info("connection %u (peer-to-peer): via%u VI %u (pid %d) <-> via%u VI %u (pid %d)",
            cn->id, a->nic->index, a->id, (int)a->sess->pid, b->nic->index, b->id,
            (int)b->sess->pid);
    return cn;
}

/* ---- vipctl ---------------------------------------------------------------------- */

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

/*
 * kd_session.c - control connections and sessions: peer authentication,
 * request framing, the dispatch table, HELLO/ATTACH, and the teardown of a
 * session whose process exited or died.
 */
#include "kd.h"
#include "kd_hostif.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "via_spec.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* ---- HELLO / ATTACH ------------------------------------------------------------- */

struct kd_session *kd_session_find(uint32_t id)
{
    for (struct kd_session *s = kd.sessions; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

static void session_free_pages(struct kd_session *s)
{
    kd_shm_unmap(s->tpt, VIA_TPT_BYTES);
    kd_shm_unmap(s->ev, sizeof *s->ev);
    kd_shm_unmap(s->st, sizeof *s->st);
    if (s->evfd >= 0)
        close(s->evfd);
    free(s->reg);
    free(s);
}

static void op_hello(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_hello *q = body;
    if (c->sess) {
        kd_fail(r, VIP_INVALID_STATE, "this connection already has session %u", c->sess->id);
        return;
    }
    unsigned maxs = kd.max_sessions ? kd.max_sessions : KD_MAX_SESSIONS;
    if (kd.nsessions >= maxs) {
        kd_fail(r, VIP_ERROR_RESOURCE,
                "vipd serves at most %u NIC sessions at once (vipd --max-sessions)", maxs);
        return;
    }
    if (!kd_user_may_open(c->uid, r))
        return;
    if (q->abi != VIA_ABI_VERSION) {
        kd_fail(r, VIP_INVALID_PARAMETER,
                "ABI version %u, vipd speaks %u: libvipl and vipd are from different builds",
                q->abi, VIA_ABI_VERSION);
        return;
    }
    if (q->nic >= kd.nnics) {
        kd_fail(r, VIP_INVALID_PARAMETER, "no such NIC via%u (this vipd has %u; see vipd -n)",
                q->nic, kd.nnics);
        return;
    }
    if (q->flags & ~VIA_HELLO_HOST_IF) {
        kd_fail(r, VIP_INVALID_PARAMETER, "unknown HELLO flags 0x%x", q->flags);
        return;
    }
    if ((q->flags & VIA_HELLO_HOST_IF) && !kd_hostif_eth_now(q->nic, NULL)) {
        char names[80];
        kd_hostif_names(names, sizeof names);
        kd_fail(r, VIP_INVALID_PARAMETER, "/dev/via_eth%u: no host network interface %u "
                "(interfaces: %s)", q->nic, q->nic, names);
        return;
    }
    struct kd_session *s = calloc(1, sizeof *s);
    int tfd = -1, sfd = -1;
    if (!s)
        goto nomem;
    s->evfd = -1;
    s->reg = calloc(VIA_MAX_TPT, sizeof *s->reg);
    if (!s->reg)
        goto nomem;
    s->tpt = kd_shm_create("via-tpt", VIA_TPT_BYTES, F_SEAL_FUTURE_WRITE, &tfd);
    if (!s->tpt)
        goto shmfail;
    s->ev = kd_shm_create("via-event", sizeof *s->ev, 0, &s->evfd);
    if (!s->ev)
        goto shmfail;
    s->st = kd_shm_create("via-status", sizeof *s->st, 0, &sfd);
    if (!s->st)
        goto shmfail;
    atomic_store(&s->st->trace_on, kd.trace_on ? 1u : 0u);
    atomic_store(&s->st->pid, (uint32_t)c->pid);
    s->st->clock = kd.clock;

    s->id = ++kd.next_session_id;
    if (s->id == 0)
        s->id = ++kd.next_session_id;
    s->nic = &kd.nic[q->nic];
    atomic_store(&s->st->scan_slots, s->nic->scan_slots);
    atomic_store(&s->st->nvis, s->nic->nvis);
    /* The kernel's pid and uid, not what the client claims. */
    s->pid = c->pid;
    s->uid = c->uid;
    memcpy(s->progname, q->progname, sizeof s->progname);
    s->progname[sizeof s->progname - 1] = 0;
    for (char *p = s->progname; *p; p++)
        if ((unsigned char)*p < 32 || (unsigned char)*p > 126)
            *p = '?'; /* it goes into log lines and vipctl tables */
    s->main = c;
    s->next = kd.sessions;
    kd.sessions = s;
    kd.nsessions++;
    c->sess = s;

    struct via_ctl_hello_r *a = kd_body(r, sizeof *a);
    if (!a)
        return; /* the session stays; the client sees the failure and closes */
    a->session_id = s->id;
    a->nic = q->nic;
    memcpy(a->nic_addr, s->nic->addr, VIA_NIC_ADDR_LEN);
    a->nnics = kd.nnics;
    snprintf(a->profile, sizeof a->profile, "%s", s->nic->prof.name);
    a->prof = s->nic->prof;
    snprintf(a->hosts, sizeof a->hosts, "%s", kd.hosts_path);
    kd_add_fd(r, tfd, true);
    kd_add_fd(r, s->evfd, false);
    kd_add_fd(r, sfd, true);
    kd_add_fd(r, s->nic->page_fd, false); /* the NIC's, shared by its sessions */
    kd_info("session %u opened: pid %d uid %u (%s) on via%u", s->id, (int)s->pid,
            (unsigned)s->uid, s->progname, q->nic);
    return;
shmfail:
    kd_fail(r, VIP_ERROR_RESOURCE, "cannot create shared memory for the session: %s",
            strerror(errno));
    goto out;
nomem:
    kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory");
out:
    if (tfd >= 0)
        close(tfd);
    if (sfd >= 0)
        close(sfd);
    if (s)
        session_free_pages(s);
}

static void op_attach(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_attach *q = body;
    if (c->sess) {
        kd_fail(r, VIP_INVALID_STATE, "this connection already acts for session %u",
                c->sess->id);
        return;
    }
    struct kd_session *s = kd_session_find(q->session_id);
    /* Another user's session is not even said to exist. */
    if (!s || s->uid != c->uid) {
        kd_fail(r, VIP_INVALID_PARAMETER, "no session %u of uid %u", q->session_id,
                (unsigned)c->uid);
        return;
    }
    if (s->pid != c->pid) {
        kd_fail(r, VIP_INVALID_PARAMETER, "session %u belongs to pid %d, not to pid %d",
                s->id, (int)s->pid, (int)c->pid);
        return;
    }
    c->sess = s;
    c->attached = true;
    kd_debug("session %u: side socket attached", s->id);
}

/* ---- dispatch ------------------------------------------------------------------------ */

#define OP(code, nm, type, fn, sess) [code] = {nm, sizeof(type), fn, sess}
static const struct kd_op ops[VIA_CTL_NOPS] = {
    OP(VIA_CTL_HELLO, "HELLO", struct via_ctl_hello, op_hello, false),
    OP(VIA_CTL_ATTACH, "ATTACH", struct via_ctl_attach, op_attach, false),
    [VIA_CTL_QUERY_NIC] = {"QUERY_NIC", 0, kd_op_query_nic, true},
    [VIA_CTL_CREATE_PTAG] = {"CREATE_PTAG", 0, kd_op_create_ptag, true},
    OP(VIA_CTL_DESTROY_PTAG, "DESTROY_PTAG", struct via_ctl_ptag, kd_op_destroy_ptag, true),
    OP(VIA_CTL_REG_MEM, "REG_MEM", struct via_ctl_reg_mem, kd_op_reg_mem, true),
    OP(VIA_CTL_DEREG_MEM, "DEREG_MEM", struct via_ctl_dereg_mem, kd_op_dereg_mem, true),
    OP(VIA_CTL_SET_MEM, "SET_MEM", struct via_ctl_set_mem, kd_op_set_mem, true),
    OP(VIA_CTL_CREATE_VI, "CREATE_VI", struct via_ctl_create_vi, kd_op_create_vi, true),
    OP(VIA_CTL_DESTROY_VI, "DESTROY_VI", struct via_ctl_vi, kd_op_destroy_vi, true),
    OP(VIA_CTL_SET_VI, "SET_VI", struct via_ctl_set_vi, kd_op_set_vi, true),
    OP(VIA_CTL_CREATE_CQ, "CREATE_CQ", struct via_ctl_create_cq, kd_op_create_cq, true),
    OP(VIA_CTL_DESTROY_CQ, "DESTROY_CQ", struct via_ctl_cq, kd_op_destroy_cq, true),
    OP(VIA_CTL_CONN_WAIT, "CONN_WAIT", struct via_ctl_conn_wait, kd_op_conn_wait, true),
    OP(VIA_CTL_CONN_ACCEPT, "CONN_ACCEPT", struct via_ctl_conn_accept, kd_op_conn_accept,
       true),
    OP(VIA_CTL_CONN_REJECT, "CONN_REJECT", struct via_ctl_conn_reject, kd_op_conn_reject,
       true),
    OP(VIA_CTL_CONN_REQUEST, "CONN_REQUEST", struct via_ctl_conn_request,
       kd_op_conn_request, true),
    OP(VIA_CTL_DISCONNECT, "DISCONNECT", struct via_ctl_vi, kd_op_disconnect, true),
    OP(VIA_CTL_VI_ERROR, "VI_ERROR", struct via_ctl_vi_error, kd_op_vi_error, true),
    OP(VIA_CTL_NS_LOOKUP, "NS_LOOKUP", struct via_ctl_ns_lookup, kd_op_ns_lookup, false),
    [VIA_CTL_LIST_NICS] = {"LIST_NICS", 0, kd_op_list_nics, false},
    [VIA_CTL_LIST_VIS] = {"LIST_VIS", 0, kd_op_list_vis, false},
    [VIA_CTL_LIST_MEM] = {"LIST_MEM", 0, kd_op_list_mem, false},
    OP(VIA_CTL_TRACE, "TRACE", struct via_ctl_trace, kd_op_trace, false),
    [VIA_CTL_SHUTDOWN] = {"SHUTDOWN", 0, kd_op_shutdown, false},
    [VIA_CTL_PING] = {"PING", 0, kd_op_ping, false},
    [VIA_CTL_NET_STATS] = {"NET_STATS", 0, kd_op_net_stats, false},
    OP(VIA_CTL_GET_PROFILE, "GET_PROFILE", struct via_ctl_get_profile, kd_op_get_profile, false),
    OP(VIA_CTL_RESIZE_CQ, "RESIZE_CQ", struct via_ctl_resize_cq, kd_op_resize_cq, true),
    OP(VIA_CTL_PEER_REQUEST, "PEER_REQUEST", struct via_ctl_conn_request, kd_op_peer_request,
       true),
    OP(VIA_CTL_PEER_DONE, "PEER_DONE", struct via_ctl_vi, kd_op_peer_done, true),
    OP(VIA_CTL_PEER_WAIT, "PEER_WAIT", struct via_ctl_vi, kd_op_peer_wait, true),
    OP(VIA_CTL_NS_REVERSE, "NS_REVERSE", struct via_ctl_ns_reverse, kd_op_ns_reverse, false),
    [VIA_CTL_SMI_NICS] = {"SMI_NICS", 0, kd_op_smi_nics, true},
};

const struct kd_op *kd_request_check(uint32_t opcode, long blen, bool has_session,
                                     struct kd_reply *r)
{
    const struct kd_op *op = opcode < VIA_CTL_NOPS ? &ops[opcode] : NULL;
    if (!op || !op->fn) {
        kd_fail(r, VIP_INVALID_PARAMETER, "unknown request op %u (vipd knows 1..%u)", opcode,
                VIA_CTL_NOPS - 1);
    } else if (blen != (long)op->body) {
        kd_fail(r, VIP_INVALID_PARAMETER, "%s wants a %u-byte body, got %ld bytes", op->name,
                op->body, blen);
    } else if (op->needs_session && !has_session) {
        kd_fail(r, VIP_INVALID_STATE, "%s needs a session: send HELLO (or ATTACH) first",
                op->name);
    } else {
        return op;
    }
    return NULL;
}

static void dispatch(struct kd_client *c, const struct via_ctl_hdr *h, const void *body,
                     long blen)
{
    struct kd_reply r = {.status = VIP_SUCCESS};
    const struct kd_op *op = kd_request_check(h->op, blen, c->sess != NULL, &r);
    if (op) {
        kd_debug("pid %d session %u: %s", (int)c->pid, c->sess ? c->sess->id : 0, op->name);
        op->fn(c, h->cookie, body, &r);
        if (r.status != VIP_SUCCESS)
            kd_debug("  -> status %d: %s", r.status, r.msg);
    }
    if (!r.deferred)
        kd_send_reply(c, h->cookie, r.status, r.status == VIP_SUCCESS ? NULL : r.msg,
                      r.status == VIP_SUCCESS ? r.body : NULL,
                      r.status == VIP_SUCCESS ? r.len : 0, r.status == VIP_SUCCESS ? r.fds : NULL,
                      r.status == VIP_SUCCESS ? r.nfds : 0);
    for (int i = 0; i < r.nfds; i++)
        if (r.close_fd[i])
            close(r.fds[i]);
    free(r.heap);
}

/* ---- connections --------------------------------------------------------------------- */

void kd_client_new(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
        kd_warn("SO_PEERCRED: %s: connection refused", strerror(errno));
        close(fd);
        return;
    }
    if (!kd_user_admitted(cr.uid)) {
        kd_warn("pid %d of uid %u connected: refused, this vipd serves uid %u only "
                "(vipd --system serves every user)",
                (int)cr.pid, (unsigned)cr.uid, (unsigned)getuid());
        close(fd);
        return;
    }
    /* Requests are read without waiting (kd_client_readable); a reply to a
     * client that never reads them waits a bounded time, then the client
     * is dropped. */
    struct timeval st = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &st, sizeof st);
    struct kd_client *c = calloc(1, sizeof *c);
    if (!c) {
        kd_err("out of memory: connection of pid %d refused", (int)cr.pid);
        close(fd);
        return;
    }
    c->fd = fd;
    c->pid = cr.pid;
    c->uid = cr.uid;
    c->next = kd.clients;
    kd.clients = c;
    kd_debug("connection from pid %d", (int)c->pid);
}

/* Take what the client has sent, without waiting: 1 if it moved bytes, 0
 * when there is nothing more now, -1 when the client is gone. Any file
 * descriptors a client sends with a request are closed (vipd takes none). */
static int take_bytes(struct kd_client *c, void *buf, size_t len)
{
    union {
        char b[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
                       .msg_controllen = sizeof u.b};
    ssize_t n = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    for (struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
            close(fd);
        }
    }
    if (n == 0)
        return -1;
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    return (int)n;
}

void kd_client_readable(struct kd_client *c)
{
    struct via_ctl_hdr h;
    for (;;) {
        if (c->skip) {
            /* the rest of an over-long body: dropped, then refused */
            unsigned char sink[4096];
            int n = take_bytes(c, sink, c->skip < sizeof sink ? c->skip : sizeof sink);
            if (n < 0)
                c->dead = true;
            if (n <= 0)
                return;
            c->skip -= (uint32_t)n;
            if (!c->skip) {
                memcpy(&h, c->in, sizeof h);
                struct kd_reply r = {0};
                kd_fail(&r, VIP_INVALID_PARAMETER,
                        "request op %u has a %u-byte body; none is that long", h.op, h.len);
                kd_send_reply(c, h.cookie, r.status, r.msg, NULL, 0, NULL, 0);
                c->in_len = 0;
            }
            continue;
        }
        size_t want = sizeof h;
        if (c->in_len >= sizeof h) {
            memcpy(&h, c->in, sizeof h);
            if (h.len > VIA_CTL_MAX_BODY) {
                kd_warn("pid %d sent a %u-byte body (max %u): closing its connection",
                        (int)c->pid, h.len, VIA_CTL_MAX_BODY);
                c->dead = true;
                return;
            }
            if (h.len > KD_MAX_REQ_BODY) {
                c->skip = h.len;
                continue;
            }
            want = sizeof h + h.len;
            if (c->in_len == want) {
                c->in_len = 0;
                dispatch(c, &h, c->in + sizeof h, h.len);
                if (c->dead)
                    return;
                continue;
            }
        }
        int n = take_bytes(c, c->in + c->in_len, want - c->in_len);
        if (n < 0) {
            c->dead = true;
            return;
        }
        if (n == 0)
            return;
        c->in_len += (uint32_t)n;
    }
}

/* Close a client now (called only from kd_reap_clients). */
static void client_free(struct kd_client *c)
{
    kd_conn_client_gone(c);
    if (c->sess && !c->attached)
        kd_session_end(c->sess, "its process closed the connection");
    close(c->fd);
    kd_debug("connection of pid %d closed", (int)c->pid);
    free(c);
}

void kd_reap_clients(void)
{
    /* A session end marks its side sockets dead: loop until none is left. */
    for (bool again = true; again;) {
        again = false;
        for (struct kd_client **pp = &kd.clients; *pp;) {
            struct kd_client *c = *pp;
            if (!c->dead) {
                pp = &c->next;
                continue;
            }
            *pp = c->next;
            client_free(c);
            again = true;
        }
    }
}

/* ---- session end ------------------------------------------------------------------------ */

void kd_session_end(struct kd_session *s, const char *why)
{
    /* Side sockets die with the session; their pending calls are cancelled
     * here, before the objects they refer to go away. */
    for (struct kd_client *c = kd.clients; c; c = c->next) {
        if (c->sess != s)
            continue;
        kd_conn_client_gone(c);
        c->sess = NULL;
        if (c->attached)
            c->dead = true;
    }
    kd_conn_session_gone(s);
    kd_trace_keep(s);
    kd_host_net_keep(s);
    unsigned nvis = 0, ncqs = 0, nregions = s->nregions;
    kd_vi_session_free(s, &nvis, &ncqs);
    kd_mem_session_free(s);
    for (struct kd_session **pp = &kd.sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    kd.nsessions--;
    if (kd.nsessions == 0)
        kd.last_session_end_ns = kd_now_ns();
    kd_info("session %u (pid %d, %s) ended (%s): freed %u VIs, %u regions, %u CQs", s->id,
            (int)s->pid, s->progname, why, nvis, nregions, ncqs);
    kd_nic_session_gone(s->nic); /* s is off kd.sessions by now */
    session_free_pages(s);
}

void kd_shutdown_all(void)
{
    while (kd.sessions) {
        /* kd_session_end detaches the main client too, so reaping it below
         * does not end the session twice. */
        kd_session_end(kd.sessions, "vipd is shutting down");
    }
    for (struct kd_client *c = kd.clients; c; c = c->next)
        c->dead = true;
    kd_reap_clients();
}

/*
 * kd_host.c - the other vipds: the hosts of the emulated fabric.
 *
 * With --listen ADDR:PORT a vipd is one host among several; the hosts
 * file names the others (NAME ADDR:PORT). Between two vipds runs one TCP
 * connection each way at most (whoever needs the other first connects;
 * the first message says who it is), which carries the control path only:
 * connection requests and their answers, disconnects, and a heartbeat.
 * The data never passes here: each connection gets a UDP socket per side,
 * which vipd hands to the process (kd_remote.c).
 *
 * A host is UP from its first message to its last; it goes DOWN when a
 * connection to it ends (its vipd died: the kernel closes the socket) or
 * when nothing came from it for the heartbeat timeout (VIPD_HOST_TIMEOUT_MS,
 * default 3000; its vipd hangs, or the network between went away), and
 * then every connection to it breaks.
 *
 * This file is the transport only. What a message means, what a host's
 * going down breaks and whether a host is worth a heartbeat are the
 * business of the connections above it (kd_remote.c), which hand it their
 * handlers at start-up (kd_host_serve): the hosts call up through that
 * table and nothing else.
 */
#include "kd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char *const kd_host_state_name[KD_HOST_NSTATES] = {
    [KD_HOST_DOWN] = "down",
    [KD_HOST_UP] = "up",
};

static const struct kd_host_calls *up; /* kd_remote.c's (kd_host_serve) */
static int listen_fd = -1;
/* Accepted connections whose first message has not come yet. */
#define KD_MAX_STRANGERS 16
static struct kd_hostlink strangers[KD_MAX_STRANGERS];

static uint64_t env_ms(const char *name, uint64_t dflt)
{
    const char *e = getenv(name);
    char *end;
    unsigned long long v = e && *e ? strtoull(e, &end, 10) : 0;
    return e && *e && !*end && v ? v : dflt;
}

void kd_host_serve(const struct kd_host_calls *calls)
{
    up = calls;
}

const char *kd_link_name(uint32_t link)
{
    static const char *const names[] = {[VIA_LINK_SHM] = "shared-memory",
                                        [VIA_LINK_UDP] = "udp", [VIA_LINK_OFI] = "ofi"};
    return link < sizeof names / sizeof names[0] ? names[link] : "unknown";
}

bool kd_host_parse_addr(const char *s, uint32_t *ip, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || strlen(s) > 64)
        return false;
    char a[65];
    snprintf(a, sizeof a, "%.*s", (int)(colon - s), s);
    struct in_addr in;
    if (inet_pton(AF_INET, a, &in) != 1)
        return false;
    char *end;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (!colon[1] || *end || p == 0 || p > 65535)
        return false;
    *ip = in.s_addr;
    *port = (uint16_t)p;
    return true;
}

struct kd_host *kd_host_add(const char *name, uint32_t ip, uint16_t port)
{
    uint32_t id = kd_host_id_of(ip, port);
    for (unsigned i = 0; i < kd.nnethosts; i++)
        if (kd.nethost[i].host_id == id)
            return &kd.nethost[i];
    if (kd.nnethosts == KD_MAX_HOSTS)
        return NULL;
    struct kd_host *h = &kd.nethost[kd.nnethosts++];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%s", name);
    h->ip = ip;
    h->port = port;
    h->host_id = id;
    h->link[0].fd = h->link[1].fd = -1;
    return h;
}

struct kd_host *kd_host_by_id(uint32_t id)
{
    for (unsigned i = 0; i < kd.nnethosts; i++)
        if (kd.nethost[i].host_id == id && id != kd.host_id)
            return &kd.nethost[i];
    return NULL;
}

bool kd_host_listen(void)
{
    if (!kd.listen_port)
        return true;
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd < 0)
        return false;
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(kd.listen_port),
                             .sin_addr.s_addr = kd.listen_ip};
    if (bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(listen_fd, 16) < 0) {
        int e = errno;
        close(listen_fd);
        listen_fd = -1;
        errno = e;
        return false;
    }
    for (unsigned i = 0; i < KD_MAX_STRANGERS; i++)
        strangers[i].fd = -1;
    kd.hb_ns = env_ms("VIPD_HB_MS", 250) * 1000000ull;
    kd.host_timeout_ns = env_ms("VIPD_HOST_TIMEOUT_MS", 3000) * 1000000ull;
    return true;
}

/* ---- the handshake and sending ------------------------------------------------- */

const char *const kd_link_auth_name[KD_LINK_NSTATES] = {
    [KD_LINK_NEW] = "new",
    [KD_LINK_HELLO_SENT] = "hello-sent",
    [KD_LINK_CHALLENGED] = "challenged",
    [KD_LINK_AUTHED] = "authenticated",
};

static void link_close(struct kd_hostlink *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    l->in_len = l->out_len = 0;
    l->auth = KD_LINK_NEW;
    l->n_tx = l->n_rx = 0;
    memset(l->k_tx, 0, sizeof l->k_tx);
    memset(l->k_rx, 0, sizeof l->k_rx);
}

static void link_open(struct kd_hostlink *l, int fd)
{
    link_close(l);
    l->fd = fd;
    l->since_ns = kd_now_ns();
}

static bool send_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false; /* a full queue to a host is a host that does not read */
        p += n;
        len -= (size_t)n;
    }
    return true;
}

static bool handshake_type(uint16_t type)
{
    return type == VIA_HOST_HELLO || type == VIA_HOST_CHALLENGE || type == VIA_HOST_PROOF;
}

/* One message onto l: a handshake message as it is, any other MACed once
 * the link is AUTHED, and kept in l->out until then. */
static bool link_send(struct kd_hostlink *l, uint16_t type, const void *body, uint32_t len)
{
    if (len > KD_HOST_MAX_BODY || l->fd < 0)
        return false;
    uint8_t buf[KD_HOST_MSG_MAX];
    struct via_host_msg m = {.magic = VIA_HOST_MAGIC, .version = VIA_NET_VERSION, .type = type,
                             .len = len};
    memcpy(buf, &m, sizeof m);
    if (len)
        memcpy(buf + sizeof m, body, len);
    uint32_t n = (uint32_t)sizeof m + len;
    if (!handshake_type(type) && l->auth != KD_LINK_AUTHED) {
        if (l->out_len + n > sizeof l->out)
            return false;
        memcpy(l->out + l->out_len, buf, n);
        l->out_len += n;
        return true;
    }
    if (l->auth == KD_LINK_AUTHED) {
        kd_auth_msg_mac(l->k_tx, l->n_tx++, buf, n, buf + n);
        n += VIA_HOST_MAC_BYTES;
    }
    return send_all(l->fd, buf, n);
}

/* The link just became AUTHED: what waited goes out. */
static bool flush_out(struct kd_hostlink *l)
{
    uint8_t q[sizeof l->out];
    uint32_t len = l->out_len, off = 0;
    memcpy(q, l->out, len);
    l->out_len = 0;
    while (off < len) {
        struct via_host_msg m;
        memcpy(&m, q + off, sizeof m);
        if (!link_send(l, m.type, q + off + sizeof m, m.len))
            return false;
        off += (uint32_t)sizeof m + m.len;
    }
    return true;
}

/* Our link to h, made now if there is none (link[0] ours, [1] its): a new
 * one says HELLO and waits for h's proof before anything else goes. */
static struct kd_hostlink *host_link(struct kd_host *h)
{
    if (h->link[0].fd >= 0)
        return &h->link[0];
    if (h->link[1].fd >= 0)
        return &h->link[1];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return NULL;
    /* From our listen address: h checks that we come from where the hosts
     * file says we are. */
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = kd.listen_ip};
    int rc = kd.listen_ip ? bind(fd, (struct sockaddr *)&me, sizeof me) : 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(h->port),
                             .sin_addr.s_addr = h->ip};
    if (rc == 0)
        rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    if (rc < 0 && errno == EINPROGRESS) {
        /* Bounded: a host that does not answer within a second is not there. */
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof err;
        rc = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 &&
                     err == 0
                 ? 0
                 : -1;
    }
    if (rc < 0) {
        close(fd);
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct kd_hostlink *l = &h->link[0];
    link_open(l, fd);
    l->peer_id = h->host_id;
    l->hs = (struct kd_auth_hs){.connector = kd.host_id, .acceptor = h->host_id,
                                .link = kd.link};
    kd_auth_random(l->hs.nc, sizeof l->hs.nc);
    struct via_host_hello hello = {.host_id = kd.host_id, .link = kd.link, .to_id = h->host_id};
    memcpy(hello.nonce, l->hs.nc, sizeof hello.nonce);
    if (!link_send(l, VIA_HOST_HELLO, &hello, sizeof hello)) {
        link_close(l);
        return NULL;
    }
    l->auth = KD_LINK_HELLO_SENT;
    if (h->state != KD_HOST_UP) {
        h->state = KD_HOST_UP;
        h->last_heard = kd_now_ns();
        kd_info("host %s (%08x) is up", h->name, h->host_id);
    }
    return l;
}

bool kd_host_send(struct kd_host *h, uint16_t type, const void *body, uint32_t len)
{
    struct kd_hostlink *l = host_link(h);
    if (!l)
        return false;
    if (!link_send(l, type, body, len)) {
        h->down_why = "cannot send to it";
        return false;
    }
    h->last_sent = kd_now_ns();
    return true;
}

void kd_host_down(struct kd_host *h, const char *why)
{
    h->down_why = NULL;
    link_close(&h->link[0]);
    link_close(&h->link[1]);
    if (h->state == KD_HOST_DOWN)
        return;
    h->state = KD_HOST_DOWN;
    kd_warn("host %s (%08x) is down: %s", h->name, h->host_id, why);
    up->down(h);
}

/* ---- receiving ------------------------------------------------------------------ */

/* An authenticated message to its handler in up->msg, if its body has the
 * length the type says. A PING is heard and that is all; a type with no
 * handler (a later version's) is ignored. */
static void dispatch(struct kd_host *h, const struct via_host_msg *m, const void *body)
{
    h->last_heard = kd_now_ns();
    if (m->type >= VIA_HOST_NTYPES)
        return;
    const struct kd_host_msg_handler *d = &up->msg[m->type];
    if (d->fn && m->len == d->len)
        d->fn(h, body);
}

/* A stranger's HELLO: a listed host, speaking our link, meaning us, from
 * the address the hosts file gives it? Then CHALLENGE it (nothing else
 * changes until its PROOF). */
static bool on_hello(struct kd_hostlink *l, const void *body)
{
    struct via_host_hello hello_copy, *hello = &hello_copy;
    memcpy(hello, body, sizeof *hello);
    struct kd_host *h = kd_host_by_id(hello->host_id);
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    if (!h) {
        kd_warn("a vipd (host %08x) not in the hosts file connected: refused", hello->host_id);
        return false;
    }
    if (hello->to_id != kd.host_id) {
        kd_warn("a connection claiming to be host %s meant host %08x, not us: refused", h->name,
                hello->to_id);
        return false;
    }
    if (hello->link != kd.link) {
        kd_warn("host %s uses the %s link, this vipd the %s link (--link): refused", h->name,
                kd_link_name(hello->link), kd_link_name(kd.link));
        return false;
    }
    if (getpeername(l->fd, (struct sockaddr *)&from, &fl) < 0 ||
        (h->ip != INADDR_ANY && from.sin_addr.s_addr != h->ip)) {
        char a[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &from.sin_addr, a, sizeof a);
        kd_warn("a connection from %s claimed to be host %s, which the hosts file puts "
                "elsewhere: refused", a, h->name);
        return false;
    }
    l->peer_id = h->host_id;
    l->hs = (struct kd_auth_hs){.connector = h->host_id, .acceptor = kd.host_id, .link = kd.link};
    memcpy(l->hs.nc, hello->nonce, sizeof l->hs.nc);
    kd_auth_random(l->hs.na, sizeof l->hs.na);
    struct via_host_challenge c = {.host_id = kd.host_id};
    memcpy(c.nonce, l->hs.na, sizeof c.nonce);
    kd_auth_proof(&l->hs, true, c.mac);
    if (!link_send(l, VIA_HOST_CHALLENGE, &c, sizeof c))
        return false;
    l->auth = KD_LINK_CHALLENGED;
    return true;
}

/* Our HELLO's answer: the host we called proves it holds the key; we
 * prove it back and the link is AUTHED. */
static bool on_challenge(struct kd_hostlink *l, const void *body)
{
    struct via_host_challenge cc, *c = &cc;
    memcpy(c, body, sizeof *c);
    struct kd_host *h = kd_host_by_id(l->peer_id);
    memcpy(l->hs.na, c->nonce, sizeof l->hs.na);
    if (c->host_id != l->peer_id || !kd_auth_proof_ok(&l->hs, true, c->mac)) {
        kd_warn("host %s answered without proof that it holds the cluster key: is its "
                "vipd started with the same key file?", h ? h->name : "?");
        return false;
    }
    struct via_host_proof p;
    kd_auth_proof(&l->hs, false, p.mac);
    if (!link_send(l, VIA_HOST_PROOF, &p, sizeof p))
        return false;
    kd_auth_session(&l->hs, false, l->k_tx, l->k_rx);
    l->auth = KD_LINK_AUTHED;
    return flush_out(l);
}

/* The stranger's PROOF: it holds the key; its link becomes h's incoming
 * one (replacing an older one of h's: its vipd connected again). */
static bool on_proof(struct kd_hostlink **lp, struct kd_host **who, const void *body)
{
    struct via_host_proof pc, *p = &pc;
    memcpy(p, body, sizeof *p);
    struct kd_hostlink *l = *lp;
    struct kd_host *h = kd_host_by_id(l->peer_id);
    if (!h || !kd_auth_proof_ok(&l->hs, false, p->mac)) {
        kd_warn("a connection claiming to be host %s gave no proof that it holds the "
                "cluster key: refused", h ? h->name : "?");
        return false;
    }
    kd_auth_session(&l->hs, true, l->k_tx, l->k_rx);
    l->auth = KD_LINK_AUTHED;
    link_close(&h->link[1]);
    h->link[1] = *l;
    l->fd = -1;
    link_close(l);
    if (h->state != KD_HOST_UP) {
        h->state = KD_HOST_UP;
        kd_info("host %s (%08x) is up", h->name, h->host_id);
    }
    h->last_heard = kd_now_ns();
    *who = h;
    *lp = &h->link[1];
    return true;
}

/* Dispatch the whole messages of *lp's input: the handshake while the
 * link is not AUTHED (a stranger becomes h's incoming link at its PROOF:
 * *lp, *who are updated), then MACed messages only. false: the
 * connection spoke nonsense or failed to prove itself. */
static bool parse(struct kd_hostlink **lp, struct kd_host **who)
{
    for (;;) {
        struct kd_hostlink *l = *lp;
        struct via_host_msg m;
        if (l->in_len < sizeof m)
            return true;
        memcpy(&m, l->in, sizeof m);
        if (m.magic != VIA_HOST_MAGIC || m.version != VIA_NET_VERSION || m.len > KD_HOST_MAX_BODY)
            return false;
        uint32_t mac = l->auth == KD_LINK_AUTHED ? VIA_HOST_MAC_BYTES : 0;
        uint32_t whole = (uint32_t)sizeof m + m.len + mac;
        if (l->in_len < whole)
            return true;
        if (mac && !kd_auth_msg_ok(l->k_rx, l->n_rx++, l->in, sizeof m + m.len,
                                   l->in + sizeof m + m.len)) {
            kd_warn("a message from host %08x failed its MAC: link closed", l->peer_id);
            return false;
        }
        _Alignas(8) uint8_t body[KD_HOST_MAX_BODY];
        memcpy(body, l->in + sizeof m, m.len);
        l->in_len -= whole;
        memmove(l->in, l->in + whole, l->in_len);
        if (l->auth == KD_LINK_AUTHED) {
            if (handshake_type(m.type) || !*who)
                return false;
            dispatch(*who, &m, body);
            if (l->fd < 0)
                return true; /* the host went down meanwhile */
            continue;
        }
        /* The handshake: the one message each state waits for. */
        static const struct {
            uint16_t type;
            uint32_t len;
        } want[KD_LINK_NSTATES] = {
            [KD_LINK_NEW] = {VIA_HOST_HELLO, sizeof(struct via_host_hello)},
            [KD_LINK_HELLO_SENT] = {VIA_HOST_CHALLENGE, sizeof(struct via_host_challenge)},
            [KD_LINK_CHALLENGED] = {VIA_HOST_PROOF, sizeof(struct via_host_proof)},
        };
        if (m.type != want[l->auth].type || m.len != want[l->auth].len) {
            kd_warn("a connection (host %08x?) broke the handshake: message type %u of %u "
                    "bytes while %s: closed", l->peer_id, (unsigned)m.type, (unsigned)m.len,
                    kd_link_auth_name[l->auth]);
            return false;
        }
        bool ok = l->auth == KD_LINK_NEW          ? on_hello(l, body)
                  : l->auth == KD_LINK_HELLO_SENT ? on_challenge(l, body)
                                                  : on_proof(lp, who, body);
        if (!ok)
            return false;
    }
}

/* Read what l has and dispatch it; false: the connection ended or spoke
 * nonsense. */
static bool link_read(struct kd_hostlink *l, struct kd_host **who)
{
    ssize_t n = recv(l->fd, l->in + l->in_len, sizeof l->in - l->in_len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return false;
    if (n > 0)
        l->in_len += (uint32_t)n;
    return parse(&l, who);
}

/* ---- the event loop's part --------------------------------------------------------- */

size_t kd_host_pollfds(struct pollfd *p, size_t cap)
{
    size_t n = 0;
    if (listen_fd < 0)
        return 0;
    if (n < cap)
        p[n++] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
    for (unsigned i = 0; i < KD_MAX_STRANGERS && n < cap; i++)
        p[n++] = (struct pollfd){.fd = strangers[i].fd, .events = POLLIN};
    for (unsigned i = 0; i < kd.nnethosts; i++)
        for (int k = 0; k < 2 && n < cap; k++)
            p[n++] = (struct pollfd){.fd = kd.nethost[i].link[k].fd, .events = POLLIN};
    return n;
}

size_t kd_host_npollfds(void)
{
    return listen_fd < 0 ? 0 : 1 + KD_MAX_STRANGERS + 2 * (size_t)kd.nnethosts;
}

void kd_host_events(const struct pollfd *p, size_t n)
{
    if (listen_fd < 0 || n == 0)
        return;
    size_t i = 1;
    for (unsigned s = 0; s < KD_MAX_STRANGERS && i < n; s++, i++) {
        if (p[i].fd < 0 || p[i].fd != strangers[s].fd || !p[i].revents)
            continue;
        struct kd_host *who = NULL;
        if (!link_read(&strangers[s], &who)) {
            if (who)
                kd_host_down(who, "its first messages failed their checks");
            link_close(&strangers[s]);
        }
    }
    for (unsigned hi = 0; hi < kd.nnethosts; hi++) {
        struct kd_host *h = &kd.nethost[hi];
        for (int k = 0; k < 2 && i < n; k++, i++) {
            if (p[i].fd < 0 || p[i].fd != h->link[k].fd || !p[i].revents)
                continue;
            struct kd_host *who = h;
            bool authed = h->link[k].auth == KD_LINK_AUTHED;
            if (!link_read(&h->link[k], &who))
                kd_host_down(h, authed ? "its vipd closed the connection (exited or killed), "
                                         "or a message failed its checks"
                                       : "the handshake failed: does its vipd use the same "
                                         "cluster key?");
        }
    }
    if (p[0].revents & POLLIN) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        /* A free place, else the oldest stranger's: strangers that connect
         * and say nothing cannot keep a real host out. */
        unsigned slot = 0;
        for (unsigned s = 0; s < KD_MAX_STRANGERS; s++) {
            if (strangers[s].fd < 0) {
                slot = s;
                break;
            }
            if (strangers[s].since_ns < strangers[slot].since_ns)
                slot = s;
        }
        int one = 1; /* a handshake and control messages: each goes at once */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        link_open(&strangers[slot], fd);
    }
}

/* Does vipd have business with h (connections, requests)? Only then is
 * it watched: an idle host may come and go unnoticed. */
static void earliest(uint64_t *d, uint64_t t)
{
    if (!*d || t < *d)
        *d = t;
}

uint64_t kd_host_next_deadline(void)
{
    uint64_t d = 0;
    for (unsigned s = 0; listen_fd >= 0 && s < KD_MAX_STRANGERS; s++)
        if (strangers[s].fd >= 0)
            earliest(&d, strangers[s].since_ns + kd.host_timeout_ns);
    for (unsigned i = 0; i < kd.nnethosts; i++) {
        struct kd_host *h = &kd.nethost[i];
        if (h->down_why)
            earliest(&d, 1); /* at once */
        if (h->link[0].fd >= 0 && h->link[0].auth != KD_LINK_AUTHED)
            earliest(&d, h->link[0].since_ns + kd.host_timeout_ns);
        if (h->state != KD_HOST_UP || !up->busy(h))
            continue;
        uint64_t t = h->last_sent + kd.hb_ns;
        uint64_t dead = h->last_heard + kd.host_timeout_ns;
        if (dead < t)
            t = dead;
        if (!d || t < d)
            d = t;
    }
    return d;
}

void kd_host_tick(uint64_t now)
{
    /* A handshake takes one round trip: one not done within the host
     * timeout never will be. (No strangers but with a listening socket.) */
    for (unsigned s = 0; listen_fd >= 0 && s < KD_MAX_STRANGERS; s++)
        if (strangers[s].fd >= 0 && now - strangers[s].since_ns >= kd.host_timeout_ns) {
            kd_warn("a connection to our --listen port did not complete the handshake in "
                    "time: closed");
            link_close(&strangers[s]);
        }
    for (unsigned i = 0; i < kd.nnethosts; i++) {
        struct kd_host *h = &kd.nethost[i];
        if (h->down_why) {
            kd_host_down(h, h->down_why);
            continue;
        }
        if (h->link[0].fd >= 0 && h->link[0].auth != KD_LINK_AUTHED &&
            now - h->link[0].since_ns >= kd.host_timeout_ns) {
            kd_host_down(h, "it did not answer our handshake in time (is its vipd using the "
                            "same cluster key?)");
            continue;
        }
        if (h->state != KD_HOST_UP || !up->busy(h))
            continue;
        if (now - h->last_heard >= kd.host_timeout_ns) {
            kd_host_down(h, "no heartbeat");
            continue;
        }
        if (now - h->last_sent >= kd.hb_ns)
            kd_host_send(h, VIA_HOST_PING, NULL, 0);
    }
}

void kd_host_fini(void)
{
    for (unsigned i = 0; i < kd.nnethosts; i++) {
        link_close(&kd.nethost[i].link[0]);
        link_close(&kd.nethost[i].link[1]);
    }
    for (unsigned s = 0; s < KD_MAX_STRANGERS; s++)
        if (listen_fd >= 0)
            link_close(&strangers[s]);
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
}

/* ---- vipctl net ------------------------------------------------------------------- */

static uint64_t net_gone[VIA_NET_NCOUNTERS];

static void net_add(uint64_t *sum, const struct via_net_counters *c)
{
    const _Atomic uint64_t *v = &c->tx_frames;
    for (unsigned i = 0; i < VIA_NET_NCOUNTERS; i++)
        sum[i] += atomic_load_explicit(&v[i], memory_order_relaxed);
}

void kd_host_net_keep(const struct kd_session *s)
{
    net_add(net_gone, &s->st->net);
}

void kd_op_net_stats(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    struct via_ctl_net_stats_r *a =
        kd_body(r, sizeof *a + kd.nnethosts * sizeof(struct via_net_host_info));
    if (!a)
        return;
    memcpy(a->cnt, net_gone, sizeof a->cnt);
    for (struct kd_session *s = kd.sessions; s; s = s->next)
        if (kd_user_sees(c, s->uid))
            net_add(a->cnt, &s->st->net);
    a->faults = kd.faults;
    a->host_id = kd.host_id;
    a->nhosts = kd.nnethosts;
    struct via_net_host_info *hi = (struct via_net_host_info *)(a + 1);
    for (unsigned i = 0; i < kd.nnethosts; i++) {
        const struct kd_host *h = &kd.nethost[i];
        snprintf(hi[i].name, sizeof hi[i].name, "%s", h->name);
        hi[i].host_id = h->host_id;
        hi[i].ip = h->ip;
        hi[i].port = h->port;
        hi[i].up = h->host_id == kd.host_id ? 2 : h->state == KD_HOST_UP;
        for (const struct kd_conn *cn = kd.conns; cn; cn = cn->next)
            hi[i].conns += cn->host == h && cn->state == KD_CONN_ACCEPTED;
    }
}

/*
 * fuzz_ctl.c - libFuzzer target: vipd's control path, from the raw bytes a
 * client writes on its socket to the handler of the request and back.
 *
 * vipd is linked whole except kd_main.c (options, daemon, poll loop) and
 * kd_core.c: this file stands in for them with kd itself, a silent kd_log
 * and a virtual clock the input moves (connection timeouts expire when the
 * input says). Up to three clients are connected by socketpairs and served
 * by the real kd_client_new / kd_client_readable / dispatch / handlers, as
 * the poll loop would serve them; a client that misbehaves is closed and a
 * new one takes its slot. Each request is also given to kd_request_check,
 * the pure check of op, body length and session, and the reply must agree
 * with it.
 *
 * After every step the harness checks vipd's books (the oracle): each
 * session's VI, CQ and region counts, the ptags' use counts, CQ bindings,
 * connection and listener lists, VI states against their connections, the
 * TPT against vipd's private copy; and every reply: its cookie, a reason
 * with every failure, no body with a failure, status a VIP_RETURN.
 *
 * Input: a sequence of records.
 *   request:  sel op:u8 blen:u16le [claim:u32le] body[blen]
 *     sel & 3 (3 -> 0)   the client slot
 *     (sel >> 2) & 15    k: the clock first moves 2^k ms (k = 0: not at all)
 *     sel & 0x40 clear   a request: header {op, len, cookie = record number};
 *     sel & 0x80         len = claim (a lying header), and the client hangs
 *                        up after the body, so vipd sees the truncation
 *   scribble: sel & 0x40 set: target:u8 off:u16le value:u64le, written at
 *             8 * off into a page the slot's session may write (0 status,
 *             1 event, 2 the doorbell page of its first VI, 3 the NIC page),
 *             as a hostile client would.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kd.h"
#include "vipl.h"

/* The harness's own loops over every VI and TPT entry are not what the
 * fuzzer should learn from (nor spend its time tracing). */
#define NO_COV __attribute__((no_sanitize("coverage")))

#define NSLOTS 3
#define MAX_RECORDS 256

/* ---- what kd_core.c provides to the rest of vipd ------------------------------ */

struct kd_state kd;
static uint64_t clock_ns = 1000000000ull;
static int verbose = -1;

void kd_log(enum kd_level lv, const char *fmt, ...)
{
    /* Always formatted, so a bad argument to a format still shows (ASan). */
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (verbose < 0)
        verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "vipd %d: %s\n", (int)lv, line);
}

uint64_t kd_now_ns(void)
{
    return clock_ns;
}

/* ---- the clients ------------------------------------------------------------------ */

struct slot {
    int fd;                 /* our end; -1 = no client */
    struct kd_client *c;    /* vipd's end */
    uint64_t owed[MAX_RECORDS]; /* cookies of deferred requests not answered yet */
    unsigned nowed;
    bool lied; /* it sent a lying header: vipd may answer whatever followed it */
};
static struct slot slots[NSLOTS];
static struct kd_state pristine;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "fuzz_ctl: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

NO_COV static bool client_alive(const struct kd_client *c)
{
    for (const struct kd_client *k = kd.clients; k; k = k->next)
        if (k == c)
            return !k->dead;
    return false;
}

NO_COV static bool client_listed(const struct kd_client *c)
{
    for (const struct kd_client *k = kd.clients; k; k = k->next)
        if (k == c)
            return true;
    return false;
}

static void bigbuf(int fd)
{
    /* Replies are read only after the handler returns: room for the largest. */
    int sz = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
}

static void slot_open(struct slot *s)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    bigbuf(sv[0]);
    bigbuf(sv[1]);
    kd_client_new(sv[1]);
    CHECK(kd.clients && kd.clients->fd == sv[1]);
    s->fd = sv[0];
    s->c = kd.clients;
    s->nowed = 0;
    s->lied = false;
}

static void slot_close(struct slot *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    s->c = NULL;
    s->nowed = 0;
}

/* Read every reply waiting on a slot; `cookie` is the request just served
 * (UINT64_MAX: none). Returns whether its reply came. */
static bool drain(struct slot *s, uint64_t cookie, struct via_ctl_reply_hdr *got)
{
    bool seen = false;
    for (;;) {
        struct via_ctl_reply_hdr h;
        union {
            char buf[CMSG_SPACE(sizeof(int) * 8)];
            struct cmsghdr align;
        } u;
        struct iovec iov = {&h, sizeof h};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                           .msg_controllen = sizeof u.buf};
        ssize_t n = recvmsg(s->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n <= 0)
            break;
        int nfds = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int fds[8];
            CHECK(k <= 8);
            memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)k);
            for (int i = 0; i < k; i++)
                close(fds[i]);
            nfds += k;
        }
        CHECK(!(m.msg_flags & MSG_CTRUNC));
        CHECK(nfds <= CTL_MAX_FDS);
        /* vipd wrote the whole reply before we read: it is all there. */
        CHECK((size_t)n == sizeof h);
        CHECK(h.len <= VIA_CTL_MAX_BODY);
        for (uint32_t left = h.len; left;) {
            char sink[4096];
            ssize_t k = recv(s->fd, sink, left < sizeof sink ? left : sizeof sink, MSG_DONTWAIT);
            CHECK(k > 0);
            left -= (uint32_t)k;
        }
        CHECK(h.status >= VIP_SUCCESS && h.status <= VIP_ERROR_NOT_SUPPORTED);
        CHECK(memchr(h.msg, 0, sizeof h.msg) != NULL);
        if (h.status != VIP_SUCCESS) {
            CHECK(h.msg[0] != 0); /* every failure says why */
            CHECK(h.len == 0 && nfds == 0);
        }
        if (s->lied)
            continue; /* answers to whatever followed the lie: any cookie */
        if (h.cookie == cookie) {
            CHECK(!seen); /* one reply per request */
            seen = true;
            if (got)
                *got = h;
            continue;
        }
        /* A deferred reply: to a request of this client still owed one. */
        unsigned i = 0;
        while (i < s->nowed && s->owed[i] != h.cookie)
            i++;
        CHECK(i < s->nowed);
        s->owed[i] = s->owed[--s->nowed];
    }
    return seen;
}

/* ---- the oracle: vipd's books add up ------------------------------------------------- */

NO_COV static bool session_listed(const struct kd_session *s)
{
    for (const struct kd_session *k = kd.sessions; k; k = k->next)
        if (k == s)
            return true;
    return false;
}

NO_COV static bool conn_listed(const struct kd_conn *cn)
{
    for (const struct kd_conn *k = kd.conns; k; k = k->next)
        if (k == cn)
            return true;
    return false;
}

#define MAX_SESS 16
#define MAX_PTAG_SLOTS 4096

/* One pass over the VIs and one over each session's regions, counting;
 * then every count vipd keeps must be the one found. */
NO_COV static void check_books(void)
{
    static struct kd_session *sess[MAX_SESS];
    static unsigned s_vis[MAX_SESS], cq_bound[MAX_SESS][VIA_MAX_CQ];
    static unsigned p_vis[MAX_PTAG_SLOTS], p_regions[MAX_PTAG_SLOTS];
    unsigned nsess = 0;
    CHECK(kd.nptag_slots <= MAX_PTAG_SLOTS);
    memset(p_vis, 0, kd.nptag_slots * sizeof p_vis[0]);
    memset(p_regions, 0, kd.nptag_slots * sizeof p_regions[0]);
    for (struct kd_session *s = kd.sessions; s; s = s->next) {
        CHECK(nsess < MAX_SESS);
        sess[nsess] = s;
        s_vis[nsess] = 0;
        memset(cq_bound[nsess], 0, sizeof cq_bound[nsess]);
        nsess++;
        CHECK(s->nic >= kd.nic && s->nic < kd.nic + kd.nnics);
        CHECK(client_listed(s->main) && s->main->sess == s && !s->main->attached);
        unsigned ncqs = 0, nregions = 0;
        for (uint32_t id = 0; id < VIA_MAX_CQ; id++)
            if (s->cq[id]) {
                ncqs++;
                CHECK(s->cq[id]->id == id && s->cq[id]->sess == s);
            }
        for (uint32_t i = 0; i < VIA_MAX_TPT; i++) {
            const struct kd_region *g = &s->reg[i];
            const struct via_tpt_entry *e = &s->tpt[i];
            uint32_t gen = atomic_load(&e->gen);
            if (!g->used) {
                CHECK(gen == 0);
                continue;
            }
            nregions++;
            CHECK(gen == g->gen && gen != 0 && e->va == g->va && e->len == g->len &&
                  e->ptag == g->ptag && e->flags == g->flags);
            CHECK(kd_ptag_owned(s, g->ptag));
            CHECK(g->va && g->len && g->va + g->len > g->va);
            p_regions[g->ptag]++;
        }
        CHECK(ncqs == s->ncqs && nregions == s->nregions);
        unsigned nptags = 0;
        for (uint32_t p = 1; p < kd.nptag_slots; p++)
            nptags += kd.ptag[p].sess == s;
        CHECK(nptags == s->nptags && nptags <= VIA_MAX_PTAGS);
    }
    CHECK(nsess == kd.nsessions);

    for (unsigned n = 0; n < kd.nnics; n++) {
        struct kd_nic *nic = &kd.nic[n];
        unsigned nvis = 0;
        for (uint32_t id = 0; id < VIA_MAX_VI; id++) {
            struct kd_vi *vi = nic->vi[id];
            if (!vi)
                continue;
            nvis++;
            unsigned k = 0;
            while (k < nsess && sess[k] != vi->sess)
                k++;
            CHECK(k < nsess); /* its session is alive */
            s_vis[k]++;
            CHECK(vi->id == id && vi->nic == nic && vi->sess->nic == nic);
            CHECK(vi->attr.ptag == 0 || kd_ptag_owned(vi->sess, vi->attr.ptag));
            if (vi->attr.ptag)
                p_vis[vi->attr.ptag]++;
            for (int q = 0; q < 2; q++) {
                struct kd_cq *cq = q ? vi->rcq : vi->scq;
                if (!cq)
                    continue;
                CHECK(cq->sess == vi->sess && vi->sess->cq[cq->id] == cq);
                cq_bound[k][cq->id]++;
            }
            if (vi->state == VIA_VI_PENDING)
                CHECK(vi->conn && vi->conn->state != KD_CONN_ACCEPTED && vi->conn->req_vi == vi);
            if (vi->conn) {
                CHECK(conn_listed(vi->conn));
                if (vi->conn->state == KD_CONN_ACCEPTED)
                    CHECK(vi->conn->vi[vi->side] == vi);
                else
                    CHECK(vi->conn->req_vi == vi && vi->state == VIA_VI_PENDING);
            }
            if (vi->state == VIA_VI_CONNECTED)
                CHECK(vi->conn && vi->conn->state == KD_CONN_ACCEPTED);
        }
        CHECK(nvis == nic->nvis);
    }
    for (unsigned k = 0; k < nsess; k++) {
        CHECK(s_vis[k] == sess[k]->nvis);
        for (uint32_t id = 0; id < VIA_MAX_CQ; id++)
            if (sess[k]->cq[id])
                CHECK(cq_bound[k][id] == sess[k]->cq[id]->nbound);
    }
    for (uint32_t p = 1; p < kd.nptag_slots; p++) {
        const struct kd_ptag *t = &kd.ptag[p];
        if (!t->sess) {
            CHECK(t->nvis == 0 && t->nregions == 0);
            continue;
        }
        CHECK(session_listed(t->sess));
        CHECK(p_vis[p] == t->nvis && p_regions[p] == t->nregions);
    }
    for (struct kd_conn *cn = kd.conns; cn; cn = cn->next) {
        /* (requests are not queued: one that no wait took is answered
         * VIP_NO_MATCH at once and never listed) */
        CHECK(cn->state == KD_CONN_MATCHED || cn->state == KD_CONN_ACCEPTED);
        if (cn->state == KD_CONN_ACCEPTED) {
            CHECK(cn->vi[0] || cn->vi[1]);
            CHECK(cn->chan && cn->chan->conn_id == cn->id);
            for (int k = 0; k < 2; k++)
                CHECK(!cn->vi[k] || (cn->vi[k]->conn == cn && cn->vi[k]->side == k));
        } else {
            CHECK(session_listed(cn->req_sess) && cn->req_vi->conn == cn);
            CHECK(cn->req_vi->sess == cn->req_sess);
            CHECK(!cn->req_client || client_listed(cn->req_client));
            CHECK(cn->dlen <= VIA_MAX_DISCRIM && cn->req_dlen <= VIA_MAX_DISCRIM);
            if (cn->state == KD_CONN_MATCHED)
                CHECK(session_listed(cn->acc_sess));
        }
    }
    for (struct kd_listener *l = kd.listeners; l; l = l->next)
        CHECK(session_listed(l->sess) && client_listed(l->client) &&
              l->dlen <= VIA_MAX_DISCRIM);
}

/* ---- one input ------------------------------------------------------------------------ */

static void scribble(struct slot *sl, uint8_t target, uint16_t off, uint64_t val)
{
    struct kd_session *s = sl->c ? sl->c->sess : NULL;
    if (!s)
        return;
    uint8_t *page = NULL;
    size_t size = 0;
    switch (target & 3) {
    case 0: page = (uint8_t *)s->st; size = sizeof *s->st; break;
    case 1: page = (uint8_t *)s->ev; size = sizeof *s->ev; break;
    case 2:
        for (uint32_t id = 0; id < VIA_MAX_VI && !page; id++)
            if (s->nic->vi[id] && s->nic->vi[id]->sess == s) {
                page = (uint8_t *)s->nic->vi[id]->page;
                size = sizeof *s->nic->vi[id]->page;
            }
        break;
    default: page = (uint8_t *)s->nic->page; size = sizeof *s->nic->page; break;
    }
    if (page)
        memcpy(page + (8u * off) % size, &val, sizeof val);
}

static uint32_t rd16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(const uint8_t *p)
{
    return rd16(p) | rd16(p + 2) << 16;
}

static void run(const uint8_t *data, size_t size)
{
    for (int i = 0; i < NSLOTS; i++)
        slot_open(&slots[i]);
    size_t pos = 0;
    for (uint64_t rec = 1; rec < MAX_RECORDS && pos + 4 <= size; rec++) {
        uint8_t sel = data[pos], op = data[pos + 1];
        uint32_t blen = rd16(data + pos + 2);
        pos += 4;
        struct slot *sl = &slots[(sel & 3) % NSLOTS];
        unsigned k = (sel >> 2) & 15;
        if (k)
            clock_ns += (1ull << k) * 1000000ull;
        if (sl->fd < 0)
            slot_open(sl);

        if (sel & 0x40) {
            if (pos + 8 > size)
                break;
            uint64_t v = (uint64_t)rd32(data + pos) | (uint64_t)rd32(data + pos + 4) << 32;
            pos += 8;
            scribble(sl, op, (uint16_t)blen, v);
        } else {
            uint32_t claim = blen;
            bool lie = sel & 0x80;
            if (lie) {
                if (pos + 4 > size)
                    break;
                claim = rd32(data + pos);
                pos += 4;
            }
            if (blen > size - pos)
                blen = (uint32_t)(size - pos);
            if (!lie)
                claim = blen;
            struct via_ctl_hdr h = {.op = op, .len = claim, .cookie = rec};
            /* What the pure check says of it (a complete, fitting body). */
            struct kd_reply want = {.status = VIP_SUCCESS};
            const struct kd_op *kop = kd_request_check(op, blen, sl->c->sess != NULL, &want);
            CHECK(kop ? want.status == VIP_SUCCESS && kop->fn && kop->body == blen
                      : want.status != VIP_SUCCESS && want.msg[0]);
            bool deferrable = op == VIA_CTL_CONN_WAIT || op == VIA_CTL_CONN_REQUEST;

            struct iovec iov[2] = {{&h, sizeof h}, {(void *)(data + pos), blen}};
            struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
            CHECK(sendmsg(sl->fd, &m, MSG_NOSIGNAL) == (ssize_t)(sizeof h + blen));
            pos += blen;
            if (lie) {
                shutdown(sl->fd, SHUT_WR);
                sl->lied = true;
            }
            struct kd_client *c = sl->c;
            kd_client_readable(c);
            /* A client that hung up: vipd reads on to its end, as its poll
             * loop would on POLLHUP. */
            for (int i = 0; lie && client_alive(c); i++) {
                CHECK(i <= (int)(blen / sizeof h) + 2); /* one request per header at most */
                kd_client_readable(c);
            }
            kd_conn_expire(kd_now_ns());

            struct via_ctl_reply_hdr got;
            bool replied = drain(sl, rec, &got);
            if (!lie && client_alive(c) && !(deferrable && kop)) {
                /* Served at once, and as the pure check said. */
                CHECK(replied);
                if (!kop && blen <= 1024) {
                    CHECK(got.status == want.status);
                    CHECK(strcmp(got.msg, want.msg) == 0);
                }
            }
            if (!replied && deferrable && kop && client_alive(c)) {
                CHECK(sl->nowed < MAX_RECORDS);
                sl->owed[sl->nowed++] = rec;
            }
        }
        /* Other clients may have had deferred replies (a match, a timeout). */
        for (int i = 0; i < NSLOTS; i++)
            if (slots[i].fd >= 0)
                drain(&slots[i], UINT64_MAX, NULL);
        kd_reap_clients();
        for (int i = 0; i < NSLOTS; i++)
            if (slots[i].fd >= 0 && !client_listed(slots[i].c))
                slot_close(&slots[i]);
        check_books();
    }
    /* As vipd does at exit: every session ends, nothing may be left. */
    kd_shutdown_all();
    CHECK(!kd.sessions && !kd.clients && !kd.conns && !kd.listeners && kd.nsessions == 0);
    for (unsigned n = 0; n < kd.nnics; n++)
        CHECK(kd.nic[n].nvis == 0);
    for (int i = 0; i < NSLOTS; i++)
        slot_close(&slots[i]);
    free(kd.ptag);
    kd_trace_free();
    kd = pristine; /* the same ids and clocks for the next input */
    clock_ns = 1000000000ull;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const profiles[VIA_MAX_NICS] = {"native", "native"};
    if (!kd_nic_init(2, profiles, NULL))
        abort();
    kd_remote_init(); /* as vipd's main does: the layers' calls up */
    kd_connect_init();
    pristine = kd;
    for (int i = 0; i < NSLOTS; i++)
        slots[i].fd = -1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size);
    return 0;
}

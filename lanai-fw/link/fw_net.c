/*
 * fw_net.c - the NIC's datagram I/O on the UDP link, and its waker.
 *
 * Each connection to a NIC of another host has a connected UDP socket of
 * its own, made by vipd and owned from then on by the NIC of the process
 * (no relay through vipd). Frames leave in batches (one sendmmsg for what
 * a turn of the NIC published) and arrive in batches (one recvmmsg for
 * what is queued), so the data path pays the kernel's network stack and
 * nothing more.
 *
 * A host thread that polls runs the link itself. For the rest (a receiver
 * asleep in VipRecvWait, a NIC thread asleep) a waker thread per NIC
 * blocks in epoll on the sockets and doubles as the transport's coarse
 * timer: it sets the VI's arrival bit on the NIC's event page and wakes
 * its sleepers (fw_notify) when a frame arrives or a retransmission is
 * due, as a peer on this host would. A link's timer is set by the NIC's
 * turns, which do not wake the waker (that would cost a system call per
 * message): it looks at the timers at least every FW_NET_TICK_MS while it
 * has links, so a retransmission nobody polls for is at most that late.
 *
 * While host threads poll (the NIC's host_polls moves), they take the
 * frames themselves, and a wake per frame would only take a CPU from them
 * (two pollers and their wakers on two cores): the waker then stops
 * watching the sockets and looks again every FW_NET_DOZE_MS; once nobody
 * polls it watches them again (re-arming reports what came meanwhile).
 */
#include "fw_net.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"

#define FW_NET_TICK_MS 20
#define FW_NET_DOZE_MS 1

/* ---- CRC-32C ------------------------------------------------------------------- */
/*
 * Every frame is checked on both ends, so the CRC is on the data path of
 * every byte. The crc32 instruction has a latency of three cycles and a
 * throughput of one: one dependent chain uses a third of it. Long buffers
 * are therefore taken in three lanes at once, and the lanes' CRCs joined:
 * the CRC register is linear, so the state after lanes A then B is A's
 * state carried through len(B) zero bytes, XOR B's state from zero; the
 * carrying is a table lookup per byte of the state (shift tables, made
 * once from the 32 carried unit vectors).
 */

#define CRC_LANE_LONG 2048u /* bytes per lane; three lanes make a block */
#define CRC_LANE_SHORT 256u

static uint32_t crc_table[256];
static uint32_t shift_long[4][256], shift_short[4][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

/* t: the register carried through lane zero bytes, by the register's bytes. */
static void shift_table(uint32_t t[4][256], uint32_t lane)
{
    uint32_t unit[32];
    for (int i = 0; i < 32; i++) {
        uint32_t c = 1u << i;
        for (uint32_t n = 0; n < lane; n++)
            c = crc_table[c & 0xFF] ^ (c >> 8);
        unit[i] = c;
    }
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int j = 0; j < 8; j++)
                if (b >> j & 1)
                    v ^= unit[8 * k + j];
            t[k][b] = v;
        }
}

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
    shift_table(shift_long, CRC_LANE_LONG);
    shift_table(shift_short, CRC_LANE_SHORT);
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint32_t crc_shift(const uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
}

#if defined(__x86_64__)
/* Blocks of three lanes of `lane` bytes while n holds one; returns the register. */
__attribute__((target("sse4.2"))) static uint64_t crc_lanes(uint64_t c, const uint8_t **pp,
                                                            uint64_t *np, uint32_t lane,
                                                            const uint32_t t[4][256])
{
    const uint8_t *p = *pp;
    uint64_t n = *np;
    for (; n >= 3ull * lane; n -= 3ull * lane, p += 3ull * lane) {
        uint64_t a = c, b = 0, d = 0;
        for (uint32_t i = 0; i < lane; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + lane + i, 8);
            memcpy(&w2, p + 2 * lane + i, 8);
            a = __builtin_ia32_crc32di(a, w0);
            b = __builtin_ia32_crc32di(b, w1);
            d = __builtin_ia32_crc32di(d, w2);
        }
        c = crc_shift(t, crc_shift(t, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
    }
    *pp = p;
    *np = n;
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p,
                                                             uint64_t n)
{
    uint64_t c64 = crc_lanes(c, &p, &n, CRC_LANE_LONG, shift_long);
    c64 = crc_lanes(c64, &p, &n, CRC_LANE_SHORT, shift_short);
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
    }
    c = (uint32_t)c64;
    for (; n; n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

/* The byte-wise reference (also where there is no crc32 instruction). */
static uint32_t crc_bytes(uint32_t c, const uint8_t *p, uint64_t len)
{
    while (len--)
        c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

uint32_t via_crc32c(uint32_t crc, const void *buf, uint64_t len)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = buf;
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (crc_hw)
        return ~crc_sse42(c, p, len);
#endif
    return ~crc_bytes(c, p, len);
}

uint32_t via_crc32c_ref(uint32_t crc, const void *buf, uint64_t len)
{
    pthread_once(&crc_once, crc_init);
    return ~crc_bytes(~crc, buf, len);
}

/* ---- batched send and receive -------------------------------------------------------- */

void fw_net_send(struct fw_udp *u, uint8_t *const *buf, const uint32_t *len, unsigned n)
{
    struct mmsghdr m[FW_NET_BATCH];
    struct iovec iov[FW_NET_BATCH];
    while (n) {
        unsigned k = n < FW_NET_BATCH ? n : FW_NET_BATCH;
        for (unsigned i = 0; i < k; i++) {
            iov[i] = (struct iovec){buf[i], len[i]};
            m[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
        }
        int s = sendmmsg(u->sock, m, k, MSG_DONTWAIT);
        if (s < 0) {
            if (errno == EINTR)
                continue;
            /* The kernel's queue is full or the peer's port is closed
             * (ECONNREFUSED): the frames count as lost; the transport
             * sends them again, or gives up on the peer. */
            s = (int)k;
        }
        fw_net_count(&u->cnt->tx_frames, (uint64_t)s);
        fw_net_count(&u->cnt->tx_batches, 1);
        buf += s;
        len += s;
        n -= (unsigned)s;
    }
}

unsigned fw_net_recv(struct fw_udp *u, uint32_t *len)
{
    struct mmsghdr m[FW_NET_BATCH];
    struct iovec iov[FW_NET_BATCH];
    for (unsigned i = 0; i < FW_NET_BATCH; i++) {
        iov[i] = (struct iovec){u->spare[i], FW_NET_FRAME_MAX};
        m[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
    }
    int r;
    do
        r = recvmmsg(u->sock, m, FW_NET_BATCH, MSG_DONTWAIT, NULL);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return 0;
    for (int i = 0; i < r; i++)
        len[i] = (m[i].msg_hdr.msg_flags & MSG_TRUNC) ? 0 : m[i].msg_len; /* 0: too long */
    fw_net_count(&u->cnt->rx_frames, (uint64_t)r);
    fw_net_count(&u->cnt->rx_batches, 1);
    return (unsigned)r;
}

uint64_t fw_net_env_ms(const char *name, uint64_t dflt)
{
    const char *e = getenv(name);
    char *end;
    unsigned long long v = e && *e ? strtoull(e, &end, 10) : 0;
    return e && *e && !*end && v ? v : dflt;
}

/* ---- the waker ----------------------------------------------------------------------- */

struct fw_waker {
    pthread_mutex_t lock;
    struct fw_watch *links; /* under lock */
    _Atomic bool armed;   /* the sockets are watched (the waker writes it) */
    int ep, stopfd, kickfd;
    pthread_t thread;
};

/* Made at the NIC's first UDP link, gone with the NIC (fw_net_nic_fini). */
static pthread_mutex_t wakers_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t waker_timers(struct fw_waker *w, struct fw_nic *nic)
{
    uint64_t now = hal_now_ns(), next = 0;
    pthread_mutex_lock(&w->lock);
    for (struct fw_watch *u = w->links; u; u = u->next) {
        uint64_t d = atomic_load_explicit(&u->due_ns, memory_order_relaxed);
        if (!d)
            continue;
        if (d <= now) {
            atomic_store_explicit(&u->due_ns, 0, memory_order_relaxed);
            fw_notify(nic->ev, u->vi_id);
        } else if (!next || d < next) {
            next = d;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return next;
}

struct waker_arg {
    struct fw_waker *w;
    struct fw_nic *nic;
};

/* Watch the sockets (arm) or stop watching them. Arming visits the VIs
 * that asked (visit_on_arm). */
static void waker_arm(struct fw_waker *w, struct fw_nic *nic, bool on)
{
    pthread_mutex_lock(&w->lock);
    atomic_store_explicit(&w->armed, on, memory_order_release);
    for (struct fw_watch *u = w->links; u; u = u->next) {
        struct epoll_event e = {.events = on ? EPOLLIN | EPOLLET : 0, .data.u32 = u->vi_id};
        if (u->fd >= 0)
            epoll_ctl(w->ep, EPOLL_CTL_MOD, u->fd, &e);
        if (on && atomic_load_explicit(&u->visit_on_arm, memory_order_relaxed))
            fw_notify(nic->ev, u->vi_id);
    }
    pthread_mutex_unlock(&w->lock);
}

bool fw_net_armed(struct fw_nic *nic)
{
    struct fw_waker *w = atomic_load_explicit(&nic->waker, memory_order_acquire);
    return w && atomic_load_explicit(&w->armed, memory_order_acquire);
}

static void *waker_main(void *arg)
{
    struct waker_arg a = *(struct waker_arg *)arg;
    free(arg);
    struct epoll_event ev[16];
    uint32_t polls_seen = atomic_load_explicit(&a.nic->host_polls, memory_order_relaxed);
    for (;;) {
        uint32_t polls = atomic_load_explicit(&a.nic->host_polls, memory_order_relaxed);
        bool polled = polls != polls_seen &&
                      !atomic_load_explicit(&a.nic->ev->sleepers, memory_order_acquire);
        polls_seen = polls;
        if (polled == atomic_load(&a.w->armed))
            waker_arm(a.w, a.nic, !polled);
        uint64_t next = waker_timers(a.w, a.nic);
        int ms = polled ? FW_NET_DOZE_MS : FW_NET_TICK_MS;
        if (next) {
            uint64_t now = hal_now_ns();
            uint64_t d = next > now ? (next - now + 999999) / 1000000 : 0;
            ms = d < (uint64_t)ms ? (int)d : ms;
        }
        int n = epoll_wait(a.w->ep, ev, 16, ms);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u32 == UINT32_MAX)
                return NULL; /* the stop eventfd */
            if (ev[i].data.u32 == UINT32_MAX - 1) { /* a sleeper's kick: look again */
                uint64_t v;
                if (read(a.w->kickfd, &v, sizeof v) < 0) {
                    /* nothing to take: another look took it */
                }
                continue; /* the sleeper counts: the next look arms */
            }
            fw_notify(a.nic->ev, ev[i].data.u32);
        }
    }
}

static struct fw_waker *waker_of(struct fw_nic *nic, bool make)
{
    pthread_mutex_lock(&wakers_lock);
    struct fw_waker *w = atomic_load(&nic->waker);
    if (!w && make && (w = calloc(1, sizeof *w))) {
        pthread_mutex_init(&w->lock, NULL);
        w->armed = true;
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        w->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
        struct epoll_event k = {.events = EPOLLIN, .data.u32 = UINT32_MAX - 1};
        struct waker_arg *a = malloc(sizeof *a);
        if (a)
            *a = (struct waker_arg){w, nic};
        if (w->ep < 0 || w->stopfd < 0 || w->kickfd < 0 || !a ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->stopfd, &e) < 0 ||
            epoll_ctl(w->ep, EPOLL_CTL_ADD, w->kickfd, &k) < 0 ||
            pthread_create(&w->thread, NULL, waker_main, a) != 0) {
            if (w->ep >= 0)
                close(w->ep);
            if (w->stopfd >= 0)
                close(w->stopfd);
            if (w->kickfd >= 0)
                close(w->kickfd);
            free(a);
            free(w);
            w = NULL;
        } else {
            atomic_store_explicit(&nic->waker, w, memory_order_release);
        }
    }
    pthread_mutex_unlock(&wakers_lock);
    return w;
}

bool fw_net_watch(struct fw_nic *nic, struct fw_watch *u)
{
    struct fw_waker *w = waker_of(nic, true);
    if (!w)
        return false;
    /* Edge-triggered: one wake per arrival, none while the queue is
     * merely not empty (a poller is taking it). */
    pthread_mutex_lock(&w->lock);
    struct epoll_event e = {.events = w->armed ? EPOLLIN | EPOLLET : 0, .data.u32 = u->vi_id};
    if (u->fd >= 0 && epoll_ctl(w->ep, EPOLL_CTL_ADD, u->fd, &e) < 0) {
        pthread_mutex_unlock(&w->lock);
        return false;
    }
    u->next = w->links;
    w->links = u;
    pthread_mutex_unlock(&w->lock);
    return true;
}

void fw_net_unwatch(struct fw_nic *nic, struct fw_watch *u)
{
    struct fw_waker *w = waker_of(nic, false);
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    if (u->fd >= 0)
        epoll_ctl(w->ep, EPOLL_CTL_DEL, u->fd, NULL);
    for (struct fw_watch **pp = &w->links; *pp; pp = &(*pp)->next)
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    pthread_mutex_unlock(&w->lock);
}

void fw_net_will_sleep(struct fw_nic *nic)
{
    struct fw_waker *w = atomic_load_explicit(&nic->waker, memory_order_acquire);
    if (!w || atomic_load_explicit(&w->armed, memory_order_acquire))
        return;
    uint64_t one = 1;
    if (write(w->kickfd, &one, sizeof one) < 0) {
        /* full: a kick is pending already */
    }
}

void nic_will_sleep(struct fw_nic *nic)
{
    fw_net_will_sleep(nic);
}

void fw_net_nic_fini(struct fw_nic *nic)
{
    pthread_mutex_lock(&wakers_lock);
    struct fw_waker *w = atomic_load(&nic->waker);
    atomic_store(&nic->waker, NULL);
    pthread_mutex_unlock(&wakers_lock);
    if (!w)
        return;
    uint64_t one = 1;
    if (write(w->stopfd, &one, sizeof one) < 0) {
        /* an eventfd write fails only on overflow: it is set already */
    }
    pthread_join(w->thread, NULL);
    close(w->ep);
    close(w->stopfd);
    close(w->kickfd);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

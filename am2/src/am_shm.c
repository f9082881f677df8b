/*
 * am_shm.c - the multi-protocol path: endpoints of processes on the same
 * host exchange messages through shared-memory queues instead of the NIC
 * (Lumetta, Mainwaring and Culler, "Multi-Protocol Active Messages on a
 * Cluster of SMP's"). On unless AM2_SHM=0.
 *
 * Every endpoint owns one receive queue in a POSIX shared-memory object
 * named after it (/am2-<pid>-<id>). Any number of senders enqueue into it
 * without a lock: a sender claims a cell by compare-and-swap on the tail
 * ticket, fills it, and publishes it through the cell's sequence number;
 * the owner alone dequeues (a bounded multi-producer queue with per-cell
 * sequence numbers). A message in a cell is exactly what the NIC would
 * have carried (struct am_wire and the medium payload), preceded by the
 * sender's name, so the receiving side runs the same checks and handlers
 * (am_dispatch.c) and answers the same way.
 *
 * A long message goes as pieces of data (LONGDATA) that the destination
 * copies into its segment (another process's memory, out of the sender's
 * reach), then its header. Credits are the peer's, whichever path a
 * message takes.
 *
 * A full queue never makes a handler wait: what cannot be enqueued waits
 * in the sender's own list, in order, and AM_Poll and each turn of
 * AM_WaitSema retry it; the owner rings its peers when it frees cells that
 * a sender wanted (a sender asleep in AM_WaitSema, its last cells waiting,
 * and an owner that can answer only once they arrive would otherwise both
 * sleep for ever). An owner
 * that frees its endpoint marks its queue closed; a sender that finds it
 * closed, or its process gone, treats the peer as broken (EBADENDPOINT).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "am_int.h"

#define SHM_MAGIC 0xA2540003u /* 2: the bell; 3: want_room */
#define SHM_SLOTS 128u /* a power of two */

struct shm_cell {
    _Atomic uint64_t seq;
    uint32_t len; /* bytes of msg */
    uint32_t pad;
    en_t src;
    uint8_t msg[AM_SLOT];
};

struct am_shmq {
    uint32_t magic, slots;
    _Atomic uint32_t closed;
    uint32_t owner_pid;
    /* The owner asleep in AM_WaitSema (am_shm_sleep) waits on bell, a
     * futex, with sleeping set; a sender that publishes a cell and then
     * sees sleeping rings it. Both sides store, fence, then load the
     * other's word, so one of them always sees the other. */
    _Atomic uint32_t bell;
    _Atomic uint32_t sleeping;
    /* A sender found the queue full and keeps what did not fit (it may
     * be asleep in AM_WaitSema): the owner, having freed cells, rings its
     * peers' queues, so that a sleeping sender wakes and sends the rest. */
    _Atomic uint32_t want_room;
    _Atomic uint64_t tail __attribute__((aligned(64)));
    uint64_t head __attribute__((aligned(64))); /* the owner's only */
    struct shm_cell cell[] __attribute__((aligned(64)));
};

#define SHM_BYTES (sizeof(struct am_shmq) + SHM_SLOTS * sizeof(struct shm_cell))

/* A message that did not fit yet. */
struct am_pend {
    struct am_pend *next;
    size_t len;
    uint8_t msg[];
};

static void shm_name(const en_t *n, char out[40])
{
    snprintf(out, 40, "/am2-%08x-%06x", (unsigned)n->pid, (unsigned)(n->id & 0xFFFFFFu));
}

int am_shm_create(struct am2_ep *ep)
{
    char name[40];
    shm_name(&ep->name, name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) { /* left by a dead process with our pid */
        shm_unlink(name);
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (fd < 0)
        return am_fail(AM_ERR_RESOURCE, "shm_open %s: %s", name, strerror(errno));
    void *m = MAP_FAILED;
    if (ftruncate(fd, (off_t)SHM_BYTES) == 0)
        m = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        shm_unlink(name);
        return am_fail(AM_ERR_RESOURCE, "mapping %s: %s", name, strerror(errno));
    }
    struct am_shmq *q = m;
    q->slots = SHM_SLOTS;
    q->owner_pid = ep->name.pid;
    for (uint32_t i = 0; i < SHM_SLOTS; i++)
        atomic_store_explicit(&q->cell[i].seq, i, memory_order_relaxed);
    atomic_store_explicit(&q->tail, 0, memory_order_relaxed);
    q->head = 0;
    atomic_store_explicit(&q->closed, 0, memory_order_relaxed);
    __atomic_store_n(&q->magic, SHM_MAGIC, __ATOMIC_RELEASE);
    ep->shmq = q;
    return AM_OK;
}

void am_shm_destroy(struct am2_ep *ep)
{
    if (!ep->shmq)
        return;
    char name[40];
    shm_name(&ep->name, name);
    atomic_store_explicit(&ep->shmq->closed, 1, memory_order_release);
    munmap(ep->shmq, SHM_BYTES);
    shm_unlink(name);
    ep->shmq = NULL;
}

/* The peer's queue, if it is on this host and has one. */
bool am_shm_attach(struct am_peer *p)
{
    if (p->shm_tried)
        return p->shmq != NULL;
    p->shm_tried = true;
    if (!am_g.shm || memcmp(p->name.nic, p->ep->name.nic, 4) != 0)
        return false;
    char name[40];
    shm_name(&p->name, name);
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return false;
    void *m = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return false;
    struct am_shmq *q = m;
    if (__atomic_load_n(&q->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC || q->slots != SHM_SLOTS ||
        q->owner_pid != p->name.pid) {
        munmap(m, SHM_BYTES);
        return false;
    }
    p->shmq = q;
    return true;
}

void am_shm_detach(struct am_peer *p)
{
    while (p->pend) {
        struct am_pend *x = p->pend;
        p->pend = x->next;
        free(x);
    }
    p->pend_tail = NULL;
    if (p->shmq)
        munmap(p->shmq, SHM_BYTES);
    p->shmq = NULL;
}

/* Claim a cell by CAS on the tail; false when the queue is full. */
static void ring(struct am_shmq *q)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&q->sleeping, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&q->bell, 1, memory_order_seq_cst);
        syscall(SYS_futex, &q->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}

/* Wake the endpoint's own sleeper (another thread of ours: a connection
 * request came, a local message was queued). */
void am_shm_ring(struct am2_ep *ep)
{
    if (ep->shmq)
        ring(ep->shmq);
}

/* Sleep until a sender rings the endpoint's queue, or ms pass. */
void am_shm_sleep(struct am2_ep *ep, unsigned ms)
{
    struct am_shmq *q = ep->shmq;
    uint32_t b = atomic_load_explicit(&q->bell, memory_order_seq_cst);
    atomic_store_explicit(&q->sleeping, 1, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
    if (!am_shm_pending(ep)) {
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        syscall(SYS_futex, &q->bell, FUTEX_WAIT, b, &ts, NULL, 0);
    }
    atomic_store_explicit(&q->sleeping, 0, memory_order_relaxed);
}

static bool enqueue(struct am_shmq *q, const en_t *src, const uint8_t *msg, size_t len)
{
    uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    struct shm_cell *c;
    for (;;) {
        c = &q->cell[pos & (SHM_SLOTS - 1)];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed))
                break;
        } else if (diff < 0) {
            return false;
        } else {
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
        }
    }
    c->src = *src;
    c->len = (uint32_t)len;
    memcpy(c->msg, msg, len);
    atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
    ring(q);
    return true;
}

static bool peer_gone(struct am_peer *p)
{
    return atomic_load_explicit(&p->shmq->closed, memory_order_acquire) ||
           (kill((pid_t)p->name.pid, 0) != 0 && errno == ESRCH);
}

/* Enqueue, or ask the owner to ring us when it frees cells and try once
 * more (it may have freed them between our look and the ask). */
static bool enqueue_or_ask(struct am_shmq *q, const en_t *src, const uint8_t *msg, size_t len)
{
    if (enqueue(q, src, msg, len))
        return true;
    atomic_store_explicit(&q->want_room, 1, memory_order_seq_cst);
    return enqueue(q, src, msg, len);
}

/* Retry what waits, in order. */
void am_shm_flush(struct am_peer *p)
{
    while (p->pend && p->state != PEER_BROKEN) {
        struct am_pend *x = p->pend;
        if (!enqueue_or_ask(p->shmq, &p->ep->name, x->msg, x->len)) {
            if (peer_gone(p))
                am_peer_broken(p, "its endpoint is gone (shared memory)");
            return;
        }
        p->pend = x->next;
        if (!p->pend)
            p->pend_tail = NULL;
        free(x);
    }
}

void am_shm_flush_ep(struct am2_ep *ep)
{
    if (!ep->has_pend)
        return;
    bool left = false;
    for (struct am_peer *p = ep->peers; p; p = p->next)
        if (p->pend) {
            am_shm_flush(p);
            left |= p->pend != NULL;
        }
    ep->has_pend = left;
}

int am_shm_send(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len)
{
    if (p->state == PEER_BROKEN)
        return am_fail(AM_ERR_RESOURCE, "the peer's endpoint is gone");
    if (atomic_load_explicit(&p->shmq->closed, memory_order_acquire)) {
        am_peer_broken(p, "its endpoint was freed (shared memory)");
        return am_fail(AM_ERR_RESOURCE, "the peer's endpoint is gone");
    }
    uint8_t msg[AM_SLOT];
    memcpy(msg, w, sizeof *w);
    if (len)
        memcpy(msg + sizeof *w, payload, len);
    size_t n = sizeof *w + len;
    if (p->pend)
        am_shm_flush(p);
    if (!p->pend && enqueue_or_ask(p->shmq, &p->ep->name, msg, n))
        return AM_OK;
    struct am_pend *x = malloc(sizeof *x + n);
    if (!x)
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    p->ep->st.retransmits++;
    p->ep->has_pend = true;
    x->next = NULL;
    x->len = n;
    memcpy(x->msg, msg, n);
    if (p->pend_tail)
        p->pend_tail->next = x;
    else
        p->pend = x;
    p->pend_tail = x;
    return AM_OK;
}

/* A long message through shared memory: the data in pieces the
 * destination copies into its segment, then the header (one queue from
 * one sender keeps their order). The source may be reused at once. */
int am_shm_send_long(struct am_peer *p, struct am_wire *w, const uint8_t *src)
{
    for (size_t off = 0; off < w->nbytes; off += AM2_MAX_MEDIUM) {
        size_t n = w->nbytes - off < AM2_MAX_MEDIUM ? w->nbytes - off : AM2_MAX_MEDIUM;
        struct am_wire d = {.kind = AMW_LONGDATA, .offset = w->offset + off, .nbytes = (uint32_t)n};
        int r = am_shm_send(p, &d, src + off, n);
        if (r != AM_OK)
            return r;
    }
    w->seg_gen = AM_GEN_PLACED;
    return am_shm_send(p, w, NULL, 0);
}

/* Hand what arrived in the endpoint's queue (at most budget) to deliver:
 * the dispatch, which answers through this queue, so it is passed down
 * (am_poll.c) rather than called. */
int am_shm_poll(struct am2_ep *ep, int budget, am_deliver_fn *deliver)
{
    struct am_shmq *q = ep->shmq;
    int n = 0;
    while (q && n < budget) {
        uint64_t pos = q->head;
        struct shm_cell *c = &q->cell[pos & (SHM_SLOTS - 1)];
        if (atomic_load_explicit(&c->seq, memory_order_acquire) != pos + 1)
            break;
        struct am_peer *p = c->src.magic == AM2_EN_MAGIC ? am_peer_get(ep, &c->src) : NULL;
        if (p && !am_shm_attach(p))
            p = NULL; /* cannot answer it: drop */
        if (p)
            deliver(p, (const struct am_wire *)c->msg, c->len);
        atomic_store_explicit(&c->seq, pos + SHM_SLOTS, memory_order_release);
        q->head = pos + 1;
        n++;
        if (!ep->shmq) /* a handler freed... (not allowed; defensive) */
            break;
    }
    /* Cells freed that a sender wanted: ring whoever may be waiting. */
    if (n && q && atomic_load_explicit(&q->want_room, memory_order_relaxed) &&
        atomic_exchange(&q->want_room, 0))
        for (struct am_peer *p = ep->peers; p; p = p->next)
            if (p->shmq)
                ring(p->shmq);
    return n;
}

/* In the credit wait: is the peer still there? */
bool am_shm_peer_alive(struct am_peer *p)
{
    if (!p->shmq)
        return true;
    if (peer_gone(p)) {
        am_peer_broken(p, "its process or endpoint is gone (shared memory)");
        return false;
    }
    return true;
}

/* Is a message waiting in the endpoint's queue? */
bool am_shm_pending(struct am2_ep *ep)
{
    struct am_shmq *q = ep->shmq;
    return q && atomic_load_explicit(&q->cell[q->head & (SHM_SLOTS - 1)].seq,
                                     memory_order_acquire) == q->head + 1;
}

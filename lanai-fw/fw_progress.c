/*
 * fw_progress.c - progress: the NIC's visits of its VIs, and a VI's turn.
 *
 * Whoever lends the NIC a CPU (a host thread in a VIPL call, or the NIC's
 * own thread) enters through nic_vi_progress / nic_progress and runs a VI's
 * stages under that VI's lock. Which VIs need a visit is kept in three
 * bitmaps by VI id:
 *   ev->arrived  set by the peer NIC after it published a packet for us
 *                (or freed room we waited for), on our event page;
 *   work         set by ourselves: a stalled send, a wake owed to a peer,
 *                an answer the link had no room for;
 *   held         a paced effect held until its modelled time; visited
 *                only once real time reaches held_min.
 * A visitor takes a work or held bit with an atomic exchange before it
 * looks at the VI, so work flagged after the exchange sets the bit again.
 * An arrival bit is level-triggered: it stays set while the VI is busy, so
 * a streaming peer finds it set and pays nothing for it, and is cleared
 * only for a VI idle a while, with a barrier and one more look (clear_idle;
 * fw_updt.c states the ordering).
 *
 * VIs are reference-counted: the table holds one reference and each
 * visitor one more while it runs the VI, so nic_vi_destroy on one thread
 * never frees a VI another thread is progressing.
 */
#include "via_spec.h"

#include "fw.h"
#include "fw_link.h"
#include "fw_hal.h"

/* ---- VIs: the table and references -------------------------------------------- */

struct fw_vi *fw_vi_get(struct fw_nic *nic, unsigned id)
{
    pthread_mutex_lock(&nic->lock);
    struct fw_vi *vi = id < VIA_MAX_VI ? nic->vis[id] : NULL;
    if (vi)
        atomic_fetch_add_explicit(&vi->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&nic->lock);
    return vi;
}

void fw_vi_put(struct fw_vi *vi)
{
    atomic_fetch_sub_explicit(&vi->refs, 1, memory_order_release);
}

/* ---- progress ------------------------------------------------------------------------ */

/* A cheap fingerprint of a VI's pipeline positions: did a visit move it? */
static uint64_t vi_sig(const struct fw_vi *vi)
{
    return (uint64_t)vi->req.sq.head * 31u + vi->resp.rq.head * 17u + vi->req.sq.tail * 7u +
           vi->resp.rq.tail * 5u + vi->resp.pkts * 3u + vi->req.msg.off + vi->comp.acked +
           (uint64_t)vi->req.state + vi->resp.rd.off + (vi->wake_peer ? 1u : 0u);
}

static void held_note(struct fw_vi *vi)
{
    struct fw_nic *nic = vi->nic;
    unsigned id = vi->vi_id;
    atomic_fetch_or_explicit(&nic->held[id / 64], 1ull << (id % 64), memory_order_release);
    uint64_t cur = atomic_load_explicit(&nic->held_min, memory_order_relaxed);
    while (vi->held < cur &&
           !atomic_compare_exchange_weak_explicit(&nic->held_min, &cur, vi->held,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

static void vi_settle(struct fw_vi *vi)
{
    if (vi->chan && vi->link.ops->turn && vi->link.ops->turn(&vi->link) == UINT64_MAX)
        fw_link_failed(vi);
    fw_vi_wakes(vi);
    if (vi->held)
        held_note(vi);
    atomic_store_explicit(&vi->quiet,
                          vi->chan && !vi->held && !vi->wake_peer &&
                              vi->req.state == FW_TX_IDLE && vi->req.sq.head == vi->req.sq.tail &&
                              !vi->resp.ack_owed && !vi->resp.nak_owed && !vi->resp.rd.active &&
                              !vi->in_error,
                          memory_order_release);
}

/* The send doorbell's turn (vi->lock held): only the send pipeline. The
 * receive side is not looked at on a post: its link's head is a line the
 * peer writes, and reading it would cost a post a cache miss for nothing. */
void fw_vi_run_tx(struct fw_vi *vi)
{
    vi->held = 0;
    fw_tx_progress(vi);
    vi_settle(vi);
}

/* Run one VI's pipelines as far as they go (vi->lock held). may_wake:
 * the caller may pay for a wake owed to the peer (not a post). */
void fw_vi_run(struct fw_vi *vi, bool may_wake)
{
    vi->held = 0;
    if (vi->wake_peer && may_wake) {
        vi->wake_peer = false;
        fw_notify_peer(vi);
    }
    bool tx_work = vi->req.state != FW_TX_IDLE || vi->req.sq.head != vi->req.sq.tail ||
                   atomic_load_explicit(&vi->db->sq.prod, memory_order_acquire) !=
                       atomic_load_explicit(&vi->db->sq.cons, memory_order_relaxed);
    if (tx_work)
        fw_tx_progress(vi);
    fw_rx_progress(vi);
    /* An ACK or NAK just taken may complete a send waiting for it; only
     * then is a closed or broken link the VI's error. */
    if (vi->req.state != FW_TX_IDLE)
        fw_tx_progress(vi);
    fw_link_check(vi);
    vi_settle(vi);
}

/* Nothing for the NIC to do on this VI but wait for the link? Read without
 * the VI's lock: every word is one the NIC would look at first anyway
 * (doorbell rings, the link's head and tail, the channel state), and the
 * quiet flag says the last run left nothing pending besides. A host that
 * polls in a loop then pays a few loads per turn, not a lock. */
static bool vi_quiet(struct fw_vi *vi)
{
    if (!atomic_load_explicit(&vi->quiet, memory_order_acquire))
        return false;
    struct via_chan *chan = atomic_load_explicit(&vi->poll_chan, memory_order_relaxed);
    struct via_chan_dir *in = atomic_load_explicit(&vi->poll_dir, memory_order_relaxed);
    if (!chan || !in)
        return false;
    const struct via_vi_page *db = vi->db;
    return !fw_link_ready(in) &&
           atomic_load_explicit(&db->rq.prod, memory_order_relaxed) ==
               atomic_load_explicit(&db->rq.cons, memory_order_relaxed) &&
           atomic_load_explicit(&db->sq.prod, memory_order_relaxed) ==
               atomic_load_explicit(&db->sq.cons, memory_order_relaxed) &&
           atomic_load_explicit(&chan->state, memory_order_relaxed) == VIA_CHAN_OPEN;
}

/* An arrival bit stays set while its VI is busy (level-triggered: a
 * producer that finds it set does nothing more) and is cleared once the VI
 * has been idle this long. */
#define FW_BIT_IDLE_NS 1000000u

/* Visit one VI (run its stages). *idle: it is gone, or this visit moved
 * nothing and none has for FW_BIT_IDLE_NS. */
static uint64_t visit(struct fw_nic *nic, unsigned id, bool *did, bool *left, uint64_t now,
                      bool *idle)
{
    *idle = false;
    struct fw_vi *vi = fw_vi_get(nic, id);
    if (!vi) {
        *idle = true;
        return 0;
    }
    if (left) {
        /* The NIC's thread leaves alone a VI a host thread polls (it is
         * looked after), and never waits for one that is in it: it looks
         * again later (the bit stays set). */
        uint32_t hp = atomic_load_explicit(&vi->host_polls, memory_order_relaxed);
        bool polled = hp != vi->thread_seen;
        vi->thread_seen = hp;
        if (polled || !fw_trylock(&vi->lock)) {
            fw_want_visit(vi);
            /* A host thread that polls the VI, or runs it now (a long
             * turn: a network link's system calls), looks after it; a
             * paced post that holds the lock a moment does not, nor does
             * a CQ's poller, which visits only the VIs flagged for it (a
             * network link's arrivals flag none while the waker leaves
             * its descriptors to pollers: AM-2 across hosts lost peers). */
            if (polled || atomic_load_explicit(&vi->host_in, memory_order_relaxed))
                *left = true;
            atomic_store_explicit(&vi->busy_ns, now, memory_order_relaxed);
            fw_vi_put(vi);
            return 0;
        }
    } else {
        fw_lock(&vi->lock);
    }
    uint64_t before = vi_sig(vi);
    fw_vi_run(vi, true);
    if (vi_sig(vi) != before) {
        *did = true;
        atomic_store_explicit(&vi->busy_ns, now, memory_order_relaxed);
    } else {
        *idle = now - atomic_load_explicit(&vi->busy_ns, memory_order_relaxed) >= FW_BIT_IDLE_NS;
    }
    uint64_t held = vi->held;
    fw_unlock(&vi->lock);
    fw_vi_put(vi);
    return held;
}

static inline uint64_t take(_Atomic uint64_t *w)
{
    return atomic_load_explicit(w, memory_order_relaxed) ? atomic_exchange(w, 0) : 0;
}

static inline void held_min_of(uint64_t *held_min, uint64_t h)
{
    if (h && (!*held_min || h < *held_min))
        *held_min = h;
}

/* Clear the arrival bits of idle VIs: a producer that saw a bit set before
 * the clear may have a packet not yet visible to us (it skipped the fence,
 * fw_updt.c), so after the barrier each VI is looked at once more; one
 * with something to do gets its bit back. */
static uint64_t clear_idle(struct fw_nic *nic, unsigned w, uint64_t quiet, bool *did, bool *left,
                           uint64_t now)
{
    _Atomic uint64_t *word = &nic->ev->arrived[w];
    uint64_t held_min = 0;
    atomic_fetch_and(word, ~quiet);
    fw_bits_barrier();
    while (quiet) {
        unsigned b = (unsigned)__builtin_ctzll(quiet);
        quiet &= quiet - 1;
        bool idle, moved = false;
        uint64_t h = visit(nic, w * 64 + b, &moved, left, now, &idle);
        if (moved)
            *did = true;
        if (!idle)
            atomic_fetch_or(word, 1ull << b);
        held_min_of(&held_min, h);
    }
    return held_min;
}

/* Every connected VI gets a visit this often, whatever the arrival bits
 * say: they are on the event page, which every peer of ours may write
 * (clearing them would otherwise hide the other peers' packets for good). */
#define FW_SWEEP_NS 100000000u

static bool sweep_due(struct fw_nic *nic, uint64_t now)
{
    uint64_t next = atomic_load_explicit(&nic->sweep_next, memory_order_relaxed);
    return now >= next &&
           atomic_compare_exchange_strong(&nic->sweep_next, &next, now + FW_SWEEP_NS);
}

uint64_t fw_progress(struct fw_nic *nic, bool *did, bool *left)
{
    uint64_t now = hal_now_ns(), held_min = 0;
    uint64_t model_now = fw_vclock_on() ? fw_vclock_now() : now; /* one clock read */
    bool held_due = atomic_load_explicit(&nic->held_min, memory_order_relaxed) <= model_now;
    if (held_due)
        atomic_store_explicit(&nic->held_min, UINT64_MAX, memory_order_relaxed);
    bool sweep = sweep_due(nic, now);
    for (unsigned w = 0; w < VIA_MAX_VI / 64; w++) {
        uint64_t arrived = atomic_load_explicit(&nic->ev->arrived[w], memory_order_relaxed);
        uint64_t bits = arrived | take(&nic->work[w]), quiet = 0;
        if (held_due)
            bits |= take(&nic->held[w]);
        if (sweep)
            bits |= atomic_load_explicit(&nic->linked[w], memory_order_relaxed);
        while (bits) {
            unsigned b = (unsigned)__builtin_ctzll(bits);
            bits &= bits - 1;
            bool idle;
            held_min_of(&held_min, visit(nic, w * 64 + b, did, left, now, &idle));
            if (idle)
                quiet |= arrived & (1ull << b);
        }
        if (quiet)
            held_min_of(&held_min, clear_idle(nic, w, quiet, did, left, now));
    }
    uint64_t pending = atomic_load_explicit(&nic->held_min, memory_order_relaxed);
    if (pending != UINT64_MAX && (!held_min || pending < held_min))
        held_min = pending;
    return held_min;
}

/* Lossy when threads race, which is fine: the NIC thread only asks
 * whether a counter moved. */
static inline void bump(_Atomic uint32_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void host_polled(struct fw_nic *nic)
{
    bump(&nic->host_polls);
}

void nic_mem_fence(struct fw_nic *nic)
{
    if (!nic)
        return;
    /* Only a linked VI can be in a turn that copies a peer's RDMA (it is
     * linked and unlinked under its lock): one word per 64 VIs to read. */
    for (unsigned w = 0; w < VIA_MAX_VI / 64; w++)
        for (uint64_t b = atomic_load_explicit(&nic->linked[w], memory_order_acquire); b;
             b &= b - 1) {
            struct fw_vi *vi = fw_vi_get(nic, w * 64 + (unsigned)__builtin_ctzll(b));
            if (!vi)
                continue;
            fw_lock(&vi->lock);
            fw_unlock(&vi->lock);
            fw_vi_put(vi);
        }
}

uint64_t nic_progress(struct fw_nic *nic, bool host)
{
    bool did = false;
    if (host) {
        host_polled(nic);
        bump(&nic->host_polls_all); /* every VI is looked after */
    }
    return fw_progress(nic, &did, NULL);
}

bool nic_vi_busy(struct fw_vi *vi, bool host)
{
    if (host) {
        host_polled(vi->nic);
        bump(&vi->host_polls);
    }
    return !vi_quiet(vi);
}

uint64_t nic_vi_turn_locked(struct fw_vi *vi, bool host)
{
    atomic_store_explicit(&vi->host_in, host, memory_order_relaxed);
    fw_vi_run(vi, true);
    atomic_store_explicit(&vi->host_in, false, memory_order_relaxed);
    return vi->held;
}

uint64_t nic_vi_progress(struct fw_vi *vi, bool host)
{
    if (!nic_vi_busy(vi, host))
        return 0;
    fw_lock(&vi->lock);
    uint64_t held = nic_vi_turn_locked(vi, host);
    fw_unlock(&vi->lock);
    return held;
}


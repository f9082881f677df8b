/*
 * fw_link_ofi.c - the libfabric link: the link operations (fw_link.h) over
 * a libfabric reliable-datagram endpoint of the VI's own (fw_ofi.c).
 *
 * A vipd started with `--link ofi` makes its connections to other hosts
 * VIA_LINK_OFI: the channel comes with the connected UDP socket vipd made
 * for it, as on the UDP link, but here the socket only carries the meeting
 * (each NIC's endpoint name, which exists only once the process opened its
 * endpoint). After that every packet is one fabric message: the wire header
 * and its payload, written by the pipelines straight into a registered send
 * slot. The fabric keeps messages whole, in order and delivered once, so
 * the NIC-to-NIC transport of the UDP link (fw_rtx.c) has nothing to do
 * here: reliability is the fabric's, and a fabric error breaks the link.
 *
 * States (one helper each, ofi_state_name for traces):
 *   MEET  the names cross on the UDP socket: a hello every OFI_HELLO_NS
 *         saying whether we have the peer's name and whether we know it
 *         has ours; a hello that asks is answered at once. The peer's name
 *         in our address vector ends it (the peer learns we have its name
 *         from our hellos, from our "up" message, or from any fabric frame
 *         of ours: only a peer holding our name can send one).
 *         Not met within OFI_MEET_TIMEOUTS times VIP_NET_TIMEOUT_MS:
 *         FAILED (the peer's process attaches its end when its connect
 *         call returns, which on a loaded host may be seconds later; a
 *         peer that died is vipd's to report, as a closed connection).
 *   UP    packets flow; hellos go on until the peer shows it has our name.
 *   FAILED the link is broken: the turn says so once (UINT64_MAX). A
 *         fabric error does it, and on a reliable VI so does a peer that
 *         stopped (the fabric cannot tell): silent for VIP_NET_TIMEOUT_MS
 *         while a packet of ours waits for its answer (an ACK, a read's
 *         response), or taking none of our frames for that long while
 *         some wait to go (its buffers are full).
 *
 * Waking a NIC that stopped polling. The endpoint's CQ has no wait object
 * (fw_ofi.c: it would cost every message a signal), so a NIC whose threads
 * all sleep cannot see a frame arrive. It tells its peer instead: when a
 * thread of ours is about to sleep, or the waker watches because nobody
 * polls (fw_net_armed), the turn sends ASLEEP(n), n the frames taken so
 * far; the peer then "nudges" us, a datagram on the meeting's UDP socket,
 * which the waker watches, after every visit in which it sent us a frame,
 * and at once if it had sent more than n (frames that may have passed our
 * last look). Once we poll again, AWAKE stops it. Every frame counts,
 * packets and control frames alike (frame_gone, and rx_frames in the
 * peek); frames of one peer are in order, so the count cannot be fooled.
 * The waker visits a VI when it starts watching (visit_on_arm) unless the
 * peer already knows. A nudge can come before its frame (rxm holds a frame
 * sent while its connection forms; on a real network a datagram may
 * overtake the fabric): one that found nothing has us look every
 * OFI_DRIVE_NS for OFI_LOOK_NS, and until the peer's first frame we look
 * every OFI_DRIVE_NS anyway (rxm connects only while both ends progress).
 * Sending ASLEEP also nudges: the peer may be asleep too, its own ASLEEP
 * still on the way.
 *
 * Control frames (ASLEEP, AWAKE, UP: "I have your name") are struct
 * ofi_ctl, shorter than any packet, and dispatched through ofi_ctl_ops.
 */
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_net.h"
#include "fw_ofi.h"
#include "via_spec.h"

#define OFI_HELLO_MAGIC 0x464f4956u /* "VIOF" */
#define OFI_HELLO_NS 5000000ull     /* a hello every 5 ms until answered */
#define OFI_DRIVE_NS 1000000ull        /* progress while ours may be on its way: 1 ms */
#define OFI_DRIVE_AFTER_NS 20000000ull /* ... for 20 ms after a publish */
#define OFI_MEET_TIMEOUTS 4u
#define OFI_LOOK_NS 20000000ull /* after a nudge that found nothing */
/* Payload bytes a frame carries (the link's MTU, fw_link_ops.mtu): every
 * frame costs a provider message, a completion, a repost and the NIC's turn
 * around them, so this link carries four times VIA_MTU a frame (1 MiB
 * streams: twice the rate of 16 KiB frames). 256 KiB frames stalled under
 * tcp;ofi_rxm here (not investigated). */
#define OFI_MTU (64u * 1024u)
#define OFI_FRAME_MAX ((uint32_t)(sizeof(struct via_wire_hdr) + OFI_MTU))

/* The meeting message on the UDP socket. */
struct ofi_hello {
    uint32_t magic;
    uint32_t conn_id;    /* the channel's: a stray hello of another connection is ignored */
    uint16_t name_len;
    uint8_t have_yours;  /* the sender has our name in its address vector */
    uint8_t ask;         /* the sender does not know we have its name: answer */
    uint8_t name[FW_OFI_NAME_MAX];
};

/* A control frame of the link (shorter than any packet, which is at least
 * a wire header). */
enum ofi_ctl_kind { OFI_CTL_UP, OFI_CTL_ASLEEP, OFI_CTL_AWAKE, OFI_CTL_NKINDS };
struct ofi_ctl {
    uint32_t magic;
    uint32_t conn_id;
    uint32_t kind;       /* enum ofi_ctl_kind */
    uint32_t frames;     /* ASLEEP: the frames of the peer's we have taken */
};

enum ofi_link_state { OFI_MEET, OFI_UP, OFI_FAILED, OFI_NSTATES };
static const char *const ofi_state_name[OFI_NSTATES] = {"meet", "up", "failed"};

struct fw_ofil {
    struct fw_ofi *ofi;
    struct fw_nic *nic;
    struct via_chan *chan;
    struct fw_watch watch;
    int sock;            /* vipd's UDP socket: the meeting only */
    uint32_t conn_id;
    enum ofi_link_state state;
    bool have_theirs, they_have_ours, met, failure_told;
    bool up_owed;        /* the "up" message found no room yet: sent again each turn */
    /* the wake-up protocol (see the top) */
    uint32_t rx_frames, tx_frames; /* fabric frames taken from, given to the peer */
    bool told_asleep;    /* the peer nudges us */
    bool peer_asleep;    /* we nudge the peer ... */
    bool nudge_owed;     /* ... once this visit ends */
    /* A nudge may come before the frame it announces (rxm holds a frame
     * sent while its connection forms; on a real network a datagram can
     * overtake the fabric): one that found nothing has us look every
     * OFI_DRIVE_NS until a frame comes, for OFI_LOOK_NS at most. */
    bool nudged;
    uint64_t look_until;
    uint64_t peer;       /* the peer's address vector entry */
    uint64_t start_ns, next_hello_ns, timeout_ns;
    /* A peer process that stopped: the fabric cannot tell, the NIC-level
     * answers can. While the VI waits for one (fw_link.awaiting_answer,
     * since await_ns), a peer heard from neither since then nor for
     * timeout_ns (heard_ns) breaks the link. A SEND of reliable delivery
     * asks for no answer, so a one-way stream fails only when it stops
     * moving: frames waiting (unsent or uncompleted) and none leaving for
     * timeout_ns. Unreliable VIs wait for nothing. */
    uint32_t reliability;
    uint64_t await_ns, heard_ns;
    bool heard;           /* a frame came in this visit: heard_ns is the turn's now */
    uint64_t stuck_ns;    /* frames wait and none left since then (0: moving) */
    uint64_t stuck_sent;  /* fw_ofi_sent at stuck_ns */
    uint64_t drive_until; /* visit the VI every OFI_DRIVE_NS until then */
    /* The fabric was progressed in this visit of the VI (reset by the
     * turn that ends it). Each progress call costs system calls (tcp's
     * epoll_wait, the completion signal's read), and one reaps all the CQ
     * holds: a second in the same visit only delays the host's answer. */
    bool polled;
    /* The requester's NIC (side 0) speaks first; the acceptor's sends
     * nothing over the fabric until a frame of the peer's came. rxm makes
     * its connection at the first send, and two first sends at once race
     * two connections, which rxm resolves by refusing one; on a slow host
     * (valgrind) the one left was reset, and frames on it lost. */
    bool may_send;
    uint8_t name[FW_OFI_NAME_MAX];
    size_t name_len;
    /* send side: the slot reserve handed out; published slots the provider
     * has not taken yet, in order (FIFO of nunsent from unsent_head) */
    int res_slot;
    int unsent[FW_OFI_NSEND];
    uint32_t unsent_len[FW_OFI_NSEND];
    unsigned unsent_head, nunsent;
    /* receive side: the frame peek returned, until consume */
    struct fw_ofi_rx cur;
    bool have_cur;
};

/* VIP_NET_TRACE=1: a line on stderr for each step of the wake-up protocol
 * (frames given and taken, ASLEEP and AWAKE, nudges); how its stalls were
 * found. Read once: a frame must not pay for a scan of the environment. */
static bool wake_tracing(void)
{
    static _Atomic int on = -1;
    int v = atomic_load_explicit(&on, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("VIP_NET_TRACE");
        v = e && *e && *e != '0';
        atomic_store_explicit(&on, v, memory_order_relaxed);
    }
    return v;
}

__attribute__((format(printf, 2, 3))) static void wake_trace(const struct fw_ofil *o,
                                                             const char *fmt, ...)
{
    char line[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "vipl: libfabric link of connection %u (pid %d): %s\n", o->conn_id,
            (int)getpid(), line);
}

static void ofi_set_state(struct fw_ofil *o, enum ofi_link_state s)
{
    if (o->state == s)
        return;
    if (getenv("VIP_NET_DEBUG"))
        fprintf(stderr,
                "vipl: libfabric link of connection %u: %s -> %s after %llu ms (have the "
                "peer's name: %s; the peer has ours: %s)\n",
                o->conn_id, ofi_state_name[o->state], ofi_state_name[s],
                (unsigned long long)((hal_now_ns() - o->start_ns) / 1000000),
                o->have_theirs ? "yes" : "no", o->they_have_ours ? "yes" : "no");
    o->state = s;
}

/* ---- MEET -------------------------------------------------------------------------- */

static void hello_send(struct fw_ofil *o)
{
    struct ofi_hello m = {.magic = OFI_HELLO_MAGIC, .conn_id = o->conn_id,
                          .name_len = (uint16_t)o->name_len, .have_yours = o->have_theirs,
                          .ask = !o->they_have_ours};
    memcpy(m.name, o->name, o->name_len);
    /* a lost hello is sent again at the next hello time */
    if (send(o->sock, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    }
}

/* A frame of ours went to the fabric: a peer asleep hears of it. */
static void frame_gone(struct fw_ofil *o)
{
    if (wake_tracing())
        wake_trace(o, "gave frame %u (peer asleep: %d)", o->tx_frames + 1, o->peer_asleep);
    o->tx_frames++;
    if (o->peer_asleep)
        o->nudge_owed = true;
}

static bool ctl_send(struct fw_ofil *o, enum ofi_ctl_kind kind)
{
    struct ofi_ctl m = {.magic = OFI_HELLO_MAGIC, .conn_id = o->conn_id, .kind = kind,
                        .frames = o->rx_frames};
    if (!o->may_send)
        return false; /* tried again at a later turn */
    if (fw_ofi_send(o->ofi, o->peer, &m, sizeof m, NULL, 0)) {
        o->nudge_owed = true; /* refused: the peer may have to progress (a
                               * connection forming) */
        return false;
    }
    frame_gone(o);
    return true;
}

/* We have the peer's name: say so over the fabric too (the hello may be
 * lost). The fabric may refuse it while its connection forms (rxm says
 * EAGAIN): owed until it goes, or until a frame of ours says the same. */
static void up_send(struct fw_ofil *o)
{
    o->up_owed = !ctl_send(o, OFI_CTL_UP);
}

static void meet_turn(struct fw_ofil *o, uint64_t now)
{
    struct ofi_hello m;
    bool answer = false;
    ssize_t n;
    while ((n = recv(o->sock, &m, sizeof m, MSG_DONTWAIT)) > 0) {
        if ((size_t)n != sizeof m || m.magic != OFI_HELLO_MAGIC || m.conn_id != o->conn_id ||
            m.name_len == 0 || m.name_len > FW_OFI_NAME_MAX)
            continue; /* not ours: dropped */
        if (!o->have_theirs) {
            if (fw_ofi_peer(o->ofi, m.name, m.name_len, &o->peer) == 0) {
                o->have_theirs = true;
                up_send(o);
            }
        }
        if (m.have_yours)
            o->they_have_ours = true;
        if (m.ask || !m.have_yours)
            answer = true;
    }
    if (answer || (!o->they_have_ours && now >= o->next_hello_ns)) {
        hello_send(o);
        o->next_hello_ns = now + OFI_HELLO_NS;
    }
    if (o->have_theirs && o->state == OFI_MEET)
        ofi_set_state(o, OFI_UP);
    if (o->state == OFI_MEET && now - o->start_ns > OFI_MEET_TIMEOUTS * o->timeout_ns)
        ofi_set_state(o, OFI_FAILED);
}

/* Met both ways: no hello times; the socket now brings nudges. */
static void meet_done(struct fw_ofil *o)
{
    atomic_store_explicit(&o->watch.due_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&o->watch.visit_on_arm, !o->told_asleep, memory_order_relaxed);
}

/* ---- the wake-up protocol ---------------------------------------------------------------- */

static void ctl_up(struct fw_ofil *o, const struct ofi_ctl *m)
{
    (void)o; /* the frame itself said it (ofi_peek) */
    (void)m;
}

static void ctl_asleep(struct fw_ofil *o, const struct ofi_ctl *m)
{
    if (wake_tracing())
        wake_trace(o, "ASLEEP(%u), we gave %u", m->frames, o->tx_frames);
    o->peer_asleep = true;
    if ((int32_t)(o->tx_frames - m->frames) > 0)
        o->nudge_owed = true; /* frames it may have missed */
}

static void ctl_awake(struct fw_ofil *o, const struct ofi_ctl *m)
{
    if (wake_tracing())
        wake_trace(o, "AWAKE");
    (void)m;
    o->peer_asleep = false;
}

static void (*const ofi_ctl_ops[OFI_CTL_NKINDS])(struct fw_ofil *, const struct ofi_ctl *) = {
    [OFI_CTL_UP] = ctl_up,
    [OFI_CTL_ASLEEP] = ctl_asleep,
    [OFI_CTL_AWAKE] = ctl_awake,
};

static void nudge(struct fw_ofil *o)
{
    uint8_t b = 0;
    o->nudge_owed = false;
    if (wake_tracing())
        wake_trace(o, "nudge (we gave %u)", o->tx_frames);
    /* lost (the peer's socket full of nudges it has not read yet): it
     * will read them, and look */
    if (send(o->sock, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    }
}

/* Read the nudges that came: whether there were any. */
static bool nudges_drain(struct fw_ofil *o)
{
    uint8_t b[128];
    bool any = false;
    while (recv(o->sock, b, sizeof b, MSG_DONTWAIT) > 0)
        any = true;
    return any;
}

static bool dozing(struct fw_ofil *o)
{
    return atomic_load_explicit(&o->nic->ev->sleepers, memory_order_acquire) ||
           fw_net_armed(o->nic);
}

/* ASLEEP or AWAKE could not go yet. */
static bool doze_owed(struct fw_ofil *o)
{
    return dozing(o) != o->told_asleep;
}

/* Tell the peer whether to nudge us: yes while a thread of ours is about
 * to sleep (it announced itself before this, its last look) or the waker
 * watches (nobody polls). A refused frame is tried again next turn. */
static void doze_turn(struct fw_ofil *o)
{
    bool dozing_now = dozing(o);
    if (dozing_now != o->told_asleep && wake_tracing())
        wake_trace(o, "%s (took %u)", dozing_now ? "dozing" : "awake", o->rx_frames);
    if (dozing_now && !o->told_asleep && ctl_send(o, OFI_CTL_ASLEEP)) {
        o->told_asleep = true;
        /* the peer may be asleep too, its ASLEEP still on its way to us:
         * it looks, and finds ours (and whatever it owes us) */
        o->nudge_owed = true;
    } else if (!dozing_now && o->told_asleep && ctl_send(o, OFI_CTL_AWAKE)) {
        o->told_asleep = false;
    }
    if (o->met)
        atomic_store_explicit(&o->watch.visit_on_arm, !o->told_asleep, memory_order_relaxed);
}

/* ---- UP: the link operations ----------------------------------------------------------- */

static void flush_unsent(struct fw_ofil *o)
{
    while (o->nunsent && o->may_send) {
        unsigned i = o->unsent_head;
        int rc = fw_ofi_slot_send(o->ofi, o->peer, o->unsent[i], o->unsent_len[i]);
        if (rc == -EAGAIN) {
            o->nudge_owed = true; /* as ctl_send's */
            return;
        }
        if (rc) {
            ofi_set_state(o, OFI_FAILED);
            return;
        }
        o->unsent_head = (i + 1) % FW_OFI_NSEND;
        o->nunsent--;
        frame_gone(o);
    }
}

static struct via_wire_hdr *ofi_reserve(struct fw_link *l, uint32_t payload)
{
    struct fw_ofil *o = l->ofi;
    if (o->state != OFI_UP || payload > OFI_MTU)
        return NULL;
    uint8_t *buf;
    int slot = fw_ofi_slot_take(o->ofi, &buf);
    if (slot == -EAGAIN) {
        /* every slot in flight: completions may be waiting */
        struct fw_ofi_rx none[1];
        if (fw_ofi_recv(o->ofi, none, 0) < 0) {
            ofi_set_state(o, OFI_FAILED);
            return NULL;
        }
        slot = fw_ofi_slot_take(o->ofi, &buf);
    }
    if (slot < 0)
        return NULL;
    o->res_slot = slot;
    return (struct via_wire_hdr *)buf;
}

static void ofi_publish(struct fw_link *l, struct via_wire_hdr *h)
{
    struct fw_ofil *o = l->ofi;
    h->crc = via_wire_check(h); /* publication seals the header, as on every link */
    uint64_t now = hal_now_ns();
    o->drive_until = now + OFI_DRIVE_AFTER_NS;
    uint32_t len = (uint32_t)sizeof *h + h->frag_len;
    int slot = o->res_slot;
    o->res_slot = -1;
    if (!o->nunsent && o->may_send) {
        int rc = fw_ofi_slot_send(o->ofi, o->peer, slot, len);
        if (rc == 0) {
            frame_gone(o);
            return;
        }
        if (rc != -EAGAIN) {
            fw_ofi_slot_drop(o->ofi, slot);
            ofi_set_state(o, OFI_FAILED);
            return;
        }
    }
    /* the provider is busy: in order after what waits already */
    o->nudge_owed = true; /* as ctl_send's */
    unsigned t = (o->unsent_head + o->nunsent++) % FW_OFI_NSEND;
    o->unsent[t] = slot;
    o->unsent_len[t] = len;
}

/* Progress the fabric once per visit: false when the endpoint failed. */
static bool ofi_progress(struct fw_ofil *o)
{
    if (o->polled)
        return true;
    o->polled = true;
    /* Nudges are read before the fabric is looked at: one that comes after
     * stays, and wakes us (unread, the socket would fill and lose them). */
    if (o->told_asleep && nudges_drain(o))
        o->nudged = true; /* until a frame comes (ofi_peek) */
    struct fw_ofi_rx none[1];
    if (fw_ofi_recv(o->ofi, none, 0) < 0) {
        ofi_set_state(o, OFI_FAILED);
        return false;
    }
    return true;
}

/* The header copy's checks, as the ring's (fw_link_shm.c): version, check
 * word, type, and a length that is the message's. */
static enum fw_link_peek_rc ofi_peek(struct fw_link *l, struct via_wire_hdr *h,
                                     const uint8_t **payload)
{
    struct fw_ofil *o = l->ofi;
    /* A fabric that failed is a lost connection, not a malformed packet:
     * nothing more arrives, and the turn reports it (fw_link_failed). */
    if (o->state == OFI_FAILED)
        return FW_LINK_EMPTY;
    while (!o->have_cur) {
        if (fw_ofi_take(o->ofi, &o->cur, 1) == 0) {
            if (o->polled || !ofi_progress(o))
                return FW_LINK_EMPTY;
            continue;
        }
        o->heard = true; /* the peer's NIC runs (no clock read per frame) */
        o->nudged = false;
        o->look_until = 0;
        o->they_have_ours = true; /* it could not have sent this otherwise */
        o->may_send = true;       /* its connection stands */
        o->rx_frames++;
        if (wake_tracing())
            wake_trace(o, "took frame %u (told asleep: %d)", o->rx_frames, o->told_asleep);
        struct ofi_ctl m;
        if (o->cur.len == sizeof m) {
            memcpy(&m, o->cur.data, sizeof m);
            if (m.magic == OFI_HELLO_MAGIC && m.conn_id == o->conn_id && m.kind < OFI_CTL_NKINDS) {
                fw_ofi_repost(o->ofi, &o->cur);
                ofi_ctl_ops[m.kind](o, &m);
                continue;
            }
        }
        o->have_cur = true;
    }
    if (o->cur.len < sizeof *h)
        return FW_LINK_BAD;
    memcpy(h, o->cur.data, sizeof *h);
    if (!fw_link_frame_ok(h, o->cur.len - sizeof *h)) {
        if (getenv("VIP_NET_DEBUG"))
            fprintf(stderr, "vipl: libfabric link: bad packet: v%u crc %x/%x type %u len %u/%u\n",
                    h->version, h->crc, via_wire_check(h), h->type, h->frag_len, o->cur.len);
        return FW_LINK_BAD;
    }
    *payload = o->cur.data + sizeof *h;
    return FW_LINK_PACKET;
}

static void ofi_consume(struct fw_link *l, const struct via_wire_hdr *h)
{
    (void)h;
    struct fw_ofil *o = l->ofi;
    if (!o->have_cur)
        return;
    o->have_cur = false;
    if (fw_ofi_repost(o->ofi, &o->cur))
        ofi_set_state(o, OFI_FAILED);
}

static bool ofi_pending(const struct fw_link *l)
{
    struct fw_ofil *o = l->ofi;
    /* While the connection is open, whether the fabric holds something
     * costs a progress call: say yes, the caller's peek finds out. Once
     * vipd closed or broke it, the answer must be true only while packets
     * are really left (they are drained before the VI's error). */
    if (atomic_load_explicit(&o->chan->state, memory_order_acquire) == VIA_CHAN_OPEN)
        return true;
    if (o->have_cur)
        return true;
    if (o->state != OFI_UP)
        return false;
    struct fw_ofi_rx none[1];
    if (fw_ofi_recv(o->ofi, none, 0) < 0)
        return false;
    return fw_ofi_frames_held(o->ofi) > 0;
}

static void ofi_stall(struct fw_link *l)
{
    (void)l; /* send slots come back with completions, reaped every turn */
}

static bool ofi_drained(struct fw_link *l, unsigned n)
{
    (void)l;
    (void)n;
    return false;
}

/* Progress, and when the waker must visit the VI next. libfabric's rxm
 * over tcp moves data only inside a progress call (manual progress): a
 * message handed over may still wait in the provider for the connection
 * or the socket, and only this VI's turns push it. So while something of
 * ours may be on its way (unsent, sends not completed, a recent publish)
 * or waits for its answer, the VI is visited every OFI_DRIVE_NS even if
 * its host sleeps; otherwise only the peer's nudges wake it. */
static void up_turn(struct fw_ofil *o, bool awaiting, uint64_t now)
{
    if (o->up_owed)
        up_send(o);
    flush_unsent(o);
    if (!ofi_progress(o))
        return;
    if (o->heard) {
        o->heard = false;
        o->heard_ns = now;
    }
    if (!awaiting || o->reliability == VIP_SERVICE_UNRELIABLE) {
        o->await_ns = 0;
    } else if (!o->await_ns) {
        o->await_ns = now;
    } else {
        uint64_t since = o->heard_ns > o->await_ns ? o->heard_ns : o->await_ns;
        uint64_t quiet = now > since ? now - since : 0;
        if (quiet > o->timeout_ns) {
            if (getenv("VIP_NET_DEBUG"))
                fprintf(stderr, "vipl: libfabric link of connection %u: no answer for %llu ms\n",
                        o->conn_id, (unsigned long long)(quiet / 1000000));
            ofi_set_state(o, OFI_FAILED); /* the peer's NIC stopped answering */
            return;
        }
    }
    unsigned waiting = o->nunsent + fw_ofi_sends_pending(o->ofi);
    uint64_t sent = fw_ofi_sent(o->ofi);
    if (!waiting || sent != o->stuck_sent || !o->stuck_ns ||
        o->reliability == VIP_SERVICE_UNRELIABLE) {
        o->stuck_ns = waiting ? now : 0;
        o->stuck_sent = sent;
    } else if (now - o->stuck_ns > o->timeout_ns) {
        if (getenv("VIP_NET_DEBUG"))
            fprintf(stderr, "vipl: libfabric link of connection %u: %u frames stuck for %llu ms\n",
                    o->conn_id, waiting, (unsigned long long)((now - o->stuck_ns) / 1000000));
        ofi_set_state(o, OFI_FAILED); /* the peer takes nothing */
        return;
    }
    doze_turn(o);
    if (o->nudged) {
        o->nudged = false;
        o->look_until = now + OFI_LOOK_NS;
    }
    if (!o->met)
        return; /* the hello times drive it */
    uint64_t due = 0;
    if (o->await_ns || o->nunsent || fw_ofi_sends_pending(o->ofi) || now < o->drive_until ||
        o->up_owed || doze_owed(o) || now < o->look_until ||
        !o->rx_frames) /* rxm connects only while both ends progress */
        due = now + OFI_DRIVE_NS;
    atomic_store_explicit(&o->watch.due_ns, due, memory_order_relaxed);
}

static uint64_t ofi_turn(struct fw_link *l)
{
    struct fw_ofil *o = l->ofi;
    uint64_t now = hal_now_ns();
    bool meeting = !o->met;
    if (meeting && o->state != OFI_FAILED) {
        /* they_have_ours may have come as a fabric message (ofi_peek) */
        if (!o->have_theirs || !o->they_have_ours)
            meet_turn(o, now);
        if (o->have_theirs && o->they_have_ours) {
            o->met = true;
            meet_done(o);
            if (getenv("VIP_NET_DEBUG"))
                fprintf(stderr, "vipl: libfabric link of connection %u: met after %llu ms\n",
                        o->conn_id, (unsigned long long)((now - o->start_ns) / 1000000));
        } else {
            atomic_store_explicit(&o->watch.due_ns, o->next_hello_ns, memory_order_relaxed);
        }
    }
    if (o->state == OFI_UP)
        up_turn(o, l->awaiting_answer, now);
    o->polled = false; /* the visit ends */
    if (o->nudge_owed)
        nudge(o);
    if (o->state == OFI_FAILED) {
        if (o->failure_told)
            return 0;
        o->failure_told = true;
        return UINT64_MAX;
    }
    return meeting ? o->next_hello_ns : 0;
}

static void ofi_fini(struct fw_link *l, const _Atomic uint32_t *state)
{
    struct fw_ofil *o = l->ofi;
    if (!o)
        return;
    /* Let the last packets (an ack, a completion's answer) leave: bounded. */
    uint64_t until = hal_now_ns() + 200000000ull;
    while (fw_chan_open(state) && o->state == OFI_UP && (o->nunsent || fw_ofi_sends_pending(o->ofi)) &&
           hal_now_ns() < until) {
        flush_unsent(o);
        struct fw_ofi_rx none[1];
        if (fw_ofi_recv(o->ofi, none, 0) < 0)
            break;
    }
    fw_net_unwatch(o->nic, &o->watch);
    fw_ofi_close(o->ofi);
    close(o->sock);
    free(o);
    l->ofi = NULL;
}

const struct fw_link_ops fw_link_ofi_ops = {
    .name = "ofi",
    .mtu = OFI_MTU,
    .reserve = ofi_reserve,
    .publish = ofi_publish,
    .peek = ofi_peek,
    .consume = ofi_consume,
    .pending = ofi_pending,
    .stall = ofi_stall,
    .drained = ofi_drained,
    .turn = ofi_turn,
    .fini = ofi_fini,
};

/* The address to bind the endpoint to: the one vipd bound the link's UDP
 * socket to (its --listen address), so the fabric runs where the vipds
 * meet. */
static bool sock_addr(int sock, char *buf, size_t len)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    if (getsockname(sock, (struct sockaddr *)&sa, &sl) < 0 || sa.sin_family != AF_INET)
        return false;
    const uint8_t *b = (const uint8_t *)&sa.sin_addr.s_addr;
    snprintf(buf, len, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
    return true;
}

bool fw_link_ofi_init(struct fw_link *l, struct fw_nic *nic, struct via_chan *chan, int side,
                      int sock, char *why, size_t whylen)
{
    struct fw_ofil *o = calloc(1, sizeof *o);
    char node[32];
    if (!o || !sock_addr(sock, node, sizeof node)) {
        snprintf(why, whylen, "libfabric link: %s", o ? "no address to bind" : "out of memory");
        free(o);
        close(sock);
        return false;
    }
    int rc = fw_ofi_open(&o->ofi, node, OFI_FRAME_MAX, why, whylen);
    o->name_len = sizeof o->name;
    if (rc || fw_ofi_name(o->ofi, o->name, &o->name_len)) {
        if (!rc)
            snprintf(why, whylen, "libfabric link: the endpoint has no name");
        fw_ofi_close(o->ofi);
        free(o);
        close(sock);
        return false;
    }
    o->nic = nic;
    o->chan = chan;
    o->reliability = chan->reliability;
    o->sock = sock;
    o->conn_id = chan->conn_id;
    o->res_slot = -1;
    o->may_send = side == 0;
    o->state = OFI_MEET;
    o->start_ns = hal_now_ns();
    o->timeout_ns = fw_net_env_ms("VIP_NET_TIMEOUT_MS", FW_NET_TIMEOUT_MS) * 1000000ull;
    o->watch.fd = sock;
    o->watch.vi_id = chan->vi_id[side];
    l->ops = &fw_link_ofi_ops;
    l->tx = l->rx = NULL;
    l->ofi = o;
    if (!fw_net_watch(nic, &o->watch)) {
        snprintf(why, whylen, "libfabric link: no waker thread");
        fw_ofi_close(o->ofi);
        close(sock);
        free(o);
        l->ofi = NULL;
        return false;
    }
    meet_turn(o, o->start_ns); /* the first hello now */
    atomic_store_explicit(&o->watch.due_ns, o->next_hello_ns, memory_order_relaxed);
    return true;
}

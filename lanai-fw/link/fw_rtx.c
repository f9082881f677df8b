/*
 * fw_rtx.c - the NIC-to-NIC reliable transport of the UDP link.
 *
 * After the AM-II virtual-network transport paper (section 4): between two
 * NICs a connection has FW_RTX_WIN logical channels; frame seq travels on
 * channel seq % FW_RTX_WIN, so a channel holds one unacknowledged frame
 * and the window is the channels' count. Each frame carries the sender's
 * sequence number and, piggy-backed, the cumulative acknowledgement of
 * what it received (ack = the next frame it expects); a turn that took
 * frames and sent none sends one ACK frame. The receiver keeps frames
 * that came early in their channel's slot and delivers in order; a frame
 * seen before (seq below the next expected, or its slot already full) is
 * a duplicate: dropped, counted, and acknowledged again (our ack may be
 * what was lost). A gap is NACKed at once (the sender resends the frame
 * missing without waiting for its timer); a frame beyond the window, for
 * which the receiver has no buffer, is NACKed FULL, and is sent again
 * later. The retransmission timer is coarse (rto, doubling per try) and
 * is looked at only while something is unacknowledged, by the NIC's turn
 * and by the waker (fw_net.c) through due_ns: when nothing is lost it
 * costs a comparison. A frame unacknowledged for timeout_ns
 * (VIP_NET_TIMEOUT_MS, default 3000) means the peer is unreachable: the
 * link fails, and the VI with it (fw_link_udp.c).
 *
 * Unreliable VIs skip all that: a frame goes once; the receiver delivers
 * frames in the order they come, drops any older than one it delivered,
 * and counts the frames it never saw as lost.
 */
#include <poll.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_net.h"

#define RTO_MAX_NS 200000000ull /* retransmission back-off stops doubling here */
#define FW_ACK_DELAY_NS 500000ull /* a pure ACK waits this long for a frame to ride on */

static inline uint8_t *frame_wire(uint8_t *f)
{
    return f + sizeof(struct via_net_hdr);
}

static bool in_window(uint32_t seq, uint32_t base)
{
    return seq - base < FW_RTX_WIN;
}

bool fw_rtx_init(struct fw_udp *u)
{
    for (unsigned i = 0; i < FW_RTX_WIN; i++) {
        u->tx[i].buf = malloc(FW_NET_FRAME_MAX);
        u->rx[i] = malloc(FW_NET_FRAME_MAX);
        if (!u->tx[i].buf || !u->rx[i])
            return false;
    }
    for (unsigned i = 0; i < FW_NET_BATCH; i++)
        if (!(u->spare[i] = malloc(FW_NET_FRAME_MAX)))
            return false;
    u->snd_una = u->snd_sent = u->snd_next = 1;
    u->rcv_next = 1;
    return true;
}

void fw_rtx_fini(struct fw_udp *u)
{
    for (unsigned i = 0; i < FW_RTX_WIN; i++) {
        free(u->tx[i].buf);
        free(u->rx[i]);
    }
    for (unsigned i = 0; i < FW_NET_BATCH; i++)
        free(u->spare[i]);
}

/* The frame MAC (vipd --frame-mac): keyed BLAKE2b of the sealed frame. */
static void frame_mac(const struct fw_udp *u, const uint8_t *f, uint32_t len,
                      uint8_t mac[VIA_NET_MAC_BYTES])
{
    crypto_generichash(mac, VIA_NET_MAC_BYTES, f, len, u->mac_key, sizeof u->mac_key);
}

/* Our current ack, the check word, and the MAC when the connection has
 * them: the bytes to send (len, or len + the MAC). */
static uint32_t seal(struct fw_udp *u, uint8_t *f, uint32_t len)
{
    struct via_net_hdr *n = (struct via_net_hdr *)f;
    n->ack = u->rcv_next;
    u->ack_sent = u->rcv_next;
    u->ack_owed = false;
    u->ack_since = 0;
    n->crc = 0;
    n->crc = via_crc32c(0, f, len);
    if (!u->mac)
        return len;
    frame_mac(u, f, len, f + len);
    return len + VIA_NET_MAC_BYTES;
}

/* ---- send side ------------------------------------------------------------------- */

struct via_wire_hdr *fw_rtx_reserve(struct fw_udp *u, uint32_t payload)
{
    if (u->failed || payload > VIA_MTU)
        return NULL;
    if (u->snd_next - u->snd_una >= FW_RTX_WIN)
        return NULL; /* every channel holds an unacknowledged frame */
    u->reserved = true;
    return (struct via_wire_hdr *)frame_wire(u->tx[u->snd_next % FW_RTX_WIN].buf);
}

void fw_rtx_publish(struct fw_udp *u, struct via_wire_hdr *h)
{
    struct fw_rtx_slot *s = &u->tx[u->snd_next % FW_RTX_WIN];
    h->crc = via_wire_check(h);
    uint32_t len = (uint32_t)(sizeof(struct via_net_hdr) + sizeof *h + h->frag_len);
    *(struct via_net_hdr *)s->buf = (struct via_net_hdr){
        .version = VIA_NET_VERSION, .kind = VIA_NET_DATA,
        .chan = (uint8_t)(u->snd_next % FW_RTX_WIN),
        .flags = (u->reliable ? VIA_NET_RELIABLE : 0) | (u->mac ? VIA_NET_MAC : 0),
        .len = len - (uint32_t)sizeof(struct via_net_hdr), .conn_id = u->conn_id,
        .dst_vi = u->peer_vi, .seq = u->snd_next, .token = u->token};
    s->len = len;
    s->tries = 0;
    u->reserved = false;
    u->snd_next++;
}

/* Frames [from, to) of the window onto the wire (sealed with our current
 * ack), through the fault injector. */
static void send_range(struct fw_udp *u, uint32_t from, uint32_t to, uint64_t now)
{
    uint8_t *buf[FW_NET_BATCH];
    uint32_t len[FW_NET_BATCH];
    unsigned n = 0;
    for (uint32_t q = from; q != to; q++) {
        struct fw_rtx_slot *s = &u->tx[q % FW_RTX_WIN];
        uint32_t wire = seal(u, s->buf, s->len);
        if (!s->tries)
            s->first_ns = now;
        s->tries++;
        s->sent_ns = now;
        buf[n] = s->buf;
        len[n++] = wire;
        if (n == FW_NET_BATCH) {
            fw_fault_send(u, buf, len, n);
            n = 0;
        }
    }
    if (n)
        fw_fault_send(u, buf, len, n);
    u->ack_owed = false; /* every frame carried it */
}

static void send_control(struct fw_udp *u, uint8_t kind, uint32_t seq, uint32_t why)
{
    _Alignas(8) uint8_t f[sizeof(struct via_net_hdr) + VIA_NET_MAC_BYTES];
    *(struct via_net_hdr *)f = (struct via_net_hdr){
        .version = VIA_NET_VERSION, .kind = kind,
        .flags = (u->reliable ? VIA_NET_RELIABLE : 0) | (u->mac ? VIA_NET_MAC : 0),
        .conn_id = u->conn_id, .dst_vi = u->peer_vi, .seq = seq, .why = why, .token = u->token};
    uint8_t *b = f;
    uint32_t l = seal(u, f, sizeof(struct via_net_hdr));
    fw_fault_send(u, &b, &l, 1);
    fw_net_count(kind == VIA_NET_ACK ? &u->cnt->acks_sent : &u->cnt->nacks_sent, 1);
    if (kind == VIA_NET_ACK)
        u->ack_owed = false;
}

/* The peer has everything before ack. (The timer stays coarse and fixed:
 * a round-trip estimate taken from acks that wait for a frame to ride on,
 * for a sleeping receiver, or behind reordered frames, grew to milliseconds
 * and made every tail loss wait that long: 7x slower under the faults of
 * test_hosts_faults.) */
static void acked(struct fw_udp *u, uint32_t ack)
{
    if (!u->reliable)
        return;
    /* Only frames we sent can be acknowledged: ack within (snd_una, snd_sent]. */
    if (ack - u->snd_una > u->snd_sent - u->snd_una || ack == u->snd_una)
        return;
    u->snd_una = ack;
}

/* ---- receive side ------------------------------------------------------------------ */

/* The checks of a frame that came in, before a byte of it is used. */
static bool frame_ok(struct fw_udp *u, const uint8_t *f, uint32_t len)
{
    if (len < sizeof(struct via_net_hdr)) {
        fw_net_count(&u->cnt->bad_short, 1);
        return false;
    }
    struct via_net_hdr n;
    memcpy(&n, f, sizeof n);
    if (n.version != VIA_NET_VERSION || n.kind == 0 || n.kind >= VIA_NET_NKINDS) {
        fw_net_count(&u->cnt->bad_version, 1);
        return false;
    }
    /* A connection with frame MACs takes only frames with a good one. */
    uint32_t tail = u->mac ? VIA_NET_MAC_BYTES : 0;
    if (len < sizeof n + tail || n.len != len - sizeof n - tail ||
        (n.kind == VIA_NET_DATA ? n.len < sizeof(struct via_wire_hdr) : n.len != 0)) {
        fw_net_count(&u->cnt->bad_short, 1);
        return false;
    }
    if (u->mac) {
        uint8_t want[VIA_NET_MAC_BYTES];
        len -= tail;
        frame_mac(u, f, len, want);
        if (!(n.flags & VIA_NET_MAC) || sodium_memcmp(want, f + len, sizeof want) != 0) {
            fw_net_count(&u->cnt->bad_crc, 1);
            return false;
        }
    }
    uint32_t crc = n.crc;
    ((struct via_net_hdr *)(void *)f)->crc = 0; /* our own copy of the frame */
    if (via_crc32c(0, f, len) != crc) {
        fw_net_count(&u->cnt->bad_crc, 1);
        return false;
    }
    if (n.conn_id != u->conn_id || n.dst_vi != u->vi_id || n.token != u->token ||
        ((n.flags & VIA_NET_RELIABLE) != 0) != u->reliable) {
        fw_net_count(&u->cnt->bad_vi, 1);
        return false;
    }
    return true;
}

/* Frames after rcv_next came but rcv_next did not: ask for it now, once
 * (the sender resends it without waiting for its timer). */
static void gap_nack(struct fw_udp *u)
{
    if (!u->reliable || u->rx_have[u->rcv_next % FW_RTX_WIN] ||
        (int32_t)(u->rx_high - u->rcv_next) <= 0 || u->nacked == u->rcv_next + 1)
        return;
    u->nacked = u->rcv_next + 1;
    send_control(u, VIA_NET_NACK, u->rcv_next, VIA_NACK_GAP);
}

/* Channel c takes the frame recvmmsg put in spare[i]: the buffers swap,
 * so nothing is copied. */
static void slot_take(struct fw_udp *u, unsigned c, unsigned i, uint32_t len)
{
    uint8_t *t = u->rx[c];
    u->rx[c] = u->spare[i];
    u->spare[i] = t;
    u->rx_len[c] = len;
    u->rx_have[c] = true;
}

/* A DATA frame of the reliable transport: into its channel's slot. */
static void take_reliable(struct fw_udp *u, unsigned i, uint32_t len, uint32_t seq)
{
    if ((int32_t)(seq - u->rcv_next) < 0) {
        fw_net_count(&u->cnt->dup_dropped, 1);
        u->ack_owed = true; /* the sender may not have our ack */
        return;
    }
    if (!in_window(seq, u->rcv_next)) {
        send_control(u, VIA_NET_NACK, seq, VIA_NACK_FULL);
        return;
    }
    unsigned c = seq % FW_RTX_WIN;
    if (u->rx_have[c]) {
        fw_net_count(&u->cnt->dup_dropped, 1);
        return;
    }
    slot_take(u, c, i, len);
    if ((int32_t)(seq - u->rx_high) > 0)
        u->rx_high = seq;
    gap_nack(u);
}

/* A DATA frame of an unreliable VI: kept in its channel's slot if newer
 * than what was delivered; the gaps are skipped at delivery (fw_rtx_ready). */
static void take_unreliable(struct fw_udp *u, unsigned i, uint32_t len, uint32_t seq)
{
    unsigned c = seq % FW_RTX_WIN;
    if ((int32_t)(seq - u->rcv_next) < 0 || !in_window(seq, u->rcv_next) || u->rx_have[c]) {
        fw_net_count(&u->cnt->dup_dropped, 1); /* late, duplicated or too early */
        return;
    }
    slot_take(u, c, i, len);
}

/* Unreliable: the oldest frame that came, the frames before it lost. */
static bool skip_lost(struct fw_udp *u)
{
    for (uint32_t k = 1; k < FW_RTX_WIN; k++)
        if (u->rx_have[(u->rcv_next + k) % FW_RTX_WIN]) {
            fw_net_count(&u->cnt->lost, k);
            u->rcv_next += k;
            return true;
        }
    return false;
}

static void resend(struct fw_udp *u, uint32_t seq, uint64_t now)
{
    if ((int32_t)(seq - u->snd_una) < 0 || (int32_t)(seq - u->snd_sent) >= 0)
        return;
    struct fw_rtx_slot *s = &u->tx[seq % FW_RTX_WIN];
    if (s->tries > 1 && now - s->sent_ns < u->rto_ns / 4)
        return; /* just sent again: NACKs of one gap do not multiply it */
    fw_net_count(&u->cnt->retransmits, 1);
    send_range(u, seq, seq + 1, now);
}

/* Take what the socket holds. */
static void rx_drain(struct fw_udp *u)
{
    uint32_t len[FW_NET_BATCH];
    unsigned n;
    uint64_t now = 0;
    do {
        n = fw_net_recv(u, len);
        for (unsigned i = 0; i < n; i++) {
            if (!frame_ok(u, u->spare[i], len[i]))
                continue;
            if (u->mac)
                len[i] -= VIA_NET_MAC_BYTES; /* checked: the frame is what it covers */
            struct via_net_hdr h;
            memcpy(&h, u->spare[i], sizeof h);
            acked(u, h.ack);
            if (h.kind == VIA_NET_DATA) {
                if (u->reliable) {
                    take_reliable(u, i, len[i], h.seq);
                    u->ack_owed = true;
                } else {
                    take_unreliable(u, i, len[i], h.seq);
                }
            } else if (h.kind == VIA_NET_NACK && u->reliable) {
                fw_net_count(&u->cnt->nacks_got, 1);
                if (!now)
                    now = hal_now_ns();
                if (h.why == VIA_NACK_GAP)
                    resend(u, h.seq, now);
                /* FULL: the timer sends it again; nothing sooner helps. */
            }
        }
    } while (n == FW_NET_BATCH && !u->rx_have[u->rcv_next % FW_RTX_WIN]);
}

bool fw_rtx_ready(struct fw_udp *u, struct via_wire_hdr *h, const uint8_t **payload)
{
    unsigned c = u->rcv_next % FW_RTX_WIN;
    if (!u->rx_have[c]) {
        rx_drain(u);
        if (!u->rx_have[c] && (u->reliable || !skip_lost(u)))
            return false;
        c = u->rcv_next % FW_RTX_WIN;
    }
    memcpy(h, frame_wire(u->rx[c]), sizeof *h);
    *payload = frame_wire(u->rx[c]) + sizeof *h;
    return true;
}

bool fw_rtx_poll(struct fw_udp *u)
{
    struct via_wire_hdr h;
    const uint8_t *p;
    return fw_rtx_ready(u, &h, &p);
}

void fw_rtx_linger(struct fw_udp *u, const _Atomic uint32_t *state)
{
    if (!u->reliable || u->failed)
        return;
    uint64_t bound = u->timeout_ns < 2000000000ull ? u->timeout_ns : 2000000000ull;
    uint64_t end = hal_now_ns() + bound;
    while (u->snd_una != u->snd_next && fw_chan_open(state) && hal_now_ns() < end) {
        if (fw_rtx_turn(u) == UINT64_MAX)
            return;
        struct pollfd p = {.fd = u->sock, .events = POLLIN};
        poll(&p, 1, 1);
        rx_drain(u);
    }
}

void fw_rtx_consume(struct fw_udp *u)
{
    unsigned c = u->rcv_next % FW_RTX_WIN;
    u->rx_have[c] = false;
    u->rcv_next++;
    u->ack_owed = u->reliable;
    gap_nack(u); /* the next hole, if frames after it wait */
}

/* ---- the turn ------------------------------------------------------------------------ */

uint64_t fw_rtx_turn(struct fw_udp *u)
{
    if (u->failed) {
        if (u->fail_told)
            return 0;
        u->fail_told = true;
        return UINT64_MAX;
    }
    uint64_t now = hal_now_ns();
    if (u->snd_sent != u->snd_next) {
        send_range(u, u->snd_sent, u->snd_next, now);
        u->snd_sent = u->snd_next;
    }
    if (!u->reliable) {
        u->snd_una = u->snd_sent; /* nothing is kept */
        fw_fault_send(u, NULL, NULL, 0); /* delayed frames that are due */
        return 0;
    }
    /* Delayed acknowledgement: a frame of ours going out soon (the reply
     * of a ping-pong) carries it; a pure ACK goes when a quarter of the
     * window is unacknowledged or the ack has waited FW_ACK_DELAY_NS. */
    uint64_t ack_due = 0;
    if (u->ack_owed) {
        if (!u->ack_since)
            u->ack_since = now;
        if (u->rcv_next - u->ack_sent >= FW_RTX_WIN / 4 || now - u->ack_since >= FW_ACK_DELAY_NS)
            send_control(u, VIA_NET_ACK, 0, 0);
        else
            ack_due = u->ack_since + FW_ACK_DELAY_NS;
    }
    fw_fault_send(u, NULL, NULL, 0);
    if (u->snd_una == u->snd_sent) {
        uint64_t d = u->fault.nheld ? now + 1000000u : 0;
        if (ack_due && (!d || ack_due < d))
            d = ack_due;
        atomic_store_explicit(&u->watch.due_ns, d, memory_order_relaxed);
        return 0;
    }
    /* The timer: the oldest unacknowledged frame's. */
    struct fw_rtx_slot *s = &u->tx[u->snd_una % FW_RTX_WIN];
    if (now - s->first_ns > u->timeout_ns) {
        u->failed = true;
        u->fail_told = true;
        fw_net_count(&u->cnt->timeouts, 1);
        atomic_store_explicit(&u->watch.due_ns, 0, memory_order_relaxed);
        return UINT64_MAX;
    }
    uint64_t rto = u->rto_ns << (s->tries > 6 ? 6 : s->tries - 1);
    if (rto > RTO_MAX_NS)
        rto = RTO_MAX_NS;
    if (now - s->sent_ns >= rto) {
        /* The oldest only: the receiver NACKs the holes after it as the
         * frames behind them arrive; a timer that fires for each would
         * resend what is merely unacknowledged yet. */
        fw_net_count(&u->cnt->retransmits, 1);
        send_range(u, u->snd_una, u->snd_una + 1, now);
    }
    uint64_t d = s->sent_ns + rto;
    atomic_store_explicit(&u->watch.due_ns, ack_due && ack_due < d ? ack_due : d, memory_order_relaxed);
    return 0;
}

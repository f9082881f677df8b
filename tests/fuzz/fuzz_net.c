/*
 * fuzz_net.c - libFuzzer target: the UDP link against a hostile network.
 * The frame checks (fw_rtx.c: frame_ok, the transport's sequence and
 * acknowledgement handling, duplicate suppression, the unreliable VIs'
 * loss accounting) and the link's check of the packet inside a frame
 * (fw_link_frame_ok, through the link's own peek).
 *
 * The harness is the NIC's pipelines and the peer NIC at once: the link's
 * socket is one end of a datagram socketpair and the input writes what
 * arrives at the other (well-formed frames it seals itself, frames with
 * one field wrong, raw bytes, raw bytes it seals, ACKs and NACKs); it also
 * posts packets of its own, runs the link's turn and reads what the link
 * sends, and takes the packets the link delivers.
 *
 * The oracle, besides ASan/UBSan:
 *   - every frame sent is counted once: received (rx_frames) and, if a
 *     check refuses it, in the counter of the first check it fails
 *     (short, version, CRC, VI), as the wire note says (spec-notes/wire.md);
 *   - a reliable VI delivers frames 1, 2, 3, ... each once, in order; an
 *     unreliable VI delivers in increasing order and counts each frame it
 *     skipped as lost; a delivered frame is byte for byte one the peer
 *     sent with that sequence number and that passed the checks;
 *   - the link hands the pipelines a packet only if its header copy is
 *     sound (version, check word, type, a frag_len that is the frame's);
 *   - acknowledgements never move the send window past what was sent, and
 *     the window never holds more than FW_RTX_WIN frames;
 *   - every frame the link sends is well-formed, sealed, addressed to the
 *     peer on this connection, and a DATA frame is one we published, with
 *     its sequence number, carrying the receiver's current acknowledgement.
 *
 * Input: config:u8 then records (op = first byte % 7).
 * config: 0x01 reliable VI
 *   0 data:    op seqd:i8 flags:u8 fdelta:i8 ack:u32 plen:u16 wire[64] payload[plen]
 *              a DATA frame with seq = the next expected + seqd, sealed;
 *              flags: 0x01 bad CRC, 0x02 another connection, 0x04 another
 *              VI, 0x08 the other reliability, 0x10 net version 0, 0x20 bad
 *              check word, 0x40 frag_len off by fdelta, 0x80 wire version 0
 *   1 raw:     op len:u16 bytes[len]   sent as they are
 *   2 sealed:  op len:u16 bytes[len]   the CRC field set to the frame's CRC
 *   3 control: op kind:u8 seq:u32 ack:u32 why:u32 (sealed, addressed to us)
 *   4 post:    op len:u16      a packet of ours of len payload bytes
 *   5 turn:    op              the link's turn; its frames are read, checked
 *   6 deliver: op n:u8         take up to n packets from the link
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fw.h"
#include "fw_net.h"

#define NO_COV __attribute__((no_sanitize("coverage")))

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "fuzz_net: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

#define CONN 0x5151u
#define OUR_VI 7u
#define TOKEN 0x70c3e5a1d2b49f86ull /* the connection's secret */
#define PEER_VI 11u
#define MAX_FRAMES 256u
#define MAX_SENT_PER_SEQ 4u
#define NET_HDR ((uint32_t)sizeof(struct via_net_hdr))
#define WIRE_HDR ((uint32_t)sizeof(struct via_wire_hdr))

/* What the oracle knows of the frames it sent that passed the checks:
 * per sequence number, the hashes of their bytes after the net header. */
struct sent_seq {
    uint32_t seq;
    unsigned n;
    bool overflow; /* more than MAX_SENT_PER_SEQ: any is taken as sent */
    uint64_t hash[MAX_SENT_PER_SEQ];
};

struct harness {
    struct fw_link link;
    struct fw_udp *u;
    struct via_net_counters cnt;
    int peer;                 /* the other end of the socketpair */
    bool reliable;
    bool broken;              /* the link reported a bad packet: the VI is gone */
    unsigned frames;
    /* counters the oracle expects */
    uint64_t sent, bad_short, bad_version, bad_crc, bad_vi;
    uint32_t delivered_last;  /* the last sequence number delivered */
    struct sent_seq valid[MAX_FRAMES];
    unsigned nvalid;
    uint64_t ours[FW_RTX_WIN]; /* hashes of our published packets, by seq % WIN */
    uint32_t ours_next;       /* the next seq we publish (mirrors snd_next) */
};

static NO_COV uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ n;
}

struct input {
    const uint8_t *p;
    size_t n;
};

static NO_COV bool take(struct input *in, void *out, size_t n)
{
    if (in->n < n)
        return false;
    memcpy(out, in->p, n);
    in->p += n;
    in->n -= n;
    return true;
}

static NO_COV void seal_frame(uint8_t *f, uint32_t len)
{
    struct via_net_hdr *n = (struct via_net_hdr *)(void *)f;
    n->crc = 0;
    n->crc = via_crc32c(0, f, len);
}

static NO_COV void note_valid(struct harness *H, uint32_t seq, const uint8_t *f, uint32_t len)
{
    uint64_t h = hash_bytes(f + NET_HDR, len - NET_HDR);
    for (unsigned i = 0; i < H->nvalid; i++)
        if (H->valid[i].seq == seq) {
            if (H->valid[i].n < MAX_SENT_PER_SEQ)
                H->valid[i].hash[H->valid[i].n++] = h;
            else
                H->valid[i].overflow = true;
            return;
        }
    if (H->nvalid < MAX_FRAMES)
        H->valid[H->nvalid++] = (struct sent_seq){.seq = seq, .n = 1, .hash = {h}};
}

static NO_COV bool was_sent(const struct harness *H, uint32_t seq, uint64_t h)
{
    for (unsigned i = 0; i < H->nvalid; i++)
        if (H->valid[i].seq == seq) {
            if (H->valid[i].overflow)
                return true;
            for (unsigned k = 0; k < H->valid[i].n; k++)
                if (H->valid[i].hash[k] == h)
                    return true;
        }
    return false;
}

/* The checks of spec-notes/wire.md, in their order, on a frame we send:
 * which counter it must land in (NULL: it passes). */
static NO_COV uint64_t *expected_verdict(struct harness *H, const uint8_t *f, uint32_t len)
{
    if (len < NET_HDR)
        return &H->bad_short;
    struct via_net_hdr n;
    memcpy(&n, f, sizeof n);
    if (n.version != VIA_NET_VERSION || n.kind == 0 || n.kind >= VIA_NET_NKINDS)
        return &H->bad_version;
    if (n.len != len - NET_HDR || (n.kind == VIA_NET_DATA ? n.len < WIRE_HDR : n.len != 0))
        return &H->bad_short;
    uint8_t *copy = malloc(len);
    CHECK(copy);
    memcpy(copy, f, len);
    ((struct via_net_hdr *)(void *)copy)->crc = 0;
    bool crc_ok = via_crc32c_ref(0, copy, len) == n.crc;
    free(copy);
    if (!crc_ok)
        return &H->bad_crc;
    if (n.conn_id != CONN || n.dst_vi != OUR_VI || n.token != TOKEN ||
        ((n.flags & VIA_NET_RELIABLE) != 0) != H->reliable)
        return &H->bad_vi;
    return NULL;
}

/* Read and check everything the link sent to the peer. */
static NO_COV void drain_peer(struct harness *H)
{
    static uint8_t f[FW_NET_FRAME_MAX + 64];
    for (;;) {
        ssize_t r = recv(H->peer, f, sizeof f, MSG_DONTWAIT | MSG_TRUNC); /* the real length */
        if (r < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
            return;
        }
        uint32_t len = (uint32_t)r;
        CHECK(len >= NET_HDR && len <= FW_NET_FRAME_MAX);
        struct via_net_hdr n;
        memcpy(&n, f, sizeof n);
        CHECK(n.version == VIA_NET_VERSION);
        CHECK(n.kind >= VIA_NET_DATA && n.kind < VIA_NET_NKINDS);
        CHECK(n.len == len - NET_HDR);
        CHECK(n.conn_id == CONN && n.dst_vi == PEER_VI && n.token == TOKEN);
        CHECK(((n.flags & VIA_NET_RELIABLE) != 0) == H->reliable);
        uint32_t crc = n.crc;
        ((struct via_net_hdr *)(void *)f)->crc = 0;
        CHECK(via_crc32c_ref(0, f, len) == crc);
        /* The acknowledgement is never ahead of what was delivered. */
        CHECK((int32_t)(n.ack - H->u->rcv_next) <= 0);
        if (n.kind == VIA_NET_DATA) {
            CHECK(len >= NET_HDR + WIRE_HDR);
            CHECK((int32_t)(n.seq - H->ours_next) < 0);
            CHECK(H->ours_next - n.seq <= FW_RTX_WIN);
            CHECK(H->ours[n.seq % FW_RTX_WIN] == hash_bytes(f + NET_HDR, len - NET_HDR));
            struct via_wire_hdr w;
            memcpy(&w, f + NET_HDR, sizeof w);
            CHECK(fw_link_frame_ok(&w, len - NET_HDR - WIRE_HDR));
        }
    }
}

/* Send one frame to the link; false if the socket's queue is full (the
 * frame never existed: the link reads, then the input goes on). */
static NO_COV void peer_send(struct harness *H, const uint8_t *f, uint32_t len)
{
    if (H->frames >= MAX_FRAMES)
        return;
    uint64_t *bad = expected_verdict(H, f, len);
    if (send(H->peer, f, len, MSG_DONTWAIT) != (ssize_t)len)
        return;
    H->frames++;
    H->sent++;
    if (bad) {
        (*bad)++;
        return;
    }
    struct via_net_hdr n;
    memcpy(&n, f, sizeof n);
    if (n.kind == VIA_NET_DATA)
        note_valid(H, n.seq, f, len);
}

static NO_COV void check_windows(const struct harness *H)
{
    const struct fw_udp *u = H->u;
    CHECK(u->snd_next - u->snd_una <= FW_RTX_WIN);
    CHECK(u->snd_sent - u->snd_una <= u->snd_next - u->snd_una);
    CHECK(u->snd_next == H->ours_next);
    CHECK(u->rcv_next == H->delivered_last + 1 || !H->reliable);
}

static NO_COV void op_data(struct harness *H, struct input *in)
{
    int8_t seqd, fdelta;
    uint8_t flags;
    uint32_t ack;
    uint16_t plen;
    uint8_t wire[WIRE_HDR];
    if (!take(in, &seqd, 1) || !take(in, &flags, 1) || !take(in, &fdelta, 1) || !take(in, &ack, 4) ||
        !take(in, &plen, 2) || !take(in, wire, sizeof wire))
        return;
    if (plen > VIA_MTU || plen > in->n)
        plen = (uint16_t)(in->n < VIA_MTU ? in->n : VIA_MTU);
    static uint8_t f[FW_NET_FRAME_MAX];
    uint32_t len = NET_HDR + WIRE_HDR + plen;
    struct via_wire_hdr w;
    memcpy(&w, wire, sizeof w);
    w.version = (flags & 0x80) ? 0 : VIA_WIRE_VERSION;
    w.frag_len = plen + ((flags & 0x40) ? (uint32_t)(int32_t)fdelta : 0u);
    w.crc = via_wire_check(&w) + ((flags & 0x20) ? 1u : 0u);
    memcpy(f + NET_HDR, &w, sizeof w);
    take(in, f + NET_HDR + WIRE_HDR, plen);
    bool rel = H->reliable != ((flags & 0x08) != 0);
    struct via_net_hdr n = {
        .version = (flags & 0x10) ? 0 : VIA_NET_VERSION, .kind = VIA_NET_DATA,
        .flags = rel ? VIA_NET_RELIABLE : 0, .len = len - NET_HDR,
        .conn_id = CONN + ((flags & 0x02) ? 1u : 0u), .dst_vi = OUR_VI + ((flags & 0x04) ? 1u : 0u),
        .seq = H->u->rcv_next + (uint32_t)(int32_t)seqd, .ack = ack,
        /* a frame from off the connection: all right but the secret */
        .token = TOKEN ^ (!(flags & 0x40) && (fdelta & 1) ? 1u : 0u)};
    n.chan = (uint8_t)(n.seq % FW_RTX_WIN);
    memcpy(f, &n, sizeof n);
    seal_frame(f, len);
    if (flags & 0x01)
        f[len - 1] ^= 0x5a;
    peer_send(H, f, len);
}

static NO_COV void op_raw(struct harness *H, struct input *in, bool sealed)
{
    uint16_t len;
    if (!take(in, &len, 2))
        return;
    if (len > in->n)
        len = (uint16_t)in->n;
    static uint8_t f[FW_NET_FRAME_MAX + 64];
    if (len > sizeof f)
        len = sizeof f;
    take(in, f, len);
    if (sealed && len >= NET_HDR)
        seal_frame(f, len);
    if (len > FW_NET_FRAME_MAX) {
        /* Longer than any frame: the link's receive truncates it and
         * must refuse it as short, whatever it says. */
        if (H->frames >= MAX_FRAMES || send(H->peer, f, len, MSG_DONTWAIT) != (ssize_t)len)
            return;
        H->frames++;
        H->sent++;
        H->bad_short++;
        return;
    }
    peer_send(H, f, len);
}

static NO_COV void op_control(struct harness *H, struct input *in)
{
    uint8_t kind;
    uint32_t seq, ack, why;
    if (!take(in, &kind, 1) || !take(in, &seq, 4) || !take(in, &ack, 4) || !take(in, &why, 4))
        return;
    uint8_t f[NET_HDR];
    struct via_net_hdr n = {
        .version = VIA_NET_VERSION, .kind = (uint8_t)(kind % 4),
        .flags = H->reliable ? VIA_NET_RELIABLE : 0, .conn_id = CONN, .dst_vi = OUR_VI,
        .seq = seq, .ack = ack, .why = why, .token = TOKEN};
    memcpy(f, &n, sizeof f);
    seal_frame(f, sizeof f);
    peer_send(H, f, sizeof f);
}

static NO_COV void op_post(struct harness *H, struct input *in)
{
    uint16_t len;
    if (!take(in, &len, 2))
        return;
    len %= VIA_MTU + 1;
    struct via_wire_hdr *w = H->link.ops->reserve(&H->link, len);
    if (!w) {
        CHECK(H->u->snd_next - H->u->snd_una == FW_RTX_WIN || H->u->failed);
        return;
    }
    *w = (struct via_wire_hdr){.version = VIA_WIRE_VERSION, .type = VIA_PKT_SEND,
                               .flags = VIA_PKT_FIRST | VIA_PKT_LAST, .dst_vi = PEER_VI,
                               .conn_id = CONN, .msg_seq = H->ours_next, .msg_len = len,
                               .frag_len = len};
    uint8_t *pay = (uint8_t *)(w + 1);
    for (uint32_t i = 0; i < len; i++)
        pay[i] = (uint8_t)(H->ours_next * 31 + i);
    H->link.ops->publish(&H->link, w);
    /* publish sealed the header: what goes on the wire from here on */
    H->ours[H->ours_next % FW_RTX_WIN] = hash_bytes((const uint8_t *)w, WIRE_HDR + len);
    H->ours_next++;
}

/* Take one packet from the link and check it. */
static NO_COV enum fw_link_peek_rc deliver_one(struct harness *H)
{
    uint64_t lost_before = H->cnt.lost;
    struct via_wire_hdr h;
    const uint8_t *payload;
    enum fw_link_peek_rc rc = H->link.ops->peek(&H->link, &h, &payload);
    if (rc == FW_LINK_EMPTY)
        return rc;
    struct fw_udp *u = H->u;
    unsigned c = u->rcv_next % FW_RTX_WIN;
    CHECK(u->rx_have[c]);
    uint32_t len = u->rx_len[c];
    struct via_net_hdr nh;
    memcpy(&nh, u->rx[c], sizeof nh);
    /* exactly the next in order (reliable), or later with the gap counted */
    CHECK(nh.seq == u->rcv_next);
    if (H->reliable)
        CHECK(nh.seq == H->delivered_last + 1);
    else
        CHECK((int32_t)(nh.seq - H->delivered_last) > 0 &&
              H->cnt.lost - lost_before == nh.seq - H->delivered_last - 1);
    CHECK(was_sent(H, nh.seq, hash_bytes(u->rx[c] + NET_HDR, len - NET_HDR)));
    CHECK(memcmp(&h, u->rx[c] + NET_HDR, sizeof h) == 0);
    if (rc == FW_LINK_BAD) {
        CHECK(!fw_link_frame_ok(&h, len - NET_HDR - WIRE_HDR));
        /* The pipeline breaks the VI and takes nothing more; the frame is
         * consumed all the same, so that the last drain reads the rest. */
        H->broken = true;
    } else {
        CHECK(rc == FW_LINK_PACKET);
        CHECK(h.version == VIA_WIRE_VERSION && h.crc == via_wire_check(&h));
        CHECK(h.type >= VIA_PKT_SEND && h.type < VIA_PKT_NTYPES && h.type != VIA_PKT_PAD);
        CHECK(h.frag_len == len - NET_HDR - WIRE_HDR && h.frag_len <= VIA_MTU);
        CHECK(payload == u->rx[c] + NET_HDR + WIRE_HDR);
    }
    H->delivered_last = nh.seq;
    H->link.ops->consume(&H->link, &h);
    return rc;
}

static NO_COV void op_deliver(struct harness *H, struct input *in)
{
    uint8_t n;
    if (!take(in, &n, 1))
        return;
    for (unsigned k = 0; k < n % 16 && !H->broken; k++)
        if (deliver_one(H) == FW_LINK_EMPTY)
            return;
}

static NO_COV bool harness_init(struct harness *H, bool reliable)
{
    memset(H, 0, sizeof *H);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
        return false;
    struct fw_udp *u = calloc(1, sizeof *u);
    CHECK(u);
    u->sock = sv[0];
    H->peer = sv[1];
    u->cnt = &H->cnt;
    u->vi_id = OUR_VI;
    u->conn_id = CONN;
    u->token = TOKEN;
    u->peer_vi = PEER_VI;
    u->reliable = reliable;
    /* No timer fires inside a run: what happens must follow from the input. */
    u->timeout_ns = UINT64_MAX / 4;
    u->rto_ns = UINT64_MAX / 256;
    u->watch.fd = sv[0];
    CHECK(fw_rtx_init(u));
    H->u = u;
    H->reliable = reliable;
    H->link = (struct fw_link){.ops = &fw_link_udp_ops, .udp = u};
    H->ours_next = 1;
    return true;
}

static NO_COV void harness_fini(struct harness *H)
{
    fw_rtx_fini(H->u);
    close(H->u->sock);
    close(H->peer);
    free(H->u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static struct harness H;
    if (!harness_init(&H, data[0] & 1))
        return 0;
    struct input in = {data + 1, size - 1};
    uint8_t op;
    while (take(&in, &op, 1)) {
        switch (op % 7) {
        case 0: op_data(&H, &in); break;
        case 1: op_raw(&H, &in, false); break;
        case 2: op_raw(&H, &in, true); break;
        case 3: op_control(&H, &in); break;
        case 4: op_post(&H, &in); break;
        case 5:
            CHECK(H.link.ops->turn(&H.link) == 0);
            drain_peer(&H);
            break;
        case 6: op_deliver(&H, &in); break;
        }
        check_windows(&H);
        drain_peer(&H);
    }
    /* Whatever is still in the socket is read (a packet the link finds
     * empty-handed means its socket is drained): every frame counted once. */
    for (unsigned k = 0; k < 2 * MAX_FRAMES && deliver_one(&H) != FW_LINK_EMPTY; k++)
        ;
    CHECK(H.cnt.rx_frames == H.sent);
    CHECK(H.cnt.bad_short == H.bad_short);
    CHECK(H.cnt.bad_version == H.bad_version);
    CHECK(H.cnt.bad_crc == H.bad_crc);
    CHECK(H.cnt.bad_vi == H.bad_vi);
    harness_fini(&H);
    return 0;
}

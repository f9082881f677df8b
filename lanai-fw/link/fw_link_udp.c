/*
 * fw_link_udp.c - the UDP link: the link operations (fw_link.h) over the
 * reliable transport (fw_rtx.c) and the NIC's datagram I/O (fw_net.c).
 *
 * The pipelines see the same link as on one host: reserve room for a
 * packet, publish it, peek at the next one that arrived and consume it,
 * whole and in order, or the link is broken. Here "room" is a free
 * channel of the transport's window, a published packet leaves at the end
 * of the NIC's turn (turn: one sendmmsg for the turn's packets), and
 * "broken" is the transport giving up on the peer.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw.h"
#include "fw_net.h"
#include "via_spec.h"

static struct via_wire_hdr *udp_reserve(struct fw_link *l, uint32_t payload)
{
    return fw_rtx_reserve(l->udp, payload);
}

static void udp_publish(struct fw_link *l, struct via_wire_hdr *h)
{
    fw_rtx_publish(l->udp, h);
}

/* The header copy's checks (fw_link_frame_ok): the length is the frame's. */
static enum fw_link_peek_rc udp_peek(struct fw_link *l, struct via_wire_hdr *h,
                                     const uint8_t **payload)
{
    struct fw_udp *u = l->udp;
    if (!fw_rtx_ready(u, h, payload))
        return FW_LINK_EMPTY;
    uint32_t flen = u->rx_len[u->rcv_next % FW_RTX_WIN] -
                    (uint32_t)(sizeof(struct via_net_hdr) + sizeof *h);
    if (!fw_link_frame_ok(h, flen))
        return FW_LINK_BAD;
    return FW_LINK_PACKET;
}

static void udp_consume(struct fw_link *l, const struct via_wire_hdr *h)
{
    (void)h;
    fw_rtx_consume(l->udp);
}

/* A packet to take? It may still be in the socket: looking costs a
 * system call, but a closed link must not be taken for empty while the
 * peer's last packets wait there. */
static bool udp_pending(const struct fw_link *l)
{
    return fw_rtx_poll(l->udp);
}

static void udp_stall(struct fw_link *l)
{
    (void)l; /* the peer's acks open the window; they arrive as frames */
}

static bool udp_drained(struct fw_link *l, unsigned n)
{
    (void)l;
    (void)n;
    return false;
}

static uint64_t udp_turn(struct fw_link *l)
{
    return fw_rtx_turn(l->udp);
}

static void udp_fini(struct fw_link *l, const _Atomic uint32_t *state)
{
    struct fw_udp *u = l->udp;
    if (!u)
        return;
    fw_rtx_linger(u, state);
    fw_net_unwatch(u->nic, &u->watch);
    fw_fault_fini(&u->fault);
    fw_rtx_fini(u);
    close(u->sock);
    free(u);
    l->udp = NULL;
}

const struct fw_link_ops fw_link_udp_ops = {
    .name = "udp",
    .reserve = udp_reserve,
    .publish = udp_publish,
    .peek = udp_peek,
    .consume = udp_consume,
    .pending = udp_pending,
    .stall = udp_stall,
    .drained = udp_drained,
    .turn = udp_turn,
    .fini = udp_fini,
};

bool fw_link_udp_init(struct fw_link *l, struct fw_nic *nic, struct via_chan *chan,
                      int side, int sock)
{
    struct fw_udp *u = calloc(1, sizeof *u);
    if (!u) {
        close(sock);
        return false;
    }
    u->sock = sock;
    u->nic = nic;
    u->cnt = &nic->st->net;
    u->vi_id = chan->vi_id[side];
    u->conn_id = chan->conn_id;
    u->peer_vi = chan->vi_id[1 - side];
    u->reliable = chan->reliability != VIP_SERVICE_UNRELIABLE;
    u->token = chan->frame_token;
    u->mac = chan->frame_mac != 0;
    memcpy(u->mac_key, chan->frame_key, sizeof u->mac_key);
    if (u->mac && sodium_init() < 0) {
        close(sock);
        free(u);
        return false;
    }
    u->timeout_ns = fw_net_env_ms("VIP_NET_TIMEOUT_MS", FW_NET_TIMEOUT_MS) * 1000000ull;
    u->rto_ns = fw_net_env_ms("VIP_NET_RTO_MS", 5) * 1000000ull;
    l->ops = &fw_link_udp_ops;
    l->tx = l->rx = NULL;
    l->udp = u;
    fw_fault_init(&u->fault, &chan->faults, u->vi_id);
    u->watch.fd = sock;
    u->watch.vi_id = u->vi_id;
    if (!fw_rtx_init(u) || !fw_net_watch(nic, &u->watch)) {
        fw_rtx_fini(u);
        close(sock);
        free(u);
        l->udp = NULL;
        return false;
    }
    return true;
}

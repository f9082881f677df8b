/*
 * fuzz_host.c - libFuzzer target: the authenticated handshake between
 * vipds and the control messages after it (kdriver/kd_host.c), from the
 * bytes another party writes on a TCP connection to the --listen port.
 *
 * vipd is linked whole except kd_main.c and kd_core.c; this file stands in
 * for them (kd, a silent kd_log, a clock) and for its poll loop
 * (kd_host_pollfds / kd_host_events). Its vipd knows two hosts: itself and
 * "peer". The harness connects to the listen port over loopback and, by
 * the input's first byte:
 *   even  a stranger: the rest of the input is written as it is (HELLOs,
 *         CHALLENGEs, PROOFs, anything). Oracle: it never becomes a host's
 *         link (peer stays DOWN with no links): without the cluster key
 *         nothing it says changes vipd.
 *   odd   the real peer: the harness holds the key, completes the
 *         handshake (the oracle: peer is then UP on an authenticated
 *         link), then sends records  type:u16le len:u8 body[len]  each
 *         with its correct MAC (a bit of the type's high byte flips one
 *         MAC byte: that message must end the link).
 * Every step runs under ASan and UBSan.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kd.h"

#define NO_COV __attribute__((no_sanitize("coverage")))
#define CHECK(c)                                                                           \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "fuzz_host: %s:%d: %s\n", __FILE__, __LINE__, #c);             \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

struct kd_state kd;
static uint64_t clock_ns = 1000000000ull;

void kd_log(enum kd_level lv, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "vipd %d: %s\n", (int)lv, line);
}

uint64_t kd_now_ns(void)
{
    return clock_ns;
}

static struct kd_host *peer;
static uint16_t peer_port = 9; /* nobody listens there: vipd never reaches it */

static NO_COV void setup(void)
{
    char dir[] = "/tmp/vipl-fuzzhost.XXXXXX", key[64], why[400];
    CHECK(mkdtemp(dir));
    snprintf(key, sizeof key, "%s/vipd.key", dir);
    CHECK(kd_auth_keygen(key, why, sizeof why));
    CHECK(kd_auth_load(key, why, sizeof why));
    unlink(key);
    rmdir(dir);
    kd.link = VIA_LINK_UDP;
    kd.listen_ip = htonl(INADDR_LOOPBACK);
    /* the kernel's pick of a port, then listen there */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = kd.listen_ip};
    socklen_t sl = sizeof sa;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
          getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    close(fd);
    kd.listen_port = ntohs(sa.sin_port);
    kd.host_id = kd_host_id_of(kd.listen_ip, kd.listen_port);
    CHECK(kd_host_add("me", kd.listen_ip, kd.listen_port));
    CHECK((peer = kd_host_add("peer", kd.listen_ip, peer_port)));
    kd_remote_init(); /* as vipd's main does: the layers' calls up */
    kd_connect_init();
    CHECK(kd_host_listen());
}

/* vipd's poll loop, until nothing more happens. */
static NO_COV void pump(void)
{
    struct pollfd p[64];
    for (int round = 0; round < 64; round++) {
        size_t n = kd_host_pollfds(p, 64);
        /* a moment for loopback to deliver what was just written */
        if (poll(p, n, round ? 0 : 2) <= 0)
            return;
        kd_host_events(p, n);
    }
}

static NO_COV int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(kd.listen_port),
                             .sin_addr.s_addr = kd.listen_ip};
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    int one = 1; /* each message goes at once, as vipd's own do */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static NO_COV void put(int fd, const void *b, size_t n)
{
    const uint8_t *p = b;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EAGAIN) {
            pump();
            continue;
        }
        if (w <= 0)
            return; /* vipd hung up on us */
        p += w;
        n -= (size_t)w;
    }
}

static NO_COV void msg(int fd, uint16_t type, const void *body, uint32_t len,
                       const uint8_t *k_tx, uint64_t *n_tx, bool spoil)
{
    uint8_t buf[16 + 256 + 32];
    struct via_host_msg m = {.magic = VIA_HOST_MAGIC, .version = VIA_NET_VERSION, .type = type,
                             .len = len};
    memcpy(buf, &m, sizeof m);
    memcpy(buf + sizeof m, body, len);
    size_t n = sizeof m + len;
    if (k_tx) {
        kd_auth_msg_mac(k_tx, (*n_tx)++, buf, n, buf + n);
        if (spoil)
            buf[n] ^= 1;
        n += 32;
    }
    put(fd, buf, n);
}

/* The handshake as the real peer: true when vipd took it. */
static NO_COV bool handshake(int fd, struct kd_auth_hs *hs, uint8_t *k_tx, uint8_t *k_rx)
{
    *hs = (struct kd_auth_hs){.connector = peer->host_id, .acceptor = kd.host_id,
                              .link = kd.link};
    kd_auth_random(hs->nc, sizeof hs->nc);
    struct via_host_hello h = {.host_id = peer->host_id, .link = kd.link, .to_id = kd.host_id};
    memcpy(h.nonce, hs->nc, sizeof h.nonce);
    msg(fd, VIA_HOST_HELLO, &h, sizeof h, NULL, NULL, false);
    pump();
    uint8_t in[16 + sizeof(struct via_host_challenge)];
    ssize_t r = recv(fd, in, sizeof in, MSG_DONTWAIT | MSG_WAITALL);
    if (r != (ssize_t)sizeof in)
        return false;
    struct via_host_challenge c;
    memcpy(&c, in + 16, sizeof c);
    memcpy(hs->na, c.nonce, sizeof hs->na);
    CHECK(c.host_id == kd.host_id && kd_auth_proof_ok(hs, true, c.mac));
    struct via_host_proof p;
    kd_auth_proof(hs, false, p.mac);
    msg(fd, VIA_HOST_PROOF, &p, sizeof p, NULL, NULL, false);
    pump();
    kd_auth_session(hs, false, k_tx, k_rx);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        setup();
        ready = true;
    }
    if (size < 1)
        return 0;
    int fd = dial();
    pump(); /* accepted: a stranger */
    if (!(data[0] & 1)) {
        put(fd, data + 1, size - 1);
        pump();
        CHECK(peer->state == KD_HOST_DOWN && peer->link[0].fd < 0 && peer->link[1].fd < 0);
    } else {
        struct kd_auth_hs hs;
        uint8_t k_tx[32], k_rx[32];
        uint64_t n_tx = 0;
        CHECK(handshake(fd, &hs, k_tx, k_rx));
        CHECK(peer->state == KD_HOST_UP && peer->link[1].fd >= 0 &&
              peer->link[1].auth == KD_LINK_AUTHED);
        size_t off = 1;
        while (off + 3 <= size && peer->link[1].fd >= 0) {
            uint16_t type;
            memcpy(&type, data + off, 2);
            uint8_t len = data[off + 2];
            off += 3;
            if (len > size - off)
                len = (uint8_t)(size - off);
            bool spoil = (type & 0x8000) != 0;
            msg(fd, (uint16_t)(type & 0x7fff), data + off, len, k_tx, &n_tx, spoil);
            off += len;
            pump();
            if (spoil)
                CHECK(peer->link[1].fd < 0); /* a message that fails its MAC ends the link */
        }
    }
    close(fd);
    pump();
    kd_host_down(peer, "the input ended");
    clock_ns += 1000000ull;
    return 0;
}

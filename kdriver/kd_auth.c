/*
 * kd_auth.c - the cluster key and what vipds prove with it, with libsodium.
 *
 * libsodium, not MUNGE: MUNGE authenticates a uid to a host through a
 * daemon of its own (munged, root, a key of its own, clocks in step: its
 * credentials expire), which an emulated cluster on one machine or a few
 * test hosts would have to set up first; what vipds need is two programs
 * that share a key proving it to each other, which is a MAC and a
 * challenge-response, a few calls of a library Debian keeps.
 *
 * Primitives: crypto_auth (HMAC-SHA-512-256) for every proof and message
 * MAC; crypto_generichash keyed with the cluster key (BLAKE2b) to derive
 * a link's and a connection's keys from the nonces and salts of their
 * handshake; randombytes for nonces, salts and keys.
 */
#include "kd_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t cluster_key[KD_AUTH_KEY_BYTES];
static bool have_key;

static bool lib_ready(char *why, size_t n)
{
    if (sodium_init() < 0) {
        snprintf(why, n, "libsodium cannot start (sodium_init failed)");
        return false;
    }
    return true;
}

bool kd_auth_key_path(const char *key_opt, const char *hosts, char *out, size_t n)
{
    if (key_opt && *key_opt)
        return snprintf(out, n, "%s", key_opt) < (int)n;
    if (!hosts || !*hosts)
        return false;
    const char *slash = strrchr(hosts, '/');
    int len = slash ? (int)(slash - hosts) : 1;
    return snprintf(out, n, "%.*s/%s", len, slash ? hosts : ".", KD_AUTH_KEY_FILE) < (int)n;
}

bool kd_auth_load(const char *path, char *why, size_t n)
{
    if (!lib_ready(why, n))
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(why, n, "cannot open the cluster key %s: %s (make one with 'vipctl keygen %s' "
                 "and copy it to every host)", path, strerror(errno), path);
        return false;
    }
    struct stat st;
    char hex[2 * KD_AUTH_KEY_BYTES + 64];
    ssize_t got = -1;
    bool ok = false;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        snprintf(why, n, "the cluster key %s is not a regular file", path);
    else if (st.st_uid != geteuid())
        snprintf(why, n, "the cluster key %s belongs to uid %u, not to this vipd's (%u)", path,
                 (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & 077)
        snprintf(why, n, "the cluster key %s is open to other users (mode %04o): "
                 "chmod 600 %s", path, (unsigned)(st.st_mode & 07777), path);
    else if ((got = read(fd, hex, sizeof hex - 1)) < 0)
        snprintf(why, n, "cannot read the cluster key %s: %s", path, strerror(errno));
    else {
        size_t len = (size_t)got, bin = 0;
        while (len && (hex[len - 1] == '\n' || hex[len - 1] == ' ' || hex[len - 1] == '\r'))
            len--;
        const char *end = NULL;
        ok = len == 2 * KD_AUTH_KEY_BYTES &&
             sodium_hex2bin(cluster_key, sizeof cluster_key, hex, len, NULL, &bin, &end) == 0 &&
             bin == KD_AUTH_KEY_BYTES;
        if (!ok)
            snprintf(why, n, "the cluster key %s does not hold %u hex digits (make one with "
                     "'vipctl keygen')", path, 2 * KD_AUTH_KEY_BYTES);
    }
    sodium_memzero(hex, sizeof hex);
    close(fd);
    have_key = ok;
    return ok;
}

bool kd_auth_loaded(void)
{
    return have_key;
}

bool kd_auth_keygen(const char *path, char *why, size_t n)
{
    if (!lib_ready(why, n))
        return false;
    uint8_t key[KD_AUTH_KEY_BYTES];
    char hex[2 * KD_AUTH_KEY_BYTES + 1];
    randombytes_buf(key, sizeof key);
    sodium_bin2hex(hex, sizeof hex, key, sizeof key);
    sodium_memzero(key, sizeof key);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(why, n, "cannot create %s: %s%s", path, strerror(errno),
                 errno == EEXIST ? " (a key is there already: every host must use the same)"
                                 : "");
        sodium_memzero(hex, sizeof hex);
        return false;
    }
    hex[2 * KD_AUTH_KEY_BYTES] = '\n';
    bool ok = write(fd, hex, sizeof hex) == (ssize_t)sizeof hex && fsync(fd) == 0;
    sodium_memzero(hex, sizeof hex);
    if (close(fd) < 0)
        ok = false;
    if (!ok) {
        snprintf(why, n, "cannot write %s: %s", path, strerror(errno));
        unlink(path);
    }
    return ok;
}

void kd_auth_random(void *buf, size_t n)
{
    randombytes_buf(buf, n);
}

/* ---- the link handshake ---------------------------------------------------------- */

/* The handshake's transcript, with a label that says what it is for. */
static size_t transcript(const struct kd_auth_hs *t, const char *label, uint8_t *out)
{
    size_t n = 0, l = strlen(label);
    memcpy(out, "vipd-auth-1 ", 12);
    n += 12;
    memcpy(out + n, label, l);
    n += l;
    memcpy(out + n, &t->connector, 4);
    memcpy(out + n + 4, &t->acceptor, 4);
    memcpy(out + n + 8, &t->link, 4);
    n += 12;
    memcpy(out + n, t->nc, sizeof t->nc);
    memcpy(out + n + sizeof t->nc, t->na, sizeof t->na);
    return n + sizeof t->nc + sizeof t->na;
}

#define TRANSCRIPT_MAX (12 + 16 + 12 + 2 * KD_AUTH_NONCE_BYTES)

void kd_auth_proof(const struct kd_auth_hs *t, bool by_acceptor, uint8_t mac[KD_AUTH_MAC_BYTES])
{
    uint8_t m[TRANSCRIPT_MAX];
    size_t len = transcript(t, by_acceptor ? "acceptor" : "connector", m);
    crypto_auth(mac, m, len, cluster_key);
}

bool kd_auth_proof_ok(const struct kd_auth_hs *t, bool by_acceptor,
                      const uint8_t mac[KD_AUTH_MAC_BYTES])
{
    uint8_t m[TRANSCRIPT_MAX];
    size_t len = transcript(t, by_acceptor ? "acceptor" : "connector", m);
    return have_key && crypto_auth_verify(mac, m, len, cluster_key) == 0;
}

static void derive(const struct kd_auth_hs *t, const char *label, uint8_t k[KD_AUTH_KEY_BYTES])
{
    uint8_t m[TRANSCRIPT_MAX];
    size_t len = transcript(t, label, m);
    crypto_generichash(k, KD_AUTH_KEY_BYTES, m, len, cluster_key, sizeof cluster_key);
}

void kd_auth_session(const struct kd_auth_hs *t, bool acceptor, uint8_t k_tx[KD_AUTH_KEY_BYTES],
                     uint8_t k_rx[KD_AUTH_KEY_BYTES])
{
    derive(t, acceptor ? "to-connector" : "to-acceptor", k_tx);
    derive(t, acceptor ? "to-acceptor" : "to-connector", k_rx);
}

void kd_auth_msg_mac(const uint8_t k[KD_AUTH_KEY_BYTES], uint64_t seq, const void *msg,
                     size_t len, uint8_t mac[KD_AUTH_MAC_BYTES])
{
    crypto_auth_hmacsha512256_state st;
    crypto_auth_hmacsha512256_init(&st, k, KD_AUTH_KEY_BYTES);
    crypto_auth_hmacsha512256_update(&st, (const uint8_t *)&seq, sizeof seq);
    crypto_auth_hmacsha512256_update(&st, msg, len);
    crypto_auth_hmacsha512256_final(&st, mac);
}

bool kd_auth_msg_ok(const uint8_t k[KD_AUTH_KEY_BYTES], uint64_t seq, const void *msg, size_t len,
                    const uint8_t mac[KD_AUTH_MAC_BYTES])
{
    uint8_t want[KD_AUTH_MAC_BYTES];
    kd_auth_msg_mac(k, seq, msg, len, want);
    return sodium_memcmp(want, mac, sizeof want) == 0;
}

/* ---- a UDP connection's frame secrets --------------------------------------------- */

void kd_auth_frame_secret(uint32_t req_host, uint32_t acc_host, uint32_t wire_id,
                          const uint8_t salt_req[KD_AUTH_SALT_BYTES],
                          const uint8_t salt_acc[KD_AUTH_SALT_BYTES], uint64_t *token,
                          uint8_t key[KD_AUTH_KEY_BYTES])
{
    uint8_t m[16 + 12 + 2 * KD_AUTH_SALT_BYTES], out[8 + KD_AUTH_KEY_BYTES];
    memcpy(m, "vipd-frame-1    ", 16);
    memcpy(m + 16, &req_host, 4);
    memcpy(m + 20, &acc_host, 4);
    memcpy(m + 24, &wire_id, 4);
    memcpy(m + 28, salt_req, KD_AUTH_SALT_BYTES);
    memcpy(m + 28 + KD_AUTH_SALT_BYTES, salt_acc, KD_AUTH_SALT_BYTES);
    crypto_generichash(out, sizeof out, m, sizeof m, cluster_key, sizeof cluster_key);
    memcpy(token, out, 8);
    if (!*token)
        *token = 1; /* 0 is "no token" nowhere, but never a value a zeroed frame has */
    memcpy(key, out + 8, KD_AUTH_KEY_BYTES);
    sodium_memzero(out, sizeof out);
}

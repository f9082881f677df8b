/*
 * kd_auth.h - the cluster key and what vipds prove with it (kd_auth.c).
 *
 * The vipds of one emulated cluster share a 32-byte secret, the cluster
 * key (a file: `vipctl keygen FILE`, mode 0600). Every TCP link between
 * two vipds starts with a challenge-response that proves both ends hold
 * it (kd_host.c), after which each message carries a MAC under a key of
 * that link and direction, with a counter that makes a replayed or
 * reordered message fail. The UDP link's frames carry a per-connection
 * secret token derived from the key (and may carry a MAC: vipd
 * --frame-mac). Standalone: vipctl links it for keygen.
 */
#ifndef KD_AUTH_H
#define KD_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KD_AUTH_KEY_BYTES 32u
#define KD_AUTH_NONCE_BYTES 32u
#define KD_AUTH_MAC_BYTES 32u
#define KD_AUTH_SALT_BYTES 16u
#define KD_AUTH_KEY_FILE "vipd.key" /* beside the hosts file, unless --key says */

/* Where the key is: key_opt (--key) if given, else KD_AUTH_KEY_FILE in
 * the hosts file's directory. false: neither is known. */
bool kd_auth_key_path(const char *key_opt, const char *hosts, char *out, size_t n);
/* Read the key vipd proves itself with. Refused (false, why) when the file
 * is not a regular file of this user's, is readable or writable by
 * anybody else, or does not hold 64 hex digits. */
bool kd_auth_load(const char *path, char *why, size_t n);
bool kd_auth_loaded(void);
/* A new random key in a new file, mode 0600 (never over an existing one). */
bool kd_auth_keygen(const char *path, char *why, size_t n);

void kd_auth_random(void *buf, size_t n);

/* The handshake of one link: who connected to whom, with which link kind,
 * and the two fresh nonces; both proofs and both session keys are bound
 * to all of it. */
struct kd_auth_hs {
    uint32_t connector, acceptor; /* host ids */
    uint32_t link;
    uint8_t nc[KD_AUTH_NONCE_BYTES], na[KD_AUTH_NONCE_BYTES];
};
void kd_auth_proof(const struct kd_auth_hs *t, bool by_acceptor, uint8_t mac[KD_AUTH_MAC_BYTES]);
bool kd_auth_proof_ok(const struct kd_auth_hs *t, bool by_acceptor,
                      const uint8_t mac[KD_AUTH_MAC_BYTES]);
/* The link's two message keys, as seen from one end. */
void kd_auth_session(const struct kd_auth_hs *t, bool acceptor, uint8_t k_tx[KD_AUTH_KEY_BYTES],
                     uint8_t k_rx[KD_AUTH_KEY_BYTES]);
/* The MAC of message number `seq` of a link direction. */
void kd_auth_msg_mac(const uint8_t k[KD_AUTH_KEY_BYTES], uint64_t seq, const void *msg,
                     size_t len, uint8_t mac[KD_AUTH_MAC_BYTES]);
bool kd_auth_msg_ok(const uint8_t k[KD_AUTH_KEY_BYTES], uint64_t seq, const void *msg, size_t len,
                    const uint8_t mac[KD_AUTH_MAC_BYTES]);

/* A UDP connection's frame secrets, the same at both vipds: the token
 * every frame carries and the key of the optional frame MAC. */
void kd_auth_frame_secret(uint32_t req_host, uint32_t acc_host, uint32_t wire_id,
                          const uint8_t salt_req[KD_AUTH_SALT_BYTES],
                          const uint8_t salt_acc[KD_AUTH_SALT_BYTES], uint64_t *token,
                          uint8_t key[KD_AUTH_KEY_BYTES]);

#endif

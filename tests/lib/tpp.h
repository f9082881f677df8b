/*
 * tpp.h - a verified ping-pong between two processes (tests/lib/tpp.c).
 *
 * The client sends message i (size tpp_size(i), payload tl_pat(i, .)), the
 * server checks it and echoes it back from its receive buffer, the client
 * checks the echo. Both sides keep `nrecv` receives posted at all times
 * (posted before connecting), gather/scatter over sseg/rseg segments, and
 * every imm_every-th message carries immediate data.
 */
#ifndef TPP_H
#define TPP_H

#include "tlib.h"

enum tpp_kind {
    TPP_SMALL,  /* 0 .. 4096 bytes, varied */
    TPP_LARGE,  /* 64 KiB .. 1 MiB, the first and every 7th exactly 1 MiB */
    TPP_MIXED,  /* mostly small, every 16th large */
    TPP_FIXED,  /* always `fixed` bytes */
};

struct tpp_cfg {
    VIP_RELIABILITY_LEVEL rel;
    char srv_dev[16]; /* NIC of the server, e.g. "via0" */
    char cli_dev[16];
    char srv_host[32]; /* the name the client asks for (another host's); "" = srv_dev */
    char disc[17];    /* discriminator the server listens on */
    unsigned nmsgs;   /* round trips */
    enum tpp_kind kind;
    uint32_t fixed;
    unsigned sseg, rseg; /* segments of send / receive descriptors (1..16) */
    unsigned imm_every;  /* 0: never */
    unsigned nrecv;      /* receives kept posted (1..16) */
    unsigned notify_after; /* client: post a token to the parent after this many (0: never) */
    VIP_ULONG timeout;   /* per wait, ms */
};

void tpp_defaults(struct tpp_cfg *c, VIP_RELIABILITY_LEVEL rel, unsigned nmsgs,
                  enum tpp_kind kind);
uint32_t tpp_size(const struct tpp_cfg *c, unsigned i);

/* One side, start to end (open, connect, run, disconnect, close).
 * 0 on success, else -1 with the reason in err. */
int tpp_side(const struct tpp_cfg *c, int server, char *err, size_t cap);

/* For tl_spawn: arg is a struct tpp_cfg *. */
int tpp_child_client(void *cfg);
int tpp_child_server(void *cfg);

#endif

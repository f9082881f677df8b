/*
 * techo.h - an echo peer in a child process (tests/lib/techo.c), for tests
 * that need one connected VI and care only about their own side.
 *
 * The child opens `dev`, keeps `nrecv` receives of TECHO_MAX bytes posted
 * on one VI of reliability `rel`, accepts one connection on `disc`, and
 * sends every message back (same bytes, same immediate data if any) until
 * it receives the quit message (immediate data TECHO_QUIT). It then waits
 * for the parent's 'x' before it disconnects, so the parent decides when
 * its VI loses the connection.
 */
#ifndef TECHO_H
#define TECHO_H

#include "tlib.h"

#define TECHO_MAX 65536u
#define TECHO_QUIT 0xFFFFFFFFu

struct techo {
    char dev[16];
    char disc[17];
    VIP_RELIABILITY_LEVEL rel;
    unsigned nrecv; /* 1..16 */
    struct tl_child child;
};

/* Start the child (server on dev); the parent then connects a VI of level
 * rel to (dev, e->disc) with tl_request. 0 on success. */
int techo_start(struct techo *e, const char *dev, VIP_RELIABILITY_LEVEL rel);
/* Send the quit message on vi (the parent's, connected) from the
 * registered descriptor d (64 bytes, handle mh), wait for its completion,
 * then let the child disconnect and wait for it (CUnit-asserting it
 * succeeded). With vi NULL (set-up failed): kill the child. */
void techo_stop(struct techo *e, VIP_VI_HANDLE vi, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE mh);

#endif

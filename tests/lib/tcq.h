/*
 * tcq.h - traffic between two processes over several VIs whose send and
 * receive queues all complete into ONE completion queue per process, the
 * way VIPL servers are written (tests/lib/tcq.c).
 *
 * Every completion is learned from the CQ only (VipCQDone in a loop, or
 * VipCQWait), then taken with VipSendDone/VipRecvDone on the VI the CQ
 * named; no VI-level wait is ever called.
 *
 *   ping-pong: the client sends message i on VI i % nvi and waits (through
 *     the CQ) for its send completion and the echo; the server echoes each
 *     message from its receive buffer on the same VI.
 *   stream: the client keeps up to `window` sends outstanding over the VIs;
 *     the server keeps `nrecv` receives posted per VI and reposts each as it
 *     completes, and returns a credit message every `credit` messages; the
 *     client never has more messages unconsumed than the server has posted.
 *
 * Message i has tcq_size(i) bytes of payload tl_pat(i, .); every fifth
 * carries immediate data i. Everything received is checked.
 */
#ifndef TCQ_H
#define TCQ_H

#include "tlib.h"

#define TCQ_MAXVI 8u

struct tcq_cfg {
    char srv_dev[16], cli_dev[16];
    char disc[TCQ_MAXVI][17];
    unsigned nvi;            /* VIs per side, 1..TCQ_MAXVI */
    unsigned n;              /* round trips (ping-pong) or messages (stream) */
    int stream;              /* 0: ping-pong, 1: stream */
    int sleep;               /* 1: VipCQWait, and VIP_WAIT_SPIN_US=0 in the children */
    unsigned window;         /* stream: client sends outstanding (<= 16 per VI) */
    unsigned credit;         /* stream: a credit every this many messages */
    const char *ext_mode;    /* VIP_EXT_MODE for the children; NULL: inherit */
    unsigned hogs;           /* busy-looping children for the duration */
    VIP_ULONG wait_ms;       /* bound of one completion wait */
    int bound_ms;            /* bound of the whole exchange */
};

/* Defaults: 4 VIs, ping-pong, polling, window 32, credit 8, 5 s waits;
 * devices srv/cli (tl_dev maps them); n from tl_count by the NIC's profile:
 * 10^6 unpaced, 2*10^4 paced. Returns -1 if the profile cannot be learned. */
int tcq_defaults(struct tcq_cfg *c, const char *srv, const char *cli);
uint32_t tcq_size(uint32_t i);

/* Spawn server, client and hogs; wait (bounded, failing on a stall of
 * either side); CUnit-assert that both succeeded; always reap everything. */
void tcq_run(const struct tcq_cfg *c);

#endif

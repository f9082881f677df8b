/*
 * tconf.h - helpers of the VIPL 1.0 conformance suite (tests/test_conf_*.c).
 *
 * Most conformance checks need no second process: one process opens two
 * NIC handles (via0 and via1, or one NIC twice), makes a VI on each and
 * connects them, the accept running on a helper thread (struct tc_call),
 * because VipConnectWait and VipConnectRequest each block until the other
 * side comes. Expected failures go through TERR, which also checks that
 * the call left a reason of its own in vip_last_error().
 */
#ifndef TCONF_H
#define TCONF_H

#include <pthread.h>

#include "tlib.h"

/* ---- expected failures and their reasons ------------------------------------ */
/* Set vip_last_error() to a text no VIPL call produces. */
void tc_err_prime(void);
/* 1 if vip_last_error() is non-empty and not the primed text. */
int tc_err_fresh(void);
/* call must return expect (a failure code) and leave a reason of its own;
 * the test goes on either way. */
#define TERR(call, expect)                                                                \
    do {                                                                                  \
        tc_err_prime();                                                                   \
        VIP_RETURN tc_rc_ = (call);                                                       \
        int tc_ok_ = tc_rc_ == (expect), tc_fresh_ = tc_err_fresh();                      \
        if (!tc_ok_)                                                                      \
            tl_report_rc(__FILE__, __LINE__, #call, tc_rc_, (expect));                    \
        else if (!tc_fresh_)                                                              \
            fprintf(stderr, "\n  %s:%d: %s left no reason of its own (\"%s\")\n",         \
                    __FILE__, __LINE__, #call, vip_last_error());                         \
        CU_assertImplementation(tc_ok_, __LINE__, #call " == " #expect, __FILE__, "",     \
                                CU_FALSE);                                                \
        CU_assertImplementation(tc_fresh_, __LINE__, #call ": fresh vip_last_error()",    \
                                __FILE__, "", CU_FALSE);                                  \
    } while (0)

/* ---- one end of a connection in this process -------------------------------------- */
#define TC_SLOTS 48u     /* descriptor slots of 1 KiB (room for 16 segments) */
#define TC_SLOT_DATA 16384u /* data slots of 16 KiB */
#define TC_BUF (64u * 1024u + TC_SLOTS * TC_SLOT_DATA)

struct tc_end {
    struct tl_nic t;
    struct tl_buf b;       /* TC_BUF bytes: descriptor slots, then data slots */
    VIP_VI_HANDLE vi;
    VIP_CQ_HANDLE cq;      /* set by the test; tc_pair_close destroys it */
};
struct tc_pair {
    struct tc_end e[2];    /* e[0] requests, e[1] accepts */
};

static inline VIP_DESCRIPTOR *tc_desc(struct tc_end *e, unsigned slot)
{
    return (VIP_DESCRIPTOR *)(void *)(e->b.p + 1024u * slot);
}
static inline uint8_t *tc_data(struct tc_end *e, unsigned slot)
{
    return e->b.p + 64u * 1024u + TC_SLOT_DATA * slot;
}

/* Open dev0 and dev1 (tl_dev maps them) and register a buffer on each; no
 * VIs yet. 0, or -1 after a CUnit failure. */
int tc_pair_open(struct tc_pair *p, const char *dev0, const char *dev1);
/* Both ends' VIs with reliability rel, bound to e[i].cq if set. */
int tc_pair_vis(struct tc_pair *p, VIP_RELIABILITY_LEVEL rel);
/* Connect e[0].vi to e[1].vi. 0, or -1 after a CUnit failure. */
int tc_pair_connect(struct tc_pair *p);
/* Connect va (of a, requesting) to vb (of b, accepting on a thread). */
int tc_connect(struct tl_nic *a, VIP_VI_HANDLE va, struct tl_nic *b, VIP_VI_HANDLE vb);
/* Disconnect and destroy the VIs, destroy the CQs, free, close. */
void tc_pair_close(struct tc_pair *p);

/* Post a 1-segment receive of len bytes into data slot `slot` (descriptor slot too). */
VIP_RETURN tc_post_recv(struct tc_end *e, unsigned slot, uint32_t len);
/* Fill data slot `slot` with message seq's pattern and post a 1-segment send. */
VIP_RETURN tc_post_send(struct tc_end *e, unsigned slot, uint32_t len, uint32_t seq);
/* Wait (bounded) for the next completion of a queue; NULL on timeout. */
VIP_DESCRIPTOR *tc_wait(VIP_VI_HANDLE vi, int recv, VIP_ULONG ms);
/* Poll VipQueryVi until the VI is in state st; 0, or -1 after ms. */
int tc_wait_state(VIP_VI_HANDLE vi, VIP_VI_STATE st, int ms);
/* "viaN" for the NIC a handle was opened on (after tl_dev mapping). */
void tc_dev_name(const struct tl_nic *t, char out[16]);

/* ---- a blocking connection call on a helper thread ----------------------------------- */
struct tc_call {
    pthread_t th;
    int started;
    int accept;            /* 1: VipConnectWait + VipConnectAccept; 0: VipConnectRequest */
    struct tl_nic *t;
    VIP_VI_HANDLE vi;
    char host[16];         /* request: the NIC to call */
    char disc[17];
    VIP_ULONG timeout;
    VIP_RETURN rc;
};
/* Start tl_accept(t, vi, disc, timeout) or tl_request(t, vi, host, disc,
 * timeout) on a thread. 0 on success. */
int tc_call_start(struct tc_call *c, int accept, struct tl_nic *t, VIP_VI_HANDLE vi,
                  const char *host, const char *disc, VIP_ULONG timeout);
/* Join it; its return code. */
VIP_RETURN tc_call_join(struct tc_call *c);

/* ---- what an error callback saw ---------------------------------------------------------- */
struct tc_errlog {
    pthread_mutex_t lock;
    unsigned n;
    VIP_ERROR_DESCRIPTOR e[8];
    pthread_t thread[8];   /* who ran the handler */
};
void tc_errlog_init(struct tc_errlog *l);
/* A VipErrorCallback handler; Context must be a struct tc_errlog *. */
void tc_errlog_handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e);
unsigned tc_errlog_count(struct tc_errlog *l);

#endif

/*
 * mp.h - a small message-passing layer over VIPL, written the way the VIA
 * message-passing libraries of the late 1990s were (MPI devices over M-VIA
 * and cLAN, the Berkeley and Cornell layers): it uses only vipl.h, links
 * only -lvipl -lpthread, and leans on the behaviours those programs relied
 * on:
 *
 *   - connection set-up by looping on VipConnectRequest while it returns
 *     VIP_NO_MATCH (the lower rank waits, the higher rank asks);
 *   - one completion queue shared by every VI, for sends and receives;
 *   - a free list of send descriptors threaded through CS.Next, and the
 *     queue of arrived receives threaded the same way;
 *   - eager sends through registered bounce buffers for short messages,
 *     with credits returned on every header;
 *   - rendezvous for long ones: RTS, CTS naming the registered user
 *     buffer, then one RDMA write with immediate data into it.
 *
 * Messages between two ranks arrive in the order they were sent; there are
 * no tags. Every call returns 0, or -1 with the reason in mp_error().
 */
#ifndef MP_H
#define MP_H

#include <stddef.h>

#define MP_MAX_RANKS 8
#define MP_EAGER_MAX 8192   /* payload bytes sent through a bounce buffer */

struct mp;

/* Open `dev` and connect rank `rank` of `nranks` to every other rank;
 * devs[i] is the VIA device (host name) of rank i; `job` keeps the
 * discriminators of concurrent jobs apart. */
struct mp *mp_init(const char *dev, int rank, int nranks, const char *const *devs,
                   const char *job, unsigned timeout_ms);
int mp_send(struct mp *m, int to, const void *buf, size_t len);
/* Receive the next message from `from` into buf (at most cap bytes);
 * *len gets its length. */
int mp_recv(struct mp *m, int from, void *buf, size_t cap, size_t *len);
void mp_finalize(struct mp *m);
const char *mp_error(void);

/* What the layer counted (for the tests). */
struct mp_stats {
    unsigned long eager, rendezvous, credit_msgs, reg_cache_hits, reg_cache_misses;
};
void mp_stats(const struct mp *m, struct mp_stats *s);

#endif

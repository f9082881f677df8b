/*
 * am_int.h - the insides of libam2: bundles, endpoints, peers, the wire
 * header, and the calls between the files.
 *
 * The files bottom up: each calls only files listed above it, never one
 * below (tools/check_layers.sh fails on a loop). Where a lower file needs
 * an upper one's work, it is passed in (am_shm_poll's deliver) or the
 * loop that waits for it is the upper file's (connecting: am_send.c).
 *
 *   am_core.c      process-wide state, the AM_PAR lock, errors, clock, live handles, returns queued
 *   am_peer.c      peers: by name, requests not answered yet, broken
 *   am_rdv.c       a rank's side of amrun's TCP rendezvous (am_rdv.h)
 *   am_shm.c       messages between processes of one host (shared memory)
 *   am_nic.c       messages through the NIC: send descriptors, long ones by RDMA write
 *   am_xlate.c     the translation table
 *   am_listen.c    an endpoint's listener thread: connection requests
 *   am_conn.c      a peer's VI: receives, connection set-up by name; which way a message goes
 *   am_dispatch.c  a received message: checks, handlers, return to sender, tokens
 *   am_local.c     messages between endpoints of one process
 *   am_poll.c      AM_Poll's work: the VIs' receives, the completion queue, the queues
 *   am_send.c      requests and replies, credits, and the waits of a send (which poll)
 *   am_endpoint.c  endpoints, names, tags, segments, handlers, statistics
 *   am_bundle.c    AM_Init/Terminate, bundles, events, AM_WaitSema, AM_Poll
 *   am_spmd.c      SPMD start-up and collectives (am2_spmd.h)
 *   am_amudp.c     AMUDP's statistics and error names (amudp.h)
 *   am_amudp_spmd.c AMUDP's SPMD names, the master and its spawners (amudp_spmd.h)
 *
 * Only the public VIPL API (vipl.h) is used, as any VIPL program would.
 */
#ifndef AM_INT_H
#define AM_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <vipl.h>

#include "am2.h"

#define AM2_EN_MAGIC 0xA2E1u

/* Requests a peer may have outstanding to us (and we to it): the AM-II
 * paper's K. Each VI keeps 2K+2 receives posted: K for requests (and
 * returned replies), K for replies (and returns, acks), one for the
 * HELLO, one of slack for the buffer a running handler still holds. */
#define AM_CREDITS 16
#define AM_NRECV (2 * AM_CREDITS + 2)
#define AM_NSEND 64 /* send descriptors per endpoint (grown on demand) */
#define AM_DIRECT 4 /* up to this many VIs a bundle polls one by one, not by its CQ */

/* ---- the wire --------------------------------------------------------------------- */

enum am_kind {
    AMW_REQUEST = 1, /* a request: handler runs; it answers with REPLY, ACK or RETURN */
    AMW_REPLY,       /* restores the credit; its handler runs */
    AMW_ACK,         /* restores the credit: the request handler did not reply */
    AMW_RETURN,      /* an undeliverable message comes back (status) */
    AMW_RET_ACK,     /* a returned reply was handled: restores the replier's peer's credit */
    AMW_HELLO,       /* first message on a VI: the sender's segment */
    AMW_SEG,         /* the sender's segment changed (a request: answered by SEG_ACK) */
    AMW_SEG_ACK,
    AMW_LONGDATA,    /* shared memory: a piece of a long message's data (am_shm.c) */
    AMW_NKINDS
};

struct am_wire {
    uint8_t kind;     /* enum am_kind */
    uint8_t cat;      /* AM2_SHORT, AM2_MEDIUM, AM2_LONG */
    uint8_t handler;
    uint8_t nargs;
    uint8_t rkind;    /* RETURN: the kind of the message returned */
    uint8_t pad;
    uint16_t status;  /* RETURN: EBAD... */
    uint32_t nbytes;  /* medium: bytes after the header; long: bytes in the segment */
    uint32_t seg_gen; /* long: the destination segment generation the sender used */
    uint64_t tag;     /* the destination endpoint's tag, from the sender's table */
    uint64_t offset;  /* long: dest_offset; HELLO/SEG: segment base */
    uint64_t seg_len; /* HELLO/SEG: segment length */
    uint32_t seg_mh;  /* HELLO/SEG: segment memory handle */
    uint32_t rseq;    /* REQUEST: its number on this peer (am_out); answers echo it */
    int32_t args[AM2_MAX_SHORT];
};
#define AM_SLOT (sizeof(struct am_wire) + AM2_MAX_MEDIUM)
/* seg_gen of a long message the destination placed itself (shared memory) */
#define AM_GEN_PLACED 0xFFFFFFFFu

/* ---- peers: one remote endpoint (shared memory or a VI) ------------------------------------------------ */

enum am_peer_state { PEER_IDLE, PEER_CONNECTED, PEER_BROKEN, PEER_NSTATES };
extern const char *const am_peer_state_name[PEER_NSTATES];

struct am2_ep;

/* A request sent to a peer and not answered yet: kept until its reply,
 * ACK or return comes, so that if the peer dies it can still come back
 * (EBADENDPOINT) instead of being lost. At most K (the credits). */
struct am_out {
    uint32_t seq;            /* 0: slot free */
    struct am_wire w;
};

struct am_peer {
    struct am_peer *next;    /* the endpoint's list */
    struct am2_ep *ep;
    en_t name;
    int xidx;                /* our translation index for it, -1 if unmapped */
    enum am_peer_state state;
    VIP_VI_HANDLE vi;
    VIP_DESCRIPTOR *rdesc;   /* AM_NRECV receive descriptors ... */
    uint8_t *rbuf;           /* ... and their buffers, in the endpoint's pool */
    VIP_MEM_HANDLE rmh;
    int credits;             /* requests we may still send it */
    int sends_out;           /* posted sends not yet taken back */
    bool hello;              /* its HELLO arrived: we know its segment */
    uint64_t seg_base, seg_len;
    uint32_t seg_mh, seg_gen;
    int seg_acks_owed;       /* our SEG messages it has not answered yet */
    struct am_shmq *shmq;    /* its shared-memory queue, if on this host (am_shm.c) */
    bool shm_tried;
    struct am_pend *pend, *pend_tail; /* messages waiting for room in it */
    struct am_out out[AM_CREDITS]; /* requests it has not answered */
    uint32_t next_seq;
    int cq_owed;             /* receives taken off its VI directly whose CQ entries are still to come */
};

/* ---- endpoints and bundles -------------------------------------------------------------- */

struct am_xlate {
    bool inuse;
    en_t name;
    tag_t tag;
    struct am_peer *peer;    /* once a message went there or came from there */
};

/* A received message being handled: what the token points to. */
struct am_token {
    struct am2_ep *ep;
    struct am_peer *peer;    /* NULL for a local message */
    const struct am_wire *w;
    en_t src;
    int src_idx;
    bool is_request, replied, returned;
    tag_t msg_tag;
};

/* A message to return to its sender's handler 0 from this process
 * (detected locally, or a local peer's). */
struct am_ret {
    struct am_ret *next;
    struct am_wire w;        /* the returned message's header; w.status says why */
    en_t dest;
};

struct am2_bundle;

struct am2_ep {
    struct am2_ep *next;      /* the bundle's list */
    struct am2_bundle *eb;
    en_t name;
    tag_t tag;
    am2_handler_fn_t handler[AM2_MAX_HANDLERS];
    struct am_xlate *xl;
    int nxl;
    void *seg;
    uintptr_t seg_len;
    VIP_MEM_HANDLE seg_mh;
    uint32_t seg_gen;
    char disc[17];           /* the VIA discriminator it listens on */
    VIP_NET_ADDRESS *listen; /* own NIC address + disc */
    struct am_peer *peers;
    /* send descriptors with their bounce buffers */
    VIP_DESCRIPTOR **send_free;
    int nsend_free, nsend;
    struct am_pool *pools;
    /* registrations of long-message sources outside the segment */
    struct am_reg { const uint8_t *p; size_t len; VIP_MEM_HANDLE mh; } reg[8];
    unsigned reg_next;
    struct am_ret *rets, **rets_tail; /* returns waiting for AM_Poll */
    struct am_msgq *localq, **localq_tail; /* local messages waiting for AM_Poll (am_local.c) */
    amx_stats_t st;
    int expected_eps, expected_reqs;
    unsigned polls;          /* AM_Poll turns (reclaiming sends now and then) */
    struct am_shmq *shmq;    /* its own shared-memory receive queue (AM2_SHM=1) */
    bool has_pend;           /* a peer may have messages waiting (am_pend) */
    struct am_listener *listener; /* waits for peers' connection requests (am_listen.c) */
};

struct am2_bundle {
    struct am2_bundle *next;
    struct am2_ep *eps;
    int type;
    int mask;
    VIP_CQ_HANDLE cq;
    unsigned long cq_entries, cq_used;
    /* receives taken off the CQ while a handler ran (handled by AM_Poll) */
    struct am_stash { struct am_peer *peer; VIP_DESCRIPTOR *d; } *stash;
    int nstash, capstash;
    int event;               /* a message arrived since the mask was armed */
    unsigned cq_idle;        /* polls in a row that found the CQ empty */
    /* With few VIs, AM_Poll looks at their receive queues directly (am_poll.c) */
    struct am_peer *direct[AM_DIRECT];
    int ndirect;             /* all the bundle's VIs, or 0: too many, the CQ */
    int nvis;                /* VIs on the bundle */
    unsigned direct_turn;    /* polls that looked at the VIs one by one */
    /* VI -> peer for completions (am_peer_of_vi): open addressing, at
     * most half full, rebuilt when the VIs change; NULL: walk the peers */
    struct am_vislot { VIP_VI_HANDLE vi; struct am_peer *p; } *vimap;
    unsigned vimask;
    int cq_owed;             /* the sum of its peers' cq_owed */
};

/* ---- process-wide state (am_core.c) ------------------------------------------------------ */

struct am_global {
    int init;                /* AM_Init nesting */
    VIP_NIC_HANDLE nic;
    VIP_PROTECTION_HANDLE ptag;
    VIP_NIC_ATTRIBUTES attr;
    struct am2_bundle *bundles;
    uint32_t next_ep_id;
    unsigned connect_ms;     /* AM2_CONNECT_MS */
    unsigned congestion_ms;  /* AM2_CONGESTION_MS */
    struct am_token *cur;    /* the handler running now, if any */
    int shm;                 /* AM2_SHM: same-host peers through shared memory */
    int direct;              /* AM2_DIRECT: poll few VIs one by one (am_poll.c) */
};
extern struct am_global am_g;

/* AM_PAR: while a bundle of that type exists, every AM call holds one
 * recursive process-wide lock (released when the call returns, by the
 * cleanup attribute; AM_WaitSema drops it while it sleeps). Handlers run
 * under it, so they may reply. AM_SEQ programs take no lock. */
int am_api_lock(void);
void am_api_unlock(int *locked);
void am_api_sleep_begin(int locked);
void am_api_sleep_end(int locked);
void am_api_par_add(void);           /* an AM_PAR bundle was made */
void am_api_par_remove(int *locked); /* one is gone: the last releases *locked */
#define AM_API_LOCK()                                                                      \
    int am_locked_ __attribute__((cleanup(am_api_unlock), unused)) = am_api_lock()

/* Non-zero: am_fail says every failure on stderr (AMUDP's name). */
extern int AMUDP_VerboseErrors;
/* am_spmd.c: what ends a rank that leaves the job (AMUDP's name). */
extern void (*AMUDP_SPMDkillmyprocess)(int);

/* Record why a call fails; returns code. */
int am_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define AM_CHECK_INIT()                                                                    \
    do {                                                                                   \
        if (!am_g.init)                                                                    \
            return am_fail(AM_ERR_NOT_INIT, "AM_Init has not been called");                \
    } while (0)

bool am_bundle_ok(eb_t eb);
bool am_ep_ok(ep_t ep);
struct am2_ep *am_ep_by_name(const en_t *name);
uint64_t am_now_ms(void);
/* Queue w for ep's handler 0 with status; the next AM_Poll runs it. */
void am_ret_push(struct am2_ep *ep, const struct am_wire *w, const en_t *dest, int status);

/* am_peer.c */
struct am_peer *am_peer_find(struct am2_ep *ep, const en_t *name);
struct am_peer *am_peer_get(struct am2_ep *ep, const en_t *name); /* create if missing */
void am_peer_broken(struct am_peer *p, const char *why);
void am_out_add(struct am_peer *p, struct am_wire *w);   /* numbers w (rseq) */
bool am_out_done(struct am_peer *p, uint32_t seq);       /* its answer came */
bool am_peer_waiting(const struct am_peer *p);           /* requests unanswered */

/* am_rdv.c: every rank's name through amrun's TCP rendezvous (am_rdv.h) */
int am_rdv_exchange(const char *rdv, int rank, int nranks, const en_t *me, en_t *all,
                    char **env, size_t *envlen, uint64_t deadline_ms);

/* am_shm.c */
int am_shm_create(struct am2_ep *ep);
void am_shm_destroy(struct am2_ep *ep);
bool am_shm_attach(struct am_peer *p);
void am_shm_detach(struct am_peer *p);
void am_shm_flush(struct am_peer *p);
/* Retry what a full queue made wait, for every peer of ep (AM_Poll, and
 * each turn of AM_WaitSema's sleep). */
void am_shm_flush_ep(struct am2_ep *ep);
int am_shm_send(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len);
int am_shm_send_long(struct am_peer *p, struct am_wire *w, const uint8_t *src);
typedef void am_deliver_fn(struct am_peer *p, const struct am_wire *w, size_t len);
int am_shm_poll(struct am2_ep *ep, int budget, am_deliver_fn *deliver);
bool am_shm_peer_alive(struct am_peer *p);
bool am_shm_pending(struct am2_ep *ep);
void am_shm_sleep(struct am2_ep *ep, unsigned ms);
void am_shm_ring(struct am2_ep *ep);

/* am_nic.c: sends through the NIC; nothing there polls */
VIP_DESCRIPTOR *am_send_get(struct am2_ep *ep);
uint8_t *am_send_buf(VIP_DESCRIPTOR *d);
int am_send_post(struct am_peer *p, VIP_DESCRIPTOR *d, size_t len);
void am_send_reclaim(struct am2_ep *ep);
void am_send_free_all(struct am2_ep *ep);
int am_send_nic(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len);
int am_send_long(struct am_peer *p, const struct am_wire *w, const void *src, bool wait);

/* am_listen.c: the endpoint's listener thread and the requests it took. */
int am_listen_start(struct am2_ep *ep);
void am_listen_stop(struct am2_ep *ep);
bool am_listen_take(struct am2_ep *ep, VIP_CONN_HANDLE *conn, VIP_NET_ADDRESS *ra, size_t cap);

/* am_conn.c */
/* Connecting, one turn: AM_OK once connected; EBADENDPOINT, EUNREACHABLE
 * when it cannot be; else one request, then accepting what is pending,
 * and AM_CONN_AGAIN: the caller polls and asks again. */
#define AM_CONN_AGAIN (-1)
int am_peer_ask(struct am_peer *p);
void am_accept_pending(struct am2_ep *ep);
void am_peer_destroy(struct am_peer *p);
int am_peer_repost(struct am_peer *p, VIP_DESCRIPTOR *d);
struct am_peer *am_peer_of_vi(struct am2_bundle *eb, VIP_VI_HANDLE vi);
void am_en_disc(const en_t *name, char out[17]);
void am_bundle_vis_changed(struct am2_bundle *eb, const struct am_peer *gone);
/* One message to p: its shared-memory queue if it has one, else the NIC. */
int am_send_ctl(struct am_peer *p, const struct am_wire *w, const void *payload, size_t len);

/* am_dispatch.c: a received message's checks, handlers and answers */
void am_dispatch(struct am2_ep *ep, struct am_peer *peer, const struct am_wire *w,
                 const void *payload, const en_t *src);
void am_run_returns(struct am2_ep *ep);
int am_check_request(struct am2_ep *ep, struct am_peer *peer, const struct am_wire *w,
                     const en_t *src, int *src_idx);
int am_check_body(struct am2_ep *ep, const struct am_wire *w);
op_t am_opcode(const struct am_wire *w);
/* One message from peer p (a VI's receive or a shared-memory cell), len bytes at w. */
void am_handle_msg(struct am_peer *p, const struct am_wire *w, size_t len);

/* am_local.c */
int am_local_send(struct am2_ep *from, const en_t *to, const struct am_wire *w,
                  const void *payload);
int am_local_poll(struct am2_ep *ep);
void am_local_drop(struct am2_ep *ep);

/* am_poll.c */
int am_poll_bundle(struct am2_bundle *eb, int budget);
bool am_cq_stale(struct am_peer *p); /* a CQ entry of a receive taken already: skip it */

/* am_send.c */
int am_send_seg(struct am2_ep *ep);

#endif

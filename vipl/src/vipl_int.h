/*
 * vipl_int.h - libvipl internals: the host half of the data path and the
 * client of the kernel agent.
 *
 * Objects behind the opaque VIPL handles. A handle names a slot of the
 * handle table and its generation (vipl_handle.c), so a stale handle names
 * nothing; each object also starts with a magic word, so a handle of one
 * kind passed for another is refused with VIP_INVALID_PARAMETER.
 */
#ifndef VIPL_INT_H
#define VIPL_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vipl.h>

#include "ext.h"
#include "nic.h" /* the NIC's interface, its short lock (fw_lock) included */
#include "via_abi.h"

#define VIPL_MAGIC_NIC 0x4e494331u
#define VIPL_MAGIC_VI 0x56493031u
#define VIPL_MAGIC_CQ 0x43513031u
#define VIPL_MAGIC_PTAG 0x50544731u
#define VIPL_MAGIC_CONN 0x434f4e31u
#define VIPL_DEAD 0xdeadbeefu

struct vip_vi;

struct vip_ptag {
    uint32_t magic;
    uint32_t id;
    VIP_PVOID handle;
    struct vip_nic *nic;
    struct vip_ptag *next;
};

/* The registration cache (vipl_rcache.c): closed registrations vipd
 * still holds, oldest first. */
#define VIPL_RCACHE_SLOTS 64
#define VIPL_RCACHE_BYTES (256ull << 20) /* kept bytes: the user's limit is shared */
struct vipl_rcache_slot {
    uintptr_t va;
    uint64_t len;
    uint32_t ptag, flags;
    VIP_MEM_HANDLE handle;
};
struct vipl_rcache {
    pthread_mutex_t lock;
    unsigned n;
    uint64_t hits, bytes;
    struct vipl_rcache_slot slot[VIPL_RCACHE_SLOTS];
};

struct vip_nic {
    uint32_t magic;
    VIP_PVOID handle;
    int sock;                    /* control channel to vipd (session) */
    pthread_mutex_t ctl_lock;    /* one request/reply at a time on sock */
    uint64_t ctl_cookie;         /* of the last request on sock (under ctl_lock) */
    /* Error reports nobody waits for (VI_ERROR): queued, sent when sock is
     * free and writable, their replies dropped by cookie (vipl_ctl.c). */
    pthread_mutex_t report_lock;
    struct via_ctl_vi_error reports[16];
    unsigned nreports;
    uint32_t session_id;
    uint32_t nic_index;
    char sock_path[256];
    bool sock_system;            /* the system vipd's: everything there must be root's */
    struct via_ctl_query_nic_r attr;

    struct fw_nic *hw;           /* the NIC of this session (nic.h) */
    void *tpt_map;
    struct via_event_page *ev;
    struct via_status_page *st;
    struct via_nic_page *np;
    struct vipl_rcache rc;

    _Atomic uint32_t spin_ns;    /* how long a wait polls before sleeping (vipl_wait.c) */
    bool spin_fixed;             /* VIP_WAIT_SPIN_US set: no adaptation */
    pthread_mutex_t lock;        /* vis[], ptags, error callback */
    struct vip_vi *vis[VIA_MAX_VI];
    _Atomic uint32_t ncqs;       /* CQs of this NIC (VipCloseNic refuses while any) */
    struct vip_ptag *ptags;
    void (*err_handler)(VIP_PVOID, VIP_ERROR_DESCRIPTOR *);
    VIP_PVOID err_ctx;
};

/* Pending one-shot notifications of a VI or CQ (vipl_notify.c). */
struct vip_notify {
    pthread_t thread;
    struct vip_notify *next;
};
struct vip_notifiers {
    pthread_mutex_t lock;
    struct vip_notify *list;
    _Atomic int cancel;          /* the VI or CQ is being destroyed */
};

struct vip_cq {
    uint32_t magic;
    uint32_t id;
    VIP_PVOID handle;
    struct vip_nic *nic;
    struct fw_cq *hw;
    pthread_mutex_t resize_lock; /* one VipResizeCQ at a time; ring, map_len */
    struct via_cq_ring *ring;    /* our mapping of the ring the NIC uses */
    size_t map_len;
    _Atomic uint32_t nvis;       /* VIs bound to it */
    _Atomic int overflow_told;   /* the error callback heard of its overflow */
    struct vip_notifiers notify;
};

/* The program's descriptor of each posted slot, indexed like the NIC's
 * work queue: slot i is the queue's i-th post, whose token the NIC holds
 * in its slot i (the NIC's record is the token, ours is what Done hands
 * back, as a verbs provider keeps work-request ids beside its queue). The
 * NIC completes a queue in order, so Done/Wait look only at the head. */
struct vip_queue {
    VIP_DESCRIPTOR *desc[VIA_QUEUE_DEPTH];
    /* Written under the VI's lock; head is also read without it, by a poll
     * that compares it with the NIC's count of completions. */
    _Atomic uint32_t head;
    uint32_t tail;
    uint64_t unwritten_taken; /* completions the NIC could not write, taken (vipl_wait.c) */
};

struct vip_vi {
    uint32_t magic;
    uint32_t id;                 /* VI id on the NIC */
    VIP_PVOID handle;
    uint16_t gen;                /* the NIC's incarnation of that id */
    struct vip_nic *nic;
    /* The VI's one lock (nic_vi_lock): the host's queues below, and the
     * NIC's stages, which a post or a poll then runs without a second. */
    struct fw_lock *lock;
    struct fw_vi *hw;            /* the NIC's VI (nic.h) */
    bool paced;                  /* its NIC keeps a timing model (nic_paced) */
    const _Atomic bool *err_flag; /* nic_vi_error_flag */
    VIP_VI_ATTRIBUTES attr;
    struct vip_cq *scq, *rcq;
    struct vip_queue sq, rq;
    struct via_vi_page *db;
    struct via_chan *chan;
    /* The channel of the last connection, kept mapped until the next one
     * ends or the VI goes: a wait of another thread may still sleep on
     * its wake word (nic_vi_wake_dir). */
    struct via_chan *chan_old;
    _Atomic uint32_t dir_sleepers; /* waits asleep on a word of chan or chan_old */
    struct via_event_page *peer_ev;
    struct ext_vi ext;           /* short-message extensions (extensions/) */
    struct vip_notifiers notify;
    _Atomic uint32_t idle_polls; /* Done calls in a row that found nothing (vipl_wait.c) */
};

struct vip_conn {
    uint32_t magic;
    uint32_t conn_id;
    VIP_PVOID handle;
    struct vip_nic *nic;
    VIP_VI_ATTRIBUTES remote_attr;
};

/* The bytes of a VIP_NET_ADDRESS (host address, then discriminator). The
 * struct declares HostAddress[1] but callers allocate it larger. */
static inline uint8_t *vipl_na_bytes(const VIP_NET_ADDRESS *a)
{
    return (uint8_t *)((uintptr_t)a + offsetof(VIP_NET_ADDRESS, HostAddress));
}

/* ---- vipl_ctl.c: the control channel ------------------------------------- */
VIP_RETURN vipl_call(struct vip_nic *n, uint32_t op, const void *req, size_t req_len,
                     void *rep, size_t rep_len, int *fds, int *nfds);
/* The same on a fresh ATTACHed socket, for calls that block (connect):
 * they wait for vipd as long as vipd takes, but ping it meanwhile (and at
 * timeout_ms, the call's own Timeout), so a stopped or wedged vipd costs
 * them VIP_ERROR_RESOURCE within a ping period or two, never a hang. */
VIP_RETURN vipl_call_side(struct vip_nic *n, uint32_t op, const void *req, size_t req_len,
                          void *rep, size_t rep_len, int *fds, int *nfds, VIP_ULONG timeout_ms);
/* Tell vipd a VI broke its connection, without waiting for vipd: the
 * report is queued and sent when the session's socket is free. */
void vipl_report_vi_error(struct vip_nic *n, uint32_t vi_id, uint32_t code);
/* Connect to vipd, starting one if none runs (unless VIPD_AUTOSTART=0). */
int vipl_connect_vipd(const char *path, bool system);
void *vipl_map_fd(int fd, size_t len, int prot);

/* ---- vipl_err.c: messages ----------------------------------------------------- */
void vipl_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A notice on stderr under VIP_DEBUG only (not a failure: vip_last_error
 * keeps the last failure). */
void vipl_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The handler a NIC has until the program sets one: it names the error
 * on stderr (VIP_QUIET silences it). */
void vipl_default_error_handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e);
VIP_RETURN vipl_fail(VIP_RETURN rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* As vipl_fail for an answer the program expects (vip_last_error has it;
 * stderr only under VIP_DEBUG). */
VIP_RETURN vipl_note(VIP_RETURN rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* vipl_env.c: the environment's settings understood (VIP_INVALID_PARAMETER
 * naming the valid values if not); VIP_PROFILE and VIPD_NICS agree with
 * the vipd that answered (its NIC's profile, its NIC count). */
VIP_RETURN vipl_env_check(void);
/* vipl_err.c: a descriptor's Status bits in words, its operation's name. */
void vipl_status_bits(VIP_UINT32 status, char *out, size_t cap);
const char *vipl_control_op_name(VIP_UINT16 control);
VIP_RETURN vipl_env_agrees(const char *sock_path, unsigned nic, const char *profile,
                           unsigned nnics, const char *hosts);

/* ---- vipl_handle.c: handles ------------------------------------------------------ */
#define VIPL_HANDLE_IDX_BITS 16
#define VIPL_HANDLE_SLOTS (1u << VIPL_HANDLE_IDX_BITS)
extern _Atomic uint64_t vipl_handle_slot[VIPL_HANDLE_SLOTS];
/* A new handle for obj, or NULL when the table is full. */
VIP_PVOID vipl_handle_new(void *obj);
/* The handle names nothing from now on. */
void vipl_handle_free(VIP_PVOID h);
/* The object a handle names, or NULL for a stale, foreign or made-up one. */
static inline void *vipl_handle_obj(const void *h)
{
    uintptr_t v = (uintptr_t)h;
    uint64_t gen = (uint64_t)v >> VIPL_HANDLE_IDX_BITS;
    if (gen == 0 || gen > 0xffff)
        return NULL;
    uint64_t w = atomic_load_explicit(&vipl_handle_slot[v & (VIPL_HANDLE_SLOTS - 1)],
                                      memory_order_acquire);
    return (w >> 48) == gen ? (void *)(uintptr_t)(w & 0xffffffffffffull) : NULL;
}

/* ---- handle checks -------------------------------------------------------------- */
static inline struct vip_nic *vipl_nic(VIP_NIC_HANDLE h)
{
    struct vip_nic *n = vipl_handle_obj(h);
    return n && n->magic == VIPL_MAGIC_NIC ? n : NULL;
}
static inline struct vip_vi *vipl_vi(VIP_VI_HANDLE h)
{
    struct vip_vi *v = vipl_handle_obj(h);
    return v && v->magic == VIPL_MAGIC_VI ? v : NULL;
}
static inline struct vip_cq *vipl_cq(VIP_CQ_HANDLE h)
{
    struct vip_cq *c = vipl_handle_obj(h);
    return c && c->magic == VIPL_MAGIC_CQ ? c : NULL;
}
struct vip_ptag *vipl_ptag(struct vip_nic *n, VIP_PROTECTION_HANDLE h);
struct vip_ptag *vipl_ptag_by_id(struct vip_nic *n, uint32_t id);

/* ---- vipl_vi.c / vipl_conn.c ------------------------------------------------------- */
/* peer_pidfd: the peer process (-1: none; the NIC then learns of its
 * death from vipd only); the NIC owns it from here on. */
void vipl_vi_attach_channel(struct vip_vi *vi, const struct via_ctl_conn_done_r *r,
                            int chan_fd, int peer_ev_fd, int peer_pidfd);
void vipl_vi_detach_channel(struct vip_vi *vi);
void vipl_attr_to_wire(const VIP_VI_ATTRIBUTES *a, struct via_vi_attr *w);
void vipl_attr_from_wire(struct vip_nic *n, const struct via_vi_attr *w, VIP_VI_ATTRIBUTES *a);

/* ---- vipl_notify.c ---------------------------------------------------------------- */
void vipl_notifiers_init(struct vip_notifiers *n);
/* Stop and join every pending notification (before the object goes). */
void vipl_notifiers_fini(struct vip_notifiers *n);

/* ---- vipl_ext.c: the extensions' calls and staging -------------------------------- */
void vipl_ext_vi_init(struct vip_vi *vi);
void vipl_ext_vi_fini(struct vip_vi *vi);

/* ---- vipl_wait.c: progress, completion and waiting ----------------------------------- */
/* Deliver an asynchronous error the NIC left on the VI (call unlocked):
 * tell the kernel agent if the VI broke its connection, then the program.
 * Every post and Done asks: the look at the NIC's flag is inline. */
void vipl_take_error(struct vip_vi *vi);
/* Spend a host cost of the paced profile: the thread is busy until t. */
static inline void vipl_spend_until(uint64_t t)
{
    while (nic_now_ns() < t)
        ;
}

static inline void vipl_deliver_error(struct vip_vi *vi)
{
    if (atomic_load_explicit(vi->err_flag, memory_order_acquire))
        vipl_take_error(vi);
}
/* Map a VI id and incarnation of this NIC to its handle (NULL if gone). */
VIP_VI_HANDLE vipl_vi_handle_by_id(struct vip_nic *n, uint32_t id, uint16_t gen);
/* Poll ready() (which lends the NIC our CPU), then sleep on the session's
 * event page until it changes, until the deadline. ready() sets *held to a
 * paced effect's release time when what it waits for is held. A timeout
 * leaves its reason in vip_last_error(), naming `what`. */
typedef bool (*vipl_ready_fn)(void *arg, uint64_t *held);
/* vi: the VI waited on, or cq: the CQ (where it sleeps: vipl_wait.c). */
VIP_RETURN vipl_wait(struct vip_nic *n, struct vip_vi *vi, struct vip_cq *cq,
                     VIP_ULONG timeout_ms, vipl_ready_fn ready, void *arg, const char *what);
/* Before unmapping a channel of vi's: wake the waits asleep on its words
 * and wait until none is. */
void vipl_vi_unpin_wait(struct vip_vi *vi);

/* ---- the registration cache (vipl_rcache.c) ---- */
void vipl_rcache_init(struct vip_nic *n);
void vipl_rcache_fini(struct vip_nic *n);
/* Register [va, va + len): a kept registration of exactly it reopened, else
 * check() then vipd's. */
VIP_RETURN vipl_rcache_register(struct vip_nic *n, uintptr_t va, size_t len, uint32_t ptag,
                                uint32_t flags, VIP_MEM_HANDLE *h,
                                VIP_RETURN (*check)(uintptr_t va, size_t len));
/* Deregister h (registered at va): closed at once, kept for a later
 * registration of the same region. */
VIP_RETURN vipl_rcache_deregister(struct vip_nic *n, uintptr_t va, VIP_MEM_HANDLE h);
/* Give vipd back the kept registrations of ptag (0: all). */
void vipl_rcache_flush(struct vip_nic *n, uint32_t ptag);
/* The TPT entry of a live handle of this NIC that the cache has not
 * closed, or NULL. */
const struct via_tpt_entry *vipl_tpt_lookup(struct vip_nic *n, VIP_MEM_HANDLE h);

#endif

/*
 * nic.h - the emulated NIC as a component: everything the host library
 * (vipl/) and the host side of the extensions (extensions/) may call.
 *
 * The NIC shares with the host only what a LANai card shared with its host:
 * the doorbell pages (tokens rung by the host), descriptors and data in
 * registered memory (reached through the TPT), the status words and CQ
 * entries it writes there, and its SRAM (the doorbell page's descriptorless
 * slots). Its own state (struct fw_nic, fw_vi, fw_cq) is opaque here.
 *
 * Progress. The NIC works whether or not the host calls in: a host thread
 * that polls or waits lends the NIC its CPU and does the NIC's work inline
 * (the fast path: no system call, no hand-over), and otherwise the NIC's own
 * thread does it (fw_thread.c), sleeping when there is nothing to do and
 * woken by its peers only when nobody polls. Both enter through the same
 * progress functions, under the NIC's per-VI lock.
 *
 * Errors. The NIC never calls the host library. An asynchronous error is
 * recorded on the VI (nic_vi_take_error); the library reports it to the
 * kernel agent and to the program after it has dropped its own locks.
 */
#ifndef NIC_H
#define NIC_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fw_lock.h" /* the data path's short lock: the library's VI state takes it too */
#include "fw_model.h"
#include "via_abi.h"

struct fw_nic;
struct fw_vi;
struct fw_cq;

/* What the kernel agent handed this process for one NIC session. */
struct nic_params {
    uint16_t nic_index;
    const struct via_tpt_entry *tpt; /* read-only view */
    struct via_event_page *ev;       /* this session's wake-up page */
    struct via_status_page *st;      /* counters and stage trace */
    struct via_nic_page *np;         /* modelled resources (shared by the NIC's processes) */
    const struct via_profile *prof;  /* the profile (copied); NULL: np's as it is now */
    bool own_thread;                 /* false: VIP_PROGRESS=manual */
};

struct nic_vi_params {
    uint32_t vi_id;
    uint32_t ptag;
    uint32_t reliability;  /* VIP_SERVICE_* */
    uint32_t max_transfer;
    bool rdma_write, rdma_read;
};

/* An asynchronous error the NIC found on a VI. */
struct nic_error {
    uint32_t code;      /* VIP_ERROR_CODE */
    uint64_t desc_va;   /* the descriptor concerned, 0 = the VI */
    bool tell_agent;    /* first report of a VI that broke its connection */
    bool orderly;       /* CONN_LOST: the peer disconnected (an orderly end) */
};

/* ---- the NIC ------------------------------------------------------------- */
struct fw_nic *nic_create(const struct nic_params *p);
/* Stops the NIC's thread; every VI and CQ must be gone. */
void nic_destroy(struct fw_nic *nic);
bool nic_paced(const struct fw_nic *nic);
const struct via_profile *nic_profile(const struct fw_nic *nic);
/* A waiter of the NIC's event page: after incrementing sleepers, before
 * its re-check (the wake-up protocol's (a), fw_updt.c). */
void nic_sleep_fence(void);

/* ---- VIs ------------------------------------------------------------------- */
struct fw_vi *nic_vi_create(struct fw_nic *nic, struct via_vi_page *db,
                            const struct nic_vi_params *p, struct fw_cq *scq, struct fw_cq *rcq);
/* Waits until no progress is inside the VI, then frees it. */
void nic_vi_destroy(struct fw_vi *vi);
void nic_vi_set_params(struct fw_vi *vi, const struct nic_vi_params *p);
/* peer_ev: the peer's event page (a shared-memory link), or NULL with
 * sock the connected UDP socket of a channel to another host (VIA_LINK_UDP
 * or VIA_LINK_OFI; the NIC owns it from here on). peer_pidfd: a pidfd of
 * the peer process (the NIC owns it), or -1 (a remote peer, or none to be
 * had): see nic_peers_check. false: the link could not be set up (VI in
 * error). */
bool nic_vi_connect(struct fw_vi *vi, struct via_chan *chan, int side, uint32_t peer_vi,
                    struct via_event_page *peer_ev, int sock, int peer_pidfd);
/* Local disconnect or destroy: flush every queued descriptor, detach. */
void nic_vi_disconnect(struct fw_vi *vi);
bool nic_vi_take_error(struct fw_vi *vi, struct nic_error *e);
/* A flag the host may read without a call (as it reads a status word):
 * set while nic_vi_take_error has something, a hint only (the take
 * decides). It lives as long as the VI. */
const _Atomic bool *nic_vi_error_flag(const struct fw_vi *vi);

/*
 * The VI's lock: the NIC runs the VI's stages under it, and the host
 * library keeps its own record of the VI's queues under the same lock, so
 * a post or a Done that runs the NIC takes one lock, not two. Lives as
 * long as the VI. The _locked calls below expect the caller to hold it.
 */
struct fw_lock *nic_vi_lock(struct fw_vi *vi);

/*
 * T1/R1 Ring: the host writes one token into the VI's doorbell ring. The
 * NIC has hardware doorbells in the native profile: it takes the send
 * doorbell at once and runs as far as it can on the caller's CPU; a
 * receive doorbell waits in the ring for the NIC's next turn (the caller
 * serializes the posts of one queue). A paced NIC finds doorbells by its
 * scan; its work is modelled from rung_ns and done by whoever next lends
 * it a CPU. Returns the host's cost (ns) of Build + Ring in the profile,
 * which the caller spends before returning. nic_ring takes the VI's lock;
 * nic_ring_locked is for a caller that holds it (the library's post).
 */
uint64_t nic_ring(struct fw_vi *vi, bool recv, const struct via_db_token *tok,
                  enum fw_ext_mode mode, uint32_t bytes, uint64_t rung_ns);
uint64_t nic_ring_locked(struct fw_vi *vi, bool recv, const struct via_db_token *tok,
                         enum fw_ext_mode mode, uint32_t bytes, uint64_t rung_ns);

/*
 * Done: the host's cost (ns) in the profile of taking one completion off a
 * queue (the library's path, its lock, and the load of the status word the
 * NIC's DMA has just written); 0 on a native NIC. The caller spends it.
 */
uint64_t nic_done_cost(const struct fw_vi *vi);

/*
 * Progress. nic_vi_progress runs one VI's send and receive pipelines;
 * nic_progress runs every VI the NIC has been told has work (arrivals,
 * held effects, a stalled send). Both return the earliest modelled time of
 * an effect still held (paced profiles), 0 if none. A host thread passes
 * host = true: the NIC's thread then leaves it the work.
 */
uint64_t nic_vi_progress(struct fw_vi *vi, bool host);
/* nic_vi_progress in two steps, for a caller that takes a completion in
 * the same turn under the VI's lock (nic_vi_lock): nic_vi_busy looks
 * without the lock (and counts a host's poll): false when the VI's last
 * turn left nothing to do but wait for the link; nic_vi_turn_locked runs
 * the turn, the caller holding the lock. */
bool nic_vi_busy(struct fw_vi *vi, bool host);
uint64_t nic_vi_turn_locked(struct fw_vi *vi, bool host);
uint64_t nic_progress(struct fw_nic *nic, bool host);

/*
 * After a deregistration has closed a TPT entry: wait until no VI of this
 * NIC is inside a turn begun before (every check of the table and the copy
 * it allows happen in one turn under the VI's lock). From its return no
 * peer's RDMA touches the memory (spec-notes/data-path.md).
 */
void nic_mem_fence(struct fw_nic *nic);
/* Close (or reopen) TPT entry idx for this NIC alone: a closed entry fails
 * every check as an invalid one does, while vipd's registration stays (the
 * library's registration cache, vipl_rcache.c). Closing is followed by
 * nic_mem_fence before the memory counts as the program's alone. */
void nic_mem_revoke(struct fw_nic *nic, uint32_t idx, bool closed);
bool nic_mem_revoked(const struct fw_nic *nic, uint32_t idx);

/*
 * Liveness of local peers (fw_live.c): has a process at the other end of
 * one of our links died? Its links are then broken as vipd would break
 * them (the VIs go to the error state in the NIC's next turn, sleepers
 * are woken), so a dead peer is noticed even when vipd is stopped or
 * gone. Cheap to call often (it looks at most every 200 ms); never on a
 * message's path: the host calls it when a wait wakes from its sleep, the
 * NIC's thread when it wakes from its own. True if a peer was found dead.
 */
bool nic_peers_check(struct fw_nic *nic);

/* Where a host thread waiting on this VI sleeps: the wake word of its end
 * of a shared-memory link (via_chan_dir.rx_wake), which only the peer of
 * this connection, our own NIC and vipd bump; NULL when the VI has no such
 * link (then the session's event page). The mapping is the host's: it
 * must outlive a sleeper that read it (vipl_vi_detach_channel). */
struct via_chan_dir *nic_vi_wake_dir(struct fw_vi *vi);

/* A host thread is about to sleep on the NIC's event page (it has
 * announced itself): whatever must wake it when a frame arrives from
 * another host is told (fw_net.c). */
void nic_will_sleep(struct fw_nic *nic);

/* TPT check of one host range against the VI's ptag: 0 or a VIP_STATUS_ error. */
uint32_t nic_tpt_check(const struct fw_vi *vi, uint32_t handle, uint64_t va, uint64_t len);

/* ---- completion queues ----------------------------------------------------------- */
struct fw_cq *nic_cq_create(struct fw_nic *nic, struct via_cq_ring *ring);
void nic_cq_destroy(struct fw_cq *cq);
/* Take the oldest entry: true with its VI id, the VI's incarnation and
 * the queue. An entry whose incarnation is not the VI's now is stale (the
 * VI it names was destroyed and its id reused). */
bool nic_cq_pop(struct fw_cq *cq, uint32_t *vi_id, uint16_t *gen, bool *recv);
uint16_t nic_vi_gen(const struct fw_vi *vi);
bool nic_cq_overflowed(const struct fw_cq *cq);
uint32_t nic_cq_slots(struct fw_cq *cq);
/* Entries appended and not yet taken. */
uint32_t nic_cq_queued(struct fw_cq *cq);
/*
 * VipResizeCQ: switch the CQ to `ring` (zeroed, nslots set, >= entries),
 * copying the entries not yet taken in their order, under the CQ's lock,
 * so no completion is lost, doubled or reordered by a NIC appending at the
 * same time. Refused (false; *queued says how many) if more than `entries`
 * are queued. On success *old is the ring replaced, which the NIC no
 * longer touches: the caller may unmap it at once.
 */
bool nic_cq_resize(struct fw_cq *cq, struct via_cq_ring *ring, uint32_t entries,
                   struct via_cq_ring **old, uint32_t *queued);

/*
 * Virtual time (VIP_CLOCK=virtual; fw_vclock.c, spec-notes/virtual-time.md).
 * A NIC whose page says so turns it on for the whole process. The host
 * library brackets each data-path call with nic_vt_enter/nic_vt_leave
 * (nested calls count once): the program's CPU time between calls is
 * charged to the clock, the library's own is not. Host costs are spent
 * with nic_vt_spend instead of spinning; a wait with nothing to take
 * advances the clock with nic_vt_wait (false: a peer holds it back;
 * nic_vt_hold and try again). nic_model_now_ns is the model's time either way.
 */
extern bool nic_virtual_time;
/* The program's call site of the data-path call being made (its return
 * address, NIC_VT_SITE() at the top of each public call): short gaps
 * between the same two sites are charged what they cost warm. */
extern _Thread_local const void *nic_vt_site;
#define NIC_VT_SITE()                                                                      \
    do {                                                                                   \
        if (nic_virtual_time)                                                              \
            nic_vt_site = __builtin_return_address(0);                                     \
    } while (0)
void nic_vt_enter(void);
/* A clock read by the program: charged at least what it costs natively. */
uint64_t nic_vt_clock_read(void);
void nic_vt_inside(struct fw_nic *nic);
void nic_vt_leave(struct fw_nic *nic);
void nic_vt_polled_empty(void);
void nic_vt_spend(uint64_t until_ns);
/* Called before a wait's round looks for arrivals (its horizon is read
 * then: nothing sent before it can be missed). */
void nic_vt_look(struct fw_nic *nic);
/* No peer is linked to this NIC: nobody's promise bounds its clock, and
 * what may end a wait (a peer that connects, then sends) comes in real
 * time. */
bool nic_vt_alone(struct fw_nic *nic);
bool nic_vt_wait(struct fw_nic *nic, uint64_t next_ns);
/* nic_vt_wait said false: let the peer whose promise holds us back move
 * (a yield, then a sleep until it raises its promise). */
void nic_vt_hold(struct fw_nic *nic);
/* The earliest effect still ahead that this NIC holds until its modelled
 * time, or `held` (one a progress just reported) if earlier; UINT64_MAX:
 * none. */
uint64_t nic_vt_next_event(struct fw_nic *nic, uint64_t held);
uint64_t nic_model_now_ns(void);

/* ---- what vipd reads for its NICs ------------------------------------------------------
 * Profiles: fw_profile_load (fw_model.h, above). Fault specs of `vipd
 * --faults` and VIP_FAULTS: "drop=0.1,dup=0.05,reorder=0.05,corrupt=0.01,
 * delay=0.01,delay_ms=5"; false (with why) on a word it does not know
 * (fw_fault_spec.c, which vipd links). */
struct via_net_faults;
bool fw_fault_parse(const char *spec, struct via_net_faults *out, char *why, unsigned cap);

/* ---- the NIC's clock (CLOCK_MONOTONIC, the model's time base) ------------------------ */
static inline uint64_t nic_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#endif

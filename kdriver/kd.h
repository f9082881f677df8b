/*
 * kd.h - internals of vipd, the kernel agent of the emulated VIA NIC.
 *
 * vipd is the protected control path only: it owns the NICs, hands out VI
 * ids, writes each session's translation and protection table, creates the
 * shared-memory objects of the data path and matches connections. It never
 * touches client data buffers (the firmware runs inside each client).
 * Single-threaded: every object below is touched by the poll() loop only.
 *
 * Its files, bottom up. Each calls only files below it (tools/check_layers.sh
 * fails on a loop); where a lower file must tell a higher one something,
 * it calls what the higher one handed it at start-up.
 *
 *   kd_core.c     kd (the daemon's state), the log, the clock
 *   kd_shm.c      the shared-memory objects (kd_auth.c, kd_hostif.c: the
 *                 cluster key, the host's network interfaces)
 *   kd_reply.c    replies to clients
 *   kd_user.c     users: who may connect, who sees what, per-user limits
 *   kd_nic.c      the NICs: addresses, host ids, profiles, NIC pages
 *   kd_mem.c      ptags and the translation and protection table
 *   kd_vi.c       VIs and CQs; a VI's end reaches its connection through
 *                 kd_vi_on_gone (kd_connect.c's)
 *   kd_host.c     the links to other vipds; their messages, a host's
 *                 going down, reach kd_remote.c through kd_host_serve
 *   kd_conn.c     the switch's books: connections, waits, channels; a
 *                 connection with another host ends through cn->far
 *   kd_peer.c     the peer-to-peer model: matching, outcomes
 *   kd_remote.c   connections whose other end is on another host
 *   kd_connect.c  connection management: the requests, the ends, timers
 *   kd_ns.c       the name service and the hosts file
 *   kd_mgmt.c     vipctl's requests
 *   kd_session.c  clients and sessions: framing, the dispatch table,
 *                 HELLO/ATTACH, a session's end
 *   kd_main.c     options, the daemon, the event loop; the start-up wiring
 */
#ifndef KD_H
#define KD_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctl_sock.h"
#include "kd_auth.h"
#include "via_abi.h"

/* ---- the log and the clock (kd_core.c) ------------------------------------ */
enum kd_level { KD_ERROR, KD_WARN, KD_INFO, KD_DEBUG };
extern enum kd_level kd_log_level; /* lines above it are dropped (vipd -l) */
int kd_log_level_of(const char *name); /* "error".."debug"; -1 for another name */
void kd_log(enum kd_level lv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define kd_err(...) kd_log(KD_ERROR, __VA_ARGS__)
#define kd_warn(...) kd_log(KD_WARN, __VA_ARGS__)
#define kd_info(...) kd_log(KD_INFO, __VA_ARGS__)
#define kd_debug(...) kd_log(KD_DEBUG, __VA_ARGS__)
uint64_t kd_now_ns(void);
/* A request's deadline from its VIPL timeout in ms: 0 (none) for
 * VIP_INFINITE, else a time that is never 0. */
static inline uint64_t kd_deadline_of(uint32_t timeout_ms)
{
    if (timeout_ms == 0xFFFFFFFFu)
        return 0;
    return kd_now_ns() + (uint64_t)timeout_ms * 1000000ull + 1;
}

/* ---- the objects, which every file may touch ------------------------------------ */
struct kd_session;
struct kd_conn;

/* One accepted socket: a session's main socket, an ATTACH side socket, or a
 * management connection (vipctl). Freed only by kd_reap_clients(), so a
 * handler may mark any client dead without invalidating pointers. */
/* The largest request body vipd takes (a longer one is read, dropped and
 * refused); the client's input is gathered here until a request is whole. */
#define KD_MAX_REQ_BODY 1024
struct kd_client {
    int fd;
    pid_t pid;
    uid_t uid;
    /* Input: requests come in pieces as the client writes them; vipd never
     * waits for the rest (kd_client_readable), so a client that trickles
     * holds up nobody but itself. */
    _Alignas(8) unsigned char in[16 + KD_MAX_REQ_BODY]; /* header + body */
    uint32_t in_len;
    uint32_t skip;           /* bytes of an over-long body still to drop */
    struct kd_session *sess; /* session it acts for; NULL before HELLO/ATTACH */
    bool attached;           /* an ATTACH side socket of sess */
    bool dead;               /* EOF, error or torn down: reap at the next turn */
    struct kd_client *next;
};

/* Private copy of a TPT entry: vipd never re-reads what it wrote to shared
 * memory, so a client cannot influence it. */
struct kd_region {
    uint64_t va, len;
    uint32_t ptag, flags;
    uint16_t gen; /* last generation used at this index (0 = never) */
    bool used;
};

struct kd_cq {
    uint32_t id; /* index in sess->cq[] */
    struct kd_session *sess;
    struct via_cq_ring *ring;
    size_t bytes;
    uint32_t nslots;
    unsigned nbound; /* work queues bound to it */
    /* A resize's replacement ring, between PREPARE and COMMIT/ABORT. */
    struct via_cq_ring *spare;
    size_t spare_bytes;
    uint32_t spare_nslots;
};

struct kd_nic;

struct kd_vi {
    struct kd_nic *nic;
    struct kd_session *sess;
    uint32_t id;
    struct via_vi_attr attr;
    struct kd_cq *scq, *rcq;
    struct via_vi_page *page; /* vipd's mapping of the doorbell page */
    enum via_vi_state state;
    struct kd_conn *conn; /* request in flight, or the connection */
    int side;             /* 0 requester, 1 acceptor (when conn is set) */
    struct kd_peer *peer; /* peer-to-peer request, or its outcome not yet told */
};

struct kd_nic {
    unsigned index;
    uint8_t addr[VIA_NIC_ADDR_LEN];
    /* vipd's private copy of the profile: the NIC page is client-writable,
     * so names and numbers vipd reports come from here, never from page. */
    struct via_profile prof;
    struct via_nic_page *page; /* vipd's mapping of the NIC page */
    int page_fd;               /* kept open: handed to every session (HELLO) */
    uint32_t scan_slots;       /* doorbell pairs its firmware scans (sessions' pages) */
    struct kd_vi *vi[VIA_MAX_VI];
    unsigned nvis;
    /* Counters of destroyed VIs, so NIC totals survive their programs. */
    uint64_t gone_tx_msgs, gone_tx_bytes, gone_rx_msgs, gone_rx_bytes, gone_rx_dropped,
        gone_desc_errors;
    uint64_t gone_rx_refused[VIA_RXC_N];
};

struct kd_session {
    uint32_t id;
    struct kd_nic *nic;
    pid_t pid;
    uid_t uid;           /* the kernel's (SO_PEERCRED): what separates users */
    uint64_t reg_bytes;  /* registered now, for --max-reg-bytes-per-user */
    char progname[32];
    struct kd_client *main; /* the HELLO socket; its end ends the session */
    struct via_tpt_entry *tpt;
    struct kd_region *reg; /* [VIA_MAX_TPT] */
    unsigned nregions, tpt_hint;
    struct via_event_page *ev;
    int evfd; /* kept open: handed to each peer at connect time */
    struct via_status_page *st;
    unsigned nptags, nvis, ncqs;
    struct kd_cq *cq[VIA_MAX_CQ];
    struct kd_session *next;
};

/* Connection request state machine (the emulated switch). A request is
 * matched with a pending wait when it arrives, or ends at once (NO_MATCH). */
enum kd_conn_state {
    KD_CONN_MATCHED,   /* offered to an acceptor, waiting for its answer */
    KD_CONN_ACCEPTED,  /* channel created, both VIs connected (also: peer-to-peer) */
    KD_CONN_REJECTED,  /* acceptor said no, or the request was withdrawn */
    KD_CONN_TIMED_OUT, /* requester's timeout fired first */
    KD_CONN_UNMATCHED, /* no wait took it: VIP_NO_MATCH */
    KD_CONN_NSTATES
};
extern const char *const kd_conn_state_name[KD_CONN_NSTATES];

/* kd_remote.c's part in the end of a request with another host at its
 * other end (cn->far, called by kd_conn_request_end after the VI and the
 * requester here were told; was: cn's state until then). */
typedef void kd_conn_far_fn(struct kd_conn *cn, enum kd_conn_state was, int32_t status,
                            const char *msg);

struct kd_conn {
    uint32_t id;
    enum kd_conn_state state;
    /* requester side */
    struct kd_session *req_sess;
    struct kd_vi *req_vi;
    struct kd_client *req_client; /* owes a reply while non-NULL */
    uint64_t req_cookie;
    uint64_t deadline_ns; /* 0 = never */
    unsigned dst_nic;
    uint16_t dlen;
    uint8_t discrim[VIA_MAX_DISCRIM]; /* the target's discriminator */
    uint16_t req_dlen;
    uint8_t req_discrim[VIA_MAX_DISCRIM]; /* requester's own discriminator */
    /* acceptor side */
    struct kd_session *acc_sess; /* session the request was offered to */
    /* after ACCEPTED: the channel and the two endpoints (NULL once gone) */
    struct via_chan *chan;
    struct kd_vi *vi[2];
    /* peer-to-peer: the channel's fd, kept until both sides were told (else -1) */
    int chan_fd;
    unsigned chan_untold;
    /* Across hosts (kd_remote.c): the other end's host and what it hears
     * when the request ends here (far), the id both vipds put in the
     * channel (the requester vipd's conn id), this side's UDP socket until
     * it is handed over, and on the acceptor's side the request as it
     * came. */
    struct kd_host *host;
    kd_conn_far_fn *far;
    uint32_t wire_id;
    int udp_fd;
    bool remote_req;
    struct via_host_conn_req rreq;
    uint8_t salt[KD_AUTH_SALT_BYTES]; /* the requester's: ours of the frame secrets' input */
    /* Across hosts, peer-to-peer: this is the VipConnectPeerRequest of
     * req_vi (whose vi->peer holds the outcome), not a client-server one. */
    bool peer;
    /* Across hosts, client-server: our timeout fired and CONN_CANCEL went
     * (kd_remote_cancel); the acceptor's answer decides, its ACC or REJ. */
    bool cancelling;
    struct kd_conn *next;
};

/* A pending CONN_WAIT. */
struct kd_listener {
    struct kd_session *sess;
    struct kd_client *client;
    uint64_t cookie;
    uint64_t deadline_ns; /* 0 = never */
    uint16_t dlen;
    uint8_t discrim[VIA_MAX_DISCRIM];
    struct kd_listener *next;
};

/* ---- other hosts (kd_host.c) and connections across them (kd_remote.c) ---- */
#define KD_MAX_HOSTS 64
#define KD_HOST_MAX_BODY 256
enum kd_host_state { KD_HOST_DOWN, KD_HOST_UP, KD_HOST_NSTATES };
extern const char *const kd_host_state_name[KD_HOST_NSTATES];
/* A link's handshake (kd_host.c): the connector sends HELLO and waits for
 * CHALLENGE (HELLO_SENT); the acceptor answers HELLO with CHALLENGE and
 * waits for PROOF (CHALLENGED); then both ends are AUTHED and every
 * message is MACed. Nothing but the handshake is read before AUTHED, and
 * what vipd sends meanwhile waits in out[]. */
enum kd_link_auth { KD_LINK_NEW, KD_LINK_HELLO_SENT, KD_LINK_CHALLENGED, KD_LINK_AUTHED,
                    KD_LINK_NSTATES };
extern const char *const kd_link_auth_name[KD_LINK_NSTATES];
#define KD_HOST_MSG_MAX (16 + KD_HOST_MAX_BODY + VIA_HOST_MAC_BYTES)
/* One TCP connection to or from another vipd, and its unparsed input. */
struct kd_hostlink {
    int fd;
    enum kd_link_auth auth;
    uint32_t in_len, out_len;
    uint32_t peer_id;  /* the host it is (or, before AUTHED, claims to be) */
    uint64_t since_ns; /* when the handshake began */
    struct kd_auth_hs hs;
    uint8_t k_tx[KD_AUTH_KEY_BYTES], k_rx[KD_AUTH_KEY_BYTES];
    uint64_t n_tx, n_rx; /* messages MACed each way */
    uint8_t in[2 * KD_HOST_MSG_MAX];
    uint8_t out[8 * KD_HOST_MSG_MAX]; /* messages waiting for AUTHED */
};
#define KD_HOST_IFS 16u /* ethN of a host the hosts file may give addresses of */
struct kd_host {
    char name[64];
    uint32_t ip;   /* network byte order */
    uint16_t port;
    /* ethN=ADDR words of its line: interface N's IPv4 address (network
     * order; 0: none), so that a name of that address means its NIC N */
    uint32_t if_ip[KD_HOST_IFS];
    uint32_t host_id;
    enum kd_host_state state;
    struct kd_hostlink link[2]; /* [0] we connected, [1] it connected */
    uint64_t last_heard, last_sent;
    /* A send to it failed: it goes down at the loop's next host turn
     * (kd_host_tick), not inside the caller, who may be holding one of
     * the connections that going down ends. */
    const char *down_why;
};

struct kd_ptag {
    struct kd_session *sess; /* NULL = free id */
    unsigned nvis, nregions;
};

/* The whole daemon (kd_core.c). */
struct kd_state {
    unsigned nnics;
    char hosts_path[256]; /* the hosts file's real path, "" if none (HELLO says it) */
    struct kd_nic nic[VIA_MAX_NICS];
    uint32_t host_id;
    char hostname[256];
    bool trace_on;
    struct via_trace_rec *trace_kept; /* records of sessions that ended */
    size_t trace_nkept;
    bool stop;
    uint32_t next_session_id, next_conn_id;
    uint64_t last_session_end_ns; /* idle timer origin */
    struct kd_session *sessions;
    unsigned nsessions;
    unsigned max_sessions;        /* --max-sessions; 0: KD_MAX_SESSIONS */
    /* --system: every user of the host connects (kd_user.c); per user: */
    uint32_t clock;              /* enum via_clock of every NIC (--clock, VIP_CLOCK) */
    bool system;
    bool frame_mac; /* --frame-mac: a MAC on every UDP frame of our connections */
    unsigned max_sessions_per_user, max_vis_per_user; /* 0 = no limit */
    uint64_t max_reg_bytes_per_user;                  /* 0 = no limit */
    struct kd_client *clients;
    struct kd_conn *conns;
    struct kd_listener *listeners;
    struct kd_peer *peers; /* peer-to-peer requests (kd_peer.c) */
    struct kd_ns_entry *hosts; /* the hosts file (kd_ns.c) */
    size_t nhosts;
    struct kd_ptag *ptag; /* indexed by ptag id; [0] unused */
    uint32_t nptag_slots;
    /* --listen: this vipd is a host of several (kd_host.c) */
    uint32_t listen_ip; /* network byte order */
    uint16_t listen_port;
    struct kd_host nethost[KD_MAX_HOSTS];
    unsigned nnethosts;
    uint64_t hb_ns, host_timeout_ns;
    struct via_net_faults faults; /* --faults: every UDP link's */
    uint32_t link; /* --link: enum via_link_kind of connections to other hosts */
};
extern struct kd_state kd;
/* Sessions one vipd (one user's) serves at once unless told otherwise. */
#define KD_MAX_SESSIONS 1024u

/* ==== each file's functions, in the order of the files above ============================ */

/* ---- shared memory (kd_shm.c) ------------------------------------------------------ */
/* memfd of size bytes, zeroed, mapped read-write in vipd, sealed against
 * SHRINK/GROW (plus extra_seals) and F_SEAL_SEAL. Returns the mapping and
 * the fd in *fd, or NULL with errno set. */
void *kd_shm_create(const char *name, size_t size, unsigned extra_seals, int *fd);
void kd_shm_unmap(void *p, size_t size);

/* ---- replies (kd_reply.c) ---------------------------------------------------------- */
#define KD_SMALL_BODY 256
struct kd_reply {
    int32_t status;
    char msg[112];
    bool deferred; /* the handler replies later (CONN_WAIT, CONN_REQUEST) */
    void *body;
    size_t len;
    void *heap; /* body storage when larger than small[] */
    int fds[CTL_MAX_FDS];
    bool close_fd[CTL_MAX_FDS]; /* vipd's own copy: close after sending */
    int nfds;
    _Alignas(8) unsigned char small[KD_SMALL_BODY];
};
/* Fail the request with status and a printf message; returns status. */
int kd_fail(struct kd_reply *r, int32_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A zeroed reply body of len bytes (NULL when out of memory: r is failed). */
void *kd_body(struct kd_reply *r, size_t len);
void kd_add_fd(struct kd_reply *r, int fd, bool close_after);
/* Send a reply to c (deferred replies, replies to other clients). On a send
 * error the client is marked dead. */
void kd_send_reply(struct kd_client *c, uint64_t cookie, int32_t status, const char *msg,
                   const void *body, size_t len, const int *fds, int nfds);
void kd_send_status(struct kd_client *c, uint64_t cookie, int32_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The handler of a request op: the body in, the reply in r. The dispatch
 * table of kd_session.c calls them; each file declares its own below. */
typedef void kd_handler_fn(struct kd_client *c, uint64_t cookie, const void *body,
                           struct kd_reply *r);

/* ---- users (kd_user.c) ------------------------------------------------------------- */
/* Defaults of the per-user limits of a system vipd (a vipd of one user has
 * none unless told). */
#define KD_SYSTEM_SESSIONS_PER_USER 256u
#define KD_SYSTEM_VIS_PER_USER 1024u
#define KD_SYSTEM_REG_BYTES_PER_USER (64ull << 30)
/* May a process of uid connect at all? Every uid to a system vipd; only
 * vipd's own uid otherwise. */
bool kd_user_admitted(uid_t uid);
/* Does c see (list) what a session of uid owns? Its own, or all if root. */
bool kd_user_sees(const struct kd_client *c, uid_t owner);
/* May c stop vipd or steer the stage trace (root or vipd's own uid)? false
 * with r failed. */
bool kd_user_admin(const struct kd_client *c, const char *what, struct kd_reply *r);
/* The per-user limits before a session, a VI or a registration of len
 * bytes is made for uid: false with r failed (VIP_ERROR_RESOURCE). */
bool kd_user_may_open(uid_t uid, struct kd_reply *r);
bool kd_user_may_create_vi(uid_t uid, struct kd_reply *r);
bool kd_user_may_register(uid_t uid, uint64_t len, struct kd_reply *r);

/* ---- NICs (kd_nic.c) --------------------------------------------------------------- */
/* Set up nnics NICs: addresses, profile profiles[i] (a name looked up in
 * dir, or a path) and the NIC page. false with a message on stderr. */
bool kd_nic_init(unsigned nnics, const char *const *profiles, const char *dir);
void kd_nic_fini(void); /* unmap and close the NIC pages */
void kd_nic_addr(unsigned index, uint8_t out[VIA_NIC_ADDR_LEN]);
/* The host id (the first four bytes of its NICs' addresses) of the vipd
 * that listens at ip:port (network byte order). */
uint32_t kd_host_id_of(uint32_t ip, uint16_t port);
/* Recompute the NIC's scan_slots (in its sessions' status pages) after a
 * VI came or went. */
void kd_nic_scan_update(struct kd_nic *nic);
/* VIs the NIC can hold: a paced card keeps one SRAM page per VI. */
uint32_t kd_nic_max_vi(const struct kd_nic *nic);
/* A session on nic has ended (and left kd.sessions): reset the modelled
 * clocks if nobody is left. */
void kd_nic_session_gone(struct kd_nic *nic);
kd_handler_fn kd_op_query_nic, kd_op_smi_nics, kd_op_get_profile;

/* ---- memory (kd_mem.c) ------------------------------------------------------------- */
bool kd_ptag_owned(const struct kd_session *s, uint32_t ptag);
void kd_ptag_ref(uint32_t ptag, int dvis, int dregions); /* ptag 0 ignored */
void kd_mem_session_free(struct kd_session *s);          /* ptags and regions */
kd_handler_fn kd_op_create_ptag, kd_op_destroy_ptag, kd_op_reg_mem, kd_op_dereg_mem,
    kd_op_set_mem;

/* ---- VIs and CQs (kd_vi.c) --------------------------------------------------------- */
struct kd_vi *kd_vi_of(const struct kd_session *s, uint32_t vi_id);
/* The same for a request's VI argument: NULL, with the reply failed, if not the session's. */
struct kd_vi *kd_vi_arg(const struct kd_session *s, uint32_t vi_id, struct kd_reply *r);
void kd_vi_set_state(struct kd_vi *vi, enum via_vi_state st);
const char *kd_vi_state_name(uint32_t st);
void kd_vi_session_free(struct kd_session *s, unsigned *nvis, unsigned *ncqs);
/* A VI is about to be freed (died: its process has gone, rather than
 * destroying it): what the files above hold of it must go first. */
typedef void kd_vi_gone_fn(struct kd_vi *vi, bool died);
void kd_vi_on_gone(kd_vi_gone_fn *fn); /* kd_connect.c's, at start-up */
kd_handler_fn kd_op_create_vi, kd_op_destroy_vi, kd_op_set_vi, kd_op_create_cq,
    kd_op_destroy_cq, kd_op_resize_cq;

/* ---- other hosts (kd_host.c) ------------------------------------------------------- */
struct pollfd;
const char *kd_link_name(uint32_t link); /* enum via_link_kind: "udp", "ofi", ... */
/* "A.B.C.D:PORT" */
bool kd_host_parse_addr(const char *s, uint32_t *ip, uint16_t *port);
/* A host of the hosts file (the same address twice: the first's entry);
 * NULL when there are too many. */
struct kd_host *kd_host_add(const char *name, uint32_t ip, uint16_t port);
struct kd_host *kd_host_by_id(uint32_t host_id); /* another host's, or NULL */
bool kd_host_listen(void); /* false with errno */
void kd_host_fini(void);
/* A control message to h (connecting first if need be); false: h is down. */
bool kd_host_send(struct kd_host *h, uint16_t type, const void *body, uint32_t len);
void kd_host_down(struct kd_host *h, const char *why);
/* What other hosts' messages mean is kd_remote.c's (above): it hands this
 * table to kd_host_serve at start-up, before any host is reached. */
typedef void kd_host_msg_fn(struct kd_host *h, const void *body);
struct kd_host_msg_handler {
    uint32_t len; /* the body's exact length */
    kd_host_msg_fn *fn;
};
struct kd_host_calls {
    struct kd_host_msg_handler msg[VIA_HOST_NTYPES]; /* by type; fn NULL: ignored */
    void (*down)(struct kd_host *h);       /* h went down: break what goes through it */
    bool (*busy)(const struct kd_host *h); /* business with h: keep up a heartbeat */
};
void kd_host_serve(const struct kd_host_calls *calls);
/* The event loop's part: poll entries (fd -1 for unused), their events,
 * the heartbeat's timer. */
size_t kd_host_npollfds(void);
size_t kd_host_pollfds(struct pollfd *p, size_t cap);
void kd_host_events(const struct pollfd *p, size_t n);
uint64_t kd_host_next_deadline(void); /* 0 = none */
void kd_host_tick(uint64_t now_ns);
/* Keep the net counters of a session that ends (vipctl net). */
void kd_host_net_keep(const struct kd_session *s);
kd_handler_fn kd_op_net_stats;

/* ---- the switch's books: connections and waits (kd_conn.c) ------------------------- */
/* Tell session s's process that something happened to its VI vi_id. */
void kd_notify(struct kd_session *s, uint32_t vi_id);
/* A pidfd of the session's process (-1 if none can be had), handed to its
 * peers with a connection so their NIC notices its death without vipd. */
int kd_conn_pidfd(const struct kd_session *s);
struct kd_conn *kd_conn_new(struct kd_reply *r); /* listed, id given, UNMATCHED */
void kd_conn_free(struct kd_conn *cn);
void kd_conn_set_state(struct kd_conn *cn, enum kd_conn_state st);
/* The request conn_id offered to session s, or NULL with r failed. */
struct kd_conn *kd_conn_offered(struct kd_session *s, uint32_t conn_id, struct kd_reply *r);
/* A request ends without a connection (status < 0: nobody to answer). */
void kd_conn_request_end(struct kd_conn *cn, enum kd_conn_state st, int32_t status,
                         const char *msg);
/* A wait of c's session (its reply to cookie deferred) for a request to
 * local's discriminator, last in line; NULL when out of memory. */
struct kd_listener *kd_listener_add(struct kd_client *c, uint64_t cookie, uint64_t deadline_ns,
                                    const struct via_net_addr *local);
void kd_listener_free(struct kd_listener *l);
/* The oldest live wait on nic for a's discriminator, or NULL. */
struct kd_listener *kd_listener_for(unsigned nic, const struct via_net_addr *a);
/* Offer cn to the wait l (answering it) and forget l; false when l's
 * client has gone meanwhile: cn is not offered. */
bool kd_listener_offer(struct kd_listener *l, struct kd_conn *cn);
/* Offer cn to the oldest wait on nic for discrim: false if none takes it. */
bool kd_conn_offer(struct kd_conn *cn, unsigned nic, const uint8_t *discrim, uint16_t dlen);
/* The channel shared memory of a new connection (link kind set), or NULL. */
struct via_chan *kd_conn_chan_new(struct kd_conn *cn, int *fd, struct kd_reply *r);
/* cn's channel between VIs a (side 0) and b (side 1), its fd in *fd: both
 * CONNECTED, cn ACCEPTED; false with r failed. */
bool kd_conn_establish(struct kd_conn *cn, struct kd_vi *a, struct kd_vi *b, int *fd,
                       struct kd_reply *r);
/* Connect VIs a (side 0) and b (side 1) through a new channel: both
 * CONNECTED. Returns the conn, its chan_fd open (closed with the conn at
 * the latest), or NULL with r failed. */
struct kd_conn *kd_conn_link(struct kd_vi *a, struct kd_vi *b, struct kd_reply *r);
/* Connections on nic with an end c may see (kd_user_sees). */
unsigned kd_conn_count(unsigned nic, const struct kd_client *c);

/* ---- peer-to-peer connections (kd_peer.c) ------------------------------------------ */
/* A new peer request of vi, checked (kd_op_peer_request): for NIC nic of
 * this host (h NULL) it meets the oldest mirror request there, if one
 * waits; for a NIC of host h it is kept PENDING for kd_remote.c to match.
 * false with r failed. */
bool kd_peer_request(struct kd_vi *vi, int nic, struct kd_host *h,
                     const struct via_ctl_conn_request *q, struct kd_reply *r);
/* Drop vi's request for another host that kd_remote.c could not make
 * (vi IDLE again). */
void kd_peer_retract(struct kd_vi *vi);
/* Cancel vi's pending request or drop its untold outcome (disconnect, destroy). */
void kd_peer_vi_gone(struct kd_vi *vi, const char *why);
void kd_peer_client_gone(struct kd_client *c);
uint64_t kd_peer_next_deadline(void); /* 0 = none */
void kd_peer_expire(uint64_t now_ns);
/* Across hosts (kd_remote.c calls these): the VI here whose pending peer
 * request mirrors the request q from host h (NULL if none); a pending
 * request's outcome, connected (cn with its chan_fd set, sock: the link's
 * socket, taken) or failed. */
struct kd_vi *kd_peer_mirror_remote(const struct kd_host *h, const struct via_host_conn_req *q);
void kd_peer_connected(struct kd_vi *vi, struct kd_conn *cn, uint32_t side, uint32_t peer_vi,
                       const struct via_vi_attr *attr, int sock);
void kd_peer_failed(struct kd_vi *vi, int32_t status, const char *msg);
kd_handler_fn kd_op_peer_done, kd_op_peer_wait;

/* ---- connections across hosts (kd_remote.c) ---------------------------------------- */
/* Hand kd_host.c what other hosts' messages mean (at start-up). */
void kd_remote_init(void);
/* CONN_REQUEST for a NIC of host h (vi checked, IDLE). */
void kd_remote_request(struct kd_client *c, uint64_t cookie, struct kd_vi *vi,
                       struct kd_host *h, const struct via_ctl_conn_request *q,
                       struct kd_reply *r);
/* CONN_ACCEPT of a request that came from another host. */
void kd_remote_accept(struct kd_conn *cn, struct kd_vi *vi, struct kd_reply *r);
/* One end of a connection across hosts closed or broke: tell the other host. */
void kd_remote_end(struct kd_conn *cn, int side, bool broken);
bool kd_remote_cancel(struct kd_conn *cn);
/* VipConnectPeerRequest of vi (vi->peer set, PENDING) for a NIC of h:
 * false with r failed. */
bool kd_remote_peer_request(struct kd_vi *vi, struct kd_host *h,
                            const struct via_ctl_conn_request *q, struct kd_reply *r);

/* ---- connection management (kd_connect.c) ------------------------------------------ */
/* Hand kd_vi.c what a VI's end does to its connection (at start-up). */
void kd_connect_init(void);
void kd_conn_client_gone(struct kd_client *c);
void kd_conn_session_gone(struct kd_session *s);
uint64_t kd_conn_next_deadline(void); /* 0 = none */
void kd_conn_expire(uint64_t now_ns);
kd_handler_fn kd_op_conn_wait, kd_op_conn_accept, kd_op_conn_reject, kd_op_conn_request,
    kd_op_peer_request, kd_op_disconnect, kd_op_vi_error;

/* ---- name service (kd_ns.c) -------------------------------------------------------- */
/* Read the hosts file (lines "name address..."); false with a message
 * naming the file and line on stderr. */
bool kd_ns_load(const char *path);
void kd_ns_free(void);
kd_handler_fn kd_op_ns_lookup, kd_op_ns_reverse;

/* ---- management requests (kd_mgmt.c) ----------------------------------------------- */
/* Keep the stage trace of a session that ends, for `vipctl trace dump|stats`. */
void kd_trace_keep(const struct kd_session *s);
void kd_trace_free(void);
kd_handler_fn kd_op_list_nics, kd_op_list_vis, kd_op_list_mem, kd_op_trace, kd_op_shutdown,
    kd_op_ping;

/* ---- clients, sessions, the dispatch table (kd_session.c) -------------------------- */
void kd_client_new(int fd);
void kd_client_readable(struct kd_client *c);
void kd_reap_clients(void);
void kd_session_end(struct kd_session *s, const char *why);
void kd_shutdown_all(void);
struct kd_session *kd_session_find(uint32_t id);
/* A request op: its handler and what it needs before the handler runs. */
struct kd_op {
    const char *name;
    uint32_t body; /* exact request body length */
    kd_handler_fn *fn;
    bool needs_session;
};
/* The checks of a request before its handler runs, with no I/O (so the
 * fuzzer can call it): a known op, its exact body length, a session when the
 * op needs one. The op's table entry, or NULL with r failed. */
const struct kd_op *kd_request_check(uint32_t opcode, long blen, bool has_session,
                                     struct kd_reply *r);

#endif

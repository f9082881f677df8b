/*
 * bench_util.h - what the VIPL benchmarks share: option values, clocks,
 * statistics, and the set-up of one connected VI the way a VIA program
 * does it (open the NIC, make a ptag, register memory, create a VI, look
 * the peer up by name, VipConnectWait/Accept or VipConnectRequest).
 *
 * Header-only on purpose: the Makefile turns every C file in bench/ into its own
 * program, so shared code lives here as static functions.
 *
 * Every failure ends the process with a message that says which call
 * failed, its VIPL return code and the library's reason (vip_last_error).
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vipl.h>
#include <vipl_ext.h>

#define BU_MIN_SIZE 4u             /* -a starts here, like perftest */
#define BU_MAX_SIZE (1u << 20)     /* and ends at MaxTransferSize */
#define BU_DISC_LEN 8u             /* bytes of discriminator we use */
#define BU_PAGE 4096u
#define BU_WAIT_MS 30000u          /* longest wait for the peer before giving up */

/* ---- messages and errors -------------------------------------------------- */

static const char *bu_prog = "bench"; /* program name for messages */
static const char *bu_role = "";      /* "client" / "server" after fork */
static pid_t bu_child_pid;            /* the server, as seen by the client */

__attribute__((format(printf, 1, 2), noreturn)) static void bu_die(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s%s%s%s: ", bu_prog, *bu_role ? " (" : "", bu_role, *bu_role ? ")" : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (bu_child_pid > 0)
        kill(bu_child_pid, SIGTERM); /* do not leave the server waiting */
    exit(1);
}

/* Run a VIPL call; on failure say which, with the code and the reason. */
#define BU_CHECK(call)                                                                   \
    do {                                                                                 \
        VIP_RETURN bu_rc_ = (call);                                                      \
        if (bu_rc_ != VIP_SUCCESS)                                                       \
            bu_die("%s failed: %s: %s", #call, vip_strerror(bu_rc_), vip_last_error()); \
    } while (0)

/* Names of the status bits of a failed descriptor, for messages. */
static inline const char *bu_status_str(VIP_UINT32 st)
{
    static char buf[160];
    static const struct { VIP_UINT32 bit; const char *name; } bits[] = {
        {VIP_STATUS_FORMAT_ERROR, "FORMAT"},         {VIP_STATUS_PROTECTION_ERROR, "PROTECTION"},
        {VIP_STATUS_LENGTH_ERROR, "LENGTH"},         {VIP_STATUS_PARTIAL_ERROR, "PARTIAL"},
        {VIP_STATUS_DESC_FLUSHED_ERROR, "FLUSHED"},  {VIP_STATUS_TRANSPORT_ERROR, "TRANSPORT"},
        {VIP_STATUS_RDMA_PROT_ERROR, "RDMA_PROT"},   {VIP_STATUS_REMOTE_DESC_ERROR, "REMOTE_DESC"},
    };
    size_t n = (size_t)snprintf(buf, sizeof buf, "status 0x%08x", (unsigned)st);
    for (size_t i = 0; i < sizeof bits / sizeof bits[0] && n < sizeof buf; i++)
        if (st & bits[i].bit)
            n += (size_t)snprintf(buf + n, sizeof buf - n, " %s_ERROR", bits[i].name);
    return buf;
}

/* A completed descriptor must carry DONE and no error bit. */
static inline void bu_check_desc(const VIP_DESCRIPTOR *d, const char *what)
{
    VIP_UINT32 st = d->CS.Status;
    if (!(st & VIP_STATUS_DONE) || (st & VIP_STATUS_ERROR_MASK))
        bu_die("%s descriptor completed in error: %s (is the peer still running?)", what,
               bu_status_str(st));
}

/* ---- option values ----------------------------------------------------------------- */

/* A byte count: decimal, with an optional K/M/G (binary) suffix. */
static inline uint64_t bu_parse_size(const char *s, const char *opt)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        bu_die("%s: '%s' is not a size in bytes", opt, s);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        bu_die("%s: '%s' is not a size in bytes (suffixes: K, M, G)", opt, s);
    return v;
}

/* A plain count in [lo, hi]. */
static inline uint64_t bu_parse_count(const char *s, const char *opt, uint64_t lo, uint64_t hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
        bu_die("%s: '%s' is not a number in %" PRIu64 "..%" PRIu64, opt, s, lo, hi);
    return v;
}

static inline VIP_RELIABILITY_LEVEL bu_parse_reliability(const char *s)
{
    if (strcmp(s, "unreliable") == 0)
        return VIP_SERVICE_UNRELIABLE;
    if (strcmp(s, "delivery") == 0)
        return VIP_SERVICE_RELIABLE_DELIVERY;
    if (strcmp(s, "reception") == 0)
        return VIP_SERVICE_RELIABLE_RECEPTION;
    bu_die("--reliability: '%s' is not unreliable, delivery or reception", s);
}

static inline const char *bu_reliability_name(VIP_RELIABILITY_LEVEL r)
{
    return r == VIP_SERVICE_UNRELIABLE ? "unreliable"
           : r == VIP_SERVICE_RELIABLE_RECEPTION ? "reliable reception"
                                                 : "reliable delivery";
}

/* ---- time and statistics ------------------------------------------------------------ */

/* The benchmarks' clock: CLOCK_MONOTONIC, or the virtual clock under
 * VIP_CLOCK=virtual (VipExtClockNs), so they report what they measured in
 * the time their NICs run in. */
static inline uint64_t bu_now_ns(void)
{
    return (uint64_t)VipExtClockNs();
}

struct bu_stats {
    double min, median, p90, p99, max, avg;
};

static inline int bu_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n): the smallest value with at
 * least p of the samples at or below it. */
static inline double bu_percentile(const double *v, size_t n, double p)
{
    size_t k = (size_t)(p * (double)n + 0.999999);
    return v[k == 0 ? 0 : (k > n ? n : k) - 1];
}

/* Sorts v in place. */
static inline struct bu_stats bu_stats_of(double *v, size_t n)
{
    struct bu_stats s = {0};
    if (n == 0)
        return s;
    qsort(v, n, sizeof *v, bu_cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    s.min = v[0];
    s.max = v[n - 1];
    s.avg = sum / (double)n;
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    s.p90 = bu_percentile(v, n, 0.90);
    s.p99 = bu_percentile(v, n, 0.99);
    return s;
}

/* ---- one endpoint: NIC, ptag, registered memory, VIs ---------------------------- */

struct bu_region {
    void *buf;
    size_t len;
    VIP_MEM_HANDLE mh;
};

struct bu_ep {
    const char *dev;
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES attrs;
    VIP_PROTECTION_HANDLE ptag;
    VIP_RELIABILITY_LEVEL rel;
    VIP_VI_HANDLE vi;       /* the measured VI */
    VIP_CQ_HANDLE cq;       /* a CQ its queues complete to, or NULL */
    VIP_VI_HANDLE *idle;    /* --vis: VIs that exist and do nothing */
    size_t nidle;
    struct bu_region reg[8];
    size_t nreg;
    bool rdma_write, rdma_read; /* the VIs bu_create_vi_cq makes allow RDMA write / read */
    volatile int closing; /* errors from here on are the peer leaving */
};

/* The NIC's asynchronous error report (connection lost, a message with no
 * receive posted, ...): say so at once; the descriptors that complete in
 * error then stop the program with their status. */
static inline void bu_on_vi_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    const struct bu_ep *ep = ctx;
    if (ep->closing)
        return;
    fprintf(stderr, "%s%s%s%s: VI error reported by the NIC: %s\n", bu_prog,
            *bu_role ? " (" : "", bu_role, *bu_role ? ")" : "",
            vip_error_code_str(e->ErrorCode));
}

static inline void bu_open(struct bu_ep *ep, const char *dev, VIP_RELIABILITY_LEVEL rel)
{
    memset(ep, 0, sizeof *ep);
    ep->dev = dev;
    ep->rel = rel;
    VIP_RETURN rc = VipOpenNic(dev, &ep->nic);
    if (rc != VIP_SUCCESS)
        bu_die("VipOpenNic(\"%s\") failed: %s: %s", dev, vip_strerror(rc), vip_last_error());
    BU_CHECK(VipQueryNic(ep->nic, &ep->attrs));
    BU_CHECK(VipErrorCallback(ep->nic, ep, bu_on_vi_error));
    BU_CHECK(VipCreatePtag(ep->nic, &ep->ptag));
}

/* Page-aligned, zeroed, registered memory that the peer may reach by RDMA
 * write and/or read (with a VI that allows it), or not at all. */
static inline void *bu_alloc_rdma(struct bu_ep *ep, size_t len, VIP_MEM_HANDLE *mh,
                                  bool rdma_write, bool rdma_read)
{
    if (ep->nreg == sizeof ep->reg / sizeof ep->reg[0])
        bu_die("internal: too many regions");
    len = (len + BU_PAGE - 1) / BU_PAGE * BU_PAGE;
    void *p;
    int e = posix_memalign(&p, BU_PAGE, len);
    if (e)
        bu_die("cannot allocate %zu bytes: %s", len, strerror(e));
    memset(p, 0, len);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = ep->ptag, .EnableRdmaWrite = rdma_write,
                             .EnableRdmaRead = rdma_read};
    BU_CHECK(VipRegisterMem(ep->nic, p, len, &ma, mh));
    ep->reg[ep->nreg++] = (struct bu_region){p, len, *mh};
    return p;
}

/* Page-aligned, zeroed, registered memory (descriptors and buffers alike). */
static inline void *bu_alloc(struct bu_ep *ep, size_t len, VIP_MEM_HANDLE *mh)
{
    return bu_alloc_rdma(ep, len, mh, false, false);
}

/* A VI whose send and receive queues both complete to `cq` (NULL: to no CQ). */
static inline VIP_VI_HANDLE bu_create_vi_cq(struct bu_ep *ep, VIP_CQ_HANDLE cq)
{
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = ep->rel,
                            .MaxTransferSize = ep->attrs.MaxTransferSize,
                            .QoS = NULL, .Ptag = ep->ptag,
                            .EnableRdmaWrite = ep->rdma_write, .EnableRdmaRead = ep->rdma_read};
    VIP_VI_HANDLE vi;
    BU_CHECK(VipCreateVi(ep->nic, &va, cq, cq, &vi));
    return vi;
}

static inline VIP_VI_HANDLE bu_create_vi(struct bu_ep *ep)
{
    return bu_create_vi_cq(ep, NULL);
}

/* ep->cq, with room for `entries` completions; bu_close destroys it. */
static inline void bu_create_cq(struct bu_ep *ep, size_t entries)
{
    if (entries > ep->attrs.MaxCQEntries)
        bu_die("NIC %s allows CQs of %lu entries; %zu needed", ep->dev,
               (unsigned long)ep->attrs.MaxCQEntries, entries);
    BU_CHECK(VipCreateCQ(ep->nic, entries, &ep->cq));
}

/* --vis N: N more VIs on the NIC, created and never used. */
static inline void bu_open_idle_vis(struct bu_ep *ep, size_t n)
{
    if (!n)
        return;
    ep->idle = calloc(n, sizeof *ep->idle);
    if (!ep->idle)
        bu_die("out of memory");
    for (; ep->nidle < n; ep->nidle++)
        ep->idle[ep->nidle] = bu_create_vi(ep);
}

/* A VIP_NET_ADDRESS with room for this NIC's host address and our
 * discriminator. */
static inline VIP_NET_ADDRESS *bu_addr_new(const struct bu_ep *ep)
{
    size_t host = ep->attrs.NicAddressLen, disc = ep->attrs.MaxDiscriminatorLen;
    VIP_NET_ADDRESS *a = calloc(1, sizeof *a + host + (disc > BU_DISC_LEN ? disc : BU_DISC_LEN));
    if (!a)
        bu_die("out of memory");
    return a;
}

static inline void bu_addr_set_disc(VIP_NET_ADDRESS *a, uint64_t disc)
{
    a->DiscriminatorLen = BU_DISC_LEN;
    /* Through the allocation, not HostAddress[1]: GCC may otherwise take
     * the declared one-byte array for the whole room (bu_addr_new). */
    uint8_t *room = (uint8_t *)a + offsetof(VIP_NET_ADDRESS, HostAddress);
    memcpy(room + a->HostAddressLen, &disc, BU_DISC_LEN);
}

/*
 * Connect ep->vi. The server waits on its own NIC address with discriminator
 * `disc` and accepts; the client looks up `peer` (a name the VIPL name
 * service knows: "localhost", "via1", "host:via1") and requests. Receives
 * the caller wants in place before the peer may send must be posted before
 * this call (VIA allows posting receives on an unconnected VI).
 */
static inline void bu_connect(struct bu_ep *ep, bool server, const char *peer, uint64_t disc)
{
    if (ep->attrs.MaxDiscriminatorLen < BU_DISC_LEN)
        bu_die("NIC %s allows %u-byte discriminators; %u needed", ep->dev,
               (unsigned)ep->attrs.MaxDiscriminatorLen, BU_DISC_LEN);
    VIP_NET_ADDRESS *local = bu_addr_new(ep), *remote = bu_addr_new(ep);
    local->HostAddressLen = ep->attrs.NicAddressLen;
    memcpy(local->HostAddress, ep->attrs.LocalNicAddress, ep->attrs.NicAddressLen);
    bu_addr_set_disc(local, disc);
    VIP_VI_ATTRIBUTES rattrs;
    if (server) {
        VIP_CONN_HANDLE conn;
        remote->DiscriminatorLen = ep->attrs.MaxDiscriminatorLen;
        BU_CHECK(VipConnectWait(ep->nic, local, VIP_INFINITE, remote, &rattrs, &conn));
        if (rattrs.ReliabilityLevel != ep->rel)
            bu_die("the client asked for %s, the server offers %s",
                   bu_reliability_name(rattrs.ReliabilityLevel), bu_reliability_name(ep->rel));
        BU_CHECK(VipConnectAccept(conn, ep->vi));
    } else {
        VIP_RETURN rc = VipNSGetHostByName(ep->nic, (VIP_CHAR *)peer, remote, 0);
        if (rc != VIP_SUCCESS)
            bu_die("VipNSGetHostByName(\"%s\") failed: %s: %s", peer, vip_strerror(rc),
                   vip_last_error());
        bu_addr_set_disc(remote, disc);
        /* VIP_NO_MATCH: the server does not wait yet; ask again, as VIA
         * programs do. */
        while ((rc = VipConnectRequest(ep->vi, local, remote, VIP_INFINITE, &rattrs)) ==
               VIP_NO_MATCH)
            usleep(1000);
        if (rc != VIP_SUCCESS)
            bu_die("VipConnectRequest failed: %s: %s", vip_strerror(rc), vip_last_error());
    }
    free(local);
    free(remote);
}

/* Tear down in the VIA order: disconnect, destroy VIs, deregister, ptag, NIC. */
static inline void bu_close(struct bu_ep *ep)
{
    ep->closing = 1;
    if (ep->vi) {
        VIP_RETURN rc = VipDisconnect(ep->vi);
        if (rc != VIP_SUCCESS && rc != VIP_INVALID_STATE)
            bu_die("VipDisconnect failed: %s: %s", vip_strerror(rc), vip_last_error());
        BU_CHECK(VipDestroyVi(ep->vi));
    }
    for (size_t i = 0; i < ep->nidle; i++)
        BU_CHECK(VipDestroyVi(ep->idle[i]));
    free(ep->idle);
    if (ep->cq)
        BU_CHECK(VipDestroyCQ(ep->cq));
    for (size_t i = 0; i < ep->nreg; i++) {
        BU_CHECK(VipDeregisterMem(ep->nic, ep->reg[i].buf, ep->reg[i].mh));
        free(ep->reg[i].buf);
    }
    BU_CHECK(VipDestroyPtag(ep->nic, ep->ptag));
    BU_CHECK(VipCloseNic(ep->nic));
    memset(ep, 0, sizeof *ep);
}

/* ---- completions: polling or events (-e) --------------------------------------------- */

/*
 * The next completed descriptor of a VI's receive (recv) or send queue.
 * Polling, the default (perftest's busy polling): call VipRecvDone or
 * VipSendDone until it is there, never sleeping. Events (-e, as perftest's
 * -e): block in VipRecvWait or VipSendWait, which poll briefly (the
 * library's adaptive budget, at most 100 us) and then sleep on a futex
 * until the NIC wakes them. Either gives up after timeout_ms with
 * VIP_TIMEOUT; any other failure is returned as is.
 */
static inline VIP_RETURN bu_next_desc(VIP_VI_HANDLE vi, bool recv, bool events,
                                      VIP_ULONG timeout_ms, VIP_DESCRIPTOR **d)
{
    if (events)
        return recv ? VipRecvWait(vi, timeout_ms, d) : VipSendWait(vi, timeout_ms, d);
    uint64_t deadline = 0; /* read the clock only once a completion is slow */
    for (unsigned i = 1;; i++) {
        VIP_RETURN rc = recv ? VipRecvDone(vi, d) : VipSendDone(vi, d);
        if (rc != VIP_NOT_DONE)
            return rc;
        if (i % 1024 == 0) {
            uint64_t now = bu_now_ns();
            if (!deadline)
                deadline = now + (uint64_t)timeout_ms * 1000000u;
            else if (now >= deadline)
                return VIP_TIMEOUT;
        }
    }
}

/* The call bu_next_desc makes, for messages. */
static inline const char *bu_next_desc_call(bool recv, bool events)
{
    return events ? (recv ? "VipRecvWait" : "VipSendWait") : (recv ? "VipRecvDone" : "VipSendDone");
}

/* ---- descriptors --------------------------------------------------------------------- */

/* One-segment send/receive descriptor over buf[0..len) (no segment if len 0). */
static inline void bu_desc_init(VIP_DESCRIPTOR *d, void *buf, VIP_MEM_HANDLE mh, uint32_t len)
{
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_CONTROL_OP_SENDRECV;
    d->CS.SegCount = len ? 1 : 0;
    d->CS.Length = len;
    d->CS.Reserved = 0;
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = len;
}

/*
 * Orderly end. The client says "bye" (an empty message) once it has reaped
 * everything; the server disconnects only after it got it. Otherwise the
 * server could disconnect while the client still reaps its last
 * completions, and VIA flushes a VI's queues when its peer disconnects.
 */
static inline void bu_bye_send(struct bu_ep *ep, VIP_DESCRIPTOR *d, VIP_MEM_HANDLE dmh)
{
    ep->closing = 1; /* the server may go as soon as the bye is out */
    bu_desc_init(d, NULL, 0, 0);
    BU_CHECK(VipPostSend(ep->vi, d, dmh));
    VIP_DESCRIPTOR *x;
    VIP_RETURN rc = VipSendWait(ep->vi, BU_WAIT_MS, &x);
    if (rc != VIP_SUCCESS)
        bu_die("sending the final bye: %s: %s", vip_strerror(rc), vip_last_error());
}

static inline void bu_bye_wait(struct bu_ep *ep)
{
    ep->closing = 1; /* the client disconnects right after its bye */
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc = VipRecvWait(ep->vi, BU_WAIT_MS, &d);
    if (rc != VIP_SUCCESS)
        bu_die("waiting for the client's bye: %s: %s", vip_strerror(rc), vip_last_error());
    bu_check_desc(d, "bye");
    if (d->CS.Length != 0)
        bu_die("expected the client's empty bye, got %u bytes", (unsigned)d->CS.Length);
}

/* ---- the two processes ------------------------------------------------------------- */

/* A discriminator nobody else on this vipd uses: program tag + our pid. */
static inline uint64_t bu_discriminator(uint32_t tag)
{
    return (uint64_t)tag << 32 | (uint32_t)getpid();
}

static volatile sig_atomic_t bu_child_done; /* the server exited with status 0 */

/* The server failing ends the client at once (with the server's message
 * already on stderr) instead of leaving it waiting for a peer that is gone. */
static inline void bu_on_sigchld(int sig)
{
    (void)sig;
    int saved = errno, st;
    if (waitpid(bu_child_pid, &st, WNOHANG) == bu_child_pid) {
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            bu_child_done = 1;
        } else {
            static const char m[] = ": the server process failed (see above); stopping\n";
            if (write(2, bu_prog, strlen(bu_prog)) < 0 || write(2, m, sizeof m - 1) < 0)
                _exit(1);
            _exit(1);
        }
    }
    errno = saved;
}

/*
 * Fork the server: the child runs server(arg) and exits 0 (it dies on any
 * error). Each process opens the NIC itself after this; no VIPL object
 * crosses the fork. Returns in the parent, which is then the client.
 */
static inline void bu_fork_server(void (*server)(void *), void *arg)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old); /* until the handler knows the pid */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        bu_die("fork: %s", strerror(errno));
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        bu_role = "server";
        /* Across hosts (bench/run_hosts.sh): the server talks to its own vipd. */
        const char *ss = getenv("BU_SERVER_VIPD_SOCKET");
        if (ss && *ss)
            setenv("VIPD_SOCKET", ss, 1);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* the client died: so do we */
        if (getppid() == 1)
            exit(1);
        server(arg);
        fflush(stdout);
        exit(0);
    }
    bu_role = "client";
    bu_child_pid = pid;
    struct sigaction sa = {.sa_handler = bu_on_sigchld, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The client is done: wait for the server to finish cleanly. */
static inline void bu_wait_server(void)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);
    while (!bu_child_done)
        sigsuspend(&old); /* a failing server _exits us from the handler */
    sigprocmask(SIG_SETMASK, &old, NULL);
    bu_child_pid = 0;
}

/* Sizes of a run: one, or the powers of two from BU_MIN_SIZE to max. */
static inline size_t bu_sizes(bool all, uint32_t one, uint32_t max, uint32_t *out, size_t cap)
{
    size_t n = 0;
    if (!all) {
        out[n++] = one;
        return n;
    }
    for (uint64_t s = BU_MIN_SIZE; s <= max && n < cap; s *= 2)
        out[n++] = (uint32_t)s;
    return n;
}


/* ---- the options of the perftest-style programs -------------------------------------- */

/* What every vip_*_lat / vip_*_bw program takes; each adds its own. */
struct bu_opts {
    uint32_t size;
    bool all;
    uint64_t iters;  /* 0: chosen per size */
    uint64_t warmup; /* UINT64_MAX: chosen per size */
    const char *server_dev, *client_dev;
    bool csv;
    bool events; /* -e: block in the VIPL waits instead of polling */
    VIP_RELIABILITY_LEVEL rel;
    size_t vis; /* --vis: idle VIs to create first (programs that take it) */
    uint64_t disc;
    uint32_t sizes[32];
    size_t nsizes;
};

/* A program's own options, beside the common ones. */
struct bu_args {
    uint32_t size;         /* default -s */
    uint32_t min_size;     /* smallest -s it can measure */
    uint64_t max_iters;    /* largest -n / -w */
    bool vis;              /* takes --vis N */
    const char *shortopts; /* its own, getopt style ("t:"), or "" */
    const struct option *longopts; /* its own, ending in a zero entry */
    /* Take option c (true), or refuse it (false: usage, exit 2). */
    bool (*own)(int c, const char *arg, void *ctx);
    void *ctx;
    void (*usage)(FILE *f);
    uint32_t disc_tag; /* the program's discriminator tag */
};

static const struct option bu_longopts[] = {
    {"size", required_argument, NULL, 's'},  {"all", no_argument, NULL, 'a'},
    {"iters", required_argument, NULL, 'n'}, {"warmup", required_argument, NULL, 'w'},
    {"dev", required_argument, NULL, 'd'},   {"csv", no_argument, NULL, 'C'},
    {"reliability", required_argument, NULL, 'R'},
    {"events", no_argument, NULL, 'e'},      {"help", no_argument, NULL, 'h'},
    {"client-dev", required_argument, NULL, 0x101}};

/* One of the common options (true), or not one of them (false). */
static inline bool bu_opt(struct bu_opts *o, const struct bu_args *a, int c, const char *arg)
{
    switch (c) {
    case 's': {
        uint64_t v = bu_parse_size(arg, "-s");
        if (v > BU_MAX_SIZE)
            bu_die("-s: %" PRIu64 " bytes is more than the %u-byte maximum transfer", v,
                   BU_MAX_SIZE);
        if (v < a->min_size)
            bu_die("-s: this test needs messages of at least %u bytes", a->min_size);
        o->size = (uint32_t)v;
        return true;
    }
    case 'a': o->all = true; return true;
    case 'n': o->iters = bu_parse_count(arg, "-n", 1, a->max_iters); return true;
    case 'w': o->warmup = bu_parse_count(arg, "-w", 0, a->max_iters); return true;
    case 'd': o->server_dev = arg; return true;
    case 0x101: o->client_dev = arg; return true;
    case 'C': o->csv = true; return true;
    case 'R': o->rel = bu_parse_reliability(arg); return true;
    case 'e': o->events = true; return true;
    case 'V':
        if (!a->vis)
            return false;
        o->vis = (size_t)bu_parse_count(arg, "--vis", 0, 4000);
        return true;
    default: return false;
    }
}

/*
 * Parse the command line: the common options into o (after their
 * defaults), the program's own through a->own. -h prints the usage and
 * exits 0; anything wrong prints it and exits 2. Then the sizes of the run
 * and our discriminator.
 */
static inline void bu_parse_args(struct bu_opts *o, const struct bu_args *a, int argc,
                                 char **argv)
{
    *o = (struct bu_opts){.size = a->size, .warmup = UINT64_MAX, .server_dev = "via0",
                          .client_dev = "via0", .rel = VIP_SERVICE_RELIABLE_DELIVERY};
    enum { NCOMMON = sizeof bu_longopts / sizeof bu_longopts[0] };
    struct option lo[NCOMMON + 16];
    size_t n = 0;
    for (; n < NCOMMON; n++)
        lo[n] = bu_longopts[n];
    if (a->vis)
        lo[n++] = (struct option){"vis", required_argument, NULL, 'V'};
    for (const struct option *x = a->longopts; x && x->name; x++) {
        if (n == NCOMMON + 15)
            bu_die("internal: too many options");
        lo[n++] = *x;
    }
    lo[n] = (struct option){0};
    char shortopts[64];
    snprintf(shortopts, sizeof shortopts, "s:an:w:d:eh%s", a->shortopts ? a->shortopts : "");
    int c;
    while ((c = getopt_long(argc, argv, shortopts, lo, NULL)) != -1) {
        if (bu_opt(o, a, c, optarg) ||
            (c != 'h' && c != '?' && a->own && a->own(c, optarg, a->ctx)))
            continue;
        a->usage(c == 'h' ? stdout : stderr);
        exit(c == 'h' ? 0 : 2);
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", bu_prog, argv[optind]);
        a->usage(stderr);
        exit(2);
    }
    o->nsizes = bu_sizes(o->all, o->size, BU_MAX_SIZE, o->sizes,
                         sizeof o->sizes / sizeof o->sizes[0]);
    o->disc = bu_discriminator(a->disc_tag);
}

/* What a program's usage says; bu_usage adds the common options' lines. */
struct bu_usage {
    const char *about;  /* lines after "usage: PROG [options]" */
    const char *size;   /* -s: the default and limits */
    bool bw;            /* -n, -w: counted as a bandwidth program counts (bu_bw_iters) */
    const char *unit;   /* what -n counts: "iterations", "messages", "reads" */
    const char *peer;   /* -d: whose NIC ("server's", "receiver's", ...) */
    const char *events; /* -e: what it does (continuation lines indented 26) */
    const char *rel;    /* --reliability: the levels, or NULL for all three */
    bool vis;           /* takes --vis */
    const char *own;    /* the program's own options' lines, or NULL */
};

static inline void bu_usage(FILE *f, const struct bu_usage *u)
{
    fprintf(f, "usage: %s [options]\n%s", bu_prog, u->about);
    fprintf(f, "  -s, --size BYTES        message size (%s; K/M suffixes)\n", u->size);
    fprintf(f, "  -a, --all               all sizes 4 B .. 1 MiB in powers of two\n");
    if (u->bw)
        fprintf(f, "  -n, --iters N           %s per size (default 8 GiB worth, 10^4..10^6)\n"
                   "  -w, --warmup N          unmeasured %s first (default iters/10, <= 2000)\n",
                u->unit, u->unit);
    else
        fprintf(f, "  -n, --iters N           measured %s per size (default 100000 up to\n"
                   "                          16 KiB, then fewer so a size takes about a second)\n"
                   "  -w, --warmup N          unmeasured %s first (default iters/10, <= 1000)\n",
                u->unit, u->unit);
    fprintf(f, "  -d, --dev NIC           the %s NIC (default via0; via1 crosses the switch)\n"
               "      --client-dev NIC    this side's NIC (default via0)\n",
            u->peer);
    if (u->vis)
        fprintf(f, "      --vis N             create N extra idle VIs in each process first\n");
    fprintf(f, "      --reliability L     %s\n",
            u->rel ? u->rel : "unreliable | delivery (default) | reception");
    fprintf(f, "  -e, --events            %s\n", u->events);
    fprintf(f, "%s", u->own ? u->own : "");
    fprintf(f, "      --csv               CSV output (units in the '#' header)\n"
               "  -h, --help              this text\n"
               "  Environment: VIPD_SOCKET (vipd's socket), VIPD_AUTOSTART=0 (do not start vipd),\n"
               "  VIP_PROFILE (the profile of a vipd the library starts), VIP_EXT_MODE (how small\n"
               "  sends reach the NIC; RDMA always takes the standard path).\n");
}

/* The peer name a client looks up: the server's NIC, or "localhost" when
 * both use the same NIC. */
static inline const char *bu_peer_name(const struct bu_opts *o)
{
    const char *p = getenv("BU_PEER"); /* another host's name (bench/run_hosts.sh) */
    if (p && *p)
        return p;
    return strcmp(o->server_dev, o->client_dev) == 0 ? "localhost" : o->server_dev;
}

/* "polling: ..." or "events: ..." for the headers. */
static inline const char *bu_completions(const struct bu_opts *o, const char *polling,
                                         const char *events)
{
    return o->events ? events : polling;
}

/*
 * The header of a table. CSV: '#' lines saying `what` was measured and the
 * set-up (the NICs, the reliability level, then `setup`), then `columns`.
 * Text: the title, the same facts and the lines of `about` (NULL-ended),
 * then `columns`, between rules.
 */
static inline void bu_header(const struct bu_opts *o, const char *what, const char *setup,
                             const char *rule, const char *title, const char *const *about,
                             const char *columns)
{
    if (o->csv) {
        printf("# %s: %s\n# server NIC %s, client NIC %s, %s, %s\n%s\n", bu_prog, what,
               o->server_dev, o->client_dev, bu_reliability_name(o->rel), setup, columns);
        return;
    }
    int pad = ((int)strlen(rule) - (int)strlen(title)) / 2;
    printf("%s\n%*s%s\n", rule, pad > 0 ? pad : 0, "", title);
    printf(" Server NIC      : %-8s  Client NIC : %s\n", o->server_dev, o->client_dev);
    printf(" Reliability     : %s\n", bu_reliability_name(o->rel));
    for (; *about; about++)
        printf(" %s\n", *about);
    printf("%s\n%s\n", rule, columns);
    fflush(stdout);
}

/* The client's end: the table's last rule, the bye (on descriptor d), and
 * the teardown. */
static inline void bu_client_end(const struct bu_opts *o, const char *rule, struct bu_ep *ep,
                                 VIP_DESCRIPTOR *d, VIP_MEM_HANDLE dmh)
{
    if (!o->csv)
        printf("%s\n", rule);
    bu_bye_send(ep, d, dmh);
    bu_close(ep);
}

/* ---- latency programs: iterations, samples, the table ------------------------------- */

#define BU_LAT_RULE                                                                      \
    "---------------------------------------------"                                      \
    "----------------------------------------------"
#define BU_LAT_CSV "bytes,iters,min_us,median_us,p90_us,p99_us,max_us,avg_us"
#define BU_LAT_COLS                                                                      \
    " #bytes    #iterations  t_min[us]   t_median[us]   t_p90[us]   t_p99[us]   t_max[us]"   \
    "   t_avg[us]"

static inline void bu_lat_header(const struct bu_opts *o, const char *what, const char *setup,
                                 const char *title, const char *const *about)
{
    bu_header(o, what, setup, BU_LAT_RULE, title, about, o->csv ? BU_LAT_CSV : BU_LAT_COLS);
}

/* Iterations for one size: 100000 for small messages, fewer for large ones
 * so that a size takes about a second or less. */
static inline uint64_t bu_lat_iters(const struct bu_opts *o, uint32_t size)
{
    if (o->iters)
        return o->iters;
    if (size <= 16384)
        return 100000;
    uint64_t n = 100000ull * 16384 / size;
    return n < 1000 ? 1000 : n;
}

static inline uint64_t bu_lat_warmup(const struct bu_opts *o, uint32_t size)
{
    if (o->warmup != UINT64_MAX)
        return o->warmup;
    uint64_t n = bu_lat_iters(o, size) / 10;
    return n > 1000 ? 1000 : n;
}

/* Room for the post times of the largest size of a run, and its samples. */
struct bu_samples {
    uint64_t *t; /* t[i]: when iteration i began; t[warm + n]: when the last ended */
    double *lat;
};

static inline struct bu_samples bu_samples_new(const struct bu_opts *o)
{
    uint64_t most = 0;
    for (size_t k = 0; k < o->nsizes; k++) {
        uint64_t t = bu_lat_warmup(o, o->sizes[k]) + bu_lat_iters(o, o->sizes[k]);
        most = t > most ? t : most;
    }
    struct bu_samples s = {malloc((most + 1) * sizeof *s.t), malloc(most * sizeof *s.lat)};
    if (!s.t || !s.lat)
        bu_die("out of memory for %" PRIu64 " samples", most);
    return s;
}

static inline void bu_samples_free(struct bu_samples *s)
{
    free(s->t);
    free(s->lat);
}

/* The table row of one size: the n measured cycles after `warm` (each
 * divided by div: 2 for RTT/2), in microseconds. */
static inline void bu_lat_report(const struct bu_opts *o, struct bu_samples *sm, uint32_t size,
                                 uint64_t warm, uint64_t n, double div)
{
    for (uint64_t i = 0; i < n; i++)
        sm->lat[i] = (double)(sm->t[warm + i + 1] - sm->t[warm + i]) / (1e3 * div);
    struct bu_stats s = bu_stats_of(sm->lat, n);
    if (o->csv)
        printf("%u,%" PRIu64 ",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", size, n, s.min, s.median,
               s.p90, s.p99, s.max, s.avg);
    else
        printf(" %-9u %-12" PRIu64 " %-11.2f %-14.2f %-11.2f %-11.2f %-11.2f %-11.2f\n", size, n,
               s.min, s.median, s.p90, s.p99, s.max, s.avg);
    fflush(stdout);
}

/* ---- bandwidth programs --------------------------------------------------------------- */

#define BU_BW_RULE                                                                       \
    "-----------------------------------------"                                          \
    "-----------------------------------------"
#define BU_BW_CSV "bytes,iters,seconds,MB_per_s,Mbit_per_s,msgs_per_s"
#define BU_BW_COLS \
    " #bytes    #iterations  time[s]     BW[MB/s]      BW[Mbit/s]      rate[Mmsg/s]"

/* As bu_lat_header; `what` gets the units appended. */
static inline void bu_bw_header(const struct bu_opts *o, const char *what, const char *setup,
                                const char *title, const char *const *about)
{
    char w[256];
    snprintf(w, sizeof w, "%s; MB = 10^6 bytes, Mbit = 10^6 bits", what);
    const char *lines[16];
    size_t n = 0;
    for (; *about && n < 14; about++)
        lines[n++] = *about;
    lines[n++] = "Units           : MB = 10^6 bytes, Mbit = 10^6 bits, Mmsg = 10^6 messages";
    lines[n] = NULL;
    bu_header(o, w, setup, BU_BW_RULE, title, lines, o->csv ? BU_BW_CSV : BU_BW_COLS);
}

/* Messages for one size: 8 GiB worth, between 10000 and 1000000. */
static inline uint64_t bu_bw_iters(const struct bu_opts *o, uint32_t size)
{
    if (o->iters)
        return o->iters;
    uint64_t n = (8ull << 30) / (size ? size : 1);
    return n < 10000 ? 10000 : n > 1000000 ? 1000000 : n;
}

static inline uint64_t bu_bw_warmup(const struct bu_opts *o, uint32_t size)
{
    if (o->warmup != UINT64_MAX)
        return o->warmup;
    uint64_t n = bu_bw_iters(o, size) / 10;
    return n > 2000 ? 2000 : n;
}

static inline void bu_bw_row(const struct bu_opts *o, uint32_t size, uint64_t n, double sec)
{
    double bytes = (double)size * (double)n;
    if (o->csv)
        printf("%u,%" PRIu64 ",%.9f,%.2f,%.2f,%.0f\n", size, n, sec, bytes / sec / 1e6,
               8 * bytes / sec / 1e6, (double)n / sec);
    else
        printf(" %-9u %-12" PRIu64 " %-11.4f %-13.2f %-15.2f %-12.4f\n", size, n, sec,
               bytes / sec / 1e6, 8 * bytes / sec / 1e6, (double)n / sec / 1e6);
    fflush(stdout);
}

#endif /* BENCH_UTIL_H */

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
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
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

static inline uint64_t bu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* Page-aligned, zeroed, registered memory (descriptors and buffers alike). */
static inline void *bu_alloc(struct bu_ep *ep, size_t len, VIP_MEM_HANDLE *mh)
{
    if (ep->nreg == sizeof ep->reg / sizeof ep->reg[0])
        bu_die("internal: too many regions");
    len = (len + BU_PAGE - 1) / BU_PAGE * BU_PAGE;
    void *p;
    int e = posix_memalign(&p, BU_PAGE, len);
    if (e)
        bu_die("cannot allocate %zu bytes: %s", len, strerror(e));
    memset(p, 0, len);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = ep->ptag, .EnableRdmaWrite = VIP_FALSE,
                             .EnableRdmaRead = VIP_FALSE};
    BU_CHECK(VipRegisterMem(ep->nic, p, len, &ma, mh));
    ep->reg[ep->nreg++] = (struct bu_region){p, len, *mh};
    return p;
}

/* A VI whose send and receive queues both complete to `cq` (NULL: to no CQ). */
static inline VIP_VI_HANDLE bu_create_vi_cq(struct bu_ep *ep, VIP_CQ_HANDLE cq)
{
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = ep->rel,
                            .MaxTransferSize = ep->attrs.MaxTransferSize,
                            .QoS = NULL, .Ptag = ep->ptag,
                            .EnableRdmaWrite = VIP_FALSE, .EnableRdmaRead = VIP_FALSE};
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
    memcpy(a->HostAddress + a->HostAddressLen, &disc, BU_DISC_LEN);
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

#endif /* BENCH_UTIL_H */

/*
 * wake_util.h - the measuring half of the wake-up benchmarks: vip_wake_lat
 * (over a VI) and os_wake_lat (over a pipe or a UDP socket pair, the
 * references) run the same protocol, pause, computation, clocks and report
 * through this file, so their figures compare like for like; each program
 * only supplies its transport (struct wk_transport).
 *
 * Two processes: the sender (the forked child) and the receiver (the
 * parent, which prints). Per message the sender reads CLOCK_MONOTONIC,
 * writes that post time and the message number into the payload and posts
 * it; the receiver reads the clock as soon as its wait returns the message
 * and records (return time - post time): one-way, both clocks being the
 * same system-wide clock. The receiver then re-arms its receive and
 * acknowledges the message. The sender, once it has posted (and computed,
 * and completed its send), sleeps for the pause (-p, default 1500 us: far
 * beyond a VIPL wait's spin budget of at most 100 us, so the receiver is
 * asleep again by the next message) and only then takes the ack. So
 * exactly one message is ever in flight, each finds the receiver asleep,
 * and the sender is off the CPU while the receiver wakes, whichever
 * transport it uses (on a busy machine the two may share a core).
 *
 * Tests:
 *   first    the first message of the run, the first on the connection (or
 *            pipe, or socket pair) the two just made: the sender sleeps the
 *            pause, then posts it to a receiver blocked since it connected.
 *            One message, no warm-up; run every time, whatever --test says.
 *   wake     the receiver blocks (VipRecvWait, read(), recv()); the time is
 *            its wake-up latency.
 *   compute  after posting, the sender computes (-c, default 5000 us) with
 *            no call into its transport, then completes its send; the
 *            receiver blocks as in the wake test (or polls, --compute-rx
 *            poll); the time is how long after the post the message was
 *            delivered, which shows whether a message moves while its
 *            sender is busy elsewhere. (A polling receiver measures the
 *            scheduler as much as the transport when the two processes
 *            share a core: the sender computes on it.)
 * A message delivered more than -T ms (default 100) after its post counts
 * as "not delivered within T" (column late) and is left out of the
 * statistics; the receiver waits at most BU_WAIT_MS (30 s) for any message
 * and then stops with an error, so a message that never moves cannot hang
 * the program. The receiver also counts the messages during whose
 * wait its thread slept (a voluntary context switch, getrusage): that
 * checks that the waits measured sleepers and the polls did not.
 *
 * Header-only, like bench_util.h (every C file in bench/ is its own program).
 */
#ifndef WAKE_UTIL_H
#define WAKE_UTIL_H

#include <math.h>
#include <sched.h>
#include <sys/resource.h>

#include "bench_util.h"

#define WK_HDR 16u /* payload header: message number, post time (ns) */
#define WK_MAX_SIZE (1u << 20)

enum wk_test { WK_FIRST, WK_WAKE, WK_COMPUTE, WK_NTESTS };
static const char *const wk_test_name[WK_NTESTS] = {"first", "wake", "compute"};

struct wk_opts {
    uint32_t size;             /* bytes per message, >= WK_HDR */
    uint64_t iters[WK_NTESTS]; /* measured messages per test */
    uint64_t warmup;           /* unmeasured messages before each test */
    uint64_t pause_us;         /* sender's sleep between messages */
    uint64_t compute_us;       /* compute test: sender's busy time after posting */
    uint64_t timeout_ms;       /* T: later than this after its post, a message is late */
    bool run[WK_NTESTS];       /* the tests to run */
    bool compute_rx_poll;      /* compute test: the receiver polls instead of blocking */
    int cpu[2];                /* --cpus: the sender's and receiver's CPU, -1: any */
    bool csv;
};

/*
 * A transport, as each program implements it. The sender side: buf() is
 * where the next message goes; post() hands len bytes over (VipPostSend,
 * write, send); complete() finishes the send (reaps its completion; may be
 * a no-op); wait_ack() blocks until the receiver acknowledged message seq.
 * The receiver side: recv() returns the next message of len bytes, or NULL
 * if none came within timeout_ms (poll: without sleeping); release() gives
 * the buffer back (re-posts the receive); ack() tells the sender.
 */
struct wk_transport {
    const char *name;      /* "via", "pipe", "udp": the CSV's transport column */
    char what[160];        /* one line for the header */
    const char *wait_call; /* how the receiver blocks, e.g. "VipRecvWait" */
    const char *poll_call; /* how it polls, e.g. "VipRecvDone" */
    void *ctx;
    uint8_t *(*buf)(void *ctx);
    void (*post)(void *ctx, uint32_t len);
    void (*complete)(void *ctx);
    void (*wait_ack)(void *ctx, uint64_t seq);
    const uint8_t *(*recv)(void *ctx, uint32_t len, bool poll, uint64_t timeout_ms);
    void (*release)(void *ctx);
    void (*ack)(void *ctx, uint64_t seq);
};

/* ---- options common to both programs ---------------------------------------------- */

#define WK_SHORTOPTS "s:n:m:w:p:c:T:h"
#define WK_LONGOPTS                                                                         \
    {"size", required_argument, NULL, 's'}, {"iters", required_argument, NULL, 'n'},       \
    {"compute-iters", required_argument, NULL, 'm'},                                       \
    {"warmup", required_argument, NULL, 'w'}, {"pause", required_argument, NULL, 'p'},     \
    {"compute", required_argument, NULL, 'c'}, {"timeout", required_argument, NULL, 'T'},  \
    {"test", required_argument, NULL, 1001}, {"compute-rx", required_argument, NULL, 1002}, \
    {"cpus", required_argument, NULL, 1004}, {"csv", no_argument, NULL, 1003},            \
    {"help", no_argument, NULL, 'h'}

static inline void wk_defaults(struct wk_opts *o)
{
    *o = (struct wk_opts){.size = WK_HDR, .iters = {1, 2000, 200}, .warmup = 20,
                          .pause_us = 1500, .compute_us = 5000, .timeout_ms = 100,
                          .run = {true, true, true}, .cpu = {-1, -1}};
}

static inline void wk_usage_common(FILE *f)
{
    fprintf(f,
            "  -s, --size BYTES        message size, %u B .. 1 MiB (default %u; K/M suffixes)\n"
            "  -n, --iters N           messages of the wake-up test (default 2000)\n"
            "  -m, --compute-iters N   messages of the compute test (default 200)\n"
            "  -w, --warmup N          unmeasured messages before each test (default 20)\n"
            "  -p, --pause US          sender's sleep between messages (default 1500 us)\n"
            "  -c, --compute US        compute test: sender's busy time after posting\n"
            "                          (default 5000 us)\n"
            "  -T, --timeout MS        T: a message delivered more than T after its post\n"
            "                          counts as not delivered within T (default 100 ms);\n"
            "                          none at all within %u s stops the program\n"
            "      --test T            wake | compute | both (default both); the first\n"
            "                          message of a run is always measured (test first)\n"
            "      --compute-rx M      compute test receiver: wait (default) | poll\n"
            "      --cpus S,R          run the sender's thread on CPU S, the receiver's on R\n"
            "                          (default: where the scheduler puts them)\n"
            "      --csv               CSV output (units in the '#' header)\n"
            "  -h, --help              this text\n",
            WK_HDR, WK_HDR, BU_WAIT_MS / 1000);
}

/* Handle option c of the common set; false if it is not one of them. */
static inline bool wk_parse_common(struct wk_opts *o, int c, const char *arg)
{
    switch (c) {
    case 's': {
        uint64_t v = bu_parse_size(arg, "-s");
        if (v < WK_HDR || v > WK_MAX_SIZE)
            bu_die("-s: %" PRIu64 " bytes: the size must be %u .. %u bytes", v, WK_HDR,
                   WK_MAX_SIZE);
        o->size = (uint32_t)v;
        return true;
    }
    case 'n': o->iters[WK_WAKE] = bu_parse_count(arg, "-n", 1, 10000000); return true;
    case 'm': o->iters[WK_COMPUTE] = bu_parse_count(arg, "-m", 1, 10000000); return true;
    case 'w': o->warmup = bu_parse_count(arg, "-w", 0, 1000000); return true;
    case 'p': o->pause_us = bu_parse_count(arg, "-p", 0, 10000000); return true;
    case 'c': o->compute_us = bu_parse_count(arg, "-c", 0, 10000000); return true;
    case 'T': o->timeout_ms = bu_parse_count(arg, "-T", 1, BU_WAIT_MS); return true;
    case 1001:
        if (strcmp(arg, "wake") && strcmp(arg, "compute") && strcmp(arg, "both"))
            bu_die("--test: '%s' is not wake, compute or both", arg);
        o->run[WK_WAKE] = strcmp(arg, "compute") != 0;
        o->run[WK_COMPUTE] = strcmp(arg, "wake") != 0;
        return true;
    case 1002:
        if (strcmp(arg, "poll") && strcmp(arg, "wait"))
            bu_die("--compute-rx: '%s' is not poll or wait", arg);
        o->compute_rx_poll = strcmp(arg, "poll") == 0;
        return true;
    case 1003: o->csv = true; return true;
    case 1004: {
        char *end;
        long s = strtol(arg, &end, 10), r = -1;
        if (end != arg && *end == ',') {
            const char *rs = end + 1;
            r = strtol(rs, &end, 10);
            if (end == rs)
                r = -1;
        }
        if (*end || s < 0 || r < 0 || s >= CPU_SETSIZE || r >= CPU_SETSIZE)
            bu_die("--cpus: '%s' is not two CPU numbers S,R", arg);
        o->cpu[0] = (int)s;
        o->cpu[1] = (int)r;
        return true;
    }
    default: return false;
    }
}

/* --cpus: the calling thread (the sender's or the receiver's measuring
 * thread) runs on its CPU from now on; threads a library made are left free. */
static inline void wk_pin(const struct wk_opts *o, bool sender)
{
    int c = o->cpu[sender ? 0 : 1];
    if (c < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        bu_die("--cpus: cannot run the %s on CPU %d: %s", sender ? "sender" : "receiver", c,
               strerror(errno));
}

/* ---- the sender -------------------------------------------------------------------------- */

static inline void wk_sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
        ;
}

/* Busy for `us` microseconds: arithmetic and the vDSO clock, no system call
 * and no call into any transport. */
static inline void wk_compute(uint64_t us)
{
    static volatile uint64_t sink;
    uint64_t x = sink, end = bu_now_ns() + us * 1000u;
    do {
        for (unsigned k = 0; k < 256; k++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    } while (bu_now_ns() < end);
    sink = x;
}

/* Unmeasured messages before test t: none before the first message. */
static inline uint64_t wk_warmup(const struct wk_opts *o, enum wk_test t)
{
    return t == WK_FIRST ? 0 : o->warmup;
}

/* Message i of test t: its number carries the test in the top bits. */
static inline uint64_t wk_seq(enum wk_test t, uint64_t i)
{
    return (uint64_t)t << 56 | i;
}

/*
 * The sender sleeps for the pause right after each message (after
 * computing, in the compute test, and completing its send) and only then
 * takes the ack, which has long arrived: so it is asleep, off the CPU,
 * whenever the receiver wakes, whatever its transport's waits do (a VIPL
 * wait would poll first), and each message follows a full pause.
 */
static inline void wk_sender(const struct wk_opts *o, const struct wk_transport *tr)
{
    wk_pin(o, true);
    wk_sleep_us(o->pause_us);
    for (int t = 0; t < WK_NTESTS; t++) {
        if (!o->run[t])
            continue;
        uint64_t total = wk_warmup(o, (enum wk_test)t) + o->iters[t];
        for (uint64_t i = 0; i < total; i++) {
            uint8_t *p = tr->buf(tr->ctx);
            uint64_t seq = wk_seq((enum wk_test)t, i);
            if (o->size > WK_HDR)
                p[o->size - 1] = (uint8_t)seq; /* the last byte arrives last */
            memcpy(p, &seq, 8);
            uint64_t now = bu_now_ns();
            memcpy(p + 8, &now, 8);
            tr->post(tr->ctx, o->size);
            if (t == WK_COMPUTE)
                wk_compute(o->compute_us);
            tr->complete(tr->ctx);
            wk_sleep_us(o->pause_us);
            tr->wait_ack(tr->ctx, seq);
        }
    }
}

/* ---- the receiver ------------------------------------------------------------------------ */

struct wk_result {
    uint64_t n, late, slept; /* measured, not delivered within T, slept while waiting */
    double min, p10, median, p90, max; /* microseconds, over the n - late delivered */
};

static inline long wk_vcsw(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

static inline struct wk_result wk_receive_test(const struct wk_opts *o,
                                               const struct wk_transport *tr, enum wk_test t)
{
    bool poll = t == WK_COMPUTE && o->compute_rx_poll;
    uint64_t n = o->iters[t], warm = wk_warmup(o, t), total = warm + n, k = 0;
    double *us = malloc(n * sizeof *us);
    if (!us)
        bu_die("out of memory for %" PRIu64 " samples", n);
    struct wk_result r = {.n = n};
    for (uint64_t i = 0; i < total; i++) {
        long cs = wk_vcsw();
        const uint8_t *p = tr->recv(tr->ctx, o->size, poll, BU_WAIT_MS);
        uint64_t now = bu_now_ns();
        if (!p)
            bu_die("%s test: message %" PRIu64 " not delivered in %u s (the sender is stuck, "
                   "or its message is)",
                   wk_test_name[t], i, BU_WAIT_MS / 1000);
        bool slept = wk_vcsw() != cs;
        uint64_t seq, posted, want = wk_seq(t, i);
        memcpy(&seq, p, 8);
        memcpy(&posted, p + 8, 8);
        if (seq != want)
            bu_die("%s test: got message %#" PRIx64 ", expected %#" PRIx64, wk_test_name[t],
                   seq, want);
        if (o->size > WK_HDR && p[o->size - 1] != (uint8_t)seq)
            bu_die("%s test: message %" PRIu64 " ends in %u, expected %u", wk_test_name[t], i,
                   p[o->size - 1], (uint8_t)seq);
        tr->release(tr->ctx);
        tr->ack(tr->ctx, seq);
        if (i < warm)
            continue;
        r.slept += slept;
        if (now - posted > o->timeout_ms * 1000000u)
            r.late++;
        else
            us[k++] = (double)(int64_t)(now - posted) / 1e3;
    }
    if (k) {
        struct bu_stats s = bu_stats_of(us, k); /* sorts us */
        r.min = s.min;
        r.median = s.median;
        r.max = s.max;
        r.p10 = bu_percentile(us, k, 0.10);
        r.p90 = s.p90;
    } else {
        r.min = r.p10 = r.median = r.p90 = r.max = NAN;
    }
    free(us);
    return r;
}

static inline const char *wk_rx_mode(const struct wk_opts *o, enum wk_test t)
{
    return t == WK_COMPUTE && o->compute_rx_poll ? "poll" : "wait";
}

/* The CPUs of --cpus, in words. */
static inline const char *wk_cpus(const struct wk_opts *o)
{
    static char buf[64];
    if (o->cpu[0] < 0)
        return "as the scheduler places them";
    snprintf(buf, sizeof buf, "sender on CPU %d, receiver on CPU %d", o->cpu[0], o->cpu[1]);
    return buf;
}

static inline void wk_print_header(const struct wk_opts *o, const struct wk_transport *tr,
                                   const char *prog)
{
    if (o->csv) {
        printf("# %s: one-way delivery time in microseconds: the receiver's return from its "
               "wait or poll minus the sender's post time (CLOCK_MONOTONIC, both processes)\n",
               prog);
        printf("# %s; %u-byte messages; the sender sleeps %" PRIu64 " us between messages; compute "
               "test: the sender computes %" PRIu64 " us after posting; T = %" PRIu64 " ms; "
               "receiver waits in %s, polls with %s\n",
               tr->what, o->size, o->pause_us, o->compute_us, o->timeout_ms, tr->wait_call,
               tr->poll_call);
        printf("# late: messages not delivered within T of their post (left out of the "
               "statistics); slept: messages during whose wait the receiver's thread slept; "
               "CPUs: %s\n",
               wk_cpus(o));
        printf("test,transport,receiver,bytes,iters,late,slept_pct,min_us,p10_us,median_us,"
               "p90_us,max_us\n");
        return;
    }
    const char *line = "-----------------------------------------------------------------"
                       "----------------------------";
    printf("%s\n", line);
    printf("                        Wake-up and Delivery Latency Test\n");
    printf(" Transport       : %s\n", tr->what);
    printf(" Receiver        : waits in %s; compute test: %s\n", tr->wait_call,
           o->compute_rx_poll ? tr->poll_call : "the same");
    printf(" Messages        : %u bytes; the sender sleeps %" PRIu64 " us between them\n",
           o->size, o->pause_us);
    printf(" Compute test    : the sender computes %" PRIu64 " us after posting (no call)\n",
           o->compute_us);
    printf(" First message   : test first: the run's first, on the connection just made\n");
    printf(" CPUs            : %s\n", wk_cpus(o));
    printf(" Method          : receiver's return time - sender's post time, CLOCK_MONOTONIC,\n"
           "                   one-way, in microseconds (usec); statistics over the messages\n"
           "                   delivered within T = %" PRIu64 " ms of their post; late: the "
           "others\n",
           o->timeout_ms);
    printf("%s\n", line);
    printf(" %-8s %-5s %-7s %-5s %-9s %-10s %-10s %-13s %-10s %-10s\n", "test", "rx", "#msgs",
           "late", "slept[%]", "t_min[us]", "t_p10[us]", "t_median[us]", "t_p90[us]",
           "t_max[us]");
    fflush(stdout);
}

static inline void wk_print_row(const struct wk_opts *o, const struct wk_transport *tr,
                                enum wk_test t, const struct wk_result *r)
{
    double slept = 100.0 * (double)r->slept / (double)r->n;
    if (o->csv)
        printf("%s,%s,%s,%u,%" PRIu64 ",%" PRIu64 ",%.1f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
               wk_test_name[t], tr->name, wk_rx_mode(o, t), o->size, r->n, r->late, slept,
               r->min, r->p10, r->median, r->p90, r->max);
    else
        printf(" %-8s %-5s %-7" PRIu64 " %-5" PRIu64 " %-9.1f %-10.2f %-10.2f %-13.2f %-10.2f "
               "%-10.2f\n",
               wk_test_name[t], wk_rx_mode(o, t), r->n, r->late, slept, r->min, r->p10,
               r->median, r->p90, r->max);
    if (!o->csv && r->late)
        printf("          %" PRIu64 " of %" PRIu64 " messages not delivered within T = %" PRIu64
               " ms\n",
               r->late, r->n, o->timeout_ms);
    fflush(stdout);
}

/* The receiver's whole run: every test selected, with its report. */
static inline void wk_receiver(const struct wk_opts *o, const struct wk_transport *tr,
                               const char *prog)
{
    wk_pin(o, false);
    wk_print_header(o, tr, prog);
    for (int t = 0; t < WK_NTESTS; t++) {
        if (!o->run[t])
            continue;
        struct wk_result r = wk_receive_test(o, tr, (enum wk_test)t);
        wk_print_row(o, tr, (enum wk_test)t, &r);
    }
    if (!o->csv)
        printf("-----------------------------------------------------------------"
               "----------------------------\n");
}

#endif /* WAKE_UTIL_H */

/*
 * test_bench.c - smoke runs of the benchmarks against the vipd of
 * tests/run_tests.sh, as `make bench` and compare_native.sh run them: the
 * RDMA programs (vip_write_lat, vip_write_bw, vip_read_lat) at every size
 * from 4 B to 1 MiB, each reliability level, polling and events; the
 * send/receive programs' events mode (-e) and vip_send_lat --active; the
 * wake-up programs' first-message test; vip_model --vis. A few iterations
 * each.
 *
 * The programs are the ones beside this one (../bin from /proc/self/exe).
 * Each run is bounded (killed after RUN_MS; its server dies with it) and
 * must exit 0 with one CSV row per size whose figures hang together; the
 * programs check every transfer's data and status themselves and exit 1
 * on the first wrong one. Bad options must end with status 1 or 2 and say
 * why.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/tlib.h"

#define RUN_MS 60000
#define NSIZES 19 /* -a: 4 B .. 1 MiB */
#define MAX_ROWS 32

struct run {
    int status; /* exit code, or -1: killed (timeout, signal) */
    char out[16384];
    char err[4096];
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The path of benchmark `prog`: ../bin beside this test program. */
static void bench_path(char *out, size_t cap, const char *prog)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = 0;
    snprintf(out, cap, "%s/../bin/%s", self, prog);
}

/* Append what fd has to buf (NUL-terminated, the rest dropped); false at EOF. */
static bool drain(int fd, char *buf, size_t cap, size_t *len)
{
    char tmp[4096];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    size_t k = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
    memcpy(buf + *len, tmp, k);
    *len += k;
    buf[*len] = 0;
    return true;
}

/* Run benchmark prog with the NULL-ended arguments, collecting its output;
 * never longer than RUN_MS. */
static void run_bench(struct run *r, const char *prog, ...)
{
    const char *argv[24];
    char path[PATH_MAX + 32];
    bench_path(path, sizeof path, prog);
    argv[0] = path;
    va_list ap;
    va_start(ap, prog);
    size_t n = 1;
    while (n < 23 && (argv[n] = va_arg(ap, const char *)))
        n++;
    va_end(ap);
    argv[n] = NULL;

    memset(r, 0, sizeof *r);
    r->status = -1;
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
        snprintf(r->err, sizeof r->err, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        execv(path, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    if (pid < 0) {
        snprintf(r->err, sizeof r->err, "fork: %s", strerror(errno));
        close(po[0]);
        close(pe[0]);
        return;
    }
    size_t lo = 0, le = 0;
    bool open_o = true, open_e = true;
    uint64_t deadline = now_ms() + RUN_MS;
    while (open_o || open_e) {
        uint64_t t = now_ms();
        if (t >= deadline)
            break;
        struct pollfd fds[2] = {{open_o ? po[0] : -1, POLLIN, 0}, {open_e ? pe[0] : -1, POLLIN, 0}};
        if (poll(fds, 2, (int)(deadline - t)) < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            open_o = drain(po[0], r->out, sizeof r->out, &lo);
        if (fds[1].revents)
            open_e = drain(pe[0], r->err, sizeof r->err, &le);
    }
    close(po[0]);
    close(pe[0]);
    if (open_o || open_e)
        kill(pid, SIGKILL); /* out of time: its server follows (PR_SET_PDEATHSIG) */
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->status = WIFEXITED(st) && !(open_o || open_e) ? WEXITSTATUS(st) : -1;
}

/* The data rows of a --csv output: numbers, up to 8 columns each. */
static size_t csv_rows(const char *out, double rows[][8], size_t *ncols)
{
    size_t n = 0;
    *ncols = 0;
    for (const char *l = out; *l && n < MAX_ROWS; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
        if (*l == '#' || strncmp(l, "bytes,", 6) == 0 || *l == '\n')
            continue;
        size_t c = 0;
        const char *p = l;
        while (c < 8) {
            char *end;
            rows[n][c++] = strtod(p, &end);
            if (*end != ',')
                break;
            p = end + 1;
        }
        *ncols = c;
        n++;
    }
    return n;
}

#define SHOW(r)                                                                           \
    fprintf(stderr, "    status %d; stdout:\n%s    stderr:\n%s\n", (r)->status, (r)->out,  \
            (r)->err)

/* A latency table (bytes,iters,min,median,p90,p99,max,avg): one row per
 * size of the run, the percentiles in order, all positive. */
static void check_latency(const struct run *r, size_t nsizes, uint32_t first, unsigned iters)
{
    double rows[MAX_ROWS][8];
    size_t ncols, n = csv_rows(r->out, rows, &ncols);
    TCHK(r->status == 0);
    TCHK(n == nsizes);
    TCHK(ncols == 8);
    for (size_t i = 0; i < n; i++) {
        const double *v = rows[i];
        TCHK(v[0] == (double)first * (double)(1u << i));
        TCHK(v[1] == iters);
        TCHK(v[2] > 0 && v[2] <= v[3] && v[3] <= v[4] && v[4] <= v[5] && v[5] <= v[6]);
        TCHK(v[7] >= v[2] && v[7] <= v[6]);
    }
out:
    if (CU_get_number_of_failures())
        SHOW(r);
}

/* A bandwidth table (bytes,iters,seconds,MB/s,Mbit/s,msgs/s): its figures
 * must follow from bytes, iters and seconds. */
static void check_bandwidth(const struct run *r, size_t nsizes, uint32_t first, unsigned iters)
{
    double rows[MAX_ROWS][8];
    size_t ncols, n = csv_rows(r->out, rows, &ncols);
    TCHK(r->status == 0);
    TCHK(n == nsizes);
    TCHK(ncols == 6);
    for (size_t i = 0; i < n; i++) {
        const double *v = rows[i];
        TCHK(v[0] == (double)first * (double)(1u << i));
        TCHK(v[1] == iters);
        TCHK(v[2] > 0);
        /* As printed: MB/s and Mbit/s to 0.01, messages/s to 1, seconds to
         * 1e-9 (the clock's step; to 1e-6 a run of one small RDMA write,
         * under valgrind's counts, printed 0): the real time is within
         * 0.5 ns of the printed one. */
        double mbs = v[0] * v[1] / v[2] / 1e6, rate = v[1] / v[2];
        double real_min = v[2] > 0.75e-9 ? v[2] - 0.5e-9 : 0.25e-9;
        double e = 0.01 + 0.5e-9 / real_min;
        TCHK(v[3] >= mbs * (1 - e) - 0.006 && v[3] <= mbs * (1 + e) + 0.006);
        TCHK(v[4] >= 8 * mbs * (1 - e) - 0.006 && v[4] <= 8 * mbs * (1 + e) + 0.006);
        TCHK(v[5] >= rate * (1 - e) - 0.6 && v[5] <= rate * (1 + e) + 0.6 && v[5] > 0);
    }
out:
    if (CU_get_number_of_failures())
        SHOW(r);
}

static char *num(char *buf, unsigned v)
{
    snprintf(buf, 16, "%u", v);
    return buf;
}

/* ---- vip_write_lat ------------------------------------------------------------- */

static void test_write_lat_all_sizes(void)
{
    struct run r;
    char n[16];
    unsigned iters = tl_count(40, 400);
    run_bench(&r, "vip_write_lat", "-a", "-n", num(n, iters), "-w", "2", "--csv", NULL);
    check_latency(&r, NSIZES, 4, iters);
}

static void test_write_lat_levels(void)
{
    static const char *const levels[] = {"unreliable", "reception"};
    struct run r;
    char n[16];
    unsigned iters = tl_count(200, 2000);
    for (size_t i = 0; i < 2; i++) {
        run_bench(&r, "vip_write_lat", "-s", "3000", "-n", num(n, iters), "--reliability",
                  levels[i], "--vis", "3", "-e", "--csv", NULL);
        check_latency(&r, 1, 3000, iters);
    }
}

/* ---- vip_write_bw ----------------------------------------------------------------- */

static void test_write_bw_all_sizes(void)
{
    struct run r;
    char n[16];
    unsigned iters = tl_count(100, 1000);
    run_bench(&r, "vip_write_bw", "-a", "-n", num(n, iters), "-w", "5", "--csv", NULL);
    check_bandwidth(&r, NSIZES, 4, iters);
}

/* Unreliable (completion on the wire), a small window, waiting in
 * VipSendWait; and reliable reception with polling. */
static void test_write_bw_levels(void)
{
    struct run r;
    char n[16];
    unsigned iters = tl_count(2000, 20000);
    run_bench(&r, "vip_write_bw", "-s", "65536", "-n", num(n, iters), "-t", "3",
              "--reliability", "unreliable", "-e", "--csv", NULL);
    check_bandwidth(&r, 1, 65536, iters);
    run_bench(&r, "vip_write_bw", "-s", "100", "-n", num(n, iters), "--reliability",
              "reception", "--csv", NULL);
    check_bandwidth(&r, 1, 100, iters);
}

/* ---- vip_read_lat ------------------------------------------------------------------ */

static void test_read_lat_all_sizes(void)
{
    struct run r;
    char n[16];
    unsigned iters = tl_count(40, 400);
    run_bench(&r, "vip_read_lat", "-a", "-n", num(n, iters), "-w", "2", "--csv", NULL);
    check_latency(&r, NSIZES, 4, iters);
    iters = tl_count(200, 2000);
    run_bench(&r, "vip_read_lat", "-s", "5000", "-n", num(n, iters), "--reliability",
              "reception", "-e", "--csv", NULL);
    check_latency(&r, 1, 5000, iters);
}

/* ---- vip_send_lat, vip_send_bw: events, VIs in use ------------------------------------ */

/* -e: both programs wait in VipRecvWait/VipSendWait/VipCQWait; with no spin
 * at all (VIP_WAIT_SPIN_US=0, inherited by the benchmark) every wait that
 * finds nothing sleeps, and the tables must still add up. */
static void test_send_events(void)
{
    struct run r;
    char n[16];
    unsigned iters = tl_count(200, 2000);
    run_bench(&r, "vip_send_lat", "-s", "4", "-n", num(n, iters), "-e", "--csv", NULL);
    check_latency(&r, 1, 4, iters);
    TCHK(strstr(r.out, "by events") != NULL);
    setenv("VIP_WAIT_SPIN_US", "0", 1);
    run_bench(&r, "vip_send_lat", "-s", "64", "-n", num(n, iters), "-e", "--csv", NULL);
    check_latency(&r, 1, 64, iters);
    run_bench(&r, "vip_send_bw", "-s", "8", "-n", num(n, iters), "-t", "16", "-e", "--csv",
              NULL);
    check_bandwidth(&r, 1, 8, iters);
    TCHK(strstr(r.out, "VipCQWait") != NULL);
out:
    unsetenv("VIP_WAIT_SPIN_US");
    if (CU_get_number_of_failures())
        SHOW(&r);
}

/* -b N: the sends share N buffers and the receives N (-b 1: one each, as
 * ucx_perftest); the receiver checks the marks of the last message of
 * each size, which are the buffer's, not the descriptor's. */
static void test_send_bw_buffers(void)
{
    struct run r;
    char n[16];
    unsigned iters = tl_count(50, 500);
    run_bench(&r, "vip_send_bw", "-a", "-n", num(n, iters), "-w", "3", "-b", "1", "--csv",
              NULL);
    check_bandwidth(&r, NSIZES, 4, iters);
    run_bench(&r, "vip_send_bw", "-s", "64K", "-n", num(n, iters), "-b", "3", "-t", "8", "--csv",
              NULL);
    check_bandwidth(&r, 1, 65536, iters);
    run_bench(&r, "vip_send_bw", "-b", "0", NULL);
    TCHK(r.status == 1);
    TCHK(strstr(r.err, "-b") != NULL);
out:
    if (CU_get_number_of_failures())
        SHOW(&r);
}

/* --active N: N connected VIs per process, each carrying its share of the
 * ping-pong (each message's number and length are checked by the program:
 * a VI that delivered to the wrong receive or none stops it). */
static void test_send_lat_active(void)
{
    struct run r;
    char n[16];
    unsigned iters = tl_count(60, 600);
    run_bench(&r, "vip_send_lat", "-s", "16", "-n", num(n, iters), "-w", "0", "--active", "6",
              "--vis", "2", "--csv", NULL);
    check_latency(&r, 1, 16, iters);
    TCHK(strstr(r.out, "6 active VIs (used in turn) and 2 idle VIs") != NULL);
    run_bench(&r, "vip_send_lat", "-a", "-n", "3", "-w", "1", "--active", "5", "-e", "--csv",
              NULL);
    check_latency(&r, NSIZES, 4, 3);
    run_bench(&r, "vip_send_lat", "--active", "0", NULL);
    TCHK(r.status == 1);
    TCHK(strstr(r.err, "--active") != NULL);
out:
    if (CU_get_number_of_failures())
        SHOW(&r);
}

/* ---- the wake-up programs: the first message ------------------------------------------- */

/* Rows first, wake, compute of a wake-up CSV: the first is one message,
 * delivered (not late), with a positive time. */
static void check_wake(const struct run *r, const char *transport, unsigned wake, unsigned cp)
{
    TCHK(r->status == 0);
    static const char *const tests[] = {"first", "wake", "compute"};
    unsigned want[] = {1, wake, cp};
    for (size_t t = 0; t < 3; t++) {
        char key[64];
        snprintf(key, sizeof key, "\n%s,%s,wait,16,%u,0,", tests[t], transport, want[t]);
        const char *l = strstr(r->out, key);
        TCHK(l != NULL);
        /* ...,slept_pct,min,p10,median,p90,max */
        double v[6];
        TCHK(sscanf(l + strlen(key), "%lf,%lf,%lf,%lf,%lf,%lf", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5]) == 6);
        TCHK(v[1] > 0 && v[1] <= v[2] && v[2] <= v[3] && v[3] <= v[4] && v[4] <= v[5]);
        if (t == 0)
            TCHK(v[1] == v[5]); /* one sample */
    }
out:
    if (CU_get_number_of_failures())
        SHOW(r);
}

static void test_wake_first(void)
{
    struct run r;
    /* -T: no message counts as late, however loaded the machine */
    run_bench(&r, "vip_wake_lat", "-s", "16", "-n", "5", "-m", "2", "-w", "1", "-p", "300",
              "-c", "200", "-T", "30000", "--csv", NULL);
    check_wake(&r, "via", 5, 2);
    run_bench(&r, "os_wake_lat", "-t", "pipe", "-s", "16", "-n", "4", "-m", "3", "-w", "1", "-p",
              "300", "-c", "200", "-T", "30000", "--csv", NULL);
    check_wake(&r, "pipe", 4, 3);
}

/* ---- vip_model --vis: the doorbell-scan prediction ------------------------------------ */

/* scan_<vis>vi_4B of profile prof, from vip_model --csv --vis ... */
static double model_scan(const struct run *r, const char *prof, unsigned vis)
{
    char key[64];
    snprintf(key, sizeof key, "%s,scan_%uvi_4B,", prof, vis);
    const char *l = strstr(r->out, key);
    return l ? strtod(l + strlen(key), NULL) : -1;
}

/* A paced profile that polls every VI's doorbells grows with the VIs, half
 * a poll per VI per message; native (hardware doorbells) does not. */
static void test_model_vis(void)
{
    struct run r;
    run_bench(&r, "vip_model", "-d", tl_profile_dir(), "--csv", "--vis", "1", "--vis", "65", "pci",
              "native", NULL);
    TCHK(r.status == 0);
    double p1 = model_scan(&r, "pci", 1), p65 = model_scan(&r, "pci", 65);
    double n1 = model_scan(&r, "native", 1), n65 = model_scan(&r, "native", 65);
    TCHK(p1 > 0 && n1 >= 0 && n65 >= 0);
    TCHK(p65 - p1 > 10); /* pci: 2 us a poll, 32 polls more */
    TCHK(n65 == n1);
    TCHK(strstr(r.out, "oneway_4B") == NULL); /* --vis: the scan lines only */
    run_bench(&r, "vip_model", "--vis", "0", "pci", NULL);
    TCHK(r.status == 2);
    TCHK(strstr(r.err, "--vis") != NULL);
out:
    if (CU_get_number_of_failures())
        SHOW(&r);
}

/* ---- vip_model --validate: the model against the published figures ------------------- */

/* N and M of the closing line "validated N figures, M outside tolerance". */
static bool validated(const struct run *r, unsigned *n, unsigned *m)
{
    const char *l = strstr(r->out, "validated ");
    return l && sscanf(l, "validated %u figures, %u outside tolerance", n, m) == 2;
}

/* Write profile `name` of the shipped directory into dir, with the line
 * starting `key` replaced by `line`. */
static bool profile_edited(const char *dir, const char *name, const char *key,
                           const char *line)
{
    char path[512], text[16384];
    snprintf(path, sizeof path, "%s/%s.conf", tl_profile_dir(), name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    snprintf(path, sizeof path, "%s/%s.conf", dir, name);
    if (!(f = fopen(path, "w")))
        return false;
    for (char *l = text, *nl; *l; l = nl) {
        nl = strchr(l, '\n');
        nl = nl ? nl + 1 : l + strlen(l);
        if (!strncmp(l, key, strlen(key)))
            fprintf(f, "%s\n", line);
        else
            fwrite(l, 1, (size_t)(nl - l), f);
    }
    return fclose(f) == 0;
}

/* Every shipped figure holds on the model, which decides the exit status;
 * a measurement outside a tolerance is marked beside it. A model broken
 * by one parameter fails. */
static void test_model_validate(void)
{
    struct run r;
    char dir[] = "/tmp/viptest-val.XXXXXX", path[256] = "";
    bool made = mkdtemp(dir) != NULL;
    TCHK(made);
    unsigned n = 0, m = 0;
    run_bench(&r, "vip_model", "-d", tl_profile_dir(), "--validate", NULL);
    TCHK(r.status == 0);
    TCHK(validated(&r, &n, &m) && n >= 15 && m == 0);
    /* every line cites its source */
    TCHK(strstr(r.out, "Berkeley VIA, ") && strstr(r.out, "AM-II, ") &&
         strstr(r.out, "MU-Net, ") && strstr(r.out, "Clumps, "));
    TCHK(strstr(r.out, "OUTSIDE") == NULL);
    /* an S-Bus ping-pong measured at 40 us is outside the 10% of 23 us */
    snprintf(path, sizeof path, "%s/sbus_standard_latency.csv", dir);
    FILE *f = fopen(path, "w");
    TCHK(f != NULL);
    fprintf(f, "# vip_send_lat\nbytes,iters,min_us,median_us,p90_us,p99_us,max_us,avg_us\n"
               "4,100,39.0,40.0,41.0,42.0,43.0,40.0\n");
    fclose(f);
    run_bench(&r, "vip_model", "-d", tl_profile_dir(), "--validate", "--results", dir, NULL);
    TCHK(r.status == 0);
    TCHK(strstr(r.out, "measured 40 (+73.9%) (OUTSIDE)") != NULL);
    TCHK(strstr(r.out, "measured 1 of them: 1 outside tolerance") != NULL);
    /* a firmware ten times slower at its descriptor step misses the paper */
    TCHK(profile_edited(dir, "sbus", "fw_desc ", "fw_desc 400 lanai-instr # [estimate] x y"));
    TCHK(profile_edited(dir, "pci", "fw_desc ", "fw_desc 40 lanai-instr # [estimate] x y"));
    run_bench(&r, "vip_model", "-d", dir, "--validate", NULL);
    TCHK(r.status == 1);
    TCHK(validated(&r, &n, &m) && m >= 1);
    TCHK(strstr(r.out, " 1 OUTSIDE  check     4-byte one-way latency (RTT/2), S-Bus") != NULL);
    /* the markdown table has the same lines */
    run_bench(&r, "vip_model", "-d", tl_profile_dir(), "--validate", "--markdown", NULL);
    TCHK(r.status == 0 && strstr(r.out, "| # | figure | source |") != NULL);
    /* a profile is no argument of --validate */
    run_bench(&r, "vip_model", "--validate", "sbus", NULL);
    TCHK(r.status == 2);
out:
    if (path[0])
        unlink(path);
    if (made) {
        char p2[300];
        snprintf(p2, sizeof p2, "%s/sbus.conf", dir);
        unlink(p2);
        snprintf(p2, sizeof p2, "%s/pci.conf", dir);
        unlink(p2);
        rmdir(dir);
    }
    if (CU_get_number_of_failures())
        SHOW(&r);
}

/* ---- vip_self: both ends in one thread -------------------------------------------------- */

/* One CSV line "mode,size,count,ns" naming the run asked for, with a time. */
static bool self_line(const struct run *r, const char *mode, unsigned size, unsigned count)
{
    char want[64];
    snprintf(want, sizeof want, "%s,%u,%u,", mode, size, count);
    const char *l = strstr(r->out, want);
    return l && strtod(l + strlen(want), NULL) > 0;
}

/* Both patterns, a window that does not divide the count, odd sizes (every
 * message's marks, lengths and order are checked by the program itself). */
static void test_self(void)
{
    struct run r;
    run_bench(&r, "vip_self", "-m", "stream", "-s", "13", "-w", "7", "-n", "1000", NULL);
    TCHK(r.status == 0);
    TCHK(self_line(&r, "stream", 13, 1000));
    run_bench(&r, "vip_self", "-m", "pingpong", "-s", "0", "-n", "300", NULL);
    TCHK(r.status == 0);
    TCHK(self_line(&r, "pingpong", 0, 300));
    run_bench(&r, "vip_self", "-m", "pingpong", "-s", "4096", "-n", "50", NULL);
    TCHK(r.status == 0);
    TCHK(self_line(&r, "pingpong", 4096, 50));
    run_bench(&r, "vip_self", "-w", "65", NULL);
    TCHK(r.status == 1);
    TCHK(strstr(r.err, "-w") != NULL);
out:
    if (CU_get_number_of_failures())
        SHOW(&r);
}

/* ---- bad options: a clear refusal ---------------------------------------------------- */

static void test_refusals(void)
{
    struct run r;
    run_bench(&r, "vip_read_lat", "--reliability", "unreliable", NULL);
    TCHK(r.status == 1);
    TCHK(strstr(r.err, "reliable") != NULL);
    run_bench(&r, "vip_write_lat", "-s", "0", NULL);
    TCHK(r.status == 1);
    TCHK(strstr(r.err, "at least 1") != NULL);
    run_bench(&r, "vip_write_bw", "-s", "2M", NULL);
    TCHK(r.status == 1);
    TCHK(strstr(r.err, "maximum transfer") != NULL);
    run_bench(&r, "vip_write_bw", "--no-such-option", NULL);
    TCHK(r.status == 2);
    TCHK(strstr(r.err, "usage: vip_write_bw") != NULL);
    run_bench(&r, "vip_read_lat", "-h", NULL);
    TCHK(r.status == 0);
    TCHK(strstr(r.out, "usage: vip_read_lat") != NULL);
out:
    if (CU_get_number_of_failures())
        SHOW(&r);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_write_lat_all_sizes), TL_TEST(test_write_lat_levels),
        TL_TEST(test_write_bw_all_sizes),  TL_TEST(test_write_bw_levels),
        TL_TEST(test_read_lat_all_sizes),  TL_TEST(test_send_events),
        TL_TEST(test_send_lat_active),     TL_TEST(test_send_bw_buffers),
        TL_TEST(test_wake_first),          TL_TEST(test_self),
        TL_TEST(test_model_vis),           TL_TEST(test_model_validate),
        TL_TEST(test_refusals),
        TL_END};
    return tl_main(argc, argv, "bench", tests);
}

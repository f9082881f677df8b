/*
 * test_oldvia.c - an old VIPL program, run as its users ran it: the
 * message-passing layer of tests/oldvia (eager sends, rendezvous by RDMA
 * write with immediate data, a free list threaded through CS.Next, one CQ
 * for every VI, connection set-up looping on VIP_NO_MATCH) is built with
 * nothing but vipl.h, -lvipl and -lpthread (Makefile: mp_bench), and its
 * ping-pong and bandwidth sweeps run between two processes on every NIC
 * profile, each byte verified by the program itself.
 *
 * Either rank may start first: the requester loops on VIP_NO_MATCH until
 * the other waits.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/tlib.h"

static char bench_path[PATH_MAX];

struct rank_run {
    pid_t pid;
    char out[64]; /* its stdout and stderr */
};

/* Start mp_bench as rank `rank`; its output goes to a file of its own. */
static int start_rank(struct rank_run *r, int rank, const char *devs, const char *job,
                      const char *iters, const char *window)
{
    snprintf(r->out, sizeof r->out, "/tmp/oldvia.%d.%d.XXXXXX", (int)getpid(), rank);
    int fd = mkstemp(r->out);
    if (fd < 0)
        return -1;
    char rs[12];
    snprintf(rs, sizeof rs, "%d", rank);
    r->pid = fork();
    if (r->pid < 0) {
        close(fd);
        unlink(r->out);
        return -1;
    }
    if (r->pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execl(bench_path, "mp_bench", "-r", rs, "-d", devs, "-j", job, "-n", iters, "-w", window,
              (char *)NULL);
        _exit(127);
    }
    close(fd);
    return 0;
}

/* Reap r within the deadline (killing it past it); its exit status, or -1. */
static int reap(struct rank_run *r, uint64_t deadline_ms)
{
    int st = 0;
    for (;;) {
        pid_t w = waitpid(r->pid, &st, WNOHANG);
        if (w == r->pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (tl_now_ms() > deadline_ms) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, &st, 0);
            fprintf(stderr, "\n  mp_bench (pid %d) did not finish in time\n", (int)r->pid);
            return -1;
        }
        usleep(10000); /* polling a child's exit, not covering a race */
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The whole of a run's output, or "" (static buffer). */
static const char *slurp(const char *path)
{
    static char buf[16384];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* Run both ranks on the NICs `devs` ("viaA,viaB"); first: which rank
 * starts first. Checks both exit 0, the sweeps reached 1 MiB, rendezvous
 * was used and the receiver returned credits by message. */
static void run_pair(const char *devs, int first, const char *iters, const char *window)
{
    char job[16];
    snprintf(job, sizeof job, "o%x%d", (unsigned)getpid() & 0xffff, first);
    struct rank_run r[2];
    memset(r, 0, sizeof r);
    uint64_t deadline = tl_now_ms() + 120000;
    int ok0 = start_rank(&r[first], first, devs, job, iters, window) == 0;
    int ok1 = ok0 && start_rank(&r[1 - first], 1 - first, devs, job, iters, window) == 0;
    CU_ASSERT_TRUE_FATAL(ok0);
    if (!ok1) {
        kill(r[first].pid, SIGKILL);
        reap(&r[first], deadline);
        unlink(r[first].out);
        CU_FAIL("could not start the second rank");
        return;
    }
    int rc[2];
    for (int i = 0; i < 2; i++)
        rc[i] = reap(&r[i], deadline);
    for (int i = 0; i < 2; i++) {
        const char *out = slurp(r[i].out);
        CU_ASSERT_EQUAL(rc[i], 0);
        if (rc[i] != 0)
            fprintf(stderr, "\n  %s rank %d exited %d:\n%s\n", devs, i, rc[i], out);
        if (i == 0) {
            CU_ASSERT_PTR_NOT_NULL(strstr(out, "pingpong  1048576 bytes"));
            CU_ASSERT_PTR_NOT_NULL(strstr(out, "bandwidth  1048576 bytes"));
        }
        unsigned long eager = 0, rdv = 0, credits = 0;
        const char *s = strstr(out, "stats eager");
        CU_ASSERT_PTR_NOT_NULL(s);
        if (s)
            sscanf(s, "stats eager %lu rendezvous %lu credit_msgs %lu", &eager, &rdv, &credits);
        CU_ASSERT(eager > 0);
        CU_ASSERT(rdv > 0);
        if (i == 1 && atoi(window) >= 16)
            CU_ASSERT(credits > 0); /* the streaming receiver handed credits back */
        unlink(r[i].out);
    }
}

static void test_native_requester_first(void) { run_pair("via0,via1", 1, "20", "32"); }
static void test_native_waiter_first(void) { run_pair("via1,via0", 0, "20", "32"); }
static void test_sbus(void) { run_pair("via2,via3", 1, "4", "16"); }
static void test_pci(void) { run_pair("via4,via5", 0, "4", "16"); }

int main(int argc, char **argv)
{
    /* mp_bench is built beside this binary. */
    ssize_t n = readlink("/proc/self/exe", bench_path, sizeof bench_path - 16);
    if (n <= 0)
        return 2;
    bench_path[n] = '\0';
    char *slash = strrchr(bench_path, '/');
    strcpy(slash ? slash + 1 : bench_path, "mp_bench");
    static const struct tl_test tests[] = {
        TL_TEST(test_native_requester_first),
        TL_TEST(test_native_waiter_first),
        TL_TEST(test_sbus),
        TL_TEST(test_pci),
        TL_END,
    };
    return tl_main(argc, argv, "old VIPL program", tests);
}

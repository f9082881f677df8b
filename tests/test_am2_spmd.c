/*
 * test_am2_spmd.c - SPMD jobs under amrun: a job of 1, 2 and 4 ranks runs
 * tests/am2_spmd_worker to its end (exit 0); a rank that leaves with 3
 * ends the job with 3 while the others wait; a job that outlives amrun's
 * -t is killed (124); amrun's directory is gone afterwards in each case.
 * And a job started as srun starts one (Slurm's variables, no amrun), and
 * amrun --hosts starts one through a fake ssh, also when bad hellos reach
 * its rendezvous first.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../am2/src/am_rdv.h"
#include "lib/thosts.h"
#include "lib/tlib.h"

static char bindir[PATH_MAX]; /* where the tests are */
static const char *nic_override; /* AM2_NIC for amrun_on, else tl_dev("via0") */

static int count_amrun_dirs(const char *tmp)
{
    DIR *d = opendir(tmp);
    int n = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, "amrun.", 6) == 0;
    closedir(d);
    return n;
}

/* Run amrun with args under a private TMPDIR (with --hosts hostfile if
 * not NULL); its exit status, or -1. */
/* The program amrun_on starts (tests/am2_*.c), given `mode` as its argument. */
static const char *worker_prog = "am2_spmd_worker";

static int amrun_on(const char *np, const char *mode, const char *timeout, unsigned wait_ms,
                    const char *hostfile)
{
    char amrun_path[PATH_MAX + 32], worker[PATH_MAX + 32], tmp[] = "/tmp/am2spmd.XXXXXX";
    snprintf(amrun_path, sizeof amrun_path, "%s/../bin/amrun", bindir);
    snprintf(worker, sizeof worker, "%s/%s", bindir, worker_prog);
    if (!mkdtemp(tmp))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TMPDIR", tmp, 1);
        setenv("AM2_NIC", nic_override ? nic_override : tl_dev("via0"), 1);
        if (hostfile)
            execl(amrun_path, "amrun", "-np", np, "-t", timeout, "--hosts", hostfile, worker,
                  mode, (char *)NULL);
        else
            execl(amrun_path, "amrun", "-np", np, "-t", timeout, worker, mode, (char *)NULL);
        _exit(127);
    }
    int st = -1, rc = -1;
    uint64_t end = tl_now_ms() + wait_ms;
    while (pid > 0 && tl_now_ms() < end) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            pid = 0;
        }
        usleep(10000);
    }
    if (pid > 0) {
        kill(pid, SIGTERM); /* amrun passes it on to the ranks, SIGKILLs them 2 s later */
        usleep(3000000);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    int left = count_amrun_dirs(tmp);
    rmdir(tmp);
    return left == 0 ? rc : -2;
}

static int amrun(const char *np, const char *mode, const char *timeout, unsigned wait_ms)
{
    return amrun_on(np, mode, timeout, wait_ms, NULL);
}

static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Jobs started through the fake ssh script at ssh, nranks ranks meeting
 * through amrun's rendezvous on 127.0.0.1 (the worker checks it had no
 * job directory); NULL: back to local jobs. */
static void over_ssh(const char *ssh, const char *nranks)
{
    if (!ssh) {
        unsetenv("AMRUN_SSH");
        unsetenv("AMRUN_RDV_HOST");
        unsetenv("AM2_TEST_RDV");
        unsetenv("AM2_TEST_NRANKS");
        return;
    }
    setenv("AMRUN_SSH", ssh, 1);
    setenv("AMRUN_RDV_HOST", "127.0.0.1", 1);
    setenv("AM2_TEST_RDV", "1", 1);
    setenv("AM2_TEST_NRANKS", nranks, 1);
}

/* amrun --hosts through a fake ssh that logs the host it was asked for
 * and runs the command here in an emptied environment (as a remote shell
 * would start): the ranks get their variables from the command line only,
 * meet through amrun's TCP rendezvous (the worker checks there is no
 * directory), and the job's status comes back through "ssh". */
static void test_spmd_hosts(void)
{
    char dir[] = "/tmp/am2ssh.XXXXXX", ssh[64], log[64], hf[64], text[512];
    TCHK(mkdtemp(dir) != NULL);
    snprintf(ssh, sizeof ssh, "%s/ssh", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(hf, sizeof hf, "%s/hosts", dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n# fake ssh: HOST COMMAND\necho \"$1\" >> %s\nshift\n"
             "case \"$*\" in *\"'AM2_TEST_RDV=1'\"*) ;; *) exit 97 ;; esac\n"
             "exec env -i PATH=\"$PATH\" sh -c \"$*\"\n",
             log);
    TCHK(write_file(ssh, text, 0700) == 0);
    TCHK(write_file(hf, "# two slots on alpha, one on beta\nalpha slots=2\nbeta\n", 0600) == 0);
    over_ssh(ssh, "3");
    setenv("AM2_TEST_MASTER", "1", 1); /* AMTEST_MASTER is not passed: from amrun */
    setenv("AMTEST_MASTER", "m a 'ster'", 1);
    int ok = amrun_on("3", "ok", "20", 25000, hf);
    int fail = amrun_on("3", "fail", "20", 25000, hf);
    over_ssh(NULL, NULL);
    unsetenv("AM2_TEST_MASTER");
    unsetenv("AMTEST_MASTER");
    CU_ASSERT_EQUAL(ok, 0);
    CU_ASSERT_EQUAL(fail, 3);
    int alpha = 0, beta = 0;
    FILE *f = fopen(log, "r");
    char line[64];
    while (f && fgets(line, sizeof line, f)) {
        alpha += !strcmp(line, "alpha\n");
        beta += !strcmp(line, "beta\n");
    }
    if (f)
        fclose(f);
    CU_ASSERT(alpha == 4 && beta == 2); /* ranks 0, 1 on alpha, 2 on beta; twice */
out:
    unlink(ssh);
    unlink(log);
    unlink(hf);
    rmdir(dir);
}

/* An SPMD job whose two ranks sit on two emulated hosts: two vipds joined
 * by the link THOSTS_LINK names (UDP by default; run_tests runs the
 * hosts tests again with ofi), a fake ssh giving each host name its own
 * vipd, the ranks meeting through amrun's rendezvous and talking through
 * their NICs (AM2_SHM=0), so every AM message crosses the link. */
static void test_spmd_across_hosts(void)
{
    /* Under valgrind every rank's endpoint setup outlasts AM-II's connect
     * deadline (EUNREACHABLE, as on a starved machine); the AM layer's
     * memory is checked by the one-host tests. */
    if (tl_under_valgrind())
        return;
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    char dir[] = "/tmp/am2xh.XXXXXX", ssh[64], hf[64], text[1024];
    if (!mkdtemp(dir)) {
        CU_FAIL("mkdtemp");
        thosts_stop(&h);
        return;
    }
    snprintf(ssh, sizeof ssh, "%s/ssh", dir);
    snprintf(hf, sizeof hf, "%s/hosts", dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n# fake ssh: HOST COMMAND, each host name its own vipd\nh=$1\nshift\n"
             "case $h in\nhost0) s='%s' ;;\nhost1) s='%s' ;;\n*) exit 96 ;;\nesac\n"
             "exec env VIPD_SOCKET=\"$s\" VIPD_AUTOSTART=0 AM2_SHM=0 sh -c \"$*\"\n",
             h.sock[0], h.sock[1]);
    int ok = -1;
    if (write_file(ssh, text, 0700) == 0 && write_file(hf, "host0\nhost1\n", 0600) == 0) {
        over_ssh(ssh, "2");
        /* amrun passes VIP* variables on to the ranks: this test's own
         * VIPD_SOCKET would override the fake ssh's choice of vipd */
        char *own = getenv("VIPD_SOCKET") ? strdup(getenv("VIPD_SOCKET")) : NULL;
        unsetenv("VIPD_SOCKET");
        nic_override = "via0";
        ok = amrun_on("2", "ok", "40", 45000, hf);
        nic_override = NULL;
        if (own)
            setenv("VIPD_SOCKET", own, 1);
        free(own);
        over_ssh(NULL, NULL);
    }
    CU_ASSERT_EQUAL(ok, 0);
    unlink(ssh);
    unlink(hf);
    rmdir(dir);
    thosts_stop(&h);
}

static void test_spmd_ok(void)
{
    setenv("AM2_TEST_MASTER", "1", 1); /* the worker reads amrun's environment */
    setenv("AMTEST_MASTER", "m a 'ster'", 1);
    CU_ASSERT_EQUAL(amrun("1", "ok", "20", 25000), 0);
    CU_ASSERT_EQUAL(amrun("2", "ok", "20", 25000), 0);
    CU_ASSERT_EQUAL(amrun("4", "ok", "20", 25000), 0);
    /* 5 peers each: more VIs than a bundle polls one by one (AM2_SHM=0),
     * so completions come through the CQ and its VI map */
    CU_ASSERT_EQUAL(amrun("6", "ok", "30", 35000), 0);
    unsetenv("AM2_TEST_MASTER");
    unsetenv("AMTEST_MASTER");
}

static void test_spmd_fail(void)
{
    CU_ASSERT_EQUAL(amrun("3", "fail", "20", 25000), 3);
}

/* am2_spmd_exit(0) of one rank ends the job with 0 while the others wait
 * in a barrier (as AMUDP_SPMDExit does), without running the program's
 * exit handlers. */
static void test_spmd_exit_zero_ends_job(void)
{
    CU_ASSERT_EQUAL(amrun("3", "exit0", "20", 25000), 0);
}

/* Many overlapping short, medium and long requests and replies in both
 * directions between 2 and 4 ranks (tests/am2_stress.c: up to 8 in
 * flight per rank, longs up to AM_MaxLong), every byte checked; through
 * the NIC when run with AM2_SHM=0 (make test runs the AM-II tests so too). */
static void test_spmd_stress(void)
{
    worker_prog = "am2_stress";
    CU_ASSERT_EQUAL(amrun("2", "2000", "60", 65000), 0);
    CU_ASSERT_EQUAL(amrun("4", "2000", "60", 65000), 0);
    worker_prog = "am2_spmd_worker";
}

static void test_spmd_timeout(void)
{
    CU_ASSERT_EQUAL(amrun("2", "hang", "1", 10000), 124);
}

/* Started as srun would: SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID, no
 * amrun; the ranks find each other in a directory they make and remove. */
static void test_spmd_slurm(void)
{
    enum { N = 3 };
    char worker[PATH_MAX + 32], job[32], rank[16], dir[128];
    snprintf(worker, sizeof worker, "%s/am2_spmd_worker", bindir);
    snprintf(job, sizeof job, "t%d", (int)getpid());
    snprintf(dir, sizeof dir, "/tmp/am2-job-%u-%s-0", (unsigned)getuid(), job);
    pid_t pid[N] = {0};
    for (int i = 0; i < N; i++) {
        snprintf(rank, sizeof rank, "%d", i);
        pid[i] = fork();
        if (pid[i] == 0) {
            setenv("SLURM_PROCID", rank, 1);
            setenv("SLURM_NTASKS", "3", 1);
            setenv("SLURM_JOB_ID", job, 1);
            setenv("AM2_TEST_NRANKS", "3", 1);
            setenv("AM2_NIC", tl_dev("via0"), 1);
            unsetenv("SLURM_STEP_ID");
            execl(worker, "am2_spmd_worker", "ok", (char *)NULL);
            _exit(127);
        }
    }
    uint64_t end = tl_now_ms() + 20000;
    for (int i = 0; i < N; i++) {
        int st = -1;
        while (pid[i] > 0 && tl_now_ms() < end && waitpid(pid[i], &st, WNOHANG) == 0)
            usleep(10000);
        if (pid[i] > 0 && tl_now_ms() >= end) {
            kill(pid[i], SIGKILL);
            waitpid(pid[i], &st, 0);
        }
        CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        pid[i] = 0;
    }
    CU_ASSERT(access(dir, F_OK) != 0); /* rank 0 removed it */
    rmdir(dir);
}

/* ---- a hostile "ssh": bad hellos at amrun's rendezvous first ----------------------- */

static void rdv_send(uint16_t port, const void *buf, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && n)
        (void)!write(fd, buf, n);
    if (fd >= 0)
        close(fd);
}

/* `test_am2_spmd --hostile-ssh HOST COMMAND`: send amrun's rendezvous
 * (named in COMMAND) garbage, a wrong cookie, a rank out of range, a
 * name of the wrong length and half a hello, then run COMMAND as the fake
 * ssh does. amrun must refuse them all and run the job as if they had not
 * come. */
static int hostile_ssh(const char *cmd)
{
    const char *r = strstr(cmd, "AM2_SPMD_RDV=");
    unsigned port = 0;
    unsigned long long cookie = 0;
    char host[64];
    if (!r || sscanf(r + 13, "%63[^:]:%u:%llx", host, &port, &cookie) != 3)
        return 96;
    uint8_t buf[sizeof(struct am_rdv_hello) + 16] = {0};
    struct am_rdv_hello h = {.magic = AM_RDV_MAGIC, .rank = 0, .nranks = 3, .len = 16,
                             .cookie = cookie};
    memset(buf, 0xA5, sizeof buf);
    rdv_send((uint16_t)port, buf, sizeof buf); /* garbage */
    struct am_rdv_hello bad[] = {h, h, h, h};
    bad[0].cookie ^= 1;
    bad[1].rank = 3;
    bad[2].len = 1000;
    bad[3].nranks = 2;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(buf, &bad[i], sizeof bad[i]);
        rdv_send((uint16_t)port, buf, sizeof buf);
    }
    rdv_send((uint16_t)port, &h, sizeof h / 2); /* half a hello */
    rdv_send((uint16_t)port, NULL, 0);          /* nothing at all */
    execl("/usr/bin/env", "env", "-i", "PATH=/usr/bin:/bin", "sh", "-c", cmd, (char *)NULL);
    return 127;
}

static void test_spmd_hosts_hostile(void)
{
    char dir[] = "/tmp/am2ssh.XXXXXX", hf[64], ssh[PATH_MAX + 32];
    TCHK(mkdtemp(dir) != NULL);
    snprintf(hf, sizeof hf, "%s/hosts", dir);
    snprintf(ssh, sizeof ssh, "%s/test_am2_spmd --hostile-ssh", bindir);
    TCHK(write_file(hf, "gamma\n", 0600) == 0);
    setenv("AMRUN_SSH", ssh, 1);
    setenv("AMRUN_RDV_HOST", "127.0.0.1", 1);
    setenv("AM2_TEST_NRANKS", "3", 1);
    int ok = amrun_on("3", "ok", "20", 25000, hf);
    unsetenv("AMRUN_SSH");
    unsetenv("AMRUN_RDV_HOST");
    unsetenv("AM2_TEST_NRANKS");
    CU_ASSERT_EQUAL(ok, 0);
out:
    unlink(hf);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--hostile-ssh"))
        return hostile_ssh(argv[3]);
    if (tl_bindir(bindir, sizeof bindir))
        return 2;
    static const struct tl_test tests[] = {TL_TEST(test_spmd_ok), TL_TEST(test_spmd_fail),
                                           TL_TEST(test_spmd_timeout),
                                           TL_TEST(test_spmd_exit_zero_ends_job),
                                           TL_TEST(test_spmd_stress),
                                           TL_TEST(test_spmd_slurm),
                                           TL_TEST(test_spmd_hosts),
                                           TL_TEST(test_spmd_hosts_hostile),
                                           TL_TEST(test_spmd_across_hosts),
                                           TL_END};
    return tl_main(argc, argv, "am2_spmd", tests);
}

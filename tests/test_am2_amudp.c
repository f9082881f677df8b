/*
 * test_am2_amudp.c - a program written for AMUDP (tests/amudp/amudp_check,
 * built against the staged install by pkg-config alone) runs unchanged:
 * started as `prog NPROC [L] args` (the master starts the workers), under
 * the installed amrun, and through ssh (AMUDP_SPAWNFN=S with a fake ssh
 * that runs each worker here in an emptied environment). A rank's
 * AMX_SPMDExit(3) ends the job with 3 and every rank leaves through its
 * exit callback and kill hook. make test runs this suite through shared
 * memory and again through the NIC (AM2_SHM=0). Each job runs in a
 * private TMPDIR that must be empty afterwards (amrun's directory gone).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/trun.h"

static char bindir[PATH_MAX]; /* where the tests are */
static char prog[PATH_MAX + 32], amrun[PATH_MAX + 32];

/* run the program (tr_run) with the variables every job here needs */
static int run(char *const argv[], char *out, size_t cap, unsigned wait_ms)
{
    setenv("AM2_NIC", tl_dev("via0"), 1);
    setenv("AMUDP_CHECK_MASTER", "from the master", 1);
    return tr_run(argv, out, cap, wait_ms);
}

/* Every rank of an nproc job left through the exit callback and the kill
 * hook with code. */
static bool all_left(const char *out, int nproc, int code)
{
    char text[64];
    for (int r = 0; r < nproc; r++) {
        snprintf(text, sizeof text, "amudp_check: rank %d leaves with %d", r, code);
        if (tr_lines(out, text) != 1)
            return false;
        snprintf(text, sizeof text, "amudp_check: rank %d killed with %d", r, code);
        if (tr_lines(out, text) != 1)
            return false;
    }
    return true;
}

static char out[65536];

/* `prog NPROC ITERS`: the master starts the workers here (L by default,
 * or by the letter after the count). */
static void test_amudp_master_starts_workers(void)
{
    char *two[] = {prog, "2", "20", NULL};
    TCHK(run(two, out, sizeof out, 60000) == 0);
    TCHK(tr_lines(out, "amudp_check: 2 ranks, 20 iterations: ok") == 1 && all_left(out, 2, 0));
    char *three[] = {prog, "3", "L", "10", NULL};
    TCHK(run(three, out, sizeof out, 60000) == 0);
    TCHK(tr_lines(out, "amudp_check: 3 ranks, 10 iterations: ok") == 1 && all_left(out, 3, 0));
out:;
}

/* The same program as amrun's ranks (the installed amrun). */
static void test_amudp_under_amrun(void)
{
    char *job[] = {amrun, "-np", "2", "-t", "50", prog, "20", NULL};
    TCHK(run(job, out, sizeof out, 60000) == 0);
    TCHK(tr_lines(out, "amudp_check: 2 ranks, 20 iterations: ok") == 1 && all_left(out, 2, 0));
out:;
}

/* AMX_SPMDExit(3) in rank 1 while ranks 0 and 2 wait for messages: the
 * job's status is 3 and every rank, told by rank 1, leaves through its
 * callback and kill hook (not killed by amrun's signal). */
static void test_amudp_exit_ends_job(void)
{
    char *job[] = {prog, "3", "5", "exit3", NULL};
    TCHK(run(job, out, sizeof out, 30000) == 3);
    TCHK(all_left(out, 3, 3));
out:;
}

/* AMUDP_SPAWNFN=S (and the letter S): workers through AMUDP_SSH_CMD on
 * the hosts of AMUDP_SSH_SERVERS, in turn; a fake ssh logs the host and
 * runs the command here with nothing of our environment, so the workers
 * read AMUDP_CHECK_MASTER through getenvMaster only. */
static void test_amudp_ssh_spawn(void)
{
    char dir[] = "/tmp/amudpssh.XXXXXX", ssh[64], log[64], text[512];
    TCHK(mkdtemp(dir) != NULL);
    snprintf(ssh, sizeof ssh, "%s/ssh", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(text, sizeof text,
             "#!/bin/sh\n# fake ssh: HOST COMMAND\necho \"$1\" >> %s\nshift\n"
             "exec env -i PATH=\"$PATH\" sh -c \"$*\"\n",
             log);
    FILE *f = fopen(ssh, "w");
    TCHK(f && fputs(text, f) >= 0 && fclose(f) == 0 && chmod(ssh, 0700) == 0);
    setenv("AMUDP_SSH_CMD", ssh, 1);
    setenv("AMUDP_SSH_SERVERS", "alpha, beta", 1);
    setenv("AMUDP_MASTERIP", "127.0.0.1", 1);
    setenv("AMUDP_SPAWNFN", "S", 1);
    char *by_env[] = {prog, "3", "10", NULL};
    int rc_env = run(by_env, out, sizeof out, 60000);
    bool ok_env =
        tr_lines(out, "amudp_check: 3 ranks, 10 iterations: ok") == 1 && all_left(out, 3, 0);
    unsetenv("AMUDP_SPAWNFN");
    char *by_letter[] = {prog, "2", "s", "10", NULL};
    int rc_letter = run(by_letter, out, sizeof out, 60000);
    bool ok_letter = tr_lines(out, "amudp_check: 2 ranks, 10 iterations: ok") == 1;
    unsetenv("AMUDP_SSH_CMD");
    unsetenv("AMUDP_SSH_SERVERS");
    unsetenv("AMUDP_MASTERIP");
    CU_ASSERT(rc_env == 0 && ok_env);
    CU_ASSERT(rc_letter == 0 && ok_letter);
    int alpha = 0, beta = 0;
    char line[64];
    f = fopen(log, "r");
    while (f && fgets(line, sizeof line, f)) {
        alpha += !strcmp(line, "alpha\n");
        beta += !strcmp(line, "beta\n");
    }
    if (f)
        fclose(f);
    CU_ASSERT(alpha == 3 && beta == 2); /* ranks 0, 2 then 0 on alpha; 1, then 1 on beta */
out:
    unlink(ssh);
    unlink(log);
    rmdir(dir);
}

/* A master given no usable count says how to start it and exits 1, as
 * AMUDP's does; an unknown spawner letter in AMUDP_SPAWNFN likewise. */
static void test_amudp_master_usage(void)
{
    char *zero[] = {prog, "0", "5", NULL};
    TCHK(run(zero, out, sizeof out, 10000) == 1 && strstr(out, "NPROC"));
    setenv("AMUDP_SPAWNFN", "Q", 1);
    char *bad[] = {prog, "2", "5", NULL};
    int rc = run(bad, out, sizeof out, 10000);
    unsetenv("AMUDP_SPAWNFN");
    TCHK(rc == 1 && strstr(out, "AMUDP_SPAWNFN=Q"));
out:;
}

int main(int argc, char **argv)
{
    if (tl_bindir(bindir, sizeof bindir))
        return 2;
    snprintf(prog, sizeof prog, "%s/amudp/amudp_check", bindir);
    snprintf(amrun, sizeof amrun, "%s/../stage/bin/amrun", bindir);
    unsetenv("AMUDP_SPAWNFN");
    static const struct tl_test tests[] = {TL_TEST(test_amudp_master_starts_workers),
                                           TL_TEST(test_amudp_under_amrun),
                                           TL_TEST(test_amudp_exit_ends_job),
                                           TL_TEST(test_amudp_ssh_spawn),
                                           TL_TEST(test_amudp_master_usage), TL_END};
    return tl_main(argc, argv, "am2_amudp", tests);
}

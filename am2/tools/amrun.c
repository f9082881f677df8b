/*
 * amrun - start an SPMD job of AM-2 programs: `amrun -np N prog args...`
 *
 * Forks N processes on this host running prog with args, each told its
 * place in the job through the environment (am2_spmd.h reads it):
 *   AM2_SPMD_RANK    0..N-1
 *   AM2_SPMD_NRANKS  N
 *   AM2_SPMD_DIR     a directory private to the job, where the ranks
 *                    publish their endpoint names to each other
 *   AM2_SPMD_JOB     a number unique to the job (the endpoints' tag)
 * The rest of the environment passes unchanged; output goes straight to
 * amrun's stdout and stderr.
 *
 * The job's status is the first failing rank's (exit code, or 128+signal);
 * when one rank fails the others get SIGTERM, then SIGKILL 2 s later. A
 * job still running after -t seconds (AMRUN_TIMEOUT; 0 = none) is killed
 * and amrun exits with 124. SIGINT and SIGTERM sent to amrun go to the
 * ranks. The directory is removed in every case.
 */

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 1024

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) { got_signal = sig; }

static void usage(void)
{
    fprintf(stderr, "usage: amrun [-np N] [-t SECONDS] prog [args...]\n"
                    "  starts N (default 2) processes of prog on this host as one AM-2 SPMD job\n");
    exit(2);
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[4096 + 260];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

/* The shared-memory queues of a rank's endpoints (AM2_SHM=1), which a
 * rank killed before AM_Terminate leaves behind: /dev/shm/am2-<pid>-*. */
static void rm_shm(pid_t pid)
{
    char prefix[32], path[300];
    snprintf(prefix, sizeof prefix, "am2-%08x-", (unsigned)pid);
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof path, "/dev/shm/%.255s", e->d_name);
            unlink(path);
        }
    closedir(d);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void signal_all(const pid_t *pid, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (pid[i] > 0)
            kill(pid[i], sig);
}

int main(int argc, char **argv)
{
    int np = 2, a = 1;
    const char *t_env = getenv("AMRUN_TIMEOUT");
    double timeout = t_env ? atof(t_env) : 0;
    while (a < argc && argv[a][0] == '-') {
        if ((!strcmp(argv[a], "-np") || !strcmp(argv[a], "-n")) && a + 1 < argc)
            np = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-t") && a + 1 < argc)
            timeout = atof(argv[a + 1]);
        else
            usage();
        a += 2;
    }
    if (a >= argc || np < 1 || np > MAX_RANKS)
        usage();
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/amrun.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "amrun: mkdtemp %s: %s\n", dir, strerror(errno));
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    static pid_t pid[MAX_RANKS];
    char job[32], nr[16], rk[16];
    snprintf(job, sizeof job, "%ld%ld", (long)getpid(), (long)time(NULL) % 100000);
    snprintf(nr, sizeof nr, "%d", np);
    int status = 0, failed = 0, live = 0;
    for (int i = 0; i < np; i++) {
        snprintf(rk, sizeof rk, "%d", i);
        pid[i] = fork();
        if (pid[i] < 0) {
            fprintf(stderr, "amrun: fork: %s\n", strerror(errno));
            status = 2;
            failed = 1;
            break;
        }
        if (pid[i] == 0) {
            setenv("AM2_SPMD_RANK", rk, 1);
            setenv("AM2_SPMD_NRANKS", nr, 1);
            setenv("AM2_SPMD_DIR", dir, 1);
            setenv("AM2_SPMD_JOB", job, 1);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            execvp(argv[a], argv + a);
            fprintf(stderr, "amrun: cannot run %s: %s\n", argv[a], strerror(errno));
            _exit(127);
        }
        live++;
    }
    if (failed)
        signal_all(pid, np, SIGTERM);
    double start = now_s(), kill_at = failed ? now_s() + 2 : 0;
    while (live > 0) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w > 0) {
            for (int i = 0; i < np; i++)
                if (pid[i] == w) {
                    pid[i] = 0;
                    live--;
                    rm_shm(w);
                    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                    if (code && !failed) {
                        failed = 1;
                        status = code;
                        fprintf(stderr, "amrun: rank %d %s %d; ending the job\n", i,
                                WIFEXITED(st) ? "exited with" : "was killed by signal",
                                WIFEXITED(st) ? code : WTERMSIG(st));
                        signal_all(pid, np, SIGTERM);
                        kill_at = now_s() + 2;
                    }
                }
            continue;
        }
        if (got_signal && !failed) {
            failed = 1;
            status = 128 + got_signal;
            signal_all(pid, np, got_signal);
            kill_at = now_s() + 2;
        }
        if (timeout > 0 && !failed && now_s() - start > timeout) {
            fprintf(stderr, "amrun: the job ran longer than %g s; killing it\n", timeout);
            failed = 1;
            status = 124;
            signal_all(pid, np, SIGTERM);
            kill_at = now_s() + 2;
        }
        if (kill_at && now_s() > kill_at) {
            signal_all(pid, np, SIGKILL);
            kill_at = 0;
        }
        usleep(2000);
    }
    rm_dir(dir);
    return status;
}

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
 * With --hosts FILE the ranks start on the hosts the file names (one a
 * line, `host [slots=N]`; ranks fill each host's slots in turn, cycling),
 * or with -H h1,h2,... on those hosts, one rank each in turn,
 * through ssh (AMRUN_SSH, default "ssh": the command and its options,
 * split at spaces): `ssh HOST 'cd DIR && exec env VAR=... prog args'`.
 * The variables passed are the AM2_SPMD_* above (AM2_SPMD_RDV instead of
 * the directory: the ranks exchange their names through amrun's TCP
 * rendezvous, amrun_rdv.c, as hosts share no /tmp), those named by -x,
 * and every AM2_*, VIP*, TL_* and LD_LIBRARY_PATH. ssh forwards the
 * output and the rank's exit status.
 *
 * The job's status is the first failing rank's (exit code, or 128+signal);
 * when one rank fails the others get SIGTERM, then SIGKILL 2 s later. A
 * rank that ends the job through am2_spmd_exit (AMUDP_SPMDExit) gives its
 * code, whatever it is; the others, told by it, get a second to leave on
 * their own before SIGTERM. A
 * job still running after -t seconds (AMRUN_TIMEOUT; 0 = none) is killed
 * and amrun exits with 124. SIGINT and SIGTERM sent to amrun go to the
 * ranks. The directory is removed in every case.
 */

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/am_rdv.h"
#include "amrun_rdv.h"

#define MAX_RANKS 1024
#define MAX_X 64

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) { got_signal = sig; }

static void usage(void)
{
    fprintf(stderr,
            "usage: amrun [-np N] [-t SECONDS] [--hosts FILE | -H H1,H2...] [-x VAR]... prog [args...]\n"
            "  starts N (default 2) processes of prog as one AM-2 SPMD job: on this host,\n"
            "  or through ssh (AMRUN_SSH) on the hosts of FILE (`host [slots=N]` a line)\n"
            "  or of the list\n");
    exit(2);
}

/* ---- ranks over ssh (--hosts) ------------------------------------------------------- */

static char *hosts[MAX_RANKS];
static int nhosts;

/* Each rank's host: the lines' slots filled in turn (host slots=3 takes
 * three ranks in a row), cycling through the file. */
static int read_hosts(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "amrun: %s: %s\n", file, strerror(errno));
        return -1;
    }
    char line[512];
    while (fgets(line, sizeof line, f) && nhosts < MAX_RANKS) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char name[256];
        int slots = 1, n = 0;
        if (sscanf(line, "%255s %n", name, &n) != 1)
            continue;
        if (line[n] && sscanf(line + n, "slots=%d", &slots) != 1) {
            fprintf(stderr, "amrun: %s: cannot read '%s'\n", file, line + n);
            fclose(f);
            return -1;
        }
        for (int i = 0; i < slots && nhosts < MAX_RANKS; i++)
            hosts[nhosts++] = strdup(name);
    }
    fclose(f);
    if (!nhosts)
        fprintf(stderr, "amrun: %s names no host\n", file);
    return nhosts ? 0 : -1;
}

/* -H h1,h2,...: one rank on each in turn. */
static int list_hosts(const char *list)
{
    char *copy = strdup(list), *save = NULL;
    for (char *h = copy ? strtok_r(copy, ", ", &save) : NULL; h && nhosts < MAX_RANKS;
         h = strtok_r(NULL, ", ", &save))
        hosts[nhosts++] = strdup(h);
    free(copy);
    if (!nhosts)
        fprintf(stderr, "amrun: -H '%s' names no host\n", list);
    return nhosts ? 0 : -1;
}

struct str {
    char *p;
    size_t len, cap;
};

static void put(struct str *s, const char *t, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        if (!(s->p = realloc(s->p, s->cap))) {
            fprintf(stderr, "amrun: out of memory\n");
            _exit(2);
        }
    }
    memcpy(s->p + s->len, t, n);
    s->len += n;
    s->p[s->len] = 0;
}

/* t as one word of the remote shell: in single quotes, ' as '\''. */
static void put_quoted(struct str *s, const char *t)
{
    put(s, " '", 2);
    for (; *t; t++)
        if (*t == '\'')
            put(s, "'\\''", 4);
        else
            put(s, t, 1);
    put(s, "'", 1);
}

static bool passed(const char *var, char *const *xv, int nx)
{
    static const char *const prefix[] = {"AM2_", "VIP", "TL_", "LD_LIBRARY_PATH="};
    if (!strncmp(var, "AM2_SPMD_", 9))
        return false; /* set for each rank */
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (!strncmp(var, prefix[i], strlen(prefix[i])))
            return true;
    for (int i = 0; i < nx; i++) {
        size_t n = strlen(xv[i]);
        if (!strncmp(var, xv[i], n) && var[n] == '=')
            return true;
    }
    return false;
}

/* In the child: exec ssh HOST 'cd CWD && exec env VARS prog args'. */
static void exec_ssh(const char *host, char **prog, char *const *xv, int nx)
{
    extern char **environ;
    struct str cmd = {0};
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) {
        put(&cmd, "cd", 2);
        put_quoted(&cmd, cwd);
        put(&cmd, " && ", 4);
    }
    put(&cmd, "exec env", 8);
    for (char **e = environ; *e; e++)
        if (passed(*e, xv, nx) || !strncmp(*e, "AM2_SPMD_", 9))
            put_quoted(&cmd, *e);
    for (char **a = prog; *a; a++)
        put_quoted(&cmd, *a);
    const char *ssh = getenv("AMRUN_SSH");
    char *words = strdup(ssh && *ssh ? ssh : "ssh");
    char *argv[64];
    int n = 0;
    for (char *w = strtok(words, " "); w && n < 60; w = strtok(NULL, " "))
        argv[n++] = w;
    argv[n++] = (char *)host;
    argv[n++] = cmd.p;
    argv[n] = NULL;
    execvp(argv[0], argv);
    fprintf(stderr, "amrun: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
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

/* The rank that ended the job through am2_spmd_exit and its code
 * (DIR/exit), if one did. */
static bool exit_mark(const char *dir, int *rank, int *code)
{
    char mark[4096 + 16];
    snprintf(mark, sizeof mark, AM_SPMD_EXIT_MARK, dir);
    FILE *f = fopen(mark, "r");
    if (!f)
        return false;
    bool ok = fscanf(f, "%d %d", rank, code) == 2;
    fclose(f);
    return ok;
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
    int np = 2, a = 1, nx = 0;
    const char *t_env = getenv("AMRUN_TIMEOUT"), *hostfile = NULL, *hostlist = NULL;
    char *xv[MAX_X];
    double timeout = t_env ? atof(t_env) : 0;
    while (a < argc && argv[a][0] == '-') {
        if ((!strcmp(argv[a], "-np") || !strcmp(argv[a], "-n")) && a + 1 < argc)
            np = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-t") && a + 1 < argc)
            timeout = atof(argv[a + 1]);
        else if ((!strcmp(argv[a], "--hosts") || !strcmp(argv[a], "-hostfile")) && a + 1 < argc)
            hostfile = argv[a + 1];
        else if (!strcmp(argv[a], "-H") && a + 1 < argc)
            hostlist = argv[a + 1];
        else if (!strcmp(argv[a], "-x") && a + 1 < argc && nx < MAX_X)
            xv[nx++] = argv[a + 1];
        else
            usage();
        a += 2;
    }
    if (a >= argc || np < 1 || np > MAX_RANKS || (hostfile && hostlist))
        usage();
    char rdv[512] = "";
    bool ssh = hostfile || hostlist; /* the ranks start over ssh */
    if (ssh && ((hostlist ? list_hosts(hostlist) : read_hosts(hostfile)) ||
                amrun_rdv_open(np, rdv, sizeof rdv))) {
        if (nhosts)
            fprintf(stderr, "amrun: cannot listen for the ranks: %s\n", strerror(errno));
        return 2;
    }
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/amrun.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "amrun: mkdtemp %s: %s\n", dir, strerror(errno));
        return 2;
    }
    /* Our environment for am2_spmd_getenv_master of local ranks. */
    static char env[AM_RDV_MAX_ENV];
    size_t envlen = amrun_env_block(env, sizeof env);
    char envpath[4096 + 16];
    snprintf(envpath, sizeof envpath, "%s/" AM_SPMD_ENV_FILE, dir);
    FILE *ef = fopen(envpath, "w");
    if (!ef || fwrite(env, 1, envlen, ef) != envlen || fclose(ef)) {
        fprintf(stderr, "amrun: cannot write %s\n", envpath);
        rm_dir(dir);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* Our output may go to a pipe that closes (`amrun ... | head`): amrun
     * must still end the job and remove its directory. */
    signal(SIGPIPE, SIG_IGN);
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
            setenv("AM2_SPMD_JOB", job, 1);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            signal(SIGPIPE, SIG_DFL);
            if (ssh) {
                setenv("AM2_SPMD_RDV", rdv, 1);
                exec_ssh(hosts[i % nhosts], argv + a, xv, nx);
            }
            setenv("AM2_SPMD_DIR", dir, 1);
            execvp(argv[a], argv + a);
            fprintf(stderr, "amrun: cannot run %s: %s\n", argv[a], strerror(errno));
            _exit(127);
        }
        live++;
    }
    if (failed)
        signal_all(pid, np, SIGTERM);
    double start = now_s(), kill_at = failed ? now_s() + 2 : 0, term_at = 0;
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
                    /* A rank that called am2_spmd_exit (AMUDP_SPMDExit) ends
                     * the job with its code, whatever it is: it left DIR/exit
                     * and told the others, who get a second to leave. */
                    int by = -1, job_code = 0;
                    if (!failed && !ssh && exit_mark(dir, &by, &job_code)) {
                        failed = 1;
                        status = job_code;
                        if (job_code)
                            fprintf(stderr, "amrun: rank %d ended the job with %d\n", by,
                                    job_code);
                        term_at = now_s() + 1;
                    }
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
        if (term_at && now_s() > term_at) {
            signal_all(pid, np, SIGTERM);
            term_at = 0;
            kill_at = now_s() + 2;
        }
        if (kill_at && now_s() > kill_at) {
            signal_all(pid, np, SIGKILL);
            kill_at = 0;
        }
        amrun_rdv_step(2); /* a 2 ms sleep when there is no rendezvous */
    }
    amrun_rdv_close();
    rm_dir(dir);
    return status;
}

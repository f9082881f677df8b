/*
 * am_amudp_spmd.c - AMUDP's SPMD names (amudp_spmd.h): a worker is an
 * am2_spmd rank; a master (`prog NPROC args`) becomes the job's launcher.
 *
 * AMUDP's master stays alive as the job's console: it starts the workers
 * through a spawn function, routes their output and exits with the job's
 * status. amrun is exactly that console, so a master's spawn function
 * replaces the process with amrun (-np NPROC, the program and the rest of
 * its arguments; -H and AMRUN_SSH for ssh): the workers it starts are
 * amrun's ranks, and everything amrun does for a job (the rendezvous,
 * ending every rank when one fails or exits, the timeout, cleaning up)
 * holds for AMUDP jobs too. amrun is found beside the library
 * (LIBDIR/../bin/amrun, as installed and as built), else as AM2_AMRUN
 * names it, else on PATH.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "am2_spmd.h"
#include "am_int.h"
#include "amudp_spmd.h"

static bool started;

int AMUDP_SPMDIsWorker(char **argv)
{
    (void)argv; /* a worker is known by its environment, not its arguments */
    return started || am2_spmd_is_worker();
}

int AMUDP_SPMDNumProcs(void) { return started ? am2_spmd_nranks() : -1; }
int AMUDP_SPMDMyProc(void) { return started ? am2_spmd_rank() : -1; }
int AMUDP_SPMDBarrier(void) { return am2_spmd_barrier(); }
int AMUDP_SPMDAllGather(void *source, void *dest, size_t len)
{
    return am2_spmd_allgather(source, dest, len);
}
const char *AMUDP_SPMDgetenvMaster(const char *keyname)
{
    return started ? am2_spmd_getenv_master(keyname) : NULL;
}
int AMUDP_SPMDSetExitCallback(amudp_exitcallback_t fn) { return am2_spmd_set_exit_callback(fn); }

int AMUDP_SPMDExit(int exitcode)
{
    am2_spmd_exit(exitcode); /* every rank's job ends; does not return */
}

/* ---- the master: amrun in its place ------------------------------------------------ */

/* The amrun beside this library, or a name for execvp to find. */
static const char *amrun_path(char *buf, size_t cap)
{
    const char *env = getenv("AM2_AMRUN");
    if (env && *env)
        return env;
    Dl_info di;
    if (dladdr((void *)&AMUDP_SPMDStartup, &di) && di.dli_fname) {
        char lib[PATH_MAX];
        if (realpath(di.dli_fname, lib)) {
            char *slash = strrchr(lib, '/');
            if (slash) {
                *slash = 0;
                snprintf(buf, cap, "%s/../bin/amrun", lib);
                if (access(buf, X_OK) == 0)
                    return buf;
            }
        }
    }
    return "amrun";
}

/* exec amrun with opts (NULL-terminated) before the job's program and
 * arguments; the extra variables go into the environment and are passed
 * to ranks on other hosts by name (-x). Returns only if exec failed. */
static int exec_amrun(int nproc, const char *const *opts, int argc, char **argv, char **extra_env)
{
    int nx = 0, no = 0;
    while (extra_env && extra_env[nx])
        nx++;
    while (opts && opts[no])
        no++;
    char **av = calloc((size_t)(argc + no + 2 * nx + 4), sizeof *av);
    char np[16], path[PATH_MAX + 16];
    if (!av)
        return 0;
    snprintf(np, sizeof np, "%d", nproc);
    int a = 0;
    av[a++] = "amrun";
    av[a++] = "-np";
    av[a++] = np;
    for (int i = 0; i < no; i++)
        av[a++] = (char *)opts[i];
    for (int i = 0; i < nx; i++) {
        char *eq = strchr(extra_env[i], '=');
        if (!eq)
            continue;
        char *name = strndup(extra_env[i], (size_t)(eq - extra_env[i]));
        if (!name || setenv(name, eq + 1, 1))
            continue;
        av[a++] = "-x";
        av[a++] = name;
    }
    for (int i = 0; i < argc; i++)
        av[a++] = argv[i];
    av[a] = NULL;
    const char *prog = amrun_path(path, sizeof path);
    fflush(NULL);
    execvp(prog, av);
    fprintf(stderr, "AMUDP: cannot run %s to start the workers: %s (AM2_AMRUN names it)\n",
            prog, strerror(errno));
    free(av);
    return 0;
}

int AMUDP_SPMDLocalSpawn(int nproc, int argc, char **argv, char **extra_env)
{
    return exec_amrun(nproc, NULL, argc, argv, extra_env);
}

/* ssh to the hosts AMUDP_SSH_SERVERS lists (separated by spaces, commas,
 * semicolons or colons; ranks go round them), as AMUDP_SSH_CMD (default
 * ssh) with AMUDP_SSH_OPTIONS; the workers reach the master (amrun's
 * rendezvous) at AMUDP_MASTERIP if set, else at its host name. */
int AMUDP_SPMDSshSpawn(int nproc, int argc, char **argv, char **extra_env)
{
    const char *servers = getenv("AMUDP_SSH_SERVERS");
    if (!servers || !servers[strspn(servers, " \t\n,;:")]) {
        fprintf(stderr, "AMUDP: the ssh spawner needs AMUDP_SSH_SERVERS, the hosts to start "
                        "the workers on\n");
        return 0;
    }
    char list[4096];
    size_t n = 0;
    for (const char *c = servers; *c && n + 1 < sizeof list; c++)
        list[n++] = strchr(" \t\n;:", *c) ? ',' : *c;
    list[n] = 0;
    const char *cmd = getenv("AMUDP_SSH_CMD"), *opt = getenv("AMUDP_SSH_OPTIONS");
    char ssh[1024];
    snprintf(ssh, sizeof ssh, "%s %s", cmd && *cmd ? cmd : "ssh", opt ? opt : "");
    setenv("AMRUN_SSH", ssh, 1);
    const char *master_ip = getenv("AMUDP_MASTERIP"); /* how workers reach the master */
    if (master_ip && *master_ip)
        setenv("AMRUN_RDV_HOST", master_ip, 1);
    const char *opts[] = {"-H", list, NULL};
    return exec_amrun(nproc, opts, argc, argv, extra_env);
}

const amudp_spawnfn_desc_t AMUDP_Spawnfn_Desc[] = {
    {'L', "start the workers on this host (fork)", AMUDP_SPMDLocalSpawn},
    {'S', "start the workers through ssh on AMUDP_SSH_SERVERS", AMUDP_SPMDSshSpawn},
    {0, NULL, NULL},
};

static amudp_spawnfn_t spawn_by_letter(const char *s)
{
    for (int i = 0; s && s[0] && AMUDP_Spawnfn_Desc[i].abbrev; i++)
        if (toupper((unsigned char)s[0]) == AMUDP_Spawnfn_Desc[i].abbrev)
            return AMUDP_Spawnfn_Desc[i].fnptr;
    return NULL;
}

/* Take argument 1 out of argv (argv[0] stays first). */
static void take_arg1(int *argc, char ***argv)
{
    (*argv)[1] = (*argv)[0];
    (*argv)++;
    (*argc)--;
}

static int master(int *argc, char ***argv, int nproc, amudp_spawnfn_t spawnfn)
{
    if (!argc || !argv || !*argv || *argc < 1)
        return am_fail(AM_ERR_BAD_ARG, "AMUDP_SPMDStartup: no argc/argv for the master");
    if (nproc < 0 || nproc > AMUDP_MAX_SPMDPROCS)
        return am_fail(AM_ERR_BAD_ARG, "AMUDP_SPMDStartup: %d workers (1..%d)", nproc,
                       AMUDP_MAX_SPMDPROCS);
    if (nproc == 0) {
        if (*argc > 1)
            nproc = atoi((*argv)[1]);
        if (nproc < 1 || nproc > AMUDP_MAX_SPMDPROCS) {
            fprintf(stderr, "usage: %s NPROC [L|S] args...\n"
                            "  NPROC: how many worker processes the job has (1..%d)\n",
                    (*argv)[0], AMUDP_MAX_SPMDPROCS);
            exit(1);
        }
        take_arg1(argc, argv);
    }
    if (!spawnfn && *argc > 1 && strlen((*argv)[1]) == 1 && spawn_by_letter((*argv)[1])) {
        spawnfn = spawn_by_letter((*argv)[1]);
        take_arg1(argc, argv);
    }
    if (!spawnfn) {
        const char *env = getenv("AMUDP_SPAWNFN");
        spawnfn = spawn_by_letter(env && *env ? env : "L");
        if (!spawnfn) {
            fprintf(stderr, "AMUDP_SPAWNFN=%s: not a spawn function; one of:\n", env);
            for (int i = 0; AMUDP_Spawnfn_Desc[i].abbrev; i++)
                fprintf(stderr, "  %c  %s\n", AMUDP_Spawnfn_Desc[i].abbrev,
                        AMUDP_Spawnfn_Desc[i].desc);
            exit(1);
        }
    }
    if (spawnfn != AMUDP_SPMDLocalSpawn && spawnfn != AMUDP_SPMDSshSpawn)
        return am_fail(AM_ERR_RESOURCE, "AMUDP_SPMDStartup: a spawn function of the program's "
                                        "own is not supported (use L, S or amrun)");
    char *no_extra[] = {NULL};
    if (!spawnfn(nproc, *argc, *argv, no_extra))
        return am_fail(AM_ERR_RESOURCE, "AMUDP_SPMDStartup: the workers could not be started");
    return am_fail(AM_ERR_RESOURCE, "AMUDP_SPMDStartup: the spawn function returned");
}

int AMUDP_SPMDStartup(int *argc, char ***argv, int nproc, int networkdepth,
                      amudp_spawnfn_t spawnfn, uint64_t *networkpid, eb_t *eb, ep_t *ep)
{
    if (started)
        return am_fail(AM_ERR_RESOURCE, "AMUDP_SPMDStartup was called already");
    if (networkdepth < 0 || networkdepth > AMUDP_MAX_NETWORKDEPTH)
        return am_fail(AM_ERR_BAD_ARG, "network depth %d (0..%d)", networkdepth,
                       AMUDP_MAX_NETWORKDEPTH);
    if (!am2_spmd_is_worker())
        return master(argc, argv, nproc, spawnfn);
    /* A worker's output reaches the console a line at a time, as AMUDP's
     * does, so that a rank stopped at the job's end loses none of it. */
    setvbuf(stdout, NULL, _IOLBF, BUFSIZ);
    setvbuf(stderr, NULL, _IOLBF, BUFSIZ);
    int r = am2_spmd_startup(argc, argv, eb, ep);
    if (r != AM_OK)
        return r;
    started = true;
    if (networkpid) {
        tag_t tag = 0;
        AM_GetTag(*ep, &tag); /* the job's number, the same in every rank */
        *networkpid = tag;
    }
    return AM_OK;
}

/*
 * am_spmd.c - SPMD start-up, barrier, all-gather and exit (am2_spmd.h),
 * built on the AM-2 API alone.
 *
 * The layer talks through an endpoint of its own (the control endpoint,
 * in the program's bundle), so all 256 handler indices of the program's
 * endpoint, and its statistics, are the program's. Its name is the
 * program endpoint's with the next id (allocated right after it): only
 * the program endpoints' names are exchanged.
 *
 * Start-up: each rank writes its endpoint name to DIR/rank.R (written
 * under another name and renamed, so a reader never sees half of it) and
 * reads the others' until all are there; ranks on several hosts (amrun
 * --hosts) get all names from amrun's TCP rendezvous instead (am_rdv.c). The barrier is a gather at rank 0
 * and a release from it, with the phase in the message so that an early
 * arrival for the next barrier is not mistaken for this one. The
 * all-gather sends each block to every rank in medium messages between two
 * barriers, so every rank's destination is ready before anything arrives.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "am2_spmd.h"
#include "am_int.h"
#include "am_rdv.h"

/* The launcher's environment (am2_spmd_getenv_master): NUL-terminated
 * VAR=value strings, from amrun's rendezvous or its job directory. Kept
 * past am2_spmd_exit's reset, for the rest of the process. */
static char *master_env;
static size_t master_env_len;

/* The control endpoint's handlers. */
enum { H_ARRIVE = 1, H_RELEASE, H_GATHER, H_EXIT };

/* What finally ends a rank that leaves through this layer (AMUDP's name,
 * amudp_spmd.h: a program may put its own there). */
void (*AMUDP_SPMDkillmyprocess)(int) = _exit;

static struct {
    bool up;
    int rank, nranks;
    eb_t eb;
    ep_t ep;  /* the program's */
    ep_t ctl; /* the layer's own */
    bool leaving; /* am2_spmd_exit or h_exit under way */
    int phase;
    int arrived[2];
    int released;
    uint8_t *gdst;
    size_t glen, got;
    void (*on_exit)(int);
    char own_dir[256];   /* the job directory we made (no amrun) */
    char amrun_dir[256]; /* amrun's job directory (its exit marks go there) */
    int wait_ms;         /* AM2_SPMD_TIMEOUT_MS; -1: barriers wait for ever */
} sp;

int am2_spmd_rank(void) { return sp.up ? sp.rank : -1; }
int am2_spmd_nranks(void) { return sp.up ? sp.nranks : 0; }
/* Where the launcher says who we are: amrun, else Slurm (srun), else a
 * PMI-style launcher (Hydra/MPICH; Open MPI's names). */
static const char *const rank_vars[] = {"AM2_SPMD_RANK", "SLURM_PROCID", "PMI_RANK",
                                        "OMPI_COMM_WORLD_RANK"};
static const char *const size_vars[] = {"AM2_SPMD_NRANKS", "SLURM_NTASKS", "PMI_SIZE",
                                        "OMPI_COMM_WORLD_SIZE"};
static const char *const job_vars[] = {"AM2_SPMD_JOB", "SLURM_JOB_ID", "PMI_ID", "OMPI_MCA_ess_base_jobid"};

static int launcher(void)
{
    for (int i = 0; i < 4; i++)
        if (getenv(rank_vars[i]) && getenv(size_vars[i]))
            return i;
    return -1;
}

int am2_spmd_is_worker(void) { return launcher() >= 0; }

const char *am2_spmd_getenv_master(const char *name)
{
    if (!name || !*name || strchr(name, '='))
        return NULL;
    if (!master_env)
        return getenv(name); /* not started by amrun: ours is the launcher's */
    size_t l = strlen(name);
    for (size_t off = 0; off < master_env_len;) {
        const char *e = master_env + off;
        if (!strncmp(e, name, l) && e[l] == '=')
            return e + l + 1;
        off += strlen(e) + 1;
    }
    return NULL;
}

/* amrun's environment as it wrote it in the job directory. */
static void read_master_env(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/" AM_SPMD_ENV_FILE, dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char *buf = malloc(AM_RDV_MAX_ENV + 1);
    size_t n = buf ? fread(buf, 1, AM_RDV_MAX_ENV, f) : 0;
    fclose(f);
    if (!buf)
        return;
    buf[n] = 0;
    free(master_env);
    master_env = buf;
    master_env_len = n;
}

static void h_arrive(void *token, int32_t phase)
{
    (void)token;
    sp.arrived[phase & 1]++;
}

static void h_release(void *token, int32_t phase)
{
    (void)token;
    sp.released = phase;
}

static void h_gather(void *token, void *buf, size_t n, int32_t off)
{
    int src;
    if (AMX_GetSourceId(token, &src) != AM_OK || src < 0 || src >= sp.nranks || !sp.gdst ||
        off < 0 || (size_t)off + n > sp.glen)
        return;
    memcpy(sp.gdst + (size_t)src * sp.glen + (size_t)off, buf, n);
    sp.got += n;
}

/* The last of a rank that leaves through this layer: stdio flushed, then
 * the kill hook (the program's exit handlers do not run again). */
static _Noreturn void leave(int code)
{
    fflush(NULL);
    AMUDP_SPMDkillmyprocess(code);
    _exit(code & 0xFF);
}

/* Another rank ended the job (am2_spmd_exit): leave as it did, from
 * inside the poll that brought the news (the exit callback, stdio, the
 * kill hook), without unwinding into the program again. The launcher
 * frees what the process held. */
static void h_exit(void *token, int32_t code)
{
    (void)token;
    if (sp.leaving)
        return;
    sp.leaving = true;
    if (sp.on_exit)
        sp.on_exit(code);
    leave(code);
}

/* A control message that came back while we leave: nothing to do. */
static void h_returned(int status, op_t op, void *token)
{
    (void)status;
    (void)op;
    (void)token;
}

/* The control endpoint of the rank whose program endpoint is named n. */
static en_t ctl_name(en_t n)
{
    n.id = (n.id + 1) & 0xFFFFFFu;
    return n;
}

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s && *s ? atoi(s) : dflt;
}

static int publish(const char *dir, const en_t *me)
{
    char tmp[4096], fin[4096];
    snprintf(tmp, sizeof tmp, "%s/.rank.%d", dir, sp.rank);
    snprintf(fin, sizeof fin, "%s/rank.%d", dir, sp.rank);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return am_fail(AM_ERR_RESOURCE, "%s: %s", tmp, strerror(errno));
    ssize_t w = write(fd, me, sizeof *me);
    close(fd);
    if (w != (ssize_t)sizeof *me || rename(tmp, fin))
        return am_fail(AM_ERR_RESOURCE, "publishing %s failed", fin);
    return AM_OK;
}

static int lookup(const char *dir, int r, en_t *name, uint64_t deadline)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank.%d", dir, r);
    for (;;) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            ssize_t n = read(fd, name, sizeof *name);
            close(fd);
            if (n == (ssize_t)sizeof *name)
                return AM_OK;
        }
        if (am_now_ms() > deadline)
            return am_fail(AM_ERR_RESOURCE, "rank %d did not start (no %s)", r, path);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

int am2_spmd_startup(int *argc, char ***argv, eb_t *eb, ep_t *ep)
{
    (void)argc;
    (void)argv;
    if (sp.up)
        return am_fail(AM_ERR_IN_USE, "am2_spmd_startup was called already");
    if (!eb || !ep)
        return am_fail(AM_ERR_BAD_ARG, "NULL bundle or endpoint result");
    int l = launcher();
    sp.rank = l < 0 ? 0 : env_int(rank_vars[l], 0);
    sp.nranks = l < 0 ? 1 : env_int(size_vars[l], 1);
    const char *jobv = l < 0 ? NULL : getenv(job_vars[l]);
    const char *dir = getenv("AM2_SPMD_DIR");
    const char *rdv = l == 0 ? getenv("AM2_SPMD_RDV") : NULL; /* amrun --hosts */
    if (rdv && *rdv)
        dir = NULL;
    else
        rdv = NULL;
    /* Other launchers give no directory: one per job and user under /tmp
     * (the ranks share this host). */
    char own[256];
    if (!dir && !rdv && l > 0 && jobv) {
        const char *step = getenv("SLURM_STEP_ID");
        snprintf(own, sizeof own, "/tmp/am2-job-%u-%.40s-%.20s", (unsigned)getuid(), jobv,
                 step ? step : "0");
        if (mkdir(own, 0700) && errno != EEXIST)
            return am_fail(AM_ERR_RESOURCE, "mkdir %s: %s", own, strerror(errno));
        dir = own;
        snprintf(sp.own_dir, sizeof sp.own_dir, "%s", own);
    }
    if (sp.nranks < 1 || sp.rank < 0 || sp.rank >= sp.nranks || (sp.nranks > 1 && !dir && !rdv))
        return am_fail(AM_ERR_BAD_ARG, "rank %d of %d (AM2_SPMD_*; start the job with amrun)",
                       sp.rank, sp.nranks);
    tag_t tag = 1;
    for (const char *c = jobv ? jobv : ""; *c; c++) /* any job id string: a hash */
        tag = tag * 1099511628211ull ^ (uint8_t)*c;
    if (tag == AM_NONE || tag == AM_ALL)
        tag = 1;
    en_t me, ctl;
    int r = AM_Init();
    if (r != AM_OK)
        return r;
    int ntr = sp.nranks > 256 ? sp.nranks : 256;
    if ((r = AM_AllocateBundle(AM_SEQ, &sp.eb)) || (r = AM_AllocateEndpoint(sp.eb, &sp.ep, &me)) ||
        (r = AM_AllocateEndpoint(sp.eb, &sp.ctl, &ctl)) || (r = AM_SetTag(sp.ep, tag)) ||
        (r = AM_SetTag(sp.ctl, tag)) || (r = AM_SetNumTranslations(sp.ep, ntr)) ||
        (r = AM_SetNumTranslations(sp.ctl, ntr)) ||
        (r = AM_SetHandler(sp.ctl, H_ARRIVE, h_arrive)) ||
        (r = AM_SetHandler(sp.ctl, H_RELEASE, h_release)) ||
        (r = AM_SetHandler(sp.ctl, H_GATHER, h_gather)) ||
        (r = AM_SetHandler(sp.ctl, H_EXIT, h_exit)))
        goto bad;
    if (ctl.id != ctl_name(me).id) {
        r = am_fail(AM_ERR_RESOURCE, "the control endpoint's id is not the next one");
        goto bad;
    }
    sp.wait_ms = env_int("AM2_SPMD_TIMEOUT_MS", -1);
    uint64_t deadline = am_now_ms() + (uint64_t)(sp.wait_ms < 0 ? 30000 : sp.wait_ms);
    en_t *all = NULL;
    if (rdv && sp.nranks > 1) {
        if (!(all = calloc((size_t)sp.nranks, sizeof *all))) {
            r = am_fail(AM_ERR_RESOURCE, "out of memory");
            goto bad;
        }
        char *env = NULL;
        size_t envlen = 0;
        r = am_rdv_exchange(rdv, sp.rank, sp.nranks, &me, all, &env, &envlen, deadline);
        if (r == AM_OK) {
            free(master_env);
            master_env = env;
            master_env_len = envlen;
        }
    } else if (sp.nranks > 1) {
        r = publish(dir, &me);
    }
    if (dir && l == 0) {
        read_master_env(dir); /* amrun's job directory */
        snprintf(sp.amrun_dir, sizeof sp.amrun_dir, "%s", dir);
    }
    for (int i = 0; i < sp.nranks && r == AM_OK; i++) {
        en_t name = me;
        if (all)
            name = all[i];
        else if (i != sp.rank)
            r = lookup(dir, i, &name, deadline);
        if (r == AM_OK)
            r = AM_Map(sp.ep, i, name, tag);
        if (r == AM_OK)
            r = AM_Map(sp.ctl, i, ctl_name(name), tag);
    }
    free(all);
    if (r != AM_OK)
        goto bad;
    sp.up = true;
    sp.released = -1;
    *eb = sp.eb;
    *ep = sp.ep;
    r = am2_spmd_barrier();
    /* Every name is read: the files can go (and a directory we made). */
    if (r == AM_OK && sp.nranks > 1 && dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank.%d", dir, sp.rank);
        unlink(path);
        r = am2_spmd_barrier();
        if (r == AM_OK && sp.rank == 0 && sp.own_dir[0])
            rmdir(sp.own_dir);
    }
    return r;
bad:
    AM_Terminate();
    memset(&sp, 0, sizeof sp);
    return r;
}

/* When a barrier or all-gather stops waiting for the other ranks: never,
 * unless AM2_SPMD_TIMEOUT_MS says. A rank that is only slow (a long phase
 * of the program, a loaded machine, virtual time) is waited for, as
 * AMUDP's barrier does; one that dies ends the job through its launcher.
 * (Start-up, which waits for ranks that may never start, keeps its 30 s.) */
static uint64_t wait_end(void)
{
    return sp.wait_ms < 0 ? UINT64_MAX : am_now_ms() + (uint64_t)sp.wait_ms;
}

static int poll_until(const int *v, int want)
{
    uint64_t end = wait_end();
    /* The clock now and then only: a rank waiting here is often the one
     * serving the others' requests, and a clock read costs a poll. */
    for (unsigned turn = 1; *v != want; turn++) {
        int r = AM_Poll(sp.eb);
        if (r != AM_OK)
            return r;
        if ((turn & 255) == 0 && am_now_ms() > end)
            return am_fail(AM_ERR_RESOURCE, "the other ranks did not come (barrier %d)", sp.phase);
    }
    return AM_OK;
}

int am2_spmd_barrier(void)
{
    if (!sp.up)
        return am_fail(AM_ERR_NOT_INIT, "am2_spmd_startup was not called");
    int ph = sp.phase++;
    int r = AM_Request1(sp.ctl, 0, H_ARRIVE, ph);
    if (r != AM_OK)
        return r;
    if (sp.rank == 0) {
        if ((r = poll_until(&sp.arrived[ph & 1], sp.nranks)))
            return r;
        sp.arrived[ph & 1] = 0;
        for (int i = 0; i < sp.nranks; i++)
            if ((r = AM_Request1(sp.ctl, i, H_RELEASE, ph)))
                return r;
    }
    return poll_until(&sp.released, ph);
}

int am2_spmd_allgather(const void *src, void *dst, size_t len)
{
    if (!sp.up)
        return am_fail(AM_ERR_NOT_INIT, "am2_spmd_startup was not called");
    if ((!src || !dst) && len)
        return am_fail(AM_ERR_BAD_ARG, "NULL buffer");
    if (len > (size_t)INT32_MAX)
        return am_fail(AM_ERR_BAD_ARG, "%zu bytes per rank", len);
    sp.gdst = dst;
    sp.glen = len;
    sp.got = 0;
    int r = am2_spmd_barrier();
    for (int i = 0; i < sp.nranks && r == AM_OK; i++)
        for (size_t off = 0; off < len && r == AM_OK; off += AM_MaxMedium()) {
            size_t n = len - off < AM_MaxMedium() ? len - off : AM_MaxMedium();
            r = AM_RequestI1(sp.ctl, i, H_GATHER, (uint8_t *)src + off, n, (int32_t)off);
        }
    uint64_t end = wait_end();
    while (r == AM_OK && sp.got < len * (size_t)sp.nranks) {
        r = AM_Poll(sp.eb);
        if (am_now_ms() > end)
            r = am_fail(AM_ERR_RESOURCE, "all-gather: %zu of %zu bytes came", sp.got,
                        len * (size_t)sp.nranks);
    }
    if (r == AM_OK)
        r = am2_spmd_barrier();
    sp.gdst = NULL;
    return r;
}

int am2_spmd_set_exit_callback(void (*fn)(int code))
{
    sp.on_exit = fn;
    return AM_OK;
}

/* Tell every other rank that the job ends: each leaves (h_exit) the next
 * time it polls. Bounded, so that a rank that cannot be reached soon does
 * not hold us: connections and credits are waited for briefly, and then
 * our sends for at most 300 ms. A rank not told is the launcher's to stop
 * (amrun ends the job a second after our exit mark). */
static void tell_others(int code)
{
    unsigned connect_ms = am_g.connect_ms, congestion_ms = am_g.congestion_ms;
    am_g.connect_ms = 100;
    am_g.congestion_ms = 100;
    AM_SetHandler(sp.ctl, 0, h_returned);
    uint64_t end = am_now_ms() + 1000;
    for (int i = 0; i < sp.nranks && am_now_ms() < end; i++)
        if (i != sp.rank)
            AM_Request1(sp.ctl, i, H_EXIT, code);
    end = am_now_ms() + 300;
    for (bool busy = true; busy && am_now_ms() < end;) {
        AM_Poll(sp.eb);
        am_send_reclaim(sp.ctl);
        busy = false;
        for (struct am_peer *p = sp.ctl->peers; p; p = p->next)
            if (p->state != PEER_BROKEN && (p->sends_out > 0 || p->pend))
                busy = true;
    }
    am_g.connect_ms = connect_ms;
    am_g.congestion_ms = congestion_ms;
}

/* Ends the whole job, whatever the code (AMUDP_SPMDExit's meaning): the
 * other ranks are told (tell_others), and under amrun a mark in the job
 * directory tells amrun that this exit is the job's, so it stops any rank
 * that did not leave. The process leaves through AMUDP_SPMDkillmyprocess
 * (_exit): the program's own exit handlers (which may be what called us)
 * do not run again; stdio is flushed first. */
void am2_spmd_exit(int code)
{
    if (!sp.leaving) {
        sp.leaving = true;
        if (sp.on_exit)
            sp.on_exit(code);
        if (sp.up && sp.amrun_dir[0]) {
            char mark[300];
            snprintf(mark, sizeof mark, AM_SPMD_EXIT_MARK, sp.amrun_dir);
            int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL, 0600);
            if (fd >= 0) {
                dprintf(fd, "%d %d\n", sp.rank, code & 0xFF);
                close(fd);
            }
        }
        if (sp.up && sp.nranks > 1)
            tell_others(code);
        if (sp.up)
            while (am_g.init > 0)
                AM_Terminate();
    }
    leave(code);
}

/*
 * tsys.c - two throwaway users and a system vipd of the test's own (tsys.h).
 */
#include "tsys.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

uid_t tsys_uid_a, tsys_uid_b;
struct tvipd tsys_vipd;

/* ---- users ------------------------------------------------------------------- */

/* Two uids nobody has (no passwd entry), different for concurrent runs. */
void tsys_pick_uids(void)
{
    uid_t u = 60000u + (uid_t)(getpid() % 2000) * 2u;
    while (getpwuid(u) || getpwuid(u + 1))
        u += 2;
    tsys_uid_a = u;
    tsys_uid_b = u + 1;
}

bool tsys_need_root(void)
{
    if (geteuid() == 0)
        return true;
    fprintf(stderr, "\n  skipped: needs root to act as two throwaway users\n");
    return false;
}

struct as_user {
    uid_t uid;
    int (*fn)(void *);
    void *arg;
};

/* In the child: become uid (no groups, gid = uid), as a program that user
 * started would be, then run fn. */
static int as_user_run(void *p)
{
    const struct as_user *a = p;
    pid_t parent = getppid();
    if (setgroups(0, NULL) < 0 || setresgid(a->uid, a->uid, a->uid) < 0 ||
        setresuid(a->uid, a->uid, a->uid) < 0)
        tl_child_fail(__FILE__, __LINE__, "cannot become uid %u: %s", (unsigned)a->uid,
                      strerror(errno));
    /* its /proc entries are its own, as any program's */
    prctl(PR_SET_DUMPABLE, 1);
    /* new credentials cleared it: die with the test all the same */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    return a->fn(a->arg);
}

int tsys_spawn_as(struct tl_child *c, uid_t uid, int (*fn)(void *), void *arg)
{
    struct as_user a = {uid, fn, arg}; /* the child has its own copy */
    return tl_spawn(c, as_user_run, &a);
}

/* ---- the system vipd ---------------------------------------------------------- */

/* A directory other users can pass through, for the private ones. */
static const char *reach_parent(void)
{
    static const char *const cand[] = {"/run", "/dev/shm", "/var/tmp", "/tmp"};
    for (unsigned i = 0; i < sizeof cand / sizeof *cand; i++) {
        struct stat st;
        if (lstat(cand[i], &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) &&
            access(cand[i], W_OK) == 0)
            return cand[i];
    }
    return NULL;
}

/* Start `vipd --system` (with extra options) on a private directory, mode
 * 0755 so that the users reach its socket. false: skipped or failed. */
bool tsys_start(const char *const *extra)
{
    if (!tsys_need_root())
        return false;
    const char *parent = reach_parent();
    if (!parent) {
        CU_FAIL("no directory other users can reach (/run, /dev/shm, /var/tmp, /tmp)");
        return false;
    }
    const char *args[16] = {"--system"};
    for (unsigned i = 0; extra && extra[i] && i < 14; i++)
        args[i + 1] = extra[i];
    if (tvipd_start_in(&tsys_vipd, parent, args, 0) != 0) {
        CU_FAIL("could not start a system vipd of the test's own");
        return false;
    }
    /* vipd leaves the mode of a directory it did not make to its owner */
    if (chmod(tsys_vipd.dir, 0755) < 0) {
        CU_FAIL("chmod of the system vipd's directory");
        tvipd_stop(&tsys_vipd);
        return false;
    }
    return true;
}

/* Wait for the children spawned (all if ok, else killed at once) and
 * report what they said. */
void tsys_reap(struct tl_child *c, unsigned n, bool ok)
{
    for (unsigned i = 0; i < n; i++)
        TCHILD_OK(&c[i], ok ? 30000 : 1);
}

/* ---- one message each way on a connected VI --------------------------------------- */

#define L_RDESC(l) ((VIP_DESCRIPTOR *)(void *)(l)->b.p)
#define L_SDESC(l) ((VIP_DESCRIPTOR *)(void *)((l)->b.p + 64))
#define L_RDATA(l) ((l)->b.p + 4096)
#define L_SDATA(l) ((l)->b.p + 8192)

/* A NIC, a registered buffer and a reliable VI with a receive posted. */
void tsys_link_open(struct tsys_link *l, const char *dev)
{
    TC_RC(tl_open(&l->t, dev), VIP_SUCCESS);
    TC_RC(tl_buf_alloc(&l->t, &l->b, 12288), VIP_SUCCESS);
    TC_RC(tl_vi(&l->t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &l->vi), VIP_SUCCESS);
    tl_desc_1(L_RDESC(l), L_RDATA(l), TSYS_LEN, l->b.mh);
    TC_RC(VipPostRecv(l->vi, L_RDESC(l), l->b.mh), VIP_SUCCESS);
}

/* Send message `out`, receive message `in`, both checked byte for byte. */
void tsys_link_swap(struct tsys_link *l, uint32_t out, uint32_t in)
{
    VIP_DESCRIPTOR *d;
    tl_fill(L_SDATA(l), TSYS_LEN, out);
    tl_desc_1(L_SDESC(l), L_SDATA(l), TSYS_LEN, l->b.mh);
    TC_RC(VipPostSend(l->vi, L_SDESC(l), l->b.mh), VIP_SUCCESS);
    TC_RC(VipSendWait(l->vi, 10000, &d), VIP_SUCCESS);
    TC_CHECK(d == L_SDESC(l) && !(d->CS.Status & VIP_STATUS_ERROR_MASK));
    TC_RC(VipRecvWait(l->vi, 10000, &d), VIP_SUCCESS);
    TC_CHECK(d == L_RDESC(l));
    TC_CHECK((d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK)) == VIP_STATUS_DONE);
    TC_CHECK(d->CS.Length == TSYS_LEN && tl_verify(L_RDATA(l), TSYS_LEN, in) == -1);
}

void tsys_link_close(struct tsys_link *l)
{
    VipDisconnect(l->vi);
    VipDestroyVi(l->vi);
    tl_buf_free(&l->b);
    tl_close(&l->t);
}

/* ---- private directories ---------------------------------------------------------- */

/* A private directory that other users can pass through. */
bool tsys_make_base(char *base, size_t cap, const char *tag)
{
    const char *parent = reach_parent();
    snprintf(base, cap, "%s/vipl-%s.XXXXXX", parent ? parent : "/tmp", tag);
    return parent && mkdtemp(base) && chmod(base, 0755) == 0;
}

void tsys_remove_tree(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "\n  could not remove %s\n", dir);
}

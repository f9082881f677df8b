/*
 * tvipd.c - a vipd of a test's own (tvipd.h).
 */
#include "tvipd.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tlib.h"

int tvipd_start(struct tvipd *v, const char *const *extra, unsigned nofile)
{
    return tvipd_start_in(v, "/tmp", extra, nofile);
}

int tvipd_start_in(struct tvipd *v, const char *parent, const char *const *extra,
                   unsigned nofile)
{
    memset(v, 0, sizeof *v);
    const char *ctl = getenv("TL_VIPCTL");
    char exe[PATH_MAX];
    if (!ctl || strlen(ctl) + 8 >= sizeof exe)
        return -1;
    snprintf(exe, sizeof exe, "%s", ctl);
    char *slash = strrchr(exe, '/');
    strcpy(slash ? slash + 1 : exe, "vipd");
    snprintf(v->dir, sizeof v->dir, "%s/vipl-ownvipd.XXXXXX", parent);
    if (!mkdtemp(v->dir))
        return -1;
    snprintf(v->sock, sizeof v->sock, "%s/vipd.sock", v->dir);
    snprintf(v->log, sizeof v->log, "%s/vipd.log", v->dir);
    const char *old = getenv("VIPD_SOCKET");
    snprintf(v->saved, sizeof v->saved, "%s", old ? old : "");
    const char *argv[24] = {"vipd", "-f", "-n", "2", "-s", v->sock, "-l", "info"};
    int a = 8;
    for (unsigned i = 0; extra && extra[i] && a < 22; i++)
        argv[a++] = extra[i];
    argv[a] = NULL;
    v->pid = fork();
    if (v->pid == 0) {
        /* Dies with the test, stopped or not, whatever becomes of it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(v->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        if (nofile) {
            struct rlimit rl = {nofile, nofile};
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    if (v->pid < 0)
        return -1;
    setenv("VIPD_SOCKET", v->sock, 1);
    /* Waiting for ours: no other vipd may be started on its socket meanwhile. */
    const char *as = getenv("VIPD_AUTOSTART");
    char autostart[16];
    snprintf(autostart, sizeof autostart, "%s", as ? as : "");
    setenv("VIPD_AUTOSTART", "0", 1);
    int rc = -1;
    for (int i = 0; i < 300 && rc < 0; i++) {
        VIP_NIC_HANDLE nic;
        if (VipOpenNic("via0", &nic) == VIP_SUCCESS) {
            VipCloseNic(nic);
            rc = 0;
        } else {
            usleep(10000); /* waiting for the daemon to listen, bounded */
        }
    }
    if (as)
        setenv("VIPD_AUTOSTART", autostart, 1);
    else
        unsetenv("VIPD_AUTOSTART");
    if (rc < 0)
        tvipd_stop(v);
    return rc;
}

void tvipd_stop(struct tvipd *v)
{
    if (v->pid > 0) {
        kill(v->pid, SIGCONT);
        kill(v->pid, SIGKILL);
        waitpid(v->pid, NULL, 0);
        v->pid = 0;
    }
    if (v->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", v->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "\n  could not remove %s\n", v->dir);
        v->dir[0] = 0;
    }
    setenv("VIPD_SOCKET", v->saved, 1);
}

/*
 * test_vipd_stopped.c - a kernel agent that stops answering (SIGSTOP, a
 * wedged daemon) costs a program an error with a reason, never a hang.
 *
 * The test starts a vipd of its own (beside vipctl, on a socket of its
 * own), stops it, and times the calls: each control call returns
 * VIP_ERROR_RESOURCE within VIPD_CTL_TIMEOUT_MS (plus slack), and the
 * session that timed out fails at once afterwards rather than taking a
 * late reply for the next call's.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/tlib.h"

#define TIMEOUT_MS 400

struct own_vipd {
    pid_t pid;
    char dir[64], sock[96];
    char saved[512];
};

static int vipd_start(struct own_vipd *v)
{
    const char *ctl = getenv("TL_VIPCTL");
    char exe[PATH_MAX];
    if (!ctl || strlen(ctl) + 8 >= sizeof exe)
        return -1;
    snprintf(exe, sizeof exe, "%s", ctl);
    char *slash = strrchr(exe, '/');
    strcpy(slash ? slash + 1 : exe, "vipd");
    snprintf(v->dir, sizeof v->dir, "/tmp/vipl-stopped.XXXXXX");
    if (!mkdtemp(v->dir))
        return -1;
    snprintf(v->sock, sizeof v->sock, "%s/vipd.sock", v->dir);
    const char *old = getenv("VIPD_SOCKET");
    snprintf(v->saved, sizeof v->saved, "%s", old ? old : "");
    v->pid = fork();
    if (v->pid == 0) {
        /* Dies with the test, stopped or not, whatever becomes of it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl(exe, "vipd", "-f", "-n", "2", "-s", v->sock, "-l", "error", (char *)NULL);
        _exit(127);
    }
    if (v->pid < 0)
        return -1;
    setenv("VIPD_SOCKET", v->sock, 1);
    /* up when it answers (bounded) */
    for (int i = 0; i < 300; i++) {
        VIP_NIC_HANDLE nic;
        if (VipOpenNic("via0", &nic) == VIP_SUCCESS) {
            VipCloseNic(nic);
            return 0;
        }
        usleep(10000); /* waiting for the daemon to listen, bounded */
    }
    return -1;
}

static void vipd_stop_all(struct own_vipd *v)
{
    if (v->pid > 0) {
        kill(v->pid, SIGCONT);
        kill(v->pid, SIGKILL);
        waitpid(v->pid, NULL, 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", v->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "\n  could not remove %s\n", v->dir);
    setenv("VIPD_SOCKET", v->saved, 1);
    unsetenv("VIPD_CTL_TIMEOUT_MS");
}

/* A call made while vipd is stopped returns, with a reason, in time. */
#define BOUNDED(call)                                                                      \
    do {                                                                                   \
        uint64_t t0_ = tl_now_ms();                                                        \
        VIP_RETURN rc_ = (call);                                                           \
        uint64_t dt_ = tl_now_ms() - t0_;                                                  \
        CU_ASSERT_EQUAL(rc_, VIP_ERROR_RESOURCE);                                          \
        CU_ASSERT(dt_ < TIMEOUT_MS + 2000);                                                \
        if (rc_ != VIP_ERROR_RESOURCE || dt_ >= TIMEOUT_MS + 2000)                         \
            fprintf(stderr, "\n  %s: code %d after %llu ms (%s)\n", #call, (int)rc_,       \
                    (unsigned long long)dt_, vip_last_error());                            \
    } while (0)

static void test_stopped_vipd_times_out(void)
{
    struct own_vipd v = {0};
    setenv("VIPD_CTL_TIMEOUT_MS", "400", 1);
    if (vipd_start(&v) != 0) {
        CU_FAIL("could not start a vipd of the test's own");
        vipd_stop_all(&v);
        return;
    }
    VIP_NIC_HANDLE nic = NULL;
    VIP_PROTECTION_HANDLE ptag;
    CU_ASSERT_EQUAL_FATAL(VipOpenNic("via0", &nic), VIP_SUCCESS);
    kill(v.pid, SIGSTOP);
    BOUNDED(VipCreatePtag(nic, &ptag));
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "timed out"));
    /* the session is done with: the next call fails at once */
    uint64_t t0 = tl_now_ms();
    CU_ASSERT_NOT_EQUAL(VipCreatePtag(nic, &ptag), VIP_SUCCESS);
    CU_ASSERT(tl_now_ms() - t0 < TIMEOUT_MS);
    /* a new program meets the same stopped daemon */
    VIP_NIC_HANDLE nic2 = NULL;
    BOUNDED(VipOpenNic("via0", &nic2));
    kill(v.pid, SIGCONT);
    VipCloseNic(nic);
    vipd_stop_all(&v);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_stopped_vipd_times_out),
        TL_END,
    };
    return tl_main(argc, argv, "stopped vipd", tests);
}

/*
 * test_kill.c - process death: a client SIGKILLed mid-stream; vipd frees
 * what it owned, its peer sees the error, and vipd goes on serving.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tpp.h"

/* Does `vipctl vis` (column 3) or `vipctl mem` (column 3) list pid? -1 on error. */
static int listed(const char *what, pid_t pid)
{
    char *out = malloc(1 << 20);
    if (!out)
        return -1;
    int found = 0;
    if (tl_vipctl(what, out, 1 << 20) != 0) {
        free(out);
        return -1;
    }
    for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char a[64], b[64];
        unsigned p;
        if (sscanf(line, "%63s %63s %u", a, b, &p) == 3 && p == (unsigned)pid)
            found = 1;
    }
    free(out);
    return found;
}

/* Bounded poll until pid owns nothing in vipd (its session is torn down
 * when vipd notices the closed socket). */
static int gone_from_vipd(pid_t pid)
{
    for (int i = 0; i < 250; i++) {
        int v = listed("vis", pid), m = listed("mem", pid);
        if (v == 0 && m == 0)
            return 1;
        if (v < 0 || m < 0)
            return 0;
        usleep(20000);
    }
    return 0;
}

static void kill_midstream(VIP_RELIABILITY_LEVEL rel)
{
    struct tpp_cfg c;
    struct tl_child ch = {.pid = -1};
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_DESCRIPTOR *d;
    tpp_defaults(&c, rel, 1000000000u, TPP_MIXED);
    c.notify_after = 200;
    c.nrecv = 2;
    /* the child is the client and streams until killed */
    TCHK(tl_spawn(&ch, tpp_child_client, &c) == 0);
    pid_t victim = ch.pid;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    enum { K = 4 };
    TRC(tl_buf_alloc(&t, &b, 4096 + ((size_t)K << 20)), VIP_SUCCESS);
    TRC(tl_vi(&t, rel, NULL, NULL, &vi), VIP_SUCCESS);
#define RD(k) ((VIP_DESCRIPTOR *)(void *)(b.p + 512 * (k)))
#define SD ((VIP_DESCRIPTOR *)(void *)(b.p + 512 * 7))
#define BUF(k) (b.p + 4096 + ((size_t)(k) << 20))
    for (unsigned k = 0; k < K; k++) {
        tl_desc_1(RD(k), BUF(k), 1u << 20, b.mh);
        TRC(VipPostRecv(vi, RD(k), b.mh), VIP_SUCCESS);
    }
    TRC(tl_accept(&t, vi, c.disc, 20000), VIP_SUCCESS);
    /* echo server until the child has done 200 round trips, then 50 more,
     * then kill it while it streams */
    unsigned i = 0, after = 0;
    int notified = 0;
    for (;;) {
        unsigned k = i % K;
        TRC(VipRecvWait(vi, 10000, &d), VIP_SUCCESS);
        TCHK(d == RD(k));
        TCHK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
        TCHK(d->CS.Length == tpp_size(&c, i));
        TCHK(tl_verify(BUF(k), d->CS.Length, i) == -1);
        if (notified && ++after == 50)
            break;
        tl_desc_1(SD, BUF(k), d->CS.Length, b.mh);
        TRC(VipPostSend(vi, SD, b.mh), VIP_SUCCESS);
        TRC(VipSendWait(vi, 10000, &d), VIP_SUCCESS);
        TCHK((d->CS.Status & VIP_STATUS_ERROR_MASK) == 0);
        tl_desc_1(RD(k), BUF(k), 1u << 20, b.mh);
        TRC(VipPostRecv(vi, RD(k), b.mh), VIP_SUCCESS);
        if (!notified && tl_parent_take(&ch, 0) == 'n')
            notified = 1;
        i++;
    }
    /* the child waits for our echo of message i now: kill it */
    tl_child_kill(&ch);
    /* The peer (us) sees the error: our queued receives complete flushed, or
     * the VI is in the error state. Bounded. */
    int saw = 0;
    uint64_t t0 = tl_now_ms();
    while (!saw && tl_now_ms() - t0 < 10000) {
        VIP_RETURN rc = VipRecvWait(vi, 200, &d);
        if (rc == VIP_SUCCESS && (d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR))
            saw = 1;
        else if (rc == VIP_SUCCESS)
            continue; /* a receive that completed before the death */
        if (tl_vi_state(vi) == VIP_STATE_ERROR)
            saw = 1;
    }
    CU_ASSERT_TRUE(saw);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_ERROR);
    /* vipd survived, and nothing of the dead process is left */
    char out[4096];
    CU_ASSERT_EQUAL(tl_vipctl("ping", out, sizeof out), 0);
    CU_ASSERT_TRUE(gone_from_vipd(victim));
    /* our VI can be disconnected and reused */
    TRC_SOFT(VipDisconnect(vi), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_vi_state(vi), VIP_STATE_IDLE);
out:
    tl_child_kill(&ch);
    if (vi) {
        VipDisconnect(vi);
        VipDestroyVi(vi);
    }
    tl_buf_free(&b);
    tl_close(&t);
#undef RD
#undef SD
#undef BUF
}

static void test_kill_reliable_delivery(void) { kill_midstream(VIP_SERVICE_RELIABLE_DELIVERY); }
static void test_kill_unreliable(void) { kill_midstream(VIP_SERVICE_UNRELIABLE); }
static void test_kill_reliable_reception(void) { kill_midstream(VIP_SERVICE_RELIABLE_RECEPTION); }

/* A process holding many resources dies (SIGKILL, or exits without
 * cleaning up): vipd frees all of them. */
static int hoarder(void *arg)
{
    int how = *(int *)arg;
    static uint8_t mem[64][1000];
    struct tl_nic t[2];
    VIP_VI_HANDLE vi;
    VIP_CQ_HANDLE cq;
    TC_RC(tl_open(&t[0], "via0"), VIP_SUCCESS);
    TC_RC(tl_open(&t[1], "via1"), VIP_SUCCESS);
    for (int n = 0; n < 2; n++) {
        VIP_MEM_ATTRIBUTES ma = {.Ptag = t[n].ptag};
        for (int i = 0; i < 32; i++) {
            VIP_MEM_HANDLE mh;
            TC_RC(VipRegisterMem(t[n].nic, mem[n * 32 + i], 1000, &ma, &mh), VIP_SUCCESS);
        }
        TC_RC(VipCreateCQ(t[n].nic, 64, &cq), VIP_SUCCESS);
        for (int i = 0; i < 8; i++)
            TC_RC(tl_vi(&t[n], VIP_SERVICE_RELIABLE_DELIVERY, cq, i % 2 ? cq : NULL, &vi),
                  VIP_SUCCESS);
    }
    tl_child_post('r');
    int tok = tl_child_take(60000); /* 'x', or killed while waiting */
    if (how == 1 && tok == 'x')
        _exit(0); /* exit without cleaning up */
    return 1;
}

static void hoard_and_die(int how)
{
    struct tl_child ch = {.pid = -1};
    TCHK(tl_spawn(&ch, hoarder, &how) == 0);
    pid_t victim = ch.pid;
    TCHK(tl_parent_take(&ch, 20000) == 'r');
    CU_ASSERT_EQUAL(listed("vis", victim), 1);
    CU_ASSERT_EQUAL(listed("mem", victim), 1);
    if (how == 1) {
        tl_parent_post(&ch, 'x');
        TCHILD_OK(&ch, 10000);
    } else {
        tl_child_kill(&ch);
    }
    CU_ASSERT_TRUE(gone_from_vipd(victim));
    char out[4096];
    CU_ASSERT_EQUAL(tl_vipctl("ping", out, sizeof out), 0);
out:
    tl_child_kill(&ch);
}

static void test_kill_holding_resources(void) { hoard_and_die(0); }
static void test_exit_without_cleanup(void) { hoard_and_die(1); }

/* After all that, a new pair connects and ping-pongs. */
static void test_new_pair_after_kills(void)
{
    struct tpp_cfg c;
    struct tl_child ch;
    char err[512];
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_DELIVERY, 2000, TPP_MIXED);
    TCHK(tl_spawn(&ch, tpp_child_client, &c) == 0);
    if (tpp_side(&c, 1, err, sizeof err)) {
        fprintf(stderr, "\n  server: %s\n", err);
        CU_FAIL("server side");
        tl_child_kill(&ch);
    }
    TCHILD_OK(&ch, 60000);
out:;
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_kill_reliable_delivery),
        TL_TEST(test_kill_unreliable),
        TL_TEST(test_kill_reliable_reception),
        TL_TEST(test_kill_holding_resources),
        TL_TEST(test_exit_without_cleanup),
        TL_TEST(test_new_pair_after_kills),
        TL_END,
    };
    return tl_main(argc, argv, "kill", tests);
}

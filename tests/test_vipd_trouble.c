/*
 * test_vipd_trouble.c - a kernel agent in trouble costs programs an error
 * with a reason, never a hang, and the daemon itself neither spins nor
 * floods its log.
 *
 *   stopped (SIGSTOP):   every control call returns VIP_ERROR_RESOURCE
 *                        within VIPD_CTL_TIMEOUT_MS, and a session that
 *                        timed out fails at once afterwards rather than
 *                        taking a late reply for the next call's;
 *   out of descriptors:  clients beyond what vipd can hold are refused at
 *                        once, vipd stays nearly idle and says so once,
 *                        and takes clients again when some leave;
 *   too many sessions:   the one over --max-sessions is refused, naming
 *                        the limit;
 *   a trickling client:  one that sends its request a byte at a time, or
 *                        announces a long body and sends nothing, holds up
 *                        nobody else.
 * Each test starts a vipd of its own (tests/lib/tvipd.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/tvipd.h"
#include "via_abi.h"

#define TIMEOUT_MS 400

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
    struct tvipd v;
    setenv("VIPD_CTL_TIMEOUT_MS", "400", 1);
    if (tvipd_start(&v, NULL, 0) != 0) {
        CU_FAIL("could not start a vipd of the test's own");
        unsetenv("VIPD_CTL_TIMEOUT_MS");
        return;
    }
    VIP_NIC_HANDLE nic = NULL;
    VIP_PROTECTION_HANDLE ptag;
    if (VipOpenNic("via0", &nic) == VIP_SUCCESS) {
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
    } else {
        CU_FAIL("VipOpenNic on the test's vipd");
    }
    tvipd_stop(&v);
    unsetenv("VIPD_CTL_TIMEOUT_MS");
}

/* A bare connection to vipd that says nothing (it holds a descriptor). */
static int hold_one(const char *sock)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        close(s);
        s = -1;
    }
    return s;
}

/* vipd's CPU time so far (utime + stime, clock ticks). */
static long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) != 2)
        return -1;
    return ut + st;
}

static void test_out_of_descriptors(void)
{
    struct tvipd v;
    if (tl_under_valgrind())
        return;
    if (tvipd_start(&v, NULL, 48) != 0) {
        CU_FAIL("could not start a vipd of the test's own");
        return;
    }
    /* more bare clients than vipd has descriptors for */
    int held[80], nheld = 0;
    for (int i = 0; i < 80; i++)
        if ((held[nheld] = hold_one(v.sock)) >= 0)
            nheld++;
    CU_ASSERT(nheld > 48);
    long t0 = cpu_ticks(v.pid);
    /* a program now: refused at once with a reason, not left hanging */
    uint64_t start = tl_now_ms();
    VIP_NIC_HANDLE nic;
    VIP_RETURN rc = VipOpenNic("via0", &nic);
    CU_ASSERT_EQUAL(rc, VIP_ERROR_RESOURCE);
    if (rc == VIP_SUCCESS)
        VipCloseNic(nic);
    CU_ASSERT(tl_now_ms() - start < 3000);
    /* vipd does not spin while it is full: well under half a CPU over 1 s */
    usleep(1000000); /* measuring its CPU use over a second, not a race */
    long t1 = cpu_ticks(v.pid);
    long hz = sysconf(_SC_CLK_TCK);
    CU_ASSERT(t0 >= 0 && t1 >= 0 && (t1 - t0) < hz / 2);
    if (t1 - t0 >= hz / 2)
        fprintf(stderr, "\n  vipd used %ld of %ld ticks while out of descriptors\n", t1 - t0,
                hz);
    /* it said so once, not per attempt */
    struct stat st;
    CU_ASSERT_EQUAL(stat(v.log, &st), 0);
    CU_ASSERT(st.st_size < 8192);
    /* clients leave: programs are served again */
    for (int i = 0; i < nheld; i++)
        close(held[i]);
    rc = VIP_ERROR_RESOURCE;
    for (int i = 0; i < 200 && rc != VIP_SUCCESS; i++) {
        rc = VipOpenNic("via0", &nic);
        if (rc != VIP_SUCCESS)
            usleep(10000); /* vipd notices the closed clients, bounded */
    }
    CU_ASSERT_EQUAL(rc, VIP_SUCCESS);
    if (rc == VIP_SUCCESS)
        VipCloseNic(nic);
    tvipd_stop(&v);
}

static void test_session_limit(void)
{
    struct tvipd v;
    static const char *const extra[] = {"--max-sessions", "3", NULL};
    if (tvipd_start(&v, extra, 0) != 0) {
        CU_FAIL("could not start a vipd of the test's own");
        return;
    }
    VIP_NIC_HANDLE nic[4] = {NULL};
    for (int i = 0; i < 3; i++)
        TRC_SOFT(VipOpenNic("via0", &nic[i]), VIP_SUCCESS);
    TRC_SOFT(VipOpenNic("via1", &nic[3]), VIP_ERROR_RESOURCE);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "at most 3"));
    if (nic[0])
        VipCloseNic(nic[0]);
    nic[0] = NULL;
    /* one left: room for one more (vipd frees the session when it hears) */
    VIP_RETURN rc = VIP_ERROR_RESOURCE;
    for (int i = 0; i < 200 && rc != VIP_SUCCESS; i++) {
        rc = VipOpenNic("via1", &nic[3]);
        if (rc != VIP_SUCCESS)
            usleep(10000); /* vipd notices the closed session, bounded */
    }
    CU_ASSERT_EQUAL(rc, VIP_SUCCESS);
    for (int i = 0; i < 4; i++)
        if (nic[i] && (i != 3 || rc == VIP_SUCCESS))
            VipCloseNic(nic[i]);
    tvipd_stop(&v);
}

/* A client that writes a request slowly: a byte every 100 ms, then a
 * header announcing 1 MiB of body that never comes. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t tl_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static int trickler(void *arg)
{
    const char *sock = arg;
    int s = hold_one(sock);
    if (s < 0)
        return 1;
    struct via_ctl_hdr h = {.op = VIA_CTL_PING, .len = 0, .cookie = 7};
    const unsigned char *b = (const unsigned char *)&h;
    for (size_t i = 0; i < sizeof h; i++) {
        if (send(s, b + i, 1, MSG_NOSIGNAL) != 1)
            return 1;
        usleep(100000); /* the trickle itself */
    }
    struct via_ctl_reply_hdr r;
    if (recv(s, &r, sizeof r, MSG_WAITALL) != (ssize_t)sizeof r || r.status != VIP_SUCCESS)
        return 1; /* it is served in the end */
    h.len = 1u << 20;
    if (send(s, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h)
        return 1;
    tl_child_take(-1); /* holds the connection until the parent is done */
    close(s);
    return 0;
}

static void test_trickling_client(void)
{
    struct tvipd v;
    struct tl_child ch = {.pid = -1};
    if (tvipd_start(&v, NULL, 0) != 0) {
        CU_FAIL("could not start a vipd of the test's own");
        return;
    }
    if (tl_spawn(&ch, trickler, v.sock) != 0) {
        CU_FAIL("fork");
        tvipd_stop(&v);
        return;
    }
    /* for three seconds (the trickle, then the silent long body) other
     * programs open and close the NIC as fast as ever, and a ping on a
     * connection of its own is answered at once */
    uint64_t worst = 0, end = tl_now_ms() + 3000;
    unsigned n = 0, npings = 0;
    uint64_t ping_us[256];
    int ps = hold_one(v.sock);
    CU_ASSERT(ps >= 0);
    while (tl_now_ms() < end) {
        if (ps >= 0 && npings < 256) {
            struct via_ctl_hdr h = {.op = VIA_CTL_PING, .cookie = 9};
            struct via_ctl_reply_hdr r;
            uint64_t t0 = tl_now_us();
            if (send(ps, &h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h &&
                recv(ps, &r, sizeof r, MSG_WAITALL) == (ssize_t)sizeof r && r.status == 0) {
                struct via_ctl_hello_r body;
                if (r.len == sizeof body &&
                    recv(ps, &body, sizeof body, MSG_WAITALL) == (ssize_t)sizeof body)
                    ping_us[npings++] = tl_now_us() - t0;
            }
        }
        uint64_t t0 = tl_now_ms();
        VIP_NIC_HANDLE nic;
        VIP_RETURN rc = VipOpenNic("via0", &nic);
        CU_ASSERT_EQUAL(rc, VIP_SUCCESS);
        if (rc != VIP_SUCCESS)
            break;
        VipCloseNic(nic);
        uint64_t dt = tl_now_ms() - t0;
        worst = dt > worst ? dt : worst;
        n++;
    }
    CU_ASSERT(n > 10);
    if (ps >= 0)
        close(ps);
    CU_ASSERT(npings > 10);
    if (npings) {
        qsort(ping_us, npings, sizeof ping_us[0], cmp_u64);
        uint64_t med = ping_us[npings / 2];
        /* (8.3 s behind a blocking vipd) */
        CU_ASSERT(med < 100000);
        if (med >= 100000 || getenv("TL_FIGURES"))
            fprintf(stderr, "\n  ping while a client trickles: median %llu us, max %llu us over "
                            "%u pings\n",
                    (unsigned long long)med, (unsigned long long)ping_us[npings - 1], npings);
    }
    /* (behind a blocking vipd it took 1.5 s: three of the trickler's bytes;
     * the bound leaves room for a loaded 2-core machine) */
    CU_ASSERT(worst < 1000);
    if (worst >= 1000)
        fprintf(stderr, "\n  VipOpenNic took up to %llu ms while a client trickled\n",
                (unsigned long long)worst);
    tl_parent_post(&ch, 'q');
    TCHILD_OK(&ch, 5000);
    tvipd_stop(&v);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_stopped_vipd_times_out),
        TL_TEST(test_out_of_descriptors),
        TL_TEST(test_session_limit),
        TL_TEST(test_trickling_client),
        TL_END,
    };
    return tl_main(argc, argv, "vipd in trouble", tests);
}

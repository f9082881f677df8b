/*
 * test_hostile_nicpage.c - a process on a paced NIC that writes the NIC
 * page every process of that NIC maps (lanai-fw/timing/fw_sched.c) cannot throttle
 * the others.
 *
 * The attacker is a program as a user would write it: it opens via0 with
 * VIPL, finds the NIC page among its own mappings (/proc/self/maps) and
 * writes every modelled resource busy an hour ahead, over and over, while
 * a 4-byte ping-pong runs between via0 and via1 of the same vipd (S-Bus
 * profile, real time). It has no VI of its own, so no message of it could
 * ever delay the ping-pong in the model: the ping-pong must finish as if
 * it were not there (bounded generously here; when the page's times were
 * believed up to 1 s ahead, each message waited up to a second).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/tlib.h"
#include "lib/tpp.h"
#include "lib/tvipd.h"
#include "via_abi.h"

#define HOUR_NS 3600000000000ull

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The NIC page in this process's mappings (vipd's memfd "via-nic"). */
static struct via_nic_page *find_nic_page(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    void *at = NULL;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "via-nic")) {
            unsigned long lo, hi;
            if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && hi - lo >= sizeof(struct via_nic_page))
                at = (void *)lo;
            break;
        }
    if (f)
        fclose(f);
    return at;
}

/* The attacker: via0 open, no VI; the page's busy times an hour ahead
 * until the parent says 'q'. Posts 'a' once it is at work. */
static int attacker(void *arg)
{
    (void)arg;
    struct tl_nic t;
    TC_RC(tl_open(&t, "via0"), VIP_SUCCESS);
    struct via_nic_page *np = find_nic_page();
    TC_CHECK(np != NULL);
    tl_child_post('a');
    for (unsigned n = 0;; n++) {
        uint64_t far = mono_ns() + HOUR_NS;
        atomic_store(&np->lanai_busy_until, far);
        atomic_store(&np->nrecv_busy_until, far);
        atomic_store(&np->hdma_busy_until, far);
        if (n % 256 == 0 && tl_child_take(0) == 'q')
            break;
    }
    tl_close(&t);
    return 0;
}

static void test_forged_busy_times(void)
{
    struct tvipd v;
    const char *args[] = {"--profile", "sbus", NULL};
    if (tvipd_start(&v, args, 0) != 0) {
        CU_FAIL("could not start a vipd with the sbus profile");
        return;
    }
    struct tl_child atk = {.pid = -1}, cs = {.pid = -1}, cc = {.pid = -1};
    TCHK(tl_spawn(&atk, attacker, NULL) == 0);
    TCHK(tl_parent_take(&atk, 20000) == 'a');
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_DELIVERY, 300, TPP_FIXED);
    c.fixed = 4;
    c.timeout = 20000;
    snprintf(c.srv_dev, sizeof c.srv_dev, "via1");
    snprintf(c.cli_dev, sizeof c.cli_dev, "via0");
    TCHK(tl_spawn(&cs, tpp_child_server, &c) == 0);
    TCHK(tl_spawn(&cc, tpp_child_client, &c) == 0);
    uint64_t t0 = mono_ns();
    TCHILD_OK(&cc, 60000);
    TCHILD_OK(&cs, 60000);
    uint64_t took_ms = (mono_ns() - t0) / 1000000;
    /* 300 round trips of ~45 us on S-Bus, beside an attacker spinning on a
     * CPU of two: seconds at most; an attacker that could throttle us
     * through the shared page would make it about a second per message. */
    CU_ASSERT(took_ms < 30000);
    if (took_ms >= 30000)
        fprintf(stderr, "\n  300 round trips took %llu ms beside the attacker\n",
                (unsigned long long)took_ms);
    tl_parent_post(&atk, 'q');
    TCHILD_OK(&atk, 20000);
out:
    tl_child_kill(&cc);
    tl_child_kill(&cs);
    tl_child_kill(&atk);
    tvipd_stop(&v);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_forged_busy_times),
        TL_END,
    };
    return tl_main(argc, argv, "hostile NIC page", tests);
}

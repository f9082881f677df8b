/*
 * test_fw_hostile.c - a paced NIC shared by processes that do not play
 * fair (lanai-fw/fw_sched.c), no vipd needed.
 *
 * Every process on a NIC maps its NIC page read-write: the modelled
 * resources' busy times, the lock that orders claims on them, and a copy of
 * the profile live there. A process may distort its own timing, never stop
 * the others: the NIC models from its own copy of the profile, believes no
 * time from the page or from a peer's packet further than the window ahead
 * of now, and takes the lock over from a holder that keeps it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tfw.h"

#define WINDOW_NS 1000000000ull  /* fw_sched.c: FW_SCHED_AHEAD_NS */
#define HOUR_NS 3600000000000ull

static void setup_paced(void)
{
    static struct via_profile prof;
    char err[256] = "";
    if (fw_profile_load("sbus", tl_profile_dir(), &prof, err, sizeof err)) {
        fprintf(stderr, "\n  %s\n", err);
        CU_FAIL_FATAL("the sbus profile loads");
    }
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .connect = true, .prof = &prof});
}

/* Costs come from the NIC's copy: editing the shared page changes nothing. */
static void test_profile_edit_in_page(void)
{
    setup_paced();
    VIP_DESCRIPTOR *sd = at(OFF_SDESC);
    tl_desc_1(sd, F.mem + OFF_SDATA, 64, F.mh);
    struct via_db_token t = std_token(sd, F.mh);
    double bell = nic_profile(F.nic)->bell_ns, build = nic_profile(F.nic)->host_build_ns;
    F.np->prof.bell_ns *= 1e6;
    F.np->prof.host_build_ns *= 1e6;
    F.np->prof.paced = 0;
    CU_ASSERT_EQUAL(nic_profile(F.nic)->bell_ns, bell);
    CU_ASSERT_EQUAL(nic_profile(F.nic)->host_build_ns, build);
    CU_ASSERT_TRUE(nic_paced(F.nic));
    uint64_t t0 = nic_now_ns();
    uint64_t cost = nic_ring(F.a, false, &t, FW_EXT_STANDARD, 64, t0);
    CU_ASSERT(cost > 0 && cost < 1000000); /* Build + Ring of the real profile: µs */
    teardown();
}

/* Busy times written far ahead into the page bind no claim beyond the
 * window. */
static void test_busy_times_far_ahead(void)
{
    setup_paced();
    uint64_t now = nic_now_ns();
    atomic_store(&F.np->lanai_busy_until, now + HOUR_NS);
    atomic_store(&F.np->nrecv_busy_until, now + HOUR_NS);
    uint64_t s = fw_sched_send(F.nic, VI_A, now, 1000, false);
    CU_ASSERT(s <= nic_now_ns() + WINDOW_NS + 1000000); /* + the scan to its slot */
    uint64_t r = fw_sched_recv(F.nic, now, 1000);
    CU_ASSERT(r <= nic_now_ns() + 2 * WINDOW_NS);
    teardown();
}

/* A peer's packet claiming to arrive in an hour: the receiving NIC
 * schedules it within the window, and its model clock is not poisoned. */
static void test_arrival_far_ahead(void)
{
    setup_paced();
    VIP_DESCRIPTOR *rd = at(OFF_RDESC);
    tl_desc_1(rd, F.mem + OFF_RDATA, 100, F.mh);
    post_recv(F.b, rd, F.mh);
    uint8_t msg[64];
    tl_fill(msg, sizeof msg, 9);
    struct via_wire_hdr h = hdr(0, VIA_PKT_SEND);
    h.flags = VIA_PKT_FIRST | VIA_PKT_LAST;
    h.msg_seq = 1;
    h.msg_len = h.frag_len = sizeof msg;
    uint64_t now = nic_now_ns();
    h.arrive_ns = now + HOUR_NS;
    inject(0, h, msg);
    progress(F.b);
    CU_ASSERT(F.b->rx_release <= now + 2 * WINDOW_NS);
    CU_ASSERT(atomic_load(&F.np->nrecv_busy_until) <= now + 2 * WINDOW_NS);
    teardown();
}

/* The lock held by a live process that never lets go (here: pid 1): a
 * claim waits for it a bounded time, then proceeds. */
static void test_lock_held_forever(void)
{
    setup_paced();
    atomic_store(&F.np->lock, 1u);
    uint64_t t0 = nic_now_ns();
    (void)fw_sched_send(F.nic, VI_A, t0, 1000, false);
    uint64_t waited = nic_now_ns() - t0;
    CU_ASSERT(waited < 500000000ull);
    if (waited >= 500000000ull)
        fprintf(stderr, "\n  a claim waited %llu ms for a lock held by pid 1\n",
                (unsigned long long)(waited / 1000000));
    CU_ASSERT_EQUAL(atomic_load(&F.np->lock), 0u); /* taken over and released */
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_profile_edit_in_page),
        TL_TEST(test_busy_times_far_ahead),
        TL_TEST(test_arrival_far_ahead),
        TL_TEST(test_lock_held_forever),
        TL_END,
    };
    return tl_main(argc, argv, "firmware: unfair neighbours", tests);
}

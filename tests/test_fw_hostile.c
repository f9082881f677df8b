/*
 * test_fw_hostile.c - a paced NIC shared by processes that do not play
 * fair (lanai-fw/timing/fw_sched.c), no vipd needed.
 *
 * Every process on a NIC maps its NIC page read-write: the modelled
 * resources' busy times and a copy of the profile live there. A process
 * may distort its own timing, never delay another's message by more than
 * the model's worst case: the NIC models from its own copy of the profile,
 * claims without a lock, and believes a time from the page or from a
 * peer's packet only up to the end of its own claims plus one largest
 * transaction of each other VI on the NIC (fw_sched_window_ns; the VI
 * count is vipd's, in the session's own status page).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tfw.h"

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
 * window, which is the model's worst case: one largest transaction (a
 * 1 MiB send and receive) per other VI; and a forged time
 * is gone after the claim. */
static void test_busy_times_far_ahead(void)
{
    setup_paced();
    /* no VI but ours on the NIC: nothing from the page is believed past
     * our own claims; one other VI: its largest transaction */
    CU_ASSERT_EQUAL(fw_sched_window_ns(F.nic), 0);
    atomic_store(&F.st->nvis, 3); /* A, B (ours) and one of another process */
    uint64_t w = fw_sched_window_ns(F.nic);
    CU_ASSERT(w > 0 && w < 1000000000ull); /* one other VI on S-Bus: well under a second */
    uint64_t now = nic_now_ns();
    atomic_store(&F.np->lanai_busy_until, now + HOUR_NS);
    atomic_store(&F.np->nrecv_busy_until, now + HOUR_NS);
    uint64_t s = fw_sched_send(F.nic, VI_A, now, 1000, false);
    CU_ASSERT(s <= nic_now_ns() + w + 1000000); /* + the scan to its slot */
    CU_ASSERT(atomic_load(&F.np->lanai_busy_until) <= nic_now_ns() + w + 2000000);
    uint64_t r = fw_sched_recv(F.nic, now, 1000);
    CU_ASSERT(r <= nic_now_ns() + 2 * w + 2000000);
    /* vipd's VI count, less our own VIs, sizes the window: more, more */
    atomic_store(&F.st->nvis, atomic_load(&F.st->nvis) + 3);
    CU_ASSERT_EQUAL(fw_sched_window_ns(F.nic), 4 * w);
    teardown();
}

/* A process's own backlog is believed whole: claims far past the window,
 * all its own, keep their order. */
static void test_own_backlog_believed(void)
{
    setup_paced();
    atomic_store(&F.st->nvis, 3); /* one VI of another process */
    uint64_t w = fw_sched_window_ns(F.nic), now = nic_now_ns(), last = 0;
    for (int i = 0; i < 8; i++) {
        uint64_t s = fw_sched_send(F.nic, VI_A, now, w / 2, false);
        CU_ASSERT(s >= last);
        last = s + w / 2;
    }
    CU_ASSERT(last >= now + 4 * w); /* past the window, and still in order */
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
    /* our own VIs only: believed no further than our own claims and one
     * largest transaction of the peer's, plus the message's own stages */
    CU_ASSERT_EQUAL(fw_sched_window_ns(F.nic), 0);
    CU_ASSERT(F.b->resp.release <= nic_now_ns() + F.nic->vi_worst_ns + 10000000ull);
    CU_ASSERT(atomic_load(&F.np->nrecv_busy_until) <= nic_now_ns() + F.nic->vi_worst_ns);
    CU_ASSERT(F.nic->vi_worst_ns > 0 && F.nic->vi_worst_ns < 1000000000ull);
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_profile_edit_in_page),
        TL_TEST(test_busy_times_far_ahead),
        TL_TEST(test_arrival_far_ahead),
        TL_TEST(test_own_backlog_believed),
        TL_END,
    };
    return tl_main(argc, argv, "firmware: unfair neighbours", tests);
}

/*
 * test_pingpong.c - verified traffic between two processes: over 100,000
 * messages from 0 bytes to MaxTransferSize, gather/scatter, immediate data,
 * all three reliability levels, and across via0 <-> via1.
 *
 * Messages (each verified byte by byte, both directions counted):
 *   small 0..4 KiB: 70,000 RD + 20,000 UD + 10,000 RR  = 100,000
 *   64 KiB..1 MiB:  100 each level                      =     300
 *   mixed via0<->via1: 4,000; segment counts: 640; boundaries: 56; 0-byte: 400
 */
#include <stdio.h>
#include <string.h>

#include "lib/tlib.h"
#include "lib/tpp.h"

/* The parent plays one side, a child the other. */
static void run_pp(struct tpp_cfg *c, int parent_is_server)
{
    struct tl_child ch;
    char err[512];
    if (tl_spawn(&ch, parent_is_server ? tpp_child_client : tpp_child_server, c) != 0) {
        CU_FAIL("fork");
        return;
    }
    int r = tpp_side(c, parent_is_server, err, sizeof err);
    if (r) {
        fprintf(stderr, "\n  %s side (parent): %s\n", parent_is_server ? "server" : "client",
                err);
        CU_FAIL("parent side of the ping-pong failed");
        /* The child would only wait for its timeouts now. */
        if (tl_child_wait(&ch, 2000))
            fprintf(stderr, "  child: %s\n", ch.msg);
        return;
    }
    TCHILD_OK(&ch, 120000);
}

static void test_pp_small_reliable_delivery(void)
{
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_DELIVERY, 35000, TPP_SMALL);
    run_pp(&c, 1);
}

static void test_pp_small_unreliable_segments(void)
{
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_UNRELIABLE, 10000, TPP_SMALL);
    c.sseg = 3;
    c.rseg = 2;
    c.imm_every = 7;
    run_pp(&c, 1);
}

static void test_pp_small_reliable_reception_imm(void)
{
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_RECEPTION, 5000, TPP_SMALL);
    c.sseg = 2;
    c.rseg = 5;
    c.imm_every = 3;
    run_pp(&c, 1);
}

static void large(VIP_RELIABILITY_LEVEL rel)
{
    struct tpp_cfg c;
    tpp_defaults(&c, rel, 50, TPP_LARGE);
    c.sseg = 16;
    c.rseg = 7;
    c.imm_every = 5;
    c.nrecv = 2;
    run_pp(&c, 1);
}

static void test_pp_large_unreliable(void) { large(VIP_SERVICE_UNRELIABLE); }
static void test_pp_large_reliable_delivery(void) { large(VIP_SERVICE_RELIABLE_DELIVERY); }
static void test_pp_large_reliable_reception(void) { large(VIP_SERVICE_RELIABLE_RECEPTION); }

/* via1 serves, via0 requests; then the parent is the client (its request
 * may reach vipd before the server waits: order does not matter). */
static void test_pp_cross_nic(void)
{
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_DELIVERY, 1000, TPP_MIXED);
    snprintf(c.srv_dev, sizeof c.srv_dev, "via1");
    snprintf(c.cli_dev, sizeof c.cli_dev, "via0");
    c.sseg = 4;
    c.rseg = 4;
    c.imm_every = 11;
    run_pp(&c, 1);
    tpp_defaults(&c, VIP_SERVICE_UNRELIABLE, 1000, TPP_MIXED);
    snprintf(c.srv_dev, sizeof c.srv_dev, "via0");
    snprintf(c.cli_dev, sizeof c.cli_dev, "via1");
    run_pp(&c, 0);
}

/* Every gather and scatter count, sizes that do not divide evenly. */
static void test_pp_segment_counts(void)
{
    for (unsigned s = 1; s <= 16; s++) {
        struct tpp_cfg c;
        tpp_defaults(&c, s % 2 ? VIP_SERVICE_RELIABLE_DELIVERY : VIP_SERVICE_UNRELIABLE, 20,
                     TPP_FIXED);
        c.fixed = 40000 + s * 13;
        c.sseg = s;
        c.rseg = 17 - s;
        c.imm_every = 2;
        run_pp(&c, s % 2);
    }
}

/* Zero-byte messages, each with immediate data, no segments at all. */
static void test_pp_zero_length_immediate(void)
{
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_RECEPTION, 200, TPP_FIXED);
    c.fixed = 0;
    c.imm_every = 1;
    run_pp(&c, 1);
}

/* Exactly MaxTransferSize in one segment, the MTU and around it. */
static void test_pp_boundaries(void)
{
    static const uint32_t sizes[] = {1, 16383, 16384, 16385, 32768, 262144, 1u << 20};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        struct tpp_cfg c;
        tpp_defaults(&c, VIP_SERVICE_RELIABLE_DELIVERY, 4, TPP_FIXED);
        c.fixed = sizes[i];
        c.nrecv = 2;
        run_pp(&c, 1);
    }
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_pp_small_reliable_delivery),
        TL_TEST(test_pp_small_unreliable_segments),
        TL_TEST(test_pp_small_reliable_reception_imm),
        TL_TEST(test_pp_large_unreliable),
        TL_TEST(test_pp_large_reliable_delivery),
        TL_TEST(test_pp_large_reliable_reception),
        TL_TEST(test_pp_cross_nic),
        TL_TEST(test_pp_segment_counts),
        TL_TEST(test_pp_zero_length_immediate),
        TL_TEST(test_pp_boundaries),
        TL_END,
    };
    return tl_main(argc, argv, "pingpong", tests);
}

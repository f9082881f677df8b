/*
 * test_fw_cq.c - the NIC's completion queues when the host replaces their
 * ring (VipResizeCQ's NIC half, nic_cq_resize): entries queued move to the
 * new ring in their order, across the wrap of either ring; too many queued
 * refuses the switch and leaves the old ring in use; after the switch the
 * NIC writes only to the new ring; and a NIC appending from one thread
 * while a host thread takes entries and another resizes loses, doubles and
 * reorders nothing.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tfw.h"

static struct via_cq_ring *new_ring(uint32_t nslots)
{
    struct via_cq_ring *r = zalloc(64, sizeof *r + (size_t)nslots * sizeof r->e[0]);
    r->nslots = nslots;
    return r;
}

/* One completion as the NIC makes it (T6/R6): A's send or B's receive, the
 * two queues the fixture binds to F.cq. Its status goes to the fixture's
 * send or receive descriptor slot (a completion the NIC could not write
 * has no CQ entry: fw_updt). */
static void complete(bool b_recv)
{
    struct fw_vi *vi = b_recv ? F.b : F.a;
    struct fw_xdes d = {.va = (uintptr_t)(F.mem + (b_recv ? OFF_RDESC : OFF_SDESC))};
    fw_lock(&vi->lock);
    fw_updt(vi, &d, b_recv, 0, 0);
    fw_unlock(&vi->lock);
}

static bool pop(bool *b_recv)
{
    uint32_t id = 0;
    uint16_t gen = 0;
    bool recv = false;
    if (!nic_cq_pop(F.cq, &id, &gen, &recv))
        return false;
    *b_recv = recv;
    /* an entry is whole: A's are sends, B's receives, with their incarnation */
    CU_ASSERT_EQUAL(id, recv ? VI_B : VI_A);
    CU_ASSERT_EQUAL(gen, nic_vi_gen(recv ? F.b : F.a));
    return true;
}

/* Replace F.cq's ring by one of nslots (entries asked: `entries`); true if
 * the NIC switched. The fixture frees F.cq_ring at teardown. */
static bool resize(uint32_t nslots, uint32_t entries, uint32_t *queued)
{
    struct via_cq_ring *r = new_ring(nslots), *old = NULL;
    if (!nic_cq_resize(F.cq, r, entries, &old, queued)) {
        free(r);
        return false;
    }
    CU_ASSERT_PTR_EQUAL(old, F.cq_ring);
    free(old);
    F.cq_ring = r;
    return true;
}

/* Entries queued in a ring that has wrapped move in order to a larger
 * ring and then to a smaller one; the numbering (head, tail) carries on. */
static void test_resize_keeps_order(void)
{
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .connect = true, .cq = true});
    /* wrap the 4-slot ring: 3 in, 3 out, then 3 in (positions 3, 4, 5) */
    bool r;
    for (int i = 0; i < 3; i++)
        complete(i % 2);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_TRUE(pop(&r) && r == (i % 2));
    /* A A B: a pattern the order shows in */
    complete(false);
    complete(false);
    complete(true);
    CU_ASSERT_EQUAL(nic_cq_queued(F.cq), 3);
    uint32_t q = 0;
    CU_ASSERT_TRUE(resize(16, 16, &q));
    CU_ASSERT_EQUAL(q, 3);
    CU_ASSERT_EQUAL(nic_cq_slots(F.cq), 16);
    CU_ASSERT_EQUAL(atomic_load(&F.cq_ring->head), 3);
    CU_ASSERT_EQUAL(atomic_load(&F.cq_ring->tail), 6);
    /* the NIC appends behind them, in the new ring */
    for (int i = 0; i < 10; i++)
        complete(i % 3 == 0);
    CU_ASSERT_EQUAL(atomic_load(&F.cq_ring->tail), 16);
    CU_ASSERT_FALSE(nic_cq_overflowed(F.cq));
    /* another 16-slot ring, asked for exactly the 13 queued: they fit */
    CU_ASSERT_TRUE(resize(16, 13, &q));
    CU_ASSERT_EQUAL(q, 13);
    /* and down to 8 is refused while 13 are queued; the ring stays */
    struct via_cq_ring *before = F.cq_ring;
    CU_ASSERT_FALSE(resize(8, 8, &q));
    CU_ASSERT_EQUAL(q, 13);
    CU_ASSERT_PTR_EQUAL(F.cq_ring, before);
    static const bool want[13] = {0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1};
    for (int i = 0; i < 6; i++)
        CU_ASSERT_TRUE(pop(&r) && r == want[i]);
    CU_ASSERT_TRUE(resize(8, 7, &q)); /* 7 left: now it fits */
    CU_ASSERT_EQUAL(q, 7);
    for (int i = 6; i < 13; i++)
        CU_ASSERT_TRUE(pop(&r) && r == want[i]);
    CU_ASSERT_FALSE(pop(&r));
    /* 8 slots: the ninth completion overflows, overwriting nothing */
    for (int i = 0; i < 9; i++)
        complete(false);
    CU_ASSERT_TRUE(nic_cq_overflowed(F.cq));
    CU_ASSERT_EQUAL(nic_cq_queued(F.cq), 8);
    /* the overflow is catastrophic: a larger ring does not forget it */
    CU_ASSERT_TRUE(resize(32, 32, &q));
    CU_ASSERT_TRUE(nic_cq_overflowed(F.cq));
    CU_ASSERT_NOT_EQUAL(atomic_load(&F.cq_ring->overflow), 0);
    teardown();
}

/* After the switch the NIC never writes the old ring: a real message's
 * completions land in the new one, the old one stays as it was left. */
static void test_old_ring_untouched(void)
{
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .connect = true, .cq = true});
    xfer(100, 1, 1, 0, 1); /* A's send and B's receive: 2 entries */
    CU_ASSERT_EQUAL(nic_cq_queued(F.cq), 2);
    struct via_cq_ring *r = new_ring(128), *old = NULL;
    uint32_t q;
    TCHK(nic_cq_resize(F.cq, r, 128, &old, &q));
    size_t len = sizeof *old + 4 * sizeof old->e[0];
    uint8_t *copy = malloc(len);
    TCHK(copy != NULL);
    memcpy(copy, old, len);
    for (uint32_t i = 2; i < 40; i++)
        xfer(64 + i, 1, 2, (int)(i & 1), i);
    CU_ASSERT_EQUAL(memcmp(copy, old, len), 0);
    free(copy);
    free(old);
    F.cq_ring = r;
    CU_ASSERT_EQUAL(nic_cq_queued(F.cq), 78);
    CU_ASSERT_FALSE(nic_cq_overflowed(F.cq));
    for (int i = 0; i < 78; i++) {
        bool recv = false;
        CU_ASSERT_TRUE(pop(&recv));
        CU_ASSERT_EQUAL(recv, i % 2); /* per message: the send, then the receive */
    }
out:
    teardown();
}

/* ---- a NIC appending, a host taking, a host resizing, all at once ------------------ */
static struct {
    _Atomic uint64_t made, taken;
    _Atomic int stop;
    uint64_t total;
    uint32_t min_slots;
    _Atomic unsigned bad;
} S;

/* The NIC: completions alternate A-send, B-receive; it never has more
 * outstanding than the smallest ring holds, so nothing may overflow. */
static void *producer(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < S.total && !atomic_load(&S.stop); i++) {
        while (atomic_load(&S.made) - atomic_load(&S.taken) >= S.min_slots &&
               !atomic_load(&S.stop))
            sched_yield();
        complete(i & 1);
        atomic_store(&S.made, i + 1);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    uint64_t n = 0;
    while (n < S.total && !atomic_load(&S.stop)) {
        uint32_t id;
        uint16_t gen;
        bool recv;
        if (!nic_cq_pop(F.cq, &id, &gen, &recv)) {
            sched_yield();
            continue;
        }
        if (recv != (n & 1) || id != (recv ? VI_B : VI_A)) {
            atomic_fetch_add(&S.bad, 1);
            atomic_store(&S.stop, 1);
        }
        atomic_store(&S.taken, ++n);
    }
    return NULL;
}

static void test_resize_while_busy(void)
{
    setup_opts(&(struct opts){.rel = VIP_SERVICE_UNRELIABLE, .connect = true, .cq = true});
    memset(&S, 0, sizeof S);
    S.total = tl_count(200000, 2000000);
    S.min_slots = 16;
    uint32_t q;
    TCHK(resize(16, 16, &q));
    pthread_t p, c;
    TCHK(pthread_create(&p, NULL, producer, NULL) == 0);
    if (pthread_create(&c, NULL, consumer, NULL) != 0) {
        atomic_store(&S.stop, 1);
        pthread_join(p, NULL);
        CU_FAIL("consumer thread");
        goto out;
    }
    static const uint32_t sizes[] = {16, 4096, 32, 1024, 64, 16, 65536, 128};
    unsigned done = 0, refused = 0;
    for (unsigned i = 0; atomic_load(&S.taken) < S.total && !atomic_load(&S.stop); i++) {
        uint32_t n = sizes[i % (sizeof sizes / sizeof sizes[0])];
        if (resize(n, n, &q))
            done++;
        else
            refused++; /* never: at most min_slots are outstanding */
        if (i % 64 == 63)
            sched_yield();
    }
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    CU_ASSERT_EQUAL(atomic_load(&S.bad), 0);
    CU_ASSERT_EQUAL(atomic_load(&S.taken), S.total);
    CU_ASSERT_EQUAL(refused, 0);
    CU_ASSERT(done > 10);
    CU_ASSERT_FALSE(nic_cq_overflowed(F.cq));
    CU_ASSERT_EQUAL(nic_cq_queued(F.cq), 0);
out:
    teardown();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_resize_keeps_order),
        TL_TEST(test_old_ring_untouched),
        TL_TEST(test_resize_while_busy),
        TL_END,
    };
    return tl_main(argc, argv, "fw_cq", tests);
}

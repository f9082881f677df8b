/*
 * test_fw_lock.c - the VI lock (fw_lock.h): a thread that takes it often
 * enough owns it and enters without a locked instruction; another thread
 * revokes that and they exclude each other again, whichever way each
 * entered; a revoker waits for an owner that is in; a trylock leaves an owner that is in; a second lock taken while
 * one is held by bias goes by the real lock.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

#include "lib/tfw.h"

static struct fw_lock L, M;

/* Take l n times in a row on this thread. */
static void take_n(struct fw_lock *l, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        fw_lock(l);
        fw_unlock(l);
    }
}

/* Locks are biased in this process (else a test says so and checks
 * nothing more). */
static bool biasing(void)
{
    fw_asym_init();
    if (!fw_lock_biasing())
        printf("\n  no membarrier here (or ThreadSanitizer): nothing to check\n");
    return fw_lock_biasing();
}

static bool biased_to_me(const struct fw_lock *l)
{
    return fw_lock_self && atomic_load(&l->owner) == fw_lock_self;
}

static void test_bias_granted(void)
{
    fw_asym_init();
    if (!fw_lock_biasing()) {
        printf("\n  no membarrier here (or ThreadSanitizer): no lock is biased\n");
        take_n(&L, 2 * FW_LOCK_BIAS_AFTER);
        CU_ASSERT_PTR_NULL(atomic_load(&L.owner));
        return;
    }
    L = (struct fw_lock){0};
    take_n(&L, FW_LOCK_BIAS_AFTER - 2);
    CU_ASSERT_FALSE(biased_to_me(&L));
    take_n(&L, 2);
    CU_ASSERT_TRUE(biased_to_me(&L));
    /* entered by the bias: the real lock stays free */
    fw_lock(&L);
    CU_ASSERT_EQUAL(atomic_load(&L.held), 0);
    CU_ASSERT_PTR_EQUAL(atomic_load(&fw_lock_self->in), &L);
    fw_unlock(&L);
    CU_ASSERT_PTR_NULL(atomic_load(&fw_lock_self->in));
}

/* Two threads in bursts: each burst is long enough to bias the lock to
 * its thread, and the other thread's next burst revokes it. Inside, a
 * plain counter and an occupancy word: any overlap shows. */
#define BURSTS 3000u
static struct {
    unsigned long count;   /* plain: only the lock protects it */
    _Atomic int inside;
    _Atomic unsigned overlaps;
    _Atomic unsigned bursts_biased;
} S;

static void *burster(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (unsigned b = 0; b < BURSTS; b++) {
        seed = seed * 1103515245u + 12345u;
        unsigned n = 1 + (seed >> 16) % (2 * FW_LOCK_BIAS_AFTER);
        bool was = false;
        for (unsigned i = 0; i < n; i++) {
            fw_lock(&L);
            if (atomic_fetch_add(&S.inside, 1) != 0)
                atomic_fetch_add(&S.overlaps, 1);
            was |= biased_to_me(&L);
            unsigned long c = S.count;
            for (volatile int k = 0; k < 300; k++)
                ;
            S.count = c + 1;
            atomic_fetch_sub(&S.inside, 1);
            fw_unlock(&L);
        }
        if (was)
            atomic_fetch_add(&S.bursts_biased, 1);
        if (b % 64 == 63)
            sched_yield();
    }
    return NULL;
}

static void test_exclusion_across_revokes(void)
{
    fw_asym_init();
    L = (struct fw_lock){0};
    S.count = 0;
    atomic_store(&S.overlaps, 0);
    atomic_store(&S.bursts_biased, 0);
    pthread_t t[2];
    unsigned long want = 0;
    for (unsigned i = 0; i < 2; i++) {
        unsigned seed = 17u + i;
        for (unsigned b = 0; b < BURSTS; b++) {
            seed = seed * 1103515245u + 12345u;
            want += 1 + (seed >> 16) % (2 * FW_LOCK_BIAS_AFTER);
        }
        CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, burster, (void *)(uintptr_t)(17u + i)),
                              0);
    }
    for (unsigned i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(atomic_load(&S.overlaps), 0);
    CU_ASSERT_EQUAL(S.count, want);
    if (fw_lock_biasing())
        CU_ASSERT(atomic_load(&S.bursts_biased) > 0); /* the bias was used, and revoked */
}

/* The owner is in: another thread's trylock fails and leaves the bias;
 * once the owner is out, the trylock revokes it and gets the lock. */
static _Atomic int owner_step, other_step;
static void *owner_thread(void *arg)
{
    (void)arg;
    take_n(&L, FW_LOCK_BIAS_AFTER);
    fw_lock(&L);
    atomic_store(&owner_step, 1);
    while (atomic_load(&other_step) < 1)
        sched_yield();
    fw_unlock(&L);
    atomic_store(&owner_step, 2);
    while (atomic_load(&other_step) < 2)
        sched_yield();
    /* revoked: in by the real lock now */
    fw_lock(&L);
    atomic_store(&owner_step, atomic_load(&L.held) == 1 ? 3 : -1);
    fw_unlock(&L);
    return NULL;
}

static void test_trylock_leaves_owner_in(void)
{
    if (!biasing())
        return;
    L = (struct fw_lock){0};
    atomic_store(&owner_step, 0);
    atomic_store(&other_step, 0);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, owner_thread, NULL), 0);
    while (atomic_load(&owner_step) < 1)
        sched_yield();
    CU_ASSERT_FALSE(fw_trylock(&L));
    CU_ASSERT_PTR_NOT_NULL(atomic_load(&L.owner));
    atomic_store(&other_step, 1);
    while (atomic_load(&owner_step) < 2)
        sched_yield();
    CU_ASSERT_TRUE(fw_trylock(&L));
    CU_ASSERT_PTR_NULL(atomic_load(&L.owner));
    fw_unlock(&L);
    atomic_store(&other_step, 2);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(atomic_load(&owner_step), 3);
}

/* A revoker waits while the owner is in: the owner enters by its bias
 * and stays; another thread's fw_lock clears the bias (seen from here)
 * and must not get in before the owner leaves. (Watched for 50 ms: a
 * revoker that did not wait gets in within microseconds.) */
static _Atomic int revoker_in;
static void *revoker_thread(void *arg)
{
    (void)arg;
    fw_lock(&L);
    atomic_store(&revoker_in, 1);
    fw_unlock(&L);
    return NULL;
}

static void test_revoker_waits_for_owner(void)
{
    if (!biasing())
        return;
    L = (struct fw_lock){0};
    atomic_store(&revoker_in, 0);
    take_n(&L, FW_LOCK_BIAS_AFTER);
    CU_ASSERT_TRUE_FATAL(biased_to_me(&L));
    fw_lock(&L); /* in, by the bias */
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, revoker_thread, NULL), 0);
    while (atomic_load(&L.owner))
        sched_yield();
    uint64_t until = tl_now_ms() + 50;
    while (tl_now_ms() < until && !atomic_load(&revoker_in))
        sched_yield();
    CU_ASSERT_EQUAL(atomic_load(&revoker_in), 0);
    fw_unlock(&L);
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(atomic_load(&revoker_in), 1);
}

/* Holding L by the bias, M (biased to us too) goes by the real lock, and
 * `in` keeps naming L until L is let go. */
static void test_second_lock_by_real_lock(void)
{
    if (!biasing())
        return;
    L = (struct fw_lock){0};
    M = (struct fw_lock){0};
    take_n(&L, FW_LOCK_BIAS_AFTER);
    take_n(&M, FW_LOCK_BIAS_AFTER);
    CU_ASSERT_TRUE(biased_to_me(&L) && biased_to_me(&M));
    fw_lock(&L);
    fw_lock(&M);
    CU_ASSERT_EQUAL(atomic_load(&M.held), 1);
    CU_ASSERT_PTR_EQUAL(atomic_load(&fw_lock_self->in), &L);
    fw_unlock(&M);
    CU_ASSERT_EQUAL(atomic_load(&M.held), 0);
    CU_ASSERT_PTR_EQUAL(atomic_load(&fw_lock_self->in), &L);
    fw_unlock(&L);
    CU_ASSERT_PTR_NULL(atomic_load(&fw_lock_self->in));
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_bias_granted),
        TL_TEST(test_exclusion_across_revokes),
        TL_TEST(test_trylock_leaves_owner_in),
        TL_TEST(test_revoker_waits_for_owner),
        TL_TEST(test_second_lock_by_real_lock),
        TL_END,
    };
    return tl_main(argc, argv, "fw_lock", tests);
}

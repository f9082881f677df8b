/*
 * test_conf_mem.c - VIPL conformance, chapter "memory": VipRegisterMem,
 * VipDeregisterMem, VipQueryMem, VipSetMemAttributes; every documented
 * error return, the limits VipQueryNic reports, and what the NIC does with
 * memory whose registration changed under a posted descriptor.
 *
 * Chapter memory: also covered by test_basic.c: registering heap, static
 * and stack memory at any alignment, unmapped memory, a zero or wrapping
 * length, NULL arguments, foreign/garbage/NULL ptags, deregistering twice,
 * handles of another session, the RDMA enables as recorded; by
 * test_errors.c: a segment beyond its registration, a stale or foreign
 * handle, a region of another ptag (PROTECTION_ERROR).
 * Vague points: spec-notes/conformance.md.
 */
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lib/tconf.h"

static uint8_t area[64 * 1024];

static VIP_RETURN reg(struct tl_nic *t, void *p, VIP_ULONG len, VIP_PROTECTION_HANDLE ptag,
                      VIP_BOOLEAN rdw, VIP_BOOLEAN rdr, VIP_MEM_HANDLE *mh)
{
    VIP_MEM_ATTRIBUTES ma = {.Ptag = ptag, .EnableRdmaWrite = rdw, .EnableRdmaRead = rdr};
    return VipRegisterMem(t->nic, p, len, &ma, mh);
}

/* ---- limits -------------------------------------------------------------------- */

static void test_register_limits(void)
{
    struct tl_nic t = {0};
    VIP_MEM_HANDLE mh, *h = NULL;
    unsigned n = 0;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    /* more than MaxRegisterBytes: a resource limit, not a bad argument */
    TERR(reg(&t, area, t.attr.MaxRegisterBytes + 1, t.ptag, 0, 0, &mh), VIP_ERROR_RESOURCE);
    /* MaxRegisterRegions registrations per NIC handle, then no more */
    h = calloc(t.attr.MaxRegisterRegions, sizeof *h);
    TCHK(h != NULL);
    for (; n < t.attr.MaxRegisterRegions; n++)
        TRC(reg(&t, area + n % sizeof area, 1, t.ptag, 0, 0, &h[n]), VIP_SUCCESS);
    TERR(reg(&t, area, 1, t.ptag, 0, 0, &mh), VIP_ERROR_RESOURCE);
    n--;
    TRC(VipDeregisterMem(t.nic, area + n % sizeof area, h[n]), VIP_SUCCESS);
    TRC(reg(&t, area, 1, t.ptag, 0, 0, &h[n]), VIP_SUCCESS);
    TRC(VipDeregisterMem(t.nic, area, h[n]), VIP_SUCCESS);
out:
    while (h && n)
        n--, VipDeregisterMem(t.nic, area + n % sizeof area, h[n]);
    free(h);
    tl_close(&t);
}

/* ---- the registration cache (vipl_rcache.c) ------------------------------------------ */

/* A region deregistered and registered again with the same attributes is
 * reopened (its handle again) and works; other rights get a registration
 * of their own; a deregistered handle is refused everywhere meanwhile;
 * what the cache keeps is no reason to refuse VipDestroyPtag. */
static void test_registration_cache(void)
{
    struct tl_nic t = {0};
    VIP_MEM_HANDLE a, b, c;
    VIP_MEM_ATTRIBUTES ma;
    VIP_PROTECTION_HANDLE p2 = NULL;
    const char *rc = getenv("VIP_RCACHE");
    bool on = !(rc && !strcmp(rc, "0"));
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(reg(&t, area, 4096, t.ptag, 0, 0, &a), VIP_SUCCESS);
    TRC(VipDeregisterMem(t.nic, area, a), VIP_SUCCESS);
    TERR(VipQueryMem(t.nic, area, a, &ma), VIP_INVALID_PARAMETER);
    TERR(VipDeregisterMem(t.nic, area, a), VIP_INVALID_PARAMETER);
    TRC(reg(&t, area, 4096, t.ptag, 0, 0, &b), VIP_SUCCESS);
    if (on)
        CU_ASSERT_EQUAL(b, a); /* reopened, no round trip to vipd */
    TRC_SOFT(VipQueryMem(t.nic, area + 4095, b, &ma), VIP_SUCCESS);
    TRC(VipDeregisterMem(t.nic, area, b), VIP_SUCCESS);
    TRC(reg(&t, area, 4096, t.ptag, VIP_TRUE, 0, &c), VIP_SUCCESS); /* RDMA write: not it */
    CU_ASSERT_NOT_EQUAL(c, a);
    TRC_SOFT(VipQueryMem(t.nic, area, c, &ma), VIP_SUCCESS);
    CU_ASSERT_TRUE(ma.EnableRdmaWrite);
    TRC(VipDeregisterMem(t.nic, area, c), VIP_SUCCESS);
    TRC(VipCreatePtag(t.nic, &p2), VIP_SUCCESS);
    TRC(reg(&t, area, 4096, p2, 0, 0, &c), VIP_SUCCESS);
    TRC(VipDeregisterMem(t.nic, area, c), VIP_SUCCESS);
    TRC(VipDestroyPtag(t.nic, p2), VIP_SUCCESS);
    /* a region larger than the cache keeps (256 MiB) goes back to vipd at
     * once: registered again, it is a registration of its own */
    size_t big = (256u << 20) + 4096u;
    void *m = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TCHK(m != MAP_FAILED);
    TRC(reg(&t, m, big, t.ptag, 0, 0, &a), VIP_SUCCESS);
    TRC(VipDeregisterMem(t.nic, m, a), VIP_SUCCESS);
    TRC(reg(&t, m, big, t.ptag, 0, 0, &b), VIP_SUCCESS);
    CU_ASSERT_NOT_EQUAL(b, a);
    TRC(VipDeregisterMem(t.nic, m, b), VIP_SUCCESS);
    munmap(m, big);
out:
    tl_close(&t);
}

/* ---- VipDeregisterMem, VipQueryMem ------------------------------------------------------ */

static void test_deregister_errors(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_MEM_HANDLE mh = 0, uh = 0;
    VIP_MEM_ATTRIBUTES ma;
    uint32_t garbage[32] = {0x12345678u};
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_open(&u, "via0"), VIP_SUCCESS);
    TRC(reg(&t, area + 100, 1000, t.ptag, 0, 0, &mh), VIP_SUCCESS);
    /* handles are per NIC handle: a first registration in u would have
     * the same number as mh */
    VIP_MEM_HANDLE dummy;
    TRC(reg(&u, area, 1, u.ptag, 0, 0, &dummy), VIP_SUCCESS);
    /* the address must be the one registered, not any inside the region */
    TERR(VipDeregisterMem(t.nic, area + 101, mh), VIP_INVALID_PARAMETER);
    TERR(VipDeregisterMem(t.nic, area, mh), VIP_INVALID_PARAMETER);
    TERR(VipDeregisterMem(t.nic, area + 100, 0x7fff1234u), VIP_INVALID_PARAMETER);
    TERR(VipDeregisterMem(t.nic, area + 100, 0), VIP_INVALID_PARAMETER);
    TERR(VipDeregisterMem(NULL, area + 100, mh), VIP_INVALID_PARAMETER);
    TERR(VipDeregisterMem((VIP_NIC_HANDLE)garbage, area + 100, mh), VIP_INVALID_PARAMETER);
    /* a handle of another NIC handle (session), even of the same process */
    TRC(reg(&u, area + 100, 1000, u.ptag, 0, 0, &uh), VIP_SUCCESS);
    TERR(VipDeregisterMem(t.nic, area + 100, uh), VIP_INVALID_PARAMETER);
    TERR(VipDeregisterMem(u.nic, area + 100, mh), VIP_INVALID_PARAMETER);
    /* the refused calls left both registered */
    TRC_SOFT(VipQueryMem(t.nic, area + 500, mh, &ma), VIP_SUCCESS);
    TRC_SOFT(VipQueryMem(u.nic, area + 500, uh, &ma), VIP_SUCCESS);
    TRC_SOFT(VipDeregisterMem(u.nic, area + 100, uh), VIP_SUCCESS);
    TRC_SOFT(VipDeregisterMem(t.nic, area + 100, mh), VIP_SUCCESS);
    TERR(VipDeregisterMem(t.nic, area + 100, mh), VIP_INVALID_PARAMETER);
out:
    tl_close(&u);
    tl_close(&t);
}

static void test_query(void)
{
    struct tl_nic t = {0};
    VIP_PROTECTION_HANDLE p2 = NULL;
    VIP_MEM_HANDLE a = 0, b = 0;
    VIP_MEM_ATTRIBUTES ma;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(VipCreatePtag(t.nic, &p2), VIP_SUCCESS);
    /* the same bytes under two ptags: two handles, each with its attributes */
    TRC(reg(&t, area, 4096, t.ptag, VIP_TRUE, VIP_FALSE, &a), VIP_SUCCESS);
    TRC(reg(&t, area + 2048, 4096, p2, VIP_FALSE, VIP_TRUE, &b), VIP_SUCCESS);
    CU_ASSERT_NOT_EQUAL(a, b);
    memset(&ma, 0x55, sizeof ma);
    TRC_SOFT(VipQueryMem(t.nic, area + 3000, a, &ma), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ma.Ptag, t.ptag);
    CU_ASSERT_TRUE(ma.EnableRdmaWrite);
    CU_ASSERT_FALSE(ma.EnableRdmaRead);
    memset(&ma, 0x55, sizeof ma);
    TRC_SOFT(VipQueryMem(t.nic, area + 3000, b, &ma), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ma.Ptag, p2);
    CU_ASSERT_FALSE(ma.EnableRdmaWrite);
    CU_ASSERT_TRUE(ma.EnableRdmaRead);
    /* an address the handle does not cover */
    TERR(VipQueryMem(t.nic, area + 2047, b, &ma), VIP_INVALID_PARAMETER);
    TERR(VipQueryMem(t.nic, area + 4096, a, &ma), VIP_INVALID_PARAMETER);
    TERR(VipQueryMem(t.nic, area, a, NULL), VIP_INVALID_PARAMETER);
    TERR(VipQueryMem(NULL, area, a, &ma), VIP_INVALID_PARAMETER);
    TERR(VipQueryMem(t.nic, area, 0, &ma), VIP_INVALID_PARAMETER);
    /* deregistering one leaves the other */
    TRC_SOFT(VipDeregisterMem(t.nic, area, a), VIP_SUCCESS);
    TERR(VipQueryMem(t.nic, area + 3000, a, &ma), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipQueryMem(t.nic, area + 3000, b, &ma), VIP_SUCCESS);
    TRC_SOFT(VipDeregisterMem(t.nic, area + 2048, b), VIP_SUCCESS);
    /* a ptag that registrations used can go once they are gone */
    TRC_SOFT(VipDestroyPtag(t.nic, p2), VIP_SUCCESS);
out:
    tl_close(&t);
}

/* ---- VipSetMemAttributes ------------------------------------------------------------------ */

/* Spec behaviour (the call is being reworked elsewhere): the handle stays
 * valid, the attributes change, and every bad argument is refused. */
static void test_set_attributes(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_PROTECTION_HANDLE p2 = NULL;
    VIP_MEM_HANDLE mh = 0;
    VIP_MEM_ATTRIBUTES ma;
    uint32_t garbage[32] = {0x50544731u, 77};
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_open(&u, "via0"), VIP_SUCCESS);
    TRC(VipCreatePtag(t.nic, &p2), VIP_SUCCESS);
    TRC(reg(&t, area, 8192, t.ptag, 0, 0, &mh), VIP_SUCCESS);
    VIP_MEM_HANDLE dummy;
    TRC(reg(&u, area + 50000, 1, u.ptag, 0, 0, &dummy), VIP_SUCCESS); /* not (area, mh) */
    ma = (VIP_MEM_ATTRIBUTES){.Ptag = p2, .EnableRdmaWrite = VIP_TRUE, .EnableRdmaRead = VIP_TRUE};
    TRC(VipSetMemAttributes(t.nic, area, mh, &ma), VIP_SUCCESS);
    memset(&ma, 0, sizeof ma);
    TRC(VipQueryMem(t.nic, area + 8191, mh, &ma), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ma.Ptag, p2);
    CU_ASSERT_TRUE(ma.EnableRdmaWrite);
    CU_ASSERT_TRUE(ma.EnableRdmaRead);
    /* the ptag it left can go; the one it has now cannot */
    TERR(VipDestroyPtag(t.nic, p2), VIP_ERROR_RESOURCE);
    ma = (VIP_MEM_ATTRIBUTES){.Ptag = u.ptag};
    TERR(VipSetMemAttributes(t.nic, area, mh, &ma), VIP_INVALID_PTAG);
    ma.Ptag = (VIP_PROTECTION_HANDLE)garbage;
    TERR(VipSetMemAttributes(t.nic, area, mh, &ma), VIP_INVALID_PTAG);
    ma.Ptag = NULL;
    TERR(VipSetMemAttributes(t.nic, area, mh, &ma), VIP_INVALID_PTAG);
    ma.Ptag = t.ptag;
    TERR(VipSetMemAttributes(t.nic, area, mh, NULL), VIP_INVALID_PARAMETER);
    TERR(VipSetMemAttributes(NULL, area, mh, &ma), VIP_INVALID_PARAMETER);
    TERR(VipSetMemAttributes(t.nic, area, 0x7fff1234u, &ma), VIP_INVALID_PARAMETER);
    TERR(VipSetMemAttributes(t.nic, area + 1, mh, &ma), VIP_INVALID_PARAMETER);
    ma.Ptag = u.ptag;
    TERR(VipSetMemAttributes(u.nic, area, mh, &ma), VIP_INVALID_PARAMETER);
    /* the refusals changed nothing */
    TRC(VipQueryMem(t.nic, area, mh, &ma), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ma.Ptag, p2);
    CU_ASSERT_TRUE(ma.EnableRdmaWrite);
    ma = (VIP_MEM_ATTRIBUTES){.Ptag = t.ptag};
    TRC(VipSetMemAttributes(t.nic, area, mh, &ma), VIP_SUCCESS);
    TRC_SOFT(VipDestroyPtag(t.nic, p2), VIP_SUCCESS);
    TRC_SOFT(VipDeregisterMem(t.nic, area, mh), VIP_SUCCESS);
out:
    tl_close(&u);
    tl_close(&t);
}

/* ---- what the NIC makes of it ------------------------------------------------------------- */

/* A registration changed after a descriptor naming it was posted: the NIC
 * checks the TPT when it moves the data, so a receive into memory
 * deregistered meanwhile, or now under another ptag, completes with a
 * protection error (on an unreliable VI, that message only). */
static void changed_under_receive(int deregister)
{
    struct tc_pair p;
    VIP_MEM_HANDLE mh = 0;
    VIP_PROTECTION_HANDLE p2 = NULL;
    uint8_t *data = NULL;
    if (tc_pair_open(&p, "via0", "via1") || tc_pair_vis(&p, VIP_SERVICE_UNRELIABLE))
        goto out;
    struct tc_end *rx = &p.e[1];
    data = aligned_alloc(4096, 8192);
    TCHK(data != NULL);
    memset(data, 0, 8192);
    TRC(reg(&rx->t, data, 8192, rx->t.ptag, 0, 0, &mh), VIP_SUCCESS);
    /* the receive: descriptor in the end's buffer, data in the other region */
    VIP_DESCRIPTOR *rd = tc_desc(rx, 0);
    tl_desc_1(rd, data, 8192, mh);
    TRC(VipPostRecv(rx->vi, rd, rx->b.mh), VIP_SUCCESS);
    TRC(tc_post_recv(rx, 1, 8192), VIP_SUCCESS);
    if (tc_pair_connect(&p))
        goto out;
    if (deregister) {
        TRC(VipDeregisterMem(rx->t.nic, data, mh), VIP_SUCCESS);
        mh = 0;
    } else {
        TRC(VipCreatePtag(rx->t.nic, &p2), VIP_SUCCESS);
        VIP_MEM_ATTRIBUTES ma = {.Ptag = p2};
        TRC(VipSetMemAttributes(rx->t.nic, data, mh, &ma), VIP_SUCCESS);
    }
    TRC(tc_post_send(&p.e[0], 2, 100, 1), VIP_SUCCESS);
    TRC(tc_post_send(&p.e[0], 3, 100, 2), VIP_SUCCESS);
    VIP_DESCRIPTOR *d = tc_wait(rx->vi, 1, 5000);
    TCHK(d == rd);
    CU_ASSERT_EQUAL(rd->CS.Status & VIP_STATUS_ERROR_MASK, VIP_STATUS_PROTECTION_ERROR);
    CU_ASSERT(rd->CS.Status & VIP_STATUS_DONE);
    unsigned written = 0; /* nothing of the message reached the region */
    for (unsigned i = 0; i < 100; i++)
        written += data[i] != 0;
    CU_ASSERT_EQUAL(written, 0);
    /* the next message goes on */
    d = tc_wait(rx->vi, 1, 5000);
    TCHK(d == tc_desc(rx, 1));
    CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    CU_ASSERT_EQUAL(tl_verify(tc_data(rx, 1), 100, 2), -1);
    CU_ASSERT_EQUAL(tl_vi_state(rx->vi), VIP_STATE_CONNECTED);
out:
    tc_pair_close(&p);
    free(data); /* the close deregistered it */
}

static void test_deregistered_under_receive(void)
{
    changed_under_receive(1);
}

static void test_ptag_changed_under_receive(void)
{
    changed_under_receive(0);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_register_limits),
        TL_TEST(test_deregister_errors),
        TL_TEST(test_registration_cache),
        TL_TEST(test_query),
        TL_TEST(test_set_attributes),
        TL_TEST(test_deregistered_under_receive),
        TL_TEST(test_ptag_changed_under_receive),
        TL_END,
    };
    return tl_main(argc, argv, "conf_mem", tests);
}

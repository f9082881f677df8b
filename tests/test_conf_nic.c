/*
 * test_conf_nic.c - VIPL conformance, chapter "NIC": VipOpenNic,
 * VipCloseNic, VipQueryNic, VipCreatePtag, VipDestroyPtag; every documented
 * error return, and each limit VipQueryNic reports is the one enforced.
 *
 * Chapter NIC: also covered by test_basic.c: the device names VipOpenNic
 * accepts (via0, /dev/via0, /dev/via_lo; /dev/via_ethN in test_hostdev.c),
 * two sessions of one process, the attribute values of VipQueryNic, NULL
 * arguments to VipQueryNic and VipCreatePtag, foreign/garbage/NULL ptags
 * to VipDestroyPtag, closing a NIC that still has a VI.
 * Vague points: spec-notes/conformance.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tconf.h"

/* ---- VipOpenNic ----------------------------------------------------------------- */

static void test_open_errors(void)
{
    VIP_NIC_HANDLE h = NULL;
    /* names that are not a NIC of this provider: VIP_INVALID_PARAMETER */
    static const char *const bad[] = {"eth0", "via", "via0x", "via-1", "via8", "via99999999999",
                                      "/dev/", "/dev/via_eth", "via_lo0"};
    for (unsigned i = 0; i < sizeof bad / sizeof *bad; i++)
        TERR(VipOpenNic(bad[i], &h), VIP_INVALID_PARAMETER);
    /* a NIC index this vipd does not serve (run_tests.sh starts 6) */
    TERR(VipOpenNic("via7", &h), VIP_INVALID_PARAMETER);
    TERR(VipOpenNic("via0", NULL), VIP_INVALID_PARAMETER);
    /* no name: the default NIC, via0 */
    VIP_NIC_ATTRIBUTES a;
    TRC(VipOpenNic("", &h), VIP_SUCCESS);
    TRC_SOFT(VipQueryNic(h, &a), VIP_SUCCESS);
    CU_ASSERT_EQUAL(a.LocalNicAddress[5], 0);
    TRC_SOFT(VipCloseNic(h), VIP_SUCCESS);
    TRC(VipOpenNic(NULL, &h), VIP_SUCCESS);
    TRC_SOFT(VipCloseNic(h), VIP_SUCCESS);
out:;
}

/* Every NIC of the vipd at once, from one process: distinct handles and
 * addresses on one host. */
static void test_open_all_nics(void)
{
    enum { N = 6 };
    VIP_NIC_HANDLE h[N] = {0};
    VIP_NIC_ATTRIBUTES a[N];
    for (unsigned i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "via%u", i);
        TRC(VipOpenNic(name, &h[i]), VIP_SUCCESS);
        TRC(VipQueryNic(h[i], &a[i]), VIP_SUCCESS);
        CU_ASSERT_EQUAL(a[i].NicAddressLen, 6);
        CU_ASSERT_EQUAL(a[i].LocalNicAddress[5], i);
        CU_ASSERT_EQUAL(memcmp(a[i].LocalNicAddress, a[0].LocalNicAddress, 4), 0);
        for (unsigned k = 0; k < i; k++)
            CU_ASSERT_PTR_NOT_EQUAL(h[i], h[k]);
    }
out:
    for (unsigned i = 0; i < N; i++)
        if (h[i])
            TRC_SOFT(VipCloseNic(h[i]), VIP_SUCCESS);
}

/* ---- VipCloseNic ---------------------------------------------------------------------- */

static int vipctl_has(const char *what, const char *key)
{
    char *out = malloc(1 << 20);
    int found = out && tl_vipctl(what, out, 1 << 20) == 0 && strstr(out, key) != NULL;
    free(out);
    return found;
}

/* Closing frees what the session still holds (ptags, registrations), as a
 * process exit does; a NIC that still has a VI or a CQ is not closed. */
static void test_close(void)
{
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_CQ_HANDLE cq = NULL;
    uint32_t garbage[32] = {0x4e494330u};
    char key[64];
    TERR(VipCloseNic(NULL), VIP_INVALID_PARAMETER);
    TERR(VipCloseNic((VIP_NIC_HANDLE)garbage), VIP_INVALID_PARAMETER);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &b, 10000), VIP_SUCCESS);
    b.nic = NULL; /* the close below frees it */
    VIP_PROTECTION_HANDLE p2;
    TRC(VipCreatePtag(t.nic, &p2), VIP_SUCCESS);
    snprintf(key, sizeof key, "0x%08x %8u", b.mh, (unsigned)getpid());
    CU_ASSERT_TRUE(vipctl_has("mem", key));
    /* a VI, then a CQ, keeps the NIC open; it still works afterwards */
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TERR(VipCloseNic(t.nic), VIP_INVALID_STATE);
    TRC(VipDestroyVi(vi), VIP_SUCCESS);
    vi = NULL;
    TRC(VipCreateCQ(t.nic, 4, &cq), VIP_SUCCESS);
    TERR(VipCloseNic(t.nic), VIP_INVALID_STATE);
    VIP_MEM_ATTRIBUTES ma;
    TRC_SOFT(VipQueryMem(t.nic, b.p, b.mh, &ma), VIP_SUCCESS);
    TRC(VipDestroyCQ(cq), VIP_SUCCESS);
    cq = NULL;
    TRC(VipCloseNic(t.nic), VIP_SUCCESS);
    t.nic = NULL;
    CU_ASSERT_FALSE(vipctl_has("mem", key));
out:
    if (vi)
        VipDestroyVi(vi);
    if (cq)
        VipDestroyCQ(cq);
    tl_close(&t);
    free(b.p);
}

/* ---- VipQueryNic: each limit is the one enforced ------------------------------------------ */

static void test_query_errors(void)
{
    VIP_NIC_ATTRIBUTES a;
    uint32_t garbage[32] = {1};
    struct tl_nic t = {0};
    TERR(VipQueryNic(NULL, &a), VIP_INVALID_PARAMETER);
    TERR(VipQueryNic((VIP_NIC_HANDLE)garbage, &a), VIP_INVALID_PARAMETER);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TERR(VipQueryNic(t.nic, NULL), VIP_INVALID_PARAMETER);
    CU_ASSERT_TRUE(t.attr.ThreadSafe);
    CU_ASSERT(t.attr.MaxRegisterBlockBytes <= t.attr.MaxRegisterBytes);
    CU_ASSERT(t.attr.NativeMTU <= t.attr.MaxTransferSize);
    /* LocalNicAddress stays valid and the same while the NIC is open */
    const VIP_UINT8 *addr = t.attr.LocalNicAddress;
    TRC(VipQueryNic(t.nic, &a), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(a.LocalNicAddress, addr);
out:
    tl_close(&t);
}

static void test_limit_cq(void)
{
    struct tl_nic t = {0};
    VIP_CQ_HANDLE *cq = NULL;
    unsigned n = 0;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    /* MaxCQEntries is accepted, one more is not */
    VIP_CQ_HANDLE big;
    TRC(VipCreateCQ(t.nic, t.attr.MaxCQEntries, &big), VIP_SUCCESS);
    TRC_SOFT(VipDestroyCQ(big), VIP_SUCCESS);
    TERR(VipCreateCQ(t.nic, t.attr.MaxCQEntries + 1, &big), VIP_INVALID_PARAMETER);
    /* MaxCQ per NIC handle */
    cq = calloc(t.attr.MaxCQ + 1, sizeof *cq);
    TCHK(cq != NULL);
    for (; n < t.attr.MaxCQ; n++)
        TRC(VipCreateCQ(t.nic, 1, &cq[n]), VIP_SUCCESS);
    TERR(VipCreateCQ(t.nic, 1, &cq[n]), VIP_ERROR_RESOURCE);
    TRC_SOFT(VipDestroyCQ(cq[--n]), VIP_SUCCESS);
    TRC(VipCreateCQ(t.nic, 1, &cq[n]), VIP_SUCCESS);
    n++;
out:
    while (cq && n)
        VipDestroyCQ(cq[--n]);
    free(cq);
    tl_close(&t);
}

/* MaxVI, on the NIC with the fewest (a paced LANai's SRAM holds few
 * doorbell pages; the native NIC has 4096). */
static void test_limit_vi(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE *vi = NULL;
    unsigned n = 0;
    static const char *const names[] = {"via0", "via1", "via2", "via3", "via4", "via5"};
    const char *dev = "via0";
    for (unsigned i = 0; i < 6; i++) {
        if (tl_open(&t, names[i]) != VIP_SUCCESS)
            continue;
        VIP_ULONG max = t.attr.MaxVI;
        tl_close(&t);
        if (max < 1024) {
            dev = names[i];
            break;
        }
    }
    TRC(tl_open(&t, dev), VIP_SUCCESS);
    vi = calloc(t.attr.MaxVI + 1, sizeof *vi);
    TCHK(vi != NULL);
    VIP_RETURN rc = VIP_SUCCESS;
    while (n <= t.attr.MaxVI && (rc = tl_vi(&t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &vi[n])) ==
                                    VIP_SUCCESS)
        n++;
    /* other processes may hold VIs of this NIC: at most MaxVI, and the
     * refusal says why */
    CU_ASSERT(n <= t.attr.MaxVI);
    CU_ASSERT(n >= t.attr.MaxVI / 2);
    CU_ASSERT_EQUAL(rc, VIP_ERROR_RESOURCE);
    TERR(tl_vi(&t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &vi[n]), VIP_ERROR_RESOURCE);
    if (n) {
        TRC_SOFT(VipDestroyVi(vi[--n]), VIP_SUCCESS);
        TRC_SOFT(tl_vi(&t, VIP_SERVICE_UNRELIABLE, NULL, NULL, &vi[n]), VIP_SUCCESS);
        n++;
    }
out:
    while (vi && n)
        VipDestroyVi(vi[--n]);
    free(vi);
    tl_close(&t);
}

/* ---- ptags ------------------------------------------------------------------------------- */

static void test_ptag_limit(void)
{
    struct tl_nic t = {0};
    VIP_PROTECTION_HANDLE *p = NULL;
    unsigned n = 0;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS); /* holds one ptag already */
    p = calloc(t.attr.MaxPtags, sizeof *p);
    TCHK(p != NULL);
    for (; n + 1 < t.attr.MaxPtags; n++)
        TRC(VipCreatePtag(t.nic, &p[n]), VIP_SUCCESS);
    TERR(VipCreatePtag(t.nic, &p[n]), VIP_ERROR_RESOURCE);
    TRC(VipDestroyPtag(t.nic, p[--n]), VIP_SUCCESS);
    TRC(VipCreatePtag(t.nic, &p[n]), VIP_SUCCESS);
    n++;
    /* another NIC handle has its own MaxPtags */
    struct tl_nic u = {0};
    TRC_SOFT(tl_open(&u, "via0"), VIP_SUCCESS);
    tl_close(&u);
out:
    while (p && n)
        VipDestroyPtag(t.nic, p[--n]);
    free(p);
    tl_close(&t);
}

/* A ptag a VI or a registration still uses is not destroyed. */
static void test_ptag_in_use(void)
{
    struct tl_nic t = {0};
    VIP_PROTECTION_HANDLE p = NULL;
    VIP_VI_HANDLE vi = NULL;
    VIP_MEM_HANDLE mh = 0;
    static uint8_t buf[256];
    uint32_t garbage[16] = {0x50544731u, 99};
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TERR(VipDestroyPtag(NULL, t.ptag), VIP_INVALID_PARAMETER);
    TERR(VipDestroyPtag((VIP_NIC_HANDLE)garbage, t.ptag), VIP_INVALID_PARAMETER);
    TERR(VipDestroyPtag(t.nic, (VIP_PROTECTION_HANDLE)garbage), VIP_INVALID_PTAG);
    TRC(VipCreatePtag(t.nic, &p), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = VIP_SERVICE_UNRELIABLE, .Ptag = p};
    TRC(VipCreateVi(t.nic, &va, NULL, NULL, &vi), VIP_SUCCESS);
    TERR(VipDestroyPtag(t.nic, p), VIP_ERROR_RESOURCE);
    TRC(VipDestroyVi(vi), VIP_SUCCESS);
    vi = NULL;
    VIP_MEM_ATTRIBUTES ma = {.Ptag = p};
    TRC(VipRegisterMem(t.nic, buf, sizeof buf, &ma, &mh), VIP_SUCCESS);
    TERR(VipDestroyPtag(t.nic, p), VIP_ERROR_RESOURCE);
    /* the refused destroy left it working */
    TRC_SOFT(VipQueryMem(t.nic, buf, mh, &ma), VIP_SUCCESS);
    CU_ASSERT_PTR_EQUAL(ma.Ptag, p);
    TRC(VipDeregisterMem(t.nic, buf, mh), VIP_SUCCESS);
    TRC(VipDestroyPtag(t.nic, p), VIP_SUCCESS);
    p = NULL;
out:
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_open_errors),
        TL_TEST(test_open_all_nics),
        TL_TEST(test_close),
        TL_TEST(test_query_errors),
        TL_TEST(test_limit_cq),
        TL_TEST(test_limit_vi),
        TL_TEST(test_ptag_limit),
        TL_TEST(test_ptag_in_use),
        TL_END,
    };
    return tl_main(argc, argv, "conf_nic", tests);
}

/*
 * test_basic.c - NIC, ptags, memory registration, VIs and CQs, one process
 * (needs vipd; run_tests.sh provides it).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "vipl_ext.h"
#include "via_abi.h"

static uint8_t static_buf[10000];

static void test_open_names(void)
{
    static const struct {
        const char *name;
        unsigned idx;
    } ok[] = {{"via0", 0}, {"/dev/via0", 0}, {"/dev/via_lo", 0}, {"via1", 1},
              {"/dev/via1", 1}}; /* /dev/via_ethN: test_hostdev (the host decides) */
    for (unsigned i = 0; i < sizeof ok / sizeof *ok; i++) {
        VIP_NIC_HANDLE nic = NULL;
        VIP_NIC_ATTRIBUTES a;
        TRC(VipOpenNic(ok[i].name, &nic), VIP_SUCCESS);
        TRC_SOFT(VipQueryNic(nic, &a), VIP_SUCCESS);
        CU_ASSERT_EQUAL(a.NicAddressLen, 6);
        CU_ASSERT_PTR_NOT_NULL(a.LocalNicAddress);
        if (a.LocalNicAddress) {
            CU_ASSERT_EQUAL(a.LocalNicAddress[5], ok[i].idx);
            CU_ASSERT_EQUAL(a.LocalNicAddress[4], 0);
        }
        TRC(VipCloseNic(nic), VIP_SUCCESS);
    }
    VIP_NIC_HANDLE nic;
    TRC_SOFT(VipOpenNic("eth0", &nic), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipOpenNic("via", &nic), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipOpenNic("via0x", &nic), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipOpenNic("via0", NULL), VIP_INVALID_PARAMETER);
    /* the test vipd serves 6 NICs: via7 does not exist */
    nic = NULL;
    VIP_RETURN rc = VipOpenNic("via7", &nic);
    CU_ASSERT_NOT_EQUAL(rc, VIP_SUCCESS);
    if (rc == VIP_SUCCESS)
        VipCloseNic(nic);
    /* two sessions of one process at once */
    VIP_NIC_HANDLE n1, n2;
    TRC(VipOpenNic("via0", &n1), VIP_SUCCESS);
    TRC_SOFT(VipOpenNic("via0", &n2), VIP_SUCCESS);
    CU_ASSERT_PTR_NOT_EQUAL(n1, n2);
    VipCloseNic(n2);
    VipCloseNic(n1);
out:;
}

static void test_query_nic(void)
{
    struct tl_nic t = {0};
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    CU_ASSERT_EQUAL(t.attr.MaxTransferSize, 1u << 20);
    CU_ASSERT_EQUAL(t.attr.MaxSegmentsPerDesc, 16);
    CU_ASSERT_EQUAL(t.attr.MaxDescriptorsPerQueue, 1024);
    CU_ASSERT_EQUAL(t.attr.NicAddressLen, 6);
    CU_ASSERT_EQUAL(t.attr.MaxDiscriminatorLen, 16);
    CU_ASSERT(t.attr.MaxVI >= 64);
    CU_ASSERT(t.attr.MaxCQ >= 1);
    CU_ASSERT(t.attr.NativeMTU > 0);
    CU_ASSERT(t.attr.MaxRegisterBytes >= (1u << 30));
    CU_ASSERT_EQUAL(t.attr.ReliabilityLevelSupport & 7, 7);
    CU_ASSERT(strlen(t.attr.Name) > 0);
    VIP_NIC_ATTRIBUTES a;
    TRC_SOFT(VipQueryNic(NULL, &a), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipQueryNic(t.nic, NULL), VIP_INVALID_PARAMETER);
    tl_close(&t);
out:;
}

static void test_ptags(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_PROTECTION_HANDLE p1, p2;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    if (tl_open(&u, "via0") != VIP_SUCCESS) {
        CU_FAIL("second open");
        tl_close(&t);
        return;
    }
    TRC(VipCreatePtag(t.nic, &p1), VIP_SUCCESS);
    TRC(VipCreatePtag(t.nic, &p2), VIP_SUCCESS);
    CU_ASSERT_PTR_NOT_EQUAL(p1, p2);
    TRC_SOFT(VipCreatePtag(t.nic, NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreatePtag(NULL, &p1), VIP_INVALID_PARAMETER);
    /* a ptag of another session is foreign */
    TRC_SOFT(VipDestroyPtag(t.nic, u.ptag), VIP_INVALID_PTAG);
    uint32_t garbage[16] = {0x12345678, 0x9abcdef0};
    TRC_SOFT(VipDestroyPtag(t.nic, garbage), VIP_INVALID_PTAG);
    TRC_SOFT(VipDestroyPtag(t.nic, NULL), VIP_INVALID_PTAG);
    TRC_SOFT(VipDestroyPtag(t.nic, p1), VIP_SUCCESS);
    TRC_SOFT(VipDestroyPtag(t.nic, p2), VIP_SUCCESS);
out:
    tl_close(&u);
    tl_close(&t);
}

static VIP_RETURN reg(struct tl_nic *t, void *p, VIP_ULONG len, VIP_PROTECTION_HANDLE ptag,
                      VIP_MEM_HANDLE *mh)
{
    VIP_MEM_ATTRIBUTES ma = {.Ptag = ptag};
    return VipRegisterMem(t->nic, p, len, &ma, mh);
}

static void test_register_variants(void)
{
    struct tl_nic t = {0};
    VIP_MEM_HANDLE mh, mh2;
    VIP_MEM_ATTRIBUTES ma;
    uint8_t stack_buf[3000];
    uint8_t *heap = malloc(100003);
    TCHK(heap != NULL);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    struct {
        void *p;
        VIP_ULONG len;
    } v[] = {{heap, 100003},         {heap + 3, 1001},     {heap + 4095, 2},
             {static_buf, sizeof static_buf}, {static_buf + 1, 1}, {stack_buf, sizeof stack_buf},
             {stack_buf + 7, 999}};
    for (unsigned i = 0; i < sizeof v / sizeof *v; i++) {
        TRC(reg(&t, v[i].p, v[i].len, t.ptag, &mh), VIP_SUCCESS);
        memset(&ma, 0, sizeof ma);
        TRC_SOFT(VipQueryMem(t.nic, v[i].p, mh, &ma), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(ma.Ptag, t.ptag);
        CU_ASSERT_FALSE(ma.EnableRdmaWrite);
        /* last byte inside, one past the end outside */
        TRC_SOFT(VipQueryMem(t.nic, (uint8_t *)v[i].p + v[i].len - 1, mh, &ma), VIP_SUCCESS);
        TRC_SOFT(VipQueryMem(t.nic, (uint8_t *)v[i].p + v[i].len, mh, &ma),
                 VIP_INVALID_PARAMETER);
        TRC_SOFT(VipDeregisterMem(t.nic, v[i].p, mh), VIP_SUCCESS);
        /* deregistering twice fails; the handle is dead */
        CU_ASSERT_NOT_EQUAL(VipDeregisterMem(t.nic, v[i].p, mh), VIP_SUCCESS);
        TRC_SOFT(VipQueryMem(t.nic, v[i].p, mh, &ma), VIP_INVALID_PARAMETER);
    }
    /* the same range twice gives two handles */
    TRC(reg(&t, heap, 4096, t.ptag, &mh), VIP_SUCCESS);
    TRC(reg(&t, heap, 4096, t.ptag, &mh2), VIP_SUCCESS);
    CU_ASSERT_NOT_EQUAL(mh, mh2);
    TRC_SOFT(VipDeregisterMem(t.nic, heap, mh), VIP_SUCCESS);
    TRC_SOFT(VipDeregisterMem(t.nic, heap, mh2), VIP_SUCCESS);
    /* RDMA enables are recorded */
    ma = (VIP_MEM_ATTRIBUTES){.Ptag = t.ptag, .EnableRdmaWrite = VIP_TRUE};
    TRC(VipRegisterMem(t.nic, heap, 64, &ma, &mh), VIP_SUCCESS);
    memset(&ma, 0, sizeof ma);
    TRC_SOFT(VipQueryMem(t.nic, heap, mh, &ma), VIP_SUCCESS);
    CU_ASSERT_TRUE(ma.EnableRdmaWrite);
    CU_ASSERT_FALSE(ma.EnableRdmaRead);
    TRC_SOFT(VipDeregisterMem(t.nic, heap, mh), VIP_SUCCESS);
    /* many registrations */
    VIP_MEM_HANDLE hs[200];
    for (unsigned i = 0; i < 200; i++)
        TRC(reg(&t, heap + i * 100, 100, t.ptag, &hs[i]), VIP_SUCCESS);
    for (unsigned i = 0; i < 200; i++)
        TRC_SOFT(VipDeregisterMem(t.nic, heap + i * 100, hs[i]), VIP_SUCCESS);
out:
    tl_close(&t);
    free(heap);
}

static void test_register_bad(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_MEM_HANDLE mh;
    uint8_t buf[256];
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    if (tl_open(&u, "via1") != VIP_SUCCESS) {
        CU_FAIL("open via1");
        tl_close(&t);
        return;
    }
    TRC_SOFT(reg(&t, NULL, 100, t.ptag, &mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(reg(&t, buf, 0, t.ptag, &mh), VIP_INVALID_PARAMETER);
    /* unmapped memory */
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *m = mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    TCHK(m != MAP_FAILED);
    munmap(m + pg, (size_t)pg); /* a hole in the middle */
    TRC_SOFT(reg(&t, m + pg, 100, t.ptag, &mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(reg(&t, m, (VIP_ULONG)pg * 3, t.ptag, &mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(reg(&t, m + pg - 10, 20, t.ptag, &mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(reg(&t, m, (VIP_ULONG)pg, t.ptag, &mh), VIP_SUCCESS);
    VipDeregisterMem(t.nic, m, mh);
    /* memory the NIC could not use: no access, or read-only (the NIC
     * writes statuses and received data), even for one page of the range */
    TCHK(mprotect(m, (size_t)pg, PROT_NONE) == 0);
    TRC_SOFT(reg(&t, m, 100, t.ptag, &mh), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "without access"));
    TCHK(mprotect(m, (size_t)pg, PROT_READ) == 0);
    TRC_SOFT(reg(&t, m, 100, t.ptag, &mh), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "read-only"));
    TCHK(mprotect(m, (size_t)pg, PROT_READ | PROT_WRITE) == 0);
    TCHK(mprotect(m + 2 * pg, (size_t)pg, PROT_READ) == 0);
    TRC_SOFT(reg(&t, m + 2 * pg, (VIP_ULONG)pg, t.ptag, &mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(reg(&t, m, (VIP_ULONG)pg, t.ptag, &mh), VIP_SUCCESS);
    VipDeregisterMem(t.nic, m, mh);
    munmap(m, (size_t)pg);
    munmap(m + 2 * pg, (size_t)pg);
    /* wrapping range */
    TRC_SOFT(reg(&t, buf, (VIP_ULONG)-16, t.ptag, &mh), VIP_INVALID_PARAMETER);
    /* bad ptags: foreign (other session), garbage, NULL */
    TRC_SOFT(reg(&t, buf, sizeof buf, u.ptag, &mh), VIP_INVALID_PTAG);
    uint32_t garbage[16] = {0xdeadbeef, 1, 2, 3};
    TRC_SOFT(reg(&t, buf, sizeof buf, garbage, &mh), VIP_INVALID_PTAG);
    TRC_SOFT(reg(&t, buf, sizeof buf, NULL, &mh), VIP_INVALID_PTAG);
    /* NULL arguments, bad NIC handle */
    VIP_MEM_ATTRIBUTES ma = {.Ptag = t.ptag};
    TRC_SOFT(VipRegisterMem(t.nic, buf, sizeof buf, NULL, &mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipRegisterMem(t.nic, buf, sizeof buf, &ma, NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipRegisterMem(NULL, buf, sizeof buf, &ma, &mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipRegisterMem((VIP_NIC_HANDLE)garbage, buf, sizeof buf, &ma, &mh),
             VIP_INVALID_PARAMETER);
    /* deregister: garbage handle, handle of another session */
    CU_ASSERT_NOT_EQUAL(VipDeregisterMem(t.nic, buf, 0x12345678u), VIP_SUCCESS);
    VIP_MEM_HANDLE uh;
    TRC(reg(&u, buf, sizeof buf, u.ptag, &uh), VIP_SUCCESS);
    CU_ASSERT_NOT_EQUAL(VipDeregisterMem(t.nic, buf, uh), VIP_SUCCESS);
    TRC_SOFT(VipQueryMem(t.nic, buf, uh, &ma), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipDeregisterMem(u.nic, buf, uh), VIP_SUCCESS);
    TRC_SOFT(VipDeregisterMem(NULL, buf, uh), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipQueryMem(NULL, buf, uh, &ma), VIP_INVALID_PARAMETER);
out:
    tl_close(&u);
    tl_close(&t);
}

static void test_vi_create(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_VI_HANDLE vi;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    if (tl_open(&u, "via0") != VIP_SUCCESS) {
        CU_FAIL("second open");
        tl_close(&t);
        return;
    }
    static const VIP_RELIABILITY_LEVEL levels[] = {
        VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned i = 0; i < 3; i++) {
        VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = levels[i], .MaxTransferSize = 4096 << i,
                               .Ptag = t.ptag};
        TRC(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_SUCCESS);
        VIP_VI_STATE st = (VIP_VI_STATE)-1;
        VIP_VI_ATTRIBUTES q;
        VIP_BOOLEAN se = 0, re = 0;
        TRC_SOFT(VipQueryVi(vi, &st, &q, &se, &re), VIP_SUCCESS);
        CU_ASSERT_EQUAL(st, VIP_STATE_IDLE);
        CU_ASSERT_EQUAL(q.ReliabilityLevel, levels[i]);
        CU_ASSERT_EQUAL(q.MaxTransferSize, 4096u << i);
        CU_ASSERT_PTR_EQUAL(q.Ptag, t.ptag);
        CU_ASSERT_TRUE(se);
        CU_ASSERT_TRUE(re);
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    }
    /* MaxTransferSize: 1 MiB is the limit */
    VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = VIP_SERVICE_UNRELIABLE,
                           .MaxTransferSize = 1u << 20, .Ptag = t.ptag};
    TRC(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_SUCCESS);
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    a.MaxTransferSize = (1u << 20) + 1;
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_MTU);
    a.MaxTransferSize = 1ul << 31;
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_MTU);
    a.MaxTransferSize = 1u << 20;
    /* reliability: exactly one of the three levels */
    static const VIP_RELIABILITY_LEVEL bad_levels[] = {0, 3, 5, 6, 7, 8, 0x10, 0xFFFF};
    for (unsigned i = 0; i < sizeof bad_levels / sizeof *bad_levels; i++) {
        a.ReliabilityLevel = bad_levels[i];
        TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_RELIABILITY_LEVEL);
    }
    a.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
    /* ptag: foreign, garbage, NULL */
    uint32_t garbage[32] = {0x50544731u, 5};
    a.Ptag = u.ptag;
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_PTAG);
    a.Ptag = garbage;
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_PTAG);
    a.Ptag = NULL;
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_INVALID_PTAG);
    a.Ptag = t.ptag;
    /* NULL arguments, bad NIC, bad CQ */
    TRC_SOFT(VipCreateVi(t.nic, NULL, NULL, NULL, &vi), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreateVi(NULL, &a, NULL, NULL, &vi), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreateVi((VIP_NIC_HANDLE)garbage, &a, NULL, NULL, &vi), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreateVi(t.nic, &a, (VIP_CQ_HANDLE)garbage, NULL, &vi), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreateVi(t.nic, &a, NULL, (VIP_CQ_HANDLE)garbage, &vi), VIP_INVALID_PARAMETER);
    /* bad VI handles */
    VIP_VI_STATE st;
    TRC_SOFT(VipQueryVi(NULL, &st, NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipQueryVi((VIP_VI_HANDLE)garbage, &st, NULL, NULL, NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipDestroyVi(NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipDestroyVi((VIP_VI_HANDLE)garbage), VIP_INVALID_PARAMETER);
    /* a NIC with a VI cannot be closed */
    TRC(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_SUCCESS);
    TRC_SOFT(VipCloseNic(t.nic), VIP_INVALID_STATE);
    /* attributes can be changed on an idle VI */
    VIP_VI_ATTRIBUTES b = a;
    b.ReliabilityLevel = VIP_SERVICE_UNRELIABLE;
    b.MaxTransferSize = 8192;
    TRC_SOFT(VipSetViAttributes(vi, &b), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES q;
    TRC_SOFT(VipQueryVi(vi, NULL, &q, NULL, NULL), VIP_SUCCESS);
    CU_ASSERT_EQUAL(q.ReliabilityLevel, VIP_SERVICE_UNRELIABLE);
    CU_ASSERT_EQUAL(q.MaxTransferSize, 8192);
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    /* many VIs */
    VIP_VI_HANDLE vis[100];
    for (unsigned i = 0; i < 100; i++)
        TRC(VipCreateVi(t.nic, &a, NULL, NULL, &vis[i]), VIP_SUCCESS);
    for (unsigned i = 0; i < 100; i++)
        TRC_SOFT(VipDestroyVi(vis[i]), VIP_SUCCESS);
out:
    tl_close(&u);
    tl_close(&t);
}

static void test_cq_create(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_CQ_HANDLE cq = NULL, cq2 = NULL, ucq = NULL;
    VIP_VI_HANDLE vi = NULL;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    if (tl_open(&u, "via0") != VIP_SUCCESS) {
        CU_FAIL("second open");
        tl_close(&t);
        return;
    }
    TRC_SOFT(VipCreateCQ(t.nic, 0, &cq), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreateCQ(t.nic, 16, NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCreateCQ(NULL, 16, &cq), VIP_INVALID_PARAMETER);
    TRC(VipCreateCQ(t.nic, 16, &cq), VIP_SUCCESS);
    TRC(VipCreateCQ(t.nic, 1000, &cq2), VIP_SUCCESS);
    TRC(VipCreateCQ(u.nic, 16, &ucq), VIP_SUCCESS);
    /* empty CQ */
    VIP_VI_HANDLE got;
    VIP_BOOLEAN isr;
    TRC_SOFT(VipCQDone(cq, &got, &isr), VIP_NOT_DONE);
    uint64_t t0 = tl_now_ms();
    TRC_SOFT(VipCQWait(cq, 50, &got, &isr), VIP_TIMEOUT);
    uint64_t dt = tl_now_ms() - t0;
    CU_ASSERT(dt >= 45 && dt < 2000);
    /* a VI bound to a CQ of another session is refused */
    TRC_SOFT(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, ucq, NULL, &vi), VIP_INVALID_PARAMETER);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, cq, cq2, &vi), VIP_SUCCESS);
    TRC_SOFT(VipDestroyCQ(cq), VIP_INVALID_STATE);
    TRC_SOFT(VipDestroyCQ(cq2), VIP_INVALID_STATE);
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    vi = NULL;
    TRC_SOFT(VipResizeCQ(cq, 8), VIP_SUCCESS);
    TRC_SOFT(VipDestroyCQ(cq), VIP_SUCCESS);
    cq = NULL;
    TRC_SOFT(VipDestroyCQ(cq2), VIP_SUCCESS);
    cq2 = NULL;
    TRC_SOFT(VipDestroyCQ(NULL), VIP_INVALID_PARAMETER);
    uint32_t garbage[32] = {1, 2, 3};
    TRC_SOFT(VipDestroyCQ((VIP_CQ_HANDLE)garbage), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCQDone(NULL, &got, &isr), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipCQWait((VIP_CQ_HANDLE)garbage, 10, &got, &isr), VIP_INVALID_PARAMETER);
out:
    if (vi)
        VipDestroyVi(vi);
    if (cq)
        VipDestroyCQ(cq);
    if (cq2)
        VipDestroyCQ(cq2);
    if (ucq)
        VipDestroyCQ(ucq);
    tl_close(&u);
    tl_close(&t);
}

/* Posting before connecting; done/wait on an idle VI. */
static void test_post_idle(void)
{
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_DESCRIPTOR *d;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &b, 8192), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    VIP_DESCRIPTOR *sd = (VIP_DESCRIPTOR *)(void *)b.p;
    VIP_DESCRIPTOR *rd = (VIP_DESCRIPTOR *)(void *)(b.p + 64);
    tl_desc_1(sd, b.p + 4096, 100, b.mh);
    tl_desc_1(rd, b.p + 4096, 100, b.mh);
    TRC_SOFT(VipPostSend(vi, sd, b.mh), VIP_INVALID_STATE);
    TRC_SOFT(VipPostRecv(vi, rd, b.mh), VIP_SUCCESS);
    TRC_SOFT(VipRecvDone(vi, &d), VIP_NOT_DONE);
    TRC_SOFT(VipSendDone(vi, &d), VIP_NOT_DONE);
    uint64_t t0 = tl_now_ms();
    TRC_SOFT(VipRecvWait(vi, 50, &d), VIP_TIMEOUT);
    uint64_t dt = tl_now_ms() - t0;
    CU_ASSERT(dt >= 45 && dt < 2000);
    t0 = tl_now_ms();
    TRC_SOFT(VipSendWait(vi, 20, &d), VIP_TIMEOUT);
    dt = tl_now_ms() - t0;
    CU_ASSERT(dt >= 15 && dt < 2000);
    VIP_BOOLEAN se, re;
    TRC_SOFT(VipQueryVi(vi, NULL, NULL, &se, &re), VIP_SUCCESS);
    CU_ASSERT_TRUE(se);
    CU_ASSERT_FALSE(re);
    /* bad arguments */
    uint32_t garbage[32] = {7};
    TRC_SOFT(VipPostSend(NULL, sd, b.mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipPostRecv((VIP_VI_HANDLE)garbage, rd, b.mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipPostRecv(vi, NULL, b.mh), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipRecvDone(vi, NULL), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipSendDone(NULL, &d), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipRecvWait((VIP_VI_HANDLE)garbage, 10, &d), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipDisconnect(NULL), VIP_INVALID_PARAMETER);
out:
    if (vi)
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
    tl_buf_free(&b);
    tl_close(&t);
}

static void test_name_service(void)
{
    struct tl_nic t = {0};
    VIP_NET_ADDRESS *a = NULL;
    TRC(tl_open(&t, "via1"), VIP_SUCCESS);
    a = calloc(1, sizeof *a + 6 + 16);
    TCHK(a != NULL);
    TRC(VipNSInit(t.nic, NULL), VIP_SUCCESS);
    TRC(VipNSGetHostByName(t.nic, "localhost", a, 0), VIP_SUCCESS);
    CU_ASSERT_EQUAL(a->HostAddressLen, 6);
    CU_ASSERT_EQUAL(memcmp(tl_host_bytes(a), t.attr.LocalNicAddress, 6), 0);
    TRC(VipNSGetHostByName(t.nic, "via0", a, 0), VIP_SUCCESS);
    CU_ASSERT_EQUAL(tl_host_bytes(a)[5], 0);
    CU_ASSERT_EQUAL(memcmp(tl_host_bytes(a), t.attr.LocalNicAddress, 4), 0);
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    TRC(VipNSGetHostByName(t.nic, host, a, 0), VIP_SUCCESS);
    CU_ASSERT_EQUAL(memcmp(tl_host_bytes(a), t.attr.LocalNicAddress, 6), 0);
    char name[128];
    VIP_ULONG nl = sizeof name;
    TRC(VipNSGetHostByAddr(t.nic, a, name, &nl), VIP_SUCCESS);
    CU_ASSERT_PTR_NOT_NULL(strstr(name, tl_dev("via1"))); /* TL_PROFILE maps it */
    TRC_SOFT(VipNSGetHostByName(t.nic, "no-such-host.invalid", a, 0), VIP_ERROR_NAMESERVICE);
    TRC_SOFT(VipNSGetHostByName(t.nic, "via7", a, 0), VIP_ERROR_NAMESERVICE);
    TRC_SOFT(VipNSGetHostByName(t.nic, "localhost", a, 1), VIP_ERROR_NAMESERVICE);
    TRC_SOFT(VipNSGetHostByName(t.nic, NULL, a, 0), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipNSGetHostByName(NULL, "localhost", a, 0), VIP_INVALID_PARAMETER);
    TRC_SOFT(VipNSShutdown(t.nic), VIP_SUCCESS);
out:
    free(a);
    tl_close(&t);
}

/* `vipctl env` names every variable the sources read or set through a
 * getenv-like call (getenv, setenv, env_ms, ...): a variable added to the
 * code without a line there fails this. */
static void test_vipctl_env_lists_all(void)
{
    char dir[PATH_MAX], root[PATH_MAX + 8], cmd[PATH_MAX * 2 + 300];
    static char out[65536];
    const char *src = getenv("TL_SRCDIR"); /* run_tests.sh; else B/tests -> the tree */
    if (src && *src) {
        snprintf(root, sizeof root, "%s", src);
    } else {
        TCHK(tl_bindir(dir, sizeof dir) == 0);
        snprintf(root, sizeof root, "%s/../..", dir);
    }
    snprintf(cmd, sizeof cmd,
             "cd '%s' && grep -rhoE '[A-Za-z_]*env[A-Za-z_]*\\(\"[A-Z][A-Z0-9_]*\"' "
             "vipl kdriver lanai-fw extensions am2 include --include=*.c --include=*.h | "
             "sed -E 's/.*\\(\"//; s/\"$//' | sort -u",
             root);
    TCHK(tl_vipctl("env", out, sizeof out) == 0);
    FILE *f = popen(cmd, "r");
    TCHK(f);
    char name[128];
    int seen = 0, missing = 0;
    while (fgets(name, sizeof name, f)) {
        name[strcspn(name, "\n")] = 0;
        if (!strcmp(name, "PATH"))
            continue;
        char key[160];
        snprintf(key, sizeof key, "  %s ", name);
        seen++;
        if (!strstr(out, key)) {
            fprintf(stderr, "\n  vipctl env does not list %s", name);
            missing++;
        }
    }
    pclose(f);
    CU_ASSERT(seen > 40 && missing == 0);
out:;
}

/* Settings in the environment that the code would not understand, or
 * that disagree with the vipd that answers, are refused by VipOpenNic
 * with a reason naming the valid values or both sides (and the one that
 * agrees is accepted). */
static void test_settings_refused(void)
{
    VIP_NIC_HANDLE nic;
    const char *dev = tl_dev("via0");
    setenv("VIP_EXT_MODE", "bogus", 1);
    CU_ASSERT_EQUAL(VipOpenNic((VIP_CHAR *)dev, &nic), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "standard,descriptorless,merged"));
    unsetenv("VIP_EXT_MODE");
    setenv("VIP_VT_HOLD", "sometimes", 1);
    CU_ASSERT_EQUAL(VipOpenNic((VIP_CHAR *)dev, &nic), VIP_INVALID_PARAMETER);
    unsetenv("VIP_VT_HOLD");
    setenv("VIPD_NICS", "63", 1); /* the tests' vipd has fewer */
    CU_ASSERT_EQUAL(VipOpenNic((VIP_CHAR *)dev, &nic), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "VIPD_NICS=63, but the vipd at"));
    unsetenv("VIPD_NICS");
    setenv("VIPD_HOSTS", "/nonexistent/hosts-of-another-vipd", 1);
    CU_ASSERT_EQUAL(VipOpenNic((VIP_CHAR *)dev, &nic), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "VIPD_HOSTS=/nonexistent/"));
    unsetenv("VIPD_HOSTS");
    static const char *const profiles[] = {"native", "SBUS", "pci"};
    int agreed = 0;
    for (int i = 0; i < 3; i++) {
        setenv("VIP_PROFILE", profiles[i], 1);
        VIP_RETURN rc = VipOpenNic((VIP_CHAR *)dev, &nic);
        if (rc == VIP_SUCCESS) {
            agreed++;
            VipCloseNic(nic);
        } else {
            CU_ASSERT_EQUAL(rc, VIP_INVALID_PARAMETER);
            CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "profile (an idle autostarted"));
        }
    }
    unsetenv("VIP_PROFILE");
    CU_ASSERT_EQUAL(agreed, 1); /* the NIC's own profile, in any case */
    CU_ASSERT_EQUAL(VipOpenNic((VIP_CHAR *)dev, &nic), VIP_SUCCESS);
    VipCloseNic(nic);
}

/* A receive posted before the VI connects, with a memory handle that does
 * not cover its descriptor (garbage, or another ptag's region), fails at
 * once with VIP_INVALID_PARAMETER and the reason; a right one is taken. */
static void test_early_receive_checked(void)
{
    struct tl_nic t;
    struct tl_buf b = {0};
    VIP_VI_HANDLE vi = NULL;
    VIP_PROTECTION_HANDLE other = 0;
    VIP_MEM_HANDLE other_mh = 0;
    static uint8_t other_buf[4096] __attribute__((aligned(64)));
    TRC(tl_open(&t, tl_dev("via0")), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &b, 4096), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                           .MaxTransferSize = 4096, .Ptag = t.ptag};
    TRC(VipCreateVi(t.nic, &a, NULL, NULL, &vi), VIP_SUCCESS);
    VIP_DESCRIPTOR *d = (VIP_DESCRIPTOR *)(void *)b.p;
    tl_desc_1(d, b.p + 1024, 64, b.mh);
    TRC_SOFT(VipPostRecv(vi, d, 0x12345678u), VIP_INVALID_PARAMETER);
    CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "does not cover the descriptor"));
    TRC_SOFT(VipCreatePtag(t.nic, &other), VIP_SUCCESS);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = other};
    TRC_SOFT(VipRegisterMem(t.nic, other_buf, sizeof other_buf, &ma, &other_mh), VIP_SUCCESS);
    VIP_DESCRIPTOR *od = (VIP_DESCRIPTOR *)(void *)other_buf;
    tl_desc_1(od, b.p + 1024, 64, b.mh);
    TRC_SOFT(VipPostRecv(vi, od, other_mh), VIP_INVALID_PARAMETER); /* another ptag's */
    TRC_SOFT(VipPostRecv(vi, d, b.mh), VIP_SUCCESS);
    TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
out:
    VipDeregisterMem(t.nic, other_buf, other_mh);
    VipDestroyPtag(t.nic, other);
    tl_buf_free(&b);
    tl_close(&t);
}

static void test_vipctl_nics(void)
{
    char out[16384];
    int rc = tl_vipctl("ping", out, sizeof out);
    CU_ASSERT_EQUAL(rc, 0);
    rc = tl_vipctl("nics", out, sizeof out);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "via0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "via1"));
    CU_ASSERT_EQUAL(tl_vipctl("no-such-command", out, sizeof out), 2);
    CU_ASSERT(tl_vipctl("--help", out, sizeof out) == 0 && strstr(out, "usage: vipctl"));
}

/* A registration shows in `vipctl mem` with our pid, and leaves with it. */
static void test_vipctl_mem(void)
{
    struct tl_nic t = {0};
    struct tl_buf b = {0};
    char out[1 << 16], key[64];
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_buf_alloc(&t, &b, 12345), VIP_SUCCESS);
    snprintf(key, sizeof key, "0x%08x %8u", b.mh, (unsigned)getpid());
    CU_ASSERT_EQUAL(tl_vipctl("mem", out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, key));
    tl_buf_free(&b);
    CU_ASSERT_EQUAL(tl_vipctl("mem", out, sizeof out), 0);
    CU_ASSERT_PTR_NULL(strstr(out, key));
out:
    tl_close(&t);
}

/* The library starts a vipd when none runs (on a private socket). */
static int autostart_child(void *arg)
{
    const char *sock = arg;
    setenv("VIPD_SOCKET", sock, 1);
    unsetenv("VIPD_AUTOSTART");
    VIP_NIC_HANDLE nic;
    TC_RC(VipOpenNic("via0", &nic), VIP_SUCCESS);
    TC_RC(VipCloseNic(nic), VIP_SUCCESS);
    return 0;
}

static void test_autostart(void)
{
    char dir[] = "/tmp/vipl-autostart.XXXXXX", sock[256], args[400], out[4096];
    struct tl_child c = {.pid = -1};
    TCHK(mkdtemp(dir) != NULL);
    snprintf(sock, sizeof sock, "%s/vipd.sock", dir);
    TCHK(tl_spawn(&c, autostart_child, sock) == 0);
    TCHILD_OK(&c, 20000);
    snprintf(args, sizeof args, "-s '%s' ping", sock);
    /* tl_vipctl adds -s $VIPD_SOCKET; a later -s wins with getopt */
    CU_ASSERT_EQUAL(tl_vipctl(args, out, sizeof out), 0);
    snprintf(args, sizeof args, "-s '%s' shutdown", sock);
    tl_vipctl(args, out, sizeof out);
    /* bounded wait for it to go */
    snprintf(args, sizeof args, "-s '%s' ping", sock);
    int gone = 0;
    for (int i = 0; i < 100 && !gone; i++) {
        gone = tl_vipctl(args, out, sizeof out) != 0;
        if (!gone)
            usleep(50000);
    }
    CU_ASSERT_TRUE(gone);
out:
    tl_child_kill(&c);
    {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", dir);
    }
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_open_names),
        TL_TEST(test_query_nic),
        TL_TEST(test_ptags),
        TL_TEST(test_register_variants),
        TL_TEST(test_register_bad),
        TL_TEST(test_vi_create),
        TL_TEST(test_cq_create),
        TL_TEST(test_post_idle),
        TL_TEST(test_name_service),
        TL_TEST(test_vipctl_nics),
        TL_TEST(test_vipctl_env_lists_all),
        TL_TEST(test_settings_refused),
        TL_TEST(test_early_receive_checked),
        TL_TEST(test_vipctl_mem),
        TL_TEST(test_autostart),
        TL_END,
    };
    return tl_main(argc, argv, "basic", tests);
}

/*
 * test_stale_handles.c - every VIPL call with a handle that is no longer
 * good (destroyed, closed, or of a kind the call does not take): the call
 * returns VIP_INVALID_PARAMETER (VIP_INVALID_PTAG for ptags) with a reason,
 * touches nothing, and a new object that took the old one's place is not
 * reachable through the old handle. Run under ASan (make check-asan) this
 * also shows that no call reads freed memory.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/tlib.h"

static void handler_desc(VIP_PVOID c, VIP_NIC_HANDLE n, VIP_VI_HANDLE v, VIP_DESCRIPTOR *d)
{
    (void)c, (void)n, (void)v, (void)d;
}
static void handler_cq(VIP_PVOID c, VIP_NIC_HANDLE n, VIP_VI_HANDLE v, VIP_BOOLEAN r)
{
    (void)c, (void)n, (void)v, (void)r;
}

#define STALE(call) TRC_SOFT(call, VIP_INVALID_PARAMETER)

/* Every call that takes a VI handle, with a destroyed one. */
static void test_destroyed_vi(void)
{
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL, vi2 = NULL;
    VIP_DESCRIPTOR d __attribute__((aligned(64)));
    VIP_DESCRIPTOR *dp;
    VIP_VI_ATTRIBUTES a;
    VIP_VI_STATE st;
    VIP_BOOLEAN e1, e2;
    memset(&d, 0, sizeof d);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    TRC(VipQueryVi(vi, &st, &a, &e1, &e2), VIP_SUCCESS);
    TRC(VipDestroyVi(vi), VIP_SUCCESS);
    STALE(VipDestroyVi(vi));
    CU_ASSERT(strlen(vip_last_error()) > 0);
    /* its place taken by another VI: the old handle still names nothing */
    TRC(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi2), VIP_SUCCESS);
    CU_ASSERT_PTR_NOT_EQUAL(vi, vi2);
    STALE(VipQueryVi(vi, &st, &a, &e1, &e2));
    STALE(VipSetViAttributes(vi, &a));
    STALE(VipPostSend(vi, &d, 0));
    STALE(VipPostRecv(vi, &d, 0));
    STALE(VipSendDone(vi, &dp));
    STALE(VipRecvDone(vi, &dp));
    STALE(VipSendWait(vi, 0, &dp));
    STALE(VipRecvWait(vi, 0, &dp));
    STALE(VipSendNotify(vi, NULL, handler_desc));
    STALE(VipRecvNotify(vi, NULL, handler_desc));
    STALE(VipDisconnect(vi));
    VIP_NET_ADDRESS *local = tl_addr(t.nic, "via0", "s1"), *remote = tl_addr(t.nic, "via1", "s2");
    if (local && remote) {
        STALE(VipConnectRequest(vi, local, remote, 100, &a));
        STALE(VipConnectPeerRequest(vi, local, remote, 100));
    }
    free(local);
    free(remote);
    STALE(VipConnectPeerDone(vi, &a));
    STALE(VipConnectPeerWait(vi, &a));
    /* the new VI is untouched by all that */
    TRC_SOFT(VipQueryVi(vi2, &st, &a, &e1, &e2), VIP_SUCCESS);
    CU_ASSERT_EQUAL(st, VIP_STATE_IDLE);
    TRC_SOFT(VipDestroyVi(vi2), VIP_SUCCESS);
    vi2 = NULL;
out:
    if (vi2)
        VipDestroyVi(vi2);
    tl_close(&t);
}

/* Every call that takes a CQ handle, with a destroyed one. */
static void test_destroyed_cq(void)
{
    struct tl_nic t = {0};
    VIP_CQ_HANDLE cq = NULL;
    VIP_VI_HANDLE vi = NULL, got;
    VIP_BOOLEAN recv;
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(VipCreateCQ(t.nic, 16, &cq), VIP_SUCCESS);
    TRC(VipDestroyCQ(cq), VIP_SUCCESS);
    STALE(VipDestroyCQ(cq));
    STALE(VipCQDone(cq, &got, &recv));
    STALE(VipCQWait(cq, 0, &got, &recv));
    STALE(VipResizeCQ(cq, 32));
    STALE(VipCQNotify(cq, NULL, handler_cq));
    STALE(tl_vi(&t, VIP_SERVICE_RELIABLE_DELIVERY, cq, NULL, &vi));
    CU_ASSERT_PTR_NULL(vi);
out:
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
}

/* Every call that takes a NIC handle, with a closed one; and handles of
 * one kind passed for another. */
static void test_closed_nic_and_wrong_kinds(void)
{
    struct tl_nic t = {0}, u = {0};
    VIP_NIC_ATTRIBUTES na;
    VIP_PROTECTION_HANDLE p;
    VIP_MEM_HANDLE mh;
    VIP_CQ_HANDLE cq;
    VIP_VI_HANDLE vi = NULL;
    static uint8_t buf[4096];
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    TRC(tl_open(&u, "via0"), VIP_SUCCESS);
    VIP_NIC_HANDLE nic = t.nic;
    VIP_MEM_ATTRIBUTES ma = {.Ptag = t.ptag};
    TRC(VipDestroyPtag(t.nic, t.ptag), VIP_SUCCESS);
    TRC_SOFT(VipDestroyPtag(t.nic, t.ptag), VIP_INVALID_PTAG);
    TRC_SOFT(VipRegisterMem(t.nic, buf, sizeof buf, &ma, &mh), VIP_INVALID_PTAG);
    t.ptag = NULL;
    TRC(VipCloseNic(nic), VIP_SUCCESS);
    t.nic = NULL;
    STALE(VipCloseNic(nic));
    STALE(VipQueryNic(nic, &na));
    STALE(VipCreatePtag(nic, &p));
    STALE(VipCreateCQ(nic, 16, &cq));
    VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY, .Ptag = u.ptag};
    STALE(VipCreateVi(nic, &a, NULL, NULL, &vi));
    STALE(VipNSInit(nic, NULL));
    STALE(VipErrorCallback(nic, NULL, NULL));
    /* a handle of another kind: a VI handle where a NIC handle goes, a
     * NIC handle where a VI or CQ handle goes */
    TRC(tl_vi(&u, VIP_SERVICE_RELIABLE_DELIVERY, NULL, NULL, &vi), VIP_SUCCESS);
    STALE(VipQueryNic((VIP_NIC_HANDLE)vi, &na));
    VIP_DESCRIPTOR *dp;
    STALE(VipSendDone((VIP_VI_HANDLE)u.nic, &dp));
    VIP_BOOLEAN r;
    VIP_VI_HANDLE got;
    STALE(VipCQDone((VIP_CQ_HANDLE)vi, &got, &r));
    TRC_SOFT(VipDestroyPtag(u.nic, (VIP_PROTECTION_HANDLE)vi), VIP_INVALID_PTAG);
    STALE(VipConnectAccept((VIP_CONN_HANDLE)vi, vi));
    STALE(VipConnectReject((VIP_CONN_HANDLE)u.ptag));
out:
    if (vi)
        VipDestroyVi(vi);
    tl_close(&u);
    if (t.nic)
        tl_close(&t);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_destroyed_vi),
        TL_TEST(test_destroyed_cq),
        TL_TEST(test_closed_nic_and_wrong_kinds),
        TL_END,
    };
    return tl_main(argc, argv, "stale handles", tests);
}

/*
 * test_compat.c - what VIPL programs of the 1990s relied on, each the way
 * such a program does it (spec-notes/descriptors.md, "What a program
 * owns"):
 *   - free lists threaded through CS.Next / CS.NextHandle of descriptors
 *     that are not posted survive any number of post/complete cycles (the
 *     library and the NIC never write, nor read, those fields);
 *   - a receive descriptor with IMMEDIATE (or QFENCE) set in Control is
 *     posted and completes like any other;
 *   - choosing the highest reliability level by comparing
 *     ReliabilityLevelSupport numerically picks one the NIC has;
 *   - a program that only polls the Status word in memory (no VIPL call)
 *     sees it turn DONE (the NIC's own thread progresses);
 *   - a K&R, gnu89 program builds against vipl.h with -Wall -Wextra
 *     -Werror and runs (tests/compat/kr_program.c).
 * The peer is an echo server in a child process (tests/lib/techo.c).
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/techo.h"
#include "lib/tlib.h"

/* ---- our side: one VI connected to the echo child ------------------------------------ */
struct side {
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
    struct techo e;
};

/* Memory: descriptors in the first 8 KiB (128 of them), data behind. */
#define DESC(s, i) ((VIP_DESCRIPTOR *)(void *)((s)->b.p + 64u * (i)))
#define DATA(s, i) ((s)->b.p + 8192u + 2048u * (i))
#define NDESC 127u /* the last descriptor slot is the quit message's */

/* Nothing to tear down yet (no child, no fds). */
static void side_init(struct side *s)
{
    memset(s, 0, sizeof *s);
    s->e.child.pid = -1;
    s->e.child.rep = s->e.child.to_child = s->e.child.to_parent = -1;
}

static VIP_RETURN side_up(struct side *s, VIP_RELIABILITY_LEVEL rel)
{
    VIP_RETURN rc;
    side_init(s);
    if (techo_start(&s->e, "via1", rel) != 0)
        return VIP_ERROR_RESOURCE;
    if ((rc = tl_open(&s->t, "via0")) != VIP_SUCCESS ||
        (rc = tl_buf_alloc(&s->t, &s->b, 8192u + 2048u * NDESC)) != VIP_SUCCESS ||
        (rc = tl_vi(&s->t, rel, NULL, NULL, &s->vi)) != VIP_SUCCESS)
        return rc;
    return tl_request(&s->t, s->vi, "via1", s->e.disc, 20000);
}

static void side_down(struct side *s)
{
    int up = s->vi && tl_vi_state(s->vi) == VIP_STATE_CONNECTED;
    techo_stop(&s->e, up ? s->vi : NULL, DESC(s, NDESC), s->b.mh);
    if (s->vi) {
        VipDisconnect(s->vi);
        TRC_SOFT(VipDestroyVi(s->vi), VIP_SUCCESS);
    }
    tl_buf_free(&s->b);
    tl_close(&s->t);
}

/* Fill in what a post needs (Control, SegCount, the segment, Length) and
 * nothing else: Next, NextHandle and Reserved keep what the program left. */
static void build(struct side *s, unsigned i, uint16_t control, uint32_t len, uint32_t imm)
{
    VIP_DESCRIPTOR *d = DESC(s, i);
    d->CS.Control = control;
    d->CS.SegCount = 1;
    d->CS.ImmediateData = imm;
    d->CS.Length = len;
    d->DS[0].Local.Data.Address = DATA(s, i);
    d->DS[0].Local.Handle = s->b.mh;
    d->DS[0].Local.Length = len;
}

static unsigned idx(struct side *s, const VIP_DESCRIPTOR *d)
{
    return (unsigned)(((const uint8_t *)d - s->b.p) / 64);
}

/* ---- free lists through Next ------------------------------------------------------- */
#define POOL 24u
/* Where the program's list ends: not NULL, and nothing anyone may touch. */
#define LIST_END ((VIP_DESCRIPTOR *)(uintptr_t)0xdead0000beef0000ull)
#define COOKIE(i) (0xC0DE0000u | (i))

struct freelist {
    VIP_DESCRIPTOR *head;
    /* what the program last wrote into each descriptor's link fields */
    uint64_t next[POOL];
    uint32_t handle[POOL];
    int posted[POOL];
};

static void fl_push(struct side *s, struct freelist *f, VIP_DESCRIPTOR *d)
{
    unsigned i = idx(s, d);
    d->CS.Next.Address = f->head;
    d->CS.NextHandle = COOKIE(i) ^ (uint32_t)(uintptr_t)f->head;
    f->next[i] = d->CS.Next.AddressBits;
    f->handle[i] = d->CS.NextHandle;
    f->posted[i] = 0;
    f->head = d;
}

/* Off the list, links left as they are (the program does not clear them). */
static VIP_DESCRIPTOR *fl_pop(struct side *s, struct freelist *f)
{
    VIP_DESCRIPTOR *d = f->head;
    if (d == LIST_END)
        return NULL;
    f->head = d->CS.Next.Address;
    f->posted[idx(s, d)] = 1;
    return d;
}

/* Every descriptor's links are what the program wrote: those on the list
 * and, as this library never touches them either, those posted. */
static unsigned fl_damaged(struct side *s, struct freelist *f)
{
    unsigned bad = 0;
    for (unsigned i = 0; i < POOL; i++)
        if (DESC(s, i)->CS.Next.AddressBits != f->next[i] ||
            DESC(s, i)->CS.NextHandle != f->handle[i])
            bad++;
    return bad;
}

static void test_next_free_list(void)
{
    struct side s;
    struct freelist f = {.head = LIST_END};
    VIP_DESCRIPTOR *d;
    TRC(side_up(&s, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    for (unsigned i = POOL; i-- > 0;) {
        memset(DESC(&s, i), 0, 64);
        fl_push(&s, &f, DESC(&s, i));
    }
    unsigned rounds = tl_count(400, 4000);
    uint32_t seq = 0;
    for (unsigned r = 0; r < rounds; r++) {
        unsigned k = 1 + r % 5;
        VIP_DESCRIPTOR *rd[5], *sd[5];
        uint32_t len[5];
        for (unsigned j = 0; j < k; j++) {
            TCHK((rd[j] = fl_pop(&s, &f)) != NULL);
            build(&s, idx(&s, rd[j]), VIP_CONTROL_OP_SENDRECV, 2048, 0);
            TRC(VipPostRecv(s.vi, rd[j], s.b.mh), VIP_SUCCESS);
        }
        for (unsigned j = 0; j < k; j++) {
            TCHK((sd[j] = fl_pop(&s, &f)) != NULL);
            unsigned i = idx(&s, sd[j]);
            len[j] = (seq * 37u) % 2049u;
            tl_fill(DATA(&s, i), len[j], seq + j);
            build(&s, i, (seq + j) % 3 ? VIP_CONTROL_OP_SENDRECV : VIP_CONTROL_IMMEDIATE,
                  len[j], seq + j);
            TRC(VipPostSend(s.vi, sd[j], s.b.mh), VIP_SUCCESS);
        }
        CU_ASSERT_EQUAL(fl_damaged(&s, &f), 0);
        /* Each send as it completes goes back on the list, where the next
         * post of another descriptor must leave its links alone. */
        for (unsigned j = 0; j < k; j++) {
            TRC(VipSendWait(s.vi, 10000, &d), VIP_SUCCESS);
            TCHK(d == sd[j]);
            CU_ASSERT_EQUAL(d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK),
                            VIP_STATUS_DONE);
            fl_push(&s, &f, d);
        }
        for (unsigned j = 0; j < k; j++) {
            TRC(VipRecvWait(s.vi, 10000, &d), VIP_SUCCESS);
            TCHK(d == rd[j]);
            CU_ASSERT_EQUAL(d->CS.Status & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK),
                            VIP_STATUS_DONE);
            CU_ASSERT_EQUAL(d->CS.Length, len[j]);
            CU_ASSERT_EQUAL(tl_verify(DATA(&s, idx(&s, d)), len[j], seq + j), -1);
            fl_push(&s, &f, d);
        }
        CU_ASSERT_EQUAL(fl_damaged(&s, &f), 0);
        seq += k;
        if (CU_get_number_of_failures())
            break;
    }
    /* The list is whole: every descriptor once, in the order pushed last. */
    unsigned n = 0;
    for (d = f.head; d != LIST_END && n <= POOL; d = d->CS.Next.Address, n++)
        CU_ASSERT_EQUAL(d->CS.NextHandle ^ (uint32_t)d->CS.Next.AddressBits,
                        COOKIE(idx(&s, d)));
    CU_ASSERT_EQUAL(n, POOL);
out:
    side_down(&s);
}

/* ---- Control bits a receive does not use -------------------------------------------- */
static void test_recv_control_bits(void)
{
    struct side s;
    static const uint16_t ctl[4] = {VIP_CONTROL_IMMEDIATE,
                                    VIP_CONTROL_IMMEDIATE | VIP_CONTROL_QFENCE,
                                    VIP_CONTROL_QFENCE, VIP_CONTROL_IMMEDIATE};
    static const int send_imm[4] = {1, 0, 1, 0};
    TRC(side_up(&s, VIP_SERVICE_RELIABLE_RECEPTION), VIP_SUCCESS);
    for (unsigned i = 0; i < 4; i++) {
        memset(DESC(&s, i), 0, 64);
        build(&s, i, ctl[i], 2048, 0x5a5a5a5au);
        TRC(VipPostRecv(s.vi, DESC(&s, i), s.b.mh), VIP_SUCCESS);
    }
    for (unsigned i = 0; i < 4; i++) {
        unsigned k = 4 + i;
        VIP_DESCRIPTOR *d;
        memset(DESC(&s, k), 0, 64);
        tl_fill(DATA(&s, k), 100 + i, i);
        build(&s, k, send_imm[i] ? VIP_CONTROL_IMMEDIATE : 0, 100 + i, 0x1000u + i);
        TRC(VipPostSend(s.vi, DESC(&s, k), s.b.mh), VIP_SUCCESS);
        TRC(VipSendWait(s.vi, 10000, &d), VIP_SUCCESS);
        CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        VIP_DESCRIPTOR *d;
        TRC(VipRecvWait(s.vi, 10000, &d), VIP_SUCCESS);
        TCHK(d == DESC(&s, i));
        uint32_t st = d->CS.Status;
        CU_ASSERT_EQUAL(st & (VIP_STATUS_DONE | VIP_STATUS_ERROR_MASK), VIP_STATUS_DONE);
        CU_ASSERT_EQUAL(st & VIP_STATUS_OP_MASK, VIP_STATUS_OP_RECEIVE);
        CU_ASSERT_EQUAL(!!(st & VIP_STATUS_IMMEDIATE), send_imm[i]);
        CU_ASSERT_EQUAL(d->CS.ImmediateData, send_imm[i] ? 0x1000u + i : 0x5a5a5a5au);
        CU_ASSERT_EQUAL(d->CS.Length, 100 + i);
        CU_ASSERT_EQUAL(d->CS.Control, ctl[i]); /* the NIC writes no Control bit */
        CU_ASSERT_EQUAL(tl_verify(DATA(&s, i), 100 + i, i), -1);
    }
    CU_ASSERT_EQUAL(tl_vi_state(s.vi), VIP_STATE_CONNECTED);
out:
    side_down(&s);
}

/* ---- ReliabilityLevelSupport compared as a number ------------------------------------ */
static void test_reliability_idiom(void)
{
    struct side s;
    struct tl_nic t = {0};
    VIP_VI_HANDLE vi = NULL;
    side_init(&s);
    TRC(tl_open(&t, "via0"), VIP_SUCCESS);
    /* the idiom: the highest level the NIC's number reaches */
    VIP_RELIABILITY_LEVEL lvl;
    if (t.attr.ReliabilityLevelSupport >= VIP_SERVICE_RELIABLE_RECEPTION)
        lvl = VIP_SERVICE_RELIABLE_RECEPTION;
    else if (t.attr.ReliabilityLevelSupport >= VIP_SERVICE_RELIABLE_DELIVERY)
        lvl = VIP_SERVICE_RELIABLE_DELIVERY;
    else
        lvl = VIP_SERVICE_UNRELIABLE;
    CU_ASSERT_EQUAL(lvl, VIP_SERVICE_RELIABLE_RECEPTION);
    /* ... agrees with the reading of it as a mask, for every level */
    static const VIP_RELIABILITY_LEVEL levels[3] = {
        VIP_SERVICE_UNRELIABLE, VIP_SERVICE_RELIABLE_DELIVERY, VIP_SERVICE_RELIABLE_RECEPTION};
    for (unsigned i = 0; i < 3; i++) {
        CU_ASSERT(t.attr.ReliabilityLevelSupport & levels[i]);
        CU_ASSERT(t.attr.ReliabilityLevelSupport >= levels[i]);
        TRC(tl_vi(&t, levels[i], NULL, NULL, &vi), VIP_SUCCESS);
        TRC_SOFT(VipDestroyVi(vi), VIP_SUCCESS);
        vi = NULL;
        /* RDMAReadSupport the same way: VipCreateVi agrees with it */
        VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = levels[i], .Ptag = t.ptag,
                               .EnableRdmaRead = VIP_TRUE};
        int ok = (t.attr.RDMAReadSupport & levels[i]) != 0;
        TRC_SOFT(VipCreateVi(t.nic, &a, NULL, NULL, &vi),
                 ok ? VIP_SUCCESS : VIP_INVALID_RDMAREAD);
        if (!ok)
            CU_ASSERT_PTR_NOT_NULL(strstr(vip_last_error(), "RdmaRead"));
        if (ok && vi)
            VipDestroyVi(vi);
        vi = NULL;
    }
    /* and a VI of the level chosen carries messages to a peer of that level */
    TRC(side_up(&s, lvl), VIP_SUCCESS);
    VIP_VI_ATTRIBUTES q;
    TRC_SOFT(VipQueryVi(s.vi, NULL, &q, NULL, NULL), VIP_SUCCESS);
    CU_ASSERT_EQUAL(q.ReliabilityLevel, lvl);
    for (unsigned i = 0; i < 8; i++) {
        VIP_DESCRIPTOR *d;
        memset(DESC(&s, 0), 0, 128);
        build(&s, 0, 0, 1024, 0);
        TRC(VipPostRecv(s.vi, DESC(&s, 0), s.b.mh), VIP_SUCCESS);
        tl_fill(DATA(&s, 1), 1000, i);
        build(&s, 1, 0, 1000, 0);
        TRC(VipPostSend(s.vi, DESC(&s, 1), s.b.mh), VIP_SUCCESS);
        TRC(VipSendWait(s.vi, 10000, &d), VIP_SUCCESS);
        TRC(VipRecvWait(s.vi, 10000, &d), VIP_SUCCESS);
        CU_ASSERT_EQUAL(d->CS.Status & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(tl_verify(DATA(&s, 0), 1000, i), -1);
    }
out:
    side_down(&s);
    if (vi)
        VipDestroyVi(vi);
    tl_close(&t);
}

/* ---- Status polled in memory -------------------------------------------------------- */
static int spin_until_done(volatile VIP_UINT32 *status, uint64_t until_ms)
{
    for (unsigned n = 0;; n++) {
        if (*status & VIP_STATUS_DONE)
            return 1;
        if ((n & 1023) == 1023) {
            if (tl_now_ms() > until_ms)
                return 0;
            sched_yield();
        }
    }
}

static void test_status_polled(void)
{
    struct side s;
    TRC(side_up(&s, VIP_SERVICE_RELIABLE_DELIVERY), VIP_SUCCESS);
    unsigned n = tl_count(300, 3000);
    for (unsigned i = 0; i < n; i++) {
        VIP_DESCRIPTOR *rd = DESC(&s, 0), *sd = DESC(&s, 1), *d;
        memset(rd, 0, 128);
        build(&s, 0, 0, 2048, 0);
        TRC(VipPostRecv(s.vi, rd, s.b.mh), VIP_SUCCESS);
        uint32_t len = 1 + (i * 131u) % 2048u;
        tl_fill(DATA(&s, 1), len, i);
        build(&s, 1, 0, len, 0);
        TRC(VipPostSend(s.vi, sd, s.b.mh), VIP_SUCCESS);
        /* no VIPL call from here until both are DONE */
        uint64_t until = tl_now_ms() + 10000;
        int got_r = spin_until_done(&rd->CS.Status, until);
        int got_s = spin_until_done(&sd->CS.Status, until);
        CU_ASSERT_TRUE(got_r);
        CU_ASSERT_TRUE(got_s);
        TCHK(got_r && got_s);
        CU_ASSERT_EQUAL(rd->CS.Status & VIP_STATUS_ERROR_MASK, 0);
        CU_ASSERT_EQUAL(rd->CS.Length, len);
        CU_ASSERT_EQUAL(tl_verify(DATA(&s, 0), len, i), -1);
        /* the library then hands back the very descriptors */
        TRC(VipSendDone(s.vi, &d), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(d, sd);
        TRC(VipRecvDone(s.vi, &d), VIP_SUCCESS);
        CU_ASSERT_PTR_EQUAL(d, rd);
    }
out:
    side_down(&s);
}

/* ---- a K&R program ---------------------------------------------------------------- */
static int run_kr(void *arg)
{
    const char *dev = arg;
    char self[PATH_MAX], prog[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 3;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash)
        return 3;
    *slash = 0;
    snprintf(prog, sizeof prog, "%s/compat/kr_program", self);
    execl(prog, prog, dev, (char *)NULL);
    tl_child_fail(__FILE__, __LINE__, "cannot run %s (make testprogs builds it)", prog);
}

static void test_kr_program(void)
{
    struct tl_child c = {.pid = -1};
    CU_ASSERT_EQUAL_FATAL(tl_spawn(&c, run_kr, (void *)tl_dev("via0")), 0);
    TCHILD_OK(&c, 60000);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_next_free_list),
        TL_TEST(test_recv_control_bits),
        TL_TEST(test_reliability_idiom),
        TL_TEST(test_status_polled),
        TL_TEST(test_kr_program),
        TL_END,
    };
    return tl_main(argc, argv, "compat", tests);
}

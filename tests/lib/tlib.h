/*
 * tlib.h - helpers shared by the test programs.
 *
 * Every test binary is a CUnit program whose main() is tl_main(). Tests that
 * need a second process fork a child (tl_spawn) that runs a peer function;
 * the child reports failures through a pipe (tl_child_fail / TC_CHECK) and
 * always leaves with _exit(), never through CUnit. The parent waits for it
 * with a bound (tl_child_wait), killing it on timeout, and always reaps it.
 */
#ifndef TLIB_H
#define TLIB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <CUnit/CUnit.h>

#include <vipl.h>
#include <vipl_ext.h>

/* ---- test registration and main ---------------------------------------- */
struct tl_test {
    const char *name;
    void (*fn)(void);
};
#define TL_TEST(f) {#f, f}
#define TL_END {NULL, NULL}

/* Runs every test of `tests` (or those whose name contains argv[1]) in one
 * suite; writes "passed failed" to $TL_RESULT if set; returns the exit code. */
int tl_main(int argc, char **argv, const char *suite, const struct tl_test *tests);

/* ---- parent-side assertions that leave the test through `out:` --------- */
#define TCHK(cond)                                                                        \
    do {                                                                                  \
        int tl_ok_ = !!(cond);                                                            \
        CU_assertImplementation(tl_ok_, __LINE__, #cond, __FILE__, "", CU_FALSE);          \
        if (!tl_ok_)                                                                      \
            goto out;                                                                     \
    } while (0)

/* rc must equal expect; on mismatch print both names and the library's reason. */
#define TRC(call, expect)                                                                 \
    do {                                                                                  \
        VIP_RETURN tl_rc_ = (call);                                                       \
        int tl_ok_ = tl_rc_ == (expect);                                                  \
        if (!tl_ok_)                                                                      \
            tl_report_rc(__FILE__, __LINE__, #call, tl_rc_, (expect));                    \
        CU_assertImplementation(tl_ok_, __LINE__, #call " == " #expect, __FILE__, "",      \
                                CU_FALSE);                                                \
        if (!tl_ok_)                                                                      \
            goto out;                                                                     \
    } while (0)

/* The same but the test goes on (no goto). */
#define TRC_SOFT(call, expect)                                                            \
    do {                                                                                  \
        VIP_RETURN tl_rc_ = (call);                                                       \
        int tl_ok_ = tl_rc_ == (expect);                                                  \
        if (!tl_ok_)                                                                      \
            tl_report_rc(__FILE__, __LINE__, #call, tl_rc_, (expect));                    \
        CU_assertImplementation(tl_ok_, __LINE__, #call " == " #expect, __FILE__, "",      \
                                CU_FALSE);                                                \
    } while (0)

void tl_report_rc(const char *file, int line, const char *what, VIP_RETURN got,
                  VIP_RETURN expect);

/* ---- child-side checks: report through the pipe and _exit(1) ------------- */
void tl_child_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define TC_CHECK(cond)                                                                    \
    do {                                                                                  \
        if (!(cond))                                                                      \
            tl_child_fail(__FILE__, __LINE__, "%s", #cond);                               \
    } while (0)
#define TC_RC(call, expect)                                                               \
    do {                                                                                  \
        VIP_RETURN tc_rc_ = (call);                                                       \
        if (tc_rc_ != (expect))                                                           \
            tl_child_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)", #call,   \
                          vip_strerror(tc_rc_), vip_strerror(expect), vip_last_error());   \
    } while (0)

/* ---- NIC, ptag, registered buffers ------------------------------------------ */
/* The device a test means by `dev`: with TL_PROFILE=sbus (pci), "via0" and
 * "via1" name via2 and via3 (via4 and via5), the paced pairs of the vipd that
 * tests/run_tests.sh starts; any other name, or TL_PROFILE unset or
 * "native", is itself. tl_open and tl_addr (host names) go through it. */
const char *tl_dev(const char *dev);
/* 1 if the NIC tl_dev(dev) is paced (asks vipctl), 0 if not, -1 if unknown. */
int tl_dev_paced(const char *dev);
/* A repetition count: dflt, or full with TL_FULL=1; divided by TL_SCALE
 * (slow builds: valgrind, sanitizers); at least 1. */
unsigned tl_count(unsigned dflt, unsigned full);
/* Run by `make valgrind` (run_tests.sh sets VALGRIND=1): tests of timing or
 * of descriptor limits (valgrind keeps descriptors of its own) say so and
 * skip what they cannot check there. */
int tl_under_valgrind(void);

struct tl_nic {
    VIP_NIC_HANDLE nic;
    VIP_PROTECTION_HANDLE ptag;
    VIP_NIC_ATTRIBUTES attr;
};
/* Open dev (e.g. "via0"), query it, create a ptag. VIP_SUCCESS or the failing code. */
VIP_RETURN tl_open(struct tl_nic *t, const char *dev);
void tl_close(struct tl_nic *t);

struct tl_buf {
    uint8_t *p;
    size_t len;
    VIP_MEM_HANDLE mh;
    VIP_NIC_HANDLE nic;
};
/* 4 KiB-aligned heap buffer of len bytes, zeroed, registered with t's ptag. */
VIP_RETURN tl_buf_alloc(struct tl_nic *t, struct tl_buf *b, size_t len);
void tl_buf_free(struct tl_buf *b);
/* A child's end: disconnect vi, take what its queues hold, destroy it, free
 * b, close the NIC (vi, b may be 0/NULL), so nothing is left behind. */
void tl_end(struct tl_nic *t, VIP_VI_HANDLE vi, struct tl_buf *b);
/* vi's part of tl_end: disconnect, take back its descriptors, destroy it. */
void tl_vi_end(VIP_VI_HANDLE vi);

/* ---- descriptors ----------------------------------------------------------------- */
/* Bytes a descriptor with nseg data segments occupies (multiple of 64). */
size_t tl_desc_size(unsigned nseg);
/* Descriptor with nseg segments, each of len[i] bytes at data[i] (handle mh).
 * control: VIP_CONTROL_OP_SENDRECV, optionally | VIP_CONTROL_IMMEDIATE. */
void tl_desc_build(VIP_DESCRIPTOR *d, uint16_t control, uint32_t imm, unsigned nseg,
                   uint8_t *const *data, const uint32_t *len, VIP_MEM_HANDLE mh);
/* One segment. */
void tl_desc_1(VIP_DESCRIPTOR *d, void *data, uint32_t len, VIP_MEM_HANDLE mh);
/* len bytes at data split into nseg nearly equal contiguous segments. */
void tl_desc_split(VIP_DESCRIPTOR *d, uint8_t *data, uint32_t len, unsigned nseg,
                   VIP_MEM_HANDLE mh);
static inline VIP_DATA_SEGMENT *tl_seg(VIP_DESCRIPTOR *d, unsigned i)
{
    return &((VIP_DATA_SEGMENT *)(void *)((uint8_t *)d + sizeof(VIP_CONTROL_SEGMENT)))[i];
}

/* Deterministic payload: byte i of message `seq` */
static inline uint8_t tl_pat(uint32_t seq, uint32_t i)
{
    uint32_t x = seq * 2654435761u + i * 40503u + (i >> 8);
    return (uint8_t)(x ^ (x >> 11));
}
void tl_fill(uint8_t *p, uint32_t len, uint32_t seq);
/* Index of the first mismatch, or -1. */
long tl_verify(const uint8_t *p, uint32_t len, uint32_t seq);

/* ---- VIs and addresses ----------------------------------------------------------- */
VIP_RETURN tl_vi(struct tl_nic *t, VIP_RELIABILITY_LEVEL rel, VIP_CQ_HANDLE scq,
                 VIP_CQ_HANDLE rcq, VIP_VI_HANDLE *vi);
VIP_VI_STATE tl_vi_state(VIP_VI_HANDLE vi);
/* A discriminator unique to this process and call: "t<pid>.<n><tag>", <= 16 bytes. */
void tl_discrim(char out[17], const char *tag);
/* An address of host `host` (VipNSGetHostByName) with discriminator `disc`;
 * malloc'd (free it), NULL on failure. */
VIP_NET_ADDRESS *tl_addr(VIP_NIC_HANDLE nic, const char *host, const char *disc);

/* The host address bytes (HostAddress is declared with one element). */
static inline uint8_t *tl_host_bytes(VIP_NET_ADDRESS *a)
{
    return (uint8_t *)a + offsetof(VIP_NET_ADDRESS, HostAddress);
}

/* Server side: wait for a request to (own NIC, disc), accept with vi. */
VIP_RETURN tl_accept(struct tl_nic *t, VIP_VI_HANDLE vi, const char *disc, VIP_ULONG timeout);
/* Client side: request (host, disc) with vi, again while the answer is
 * VIP_NO_MATCH (nobody waits yet), for up to timeout ms. */
VIP_RETURN tl_request(struct tl_nic *t, VIP_VI_HANDLE vi, const char *host, const char *disc,
                      VIP_ULONG timeout);

/* ---- child processes -------------------------------------------------------------- */
struct tl_child {
    pid_t pid;
    int rep;       /* parent reads failure reports here */
    int to_child;  /* parent -> child tokens */
    int to_parent; /* child -> parent tokens (parent side) */
    char msg[1024];
};
/* Fork a child running fn(arg); the child's return value is its exit code.
 * 0 on success. */
int tl_spawn(struct tl_child *c, int (*fn)(void *arg), void *arg);
/* In the child: send a token byte to the parent / wait for one (ms, -1 = 30 s). */
int tl_child_post(char tok);
int tl_child_take(int timeout_ms);
/* In the parent: the same towards the child. */
int tl_parent_post(struct tl_child *c, char tok);
int tl_parent_take(struct tl_child *c, int timeout_ms);
/* Wait up to timeout_ms for the child; kill it on timeout; always reap.
 * Returns 0 if it exited with 0; else -1 and c->msg says why. Idempotent. */
int tl_child_wait(struct tl_child *c, int timeout_ms);
/* SIGKILL and reap (for cleanup paths). */
void tl_child_kill(struct tl_child *c);
/* Wait, up to timeout_ms in all, until each of the n children c[0..n-1] has
 * posted the token tok. Every ~200 ms, tick(arg) (if not NULL) may give up
 * by returning nonzero. 0 when all posted; -1 when one exited or posted
 * another token, on timeout, or when tick gave up. */
int tl_gather(struct tl_child *c, unsigned n, char tok, int timeout_ms, int (*tick)(void *),
              void *arg);
/* CU_ASSERT that the child succeeded, printing its report. */
#define TCHILD_OK(c, ms)                                                                  \
    do {                                                                                  \
        int tl_cw_ = tl_child_wait((c), (ms));                                            \
        if (tl_cw_)                                                                       \
            fprintf(stderr, "\n  %s:%d: child: %s\n", __FILE__, __LINE__, (c)->msg);      \
        CU_assertImplementation(tl_cw_ == 0, __LINE__, "child succeeded", __FILE__, "",    \
                                CU_FALSE);                                                \
    } while (0)

/* Monotonic milliseconds. */
uint64_t tl_now_ms(void);

/* ---- vipctl ------------------------------------------------------------------------- */
/* Run `vipctl -s $VIPD_SOCKET args` and capture stdout+stderr into out
 * (NUL-terminated). Returns its exit status, or -1. */
int tl_vipctl(const char *args, char *out, size_t cap);
/* The directory this test program is in (B/tests): 0, or -1. */
int tl_bindir(char *out, size_t cap);

/* Where the profiles are read from: $VIP_PROFILE_DIR, else the tree's. */
const char *tl_profile_dir(void);

#endif

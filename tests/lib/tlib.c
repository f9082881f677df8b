/*
 * tlib.c - helpers shared by the test programs (see tlib.h).
 */
#include "tlib.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "via_abi.h"

/* ---- main ------------------------------------------------------------------- */

int tl_main(int argc, char **argv, const char *suite_name, const struct tl_test *tests)
{
    /* The library's default error handler would print on every expected
     * error; the tests install their own where they look at errors. */
    setenv("VIP_QUIET", "1", 0);
    signal(SIGPIPE, SIG_IGN);
    const char *prof = getenv("TL_PROFILE");
    if (prof && *prof && strcmp(prof, "native") && strcmp(prof, "sbus") && strcmp(prof, "pci")) {
        fprintf(stderr, "TL_PROFILE=%s: not native, sbus or pci\n", prof);
        return 2;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite(suite_name, NULL, NULL);
    if (!s)
        return 2;
    /* argv[1]: "--list" prints the test names; "=name" runs that test only;
     * any other word runs the tests whose names contain it. */
    const char *only = argc > 1 ? argv[1] : NULL;
    if (only && strcmp(only, "--list") == 0) {
        for (const struct tl_test *t = tests; t->name; t++)
            printf("%s\n", t->name);
        CU_cleanup_registry();
        return 0;
    }
    int exact = only && only[0] == '=';
    unsigned matched = 0;
    for (const struct tl_test *t = tests; t->name; t++) {
        CU_pTest ct = CU_add_test(s, t->name, t->fn);
        if (!ct)
            return 2;
        int want = !only || (exact ? strcmp(t->name, only + 1) == 0 : !!strstr(t->name, only));
        if (!want)
            CU_set_test_active(ct, CU_FALSE);
        matched += (unsigned)want;
    }
    if (only && !matched) {
        fprintf(stderr, "no test matches '%s' (--list shows them)\n", only);
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    CU_pRunSummary rs = CU_get_run_summary();
    unsigned ran = rs->nTestsRun, failed = rs->nTestsFailed;
    unsigned passed = ran - failed;
    const char *res = getenv("TL_RESULT");
    if (res && *res) {
        FILE *f = fopen(res, "w");
        if (f) {
            fprintf(f, "%u %u\n", passed, failed);
            fclose(f);
        }
    }
    printf("\n%s: %u passed, %u failed\n", suite_name, passed, failed);
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

void tl_report_rc(const char *file, int line, const char *what, VIP_RETURN got,
                  VIP_RETURN expect)
{
    fprintf(stderr, "\n  %s:%d: %s returned %s, expected %s (%s)\n", file, line, what,
            vip_strerror(got), vip_strerror(expect), vip_last_error());
}

uint64_t tl_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* ---- NIC and memory ---------------------------------------------------------------- */

const char *tl_dev(const char *dev)
{
    static const char *const sbus[2] = {"via2", "via3"}, *const pci[2] = {"via4", "via5"};
    const char *prof = getenv("TL_PROFILE");
    if (!dev || !prof || (strcmp(dev, "via0") && strcmp(dev, "via1")))
        return dev;
    int i = dev[3] - '0';
    if (strcmp(prof, "sbus") == 0)
        return sbus[i];
    if (strcmp(prof, "pci") == 0)
        return pci[i];
    return dev;
}

int tl_dev_paced(const char *dev)
{
    char args[64], out[4096];
    snprintf(args, sizeof args, "profile %s", tl_dev(dev));
    if (tl_vipctl(args, out, sizeof out) != 0)
        return -1;
    const char *line = strstr(out, "profile:");
    if (!line)
        return -1;
    const char *eol = strchr(line, '\n');
    const char *paced = strstr(line, "(paced)");
    return paced && (!eol || paced < eol);
}

unsigned tl_count(unsigned dflt, unsigned full)
{
    const char *f = getenv("TL_FULL"), *sc = getenv("TL_SCALE");
    unsigned n = f && strcmp(f, "1") == 0 ? full : dflt;
    unsigned long d = sc && *sc ? strtoul(sc, NULL, 10) : 1;
    if (d > 1)
        n = (unsigned)(n / d);
    return n ? n : 1;
}

int tl_under_valgrind(void)
{
    const char *v = getenv("VALGRIND");
    if (v && *v && *v != '0') {
        fprintf(stderr, " (not checked under valgrind) ");
        return 1;
    }
    return 0;
}

VIP_RETURN tl_open(struct tl_nic *t, const char *dev)
{
    memset(t, 0, sizeof *t);
    VIP_RETURN rc = VipOpenNic(tl_dev(dev), &t->nic);
    if (rc != VIP_SUCCESS)
        return rc;
    rc = VipQueryNic(t->nic, &t->attr);
    if (rc == VIP_SUCCESS)
        rc = VipCreatePtag(t->nic, &t->ptag);
    if (rc != VIP_SUCCESS) {
        VipCloseNic(t->nic);
        t->nic = NULL;
    }
    return rc;
}

void tl_close(struct tl_nic *t)
{
    if (!t->nic)
        return;
    /* Closing the session frees the ptag and any registration left. */
    VipCloseNic(t->nic);
    t->nic = NULL;
}

void tl_vi_end(VIP_VI_HANDLE vi)
{
    VipDisconnect(vi);
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc;
    /* what the disconnect flushed, and what completed meanwhile */
    do
        rc = VipSendDone(vi, &d);
    while (rc == VIP_SUCCESS || rc == VIP_DESCRIPTOR_ERROR);
    do
        rc = VipRecvDone(vi, &d);
    while (rc == VIP_SUCCESS || rc == VIP_DESCRIPTOR_ERROR);
    VipDestroyVi(vi);
}

void tl_end(struct tl_nic *t, VIP_VI_HANDLE vi, struct tl_buf *b)
{
    if (vi)
        tl_vi_end(vi);
    if (b)
        tl_buf_free(b);
    tl_close(t);
}

VIP_RETURN tl_buf_alloc(struct tl_nic *t, struct tl_buf *b, size_t len)
{
    memset(b, 0, sizeof *b);
    size_t alloc = (len + 4095) & ~(size_t)4095;
    b->p = aligned_alloc(4096, alloc ? alloc : 4096);
    if (!b->p)
        return VIP_ERROR_RESOURCE;
    memset(b->p, 0, alloc ? alloc : 4096);
    b->len = len;
    VIP_MEM_ATTRIBUTES ma = {.Ptag = t->ptag};
    VIP_RETURN rc = VipRegisterMem(t->nic, b->p, len, &ma, &b->mh);
    if (rc != VIP_SUCCESS) {
        free(b->p);
        b->p = NULL;
        return rc;
    }
    b->nic = t->nic;
    return VIP_SUCCESS;
}

void tl_buf_free(struct tl_buf *b)
{
    if (!b->p)
        return;
    if (b->nic)
        VipDeregisterMem(b->nic, b->p, b->mh);
    free(b->p);
    b->p = NULL;
}

/* ---- descriptors ---------------------------------------------------------------------- */

size_t tl_desc_size(unsigned nseg)
{
    size_t n = sizeof(VIP_CONTROL_SEGMENT) + (size_t)(nseg < 2 ? 2 : nseg) *
                                                 sizeof(VIP_DATA_SEGMENT);
    return (n + 63) & ~(size_t)63;
}

void tl_desc_build(VIP_DESCRIPTOR *d, uint16_t control, uint32_t imm, unsigned nseg,
                   uint8_t *const *data, const uint32_t *len, VIP_MEM_HANDLE mh)
{
    memset(d, 0, tl_desc_size(nseg));
    d->CS.Control = control;
    d->CS.ImmediateData = imm;
    d->CS.SegCount = (uint16_t)nseg;
    uint32_t total = 0;
    for (unsigned i = 0; i < nseg; i++) {
        VIP_DATA_SEGMENT *s = tl_seg(d, i);
        s->Data.Address = data[i];
        s->Handle = mh;
        s->Length = len[i];
        total += len[i];
    }
    d->CS.Length = total;
}

void tl_desc_1(VIP_DESCRIPTOR *d, void *data, uint32_t len, VIP_MEM_HANDLE mh)
{
    uint8_t *p = data;
    tl_desc_build(d, VIP_CONTROL_OP_SENDRECV, 0, 1, &p, &len, mh);
}

void tl_desc_split(VIP_DESCRIPTOR *d, uint8_t *data, uint32_t len, unsigned nseg,
                   VIP_MEM_HANDLE mh)
{
    uint8_t *ptr[VIA_MAX_SEGS + 8];
    uint32_t l[VIA_MAX_SEGS + 8];
    uint32_t off = 0;
    for (unsigned i = 0; i < nseg; i++) {
        uint32_t k = len / nseg + (i < len % nseg ? 1 : 0);
        ptr[i] = data + off;
        l[i] = k;
        off += k;
    }
    tl_desc_build(d, VIP_CONTROL_OP_SENDRECV, 0, nseg, ptr, l, mh);
}

void tl_fill(uint8_t *p, uint32_t len, uint32_t seq)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = tl_pat(seq, i);
}

long tl_verify(const uint8_t *p, uint32_t len, uint32_t seq)
{
    for (uint32_t i = 0; i < len; i++)
        if (p[i] != tl_pat(seq, i))
            return (long)i;
    return -1;
}

/* ---- VIs and addresses ------------------------------------------------------------------ */

VIP_RETURN tl_vi(struct tl_nic *t, VIP_RELIABILITY_LEVEL rel, VIP_CQ_HANDLE scq,
                 VIP_CQ_HANDLE rcq, VIP_VI_HANDLE *vi)
{
    VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = rel, .MaxTransferSize = t->attr.MaxTransferSize,
                           .Ptag = t->ptag};
    return VipCreateVi(t->nic, &a, scq, rcq, vi);
}

VIP_VI_STATE tl_vi_state(VIP_VI_HANDLE vi)
{
    VIP_VI_STATE s = (VIP_VI_STATE)-1;
    VIP_VI_ATTRIBUTES a;
    VIP_BOOLEAN se, re;
    if (VipQueryVi(vi, &s, &a, &se, &re) != VIP_SUCCESS)
        return (VIP_VI_STATE)-1;
    return s;
}

void tl_discrim(char out[17], const char *tag)
{
    static unsigned n;
    snprintf(out, 17, "t%x.%u%s", (unsigned)getpid(), n++, tag ? tag : "");
}

VIP_NET_ADDRESS *tl_addr(VIP_NIC_HANDLE nic, const char *host, const char *disc)
{
    size_t dl = disc ? strlen(disc) : 0;
    VIP_NET_ADDRESS *a = calloc(1, sizeof *a + 6 + dl);
    if (!a)
        return NULL;
    if (VipNSGetHostByName(nic, (VIP_CHAR *)tl_dev(host), a, 0) != VIP_SUCCESS ||
        a->HostAddressLen != 6) {
        free(a);
        return NULL;
    }
    a->DiscriminatorLen = (VIP_UINT16)dl;
    memcpy((uint8_t *)a + offsetof(VIP_NET_ADDRESS, HostAddress) + a->HostAddressLen, disc,
           dl);
    return a;
}

VIP_RETURN tl_accept(struct tl_nic *t, VIP_VI_HANDLE vi, const char *disc, VIP_ULONG timeout)
{
    VIP_NET_ADDRESS *local = tl_addr(t->nic, "localhost", disc);
    VIP_NET_ADDRESS *remote = calloc(1, sizeof *remote + 6 + VIA_MAX_DISCRIM);
    VIP_RETURN rc = VIP_ERROR_RESOURCE;
    VIP_CONN_HANDLE conn;
    VIP_VI_ATTRIBUTES ra;
    if (local && remote) {
        rc = VipConnectWait(t->nic, local, timeout, remote, &ra, &conn);
        if (rc == VIP_SUCCESS) {
            rc = VipConnectAccept(conn, vi);
            if (rc != VIP_SUCCESS && rc != VIP_ERROR_RESOURCE)
                VipConnectReject(conn);
        }
    }
    free(local);
    free(remote);
    return rc;
}

VIP_RETURN tl_request(struct tl_nic *t, VIP_VI_HANDLE vi, const char *host, const char *disc,
                      VIP_ULONG timeout)
{
    VIP_NET_ADDRESS *local = tl_addr(t->nic, "localhost", "");
    VIP_NET_ADDRESS *remote = tl_addr(t->nic, host, disc);
    VIP_RETURN rc = VIP_ERROR_RESOURCE;
    VIP_VI_ATTRIBUTES ra;
    /* As VIA programs do: VIP_NO_MATCH means the server does not wait yet. */
    uint64_t end = tl_now_ms() + timeout;
    unsigned pause_us = 500;
    while (local && remote) {
        rc = VipConnectRequest(vi, local, remote, timeout, &ra);
        if (rc != VIP_NO_MATCH || tl_now_ms() >= end)
            break;
        usleep(pause_us);
        if (pause_us < 8000)
            pause_us *= 2;
    }
    free(local);
    free(remote);
    return rc;
}

/* ---- child processes ------------------------------------------------------------------------ */

static int child_rep = -1, child_in = -1, child_out = -1;

void tl_child_fail(const char *file, int line, const char *fmt, ...)
{
    char buf[900];
    int n = snprintf(buf, sizeof buf, "[pid %d] %s:%d: ", (int)getpid(), file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strlen(buf);
    if (child_rep >= 0) {
        ssize_t w = write(child_rep, buf, len);
        (void)w;
    } else {
        fprintf(stderr, "%s\n", buf);
    }
    _exit(1);
}

int tl_spawn(struct tl_child *c, int (*fn)(void *), void *arg)
{
    int rep[2], down[2], up[2];
    memset(c, 0, sizeof *c);
    c->pid = -1;
    c->rep = c->to_child = c->to_parent = -1;
    if (pipe2(rep, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(down, O_CLOEXEC) < 0) {
        close(rep[0]);
        close(rep[1]);
        return -1;
    }
    if (pipe2(up, O_CLOEXEC) < 0) {
        close(rep[0]);
        close(rep[1]);
        close(down[0]);
        close(down[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        for (int i = 0; i < 2; i++) {
            close(rep[i]);
            close(down[i]);
            close(up[i]);
        }
        return -1;
    }
    if (pid == 0) {
        close(rep[0]);
        close(down[1]);
        close(up[0]);
        child_rep = rep[1];
        child_in = down[0];
        child_out = up[1];
        /* Die with the test program, whatever happens to it. */
        int rc = fn(arg);
        _exit(rc);
    }
    close(rep[1]);
    close(down[0]);
    close(up[1]);
    c->pid = pid;
    c->rep = rep[0];
    c->to_child = down[1];
    c->to_parent = up[0];
    return 0;
}

static int post_byte(int fd, char tok)
{
    for (;;) {
        ssize_t w = write(fd, &tok, 1);
        if (w == 1)
            return 0;
        if (w < 0 && errno == EINTR)
            continue;
        return -1;
    }
}

static int take_byte(int fd, int timeout_ms)
{
    if (fd < 0)
        return -1;
    if (timeout_ms < 0)
        timeout_ms = 30000;
    uint64_t deadline = tl_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = tl_now_ms();
        int left = now >= deadline ? 0 : (int)(deadline - now);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        unsigned char b;
        ssize_t n = read(fd, &b, 1);
        if (n == 1)
            return b;
        if (n < 0 && errno == EINTR)
            continue;
        return -1; /* EOF: the other side is gone */
    }
}

int tl_child_post(char tok)
{
    return post_byte(child_out, tok);
}

int tl_child_take(int timeout_ms)
{
    return take_byte(child_in, timeout_ms);
}

int tl_parent_post(struct tl_child *c, char tok)
{
    return post_byte(c->to_child, tok);
}

int tl_parent_take(struct tl_child *c, int timeout_ms)
{
    return take_byte(c->to_parent, timeout_ms);
}

static void close_fds(struct tl_child *c)
{
    if (c->rep >= 0)
        close(c->rep);
    if (c->to_child >= 0)
        close(c->to_child);
    if (c->to_parent >= 0)
        close(c->to_parent);
    c->rep = c->to_child = c->to_parent = -1;
}

static void drain_report(struct tl_child *c)
{
    if (c->rep < 0)
        return;
    size_t have = strlen(c->msg);
    fcntl(c->rep, F_SETFL, O_NONBLOCK);
    while (have + 1 < sizeof c->msg) {
        ssize_t n = read(c->rep, c->msg + have, sizeof c->msg - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    c->msg[have] = 0;
}

int tl_child_wait(struct tl_child *c, int timeout_ms)
{
    if (c->pid <= 0) {
        close_fds(c);
        return c->msg[0] ? -1 : 0;
    }
    uint64_t deadline = tl_now_ms() + (uint64_t)timeout_ms;
    int status = 0, timed_out = 0;
    for (;;) {
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid)
            break;
        if (r < 0 && errno != EINTR) {
            status = -1;
            break;
        }
        if (tl_now_ms() >= deadline) {
            timed_out = 1;
            kill(c->pid, SIGKILL);
            while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    c->pid = -1;
    drain_report(c);
    close_fds(c);
    size_t have = strlen(c->msg);
    if (timed_out) {
        snprintf(c->msg + have, sizeof c->msg - have, "%stimed out after %d ms (killed)",
                 have ? "; " : "", timeout_ms);
        return -1;
    }
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (status != -1 && WIFSIGNALED(status))
            snprintf(c->msg + have, sizeof c->msg - have, "%skilled by signal %d",
                     have ? "; " : "", WTERMSIG(status));
        else if (status != -1)
            snprintf(c->msg + have, sizeof c->msg - have, "%sexit status %d",
                     have ? "; " : "", WEXITSTATUS(status));
        return -1;
    }
    return have ? -1 : 0;
}

int tl_gather(struct tl_child *c, unsigned n, char tok, int timeout_ms, int (*tick)(void *),
              void *arg)
{
    enum { MAXC = 16 };
    if (n > MAXC)
        return -1;
    bool got[MAXC] = {false};
    unsigned have = 0;
    uint64_t deadline = tl_now_ms() + (uint64_t)timeout_ms;
    while (have < n) {
        struct pollfd p[MAXC];
        unsigned idx[MAXC], np = 0;
        for (unsigned i = 0; i < n; i++)
            if (!got[i]) {
                if (c[i].to_parent < 0)
                    return -1;
                p[np] = (struct pollfd){.fd = c[i].to_parent, .events = POLLIN};
                idx[np++] = i;
            }
        uint64_t now = tl_now_ms();
        if (now >= deadline)
            return -1;
        int ms = deadline - now < 200 ? (int)(deadline - now) : 200;
        int r = poll(p, np, ms);
        if (r < 0 && errno != EINTR)
            return -1;
        for (unsigned k = 0; r > 0 && k < np; k++) {
            if (!p[k].revents)
                continue;
            unsigned char b;
            ssize_t m = read(p[k].fd, &b, 1);
            if (m < 0 && errno == EINTR)
                continue;
            if (m != 1 || b != (unsigned char)tok)
                return -1; /* exited (EOF) or out of step */
            got[idx[k]] = true;
            have++;
        }
        if (have < n && tick && tick(arg))
            return -1;
    }
    return 0;
}

void tl_child_kill(struct tl_child *c)
{
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        int status;
        while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
            ;
        c->pid = -1;
    }
    close_fds(c);
}

/* ---- vipctl ----------------------------------------------------------------------------------- */

static void vipctl_path(char *out, size_t cap)
{
    const char *env = getenv("TL_VIPCTL");
    char dir[PATH_MAX - 32]; /* room for the rest of the path */
    if (env && *env)
        snprintf(out, cap, "%s", env);
    else if (tl_bindir(dir, sizeof dir) == 0)
        snprintf(out, cap, "%s/../bin/vipctl", dir);
    else
        snprintf(out, cap, "vipctl");
}

int tl_bindir(char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return snprintf(out, cap, "%s", self) < (int)cap ? 0 : -1;
}

int tl_vipctl(const char *args, char *out, size_t cap)
{
    char exe[PATH_MAX], cmd[PATH_MAX * 2 + 256];
    vipctl_path(exe, sizeof exe);
    const char *sock = getenv("VIPD_SOCKET");
    if (sock && *sock)
        snprintf(cmd, sizeof cmd, "'%s' -s '%s' %s 2>&1", exe, sock, args);
    else
        snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", exe, args);
    fflush(stdout);
    fflush(stderr);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    size_t have = 0;
    if (cap)
        out[0] = 0;
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) {
        if (cap && have + 1 < cap) {
            size_t k = n < cap - 1 - have ? n : cap - 1 - have;
            memcpy(out + have, tmp, k);
            have += k;
            out[have] = 0;
        }
    }
    int st = pclose(f);
    if (st < 0 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

const char *tl_profile_dir(void)
{
    const char *d = getenv("VIP_PROFILE_DIR");
    return d && *d ? d : "lanai-fw/profiles";
}

/*
 * test_fw_ofi.c - the NIC's libfabric frame transport (lanai-fw/link/fw_ofi.c)
 * between two processes over the default provider (tcp;ofi_rxm on
 * 127.0.0.1, an address of this machine only): frames of every size arrive
 * whole, once and in order, under a window of sends; oversized frames and a
 * provider that does not exist are refused with a reason.
 *
 * Each test forks an echo peer; the endpoints' names cross a socketpair.
 * Every wait is bounded (alarm in the peer, a deadline in the parent) and
 * the peer is reaped whatever happens.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fw_ofi.h"
#include "lib/tlib.h"

#define MAX_FRAME 65536u
#define NODE "127.0.0.1"
#define BOUND_S 60

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The frame of sequence number seq: its length and a pattern from seq. */
static uint32_t frame_len(uint32_t seq)
{
    static const uint32_t sizes[] = {4, 8, 60, 64, 200, 256, 257, 1000, 4096, 9000, 32768,
                                     MAX_FRAME};
    return sizes[seq % (sizeof sizes / sizeof sizes[0])];
}
static void fill(uint8_t *b, uint32_t len, uint32_t seq)
{
    memcpy(b, &seq, 4);
    for (uint32_t i = 4; i < len; i++)
        b[i] = (uint8_t)(seq * 7 + i);
}
static int check(const uint8_t *b, uint32_t len, uint32_t seq)
{
    uint32_t got;
    memcpy(&got, b, 4);
    if (got != seq || (len != frame_len(seq) && len != 60))
        return -1;
    for (uint32_t i = 4; i < len; i++)
        if (b[i] != (uint8_t)(seq * 7 + i))
            return -1;
    return 0;
}

/* Open an endpoint and trade names over fd. */
static struct fw_ofi *open_and_meet(int fd, uint64_t *peer)
{
    char err[256];
    struct fw_ofi *o = NULL;
    int rc = fw_ofi_open(&o, NODE, MAX_FRAME, err, sizeof err);
    if (rc) {
        fprintf(stderr, "  fw_ofi_open: %s\n", err);
        return NULL;
    }
    uint8_t name[FW_OFI_NAME_MAX], theirs[FW_OFI_NAME_MAX];
    size_t len = sizeof name;
    if (fw_ofi_name(o, name, &len) || write(fd, name, len) != (ssize_t)len ||
        read(fd, theirs, sizeof theirs) != (ssize_t)len || fw_ofi_peer(o, theirs, len, peer)) {
        fw_ofi_close(o);
        return NULL;
    }
    return o;
}

/* Send one frame, progressing (and handing received frames to keep) while
 * the provider is busy. */
static int send_frame(struct fw_ofi *o, uint64_t peer, const uint8_t *b, uint32_t len,
                      double deadline)
{
    for (;;) {
        int rc = fw_ofi_send(o, peer, b, 4, b + 4, len - 4);
        if (rc != -EAGAIN)
            return rc;
        if (now_s() > deadline)
            return -ETIMEDOUT;
        struct fw_ofi_rx none[1];
        if (fw_ofi_recv(o, none, 0) < 0)
            return -EIO;
    }
}

/* The peer: echo every frame back as it came, until a 4-byte frame of
 * UINT32_MAX; then wait for its sends to finish. */
static int echo_peer(int fd)
{
    alarm(BOUND_S);
    uint64_t peer;
    struct fw_ofi *o = open_and_meet(fd, &peer);
    if (!o)
        return 2;
    double deadline = now_s() + BOUND_S;
    int done = 0;
    while (!done && now_s() < deadline) {
        struct fw_ofi_rx rx[8];
        int n = fw_ofi_recv(o, rx, 8);
        if (n < 0)
            return 3;
        for (int i = 0; i < n; i++) {
            uint32_t seq;
            memcpy(&seq, rx[i].data, 4);
            if (rx[i].len == 4 && seq == UINT32_MAX)
                done = 1;
            else if (send_frame(o, peer, rx[i].data, rx[i].len, deadline))
                return 4;
            if (fw_ofi_repost(o, &rx[i]))
                return 5;
        }
    }
    while (fw_ofi_sends_pending(o) && now_s() < deadline) {
        struct fw_ofi_rx none[1];
        fw_ofi_recv(o, none, 0);
    }
    /* the parent may still be reading our last frames: stay until it says */
    char c;
    if (read(fd, &c, 1) != 1)
        return 6;
    fw_ofi_close(o);
    return done ? 0 : 7;
}

struct pair {
    pid_t pid;
    int fd;
    struct fw_ofi *o;
    uint64_t peer;
};

static int pair_start(struct pair *p)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return -1;
    p->pid = fork();
    if (p->pid == 0) {
        close(sv[0]);
        _exit(echo_peer(sv[1]));
    }
    close(sv[1]);
    p->fd = sv[0];
    p->o = p->pid > 0 ? open_and_meet(p->fd, &p->peer) : NULL;
    return p->o ? 0 : -1;
}

/* Tell the peer to stop; its exit status (0 is a clean echo). */
static int pair_stop(struct pair *p)
{
    int status = -1;
    if (p->o) {
        uint32_t stop = UINT32_MAX;
        send_frame(p->o, p->peer, (uint8_t *)&stop, 4, now_s() + 10);
        double deadline = now_s() + 10;
        while (fw_ofi_sends_pending(p->o) && now_s() < deadline) {
            struct fw_ofi_rx none[1];
            fw_ofi_recv(p->o, none, 0);
        }
    }
    if (write(p->fd, "x", 1) != 1)
        kill(p->pid, SIGKILL);
    double deadline = now_s() + 20;
    while (waitpid(p->pid, &status, WNOHANG) == 0) {
        if (now_s() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            break;
        }
        usleep(1000);
    }
    close(p->fd);
    fw_ofi_close(p->o);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Ping-pong: every size up to the largest frame, each echoed intact. */
static void test_ofi_pingpong(void)
{
    struct pair p;
    CU_ASSERT_EQUAL_FATAL(pair_start(&p), 0);
    CU_ASSERT_STRING_NOT_EQUAL(fw_ofi_provider(p.o), "");
    static uint8_t buf[MAX_FRAME];
    double deadline = now_s() + BOUND_S;
    int bad = 0, lost = 0;
    for (uint32_t seq = 0; seq < 600 && !bad && !lost; seq++) {
        uint32_t len = frame_len(seq);
        fill(buf, len, seq);
        CU_ASSERT_EQUAL_FATAL(send_frame(p.o, p.peer, buf, len, deadline), 0);
        struct fw_ofi_rx rx;
        int n = 0;
        while ((n = fw_ofi_recv(p.o, &rx, 1)) == 0 && now_s() < deadline)
            ;
        if (n != 1) {
            lost = 1;
            break;
        }
        bad = check(rx.data, rx.len, seq);
        fw_ofi_repost(p.o, &rx);
    }
    CU_ASSERT_EQUAL(lost, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(pair_stop(&p), 0);
}

/* A window of sends (more than the send slots and the peer's receives):
 * every frame comes back once, in order, intact. */
static void test_ofi_stream_in_order(void)
{
    struct pair p;
    CU_ASSERT_EQUAL_FATAL(pair_start(&p), 0);
    static uint8_t buf[MAX_FRAME];
    const uint32_t total = 5000, window = 3 * FW_OFI_NRECV;
    uint32_t sent = 0, got = 0;
    int bad = 0;
    double deadline = now_s() + BOUND_S;
    while (got < total && !bad && now_s() < deadline) {
        while (sent < total && sent - got < window) {
            /* small and mid-sized frames: a stream, not a bulk test */
            uint32_t len = frame_len(sent) > 9000 ? 1000 : frame_len(sent);
            fill(buf, len, sent);
            memcpy(buf, &sent, 4);
            int rc = fw_ofi_send(p.o, p.peer, buf, 4, buf + 4, len - 4);
            if (rc == -EAGAIN)
                break;
            CU_ASSERT_EQUAL_FATAL(rc, 0);
            sent++;
        }
        struct fw_ofi_rx rx[16];
        int n = fw_ofi_recv(p.o, rx, 16);
        CU_ASSERT_FATAL(n >= 0);
        for (int i = 0; i < n; i++) {
            uint32_t seq;
            memcpy(&seq, rx[i].data, 4);
            uint32_t want = frame_len(got) > 9000 ? 1000 : frame_len(got);
            if (seq != got || rx[i].len != want)
                bad = 1;
            got++;
            fw_ofi_repost(p.o, &rx[i]);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(got, total);
    CU_ASSERT_EQUAL(pair_stop(&p), 0);
}

/* Too big for the endpoint: refused, nothing sent; bad arguments too. */
static void test_ofi_refusals(void)
{
    char err[256] = "";
    struct fw_ofi *o = NULL;
    CU_ASSERT_EQUAL(fw_ofi_open(&o, NODE, 16, err, sizeof err), -EINVAL);
    CU_ASSERT_PTR_NULL(o);
    CU_ASSERT(strstr(err, "too small") != NULL);
    CU_ASSERT_EQUAL_FATAL(fw_ofi_open(&o, NODE, 4096, err, sizeof err), 0);
    static uint8_t big[8192];
    CU_ASSERT_EQUAL(fw_ofi_send(o, 0, big, 64, big, 8192 - 64 + 1), -EMSGSIZE);
    struct fw_ofi_rx rx = {.slot = FW_OFI_NRECV};
    CU_ASSERT_EQUAL(fw_ofi_repost(o, &rx), -EINVAL);
    CU_ASSERT_EQUAL(fw_ofi_sends_pending(o), 0);
    fw_ofi_close(o);
}

/* FI_PROVIDER names a provider that does not exist: a sentence naming it.
 * libfabric reads FI_PROVIDER once per process, so a fresh one checks. */
static void test_ofi_unknown_provider(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(BOUND_S);
        setenv("FI_PROVIDER", "no-such-provider", 1);
        /* this program's path (under valgrind /proc/self/exe is valgrind) */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            _exit(8);
        self[n] = 0;
        char *argv[] = {self, "--ofi-bad-provider", NULL};
        execv(self, argv);
        _exit(9);
    }
    int status = -1;
    CU_ASSERT_EQUAL_FATAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT_TRUE(WIFEXITED(status));
    CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
}

static int bad_provider_main(void)
{
    char err[256] = "";
    struct fw_ofi *o = NULL;
    int rc = fw_ofi_open(&o, NODE, 4096, err, sizeof err);
    if (rc == 0 || o) {
        fprintf(stderr, "  an unknown provider was accepted\n");
        return 1;
    }
    if (!strstr(err, "no-such-provider")) {
        fprintf(stderr, "  the reason does not name the provider: %s\n", err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ofi-bad-provider") == 0)
        return bad_provider_main();
    static const struct tl_test tests[] = {
        TL_TEST(test_ofi_refusals),
        TL_TEST(test_ofi_pingpong),
        TL_TEST(test_ofi_stream_in_order),
        TL_TEST(test_ofi_unknown_provider),
        TL_END,
    };
    return tl_main(argc, argv, "libfabric link", tests);
}

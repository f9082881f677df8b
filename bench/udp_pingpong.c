/*
 * udp_pingpong - the reference for the UDP link between hosts: plain UDP
 * between two processes on 127.0.0.1, as fast as a program without VIA
 * gets it, measured the way the VIPL benchmarks measure.
 *
 *   udp_pingpong lat SIZE ITERS   ping-pong of SIZE-byte datagrams, both
 *                                 ends busy-polling (recv MSG_DONTWAIT);
 *                                 prints the median one-way latency (RTT/2)
 *   udp_pingpong bw SIZE COUNT    COUNT messages of SIZE bytes streamed in
 *                                 16 KiB datagrams (sendmmsg/recvmmsg
 *                                 batches), the receiver handing back a
 *                                 credit per MiB so that nothing overflows;
 *                                 both ends block when they must wait (the
 *                                 faster choice when two cores are shared);
 *                                 prints MB/s (10^6 bytes/s) at the receiver
 *
 * Output: one line "udp_pingpong lat SIZE MEDIAN_US" or "... bw SIZE MBPS".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DGRAM 16384u
#define BATCH 32u
#define CREDIT_BYTES (1u << 20)
#define WINDOW_BYTES (4u << 20)

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int sock_bound(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int sz = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
        die("socket");
    *port = ntohs(sa.sin_port);
    return fd;
}

static void sock_connect(int fd, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("connect");
}

static ssize_t recv_spin(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
        if (n >= 0 || (errno != EAGAIN && errno != EINTR))
            return n;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void lat(int fd, bool client, uint32_t size, unsigned iters)
{
    uint8_t *buf = calloc(1, size ? size : 1);
    uint64_t *rtt = calloc(iters, sizeof *rtt);
    for (unsigned i = 0; i < iters + iters / 10; i++) {
        uint64_t t0 = now_ns();
        if (client && send(fd, buf, size, 0) < 0)
            die("send");
        if (recv_spin(fd, buf, size ? size : 1) < 0)
            die("recv");
        if (!client && send(fd, buf, size, 0) < 0)
            die("send");
        if (client && i >= iters / 10)
            rtt[i - iters / 10] = now_ns() - t0;
    }
    if (client) {
        qsort(rtt, iters, sizeof *rtt, cmp_u64);
        printf("udp_pingpong lat %u %.3f\n", size, rtt[iters / 2] / 2000.0);
    }
    free(buf);
    free(rtt);
}

static void bw(int fd, bool client, uint32_t size, unsigned count)
{
    static uint8_t data[BATCH][DGRAM];
    uint64_t total = (uint64_t)size * count;
    if (client) { /* the sender */
        uint64_t sent = 0, credited = 0;
        while (sent < total) {
            struct mmsghdr m[BATCH];
            struct iovec iov[BATCH];
            unsigned k = 0;
            while (k < BATCH && sent < total && sent - credited < WINDOW_BYTES) {
                uint32_t n = total - sent < DGRAM ? (uint32_t)(total - sent) : DGRAM;
                iov[k] = (struct iovec){data[k], n};
                m[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[k], .msg_iovlen = 1}};
                sent += n;
                k++;
            }
            if (k && sendmmsg(fd, m, k, 0) != (int)k)
                die("sendmmsg");
            uint64_t c;
            while ((sent - credited >= WINDOW_BYTES || sent == total) && credited < total) {
                if (recv(fd, &c, sizeof c, 0) == sizeof c) /* blocks: the CPU is the receiver's */
                    credited = c;
            }
            while (recv(fd, &c, sizeof c, MSG_DONTWAIT) == sizeof c)
                credited = c;
        }
        return;
    }
    uint64_t got = 0, next_credit = CREDIT_BYTES, t0 = 0;
    while (got < total) {
        struct mmsghdr m[BATCH];
        struct iovec iov[BATCH];
        for (unsigned i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){data[i], DGRAM};
            m[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[i], .msg_iovlen = 1}};
        }
        int r = recvmmsg(fd, m, BATCH, MSG_WAITFORONE, NULL);
        if (r <= 0)
            continue;
        if (!t0)
            t0 = now_ns();
        for (int i = 0; i < r; i++)
            got += m[i].msg_len;
        if (got >= next_credit || got >= total) {
            if (send(fd, &got, sizeof got, 0) < 0)
                die("send");
            next_credit = got + CREDIT_BYTES;
        }
    }
    double s = (now_ns() - t0) / 1e9;
    printf("udp_pingpong bw %u %.1f\n", size, total / s / 1e6);
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "lat") && strcmp(argv[1], "bw"))) {
        fprintf(stderr, "usage: udp_pingpong lat SIZE ITERS | bw SIZE COUNT\n");
        return 2;
    }
    uint32_t size = (uint32_t)strtoul(argv[2], NULL, 0);
    unsigned n = (unsigned)strtoul(argv[3], NULL, 0);
    if (!n || size > (64u << 20) || (!strcmp(argv[1], "lat") && size > 65000)) {
        fprintf(stderr, "udp_pingpong: bad SIZE or count\n");
        return 2;
    }
    uint16_t pa, pb;
    int a = sock_bound(&pa), b = sock_bound(&pb);
    sock_connect(a, pb);
    sock_connect(b, pa);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    bool client = pid != 0;
    int fd = client ? a : b;
    close(client ? b : a);
    /* bw: the child is the sender (client), the parent receives and prints */
    if (!strcmp(argv[1], "lat"))
        lat(fd, client, size, n);
    else
        bw(fd, !client, size, n);
    if (client)
        waitpid(pid, NULL, 0);
    return 0;
}

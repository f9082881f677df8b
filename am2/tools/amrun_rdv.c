/*
 * amrun_rdv.c - amrun's side of the SPMD rendezvous over TCP (layout in
 * am2/src/am_rdv.h): ranks on other hosts send their endpoint names here;
 * when all have come, each gets the whole table.
 *
 * It runs inside amrun's wait loop (amrun_rdv_step instead of a sleep),
 * so it never blocks the loop for long: connections are read without
 * blocking as bytes come; only the final table is written blocking, with
 * a bound. A connection that sends something wrong is closed; a rank may
 * then connect again.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../src/am_rdv.h"
#include "amrun_rdv.h"

#define MAX_CONN 64 /* connections being read at once */

struct conn {
    int fd;
    size_t got;
    uint8_t buf[sizeof(struct am_rdv_hello) + AM_RDV_MAX_NAME];
};

static struct {
    int lfd, nranks, in;
    uint64_t cookie;
    uint32_t len;            /* the name length of the first good hello */
    struct conn c[MAX_CONN];
    int *rank_fd;            /* the connection of each rank that said hello */
    uint8_t *names;          /* nranks * len */
    int done;
} R = {.lfd = -1};

static uint64_t random64(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &v, sizeof v) != (ssize_t)sizeof v) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        v = (uint64_t)t.tv_nsec * 6364136223846793005ull ^ (uint64_t)getpid() << 32;
    }
    if (fd >= 0)
        close(fd);
    return v;
}

int amrun_rdv_open(int nranks, char *addr, size_t cap)
{
    R.nranks = nranks;
    R.rank_fd = malloc((size_t)nranks * sizeof *R.rank_fd);
    R.names = calloc((size_t)nranks, AM_RDV_MAX_NAME);
    if (!R.rank_fd || !R.names)
        return -1;
    for (int i = 0; i < nranks; i++)
        R.rank_fd[i] = -1;
    for (int i = 0; i < MAX_CONN; i++)
        R.c[i].fd = -1;
    R.cookie = random64();
    R.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t sl = sizeof sa;
    if (R.lfd < 0 || bind(R.lfd, (struct sockaddr *)&sa, sizeof sa) || listen(R.lfd, 128) ||
        getsockname(R.lfd, (struct sockaddr *)&sa, &sl))
        return -1;
    char host[256];
    const char *h = getenv("AMRUN_RDV_HOST"); /* the name the ranks reach us by */
    if (!h || !*h) {
        if (gethostname(host, sizeof host))
            return -1;
        host[sizeof host - 1] = 0;
        h = host;
    }
    snprintf(addr, cap, "%s:%u:%016llx", h, (unsigned)ntohs(sa.sin_port),
             (unsigned long long)R.cookie);
    return 0;
}

static void drop(struct conn *c)
{
    close(c->fd);
    c->fd = -1;
    c->got = 0;
}

/* A hello and its name are complete: keep the connection for the answer. */
static void hello(struct conn *c)
{
    struct am_rdv_hello h;
    memcpy(&h, c->buf, sizeof h);
    if (h.rank >= (uint32_t)R.nranks || R.rank_fd[h.rank] >= 0) {
        drop(c);
        return;
    }
    if (!R.len)
        R.len = h.len;
    memcpy(R.names + (size_t)h.rank * R.len, c->buf + sizeof h, R.len);
    R.rank_fd[h.rank] = c->fd;
    c->fd = -1;
    c->got = 0;
    R.in++;
}

static void readable(struct conn *c)
{
    ssize_t k = recv(c->fd, c->buf + c->got, sizeof c->buf - c->got, MSG_DONTWAIT);
    if (k <= 0) {
        if (k == 0 || (errno != EAGAIN && errno != EINTR))
            drop(c);
        return;
    }
    c->got += (size_t)k;
    if (c->got < sizeof(struct am_rdv_hello))
        return;
    struct am_rdv_hello h;
    memcpy(&h, c->buf, sizeof h);
    if (h.magic != AM_RDV_MAGIC || h.cookie != R.cookie || h.nranks != (uint32_t)R.nranks ||
        !h.len || h.len > AM_RDV_MAX_NAME || (R.len && h.len != R.len) ||
        c->got > sizeof h + h.len) {
        drop(c);
        return;
    }
    if (c->got == sizeof h + h.len)
        hello(c);
}

/* amrun's environment as the ranks get it: NUL-terminated VAR=value
 * strings, at most AM_RDV_MAX_ENV bytes (what does not fit is left out). */
size_t amrun_env_block(char *out, size_t cap)
{
    extern char **environ;
    size_t n = 0;
    for (char **e = environ; *e; e++) {
        size_t l = strlen(*e) + 1;
        if (n + l > cap)
            break;
        memcpy(out + n, *e, l);
        n += l;
    }
    return n;
}

static int send_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* All are in: every rank gets the table and the environment (a rank that
 * cannot take them in 5 s is left to fail its start-up). */
static void answer(void)
{
    size_t n = (size_t)R.nranks * R.len;
    static char env[AM_RDV_MAX_ENV];
    uint32_t envlen = (uint32_t)amrun_env_block(env, sizeof env);
    for (int i = 0; i < R.nranks; i++) {
        int fd = R.rank_fd[i];
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (!send_all(fd, R.names, n) && !send_all(fd, &envlen, sizeof envlen))
            send_all(fd, env, envlen);
        close(fd);
        R.rank_fd[i] = -1;
    }
    R.done = 1;
}

void amrun_rdv_step(int timeout_ms)
{
    if (R.lfd < 0 || R.done) {
        poll(NULL, 0, timeout_ms);
        return;
    }
    struct pollfd pf[MAX_CONN + 1];
    int idx[MAX_CONN + 1], n = 0;
    pf[n] = (struct pollfd){.fd = R.lfd, .events = POLLIN};
    idx[n++] = -1;
    for (int i = 0; i < MAX_CONN; i++)
        if (R.c[i].fd >= 0) {
            pf[n] = (struct pollfd){.fd = R.c[i].fd, .events = POLLIN};
            idx[n++] = i;
        }
    if (poll(pf, (nfds_t)n, timeout_ms) <= 0)
        return;
    for (int k = 1; k < n; k++)
        if (pf[k].revents)
            readable(&R.c[idx[k]]);
    if (pf[0].revents & POLLIN) {
        int fd;
        while ((fd = accept4(R.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
            int i = 0;
            while (i < MAX_CONN && R.c[i].fd >= 0)
                i++;
            if (i == MAX_CONN) {
                close(fd); /* too many at once: it will fail, and ask again */
                continue;
            }
            R.c[i].fd = fd;
            R.c[i].got = 0;
        }
    }
    if (R.in == R.nranks)
        answer();
}

void amrun_rdv_close(void)
{
    for (int i = 0; i < MAX_CONN; i++)
        if (R.c[i].fd >= 0)
            drop(&R.c[i]);
    for (int i = 0; R.rank_fd && i < R.nranks; i++)
        if (R.rank_fd[i] >= 0)
            close(R.rank_fd[i]);
    if (R.lfd >= 0)
        close(R.lfd);
    R.lfd = -1;
    free(R.rank_fd);
    free(R.names);
    R.rank_fd = NULL;
    R.names = NULL;
}

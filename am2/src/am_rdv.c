/*
 * am_rdv.c - a rank's side of the TCP rendezvous (am_rdv.h): send my
 * endpoint name to amrun, get every rank's back. Used by am2_spmd_startup
 * when AM2_SPMD_RDV is set (amrun --hosts), instead of the job directory.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "am_int.h"
#include "am_rdv.h"

/* "HOST:PORT:COOKIE" (HOST may be a name or an IPv4 address). */
static int parse(const char *rdv, char *host, size_t cap, char *port, uint64_t *cookie)
{
    const char *c2 = strrchr(rdv, ':');
    if (!c2 || c2 == rdv)
        return -1;
    const char *c1 = c2 - 1;
    while (c1 > rdv && *c1 != ':')
        c1--;
    if (*c1 != ':' || c1 == rdv || (size_t)(c1 - rdv) >= cap || c2 - c1 - 1 > 7)
        return -1;
    memcpy(host, rdv, (size_t)(c1 - rdv));
    host[c1 - rdv] = 0;
    memcpy(port, c1 + 1, (size_t)(c2 - c1 - 1));
    port[c2 - c1 - 1] = 0;
    char *end;
    errno = 0;
    *cookie = strtoull(c2 + 1, &end, 16);
    return errno || *end || end == c2 + 1 ? -1 : 0;
}

static int dial(const char *host, const char *port, uint64_t deadline)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai))
        return -1;
    int fd = -1;
    /* amrun listens before it starts the ranks: retry only briefly, for a
     * network that is slow to come up. */
    while (fd < 0 && am_now_ms() < deadline) {
        for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
            fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) {
                close(fd);
                fd = -1;
            }
        }
        if (fd < 0)
            nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
    freeaddrinfo(ai);
    return fd;
}

/* All of n bytes, or -1 by the deadline. */
static int io_all(int fd, void *buf, size_t n, bool out, uint64_t deadline)
{
    uint8_t *p = buf;
    while (n) {
        uint64_t now = am_now_ms();
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) <= 0)
            return -1;
        ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int am_rdv_exchange(const char *rdv, int rank, int nranks, const en_t *me, en_t *all,
                    char **env, size_t *envlen, uint64_t deadline)
{
    char host[256], port[8];
    uint64_t cookie;
    if (parse(rdv, host, sizeof host, port, &cookie))
        return am_fail(AM_ERR_BAD_ARG, "AM2_SPMD_RDV '%s' is not HOST:PORT:COOKIE", rdv);
    int fd = dial(host, port, deadline);
    if (fd < 0)
        return am_fail(AM_ERR_RESOURCE, "cannot reach amrun's rendezvous at %s:%s", host, port);
    struct am_rdv_hello h = {.magic = AM_RDV_MAGIC,
                             .rank = (uint32_t)rank,
                             .nranks = (uint32_t)nranks,
                             .len = sizeof *me,
                             .cookie = cookie};
    uint32_t n = 0;
    *env = NULL;
    int r = io_all(fd, &h, sizeof h, true, deadline) ||
            io_all(fd, (void *)me, sizeof *me, true, deadline) ||
            io_all(fd, all, sizeof *all * (size_t)nranks, false, deadline) ||
            io_all(fd, &n, sizeof n, false, deadline) || n > AM_RDV_MAX_ENV ||
            !(*env = malloc((size_t)n + 1)) || io_all(fd, *env, n, false, deadline);
    close(fd);
    if (!r) {
        (*env)[n] = 0;
        *envlen = n;
    } else {
        free(*env);
        *env = NULL;
    }
    if (r)
        return am_fail(AM_ERR_RESOURCE, "the rendezvous at %s:%s did not answer with %d names",
                       host, port, nranks);
    return AM_OK;
}

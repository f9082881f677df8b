/*
 * ctl_sock.c - framing of the control channel (see ctl_sock.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ctl_sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int ctl_send(int sock, const void *hdr, size_t hdr_len, const void *body, size_t body_len,
             const int *fds, int nfds)
{
    struct iovec iov[2] = {{(void *)hdr, hdr_len}, {(void *)body, body_len}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = body_len ? 2 : 1};
    if (nfds > CTL_MAX_FDS)
        return -EINVAL;
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    size_t total = hdr_len + body_len, sent = 0;
    while (sent < total) {
        ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        sent += (size_t)n;
        if (sent >= total)
            break;
        /* Partial write: the fds went with the first chunk; send the rest. */
        m.msg_control = NULL;
        m.msg_controllen = 0;
        size_t skip = (size_t)n;
        while (m.msg_iovlen && skip >= m.msg_iov[0].iov_len) {
            skip -= m.msg_iov[0].iov_len;
            m.msg_iov++;
            m.msg_iovlen--;
        }
        if (m.msg_iovlen) {
            m.msg_iov[0].iov_base = (char *)m.msg_iov[0].iov_base + skip;
            m.msg_iov[0].iov_len -= skip;
        }
    }
    return 0;
}

static int read_full(int sock, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(sock, (char *)buf + got, len - got, 0);
        if (n == 0)
            return -ECONNRESET;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    return 0;
}

long ctl_recv(int sock, void *hdr, size_t hdr_len, void *body, size_t body_cap, int *fds,
              int *nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {hdr, hdr_len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    int cap = nfds ? *nfds : 0, got_fds = 0;
    ssize_t n;
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return -ECONNRESET;
    if (n < 0)
        return -errno;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int tmp[CTL_MAX_FDS];
        if (k > CTL_MAX_FDS)
            k = CTL_MAX_FDS;
        memcpy(tmp, CMSG_DATA(c), sizeof(int) * (size_t)k);
        for (int i = 0; i < k; i++) {
            if (got_fds < cap)
                fds[got_fds++] = tmp[i];
            else
                close(tmp[i]); /* more fds than asked for: never leak them */
        }
    }
    if (nfds)
        *nfds = got_fds;
    int rc = 0;
    if ((size_t)n < hdr_len)
        rc = read_full(sock, (char *)hdr + n, hdr_len - (size_t)n);
    if (rc < 0)
        goto fail;
    uint32_t blen;
    memcpy(&blen, (char *)hdr + 4, sizeof blen);
    if (blen > body_cap) {
        char sink[4096];
        for (uint32_t left = blen; left > 0;) {
            uint32_t k = left < sizeof sink ? left : (uint32_t)sizeof sink;
            if ((rc = read_full(sock, sink, k)) < 0)
                goto fail;
            left -= k;
        }
        rc = -EMSGSIZE;
        goto fail;
    }
    if (blen && (rc = read_full(sock, body, blen)) < 0)
        goto fail;
    return (long)blen;
fail:
    for (int i = 0; i < got_fds; i++)
        close(fds[i]);
    if (nfds)
        *nfds = 0;
    return rc;
}

static _Thread_local char refusal[768];

const char *ctl_refusal(void)
{
    return refusal;
}

/* The directory of path, into dir. */
static void dir_of(const char *path, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
}

/* root_only: the system socket, which only root may have made. */
static bool trusted_uid(uid_t u, bool root_only)
{
    return u == 0 || (!root_only && u == getuid());
}

static const char *trusted_name(bool root_only)
{
    return root_only ? "root" : "us or root";
}

/* Before a byte goes to whoever listens at path: the directory must be a
 * real directory (not a link) of ours or root's that nobody else can
 * write to, or a sticky one; and the socket must be ours or root's. A
 * path another user could have planted fails here. */
static int path_trusted(const char *path, bool root_only)
{
    char dir[512];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP || e == ENOTDIR) {
            snprintf(refusal, sizeof refusal, "%s is a symbolic link or not a directory", dir);
            return -EACCES;
        }
        return -e;
    }
    struct stat st;
    int rc = fstat(fd, &st);
    close(fd);
    if (rc < 0)
        return -errno;
    if (!trusted_uid(st.st_uid, root_only)) {
        snprintf(refusal, sizeof refusal, "%s belongs to uid %u, not to %s", dir,
                 (unsigned)st.st_uid, trusted_name(root_only));
        return -EACCES;
    }
    if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
        snprintf(refusal, sizeof refusal, "others may write to %s (mode %o)", dir,
                 (unsigned)(st.st_mode & 07777));
        return -EACCES;
    }
    if (lstat(path, &st) < 0)
        return -errno;
    if (!S_ISSOCK(st.st_mode) || !trusted_uid(st.st_uid, root_only)) {
        snprintf(refusal, sizeof refusal, "%s is not a socket of %s (uid %u)", path,
                 root_only ? "root's" : "ours or root's", (unsigned)st.st_uid);
        return -EACCES;
    }
    return 0;
}

static int connect_checked(const char *path, bool root_only)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    refusal[0] = 0;
    if (strlen(path) >= sizeof a.sun_path)
        return -ENAMETOOLONG;
    int rc = path_trusted(path, root_only);
    if (rc < 0)
        return rc;
    strcpy(a.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -errno;
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(s);
        return -e;
    }
    /* Whoever answers must be ours or root's, whatever the path said. */
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
        !trusted_uid(cr.uid, root_only)) {
        snprintf(refusal, sizeof refusal, "the process answering at %s runs as uid %u", path,
                 (unsigned)cr.uid);
        close(s);
        return -EPERM;
    }
    return s;
}

int ctl_connect(const char *path)
{
    return connect_checked(path, false);
}

int ctl_connect_root(const char *path)
{
    return connect_checked(path, true);
}

char *ctl_socket_path(char *buf, size_t cap)
{
    const char *env = getenv("VIPD_SOCKET");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (env && *env)
        snprintf(buf, cap, "%s", env);
    else if (xdg && *xdg)
        snprintf(buf, cap, "%s/vipd/vipd.sock", xdg);
    else
        snprintf(buf, cap, "/tmp/vipd-%u/vipd.sock", (unsigned)getuid());
    return buf;
}

int ctl_make_socket_dir(const char *path)
{
    char dir[512];
    dir_of(path, dir, sizeof dir);
    if (!strcmp(dir, "/") || !strcmp(dir, "."))
        return 0;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    /* Not through a link, and the directory we checked is the one we fix. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0)
        rc = -errno;
    else if (st.st_uid != getuid())
        rc = -EPERM; /* someone else's directory: refuse to use it */
    else if (st.st_mode & S_ISVTX)
        ; /* a shared sticky directory (root's /tmp): nobody else can rename
             or remove our socket there, and its mode is not ours to change */
    else if ((st.st_mode & 0777) != 0700 && fchmod(fd, 0700) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

char *ctl_system_socket_path(char *buf, size_t cap)
{
    const char *env = getenv("VIPD_SYSTEM_SOCKET");
    snprintf(buf, cap, "%s", env && *env ? env : CTL_SYSTEM_SOCKET);
    return buf;
}

/* Is there anything at path (a live or a stale socket, or a trap: the
 * connect checks judge it)? */
static bool present(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

bool ctl_socket_find(char *buf, size_t cap)
{
    const char *env = getenv("VIPD_SOCKET");
    ctl_socket_path(buf, cap);
    if ((env && *env) || present(buf))
        return false;
    char sys[512];
    ctl_system_socket_path(sys, sizeof sys);
    if (!present(sys))
        return false;
    snprintf(buf, cap, "%s", sys);
    return true;
}

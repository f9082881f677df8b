/*
 * thosts.c - emulated hosts for a test (thosts.h).
 */
#include "thosts.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A TCP port of 127.0.0.1 nobody uses now (the kernel's pick). */
static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    uint16_t p = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        p = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return p;
}

int thosts_keygen(const char *path)
{
    const char *ctl = getenv("TL_VIPCTL");
    char cmd[PATH_MAX + 256];
    if (!ctl || !*ctl)
        return -1;
    snprintf(cmd, sizeof cmd, "'%s' keygen '%s' >/dev/null", ctl, path);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *host_words[THOSTS_MAX];

void thosts_host_words(unsigned i, const char *words)
{
    if (i < THOSTS_MAX)
        host_words[i] = words;
}

static int start_once(struct thosts *h, unsigned n, const char *const *extra)
{
    memset(h, 0, sizeof *h);
    if (n < 1 || n > THOSTS_MAX)
        return -1;
    snprintf(h->dir, sizeof h->dir, "/tmp/vipl-hosts.XXXXXX");
    if (!mkdtemp(h->dir))
        return -1;
    snprintf(h->file, sizeof h->file, "%s/hosts", h->dir);
    FILE *f = fopen(h->file, "w");
    if (!f)
        goto fail;
    for (unsigned i = 0; i < n; i++) {
        h->port[i] = free_port();
        fprintf(f, "host%u 127.0.0.1:%u %s\n", i, h->port[i], host_words[i] ? host_words[i] : "");
    }
    fclose(f);
    /* The cluster key the vipds prove themselves with, made as a user
     * makes it (vipd finds it beside the hosts file). */
    snprintf(h->key, sizeof h->key, "%s/vipd.key", h->dir);
    if (thosts_keygen(h->key) != 0)
        goto fail;
    for (unsigned i = 0; i < n; i++) {
        char listen[32];
        snprintf(listen, sizeof listen, "127.0.0.1:%u", h->port[i]);
        const char *argv[16] = {"--listen", listen, "--hosts", h->file};
        unsigned a = 4;
        /* THOSTS_LINK=ofi runs the same tests over the libfabric link */
        const char *link = getenv("THOSTS_LINK");
        if (link && *link) {
            argv[a++] = "--link";
            argv[a++] = link;
        }
        for (unsigned k = 0; extra && extra[k] && a < 15; k++)
            argv[a++] = extra[k];
        argv[a] = NULL;
        if (tvipd_start(&h->v[i], argv, 0) != 0)
            goto fail;
        h->n = i + 1;
        snprintf(h->sock[i], sizeof h->sock[i], "%s", h->v[i].sock);
    }
    return 0;
fail:
    thosts_stop(h);
    return -1;
}

int thosts_start(struct thosts *h, unsigned n, const char *const *extra)
{
    /* A port found free may be taken before vipd binds it: try again. */
    for (int tries = 0; tries < 3; tries++)
        if (start_once(h, n, extra) == 0)
            return 0;
    return -1;
}

void thosts_stop(struct thosts *h)
{
    /* In reverse: each puts back the VIPD_SOCKET it found. */
    const char *keep = getenv("THOSTS_KEEP_LOGS"); /* a directory: the vipds' logs go there */
    for (unsigned i = h->n; i-- > 0;) {
        if (keep && h->v[i].log[0]) {
            char cmd[400];
            snprintf(cmd, sizeof cmd, "cp '%s' '%s/vipd-%d-host%u.log' 2>/dev/null", h->v[i].log,
                     keep, (int)h->v[i].pid, i);
            if (system(cmd) != 0) {
                /* a log we could not keep is no reason to fail */
            }
        }
        tvipd_stop(&h->v[i]);
    }
    h->n = 0;
    if (h->file[0])
        unlink(h->file);
    if (h->key[0])
        unlink(h->key);
    if (h->dir[0])
        rmdir(h->dir);
    h->file[0] = h->dir[0] = h->key[0] = 0;
}

void thosts_use(const struct thosts *h, unsigned i)
{
    setenv("VIPD_SOCKET", h->sock[i], 1);
}

void thosts_quick_failures(void)
{
    setenv("VIPD_HOST_TIMEOUT_MS", "2000", 1);
    setenv("VIPD_HB_MS", "200", 1);
    setenv("VIP_NET_TIMEOUT_MS", "2000", 1);
}

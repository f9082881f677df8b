/*
 * kd_reply.c - answers to clients: a request's reply (status, reason, body,
 * file descriptors) as its handler builds it, and replies sent later or to
 * another client (deferred waits, the other side of a connection).
 *
 * Every handler and every object module may call these; they call only
 * the log (kd_core.c) and the control socket's framing (ctl_send).
 */
#include "kd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "via_spec.h"

int kd_fail(struct kd_reply *r, int32_t status, const char *fmt, ...)
{
    r->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    return status;
}

void *kd_body(struct kd_reply *r, size_t len)
{
    void *p = r->small;
    if (len > sizeof r->small) {
        p = r->heap = calloc(1, len);
        if (!p) {
            kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory (%zu-byte reply)", len);
            return NULL;
        }
    } else {
        memset(p, 0, len);
    }
    r->body = p;
    r->len = len;
    return p;
}

void kd_add_fd(struct kd_reply *r, int fd, bool close_after)
{
    if (r->nfds < CTL_MAX_FDS) {
        r->fds[r->nfds] = fd;
        r->close_fd[r->nfds++] = close_after;
    }
}

void kd_send_reply(struct kd_client *c, uint64_t cookie, int32_t status, const char *msg,
                   const void *body, size_t len, const int *fds, int nfds)
{
    if (!c || c->dead)
        return;
    struct via_ctl_reply_hdr h = {.status = status, .len = (uint32_t)len, .cookie = cookie};
    if (msg)
        snprintf(h.msg, sizeof h.msg, "%s", msg);
    int rc = ctl_send(c->fd, &h, sizeof h, body, len, fds, nfds);
    if (rc < 0) {
        kd_debug("reply to pid %d failed (%s): dropping that connection", (int)c->pid,
                 strerror(-rc));
        c->dead = true;
    }
}

void kd_send_status(struct kd_client *c, uint64_t cookie, int32_t status, const char *fmt, ...)
{
    char msg[112];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kd_send_reply(c, cookie, status, msg, NULL, 0, NULL, 0);
}

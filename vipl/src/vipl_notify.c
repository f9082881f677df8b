/*
 * vipl_notify.c - VipSendNotify, VipRecvNotify, VipCQNotify.
 *
 * VIA's notifications are one-shot: the handler runs once, with the next
 * completion of the queue, which the handler then owns (as if it had called
 * Done). There is no interrupt to hang them on, so each pending
 * notification is a library thread that waits for that completion the way
 * VipRecvWait does (spinning briefly, then sleeping on the event page).
 * Destroying the VI or CQ stops and joins its pending notifications, so a
 * handler never sees a destroyed object.
 */
#include <stdlib.h>

#include "vipl_int.h"

#define NOTIFY_SLICE_MS 100u /* how often a waiting notifier looks at `cancel` */

void vipl_notifiers_init(struct vip_notifiers *n)
{
    pthread_mutex_init(&n->lock, NULL);
    n->list = NULL;
    atomic_store(&n->cancel, 0);
}

void vipl_notifiers_fini(struct vip_notifiers *n)
{
    atomic_store(&n->cancel, 1);
    pthread_mutex_lock(&n->lock);
    struct vip_notify *list = n->list;
    n->list = NULL;
    pthread_mutex_unlock(&n->lock);
    while (list) {
        struct vip_notify *next = list->next;
        pthread_join(list->thread, NULL);
        free(list);
        list = next;
    }
    pthread_mutex_destroy(&n->lock);
}

typedef void (*desc_handler)(VIP_PVOID, VIP_NIC_HANDLE, VIP_VI_HANDLE, VIP_DESCRIPTOR *);
typedef void (*cq_handler)(VIP_PVOID, VIP_NIC_HANDLE, VIP_VI_HANDLE, VIP_BOOLEAN);

struct job {
    struct vip_vi *vi;
    struct vip_cq *cq;
    bool recv;
    VIP_PVOID ctx;
    desc_handler on_desc;
    cq_handler on_cq;
    struct vip_notifiers *owner;
};

static void *notify_main(void *arg)
{
    struct job *j = arg;
    while (!atomic_load(&j->owner->cancel)) {
        VIP_RETURN rc;
        if (j->cq) {
            VIP_VI_HANDLE vi;
            VIP_BOOLEAN recv;
            rc = VipCQWait(j->cq->handle, NOTIFY_SLICE_MS, &vi, &recv);
            if (rc == VIP_SUCCESS) {
                j->on_cq(j->ctx, j->cq->nic->handle, vi, recv);
                break;
            }
        } else {
            VIP_DESCRIPTOR *d;
            rc = j->recv ? VipRecvWait(j->vi->handle, NOTIFY_SLICE_MS, &d)
                         : VipSendWait(j->vi->handle, NOTIFY_SLICE_MS, &d);
            if (rc == VIP_SUCCESS) {
                j->on_desc(j->ctx, j->vi->nic->handle, j->vi->handle, d);
                break;
            }
        }
        if (rc != VIP_TIMEOUT)
            break; /* the object is unusable; nothing will complete */
    }
    free(j);
    return NULL;
}

static VIP_RETURN start(struct job *j)
{
    struct vip_notify *n = calloc(1, sizeof *n);
    struct job *copy = malloc(sizeof *copy);
    if (!n || !copy) {
        free(n);
        free(copy);
        return vipl_fail(VIP_ERROR_RESOURCE, "out of memory for a notification");
    }
    *copy = *j;
    pthread_mutex_lock(&j->owner->lock);
    if (atomic_load(&j->owner->cancel) ||
        pthread_create(&n->thread, NULL, notify_main, copy) != 0) {
        pthread_mutex_unlock(&j->owner->lock);
        free(n);
        free(copy);
        return vipl_fail(VIP_ERROR_RESOURCE, "cannot start a notification thread");
    }
    n->next = j->owner->list;
    j->owner->list = n;
    pthread_mutex_unlock(&j->owner->lock);
    return VIP_SUCCESS;
}

static VIP_RETURN vi_notify(VIP_VI_HANDLE h, VIP_PVOID ctx, desc_handler fn, bool recv)
{
    struct vip_vi *vi = vipl_vi(h);
    if (!vi || !fn)
        return vipl_fail(VIP_INVALID_PARAMETER, "bad VI handle or NULL handler");
    struct job j = {.vi = vi, .recv = recv, .ctx = ctx, .on_desc = fn, .owner = &vi->notify};
    return start(&j);
}

VIP_RETURN VipSendNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, desc_handler Handler)
{
    return vi_notify(ViHandle, Context, Handler, false);
}

VIP_RETURN VipRecvNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, desc_handler Handler)
{
    return vi_notify(ViHandle, Context, Handler, true);
}

VIP_RETURN VipCQNotify(VIP_CQ_HANDLE CQHandle, VIP_PVOID Context, cq_handler Handler)
{
    struct vip_cq *cq = vipl_cq(CQHandle);
    if (!cq || !Handler)
        return vipl_fail(VIP_INVALID_PARAMETER, "bad CQ handle or NULL handler");
    struct job j = {.cq = cq, .ctx = Context, .on_cq = Handler, .owner = &cq->notify};
    return start(&j);
}

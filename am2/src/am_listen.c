/*
 * am_listen.c - an endpoint's listener.
 *
 * VIA answers a VipConnectRequest with VIP_NO_MATCH unless a VipConnectWait
 * is pending on the address it names, and an AM endpoint cannot sit in a
 * wait: its thread is the program's. So each endpoint has a thread of its
 * own that waits on the endpoint's address and queues what it takes; the
 * endpoint's thread accepts (or refuses) the queued requests in its next
 * AM call (am_accept_pending), as it did when vipd held them. A request
 * whose asker gave up meanwhile fails to accept and is dropped; the asker
 * asks again.
 *
 * Rules: the queue is the listener's and the endpoint thread's, under
 * lock; the listener looks for its stop flag between waits of
 * AM_LISTEN_SLICE_MS, so stopping takes at most that long.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "am_int.h"

#define AM_LISTEN_SLICE_MS 100
#define AM_LISTEN_MAX 64 /* requests queued at once; more are refused */

struct am_offer {
    struct am_offer *next;
    VIP_CONN_HANDLE conn;
    struct {
        VIP_NET_ADDRESS a;
        uint8_t room[64];
    } ra;
};

struct am_listener {
    pthread_t th;
    _Atomic bool stop;
    pthread_mutex_t lock;
    struct am_offer *head, **tail;
    _Atomic unsigned n; /* also read without the lock: is anything queued? */
    VIP_NET_ADDRESS *addr;
    struct am2_ep *ep;  /* to wake its AM_WaitSema when a request is queued */
};

static void *listen_main(void *arg)
{
    struct am_listener *l = arg;
    while (!atomic_load(&l->stop)) {
        struct am_offer *o = calloc(1, sizeof *o);
        if (!o)
            break;
        VIP_VI_ATTRIBUTES rattr;
        VIP_RETURN rc = VipConnectWait(am_g.nic, l->addr, AM_LISTEN_SLICE_MS, &o->ra.a, &rattr,
                                       &o->conn);
        if (rc != VIP_SUCCESS) {
            free(o);
            if (rc != VIP_TIMEOUT)
                break; /* the NIC is gone: the endpoint is going too */
            continue;
        }
        pthread_mutex_lock(&l->lock);
        bool room = l->n < AM_LISTEN_MAX && !atomic_load(&l->stop);
        if (room) {
            *l->tail = o;
            l->tail = &o->next;
            l->n++;
        }
        pthread_mutex_unlock(&l->lock);
        if (!room) {
            VipConnectReject(o->conn);
            free(o);
        } else {
            am_shm_ring(l->ep);
        }
    }
    return NULL;
}

int am_listen_start(struct am2_ep *ep)
{
    struct am_listener *l = calloc(1, sizeof *l);
    if (!l)
        return am_fail(AM_ERR_RESOURCE, "out of memory");
    pthread_mutex_init(&l->lock, NULL);
    l->tail = &l->head;
    l->addr = ep->listen;
    l->ep = ep;
    if (pthread_create(&l->th, NULL, listen_main, l) != 0) {
        pthread_mutex_destroy(&l->lock);
        free(l);
        return am_fail(AM_ERR_RESOURCE, "cannot start the endpoint's listener thread");
    }
    ep->listener = l;
    return AM_OK;
}

void am_listen_stop(struct am2_ep *ep)
{
    struct am_listener *l = ep->listener;
    if (!l)
        return;
    atomic_store(&l->stop, true);
    pthread_join(l->th, NULL);
    while (l->head) {
        struct am_offer *o = l->head;
        l->head = o->next;
        VipConnectReject(o->conn);
        free(o);
    }
    pthread_mutex_destroy(&l->lock);
    free(l);
    ep->listener = NULL;
}

bool am_listen_take(struct am2_ep *ep, VIP_CONN_HANDLE *conn, VIP_NET_ADDRESS *ra, size_t cap)
{
    struct am_listener *l = ep->listener;
    if (!l || !atomic_load_explicit(&l->n, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&l->lock);
    struct am_offer *o = l->head;
    if (o) {
        l->head = o->next;
        if (!l->head)
            l->tail = &l->head;
        l->n--;
    }
    pthread_mutex_unlock(&l->lock);
    if (!o)
        return false;
    *conn = o->conn;
    memcpy(ra, &o->ra, cap < sizeof o->ra ? cap : sizeof o->ra);
    free(o);
    return true;
}

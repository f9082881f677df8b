/*
 * am_core.c - what every other file of libam2 stands on: the process-wide
 * state (am_g), the AM_PAR lock, the reason the last call failed, the
 * clock, the checks that a bundle or endpoint handle is live, and each
 * endpoint's queue of messages to return to its handler 0.
 *
 * It calls nothing of libam2: the files above it may all call it.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "am_int.h"

struct am_global am_g;

/* ---- AM_PAR: one recursive lock while a parallel bundle exists ------------------- */

static pthread_mutex_t am_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static atomic_int am_npar;

int am_api_lock(void)
{
    if (!atomic_load_explicit(&am_npar, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&am_lock);
    return 1;
}

void am_api_unlock(int *locked)
{
    if (*locked)
        pthread_mutex_unlock(&am_lock);
}

void am_api_sleep_begin(int locked)
{
    if (locked)
        pthread_mutex_unlock(&am_lock);
}

void am_api_sleep_end(int locked)
{
    if (locked)
        pthread_mutex_lock(&am_lock);
}

void am_api_par_add(void)
{
    atomic_fetch_add(&am_npar, 1);
}

void am_api_par_remove(int *locked)
{
    if (atomic_fetch_sub(&am_npar, 1) == 1 && *locked) {
        /* the last one: later calls take no lock; release ours now */
        pthread_mutex_unlock(&am_lock);
        *locked = 0;
    }
}

/* ---- errors and the clock -------------------------------------------------------- */

static _Thread_local char am_err[256];

/* AMUDP's name (amudp.h): non-zero says every failure, as AM2_DEBUG=1. */
int AMUDP_VerboseErrors;

int am_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(am_err, sizeof am_err, fmt, ap);
    va_end(ap);
    if (AMUDP_VerboseErrors || getenv("AM2_DEBUG"))
        fprintf(stderr, "am2: %s\n", am_err);
    return code;
}

const char *AMX_LastError(void) { return am_err; }

uint64_t am_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* ---- live handles ------------------------------------------------------------------ */

bool am_bundle_ok(eb_t eb)
{
    for (struct am2_bundle *b = am_g.bundles; b; b = b->next)
        if (b == eb)
            return true;
    return false;
}

bool am_ep_ok(ep_t ep)
{
    if (!ep)
        return false;
    for (struct am2_bundle *b = am_g.bundles; b; b = b->next)
        for (struct am2_ep *e = b->eps; e; e = e->next)
            if (e == ep)
                return true;
    return false;
}

struct am2_ep *am_ep_by_name(const en_t *name)
{
    for (struct am2_bundle *b = am_g.bundles; b; b = b->next)
        for (struct am2_ep *e = b->eps; e; e = e->next)
            if (memcmp(&e->name, name, sizeof *name) == 0)
                return e;
    return NULL;
}

/* ---- messages going back to their sender ----------------------------------------- */

/* Queued, not run: whoever finds a message undeliverable may be deep in
 * a send or a poll; AM_Poll runs handler 0 later (am_run_returns). */
void am_ret_push(struct am2_ep *ep, const struct am_wire *w, const en_t *dest, int status)
{
    struct am_ret *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "am2: out of memory returning a message; status %d lost\n", status);
        return;
    }
    r->w = *w;
    r->w.status = (uint16_t)status;
    r->w.rkind = w->kind;
    r->dest = *dest;
    *ep->rets_tail = r;
    ep->rets_tail = &r->next;
}

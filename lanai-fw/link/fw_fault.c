/*
 * fw_fault.c - fault injection on a UDP link, on the way out.
 *
 * Every frame the transport hands to the wire passes here. With rates set
 * (vipd --faults, carried in the channel; else the process's VIP_FAULTS)
 * each frame may be dropped, sent twice, corrupted (one byte flipped after
 * the CRC was computed, so the receiver must catch it), held back behind
 * the next frame (reordered), or held for delay_ms (delayed). Rates are in
 * 1/65536; every fault is counted in the session's net counters, which
 * vipctl net shows. Without rates this is one branch per batch.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw.h"
#include "fw_hal.h"
#include "fw_net.h"

#define REORDER_HOLD_NS 1000000ull /* a reordered frame waits at most this for a successor */

void fw_fault_init(struct fw_fault *f, const struct via_net_faults *chan_rates, uint32_t salt)
{
    memset(f, 0, sizeof *f);
    f->rates = *chan_rates;
    const struct via_net_faults zero = {0};
    if (memcmp(&f->rates, &zero, sizeof zero) == 0) {
        const char *e = getenv("VIP_FAULTS");
        char why[80];
        if (e && *e && !fw_fault_parse(e, &f->rates, why, sizeof why))
            memset(&f->rates, 0, sizeof f->rates); /* a bad spec injects nothing */
    }
    const struct via_net_faults *r = &f->rates;
    f->on = r->drop || r->dup || r->reorder || r->corrupt || r->delay;
    f->rng = ((uint64_t)r->seed << 32 | salt) ^ 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    if (!f->rng)
        f->rng = 1;
}

void fw_fault_fini(struct fw_fault *f)
{
    for (unsigned i = 0; i < f->nheld; i++)
        free(f->held[i].buf);
    f->nheld = 0;
}

static uint32_t roll(struct fw_fault *f)
{
    f->rng ^= f->rng << 13;
    f->rng ^= f->rng >> 7;
    f->rng ^= f->rng << 17;
    return (uint32_t)(f->rng >> 16) & 0xFFFFu;
}

static bool hit(struct fw_fault *f, uint16_t rate)
{
    return rate && roll(f) < rate;
}

/* Keep a copy of the frame to send at due (false: no room, send it now). */
static bool hold(struct fw_fault *f, const uint8_t *buf, uint32_t len, uint64_t due)
{
    if (f->nheld == sizeof f->held / sizeof f->held[0])
        return false;
    uint8_t *c = malloc(len);
    if (!c)
        return false;
    memcpy(c, buf, len);
    f->held[f->nheld++] = (struct fw_held_frame){c, len, due};
    return true;
}

/* Send the held frames that are due (all: after a frame overtook them). */
static void release(struct fw_udp *u, bool all)
{
    struct fw_fault *f = &u->fault;
    uint64_t now = hal_now_ns();
    for (unsigned i = 0; i < f->nheld;) {
        struct fw_held_frame *h = &f->held[i];
        if (!all && h->due_ns > now) {
            i++;
            continue;
        }
        fw_net_send(u, &h->buf, &h->len, 1);
        free(h->buf);
        f->held[i] = f->held[--f->nheld];
    }
}

void fw_fault_send(struct fw_udp *u, uint8_t *const *buf, const uint32_t *len, unsigned n)
{
    struct fw_fault *f = &u->fault;
    if (!f->on) {
        if (n)
            fw_net_send(u, buf, len, n);
        return;
    }
    const struct via_net_faults *r = &f->rates;
    struct via_net_counters *cnt = u->cnt;
    for (unsigned i = 0; i < n; i++) {
        if (hit(f, r->drop)) {
            fw_net_count(&cnt->f_drop, 1);
            continue;
        }
        if (hit(f, r->corrupt) && len[i]) {
            uint8_t *c = malloc(len[i]);
            if (c) {
                memcpy(c, buf[i], len[i]);
                c[roll(f) % len[i]] ^= (uint8_t)(1u << (roll(f) % 8));
                fw_net_send(u, &c, &len[i], 1);
                free(c);
                fw_net_count(&cnt->f_corrupt, 1);
                continue;
            }
        }
        if (hit(f, r->delay) &&
            hold(f, buf[i], len[i], hal_now_ns() + (uint64_t)(r->delay_ms ? r->delay_ms : 5) * 1000000u)) {
            fw_net_count(&cnt->f_delay, 1);
            continue;
        }
        if (hit(f, r->reorder) && hold(f, buf[i], len[i], hal_now_ns() + REORDER_HOLD_NS)) {
            fw_net_count(&cnt->f_reorder, 1);
            continue;
        }
        fw_net_send(u, &buf[i], &len[i], 1);
        if (hit(f, r->dup)) {
            fw_net_count(&cnt->f_dup, 1);
            fw_net_send(u, &buf[i], &len[i], 1);
        }
        /* A frame went: the reordered ones behind it follow. */
        for (unsigned k = 0; k < f->nheld; k++)
            if (f->held[k].due_ns <= hal_now_ns() + REORDER_HOLD_NS)
                f->held[k].due_ns = 0;
        release(u, false);
    }
    release(u, false);
}

/*
 * kd_mgmt.c - management requests (vipctl): LIST_NICS, LIST_VIS, LIST_MEM,
 * TRACE, SHUTDOWN, PING. None needs a session.
 *
 * A user sees their own sessions, VIs and regions; root sees everybody's
 * (kd_user_sees). A NIC's traffic counters are the NIC's, like a network
 * interface's. The stage trace records every user's messages, and stopping
 * vipd stops everybody's: both are root's (or vipd's own uid's).
 *
 * Counters and trace records come from pages the clients write: they are
 * copied as plain numbers and never used as indices without a bound.
 */
#include "kd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "via_spec.h"

static uint64_t ld(_Atomic uint64_t *p)
{
    return atomic_load_explicit(p, memory_order_relaxed);
}

void kd_op_list_nics(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    struct via_nic_info *a = kd_body(r, kd.nnics * sizeof *a);
    if (!a)
        return;
    for (unsigned i = 0; i < kd.nnics; i++) {
        struct kd_nic *nic = &kd.nic[i];
        struct via_nic_info *o = &a[i];
        snprintf(o->name, sizeof o->name, "via%u", i);
        snprintf(o->profile, sizeof o->profile, "%s", nic->prof.name);
        o->index = i;
        memcpy(o->nic_addr, nic->addr, VIA_NIC_ADDR_LEN);
        o->conns = kd_conn_count(i, c);
        o->tx_msgs = nic->gone_tx_msgs;
        o->tx_bytes = nic->gone_tx_bytes;
        o->rx_msgs = nic->gone_rx_msgs;
        o->rx_bytes = nic->gone_rx_bytes;
        o->rx_dropped = nic->gone_rx_dropped;
        o->desc_errors = nic->gone_desc_errors;
        memcpy(o->rx_refused, nic->gone_rx_refused, sizeof o->rx_refused);
        for (struct kd_session *s = kd.sessions; s; s = s->next)
            if (s->nic == nic && kd_user_sees(c, s->uid)) {
                o->sessions++;
                o->regions += s->nregions;
            }
        for (uint32_t v = 0; v < VIA_MAX_VI; v++) {
            struct kd_vi *vi = nic->vi[v];
            if (!vi)
                continue;
            if (kd_user_sees(c, vi->sess->uid))
                o->vis++;
            struct via_vi_counters *k = &vi->page->cnt;
            o->tx_msgs += ld(&k->tx_msgs);
            o->tx_bytes += ld(&k->tx_bytes);
            o->rx_msgs += ld(&k->rx_msgs);
            o->rx_bytes += ld(&k->rx_bytes);
            o->rx_dropped += ld(&k->rx_dropped);
            o->desc_errors += ld(&k->desc_errors);
            for (unsigned r = 0; r < VIA_RXC_N; r++)
                o->rx_refused[r] +=
                    atomic_load_explicit(&vi->page->rx_refused[r], memory_order_relaxed);
        }
    }
}

void kd_op_list_vis(struct kd_client *c, uint64_t cookie, const void *body,
                    struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    size_t n = 0, cap = VIA_CTL_MAX_BODY / sizeof(struct via_vi_info);
    for (unsigned i = 0; i < kd.nnics; i++)
        n += kd.nic[i].nvis;
    if (n > cap)
        n = cap; /* the reply must fit one message; vipctl shows the first ones */
    struct via_vi_info *a = kd_body(r, n * sizeof *a);
    if (!a)
        return;
    size_t k = 0;
    for (unsigned i = 0; i < kd.nnics && k < n; i++) {
        for (uint32_t v = 0; v < VIA_MAX_VI && k < n; v++) {
            struct kd_vi *vi = kd.nic[i].vi[v];
            if (!vi || !kd_user_sees(c, vi->sess->uid))
                continue;
            struct via_vi_info *o = &a[k++];
            struct via_vi_counters *cnt = &vi->page->cnt;
            o->nic = i;
            o->vi_id = vi->id;
            o->owner_pid = (uint32_t)vi->sess->pid;
            o->state = vi->state;
            o->reliability = vi->attr.reliability;
            o->peer_nic = o->peer_vi = UINT32_MAX;
            if (vi->conn) {
                o->conn_id = vi->conn->id;
                struct kd_vi *peer =
                    vi->conn->state == KD_CONN_ACCEPTED ? vi->conn->vi[1 - vi->side] : NULL;
                if (peer) {
                    o->peer_nic = peer->nic->index;
                    o->peer_vi = peer->id;
                }
            }
            o->sq_depth = (uint32_t)(ld(&cnt->sq_posted) - ld(&cnt->sq_done));
            o->rq_depth = (uint32_t)(ld(&cnt->rq_posted) - ld(&cnt->rq_done));
            o->tx_msgs = ld(&cnt->tx_msgs);
            o->rx_msgs = ld(&cnt->rx_msgs);
            o->tx_bytes = ld(&cnt->tx_bytes);
            o->rx_bytes = ld(&cnt->rx_bytes);
            o->rx_dropped = ld(&cnt->rx_dropped);
            o->desc_errors = ld(&cnt->desc_errors);
            memcpy(o->progname, vi->sess->progname, sizeof o->progname);
        }
    }
    r->len = k * sizeof *a;
}

void kd_op_list_mem(struct kd_client *c, uint64_t cookie, const void *body,
                    struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    size_t n = 0, cap = VIA_CTL_MAX_BODY / sizeof(struct via_mem_info);
    for (struct kd_session *s = kd.sessions; s; s = s->next)
        n += s->nregions;
    if (n > cap)
        n = cap;
    struct via_mem_info *a = kd_body(r, n * sizeof *a);
    if (!a)
        return;
    size_t k = 0;
    for (struct kd_session *s = kd.sessions; s && k < n; s = s->next) {
        if (!kd_user_sees(c, s->uid))
            continue;
        for (uint32_t i = 0; i < VIA_MAX_TPT && k < n; i++) {
            const struct kd_region *g = &s->reg[i];
            /* Closed by the process's registration cache: deregistered as
             * far as the program knows (its word alone, shown to it alone). */
            bool closed = (atomic_load(&s->st->tpt_closed[i / 64]) >> (i % 64)) & 1u;
            if (!g->used || closed)
                continue;
            a[k++] = (struct via_mem_info){.nic = s->nic->index,
                                           .owner_pid = (uint32_t)s->pid,
                                           .handle = VIA_MH_MAKE(g->gen, i),
                                           .ptag = g->ptag,
                                           .va = g->va,
                                           .len = g->len,
                                           .flags = g->flags};
        }
    }
    r->len = k * sizeof *a;
}

static int by_time(const void *x, const void *y)
{
    const struct via_trace_rec *a = x, *b = y;
    return a->t_ns < b->t_ns ? -1 : a->t_ns > b->t_ns;
}

/* Copy the consistent records of one status page (the client may be writing
 * it; a record being overwritten has seq_begin != seq_end and is skipped). */
static size_t harvest(const struct via_status_page *st, struct via_trace_rec *out)
{
    uint64_t head = atomic_load_explicit(&st->trace_head, memory_order_acquire);
    uint64_t cnt = head < VIA_TRACE_SLOTS ? head : VIA_TRACE_SLOTS;
    size_t n = 0;
    for (uint64_t i = head - cnt; i != head; i++) {
        const struct via_trace_rec *src = &st->trace[i % VIA_TRACE_SLOTS];
        uint32_t b = atomic_load_explicit(&src->seq_begin, memory_order_acquire);
        struct via_trace_rec t;
        t.stage = src->stage;
        t.vi_id = src->vi_id;
        t.t_ns = src->t_ns;
        t.msg_seq = src->msg_seq;
        t.len = src->len;
        t.dur_ns = src->dur_ns;
        atomic_thread_fence(memory_order_acquire);
        uint32_t e = atomic_load_explicit(&src->seq_end, memory_order_relaxed);
        if (b != e || t.stage >= VIA_ST_NSTAGES)
            continue;
        atomic_init(&t.seq_begin, b);
        atomic_init(&t.seq_end, e);
        out[n++] = t;
    }
    return n;
}

/* Programs measured with the trace on have usually exited by the time
 * someone asks for it: keep what their NICs recorded, up to a bound. */
#define TRACE_KEEP_MAX (VIA_CTL_MAX_BODY / sizeof(struct via_trace_rec))

void kd_trace_keep(const struct kd_session *s)
{
    if (!kd.trace_on && !atomic_load(&s->st->trace_head))
        return;
    struct via_trace_rec *tmp = malloc(VIA_TRACE_SLOTS * sizeof *tmp);
    if (!tmp)
        return;
    size_t n = harvest(s->st, tmp);
    if (!kd.trace_kept && n)
        kd.trace_kept = malloc(TRACE_KEEP_MAX * sizeof *kd.trace_kept);
    if (kd.trace_kept && n) {
        if (kd.trace_nkept + n > TRACE_KEEP_MAX) { /* drop the oldest */
            size_t drop = kd.trace_nkept + n - TRACE_KEEP_MAX;
            if (drop > kd.trace_nkept)
                drop = kd.trace_nkept;
            memmove(kd.trace_kept, kd.trace_kept + drop,
                    (kd.trace_nkept - drop) * sizeof *kd.trace_kept);
            kd.trace_nkept -= drop;
        }
        size_t room = TRACE_KEEP_MAX - kd.trace_nkept, k = n < room ? n : room;
        memcpy(kd.trace_kept + kd.trace_nkept, tmp + (n - k), k * sizeof *tmp);
        kd.trace_nkept += k;
    }
    free(tmp);
}

void kd_trace_free(void)
{
    free(kd.trace_kept);
    kd.trace_kept = NULL;
    kd.trace_nkept = 0;
}

static void trace_dump(struct kd_reply *r)
{
    size_t total = kd.trace_nkept;
    for (struct kd_session *s = kd.sessions; s; s = s->next)
        total += VIA_TRACE_SLOTS;
    struct via_trace_rec *all = total ? malloc(total * sizeof *all) : NULL;
    if (total && !all) {
        kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory for the trace dump");
        return;
    }
    size_t n = kd.trace_nkept;
    if (n)
        memcpy(all, kd.trace_kept, n * sizeof *all);
    for (struct kd_session *s = kd.sessions; s; s = s->next)
        n += harvest(s->st, all + n);
    if (n)
        qsort(all, n, sizeof *all, by_time);
    size_t cap = VIA_CTL_MAX_BODY / sizeof *all, skip = n > cap ? n - cap : 0;
    struct via_trace_rec *a = kd_body(r, (n - skip) * sizeof *a);
    if (a && n > skip)
        memcpy(a, all + skip, (n - skip) * sizeof *a); /* keep the newest */
    free(all);
}

void kd_op_trace(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_trace *q = body;
    if (!kd_user_admin(c, "use the stage trace", r))
        return;
    if (q->on == 2) {
        trace_dump(r);
        return;
    }
    if (q->on > 2) {
        kd_fail(r, VIP_INVALID_PARAMETER, "trace mode %u: use 0 (off), 1 (on) or 2 (dump)",
                q->on);
        return;
    }
    kd.trace_on = q->on == 1;
    if (kd.trace_on)
        kd_trace_free(); /* a new trace starts empty */
    for (struct kd_session *s = kd.sessions; s; s = s->next) {
        atomic_store(&s->st->trace_on, q->on);
        if (kd.trace_on)
            atomic_store(&s->st->trace_head, 0);
    }
    kd_info("stage trace %s", q->on ? "on" : "off");
}

void kd_op_shutdown(struct kd_client *c, uint64_t cookie, const void *body,
                    struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    if (!kd_user_admin(c, "stop vipd", r))
        return;
    kd_info("shutdown requested by pid %d", (int)c->pid);
    kd.stop = true; /* the loop ends after this reply is sent */
}

void kd_op_ping(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)c;
    (void)cookie;
    (void)body;
    struct via_ctl_hello_r *a = kd_body(r, sizeof *a);
    if (!a)
        return;
    a->nnics = kd.nnics;
    kd_nic_addr(0, a->nic_addr); /* tells vipctl which host id this vipd uses */
    snprintf(a->profile, sizeof a->profile, "%s", kd.nic[0].prof.name);
}

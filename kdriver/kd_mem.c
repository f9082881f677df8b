/*
 * kd_mem.c - protection tags and the translation and protection table.
 *
 * The TPT of a session lives in a sealed memfd that the client (and so its
 * in-process firmware) maps read-only: only vipd can grant access to memory.
 * Entry protocol (via_abi.h): write ptag/va/len/flags, then store gen with
 * release; invalidate by storing gen = 0. A handle carries the generation,
 * so a stale handle of a freed and reused index never validates.
 * vipd keeps a private copy of every entry and never reads the shared one.
 */
#include "kd.h"

#include <stdlib.h>
#include <string.h>

#include "via_spec.h"

/* ---- ptags ------------------------------------------------------------------ */

bool kd_ptag_owned(const struct kd_session *s, uint32_t ptag)
{
    return ptag > 0 && ptag < kd.nptag_slots && kd.ptag[ptag].sess == s;
}

void kd_ptag_ref(uint32_t ptag, int dvis, int dregions)
{
    if (ptag == 0 || ptag >= kd.nptag_slots)
        return;
    kd.ptag[ptag].nvis += (unsigned)dvis;
    kd.ptag[ptag].nregions += (unsigned)dregions;
}

void kd_op_create_ptag(struct kd_client *c, uint64_t cookie, const void *body,
                       struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    struct kd_session *s = c->sess;
    if (s->nptags >= VIA_MAX_PTAGS) {
        kd_fail(r, VIP_ERROR_RESOURCE, "this NIC handle already has %u ptags (the limit)",
                VIA_MAX_PTAGS);
        return;
    }
    /* Lowest free id, so ids stay small; ids are unique across sessions so
     * a ptag value is meaningful in logs and vipctl. */
    uint32_t id = 1;
    while (id < kd.nptag_slots && kd.ptag[id].sess)
        id++;
    if (id >= kd.nptag_slots) {
        uint32_t n = kd.nptag_slots ? kd.nptag_slots * 2 : 64;
        struct kd_ptag *t = realloc(kd.ptag, n * sizeof *t);
        if (!t) {
            kd_fail(r, VIP_ERROR_RESOURCE, "vipd is out of memory for ptags");
            return;
        }
        memset(t + kd.nptag_slots, 0, (n - kd.nptag_slots) * sizeof *t);
        kd.ptag = t;
        kd.nptag_slots = n;
    }
    kd.ptag[id] = (struct kd_ptag){.sess = s};
    s->nptags++;
    struct via_ctl_ptag_r *a = kd_body(r, sizeof *a);
    if (a)
        a->ptag = id;
}

void kd_op_destroy_ptag(struct kd_client *c, uint64_t cookie, const void *body,
                        struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_ptag *q = body;
    struct kd_session *s = c->sess;
    if (!kd_ptag_owned(s, q->ptag)) {
        kd_fail(r, VIP_INVALID_PTAG, "ptag %u is not one of this NIC handle's ptags", q->ptag);
        return;
    }
    struct kd_ptag *p = &kd.ptag[q->ptag];
    if (p->nvis || p->nregions) {
        kd_fail(r, VIP_ERROR_RESOURCE, "ptag %u in use by %u VIs and %u regions", q->ptag,
                p->nvis, p->nregions);
        return;
    }
    *p = (struct kd_ptag){0};
    s->nptags--;
}

/* ---- TPT ---------------------------------------------------------------------- */

static void tpt_publish(struct kd_session *s, uint32_t idx)
{
    const struct kd_region *g = &s->reg[idx];
    struct via_tpt_entry *e = &s->tpt[idx];
    e->ptag = g->ptag;
    e->va = g->va;
    e->len = g->len;
    e->flags = g->flags;
    atomic_store_explicit(&e->gen, g->gen, memory_order_release);
}

static void tpt_invalidate(struct kd_session *s, uint32_t idx)
{
    atomic_store_explicit(&s->tpt[idx].gen, 0, memory_order_release);
}

/* The region a (va, handle) pair names, or NULL with r failed. */
static struct kd_region *region_of(struct kd_session *s, uint64_t va, uint32_t handle,
                                   struct kd_reply *r)
{
    uint32_t idx = VIA_MH_INDEX(handle), gen = VIA_MH_GEN(handle);
    if (idx >= VIA_MAX_TPT || gen == 0 || !s->reg[idx].used || s->reg[idx].gen != gen) {
        kd_fail(r, VIP_INVALID_PARAMETER,
                "memory handle 0x%08x is not a registration of this NIC handle", handle);
        return NULL;
    }
    if (s->reg[idx].va != va) {
        kd_fail(r, VIP_INVALID_PARAMETER,
                "memory handle 0x%08x was registered at 0x%llx, not at 0x%llx", handle,
                (unsigned long long)s->reg[idx].va, (unsigned long long)va);
        return NULL;
    }
    return &s->reg[idx];
}

static bool flags_ok(uint32_t flags, struct kd_reply *r)
{
    if (flags & ~(VIA_TPT_RDMA_WRITE | VIA_TPT_RDMA_READ)) {
        kd_fail(r, VIP_INVALID_PARAMETER, "unknown memory attribute bits 0x%x", flags);
        return false;
    }
    return true;
}

void kd_op_reg_mem(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_reg_mem *q = body;
    struct kd_session *s = c->sess;
    if (!kd_ptag_owned(s, q->ptag)) {
        kd_fail(r, VIP_INVALID_PTAG, "ptag %u is not one of this NIC handle's ptags", q->ptag);
        return;
    }
    if (q->va == 0) {
        kd_fail(r, VIP_INVALID_PARAMETER, "cannot register memory at address 0");
        return;
    }
    if (q->len == 0 || q->len > VIA_MAX_REGISTER_BYTES) {
        kd_fail(r, VIP_INVALID_PARAMETER, "region length %llu is not in 1..%llu",
                (unsigned long long)q->len, (unsigned long long)VIA_MAX_REGISTER_BYTES);
        return;
    }
    if (q->va + q->len < q->va) {
        kd_fail(r, VIP_INVALID_PARAMETER, "region 0x%llx+%llu wraps around the address space",
                (unsigned long long)q->va, (unsigned long long)q->len);
        return;
    }
    if (!flags_ok(q->flags, r))
        return;
    if (s->nregions >= VIA_MAX_TPT) {
        kd_fail(r, VIP_ERROR_RESOURCE, "all %u TPT entries of this NIC handle are in use",
                VIA_MAX_TPT);
        return;
    }
    if (!kd_user_may_register(s->uid, q->len, r))
        return;
    /* Round-robin from a hint: a just-freed index is reused last, which
     * makes a stale handle easier to spot in traces. */
    uint32_t idx = s->tpt_hint;
    while (s->reg[idx].used)
        idx = (idx + 1) % VIA_MAX_TPT;
    s->tpt_hint = (idx + 1) % VIA_MAX_TPT;
    struct kd_region *g = &s->reg[idx];
    g->gen = (uint16_t)(g->gen + 1);
    if (g->gen == 0)
        g->gen = 1;
    g->used = true;
    g->va = q->va;
    g->len = q->len;
    g->ptag = q->ptag;
    g->flags = q->flags;
    tpt_publish(s, idx);
    s->nregions++;
    s->reg_bytes += g->len;
    kd_ptag_ref(q->ptag, 0, 1);
    struct via_ctl_reg_mem_r *a = kd_body(r, sizeof *a);
    if (a)
        a->handle = VIA_MH_MAKE(g->gen, idx);
}

void kd_op_dereg_mem(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_dereg_mem *q = body;
    struct kd_session *s = c->sess;
    struct kd_region *g = region_of(s, q->va, q->handle, r);
    if (!g)
        return;
    uint32_t idx = (uint32_t)(g - s->reg);
    tpt_invalidate(s, idx);
    kd_ptag_ref(g->ptag, 0, -1);
    g->used = false;
    s->nregions--;
    s->reg_bytes -= g->len;
}

void kd_op_set_mem(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    const struct via_ctl_set_mem *q = body;
    struct kd_session *s = c->sess;
    struct kd_region *g = region_of(s, q->va, q->handle, r);
    if (!g)
        return;
    if (!kd_ptag_owned(s, q->ptag)) {
        kd_fail(r, VIP_INVALID_PTAG, "ptag %u is not one of this NIC handle's ptags", q->ptag);
        return;
    }
    if (!flags_ok(q->flags, r))
        return;
    kd_ptag_ref(g->ptag, 0, -1);
    kd_ptag_ref(q->ptag, 0, 1);
    g->ptag = q->ptag;
    g->flags = q->flags;
    /* Same generation: the handle stays valid. Readers see the entry change
     * between their acquire of gen and their field reads at worst, which is
     * the race any attribute change has on real hardware too. */
    tpt_publish(s, (uint32_t)(g - s->reg));
}

void kd_mem_session_free(struct kd_session *s)
{
    /* The table is left as it is: only the session's own NIC reads it, in
     * its own process on its own memory, and a client that lives on (vipd
     * shutting down) still has to flush what it posted, with status words
     * it may write (DESC_FLUSHED, not the protection error of memory
     * gone). Its connections are broken already; the page is unmapped
     * here with the session. */
    for (uint32_t i = 0; i < VIA_MAX_TPT; i++)
        s->reg[i].used = false;
    s->nregions = 0;
    s->reg_bytes = 0;
    for (uint32_t id = 1; id < kd.nptag_slots; id++)
        if (kd.ptag[id].sess == s)
            kd.ptag[id] = (struct kd_ptag){0};
    s->nptags = 0;
}

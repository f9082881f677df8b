/*
 * kd_nic.c - the NICs of this vipd, their addresses, profiles and NIC
 * pages, QUERY_NIC and the NICs the switch reaches (SMI_NICS).
 *
 * NIC address = 4-byte host id (big-endian) + 2-byte NIC index (big-endian).
 * The host id is a hash of the host name so that two hosts almost surely
 * differ, or of the address a vipd of several hosts listens at; it is
 * never 0.
 */
#include "kd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nic.h" /* fw_profile_load (fw_model.h, part of the NIC's interface) */
#include "via_spec.h"

void kd_nic_addr(unsigned index, uint8_t out[VIA_NIC_ADDR_LEN])
{
    out[0] = (uint8_t)(kd.host_id >> 24);
    out[1] = (uint8_t)(kd.host_id >> 16);
    out[2] = (uint8_t)(kd.host_id >> 8);
    out[3] = (uint8_t)kd.host_id;
    out[4] = (uint8_t)(index >> 8);
    out[5] = (uint8_t)index;
}

/* The host id of the vipd that listens at ip:port: one host of several
 * (kd_nic_init) and the others of the hosts file (kd_host_add). */
uint32_t kd_host_id_of(uint32_t ip, uint16_t port)
{
    uint8_t b[6];
    memcpy(b, &ip, 4);
    b[4] = (uint8_t)(port >> 8);
    b[5] = (uint8_t)port;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 6; i++) {
        h ^= b[i];
        h *= 16777619u;
    }
    return h ? h : 1;
}

bool kd_nic_init(unsigned nnics, const char *const *profiles, const char *dir)
{
    if (gethostname(kd.hostname, sizeof kd.hostname - 1) < 0)
        snprintf(kd.hostname, sizeof kd.hostname, "localhost");
    kd.hostname[sizeof kd.hostname - 1] = 0;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = kd.hostname; *p; p++) {
        h ^= (uint8_t)*p;
        h *= 16777619u;
    }
    kd.host_id = h ? h : 1;
    if (kd.listen_port) /* one host of several: named by where it listens */
        kd.host_id = kd_host_id_of(kd.listen_ip, kd.listen_port);
    for (unsigned i = 0; i < VIA_MAX_NICS; i++)
        kd.nic[i].page_fd = -1;
    kd.nnics = nnics;
    for (unsigned i = 0; i < nnics; i++) {
        struct kd_nic *nic = &kd.nic[i];
        nic->index = i;
        kd_nic_addr(i, nic->addr);
        char err[512];
        if (!strcmp(profiles[i], "native") &&
            (!dir || fw_profile_load(profiles[i], dir, &nic->prof, err, sizeof err) < 0)) {
            /* The default works wherever vipd is, even without its profile
             * files: no costs, no pacing, hardware doorbells. */
            nic->prof = (struct via_profile){.name = "native", .paced = 0, .hw_doorbell = 1};
        } else if (fw_profile_load(profiles[i], dir, &nic->prof, err, sizeof err) < 0) {
            fprintf(stderr, "vipd: via%u: %s\n", i, err);
            goto fail;
        }
        nic->prof.name[sizeof nic->prof.name - 1] = 0;
        nic->page = kd_shm_create("via-nic", sizeof *nic->page, 0, &nic->page_fd);
        if (!nic->page) {
            fprintf(stderr, "vipd: via%u: cannot create the NIC page: %s\n", i,
                    strerror(errno));
            goto fail;
        }
        nic->page->prof = nic->prof;
        nic->scan_slots = 1; /* no VI yet: the command queue only */
        if (kd.clock == VIA_CLOCK_VIRTUAL && !nic->prof.paced) {
            fprintf(stderr, "vipd: via%u: virtual time needs a paced profile (sbus, pci), and "
                            "'%s' has no model time: run it with --clock real, or give every "
                            "NIC a paced --profile\n", i, nic->prof.name);
            goto fail;
        }
        kd_nic_scan_update(nic);
    }
    return true;
fail:
    kd_nic_fini();
    return false;
}

void kd_nic_fini(void)
{
    for (unsigned i = 0; i < kd.nnics; i++) {
        struct kd_nic *nic = &kd.nic[i];
        kd_shm_unmap(nic->page, sizeof *nic->page);
        nic->page = NULL;
        if (nic->page_fd >= 0)
            close(nic->page_fd);
        nic->page_fd = -1;
    }
}

void kd_nic_scan_update(struct kd_nic *nic)
{
    /* Doorbell pairs 0..highest VI id, plus the firmware's own protected
     * command queue, which the linear scan polls last. */
    uint32_t slots = 1;
    for (uint32_t id = VIA_MAX_VI; nic->nvis && id > 0; id--)
        if (nic->vi[id - 1]) {
            slots = id + 1;
            break;
        }
    nic->scan_slots = slots;
    for (struct kd_session *s = kd.sessions; s; s = s->next)
        if (s->nic == nic) {
            atomic_store_explicit(&s->st->scan_slots, slots, memory_order_release);
            atomic_store_explicit(&s->st->nvis, nic->nvis, memory_order_release);
        }
}

void kd_nic_session_gone(struct kd_nic *nic)
{
    struct via_nic_page *np = nic->page;
    bool others = false;
    for (struct kd_session *s = kd.sessions; s; s = s->next)
        others |= s->nic == nic;
    if (!others) {
        /* Nobody is left to release what a dead client reserved: the NIC
         * is idle and free from now on. */
        atomic_store(&np->lanai_busy_until, 0);
        atomic_store(&np->lanai_idle_since, 0);
        atomic_store(&np->hdma_busy_until, 0);
        atomic_store(&np->nsend_busy_until, 0);
        atomic_store(&np->nrecv_busy_until, 0);
        for (unsigned i = 0; i < VIA_ST_NSTAGES_MAX; i++) {
            atomic_store(&np->stage_ns[i], 0);
            atomic_store(&np->stage_cnt[i], 0);
        }
        kd_debug("via%u: last session ended: modelled clocks reset", nic->index);
    }
}

/* The NICs the emulated switch reaches from the session's own: all the others
 * (VipQuerySystemManagementInfo, VIP_SMI_AUTODISCOVERY). */
void kd_op_smi_nics(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    struct via_ctl_smi_nics_r *a = kd_body(r, sizeof *a);
    if (!a)
        return;
    for (unsigned i = 0; i < kd.nnics; i++)
        if (i != c->sess->nic->index)
            kd_nic_addr(i, a->nic_addr[a->count++]);
}

void kd_op_query_nic(struct kd_client *c, uint64_t cookie, const void *body,
                     struct kd_reply *r)
{
    (void)cookie;
    (void)body;
    struct via_ctl_query_nic_r *a = kd_body(r, sizeof *a);
    if (!a)
        return;
    unsigned i = c->sess->nic->index;
    snprintf(a->name, sizeof a->name, "via%u", i);
    kd_nic_addr(i, a->nic_addr);
    a->max_vi = kd_nic_max_vi(c->sess->nic);
    a->max_cq = VIA_MAX_CQ;
    a->max_cq_entries = VIA_MAX_CQ_ENTRIES;
    a->max_ptags = VIA_MAX_PTAGS;
    a->max_tpt = VIA_MAX_TPT;
    a->max_segs = VIA_MAX_SEGS;
    a->max_transfer = VIA_MAX_TRANSFER;
    a->mtu = VIA_MTU;
    a->queue_depth = VIA_QUEUE_DEPTH;
    a->max_register_bytes = VIA_MAX_REGISTER_BYTES;
    snprintf(a->profile, sizeof a->profile, "%s", c->sess->nic->prof.name);
}

/*
 * A paced card maps one page of its SRAM per VI as the VI's doorbells (the
 * Berkeley paper: "a memory-mapped page on the host corresponds to a full
 * page of SRAM"), after the firmware's own 64 KiB (code, queues, staging;
 * the paper used under 40 KB of data space). So SRAM bounds the VIs.
 */
uint32_t kd_nic_max_vi(const struct kd_nic *nic)
{
    const struct via_profile *p = &nic->prof;
    if (!p->paced || p->sram_bytes <= 0)
        return VIA_MAX_VI;
    double n = (p->sram_bytes - 65536.0) / VIA_PAGE_SIZE;
    if (n < 1)
        return 1;
    return n > VIA_MAX_VI ? VIA_MAX_VI : (uint32_t)n;
}

void kd_op_get_profile(struct kd_client *c, uint64_t cookie, const void *body, struct kd_reply *r)
{
    (void)c;
    (void)cookie;
    const struct via_ctl_get_profile *q = body;
    if (q->nic >= kd.nnics) {
        kd_fail(r, VIP_INVALID_PARAMETER, "no such NIC via%u (this vipd has %u)", q->nic,
                kd.nnics);
        return;
    }
    struct kd_nic *nic = &kd.nic[q->nic];
    struct via_ctl_profile_r *a = kd_body(r, sizeof *a);
    if (!a)
        return;
    a->prof = nic->prof; /* vipd's own copy: clients can write the page */
    a->max_vi = kd_nic_max_vi(nic);
    a->scan_slots = nic->scan_slots;
    for (unsigned i = 0; i < VIA_ST_NSTAGES_MAX; i++) {
        a->stage_ns[i] = atomic_load(&nic->page->stage_ns[i]);
        a->stage_cnt[i] = atomic_load(&nic->page->stage_cnt[i]);
    }
}

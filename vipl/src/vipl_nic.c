/*
 * vipl_nic.c - NIC sessions: VipOpenNic, VipCloseNic, VipQueryNic, the
 * error callback, and the local name service.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctl_sock.h"
#include "vipl_ext.h"
#include "vipl_int.h"

/* "via0", "/dev/via0", and the M-VIA names "/dev/via_lo", "/dev/via_ethN".
 * *host_if: the name was via_ethN, which vipd opens only if the host has
 * network interface N. */
static int parse_nic_name(const char *name, uint32_t *idx, bool *host_if)
{
    *host_if = false;
    if (!name || !*name) {
        *idx = 0;
        return 0;
    }
    if (strncmp(name, "/dev/", 5) == 0)
        name += 5;
    const char *num;
    if (strcmp(name, "via_lo") == 0) {
        *idx = 0;
        return 0;
    }
    if (strncmp(name, "via_eth", 7) == 0) {
        num = name + 7;
        *host_if = true;
    } else if (strncmp(name, "via", 3) == 0) {
        num = name + 3;
    } else {
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long v = strtoul(num, &end, 10);
    if (!*num || *end || errno || v >= VIA_MAX_NICS)
        return -1;
    *idx = (uint32_t)v;
    return 0;
}

void vipl_default_error_handler(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR *e)
{
    (void)ctx;
    struct vip_vi *vi = vipl_vi(e->ViHandle);
    const char *q = getenv("VIP_QUIET");
    if (q && *q && *q != '0')
        return;
    if (e->ResourceCode == VIP_RESOURCE_CQ) {
        fprintf(stderr, "vipl: a completion queue overflowed and lost completions (%s); "
                        "VipCQDone/VipCQWait refuse it from now on\n",
                vip_error_code_str(e->ErrorCode));
        return;
    }
    fprintf(stderr, "vipl: VI %u: %s; the VI is in the error state (VipDisconnect resets it)\n",
            vi ? vi->id : 0u, vip_error_code_str(e->ErrorCode));
    const VIP_DESCRIPTOR *d = e->DescriptorPtr;
    if (d) { /* which descriptor, and what the NIC found wrong with it */
        char bits[512];
        vipl_status_bits(d->CS.Status, bits, sizeof bits);
        fprintf(stderr, "vipl:   descriptor %p: %s, %u segment%s, %u bytes; status 0x%x (%s)\n",
                (const void *)d, vipl_control_op_name(d->CS.Control), (unsigned)d->CS.SegCount,
                d->CS.SegCount == 1 ? "" : "s", (unsigned)d->CS.Length,
                (unsigned)d->CS.Status, bits);
        if (d->CS.SegCount && (d->CS.Control & VIP_CONTROL_OP_MASK) == VIP_CONTROL_OP_SENDRECV)
            fprintf(stderr, "vipl:   segment 0: address %p, memory handle %u, %u bytes\n",
                    (void *)d->DS[0].Local.Data.Address, (unsigned)d->DS[0].Local.Handle,
                    (unsigned)d->DS[0].Local.Length);
    }
}

/* The program's VIP_CLOCK, vipd's clock and the profile must agree: a
 * sweep the user asked to run in virtual time never quietly runs in real
 * time, and one process never mixes the two (spec-notes/virtual-time.md). */
static VIP_RETURN clock_agrees(const struct vip_nic *n, const struct via_profile *prof)
{
    const char *want = getenv("VIP_CLOCK");
    bool virt = n->st->clock == VIA_CLOCK_VIRTUAL;
    if (want && *want && strcmp(want, "virtual") && strcmp(want, "real"))
        return vipl_fail(VIP_INVALID_PARAMETER, "VIP_CLOCK is real or virtual, not '%s'", want);
    if (want && !strcmp(want, "virtual") && !prof->paced)
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "VIP_CLOCK=virtual, but via%u runs the '%.31s' profile, which has no "
                         "model time: virtual time needs a paced profile (VIP_PROFILE=sbus or "
                         "pci)", n->nic_index, prof->name);
    if (want && *want && virt != !strcmp(want, "virtual"))
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "VIP_CLOCK=%s, but the vipd at %s runs %s time (it was started with "
                         "--clock %s; an idle one exits 60 s after its last client, or stop it "
                         "with 'vipctl -s %s shutdown')", want, n->sock_path,
                         virt ? "virtual" : "real", virt ? "virtual" : "real", n->sock_path);
    if (nic_virtual_time && !virt)
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "this process runs in virtual time and via%u in real time: one "
                         "process cannot mix them", n->nic_index);
    return VIP_SUCCESS;
}

VIP_RETURN VipOpenNic(const VIP_CHAR *DeviceName, VIP_NIC_HANDLE *NicHandle)
{
    uint32_t idx;
    bool host_if;
    if (!NicHandle)
        return vipl_fail(VIP_INVALID_PARAMETER, "NicHandle is NULL");
    VIP_RETURN env = vipl_env_check();
    if (env != VIP_SUCCESS)
        return env;
    if (parse_nic_name(DeviceName, &idx, &host_if) < 0)
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "unknown device name '%s' (use via0, /dev/via0, /dev/via_lo or "
                         "/dev/via_ethN)", DeviceName);
    struct vip_nic *n = calloc(1, sizeof *n);
    if (!n)
        return vipl_fail(VIP_ERROR_RESOURCE, "out of memory");
    n->sock_system = ctl_socket_find(n->sock_path, sizeof n->sock_path);
    n->sock = vipl_connect_vipd(n->sock_path, n->sock_system);
    if (n->sock < 0) {
        free(n);
        return VIP_ERROR_RESOURCE; /* message set by vipl_connect_vipd */
    }
    pthread_mutex_init(&n->ctl_lock, NULL);
    pthread_mutex_init(&n->report_lock, NULL);
    pthread_mutex_init(&n->lock, NULL);
    vipl_rcache_init(n);

    struct via_ctl_hello h = {.abi = VIA_ABI_VERSION, .nic = idx, .pid = (uint32_t)getpid(),
                              .flags = host_if ? VIA_HELLO_HOST_IF : 0};
    FILE *f = fopen("/proc/self/comm", "r");
    if (f) {
        if (fgets(h.progname, sizeof h.progname, f))
            h.progname[strcspn(h.progname, "\n")] = 0;
        fclose(f);
    }
    struct via_ctl_hello_r r;
    int fds[4], nfds = 4;
    VIP_RETURN rc = vipl_call(n, VIA_CTL_HELLO, &h, sizeof h, &r, sizeof r, fds, &nfds);
    if (rc == VIP_SUCCESS && nfds != 4) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        rc = vipl_fail(VIP_ERROR_RESOURCE,
                       "vipd sent %d shared objects, expected 4 (is it an older vipd?)", nfds);
    }
    if (rc != VIP_SUCCESS)
        goto fail;
    n->session_id = r.session_id;
    n->nic_index = idx;
    n->tpt_map = vipl_map_fd(fds[0], VIA_TPT_BYTES, PROT_READ);
    n->ev = vipl_map_fd(fds[1], sizeof *n->ev, PROT_READ | PROT_WRITE);
    n->st = vipl_map_fd(fds[2], sizeof *n->st, PROT_READ | PROT_WRITE);
    n->np = vipl_map_fd(fds[3], sizeof *n->np, PROT_READ | PROT_WRITE);
    if (!n->tpt_map || !n->ev || !n->st || !n->np) {
        rc = vipl_fail(VIP_ERROR_RESOURCE, "cannot map the NIC's shared pages: %s",
                       strerror(errno));
        goto fail;
    }
    rc = vipl_call(n, VIA_CTL_QUERY_NIC, NULL, 0, &n->attr, sizeof n->attr, NULL, NULL);
    if (rc != VIP_SUCCESS)
        goto fail;
    if ((rc = clock_agrees(n, &r.prof)) != VIP_SUCCESS)
        goto fail;
    r.profile[sizeof r.profile - 1] = 0;
    r.hosts[sizeof r.hosts - 1] = 0;
    if ((rc = vipl_env_agrees(n->sock_path, idx, r.profile, r.nnics, r.hosts)) != VIP_SUCCESS)
        goto fail;
    const char *pm = getenv("VIP_PROGRESS");
    struct nic_params np = {.nic_index = (uint16_t)idx, .tpt = n->tpt_map, .ev = n->ev,
                            .st = n->st, .np = n->np, .prof = &r.prof,
                            .own_thread = !(pm && !strcmp(pm, "manual"))};
    if (!(n->hw = nic_create(&np))) {
        rc = vipl_fail(VIP_ERROR_RESOURCE, "out of memory");
        goto fail;
    }
    n->err_handler = vipl_default_error_handler;
    atomic_store(&n->spin_ns, 100000u); /* SPIN_START_NS of vipl_wait.c */
    const char *sp = getenv("VIP_WAIT_SPIN_US");
    if (sp && *sp) {
        unsigned long us = strtoul(sp, NULL, 10);
        atomic_store(&n->spin_ns, us > 1000000ul ? 1000000000u : (uint32_t)(us * 1000u));
        n->spin_fixed = true;
    }
    if (!(n->handle = vipl_handle_new(n))) {
        rc = vipl_fail(VIP_ERROR_RESOURCE, "this process has %u VIPL objects (the limit)",
                       VIPL_HANDLE_SLOTS);
        nic_destroy(n->hw);
        goto fail;
    }
    n->magic = VIPL_MAGIC_NIC;
    *NicHandle = n->handle;
    return VIP_SUCCESS;
fail:
    if (n->tpt_map)
        munmap(n->tpt_map, VIA_TPT_BYTES);
    if (n->ev)
        munmap(n->ev, sizeof *n->ev);
    if (n->st)
        munmap(n->st, sizeof *n->st);
    if (n->np)
        munmap(n->np, sizeof *n->np);
    close(n->sock);
    free(n);
    return rc;
}

VIP_RETURN VipCloseNic(VIP_NIC_HANDLE NicHandle)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a NIC handle");
    pthread_mutex_lock(&n->lock);
    for (unsigned i = 0; i < VIA_MAX_VI; i++) {
        if (n->vis[i]) {
            pthread_mutex_unlock(&n->lock);
            return vipl_fail(VIP_INVALID_STATE,
                             "VI %u still exists on this NIC: destroy it first", i);
        }
    }
    pthread_mutex_unlock(&n->lock);
    /* A CQ's ring and NIC state are the session's: a CQ left behind would
     * be a handle to freed memory. */
    if (atomic_load(&n->ncqs))
        return vipl_fail(VIP_INVALID_STATE, "%u CQs still exist on this NIC: destroy them first",
                         (unsigned)atomic_load(&n->ncqs));
    /* Closing the session makes vipd free whatever is left (ptags, regions,
     * CQs), exactly as when a process exits. */
    nic_destroy(n->hw);
    close(n->sock);
    munmap(n->tpt_map, VIA_TPT_BYTES);
    munmap(n->ev, sizeof *n->ev);
    munmap(n->st, sizeof *n->st);
    munmap(n->np, sizeof *n->np);
    for (struct vip_ptag *p = n->ptags, *next; p; p = next) {
        next = p->next;
        vipl_handle_free(p->handle);
        p->magic = VIPL_DEAD;
        free(p);
    }
    pthread_mutex_destroy(&n->lock);
    vipl_rcache_fini(n);
    pthread_mutex_destroy(&n->ctl_lock);
    pthread_mutex_destroy(&n->report_lock);
    vipl_handle_free(n->handle);
    n->magic = VIPL_DEAD;
    free(n);
    return VIP_SUCCESS;
}

VIP_RETURN VipQueryNic(VIP_NIC_HANDLE NicHandle, VIP_NIC_ATTRIBUTES *a)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !a)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to VipQueryNic");
    const struct via_ctl_query_nic_r *q = &n->attr;
    memset(a, 0, sizeof *a);
    snprintf(a->Name, sizeof a->Name, "%s", q->name);
    a->HardwareVersion = 0x4000; /* LANai 4.x */
    a->ProviderVersion = VIA_ABI_VERSION;
    a->NicAddressLen = VIA_NIC_ADDR_LEN;
    a->LocalNicAddress = q->nic_addr;
    a->ThreadSafe = VIP_TRUE;
    a->MaxDiscriminatorLen = VIA_MAX_DISCRIM;
    a->MaxRegisterBytes = q->max_register_bytes;
    a->MaxRegisterRegions = q->max_tpt;
    a->MaxRegisterBlockBytes = q->max_register_bytes;
    a->MaxVI = q->max_vi;
    a->MaxDescriptorsPerQueue = q->queue_depth;
    a->MaxSegmentsPerDesc = q->max_segs;
    a->MaxCQ = q->max_cq;
    a->MaxCQEntries = q->max_cq_entries;
    a->MaxTransferSize = q->max_transfer;
    a->NativeMTU = q->mtu;
    a->MaxPtags = q->max_ptags;
    a->ReliabilityLevelSupport = VIP_SERVICE_UNRELIABLE | VIP_SERVICE_RELIABLE_DELIVERY |
                                 VIP_SERVICE_RELIABLE_RECEPTION;
    a->RDMAReadSupport = VIA_RDMA_READ_LEVELS; /* vipd enforces it (kd_vi.c) */
    return VIP_SUCCESS;
}

VIP_RETURN VipErrorCallback(VIP_NIC_HANDLE NicHandle, VIP_PVOID Context,
                            void (*Handler)(VIP_PVOID, VIP_ERROR_DESCRIPTOR *))
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n)
        return vipl_fail(VIP_INVALID_PARAMETER, "not a NIC handle");
    pthread_mutex_lock(&n->lock);
    n->err_handler = Handler ? Handler : vipl_default_error_handler;
    n->err_ctx = Context;
    pthread_mutex_unlock(&n->lock);
    return VIP_SUCCESS;
}

/* ---- name service: this host's NICs --------------------------------------- */

VIP_RETURN VipNSInit(VIP_NIC_HANDLE NicHandle, VIP_PVOID NSInitInfo)
{
    (void)NSInitInfo;
    return vipl_nic(NicHandle) ? VIP_SUCCESS
                               : vipl_fail(VIP_INVALID_PARAMETER, "not a NIC handle");
}

VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE NicHandle)
{
    return VipNSInit(NicHandle, NULL);
}

VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE NicHandle, VIP_CHAR *Name,
                              VIP_NET_ADDRESS *Address, VIP_ULONG NameIndex)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !Name || !Address)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL argument to VipNSGetHostByName");
    struct via_ctl_ns_lookup q = {.index = NameIndex > 0xFFFFFFFFul ? 0xFFFFFFFFu
                                                                    : (uint32_t)NameIndex};
    if (strlen(Name) >= sizeof q.name)
        return vipl_fail(VIP_ERROR_NAMESERVICE, "host name too long (%zu bytes, max %zu)",
                         strlen(Name), sizeof q.name - 1);
    strcpy(q.name, Name);
    struct via_ctl_ns_lookup_r r;
    VIP_RETURN rc = vipl_call(n, VIA_CTL_NS_LOOKUP, &q, sizeof q, &r, sizeof r, NULL, NULL);
    if (rc != VIP_SUCCESS)
        return rc;
    Address->HostAddressLen = VIA_NIC_ADDR_LEN;
    memcpy(vipl_na_bytes(Address), r.nic_addr, VIA_NIC_ADDR_LEN);
    return VIP_SUCCESS;
}

VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS *Address,
                              VIP_CHAR *Name, VIP_ULONG *NameLen)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !Address || !Name || !NameLen)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL argument to VipNSGetHostByAddr");
    if (Address->HostAddressLen != VIA_NIC_ADDR_LEN)
        return vipl_fail(VIP_ERROR_NAMESERVICE, "a host address of %u bytes; this NIC's are %u",
                         Address->HostAddressLen, VIA_NIC_ADDR_LEN);
    struct via_ctl_ns_reverse q = {.pad = 0};
    memcpy(q.nic_addr, vipl_na_bytes(Address), VIA_NIC_ADDR_LEN);
    struct via_ctl_ns_reverse_r r;
    VIP_RETURN rc = vipl_call(n, VIA_CTL_NS_REVERSE, &q, sizeof q, &r, sizeof r, NULL, NULL);
    if (rc != VIP_SUCCESS)
        return rc;
    size_t len = strnlen(r.name, sizeof r.name - 1);
    if (len + 1 > *NameLen) {
        *NameLen = (VIP_ULONG)len + 1;
        return vipl_fail(VIP_INVALID_PARAMETER, "name buffer too small (%zu bytes needed)",
                         len + 1);
    }
    memcpy(Name, r.name, len);
    Name[len] = 0;
    *NameLen = (VIP_ULONG)len + 1;
    return VIP_SUCCESS;
}

/* ---- system management: autodiscovery ----------------------------------------- */

/*
 * VIP_SMI_AUTODISCOVERY fills the caller's VIP_AUTODISCOVERY_LIST:
 * ADAddrArray holds NumAdAddrs pointers to VIP_NET_ADDRESS the caller
 * allocated with room for NicAddressLen host bytes. Out: NumAdAddrs = the
 * NICs the switch reaches (every other NIC of the kernel agent), each with
 * no discriminator, NumberOfHops = 1 (one switch). Too few pointers:
 * VIP_INVALID_PARAMETER, nothing written but NumAdAddrs, the number needed.
 */
VIP_RETURN VipQuerySystemManagementInfo(VIP_NIC_HANDLE NicHandle, VIP_ULONG InfoType,
                                        VIP_PVOID SysManInfo)
{
    struct vip_nic *n = vipl_nic(NicHandle);
    if (!n || !SysManInfo)
        return vipl_fail(VIP_INVALID_PARAMETER, "NULL or stale argument to "
                                                "VipQuerySystemManagementInfo");
    if (InfoType != VIP_SMI_AUTODISCOVERY)
        return vipl_fail(VIP_INVALID_PARAMETER, "InfoType %lu: only VIP_SMI_AUTODISCOVERY (%lu) "
                         "is defined", (unsigned long)InfoType,
                         (unsigned long)VIP_SMI_AUTODISCOVERY);
    VIP_AUTODISCOVERY_LIST *l = SysManInfo;
    if (l->NumAdAddrs && !l->ADAddrArray)
        return vipl_fail(VIP_INVALID_PARAMETER, "ADAddrArray is NULL but NumAdAddrs is %lu",
                         (unsigned long)l->NumAdAddrs);
    struct via_ctl_smi_nics_r r;
    VIP_RETURN rc = vipl_call(n, VIA_CTL_SMI_NICS, NULL, 0, &r, sizeof r, NULL, NULL);
    if (rc != VIP_SUCCESS)
        return rc;
    if (r.count > VIA_MAX_NICS)
        return vipl_fail(VIP_ERROR_RESOURCE, "vipd listed %u NICs (at most %u exist)", r.count,
                         VIA_MAX_NICS);
    if (l->NumAdAddrs < r.count) {
        VIP_ULONG had = l->NumAdAddrs;
        l->NumAdAddrs = r.count;
        return vipl_fail(VIP_INVALID_PARAMETER, "ADAddrArray has %lu entries; %u needed "
                         "(NumAdAddrs now says how many)", (unsigned long)had, r.count);
    }
    for (uint32_t i = 0; i < r.count; i++)
        if (!l->ADAddrArray[i])
            return vipl_fail(VIP_INVALID_PARAMETER, "ADAddrArray[%u] is NULL", i);
    for (uint32_t i = 0; i < r.count; i++) {
        VIP_NET_ADDRESS *a = l->ADAddrArray[i];
        a->HostAddressLen = VIA_NIC_ADDR_LEN;
        a->DiscriminatorLen = 0;
        memcpy(vipl_na_bytes(a), r.nic_addr[i], VIA_NIC_ADDR_LEN);
    }
    l->NumAdAddrs = r.count;
    l->NumberOfHops = 1;
    return VIP_SUCCESS;
}

/*
 * vipctl - status, counters and traces of a running vipd.
 *
 * Talks the management subset of the control protocol (via_abi.h). Never
 * starts a vipd: a status tool that creates what it inspects would hide
 * the very problem it is run to find.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kd_auth.h"
#include "ctl_sock.h"
#include "via_abi.h"
#include "vipctl_hostdev.h"
#include "via_spec.h"

static char sockpath[512];
static bool sock_system; /* the system vipd's socket: root's, or refused */

static int vipd_connect(void)
{
    return sock_system ? ctl_connect_root(sockpath) : ctl_connect(sockpath);
}

static const char *const status_name[] = {
    "VIP_SUCCESS",         "VIP_NOT_DONE",          "VIP_INVALID_PARAMETER",
    "VIP_ERROR_RESOURCE",  "VIP_TIMEOUT",           "VIP_REJECT",
    "VIP_INVALID_RELIABILITY_LEVEL", "VIP_INVALID_MTU", "VIP_INVALID_QOS",
    "VIP_INVALID_PTAG",    "VIP_INVALID_RDMAREAD",  "VIP_DESCRIPTOR_ERROR",
    "VIP_INVALID_STATE",   "VIP_ERROR_NAMESERVICE", "VIP_NO_MATCH",
    "VIP_NOT_REACHABLE",   "VIP_ERROR_NOT_SUPPORTED",
};

static const char *const stage_name[VIA_ST_NSTAGES] = {
    [VIA_ST_BUILD] = "BUILD",         [VIA_ST_T1_RING] = "T1_RING",
    [VIA_ST_T2_BELL] = "T2_BELL",     [VIA_ST_T3_XDES] = "T3_XDES",
    [VIA_ST_T4_XDATA] = "T4_XDATA",   [VIA_ST_T5_TRANSMIT] = "T5_TRANSMIT",
    [VIA_ST_T6_UPDT] = "T6_UPDT",     [VIA_ST_R1_RING] = "R1_RING",
    [VIA_ST_R2_BELL] = "R2_BELL",     [VIA_ST_R3_RECEIVE] = "R3_RECEIVE",
    [VIA_ST_R4_XDES] = "R4_XDES",     [VIA_ST_R5_XDATA] = "R5_XDATA",
    [VIA_ST_R6_UPDT] = "R6_UPDT",     [VIA_ST_R_REFUSED] = "R_REFUSED",
};

/* The receive checks' names (enum via_rx_check, include/via_abi.h). */
static const char *const rx_check_name[VIA_RXC_N] = {
    [VIA_RXC_OK] = "ok",
    [VIA_RXC_CONN] = "conn",
    [VIA_RXC_DST_VI] = "dst_vi",
    [VIA_RXC_ANSWER] = "answer",
    [VIA_RXC_LENGTH] = "length",
    [VIA_RXC_READ_RESP] = "read_resp",
    [VIA_RXC_READ_REQ] = "read_req",
    [VIA_RXC_FIRST] = "first",
    [VIA_RXC_KIND] = "kind",
    [VIA_RXC_SEQ] = "seq",
    [VIA_RXC_NO_RECV] = "no_recv",
    [VIA_RXC_RECV_ERROR] = "recv_error",
    [VIA_RXC_RDMAW_PROT] = "rdma_write_prot",
    [VIA_RXC_RDMAR_PROT] = "rdma_read_prot",
    [VIA_RXC_PULL_FAULT] = "pull_fault",
    [VIA_RXC_LOSSY_GONE] = "lossy_gone",
    [VIA_RXC_LOSSY_STRAY] = "lossy_stray",
};

static const char *vi_state(uint32_t s)
{
    static const char *const n[] = {"IDLE", "CONNECTED", "PENDING", "ERROR"};
    return s < 4 ? n[s] : "?";
}

static const char *reliability(uint32_t r)
{
    switch (r) {
    case VIP_SERVICE_UNRELIABLE:
        return "UD";
    case VIP_SERVICE_RELIABLE_DELIVERY:
        return "RD";
    case VIP_SERVICE_RELIABLE_RECEPTION:
        return "RR";
    default:
        return "?";
    }
}

static void no_vipd(void)
{
    if (sock_system) {
        fprintf(stderr, "vipctl: the system vipd does not answer on %s (root starts it: "
                        "systemctl start vipd, or vipd-start start)\n", sockpath);
        exit(1);
    }
    fprintf(stderr,
            "vipctl: no vipd is running on %s (it starts with the first VipOpenNic, or run "
            "'vipd -f')\n",
            sockpath);
    exit(1);
}

/*
 * One request, one reply. Returns the reply body (malloc'd, *len bytes) or
 * exits with a message. The body buffer holds the largest reply vipd sends.
 */
static void *call(uint32_t op, const void *req, uint32_t reqlen, size_t *len)
{
    int s = vipd_connect();
    if (s < 0) {
        if (s == -ENOENT || s == -ECONNREFUSED)
            no_vipd();
        fprintf(stderr, "vipctl: cannot connect to %s: %s\n", sockpath,
                ctl_refusal()[0] ? ctl_refusal() : strerror(-s));
        exit(1);
    }
    struct via_ctl_hdr h = {.op = op, .len = reqlen, .cookie = 1};
    int rc = ctl_send(s, &h, sizeof h, req, reqlen, NULL, 0);
    if (rc < 0) {
        fprintf(stderr, "vipctl: cannot send to vipd on %s: %s\n", sockpath, strerror(-rc));
        exit(1);
    }
    void *body = malloc(VIA_CTL_MAX_BODY);
    if (!body) {
        fprintf(stderr, "vipctl: out of memory\n");
        exit(1);
    }
    struct via_ctl_reply_hdr r;
    int nfds = 0;
    long n = ctl_recv(s, &r, sizeof r, body, VIA_CTL_MAX_BODY, NULL, &nfds);
    close(s);
    if (n < 0) {
        fprintf(stderr, "vipctl: no reply from vipd on %s: %s\n", sockpath, strerror((int)-n));
        exit(1);
    }
    if (r.status != VIP_SUCCESS) {
        r.msg[sizeof r.msg - 1] = 0;
        const char *sn = r.status >= 0 && (size_t)r.status < sizeof status_name / sizeof *status_name
                             ? status_name[r.status]
                             : "unknown status";
        fprintf(stderr, "vipctl: vipd refused: %s (%s)\n", r.msg, sn);
        exit(1);
    }
    *len = (size_t)n;
    return body;
}

static void print_addr(const uint8_t a[VIA_NIC_ADDR_LEN])
{
    for (unsigned i = 0; i < VIA_NIC_ADDR_LEN; i++)
        printf("%s%02x", i ? ":" : "", a[i]);
}

static int cmd_nics(void)
{
    size_t len;
    struct via_nic_info *a = call(VIA_CTL_LIST_NICS, NULL, 0, &len);
    size_t n = len / sizeof *a;
    /* The host interface each NIC is bound to (/dev/via_ethN, kd_hostif.c). */
    struct kd_hostif *hif = malloc(KD_HOSTIF_MAX * sizeof *hif);
    int nhif = hif ? kd_hostif_list(hif, KD_HOSTIF_MAX) : -1;
    for (size_t i = 0; i < n; i++) {
        struct via_nic_info *o = &a[i];
        o->name[sizeof o->name - 1] = 0;
        o->profile[sizeof o->profile - 1] = 0;
        printf("nic: %s\n", o->name);
        printf("\tprofile:\t\t%s\n", o->profile);
        printf("\tnic_addr:\t\t");
        print_addr(o->nic_addr);
        printf("\n\tstate:\t\t\tPORT_ACTIVE (emulated switch)\n");
        struct via_ctl_get_profile q = {.nic = o->index};
        size_t plen;
        struct via_ctl_profile_r *pr = call(VIA_CTL_GET_PROFILE, &q, sizeof q, &plen);
        printf("\tmax_vi:\t\t\t%u\n\tmax_cq:\t\t\t%u (per process)\n",
               plen >= sizeof *pr ? pr->max_vi : VIA_MAX_VI, VIA_MAX_CQ);
        free(pr);
        printf("\tmax_cq_entries:\t\t%u\n\tmax_ptags:\t\t%u (per process)\n",
               VIA_MAX_CQ_ENTRIES, VIA_MAX_PTAGS);
        printf("\tmax_tpt:\t\t%u (per process)\n\tmax_register_bytes:\t%llu\n", VIA_MAX_TPT,
               (unsigned long long)VIA_MAX_REGISTER_BYTES);
        printf("\tmax_segs:\t\t%u\n\tmax_transfer:\t\t%u\n\tmtu:\t\t\t%u\n", VIA_MAX_SEGS,
               VIA_MAX_TRANSFER, VIA_MTU);
        printf("\tqueue_depth:\t\t%u\n\tmax_discriminator:\t%u\n", VIA_QUEUE_DEPTH,
               VIA_MAX_DISCRIM);
        printf("\tsessions:\t\t%u\n\tvis:\t\t\t%u\n\tregions:\t\t%u\n\tconnections:\t\t%u\n",
               o->sessions, o->vis, o->regions, o->conns);
        printf("\ttx:\t\t\t%llu msgs, %llu bytes\n\trx:\t\t\t%llu msgs, %llu bytes\n",
               (unsigned long long)o->tx_msgs, (unsigned long long)o->tx_bytes,
               (unsigned long long)o->rx_msgs, (unsigned long long)o->rx_bytes);
        printf("\trx_dropped:\t\t%llu\n\tdesc_errors:\t\t%llu\n",
               (unsigned long long)o->rx_dropped, (unsigned long long)o->desc_errors);
        int h = nhif > 0 ? kd_hostif_eth(hif, (unsigned)nhif, o->index) : -1;
        if (h >= 0)
            vipctl_hostif_print(&hif[h], (int)o->index);
        else
            printf("\thost_interface:\t\tnone: this host has no network interface %u, so "
                   "/dev/via_eth%u does not open\n", o->index, o->index);
        if (i + 1 < n)
            printf("\n");
    }
    free(hif);
    free(a);
    return 0;
}

/* The NIC's profile in the units of its file, and what the model charged. */
static int cmd_profile(const char *arg)
{
    unsigned nic = 0;
    if (arg && (sscanf(arg, "via%u", &nic) != 1 && sscanf(arg, "%u", &nic) != 1)) {
        fprintf(stderr, "vipctl: profile takes a NIC name such as via1, not '%s'\n", arg);
        return 2;
    }
    struct via_ctl_get_profile q = {.nic = nic};
    size_t len;
    struct via_ctl_profile_r *a = call(VIA_CTL_GET_PROFILE, &q, sizeof q, &len);
    if (len < sizeof *a) {
        fprintf(stderr, "vipctl: short reply from vipd\n");
        free(a);
        return 1;
    }
    const struct via_profile *p = &a->prof;
    char name[sizeof p->name + 1];
    snprintf(name, sizeof name, "%.*s", (int)sizeof p->name, p->name);
    printf("nic: via%u\n\tprofile:\t\t%s (%s)\n", nic, name,
           p->paced ? "paced" : "not paced: no costs");
    printf("\tdoorbells:\t\t%s\n", p->hw_doorbell ? "hardware (no scan)"
                                                     : "polled linearly by the firmware");
    printf("\tmax_vi:\t\t\t%u\n\tscan_slots:\t\t%u (VIs scanned + command queue)\n",
           a->max_vi, a->scan_slots);
    if (p->paced) {
        double mbps = 8000.0;
        printf("\tlanai_clock:\t\t%.1f MHz\n", p->lanai_mhz);
        printf("\thost:\t\t\tBuild %.3f us, Done %.3f us, memory %.3f us\n",
               p->host_build_ns / 1000, p->host_done_ns / 1000, p->mem_ns / 1000);
        printf("\tpio write/read:\t\t%.3f / %.3f us per word\n", p->pio_write_ns / 1000,
               p->pio_read_ns / 1000);
        printf("\tdoorbell poll:\t\t%.3f us per pair (firmware CPI %.3f)\n", p->poll_ns / 1000,
               p->lanai_cpi);
        printf("\tfirmware steps:\t\tbell %.3f, desc %.3f, data %.3f, xmit %.3f, recv %.3f, "
               "updt %.3f us\n", p->bell_ns / 1000, p->desc_ns / 1000, p->data_ns / 1000,
               p->xmit_ns / 1000, p->recv_ns / 1000, p->updt_ns / 1000);
        printf("\textension firmware:\t+%.3f us a token, +%.3f us a VI's poll\n",
               p->ext_bell_ns / 1000, p->ext_poll_ns / 1000);
        printf("\tdma:\t\t\tstart %.3f us (read) / %.3f us (write), copyback %.3f us, "
               "host->NIC %.0f Mbit/s, NIC->host %.0f Mbit/s\n", p->dma_h2n_start_ns / 1000,
               p->dma_n2h_start_ns / 1000, p->copyback_ns / 1000, mbps / p->h2n_ns_per_byte,
               mbps / p->n2h_ns_per_byte);
        printf("\tlink:\t\t\t%.0f Mbit/s, switch %.3f us, header %.0f bytes\n",
               mbps / p->link_ns_per_byte, p->switch_ns / 1000, p->wire_header);
        printf("\tsram:\t\t\t%.0f KiB\n", p->sram_bytes / 1024);
        static const char *const stage[] = {"Build", "T1_Ring", "T2_Bell", "T3_XDes",
                                            "T4_XData", "T5_Transmit", "T6_Updt", "R1_Ring",
                                            "R2_Bell", "R3_Receive", "R4_XDes", "R5_XData",
                                            "R6_Updt"};
        printf("\tmodelled time per stage since the NIC was last idle (mean):\n");
        for (unsigned i = 0; i < sizeof stage / sizeof *stage; i++)
            if (a->stage_cnt[i])
                printf("\t  %-12s %10llu x %9.3f us\n", stage[i],
                       (unsigned long long)a->stage_cnt[i],
                       (double)a->stage_ns[i] / (double)a->stage_cnt[i] / 1000);
    }
    free(a);
    return 0;
}

static int cmd_counters(void)
{
    size_t len;
    struct via_nic_info *a = call(VIA_CTL_LIST_NICS, NULL, 0, &len);
    size_t n = len / sizeof *a;
    printf("%-6s %12s %14s %12s %14s %10s %10s\n", "NIC", "TX_MSGS", "TX_BYTES", "RX_MSGS",
           "RX_BYTES", "RX_DROPS", "DESC_ERRS");
    for (size_t i = 0; i < n; i++) {
        struct via_nic_info *o = &a[i];
        o->name[sizeof o->name - 1] = 0;
        printf("%-6s %12llu %14llu %12llu %14llu %10llu %10llu\n", o->name,
               (unsigned long long)o->tx_msgs, (unsigned long long)o->tx_bytes,
               (unsigned long long)o->rx_msgs, (unsigned long long)o->rx_bytes,
               (unsigned long long)o->rx_dropped, (unsigned long long)o->desc_errors);
    }
    /* why packets were refused: each receive check that failed, by name */
    for (size_t i = 0; i < n; i++) {
        bool any = false;
        for (unsigned r = 1; r < VIA_RXC_N; r++)
            if (a[i].rx_refused[r]) {
                if (!any)
                    printf("refused on %s:", a[i].name);
                printf("%s %llu %s", any ? "," : "", (unsigned long long)a[i].rx_refused[r],
                       rx_check_name[r]);
                any = true;
            }
        if (any)
            printf("\n");
    }
    free(a);
    return 0;
}

/* The UDP links of this vipd's sessions, the faults injected, the hosts. */
static int cmd_net(void)
{
    static const char *const name[VIA_NET_NCOUNTERS] = {
        "tx_frames", "rx_frames", "tx_batches", "rx_batches", "retransmits", "acks_sent",
        "nacks_sent", "nacks_got", "dup_dropped", "bad_short", "bad_crc", "bad_version",
        "bad_vi", "lost", "timeouts", "fault_drop", "fault_dup", "fault_reorder",
        "fault_corrupt", "fault_delay"};
    size_t len;
    struct via_ctl_net_stats_r *a = call(VIA_CTL_NET_STATS, NULL, 0, &len);
    if (!a || len < sizeof *a ||
        len != sizeof *a + (size_t)a->nhosts * sizeof(struct via_net_host_info)) {
        free(a);
        fprintf(stderr, "vipctl: vipd's answer to NET_STATS is malformed\n");
        return 1;
    }
    for (unsigned i = 0; i < VIA_NET_NCOUNTERS; i++)
        printf("%-14s %llu\n", name[i], (unsigned long long)a->cnt[i]);
    const struct via_net_faults *f = &a->faults;
    printf("faults (--faults): drop %.4f dup %.4f reorder %.4f corrupt %.4f delay %.4f "
           "(%u ms)\n", f->drop / 65536.0, f->dup / 65536.0, f->reorder / 65536.0,
           f->corrupt / 65536.0, f->delay / 65536.0, f->delay_ms);
    const struct via_net_host_info *h = (const void *)(a + 1);
    for (unsigned i = 0; i < a->nhosts; i++) {
        char ip[16];
        uint8_t b[4];
        memcpy(b, &h[i].ip, 4);
        snprintf(ip, sizeof ip, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
        printf("host %-16.63s %08x %s:%u %s, %u connection%s\n", h[i].name, h[i].host_id, ip,
               h[i].port, h[i].up == 2 ? "this vipd" : h[i].up ? "up" : "down", h[i].conns,
               h[i].conns == 1 ? "" : "s");
    }
    free(a);
    return 0;
}

static int cmd_vis(void)
{
    size_t len;
    struct via_vi_info *a = call(VIA_CTL_LIST_VIS, NULL, 0, &len);
    size_t n = len / sizeof *a;
    printf("%-6s %5s %8s %-16s %-9s %-3s %-12s %5s %5s %10s %10s %6s %6s\n", "NIC", "VI", "PID",
           "PROG", "STATE", "REL", "PEER", "SQ", "RQ", "TX_MSGS", "RX_MSGS", "DROPS", "ERRS");
    for (size_t i = 0; i < n; i++) {
        struct via_vi_info *o = &a[i];
        char peer[32] = "-";
        if (o->peer_vi != UINT32_MAX)
            snprintf(peer, sizeof peer, "via%u/%u", o->peer_nic, o->peer_vi);
        o->progname[sizeof o->progname - 1] = 0;
        printf("via%-3u %5u %8u %-16.16s %-9s %-3s %-12s %5u %5u %10llu %10llu %6llu %6llu\n",
               o->nic, o->vi_id, o->owner_pid, o->progname, vi_state(o->state),
               reliability(o->reliability), peer, o->sq_depth, o->rq_depth,
               (unsigned long long)o->tx_msgs, (unsigned long long)o->rx_msgs,
               (unsigned long long)o->rx_dropped, (unsigned long long)o->desc_errors);
    }
    if (n == 0)
        printf("(no VIs)\n");
    free(a);
    return 0;
}

static int cmd_mem(void)
{
    size_t len;
    struct via_mem_info *a = call(VIA_CTL_LIST_MEM, NULL, 0, &len);
    size_t n = len / sizeof *a;
    printf("%-6s %-10s %8s %5s %-18s %12s %s\n", "NIC", "HANDLE", "PID", "PTAG", "VA", "LEN",
           "FLAGS");
    for (size_t i = 0; i < n; i++) {
        struct via_mem_info *o = &a[i];
        char fl[32];
        snprintf(fl, sizeof fl, "%s%s%s", o->flags & VIA_TPT_RDMA_WRITE ? "rdma_write " : "",
                 o->flags & VIA_TPT_RDMA_READ ? "rdma_read" : "", o->flags ? "" : "-");
        printf("via%-3u 0x%08x %8u %5u 0x%016llx %12llu %s\n", o->nic, o->handle, o->owner_pid,
               o->ptag, (unsigned long long)o->va, (unsigned long long)o->len, fl);
    }
    if (n == 0)
        printf("(no registered memory)\n");
    free(a);
    return 0;
}

static int by_u32(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Per stage, in pipeline order: how many dumped records carry a modelled
 * duration (paced profiles) and their median. */
static void trace_stats(const struct via_trace_rec *a, size_t n)
{
    uint32_t *d = n ? malloc(n * sizeof *d) : NULL;
    if (n && !d) {
        fprintf(stderr, "vipctl: out of memory\n");
        exit(1);
    }
    size_t total = 0;
    printf("%-12s %8s %12s\n", "STAGE", "COUNT", "MEDIAN_US");
    for (unsigned st = 0; st < VIA_ST_NSTAGES; st++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (a[i].stage == st && a[i].dur_ns > 0)
                d[k++] = a[i].dur_ns;
        total += k;
        if (k == 0) {
            printf("%-12s %8u %12s\n", stage_name[st], 0u, "-");
            continue;
        }
        qsort(d, k, sizeof *d, by_u32);
        double med = k % 2 ? d[k / 2] : ((double)d[k / 2 - 1] + d[k / 2]) / 2.0;
        printf("%-12s %8zu %12.3f\n", stage_name[st], k, med / 1000.0);
    }
    if (total == 0)
        printf("(no records with a modelled duration: durations exist only under a paced "
               "profile, with 'vipctl trace on')\n");
    free(d);
}

static int cmd_trace(const char *arg)
{
    struct via_ctl_trace t = {0};
    const char *want = "vipctl: trace wants on, off, dump or stats";
    if (!arg) {
        fprintf(stderr, "%s\n", want);
        return 2;
    }
    bool stats = false;
    if (strcmp(arg, "on") == 0)
        t.on = 1;
    else if (strcmp(arg, "off") == 0)
        t.on = 0;
    else if (strcmp(arg, "dump") == 0)
        t.on = 2;
    else if (strcmp(arg, "stats") == 0) {
        t.on = 2;
        stats = true;
    } else {
        fprintf(stderr, "%s, not '%s'\n", want, arg);
        return 2;
    }
    size_t len;
    struct via_trace_rec *a = call(VIA_CTL_TRACE, &t, sizeof t, &len);
    if (t.on != 2) {
        printf("stage trace %s\n", t.on ? "on" : "off");
        free(a);
        return 0;
    }
    size_t n = len / sizeof *a;
    if (stats) {
        trace_stats(a, n);
        free(a);
        return 0;
    }
    printf("%12s %5s %-12s %8s %8s %10s\n", "T_US", "VI", "STAGE", "MSG_SEQ", "LEN", "DUR_US");
    for (size_t i = 0; i < n; i++) {
        double us = (double)(a[i].t_ns - a[0].t_ns) / 1000.0;
        printf("%12.3f %5u %-12s %8u %8u %10.3f", us, a[i].vi_id,
               a[i].stage < VIA_ST_NSTAGES ? stage_name[a[i].stage] : "?", a[i].msg_seq,
               a[i].len, a[i].dur_ns / 1000.0);
        if (a[i].stage == VIA_ST_R_REFUSED && a[i].len < VIA_RXC_N)
            printf("  refused: %s", rx_check_name[a[i].len]); /* LEN is the check */
        printf("\n");
    }
    if (n == 0)
        printf("(no trace records: 'vipctl trace on', then run a program)\n");
    free(a);
    return 0;
}

static int cmd_ping(void)
{
    int s = vipd_connect();
    if (s < 0) {
        printf("no vipd answers on %s (%s)\n", sockpath,
               ctl_refusal()[0] ? ctl_refusal() : strerror(-s));
        return 1;
    }
    struct via_ctl_hdr h = {.op = VIA_CTL_PING, .len = 0, .cookie = 1};
    struct via_ctl_reply_hdr r;
    struct via_ctl_hello_r b;
    int nfds = 0;
    long n = -EIO;
    if (ctl_send(s, &h, sizeof h, NULL, 0, NULL, 0) == 0)
        n = ctl_recv(s, &r, sizeof r, &b, sizeof b, NULL, &nfds);
    close(s);
    if (n != (long)sizeof b || r.status != VIP_SUCCESS) {
        printf("something on %s accepted the connection but did not answer like vipd\n",
               sockpath);
        return 1;
    }
    b.profile[sizeof b.profile - 1] = 0;
    printf("vipd on %s is alive: %u NIC%s, profile %s\n", sockpath, b.nnics,
           b.nnics == 1 ? "" : "s", b.profile);
    return 0;
}

/* Every environment variable the library, vipd, the NIC, libam2, amrun
 * and the AMUDP master read (test_basic test_vipctl_env_lists_all checks
 * this table against the sources), by who reads it. */
static const struct env_var {
    const char *name, *meaning;
} env_vars[] = {
    {NULL, "VIPL programs (libvipl) and the NIC in them"},
    {"VIP_PROFILE", "NIC timing profile of an autostarted vipd (default native)"},
    {"VIP_CLOCK", "a paced NIC's time: real (default) or virtual"},
    {"VIP_VT_HOLD", "virtual time, a wait a peer holds back: adapt (default), sleep or yield"},
    {"VIP_EXT_MODE", "short-message path: standard, descriptorless, merged"},
    {"VIP_EXT_MAX", "size threshold (bytes) up to which VIP_EXT_MODE applies"},
    {"VIP_PROGRESS", "manual: no NIC thread; the NIC works only inside VIPL calls"},
    {"VIP_WAIT_SPIN_US", "fixed poll budget of waits before they sleep (default: adaptive)"},
    {"VIP_CMA", "1: large messages between processes of this host in one copy"},
    {"VIP_RCACHE", "0: no registration cache (every registration asks vipd)"},
    {"VIP_DEBUG", "1: every failing call says why on stderr"},
    {"VIP_QUIET", "1: the default error handler prints nothing"},
    {"VIP_FAULTS", "faults the NIC injects on links to other hosts (drop=..,dup=..,seed=..)"},
    {"VIP_NET_TIMEOUT_MS", "links to other hosts: a peer silent this long is gone"},
    {"VIP_NET_RTO_MS", "UDP link: first retransmission timeout (5)"},
    {"VIP_NET_DEBUG", "1: the libfabric link says what it does"},
    {"VIP_NET_TRACE", "1: the libfabric link traces its wake-ups"},
    {"FI_PROVIDER", "libfabric link: the provider (libfabric's own variable)"},
    {"FI_OFI_RXM_BUFFER_SIZE", "libfabric link: rxm buffer size (set if unset)"},
    {"FI_OFI_RXM_EAGER_LIMIT", "libfabric link: rxm eager limit (set if unset)"},
    {"FI_OFI_RXM_MSG_RX_SIZE", "libfabric link: rxm receive queue (set if unset)"},
    {"FI_OFI_RXM_MSG_TX_SIZE", "libfabric link: rxm send queue (set if unset)"},
    {"VIPD_SOCKET", "vipd control socket path"},
    {"XDG_RUNTIME_DIR", "holds vipd/vipd.sock when VIPD_SOCKET is unset"},
    {"VIPD_SYSTEM_SOCKET", "the system vipd's socket (" CTL_SYSTEM_SOCKET "), when the user's own is absent"},
    {"VIPD_AUTOSTART", "0: VipOpenNic does not start vipd"},
    {"VIPD_PATH", "vipd binary VipOpenNic starts"},
    {"VIPD_CTL_TIMEOUT_MS", "how long a call waits for vipd's answer (10000)"},
    {"VIPD_PING_MS", "how often a call blocked for a peer checks vipd is alive (1000)"},
    {NULL, "vipd (an autostarted one reads them in the program's environment)"},
    {"VIPD_NICS", "NICs of an autostarted vipd (2)"},
    {"VIPD_HOSTS", "hosts file of names for VipNSGetHostByName (vipd --hosts)"},
    {"VIPD_IDLE_EXIT", "seconds an autostarted vipd waits without sessions (60)"},
    {"VIP_PROFILE_DIR", "where vipd finds NAME.conf profiles"},
    {"VIPD_HB_MS", "vipd --listen: heartbeat to the other hosts (250)"},
    {"VIPD_HOST_TIMEOUT_MS", "vipd --listen: a host silent this long is down (3000)"},
    {NULL, "AM-II programs (libam2) and amrun"},
    {"AM2_NIC", "the NIC an AM-II process uses (via0)"},
    {"AM2_SHM", "0: peers on this host go through the NIC too"},
    {"AM2_DIRECT", "0: AM_Poll always reads the bundle's CQ"},
    {"AM2_DEBUG", "1: every failing AM call says why on stderr"},
    {"AM2_CONNECT_MS", "how long a first message waits for its connection (10000)"},
    {"AM2_CONGESTION_MS", "how long a request waits for a credit (30000)"},
    {"AM2_SPMD_TIMEOUT_MS", "how long start-up and barriers wait for the other ranks (30000)"},
    {"AM2_SPMD_RANK", "set by amrun: the rank"},
    {"AM2_SPMD_NRANKS", "set by amrun: the job's size"},
    {"AM2_SPMD_JOB", "set by amrun: the job's number (its endpoints' tag)"},
    {"AM2_SPMD_DIR", "set by amrun: the job's directory"},
    {"AM2_SPMD_RDV", "set by amrun --hosts: its rendezvous"},
    {"SLURM_PROCID", "a job started by srun: the rank (also SLURM_NTASKS, SLURM_JOB_ID)"},
    {"SLURM_STEP_ID", "a job started by srun: its step (the ranks' meeting directory)"},
    {"PMI_RANK", "a job of a PMI launcher: the rank (also PMI_SIZE, PMI_ID)"},
    {"OMPI_COMM_WORLD_RANK", "a job of Open MPI's mpirun: the rank (also ..._SIZE)"},
    {"AMRUN_TIMEOUT", "seconds before amrun kills the job (0: none)"},
    {"AMRUN_SSH", "the command amrun --hosts starts ranks with (ssh)"},
    {"AMRUN_RDV_HOST", "the address ranks reach amrun's rendezvous at"},
    {"TMPDIR", "where amrun makes the job's directory (/tmp)"},
    {"AM2_AMRUN", "the amrun an AMUDP master runs (beside libam2, else PATH)"},
    {"AMUDP_SPAWNFN", "an AMUDP master's spawner: L (this host, default) or S (ssh)"},
    {"AMUDP_SSH_SERVERS", "S: the hosts the workers start on"},
    {"AMUDP_SSH_CMD", "S: the ssh command (ssh)"},
    {"AMUDP_SSH_OPTIONS", "S: its options"},
    {"AMUDP_MASTERIP", "S: the address workers reach the master at"},
};

static int cmd_env(void)
{
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
        const struct env_var *e = &env_vars[i];
        if (!e->name) {
            printf("%s%s:\n", i ? "\n" : "", e->meaning);
            continue;
        }
        const char *v = getenv(e->name);
        printf("  %-22s = %-20s %s\n", e->name, v ? v : "(unset)", e->meaning);
    }
    printf("\n%-24s = %s%s\n", "(socket path)", sockpath, sock_system ? " (system vipd)" : "");
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vipctl [-s SOCKET] COMMAND      (-h, --help: this text)\n"
               "commands:\n"
               "  nics              NICs, profiles, limits, usage, counters, and the host\n"
               "                    interface and PCI device of each /dev/via_ethN (default)\n"
               "  vis               table of all VIs (a system vipd shows a user their own)\n"
               "  mem               table of registered memory (the same)\n"
               "  counters          per-NIC counters\n"
               "  net               UDP links to other hosts: frames, retransmits, drops,\n"
               "                    faults injected (vipd --faults), the hosts and their state\n"
               "  profile [viaN]    the NIC's timing profile, VI bound, modelled stage times\n"
               "  trace on|off|dump|stats\n"
               "                    stage trace control; dump prints the records (DUR_US:\n"
               "                    modelled stage time, paced profiles), stats the count\n"
               "                    and median DUR_US of each stage\n"
               "  shutdown          stop vipd (its clients' VIs go to the error state)\n"
               "  ping              exit 0 if a vipd answers\n"
               "  env               every environment variable programs, vipd and amrun\n"
               "                    read: its value here and its meaning; the socket path\n"
               "  doctor            what the host offers for faster links: interfaces,\n"
               "                    PCI devices, kernel modules, RDMA drivers and devices\n"
               "  keygen FILE       a new cluster key (mode 0600) for vipd --listen: copy it\n"
               "                    to every host (vipd --key FILE, or vipd.key beside the\n"
               "                    hosts file)\n");
}

int main(int argc, char **argv)
{
    int c;
    const char *sock = NULL;
    for (int i = 1; i < argc && argv[i][0] == '-'; i += 1 + !strcmp(argv[i], "-s"))
        if (!strcmp(argv[i], "--help")) { /* the long spelling users try first */
            usage(stdout);
            return 0;
        }
    while ((c = getopt(argc, argv, "+s:h")) != -1) {
        if (c == 's')
            sock = optarg;
        else if (c == 'h') {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (sock)
        snprintf(sockpath, sizeof sockpath, "%s", sock);
    else
        sock_system = ctl_socket_find(sockpath, sizeof sockpath);
    const char *cmd = optind < argc ? argv[optind] : "nics";
    const char *arg = optind + 1 < argc ? argv[optind + 1] : NULL;
    if (strcmp(cmd, "nics") == 0)
        return cmd_nics();
    if (strcmp(cmd, "vis") == 0)
        return cmd_vis();
    if (strcmp(cmd, "mem") == 0)
        return cmd_mem();
    if (strcmp(cmd, "net") == 0)
        return cmd_net();
    if (strcmp(cmd, "counters") == 0)
        return cmd_counters();
    if (strcmp(cmd, "trace") == 0)
        return cmd_trace(arg);
    if (strcmp(cmd, "profile") == 0)
        return cmd_profile(arg);
    if (strcmp(cmd, "ping") == 0)
        return cmd_ping();
    if (strcmp(cmd, "env") == 0)
        return cmd_env();
    if (strcmp(cmd, "doctor") == 0)
        return vipctl_doctor();
    if (strcmp(cmd, "keygen") == 0) {
        char why[400];
        if (!arg) {
            fprintf(stderr, "vipctl: keygen wants the file to write (e.g. vipd.key beside "
                            "the hosts file)\n");
            return 2;
        }
        if (!kd_auth_keygen(arg, why, sizeof why)) {
            fprintf(stderr, "vipctl: %s\n", why);
            return 1;
        }
        printf("cluster key written to %s (mode 0600): copy it to every host\n", arg);
        return 0;
    }
    if (strcmp(cmd, "shutdown") == 0) {
        size_t len;
        free(call(VIA_CTL_SHUTDOWN, NULL, 0, &len));
        printf("vipd on %s is shutting down\n", sockpath);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "vipctl: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}

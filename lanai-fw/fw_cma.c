/*
 * fw_cma.c - one copy for large SENDs between two processes of this host
 * (native profile): the rendezvous by cross-memory attach.
 *
 * On the ring a message is copied twice (the sending NIC gathers it into
 * the link, the receiving NIC scatters it out). From FW_CMA_MIN bytes on,
 * the sending NIC, after its TPT check of the gather list, publishes a
 * SEND_RTS instead: a table of the segments (addresses in the sender's
 * address space). The receiving NIC, once the RTS has met a checked
 * receive descriptor, moves the bytes with process_vm_readv(2) straight
 * from the sender's memory into its scatter list, completes the receive
 * and answers with an ACK, which completes the send (fw_resp.c, fw_comp.c).
 * An RDMA write goes the same way as a WRITE_RTS: the target NIC checks
 * the target range (TPT, enables) first, then pulls into it.
 *
 * Who may be read: the peer's pid comes from the pidfd vipd opened for the
 * connection (trusted), never from a packet. The kernel allows the read
 * only with ptrace rights over the peer, i.e. where the receiver could
 * read all of the sender's memory anyway; a sender that names other
 * addresses reads its own memory into its peer, or fails its own
 * connection. Where the kernel refuses (EPERM: another user, a
 * non-dumpable peer), or the receiver's NIC has it off (VIP_CMA is not 1
 * there), the receiver says so with a NAK and the message and the rest of
 * the connection's go through the ring.
 * spec-notes/cma.md says why it is off by default.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "via_spec.h"

#include "fw.h"
#include "fw_link.h"

/* Off unless VIP_CMA=1: on this machine the pull (about half memcpy's rate
 * from DRAM, page pinning included) beats the two pipelined ring copies
 * only when the two ends share a core's throughput (spec-notes/cma.md). */
void fw_cma_init(struct fw_nic *nic)
{
    const char *e = getenv("VIP_CMA");
    nic->cma_on = e && strcmp(e, "1") == 0;
}

/* The pid a pidfd stands for, in our pid namespace (its fdinfo's Pid
 * line); 0 when there is none (not a pidfd, or the process is not
 * visible from here). */
static int pidfd_pid(int pidfd)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[128];
    int pid = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Pid: %d", &pid) == 1)
            break;
    fclose(f);
    return pid > 0 ? pid : 0;
}

void fw_cma_connect(struct fw_vi *vi, int peer_pidfd)
{
    vi->cma = false;
    vi->cma_pid = 0;
    vi->req.msg.rdv = false;
    if (!vi->nic->cma_on || vi->nic->paced || vi->link.ops != &fw_link_shm_ops ||
        peer_pidfd < 0 || vi->reliability == VIP_SERVICE_UNRELIABLE)
        return;
    vi->cma_pid = pidfd_pid(peer_pidfd);
    vi->cma = vi->cma_pid != 0;
}

bool fw_cma_wanted(const struct fw_vi *vi, const struct fw_xdes *d)
{
    /* The ACK that completes the send needs a reliable level (an
     * unreliable receiver answers nothing). */
    return vi->cma && d->op != VIP_CONTROL_OP_RDMAREAD && d->total >= FW_CMA_MIN &&
           vi->reliability != VIP_SERVICE_UNRELIABLE;
}

uint32_t fw_cma_table(const struct fw_xdes *d, struct via_rts_seg *out)
{
    unsigned n = 0;
    for (unsigned i = 0; i < d->segcount; i++)
        if (d->seg[i].len)
            out[n++] = (struct via_rts_seg){.va = d->seg[i].va, .len = d->seg[i].len};
    return n * (uint32_t)sizeof *out;
}

bool fw_cma_table_take(const struct via_wire_hdr *h, const uint8_t *payload,
                       struct via_rts_seg *out, unsigned *n)
{
    if ((h->flags & ~VIA_PKT_IMM) != (VIA_PKT_FIRST | VIA_PKT_LAST) || h->frag_off ||
        h->frag_len % sizeof *out || !h->frag_len || h->frag_len > VIA_MAX_SEGS * sizeof *out)
        return false;
    /* One copy out of the ring: the peer may rewrite it after we looked. */
    memcpy(out, payload, h->frag_len);
    *n = h->frag_len / (uint32_t)sizeof *out;
    uint64_t sum = 0;
    for (unsigned i = 0; i < *n; i++) {
        if (!out[i].len || out[i].len > VIA_MAX_TRANSFER)
            return false;
        sum += out[i].len;
    }
    return sum == h->msg_len;
}

/* Advance an iovec array past `done` bytes. */
static void iov_skip(struct iovec **v, unsigned long *n, size_t done)
{
    while (*n && done >= (*v)->iov_len) {
        done -= (*v)->iov_len;
        (*v)++;
        (*n)--;
    }
    if (*n && done) {
        (*v)->iov_base = (uint8_t *)(*v)->iov_base + done;
        (*v)->iov_len -= done;
    }
}

int fw_cma_pull(struct fw_vi *vi, const struct via_rts_seg *src, unsigned n, uint32_t total,
                const struct fw_xdes *dst)
{
    if (!vi->cma)
        return EPERM; /* VIP_CMA is not 1 here, or refused once already */
    struct iovec lv[VIA_MAX_SEGS], rv[VIA_MAX_SEGS];
    unsigned long ln = 0, rn = n;
    uint32_t left = total;
    for (unsigned i = 0; i < dst->segcount && left; i++) {
        uint32_t k = dst->seg[i].len < left ? dst->seg[i].len : left;
        if (k)
            lv[ln++] = (struct iovec){.iov_base = (void *)(uintptr_t)dst->seg[i].va, .iov_len = k};
        left -= k;
    }
    for (unsigned i = 0; i < n; i++)
        rv[i] = (struct iovec){.iov_base = (void *)(uintptr_t)src[i].va, .iov_len = src[i].len};
    struct iovec *l = lv, *r = rv;
    size_t want = total;
    while (want) {
        ssize_t got = process_vm_readv(vi->cma_pid, l, ln, r, rn, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return errno == EPERM ? EPERM : errno ? errno : EIO;
        if (got == 0)
            return EFAULT; /* a short read that moves nothing: a hole */
        want -= (size_t)got;
        iov_skip(&l, &ln, (size_t)got);
        iov_skip(&r, &rn, (size_t)got);
    }
    /* The pid was the peer's all along only if the peer still lives: a
     * pid is not reused before its zombie is reaped. */
    int fd = atomic_load_explicit(&vi->peer_pidfd, memory_order_relaxed);
    if (fd < 0 || hal_pidfd_exited(fd))
        return ESRCH;
    return 0;
}

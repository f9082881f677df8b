/*
 * fi_stream.c - the reference for the libfabric link's bandwidth: a plain
 * libfabric stream between two processes of this machine, as
 * fi_rdm_pingpong's streaming cousins do it and nothing of ours in between:
 * one FI_EP_RDM endpoint per process (FI_PROVIDER, default tcp;ofi_rxm,
 * bound to -a ADDR, default 127.0.0.1), the sender keeps -w sends of -s
 * bytes in flight from one registered buffer, the receiver keeps as many
 * receives posted; the receiver answers the last message with 4 bytes.
 *
 *   fi_stream [-s BYTES] [-n COUNT] [-w WINDOW] [-a ADDR] [--csv]
 *
 * Prints bytes, messages, seconds, MB/s (10^6) and messages per second.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define MAX_WINDOW 256

struct ep {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    struct fid_mr *mr;
    void *desc;
    fi_addr_t peer;
    uint8_t *buf;
    struct fi_context ctx[MAX_WINDOW + 1];
};

static const char *role = "";

__attribute__((noreturn)) static void die(const char *what, int rc)
{
    fprintf(stderr, "fi_stream%s: %s: %s\n", role, what, fi_strerror(rc < 0 ? -rc : rc));
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void ep_open(struct ep *e, const char *addr, size_t len, int fd)
{
    struct fi_info *h = fi_allocinfo();
    h->caps = FI_MSG;
    h->mode = FI_CONTEXT;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
    const char *p = getenv("FI_PROVIDER");
    if (!p || !*p)
        h->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
    int rc = fi_getinfo(FI_VERSION(1, 9), addr, NULL, FI_SOURCE, h, &e->info);
    fi_freeinfo(h);
    if (rc)
        die("fi_getinfo", rc);
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .size = 4 * MAX_WINDOW};
    struct fi_av_attr ava = {.type = FI_AV_TABLE};
    if ((rc = fi_fabric(e->info->fabric_attr, &e->fabric, NULL)))
        die("fi_fabric", rc);
    if ((rc = fi_domain(e->fabric, e->info, &e->domain, NULL)))
        die("fi_domain", rc);
    if ((rc = fi_cq_open(e->domain, &cqa, &e->cq, NULL)))
        die("fi_cq_open", rc);
    if ((rc = fi_av_open(e->domain, &ava, &e->av, NULL)))
        die("fi_av_open", rc);
    if ((rc = fi_endpoint(e->domain, e->info, &e->ep, NULL)) ||
        (rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (rc = fi_ep_bind(e->ep, &e->av->fid, 0)) || (rc = fi_enable(e->ep)))
        die("endpoint", rc);
    e->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
    memset(e->buf, 0x5a, len);
    if (e->info->domain_attr->mr_mode & FI_MR_LOCAL) {
        if ((rc = fi_mr_reg(e->domain, e->buf, len, FI_SEND | FI_RECV, 0, 0, 0, &e->mr, NULL)))
            die("fi_mr_reg", rc);
        e->desc = fi_mr_desc(e->mr);
    }
    char name[64], theirs[64];
    size_t nl = sizeof name;
    if ((rc = fi_getname(&e->ep->fid, name, &nl)))
        die("fi_getname", rc);
    if (write(fd, name, nl) != (ssize_t)nl || read(fd, theirs, sizeof theirs) != (ssize_t)nl)
        die("exchanging names", EIO);
    if (fi_av_insert(e->av, theirs, 1, &e->peer, 0, NULL) != 1)
        die("fi_av_insert", EINVAL);
}

/* Completions reaped (each one context); fails on an error completion. */
static int reap(struct ep *e)
{
    struct fi_cq_entry c[32];
    ssize_t n = fi_cq_read(e->cq, c, 32);
    if (n == -FI_EAGAIN)
        return 0;
    if (n < 0) {
        struct fi_cq_err_entry err = {0};
        fi_cq_readerr(e->cq, &err, 0);
        die("completion", err.err ? err.err : (int)n);
    }
    return (int)n;
}

static void post_recv(struct ep *e, size_t len, struct fi_context *ctx)
{
    ssize_t rc;
    while ((rc = fi_recv(e->ep, e->buf, len, e->desc, FI_ADDR_UNSPEC, ctx)) == -FI_EAGAIN)
        reap(e); /* no receive completes before we count it: none posted yet */
    if (rc)
        die("fi_recv", (int)rc);
}

static void receiver(struct ep *e, size_t len, long count, int window)
{
    long got = 0, posted = 0;
    for (; posted < window && posted < count; posted++)
        post_recv(e, len, &e->ctx[posted % MAX_WINDOW]);
    while (got < count) {
        int n = reap(e);
        got += n;
        for (int i = 0; i < n && posted < count; i++, posted++)
            post_recv(e, len, &e->ctx[posted % MAX_WINDOW]);
    }
    ssize_t rc;
    while ((rc = fi_send(e->ep, e->buf, 4, e->desc, e->peer, &e->ctx[MAX_WINDOW])) == -FI_EAGAIN)
        reap(e);
    if (rc)
        die("fi_send (answer)", (int)rc);
    while (reap(e) == 0)
        ;
}

static double sender(struct ep *e, size_t len, long count, int window)
{
    post_recv(e, 4, &e->ctx[MAX_WINDOW]);
    double t0 = now_s();
    long sent = 0, done = 0;
    int answered = 0;
    while (done < count || !answered) {
        while (sent < count && sent - done < window) {
            ssize_t rc = fi_send(e->ep, e->buf, len, e->desc, e->peer, &e->ctx[sent % MAX_WINDOW]);
            if (rc == -FI_EAGAIN)
                break;
            if (rc)
                die("fi_send", (int)rc);
            sent++;
        }
        struct fi_cq_entry c[32];
        ssize_t n = fi_cq_read(e->cq, c, 32);
        if (n == -FI_EAGAIN)
            continue;
        if (n < 0)
            die("completion", (int)n);
        for (ssize_t i = 0; i < n; i++) {
            if (c[i].op_context == &e->ctx[MAX_WINDOW])
                answered = 1;
            else
                done++;
        }
    }
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    size_t len = 1 << 20;
    long count = 2000;
    int window = 16, csv = 0;
    const char *addr = "127.0.0.1";
    static const struct option lo[] = {{"csv", no_argument, NULL, 'c'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "s:n:w:a:", lo, NULL)) != -1) {
        switch (c) {
        case 's': len = strtoul(optarg, NULL, 0); break;
        case 'n': count = strtol(optarg, NULL, 0); break;
        case 'w': window = atoi(optarg); break;
        case 'a': addr = optarg; break;
        case 'c': csv = 1; break;
        default:
            fprintf(stderr, "usage: fi_stream [-s BYTES] [-n COUNT] [-w WINDOW] [-a ADDR] [--csv]\n");
            return 2;
        }
    }
    if (len < 4 || count < 1 || window < 1 || window > MAX_WINDOW) {
        fprintf(stderr, "fi_stream: -s at least 4, -n at least 1, -w 1..%d\n", MAX_WINDOW);
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        die("socketpair", errno);
    pid_t pid = fork();
    if (pid == 0) {
        role = " (receiver)";
        alarm(300);
        close(sv[0]);
        struct ep e = {0};
        ep_open(&e, addr, len, sv[1]);
        receiver(&e, len, count, window);
        char x;
        if (read(sv[1], &x, 1) < 0) /* stay until the sender is done with us */
            return 1;
        return 0;
    }
    close(sv[1]);
    role = " (sender)";
    struct ep e = {0};
    ep_open(&e, addr, len, sv[0]);
    double secs = sender(&e, len, count, window);
    if (write(sv[0], "x", 1) != 1)
        kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "fi_stream: the receiver failed\n");
        return 1;
    }
    double mbs = (double)len * (double)count / secs / 1e6, rate = (double)count / secs;
    if (csv)
        printf("%zu,%ld,%.6f,%.1f,%.0f\n", len, count, secs, mbs, rate);
    else
        printf("fi_stream %s: %zu bytes x %ld, window %d: %.3f s, %.1f MB/s, %.0f msg/s\n",
               e.info->fabric_attr->prov_name, len, count, window, secs, mbs, rate);
    return 0;
}

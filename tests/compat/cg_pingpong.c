/*
 * cg_pingpong.c - a VIPL ping-pong that times itself with clock_gettime,
 * as programs of the era did with gettimeofday: nothing of the emulator's
 * own beyond vipl.h. It forks; the child echoes on via1, the parent sends
 * from via0 and prints the median one-way time of N 4-byte messages (each
 * send's completion taken after the round trip, off the clock).
 *
 *   cg_pingpong [N]
 *
 * Under `vipclock` its clock_gettime reads virtual time, so on a paced
 * profile it prints the timing model's one-way time (test_vclock).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vipl.h>

#define DISC "cgpp"
#define BUF 4096

static void die(const char *what, VIP_RETURN rc)
{
    fprintf(stderr, "cg_pingpong: %s failed (%d)\n", what, (int)rc);
    exit(1);
}

#define CHECK(what, call)                                                                \
    do {                                                                                 \
        VIP_RETURN rc_ = (call);                                                         \
        if (rc_ != VIP_SUCCESS)                                                          \
            die(what, rc_);                                                              \
    } while (0)

struct end {
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES at;
    VIP_PROTECTION_HANDLE ptag;
    VIP_VI_HANDLE vi;
    VIP_MEM_HANDLE mh;
    char *mem;
    VIP_DESCRIPTOR *rd, *sd;
    char *rbuf, *sbuf;
};

static void desc(VIP_DESCRIPTOR *d, char *buf, VIP_MEM_HANDLE mh, unsigned len)
{
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_CONTROL_OP_SENDRECV;
    d->CS.SegCount = 1;
    d->CS.Length = len;
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = len;
}

static void open_end(struct end *e, const char *dev)
{
    VIP_MEM_ATTRIBUTES ma;
    VIP_VI_ATTRIBUTES va;
    CHECK("VipOpenNic", VipOpenNic((VIP_CHAR *)dev, &e->nic));
    CHECK("VipQueryNic", VipQueryNic(e->nic, &e->at));
    CHECK("VipCreatePtag", VipCreatePtag(e->nic, &e->ptag));
    if (posix_memalign((void **)&e->mem, 4096, 2 * BUF) != 0)
        die("posix_memalign", VIP_ERROR_RESOURCE);
    memset(e->mem, 0, 2 * BUF);
    memset(&ma, 0, sizeof ma);
    ma.Ptag = e->ptag;
    CHECK("VipRegisterMem", VipRegisterMem(e->nic, e->mem, 2 * BUF, &ma, &e->mh));
    e->rd = (VIP_DESCRIPTOR *)(void *)e->mem;
    e->sd = e->rd + 1;
    e->rbuf = e->mem + BUF;
    e->sbuf = e->mem + BUF + 64;
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
    va.Ptag = e->ptag;
    va.MaxTransferSize = 4096;
    CHECK("VipCreateVi", VipCreateVi(e->nic, &va, NULL, NULL, &e->vi));
    desc(e->rd, e->rbuf, e->mh, 4);
    CHECK("VipPostRecv", VipPostRecv(e->vi, e->rd, e->mh));
}

/* An address: the NIC's host address, then our discriminator. */
static VIP_NET_ADDRESS *addr(const struct end *e)
{
    VIP_NET_ADDRESS *a = calloc(1, sizeof *a + e->at.NicAddressLen + 16);
    if (!a)
        die("calloc", VIP_ERROR_RESOURCE);
    a->HostAddressLen = e->at.NicAddressLen;
    memcpy(a->HostAddress, e->at.LocalNicAddress, e->at.NicAddressLen);
    a->DiscriminatorLen = sizeof DISC - 1;
    memcpy((char *)a->HostAddress + a->HostAddressLen, DISC, sizeof DISC - 1);
    return a;
}

static void close_end(struct end *e)
{
    VipDisconnect(e->vi);
    VipDestroyVi(e->vi);
    VipDeregisterMem(e->nic, e->mem, e->mh);
    VipDestroyPtag(e->nic, e->ptag);
    VipCloseNic(e->nic);
    free(e->mem);
}

static int server(long n)
{
    struct end e;
    VIP_NET_ADDRESS *local, *remote;
    VIP_VI_ATTRIBUTES ra;
    VIP_CONN_HANDLE conn;
    VIP_DESCRIPTOR *d;
    long i;
    open_end(&e, "via1");
    local = addr(&e);
    remote = addr(&e);
    CHECK("VipConnectWait", VipConnectWait(e.nic, local, VIP_INFINITE, remote, &ra, &conn));
    CHECK("VipConnectAccept", VipConnectAccept(conn, e.vi));
    for (i = 0; i <= n; i++) { /* n echoes, then the bye */
        CHECK("VipRecvWait", VipRecvWait(e.vi, VIP_INFINITE, &d));
        if (i == n)
            break;
        desc(e.rd, e.rbuf, e.mh, 4);
        CHECK("VipPostRecv", VipPostRecv(e.vi, e.rd, e.mh));
        desc(e.sd, e.sbuf, e.mh, 4);
        CHECK("VipPostSend", VipPostSend(e.vi, e.sd, e.mh));
        CHECK("VipSendWait", VipSendWait(e.vi, VIP_INFINITE, &d));
    }
    close_end(&e);
    free(local);
    free(remote);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 300, i;
    struct end e;
    VIP_NET_ADDRESS *local, *remote;
    VIP_VI_ATTRIBUTES ra;
    VIP_DESCRIPTOR *d;
    VIP_RETURN rc;
    double *ow, t0;
    int st;
    pid_t kid;
    if (n < 1)
        n = 1;
    fflush(stdout);
    kid = fork();
    if (kid == 0)
        return server(n);
    ow = calloc((size_t)n, sizeof *ow);
    if (!ow)
        die("calloc", VIP_ERROR_RESOURCE);
    open_end(&e, "via0");
    local = addr(&e);
    remote = calloc(1, sizeof *remote + 64);
    if (!remote)
        die("calloc", VIP_ERROR_RESOURCE);
    CHECK("VipNSGetHostByName", VipNSGetHostByName(e.nic, (VIP_CHAR *)"via1", remote, 0));
    remote->DiscriminatorLen = sizeof DISC - 1;
    memcpy((char *)remote->HostAddress + remote->HostAddressLen, DISC, sizeof DISC - 1);
    while ((rc = VipConnectRequest(e.vi, local, remote, VIP_INFINITE, &ra)) == VIP_NO_MATCH)
        usleep(1000);
    if (rc != VIP_SUCCESS)
        die("VipConnectRequest", rc);
    for (i = 0; i < n; i++) {
        desc(e.sd, e.sbuf, e.mh, 4);
        t0 = now_us();
        CHECK("VipPostSend", VipPostSend(e.vi, e.sd, e.mh));
        CHECK("VipRecvWait", VipRecvWait(e.vi, VIP_INFINITE, &d));
        desc(e.rd, e.rbuf, e.mh, 4);
        CHECK("VipPostRecv", VipPostRecv(e.vi, e.rd, e.mh));
        ow[i] = (now_us() - t0) / 2;
        CHECK("VipSendWait", VipSendWait(e.vi, VIP_INFINITE, &d)); /* off the clock */
    }
    desc(e.sd, e.sbuf, e.mh, 0);
    e.sd->CS.SegCount = 0;
    CHECK("VipPostSend", VipPostSend(e.vi, e.sd, e.mh)); /* the bye */
    CHECK("VipSendWait", VipSendWait(e.vi, VIP_INFINITE, &d));
    if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        die("the echo server", VIP_ERROR_RESOURCE);
    close_end(&e);
    qsort(ow, (size_t)n, sizeof *ow, cmp);
    printf("one-way %.3f us (median of %ld)\n", ow[n / 2], n);
    free(ow);
    free(local);
    free(remote);
    return 0;
}

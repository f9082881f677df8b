/*
 * rdma_write.c - the sender writes straight into the receiver's memory.
 *
 *   rdma_write               both sides: forks a target, runs the writer
 *   rdma_write server        the target: offers a buffer, checks what lands
 *   rdma_write client [HOST] the writer
 *
 * An RDMA write names the remote memory itself (address and the
 * receiver's memory handle), so the receiver posts no buffer for the data
 * and its CPU does nothing while they land. The target must register that
 * memory with EnableRdmaWrite and both VIs must allow RDMA writes; it
 * tells the writer the address and handle in an ordinary message. With
 * VIP_CONTROL_IMMEDIATE the write also carries 32 bits that complete a
 * receive at the target (which must have one posted): that is how the
 * target learns the data are there. Without it the target would have to
 * poll the memory. The target answers each write with a small message
 * once it has read the data and posted the next receive: only then may
 * the writer write again.
 */
#include "example.h"

#define DISC "rdmawrite"
#define BYTES (1 << 20)
#define ROUNDS 20

/* What the target tells the writer: where to write. */
struct offer {
    uint64_t address;
    VIP_MEM_HANDLE handle;
};

struct side {
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES attr;
    VIP_PROTECTION_HANDLE ptag;
    VIP_VI_HANDLE vi;
    struct ctl {                    /* descriptors and the small message: one region */
        VIP_DESCRIPTOR send, recv;
        struct offer offer;
    } *ctl;
    VIP_MEM_HANDLE ctl_mh;
    uint8_t *data;                  /* the BYTES written: a region of its own */
    VIP_MEM_HANDLE data_mh;
};

static void open_side(struct side *s, VIP_BOOLEAN rdma_target)
{
    CHECK(VipOpenNic((VIP_CHAR *)"via0", &s->nic));
    CHECK(VipQueryNic(s->nic, &s->attr));
    CHECK(VipCreatePtag(s->nic, &s->ptag));
    if (posix_memalign((void **)&s->ctl, VIP_DESCRIPTOR_ALIGNMENT, sizeof *s->ctl) ||
        posix_memalign((void **)&s->data, 4096, BYTES))
        exit(1);
    memset(s->ctl, 0, sizeof *s->ctl);
    memset(s->data, 0, BYTES);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = s->ptag};
    CHECK(VipRegisterMem(s->nic, s->ctl, sizeof *s->ctl, &ma, &s->ctl_mh));
    ma.EnableRdmaWrite = rdma_target; /* the peer may write here: only the target's */
    CHECK(VipRegisterMem(s->nic, s->data, BYTES, &ma, &s->data_mh));
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                            .Ptag = s->ptag,
                            .MaxTransferSize = BYTES,
                            .EnableRdmaWrite = VIP_TRUE};
    CHECK(VipCreateVi(s->nic, &va, NULL, NULL, &s->vi));
}

static void close_side(struct side *s)
{
    VipDisconnect(s->vi);
    VipDestroyVi(s->vi);
    VipDeregisterMem(s->nic, s->data, s->data_mh);
    VipDeregisterMem(s->nic, s->ctl, s->ctl_mh);
    VipDestroyPtag(s->nic, s->ptag);
    VipCloseNic(s->nic);
    free(s->data);
    free(s->ctl);
}

/* A receive for the offer (writer) or for a write's immediate data
 * (target: no data segment, the data go where the writer says). */
static void post_recv(struct side *s, int with_buffer)
{
    VIP_DESCRIPTOR *d = &s->ctl->recv;
    if (with_buffer)
        ex_describe(d, &s->ctl->offer, sizeof s->ctl->offer, s->ctl_mh);
    else
        memset(d, 0, sizeof *d); /* no segment at all */
    CHECK(VipPostRecv(s->vi, d, s->ctl_mh));
}

static uint8_t pattern(int round, size_t i) { return (uint8_t)(i * 7 + (size_t)round * 13); }

/* The small message (the offer; later the go-ahead), by an ordinary send. */
static void send_offer(struct side *s)
{
    VIP_DESCRIPTOR *d = ex_describe(&s->ctl->send, &s->ctl->offer, sizeof s->ctl->offer,
                                    s->ctl_mh);
    CHECK(VipPostSend(s->vi, d, s->ctl_mh));
    CHECK(VipSendWait(s->vi, VIP_INFINITE, &d));
}

static int server(void)
{
    struct side s;
    open_side(&s, VIP_TRUE);
    post_recv(&s, 0);
    ex_accept(s.nic, &s.attr, s.vi, DISC);
    /* the offer: our buffer's address and handle */
    s.ctl->offer.address = (uint64_t)(uintptr_t)s.data;
    s.ctl->offer.handle = s.data_mh;
    send_offer(&s);
    VIP_DESCRIPTOR *d;
    for (int round = 0; round < ROUNDS; round++) {
        CHECK(VipRecvWait(s.vi, VIP_INFINITE, &d)); /* a write with immediate data landed */
        if ((d->CS.Status & VIP_STATUS_ERROR_MASK) || !(d->CS.Status & VIP_STATUS_IMMEDIATE) ||
            d->CS.ImmediateData != (VIP_UINT32)round) {
            fprintf(stderr, "rdma_write: round %d: status 0x%x, immediate %u\n", round,
                    (unsigned)d->CS.Status, (unsigned)d->CS.ImmediateData);
            return 1;
        }
        for (size_t i = 0; i < BYTES; i++)
            if (s.data[i] != pattern(round, i)) {
                fprintf(stderr, "rdma_write: round %d: byte %zu wrong\n", round, i);
                return 1;
            }
        post_recv(&s, 0); /* for the next write's immediate data */
        send_offer(&s);   /* read and ready: write again */
    }
    close_side(&s);
    return 0;
}

static int client(const char *host)
{
    struct side s;
    open_side(&s, VIP_FALSE);
    post_recv(&s, 1);
    ex_connect(s.nic, &s.attr, s.vi, host, DISC);
    VIP_DESCRIPTOR *d;
    CHECK(VipRecvWait(s.vi, VIP_INFINITE, &d)); /* the offer */
    struct offer where = s.ctl->offer;
    post_recv(&s, 1); /* for the first go-ahead */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int round = 0; round < ROUNDS; round++) {
        for (size_t i = 0; i < BYTES; i++)
            s.data[i] = pattern(round, i);
        d = &s.ctl->send;
        memset(d, 0, sizeof *d);
        d->CS.Control = VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE;
        d->CS.ImmediateData = (VIP_UINT32)round;
        d->CS.SegCount = 2;
        d->CS.Length = BYTES;
        d->DS[0].Remote.Data.AddressBits = where.address; /* first: where it goes */
        d->DS[0].Remote.Handle = where.handle;
        d->DS[1].Local.Data.Address = s.data; /* then: what goes */
        d->DS[1].Local.Handle = s.data_mh;
        d->DS[1].Local.Length = BYTES;
        CHECK(VipPostSend(s.vi, d, s.ctl_mh));
        CHECK(VipSendWait(s.vi, VIP_INFINITE, &d));
        if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
            fprintf(stderr, "rdma_write: the write failed: status 0x%x\n",
                    (unsigned)d->CS.Status);
            return 1;
        }
        CHECK(VipRecvWait(s.vi, VIP_INFINITE, &d)); /* the target read it */
        post_recv(&s, 1);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("rdma_write: %d writes of %d bytes checked at the target (%.0f MB/s with the "
           "filling)\n", ROUNDS, BYTES, (double)ROUNDS * BYTES / sec / 1e6);
    close_side(&s);
    return 0;
}

int main(int argc, char **argv) { return ex_main(argc, argv, server, client); }

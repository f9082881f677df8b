/*
 * pingpong.c - the first VIPL program: two processes bounce a message.
 *
 *   pingpong                 both sides: forks a server, runs the client
 *   pingpong server          waits for one client, echoes its messages
 *   pingpong client [HOST]   connects to HOST's server (default localhost)
 *
 * For a reader who knows sockets, VIA in five sentences. A VI (virtual
 * interface) is a connected endpoint, like a connected socket, but the
 * program talks to the NIC directly: it hands over *descriptors* (small
 * records saying "send these bytes" or "put the next message here") and
 * later finds them completed; no system call carries the data. The NIC
 * may only touch memory the program has *registered* (named by a memory
 * handle), and only with the VI's *protection tag*. A message that
 * arrives when no receive descriptor is waiting is an error, so each side
 * *pre-posts* receives before the other can send. Addresses and
 * connecting are in example.h.
 */
#include "example.h"

#define DISC "pingpong" /* our "port" */
#define MSG_BYTES 64
#define ROUNDS 1000

/* What one side holds. One registered block keeps the two descriptors
 * (which must be VIP_DESCRIPTOR_ALIGNMENT = 64-byte aligned) and the two
 * message buffers, so one memory handle covers all four. */
struct side {
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES attr;
    VIP_PROTECTION_HANDLE ptag;
    VIP_MEM_HANDLE mh;
    VIP_VI_HANDLE vi;
    struct block {
        VIP_DESCRIPTOR send, recv; /* 64-byte aligned: the block is */
        char send_buf[MSG_BYTES], recv_buf[MSG_BYTES];
    } *mem;
};

static void open_side(struct side *s)
{
    CHECK(VipOpenNic((VIP_CHAR *)"via0", &s->nic)); /* the NIC; starts vipd if needed */
    CHECK(VipQueryNic(s->nic, &s->attr));           /* its address, among other things */
    CHECK(VipCreatePtag(s->nic, &s->ptag));         /* the tag memory and VI share */

    if (posix_memalign((void **)&s->mem, VIP_DESCRIPTOR_ALIGNMENT, sizeof *s->mem))
        exit(1);
    memset(s->mem, 0, sizeof *s->mem);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = s->ptag}; /* no RDMA into it: sends only */
    CHECK(VipRegisterMem(s->nic, s->mem, sizeof *s->mem, &ma, &s->mh));

    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                            .Ptag = s->ptag,
                            .MaxTransferSize = MSG_BYTES};
    CHECK(VipCreateVi(s->nic, &va, NULL, NULL, &s->vi)); /* no CQs: we wait per queue */
}

/* A descriptor for MSG_BYTES at buf (ex_describe in example.h fills its
 * fields: operation, one segment, lengths, the memory handle). */
static VIP_DESCRIPTOR *describe(VIP_DESCRIPTOR *d, char *buf, VIP_MEM_HANDLE mh)
{
    return ex_describe(d, buf, MSG_BYTES, mh);
}

static void post_recv(struct side *s)
{
    /* VipPostRecv takes the handle of the memory the descriptor is in */
    CHECK(VipPostRecv(s->vi, describe(&s->mem->recv, s->mem->recv_buf, s->mh), s->mh));
}

static void send_msg(struct side *s)
{
    VIP_DESCRIPTOR *done;
    CHECK(VipPostSend(s->vi, describe(&s->mem->send, s->mem->send_buf, s->mh), s->mh));
    CHECK(VipSendWait(s->vi, VIP_INFINITE, &done)); /* the buffer is ours again */
}

static void recv_msg(struct side *s)
{
    VIP_DESCRIPTOR *done;
    CHECK(VipRecvWait(s->vi, VIP_INFINITE, &done)); /* timeouts are in ms; or VIP_INFINITE */
    if (done->CS.Status & VIP_STATUS_ERROR_MASK) { /* e.g. our buffer was too small */
        fprintf(stderr, "pingpong: a receive completed in error: status 0x%x\n",
                (unsigned)done->CS.Status);
        exit(1);
    }
}

static void close_side(struct side *s)
{
    VipDisconnect(s->vi); /* teardown in the reverse order of set-up */
    VipDestroyVi(s->vi);
    VipDeregisterMem(s->nic, s->mem, s->mh);
    VipDestroyPtag(s->nic, s->ptag);
    VipCloseNic(s->nic);
    free(s->mem);
}

static int server(void)
{
    struct side s;
    open_side(&s);
    post_recv(&s); /* before accepting: the client may send at once */
    ex_accept(s.nic, &s.attr, s.vi, DISC);
    for (int i = 0; i < ROUNDS; i++) {
        recv_msg(&s);
        memcpy(s.mem->send_buf, s.mem->recv_buf, MSG_BYTES);
        post_recv(&s); /* the next receive waits before we answer */
        send_msg(&s);
    }
    close_side(&s);
    return 0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int client(const char *host)
{
    struct side s;
    open_side(&s);
    post_recv(&s);
    ex_connect(s.nic, &s.attr, s.vi, host, DISC);
    static double t[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        struct timespec a, b;
        char want[MSG_BYTES] = {0};
        snprintf(want, sizeof want, "ping %d", i);
        memcpy(s.mem->send_buf, want, MSG_BYTES);
        clock_gettime(CLOCK_MONOTONIC, &a);
        send_msg(&s);
        recv_msg(&s);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (strcmp(s.mem->recv_buf, want)) {
            fprintf(stderr, "pingpong: got \"%s\", sent \"%s\"\n", s.mem->recv_buf, want);
            return 1;
        }
        post_recv(&s);
        t[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    qsort(t, ROUNDS, sizeof t[0], by_value);
    printf("pingpong: %d round trips of %d bytes, median %.2f us\n", ROUNDS, MSG_BYTES,
           t[ROUNDS / 2]);
    close_side(&s);
    return 0;
}

int main(int argc, char **argv) { return ex_main(argc, argv, server, client); }

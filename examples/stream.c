/*
 * stream.c - a one-way stream with many messages in flight, completions
 * taken from completion queues (CQs).
 *
 *   stream                   both sides: forks a receiver, runs the sender
 *   stream server            receives one stream
 *   stream client [HOST]     sends one to HOST (default localhost)
 *
 * A CQ gathers the completions of many work queues: VipCQWait says which
 * VI and which of its queues has a finished descriptor, and VipSendDone
 * or VipRecvDone then takes it, as epoll says which socket is ready. The
 * receiver keeps WINDOW receives posted and tells the sender, every
 * WINDOW/2 messages, that it has posted that many again (a credit
 * message): a sender never sends into a receive queue with no descriptor
 * waiting, which would be an error on a reliable VI. The sender keeps up
 * to its credits in flight and takes its send completions and the
 * credits from one CQ for both of its queues.
 */
#include "example.h"

#define DISC "stream"
#define MSG_BYTES 4096
#define WINDOW 32
#define MESSAGES 20000

/* Descriptors and buffers in one registered block, as in pingpong.c. */
struct block {
    VIP_DESCRIPTOR d[WINDOW];       /* receives (receiver) or sends (sender) */
    VIP_DESCRIPTOR credit_d[4];     /* credit messages: sent or received */
    uint8_t buf[WINDOW][MSG_BYTES];
    uint32_t credit_buf[4];
};

struct side {
    VIP_NIC_HANDLE nic;
    VIP_NIC_ATTRIBUTES attr;
    VIP_PROTECTION_HANDLE ptag;
    VIP_MEM_HANDLE mh;
    VIP_CQ_HANDLE cq;
    VIP_VI_HANDLE vi;
    struct block *b;
};

static void open_side(struct side *s, int cq_for_sends)
{
    CHECK(VipOpenNic((VIP_CHAR *)"via0", &s->nic));
    CHECK(VipQueryNic(s->nic, &s->attr));
    CHECK(VipCreatePtag(s->nic, &s->ptag));
    if (posix_memalign((void **)&s->b, VIP_DESCRIPTOR_ALIGNMENT, sizeof *s->b))
        exit(1);
    memset(s->b, 0, sizeof *s->b);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = s->ptag};
    CHECK(VipRegisterMem(s->nic, s->b, sizeof *s->b, &ma, &s->mh));
    CHECK(VipCreateCQ(s->nic, 2 * WINDOW + 8, &s->cq)); /* room for every descriptor */
    VIP_VI_ATTRIBUTES va = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                            .Ptag = s->ptag,
                            .MaxTransferSize = MSG_BYTES};
    /* receives complete on the CQ; the sender's sends too */
    CHECK(VipCreateVi(s->nic, &va, cq_for_sends ? s->cq : NULL, s->cq, &s->vi));
}

static void close_side(struct side *s)
{
    VipDisconnect(s->vi);
    VipDestroyVi(s->vi);
    VipDestroyCQ(s->cq);
    VipDeregisterMem(s->nic, s->b, s->mh);
    VipDestroyPtag(s->nic, s->ptag);
    VipCloseNic(s->nic);
    free(s->b);
}

static int server(void)
{
    struct side s;
    open_side(&s, 0);
    for (int i = 0; i < WINDOW; i++) /* the window, before the sender may start */
        CHECK(VipPostRecv(s.vi, ex_describe(&s.b->d[i], s.b->buf[i], MSG_BYTES, s.mh), s.mh));
    ex_accept(s.nic, &s.attr, s.vi, DISC);
    int reposted = 0;
    for (uint32_t seq = 0; seq < MESSAGES; seq++) {
        VIP_VI_HANDLE vi;
        VIP_BOOLEAN is_recv;
        VIP_DESCRIPTOR *d;
        CHECK(VipCQWait(s.cq, VIP_INFINITE, &vi, &is_recv)); /* which queue is ready */
        CHECK(VipRecvDone(vi, &d));                          /* then take its descriptor */
        uint8_t *data = (uint8_t *)d->DS[0].Local.Data.Address;
        uint32_t got;
        memcpy(&got, data, sizeof got);
        if ((d->CS.Status & VIP_STATUS_ERROR_MASK) || d->CS.Length != MSG_BYTES || got != seq ||
            data[MSG_BYTES - 1] != (uint8_t)seq) {
            fprintf(stderr, "stream: message %u: status 0x%x, %u bytes, says %u\n", seq,
                    (unsigned)d->CS.Status, (unsigned)d->CS.Length, got);
            return 1;
        }
        CHECK(VipPostRecv(s.vi, ex_describe(d, data, MSG_BYTES, s.mh), s.mh)); /* same buffer */
        if (++reposted == WINDOW / 2 && seq + 1 < MESSAGES) { /* give the credits back */
            s.b->credit_buf[0] = (uint32_t)reposted;
            CHECK(VipPostSend(s.vi, ex_describe(&s.b->credit_d[0], &s.b->credit_buf[0], 4, s.mh),
                              s.mh));
            CHECK(VipSendWait(s.vi, VIP_INFINITE, &d)); /* no CQ for our sends: wait here */
            reposted = 0;
        }
    }
    close_side(&s);
    return 0;
}

static int client(const char *host)
{
    struct side s;
    open_side(&s, 1);
    for (int i = 0; i < 4; i++) /* credit messages land here */
        CHECK(VipPostRecv(s.vi, ex_describe(&s.b->credit_d[i], &s.b->credit_buf[i], 4, s.mh),
                          s.mh));
    ex_connect(s.nic, &s.attr, s.vi, host, DISC);
    int credits = WINDOW, free_slot[WINDOW], nfree = WINDOW;
    for (int i = 0; i < WINDOW; i++)
        free_slot[i] = i;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint32_t sent = 0, done = 0;
    while (done < MESSAGES) {
        /* send while we hold a credit and a free buffer */
        while (sent < MESSAGES && credits > 0 && nfree > 0) {
            int k = free_slot[--nfree];
            memcpy(s.b->buf[k], &sent, sizeof sent);
            s.b->buf[k][MSG_BYTES - 1] = (uint8_t)sent;
            CHECK(VipPostSend(s.vi, ex_describe(&s.b->d[k], s.b->buf[k], MSG_BYTES, s.mh), s.mh));
            credits--;
            sent++;
        }
        VIP_VI_HANDLE vi;
        VIP_BOOLEAN is_recv;
        VIP_DESCRIPTOR *d;
        CHECK(VipCQWait(s.cq, VIP_INFINITE, &vi, &is_recv));
        if (is_recv) { /* credits came back */
            CHECK(VipRecvDone(vi, &d));
            credits += (int)*(uint32_t *)d->DS[0].Local.Data.Address;
            CHECK(VipPostRecv(s.vi, ex_describe(d, d->DS[0].Local.Data.Address, 4, s.mh), s.mh));
        } else { /* a send finished: its buffer is free */
            CHECK(VipSendDone(vi, &d));
            if (d->CS.Status & VIP_STATUS_ERROR_MASK) {
                fprintf(stderr, "stream: a send failed: status 0x%x\n", (unsigned)d->CS.Status);
                return 1;
            }
            free_slot[nfree++] = (int)(d - s.b->d);
            done++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s_ = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("stream: %d messages of %d bytes, %.0f MB/s\n", MESSAGES, MSG_BYTES,
           (double)MESSAGES * MSG_BYTES / s_ / 1e6);
    close_side(&s);
    return 0;
}

int main(int argc, char **argv) { return ex_main(argc, argv, server, client); }

/*
 * os_wake_lat - the references for vip_wake_lat: the same wake-up and
 * compute tests (wake_util.h: same protocol, pause, computation, clocks and
 * report) over what the kernel offers two processes on one machine:
 *
 *   -t pipe   a pipe from the sender to the receiver (and one back for the
 *             acks); the receiver blocks in read(), or polls with read() on
 *             the non-blocking pipe. Any size: a message larger than the
 *             pipe (64 KiB) makes write() block until the reader has drained
 *             all but the last pipeful, as the kernel copies it.
 *   -t udp    two UDP sockets on 127.0.0.1, connected to each other; the
 *             receiver blocks in recv(), or polls with recv(MSG_DONTWAIT).
 *             One datagram per message, so at most 65507 bytes.
 *
 * The sockets and pipes are made before the fork; the sender is the child.
 * The receiver bounds a blocking wait by T: read() with an interval timer
 * (SIGALRM, which interrupts it), recv() with SO_RCVTIMEO.
 */
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "wake_util.h"

#define UDP_MAX 65507u

enum kind { PIPE, UDP };

struct opts {
    struct wk_opts wk;
    enum kind kind;
};

/* Both ends' descriptors exist until the fork; each side then closes the
 * other's. Pipe: data[0] receiver reads, data[1] sender writes, ack back
 * the other way. UDP: sock[0] is the receiver's, sock[1] the sender's. */
struct end {
    enum kind kind;
    const struct wk_opts *wk;
    int data[2], ack[2], sock[2];
    uint8_t *sbuf, *rbuf;
    size_t have;          /* pipe: bytes of the current message read so far */
    int nonblock;         /* the receiving descriptor's O_NONBLOCK, -1: unknown */
    uint64_t rcvtimeo_ms; /* UDP: the receiving socket's SO_RCVTIMEO now */
};

static volatile sig_atomic_t alarm_fired;

static void on_alarm(int sig)
{
    (void)sig;
    alarm_fired = 1;
}

static void set_timer_ms(uint64_t ms)
{
    struct itimerval it = {{0, 0}, {(time_t)(ms / 1000u), (suseconds_t)(ms % 1000u) * 1000}};
    if (setitimer(ITIMER_REAL, &it, NULL) != 0)
        bu_die("setitimer: %s", strerror(errno));
}

static void set_nonblock(struct end *e, int fd, bool on)
{
    if (e->nonblock == (int)on)
        return;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0)
        bu_die("fcntl(O_NONBLOCK): %s", strerror(errno));
    e->nonblock = on;
}

/* ---- the sender --------------------------------------------------------------------------- */

static uint8_t *os_buf(void *c)
{
    return ((struct end *)c)->sbuf;
}

static void os_post(void *c, uint32_t len)
{
    struct end *e = c;
    if (e->kind == UDP) {
        ssize_t n = send(e->sock[1], e->sbuf, len, 0);
        if (n != (ssize_t)len)
            bu_die("send of %u bytes: %s", len, n < 0 ? strerror(errno) : "short");
        return;
    }
    for (size_t off = 0; off < len;) {
        ssize_t n = write(e->data[1], e->sbuf + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            bu_die("write to the pipe: %s", n < 0 ? strerror(errno) : "wrote nothing");
        off += (size_t)n;
    }
}

static void os_complete(void *c)
{
    (void)c; /* write() and send() are complete when they return */
}

static void os_wait_ack(void *c, uint64_t seq)
{
    struct end *e = c;
    uint64_t got;
    ssize_t n;
    do
        n = e->kind == UDP ? recv(e->sock[1], &got, sizeof got, 0)
                           : read(e->ack[0], &got, sizeof got);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof got)
        bu_die("waiting for the ack of message %#" PRIx64 ": %s", seq,
               n < 0 ? strerror(errno) : n == 0 ? "the receiver is gone" : "short ack");
    if (got != seq)
        bu_die("ack of message %#" PRIx64 ", expected %#" PRIx64, got, seq);
}

/* ---- the receiver ------------------------------------------------------------------------- */

static const uint8_t *pipe_recv(struct end *e, uint32_t len, bool poll, uint64_t timeout_ms)
{
    set_nonblock(e, e->data[0], poll);
    uint64_t deadline = bu_now_ns() + timeout_ms * 1000000u;
    if (!poll) {
        alarm_fired = 0;
        set_timer_ms(timeout_ms);
    }
    while (e->have < len) {
        ssize_t n = read(e->data[0], e->rbuf + e->have, len - e->have);
        if (n > 0) {
            e->have += (size_t)n;
            continue;
        }
        if (n == 0)
            bu_die("the sender closed the pipe");
        if (errno == EINTR && !alarm_fired)
            continue;
        if (errno == EINTR || (errno == EAGAIN && bu_now_ns() >= deadline))
            break;
        if (errno != EAGAIN)
            bu_die("read from the pipe: %s", strerror(errno));
    }
    if (!poll)
        set_timer_ms(0);
    if (e->have < len)
        return NULL; /* timed out; what was read so far stays */
    e->have = 0;
    return e->rbuf;
}

static const uint8_t *udp_recv(struct end *e, uint32_t len, bool poll, uint64_t timeout_ms)
{
    int fd = e->sock[0];
    if (!poll && e->rcvtimeo_ms != timeout_ms) {
        struct timeval tv = {(time_t)(timeout_ms / 1000u),
                             (suseconds_t)(timeout_ms % 1000u) * 1000};
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
            bu_die("setsockopt(SO_RCVTIMEO): %s", strerror(errno));
        e->rcvtimeo_ms = timeout_ms;
    }
    uint64_t deadline = bu_now_ns() + timeout_ms * 1000000u;
    for (;;) {
        ssize_t n = recv(fd, e->rbuf, len + 1, poll ? MSG_DONTWAIT : 0);
        if (n == (ssize_t)len)
            return e->rbuf;
        if (n >= 0)
            bu_die("received a datagram of %zd bytes, expected %u", n, len);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            bu_die("recv: %s", strerror(errno));
        if (!poll || bu_now_ns() >= deadline)
            return NULL;
    }
}

static const uint8_t *os_recv(void *c, uint32_t len, bool poll, uint64_t timeout_ms)
{
    struct end *e = c;
    return e->kind == UDP ? udp_recv(e, len, poll, timeout_ms)
                          : pipe_recv(e, len, poll, timeout_ms);
}

static void os_release(void *c)
{
    (void)c; /* the buffer is ours again as soon as read()/recv() return */
}

static void os_ack(void *c, uint64_t seq)
{
    struct end *e = c;
    ssize_t n;
    do
        n = e->kind == UDP ? send(e->sock[0], &seq, sizeof seq, 0)
                           : write(e->ack[1], &seq, sizeof seq);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof seq)
        bu_die("sending the ack: %s", n < 0 ? strerror(errno) : "short");
}

/* ---- set-up --------------------------------------------------------------------------------- */

static int udp_socket(struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        bu_die("socket(AF_INET, SOCK_DGRAM): %s", strerror(errno));
    *a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = 0,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof *a;
    if (bind(fd, (struct sockaddr *)a, sizeof *a) != 0 ||
        getsockname(fd, (struct sockaddr *)a, &len) != 0)
        bu_die("binding a UDP socket to 127.0.0.1: %s", strerror(errno));
    return fd;
}

static void end_setup(struct end *e, const struct opts *o)
{
    *e = (struct end){.kind = o->kind, .wk = &o->wk, .data = {-1, -1}, .ack = {-1, -1},
                      .sock = {-1, -1}, .nonblock = -1, .rcvtimeo_ms = 0};
    e->sbuf = calloc(1, o->wk.size);
    e->rbuf = calloc(1, (size_t)o->wk.size + 1);
    if (!e->sbuf || !e->rbuf)
        bu_die("out of memory for %u-byte messages", o->wk.size);
    if (o->kind == PIPE) {
        if (pipe(e->data) != 0 || pipe(e->ack) != 0)
            bu_die("pipe: %s", strerror(errno));
        return;
    }
    struct sockaddr_in a[2];
    for (int i = 0; i < 2; i++)
        e->sock[i] = udp_socket(&a[i]);
    for (int i = 0; i < 2; i++)
        if (connect(e->sock[i], (struct sockaddr *)&a[1 - i], sizeof a[1 - i]) != 0)
            bu_die("connecting the UDP sockets: %s", strerror(errno));
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Everything one side still holds. */
static void end_close(struct end *e)
{
    for (int i = 0; i < 2; i++) {
        close_fd(&e->data[i]);
        close_fd(&e->ack[i]);
        close_fd(&e->sock[i]);
    }
    free(e->sbuf);
    free(e->rbuf);
    e->sbuf = e->rbuf = NULL;
}

static struct wk_transport os_transport(struct end *e)
{
    struct wk_transport t = {
        .ctx = e, .buf = os_buf, .post = os_post, .complete = os_complete,
        .wait_ack = os_wait_ack, .recv = os_recv, .release = os_release, .ack = os_ack};
    if (e->kind == PIPE) {
        t.name = "pipe";
        t.wait_call = "read()";
        t.poll_call = "read() on the O_NONBLOCK pipe";
        snprintf(t.what, sizeof t.what, "a pipe between two processes (acks on a second pipe)");
    } else {
        t.name = "udp";
        t.wait_call = "recv()";
        t.poll_call = "recv(MSG_DONTWAIT)";
        snprintf(t.what, sizeof t.what, "a UDP socket pair on 127.0.0.1, connected");
    }
    return t;
}

static void sender(void *arg)
{
    struct end *e = arg;
    bu_role = "sender";
    close_fd(&e->data[0]);
    close_fd(&e->ack[1]);
    close_fd(&e->sock[0]);
    struct wk_transport tr = os_transport(e);
    wk_sender(e->wk, &tr);
    end_close(e);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: os_wake_lat [options]\n"
            "  The references of vip_wake_lat, measured the same way: one-way time from the\n"
            "  sender's write()/send() to the receiver's return from read()/recv() when the\n"
            "  receiver was asleep (wake test), and to the receiver getting the message while\n"
            "  the sender computes after sending (compute test). Forks the sender; the\n"
            "  receiver is this process. Microseconds.\n"
            "  -t, --transport T       pipe (default) | udp (127.0.0.1, at most %u bytes)\n",
            UDP_MAX);
    wk_usage_common(f);
}

int main(int argc, char **argv)
{
    bu_prog = "os_wake_lat";
    struct opts o = {.kind = PIPE};
    wk_defaults(&o.wk);
    static const struct option lo[] = {WK_LONGOPTS,
                                       {"transport", required_argument, NULL, 't'},
                                       {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, WK_SHORTOPTS "t:", lo, NULL)) != -1) {
        if (wk_parse_common(&o.wk, c, optarg))
            continue;
        switch (c) {
        case 't':
            if (strcmp(optarg, "pipe") == 0)
                o.kind = PIPE;
            else if (strcmp(optarg, "udp") == 0)
                o.kind = UDP;
            else
                bu_die("-t: '%s' is not pipe or udp", optarg);
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "os_wake_lat: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (o.kind == UDP && o.wk.size > UDP_MAX)
        bu_die("-s: a UDP datagram holds at most %u bytes", UDP_MAX);

    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = 0}; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a vanished peer is an error message, not a signal */

    struct end e;
    end_setup(&e, &o);
    bu_fork_server(sender, &e);
    bu_role = "receiver";
    close_fd(&e.data[1]);
    close_fd(&e.ack[0]);
    close_fd(&e.sock[1]);
    struct wk_transport tr = os_transport(&e);
    wk_receiver(&o.wk, &tr, "os_wake_lat");
    bu_wait_server();
    end_close(&e);
    return 0;
}

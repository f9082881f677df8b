/*
 * test_hosts_auth.c - vipds prove who they are: a stranger on the --listen
 * port who claims to be a listed host (it knows the hosts file, not the
 * cluster key) gets nothing and changes nothing, and the key file is
 * refused when it is missing or open to other users.
 *
 * The stranger is this test itself, speaking the control protocol of
 * include/via_net.h over TCP as an impostor would: a HELLO with another
 * host's id, then a PROOF it cannot compute, then a connection request.
 * A ping-pong between the two real hosts runs throughout and must lose
 * nothing.
 */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/thosts.h"
#include "lib/tlib.h"
#include "lib/tpp.h"
#include "lib/tvipd.h"
#include "via_abi.h"

/* The id a vipd derives for ADDR:PORT (kdriver/kd_host.c, FNV-1a). */
static uint32_t host_id_of(uint32_t ip, uint16_t port)
{
    uint8_t b[6];
    memcpy(b, &ip, 4);
    b[4] = (uint8_t)(port >> 8);
    b[5] = (uint8_t)port;
    uint32_t h = 2166136261u;
    for (int i = 0; i < 6; i++) {
        h ^= b[i];
        h *= 16777619u;
    }
    return h ? h : 1;
}

static int impostor_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void put_msg(int fd, uint16_t type, const void *body, uint32_t len)
{
    uint8_t buf[512];
    struct via_host_msg m = {.magic = VIA_HOST_MAGIC, .version = VIA_NET_VERSION, .type = type,
                             .len = len};
    memcpy(buf, &m, sizeof m);
    memcpy(buf + sizeof m, body, len);
    CU_ASSERT(send(fd, buf, sizeof m + len, MSG_NOSIGNAL) == (ssize_t)(sizeof m + len));
}

/* Read until the vipd closes the connection (true) or ms pass (false);
 * *got: the bytes it sent. */
static bool closed_by_peer(int fd, int ms, size_t *got)
{
    uint8_t buf[1024];
    *got = 0;
    uint64_t until = tl_now_ms() + (uint64_t)ms;
    while (tl_now_ms() < until) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return true;
        if (n > 0)
            *got += (size_t)n;
    }
    return false;
}

/* One impostor attempt at host `to` claiming to be host `as`; the vipd
 * must close it. proof: send a (wrong) PROOF and a connection request
 * after the challenge. */
static void impostor(const struct thosts *h, unsigned as, unsigned to, bool proof)
{
    uint32_t lo = htonl(INADDR_LOOPBACK);
    int fd = impostor_connect(h->port[to]);
    CU_ASSERT_FATAL(fd >= 0);
    struct via_host_hello hello = {.host_id = host_id_of(lo, h->port[as]),
                                   .link = VIA_LINK_UDP, .to_id = host_id_of(lo, h->port[to])};
    memset(hello.nonce, 0x42, sizeof hello.nonce);
    put_msg(fd, VIA_HOST_HELLO, &hello, sizeof hello);
    if (proof) {
        struct via_host_proof p;
        memset(p.mac, 0x17, sizeof p.mac);
        put_msg(fd, VIA_HOST_PROOF, &p, sizeof p);
        struct via_host_conn_req q = {.req_id = 77, .udp_ip = lo, .udp_port = 9,
                                      .dlen = 4, .reliability = VIP_SERVICE_RELIABLE_DELIVERY};
        memcpy(q.discrim, "pp01", 4);
        put_msg(fd, VIA_HOST_CONN_REQ, &q, sizeof q);
    }
    size_t got = 0;
    CU_ASSERT(closed_by_peer(fd, 10000, &got));
    /* all it ever heard: one CHALLENGE, nothing that came after */
    CU_ASSERT(got <= sizeof(struct via_host_msg) + sizeof(struct via_host_challenge));
    close(fd);
}

static bool log_has(const struct tvipd *v, const char *what)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "grep -q '%s' '%s'", what, v->log);
    return system(cmd) == 0;
}

/*
 * While host0 and host1 run a ping-pong, impostors claiming each to be the
 * other connect again and again: every one is closed after its HELLO's
 * challenge, the honest stream loses and corrupts nothing (its messages
 * are checked), and the vipds say why they refused.
 */
static void test_impostor_changes_nothing(void)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    struct tpp_cfg c;
    tpp_defaults(&c, VIP_SERVICE_RELIABLE_DELIVERY, 3000, TPP_SMALL);
    snprintf(c.srv_host, sizeof c.srv_host, "host1");
    c.notify_after = 100;
    struct tl_child cs = {.pid = -1}, cc = {.pid = -1};
    thosts_use(&h, 1);
    TCHK(tl_spawn(&cs, tpp_child_server, &c) == 0);
    thosts_use(&h, 0);
    TCHK(tl_spawn(&cc, tpp_child_client, &c) == 0);
    /* the honest link is up and busy: now the impostors */
    TCHK(tl_parent_take(&cc, 60000) == 'n');
    for (int i = 0; i < 4; i++) {
        impostor(&h, 0, 1, i % 2 == 0);
        impostor(&h, 1, 0, i % 2 == 1);
    }
    TCHILD_OK(&cc, 120000);
    TCHILD_OK(&cs, 120000);
    CU_ASSERT(log_has(&h.v[1], "no proof that it holds the cluster key"));
    CU_ASSERT(!log_has(&h.v[0], "is down") && !log_has(&h.v[1], "is down"));
out:
    tl_child_kill(&cc);
    tl_child_kill(&cs);
    thosts_stop(&h);
}

/* A stranger's HELLO from an address the hosts file does not give the
 * host it claims is refused before any challenge. */
static void test_hello_from_elsewhere(void)
{
    struct thosts h;
    if (thosts_start(&h, 2, NULL) != 0) {
        CU_FAIL("could not start two vipds");
        return;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = inet_addr("127.0.0.2")};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(h.port[1]),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CU_ASSERT_FATAL(fd >= 0);
    if (bind(fd, (struct sockaddr *)&me, sizeof me) == 0 &&
        connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        uint32_t lo = htonl(INADDR_LOOPBACK);
        struct via_host_hello hello = {.host_id = host_id_of(lo, h.port[0]),
                                       .link = VIA_LINK_UDP, .to_id = host_id_of(lo, h.port[1])};
        put_msg(fd, VIA_HOST_HELLO, &hello, sizeof hello);
        size_t got = 0;
        CU_ASSERT(closed_by_peer(fd, 10000, &got));
        CU_ASSERT_EQUAL(got, 0); /* not even a challenge */
        CU_ASSERT(log_has(&h.v[1], "which the hosts file puts elsewhere"));
    } else {
        CU_FAIL("cannot connect from 127.0.0.2");
    }
    close(fd);
    thosts_stop(&h);
}

/* vipd --listen without a key, or with one others can read, does not start
 * and says why. */
static int start_status(const char *dir, const char *hosts, char *out, size_t cap)
{
    const char *ctl = getenv("TL_VIPCTL");
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "d=$(dirname '%s'); \"$d/vipd\" -f -s '%s/s.sock' --listen 127.0.0.1:1 --hosts '%s' "
             "--idle-exit 1 2>&1 </dev/null | head -c 600",
             ctl, dir, hosts);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    return pclose(p);
}

static void test_key_file_checks(void)
{
    char dir[] = "/tmp/vipl-key.XXXXXX", hosts[64], key[64], out[700];
    TCHK(mkdtemp(dir) != NULL);
    snprintf(hosts, sizeof hosts, "%s/hosts", dir);
    snprintf(key, sizeof key, "%s/vipd.key", dir);
    FILE *f = fopen(hosts, "w");
    TCHK(f != NULL);
    fprintf(f, "host0 127.0.0.1:1\n");
    fclose(f);
    start_status(dir, hosts, out, sizeof out);
    CU_ASSERT(strstr(out, "vipctl keygen") != NULL);
    CU_ASSERT_EQUAL(thosts_keygen(key), 0);
    CU_ASSERT_NOT_EQUAL(thosts_keygen(key), 0); /* never over a key that is there */
    struct stat st;
    CU_ASSERT(stat(key, &st) == 0 && (st.st_mode & 0777) == 0600);
    chmod(key, 0640);
    start_status(dir, hosts, out, sizeof out);
    CU_ASSERT(strstr(out, "open to other users") != NULL);
    chmod(key, 0600);
    f = fopen(key, "w"); /* a truncated key */
    if (f) {
        fputs("abcd\n", f);
        fclose(f);
    }
    start_status(dir, hosts, out, sizeof out);
    CU_ASSERT(strstr(out, "hex digits") != NULL);
out:
    unlink(key);
    unlink(hosts);
    rmdir(dir);
}

/* A vipd that does not listen has no strangers: nothing of the handshake's
 * bookkeeping may touch its descriptors (a zeroed table once closed fd 0
 * and whatever took its number). */
static void test_no_listen_no_strangers(void)
{
    struct tvipd v;
    if (tvipd_start(&v, NULL, 0) != 0) {
        CU_FAIL("could not start a vipd");
        return;
    }
    struct tl_nic t;
    for (int i = 0; i < 3; i++) { /* sessions come and go: the loop turns */
        TRC(tl_open(&t, "via0"), VIP_SUCCESS);
        tl_close(&t);
    }
    CU_ASSERT(!log_has(&v, "handshake"));
out:
    tvipd_stop(&v);
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_key_file_checks),
        TL_TEST(test_no_listen_no_strangers),
        TL_TEST(test_hello_from_elsewhere),
        TL_TEST(test_impostor_changes_nothing),
        TL_END,
    };
    return tl_main(argc, argv, "hosts authentication", tests);
}

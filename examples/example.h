/*
 * example.h - what every example here does the same way: check a VIPL
 * call, build an address, connect (client) or accept (server), and run
 * both sides from one command for a first try. Read pingpong.c first;
 * this file is its set-up, kept apart so the other examples share it.
 */
#ifndef EXAMPLE_H
#define EXAMPLE_H

#define _POSIX_C_SOURCE 200809L /* posix_memalign, clock_gettime, nanosleep */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vipl.h>

/* Every VIPL call returns VIP_SUCCESS or a VIP_* error code. */
#define CHECK(call)                                                                       \
    do {                                                                                  \
        VIP_RETURN rc_ = (call);                                                          \
        if (rc_ != VIP_SUCCESS) {                                                         \
            fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call,      \
                    (int)rc_);                                                            \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

/* A send/receive descriptor for len bytes at buf, in memory registered
 * under mh: the control segment (operation, one segment, total length)
 * and one data segment. The NIC writes Status (and, for a receive, the
 * length that came) when it is done with it. */
static inline VIP_DESCRIPTOR *ex_describe(VIP_DESCRIPTOR *d, void *buf, VIP_UINT32 len,
                                          VIP_MEM_HANDLE mh)
{
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_CONTROL_OP_SENDRECV;
    d->CS.SegCount = 1;
    d->CS.Length = len;
    d->DS[0].Local.Data.Address = buf;
    d->DS[0].Local.Handle = mh; /* the handle of the memory the buffer is in */
    d->DS[0].Local.Length = len;
    return d;
}

/* A VIA address is the NIC's host address followed by a discriminator:
 * bytes both sides agree on, as a port number is for TCP. The caller
 * allocates room for both. */
static inline VIP_NET_ADDRESS *ex_address(const void *host, size_t host_len, const char *disc)
{
    size_t dl = strlen(disc);
    VIP_NET_ADDRESS *a = calloc(1, sizeof *a + host_len + dl + 64);
    if (!a)
        exit(1);
    a->HostAddressLen = (VIP_UINT16)host_len;
    memcpy(a->HostAddress, host, host_len);
    a->DiscriminatorLen = (VIP_UINT16)dl;
    memcpy((char *)a->HostAddress + host_len, disc, dl);
    return a;
}

/* Server: like listen() + accept(): wait for a connection request to our
 * discriminator on this NIC and attach it to vi (whose receives should
 * already be posted: the client may send at once). */
static inline void ex_accept(VIP_NIC_HANDLE nic, const VIP_NIC_ATTRIBUTES *attr, VIP_VI_HANDLE vi,
                             const char *disc)
{
    VIP_NET_ADDRESS *me = ex_address(attr->LocalNicAddress, attr->NicAddressLen, disc);
    VIP_NET_ADDRESS *peer = ex_address(attr->LocalNicAddress, attr->NicAddressLen, disc);
    VIP_VI_ATTRIBUTES peer_attr;
    VIP_CONN_HANDLE conn;
    CHECK(VipConnectWait(nic, me, VIP_INFINITE, peer, &peer_attr, &conn));
    CHECK(VipConnectAccept(conn, vi));
    free(me);
    free(peer);
}

/* Client: like connect(): the server's host address by name
 * (VipNSGetHostByName: localhost, a host name, viaN, ...), its
 * discriminator after it. VIP_NO_MATCH means nobody waits there yet (the
 * server has not reached VipConnectWait): ask again, for 10 s at most. */
static inline void ex_connect(VIP_NIC_HANDLE nic, const VIP_NIC_ATTRIBUTES *attr, VIP_VI_HANDLE vi,
                              const char *host, const char *disc)
{
    VIP_NET_ADDRESS *me = ex_address(attr->LocalNicAddress, attr->NicAddressLen, disc);
    VIP_NET_ADDRESS *server = ex_address(attr->LocalNicAddress, attr->NicAddressLen, disc);
    CHECK(VipNSGetHostByName(nic, (VIP_CHAR *)host, server, 0));
    server->DiscriminatorLen = (VIP_UINT16)strlen(disc);
    memcpy((char *)server->HostAddress + server->HostAddressLen, disc, strlen(disc));
    VIP_VI_ATTRIBUTES server_attr;
    VIP_RETURN rc;
    struct timespec ms = {0, 1000000};
    for (int tries = 0; (rc = VipConnectRequest(vi, me, server, 1000, &server_attr)) ==
                            VIP_NO_MATCH && tries < 10000; tries++)
        nanosleep(&ms, NULL);
    CHECK(rc);
    free(me);
    free(server);
}

/* `prog server`, `prog client [HOST]`, or `prog`: both, the server forked. */
static inline int ex_main(int argc, char **argv, int (*server)(void),
                          int (*client)(const char *host))
{
    if (argc > 1 && !strcmp(argv[1], "server"))
        return server();
    if (argc > 1 && !strcmp(argv[1], "client"))
        return client(argc > 2 ? argv[2] : "localhost");
    fflush(stdout);
    pid_t kid = fork();
    if (kid == 0)
        exit(server());
    int rc = client("localhost"), st = 0;
    waitpid(kid, &st, 0);
    return rc || !WIFEXITED(st) || WEXITSTATUS(st);
}

#endif

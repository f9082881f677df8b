/*
 * kr_program.c - a VIPL program written the way programs of 1998 were:
 * K&R function definitions, declarations at the top of blocks, built with
 * -std=gnu89 -Wall -Wextra -Werror (the Makefile), so vipl.h must compile
 * there without a single warning.
 *
 * It sends one message over a connection on one NIC to a server it forks,
 * and exits 0 only if the server received it intact and its own send
 * completed without error. test_compat runs it.
 *
 *   kr_program [device]        (default via0)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vipl.h>

#define MSG_LEN 100
#define TIMEOUT 20000

/* Registered memory: descriptors first, data behind them. */
static char mem[2][8192] __attribute__((aligned(4096)));

static int complain();
static VIP_NET_ADDRESS *address();
static int open_vi();
static int server();
static int client();

static int complain(who, what, rc)
    char *who;
    char *what;
    VIP_RETURN rc;
{
    fprintf(stderr, "kr_program %s: %s returned %d\n", who, what, (int)rc);
    return 1;
}

/* "localhost" on this NIC, with the discriminator disc. */
static VIP_NET_ADDRESS *address(nic, disc)
    VIP_NIC_HANDLE nic;
    char *disc;
{
    VIP_NET_ADDRESS *a;
    int len;

    len = (int)strlen(disc);
    a = (VIP_NET_ADDRESS *)calloc(1, sizeof(VIP_NET_ADDRESS) + 16 + len);
    if (a == NULL)
        return NULL;
    if (VipNSGetHostByName(nic, "localhost", a, 0) != VIP_SUCCESS) {
        free(a);
        return NULL;
    }
    a->DiscriminatorLen = (VIP_UINT16)len;
    memcpy(a->HostAddress + a->HostAddressLen, disc, len);
    return a;
}

static int open_vi(dev, buf, nic, vi, mh)
    char *dev;
    char *buf;
    VIP_NIC_HANDLE *nic;
    VIP_VI_HANDLE *vi;
    VIP_MEM_HANDLE *mh;
{
    VIP_PROTECTION_HANDLE ptag;
    VIP_MEM_ATTRIBUTES ma;
    VIP_VI_ATTRIBUTES va;
    VIP_RETURN rc;

    if ((rc = VipOpenNic(dev, nic)) != VIP_SUCCESS)
        return complain(dev, "VipOpenNic", rc);
    if ((rc = VipCreatePtag(*nic, &ptag)) != VIP_SUCCESS)
        return complain(dev, "VipCreatePtag", rc);
    memset(&ma, 0, sizeof ma);
    ma.Ptag = ptag;
    if ((rc = VipRegisterMem(*nic, buf, 8192, &ma, mh)) != VIP_SUCCESS)
        return complain(dev, "VipRegisterMem", rc);
    memset(&va, 0, sizeof va);
    va.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY;
    va.MaxTransferSize = 8192;
    va.Ptag = ptag;
    if ((rc = VipCreateVi(*nic, &va, NULL, NULL, vi)) != VIP_SUCCESS)
        return complain(dev, "VipCreateVi", rc);
    return 0;
}

static int server(dev, disc)
    char *dev;
    char *disc;
{
    VIP_NIC_HANDLE nic;
    VIP_VI_HANDLE vi;
    VIP_MEM_HANDLE mh;
    VIP_NET_ADDRESS *local, *remote;
    VIP_VI_ATTRIBUTES ra;
    VIP_CONN_HANDLE conn;
    VIP_DESCRIPTOR *d, *got;
    VIP_RETURN rc;
    char *data;
    int i;

    if (open_vi(dev, mem[1], &nic, &vi, &mh))
        return 1;
    d = (VIP_DESCRIPTOR *)mem[1];
    data = mem[1] + 4096;
    memset(d, 0, sizeof *d);
    d->CS.SegCount = 1;
    d->DS[0].Local.Data.Address = data;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = 4096;
    if ((rc = VipPostRecv(vi, d, mh)) != VIP_SUCCESS)
        return complain("server", "VipPostRecv", rc);
    local = address(nic, disc);
    remote = address(nic, "");
    if (local == NULL || remote == NULL)
        return complain("server", "VipNSGetHostByName", VIP_ERROR_NAMESERVICE);
    rc = VipConnectWait(nic, local, TIMEOUT, remote, &ra, &conn);
    if (rc != VIP_SUCCESS)
        return complain("server", "VipConnectWait", rc);
    if ((rc = VipConnectAccept(conn, vi)) != VIP_SUCCESS)
        return complain("server", "VipConnectAccept", rc);
    if ((rc = VipRecvWait(vi, TIMEOUT, &got)) != VIP_SUCCESS)
        return complain("server", "VipRecvWait", rc);
    if (got != d || (got->CS.Status & VIP_STATUS_ERROR_MASK) ||
        got->CS.Length != MSG_LEN)
        return complain("server", "the receive", (VIP_RETURN)got->CS.Status);
    for (i = 0; i < MSG_LEN; i++)
        if (data[i] != (char)(i * 7))
            return complain("server", "the data", VIP_DESCRIPTOR_ERROR);
    VipDisconnect(vi);
    VipDestroyVi(vi);
    VipCloseNic(nic);
    free(local);
    free(remote);
    return 0;
}

/* Sends, then waits for the server (pid) to finish before letting go. */
static int client(dev, disc, pid)
    char *dev;
    char *disc;
    pid_t pid;
{
    VIP_NIC_HANDLE nic;
    VIP_VI_HANDLE vi;
    VIP_MEM_HANDLE mh;
    VIP_NET_ADDRESS *local, *remote;
    VIP_VI_ATTRIBUTES ra;
    VIP_DESCRIPTOR *d, *got;
    VIP_RETURN rc;
    char *data;
    int i, status;

    if (open_vi(dev, mem[0], &nic, &vi, &mh))
        return 1;
    local = address(nic, "");
    remote = address(nic, disc);
    if (local == NULL || remote == NULL)
        return complain("client", "VipNSGetHostByName", VIP_ERROR_NAMESERVICE);
    /* the server may not wait yet: ask again, as programs of the day did */
    for (i = 0; i < 2000; i++) {
        rc = VipConnectRequest(vi, local, remote, TIMEOUT, &ra);
        if (rc != VIP_NO_MATCH)
            break;
        usleep(5000);
    }
    if (rc != VIP_SUCCESS)
        return complain("client", "VipConnectRequest", rc);
    d = (VIP_DESCRIPTOR *)mem[0];
    data = mem[0] + 4096;
    for (i = 0; i < MSG_LEN; i++)
        data[i] = (char)(i * 7);
    memset(d, 0, sizeof *d);
    d->CS.Control = VIP_CONTROL_OP_SENDRECV;
    d->CS.SegCount = 1;
    d->CS.Length = MSG_LEN;
    d->DS[0].Local.Data.Address = data;
    d->DS[0].Local.Handle = mh;
    d->DS[0].Local.Length = MSG_LEN;
    if ((rc = VipPostSend(vi, d, mh)) != VIP_SUCCESS)
        return complain("client", "VipPostSend", rc);
    if ((rc = VipSendWait(vi, TIMEOUT, &got)) != VIP_SUCCESS)
        return complain("client", "VipSendWait", rc);
    if (got != d || (got->CS.Status & VIP_STATUS_ERROR_MASK))
        return complain("client", "the send", (VIP_RETURN)got->CS.Status);
    free(local);
    free(remote);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return complain("client", "the server", VIP_NOT_DONE);
    VipDisconnect(vi);
    if ((rc = VipDestroyVi(vi)) != VIP_SUCCESS)
        return complain("client", "VipDestroyVi", rc);
    if ((rc = VipCloseNic(nic)) != VIP_SUCCESS)
        return complain("client", "VipCloseNic", rc);
    return 0;
}

int main(argc, argv)
    int argc;
    char **argv;
{
    char *dev = argc > 1 ? argv[1] : "via0";
    char disc[32];
    pid_t pid;
    int rc;

    sprintf(disc, "kr%d", (int)getpid());
    pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0)
        _exit(server(dev, disc));
    rc = client(dev, disc, pid);
    if (rc != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return rc;
}

/*
 * vipl_ctl.c - the library's side of the control path to the kernel agent.
 *
 * Every privileged operation (create a VI, register memory, connect ...) is
 * one request/reply on the session's Unix socket. Calls that may block for
 * long (VipConnectWait, VipConnectRequest) use a second, ATTACHed socket so
 * that other threads of the process keep the main one.
 *
 * If no vipd serves the socket, the first VipOpenNic starts one: vipd is
 * found through $VIPD_PATH, then beside this library (PREFIX/bin/vipd for
 * PREFIX/lib/libvipl.so), then on $PATH. vipd's own lock makes concurrent
 * starters agree on one daemon; its launcher exits only once the socket
 * listens, so connecting right after it returns cannot miss.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl_sock.h"
#include "vipl_int.h"

extern char **environ;

/* How long a call on the session's socket may wait for vipd: a stopped or
 * wedged daemon costs a program an error, never a hang. */
static unsigned ctl_timeout_ms(void)
{
    const char *e = getenv("VIPD_CTL_TIMEOUT_MS");
    long v = e && *e ? strtol(e, NULL, 10) : 0;
    return v > 0 && v < 3600000 ? (unsigned)v : 10000u;
}

/* How often a call blocked on vipd for a peer (VipConnectWait ...) asks
 * whether vipd is still there, and how long the answer may take. */
static unsigned ping_ms(void)
{
    const char *e = getenv("VIPD_PING_MS");
    long v = e && *e ? strtol(e, NULL, 10) : 0;
    return v > 0 && v < 3600000 ? (unsigned)v : 1000u;
}

/* A call that timed out on this thread (the socket is then out of step). */
static _Thread_local bool ctl_timed_out;

/* Replies to reports nobody waits for carry this cookie; every call's own
 * is another, so a reply is never taken for another request's. */
#define COOKIE_REPORT 0u

static VIP_RETURN call_send(int sock, uint32_t op, const void *req, size_t req_len,
                            uint64_t cookie)
{
    struct via_ctl_hdr h = {.op = op, .len = (uint32_t)req_len, .cookie = cookie};
    ctl_timed_out = false;
    int rc = ctl_send(sock, &h, sizeof h, req, req_len, NULL, 0);
    if (rc == -EAGAIN || rc == -EWOULDBLOCK) {
        ctl_timed_out = true;
        return vipl_fail(VIP_ERROR_RESOURCE, "vipd timed out taking a request (%u ms): is it "
                         "stopped? (VIPD_CTL_TIMEOUT_MS)", ctl_timeout_ms());
    }
    if (rc < 0)
        return vipl_fail(VIP_ERROR_RESOURCE, "vipd connection lost while sending: %s",
                         strerror(-rc));
    return VIP_SUCCESS;
}

/* The reply with our cookie; replies to reports are dropped on the way. */
static VIP_RETURN call_recv(int sock, uint32_t op, uint64_t cookie, void *rep, size_t rep_len,
                            int *fds, int *nfds)
{
    struct via_ctl_reply_hdr r;
    int cap;
    long n;
    for (;;) {
        cap = nfds ? *nfds : 0;
        n = ctl_recv(sock, &r, sizeof r, rep, rep_len, fds, &cap);
        if (n < 0 || r.cookie == cookie)
            break;
        for (int i = 0; i < cap; i++)
            close(fds[i]);
    }
    if (nfds)
        *nfds = n < 0 ? 0 : cap;
    if (n == -EAGAIN || n == -EWOULDBLOCK) {
        ctl_timed_out = true;
        return vipl_fail(VIP_ERROR_RESOURCE, "vipd timed out: no answer within %u ms: is it "
                         "stopped? (VIPD_CTL_TIMEOUT_MS)", ctl_timeout_ms());
    }
    if (n < 0)
        return vipl_fail(VIP_ERROR_RESOURCE, "vipd connection lost: %s", strerror((int)-n));
    if (r.status != VIP_SUCCESS) {
        r.msg[sizeof r.msg - 1] = 0;
        for (int i = 0; i < cap; i++)
            close(fds[i]);
        if (nfds)
            *nfds = 0;
        if (r.status == VIP_NOT_DONE) /* an answer (VipConnectPeerDone), not a failure */
            return VIP_NOT_DONE;
        /* An accept or reject of a request whose asker gave up meanwhile
         * (the handles were checked here) is a race that programs which
         * retry their connects meet and handle: kept, not said. */
        if ((op == VIA_CTL_CONN_ACCEPT || op == VIA_CTL_CONN_REJECT) &&
            r.status == VIP_INVALID_PARAMETER)
            return vipl_note((VIP_RETURN)r.status, "vipd: %s", r.msg);
        return vipl_fail((VIP_RETURN)r.status, "vipd: %s", r.msg);
    }
    if ((size_t)n < rep_len)
        memset((char *)rep + n, 0, rep_len - (size_t)n);
    return VIP_SUCCESS;
}

static VIP_RETURN roundtrip(int sock, uint32_t op, const void *req, size_t req_len, void *rep,
                            size_t rep_len, int *fds, int *nfds, uint64_t cookie)
{
    VIP_RETURN rc = call_send(sock, op, req, req_len, cookie);
    if (rc != VIP_SUCCESS) {
        if (nfds)
            *nfds = 0;
        return rc;
    }
    return call_recv(sock, op, cookie, rep, rep_len, fds, nfds);
}

/* Send the queued reports that the socket takes now (ctl_lock held). A
 * report is 24 bytes: a socket that polls writable takes it whole. */
static void send_reports(struct vip_nic *n)
{
    pthread_mutex_lock(&n->report_lock);
    unsigned sent = 0;
    while (sent < n->nreports) {
        struct pollfd p = {.fd = n->sock, .events = POLLOUT};
        if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
            break;
        struct via_ctl_hdr h = {.op = VIA_CTL_VI_ERROR, .len = sizeof n->reports[0],
                                .cookie = COOKIE_REPORT};
        if (ctl_send(n->sock, &h, sizeof h, &n->reports[sent], sizeof n->reports[0], NULL,
                     0) < 0)
            break;
        sent++;
    }
    memmove(n->reports, n->reports + sent, (n->nreports - sent) * sizeof n->reports[0]);
    n->nreports -= sent;
    pthread_mutex_unlock(&n->report_lock);
}

void vipl_report_vi_error(struct vip_nic *n, uint32_t vi_id, uint32_t code)
{
    pthread_mutex_lock(&n->report_lock);
    /* Full only if vipd has not read its socket for 16 broken VIs: it hears
     * of the rest when their sessions end (the NIC has told the peers). */
    if (n->nreports < sizeof n->reports / sizeof n->reports[0])
        n->reports[n->nreports++] = (struct via_ctl_vi_error){.vi_id = vi_id, .code = code};
    pthread_mutex_unlock(&n->report_lock);
    /* A call in progress sends it when done; never wait for that call. */
    if (pthread_mutex_trylock(&n->ctl_lock) == 0) {
        send_reports(n);
        pthread_mutex_unlock(&n->ctl_lock);
    }
}

VIP_RETURN vipl_call(struct vip_nic *n, uint32_t op, const void *req, size_t req_len,
                     void *rep, size_t rep_len, int *fds, int *nfds)
{
    /* Virtual time: a call to vipd is the library's work, not the
     * program's computation (however long vipd takes to be scheduled). */
    nic_vt_enter();
    pthread_mutex_lock(&n->ctl_lock);
    if (++n->ctl_cookie == COOKIE_REPORT)
        ++n->ctl_cookie;
    VIP_RETURN rc = roundtrip(n->sock, op, req, req_len, rep, rep_len, fds, nfds,
                              n->ctl_cookie);
    if (rc != VIP_SUCCESS && ctl_timed_out) {
        /* A reply may still come, and would be taken for the next call's:
         * the session's socket is done with. */
        shutdown(n->sock, SHUT_RDWR);
    }
    send_reports(n);
    pthread_mutex_unlock(&n->ctl_lock);
    nic_vt_leave(NULL);
    return rc;
}

static int side_connect(struct vip_nic *n)
{
    return n->sock_system ? ctl_connect_root(n->sock_path) : ctl_connect(n->sock_path);
}

/* Does vipd answer a ping within ping_ms()? On a connection of its own:
 * the session's socket may be busy, and a ping that times out there
 * would end the session. */
static bool vipd_alive(struct vip_nic *n)
{
    int s = side_connect(n);
    if (s < 0)
        return false;
    unsigned ms = ping_ms();
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct via_ctl_hello_r r;
    VIP_RETURN rc = roundtrip(s, VIA_CTL_PING, NULL, 0, &r, sizeof r, NULL, NULL, 1);
    close(s);
    return rc == VIP_SUCCESS;
}

/* Wait for the side socket's answer: as long as vipd takes while it
 * answers pings; a ping every ping_ms() and one at the call's own
 * deadline. */
static VIP_RETURN await_answer(struct vip_nic *n, int s, uint32_t op, VIP_ULONG timeout_ms)
{
    uint64_t now = nic_now_ns(), period = (uint64_t)ping_ms() * 1000000u;
    /* vipd answers a timed-out call itself, at its deadline: a little
     * slack before asking whether it still can */
    uint64_t deadline = timeout_ms >= VIP_INFINITE ? UINT64_MAX
                                                   : now + (uint64_t)timeout_ms * 1000000u +
                                                         50000000u;
    uint64_t next_ping = now + period;
    for (;;) {
        uint64_t wake = next_ping < deadline ? next_ping : deadline;
        now = nic_now_ns();
        int ms = wake > now ? (int)((wake - now + 999999u) / 1000000u) : 0;
        struct pollfd p = {.fd = s, .events = POLLIN};
        int r = poll(&p, 1, ms);
        if (r > 0)
            return VIP_SUCCESS; /* an answer, or the end of the socket: call_recv says */
        if (r < 0 && errno != EINTR)
            return vipl_fail(VIP_ERROR_RESOURCE, "poll on vipd's socket: %s", strerror(errno));
        now = nic_now_ns();
        if (now < wake)
            continue;
        if (!vipd_alive(n))
            return vipl_fail(VIP_ERROR_RESOURCE,
                             "vipd stopped answering (no answer to a ping within %u ms) while "
                             "op %u waited for it: is it stopped? (VIPD_PING_MS)",
                             ping_ms(), op);
        next_ping = nic_now_ns() + period;
        if (now >= deadline)
            deadline = UINT64_MAX; /* alive: its answer is on its way */
    }
}

static VIP_RETURN call_side(struct vip_nic *n, uint32_t op, const void *req, size_t req_len,
                            void *rep, size_t rep_len, int *fds, int *nfds, VIP_ULONG timeout_ms)
{
    int s = side_connect(n);
    if (s < 0) {
        if (nfds)
            *nfds = 0;
        return vipl_fail(VIP_ERROR_RESOURCE, "cannot reach vipd at %s: %s", n->sock_path,
                         ctl_refusal()[0] ? ctl_refusal() : strerror(-s));
    }
    /* Reads once an answer is there; writes bounded like the session's */
    unsigned ms = ctl_timeout_ms();
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    /* ATTACH is answered at once by a vipd that runs: timeout 0 */
    struct via_ctl_attach a = {.session_id = n->session_id};
    VIP_RETURN rc = call_send(s, VIA_CTL_ATTACH, &a, sizeof a, 1);
    if (rc == VIP_SUCCESS)
        rc = await_answer(n, s, VIA_CTL_ATTACH, 0);
    if (rc == VIP_SUCCESS)
        rc = call_recv(s, VIA_CTL_ATTACH, 1, NULL, 0, NULL, NULL);
    if (rc == VIP_SUCCESS)
        rc = call_send(s, op, req, req_len, 2);
    if (rc == VIP_SUCCESS)
        rc = await_answer(n, s, op, timeout_ms);
    if (rc == VIP_SUCCESS)
        rc = call_recv(s, op, 2, rep, rep_len, fds, nfds);
    else if (nfds)
        *nfds = 0;
    close(s);
    return rc;
}

VIP_RETURN vipl_call_side(struct vip_nic *n, uint32_t op, const void *req, size_t req_len,
                          void *rep, size_t rep_len, int *fds, int *nfds, VIP_ULONG timeout_ms)
{
    nic_vt_enter(); /* as vipl_call: the library's work */
    VIP_RETURN rc = call_side(n, op, req, req_len, rep, rep_len, fds, nfds, timeout_ms);
    nic_vt_leave(NULL);
    return rc;
}

void *vipl_map_fd(int fd, size_t len, int prot)
{
    void *p = mmap(NULL, len, prot, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

static int executable(const char *p)
{
    return access(p, X_OK) == 0;
}

/* Where is vipd? $VIPD_PATH, beside the library, then $PATH. */
static int find_vipd(char *out, size_t cap)
{
    const char *env = getenv("VIPD_PATH");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return executable(out) ? 0 : -1;
    }
    Dl_info info;
    if (dladdr((void *)find_vipd, &info) && info.dli_fname) {
        char lib[PATH_MAX];
        if (realpath(info.dli_fname, lib)) {
            char *slash = strrchr(lib, '/');
            if (slash) {
                *slash = 0;
                snprintf(out, cap, "%s/../bin/vipd", lib);
                if (executable(out))
                    return 0;
                snprintf(out, cap, "%s/vipd", lib);
                if (executable(out))
                    return 0;
            }
        }
    }
    const char *path = getenv("PATH");
    if (!path)
        return -1;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *dir = strtok_r(buf, ":", &save); dir;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(out, cap, "%s/vipd", dir);
        if (executable(out))
            return 0;
    }
    return -1;
}

/* The last line of a file, for an error message. */
static void last_line(const char *path, char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (line[0] != '\n') {
            size_t n = strlen(line) < cap - 1 ? strlen(line) : cap - 1;
            memcpy(out, line, n);
            out[n] = 0;
        }
    }
    fclose(f);
    out[strcspn(out, "\n")] = 0;
}

static int start_vipd(const char *sock_path)
{
    char exe[PATH_MAX];
    if (find_vipd(exe, sizeof exe) < 0) {
        vipl_set_error("no vipd is running on %s and none was found to start "
                       "(set VIPD_PATH, put vipd on PATH, or start 'vipd -f' by hand)",
                       sock_path);
        return -1;
    }
    const char *nics = getenv("VIPD_NICS");
    const char *profile = getenv("VIP_PROFILE");
    char *argv[10];
    int a = 0;
    argv[a++] = exe;
    argv[a++] = (char *)"--autostart";
    argv[a++] = (char *)"-s";
    argv[a++] = (char *)sock_path;
    argv[a++] = (char *)"-n";
    argv[a++] = (char *)(nics && *nics ? nics : "2");
    if (profile && *profile) {
        argv[a++] = (char *)"--profile";
        argv[a++] = (char *)profile;
    }
    argv[a] = NULL;
    /* vipd's complaints before it daemonizes (a bad profile, say) go to
     * the log beside its socket, where the daemon writes later ones. */
    char log[600];
    snprintf(log, sizeof log, "%s", sock_path);
    char *slash = strrchr(log, '/');
    snprintf(slash ? slash + 1 : log, sizeof log - (size_t)(slash ? slash + 1 - log : 0),
             "vipd.log");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        vipl_set_error("cannot start %s: %s", exe, strerror(rc));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char why[256];
        last_line(log, why, sizeof why);
        vipl_set_error("%s --autostart failed (status %d): %s (log: %s)", exe,
                       WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                       why[0] ? why : "no reason given", log);
        return -1;
    }
    return 0;
}

/* The session's socket: every call on it is bounded in time. */
static int bounded(int s)
{
    unsigned ms = ctl_timeout_ms();
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return s;
}

int vipl_connect_vipd(const char *path, bool system)
{
    if (system) {
        /* root's daemon, started by root: never one of ours in its place */
        int s = ctl_connect_root(path);
        if (s >= 0)
            return bounded(s);
        vipl_set_error("the system vipd at %s: %s", path,
                       ctl_refusal()[0] ? ctl_refusal() : strerror(-s));
        return -1;
    }
    int s = ctl_connect(path);
    if (s >= 0)
        return bounded(s);
    if (ctl_refusal()[0]) {
        /* Planted by someone else: nothing is sent there, nothing started. */
        vipl_set_error("refusing the vipd socket %s: %s", path, ctl_refusal());
        return -1;
    }
    const char *auto_env = getenv("VIPD_AUTOSTART");
    if (auto_env && strcmp(auto_env, "0") == 0) {
        vipl_set_error("no vipd is running on %s and VIPD_AUTOSTART=0 (start 'vipd -f')",
                       path);
        return -1;
    }
    if (ctl_make_socket_dir(path) < 0) {
        vipl_set_error("cannot use the directory of %s (it must be ours, mode 0700, not a "
                       "symbolic link)",
                       path);
        return -1;
    }
    if (start_vipd(path) < 0)
        return -1;
    /* The launcher returned after the socket listened; a daemon that was
     * exiting on idle at that very moment is the only reason to retry. */
    for (int i = 0; i < 50; i++) {
        s = ctl_connect(path);
        if (s >= 0)
            return bounded(s);
        if (ctl_refusal()[0]) {
            vipl_set_error("refusing the vipd socket %s: %s", path, ctl_refusal());
            return -1;
        }
        if (i == 25 && start_vipd(path) < 0)
            return -1;
        usleep(20000);
    }
    vipl_set_error("vipd was started but %s does not accept connections", path);
    return -1;
}

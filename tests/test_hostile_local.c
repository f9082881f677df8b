/*
 * test_hostile_local.c - another local user against this user's programs:
 * the vipd socket path planted or redirected before the program runs.
 *
 * libvipl sends nothing (no HELLO, no registration) to a socket another
 * user could have planted: its directory must be a real directory (not a
 * link) of ours or root's that nobody else can write to (or a sticky one),
 * the socket ours or root's, and the process answering ours or root's
 * (SO_PEERCRED). Each case points VIPD_SOCKET at a trap and checks that
 * VipOpenNic fails with a reason, and that the trap saw nothing. Cases that
 * need a second uid run only as root (they say so when skipped).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl_sock.h"
#include "lib/tlib.h"

#define NOBODY 65534

static char base[64];
static char saved_sock[512];

static void setup_base(void)
{
    snprintf(base, sizeof base, "/tmp/vipl-hostile.XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(base));
    const char *s = getenv("VIPD_SOCKET");
    snprintf(saved_sock, sizeof saved_sock, "%s", s ? s : "");
}

static void teardown_base(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "\n  could not remove %s\n", base);
    setenv("VIPD_SOCKET", saved_sock, 1);
}

/* VipOpenNic through `sock` must fail, with `why` in the reason. */
static void open_refused(const char *sock, const char *why)
{
    setenv("VIPD_SOCKET", sock, 1);
    VIP_NIC_HANDLE nic = NULL;
    VIP_RETURN rc = VipOpenNic("via0", &nic);
    CU_ASSERT_EQUAL(rc, VIP_ERROR_RESOURCE);
    if (rc == VIP_SUCCESS)
        VipCloseNic(nic);
    const char *e = vip_last_error();
    CU_ASSERT_PTR_NOT_NULL(strstr(e, why));
    if (!strstr(e, why))
        fprintf(stderr, "\n  %s: reason '%s', expected it to say '%s'\n", sock, e, why);
}

/* A listening socket at path; the listener's credentials are those of the
 * process that calls listen(). */
static int listen_at(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    return s;
}

/* The trap: a child that accepts one connection and reports through its
 * exit status whether a single byte arrived (1) or not (0). */
static pid_t trap_child(int ls, uid_t as)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (as != getuid() && setuid(as) < 0)
        _exit(3);
    if (listen(ls, 4) < 0)
        _exit(4);
    alarm(20);
    int c = accept(ls, NULL, NULL);
    if (c < 0)
        _exit(5);
    char b;
    ssize_t n = recv(c, &b, 1, 0);
    _exit(n > 0 ? 1 : 0);
}

/* The directory is a symbolic link: refused, and nothing is done to what
 * it points at (no chmod, no files). */
static void test_socket_dir_is_a_link(void)
{
    setup_base();
    char target[128], link[128], sock[160];
    snprintf(target, sizeof target, "%s/elsewhere", base);
    snprintf(link, sizeof link, "%s/vipd", base);
    snprintf(sock, sizeof sock, "%s/vipd.sock", link);
    CU_ASSERT_EQUAL_FATAL(mkdir(target, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(symlink(target, link), 0);
    setenv("VIPD_AUTOSTART", "1", 1);
    open_refused(sock, "symbolic link");
    setenv("VIPD_AUTOSTART", "0", 1);
    struct stat st;
    CU_ASSERT_EQUAL(stat(target, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0755);
    char probe[200];
    snprintf(probe, sizeof probe, "%s/vipd.log", target);
    CU_ASSERT_NOT_EQUAL(access(probe, F_OK), 0);
    snprintf(probe, sizeof probe, "%s/vipd.sock", target);
    CU_ASSERT_NOT_EQUAL(access(probe, F_OK), 0);
    teardown_base();
}

/* A directory anyone may write to (and not sticky): anyone could have put
 * the socket there. */
static void test_socket_dir_writable_by_others(void)
{
    setup_base();
    char dir[128], sock[160];
    snprintf(dir, sizeof dir, "%s/open", base);
    snprintf(sock, sizeof sock, "%s/vipd.sock", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(dir, 0777), 0);
    int ls = listen_at(sock);
    CU_ASSERT_TRUE_FATAL(ls >= 0);
    pid_t trap = trap_child(ls, getuid());
    open_refused(sock, "others may write");
    kill(trap, SIGKILL);
    int st;
    waitpid(trap, &st, 0);
    CU_ASSERT_TRUE(WIFSIGNALED(st)); /* it never got a connection */
    close(ls);
    teardown_base();
}

/* The mode of directory `name` under base after ctl_make_socket_dir for a
 * socket in it; `before`: the mode it is made with first (0: not made). */
static mode_t dir_mode_after(const char *name, mode_t before)
{
    char dir[128], sock[160];
    struct stat st = {0};
    snprintf(dir, sizeof dir, "%s/%s", base, name);
    snprintf(sock, sizeof sock, "%s/vipd.sock", dir);
    if (before) {
        CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
        CU_ASSERT_EQUAL_FATAL(chmod(dir, before), 0);
    }
    CU_ASSERT_EQUAL(ctl_make_socket_dir(sock), 0);
    CU_ASSERT_EQUAL(stat(dir, &st), 0);
    return st.st_mode;
}

/* vipd makes the socket's directory private, but a shared sticky one
 * (root's vipd with its socket straight in /tmp) is not its to change:
 * it once left /tmp at 0700 for everyone. */
static void test_socket_dir_modes(void)
{
    setup_base();
    CU_ASSERT_EQUAL(dir_mode_after("shared", 01777) & 07777, 01777);
    CU_ASSERT_EQUAL(dir_mode_after("loose", 0777) & 07777, 0700); /* ours: tightened */
    mode_t m = dir_mode_after("new", 0);
    CU_ASSERT_TRUE(S_ISDIR(m) && (m & 077) == 0);
    teardown_base();
}

/* A socket (or a listener) of another user in a directory we trust:
 * nothing is sent to it. Needs a second uid: root only. */
static void test_socket_of_another_user(void)
{
    if (getuid() != 0) {
        fprintf(stderr, "\n  skipped: needs root to act as a second user\n");
        return;
    }
    setup_base();
    char sock[160];
    snprintf(sock, sizeof sock, "%s/vipd.sock", base);
    /* (1) the socket file is another user's */
    int ls = listen_at(sock);
    CU_ASSERT_TRUE_FATAL(ls >= 0);
    CU_ASSERT_EQUAL(chown(sock, NOBODY, NOBODY), 0);
    pid_t trap = trap_child(ls, getuid());
    open_refused(sock, "not a socket of ours");
    kill(trap, SIGKILL);
    int st;
    waitpid(trap, &st, 0);
    close(ls);
    unlink(sock);
    /* (2) the socket is ours, but the process listening is another user's */
    ls = listen_at(sock);
    CU_ASSERT_TRUE_FATAL(ls >= 0);
    trap = trap_child(ls, NOBODY);
    close(ls);
    /* the child listens as nobody; connect until it does (bounded) */
    setenv("VIPD_SOCKET", sock, 1);
    VIP_NIC_HANDLE nic;
    VIP_RETURN rc = VIP_SUCCESS;
    const char *e = "";
    for (int i = 0; i < 200; i++) {
        rc = VipOpenNic("via0", &nic);
        e = vip_last_error();
        if (strstr(e, "runs as uid"))
            break;
        usleep(10000); /* waiting for the child's listen(), bounded */
    }
    CU_ASSERT_EQUAL(rc, VIP_ERROR_RESOURCE);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "runs as uid 65534"));
    if (!strstr(e, "runs as uid 65534"))
        fprintf(stderr, "\n  reason: '%s'\n", e);
    waitpid(trap, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st));
    CU_ASSERT_EQUAL(WEXITSTATUS(st), 0); /* it was connected to, and got not one byte */
    teardown_base();
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_socket_dir_is_a_link),
        TL_TEST(test_socket_dir_writable_by_others),
        TL_TEST(test_socket_dir_modes),
        TL_TEST(test_socket_of_another_user),
        TL_END,
    };
    return tl_main(argc, argv, "hostile local users", tests);
}

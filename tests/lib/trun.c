/*
 * trun.c - run a program bounded, its output captured (trun.h).
 */
#include "trun.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tlib.h"

static int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

int tr_run(char *const argv[], char *out, size_t cap, unsigned wait_ms)
{
    char tmp[] = "/tmp/trun.XXXXXX", log[64];
    out[0] = 0;
    if (!mkdtemp(tmp))
        return -3;
    snprintf(log, sizeof log, "%s.log", tmp);
    pid_t pid = fork();
    if (pid < 0) {
        rmdir(tmp);
        return -3;
    }
    if (pid == 0) {
        setpgid(0, 0);
        setenv("TMPDIR", tmp, 1);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the kill below */
    int st = 0, rc = -1;
    uint64_t end = tl_now_ms() + wait_ms;
    while (pid > 0 && tl_now_ms() < end) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            pid = 0;
        } else {
            usleep(5000);
        }
    }
    if (pid > 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    FILE *f = fopen(log, "r");
    if (f) {
        size_t n = fread(out, 1, cap - 1, f);
        out[n] = 0;
        fclose(f);
    }
    unlink(log);
    int left = dir_entries(tmp);
    if (left > 0) { /* say what, then clear it so the next run starts clean */
        char cmd[128];
        snprintf(cmd, sizeof cmd, "ls -la %s >&2; rm -rf %s", tmp, tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "trun: cannot clear %s\n", tmp);
    }
    rmdir(tmp);
    if (rc >= 0 && left != 0)
        rc = -2;
    if (rc != 0)
        fprintf(stderr, "\n  %s: status %d (-1: timed out, -2: left files in TMPDIR); output:\n%s\n",
                argv[0], rc, out);
    return rc;
}

int tr_lines(const char *out, const char *text)
{
    int n = 0;
    size_t l = strlen(text);
    for (const char *p = out; p && *p;) {
        n += strncmp(p, text, l) == 0;
        const char *nl = strchr(p, '\n');
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

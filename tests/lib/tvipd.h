/*
 * tvipd.h - a vipd of a test's own (tests/lib/tvipd.c), for tests that do
 * things to the daemon itself (stop it, starve it of file descriptors)
 * which the shared vipd of tests/run_tests.sh must not suffer.
 *
 * It runs on a socket in a private directory, dies with the test process
 * whatever becomes of it (PR_SET_PDEATHSIG), and VIPD_SOCKET points at it
 * until tvipd_stop puts the old value back.
 */
#ifndef TVIPD_H
#define TVIPD_H

#include <sys/types.h>

struct tvipd {
    pid_t pid;
    char dir[64], sock[96], log[96];
    char saved[512];
};

/* Start vipd -f -n 2 with the extra arguments (NULL-terminated list, may
 * be NULL) and, if nofile > 0, that RLIMIT_NOFILE; wait until it answers.
 * 0, or -1 (stopped again). */
int tvipd_start(struct tvipd *v, const char *const *extra, unsigned nofile);
/* The same with the private directory made in parent instead of /tmp. */
int tvipd_start_in(struct tvipd *v, const char *parent, const char *const *extra,
                   unsigned nofile);
void tvipd_stop(struct tvipd *v);

#endif

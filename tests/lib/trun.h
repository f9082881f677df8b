/*
 * trun.h - run a program as a user would from a shell, bounded: in a
 * process group of its own (so everything it starts can be stopped),
 * with a private TMPDIR that must be empty when it ends, stdout and
 * stderr captured (trun.c).
 */
#ifndef TRUN_H
#define TRUN_H

#include <stddef.h>

/* Run argv (NULL-terminated; argv[0] a path) in this process's
 * environment and wait wait_ms at most. out gets its output
 * (NUL-terminated, cut at cap). Returns its exit status (128 + signal if
 * killed), -1 if it outlived wait_ms (then its group is killed), -2 if it
 * left something in its TMPDIR, -3 if it could not be started. A status
 * other than 0 is reported on stderr with the output. */
int tr_run(char *const argv[], char *out, size_t cap, unsigned wait_ms);

/* How many lines of out begin with text. */
int tr_lines(const char *out, const char *text);

#endif

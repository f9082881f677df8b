/*
 * kd_core.c - the bottom of vipd: the daemon's state (kd), its log and its
 * clock.
 *
 * Every other file of vipd may call these; this file calls nothing of
 * vipd. The fuzzers link vipd without this file and kd_main.c and stand
 * in for both (a silent log, a clock the input moves).
 */
#include "kd.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct kd_state kd;

enum kd_level kd_log_level = KD_INFO;
static const char *const level_name[] = {"error", "warn", "info", "debug"};

int kd_log_level_of(const char *name)
{
    for (int i = 0; i <= KD_DEBUG; i++)
        if (strcmp(name, level_name[i]) == 0)
            return i;
    return -1;
}

void kd_log(enum kd_level lv, const char *fmt, ...)
{
    if (lv > kd_log_level)
        return;
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03ld vipd[%d]: %s: ",
                  ts.tv_nsec / 1000000, (int)getpid(), level_name[lv]);
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line so lines of concurrent vipds never interleave. */
    size_t len = strnlen(line, sizeof line - 2);
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, len) < 0) {
        /* nowhere left to report it */
    }
}

uint64_t kd_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

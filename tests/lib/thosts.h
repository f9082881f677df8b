/*
 * thosts.h - emulated hosts for a test (tests/lib/thosts.c): two or three
 * vipds of the test's own (tvipd.h), each `vipd --listen 127.0.0.1:PORT
 * --hosts FILE` on a port the test found free, the hosts file naming them
 * host0, host1, ... Every address is one the test made; no root needed.
 * A child process picks its host with thosts_use (VIPD_SOCKET).
 * THOSTS_LINK (udp or ofi) is passed to every vipd as --link.
 * THOSTS_KEEP_LOGS=DIR keeps the vipds' logs there (debugging).
 */
#ifndef THOSTS_H
#define THOSTS_H

#include <stdint.h>

#include "tvipd.h"

#define THOSTS_MAX 3

struct thosts {
    unsigned n;
    struct tvipd v[THOSTS_MAX];
    char sock[THOSTS_MAX][96];
    uint16_t port[THOSTS_MAX];
    char dir[64], file[96], key[96]; /* key: the cluster key, beside the hosts file */
};

/* Start n vipds; extra: more vipd arguments for every one (NULL-terminated,
 * may be NULL). 0, or -1 (everything stopped again). */
int thosts_start(struct thosts *h, unsigned n, const char *const *extra);
void thosts_stop(struct thosts *h);
/* Hosts, links and peers that go away are noticed within two seconds
 * (heartbeat, host and link timeouts in the environment the vipds and the
 * test's processes inherit): call before thosts_start. */
void thosts_quick_failures(void);
/* In a child: talk to host i's vipd from now on. */
void thosts_use(const struct thosts *h, unsigned i);
/* More words for host i's line of the hosts file the next thosts_start
 * writes (e.g. "eth1=10.77.1.2"); NULL: none. Kept until changed. */
void thosts_host_words(unsigned i, const char *words);
/* A new cluster key at path (vipctl keygen, found by $TL_VIPCTL): 0 or -1. */
int thosts_keygen(const char *path);

#endif

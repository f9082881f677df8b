/*
 * tsys.h - two throwaway users and a system vipd of the test's own
 * (tests/lib/tsys.c), for the tests of vipd --system (test_system,
 * test_system_isolation).
 *
 * The users are uids without a passwd entry (vipd and libvipl need none),
 * entered with setresgid()/setresuid() in forked children: nothing to
 * create, nothing to remove. The system vipd's socket is in a private
 * root-owned directory that the users can reach (never /run/vipd). All of
 * it needs root: tsys_start and tsys_need_root say "skipped" otherwise.
 */
#ifndef TSYS_H
#define TSYS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tlib.h"
#include "tvipd.h"

extern uid_t tsys_uid_a, tsys_uid_b;
extern struct tvipd tsys_vipd;

/* Two uids nobody has (no passwd entry), different for concurrent runs. */
void tsys_pick_uids(void);
/* true as root; else false, saying the test is skipped. */
bool tsys_need_root(void);
/* tl_spawn a child that becomes uid (no groups, gid = uid, dumpable as any
 * program, dies with the test) and runs fn(arg). 0 on success. */
int tsys_spawn_as(struct tl_child *c, uid_t uid, int (*fn)(void *), void *arg);
/* Start `vipd --system` with extra options (NULL-terminated, may be NULL)
 * as tsys_vipd (VIPD_SOCKET points at it); false: skipped or failed (a
 * CUnit failure). tvipd_stop(&tsys_vipd) stops it. */
bool tsys_start(const char *const *extra);
/* Wait for children c[0..n-1] (if ok; else kill them at once) and assert
 * that they succeeded, printing what they reported. */
void tsys_reap(struct tl_child *c, unsigned n, bool ok);
/* A private directory others can pass through (base: cap bytes); and its
 * removal. */
bool tsys_make_base(char *base, size_t cap, const char *tag);
void tsys_remove_tree(const char *dir);

/* In a child: a NIC, a registered buffer, a reliable VI with a receive
 * posted; once connected, one message of TSYS_LEN bytes each way. */
struct tsys_link {
    struct tl_nic t;
    struct tl_buf b;
    VIP_VI_HANDLE vi;
};
#define TSYS_LEN 1024u
void tsys_link_open(struct tsys_link *l, const char *dev);
/* Send message `out`, receive message `in`, both checked byte for byte. */
void tsys_link_swap(struct tsys_link *l, uint32_t out, uint32_t in);
void tsys_link_close(struct tsys_link *l);

#endif

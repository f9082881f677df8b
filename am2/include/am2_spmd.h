/*
 * am2_spmd.h - start-up and collectives for SPMD programs over AM-2 (in
 * the manner of AMUDP's SPMD interface).
 *
 * A job is started by `amrun -np N prog args...`; every process calls
 * am2_spmd_startup early in main and gets a bundle and an endpoint whose
 * translation table names every rank (index i = rank i, rank itself
 * included) with the job's tag set everywhere. Run without amrun, a
 * program is a job of one rank.
 *
 * The SPMD layer talks through an endpoint of its own in the same bundle
 * (AM_Poll on the bundle serves both): every handler index of the
 * program's endpoint is the program's, and so are its statistics.
 */
#ifndef AM2_SPMD_H
#define AM2_SPMD_H

#include <stddef.h>

#include "am2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first handler index the SPMD layer kept for itself on the program's
 * endpoint: none now (256). */
#define AM2_SPMD_FIRST_HANDLER 256

/* AM_Init, one AM_SEQ bundle and one endpoint, names exchanged through the
 * job's directory (AM2_SPMD_DIR), every rank mapped, tags set. argc/argv
 * may be NULL; nothing is taken out of them. AM_OK or an AM_ERR_ code
 * (AMX_LastError() says why). */
int am2_spmd_startup(int *argc, char ***argv, eb_t *eb, ep_t *ep);
int am2_spmd_rank(void);
int am2_spmd_nranks(void);
/* 1 in a process amrun started, 0 in one started by hand. */
int am2_spmd_is_worker(void);
/* The value of name in the environment of the launcher that started the
 * job (amrun's, whatever the ranks' own environment holds: ranks on other
 * hosts get only some variables), or NULL if it had none. Read at
 * am2_spmd_startup; before it, or without amrun, getenv(name). */
const char *am2_spmd_getenv_master(const char *name);
/* Every rank waits until all have called it (handlers run meanwhile). */
int am2_spmd_barrier(void);
/* dst (nranks * len bytes) gets every rank's len bytes of src, by rank. */
int am2_spmd_allgather(const void *src, void *dst, size_t len);
/* Run before am2_spmd_exit leaves (with the code). */
int am2_spmd_set_exit_callback(void (*fn)(int code));
/* End the job with code, as AMUDP_SPMDExit does: AM-2 is terminated and
 * the process leaves with _exit (stdio flushed; the program's atexit
 * handlers, which may be what called this, do not run). Under amrun any
 * code ends the whole job: amrun stops the other ranks and exits with it.
 * Call it after a barrier when the other ranks must finish first. A rank
 * that returns from main instead ends only itself (the job ends when all
 * have, or with the first non-zero code). */
void am2_spmd_exit(int code) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif

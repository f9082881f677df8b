/*
 * amudp_spmd.h - AMUDP's SPMD interface, served by libam2 (am2_spmd.h
 * underneath): the names AMUDP programs start, synchronise and end a job
 * with, and their AMX_SPMD* aliases.
 *
 * A job starts in either of two ways:
 *   ./prog 4 args...      the process is the master: AMUDP_SPMDStartup
 *                         does not return in it; it becomes the job's
 *                         console (amrun) and starts 4 workers running
 *                         `prog args...` (locally by default; through ssh
 *                         with AMUDP_SPAWNFN=S and AMUDP_SSH_SERVERS), and
 *                         exits with the job's status;
 *   amrun -np 4 ./prog args...   each process is a worker from the start.
 * In a worker AMUDP_SPMDStartup returns a bundle and an endpoint whose
 * translation table names every rank (index = rank), tags set; handlers
 * are the program's to set, then AMUDP_SPMDBarrier before talking.
 */
#ifndef AMUDP_SPMD_H
#define AMUDP_SPMD_H

#include <stddef.h>
#include <stdint.h>

#include "amudp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Starts nproc workers running argv (the master's own argv, less what
 * the master took: the count and a spawn letter); extra_env: VAR=value
 * strings (NULL-terminated) each worker must also get. Non-zero if the
 * workers were started. */
typedef int (*amudp_spawnfn_t)(int nproc, int argc, char **argv, char **extra_env);

/*
 * Master (not started as a worker): nproc workers (0: the number in
 * argv[1], taken out of argv), started by spawnfn (NULL: a single letter
 * in the next argument, L or S, taken out of argv if there is one; else
 * AMUDP_SPAWNFN; else L). Returns only on failure.
 * Worker: AM_Init, one AM_SEQ bundle and one endpoint, every rank mapped;
 * nproc, networkdepth and spawnfn are ignored. networkpid (may be NULL)
 * gets a number that is the same in every rank of the job and differs
 * between jobs.
 */
int AMUDP_SPMDStartup(int *argc, char ***argv, int nproc, int networkdepth,
                      amudp_spawnfn_t spawnfn, uint64_t *networkpid, eb_t *eb, ep_t *ep);

/* End the whole job with exitcode, whichever rank calls it: the exit
 * callback runs, AM-2 terminates, stdio is flushed and
 * AMUDP_SPMDkillmyprocess(exitcode) ends the process. The other ranks
 * leave the same way (callback, kill hook) the next time they poll, or
 * are stopped by the launcher a second later. Returns only on failure. */
int AMUDP_SPMDExit(int exitcode);

typedef void (*amudp_exitcallback_t)(int);
/* Run when this rank leaves through AMUDP_SPMDExit, its own or another's. */
int AMUDP_SPMDSetExitCallback(amudp_exitcallback_t fn);
/* What finally ends the process (_exit unless the program sets it). */
extern void (*AMUDP_SPMDkillmyprocess)(int);

/* Non-zero in a worker (started by a master, by amrun, or by another
 * launcher am2_spmd.h knows), given main's argv. */
int AMUDP_SPMDIsWorker(char **argv);
int AMUDP_SPMDNumProcs(void);
int AMUDP_SPMDMyProc(void);
/* Every rank waits until all have called it; handlers run meanwhile. */
int AMUDP_SPMDBarrier(void);
/* dest (len * nproc bytes) gets every rank's len bytes of source, by rank. */
int AMUDP_SPMDAllGather(void *source, void *dest, size_t len);
/* getenv in the master's environment as it was at start-up. */
const char *AMUDP_SPMDgetenvMaster(const char *keyname);

/* The spawn functions a master may be given (or picks by letter). */
int AMUDP_SPMDLocalSpawn(int nproc, int argc, char **argv, char **extra_env); /* L: fork here */
int AMUDP_SPMDSshSpawn(int nproc, int argc, char **argv, char **extra_env);   /* S: ssh */

typedef struct {
    char abbrev;
    const char *desc;
    amudp_spawnfn_t fnptr;
} amudp_spawnfn_desc_t;
/* The spawn functions by letter, ended by an entry of abbrev 0. */
extern const amudp_spawnfn_desc_t AMUDP_Spawnfn_Desc[];

#define AMX_SPMDgetenvMaster AMUDP_SPMDgetenvMaster
#define AMX_SPMDBarrier AMUDP_SPMDBarrier
#define AMX_SPMDNumProcs AMUDP_SPMDNumProcs
#define AMX_SPMDMyProc AMUDP_SPMDMyProc
#define AMX_SPMDExit AMUDP_SPMDExit
#define AMX_SPMDSetExitCallback AMUDP_SPMDSetExitCallback
#define AMX_SPMDkillmyprocess AMUDP_SPMDkillmyprocess
#define AMX_SPMDIsWorker AMUDP_SPMDIsWorker
#define AMX_SPMDAllGather AMUDP_SPMDAllGather
#define AMX_SPMDStartup(pargc, pargv, networkdepth, pnetworkpid, peb, pep)                    \
    AMUDP_SPMDStartup((pargc), (pargv), 0, (networkdepth), NULL, (pnetworkpid), (peb), (pep))

#ifdef __cplusplus
}
#endif

#endif

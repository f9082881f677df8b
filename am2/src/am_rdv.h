/*
 * am_rdv.h - the SPMD rendezvous over TCP: the layout amrun (the server,
 * am2/tools/amrun_rdv.c) and the ranks (the clients, am_rdv.c) share.
 *
 * Ranks started on several hosts (amrun --hosts) share no directory, so
 * they find each other through amrun: AM2_SPMD_RDV = "HOST:PORT:COOKIE".
 * Each rank connects once and sends a hello (below) followed by its
 * endpoint name (len bytes, opaque to amrun). When all N have come, amrun
 * sends every rank the N names in rank order (N * len bytes), then its own
 * environment (am2_spmd_getenv_master): a uint32_t byte count and that
 * many bytes of NUL-terminated VAR=value strings, and closes.
 * A hello with another cookie, magic or length, a rank out of range or
 * one already seen is dropped (the connection closed), nothing else. All
 * numbers are little-endian, as every host this runs on.
 */
#ifndef AM_RDV_H
#define AM_RDV_H

#include <assert.h>
#include <stdint.h>

#define AM_RDV_MAGIC 0x41524456u /* "ARDV" */
#define AM_RDV_MAX_NAME 64       /* the longest name amrun accepts */
#define AM_RDV_MAX_ENV (1u << 20) /* the most environment amrun sends */
#define AM_SPMD_ENV_FILE "env"    /* the same, in the job directory of local ranks */
/* DIR/exit: "R CODE\n", written by the first rank R to leave by
 * am2_spmd_exit: the job ends with CODE (snprintf format: the job
 * directory). */
#define AM_SPMD_EXIT_MARK "%s/exit"

struct am_rdv_hello {
    uint32_t magic;
    uint32_t rank;
    uint32_t nranks;
    uint32_t len;     /* bytes of name after this header */
    uint64_t cookie;  /* the job's secret, from AM2_SPMD_RDV */
};
static_assert(sizeof(struct am_rdv_hello) == 24, "rendezvous hello layout");

#endif

/*
 * amudp.h - the names of Berkeley's AMUDP (Active Messages over UDP) that
 * AM-2 programs written for it use beyond the AM-2 specification, served
 * by libam2: a program written for AMUDP builds against this header (and
 * amudp_spmd.h) with `pkg-config --cflags --libs am2` and no change.
 *
 * Every AM_* call is am2.h's (the specification's behaviour). This header
 * adds AMUDP's limits, its statistics record and calls, its error knobs,
 * and the AMX_* names through which portable AM programs (GASNet's amx
 * tests, for one) reach whichever AM layer they were built with. A program
 * that includes this header gets AMUDP's meaning of AMX_GetEndpointStatistics,
 * AMX_DumpStatistics and amx_stats_t, not am2.h's own. What differs from
 * AMUDP, name by name: spec-notes/am2.md, "AMUDP programs".
 */
#ifndef AMUDP_H
#define AMUDP_H

#include <stdint.h>

#include "am2.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef AMUDP
#define AMUDP 1 /* what portable AM programs test to pick this layer */
#endif

#define AMUDP_LIBRARY_VERSION_MAJOR 3
#define AMUDP_LIBRARY_VERSION_MINOR 16
#define AMUDP_LIBRARY_VERSION 3.16
#define AMUDP_LIBRARY_VERSION_STR "3.16"

/* Limits: each at least AMUDP's own. */
#define AMUDP_MAX_SHORT AM2_MAX_SHORT
#define AMUDP_MAX_MEDIUM AM2_MAX_MEDIUM
#define AMUDP_MAX_LONG AM2_MAX_LONG
#define AMUDP_MAX_NUMHANDLERS AM2_MAX_HANDLERS
#define AMUDP_MAX_NUMTRANSLATIONS AM2_MAX_TRANSLATIONS
#define AMUDP_MAX_SEGLENGTH ((uintptr_t)1 << 32) /* as AM_MaxSegLength */
#define AMUDP_MAX_SPMDPROCS 1024                 /* amrun's limit */
#define AMUDP_MAX_NETWORKDEPTH 1024              /* accepted; K is fixed (16) */

/* Status given to handler 0 that AMUDP has and AM-2 lacks (never sent
 * here: a reply is never refused). */
#define EREPLYREJECTED 10

/* ---- statistics ---------------------------------------------------------------- */

typedef enum {
    amudp_Short = 0,
    amudp_Medium = 1,
    amudp_Long = 2,
    amudp_NumCategories = 3
} amudp_category_t;
typedef uint64_t amudp_cputick_t;

/* AMUDP's record, field for field. Data bytes are arguments (4 bytes
 * each) and payload; total bytes add each message's header as it crosses.
 * Retransmissions happen below AM here (the reliable VI), unseen: those
 * counters stay 0, and so does the request latency (AMUDP built without
 * latency statistics: min at its initial value, max and sum 0). */
typedef struct {
    uint64_t RequestsSent[amudp_NumCategories];
    uint64_t RepliesSent[amudp_NumCategories];
    uint64_t RequestsRetransmitted[amudp_NumCategories];
    uint64_t RepliesRetransmitted[amudp_NumCategories];
    uint64_t RequestsReceived[amudp_NumCategories];
    uint64_t RepliesReceived[amudp_NumCategories];
    uint64_t ReturnedMessages;
    amudp_cputick_t RequestMinLatency;
    amudp_cputick_t RequestMaxLatency;
    amudp_cputick_t RequestSumLatency;
    uint64_t RequestDataBytesSent[amudp_NumCategories];
    uint64_t ReplyDataBytesSent[amudp_NumCategories];
    uint64_t RequestTotalBytesSent[amudp_NumCategories];
    uint64_t ReplyTotalBytesSent[amudp_NumCategories];
    uint64_t TotalBytesSent;
} amudp_stats_t;

extern const amudp_stats_t AMUDP_initial_stats; /* the empty record (a sum's start) */
int AMUDP_GetEndpointStatistics(ep_t ep, amudp_stats_t *stats);
int AMUDP_ResetEndpointStatistics(ep_t ep);
/* runningsum += newvalues (minimum and maximum for the latencies). */
int AMUDP_AggregateStatistics(amudp_stats_t *runningsum, amudp_stats_t *newvalues);
/* The record in words: written to fp (a FILE *) unless NULL, and returned
 * (a static buffer, rewritten by the next call). globalAnalysis: the
 * record is a sum over all ranks (sent and received then balance). */
const char *AMUDP_DumpStatistics(void *fp, amudp_stats_t *stats, int globalAnalysis);

/* ---- errors and knobs ---------------------------------------------------------------- */

typedef void (*amudp_handler_fn_t)(); /* handlers take their own argument lists */

/* Non-zero: every failing AM call says why on stderr (as AM2_DEBUG=1). */
extern int AMUDP_VerboseErrors;
/* Non-zero: no informational output (libam2 prints none anyway). */
extern int AMUDP_SilentMode;
/* Non-zero: wait politely for send resources. Accepted; libam2's waits
 * always poll, and AM_WaitSema sleeps. */
extern int AMUDP_PoliteSync;

/* Print "*** FATAL ERROR: " and the message on stderr, then abort(). */
void AMUDP_FatalErr(const char *msg, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Non-zero when two endpoint names are the same endpoint. */
int AMUDP_enEqual(en_t a, en_t b);

#define AMUDP_GetSourceId AMX_GetSourceId

/* ---- the portable AMX_* names ------------------------------------------------------------ */

#define AMX_VerboseErrors AMUDP_VerboseErrors
#define AMX_SilentMode AMUDP_SilentMode
#define AMX_GetEndpointStatistics AMUDP_GetEndpointStatistics
#define AMX_ResetEndpointStatistics AMUDP_ResetEndpointStatistics
#define AMX_DumpStatistics AMUDP_DumpStatistics
#define AMX_AggregateStatistics AMUDP_AggregateStatistics
#define AMX_initial_stats AMUDP_initial_stats
#define amx_stats_t amudp_stats_t
#define amx_handler_fn_t amudp_handler_fn_t
#define AMX_FatalErr AMUDP_FatalErr
#define AMX_enEqual AMUDP_enEqual

#ifdef __cplusplus
}
#endif

#endif

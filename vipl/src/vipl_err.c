/*
 * vipl_err.c - error messages: every failure says what failed and why.
 *
 * VIPL returns bare codes; the reason goes to a per-thread message that
 * vip_last_error() (vipl_ext.h) returns, and to stderr when VIP_DEBUG is set.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "vipl_ext.h"
#include "vipl_int.h"

static _Thread_local char last_error[256];

static bool debug_on(void)
{
    const char *dbg = getenv("VIP_DEBUG");
    return dbg && *dbg && *dbg != '0';
}

static void set_error(VIP_RETURN rc, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    if (debug_on())
        fprintf(stderr, "vipl: %s%s%s\n", rc == VIP_SUCCESS ? "" : vip_strerror(rc),
                rc == VIP_SUCCESS ? "" : ": ", last_error);
}

void vipl_debug(const char *fmt, ...)
{
    if (!debug_on())
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("vipl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void vipl_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(VIP_SUCCESS, fmt, ap);
    va_end(ap);
}

VIP_RETURN vipl_fail(VIP_RETURN rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(rc, fmt, ap);
    va_end(ap);
    return rc;
}

const char *vip_last_error(void)
{
    return last_error;
}

const char *vip_error_code_str(VIP_ERROR_CODE code)
{
    static const char *const what[] = {
        [VIP_ERROR_POST_DESC] = "a posted descriptor was in error",
        [VIP_ERROR_CONN_LOST] = "the connection was lost",
        [VIP_ERROR_RECVQ_EMPTY] = "a message arrived with no receive posted",
        [VIP_ERROR_VI_OVERRUN] = "VI overrun",
        [VIP_ERROR_RDMAW_PROT] = "RDMA write protection",
        [VIP_ERROR_RDMAW_DATA] = "RDMA write data",
        [VIP_ERROR_RDMAW_ABORT] = "RDMA write aborted",
        [VIP_ERROR_RDMAR_PROT] = "RDMA read protection",
        [VIP_ERROR_COMP_PROT] = "completion protection",
        [VIP_ERROR_RDMA_TRANSPORT] = "RDMA transport",
        [VIP_ERROR_CATASTROPHIC] = "catastrophic (the link misbehaved, or a CQ overflowed)",
    };
    if ((unsigned)code < sizeof what / sizeof what[0] && what[code])
        return what[code];
    return "unknown asynchronous error";
}

const char *vip_strerror(VIP_RETURN rc)
{
    static const char *const names[] = {
        [VIP_SUCCESS] = "VIP_SUCCESS",
        [VIP_NOT_DONE] = "VIP_NOT_DONE",
        [VIP_INVALID_PARAMETER] = "VIP_INVALID_PARAMETER",
        [VIP_ERROR_RESOURCE] = "VIP_ERROR_RESOURCE",
        [VIP_TIMEOUT] = "VIP_TIMEOUT",
        [VIP_REJECT] = "VIP_REJECT",
        [VIP_INVALID_RELIABILITY_LEVEL] = "VIP_INVALID_RELIABILITY_LEVEL",
        [VIP_INVALID_MTU] = "VIP_INVALID_MTU",
        [VIP_INVALID_QOS] = "VIP_INVALID_QOS",
        [VIP_INVALID_PTAG] = "VIP_INVALID_PTAG",
        [VIP_INVALID_RDMAREAD] = "VIP_INVALID_RDMAREAD",
        [VIP_DESCRIPTOR_ERROR] = "VIP_DESCRIPTOR_ERROR",
        [VIP_INVALID_STATE] = "VIP_INVALID_STATE",
        [VIP_ERROR_NAMESERVICE] = "VIP_ERROR_NAMESERVICE",
        [VIP_NO_MATCH] = "VIP_NO_MATCH",
        [VIP_NOT_REACHABLE] = "VIP_NOT_REACHABLE",
        [VIP_ERROR_NOT_SUPPORTED] = "VIP_ERROR_NOT_SUPPORTED",
    };
    if ((unsigned)rc < sizeof names / sizeof names[0] && names[rc])
        return names[rc];
    return "VIP_(unknown return code)";
}

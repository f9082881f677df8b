/*
 * vipl_err.c - error messages: every failure says what failed and why.
 *
 * VIPL returns bare codes; the reason goes to a per-thread message that
 * vip_last_error() (vipl_ext.h) returns, and to stderr: the first time a
 * kind of failure happens in the process (the message's format names it),
 * unless VIP_QUIET=1; every time with VIP_DEBUG=1. VIP_NOT_DONE,
 * VIP_TIMEOUT and VIP_NO_MATCH are answers a program waits through, not
 * failures: only VIP_DEBUG shows them.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vipl_ext.h"
#include "vipl_int.h"

static _Thread_local char last_error[256];

static bool debug_on(void)
{
    const char *dbg = getenv("VIP_DEBUG");
    return dbg && *dbg && *dbg != '0';
}

static bool quiet(void)
{
    const char *q = getenv("VIP_QUIET");
    return q && *q && *q != '0';
}

/* True the first time a failure of this kind is seen in this process:
 * its message, numbers aside (a VI id, a request number), so that vipd's
 * reasons, which all come through one format, count each as its own. */
static bool first_time(const char *msg)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t seen[128];
    static unsigned nseen;
    uint64_t key = 1469598103934665603ull; /* FNV-1a of the digit-free text */
    for (const char *c = msg; *c; c++)
        if (*c < '0' || *c > '9')
            key = (key ^ (uint8_t)*c) * 1099511628211ull;
    bool first = true;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < nseen && first; i++)
        first = seen[i] != key;
    if (first && nseen < sizeof seen / sizeof seen[0])
        seen[nseen++] = key;
    pthread_mutex_unlock(&lock);
    return first;
}

static void set_error(VIP_RETURN rc, bool said, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    /* (VIP_SUCCESS: vipl_set_error, a reason whose code the caller returns)
     * Answers that programs expect and handle are not failures to say. */
    bool answer = !said || rc == VIP_NOT_DONE || rc == VIP_TIMEOUT || rc == VIP_NO_MATCH;
    if (debug_on() || (!answer && !quiet() && first_time(last_error)))
        fprintf(stderr, "vipl: %s%s%s%s\n", rc == VIP_SUCCESS ? "" : vip_strerror(rc),
                rc == VIP_SUCCESS ? "" : ": ", last_error,
                debug_on() ? "" : " (said once; VIP_DEBUG=1: every failure, VIP_QUIET=1: none)");
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
    set_error(VIP_SUCCESS, true, fmt, ap);
    va_end(ap);
}

VIP_RETURN vipl_fail(VIP_RETURN rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(rc, true, fmt, ap);
    va_end(ap);
    return rc;
}

VIP_RETURN vipl_note(VIP_RETURN rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(rc, false, fmt, ap);
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

void vipl_status_bits(VIP_UINT32 status, char *out, size_t cap)
{
    static const struct {
        VIP_UINT32 bit;
        const char *name;
    } bits[] = {
        {VIP_STATUS_DONE, "DONE"},
        {VIP_STATUS_FORMAT_ERROR, "FORMAT_ERROR: a malformed descriptor"},
        {VIP_STATUS_PROTECTION_ERROR, "PROTECTION_ERROR: a memory handle or ptag that does not "
                                      "cover the memory"},
        {VIP_STATUS_LENGTH_ERROR, "LENGTH_ERROR: the message is larger than the receive"},
        {VIP_STATUS_PARTIAL_ERROR, "PARTIAL_ERROR"},
        {VIP_STATUS_DESC_FLUSHED_ERROR, "DESC_FLUSHED_ERROR: flushed (the VI broke)"},
        {VIP_STATUS_TRANSPORT_ERROR, "TRANSPORT_ERROR"},
        {VIP_STATUS_RDMA_PROT_ERROR, "RDMA_PROT_ERROR: the remote memory refuses RDMA"},
        {VIP_STATUS_REMOTE_DESC_ERROR, "REMOTE_DESC_ERROR: the peer had no receive posted, or "
                                       "it was in error"},
        {VIP_STATUS_IMMEDIATE, "IMMEDIATE"},
    };
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if ((status & bits[i].bit) && len + 1 < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "", bits[i].name);
    if (len >= cap)
        out[cap - 1] = 0;
}

const char *vipl_control_op_name(VIP_UINT16 control)
{
    switch (control & VIP_CONTROL_OP_MASK) {
    case VIP_CONTROL_OP_SENDRECV:
        return "send/receive";
    case VIP_CONTROL_OP_RDMAWRITE:
        return "RDMA write";
    case VIP_CONTROL_OP_RDMAREAD:
        return "RDMA read";
    default:
        return "reserved operation";
    }
}

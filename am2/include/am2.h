/*
 * am2.h - Active Messages II (AM-2) over VIPL.
 *
 * The names, types and semantics are those of the AM-2 specification
 * (Mainwaring and Culler, 1996) as AM-2 programs use them; constants and
 * the variadic request/reply macros follow the style of Berkeley's AMUDP.
 * What this implementation chose where the specification is vague is in
 * spec-notes/am2.md.
 *
 * An endpoint (ep_t) lives in a bundle (eb_t). It has a 64-bit tag, a
 * translation table of (en_t name, tag) entries naming the endpoints it
 * sends to, a segment (the memory long messages land in), and 256 handlers.
 * Messages are requests (to a translation-table index) and replies (to the
 * token a request handler got): short (up to AM_MaxShort() 32-bit
 * arguments), medium (I: plus up to AM_MaxMedium() bytes given to the
 * handler in a buffer) and long (Xfer: plus up to AM_MaxLong() bytes placed
 * in the destination's segment at dest_offset). Handlers run inside
 * AM_Poll (and inside calls that wait for resources). A message that cannot
 * be delivered comes back: handler 0 of the sending endpoint runs as
 * handler(status, opcode, token).
 */
#ifndef AM2_H
#define AM2_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types ------------------------------------------------------------------ */

typedef uint64_t tag_t;  /* endpoint tag */
typedef uint8_t handler_t; /* handler index, 0..255 */
typedef int op_t;        /* opcode given to the returned-message handler */

/* An endpoint's name: opaque to programs, comparable with memcmp, safe to
 * send between processes. Here: NIC address and the endpoint's id. */
typedef struct {
    uint8_t nic[6];    /* VIA NIC address (host id + NIC index) */
    uint16_t magic;    /* AM2_EN_MAGIC when the name is valid */
    uint32_t pid;      /* process that allocated it */
    uint32_t id;       /* endpoint number within that process */
} en_t;

struct am2_bundle;
struct am2_ep;
typedef struct am2_bundle *eb_t;
typedef struct am2_ep *ep_t;

typedef void (*am2_handler_fn_t)(); /* handlers take their own argument lists */

/* ---- constants ---------------------------------------------------------------- */

#define AM_NONE ((tag_t)0)            /* endpoint tag: accept no messages */
#define AM_ALL ((tag_t)0xFFFFFFFFFFFFFFFFull) /* endpoint tag: accept every tag */

enum { AM_SEQ = 0, AM_PAR = 1 };      /* bundle access */
enum { AM_NOEVENTS = 0, AM_NOTEMPTY = 1 }; /* event masks */

/* Return codes. */
#define AM_OK 0           /* success */
#define AM_ERR_NOT_INIT 1 /* AM_Init was not called */
#define AM_ERR_BAD_ARG 2  /* an argument is invalid */
#define AM_ERR_RESOURCE 3 /* out of a resource, or not supported */
#define AM_ERR_NOT_SENT 4 /* an asynchronous message could not be sent now */
#define AM_ERR_IN_USE 5   /* the resource is in use */

/* Status given to the returned-message handler (handler 0). */
#define EBADARGS 1     /* arguments of the message invalid at the destination */
#define EBADENTRY 2    /* the destination has no translation for the source */
#define EBADTAG 3      /* the message's tag does not match the destination's */
#define EBADHANDLER 4  /* the destination's handler is not set */
#define EBADSEGOFF 5   /* dest_offset outside the destination's segment */
#define EBADLENGTH 6   /* a long message runs past the segment's end */
#define EBADENDPOINT 7 /* the destination endpoint no longer exists */
#define ECONGESTION 8  /* no credits from the destination for too long */
#define EUNREACHABLE 9 /* the destination could not be reached */

/* Opcode given to the returned-message handler: what the message was. */
#define AM_REQUEST_M 1      /* AM_RequestN */
#define AM_REQUEST_IM 2     /* AM_RequestIN */
#define AM_REQUEST_XFER_M 3 /* AM_RequestXferN, AM_RequestXferAsyncN */
#define AM_REPLY_M 4        /* AM_ReplyN */
#define AM_REPLY_IM 5       /* AM_ReplyIN */
#define AM_REPLY_XFER_M 6   /* AM_ReplyXferN */

/* Limits. */
#define AM2_MAX_SHORT 16
#define AM2_MAX_MEDIUM 65536
#define AM2_MAX_LONG (1 << 20)
#define AM2_MAX_HANDLERS 256
#define AM2_MAX_TRANSLATIONS 4096

#define AM_MaxShort() AM2_MAX_SHORT
#define AM_MaxMedium() AM2_MAX_MEDIUM
#define AM_MaxLong() AM2_MAX_LONG
#define AM_MaxNumHandlers() AM2_MAX_HANDLERS

/* ---- initialization, bundles, endpoints ------------------------------------------ */

int AM_Init(void);      /* nests: the last AM_Terminate frees everything */
int AM_Terminate(void);

int AM_AllocateBundle(int type, eb_t *endb);
int AM_FreeBundle(eb_t bundle); /* frees its endpoints too */
int AM_MoveEndpoint(ep_t ea, eb_t from_bundle, eb_t to_bundle);

int AM_AllocateEndpoint(eb_t bundle, ep_t *endp, en_t *endpoint_name);
int AM_FreeEndpoint(ep_t ea);

int AM_SetTag(ep_t ea, tag_t tag);
int AM_GetTag(ep_t ea, tag_t *tag);

int AM_MaxSegLength(uintptr_t *nbytes);
int AM_SetSeg(ep_t ea, void *addr, uintptr_t nbytes);
int AM_GetSeg(ep_t ea, void **addr, uintptr_t *nbytes);

/* ---- the translation table ------------------------------------------------------------ */

int AM_Map(ep_t ea, int index, en_t name, tag_t tag);
int AM_MapAny(ep_t ea, int *index, en_t name, tag_t tag);
int AM_UnMap(ep_t ea, int index);
int AM_GetTranslationInuse(ep_t ea, int index); /* AM_OK if in use, AM_ERR_RESOURCE if not */
int AM_GetTranslationTag(ep_t ea, int index, tag_t *tag);
int AM_GetTranslationName(ep_t ea, int index, en_t *name);
int AM_MaxNumTranslations(int *ntrans);
int AM_GetNumTranslations(ep_t ea, int *ntrans);
int AM_SetNumTranslations(ep_t ea, int ntrans);
int AM_SetExpectedResources(ep_t ea, int n_endpoints, int n_outstanding_requests);

/* ---- handlers ---------------------------------------------------------------------------- */

int AM2_SetHandler(ep_t ea, handler_t handler, am2_handler_fn_t function);
int AM2_SetHandlerAny(ep_t ea, handler_t *handler, am2_handler_fn_t function);
#define AM_SetHandler(ea, h, fn) AM2_SetHandler((ea), (h), (am2_handler_fn_t)(fn))
#define AM_SetHandlerAny(ea, h, fn) AM2_SetHandlerAny((ea), (h), (am2_handler_fn_t)(fn))
int AM_GetNumHandlers(ep_t ea, int *n);
int AM_SetNumHandlers(ep_t ea, int n);

/* ---- events and polling ---------------------------------------------------------------------- */

int AM_SetEventMask(eb_t eb, int mask);
int AM_GetEventMask(eb_t eb, int *mask);
/* Sleep (no busy waiting) until the armed event happens; the mask is
 * AM_NOEVENTS again afterwards. */
int AM_WaitSema(eb_t eb);
int AM_Poll(eb_t eb);

/* ---- inside a handler: what the token says ----------------------------------------------------- */

int AM_GetSourceEndpoint(void *token, en_t *name);
int AM_GetDestEndpoint(void *token, ep_t *endp);
int AM_GetMsgTag(void *token, tag_t *tag);
/* The source's index in the destination's translation table. */
int AMX_GetSourceId(void *token, int *index);
/* In the returned-message handler: what the returned message was. args
 * has room for AM_MaxShort() values; nbytes is the medium/long length. */
int AMX_GetReturned(void *token, handler_t *handler, int *nargs, int32_t *args, size_t *nbytes);

/* ---- requests and replies ------------------------------------------------------------------------ */

int AM2_Request(ep_t ep, int dest, handler_t h, int nargs, ...);
int AM2_RequestI(ep_t ep, int dest, handler_t h, void *src, size_t nbytes, int nargs, ...);
int AM2_RequestXfer(ep_t ep, int dest, uintptr_t dest_offset, handler_t h, void *src,
                    size_t nbytes, int async, int nargs, ...);
int AM2_Reply(void *token, handler_t h, int nargs, ...);
int AM2_ReplyI(void *token, handler_t h, void *src, size_t nbytes, int nargs, ...);
int AM2_ReplyXfer(void *token, uintptr_t dest_offset, handler_t h, void *src, size_t nbytes,
                  int nargs, ...);

/* Arguments are 32-bit integers; the casts convert as a call would. */
#define AM2_A1(a) (int32_t)(a)
#define AM2_ARGS0()
#define AM2_ARGS1(a0) , AM2_A1(a0)
#define AM2_ARGS2(a0, a1) AM2_ARGS1(a0), AM2_A1(a1)
#define AM2_ARGS3(a0, a1, a2) AM2_ARGS2(a0, a1), AM2_A1(a2)
#define AM2_ARGS4(a0, a1, a2, a3) AM2_ARGS3(a0, a1, a2), AM2_A1(a3)
#define AM2_ARGS5(a0, a1, a2, a3, a4) AM2_ARGS4(a0, a1, a2, a3), AM2_A1(a4)
#define AM2_ARGS6(a0, a1, a2, a3, a4, a5) AM2_ARGS5(a0, a1, a2, a3, a4), AM2_A1(a5)
#define AM2_ARGS7(a0, a1, a2, a3, a4, a5, a6) AM2_ARGS6(a0, a1, a2, a3, a4, a5), AM2_A1(a6)
#define AM2_ARGS8(a0, a1, a2, a3, a4, a5, a6, a7)                                          \
    AM2_ARGS7(a0, a1, a2, a3, a4, a5, a6), AM2_A1(a7)
#define AM2_ARGS9(a0, a1, a2, a3, a4, a5, a6, a7, a8)                                      \
    AM2_ARGS8(a0, a1, a2, a3, a4, a5, a6, a7), AM2_A1(a8)
#define AM2_ARGS10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)                                 \
    AM2_ARGS9(a0, a1, a2, a3, a4, a5, a6, a7, a8), AM2_A1(a9)
#define AM2_ARGS11(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10)                            \
    AM2_ARGS10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9), AM2_A1(a10)
#define AM2_ARGS12(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11)                       \
    AM2_ARGS11(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10), AM2_A1(a11)
#define AM2_ARGS13(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12)                  \
    AM2_ARGS12(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11), AM2_A1(a12)
#define AM2_ARGS14(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)             \
    AM2_ARGS13(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12), AM2_A1(a13)
#define AM2_ARGS15(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14)        \
    AM2_ARGS14(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13), AM2_A1(a14)
#define AM2_ARGS16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15)   \
    AM2_ARGS15(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14),        \
        AM2_A1(a15)

/* One family of macros per count; `n` is the count, the rest its arguments. */
#define AM2_REQ(n, ep, d, h, ...) AM2_Request((ep), (d), (h), n AM2_ARGS##n(__VA_ARGS__))
#define AM2_REQI(n, ep, d, h, s, l, ...)                                                  \
    AM2_RequestI((ep), (d), (h), (s), (l), n AM2_ARGS##n(__VA_ARGS__))
#define AM2_REQX(n, as, ep, d, o, h, s, l, ...)                                           \
    AM2_RequestXfer((ep), (d), (o), (h), (s), (l), as, n AM2_ARGS##n(__VA_ARGS__))
#define AM2_REP(n, t, h, ...) AM2_Reply((t), (h), n AM2_ARGS##n(__VA_ARGS__))
#define AM2_REPI(n, t, h, s, l, ...) AM2_ReplyI((t), (h), (s), (l), n AM2_ARGS##n(__VA_ARGS__))
#define AM2_REPX(n, t, o, h, s, l, ...)                                                   \
    AM2_ReplyXfer((t), (o), (h), (s), (l), n AM2_ARGS##n(__VA_ARGS__))

#define AM_Request0(ep, d, h) AM2_Request((ep), (d), (h), 0)
#define AM_RequestI0(ep, d, h, s, l) AM2_RequestI((ep), (d), (h), (s), (l), 0)
#define AM_RequestXfer0(ep, d, o, h, s, l) AM2_RequestXfer((ep), (d), (o), (h), (s), (l), 0, 0)
#define AM_RequestXferAsync0(ep, d, o, h, s, l)                                            \
    AM2_RequestXfer((ep), (d), (o), (h), (s), (l), 1, 0)
#define AM_Reply0(t, h) AM2_Reply((t), (h), 0)
#define AM_ReplyI0(t, h, s, l) AM2_ReplyI((t), (h), (s), (l), 0)
#define AM_ReplyXfer0(t, o, h, s, l) AM2_ReplyXfer((t), (o), (h), (s), (l), 0)

#define AM_Request1(ep, d, h, ...) AM2_REQ(1, ep, d, h, __VA_ARGS__)
#define AM_Request2(ep, d, h, ...) AM2_REQ(2, ep, d, h, __VA_ARGS__)
#define AM_Request3(ep, d, h, ...) AM2_REQ(3, ep, d, h, __VA_ARGS__)
#define AM_Request4(ep, d, h, ...) AM2_REQ(4, ep, d, h, __VA_ARGS__)
#define AM_Request5(ep, d, h, ...) AM2_REQ(5, ep, d, h, __VA_ARGS__)
#define AM_Request6(ep, d, h, ...) AM2_REQ(6, ep, d, h, __VA_ARGS__)
#define AM_Request7(ep, d, h, ...) AM2_REQ(7, ep, d, h, __VA_ARGS__)
#define AM_Request8(ep, d, h, ...) AM2_REQ(8, ep, d, h, __VA_ARGS__)
#define AM_Request9(ep, d, h, ...) AM2_REQ(9, ep, d, h, __VA_ARGS__)
#define AM_Request10(ep, d, h, ...) AM2_REQ(10, ep, d, h, __VA_ARGS__)
#define AM_Request11(ep, d, h, ...) AM2_REQ(11, ep, d, h, __VA_ARGS__)
#define AM_Request12(ep, d, h, ...) AM2_REQ(12, ep, d, h, __VA_ARGS__)
#define AM_Request13(ep, d, h, ...) AM2_REQ(13, ep, d, h, __VA_ARGS__)
#define AM_Request14(ep, d, h, ...) AM2_REQ(14, ep, d, h, __VA_ARGS__)
#define AM_Request15(ep, d, h, ...) AM2_REQ(15, ep, d, h, __VA_ARGS__)
#define AM_Request16(ep, d, h, ...) AM2_REQ(16, ep, d, h, __VA_ARGS__)

#define AM_RequestI1(ep, d, h, s, l, ...) AM2_REQI(1, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI2(ep, d, h, s, l, ...) AM2_REQI(2, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI3(ep, d, h, s, l, ...) AM2_REQI(3, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI4(ep, d, h, s, l, ...) AM2_REQI(4, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI5(ep, d, h, s, l, ...) AM2_REQI(5, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI6(ep, d, h, s, l, ...) AM2_REQI(6, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI7(ep, d, h, s, l, ...) AM2_REQI(7, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI8(ep, d, h, s, l, ...) AM2_REQI(8, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI9(ep, d, h, s, l, ...) AM2_REQI(9, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI10(ep, d, h, s, l, ...) AM2_REQI(10, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI11(ep, d, h, s, l, ...) AM2_REQI(11, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI12(ep, d, h, s, l, ...) AM2_REQI(12, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI13(ep, d, h, s, l, ...) AM2_REQI(13, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI14(ep, d, h, s, l, ...) AM2_REQI(14, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI15(ep, d, h, s, l, ...) AM2_REQI(15, ep, d, h, s, l, __VA_ARGS__)
#define AM_RequestI16(ep, d, h, s, l, ...) AM2_REQI(16, ep, d, h, s, l, __VA_ARGS__)

#define AM_RequestXfer1(ep, d, o, h, s, l, ...) AM2_REQX(1, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer2(ep, d, o, h, s, l, ...) AM2_REQX(2, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer3(ep, d, o, h, s, l, ...) AM2_REQX(3, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer4(ep, d, o, h, s, l, ...) AM2_REQX(4, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer5(ep, d, o, h, s, l, ...) AM2_REQX(5, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer6(ep, d, o, h, s, l, ...) AM2_REQX(6, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer7(ep, d, o, h, s, l, ...) AM2_REQX(7, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer8(ep, d, o, h, s, l, ...) AM2_REQX(8, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer9(ep, d, o, h, s, l, ...) AM2_REQX(9, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer10(ep, d, o, h, s, l, ...) AM2_REQX(10, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer11(ep, d, o, h, s, l, ...) AM2_REQX(11, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer12(ep, d, o, h, s, l, ...) AM2_REQX(12, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer13(ep, d, o, h, s, l, ...) AM2_REQX(13, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer14(ep, d, o, h, s, l, ...) AM2_REQX(14, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer15(ep, d, o, h, s, l, ...) AM2_REQX(15, 0, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXfer16(ep, d, o, h, s, l, ...) AM2_REQX(16, 0, ep, d, o, h, s, l, __VA_ARGS__)

#define AM_RequestXferAsync1(ep, d, o, h, s, l, ...) AM2_REQX(1, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync2(ep, d, o, h, s, l, ...) AM2_REQX(2, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync3(ep, d, o, h, s, l, ...) AM2_REQX(3, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync4(ep, d, o, h, s, l, ...) AM2_REQX(4, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync5(ep, d, o, h, s, l, ...) AM2_REQX(5, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync6(ep, d, o, h, s, l, ...) AM2_REQX(6, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync7(ep, d, o, h, s, l, ...) AM2_REQX(7, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync8(ep, d, o, h, s, l, ...) AM2_REQX(8, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync9(ep, d, o, h, s, l, ...) AM2_REQX(9, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync10(ep, d, o, h, s, l, ...)                                      \
    AM2_REQX(10, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync11(ep, d, o, h, s, l, ...)                                      \
    AM2_REQX(11, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync12(ep, d, o, h, s, l, ...)                                      \
    AM2_REQX(12, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync13(ep, d, o, h, s, l, ...)                                      \
    AM2_REQX(13, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync14(ep, d, o, h, s, l, ...)                                      \
    AM2_REQX(14, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync15(ep, d, o, h, s, l, ...)                                      \
    AM2_REQX(15, 1, ep, d, o, h, s, l, __VA_ARGS__)
#define AM_RequestXferAsync16(ep, d, o, h, s, l, ...)                                      \
    AM2_REQX(16, 1, ep, d, o, h, s, l, __VA_ARGS__)

#define AM_Reply1(t, h, ...) AM2_REP(1, t, h, __VA_ARGS__)
#define AM_Reply2(t, h, ...) AM2_REP(2, t, h, __VA_ARGS__)
#define AM_Reply3(t, h, ...) AM2_REP(3, t, h, __VA_ARGS__)
#define AM_Reply4(t, h, ...) AM2_REP(4, t, h, __VA_ARGS__)
#define AM_Reply5(t, h, ...) AM2_REP(5, t, h, __VA_ARGS__)
#define AM_Reply6(t, h, ...) AM2_REP(6, t, h, __VA_ARGS__)
#define AM_Reply7(t, h, ...) AM2_REP(7, t, h, __VA_ARGS__)
#define AM_Reply8(t, h, ...) AM2_REP(8, t, h, __VA_ARGS__)
#define AM_Reply9(t, h, ...) AM2_REP(9, t, h, __VA_ARGS__)
#define AM_Reply10(t, h, ...) AM2_REP(10, t, h, __VA_ARGS__)
#define AM_Reply11(t, h, ...) AM2_REP(11, t, h, __VA_ARGS__)
#define AM_Reply12(t, h, ...) AM2_REP(12, t, h, __VA_ARGS__)
#define AM_Reply13(t, h, ...) AM2_REP(13, t, h, __VA_ARGS__)
#define AM_Reply14(t, h, ...) AM2_REP(14, t, h, __VA_ARGS__)
#define AM_Reply15(t, h, ...) AM2_REP(15, t, h, __VA_ARGS__)
#define AM_Reply16(t, h, ...) AM2_REP(16, t, h, __VA_ARGS__)

#define AM_ReplyI1(t, h, s, l, ...) AM2_REPI(1, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI2(t, h, s, l, ...) AM2_REPI(2, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI3(t, h, s, l, ...) AM2_REPI(3, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI4(t, h, s, l, ...) AM2_REPI(4, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI5(t, h, s, l, ...) AM2_REPI(5, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI6(t, h, s, l, ...) AM2_REPI(6, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI7(t, h, s, l, ...) AM2_REPI(7, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI8(t, h, s, l, ...) AM2_REPI(8, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI9(t, h, s, l, ...) AM2_REPI(9, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI10(t, h, s, l, ...) AM2_REPI(10, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI11(t, h, s, l, ...) AM2_REPI(11, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI12(t, h, s, l, ...) AM2_REPI(12, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI13(t, h, s, l, ...) AM2_REPI(13, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI14(t, h, s, l, ...) AM2_REPI(14, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI15(t, h, s, l, ...) AM2_REPI(15, t, h, s, l, __VA_ARGS__)
#define AM_ReplyI16(t, h, s, l, ...) AM2_REPI(16, t, h, s, l, __VA_ARGS__)

#define AM_ReplyXfer1(t, o, h, s, l, ...) AM2_REPX(1, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer2(t, o, h, s, l, ...) AM2_REPX(2, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer3(t, o, h, s, l, ...) AM2_REPX(3, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer4(t, o, h, s, l, ...) AM2_REPX(4, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer5(t, o, h, s, l, ...) AM2_REPX(5, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer6(t, o, h, s, l, ...) AM2_REPX(6, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer7(t, o, h, s, l, ...) AM2_REPX(7, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer8(t, o, h, s, l, ...) AM2_REPX(8, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer9(t, o, h, s, l, ...) AM2_REPX(9, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer10(t, o, h, s, l, ...) AM2_REPX(10, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer11(t, o, h, s, l, ...) AM2_REPX(11, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer12(t, o, h, s, l, ...) AM2_REPX(12, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer13(t, o, h, s, l, ...) AM2_REPX(13, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer14(t, o, h, s, l, ...) AM2_REPX(14, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer15(t, o, h, s, l, ...) AM2_REPX(15, t, o, h, s, l, __VA_ARGS__)
#define AM_ReplyXfer16(t, o, h, s, l, ...) AM2_REPX(16, t, o, h, s, l, __VA_ARGS__)

/* ---- extensions: why the last call failed, and counters ------------------------------------------- */

/* The reason the last failing AM call of this thread gave (static buffer). */
const char *AMX_LastError(void);

enum { AM2_SHORT, AM2_MEDIUM, AM2_LONG, AM2_NCAT };
typedef struct {
    uint64_t requests_sent[AM2_NCAT], replies_sent[AM2_NCAT];
    uint64_t requests_received[AM2_NCAT], replies_received[AM2_NCAT];
    uint64_t bytes_sent[AM2_NCAT], bytes_received[AM2_NCAT];
    uint64_t returned;       /* messages of ours that came back (handler 0 ran) */
    uint64_t refused;        /* messages we sent back to their senders */
    uint64_t credit_waits;   /* requests that had to wait for a credit */
    uint64_t connections;    /* VIs connected */
    /* Messages sent a second time because the first try did not get
     * through: a same-host peer's shared-memory queue was full (the
     * message waits in order and AM_Poll sends it again). Over the NIC the
     * reliable VI retransmits below this layer, unseen: 0 there. */
    uint64_t retransmits;
    /* Of bytes_sent, those of requests; and the 32-bit arguments sent. */
    uint64_t request_bytes_sent[AM2_NCAT];
    uint64_t request_args_sent[AM2_NCAT], reply_args_sent[AM2_NCAT];
    /* Memory registrations made for long messages from outside the
     * segment (NIC): one covers a window of AM_MaxLong() around the
     * source; sources of up to AM_MaxMedium() bytes are copied instead. */
    uint64_t registrations;
} amx_stats_t;
int AMX_GetEndpointStatistics(ep_t ea, amx_stats_t *st);
/* Print the counters to f (a FILE *). */
int AMX_DumpStatistics(void *f, ep_t ea);

#ifdef __cplusplus
}
#endif

#endif

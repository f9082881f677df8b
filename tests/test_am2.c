/*
 * test_am2.c - the AM-2 API in one process: every call's success and
 * error returns, and messages between two endpoints of the process (the
 * local path): short, medium and long requests and replies, and every
 * return-to-sender case the destination detects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <am2.h>

#include "lib/tam2.h"
#include "lib/tlib.h"

static void set_nic(void) { setenv("AM2_NIC", tl_dev("via0"), 1); }

/* ---- what the handlers saw ----------------------------------------------------------- */

static struct seen {
    int requests, replies, returns;
    int32_t args[16];
    int nargs;
    size_t nbytes;
    uint8_t data[AM2_MAX_MEDIUM];
    void *buf;
    int status;
    op_t opcode;
    handler_t ret_handler;
    int ret_nargs;
    int32_t ret_args[16];
    int reply_rc, reply2_rc, req_rc, poll_rc;
    tag_t tag;
    int src_idx;
    en_t src;
    ep_t dest;
} seen;
static eb_t g_eb;

static void h_returned(int status, op_t opcode, void *token)
{
    seen.returns++;
    seen.status = status;
    seen.opcode = opcode;
    AMX_GetReturned(token, &seen.ret_handler, &seen.ret_nargs, seen.ret_args, NULL);
}

/* Short request with 4 arguments: replies with their sum. */
static void h_req4(void *token, int32_t a, int32_t b, int32_t c, int32_t d)
{
    seen.requests++;
    seen.args[0] = a;
    seen.args[1] = b;
    seen.args[2] = c;
    seen.args[3] = d;
    AM_GetMsgTag(token, &seen.tag);
    AMX_GetSourceId(token, &seen.src_idx);
    AM_GetSourceEndpoint(token, &seen.src);
    AM_GetDestEndpoint(token, &seen.dest);
    seen.reply_rc = AM_Reply1(token, 3, a + b + c + d);
    seen.reply2_rc = AM_Reply1(token, 3, 0); /* a second reply is refused */
    seen.req_rc = AM_Request0(seen.dest, 0, 2); /* and so is a request */
}

static void h_rep1(void *token, int32_t sum)
{
    seen.replies++;
    seen.args[0] = sum;
    seen.reply_rc = AM_Reply0(token, 3); /* a reply handler cannot send */
    seen.poll_rc = AM_Poll(g_eb); /* nor poll */
}

/* Medium: copies what came and replies with it reversed. */
static void h_reqm(void *token, void *buf, size_t nbytes, int32_t a0)
{
    seen.requests++;
    seen.nbytes = nbytes;
    seen.args[0] = a0;
    memcpy(seen.data, buf, nbytes);
    uint8_t back[AM2_MAX_MEDIUM];
    for (size_t i = 0; i < nbytes; i++)
        back[i] = ((uint8_t *)buf)[nbytes - 1 - i];
    seen.reply_rc = AM_ReplyI1(token, 5, back, nbytes, a0 + 1);
}

static void h_repm(void *token, void *buf, size_t nbytes, int32_t a0)
{
    (void)token;
    seen.replies++;
    seen.nbytes = nbytes;
    seen.args[0] = a0;
    memcpy(seen.data, buf, nbytes);
}

/* Long: records where the data are; replies long into the requester's
 * segment at the offset it names. */
static void h_reql(void *token, void *buf, size_t nbytes, int32_t off)
{
    seen.requests++;
    seen.buf = buf;
    seen.nbytes = nbytes;
    seen.reply_rc = AM_ReplyXfer1(token, (uintptr_t)off, 7, buf, nbytes, 99);
}

static void h_repl(void *token, void *buf, size_t nbytes, int32_t a0)
{
    (void)token;
    seen.replies++;
    seen.buf = buf;
    seen.nbytes = nbytes;
    seen.args[0] = a0;
}

static void h_16(void *token, int32_t a0, int32_t a1, int32_t a2, int32_t a3, int32_t a4,
                 int32_t a5, int32_t a6, int32_t a7, int32_t a8, int32_t a9, int32_t a10,
                 int32_t a11, int32_t a12, int32_t a13, int32_t a14, int32_t a15)
{
    (void)token;
    int32_t a[16] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15};
    seen.requests++;
    memcpy(seen.args, a, sizeof a);
}

/* ---- the API without messages ------------------------------------------------------------- */

static void test_not_init(void)
{
    eb_t eb;
    ep_t ep;
    en_t en;
    TAM(AM_AllocateBundle(AM_SEQ, &eb), AM_ERR_NOT_INIT);
    TAM(AM_AllocateEndpoint(NULL, &ep, &en), AM_ERR_NOT_INIT);
    TAM(AM_Poll(NULL), AM_ERR_NOT_INIT);
    TAM(AM_Terminate(), AM_ERR_NOT_INIT);
    TAM(AM_Request0(NULL, 0, 1), AM_ERR_NOT_INIT);
    set_nic();
    TAM(AM_Init(), AM_OK);
    TAM(AM_Init(), AM_OK); /* nests */
    TAM(AM_AllocateBundle(AM_SEQ, &eb), AM_OK);
    TAM(AM_Terminate(), AM_OK);
    TAM(AM_Poll(eb), AM_OK); /* still initialized: one AM_Init left */
    TAM(AM_Terminate(), AM_OK);
    TAM(AM_Poll(eb), AM_ERR_NOT_INIT);
    TAM(AM_Terminate(), AM_ERR_NOT_INIT);
out:
    while (AM_Terminate() == AM_OK)
        ;
}

/* AM2_* settings it would not understand make AM_Init fail with the
 * reason, before it opens anything; valid ones are taken. */
static void test_settings_refused(void)
{
    char shm[16] = "";
    const char *was = getenv("AM2_SHM"); /* the run's choice, put back after */
    if (was)
        snprintf(shm, sizeof shm, "%s", was);
    set_nic();
    setenv("AM2_SHM", "yes", 1);
    TAM(AM_Init(), AM_ERR_BAD_ARG);
    TCHK(strstr(AMX_LastError(), "AM2_SHM=yes") != NULL);
    unsetenv("AM2_SHM");
    setenv("AM2_CONNECT_MS", "soon", 1);
    TAM(AM_Init(), AM_ERR_BAD_ARG);
    TCHK(strstr(AMX_LastError(), "AM2_CONNECT_MS=soon") != NULL);
    setenv("AM2_CONNECT_MS", "2500", 1);
    setenv("AM2_SHM", "0", 1);
    TAM(AM_Init(), AM_OK);
    TAM(AM_Terminate(), AM_OK);
out:
    unsetenv("AM2_CONNECT_MS");
    if (was)
        setenv("AM2_SHM", shm, 1);
    else
        unsetenv("AM2_SHM");
    while (AM_Terminate() == AM_OK)
        ;
}

static void test_bundle_endpoint(void)
{
    eb_t eb = NULL, eb2 = NULL;
    ep_t ep = NULL;
    en_t en;
    tag_t tag;
    int n;
    set_nic();
    TAM(AM_Init(), AM_OK);
    TAM(AM_AllocateBundle(7, &eb), AM_ERR_BAD_ARG);
    TAM(AM_AllocateBundle(AM_SEQ, NULL), AM_ERR_BAD_ARG);
    TAM(AM_AllocateBundle(AM_PAR, &eb), AM_OK);
    TAM(AM_FreeBundle(eb), AM_OK);
    TAM(AM_AllocateBundle(AM_SEQ, &eb), AM_OK);
    TAM(AM_AllocateBundle(AM_SEQ, &eb2), AM_OK);
    TAM(AM_AllocateEndpoint(eb, NULL, &en), AM_ERR_BAD_ARG);
    TAM(AM_AllocateEndpoint((eb_t)&n, &ep, &en), AM_ERR_BAD_ARG);
    TAM(AM_AllocateEndpoint(eb, &ep, &en), AM_OK);
    TAM(AM_GetTag(ep, &tag), AM_OK);
    TCHK(tag == AM_NONE);
    TAM(AM_SetTag(ep, 0x1234567890ull), AM_OK);
    TAM(AM_GetTag(ep, &tag), AM_OK);
    TCHK(tag == 0x1234567890ull);
    TAM(AM_GetTag(ep, NULL), AM_ERR_BAD_ARG);
    TAM(AM_SetTag((ep_t)&n, 1), AM_ERR_BAD_ARG);
    /* handlers */
    handler_t h;
    TAM(AM_GetNumHandlers(ep, &n), AM_OK);
    TCHK(n == AM_MaxNumHandlers() && n == 256);
    TAM(AM_SetNumHandlers(ep, 256), AM_OK);
    TAM(AM_SetNumHandlers(ep, 100), AM_ERR_RESOURCE);
    TAM(AM_SetNumHandlers(ep, 0), AM_ERR_BAD_ARG);
    TAM(AM_SetHandler(ep, 5, h_req4), AM_OK);
    TAM(AM_SetHandler(ep, 5, NULL), AM_ERR_BAD_ARG);
    TAM(AM_SetHandlerAny(ep, &h, h_rep1), AM_OK);
    TCHK(h == 1);
    TAM(AM_SetHandlerAny(ep, NULL, h_rep1), AM_ERR_BAD_ARG);
    for (int i = 2; i < 256; i++)
        if (i != 5)
            TAM(AM_SetHandler(ep, (handler_t)i, h_rep1), AM_OK);
    TAM(AM_SetHandlerAny(ep, &h, h_rep1), AM_ERR_RESOURCE);
    /* segments */
    uintptr_t max, len;
    void *addr;
    TAM(AM_MaxSegLength(&max), AM_OK);
    TCHK(max >= (1u << 20));
    TAM(AM_GetSeg(ep, &addr, &len), AM_OK);
    TCHK(addr == NULL && len == 0);
    static uint8_t seg[1 << 16];
    TAM(AM_SetSeg(ep, NULL, 4096), AM_ERR_BAD_ARG);
    TAM(AM_SetSeg(ep, seg, 0), AM_ERR_BAD_ARG);
    TAM(AM_SetSeg(ep, seg, sizeof seg), AM_OK);
    TAM(AM_GetSeg(ep, &addr, &len), AM_OK);
    TCHK(addr == seg && len == sizeof seg);
    TAM(AM_SetSeg(ep, seg + 100, 1000), AM_OK); /* moves it */
    TAM(AM_GetSeg(ep, &addr, &len), AM_OK);
    TCHK(addr == seg + 100 && len == 1000);
    /* moving between bundles, events */
    TAM(AM_MoveEndpoint(ep, eb2, eb), AM_ERR_BAD_ARG);
    TAM(AM_MoveEndpoint(ep, eb, eb2), AM_OK);
    TAM(AM_MoveEndpoint(ep, eb2, eb), AM_OK);
    int mask;
    TAM(AM_GetEventMask(eb, &mask), AM_OK);
    TCHK(mask == AM_NOEVENTS);
    TAM(AM_SetEventMask(eb, 42), AM_ERR_BAD_ARG);
    TAM(AM_WaitSema(eb), AM_ERR_BAD_ARG); /* nothing armed: it would sleep for ever */
    TAM(AM_SetEventMask(eb, AM_NOTEMPTY), AM_OK);
    TAM(AM_GetEventMask(eb, &mask), AM_OK);
    TCHK(mask == AM_NOTEMPTY);
    TAM(AM_FreeEndpoint(ep), AM_OK);
    TAM(AM_FreeEndpoint(ep), AM_ERR_BAD_ARG);
    ep = NULL;
    TAM(AM_FreeBundle(eb2), AM_OK);
    eb2 = NULL;
    TAM(AM_FreeBundle(eb2), AM_ERR_BAD_ARG);
    /* a bundle frees its endpoints */
    TAM(AM_AllocateEndpoint(eb, &ep, &en), AM_OK);
    TAM(AM_FreeBundle(eb), AM_OK);
    eb = NULL;
    TAM(AM_SetTag(ep, 1), AM_ERR_BAD_ARG);
out:
    while (AM_Terminate() == AM_OK)
        ;
}

static void test_translation_table(void)
{
    eb_t eb;
    ep_t ep;
    en_t me, other, got;
    tag_t tag;
    int n, idx;
    set_nic();
    TAM(AM_Init(), AM_OK);
    TAM(AM_AllocateBundle(AM_SEQ, &eb), AM_OK);
    TAM(AM_AllocateEndpoint(eb, &ep, &me), AM_OK);
    TAM(AM_AllocateEndpoint(eb, (ep_t[]){NULL}, &other), AM_OK);
    TCHK(memcmp(&me, &other, sizeof me) != 0);
    TAM(AM_MaxNumTranslations(&n), AM_OK);
    TCHK(n >= 256);
    TAM(AM_GetNumTranslations(ep, &n), AM_OK);
    TCHK(n == 256);
    TAM(AM_GetTranslationInuse(ep, 3), AM_ERR_RESOURCE);
    TAM(AM_GetTranslationInuse(ep, 256), AM_ERR_BAD_ARG);
    TAM(AM_GetTranslationInuse(ep, -1), AM_ERR_BAD_ARG);
    TAM(AM_Map(ep, 3, other, 77), AM_OK);
    TAM(AM_Map(ep, 3, me, 77), AM_ERR_IN_USE);
    TAM(AM_Map(ep, 256, me, 77), AM_ERR_BAD_ARG);
    en_t junk;
    memset(&junk, 0x5a, sizeof junk);
    TAM(AM_Map(ep, 4, junk, 1), AM_ERR_BAD_ARG);
    TAM(AM_GetTranslationInuse(ep, 3), AM_OK);
    TAM(AM_GetTranslationTag(ep, 3, &tag), AM_OK);
    TCHK(tag == 77);
    TAM(AM_GetTranslationName(ep, 3, &got), AM_OK);
    TCHK(memcmp(&got, &other, sizeof got) == 0);
    TAM(AM_GetTranslationTag(ep, 4, &tag), AM_ERR_RESOURCE);
    TAM(AM_GetTranslationName(ep, 4, &got), AM_ERR_RESOURCE);
    TAM(AM_MapAny(ep, &idx, me, 5), AM_OK);
    TCHK(idx == 0);
    TAM(AM_MapAny(ep, &idx, me, 5), AM_OK);
    TCHK(idx == 1);
    TAM(AM_UnMap(ep, 0), AM_OK);
    TAM(AM_UnMap(ep, 0), AM_ERR_BAD_ARG);
    TAM(AM_GetTranslationInuse(ep, 0), AM_ERR_RESOURCE);
    TAM(AM_SetNumTranslations(ep, 2), AM_ERR_IN_USE); /* index 3 is mapped */
    TAM(AM_SetNumTranslations(ep, 0), AM_ERR_BAD_ARG);
    TAM(AM_SetNumTranslations(ep, 1000), AM_OK);
    TAM(AM_GetNumTranslations(ep, &n), AM_OK);
    TCHK(n == 1000);
    TAM(AM_Map(ep, 999, other, 1), AM_OK);
    TAM(AM_SetExpectedResources(ep, 4, 64), AM_OK);
    TAM(AM_SetExpectedResources(ep, -1, 64), AM_ERR_BAD_ARG);
    /* requests to unmapped or impossible indices fail at once */
    TAM(AM_Request0(ep, 0, 1), AM_ERR_BAD_ARG);
    TAM(AM_Request0(ep, 1000, 1), AM_ERR_BAD_ARG);
    TAM(AM2_Request(ep, 1, 1, 17), AM_ERR_BAD_ARG);
    TAM(AM_RequestI0(ep, 1, 1, seen.data, AM_MaxMedium() + 1), AM_ERR_BAD_ARG);
    TAM(AM_RequestI0(ep, 1, 1, NULL, 10), AM_ERR_BAD_ARG);
    TAM(AM_RequestXfer0(ep, 1, 0, 1, seen.data, AM_MaxLong() + 1), AM_ERR_BAD_ARG);
out:
    while (AM_Terminate() == AM_OK)
        ;
}

/* ---- messages between two endpoints of this process ------------------------------------------ */

struct two {
    eb_t eb;
    ep_t a, b;
    en_t an, bn;
};

static int two_up(struct two *t, tag_t atag, tag_t btag)
{
    memset(&seen, 0, sizeof seen);
    set_nic();
    if (AM_Init() || AM_AllocateBundle(AM_SEQ, &t->eb) ||
        AM_AllocateEndpoint(t->eb, &t->a, &t->an) || AM_AllocateEndpoint(t->eb, &t->b, &t->bn) ||
        AM_SetTag(t->a, atag) || AM_SetTag(t->b, btag) || AM_Map(t->a, 0, t->bn, btag) ||
        AM_Map(t->b, 0, t->an, atag))
        return -1;
    g_eb = t->eb;
    for (int i = 0; i < 2; i++) {
        ep_t e = i ? t->b : t->a;
        if (AM_SetHandler(e, 0, h_returned) || AM_SetHandler(e, 2, h_req4) ||
            AM_SetHandler(e, 3, h_rep1) || AM_SetHandler(e, 4, h_reqm) ||
            AM_SetHandler(e, 5, h_repm) || AM_SetHandler(e, 6, h_reql) ||
            AM_SetHandler(e, 7, h_repl) || AM_SetHandler(e, 8, h_16))
            return -1;
    }
    return 0;
}

static int poll_until(eb_t eb, const int *count, int want)
{
    uint64_t end = tl_now_ms() + 5000;
    while (*count < want && tl_now_ms() < end)
        if (AM_Poll(eb) != AM_OK)
            return -1;
    return *count >= want ? 0 : -1;
}

static void test_local_short(void)
{
    struct two t;
    TCHK(two_up(&t, 11, 22) == 0);
    TAM(AM_Request4(t.a, 0, 2, 1, 2, 3, 4), AM_OK);
    TCHK(poll_until(t.eb, &seen.replies, 1) == 0);
    TCHK(seen.requests == 1 && seen.args[0] == 10);
    TCHK(seen.tag == 22 && seen.src_idx == 0 && seen.dest == t.b);
    TCHK(memcmp(&seen.src, &t.an, sizeof t.an) == 0);
    TCHK(seen.reply_rc == AM_ERR_BAD_ARG && seen.poll_rc == AM_ERR_BAD_ARG); /* from h_rep1 */
    TCHK(seen.reply2_rc == AM_ERR_BAD_ARG && seen.req_rc == AM_ERR_BAD_ARG);
    TCHK(seen.returns == 0);
    TAM(AM_Request16(t.a, 0, 8, 1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15,
                     (int32_t)0x80000000u),
        AM_OK);
    TCHK(poll_until(t.eb, &seen.requests, 2) == 0);
    for (int i = 0; i < 15; i++)
        TCHK(seen.args[i] == (i % 2 ? -(i + 1) : i + 1));
    TCHK(seen.args[15] == INT32_MIN);
    amx_stats_t st;
    TAM(AMX_GetEndpointStatistics(t.a, &st), AM_OK);
    TCHK(st.requests_sent[AM2_SHORT] == 2 && st.replies_received[AM2_SHORT] == 1);
    TAM(AMX_GetEndpointStatistics(t.b, &st), AM_OK);
    TCHK(st.requests_received[AM2_SHORT] == 2 && st.replies_sent[AM2_SHORT] == 1);
    /* printable */
    char text[1024] = {0};
    FILE *f = tmpfile();
    TCHK(f);
    TAM(AMX_DumpStatistics(f, t.a), AM_OK);
    rewind(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    TCHK(got > 0 && strstr(text, "short  requests sent 2 received 0, replies sent 0 received 1"));
    TAM(AMX_DumpStatistics(NULL, t.a), AM_ERR_BAD_ARG);
out:
    while (AM_Terminate() == AM_OK)
        ;
}

static void test_local_medium_long(void)
{
    struct two t;
    static uint8_t sega[1 << 16], segb[1 << 16], src[AM2_MAX_MEDIUM];
    TCHK(two_up(&t, 11, 22) == 0);
    tl_fill(src, sizeof src, 5);
    TAM(AM_RequestI1(t.a, 0, 4, src, AM_MaxMedium(), 41), AM_OK);
    TCHK(poll_until(t.eb, &seen.replies, 1) == 0);
    TCHK(seen.args[0] == 42 && seen.nbytes == AM_MaxMedium());
    for (size_t i = 0; i < sizeof src; i++)
        TCHK(seen.data[i] == src[sizeof src - 1 - i]);
    /* long: into b's segment at 1000, replied into a's at the same offset */
    TAM(AM_SetSeg(t.a, sega, sizeof sega), AM_OK);
    TAM(AM_SetSeg(t.b, segb, sizeof segb), AM_OK);
    TAM(AM_RequestXfer1(t.a, 0, 1000, 6, src, 5000, 1000), AM_OK);
    memset(src, 0, sizeof src); /* the source may be reused at once */
    TCHK(poll_until(t.eb, &seen.replies, 2) == 0);
    TCHK(seen.args[0] == 99 && seen.buf == sega + 1000 && seen.nbytes == 5000);
    TCHK(tl_verify(segb + 1000, 5000, 5) == -1);
    TCHK(tl_verify(sega + 1000, 5000, 5) == -1);
    /* exactly up to the segment's end, and 0 bytes at its end */
    TAM(AM_RequestXfer1(t.a, 0, sizeof segb - 16, 6, sega, 16, (int32_t)(sizeof sega - 16)),
        AM_OK);
    TCHK(poll_until(t.eb, &seen.replies, 3) == 0);
    TAM(AM_RequestXfer1(t.a, 0, sizeof segb, 6, sega, 0, (int32_t)sizeof sega), AM_OK);
    TCHK(poll_until(t.eb, &seen.replies, 4) == 0);
    TCHK(seen.returns == 0);
out:
    while (AM_Terminate() == AM_OK)
        ;
}

/* One request that must come back with `status`, naming the handler and
 * the first argument it was sent with. */
static int expect_return(eb_t eb, int status, op_t opcode, handler_t h, int32_t a0)
{
    int before = seen.returns;
    if (poll_until(eb, &seen.returns, before + 1))
        return -1;
    if (seen.status != status || seen.opcode != opcode || seen.ret_handler != h ||
        seen.ret_args[0] != a0) {
        fprintf(stderr, "\n  returned: status %d opcode %d handler %d a0 %d; expected %d %d %d %d\n",
                seen.status, seen.opcode, seen.ret_handler, seen.ret_args[0], status, opcode, h,
                a0);
        return -1;
    }
    return 0;
}

static void test_local_returns(void)
{
    struct two t;
    static uint8_t segb[4096], src[64];
    TCHK(two_up(&t, 11, 22) == 0);
    /* a tag b does not have */
    TAM(AM_Map(t.a, 1, t.bn, 23), AM_OK);
    TAM(AM_Request4(t.a, 1, 2, 7, 0, 0, 0), AM_OK);
    TCHK(expect_return(t.eb, EBADTAG, AM_REQUEST_M, 2, 7) == 0);
    /* b accepts every tag, but not from a source it has not mapped */
    TAM(AM_SetTag(t.b, AM_ALL), AM_OK);
    TAM(AM_UnMap(t.b, 0), AM_OK);
    TAM(AM_Request4(t.a, 1, 2, 8, 0, 0, 0), AM_OK);
    TCHK(expect_return(t.eb, EBADENTRY, AM_REQUEST_M, 2, 8) == 0);
    TAM(AM_Map(t.b, 5, t.an, 11), AM_OK);
    TAM(AM_Request4(t.a, 1, 2, 9, 0, 0, 0), AM_OK); /* now it goes */
    TCHK(poll_until(t.eb, &seen.replies, 1) == 0);
    TCHK(seen.src_idx == 5);
    /* a handler b has not set, and handler 0 */
    TAM(AM_RequestI1(t.a, 0, 77, src, 10, 10), AM_OK);
    TCHK(expect_return(t.eb, EBADHANDLER, AM_REQUEST_IM, 77, 10) == 0);
    TAM(AM_Request1(t.a, 0, 0, 11), AM_OK);
    TCHK(expect_return(t.eb, EBADHANDLER, AM_REQUEST_M, 0, 11) == 0);
    /* long without a segment, past its start, past its end */
    TAM(AM_RequestXfer1(t.a, 0, 0, 6, src, 8, 12), AM_OK);
    TCHK(expect_return(t.eb, EBADSEGOFF, AM_REQUEST_XFER_M, 6, 12) == 0);
    TAM(AM_SetSeg(t.b, segb, sizeof segb), AM_OK);
    TAM(AM_RequestXfer1(t.a, 0, sizeof segb + 1, 6, src, 0, 13), AM_OK);
    TCHK(expect_return(t.eb, EBADSEGOFF, AM_REQUEST_XFER_M, 6, 13) == 0);
    TAM(AM_RequestXfer1(t.a, 0, sizeof segb - 8, 6, src, 9, 14), AM_OK);
    TCHK(expect_return(t.eb, EBADLENGTH, AM_REQUEST_XFER_M, 6, 14) == 0);
    /* a destination that no longer exists */
    TAM(AM_FreeEndpoint(t.b), AM_OK);
    TAM(AM_Request1(t.a, 0, 2, 15), AM_OK);
    TCHK(expect_return(t.eb, EBADENDPOINT, AM_REQUEST_M, 2, 15) == 0);
    amx_stats_t st;
    TAM(AMX_GetEndpointStatistics(t.a, &st), AM_OK);
    TCHK(st.returned == 8);
out:
    while (AM_Terminate() == AM_OK)
        ;
}

/* AM_WaitSema returns at once when a message is already queued, and
 * resets the mask. */
static void test_local_waitsema(void)
{
    struct two t;
    int mask;
    TCHK(two_up(&t, 11, 22) == 0);
    TAM(AM_SetEventMask(t.eb, AM_NOTEMPTY), AM_OK);
    TAM(AM_Request4(t.a, 0, 2, 1, 1, 1, 1), AM_OK);
    TAM(AM_WaitSema(t.eb), AM_OK);
    TAM(AM_GetEventMask(t.eb, &mask), AM_OK);
    TCHK(mask == AM_NOEVENTS);
    TCHK(poll_until(t.eb, &seen.replies, 1) == 0);
out:
    while (AM_Terminate() == AM_OK)
        ;
}

int main(int argc, char **argv)
{
    static const struct tl_test tests[] = {
        TL_TEST(test_not_init),      TL_TEST(test_settings_refused), TL_TEST(test_bundle_endpoint),
        TL_TEST(test_translation_table), TL_TEST(test_local_short),
        TL_TEST(test_local_medium_long), TL_TEST(test_local_returns),
        TL_TEST(test_local_waitsema), TL_END,
    };
    return tl_main(argc, argv, "am2", tests);
}

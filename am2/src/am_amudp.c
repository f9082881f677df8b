/*
 * am_amudp.c - AMUDP's statistics and error names (amudp.h) over libam2's
 * own counters and error path.
 *
 * An endpoint counts what it sends and receives in its amx_stats_t
 * (am_send.c, am_dispatch.c); AMUDP's record is computed from it when asked:
 * data bytes are 4 per argument plus the payload, total bytes add the
 * wire header each message carries. The record and the sum of records
 * travel between ranks as plain bytes (a program sends its record to rank
 * 0 in a medium message and adds them there), so it holds no pointers.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "am_int.h"
#include "amudp.h"

int AMUDP_SilentMode;
int AMUDP_PoliteSync;

const amudp_stats_t AMUDP_initial_stats = {.RequestMinLatency = (amudp_cputick_t)-1};

int AMUDP_GetEndpointStatistics(ep_t ep, amudp_stats_t *stats)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ep) || !stats)
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint, or NULL result");
    *stats = AMUDP_initial_stats;
    const size_t hdr = sizeof(struct am_wire);
    for (int c = 0; c < amudp_NumCategories; c++) {
        uint64_t req_bytes = ep->st.request_bytes_sent[c];
        uint64_t rep_bytes = ep->st.bytes_sent[c] - req_bytes;
        stats->RequestsSent[c] = ep->st.requests_sent[c];
        stats->RepliesSent[c] = ep->st.replies_sent[c];
        stats->RequestsReceived[c] = ep->st.requests_received[c];
        stats->RepliesReceived[c] = ep->st.replies_received[c];
        stats->RequestDataBytesSent[c] = 4 * ep->st.request_args_sent[c] + req_bytes;
        stats->ReplyDataBytesSent[c] = 4 * ep->st.reply_args_sent[c] + rep_bytes;
        stats->RequestTotalBytesSent[c] = hdr * ep->st.requests_sent[c] + req_bytes;
        stats->ReplyTotalBytesSent[c] = hdr * ep->st.replies_sent[c] + rep_bytes;
        stats->TotalBytesSent += stats->RequestTotalBytesSent[c] + stats->ReplyTotalBytesSent[c];
    }
    stats->ReturnedMessages = ep->st.returned;
    return AM_OK;
}

int AMUDP_ResetEndpointStatistics(ep_t ep)
{
    AM_API_LOCK();
    AM_CHECK_INIT();
    if (!am_ep_ok(ep))
        return am_fail(AM_ERR_BAD_ARG, "not an endpoint");
    memset(&ep->st, 0, sizeof ep->st);
    return AM_OK;
}

static void add(uint64_t *sum, const uint64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        sum[i] += v[i];
}

int AMUDP_AggregateStatistics(amudp_stats_t *runningsum, amudp_stats_t *newvalues)
{
    if (!runningsum || !newvalues)
        return am_fail(AM_ERR_BAD_ARG, "NULL statistics");
    amudp_stats_t *s = runningsum;
    const amudp_stats_t *v = newvalues;
    const int n = amudp_NumCategories;
    add(s->RequestsSent, v->RequestsSent, n);
    add(s->RepliesSent, v->RepliesSent, n);
    add(s->RequestsRetransmitted, v->RequestsRetransmitted, n);
    add(s->RepliesRetransmitted, v->RepliesRetransmitted, n);
    add(s->RequestsReceived, v->RequestsReceived, n);
    add(s->RepliesReceived, v->RepliesReceived, n);
    add(s->RequestDataBytesSent, v->RequestDataBytesSent, n);
    add(s->ReplyDataBytesSent, v->ReplyDataBytesSent, n);
    add(s->RequestTotalBytesSent, v->RequestTotalBytesSent, n);
    add(s->ReplyTotalBytesSent, v->ReplyTotalBytesSent, n);
    s->ReturnedMessages += v->ReturnedMessages;
    s->TotalBytesSent += v->TotalBytesSent;
    if (v->RequestMinLatency < s->RequestMinLatency)
        s->RequestMinLatency = v->RequestMinLatency;
    if (v->RequestMaxLatency > s->RequestMaxLatency)
        s->RequestMaxLatency = v->RequestMaxLatency;
    s->RequestSumLatency += v->RequestSumLatency;
    return AM_OK;
}

/* Appends to a fixed buffer; what does not fit is cut. */
struct text {
    char *buf;
    size_t cap, len;
};

static void say(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct text *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

static uint64_t sum3(const uint64_t *v) { return v[0] + v[1] + v[2]; }

const char *AMUDP_DumpStatistics(void *fp, amudp_stats_t *stats, int globalAnalysis)
{
    static char buf[4096];
    struct text t = {buf, sizeof buf, 0};
    buf[0] = 0;
    if (!stats) {
        am_fail(AM_ERR_BAD_ARG, "NULL statistics");
        return buf;
    }
    const amudp_stats_t *s = stats;
    static const char *const cat[amudp_NumCategories] = {"Short", "Medium", "Long"};
    uint64_t req = sum3(s->RequestsSent), rep = sum3(s->RepliesSent);
    uint64_t rreq = sum3(s->RequestsReceived), rrep = sum3(s->RepliesReceived);
    uint64_t data = sum3(s->RequestDataBytesSent) + sum3(s->ReplyDataBytesSent);
    say(&t, "Requests: %llu sent, %llu retransmitted, %llu received\n", (unsigned long long)req,
        (unsigned long long)sum3(s->RequestsRetransmitted), (unsigned long long)rreq);
    say(&t, "Replies:  %llu sent, %llu retransmitted, %llu received\n", (unsigned long long)rep,
        (unsigned long long)sum3(s->RepliesRetransmitted), (unsigned long long)rrep);
    say(&t, "Returned messages: %llu\n", (unsigned long long)s->ReturnedMessages);
    for (int c = 0; c < amudp_NumCategories; c++)
        say(&t, "  %-6s requests %llu/%llu replies %llu/%llu (sent/received), "
                "data bytes %llu/%llu (requests/replies)\n",
            cat[c], (unsigned long long)s->RequestsSent[c],
            (unsigned long long)s->RequestsReceived[c], (unsigned long long)s->RepliesSent[c],
            (unsigned long long)s->RepliesReceived[c],
            (unsigned long long)s->RequestDataBytesSent[c],
            (unsigned long long)s->ReplyDataBytesSent[c]);
    if (s->RequestMaxLatency > 0 && req)
        say(&t, "Request latency (ticks): min %llu max %llu mean %.1f\n",
            (unsigned long long)s->RequestMinLatency, (unsigned long long)s->RequestMaxLatency,
            (double)s->RequestSumLatency / (double)req);
    say(&t, "Data bytes sent: %llu; total bytes sent (with headers): %llu",
        (unsigned long long)data,
        (unsigned long long)s->TotalBytesSent);
    if (req + rep)
        say(&t, " (%.1f bytes a message, of which %.1f data)",
            (double)s->TotalBytesSent / (double)(req + rep), (double)data / (double)(req + rep));
    say(&t, "\n");
    if (globalAnalysis) {
        /* Over every rank each message sent is received once, or returned. */
        long long lost = (long long)(req + rep) - (long long)(rreq + rrep) -
                         (long long)s->ReturnedMessages;
        say(&t, "Messages sent and not received or returned: %lld%s\n", lost,
            lost ? " (some still in flight when the records were taken)" : "");
    }
    if (fp) {
        fputs(buf, (FILE *)fp);
        fflush((FILE *)fp);
    }
    return buf;
}

void AMUDP_FatalErr(const char *msg, ...)
{
    va_list ap;
    va_start(ap, msg);
    fflush(stdout);
    fputs("*** FATAL ERROR: ", stderr);
    vfprintf(stderr, msg, ap);
    fputc('\n', stderr);
    fflush(stderr);
    va_end(ap);
    abort();
}

int AMUDP_enEqual(en_t a, en_t b) { return memcmp(&a, &b, sizeof a) == 0; }

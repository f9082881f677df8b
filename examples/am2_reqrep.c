/*
 * am2_reqrep.c - Active Messages: a request runs a handler at the other
 * rank, whose reply runs a handler back here.
 *
 *   amrun -np 2 build/examples/am2_reqrep
 *
 * An active message names a handler (an index into the receiver's table
 * of functions) and carries a few 32-bit arguments (short), a buffer the
 * handler gets (medium: up to AM_MaxMedium() bytes), or data placed in
 * the receiver's segment before the handler runs (long). Handlers run
 * inside AM_Poll. A request's handler may answer with one reply; nothing
 * else waits, so nothing blocks. The SPMD layer (am2_spmd.h) starts the
 * job: every rank gets a bundle (the queue it polls) and an endpoint
 * whose translation table names every rank by its number.
 */
#include <stdio.h>
#include <string.h>

#include <am2_spmd.h>

enum { H_ADD = 1, H_SUM, H_UPPER, H_UPPERED }; /* our handler indices */

static volatile int answers;
static int32_t last_sum;
static char last_text[64];

/* At rank 1: add the two arguments and reply with the sum. */
static void add_handler(void *token, int32_t a, int32_t b)
{
    AM_Reply1(token, H_SUM, a + b);
}

/* Back at rank 0: the reply's handler. */
static void sum_handler(void *token, int32_t sum)
{
    (void)token;
    last_sum = sum;
    answers++;
}

/* A medium request: the handler gets the bytes where they landed (valid
 * until it returns) and replies with a medium message of its own. */
static void upper_handler(void *token, void *buf, size_t n)
{
    char out[64];
    size_t k = n < sizeof out ? n : sizeof out;
    for (size_t i = 0; i < k; i++) {
        char c = ((char *)buf)[i];
        out[i] = c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
    }
    AM_ReplyI0(token, H_UPPERED, out, k);
}

static void uppered_handler(void *token, void *buf, size_t n)
{
    (void)token;
    memcpy(last_text, buf, n < sizeof last_text ? n : sizeof last_text - 1);
    answers++;
}

/* Poll (running handlers) until `want` answers have come. */
static void wait_answers(eb_t eb, int want)
{
    while (answers < want)
        if (AM_Poll(eb) != AM_OK) {
            fprintf(stderr, "am2_reqrep: AM_Poll: %s\n", AMX_LastError());
            am2_spmd_exit(1);
        }
}

int main(int argc, char **argv)
{
    eb_t eb;
    ep_t ep;
    if (am2_spmd_startup(&argc, &argv, &eb, &ep) != AM_OK) {
        fprintf(stderr, "am2_reqrep: start-up: %s\n", AMX_LastError());
        return 1;
    }
    if (am2_spmd_nranks() != 2) {
        fprintf(stderr, "am2_reqrep: run it as amrun -np 2 am2_reqrep\n");
        am2_spmd_exit(2);
    }
    AM_SetHandler(ep, H_ADD, add_handler);
    AM_SetHandler(ep, H_SUM, sum_handler);
    AM_SetHandler(ep, H_UPPER, upper_handler);
    AM_SetHandler(ep, H_UPPERED, uppered_handler);
    am2_spmd_barrier(); /* every rank's handlers are set before anyone sends */

    int code = 0;
    if (am2_spmd_rank() == 0) {
        for (int i = 0; i < 1000; i++) { /* rank 1 is translation-table entry 1 */
            AM_Request2(ep, 1, H_ADD, i, 2 * i);
            wait_answers(eb, i + 1);
            if (last_sum != 3 * i)
                code = 1;
        }
        char text[] = "active messages";
        AM_RequestI0(ep, 1, H_UPPER, text, sizeof text);
        wait_answers(eb, 1001);
        printf("am2_reqrep: 1000 sums %s; \"%s\" came back as \"%s\"\n",
               code ? "WRONG" : "right", text, last_text);
        if (strcmp(last_text, "ACTIVE MESSAGES"))
            code = 1;
        am2_spmd_exit(code); /* ends the job: rank 1 leaves too, with this code */
    }
    am2_spmd_barrier(); /* rank 1 serves the requests while it waits here */
    return 1;           /* not reached: rank 0's exit ends rank 1 in its poll */
}

/*
 * test_examples.c - the programs of examples/ run as the README says:
 * each with no argument (both sides in one command), and pingpong and
 * stream also as two commands, a server and a client started apart (the
 * client first: it retries while no server waits). am2_reqrep runs under
 * amrun, through shared memory and (make test's AM2_SHM=0 pass) through
 * the NIC. Each must end with status 0 and print its result line.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/tlib.h"
#include "lib/trun.h"

static char exdir[PATH_MAX + 16], amrun[PATH_MAX + 32];
static char out[16384];

static char *example(const char *name)
{
    static char path[4][PATH_MAX + 64];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", exdir, name);
    return p;
}

static void one(const char *name, const char *result)
{
    char *argv[] = {example(name), NULL};
    TCHK(tr_run(argv, out, sizeof out, 60000) == 0);
    TCHK(tr_lines(out, result) == 1);
out:;
}

static void test_pingpong(void) { one("pingpong", "pingpong: 1000 round trips of 64 bytes"); }
static void test_stream(void) { one("stream", "stream: 20000 messages of 4096 bytes"); }
static void test_rdma_write(void) { one("rdma_write", "rdma_write: 20 writes of 1048576 bytes"); }

/* The server of a two-command run, in a thread of ours (tr_run waits). */
struct server_run {
    const char *name;
    int rc;
    char out[4096];
};

static void *run_server(void *arg)
{
    struct server_run *s = arg;
    char *argv[] = {example(s->name), "server", NULL};
    s->rc = tr_run(argv, s->out, sizeof s->out, 60000);
    return NULL;
}

static void two_commands(const char *name, const char *result)
{
    struct server_run s = {.name = name, .rc = -9};
    pthread_t t;
    char *argv[] = {example(name), "client", "localhost", NULL};
    int client = -9;
    if (pthread_create(&t, NULL, run_server, &s) == 0) {
        client = tr_run(argv, out, sizeof out, 60000);
        pthread_join(t, NULL);
    }
    CU_ASSERT(client == 0 && s.rc == 0);
    CU_ASSERT(tr_lines(out, result) == 1);
}

static void test_pingpong_two_commands(void)
{
    two_commands("pingpong", "pingpong: 1000 round trips of 64 bytes");
}

static void test_stream_two_commands(void)
{
    two_commands("stream", "stream: 20000 messages of 4096 bytes");
}

static void test_am2_reqrep(void)
{
    char *argv[] = {amrun, "-np", "2", "-t", "50", example("am2_reqrep"), NULL};
    setenv("AM2_NIC", tl_dev("via0"), 1);
    TCHK(tr_run(argv, out, sizeof out, 60000) == 0);
    TCHK(tr_lines(out, "am2_reqrep: 1000 sums right; \"active messages\" came back as "
                       "\"ACTIVE MESSAGES\"") == 1);
out:;
}

int main(int argc, char **argv)
{
    char dir[PATH_MAX];
    if (tl_bindir(dir, sizeof dir))
        return 2;
    snprintf(exdir, sizeof exdir, "%s/../examples", dir);
    snprintf(amrun, sizeof amrun, "%s/../bin/amrun", dir);
    static const struct tl_test tests[] = {TL_TEST(test_pingpong),
                                           TL_TEST(test_pingpong_two_commands),
                                           TL_TEST(test_stream),
                                           TL_TEST(test_stream_two_commands),
                                           TL_TEST(test_rdma_write),
                                           TL_TEST(test_am2_reqrep),
                                           TL_END};
    return tl_main(argc, argv, "examples", tests);
}

/*
 * vip_reg_cost - what a VipRegisterMem + VipDeregisterMem pair of one user
 * buffer costs, beside a plain system call (bench/run_reg.sh).
 *
 * Registers and deregisters the same SIZE-byte buffer ITERS times, as a
 * message-passing library does around each message, and prints the median
 * of batches of 100 pairs, per pair; then the same for getppid(), the
 * cheapest system call. With VIP_RCACHE=0 every pair is two round trips
 * to vipd; by default the library's registration cache reopens the kept
 * registration (spec-notes/memory-registration.md).
 *
 * usage: vip_reg_cost [SIZE [ITERS]]   (defaults 65536, 20000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vipl.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 65536;
    unsigned iters = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 20000;
    if (size == 0 || iters < 100) {
        fprintf(stderr, "usage: vip_reg_cost [SIZE [ITERS >= 100]]\n");
        return 2;
    }
    VIP_NIC_HANDLE nic;
    VIP_PROTECTION_HANDLE ptag;
    if (VipOpenNic((VIP_CHAR *)"via0", &nic) != VIP_SUCCESS || VipCreatePtag(nic, &ptag) != VIP_SUCCESS) {
        fprintf(stderr, "vip_reg_cost: cannot open via0 (is vipd reachable?)\n");
        return 1;
    }
    char *buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
    memset(buf, 1, size);
    unsigned batches = iters / 100;
    double *reg = calloc(batches, sizeof *reg), *sys = calloc(batches, sizeof *sys);
    VIP_MEM_ATTRIBUTES ma = {.Ptag = ptag};
    for (unsigned b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (unsigned i = 0; i < 100; i++) {
            VIP_MEM_HANDLE h;
            if (VipRegisterMem(nic, buf, size, &ma, &h) != VIP_SUCCESS ||
                VipDeregisterMem(nic, buf, h) != VIP_SUCCESS) {
                fprintf(stderr, "vip_reg_cost: a registration failed\n");
                return 1;
            }
        }
        reg[b] = (now_ns() - t0) / 100;
        t0 = now_ns();
        for (unsigned i = 0; i < 100; i++)
            (void)getppid();
        sys[b] = (now_ns() - t0) / 100;
    }
    qsort(reg, batches, sizeof *reg, cmp);
    qsort(sys, batches, sizeof *sys, cmp);
    const char *rc = getenv("VIP_RCACHE");
    printf("%zu %.3f %.3f %s\n", size, reg[batches / 2] / 1000, sys[batches / 2] / 1000,
           rc && !strcmp(rc, "0") ? "no-cache" : "cache");
    VipDestroyPtag(nic, ptag); /* gives back what the cache keeps */
    VipCloseNic(nic);
    free(buf);
    free(reg);
    free(sys);
    return 0;
}

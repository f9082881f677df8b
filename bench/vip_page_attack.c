/*
 * vip_page_attack - a neighbour on a paced NIC that writes the NIC page
 * (bench/run_hostile.sh measures what it does to another process's
 * ping-pong; tests/test_hostile_nicpage.c holds the bound).
 *
 * It opens a NIC as any VIPL program does, finds the NIC page among its
 * own mappings (vipd's memfd "via-nic") and, until killed:
 *   spin      reads the page in a loop (a CPU hog that touches the line)
 *   forge     writes every modelled resource busy an hour ahead
 *   forge-vi  the same, with one VI of its own created first (the NIC then
 *             believes one largest transaction of it: the model's worst case)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "via_abi.h"
#include "vipl.h"

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static struct via_nic_page *nic_page(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long lo = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "via-nic") && sscanf(line, "%lx", &lo) == 1)
            break;
    if (f)
        fclose(f);
    return (struct via_nic_page *)lo;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "forge", *dev = argc > 2 ? argv[2] : "via0";
    bool spin = !strcmp(mode, "spin"), vi = !strcmp(mode, "forge-vi");
    if (!spin && !vi && strcmp(mode, "forge")) {
        fprintf(stderr, "usage: vip_page_attack spin|forge|forge-vi [NIC]\n");
        return 2;
    }
    VIP_NIC_HANDLE nic;
    if (VipOpenNic((VIP_CHAR *)dev, &nic) != VIP_SUCCESS) {
        fprintf(stderr, "vip_page_attack: cannot open %s\n", dev);
        return 1;
    }
    if (vi) {
        VIP_PROTECTION_HANDLE pt;
        VIP_VI_HANDLE h;
        VIP_VI_ATTRIBUTES a = {.ReliabilityLevel = VIP_SERVICE_RELIABLE_DELIVERY,
                               .MaxTransferSize = 32768};
        if (VipCreatePtag(nic, &pt) != VIP_SUCCESS)
            return 1;
        a.Ptag = pt;
        if (VipCreateVi(nic, &a, NULL, NULL, &h) != VIP_SUCCESS)
            return 1;
    }
    struct via_nic_page *np = nic_page();
    if (!np) {
        fprintf(stderr, "vip_page_attack: no NIC page among this process's mappings\n");
        return 1;
    }
    for (uint64_t sink = 0;;) {
        if (spin) {
            sink += atomic_load_explicit(&np->lanai_busy_until, memory_order_relaxed);
            continue;
        }
        uint64_t far = now_ns() + 3600000000000ull;
        atomic_store(&np->lanai_busy_until, far);
        atomic_store(&np->nrecv_busy_until, far);
        atomic_store(&np->hdma_busy_until, far);
    }
}

/*
 * fw_fault_spec.c - the fault injection spec, "drop=0.1,dup=0.05,...", as
 * vipd --faults and VIP_FAULTS give it (fw_net.h). Its own file: vipd
 * parses it too, and links nothing else of the firmware's link.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_net.h"
#include "nic.h" /* fw_fault_parse is declared there, for vipd */

bool fw_fault_parse(const char *spec, struct via_net_faults *out, char *why, unsigned cap)
{
    struct via_net_faults r = {0};
    char buf[256];
    if (strlen(spec) >= sizeof buf) {
        snprintf(why, cap, "fault spec longer than %zu bytes", sizeof buf - 1);
        return false;
    }
    strcpy(buf, spec);
    char *save = NULL;
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(w, '=');
        if (!eq) {
            snprintf(why, cap, "'%.30s': want name=value", w);
            return false;
        }
        *eq = 0;
        char *end;
        double v = strtod(eq + 1, &end);
        if (end == eq + 1 || *end || v < 0) {
            snprintf(why, cap, "%.20s=%.20s: not a number >= 0", w, eq + 1);
            return false;
        }
        if (strcmp(w, "delay_ms") == 0 || strcmp(w, "seed") == 0) {
            if (v > 65535) {
                snprintf(why, cap, "%s=%g: at most 65535", w, v);
                return false;
            }
            if (w[0] == 'd')
                r.delay_ms = (uint16_t)v;
            else
                r.seed = (uint32_t)v;
            continue;
        }
        if (v > 1) {
            snprintf(why, cap, "%s=%g: a rate is between 0 and 1", w, v);
            return false;
        }
        uint16_t rate = (uint16_t)(v >= 1 ? 65535 : v * 65536.0);
        if (strcmp(w, "drop") == 0)
            r.drop = rate;
        else if (strcmp(w, "dup") == 0)
            r.dup = rate;
        else if (strcmp(w, "reorder") == 0)
            r.reorder = rate;
        else if (strcmp(w, "corrupt") == 0)
            r.corrupt = rate;
        else if (strcmp(w, "delay") == 0)
            r.delay = rate;
        else {
            snprintf(why, cap, "'%.20s': not one of drop, dup, reorder, corrupt, delay, "
                               "delay_ms, seed", w);
            return false;
        }
    }
    *out = r;
    return true;
}

/*
 * vipl_env.c - the settings a program passes in its environment, checked
 * where it opens a NIC: a value the code would not understand is refused
 * (with the valid ones named), never read as the default in silence; and
 * VIP_PROFILE / VIPD_NICS, which say what an autostarted vipd should be,
 * must agree with the vipd that answers (one started earlier, or by
 * someone else, may run otherwise: an idle autostarted vipd stays 60 s).
 *
 * Each component reads its own variables where it needs them; this file
 * only decides, once per VipOpenNic, whether the values are ones they
 * understand. `vipctl env` lists every variable with its meaning.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vipl_int.h"

enum env_kind { ENV_WORDS, ENV_NUMBER };

/* The enumerated and numeric variables, with the words (as the code
 * that reads each compares them: VIP_EXT_MODE without case) or the range
 * [min, max] they take. (VIP_CLOCK: vipl_nic.c's clock_agrees.) */
static const struct env_rule {
    const char *name;
    enum env_kind kind;
    const char *words; /* ENV_WORDS: the valid values, '|' between */
    bool nocase;
    unsigned long min, max;
} env_rules[] = {
    {"VIP_EXT_MODE", ENV_WORDS, "standard|descriptorless|merged", true, 0, 0},
    {"VIP_VT_HOLD", ENV_WORDS, "adapt|sleep|yield", false, 0, 0},
    {"VIP_PROGRESS", ENV_WORDS, "thread|manual", false, 0, 0},
    {"VIP_RCACHE", ENV_WORDS, "0|1", false, 0, 0},
    {"VIP_CMA", ENV_WORDS, "0|1", false, 0, 0},
    {"VIPD_AUTOSTART", ENV_WORDS, "0|1", false, 0, 0},
    {"VIP_EXT_MAX", ENV_NUMBER, NULL, false, 0, 1u << 20},
    {"VIP_WAIT_SPIN_US", ENV_NUMBER, NULL, false, 0, 10000000ul},
    {"VIPD_NICS", ENV_NUMBER, NULL, false, 1, VIA_MAX_NICS},
    {"VIPD_IDLE_EXIT", ENV_NUMBER, NULL, false, 0, 86400ul * 365},
};

static bool word_ok(const char *v, const char *words, bool nocase)
{
    size_t n = strlen(v);
    for (const char *w = words; *w;) {
        size_t l = strcspn(w, "|");
        if (l == n && !(nocase ? strncasecmp(w, v, n) : strncmp(w, v, n)))
            return true;
        w += l + (w[l] == '|');
    }
    return false;
}

static bool number_ok(const char *v, unsigned long min, unsigned long max)
{
    if (!isdigit((unsigned char)*v))
        return false;
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    return !*end && x >= min && x <= max;
}

VIP_RETURN vipl_env_check(void)
{
    for (size_t i = 0; i < sizeof env_rules / sizeof env_rules[0]; i++) {
        const struct env_rule *r = &env_rules[i];
        const char *v = getenv(r->name);
        if (!v || !*v)
            continue;
        if (r->kind == ENV_WORDS && !word_ok(v, r->words, r->nocase)) {
            char valid[96];
            snprintf(valid, sizeof valid, "%s", r->words);
            for (char *c = valid; *c; c++)
                if (*c == '|')
                    *c = ',';
            return vipl_fail(VIP_INVALID_PARAMETER, "%s=%s: not a value it takes (one of: %s)",
                             r->name, v, valid);
        }
        if (r->kind == ENV_NUMBER && !number_ok(v, r->min, r->max))
            return vipl_fail(VIP_INVALID_PARAMETER, "%s=%s: not a number from %lu to %lu",
                             r->name, v, r->min, r->max);
    }
    return VIP_SUCCESS;
}

/* The name a profile setting means: "sbus", "/x/sbus.conf" -> "sbus". */
static size_t profile_name(const char *v, const char **start)
{
    const char *slash = strrchr(v, '/');
    *start = slash ? slash + 1 : v;
    size_t n = strlen(*start);
    if (n > 5 && !strcasecmp(*start + n - 5, ".conf"))
        n -= 5;
    return n;
}

VIP_RETURN vipl_env_agrees(const char *sock_path, unsigned nic, const char *profile,
                           unsigned nnics, const char *hosts)
{
    const char *want = getenv("VIP_PROFILE");
    const char *way_out = "an idle autostarted vipd stays 60 s after its last program; stop "
                          "it with 'vipctl -s %s shutdown', or give this program a vipd of "
                          "its own with VIPD_SOCKET=PATH";
    char out[300];
    snprintf(out, sizeof out, way_out, sock_path);
    if (want && *want) {
        const char *w;
        size_t n = profile_name(want, &w);
        if (strlen(profile) != n || strncasecmp(w, profile, n))
            return vipl_fail(VIP_INVALID_PARAMETER,
                             "VIP_PROFILE=%s, but via%u of the vipd at %s runs the '%s' "
                             "profile (%s)", want, nic, sock_path, profile, out);
    }
    const char *nics = getenv("VIPD_NICS");
    if (nics && *nics && strtoul(nics, NULL, 10) != nnics)
        return vipl_fail(VIP_INVALID_PARAMETER,
                         "VIPD_NICS=%s, but the vipd at %s has %u NIC%s (%s)", nics, sock_path,
                         nnics, nnics == 1 ? "" : "s", out);
    const char *want_hosts = getenv("VIPD_HOSTS");
    if (want_hosts && *want_hosts) {
        char real[PATH_MAX];
        const char *path = realpath(want_hosts, real) ? real : want_hosts;
        /* compared as far as vipd's own, cut to fit HELLO */
        if (strncmp(path, hosts, sizeof ((struct via_ctl_hello_r *)0)->hosts - 1))
            return vipl_fail(VIP_INVALID_PARAMETER,
                             "VIPD_HOSTS=%s, but the vipd at %s %s%s (%s)", want_hosts,
                             sock_path, hosts[0] ? "reads " : "reads no hosts file", hosts, out);
    }
    return VIP_SUCCESS;
}

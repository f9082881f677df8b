/*
 * fw_profile.c - reading a hardware profile.
 *
 * One parameter a line: `name value unit  # where the figure comes from`.
 * Every parameter of the table below must appear exactly once with its
 * unit; anything else is refused with a message naming the file and line,
 * because a silently ignored typo would quietly change what is modelled.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fw_model.h"

enum conv {
    CV_PLAIN,       /* stored as given */
    CV_LANAI_CYC,   /* cycles of the LANai clock -> ns */
    CV_HOST_CYC,    /* cycles of the host clock -> ns */
    CV_MBPS,        /* Mbit/s -> ns per byte */
    CV_KIB,         /* KiB -> bytes */
};

struct param {
    const char *name;
    const char *unit;
    enum conv conv;
    size_t off;     /* offset in struct via_profile, or SIZE_MAX for inputs only */
    /* Sane range: 0 or [lo, hi]. The bounds keep every stage cost of the
     * largest message a finite count of ns that fits the scheduler's
     * uint64_t (a clock of 1e-300 MHz would make a cycle last forever). */
    double lo, hi;
};

#define F(field) offsetof(struct via_profile, field)
#define INPUT SIZE_MAX
/* Order matters: clocks come first so cycles can be converted after parsing. */
static const struct param params[] = {
    {"paced", "bool", CV_PLAIN, INPUT, 0, 1},
    {"hw_doorbell", "bool", CV_PLAIN, INPUT, 0, 1},
    {"lanai_clock", "MHz", CV_PLAIN, F(lanai_mhz), 1, 1e6},
    {"host_clock", "MHz", CV_PLAIN, INPUT, 1, 1e6},
    {"host_build", "host-cycles", CV_HOST_CYC, F(host_build_ns), 0, 1e6},
    {"pio_write", "ns/word", CV_PLAIN, F(pio_write_ns), 0, 1e6},
    {"pio_read", "ns/word", CV_PLAIN, F(pio_read_ns), 0, 1e6},
    {"fw_poll", "cycles", CV_LANAI_CYC, F(poll_ns), 0, 1e6},
    {"fw_bell", "cycles", CV_LANAI_CYC, F(bell_ns), 0, 1e6},
    {"fw_desc", "cycles", CV_LANAI_CYC, F(desc_ns), 0, 1e6},
    {"fw_data", "cycles", CV_LANAI_CYC, F(data_ns), 0, 1e6},
    {"fw_xmit", "cycles", CV_LANAI_CYC, F(xmit_ns), 0, 1e6},
    {"fw_recv", "cycles", CV_LANAI_CYC, F(recv_ns), 0, 1e6},
    {"fw_updt", "cycles", CV_LANAI_CYC, F(updt_ns), 0, 1e6},
    {"dma_setup", "ns", CV_PLAIN, F(dma_setup_ns), 0, 1e9},
    {"dma_h2n", "Mbit/s", CV_MBPS, F(h2n_ns_per_byte), 0.001, 1e9},
    {"dma_n2h", "Mbit/s", CV_MBPS, F(n2h_ns_per_byte), 0.001, 1e9},
    {"link", "Mbit/s", CV_MBPS, F(link_ns_per_byte), 0.001, 1e9},
    {"switch_latency", "ns", CV_PLAIN, F(switch_ns), 0, 1e9},
    {"wire_header", "bytes", CV_PLAIN, F(wire_header), 0, 1e6},
    {"sram", "KiB", CV_KIB, F(sram_bytes), 0, 1e9},
};
#define NPARAMS (sizeof params / sizeof params[0])

const char *const fw_ext_mode_name[FW_EXT_NMODES] = {
    [FW_EXT_STANDARD] = "standard",
    [FW_EXT_DESCLESS] = "descriptorless",
    [FW_EXT_MERGED] = "merged",
};

static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

int fw_profile_parse(const char *text, const char *fname, struct via_profile *out, char *err,
                     size_t errlen)
{
    double val[NPARAMS];
    int seen[NPARAMS] = {0};
    const char *line = text;
    for (unsigned ln = 1; line && *line; ln++) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[512];
        if (len >= sizeof buf)
            return fail(err, errlen, "%s:%u: line too long", fname, ln);
        memcpy(buf, line, len);
        buf[len] = 0;
        line = nl ? nl + 1 : NULL;
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = 0;
        char name[64], value[64], unit[64], extra[8];
        int n = sscanf(buf, "%63s %63s %63s %7s", name, value, unit, extra);
        if (n <= 0)
            continue; /* blank or comment */
        if (n < 3)
            return fail(err, errlen, "%s:%u: expected 'name value unit', got '%s'", fname, ln,
                        buf);
        if (n > 3)
            return fail(err, errlen, "%s:%u: text after the unit of '%s' (comments start "
                                     "with #)", fname, ln, name);
        unsigned i;
        for (i = 0; i < NPARAMS && strcmp(params[i].name, name); i++)
            ;
        if (i == NPARAMS)
            return fail(err, errlen, "%s:%u: unknown parameter '%s'", fname, ln, name);
        if (seen[i])
            return fail(err, errlen, "%s:%u: '%s' given twice (first on line %d)", fname, ln,
                        name, seen[i]);
        if (strcmp(unit, params[i].unit))
            return fail(err, errlen, "%s:%u: '%s' is in %s, not '%s'", fname, ln, name,
                        params[i].unit, unit);
        char *end;
        errno = 0;
        double v = strtod(value, &end);
        if (*end || errno || !isfinite(v) || v < 0)
            return fail(err, errlen, "%s:%u: '%s' has malformed value '%s' (a number >= 0)",
                        fname, ln, name, value);
        if (!strcmp(params[i].unit, "bool") && v != 0 && v != 1)
            return fail(err, errlen, "%s:%u: '%s' is 0 or 1, not '%s'", fname, ln, name, value);
        if (v != 0 && (v < params[i].lo || v > params[i].hi))
            return fail(err, errlen, "%s:%u: '%s' = %s %s is out of range (0 or %g..%g)", fname,
                        ln, name, value, unit, params[i].lo, params[i].hi);
        val[i] = v;
        seen[i] = (int)ln;
    }
    for (unsigned i = 0; i < NPARAMS; i++)
        if (!seen[i])
            return fail(err, errlen, "%s: missing parameter '%s' (%s)", fname, params[i].name,
                        params[i].unit);

    memset(out, 0, sizeof *out);
    double lanai = val[2], host = val[3];
    out->paced = val[0] != 0;
    out->hw_doorbell = val[1] != 0;
    for (unsigned i = 0; i < NPARAMS; i++) {
        if (params[i].off == INPUT)
            continue;
        double v = val[i];
        switch (params[i].conv) {
        case CV_PLAIN: break;
        case CV_KIB: v *= 1024; break;
        case CV_MBPS:
            if (v == 0)
                return fail(err, errlen, "%s:%d: '%s' cannot be 0 Mbit/s", fname, seen[i],
                            params[i].name);
            v = 8000.0 / v; /* bits per microsecond -> ns per byte */
            if (!out->paced)
                v = 0;
            break;
        case CV_LANAI_CYC:
        case CV_HOST_CYC: {
            double mhz = params[i].conv == CV_LANAI_CYC ? lanai : host;
            if (v > 0 && mhz == 0)
                return fail(err, errlen, "%s:%d: '%s' counts cycles but the clock is 0 MHz",
                            fname, seen[i], params[i].name);
            v = v > 0 ? v * 1000.0 / mhz : 0;
            break;
        }
        }
        *(double *)((char *)out + params[i].off) = v;
    }
    return 0;
}

int fw_profile_load(const char *name, const char *dir, struct via_profile *out, char *err,
                    size_t errlen)
{
    char path[1024];
    if (strchr(name, '/'))
        snprintf(path, sizeof path, "%s", name);
    else
        snprintf(path, sizeof path, "%s/%s.conf", dir ? dir : ".", name);
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, errlen, "cannot read profile %s: %s", path, strerror(errno));
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, f);
    int toolong = !feof(f);
    fclose(f);
    if (toolong)
        return fail(err, errlen, "profile %s is larger than %zu bytes", path, sizeof text - 1);
    text[n] = 0;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (fw_profile_parse(text, base, out, err, errlen) < 0)
        return -1;
    /* The profile's name is its file name without .conf. */
    snprintf(out->name, sizeof out->name, "%.*s", (int)(strcspn(base, ".")), base);
    return 0;
}

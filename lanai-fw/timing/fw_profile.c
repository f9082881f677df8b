/*
 * fw_profile.c - reading a hardware profile.
 *
 * One parameter a line: `name value unit  # [source] where it comes from`.
 * Every parameter of the table below must appear exactly once with its
 * unit and its source; anything else is refused with a message naming the
 * file and line, because a silently ignored typo would quietly change what
 * is modelled, and a figure without a source cannot be argued with.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fw_model.h"

enum conv {
    CV_PLAIN,       /* stored as given */
    CV_LANAI_CYC,   /* cycles of the LANai clock -> ns */
    CV_LANAI_INSTR, /* firmware instructions -> ns (lanai_cpi cycles each) */
    CV_HOST_INSTR,  /* host instructions -> ns (host_cpi cycles each) */
    CV_MBPS,        /* Mbit/s -> ns per byte */
    CV_KIB,         /* KiB -> bytes */
};

struct param {
    const char *name;
    const char *unit;
    enum conv conv;
    size_t off;     /* offset in struct via_profile, or INPUT for inputs only */
    /* Sane range: 0 or [lo, hi]. The bounds keep every stage cost of the
     * largest message a finite count of ns that fits the scheduler's
     * uint64_t (a clock of 1e-300 MHz would make a cycle last forever). */
    double lo, hi;
};

#define F(field) offsetof(struct via_profile, field)
#define INPUT SIZE_MAX
static const struct param params[] = {
    {"paced", "bool", CV_PLAIN, INPUT, 0, 1},
    {"hw_doorbell", "bool", CV_PLAIN, INPUT, 0, 1},
    {"lanai_clock", "MHz", CV_PLAIN, F(lanai_mhz), 1, 1e6},
    {"host_clock", "MHz", CV_PLAIN, F(host_mhz), 1, 1e6},
    {"host_cpi", "cycles/instr", CV_PLAIN, INPUT, 0.01, 100},
    {"host_post", "host-instr", CV_HOST_INSTR, INPUT, 0, 1e6},
    {"host_done", "host-instr", CV_HOST_INSTR, INPUT, 0, 1e6},
    {"host_lock", "host-cycles", CV_PLAIN, INPUT, 0, 1e6},
    {"mem_latency", "ns", CV_PLAIN, F(mem_ns), 0, 1e6},
    {"pio_write", "ns/word", CV_PLAIN, F(pio_write_ns), 0, 1e6},
    {"pio_read", "ns/word", CV_PLAIN, F(pio_read_ns), 0, 1e6},
    {"fw_poll", "cycles", CV_LANAI_CYC, F(poll_ns), 0, 1e6},
    {"fw_poll_instr", "lanai-instr", CV_PLAIN, INPUT, 0, 1e6},
    {"fw_bell", "lanai-instr", CV_LANAI_INSTR, F(bell_ns), 0, 1e5},
    {"fw_desc", "lanai-instr", CV_LANAI_INSTR, F(desc_ns), 0, 1e5},
    {"fw_data", "lanai-instr", CV_LANAI_INSTR, F(data_ns), 0, 1e5},
    {"fw_xmit", "lanai-instr", CV_LANAI_INSTR, F(xmit_ns), 0, 1e5},
    {"fw_recv", "lanai-instr", CV_LANAI_INSTR, F(recv_ns), 0, 1e5},
    {"fw_updt", "lanai-instr", CV_LANAI_INSTR, F(updt_ns), 0, 1e5},
    {"fw_ext_bell", "lanai-instr", CV_LANAI_INSTR, F(ext_bell_ns), 0, 1e5},
    {"fw_ext_poll", "lanai-instr", CV_LANAI_INSTR, F(ext_poll_ns), 0, 1e5},
    {"dma_start_h2n", "ns", CV_PLAIN, F(dma_h2n_start_ns), 0, 1e9},
    {"dma_start_n2h", "ns", CV_PLAIN, F(dma_n2h_start_ns), 0, 1e9},
    {"dma_copyback", "ns", CV_PLAIN, F(copyback_ns), 0, 1e9},
    {"dma_h2n", "Mbit/s", CV_MBPS, F(h2n_ns_per_byte), 0.001, 1e9},
    {"dma_n2h", "Mbit/s", CV_MBPS, F(n2h_ns_per_byte), 0.001, 1e9},
    {"link", "Mbit/s", CV_MBPS, F(link_ns_per_byte), 0.001, 1e9},
    {"switch_latency", "ns", CV_PLAIN, F(switch_ns), 0, 1e9},
    {"wire_header", "bytes", CV_PLAIN, F(wire_header), 0, 1e6},
    {"sram", "KiB", CV_KIB, F(sram_bytes), 0, 1e9},
    {"host_cpu_scale", "factor", CV_PLAIN, F(host_cpu_scale), 0.001, 1000},
};
#define NPARAMS (sizeof params / sizeof params[0])

/* Where a figure comes from: every parameter line names one (the comment
 * after the unit starts with it), so a number without a source is refused
 * like a number without a unit. spec-notes/timing-model.md says what each
 * means; [estimate] and [derived] lines give their arithmetic there. */
const char *const fw_profile_sources[] = {
    "paper",    /* the Berkeley VIA paper (Buonadonna, Geweke, Culler) */
    "AM-II",    /* Chun, Mainwaring, Culler: AM-II on Myrinet */
    "MU-Net",   /* MU-Net: protected multi-user Myrinet */
    "Clumps",   /* Lumetta, Mainwaring, Culler: multi-protocol AM on Clumps */
    "measured", /* measured here, the command named in timing-model.md */
    "derived",  /* arithmetic on other lines or on a published figure */
    "estimate", /* a first-principles estimate, its arithmetic in timing-model.md */
    "design",   /* a choice of the emulation itself (the native profile) */
    NULL,
};

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

/* The source of a line: its comment is "[tag] words..." with a known tag
 * and some words after it. 0, or -1 with the reason in why. */
static int check_source(const char *comment, char *why, size_t len)
{
    if (!comment) {
        snprintf(why, len, "no source: end the line with '# [tag] where it comes from'");
        return -1;
    }
    while (*comment == ' ' || *comment == '\t')
        comment++;
    const char *close = *comment == '[' ? strchr(comment, ']') : NULL;
    if (!close) {
        snprintf(why, len, "the comment does not start with a source tag such as [paper]");
        return -1;
    }
    size_t tl = (size_t)(close - comment - 1);
    unsigned i;
    for (i = 0; fw_profile_sources[i]; i++)
        if (strlen(fw_profile_sources[i]) == tl && !strncmp(fw_profile_sources[i], comment + 1, tl))
            break;
    if (!fw_profile_sources[i]) {
        snprintf(why, len, "unknown source tag '%.*s' (known: paper, AM-II, MU-Net, Clumps, "
                           "measured, derived, estimate, design)", (int)(tl > 32 ? 32 : tl),
                 comment + 1);
        return -1;
    }
    const char *rest = close + 1;
    unsigned words = 0;
    for (const char *c = rest; *c; c++)
        words += !isspace((unsigned char)*c) && (c == rest || isspace((unsigned char)c[-1]));
    if (words < 2) {
        snprintf(why, len, "the source [%.*s] says nothing of where the figure comes from",
                 (int)tl, comment + 1);
        return -1;
    }
    return 0;
}

static unsigned param_index(const char *name)
{
    unsigned i;
    for (i = 0; i < NPARAMS && strcmp(params[i].name, name); i++)
        ;
    return i;
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
        unsigned i = param_index(name);
        if (i == NPARAMS)
            return fail(err, errlen, "%s:%u: unknown parameter '%s'", fname, ln, name);
        if (seen[i])
            return fail(err, errlen, "%s:%u: '%s' given twice (first on line %d)", fname, ln,
                        name, seen[i]);
        if (strcmp(unit, params[i].unit))
            return fail(err, errlen, "%s:%u: '%s' is in %s, not '%s'", fname, ln, name,
                        params[i].unit, unit);
        char why[160];
        if (check_source(hash ? hash + 1 : NULL, why, sizeof why) < 0)
            return fail(err, errlen, "%s:%u: '%s': %s", fname, ln, name, why);
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

#define V(name) val[param_index(name)]
    memset(out, 0, sizeof *out);
    out->paced = V("paced") != 0;
    out->hw_doorbell = V("hw_doorbell") != 0;
    double lanai = V("lanai_clock"), host = V("host_clock");
    /* The firmware's cycles per instruction: the paper's poll of a doorbell
     * pair in cycles over the instructions of that loop body. */
    double lanai_cpi = V("fw_poll_instr") > 0 ? V("fw_poll") / V("fw_poll_instr") : 0;
    if (V("fw_poll") > 0 && lanai_cpi == 0)
        return fail(err, errlen, "%s:%d: 'fw_poll_instr' is 0: the firmware's cycles per "
                                 "instruction come from fw_poll / fw_poll_instr", fname,
                    seen[param_index("fw_poll_instr")]);
    out->lanai_cpi = lanai_cpi;
    for (unsigned i = 0; i < NPARAMS; i++) {
        if (params[i].off == INPUT)
            continue;
        double v = val[i];
        double mhz = 0, per = 1;
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
        case CV_LANAI_CYC: mhz = lanai; break;
        case CV_LANAI_INSTR: mhz = lanai, per = lanai_cpi; break;
        case CV_HOST_INSTR: mhz = host, per = V("host_cpi"); break;
        }
        if (params[i].conv == CV_LANAI_CYC || params[i].conv == CV_LANAI_INSTR ||
            params[i].conv == CV_HOST_INSTR) {
            if (v > 0 && mhz == 0)
                return fail(err, errlen, "%s:%d: '%s' counts cycles but the clock is 0 MHz",
                            fname, seen[i], params[i].name);
            v = v > 0 ? v * per * 1000.0 / mhz : 0;
        }
        *(double *)((char *)out + params[i].off) = v;
    }
    /* Build: the library's post path at the host's CPI, and its lock.
     * Done: the library's path that takes a completion, its lock, and the
     * load of the status word the NIC's DMA has just written (a miss). */
    double cyc = host > 0 ? 1000.0 / host : 0;
    if ((V("host_post") > 0 || V("host_done") > 0 || V("host_lock") > 0) && host == 0)
        return fail(err, errlen, "%s: host costs are given but host_clock is 0 MHz", fname);
    out->host_build_ns = (V("host_post") * V("host_cpi") + V("host_lock")) * cyc;
    out->host_done_ns = (V("host_done") * V("host_cpi") + V("host_lock")) * cyc + out->mem_ns;
    if (!out->paced)
        out->host_build_ns = out->host_done_ns = 0;
#undef V
    return 0;
}

/* The profiles DIR holds, by name ("native, pci, sbus"), into out. */
static void profile_names(const char *dir, char *out, size_t cap)
{
    out[0] = 0;
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t len = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".conf") && len + n < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%.*s", len ? ", " : "",
                                    (int)(n - 5), e->d_name);
    }
    closedir(d);
}

int fw_profile_load(const char *name, const char *dir, struct via_profile *out, char *err,
                    size_t errlen)
{
    char path[1024];
    const char *d = dir ? dir : ".";
    if (strchr(name, '/')) {
        snprintf(path, sizeof path, "%s", name);
    } else {
        /* A name is the file's, in any case: SBUS is sbus.conf. */
        char lower[64];
        size_t i = 0;
        for (; name[i] && i + 1 < sizeof lower; i++)
            lower[i] = (char)tolower((unsigned char)name[i]);
        lower[i] = 0;
        snprintf(path, sizeof path, "%s/%s.conf", d, name);
        if (access(path, F_OK) != 0)
            snprintf(path, sizeof path, "%s/%s.conf", d, lower);
    }
    FILE *f = fopen(path, "r");
    if (!f && !strchr(name, '/') && errno == ENOENT) {
        char names[256];
        profile_names(d, names, sizeof names);
        return fail(err, errlen, "no profile '%s' in %s (there: %s; or give a path to a "
                                 ".conf file)", name, d, names[0] ? names : "none");
    }
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

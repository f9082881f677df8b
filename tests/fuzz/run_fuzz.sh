#!/bin/sh
# run_fuzz.sh - run the libFuzzer targets of $B/fuzz (default build-fuzz)
# from their seed corpora (tests/fuzz/corpus/<target>, without the fuzz_
# prefix) and print one line per target: executions, coverage (libFuzzer's
# cov: edges and ft: features at the end), corpus size, crashes.
#
#   B=build-fuzz FUZZ_SECONDS=180 tests/fuzz/run_fuzz.sh [target...]
#       make fuzz: each target FUZZ_SECONDS; the corpus grows in
#       $B/corpus/<target> (seeded from the repository's, kept between
#       runs); a crash is kept as $B/crashes/<target>-crash-*.
#   tests/fuzz/run_fuzz.sh --smoke [target...]
#       make test: each target a few seconds (FUZZ_SMOKE_SECONDS, default 5)
#       from a temporary copy of the seeds; nothing is kept but crashes.
# Exits non-zero if any target crashed (or failed to start).
set -u

B=${B:-build-fuzz}
smoke=0
if [ "${1:-}" = --smoke ]; then
    smoke=1
    shift
fi
secs=${FUZZ_SECONDS:-180}
[ $smoke = 1 ] && secs=${FUZZ_SMOKE_SECONDS:-5}
here=$(cd "$(dirname "$0")" && pwd)

targets=${*:-$(cd "$B/fuzz" 2>/dev/null && ls fuzz_* 2>/dev/null | grep -v '\.')}
if [ -z "$targets" ]; then
    echo "run_fuzz: no fuzz targets in $B/fuzz (make fuzz builds them)" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vipl-fuzz.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$B/crashes"
bad=0
for t in $targets; do
    name=${t#fuzz_}
    seeds="$here/corpus/$name"
    if [ $smoke = 1 ]; then
        work="$tmp/$name"
    else
        work="$B/corpus/$name"
    fi
    mkdir -p "$work"
    log="$tmp/$t.log"
    # The seeds come second: libFuzzer adds what it finds to the first
    # directory only, so the repository's corpus is never written.
    "$B/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 -print_pcs=0 -print_funcs=0 \
        -timeout=30 -rss_limit_mb=4096 -artifact_prefix="$B/crashes/$t-" \
        "$work" "$seeds" >"$log" 2>&1
    rc=$?
    last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(printf '%s\n' "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s\n' "$last" | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
    corp=$(printf '%s\n' "$last" | sed -n 's/.*corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p')
    if [ $rc -eq 0 ]; then
        echo "FUZZ $t: ${runs:-?} runs in ${secs}s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, no crash"
    else
        bad=$((bad + 1))
        crash=$(sed -n "s/.*Test unit written to \(.*\)/\1/p" "$log" | tail -1)
        echo "FAIL $t: exit $rc after ${runs:-?} runs (cov ${cov:-?}, ft ${ft:-?}); input: ${crash:-none written}; its report:"
        grep -v -e '^#[0-9]' -e '^INFO:' "$log" | head -40 | sed 's/^/    /'
    fi
done
[ $bad -eq 0 ]

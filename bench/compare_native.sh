#!/usr/bin/env bash
# compare_native.sh - the emulated VIA NIC (native profile) against
# libfabric's shared-memory provider (fi_pingpong -p shm -e rdm), measured
# in the same run on this machine.
#
#   B=build bench/compare_native.sh [--quick] [--runs N]
#
# Prints progress on stderr and, on stdout, a table:
#   4-byte one-way latency      ours (vip_send_lat median RTT/2) vs fi_pingpong usec/xfer
#   1 MiB bandwidth             ours (vip_send_bw, streaming)   vs fi_pingpong MB/sec
#   4-byte latency, 1024 VIs    ours with 1024 idle VIs per process vs with none
# Each figure is the median of 5 runs (3 with --quick), each ratio the median
# of the per-run ratios (ours and the reference run back to back), with the targets
# (latency ratio <= 3x, bandwidth >= 50%, 1024-VI ratio <= 1.2x) and
# PASS/MISS per line. Exit status: 0 when everything was measured (whatever
# the verdicts), 1 when a measurement failed.
#
# Uses a private vipd (its own socket in a temporary directory), stopped at
# the end even on failure. Needs fi_pingpong (Debian: libfabric-bin; `make
# deps-bench` installs it).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_find_build "$(cd "$HERE/.." && pwd)"
BIN=$B/bin
QUICK=0
RUNS=

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}

while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --runs) RUNS=${2:?--runs needs a number}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "compare_native.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

if [ "$QUICK" = 1 ]; then
    RUNS=${RUNS:-3}; LAT_ITERS=20000; BW_ITERS=2000; FI_LAT_ITERS=20000; FI_BW_ITERS=500
else
    RUNS=${RUNS:-5}; LAT_ITERS=100000; BW_ITERS=10000; FI_LAT_ITERS=100000; FI_BW_ITERS=2000
fi
IDLE_VIS=1024

for p in vip_send_lat vip_send_bw vipd vipctl; do
    if [ ! -x "$BIN/$p" ]; then
        echo "compare_native.sh: $BIN/$p is missing: run 'make' first (or set B)" >&2
        exit 1
    fi
done
if ! command -v fi_pingpong >/dev/null 2>&1; then
    echo "compare_native.sh: fi_pingpong not found: install libfabric-bin ('make deps-bench')" >&2
    exit 1
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vipcompare.XXXXXX")
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# ours COLUMN PROGRAM ARGS...: run one of our programs with --csv and set VAL
# to COLUMN of its data line; on failure show its output and stop.
ours() {
    local col=$1
    shift
    if ! timeout 300 "$@" --csv >"$WORK/ours.out" 2>&1; then
        say "error: '$*' failed:"
        cat "$WORK/ours.out" >&2
        exit 1
    fi
    VAL=$(csv_col "$col" <"$WORK/ours.out")
    if [ -z "$VAL" ]; then
        say "error: no data line in the output of '$*':"
        cat "$WORK/ours.out" >&2
        exit 1
    fi
}

say "compare_native: $RUNS runs of each measurement$([ "$QUICK" = 1 ] && echo ' (--quick)')"
vipd_start

lat=() lat_vis=() bw=() fi_lat=() fi_bw=()
for r in $(seq "$RUNS"); do
    # Order: each pair that forms a ratio runs back to back.
    say "  run $r/$RUNS: fi_pingpong -p shm -e rdm -S 4"
    fi_run 4 "$FI_LAT_ITERS"
    fi_lat+=("$FI_USEC")
    say "  run $r/$RUNS: vip_send_lat -s 4"
    ours 4 "$BIN/vip_send_lat" -s 4 -n "$LAT_ITERS"
    lat+=("$VAL")
    say "  run $r/$RUNS: vip_send_lat -s 4 --vis $IDLE_VIS"
    ours 4 "$BIN/vip_send_lat" -s 4 -n "$LAT_ITERS" --vis "$IDLE_VIS"
    lat_vis+=("$VAL")
    say "  run $r/$RUNS: vip_send_bw -s 1M"
    ours 4 "$BIN/vip_send_bw" -s 1M -n "$BW_ITERS"
    bw+=("$VAL")
    say "  run $r/$RUNS: fi_pingpong -p shm -e rdm -S 1048576"
    fi_run 1048576 "$FI_BW_ITERS"
    fi_bw+=("$FI_MBS")
done
vipd_stop

m_lat=$(median "${lat[@]}")
m_lat_vis=$(median "${lat_vis[@]}")
m_bw=$(median "${bw[@]}")
m_fi_lat=$(median "${fi_lat[@]}")
m_fi_bw=$(median "${fi_bw[@]}")

# verdict VALUE OP LIMIT -> PASS / MISS
verdict() {
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
        ok = (op == "<=") ? (v <= l) : (v >= l); print (ok ? "PASS" : "MISS") }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }

# Each run measures ours and the reference back to back, so a ratio is taken
# per run and the median of those is reported: on a VM the latency of every
# program shifts between levels from minute to minute (the host moves the
# virtual CPUs), and pairing keeps such shifts out of the ratios.
pair_ratios() { # NAME_A NAME_B -> median of A[i]/B[i]
    local -n a=$1 b=$2
    local i rs=()
    for i in "${!a[@]}"; do
        rs+=("$(ratio "${a[$i]}" "${b[$i]}")")
    done
    median "${rs[@]}"
}
r_lat=$(printf '%.2f' "$(pair_ratios lat fi_lat)")
r_bw=$(printf '%.2f' "$(pair_ratios bw fi_bw)")
r_vis=$(printf '%.2f' "$(pair_ratios lat_vis lat)")
pct_bw=$(awk -v r="$r_bw" 'BEGIN { printf "%.0f%%", r * 100 }')

line='------------------------------------------------------------------------------------------------'
echo "# compare_native: emulated VIA NIC (native profile) vs libfabric shm (fi_pingpong -p shm -e rdm)"
echo "# host $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); each figure the median of $RUNS runs"
echo "# latency: one-way, microseconds (ours: median RTT/2 of $LAT_ITERS ping-pongs; fi: usec/xfer)"
echo "# bandwidth: MB/s, MB = 10^6 bytes (ours: streaming, $BW_ITERS msgs, tx depth 64; fi: ping-pong MB/sec)"
echo "$line"
printf '%-34s %12s %14s %10s %10s %6s\n' "measurement" "ours" "reference" "ratio" "target" "result"
echo "$line"
printf '%-34s %12.3f %14.3f %9sx %10s %6s\n' "4 B one-way latency [us]" \
    "$m_lat" "$m_fi_lat" "$r_lat" "<= 3x" "$(verdict "$r_lat" "<=" 3)"
printf '%-34s %12.0f %14.0f %10s %10s %6s\n' "1 MiB bandwidth [MB/s]" \
    "$m_bw" "$m_fi_bw" "$pct_bw" ">= 50%" "$(verdict "$r_bw" ">=" 0.5)"
printf '%-34s %12.3f %14.3f %9sx %10s %6s\n' "4 B latency, $IDLE_VIS idle VIs [us]" \
    "$m_lat_vis" "$m_lat" "$r_vis" "<= 1.2x" "$(verdict "$r_vis" "<=" 1.2)"
echo "$line"
echo "# reference: fi_pingpong (shm) for the first two lines; ours with no idle VIs for the third."
echo "# ratio: median over the runs of ours/reference, both measured back to back in each run."
echo "# runs: latency ours ${lat[*]} | fi ${fi_lat[*]}"
echo "# runs: bandwidth ours ${bw[*]} | fi ${fi_bw[*]}"
echo "# runs: latency with $IDLE_VIS idle VIs ${lat_vis[*]}"

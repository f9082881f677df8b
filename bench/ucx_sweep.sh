#!/usr/bin/env bash
# ucx_sweep.sh - UCX's curves for the plots: ucx_perftest -t tag_lat and -t
# tag_bw -O 64 (64 sends in flight, as vip_send_bw; UCP tag matching, UCX's own choice of shared-memory transports, or
# UCX_TLS) at each power-of-two size from 4 B to 1 MiB, client and server on
# localhost. What `make bench` (run_bench.sh) plots beside ours.
#
#   bench/ucx_sweep.sh [--quick] OUT.csv
#
# OUT.csv: '#' lines, then bytes,iters,lat_p50_us,lat_avg_us,MB_per_s,msgs_per_s
# (latency one-way, from tag_lat; bandwidth and rate over the whole tag_bw
# run, UCX's "overall"; MB = 10^6 bytes). --quick: every other size, fewer
# iterations. Exit 1 if ucx_perftest is missing or a run fails.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/bench_lib.sh
. "$HERE/bench_lib.sh"
QUICK=0
if [ "${1:-}" = --quick ]; then QUICK=1; shift; fi
OUT=${1:?usage: ucx_sweep.sh [--quick] OUT.csv}
command -v ucx_perftest >/dev/null 2>&1 || { say "ucx_sweep.sh: no ucx_perftest (Debian: ucx-utils)"; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vipucx.XXXXXX")
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

{
    echo "# ucx_perftest -t tag_lat (one-way latency, microseconds: 50th percentile and mean) and"
    echo "# -t tag_bw -O 64 (whole run: MB/s, MB = 10^6 bytes, and messages/s); UCX transports:" \
        "${UCX_TLS:-chosen by UCX}"
    echo "bytes,iters,lat_p50_us,lat_avg_us,MB_per_s,msgs_per_s"
} >"$OUT.tmp"
step=1
[ "$QUICK" = 1 ] && step=2
for e in $(seq 2 "$step" 20); do
    size=$((1 << e))
    if [ "$QUICK" = 1 ]; then
        iters=$((size <= 65536 ? 5000 : 500))
    else
        iters=$((size <= 16384 ? 50000 : 50000 * 16384 / size))
    fi
    say "      ucx_perftest -t tag_lat / tag_bw -s $size -n $iters"
    ucx_run tag_lat "$size" "$iters"
    p50=$UCX_P50 avg=$UCX_AVG
    ucx_run tag_bw "$size" "$iters" -O 64
    echo "$size,$iters,$p50,$avg,$UCX_MBS,$UCX_MR" >>"$OUT.tmp"
done
mv "$OUT.tmp" "$OUT"

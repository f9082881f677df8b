#!/usr/bin/env bash
# run_am2.sh - the AM-II benchmarks: am2_ping (request/reply round trip,
# short and medium) and am2_bulk (long-message bandwidth) under amrun, for
# each NIC profile through the NIC (AM2_SHM=0), and natively also through
# shared memory, beside VIPL send/receive (vip_send_lat, 100 bytes: about
# an AM header) and ucx_perftest -t tag_lat when installed. The paced
# profiles run in virtual time (PACED_CLOCK=real: in real time). Then,
# natively through the NIC, the spread of the round trip over several
# runs (short, and long at 4 KiB, 64 KiB, 1 MiB), each run beside a VIPL
# ping-pong of the same size (vip_send_lat: RTT = 2 x its one-way), run
# for run: AMLong should stay within 2x of the raw VIPL round trip.
#
#   B=build bench/run_am2.sh [--quick]     -> results/am2_ping.csv, am2_bulk.csv,
#                                             am2_spread.csv,
#                                             am2_summary.txt (printed too)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_find_build "$ROOT"
BIN=$B/bin
RES=${RESULTS:-$HERE/results}
QUICK=0
bench_paced_clock run_am2.sh
[ "${1:-}" = --quick ] && QUICK=1
bench_need run_am2.sh amrun am2_ping am2_bulk vip_send_lat vipd vipctl
mkdir -p "$RES"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/am2bench.XXXXXX")
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

PING="$RES/am2_ping.csv"
BULK="$RES/am2_bulk.csv"
echo "# am2_ping: AM-2 request/reply round trip between 2 ranks (amrun); us; oneway = median/2" >"$PING"
echo "profile,path,nic,kind,bytes,median_rtt_us,mean_rtt_us,oneway_us" >>"$PING"
echo "# am2_bulk: AM_RequestXferAsync streams into the peer's segment; MB = 10^6 bytes" >"$BULK"
echo "profile,path,nic,bytes,MB_per_s,msgs_per_s" >>"$BULK"
SUM="$WORK/summary"
printf '%-7s %-5s %14s %14s %18s %14s\n' profile path "short 1-way us" "8KiB 1-way us" \
    "VIPL 100B 1-way us" "long 1MiB MB/s" >"$SUM"

# one PROFILE PATH(nic|shm)
one() {
    local prof=$1 path=$2 n=20000 m=64 shm=0
    if [ "$prof" != native ]; then n=2000; m=8; fi
    if [ "$QUICK" = 1 ]; then n=$((n / 4)); m=$((m / 4)); fi
    [ "$path" = shm ] && shm=1
    say "      $prof, through $path: am2_ping -n $n, am2_bulk -m $m"
    AM2_SHM=$shm timeout 300 "$BIN/amrun" -np 2 -t 280 "$BIN/am2_ping" -n "$n" --csv \
        >"$WORK/ping" 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
    AM2_SHM=$shm timeout 300 "$BIN/amrun" -np 2 -t 280 "$BIN/am2_bulk" -m "$m" --csv \
        >"$WORK/bulk" 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
    grep -v '^#' "$WORK/ping" | sed "s/^/$prof,$path,/" >>"$PING"
    grep -v '^#' "$WORK/bulk" | sed "s/^/$prof,$path,/" >>"$BULK"
    local short big long raw=-
    short=$(awk -F, '$2 == "short" { print $6 }' "$WORK/ping")
    big=$(awk -F, '$2 == "medium" && $3 == 8192 { print $6 }' "$WORK/ping")
    long=$(awk -F, '$2 == 1048576 { print $3 }' "$WORK/bulk")
    if [ "$path" = nic ]; then
        raw=$(timeout 120 "$BIN/vip_send_lat" -s 100 -n "$n" --csv 2>/dev/null |
            awk -F, '!/^#/ && $1 == 100 { print $4 }')
    fi
    printf '%-7s %-5s %14s %14s %18s %14s\n' "$prof" "$path" "$short" "$big" "${raw:--}" \
        "$long" >>"$SUM"
}

# spread: R runs of am2_ping through the native NIC, each followed by
# vip_send_lat at the long sizes; per kind the min, median and max of the
# runs' median RTTs, and the ratio of the medians to VIPL's RTT.
SPREAD="$RES/am2_spread.csv"
spread() {
    local runs=7 n=5000 r
    [ "$QUICK" = 1 ] && { runs=3; n=2000; }
    say "      native, through nic: the round trip's spread over $runs runs, beside VIPL"
    echo "# am2_ping through the native NIC, $runs runs; vip: vip_send_lat RTT (2 x one-way) of the same size, run for run" >"$SPREAD"
    echo "run,kind,bytes,am2_median_rtt_us,vip_median_rtt_us" >>"$SPREAD"
    for r in $(seq 1 "$runs"); do
        AM2_SHM=0 timeout 120 "$BIN/amrun" -np 2 -t 100 "$BIN/am2_ping" -n "$n" --csv \
            >"$WORK/sp" 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
        local b vip
        for b in 4096 65536 1048576; do
            local it=$n
            [ "$b" = 1048576 ] && it=$((n / 10))
            vip=$(timeout 120 "$BIN/vip_send_lat" -s "$b" -n "$it" --csv 2>/dev/null |
                awk -F, '!/^#/ && $1 == '"$b"' { printf "%.3f", 2 * $4 }')
            awk -F, -v r="$r" -v b="$b" -v vip="${vip:-}" \
                '$2 == "long" && $3 == b { print r ",long," b "," $4 "," vip }' \
                "$WORK/sp" >>"$SPREAD"
        done
        awk -F, -v r="$r" '$2 == "short" { print r ",short," $3 "," $4 "," }' \
            "$WORK/sp" >>"$SPREAD"
    done
    {
        echo "AM-II round trip through the native NIC over $runs runs (median RTT of each run, us):"
        printf '  %-6s %8s %22s %14s %10s  %s\n' kind bytes "am2 min/median/max" \
            "VIPL median" ratio "within 2x of VIPL"
        awk -F, '!/^#/ && $1 != "run" { k = $2 "," $3; a[k] = a[k] " " $4; if ($5 != "") v[k] = v[k] " " $5; o[k] = ++n }
            function med(s,   x, m, i, j, t) {
                m = split(s, x, " ")
                for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (x[j] + 0 < x[i] + 0) { t = x[i]; x[i] = x[j]; x[j] = t }
                lo = x[1]; hi = x[m]
                return m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
            }
            END {
                for (k in a) {
                    split(k, kb, ",")
                    am = med(a[k]); alo = lo; ahi = hi
                    if (v[k] != "") {
                        vm = med(v[k]); r = am / vm
                        printf "  %-6s %8s %8.2f/%6.2f/%6.2f %14.2f %9.2fx  %s\n", kb[1], kb[2], alo, am, ahi, vm, r, (r <= 2 ? "PASS" : "NOT met")
                    } else
                        printf "  %-6s %8s %8.2f/%6.2f/%6.2f %14s %10s\n", kb[1], kb[2], alo, am, ahi, "-", "-"
                }
            }' "$SPREAD" | sort -k1,1r -k2,2n
    } >>"$WORK/spread"
}

for prof in native sbus pci; do
    say "[am2] profile $prof"
    if [ "$prof" = native ]; then
        unset VIP_PROFILE
        vipd_start
    else
        export VIP_PROFILE=$prof
        VIP_CLOCK=$PACED_CLOCK vipd_start
    fi
    one "$prof" nic
    [ "$prof" = native ] && one native shm
    [ "$prof" = native ] && spread
    vipd_stop
done
unset VIP_PROFILE
if command -v ucx_perftest >/dev/null 2>&1; then
    port=$((30000 + $$ % 20000))
    timeout 60 ucx_perftest -p "$port" -t tag_lat -n 20000 >/dev/null 2>&1 &
    srv=$!
    sleep 1
    ucx=$(timeout 60 ucx_perftest -p "$port" localhost -t tag_lat -n 20000 2>/dev/null |
        awk '/^Final:/ { print $3 }') || true
    wait "$srv" 2>/dev/null || true
    echo "ucx_perftest -t tag_lat (same host): ${ucx:-?} us one-way (median)" >>"$SUM"
fi
echo "sbus and pci in $PACED_CLOCK time" >>"$SUM"
[ -f "$WORK/spread" ] && cat "$WORK/spread" >>"$SUM"
cp "$SUM" "$RES/am2_summary.txt"
cat "$SUM"

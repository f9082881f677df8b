#!/usr/bin/env bash
# run_virtual.sh - the paced S-Bus NIC in real and in virtual time, side by
# side: the 4-byte ping-pong (median one-way, vip_send_lat) and the 4 KB
# stream (vip_send_bw), each
#   - in real time, the machine idle;
#   - in virtual time, idle;
#   - in virtual time beside three CPU-bound processes;
#   - in virtual time, eight pairs at once (sixteen processes, a NIC pair
#     each);
# with the wall-clock seconds each took, and the model's prediction; then
# a token round rings of 2 to 32 emulated hosts (vip_ring, a process and a
# NIC each), idle and the 32 beside three CPU hogs: the time per hop
# against the ring of 2 (the pair, like for like: two VIs per NIC), and
# the wall-clock time each took.
# Run by run_bench.sh (`make bench`); on its own:
#
#   B=build bench/run_virtual.sh [--quick]
#
# Written to bench/results (or $RESULTS): virtual_time.txt.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_find_build "$ROOT"
BIN=$B/bin
RES=${RESULTS:-$HERE/results}
N=2000
[ "${1:-}" = --quick ] && N=500
bench_need run_virtual.sh vip_send_lat vip_send_bw vip_ring vip_model vipd vipctl
mkdir -p "$RES"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vipbench-virtual.XXXXXX")
HOGS=()
stop_hogs() {
    for h in "${HOGS[@]}"; do kill "$h" 2>/dev/null || true; done
    for h in "${HOGS[@]}"; do wait "$h" 2>/dev/null || true; done
    HOGS=()
}
trap 'stop_hogs; bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# lat DEV: median one-way of 4-byte messages; bw DEV: Mbit/s of 4 KB messages
lat() { timeout 600 "$BIN/vip_send_lat" -d "$1" -s 4 -n "$N" -w 100 --csv | awk -F, '/^4,/ { print $4 }'; }
bw() { timeout 600 "$BIN/vip_send_bw" -d "$1" -s 4096 -n "$N" -w 100 --csv | awk -F, '/^4096,/ { print $5 }'; }

# seconds since T0 (date +%s.%N), one decimal
since() { awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }

# row LABEL: one pair (via0 -> via1), both figures and the seconds they took
row() {
    local t0 l b
    t0=$(date +%s.%N)
    l=$(lat via1)
    b=$(bw via1)
    printf '  %-34s %12s %14s %10s\n' "$1" "$l" "$b" "$(since "$t0")"
}

model_lat=$("$BIN/vip_model" -d "$ROOT/lanai-fw/profiles" --csv sbus | awk -F, '$2 == "oneway_4B" { print $3 }')
model_bw=$("$BIN/vip_model" -d "$ROOT/lanai-fw/profiles" --csv sbus | awk -F, '$2 == "bw_4096" { print $3 }')
{
    echo "Real and virtual time, profile sbus ($N messages a run; medians; vip_send_lat, vip_send_bw)"
    printf '  %-34s %12s %14s %10s\n' "" "4 B one-way" "4 KB stream" "wall"
    printf '  %-34s %12s %14s %10s\n' "" "[us]" "[Mbit/s]" "[s]"
    printf '  %-34s %12s %14s %10s\n' "model (vip_model)" "$model_lat" "$model_bw" "-"
} >"$WORK/out"

say "run_virtual.sh: real time, idle"
VIP_PROFILE=sbus vipd_start
row "real time, idle" >>"$WORK/out"
vipd_stop

say "run_virtual.sh: virtual time, idle"
VIP_CLOCK=virtual VIP_PROFILE=sbus vipd_start
row "virtual time, idle" >>"$WORK/out"

say "run_virtual.sh: virtual time, three CPU hogs"
for _ in 1 2 3; do
    (while :; do :; done) &
    HOGS+=($!)
done
row "virtual time, 3 CPU hogs" >>"$WORK/out"
stop_hogs
vipd_stop

say "run_virtual.sh: virtual time, eight pairs at once"
VIP_CLOCK=virtual VIP_PROFILE=sbus NICS=16 vipd_start
t0=$(date +%s.%N)
pids=()
for k in 0 1 2 3 4 5 6 7; do
    (
        c=via$((2 * k)) s=via$((2 * k + 1))
        l=$(timeout 600 "$BIN/vip_send_lat" -d "$s" --client-dev "$c" -s 4 -n "$N" -w 100 --csv | awk -F, '/^4,/ { print $4 }')
        b=$(timeout 600 "$BIN/vip_send_bw" -d "$s" --client-dev "$c" -s 4096 -n "$N" -w 100 --csv | awk -F, '/^4096,/ { print $5 }')
        echo "$l $b" >"$WORK/pair$k"
    ) &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
wall=$(since "$t0")
vipd_stop
read -r lo hi blo bhi < <(cat "$WORK"/pair* | awk 'NR == 1 { a = b = $1; c = d = $2 }
    { if ($1 < a) a = $1; if ($1 > b) b = $1; if ($2 < c) c = $2; if ($2 > d) d = $2 }
    END { print a, b, c, d }')
printf '  %-34s %12s %14s %10s\n' "virtual time, 8 pairs at once" "$lo..$hi" "$blo..$bhi" "$wall" >>"$WORK/out"
echo "  (8 pairs: the lowest and highest median of the eight; wall: all eight)" >>"$WORK/out"

# ring H: median time per hop (us) and the run's wall-clock seconds
ring() { timeout 900 "$BIN/vip_ring" -H "$1" -n "$ROUNDS" -w 20 --csv | awk -F, 'NR == 2 { print $6, $9 }'; }
ROUNDS=$((N / 10))
say "run_virtual.sh: rings of 2 to 32 hosts"
VIP_CLOCK=virtual VIP_PROFILE=sbus NICS=32 vipd_start
{
    echo
    echo "A token round a ring of H hosts (vip_ring: a process and an sbus NIC each, two VIs"
    echo "per NIC; $ROUNDS rounds; virtual time): median time per hop, against the ring of 2"
    printf '  %-34s %12s %14s %10s\n' "" "per hop" "ratio to 2" "wall"
    printf '  %-34s %12s %14s %10s\n' "" "[us]" "" "[s]"
} >>"$WORK/out"
base=
for h in 2 4 8 16 32; do
    read -r hop w < <(ring "$h")
    [ -n "$base" ] || base=$hop
    printf '  %-34s %12s %14s %10s\n' "ring of $h hosts" "$hop" \
        "$(awk -v a="$hop" -v b="$base" 'BEGIN { printf "%.4f", a / b }')" "$w" >>"$WORK/out"
done
for _ in 1 2 3; do
    (while :; do :; done) &
    HOGS+=($!)
done
read -r hop w < <(ring 32) # the same rounds as idle: like for like
stop_hogs
printf '  %-34s %12s %14s %10s\n' "ring of 32, 3 CPU hogs ($ROUNDS rounds)" "$hop" \
    "$(awk -v a="$hop" -v b="$base" 'BEGIN { printf "%.4f", a / b }')" "$w" >>"$WORK/out"
vipd_stop
cp "$WORK/out" "$RES/virtual_time.txt"
cat "$RES/virtual_time.txt"

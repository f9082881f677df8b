#!/bin/bash
# instr_count.sh - the instructions and stores the VIA pipeline spends on a
# small message, counted exactly (valgrind's cachegrind) on vip_self, which
# runs both ends of a connection in one thread, so every run does the same
# work. Each figure is the difference between a run of 2N and one of N
# messages (or round trips), divided by N: set-up and tear-down cancel out.
#
#   bash bench/instr_count.sh [N]      (default N = 20000; needs valgrind)
#
# Prints, for the stream (a window of 16 sends, then their receives) and
# the ping-pong: instructions and stores per message sent and received, or
# per round trip. These count the library's and the NIC's software only;
# the time of a message between two cores is vip_send_lat's and
# vip_send_bw's to measure (spec-notes/native-speed.md).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
bench_find_build "$HERE/.."
BIN=$B/bin
N=${1:-20000}
command -v valgrind >/dev/null || { echo "instr_count.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[ -x "$BIN/vip_self" ] || { echo "instr_count.sh: $BIN/vip_self not built (make)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/instr.XXXXXX")
trap 'vipd_stop; rm -rf "$WORK"' EXIT
vipd_start

# totals PROG-ARGS...: "instructions stores" of one run
totals() {
    valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$WORK/cg" \
        "$BIN/vip_self" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
    cg_annotate --show=Ir,Dw "$WORK/cg" | awk '/PROGRAM TOTALS/ {gsub(",", ""); print $1, $3}'
}

echo "# instr_count: per message (stream: one sent and received) or per round trip (ping-pong)"
echo "# both ends in one thread (vip_self), N = $N; cachegrind, difference of 2N and N"
printf '%-10s %6s %14s %10s\n' mode bytes instructions stores
for mode in "stream 8" "pingpong 4"; do
    set -- $mode
    a=$(totals -m "$1" -s "$2" -n "$N")
    b=$(totals -m "$1" -s "$2" -n $((2 * N)))
    echo "$a $b" | awk -v m="$1" -v s="$2" -v n="$N" \
        '{printf "%-10s %6s %14.1f %10.1f\n", m, s, ($3 - $1) / n, ($4 - $2) / n}'
done

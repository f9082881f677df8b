#!/bin/bash
# run_hostile.sh - what a neighbour that writes a paced NIC's shared page
# does to another process's messages (make bench-hostile; a step of make
# bench). One vipd, S-Bus profile, real time; a 4-byte ping-pong between
# via0 and via1 (vip_send_lat) beside bench/vip_page_attack on via0:
#
#   spin      a CPU hog that reads the page (the reference: same CPU load)
#   forge     writes every busy time an hour ahead, no VI of its own:
#             target <= 2x the reference
#   forge-vi  the same with one VI: bounded by one largest transaction of
#             that VI per message (fw_sched_window_ns), what it could
#             cause by sending 1 MiB messages; reported, few iterations
#
# Each figure is the median of RUNS runs (5; --quick: 3), spin and forge
# alternating (this machine's speed changes from second to second).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/bench_lib.sh"
bench_find_build "$ROOT"
BIN=$B/bin
RUNS=5 N=3000
[ "${1:-}" = "--quick" ] && RUNS=3 N=1000
AP=
VIP_PROFILE=sbus NICS=2 vipd_start || exit 1
trap '[ -n "$AP" ] && kill "$AP" 2>/dev/null; bench_cleanup' EXIT INT TERM
lat() { "$BIN/vip_send_lat" -s 4 -n "$1" -w 5 -d via1 | awk '$1 == 4 { print $4 }'; }
# beside MODE ITERS: the median one-way latency beside the attacker in MODE
beside() {
    "$BIN/vip_page_attack" "$1" via0 &
    AP=$!
    sleep 0.2
    lat "$2"
    kill "$AP" 2>/dev/null
    wait "$AP" 2>/dev/null
    AP=
}
spin_all= forge_all=
i=0
while [ $i -lt $RUNS ]; do
    spin_all="$spin_all $(beside spin $N)"
    forge_all="$forge_all $(beside forge $N)"
    i=$((i + 1))
done
spin=$(median $spin_all)
forge=$(median $forge_all)
vi=$(beside forge-vi 10)
echo
echo "A neighbour writing the shared NIC page (S-Bus, real time; 4 B one-way, median of $RUNS runs)"
awk -v s="$spin" -v f="$forge" 'BEGIN { r = f / s
    printf "  beside a reader of the page (CPU hog)     : %9.2f us\n", s
    printf "  beside a forger with no VI                : %9.2f us  ratio %5.2fx  (target <= 2x) %s\n", f, r, (r <= 2 ? "met" : "NOT met") }'
awk -v v="$vi" 'BEGIN {
    printf "  beside a forger with one VI (10 messages) : %9.2f us  (bounded by one largest transaction of its VI per message)\n", v }'

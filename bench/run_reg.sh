#!/bin/bash
# run_reg.sh - memory registration at memory speed (make bench-reg; step 8
# of make bench). One native vipd; the library's registration cache
# (vipl/src/vipl_rcache.c) against VIP_RCACHE=0, where every
# VipRegisterMem and VipDeregisterMem is a round trip to vipd:
#
#   register + deregister of one 64 KiB buffer, per pair (vip_reg_cost),
#   beside getppid(), the cheapest system call
#   ping-pong (vip_send_lat, RTT/2 median) at 64 KiB and 1 MiB, each send's
#   buffer registered before it and deregistered after (--reg-per-msg),
#   against the same with pre-registered buffers: targets <= 1.25x at
#   64 KiB, <= 1.05x at 1 MiB
#
# Each figure is the median of RUNS runs (5; --quick: 3); the lines
# compared alternate run by run (this machine's speed changes from second
# to second).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/bench_lib.sh"
bench_find_build "$ROOT"
BIN=$B/bin
RUNS=5 N64=5000 N1M=300 NREG=20000
[ "${1:-}" = "--quick" ] && RUNS=3 N64=2000 N1M=100 NREG=5000
VIP_PROFILE=native NICS=2 vipd_start || exit 1
trap bench_cleanup EXIT INT TERM
lat() { "$BIN/vip_send_lat" -s "$1" -n "$2" -d via1 "${@:3}" | awk -v s="$1" '$1 == s { print $4 }'; }
pair_c= pair_n= sys= p64= r64= n64= p1m= r1m= n1m=
i=0
while [ $i -lt $RUNS ]; do
    set -- $("$BIN/vip_reg_cost" 65536 $NREG)
    pair_c="$pair_c $2" sys="$sys $3"
    set -- $(VIP_RCACHE=0 "$BIN/vip_reg_cost" 65536 1000)
    pair_n="$pair_n $2"
    p64="$p64 $(lat 65536 $N64)"
    r64="$r64 $(lat 65536 $N64 --reg-per-msg)"
    n64="$n64 $(VIP_RCACHE=0 lat 65536 $((N64 / 5)) --reg-per-msg)"
    p1m="$p1m $(lat 1048576 $N1M)"
    r1m="$r1m $(lat 1048576 $N1M --reg-per-msg)"
    n1m="$n1m $(VIP_RCACHE=0 lat 1048576 $N1M --reg-per-msg)"
    i=$((i + 1))
done
echo
echo "Memory registration (native, via0 <-> via1; median of $RUNS runs)"
awk -v c="$(median $pair_c)" -v n="$(median $pair_n)" -v s="$(median $sys)" 'BEGIN {
    printf "  register + deregister, 64 KiB: %8.3f us with the cache, %8.3f us without; getppid() %.3f us\n", c, n, s }'
line() {
    awk -v l="$1" -v p="$2" -v r="$3" -v n="$4" -v t="$5" 'BEGIN { x = r / p
        printf "  %-6s ping-pong, one-way    : pre-registered %8.2f us, register per message %8.2f us: %5.2fx (target <= %sx) %s; without the cache %8.2f us (%.2fx)\n",
            l, p, r, x, t, (x <= t ? "met" : "NOT met"), n, n / p }'
}
line "64 KiB" "$(median $p64)" "$(median $r64)" "$(median $n64)" 1.25
line "1 MiB" "$(median $p1m)" "$(median $r1m)" "$(median $n1m)" 1.05

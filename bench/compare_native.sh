#!/usr/bin/env bash
# compare_native.sh - the emulated VIA NIC (native profile) against
# libfabric's shared-memory provider (fi_pingpong -p shm -e rdm), its RDMA
# write against its own send/receive and against UCX's shared-memory put
# (ucx_perftest -t put_bw), and its wake-up and delivery times against a pipe
# and a UDP socket pair, measured in the same run on this machine.
#
#   B=build bench/compare_native.sh [--quick] [--runs N]
#
# Prints progress on stderr and, on stdout, a table:
#   4-byte one-way latency      ours (vip_send_lat median RTT/2) vs fi_pingpong usec/xfer
#   1 MiB bandwidth             ours (vip_send_bw, streaming)   vs fi_pingpong MB/sec
#   1 MiB RDMA write bandwidth  ours (vip_write_bw, streaming)  vs vip_send_bw (the same
#                               statistic: MB/s from the first post to the target's ack of
#                               the last, 64 in flight, reliable delivery), and vs
#                               ucx_perftest -t put_bw (UCT posix transport, bcopy) overall
#   4-byte latency, 1024 VIs    ours with 1024 idle VIs per process vs with none
#   16-byte wake-up latency     ours (vip_wake_lat: median time from VipPostSend to the
#                               return from VipRecvWait of a receiver asleep in it) vs
#                               os_wake_lat, same method and pause: a pipe (read()), UDP
#                               on 127.0.0.1 (recv())
#   delivery, sender busy       the same, the sender computing 5 ms after posting:
#                               16 bytes vs pipe and vs UDP, 1 MiB vs pipe
# Each figure is the median of 5 runs (3 with --quick), each ratio the median
# of the per-run ratios (ours and the reference run back to back), with the targets
# (latency ratio <= 3x, bandwidth >= 50%, RDMA write >= 100% of send/receive,
# 1024-VI ratio <= 1.2x; the UCX, wake-up and delivery lines have none) and
# PASS/MISS per line. Exit status: 0 when
# everything was measured (whatever the verdicts), 1 when a measurement failed.
#
# Uses a private vipd (its own socket in a temporary directory), stopped at
# the end even on failure. Needs fi_pingpong (Debian: libfabric-bin; `make
# deps-bench` installs it); without ucx_perftest (ucx-utils) the UCX line says n/a.
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
    UCX_BW_ITERS=2000
    WAKE_N=300; WAKE_M=50
else
    RUNS=${RUNS:-5}; LAT_ITERS=100000; BW_ITERS=10000; FI_LAT_ITERS=100000; FI_BW_ITERS=2000
    UCX_BW_ITERS=10000
    WAKE_N=1000; WAKE_M=100
fi
IDLE_VIS=1024
# wake-up and delivery tests: messages of the wake test (-n) and of the compute
# test (-m) per run; the programs' defaults for the rest (sender sleeps 1500 us
# between messages, computes 5000 us after posting; T = 100 ms). The sender's
# thread runs on CPU 0 and the receiver's on CPU 1, so that every transport's
# wake-up crosses cores, and a computing sender never holds the receiver's core
# (left to the scheduler, the two share a core on a busy machine, and the
# figures then measure where it put them).
WAKE_ARGS=(-n "$WAKE_N" -m "$WAKE_M")
WAKE_CPUS="as the scheduler places them"
if [ "$(nproc)" -ge 2 ]; then
    WAKE_ARGS+=(--cpus "0,1")
    WAKE_CPUS="sender's thread on CPU 0, receiver's on CPU 1"
fi

for p in vip_send_lat vip_send_bw vip_write_bw vip_wake_lat os_wake_lat vipd vipctl; do
    if [ ! -x "$BIN/$p" ]; then
        echo "compare_native.sh: $BIN/$p is missing: run 'make' first (or set B)" >&2
        exit 1
    fi
done
if ! command -v fi_pingpong >/dev/null 2>&1; then
    echo "compare_native.sh: fi_pingpong not found: install libfabric-bin ('make deps-bench')" >&2
    exit 1
fi
HAVE_UCX=0
if command -v ucx_perftest >/dev/null 2>&1; then
    HAVE_UCX=1
else
    echo "compare_native.sh: ucx_perftest not found (Debian: ucx-utils): no UCX line" >&2
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

# wake_run NAME PROGRAM ARGS...: one vip_wake_lat/os_wake_lat run with --csv;
# appends, for each test it ran, the median to NAME_wake or NAME_cp (compute
# test), the compute test's maximum to NAME_cpx, and the messages not delivered
# within T (all tests) to NAME_late. On failure show its output and stop.
wake_run() {
    local name=$1 v t got=0
    shift
    if ! timeout 300 "$@" --csv >"$WORK/wake.out" 2>&1; then
        say "error: '$*' failed:"
        cat "$WORK/wake.out" >&2
        exit 1
    fi
    local -n w=${name}_wake cp=${name}_cp cpx=${name}_cpx late=${name}_late
    # columns: test,transport,receiver,bytes,iters,late,slept_pct,min,p10,median,p90,max
    for t in wake compute; do
        v=$(csv_test_col $t 10 <"$WORK/wake.out")
        [ -n "$v" ] || continue
        got=$((got + 1))
        if [ $t = wake ]; then
            w+=("$v")
        else
            cp+=("$v")
            cpx+=("$(csv_test_col $t 12 <"$WORK/wake.out")")
        fi
    done
    v=$(awk -F, '/^#/ || /^test,/ { next } NF > 6 { n += $6 } END { print n + 0 }' "$WORK/wake.out")
    late+=("$v")
    if [ "$got" = 0 ]; then
        say "error: no data line in the output of '$*':"
        cat "$WORK/wake.out" >&2
        exit 1
    fi
}

say "compare_native: $RUNS runs of each measurement$([ "$QUICK" = 1 ] && echo ' (--quick)')"
vipd_start

lat=() lat_vis=() bw=() wbw=() ucx_bw=() fi_lat=() fi_bw=()
# wake-up and delivery (see wake_run): 16 B ours / pipe / udp, 1 MiB ours / pipe
via_wake=() via_cp=() via_cpx=() via_late=()
pipe_wake=() pipe_cp=() pipe_cpx=() pipe_late=()
udp_wake=() udp_cp=() udp_cpx=() udp_late=()
# (the 1 MiB runs have no wake test: wake_run only needs their *_wake to exist)
# shellcheck disable=SC2034
big_via_wake=() big_via_cp=() big_via_cpx=() big_via_late=()
# shellcheck disable=SC2034
big_pipe_wake=() big_pipe_cp=() big_pipe_cpx=() big_pipe_late=()
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
    say "  run $r/$RUNS: fi_pingpong -p shm -e rdm -S 1048576"
    fi_run 1048576 "$FI_BW_ITERS"
    fi_bw+=("$FI_MBS")
    say "  run $r/$RUNS: vip_send_bw -s 1M"
    ours 4 "$BIN/vip_send_bw" -s 1M -n "$BW_ITERS"
    bw+=("$VAL")
    say "  run $r/$RUNS: vip_write_bw -s 1M"
    ours 4 "$BIN/vip_write_bw" -s 1M -n "$BW_ITERS"
    wbw+=("$VAL")
    if [ "$HAVE_UCX" = 1 ]; then
        say "  run $r/$RUNS: ucx_perftest -t put_bw -s 1048576"
        ucx_run put_bw 1048576 "$UCX_BW_ITERS"
        ucx_bw+=("$UCX_MBS")
    fi
    say "  run $r/$RUNS: os_wake_lat -t pipe -s 16"
    wake_run pipe "$BIN/os_wake_lat" -t pipe -s 16 "${WAKE_ARGS[@]}"
    say "  run $r/$RUNS: vip_wake_lat -s 16"
    wake_run via "$BIN/vip_wake_lat" -s 16 "${WAKE_ARGS[@]}"
    say "  run $r/$RUNS: os_wake_lat -t udp -s 16"
    wake_run udp "$BIN/os_wake_lat" -t udp -s 16 "${WAKE_ARGS[@]}"
    say "  run $r/$RUNS: vip_wake_lat -s 1M --test compute"
    wake_run big_via "$BIN/vip_wake_lat" -s 1M --test compute "${WAKE_ARGS[@]}"
    say "  run $r/$RUNS: os_wake_lat -t pipe -s 1M --test compute"
    wake_run big_pipe "$BIN/os_wake_lat" -t pipe -s 1M --test compute "${WAKE_ARGS[@]}"
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
pct() { awk -v r="$1" 'BEGIN { printf "%.0f%%", r * 100 }'; }
pct_bw=$(pct "$r_bw")
m_wbw=$(median "${wbw[@]}")
r_wbw=$(printf '%.2f' "$(pair_ratios wbw bw)")
if [ "$HAVE_UCX" = 1 ]; then
    m_ucx=$(median "${ucx_bw[@]}")
    r_ucx=$(printf '%.2f' "$(pair_ratios wbw ucx_bw)")
fi

# wake_line LABEL OURS REF: a line of the wake-up and delivery part (arrays;
# no target)
wake_line() {
    local -n a=$2 b=$3
    printf '%-42s %12.2f %14.2f %9sx %10s %6s\n' "$1" "$(median "${a[@]}")" \
        "$(median "${b[@]}")" "$(printf '%.2f' "$(pair_ratios "$2" "$3")")" "-" "-"
}

line='--------------------------------------------------------------------------------------------------------'
echo "# compare_native: emulated VIA NIC (native profile) vs libfabric shm (fi_pingpong -p shm -e rdm), its RDMA"
echo "# write vs its send/receive and vs UCX shared-memory put (ucx_perftest -t put_bw),"
echo "# and its wake-up and delivery times vs a pipe and a UDP socket pair (os_wake_lat)"
echo "# host $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); each figure the median of $RUNS runs"
echo "# latency: one-way, microseconds (ours: median RTT/2 of $LAT_ITERS ping-pongs; fi: usec/xfer)"
echo "# bandwidth: MB/s, MB = 10^6 bytes (ours: streaming, $BW_ITERS msgs, tx depth 64, sends and RDMA writes alike;"
echo "#   fi: ping-pong MB/sec; UCX: put_bw overall, $UCX_BW_ITERS puts)"
echo "# wake-up: one-way, microseconds, median over $WAKE_N messages: receiver's return from a blocking wait"
echo "#   (VipRecvWait / read() / recv()) minus the sender's post time, CLOCK_MONOTONIC; the sender sleeps"
echo "#   1500 us between messages, so the receiver is asleep (past VIPL's spin budget of <= 100 us)"
echo "# delivery, sender busy: the same over $WAKE_M messages, the sender computing 5000 us after each post"
echo "#   before its next call (ours: the VipSendWait that reaps the send); both: $WAKE_CPUS"
echo "$line"
printf '%-42s %12s %14s %10s %10s %6s\n' "measurement" "ours" "reference" "ratio" "target" "result"
echo "$line"
printf '%-42s %12.3f %14.3f %9sx %10s %6s\n' "4 B one-way latency [us]" \
    "$m_lat" "$m_fi_lat" "$r_lat" "<= 3x" "$(verdict "$r_lat" "<=" 3)"
printf '%-42s %12.0f %14.0f %10s %10s %6s\n' "1 MiB bandwidth [MB/s]" \
    "$m_bw" "$m_fi_bw" "$pct_bw" ">= 50%" "$(verdict "$r_bw" ">=" 0.5)"
printf '%-42s %12.0f %14.0f %10s %10s %6s\n' "1 MiB RDMA write vs send/recv [MB/s]" \
    "$m_wbw" "$m_bw" "$(pct "$r_wbw")" ">= 100%" "$(verdict "$r_wbw" ">=" 1)"
if [ "$HAVE_UCX" = 1 ]; then
    printf '%-42s %12.0f %14.0f %10s %10s %6s\n' "1 MiB RDMA write vs UCX put_bw [MB/s]" \
        "$m_wbw" "$m_ucx" "$(pct "$r_ucx")" "-" "-"
else
    printf '%-42s %12.0f %14s %10s %10s %6s\n' "1 MiB RDMA write vs UCX put_bw [MB/s]" \
        "$m_wbw" "n/a" "-" "-" "-"
fi
printf '%-42s %12.3f %14.3f %9sx %10s %6s\n' "4 B latency, $IDLE_VIS idle VIs [us]" \
    "$m_lat_vis" "$m_lat" "$r_vis" "<= 1.2x" "$(verdict "$r_vis" "<=" 1.2)"
wake_line "16 B wake-up latency vs pipe [us]" via_wake pipe_wake
wake_line "16 B wake-up latency vs UDP [us]" via_wake udp_wake
wake_line "16 B delivery, sender busy, vs pipe [us]" via_cp pipe_cp
wake_line "16 B delivery, sender busy, vs UDP [us]" via_cp udp_cp
wake_line "1 MiB delivery, sender busy, vs pipe [us]" big_via_cp big_pipe_cp
echo "$line"
echo "# reference: fi_pingpong (shm) for the first two lines; our send/receive (vip_send_bw) and"
echo "# ucx_perftest -t put_bw (UCT posix, bcopy; its MiB/s converted) for the RDMA write lines;"
echo "# ours with no idle VIs for the 1024-VI line;"
echo "# os_wake_lat -t pipe | udp (the same program logic, wake_util.h) for the wake-up and delivery lines."
echo "# ratio: median over the runs of ours/reference, both measured back to back in each run."
echo "# runs: latency ours ${lat[*]} | fi ${fi_lat[*]}"
echo "# runs: bandwidth ours ${bw[*]} | fi ${fi_bw[*]}"
echo "# runs: 1 MiB RDMA write ${wbw[*]} | UCX put_bw ${ucx_bw[*]:-n/a}"
echo "# runs: latency with $IDLE_VIS idle VIs ${lat_vis[*]}"
echo "# runs: 16 B wake-up ours ${via_wake[*]} | pipe ${pipe_wake[*]} | udp ${udp_wake[*]}"
echo "# runs: 16 B delivery, sender busy, median ours ${via_cp[*]} | pipe ${pipe_cp[*]} | udp ${udp_cp[*]}"
echo "# runs: 16 B delivery, sender busy, max ours ${via_cpx[*]} | pipe ${pipe_cpx[*]} | udp ${udp_cpx[*]}"
echo "# runs: 1 MiB delivery, sender busy, median ours ${big_via_cp[*]} | pipe ${big_pipe_cp[*]}"
echo "# runs: 1 MiB delivery, sender busy, max ours ${big_via_cpx[*]} | pipe ${big_pipe_cpx[*]}"
echo "# runs: messages not delivered within T = 100 ms: ours ${via_late[*]} | pipe ${pipe_late[*]} |" \
    "udp ${udp_late[*]} | 1 MiB ours ${big_via_late[*]} | pipe ${big_pipe_late[*]}"

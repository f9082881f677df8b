#!/usr/bin/env bash
# run_bench.sh - the benchmark suite; what `make bench` runs.
#
#   B=build bench/run_bench.sh [--quick]
#
# Steps (progress on stderr):
#   0. the paced LANai models: run_paced.sh (sbus, pci x standard, descriptorless,
#      merged: latency and bandwidth sweeps, LogP, doorbell scan, per-stage
#      breakdown, plots)                           -> results/{sbus,pci}_*, paced_summary.txt
#      and the model against the published figures -> results/model_validate.{txt,md}
#      then the S-Bus NIC in real and in virtual time (idle, beside three CPU
#      hogs, eight pairs at once): run_virtual.sh  -> results/virtual_time.txt
#      (vip_model --validate; the model's verdict decides this script's exit status)
#   then the native profile:
#   1. latency sweep    vip_send_lat -a --csv        -> results/native_latency.csv
#   2. bandwidth sweep  vip_send_bw -a --csv         -> results/native_bandwidth.csv
#   3. RDMA sweeps      vip_write_lat -a, vip_write_bw -a, vip_read_lat -a --csv
#                         -> results/native_rdma_write_latency.csv,
#                            native_rdma_write_bandwidth.csv, native_rdma_read_latency.csv
#   4. reference sweep  fi_pingpong -p shm -e rdm    -> results/fi_shm_pingpong.csv
#                       ucx_perftest tag_lat, tag_bw -> results/ucx_tag.csv (ucx_sweep.sh)
#   5. comparison       compare_native.sh            -> results/native_compare.txt
#                       (like for like vs UCX and fi_pingpong, each line with its
#                       statistic, ratio and target; VIs; events; first message,
#                       wake-up and delivery vs a pipe and UDP)
#   6. plots (if gnuplot is installed)               -> results/native_latency.png,
#                                                       results/native_bandwidth.png
#   7. AM-II: run_am2.sh (am2_ping, am2_bulk under amrun; native, sbus, pci;
#      NIC and shared memory; the round trip's spread beside VIPL)
#                                                    -> results/am2_*
#   8. memory registration: run_reg.sh (register per message against
#      pre-registered, a pair's cost beside getppid) -> results/reg_summary.txt
# and prints the comparison table at the end. Every data file starts with
# '#' lines stating what was measured and in which units. The results
# directory is bench/results unless RESULTS is set.
#
# --quick: fewer iterations and repeats (under 2 minutes; the full run takes
# a few minutes on a 2-core machine).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_find_build "$ROOT"
BIN=$B/bin
RES=${RESULTS:-$HERE/results}
QUICK=0

while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run_bench.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done


for p in vip_send_lat vip_send_bw vip_write_lat vip_write_bw vip_read_lat vipd vipctl; do
    if [ ! -x "$BIN/$p" ]; then
        say "run_bench.sh: $BIN/$p is missing: run 'make' first"
        exit 1
    fi
done

mkdir -p "$RES"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vipbench-run.XXXXXX")
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

START=$(date +%s)
step() { say "[$1/8] $2   ($(($(date +%s) - START)) s)"; }

step 0 "paced profiles sbus and pci: run_paced.sh"
PARGS=()
[ "$QUICK" = 1 ] && PARGS=(--quick)
if ! B="$B" RESULTS="$RES" "$HERE/run_paced.sh" "${PARGS[@]}" >"$WORK/paced.out"; then
    say "error: run_paced.sh failed"
    exit 1
fi
say "      paced S-Bus in real and virtual time, idle, beside CPU hogs, 8 pairs: run_virtual.sh"
if ! B="$B" RESULTS="$RES" "$HERE/run_virtual.sh" "${PARGS[@]}" >"$WORK/virtual.out"; then
    say "error: run_virtual.sh failed"
    exit 1
fi

# run PROGRAM ARGS... > FILE: our program; on failure show its errors and stop.
run() {
    if ! timeout 600 "$@" 2>"$WORK/err"; then
        say "error: '$*' failed:"
        cat "$WORK/err" >&2
        exit 1
    fi
}

vipd_start

step 1 "latency sweep: vip_send_lat -a"
run "$BIN/vip_send_lat" -a --csv >"$RES/native_latency.csv"

step 2 "bandwidth sweep: vip_send_bw -a"
if [ "$QUICK" = 1 ]; then
    run "$BIN/vip_send_bw" -a -n 5000 -w 500 --csv >"$RES/native_bandwidth.csv"
else
    run "$BIN/vip_send_bw" -a --csv >"$RES/native_bandwidth.csv"
fi

# The latency sweeps as the send's; the bandwidth sweep with 10^4 messages a
# size (the default, 8 GiB worth, takes 10^6 of the small ones): its curve
# sits beside the send's, and compare_native.sh measures the 1 MiB RDMA
# write bandwidth with repeats.
step 3 "RDMA sweeps: vip_write_lat -a, vip_write_bw -a, vip_read_lat -a"
if [ "$QUICK" = 1 ]; then LN=(-n 5000); BN=(-n 5000 -w 500); else LN=(); BN=(-n 10000 -w 1000); fi
run "$BIN/vip_write_lat" -a "${LN[@]}" --csv >"$RES/native_rdma_write_latency.csv"
run "$BIN/vip_write_bw" -a "${BN[@]}" --csv >"$RES/native_rdma_write_bandwidth.csv"
run "$BIN/vip_read_lat" -a "${LN[@]}" --csv >"$RES/native_rdma_read_latency.csv"
vipd_stop

step 4 "reference sweep: fi_pingpong -p shm -e rdm"
FI_CSV=
if command -v fi_pingpong >/dev/null 2>&1; then
    FI_CSV=$RES/fi_shm_pingpong.csv
    {
        echo "# fi_pingpong -p shm -e rdm (libfabric shared memory), ping-pong: usec_per_xfer is"
        echo "# the one-way latency in microseconds, MB_per_s its bandwidth (MB = 10^6 bytes)"
        echo "bytes,iters,usec_per_xfer,MB_per_s"
    } >"$FI_CSV.tmp"
    for e in $(seq 2 20); do
        size=$((1 << e))
        if [ "$QUICK" = 1 ]; then
            iters=$((size <= 65536 ? 10000 : 200))
        else
            iters=$((size <= 16384 ? 100000 : 100000 * 16384 / size))
        fi
        say "      fi_pingpong -S $size -I $iters"
        fi_run "$size" "$iters"
        echo "$size,$iters,$FI_USEC,$FI_MBS" >>"$FI_CSV.tmp"
    done
    mv "$FI_CSV.tmp" "$FI_CSV"
else
    say "      fi_pingpong not found (Debian: libfabric-bin): no reference sweep"
fi

UCX_CSV=$RES/ucx_tag.csv
UARGS=()
[ "$QUICK" = 1 ] && UARGS=(--quick)
if ! "$HERE/ucx_sweep.sh" "${UARGS[@]}" "$UCX_CSV"; then
    say "      no UCX sweep (ucx_perftest missing or failed): the plots show no UCX curves"
    UCX_CSV=
fi

step 5 "comparison with libfabric shm, UCX, a pipe and UDP: compare_native.sh"
rm -f "$RES/native_compare.txt"
if [ -n "$FI_CSV" ]; then
    CARGS=()
    [ "$QUICK" = 1 ] && CARGS=(--quick)
    if ! "$HERE/compare_native.sh" "${CARGS[@]}" >"$WORK/compare.txt"; then
        say "error: compare_native.sh failed"
        exit 1
    fi
    mv "$WORK/compare.txt" "$RES/native_compare.txt"
else
    say "      skipped: it needs fi_pingpong (Debian: libfabric-bin)"
fi

step 6 "plots"
if command -v gnuplot >/dev/null 2>&1; then
    gnuplot -e "data='$RES/native_latency.csv'" -e "out='$RES/native_latency.png'" \
        -e "wlat='$RES/native_rdma_write_latency.csv'" \
        -e "rlat='$RES/native_rdma_read_latency.csv'" \
        ${FI_CSV:+-e "ref='$FI_CSV'"} ${UCX_CSV:+-e "ucx='$UCX_CSV'"} "$HERE/plot_latency.gp"
    gnuplot -e "data='$RES/native_bandwidth.csv'" -e "out='$RES/native_bandwidth.png'" \
        -e "lat='$RES/native_latency.csv'" -e "wbw='$RES/native_rdma_write_bandwidth.csv'" \
        ${FI_CSV:+-e "ref='$FI_CSV'"} ${UCX_CSV:+-e "ucx='$UCX_CSV'"} "$HERE/plot_bandwidth.gp"
    say "      $RES/native_latency.png, $RES/native_bandwidth.png"
else
    say "      gnuplot not found (Debian: gnuplot-nox): no plots"
fi

step 7 "AM-II: run_am2.sh"
AARGS=()
[ "$QUICK" = 1 ] && AARGS=(--quick)
if ! B="$B" RESULTS="$RES" "$HERE/run_am2.sh" "${AARGS[@]}" >"$WORK/am2.out"; then
    say "error: run_am2.sh failed"
    exit 1
fi

step 8 "memory registration: run_reg.sh"
RARGS=()
[ "$QUICK" = 1 ] && RARGS=(--quick)
if ! B="$B" "$HERE/run_reg.sh" "${RARGS[@]}" >"$RES/reg_summary.txt"; then
    say "error: run_reg.sh failed"
    exit 1
fi

say "done in $(($(date +%s) - START)) s; data in $RES"
echo
echo "=============== paced profiles: the 1998 LANai 4 models ==============="
cat "$RES/paced_summary.txt"
echo
echo "=============== real and virtual time (run_virtual.sh) ==============="
cat "$RES/virtual_time.txt"
echo
echo "=============== the timing model against the published figures (vip_model --validate) ==============="
cat "$RES/model_validate.txt"
echo
echo "=============== AM-II over the NIC and shared memory (one-way = round trip / 2) ==============="
cat "$RES/am2_summary.txt"
echo
echo "=============== memory registration: per message against pre-registered (run_reg.sh) ==============="
cat "$RES/reg_summary.txt"
echo
echo "=============== native profile: this machine, vs libfabric shm and UCX ==============="
if [ -f "$RES/native_compare.txt" ]; then
    cat "$RES/native_compare.txt"
else
    echo "no comparison table (fi_pingpong is missing); sweeps in $RES"
fi

# The model's validation is the suite's verdict on the paced profiles; a
# paced measurement outside a tolerance is marked in the table and said
# here, but a loaded machine can cause it (it slows a real-time paced run).
if grep -q '(OUTSIDE)' "$RES/model_validate.txt" 2>/dev/null; then
    say "note: paced measurements outside a tolerance are marked (OUTSIDE) in results/model_validate.txt"
fi
if [ "$(cat "$RES/model_validate.status" 2>/dev/null || echo 1)" != 0 ]; then
    say "vip_model --validate: the model is outside the tolerance of a published figure (results/model_validate.txt)"
    exit 1
fi

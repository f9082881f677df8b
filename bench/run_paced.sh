#!/usr/bin/env bash
# run_paced.sh - the S-Bus and PCI LANai models: sweeps, LogP, doorbell
# scan, per-stage breakdown, plots and the summary tables. Run by
# run_bench.sh (`make bench`); on its own:
#
#   B=build bench/run_paced.sh [--quick] [PROFILE...]     (default: sbus pci)
#
# For each profile a private vipd hosts two NICs with that profile; the
# client runs on via0 and the server on via1, as the paper's two hosts.
# Written to bench/results (or $RESULTS):
#   PROFILE_MODE_latency.csv    vip_send_lat, 4 B .. 32 KiB, one-way us
#   PROFILE_MODE_imm_latency.csv  vip_send_lat --imm, 4 B, one-way us (immediate data)
#   PROFILE_MODE_bandwidth.csv  vip_send_bw, 4 B .. 32 KiB, streaming
#   PROFILE_rdma_write_latency.csv    vip_write_lat, 4 B .. 32 KiB, one-way us
#   PROFILE_rdma_write_bandwidth.csv  vip_write_bw, 4 B .. 32 KiB, streaming
#   PROFILE_logp.csv            vip_logp (4-byte messages), us
#   PROFILE_scan.csv            4-byte one-way latency with 1..16 VIs per NIC
#   PROFILE_breakdown.txt       median modelled time per stage (vipctl trace stats)
#   PROFILE_model.csv           what vip_model predicts (no measurement)
#   PROFILE_model_bw.csv, PROFILE_model_rdma_bw.csv   its bandwidth curves, for the plots
#   PROFILE_model_lat.csv       its latency curve of each mode and of RDMA write, for the plots
#   PROFILE_latency.png, PROFILE_bandwidth.png   one curve per mode
#   paced_summary.txt           the tables printed at the end
#   model_validate.txt, .md     vip_model --validate: the model and these measurements
#                               against every published figure (sbus and pci both run);
#                               model_validate.status holds its exit status; a full run
#                               (not --quick) also puts the table into bench/README.md
# MODE is standard, descriptorless or merged (VIP_EXT_MODE); RDMA always
# takes the standard path, so its sweeps run once. Every sweep, LogP, the
# scan and the breakdown run in virtual time (PACED_CLOCK=real: in real
# time).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=bench/bench_lib.sh
. "$HERE/bench_lib.sh"
bench_find_build "$ROOT"
BIN=$B/bin
RES=${RESULTS:-$HERE/results}
QUICK=0
PROFILES=()
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "run_paced.sh: unknown option '$1'" >&2; exit 2 ;;
    *) PROFILES+=("$1") ;;
    esac
    shift
done
[ ${#PROFILES[@]} -gt 0 ] || PROFILES=(sbus pci)
# The clock of the sweeps, LogP, scan and breakdown (bench_lib.sh).
bench_paced_clock run_paced.sh
MODES=(standard descriptorless merged)

bench_need run_paced.sh vip_send_lat vip_send_bw vip_write_lat vip_write_bw vip_logp vip_model vipd vipctl
mkdir -p "$RES"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vipbench-paced.XXXXXX")
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
START=$(date +%s)
elapsed() { echo "$(($(date +%s) - START)) s"; }

run() {
    if ! timeout 300 "$@" 2>"$WORK/err"; then
        say "error: '$*' failed:"
        cat "$WORK/err" >&2
        exit 1
    fi
}

if [ "$QUICK" = 1 ]; then
    SIZES="4 64 256 1024 4096 16384 32768"
    LAT_N=300 BW_N=300 LOGP_N=300 SCAN_N=300
else
    SIZES="4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768"
    LAT_N=1500 BW_N=1500 LOGP_N=1500 SCAN_N=1000
fi

# Iterations for one size: fewer for big messages (~1.5 ms one-way at 32 KiB).
iters_for() { # size base
    local s=$1 n=$2
    if [ "$s" -ge 8192 ]; then n=$((n * 2048 / s)); fi
    [ "$n" -lt 100 ] && n=100
    echo "$n"
}

# the data lines of CSVs from several runs, under one header
merge_csv() { # out files...
    local out=$1
    shift
    {
        grep -h '^#' "$1"
        grep -h -m1 '^bytes,' "$1"
        for f in "$@"; do grep -hv '^#\|^bytes,' "$f"; done
    } >"$out"
}

for prof in "${PROFILES[@]}"; do
    say "== profile $prof ($(elapsed))"
    "$BIN/vip_model" -d "$ROOT/lanai-fw/profiles" --csv "$prof" >"$RES/${prof}_model.csv"
    {
        echo "# what the timing model predicts for streaming bandwidth (vip_model)"
        echo "bytes,Mbit_per_s"
        awk -F, '$2 ~ /^bw_/ { sub(/^bw_/, "", $2); print $2 "," $3 }' "$RES/${prof}_model.csv"
    } >"$RES/${prof}_model_bw.csv"
    {
        echo "# what the timing model predicts for streaming RDMA write bandwidth (vip_model)"
        echo "bytes,Mbit_per_s"
        awk -F, '$2 ~ /^rdma_write_bw_/ { sub(/^rdma_write_bw_/, "", $2); print $2 "," $3 }' \
            "$RES/${prof}_model.csv"
    } >"$RES/${prof}_model_rdma_bw.csv"
    {
        echo "# what the timing model predicts for one-way latency, microseconds (vip_model)"
        echo "bytes,standard,descriptorless,merged,rdma_write"
        awk -F, '$2 ~ /^lat_/ { split($2, k, "_"); v[k[3], k[2]] = $3; s[k[3]] = 1 }
                 $2 ~ /^rdma_write_oneway_/ { sub(/^rdma_write_oneway_/, "", $2); v[$2, "rdma"] = $3 }
                 END { for (n = 4; n <= 32768; n *= 2)
                           printf "%d,%s,%s,%s,%s\n", n, v[n, "standard"], v[n, "descriptorless"], v[n, "merged"], v[n, "rdma"] }' \
            "$RES/${prof}_model.csv"
    } >"$RES/${prof}_model_lat.csv"
    VIP_PROFILE=$prof VIP_CLOCK=$PACED_CLOCK vipd_start
    for mode in "${MODES[@]}"; do
        say "   $prof/$mode: latency sweep ($(elapsed))"
        files=()
        for s in $SIZES; do
            VIP_EXT_MODE=$mode run "$BIN/vip_send_lat" -d via1 -s "$s" \
                -n "$(iters_for "$s" $LAT_N)" -w 100 --csv >"$WORK/lat_$s.csv"
            files+=("$WORK/lat_$s.csv")
        done
        merge_csv "$RES/${prof}_${mode}_latency.csv" "${files[@]}"
        # what a message-passing library of the era sends: a sequence number
        # in every message's immediate data, which the extensions must carry
        VIP_EXT_MODE=$mode run "$BIN/vip_send_lat" -d via1 -s 4 --imm -n "$LAT_N" -w 100 \
            --csv >"$RES/${prof}_${mode}_imm_latency.csv"
        say "   $prof/$mode: bandwidth sweep ($(elapsed))"
        files=()
        for s in $SIZES; do
            VIP_EXT_MODE=$mode run "$BIN/vip_send_bw" -d via1 -s "$s" \
                -n "$(iters_for "$s" $BW_N)" -w 100 --csv >"$WORK/bw_$s.csv"
            files+=("$WORK/bw_$s.csv")
        done
        merge_csv "$RES/${prof}_${mode}_bandwidth.csv" "${files[@]}"
    done

    say "   $prof: LogP ($(elapsed))"
    run "$BIN/vip_logp" -d via1 -n "$LOGP_N" --csv >"$RES/${prof}_logp.csv"

    say "   $prof: doorbell scan with 1..16 VIs ($(elapsed))"
    {
        echo "# 4-byte one-way latency (median, microseconds) against the VIs on each NIC;"
        echo "# the firmware of profile $prof polls every VI's doorbells in turn"
        echo "vis,median_us,p90_us"
        for v in 1 2 4 8 16; do
            run "$BIN/vip_send_lat" -d via1 -s 4 -n "$SCAN_N" -w 100 --vis $((v - 1)) --csv \
                >"$WORK/scan.csv"
            awk -F, -v v=$v '/^#/ || /^bytes,/ { next } NF > 1 { print v "," $4 "," $5; exit }' \
                "$WORK/scan.csv"
        done
    } >"$RES/${prof}_scan.csv"

    say "   $prof: per-stage breakdown from the firmware trace ($(elapsed))"
    for s in 4 4096; do
        "$BIN/vipctl" -s "$VIPD_SOCKET" trace off >/dev/null
        "$BIN/vipctl" -s "$VIPD_SOCKET" trace on >/dev/null
        run "$BIN/vip_send_lat" -d via1 -s $s -n 200 -w 10 --csv >/dev/null
        "$BIN/vipctl" -s "$VIPD_SOCKET" trace stats >"$WORK/stats_$s.txt"
        "$BIN/vipctl" -s "$VIPD_SOCKET" trace off >/dev/null
    done
    {
        echo "# $prof: median modelled time per stage, microseconds (vipctl trace stats),"
        echo "# ping-pong of 4-byte and of 4096-byte messages"
        echo "stage,us_4B,us_4096B"
        join -t, <(awk '$1 ~ /^[TR][0-9]_/ { print $1 "," $3 }' "$WORK/stats_4.txt" | sort) \
            <(awk '$1 ~ /^[TR][0-9]_/ { print $1 "," $3 }' "$WORK/stats_4096.txt" | sort) |
            sort
    } >"$RES/${prof}_breakdown.csv"
    vipd_stop

    VIP_PROFILE=$prof VIP_CLOCK=$PACED_CLOCK vipd_start
    say "   $prof: RDMA write: latency and bandwidth sweeps ($(elapsed))"
    lfiles=() bfiles=()
    for s in $SIZES; do
        run "$BIN/vip_write_lat" -d via1 -s "$s" -n "$(iters_for "$s" $LAT_N)" -w 100 --csv \
            >"$WORK/wlat_$s.csv"
        run "$BIN/vip_write_bw" -d via1 -s "$s" -n "$(iters_for "$s" $BW_N)" -w 100 --csv \
            >"$WORK/wbw_$s.csv"
        lfiles+=("$WORK/wlat_$s.csv")
        bfiles+=("$WORK/wbw_$s.csv")
    done
    merge_csv "$RES/${prof}_rdma_write_latency.csv" "${lfiles[@]}"
    merge_csv "$RES/${prof}_rdma_write_bandwidth.csv" "${bfiles[@]}"

    vipd_stop

    if command -v gnuplot >/dev/null 2>&1; then
        gnuplot -e "prof='$prof'" -e "dir='$RES'" "$HERE/plot_paced.gp"
    fi
done

say "paced runs done ($(elapsed)); summary:"
{
    echo "Clock: every sweep, LogP, scan and breakdown in $PACED_CLOCK time"
    "$HERE/paced_summary.sh" "$RES" "${PROFILES[@]}"
} | tee "$RES/paced_summary.txt"

# The model and these measurements against the published figures: it needs
# both profiles' runs. Its verdict is left for run_bench.sh to report.
if printf '%s\n' "${PROFILES[@]}" | grep -qx sbus && printf '%s\n' "${PROFILES[@]}" | grep -qx pci; then
    st=0
    "$BIN/vip_model" -d "$ROOT/lanai-fw/profiles" --validate --results "$RES" \
        >"$RES/model_validate.txt" || st=$?
    "$BIN/vip_model" -d "$ROOT/lanai-fw/profiles" --validate --results "$RES" --markdown \
        >"$RES/model_validate.md" || true
    echo "$st" >"$RES/model_validate.status"
    echo
    cat "$RES/model_validate.txt"
    # A full run puts its table into bench/README.md, between the markers.
    if [ "$QUICK" = 0 ] && grep -q '^<!-- vip_model --validate: begin' "$HERE/README.md"; then
        {
            echo "Run of $(date -u '+%Y-%m-%d %H:%M UTC') (\`make bench\`, \`bench/run_paced.sh\`):"
            echo
            cat "$RES/model_validate.md"
        } >"$WORK/validate.md"
        awk -v table="$WORK/validate.md" '
            /^<!-- vip_model --validate: begin/ { print; while ((getline l < table) > 0) print l; skip = 1; next }
            /^<!-- vip_model --validate: end/ { skip = 0 }
            !skip' "$HERE/README.md" >"$WORK/README.md" && cat "$WORK/README.md" >"$HERE/README.md"
    fi
fi

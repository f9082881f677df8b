#!/usr/bin/env bash
# paced_summary.sh RESULTS_DIR PROFILE... - the tables of `make bench`
# from the files run_paced.sh wrote: measured medians, with the timing
# model's prediction (vip_model) beside each and a verdict on each pair:
# "ok" within TOL (10%) of the model, else "MISS" and how far; a list of
# the misses ends the tables.
set -euo pipefail
RES=$1
shift
MODES=(standard descriptorless merged)

# value of a model quantity: model PROF QUANTITY
model() { awk -F, -v q="$2" '$2 == q { print $3; exit }' "$RES/$1_model.csv"; }
# median one-way latency of SIZE in PROF/MODE
# (nothing when the run left no file: the table says n/a)
lat() {
    [ -f "$RES/$1_$2_latency.csv" ] || return 0
    awk -F, -v s="$3" '/^#/ || /^bytes,/ { next } $1 == s { print $4; exit }' "$RES/$1_$2_latency.csv"
}
bw() {
    [ -f "$RES/$1_$2_bandwidth.csv" ] || return 0
    awk -F, -v s="$3" '/^#/ || /^bytes,/ { next } $1 == s { print $5; exit }' "$RES/$1_$2_bandwidth.csv"
}
# the same of RDMA write (PROF SIZE)
rlat() { lat "$1" rdma_write "$2"; }
rbw() { bw "$1" rdma_write "$2"; }
# least-squares slope of median latency over 4 B .. 4 KB, as Mbit/s
slope() {
    awk -F, '/^#/ || /^bytes,/ { next } $1 >= 4 && $1 <= 4096 { n++; x += $1; y += $4; xx += $1 * $1; xy += $1 * $4 }
        END { b = (n * xy - x * y) / (n * xx - x * x); if (b > 0) printf "%.1f", 8 / b; else print "nan" }' \
        "$RES/$1_standard_latency.csv"
}
TOL=0.10
MISSES=()
# cell MEASURED MODEL DIGITS WHAT -> CELL: "m (model) ok" or "m (model)
# MISS+x%" (no measurement: n/a, no verdict); a miss is listed at the end.
# (It sets CELL rather than printing, so that MISSES survives: no subshell.)
cell() {
    local m=$1 mod=$2 d=$3 what=$4
    if [ -z "$m" ] || [ "$m" = n/a ]; then
        CELL=$(printf 'n/a (%.*f)' "$d" "$mod")
        return
    fi
    CELL=$(awk -v m="$m" -v t="$mod" -v d="$d" -v tol="$TOL" 'BEGIN {
        e = t > 0 ? (m - t) / t : 0
        printf "%s (%.*f) %s", m, d, t, (e <= tol && e >= -tol) ? "ok" : sprintf("MISS%+.0f%%", 100 * e) }')
    case $CELL in *MISS*) MISSES+=("$what: $m measured, $mod predicted") ;; esac
}
target() { case $1 in sbus) echo "23 185" ;; pci) echo "26 360" ;; *) echo "- -" ;; esac; }
verdict() { # measured target (within TOL)
    awk -v m="$1" -v t="$2" -v tol="$TOL" 'BEGIN { if (t == "-") { print "" } else { d = (m - t) / t; printf "%+.1f%% %s", 100 * d, (d < 0 ? -d : d) <= tol ? "PASS" : "MISS" } }'
}

echo "Calibration (spec-notes/design.md, Calibration): target within 10%"
printf '  %-8s %22s %10s   %26s %10s\n' profile "4-byte one-way [us]" target "ping-pong slope [Mbit/s]" target
for p in "$@"; do
    read -r tl ts <<<"$(target "$p")"
    l=$(lat "$p" standard 4)
    s=$(slope "$p")
    printf '  %-8s %22s %10s   %26s %10s\n' "$p" "$l ($(verdict "$l" "$tl"))" "$tl" \
        "$s ($(verdict "$s" "$ts"))" "$ts"
done
echo

# The 4-byte one-way latency of each mode, a row per profile: sfx names the
# runs' files (_imm: with immediate data); without it, the model's
# prediction beside each.
mode_rows() {
    local sfx=$1 p m v
    shift
    printf '  %-8s' profile
    for m in "${MODES[@]}"; do printf ' %28s' "$m"; done
    echo
    for p in "$@"; do
        printf '  %-8s' "$p"
        for m in "${MODES[@]}"; do
            v=$(lat "$p" "$m$sfx" 4)
            [ -n "$sfx" ] || { cell "$v" "$(model "$p" "ext_${m}_4B")" 2 "$p $m 4 B one-way"; v=$CELL; }
            [ -n "$v" ] || v=n/a
            printf ' %28s' "$v"
        done
        echo
    done
    echo
}

echo "4-byte one-way latency by extension mode [us], median measured (model prediction)"
mode_rows "" "$@"
echo "The same with a sequence number in every message's immediate data (vip_send_lat --imm),"
echo "as message-passing libraries of the VIA era sent [us], median measured"
mode_rows _imm "$@"

echo "LogP, 4-byte messages [us], median measured (model prediction)"
printf '  %-8s %24s %24s %24s %24s\n' profile o_s o_r g L
for p in "$@"; do
    read -r _ os or g L < <(awk -F, '/^#/ || /^bytes,/ { next } NF > 5 { print $2, $3, $4, $5, $6; exit }' "$RES/${p}_logp.csv")
    printf '  %-8s' "$p"
    for q in o_s o_r g L; do
        case $q in o_s) v=$os ;; o_r) v=$or ;; g) v=$g ;; L) v=$L ;; esac
        cell "$v" "$(model "$p" "$q")" 2 "$p LogP $q"
        printf ' %24s' "$CELL"
    done
    echo
done
echo

echo "Streaming bandwidth [Mbit/s], measured (model prediction)"
printf '  %-8s' profile
for s in 256 1024 4096 16384; do printf ' %24s' "$s B"; done
echo
for p in "$@"; do
    printf '  %-8s' "$p"
    for s in 256 1024 4096 16384; do
        cell "$(bw "$p" standard "$s")" "$(model "$p" "bw_$s")" 0 "$p streaming $s B"
        printf ' %24s' "$CELL"
    done
    echo
done
echo

echo "RDMA write one-way latency [us] (ping-pong, each side polls its memory), median measured (model)"
printf '  %-8s' profile
for s in 4 256 1024 4096 16384; do printf ' %24s' "$s B"; done
echo
for p in "$@"; do
    printf '  %-8s' "$p"
    for s in 4 256 1024 4096 16384; do
        cell "$(rlat "$p" "$s")" "$(model "$p" "rdma_write_oneway_$s")" 2 "$p RDMA write $s B one-way"
        printf ' %24s' "$CELL"
    done
    echo
done
echo

echo "RDMA write streaming bandwidth [Mbit/s], measured (model prediction)"
printf '  %-8s' profile
for s in 256 1024 4096 16384; do printf ' %24s' "$s B"; done
echo
for p in "$@"; do
    printf '  %-8s' "$p"
    for s in 256 1024 4096 16384; do
        cell "$(rbw "$p" "$s")" "$(model "$p" "rdma_write_bw_$s")" 0 "$p RDMA write streaming $s B"
        printf ' %24s' "$CELL"
    done
    echo
done
echo

echo "Doorbell scan: 4-byte one-way latency [us] with N VIs per NIC, measured (model)"
printf '  %-8s' profile
for v in 1 2 4 8 16; do printf ' %22s' "$v VI"; done
echo
for p in "$@"; do
    printf '  %-8s' "$p"
    for v in 1 2 4 8 16; do
        m=$(awk -F, -v v=$v '/^#/ || /^vis,/ { next } $1 == v { print $2 }' "$RES/${p}_scan.csv")
        cell "$m" "$(model "$p" "scan_${v}vi_4B")" 1 "$p scan $v VIs 4 B one-way"
        printf ' %22s' "$CELL"
    done
    echo
done
echo

echo "Per-stage breakdown: median modelled time per stage [us] (firmware trace)"
printf '  %-12s' stage
for p in "$@"; do printf ' %12s %12s' "$p 4B" "$p 4KB"; done
echo
for st in T1_RING T2_BELL T3_XDES T4_XDATA T5_TRANSMIT T6_UPDT R1_RING R3_RECEIVE R4_XDES R5_XDATA R6_UPDT; do
    printf '  %-12s' "$st"
    for p in "$@"; do
        read -r a b < <(awk -F, -v s="$st" '$1 == s { print $2, $3; f = 1 } END { if (!f) print "- -" }' "$RES/${p}_breakdown.csv")
        printf ' %12s %12s' "$a" "$b"
    done
    echo
done
echo
echo "Against the model: ${#MISSES[@]} of the pairs above are more than $(awk -v t="$TOL" 'BEGIN { printf "%.0f", 100 * t }')% off"
for m in "${MISSES[@]}"; do echo "  MISS $m"; done

#!/usr/bin/env bash
# compare_native.sh - the emulated VIA NIC (native profile) against the
# fastest shared-memory libraries on this machine, like for like, measured in
# the same run: UCX (ucx_perftest, Debian ucx-utils) and libfabric's shm
# provider (fi_pingpong -p shm -e rdm, Debian libfabric-bin); the doorbell
# scan of a paced profile against its timing model; wake-up and first-message
# times against a pipe and a UDP socket pair.
#
#   B=build bench/compare_native.sh [--quick] [--runs N]
#
# Every line pairs the same kind of measurement on both sides and says which
# statistic each side gives:
#   4 B one-way        ping-pong, RTT/2: our median vs ucx_perftest -t tag_lat's 50th
#                      percentile (its "typical"); our mean vs its mean and vs
#                      fi_pingpong's usec/xfer (a mean: total time / transfers)
#   64 KiB ping-pong   ping-pong vs fi_pingpong -S 65536: bytes / mean one-way time
#   1 MiB streaming    vip_send_bw -b 1 (64 sends in flight) vs ucx_perftest -t tag_bw -O 64
#                      (as many): bytes / time of the whole run (ucx's "overall"). Both
#                      send every message from one buffer and receive into one (-b 1;
#                      perftest's way), so the data is as hot in the cache on both
#                      sides; a second line gives ours with a buffer per descriptor
#   8 B message rate   vip_send_bw -s 8 -b 1 vs ucx_perftest -t tag_bw -s 8 -O 64 (a window
#                      of 64 each): messages / time of the whole run ("overall")
#   RDMA write         vip_write_bw 1 MiB (a slot per write) vs our vip_send_bw with a
#                      buffer per descriptor (the same program logic, buffers, copies
#                      and statistic: parity, within the 10% the two streams move
#                      between runs) and vs ucx_perftest -t put_bw (UCT posix, bcopy)
#   VIs                native: 4 B median with 1024 idle VIs per process, and with 1024
#                      VIs active (vip_send_lat --active: round-robin ping-pong over
#                      all), vs one VI; paced profile pci (a firmware that polls every
#                      VI's doorbells in turn): the growth of the 4 B median from 1 to 64
#                      VIs per NIC (each count's lowest median over the runs) vs what the
#                      timing model predicts (vip_model --vis)
#   events             vip_send_lat -e (VipRecvWait/VipSendWait) vs polling, with the
#                      library's adaptive spin and with none (VIP_WAIT_SPIN_US=0: every
#                      wait sleeps)
#   first message      vip_wake_lat's test first (the first message on a new connection,
#                      to a receiver blocked since it connected) vs os_wake_lat's over a
#                      new pipe and a new UDP socket pair
#   wake-up, delivery  vip_wake_lat vs os_wake_lat (pipe, UDP): one-way time to a
#                      receiver asleep in its wait; the same with the sender computing
# Warm-up: ours and UCX's runs of a line leave out the same number of
# iterations first (a tenth of the run, ucx_warmup in bench_lib.sh).
# Each figure is the median over the runs (5, 3 with --quick); each ratio the
# median of the per-run ratios (ours and the reference run back to back). Each
# line shows its target (issue 8) and PASS/MISS; "-" where there is none.
# Exit status: 0 when everything was measured (whatever the verdicts), 1 when
# a measurement failed. Without ucx_perftest the UCX lines say n/a.
#
# Uses private vipds (their own sockets in temporary directories), stopped at
# the end even on failure. UCX runs with its own choice of transports unless
# UCX_TLS is set (the header says which).
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
    RUNS=${RUNS:-3}; LAT_N=20000; PP_N=2000; BW_N=2000; MR_N=200000; EV_N=2000
    SCAN_N=300; WAKE_N=300; WAKE_M=50
else
    RUNS=${RUNS:-5}; LAT_N=100000; PP_N=10000; BW_N=10000; MR_N=1000000; EV_N=10000
    SCAN_N=1000; WAKE_N=1000; WAKE_M=100
fi
NVIS=1024                 # the native VI lines
PACED=pci                 # the paced profile of the scan line
SCAN_VIS=64               # its VIs per NIC (the profile's SRAM holds 112)
PP_SIZE=65536
WINDOW=64                 # sends in flight when streaming, both sides (vip_send_bw's default)
case "$RUNS" in '' | *[!0-9]* | 0) echo "compare_native.sh: --runs: a positive number" >&2; exit 2 ;; esac

# wake-up tests: the programs' defaults for the rest (sender sleeps 1500 us
# between messages, computes 5000 us after posting; T = 100 ms). The sender's
# thread runs on CPU 0 and the receiver's on CPU 1, so that every transport's
# wake-up crosses cores.
WAKE_ARGS=(-n "$WAKE_N" -m "$WAKE_M")
WAKE_CPUS="as the scheduler places them"
if [ "$(nproc)" -ge 2 ]; then
    WAKE_ARGS+=(--cpus "0,1")
    WAKE_CPUS="sender's thread on CPU 0, receiver's on CPU 1"
fi

for p in vip_send_lat vip_send_bw vip_write_bw vip_wake_lat os_wake_lat vip_model vipd vipctl; do
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
    echo "compare_native.sh: ucx_perftest not found (Debian: ucx-utils): UCX lines n/a" >&2
fi
PROFILES=$(cd "$HERE/.." && pwd)/lanai-fw/profiles

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vipcompare.XXXXXX")
trap 'bench_cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# ours PROGRAM ARGS...: run one of our programs with --csv; its data line's
# columns go to ROW (an array, 1-based as in the CSV: ROW[4] is column 4).
ours() {
    if ! timeout 600 "$@" --csv >"$WORK/ours.out" 2>&1; then
        say "error: '$*' failed:"
        cat "$WORK/ours.out" >&2
        exit 1
    fi
    local line
    line=$(awk -F, '/^#/ || /^bytes,/ { next } NF > 1 { print; exit }' "$WORK/ours.out")
    if [ -z "$line" ]; then
        say "error: no data line in the output of '$*':"
        cat "$WORK/ours.out" >&2
        exit 1
    fi
    IFS=, read -r -a ROW <<<",$line"
}

# wake_run NAME PROGRAM ARGS...: one vip_wake_lat/os_wake_lat run with --csv;
# appends the median of each test it ran to NAME_first, NAME_wake or NAME_cp
# (compute), the compute test's maximum to NAME_cpx, and the messages not
# delivered within T (all tests) to NAME_late.
wake_run() {
    local name=$1 v t got=0
    shift
    if ! timeout 300 "$@" --csv >"$WORK/wake.out" 2>&1; then
        say "error: '$*' failed:"
        cat "$WORK/wake.out" >&2
        exit 1
    fi
    local -n f=${name}_first w=${name}_wake cp=${name}_cp cpx=${name}_cpx late=${name}_late
    # columns: test,transport,receiver,bytes,iters,late,slept_pct,min,p10,median,p90,max
    for t in first wake compute; do
        v=$(csv_test_col $t 10 <"$WORK/wake.out")
        [ -n "$v" ] || continue
        got=$((got + 1))
        case $t in
        first) f+=("$v") ;;
        wake) w+=("$v") ;;
        compute) cp+=("$v"); cpx+=("$(csv_test_col $t 12 <"$WORK/wake.out")") ;;
        esac
    done
    v=$(awk -F, '/^#/ || /^test,/ { next } NF > 6 { n += $6 } END { print n + 0 }' "$WORK/wake.out")
    late+=("$v")
    if [ "$got" = 0 ]; then
        say "error: no data line in the output of '$*':"
        cat "$WORK/wake.out" >&2
        exit 1
    fi
}

# calc EXPR: awk arithmetic, printed with %.4g
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0) ? a / b : 0 }'; }

say "compare_native: $RUNS runs of each measurement$([ "$QUICK" = 1 ] && echo ' (--quick)')"

# ---- native profile ----------------------------------------------------------------
lat_med=() lat_avg=() ucx_p50=() ucx_avg=() fi_lat=()
pp=() fi_pp=() bw=() bwm=() ucx_bw=() mr=() ucx_mr=() wbw=() ucx_put=()
lat_base=() lat_idle=() lat_active=() ev=() ev_sleep=()
# wake-up and delivery: 16 B ours / pipe / udp, 1 MiB ours / pipe (see wake_run)
for n in via pipe udp big_via big_pipe; do
    eval "${n}_first=() ${n}_wake=() ${n}_cp=() ${n}_cpx=() ${n}_late=()"
done
loads=()
# native_round R: one run of every native measurement.
native_round() {
    local r=$1
    loads+=("$(cut -d' ' -f1 /proc/loadavg)")
    # Each pair that forms a ratio runs back to back.
    say "  run $r/$RUNS: 4 B ping-pong: vip_send_lat, ucx_perftest -t tag_lat, fi_pingpong"
    ours "$BIN/vip_send_lat" -s 4 -n "$LAT_N" -w "$(ucx_warmup "$LAT_N")"
    lat_med+=("${ROW[4]}") lat_avg+=("${ROW[8]}")
    if [ "$HAVE_UCX" = 1 ]; then
        ucx_run tag_lat 4 "$LAT_N"
        ucx_p50+=("$UCX_P50") ucx_avg+=("$UCX_AVG")
    fi
    fi_run 4 "$LAT_N"
    fi_lat+=("$FI_USEC")
    say "  run $r/$RUNS: 64 KiB ping-pong: vip_send_lat, fi_pingpong"
    ours "$BIN/vip_send_lat" -s "$PP_SIZE" -n "$PP_N"
    pp+=("$(calc "$PP_SIZE / ${ROW[8]}")")
    fi_run "$PP_SIZE" "$PP_N"
    fi_pp+=("$(calc "$PP_SIZE / $FI_USEC")")
    say "  run $r/$RUNS: 1 MiB streaming: vip_send_bw, vip_write_bw, ucx_perftest tag_bw, put_bw"
    ours "$BIN/vip_send_bw" -s 1M -n "$BW_N" -b 1 -w "$(ucx_warmup "$BW_N")"
    bw+=("${ROW[4]}")
    ours "$BIN/vip_send_bw" -s 1M -n "$BW_N" -w "$(ucx_warmup "$BW_N")"
    bwm+=("${ROW[4]}")
    ours "$BIN/vip_write_bw" -s 1M -n "$BW_N" -w "$(ucx_warmup "$BW_N")"
    wbw+=("${ROW[4]}")
    if [ "$HAVE_UCX" = 1 ]; then
        ucx_run tag_bw 1048576 "$BW_N" -O "$WINDOW"
        ucx_bw+=("$UCX_MBS")
        ucx_run put_bw 1048576 "$BW_N" -x posix -d memory -D bcopy
        ucx_put+=("$UCX_MBS")
    fi
    say "  run $r/$RUNS: 8 B message rate: vip_send_bw -s 8, ucx_perftest -t tag_bw -s 8"
    ours "$BIN/vip_send_bw" -s 8 -n "$MR_N" -b 1 -w "$(ucx_warmup "$MR_N")"
    mr+=("${ROW[6]}")
    if [ "$HAVE_UCX" = 1 ]; then
        ucx_run tag_bw 8 "$MR_N" -O "$WINDOW"
        ucx_mr+=("$UCX_MR")
    fi
    # The VI and events lines get a one-VI polling run of their own right
    # before them: this VM's 4 B median flips between levels (0.26 and
    # 0.52 us) from minute to minute, and the first run is minutes back.
    say "  run $r/$RUNS: 1 VI, $NVIS VIs idle, $NVIS VIs active (vip_send_lat --vis, --active)"
    ours "$BIN/vip_send_lat" -s 4 -n "$LAT_N"
    lat_base+=("${ROW[4]}")
    ours "$BIN/vip_send_lat" -s 4 -n "$LAT_N" --vis "$NVIS"
    lat_idle+=("${ROW[4]}")
    ours "$BIN/vip_send_lat" -s 4 -n "$LAT_N" --active "$NVIS"
    lat_active+=("${ROW[4]}")
    say "  run $r/$RUNS: events: vip_send_lat -e, adaptive spin and VIP_WAIT_SPIN_US=0"
    ours "$BIN/vip_send_lat" -s 4 -n "$LAT_N" -e
    ev+=("${ROW[4]}")
    VIP_WAIT_SPIN_US=0 ours "$BIN/vip_send_lat" -s 4 -n "$EV_N" -e
    ev_sleep+=("${ROW[4]}")
    say "  run $r/$RUNS: first message and wake-up: vip_wake_lat, os_wake_lat pipe, udp"
    wake_run pipe "$BIN/os_wake_lat" -t pipe -s 16 "${WAKE_ARGS[@]}"
    wake_run via "$BIN/vip_wake_lat" -s 16 "${WAKE_ARGS[@]}"
    wake_run udp "$BIN/os_wake_lat" -t udp -s 16 "${WAKE_ARGS[@]}"
    wake_run big_via "$BIN/vip_wake_lat" -s 1M --test compute "${WAKE_ARGS[@]}"
    wake_run big_pipe "$BIN/os_wake_lat" -t pipe -s 1M --test compute "${WAKE_ARGS[@]}"
}

# spread NAME_A NAME_B -> "low high" of the per-run ratios A[i]/B[i]; from
# five runs on, without the lowest and the highest (one run disturbed by a
# neighbour is then an outlier, not a disagreement of the runs)
spread() {
    local -n a=$1 b=$2
    local i
    for i in "${!a[@]}"; do
        [ -n "${b[$i]:-}" ] && ratio "${a[$i]}" "${b[$i]}" && echo
    done | sort -g | awk '{ v[NR] = $1 } END {
        lo = 1; hi = NR; if (NR >= 5) { lo = 2; hi = NR - 1 }
        print v[lo] + 0, v[hi] + 0 }'
}
# unstable NAME_A NAME_B: the runs disagree (per-run ratios more than 1.5x
# apart, outliers aside), as pyperf refuses to compare a benchmark whose
# runs disagree.
unstable() {
    local -n ub=$2
    [ "${#ub[@]}" -gt 1 ] || return 1
    local lo hi
    read -r lo hi <<<"$(spread "$1" "$2")"
    awk -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(lo <= 0 || hi > 1.5 * lo) }'
}
# The lines judged against a target; a round is added (at most EXTRA)
# while one of them is unstable, and one still unstable is not judged.
JUDGED=("lat_med ucx_p50" "pp fi_pp" "bw ucx_bw" "mr ucx_mr" "wbw bwm" "lat_idle lat_base"
        "via_wake pipe_wake")
EXTRA=2
VIP_PROFILE= vipd_start
for r in $(seq "$RUNS"); do
    native_round "$r"
done
for extra in $(seq "$EXTRA"); do
    again=""
    for pair in "${JUDGED[@]}"; do
        # shellcheck disable=SC2086
        unstable $pair && again="$again ${pair%% *}/${pair##* }"
    done
    [ -n "$again" ] || break
    say "  unstable:$again: one more run"
    RUNS=$((RUNS + 1))
    native_round "$RUNS"
done
vipd_stop

# ---- paced profile: the doorbell scan against the model ------------------------------
# One VI per process on each NIC (-d via1: the two processes on different
# NICs, as run_paced.sh) plus SCAN_VIS - 1 idle ones; the model's prediction
# for the same counts (vip_model --vis).
scan1=() scanN=()
"$BIN/vip_model" -d "$PROFILES" --csv --vis 1 --vis "$SCAN_VIS" "$PACED" >"$WORK/model.csv"
model1=$(awk -F, '$2 == "scan_1vi_4B" { print $3 }' "$WORK/model.csv")
modelN=$(awk -F, -v q="scan_${SCAN_VIS}vi_4B" '$2 == q { print $3 }' "$WORK/model.csv")
VIP_PROFILE=$PACED vipd_start
for r in $(seq "$RUNS"); do
    say "  run $r/$RUNS: paced $PACED: vip_send_lat -d via1 with 1 and $SCAN_VIS VIs per NIC"
    ours "$BIN/vip_send_lat" -d via1 -s 4 -n "$SCAN_N" -w 30
    scan1+=("${ROW[4]}")
    ours "$BIN/vip_send_lat" -d via1 -s 4 -n "$SCAN_N" -w 30 --vis $((SCAN_VIS - 1))
    scanN+=("${ROW[4]}")
done
vipd_stop

# ---- the table ---------------------------------------------------------------------------
# verdict VALUE OP LIMIT -> PASS / MISS ("a..b": inside)
verdict() {
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
        if (op == "in") { split(l, b, /\.\./); ok = v >= b[1] && v <= b[2] }
        else ok = (op == "<=") ? (v <= l) : (v >= l)
        print (ok ? "PASS" : "MISS") }'
}

# Ratios are taken per run and the median of those reported: on a VM every
# program's latency shifts between levels from minute to minute, and pairing
# keeps such shifts out of the ratios.
pair_ratios() { # NAME_A NAME_B -> median of A[i]/B[i]
    local -n a=$1 b=$2
    local i rs=()
    for i in "${!a[@]}"; do
        rs+=("$(ratio "${a[$i]}" "${b[$i]}")")
    done
    median "${rs[@]}"
}
pct() { awk -v r="$1" 'BEGIN { printf "%.0f%%", r * 100 }'; }
times() { awk -v r="$1" 'BEGIN { printf "%.2fx", r }'; }

W='%-44s %10s %10s  %-28s %7s %10s %5s\n'
# row LABEL OURS REF STAT RATIO TARGET RESULT
row() { printf "$W" "$@"; }
num() { awk -v v="$1" -v d="$2" 'BEGIN { printf "%.*f", d, v }'; }
# line LABEL A B DIGITS STAT KIND TARGET: medians of arrays A and B, their
# paired ratio as KIND (x: A/B, pct: A/B in %), and the verdict against
# TARGET ("<= 1.2", ">= 1", or "-").
line() {
    local label=$1 a=$2 b=$3 d=$4 stat=$5 kind=$6 target=$7
    local -n av=$a bv=$b
    if [ "${#bv[@]}" = 0 ]; then
        row "$label" "$(num "$(median "${av[@]}")" "$d")" "n/a" "$stat" "-" "-" "-"
        return
    fi
    local r shown tshown="-" res="-"
    r=$(pair_ratios "$a" "$b")
    if [ "$kind" = pct ]; then shown=$(pct "$r"); else shown=$(times "$r"); fi
    if [ "$target" != - ]; then
        local op=${target% *} lim=${target#* }
        res=$(verdict "$r" "$op" "$lim")
        if [ "$kind" = pct ]; then tshown="$op $(pct "$lim")"; else tshown="$op ${lim}x"; fi
        if unstable "$a" "$b"; then
            res=UNSTABLE
            UNSTABLE_NOTES+=("$label: per-run ratios $(spread "$a" "$b" | tr ' ' '-'), loads ${loads[*]}")
        fi
    fi
    row "$label" "$(num "$(median "${av[@]}")" "$d")" "$(num "$(median "${bv[@]}")" "$d")" \
        "$stat" "$shown" "$tshown" "$res"
}
mbs() { # MB/s -> GB/s, for the table
    local -n src=$1
    local -n dst=$2
    local v
    dst=()
    for v in "${src[@]}"; do dst+=("$(calc "$v / 1000")"); done
}
mmsg() {
    local -n src=$1
    local -n dst=$2
    local v
    dst=()
    for v in "${src[@]}"; do dst+=("$(calc "$v / 1e6")"); done
}
# shellcheck disable=SC2034
{
    bw_g=() bwm_g=() ucx_bw_g=() wbw_g=() ucx_put_g=() pp_g=() fi_pp_g=() mr_m=() ucx_mr_m=()
    mbs bw bw_g; mbs bwm bwm_g; mbs ucx_bw ucx_bw_g; mbs wbw wbw_g; mbs ucx_put ucx_put_g
    mbs pp pp_g; mbs fi_pp fi_pp_g; mmsg mr mr_m; mmsg ucx_mr ucx_mr_m
}

UNSTABLE_NOTES=()
rule='----------------------------------------------------------------------------------------------------------------------'
echo "# compare_native: the emulated VIA NIC, native profile, vs UCX (ucx_perftest) and libfabric shm"
echo "# (fi_pingpong -p shm -e rdm); paced profile $PACED vs its timing model; wake-up vs a pipe and UDP"
echo "# host $(hostname), $(nproc) CPUs, $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg);" \
    "each figure the median of $RUNS run$([ "$RUNS" = 1 ] || echo s)"
echo "# UCX transports: ${UCX_TLS:-chosen by UCX (UCX_TLS unset)}; put_bw: UCT posix, bcopy"
echo "# ratio: the median over the runs of ours/reference, each run's two measured back to back: not"
echo "#   the quotient of the two medians beside it (a shift of the machine between runs moves both"
echo "#   sides of a run, not their ratio); for rates ours/reference >= target, for times <= target."
echo "# A judged line whose per-run ratios lie more than 1.5x apart (from 5 runs on: the highest and"
echo "#   lowest left out) is UNSTABLE: more runs are added (up to $EXTRA), and one still unstable is"
echo "#   not judged (the ratios and loads are listed below)."
echo "$rule"
row "measurement" "ours" "reference" "statistic (ours / reference)" "ratio" "target" "result"
echo "$rule"
line "4 B one-way [us] vs UCX tag_lat" lat_med ucx_p50 3 "median / 50th pct (typical)" x "<= 1.2"
line "4 B one-way [us] vs UCX tag_lat" lat_avg ucx_avg 3 "mean / mean" x -
line "4 B one-way [us] vs fi_pingpong shm" lat_avg fi_lat 3 "mean / mean (usec/xfer)" x -
line "64 KiB ping-pong [GB/s] vs fi_pingpong shm" pp_g fi_pp_g 2 "bytes / mean one-way" pct ">= 1"
line "1 MiB streaming [GB/s] vs UCX tag_bw" bw_g ucx_bw_g 2 "whole run, window 64 / 64" pct ">= 1"
line "1 MiB streaming, buffer per send vs one" bwm_g bw_g 2 "whole run / whole run (ours)" pct -
line "8 B message rate [Mmsg/s] vs UCX tag_bw" mr_m ucx_mr_m 3 "whole run, window 64 / 64" pct ">= 0.7"
line "1 MiB RDMA write [GB/s] vs our send stream" wbw_g bwm_g 2 "whole run / whole run" pct ">= 0.9"
line "1 MiB RDMA write [GB/s] vs UCX put_bw" wbw_g ucx_put_g 2 "whole run (UCX overall)" pct -
line "4 B one-way, $NVIS idle VIs [us] vs 1 VI" lat_idle lat_base 3 "median / median" x "<= 1.2"
line "4 B one-way, $NVIS VIs active [us] vs 1 VI" lat_active lat_base 3 "median / median" x -
# The paced line takes each count's least disturbed run (the lowest median):
# a paced ping-pong of 64 VIs lasts long enough to lose its CPU on a loaded
# machine, and one such run would otherwise stand for the scan.
# shellcheck disable=SC2034
{ m_growth=("$(calc "$(printf '%s\n' "${scanN[@]}" | sort -g | head -1) - \
      $(printf '%s\n' "${scan1[@]}" | sort -g | head -1)")")
  model_growth=("$(calc "$modelN - $model1")"); }
line "paced $PACED: 1->$SCAN_VIS VIs, growth [us] vs model" m_growth model_growth 1 \
    "best run's median / predicted" x "in 0.75..1.33"
line "4 B one-way, events (-e) [us] vs polling" ev lat_base 3 "median / median" x -
line "4 B one-way, events, every wait sleeps [us]" ev_sleep lat_base 3 "median / median (polling)" x -
line "16 B first message [us] vs a new pipe" via_first pipe_first 1 "median over runs (1 each)" x -
line "16 B first message [us] vs a new UDP pair" via_first udp_first 1 "median over runs (1 each)" x -
line "16 B wake-up [us] vs pipe" via_wake pipe_wake 1 "median / median" x "<= 2"
line "16 B wake-up [us] vs UDP" via_wake udp_wake 1 "median / median" x -
line "16 B delivery, sender busy [us] vs pipe" via_cp pipe_cp 1 "median / median" x -
line "16 B delivery, sender busy [us] vs UDP" via_cp udp_cp 1 "median / median" x -
line "1 MiB delivery, sender busy [us] vs pipe" big_via_cp big_pipe_cp 1 "median / median" x -
m_first=$(median "${via_first[@]}")
row "16 B first message [us], bound" "$(num "$m_first" 1)" "-" "median over runs (1 each)" "-" \
    "<= 1000us" "$(verdict "$m_first" "<=" 1000)"
echo "$rule"
for note in "${UNSTABLE_NOTES[@]}"; do
    echo "# UNSTABLE, not judged: $note"
done
echo "# 4 B one-way: ping-pong, RTT/2 (vip_send_lat, $LAT_N iterations; tag_lat, fi_pingpong the same count)."
echo "# 64 KiB: vip_send_lat -s 64K and fi_pingpong -S 65536, $PP_N iterations; 65536 B / mean one-way time."
echo "# streaming: vip_send_bw -b 1 (one buffer per side, as tag_bw), vip_send_bw and vip_write_bw (a buffer per descriptor) ($BW_N x 1 MiB, $WINDOW in flight) and tag_bw -O $WINDOW / put_bw ($BW_N);"
echo "#   8 B rate: $MR_N messages each side. GB = 10^9 bytes."
echo "# VIs: native has hardware doorbells (no scan); --vis adds idle VIs, --active $NVIS goes round"
echo "#   $NVIS connected VIs; paced $PACED: model 1 VI $model1 us, $SCAN_VIS VIs $modelN us (vip_model --vis),"
echo "#   measured with -d via1, $SCAN_N iterations, each count's lowest median over the runs; its target:"
echo "#   measured growth within 0.75..1.33 of the model's."
echo "# events: -e waits in VipRecvWait/VipSendWait; 'every wait sleeps': VIP_WAIT_SPIN_US=0, $EV_N iterations."
echo "# first/wake-up/delivery: os_wake_lat and vip_wake_lat (wake_util.h, the same method): one-way, the"
echo "#   receiver asleep in VipRecvWait/read()/recv(); sender sleeps 1500 us between messages ($WAKE_N),"
echo "#   computes 5000 us after posting in the delivery test ($WAKE_M); $WAKE_CPUS."
echo "# runs: 4 B median ours ${lat_med[*]} | UCX p50 ${ucx_p50[*]:-n/a}"
echo "# runs: 4 B mean ours ${lat_avg[*]} | UCX ${ucx_avg[*]:-n/a} | fi ${fi_lat[*]}"
echo "# runs: 64 KiB MB/s ours ${pp[*]} | fi ${fi_pp[*]}"
echo "# runs: 1 MiB MB/s send, one buffer ${bw[*]} | a buffer per send ${bwm[*]} | write ${wbw[*]} | UCX tag_bw ${ucx_bw[*]:-n/a} | put_bw ${ucx_put[*]:-n/a}"
echo "# runs: 8 B msg/s ours ${mr[*]} | UCX ${ucx_mr[*]:-n/a}"
echo "# runs: 4 B median, 1 VI ${lat_base[*]} | $NVIS idle ${lat_idle[*]} | $NVIS active ${lat_active[*]}"
echo "# runs: paced $PACED 1 VI ${scan1[*]} | $SCAN_VIS VIs ${scanN[*]}"
echo "# runs: events ${ev[*]} | every wait sleeps ${ev_sleep[*]}"
echo "# runs: 16 B first ours ${via_first[*]} | pipe ${pipe_first[*]} | udp ${udp_first[*]}"
echo "# runs: 16 B wake-up ours ${via_wake[*]} | pipe ${pipe_wake[*]} | udp ${udp_wake[*]}"
echo "# runs: 16 B delivery, sender busy, max ours ${via_cpx[*]} | pipe ${pipe_cpx[*]} | udp ${udp_cpx[*]}"
echo "# runs: 1 MiB delivery, sender busy, max ours ${big_via_cpx[*]} | pipe ${big_pipe_cpx[*]}"
echo "# runs: messages not delivered within T = 100 ms: ours ${via_late[*]} | pipe ${pipe_late[*]} |" \
    "udp ${udp_late[*]} | 1 MiB ours ${big_via_late[*]} | pipe ${big_pipe_late[*]}"

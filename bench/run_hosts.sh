#!/bin/bash
# run_hosts.sh - the UDP and libfabric links between emulated hosts, against
# plain UDP and libfabric itself
# measured in the same run (make bench-hosts; a step of make bench).
#
# Two vipds on 127.0.0.1 (vipd --listen, one hosts file naming them host0
# and host1); the VIPL benchmarks run their client on host0 and their
# server on host1 (BU_PEER, BU_SERVER_VIPD_SOCKET), so every message
# crosses the UDP link and its reliable transport. The reference is
# bench/udp_pingpong: two processes, plain UDP, busy-polling.
#
#   4-byte one-way latency (median, RTT/2)    VIPL / UDP, target <= 3x
#   1 MiB bandwidth                           VIPL / UDP, target >= 50%
#   1 MiB goodput under 1% loss               lossy / lossless pair of vipds
#   4 B latency and 1 MiB bandwidth, --frame-mac   MACed / token-only pair (the cost of
#                                             authenticating every frame)
#
# Then the libfabric link (a pair of vipds with --link ofi, provider
# tcp;ofi_rxm) against libfabric itself between two processes, same
# statistic on both sides:
#   4-byte one-way latency (mean)   VIPL / fi_pingpong -p tcp -e rdm, target <= 1.5x
#   1 MiB ping-pong bandwidth       VIPL / fi_pingpong -S 1 MiB,     target >= 70%
#   1 MiB streaming bandwidth       VIPL / bench/fi_stream (plain libfabric, 16 in
#                                   flight as vip_send_bw), target >= 70%
#
# Each figure is the median of RUNS runs (3; --quick: 1); every line
# alternates our runs with the reference's (the libfabric streaming one at
# least 3 each): this machine's speed changes from second to second.
# Prints one line per figure with the ratio and its target.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/bench_lib.sh"
bench_find_build "$ROOT"
BIN=$B/bin
RUNS=3
LAT_N=20000
BW_N=300
PP_N=300
if [ "${1:-}" = "--quick" ]; then
    RUNS=2 # two at least: one run cannot say whether the runs agree
    LAT_N=5000
    BW_N=100
    PP_N=100
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/viphosts.XXXXXX")
PIDS=
cleanup() {
    for p in $PIDS; do
        kill "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# start_pair NAME PORTBASE [vipd options]: vipds NAME-a (host0) and NAME-b
# (host1) listening on PORTBASE and PORTBASE+1.
start_pair() {
    name=$1 base=$2
    shift 2
    printf 'host0 127.0.0.1:%s\nhost1 127.0.0.1:%s\n' "$base" $((base + 1)) >"$WORK/$name.hosts"
    # the cluster key both prove themselves with (found beside the hosts file)
    [ -f "$WORK/vipd.key" ] || "$BIN/vipctl" keygen "$WORK/vipd.key" >/dev/null
    for side in a b; do
        port=$base
        [ $side = b ] && port=$((base + 1))
        "$BIN/vipd" -f -q -n 1 -s "$WORK/$name-$side.sock" --listen "127.0.0.1:$port" \
            --hosts "$WORK/$name.hosts" "$@" 2>"$WORK/$name-$side.log" &
        PIDS="$PIDS $!"
    done
    i=0
    while [ $i -lt 100 ]; do
        if "$BIN/vipctl" -s "$WORK/$name-a.sock" ping >/dev/null 2>&1 &&
            "$BIN/vipctl" -s "$WORK/$name-b.sock" ping >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.05
        i=$((i + 1))
    done
    echo "run_hosts: the vipds of $name did not start; logs:" >&2
    cat "$WORK/$name-a.log" "$WORK/$name-b.log" >&2
    return 1
}

# across NAME PROG ARGS...: PROG's client on host0, its server on host1.
across() {
    name=$1
    shift
    VIPD_AUTOSTART=0 VIPD_SOCKET="$WORK/$name-a.sock" \
        BU_SERVER_VIPD_SOCKET="$WORK/$name-b.sock" BU_PEER=host1 "$@"
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }'
}

# med V...: the median of its arguments (the runs a loop below gathered)
med() {
    printf '%s\n' "$@" | median
}

# The column COL of the row of size SIZE in a VIPL benchmark's table.
col() {
    awk -v s="$1" -v c="$2" '$1 == s { print $c }'
}

# ratio_line time|rate LABEL "OURS_RUNS" REFNAME "REF_RUNS" UNIT TARGET: one
# line: the medians of both sides' runs and the median of the per-run
# ratios (ours against the reference of the same run, run back to back);
# a time's ratio must be at most TARGET (x), a rate's at least TARGET (a
# fraction, printed in %). Runs whose ratios lie more than 1.5x apart do
# not agree: the line says UNSTABLE with them and the load, and is not
# judged (as pyperf will not compare a benchmark whose runs disagree).
ratio_line() {
    awk -v k="$1" -v l="$2" -v vs="$3" -v rn="$4" -v us="$5" -v unit="$6" -v t="$7" \
        -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
    function med(a, n,   i, j, x) {
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
        return a[int((n + 1) / 2)]
    }
    BEGIN {
        n = split(vs, v, " "); split(us, u, " ")
        for (i = 1; i <= n; i++) { r[i] = u[i] > 0 ? v[i] / u[i] : 0; rs = rs sprintf(" %.2f", r[i]) }
        mv = med(v, n); mu = med(u, n); mr = med(r, n)
        lo = r[1]; hi = r[n]
        verdict = (k == "time") ? (mr <= t ? "met" : "NOT met") : (mr >= t ? "met" : "NOT met")
        if (n > 1 && (lo <= 0 || hi > 1.5 * lo))
            verdict = "UNSTABLE (per-run ratios" rs "; load " load "): not judged"
        if (k == "time")
            printf "  %-27s: VIPL %8.2f %-4s %-9s %8.2f %-4s ratio %5.2fx  (target <= %sx) %s\n",
                l, mv, unit, rn, mu, unit, mr, t, verdict
        else
            printf "  %-27s: VIPL %8.1f %-4s %-9s %8.1f %-4s ratio %5.0f%%  (target >= %d%%) %s\n",
                l, mv, unit, rn, mu, unit, 100 * mr, 100 * t, verdict
    }'
}

runs() {
    i=0
    while [ $i -lt $RUNS ]; do
        "$@"
        i=$((i + 1))
    done
}

BASE=$((20000 + $$ % 20000))
start_pair clean $BASE || exit 1
start_pair lossy $((BASE + 2)) --faults drop=0.01 || exit 1
start_pair mac $((BASE + 6)) --frame-mac || exit 1

vip_lat() { across "${1:-clean}" "$BIN/vip_send_lat" -s 4 -n $LAT_N | col 4 4; }
udp_lat() { "$BIN/udp_pingpong" lat 4 $LAT_N | awk '{ print $4 }'; }
vip_bw() { across "$1" "$BIN/vip_send_bw" -s 1M -n $BW_N | col 1048576 4; }
udp_bw() { "$BIN/udp_pingpong" bw 1048576 $BW_N | awk '{ print $4 }'; }

# ours and the reference alternate (this machine's speed changes from
# second to second; two blocks of runs would compare two speeds)
lat_v_all= lat_u_all= bw_v_all= bw_u_all= bw_l_all= lat_m_all= bw_m_all=
i=0
while [ $i -lt $RUNS ]; do
    lat_v_all="$lat_v_all $(vip_lat)"
    lat_m_all="$lat_m_all $(vip_lat mac)"
    lat_u_all="$lat_u_all $(udp_lat)"
    bw_v_all="$bw_v_all $(vip_bw clean)"
    bw_m_all="$bw_m_all $(vip_bw mac)"
    bw_u_all="$bw_u_all $(udp_bw)"
    bw_l_all="$bw_l_all $(vip_bw lossy)"
    i=$((i + 1))
done
lat_m=$(med $lat_m_all)
bw_m=$(med $bw_m_all)
lat_v=$(med $lat_v_all)
bw_v=$(med $bw_v_all)
bw_l=$(med $bw_l_all)

echo
echo "UDP link between two vipds on 127.0.0.1 (median of $RUNS runs; the reference: plain UDP, bench/udp_pingpong)"
ratio_line time "4 B one-way latency" "$lat_v_all" UDP "$lat_u_all" us 3
ratio_line rate "1 MiB bandwidth" "$bw_v_all" UDP "$bw_u_all" MB/s 0.5
awk -v l="$bw_l" -v v="$bw_v" 'BEGIN {
    r = l / v; printf "  1 MiB goodput, 1%% loss: VIPL %8.1f MB/s, no loss %8.1f MB/s: %5.0f%% of it\n", l, v, 100 * r }'
# What authentication costs: the control path's handshake and MACs are
# paid per connection, not per message; every frame carries the
# connection's token (one compare); --frame-mac adds a keyed BLAKE2b per
# frame each way. The pair with frame MACs against the one without:
awk -v m="$lat_m" -v v="$lat_v" 'BEGIN {
    printf "  4 B one-way, --frame-mac : %8.2f us, token only %8.2f us: %5.2fx\n", m, v, m / v }'
awk -v m="$bw_m" -v v="$bw_v" 'BEGIN {
    printf "  1 MiB bandwidth, --frame-mac: %7.1f MB/s, token only %7.1f MB/s: %5.0f%%\n", m, v, 100 * m / v }'
for side in a b; do
    "$BIN/vipctl" -s "$WORK/lossy-$side.sock" net
done | awk '/^(retransmits|nacks_got|fault_drop) / { n[$1] += $2 }
    END { printf "  (lossy pair, both hosts: %d frames dropped by --faults, %d NACKs taken, %d retransmissions)\n", n["fault_drop"], n["nacks_got"], n["retransmits"] }'

# ---- the libfabric link ------------------------------------------------------------
start_pair ofi $((BASE + 4)) --link ofi || exit 1
# vip_send_lat's columns: size iters min median p90 p99 max avg (one-way, us)
ofi_lat() { across ofi "$BIN/vip_send_lat" -s 4 -n $LAT_N | col 4 8; }
ofi_pp() { across ofi "$BIN/vip_send_lat" -s 1M -n $PP_N | col 1048576 8 |
    awk '{ printf "%.1f\n", 1048576 / $1 }'; }
ofi_bw() { across ofi "$BIN/vip_send_bw" -s 1M -n $BW_N | col 1048576 4; }
fis_bw() { "$BIN/fi_stream" -s 1048576 -n $BW_N -w 16 --csv | awk -F, '{ print $4 }'; }
# fi_pingpong runs in this shell (fi_run keeps its port and server there),
# on control ports past the vipds' listening ones.
FI_PORT=$((BASE + 100))
# Ours and fi_pingpong's runs alternate, as the streaming ones below.
fi_lat_all=
fi_pp_all=
lat_o_all=
pp_o_all=
i=0
while [ $i -lt $RUNS ]; do
    lat_o_all="$lat_o_all $(ofi_lat)"
    FI_RUN_PROV=tcp fi_run 4 $LAT_N
    fi_lat_all="$fi_lat_all $FI_USEC"
    pp_o_all="$pp_o_all $(ofi_pp)"
    FI_RUN_PROV=tcp fi_run 1048576 $PP_N
    fi_pp_all="$fi_pp_all $FI_MBS"
    i=$((i + 1))
done
bw_o_all=
bw_f_all=
i=0
while [ $i -lt $RUNS ] || [ $i -lt 3 ]; do
    bw_o_all="$bw_o_all $(ofi_bw)"
    bw_f_all="$bw_f_all $(fis_bw)"
    i=$((i + 1))
done

echo
echo "libfabric link (--link ofi, tcp;ofi_rxm) between two vipds on 127.0.0.1 (median of $RUNS runs;"
echo "the reference: libfabric itself between two processes, fi_pingpong -p tcp -e rdm and bench/fi_stream)"
ratio_line time "4 B one-way latency (mean)" "$lat_o_all" libfabric "$fi_lat_all" us 1.5
ratio_line rate "1 MiB ping-pong bandwidth" "$pp_o_all" libfabric "$fi_pp_all" MB/s 0.7
ratio_line rate "1 MiB streaming bandwidth" "$bw_o_all" libfabric "$bw_f_all" MB/s 0.7

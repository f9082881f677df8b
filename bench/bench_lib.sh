# bench_lib.sh - sourced by the benchmark scripts (compare_native.sh,
# run_bench.sh): a private vipd for one run, fi_pingpong and ucx_perftest
# runs, small helpers.
#
# vipd_start starts vipd in the foreground of a background job on a socket in
# a fresh temporary directory, exports VIPD_SOCKET (and VIPD_AUTOSTART=0, so
# a benchmark never starts another one), and waits until it answers.
# vipd_stop shuts it down (vipctl shutdown, then kill) and removes the
# directory. fi_run runs one fi_pingpong server/client pair, ucx_run one
# ucx_perftest pair. Callers set BIN
# (the directory holding vipd and vipctl) and WORK (a scratch directory), and
# call bench_cleanup from an EXIT trap.

# bench_find_build ROOT: the build directory, absolute: $B (default build), taken
# relative to the current directory or else to ROOT; exported as B.
bench_find_build() {
    B=${B:-build}
    if [ ! -d "$B/bin" ] && [ -d "$1/$B/bin" ]; then
        B=$1/$B
    fi
    B=$(cd "$B" && pwd)
    export B
}

VIPD_PID=
VIPD_DIR=
FI_SRV=

vipd_start() {
    VIPD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/vipbench.XXXXXX")
    export VIPD_SOCKET="$VIPD_DIR/vipd.sock"
    export VIPD_AUTOSTART=0
    "$BIN/vipd" -f -q -n "${NICS:-2}" -s "$VIPD_SOCKET" ${VIP_PROFILE:+--profile "$VIP_PROFILE"} \
        >"$VIPD_DIR/vipd.log" 2>&1 &
    VIPD_PID=$!
    local i
    for i in $(seq 200); do
        if "$BIN/vipctl" -s "$VIPD_SOCKET" nics >/dev/null 2>&1; then
            return 0
        fi
        kill -0 "$VIPD_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "error: vipd did not start on $VIPD_SOCKET; its log:" >&2
    cat "$VIPD_DIR/vipd.log" >&2
    return 1
}

vipd_stop() {
    if [ -n "$VIPD_PID" ]; then
        "$BIN/vipctl" -s "$VIPD_SOCKET" shutdown >/dev/null 2>&1 || true
        local i
        for i in $(seq 40); do
            kill -0 "$VIPD_PID" 2>/dev/null || break
            sleep 0.05
        done
        kill "$VIPD_PID" 2>/dev/null || true
        wait "$VIPD_PID" 2>/dev/null || true
        VIPD_PID=
    fi
    if [ -n "$VIPD_DIR" ]; then
        rm -rf "$VIPD_DIR"
        VIPD_DIR=
    fi
}

# median of the numbers given as arguments
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) { print "nan"; exit }
              if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# the data line of a CSV written by vip_send_lat/vip_send_bw --csv: column $1
csv_col() {
    awk -F, -v c="$1" '/^#/ || /^bytes,/ { next } NF > 1 { print $c; exit }'
}

# the line of test $1 in a CSV written by vip_wake_lat/os_wake_lat --csv: column $2
csv_test_col() {
    awk -F, -v t="$1" -v c="$2" '/^#/ { next } $1 == t { print $c; exit }'
}

say() { printf '%s\n' "$*" >&2; }

# bench_paced_clock SCRIPT: the clock of the paced profiles' runs, in
# PACED_CLOCK: virtual by default, so the figures do not depend on the
# machine's load; PACED_CLOCK=real waits the model out in real time.
bench_paced_clock() {
    PACED_CLOCK=${PACED_CLOCK:-virtual}
    case "$PACED_CLOCK" in
    real | virtual) ;;
    *) echo "$1: PACED_CLOCK is real or virtual, not '$PACED_CLOCK'" >&2; exit 2 ;;
    esac
}

# bench_need SCRIPT PROG...: every PROG is built in $BIN, or SCRIPT says
# which is missing and the script ends.
bench_need() {
    local who=$1 p
    shift
    for p in "$@"; do
        [ -x "$BIN/$p" ] || { say "$who: $BIN/$p is missing: run 'make' first"; exit 1; }
    done
}

# A distinct control port per fi_pingpong run, away from other users'.
FI_PORT=$((20000 + $$ % 20000))

# fi_run SIZE ITERS: one fi_pingpong run; sets FI_USEC (usec/xfer, one-way)
# and FI_MBS (MB/sec). Not in a subshell: FI_PORT and FI_SRV must stick.
# The provider is FI_RUN_PROV's (default shm; run_hosts.sh: tcp).
fi_run() {
    local size=$1 iters=$2 try i prov=${FI_RUN_PROV:-shm}
    for try in 1 2 3; do
        FI_PORT=$((FI_PORT + 1))
        timeout 150 fi_pingpong -p "$prov" -e rdm -S "$size" -I "$iters" -B "$FI_PORT" \
            >"$WORK/fi_srv.out" 2>&1 &
        FI_SRV=$!
        for i in $(seq 50); do
            if timeout 120 fi_pingpong -p "$prov" -e rdm -S "$size" -I "$iters" -P "$FI_PORT" \
                127.0.0.1 >"$WORK/fi_cli.out" 2>&1; then
                wait "$FI_SRV" 2>/dev/null || true
                FI_SRV=
                # columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
                FI_USEC=$(awk '$1 != "bytes" && NF >= 8 { print $7; exit }' "$WORK/fi_cli.out")
                FI_MBS=$(awk '$1 != "bytes" && NF >= 8 { print $6; exit }' "$WORK/fi_cli.out")
                if [ -n "$FI_USEC" ] && [ -n "$FI_MBS" ]; then
                    return 0
                fi
                break
            fi
            kill -0 "$FI_SRV" 2>/dev/null || break # the server gave up (port taken?)
            sleep 0.1
        done
        kill "$FI_SRV" 2>/dev/null || true
        wait "$FI_SRV" 2>/dev/null || true
        FI_SRV=
    done
    say "error: fi_pingpong -p $prov -e rdm -S $size failed; client said:"
    cat "$WORK/fi_cli.out" >&2
    say "server said:"
    cat "$WORK/fi_srv.out" >&2
    exit 1
}

# The unmeasured warm-up of a run of N iterations, for ucx_perftest (-w)
# and for our side of a line compared with it (-w too): the same count
# on both sides, a tenth of the run.
ucx_warmup() {
    echo $(($1 / 10 + 1))
}

# A distinct TCP port per ucx_perftest run (its handshake), away from fi's.
UCX_PORT=$((40000 + $$ % 20000))
UCX_SRV=

# ucx_run TEST SIZE ITERS [ARGS...]: one ucx_perftest run (client and
# server on localhost); ARGS are added to the client's (a UCT test such as
# put_bw needs "-x posix -d memory -D bcopy"; the UCP tests tag_lat and
# tag_bw use whatever transports UCX picks, or UCX_TLS from the environment).
# Sets, from its final line (-f -v: iterations, 50.0_percentile_lat,
# avg_lat, overall_lat, avg_bw, overall_bw, avg_mr, overall_mr):
# UCX_P50 and UCX_AVG (latency in us; one-way for the ping-pong tests),
# UCX_MBS (overall bandwidth in MB/s of 10^6 bytes; it prints MiB/s) and
# UCX_MR (overall messages per second). Not in a subshell: UCX_PORT and
# UCX_SRV must stick.
ucx_run() {
    local test=$1 size=$2 iters=$3 try i
    shift 3
    local args=(-t "$test" -s "$size" -n "$iters" -w "$(ucx_warmup "$iters")" -f -v "$@")
    for try in 1 2 3; do
        UCX_PORT=$((UCX_PORT + 1))
        timeout 150 ucx_perftest -p "$UCX_PORT" >"$WORK/ucx_srv.out" 2>&1 &
        UCX_SRV=$!
        for i in $(seq 50); do
            if timeout 120 ucx_perftest localhost -p "$UCX_PORT" "${args[@]}" \
                >"$WORK/ucx_cli.out" 2>&1; then
                wait "$UCX_SRV" 2>/dev/null || true
                UCX_SRV=
                # -v: iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,...
                local last
                last=$(awk -F, '{ gsub(/ /, "") } $1 ~ /^[0-9]+$/ && NF >= 8' \
                    "$WORK/ucx_cli.out" | tail -1)
                if [ -n "$last" ]; then
                    UCX_P50=$(echo "$last" | cut -d, -f2)
                    UCX_AVG=$(echo "$last" | cut -d, -f3)
                    UCX_MBS=$(echo "$last" | awk -F, '{ printf "%.2f", $6 * 1.048576 }')
                    UCX_MR=$(echo "$last" | cut -d, -f8)
                    return 0
                fi
                break
            fi
            kill -0 "$UCX_SRV" 2>/dev/null || break # the server gave up (port taken?)
            sleep 0.1
        done
        kill "$UCX_SRV" 2>/dev/null || true
        wait "$UCX_SRV" 2>/dev/null || true
        UCX_SRV=
    done
    say "error: ucx_perftest -t $test -s $size failed; client said:"
    cat "$WORK/ucx_cli.out" >&2
    say "server said:"
    cat "$WORK/ucx_srv.out" >&2
    exit 1
}

# Stop whatever this script started: a fi_pingpong or ucx_perftest server, vipd.
bench_cleanup() {
    local p
    for p in "$FI_SRV" "$UCX_SRV"; do
        if [ -n "$p" ]; then
            kill "$p" 2>/dev/null || true
            wait "$p" 2>/dev/null || true
        fi
    done
    FI_SRV= UCX_SRV=
    vipd_stop
}

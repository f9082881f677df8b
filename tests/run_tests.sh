#!/bin/sh
# run_tests.sh - run every test binary of $B (default build) against a
# private vipd; print PASS/FAIL per binary and "N passed, N failed" (CUnit
# tests over all binaries and all runs). Exits non-zero on any failure.
#
#   B=build tests/run_tests.sh            all binaries, then the matrix
#   B=build tests/run_tests.sh test_fw_link    only the binaries named (no matrix
#                                         unless TEST_MATRIX is set)
#   VALGRIND=1 ...                        each binary under valgrind (TL_SCALE=100)
#   TEST_TIMEOUT=300                      seconds per test
#   TEST_MATRIX=quick|full|none           the conformance matrix (default quick)
#
# The vipd has six NICs: via0, via1 native; via2, via3 sbus; via4, via5 pci.
#
# The matrix runs the conformance tests again with other NIC profiles and
# extension modes: TL_PROFILE=sbus|pci makes the tests' via0 and via1 the
# paced pair (tests/lib/tlib.c, tl_dev) and VIP_EXT_MODE is exported.
#   quick: native/descriptorless, native/merged, sbus/standard,
#          pci/descriptorless; counts divided by 10 more (TL_SCALE)
#   full:  all nine profile/mode combinations, full counts
# (the first run, native with the environment's mode, is the tenth.)
set -u

B=${B:-build}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
VIPD="$B/bin/vipd"
VIPCTL="$B/bin/vipctl"

dir=$(mktemp -d "${TMPDIR:-/tmp}/vipl-tests.XXXXXX") || exit 2
chmod 700 "$dir"
VIPD_SOCKET="$dir/vipd.sock"
export VIPD_SOCKET
# The tests use the vipd started here and never start another one.
VIPD_AUTOSTART=0
export VIPD_AUTOSTART
# What an autostarted vipd should be is the private vipd's business here:
# a VIP_PROFILE or VIPD_NICS of the caller's would be refused by VipOpenNic
# as disagreeing with it (the matrix sets TL_PROFILE instead).
unset VIP_PROFILE VIPD_NICS
TL_VIPCTL="$(cd "$(dirname "$VIPCTL")" && pwd)/$(basename "$VIPCTL")"
export TL_VIPCTL
# The source tree, for tests that read it (the build may live elsewhere: B=).
TL_SRCDIR="$(cd "$(dirname "$0")/.." && pwd)"
export TL_SRCDIR
vipd_pid=""

cleanup() {
    if [ -n "$vipd_pid" ]; then
        "$VIPCTL" -s "$VIPD_SOCKET" shutdown >/dev/null 2>&1
        i=0
        while kill -0 "$vipd_pid" 2>/dev/null && [ $i -lt 50 ]; do
            sleep 0.1
            i=$((i + 1))
        done
        if kill -0 "$vipd_pid" 2>/dev/null; then
            echo "run_tests: vipd did not stop on shutdown; killing it" >&2
            kill -9 "$vipd_pid" 2>/dev/null
        fi
        wait "$vipd_pid" 2>/dev/null
    fi
    # A failed run shows what vipd saw (the directory goes with the run).
    if [ "${total_fail:-0}" -gt 0 ] && [ -s "$dir/vipd.log" ]; then
        echo "run_tests: the private vipd's log, last 40 lines:"
        tail -n 40 "$dir/vipd.log" | sed 's/^/    /'
    fi
    rm -rf "$dir"
    # AM-2 shared-memory queues (/dev/shm/am2-<pid hex>-<id>) of test
    # processes that died before AM_Terminate.
    for f in /dev/shm/am2-*; do
        [ -O "$f" ] || continue
        p=${f#/dev/shm/am2-}
        p=${p%%-*}
        kill -0 "$((0x$p))" 2>/dev/null || rm -f "$f"
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# a reader that went away (| head) or a closed terminal: still clean up
trap 'exit 141' PIPE
trap 'exit 129' HUP

if [ ! -x "$VIPD" ] || [ ! -x "$VIPCTL" ]; then
    echo "run_tests: $VIPD or $VIPCTL is missing (make all)" >&2
    exit 2
fi

"$VIPD" -f -n 6 --profile via2=sbus --profile via3=sbus \
    --profile via4=pci --profile via5=pci -s "$VIPD_SOCKET" -l warn >"$dir/vipd.log" 2>&1 &
vipd_pid=$!
i=0
until "$VIPCTL" -s "$VIPD_SOCKET" ping >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 50 ] || ! kill -0 "$vipd_pid" 2>/dev/null; then
        echo "run_tests: vipd did not come up on $VIPD_SOCKET within 5 s" >&2
        cat "$dir/vipd.log" >&2
        exit 2
    fi
    sleep 0.1
done

total_pass=0
total_fail=0
bad_bins=0
failures=""

# The conformance tests of the matrix: binary, or binary:ERE of its tests.
MATRIX_TESTS="test_basic test_pingpong test_multi test_ext test_rdma test_compat
test_am2_vipl:^test_vipl_(roundtrips|returns|credits)\$
test_progress:^test_cq_(pingpong|stream)_(poll|wait)_native\$
test_conf_mem test_conf_vi test_conf_post test_conf_cq test_conf_notify test_conf_error"

# run_suite LABEL [NAME[:ERE]]...: run the binaries named (all if none),
# only their tests matching ERE if given; add to the totals. LABEL names the
# run in every line printed about it.
run_suite() {
    label=$1
    shift
    for t in "$B"/tests/test_*; do
        [ -x "$t" ] || continue
        name=$(basename "$t")
        ere=""
        if [ $# -gt 0 ]; then
            want=0
            for a in "$@"; do
                case $a in
                "$name") want=1 ;;
                "$name":*) want=1 ere=${a#*:} ;;
                esac
            done
            [ $want = 1 ] || continue
        fi
        # Each test runs in its own process ("=name"), so that a crash fails
        # that test only and the others still run.
        list=$("$t" --list 2>/dev/null)
        [ -n "$ere" ] && list=$(printf '%s\n' "$list" | grep -E "$ere")
        if [ -z "$list" ]; then
            echo "FAIL $name$label (cannot list its tests)"
            total_fail=$((total_fail + 1))
            bad_bins=$((bad_bins + 1))
            failures="$failures $name${label# }"
            continue
        fi
        bp=0
        bf=0
        bt0=$(date +%s)
        failed_names=""
        out="$dir/$name.out"
        : >"$out"
        for tn in $list; do
            res="$dir/$name.$tn.result"
            tout="$dir/$name.$tn.out"
            rm -f "$res"
            if [ "${VALGRIND:-0}" = 1 ]; then
                TL_RESULT="$res" timeout "$TEST_TIMEOUT" valgrind -q --error-exitcode=9 \
                    --suppressions="$(dirname "$0")/valgrind.supp" --errors-for-leak-kinds=definite \
                    --fair-sched=yes \
                    --leak-check=full "$t" "=$tn" >"$tout" 2>&1
            else
                TL_RESULT="$res" timeout "$TEST_TIMEOUT" "$t" "=$tn" >"$tout" 2>&1
            fi
            rc=$?
            p=0
            f=0
            if [ -s "$res" ]; then
                read -r p f <"$res"
            fi
            if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
                # Crashed, timed out, or valgrind found errors outside any assertion.
                p=0
                f=1
                case $rc in
                124) echo "    $tn: timed out after ${TEST_TIMEOUT}s" >>"$tout" ;;
                9) echo "    $tn: valgrind reported errors" >>"$tout" ;;
                *) [ $rc -gt 128 ] && echo "    $tn: killed by signal $((rc - 128))" >>"$tout" ;;
                esac
            fi
            bp=$((bp + p))
            bf=$((bf + f))
            if [ "$f" -ne 0 ]; then
                failed_names="$failed_names $tn"
                failures="$failures $name${label# }:$tn"
                cat "$tout" >>"$out"
            fi
        done
        total_pass=$((total_pass + bp))
        total_fail=$((total_fail + bf))
        secs=$(($(date +%s) - bt0))
        if [ "$bf" -eq 0 ]; then
            echo "PASS $name$label ($bp tests, $secs s)"
        else
            bad_bins=$((bad_bins + 1))
            echo "FAIL $name$label ($bp passed, $bf failed:$failed_names; $secs s);" \
                "output of the failures:"
            grep -v -e '^$' -e 'CUnit - A unit testing' -e 'cunit.sourceforge' -e '\.\.\.passed$' \
                -e '^Suite: ' "$out" | sed 's/^/    /'
        fi
    done
}

scale=${TL_SCALE:-1}
[ "${VALGRIND:-0}" = 1 ] && [ -z "${TL_SCALE:-}" ] && scale=100
TL_SCALE=$scale
export TL_SCALE

t0=$(date +%s)
run_suite "" "$@"

# With binaries named, the matrix runs only if TEST_MATRIX asks, and only
# for those binaries.
matrix=${TEST_MATRIX:-quick}
if [ $# -gt 0 ]; then
    [ -n "${TEST_MATRIX:-}" ] || matrix=none
    picked=""
    for m in $MATRIX_TESTS; do
        for a in "$@"; do [ "$a" = "${m%%:*}" ] && picked="$picked $m"; done
    done
    MATRIX_TESTS=$picked
    [ -n "$picked" ] || matrix=none
fi
case $matrix in
quick)
    combos="native/descriptorless native/merged sbus/standard pci/descriptorless"
    mscale=$((scale * 10))
    ;;
full)
    combos=""
    for p in native sbus pci; do
        for m in standard descriptorless merged; do combos="$combos $p/$m"; done
    done
    mscale=$scale
    ;;
none) combos="" ;;
*)
    echo "run_tests: TEST_MATRIX=$matrix: not quick, full or none" >&2
    exit 2
    ;;
esac
for combo in $combos; do
    echo "-- matrix $combo (TL_SCALE=$mscale)"
    TL_PROFILE=${combo%/*}
    VIP_EXT_MODE=${combo#*/}
    TL_SCALE=$mscale
    AM2_SHM=0 # the AM-2 tests through the paced NICs, not shared memory
    export TL_PROFILE VIP_EXT_MODE TL_SCALE AM2_SHM
    # shellcheck disable=SC2086
    run_suite " [$combo]" $MATRIX_TESTS
done
# The AM-2 tests again with peers on this host talking through the NIC
# (AM2_SHM=0) instead of shared memory (the default).
if [ "$matrix" != none ]; then
    echo "-- AM2_SHM=0"
    TL_PROFILE=native VIP_EXT_MODE=standard TL_SCALE=$scale AM2_SHM=0
    export TL_PROFILE VIP_EXT_MODE TL_SCALE AM2_SHM
    run_suite " [AM2_SHM=0]" test_am2_vipl test_am2_spmd test_am2_amudp test_examples
    # Large messages between processes in one copy (VIP_CMA=1,
    # spec-notes/cma.md; off by default).
    echo "-- VIP_CMA=1"
    VIP_CMA=1 run_suite " [VIP_CMA=1]" test_pingpong test_multi test_kill test_rdma
    # The tests across hosts again over the libfabric link (vipd --link ofi).
    if [ -x "$B/tests/test_hosts" ]; then
        echo "-- THOSTS_LINK=ofi"
        THOSTS_LINK=ofi
        export THOSTS_LINK
        run_suite " [link ofi]" test_hosts test_hosts_peer test_am2_spmd
        unset THOSTS_LINK
    fi
fi
echo "(all runs: $(($(date +%s) - t0)) s)"

if ! "$VIPCTL" -s "$VIPD_SOCKET" ping >/dev/null 2>&1; then
    echo "run_tests: vipd died during the tests; its log:" >&2
    sed 's/^/    /' "$dir/vipd.log" >&2
    total_fail=$((total_fail + 1))
fi

if [ "$total_pass" -eq 0 ] && [ "$total_fail" -eq 0 ]; then
    # Nothing ran is not a pass (a soak on a tree whose tests were not built).
    echo "run_tests: no test ran: no test programs in $B/tests (make testprogs builds them)" >&2
    total_fail=1
fi
[ -n "$failures" ] && echo "failed:$failures"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] && [ $bad_bins -eq 0 ]

#!/bin/sh
# run_tests.sh - run every test binary of $B (default build) against a
# private vipd; print PASS/FAIL per binary and "N passed, N failed" (CUnit
# tests over all binaries). Exits non-zero on any failure.
#
#   B=build tests/run_tests.sh            all binaries
#   B=build tests/run_tests.sh test_fw_link    only the binaries named
#   VALGRIND=1 ...                        each binary under valgrind
#   TEST_TIMEOUT=300                      seconds per binary
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
TL_VIPCTL="$(cd "$(dirname "$VIPCTL")" && pwd)/$(basename "$VIPCTL")"
export TL_VIPCTL
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
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ ! -x "$VIPD" ] || [ ! -x "$VIPCTL" ]; then
    echo "run_tests: $VIPD or $VIPCTL is missing (make all)" >&2
    exit 2
fi

"$VIPD" -f -n 4 --profile via2=sbus --profile via3=sbus -s "$VIPD_SOCKET" -l warn >"$dir/vipd.log" 2>&1 &
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
for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    if [ $# -gt 0 ]; then
        want=0
        for a in "$@"; do [ "$a" = "$name" ] && want=1; done
        [ $want = 1 ] || continue
    fi
    # Each test runs in its own process ("=name"), so that a crash fails
    # that test only and the others still run.
    list=$("$t" --list 2>/dev/null)
    if [ -z "$list" ]; then
        echo "FAIL $name (cannot list its tests)"
        total_fail=$((total_fail + 1))
        bad_bins=$((bad_bins + 1))
        continue
    fi
    bp=0
    bf=0
    failed_names=""
    out="$dir/$name.out"
    : >"$out"
    for tn in $list; do
        res="$dir/$name.$tn.result"
        tout="$dir/$name.$tn.out"
        rm -f "$res"
        if [ "${VALGRIND:-0}" = 1 ]; then
            TL_RESULT="$res" timeout "$TEST_TIMEOUT" valgrind -q --error-exitcode=9 \
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
            cat "$tout" >>"$out"
        fi
    done
    total_pass=$((total_pass + bp))
    total_fail=$((total_fail + bf))
    if [ "$bf" -eq 0 ]; then
        echo "PASS $name ($bp tests)"
    else
        bad_bins=$((bad_bins + 1))
        echo "FAIL $name ($bp passed, $bf failed:$failed_names); output of the failures:"
        grep -v -e '^$' -e 'CUnit - A unit testing' -e 'cunit.sourceforge' -e '\.\.\.passed$' \
            -e '^Suite: ' "$out" | sed 's/^/    /'
    fi
done

if ! "$VIPCTL" -s "$VIPD_SOCKET" ping >/dev/null 2>&1; then
    echo "run_tests: vipd died during the tests; its log:" >&2
    sed 's/^/    /' "$dir/vipd.log" >&2
    total_fail=$((total_fail + 1))
fi

echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] && [ $bad_bins -eq 0 ]

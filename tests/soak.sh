#!/usr/bin/env bash
# soak.sh - the test suite on a busy machine (`make soak`; not part of
# `make test`): three CPU-bound processes and a parallel build of the tree
# run beside tests/run_tests.sh, which runs ROUNDS times in a row (3 by
# default). Any failure fails the soak; each round's log is kept.
#
#   B=build tests/soak.sh [ROUNDS]
#
# The hogs and the build are stopped however the soak ends.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
B=${B:-build}
ROUNDS=${1:-3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vipsoak.XXXXXX")
LOAD=()

stop_load() {
    local p
    for p in "${LOAD[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null; done
    for p in "${LOAD[@]}"; do wait "$p" 2>/dev/null; done
    LOAD=()
}
trap 'stop_load; rm -rf "$WORK/tree"' EXIT
trap 'exit 130' INT TERM

# The load, each in its own process group so that a kill takes its
# children (the build's compilers) too.
set -m
for _ in 1 2 3; do
    (while :; do :; done) &
    LOAD+=($!)
done
git -C "$ROOT" archive --format=tar HEAD | (mkdir -p "$WORK/tree" && tar -x -C "$WORK/tree")
(cd "$WORK/tree" && while :; do
    make -s -j2 B="$WORK/build" progs >/dev/null 2>&1
    rm -rf "$WORK/build"
done) &
LOAD+=($!)
set +m

failed=0
for r in $(seq "$ROUNDS"); do
    echo "soak: round $r of $ROUNDS beside three CPU hogs and a parallel build ($(uptime | sed 's/.*load/load/'))"
    if B=$B "$ROOT/tests/run_tests.sh" >"$WORK/round$r.log" 2>&1; then
        tail -n 1 "$WORK/round$r.log"
    else
        failed=1
        grep -E '^FAIL|^failed:' "$WORK/round$r.log"
        echo "soak: round $r failed; its log: $WORK/round$r.log"
    fi
done
stop_load
if [ "$failed" = 0 ]; then
    echo "soak: $ROUNDS rounds, no failure"
    rm -rf "$WORK"
    exit 0
fi
echo "soak: failures above (logs in $WORK)"
exit 1

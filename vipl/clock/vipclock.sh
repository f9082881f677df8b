#!/bin/sh
# vipclock PROG ARGS - run an unmodified VIPL program in virtual time: its
# own clock calls (clock_gettime, gettimeofday, time) read the virtual clock
# (libvipclock.so, spec-notes/virtual-time.md). Needs a paced profile.
if [ $# -eq 0 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    echo "usage: vipclock PROG [ARGS...]   (runs PROG in virtual time: VIP_CLOCK=virtual," >&2
    echo "       its clock_gettime, gettimeofday and time read the virtual clock)" >&2
    [ $# -eq 0 ] && exit 2
    exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
lib=$here/../lib/libvipclock.so
if [ ! -f "$lib" ]; then
    echo "vipclock: $lib is missing (build with make)" >&2
    exit 1
fi
# A sanitizer build: ASan's runtime must come first of all preloads.
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ { print $3; exit }')
export VIP_CLOCK=virtual
export LD_PRELOAD="${asan:+$asan:}$lib${LD_PRELOAD:+:$LD_PRELOAD}"
exec "$@"

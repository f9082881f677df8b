#!/bin/sh
# vipd-start - start, stop or ask after the system vipd (vipd --system: one
# emulated VIA NIC for every user of this host) where systemd does not run
# it (kdriver/vipd.service does the same under systemd).
#
#   vipd-start start [vipd options]    e.g. vipd-start start -n 4 --profile sbus
#   vipd-start stop
#   vipd-start status                  exit 0 if it answers
#
# The socket is $VIPD_SYSTEM_SOCKET, else /run/vipd/vipd.sock (where
# libvipl looks when a user has no vipd of their own); vipd makes its
# directory root's, mode 0755, and logs to vipd.log beside the socket.
# vipd and vipctl are taken from this script's directory, else from PATH.
set -u

usage() {
    echo "usage: vipd-start start [vipd options] | stop | status" >&2
    exit 2
}

cmd=${1:-}
[ $# -gt 0 ] && shift
sock=${VIPD_SYSTEM_SOCKET:-/run/vipd/vipd.sock}
here=$(cd "$(dirname "$0")" && pwd)
prog() {
    if [ -x "$here/$1" ]; then echo "$here/$1"; else command -v "$1" || echo "$1"; fi
}
VIPD=$(prog vipd)
VIPCTL=$(prog vipctl)

alive() {
    "$VIPCTL" -s "$sock" ping >/dev/null 2>&1
}

case $cmd in
start)
    if [ "$(id -u)" != 0 ]; then
        echo "vipd-start: the system vipd runs as root" >&2
        exit 1
    fi
    if alive; then
        echo "vipd-start: the system vipd already answers on $sock"
        exit 0
    fi
    # vipd returns once its socket listens (it daemonizes itself)
    "$VIPD" --system -s "$sock" "$@" || exit 1
    if ! alive; then
        echo "vipd-start: vipd started but does not answer on $sock (see $(dirname "$sock")/vipd.log)" >&2
        exit 1
    fi
    echo "vipd-start: the system vipd serves $sock"
    ;;
stop)
    if ! alive; then
        echo "vipd-start: no system vipd answers on $sock"
        exit 0
    fi
    "$VIPCTL" -s "$sock" shutdown >/dev/null || exit 1
    i=0
    while alive; do
        i=$((i + 1))
        if [ $i -gt 50 ]; then
            echo "vipd-start: vipd on $sock did not stop within 5 s" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "vipd-start: stopped the system vipd on $sock"
    ;;
status)
    "$VIPCTL" -s "$sock" ping
    ;;
*)
    usage
    ;;
esac

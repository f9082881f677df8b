#!/usr/bin/env bash
# check_layers.sh - the layering the README states, checked: every include
# and every call between our folders goes down, never up or sideways.
#
#   B=build tools/check_layers.sh        (make check-layers; make test runs it)
#
# The tiers, bottom up, and what each folder may include:
#   include/        shared layouts (via_abi.h, via_net.h) and the VIA
#                   specification's types, codes and descriptor layout
#                   (via_spec.h, installed beside vipl.h): only include/
#   vipl/include/   the public VIPL API (vipl.h, vipl_ext.h): include/via_spec.h
#   ctlsock/        the control socket's framing: include/
#   lanai-fw/       the NIC: include/, itself; its links (lanai-fw/link/)
#                   are reached through fw_link.h alone: the links' own
#                   headers are theirs
#   extensions/     host side of the short-message paths: include/,
#                   vipl/include/, the NIC's interface (nic.h and what it
#                   carries: fw_lock.h, fw_model.h)
#   kdriver/        vipd, vipctl: include/, ctlsock/, the NIC's interface,
#                   itself
#   vipl/src/       the library: include/, ctlsock/, vipl/, extensions/ext.h,
#                   the NIC's interface
#   am2/            libam2, amrun: am2/, vipl/include/ (the public API only)
# Calls (the objects' undefined symbols, nm): the NIC calls nothing of the
# library, vipd or the extensions; the extensions nothing of the library or
# vipd; vipd and the library only what the NIC's interface declares (and
# vipd nothing of the library); ctlsock nothing of ours; libam2 only the
# public VIPL API. Within each folder of ACYCLIC, the files call each other
# in no loop, so that they read as layers too. Exit 1 with every crossing
# and loop listed; 0 when none.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
B=${B:-build}
OBJ=$B/obj
IDIRS="include ctlsock vipl/include vipl/src lanai-fw/include lanai-fw lanai-fw/link kdriver extensions am2/include am2/src am2/tools"
NIC_IFACE="lanai-fw/include/nic.h lanai-fw/include/fw_lock.h lanai-fw/include/fw_model.h"
# Folders whose files, their subfolders' included, may not call each other
# in a loop (acyclic, below).
ACYCLIC="vipl/src kdriver am2/src lanai-fw"
bad=0
say() { echo "check-layers: $*" >&2; bad=1; }

# The folder (tier) a source or header file belongs to.
tier() {
    case $1 in
    include/*) echo include ;;
    vipl/include/*) echo vipl-api ;;
    vipl/src/*) echo vipl ;;
    ctlsock/*) echo ctlsock ;;
    lanai-fw/link/*) echo nic-link ;;
    lanai-fw/*) echo nic ;;
    extensions/*) echo ext ;;
    kdriver/*) echo kdriver ;;
    am2/*) echo am2 ;;
    *) echo other ;;
    esac
}

# Where an #include of name from file resolves: the file's own folder
# first ("..."), then every -I folder; "" for a system header. (The
# Makefile gives each folder only the -I paths of its tiers, so most
# crossings are compile errors too; this check also sees same-folder
# "..." includes and the headers only tests include.)
resolve() {
    local file=$1 name=$2 d
    d=$(dirname "$file")
    if [ -f "$d/$name" ]; then
        realpath --relative-to="$ROOT" "$d/$name"
        return
    fi
    for d in $IDIRS; do
        if [ -f "$d/$name" ]; then
            echo "$d/$name"
            return
        fi
    done
}

# allowed FROM_TIER HEADER_PATH
allowed() {
    local from=$1 h=$2 to
    to=$(tier "$h")
    case " $NIC_IFACE " in *" $h "*) iface=1 ;; *) iface=0 ;; esac
    case $from in
    include) [ "$to" = include ] ;;
    vipl-api) [ "$to" = vipl-api ] || [ "$h" = include/via_spec.h ] ;;
    ctlsock) [ "$to" = include ] || [ "$to" = ctlsock ] ;;
    nic) [ "$to" = include ] || [ "$to" = nic ] ;;
    nic-link) [ "$to" = include ] || [ "$to" = nic ] || [ "$to" = nic-link ] ;;
    ext) [ "$to" = include ] || [ "$to" = vipl-api ] || [ "$to" = ext ] || [ "$iface" = 1 ] ;;
    kdriver) [ "$to" = include ] || [ "$to" = ctlsock ] || [ "$to" = kdriver ] ||
        [ "$iface" = 1 ] ;;
    vipl) [ "$to" = include ] || [ "$to" = ctlsock ] || [ "$to" = vipl-api ] ||
        [ "$to" = vipl ] || [ "$h" = extensions/ext.h ] || [ "$iface" = 1 ] ;;
    am2) [ "$to" = am2 ] || [ "$to" = vipl-api ] || [ "$h" = include/via_spec.h ] ;;
    *) true ;;
    esac
}

# ---- includes ------------------------------------------------------------------
while read -r file; do
    from=$(tier "$file")
    while read -r name; do
        h=$(resolve "$file" "$name")
        [ -n "$h" ] || continue
        allowed "$from" "$h" || say "$file includes $h (the $(tier "$h") tier: up or sideways from $from)"
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/p' "$file")
done < <( (git ls-files 'include/*' 'ctlsock/*' 'vipl/*' 'lanai-fw/*' 'extensions/*' 'kdriver/*' \
    'am2/*' 2>/dev/null || find include ctlsock vipl lanai-fw extensions kdriver am2 -type f) |
    grep -E '\.(c|h)$')

# ---- calls ---------------------------------------------------------------------
if [ ! -d "$OBJ/lanai-fw" ]; then
    echo "check-layers: no objects under $OBJ (run make first): calls not checked" >&2
    exit 1
fi
defs() { nm --defined-only -g "$@" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u; }
undefs() { nm -u "$@" 2>/dev/null | awk '{ print $NF }' | sort -u; }
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
defs "$OBJ"/vipl/src/*.o >"$D/vipl"
defs "$OBJ"/kdriver/*.o >"$D/kdriver"
defs "$OBJ"/extensions/*.o >"$D/ext"
NIC_OBJS="$OBJ/lanai-fw/*.o $OBJ/lanai-fw/link/*.o $OBJ/lanai-fw/timing/*.o"
defs $NIC_OBJS >"$D/nic"
defs "$OBJ"/ctlsock/*.o >"$D/ctlsock"
defs "$OBJ"/am2/src/*.o >"$D/am2"
# the NIC's interface: the functions and variables its interface headers declare
grep -ohE '\b(nic|fw|hal)_[a-z0-9_]+\b' $NIC_IFACE | sort -u >"$D/iface"
cat "$D/vipl" "$D/kdriver" "$D/ext" "$D/ctlsock" "$D/am2" | sort -u >"$D/above_nic"

# calls FROM_NAME OBJECTS FORBIDDEN_DEFS... : the undefined symbols of the
# objects that the forbidden folders define
calls() {
    local name=$1 objs=$2 s
    shift 2
    for s in $(undefs $objs | comm -12 - <(cat "$@" | sort -u)); do
        say "$name calls $s, which is above it or beside it"
    done
}
calls "the NIC (lanai-fw/)" "$NIC_OBJS" "$D/above_nic"
calls "the extensions" "$OBJ/extensions/*.o" "$D/vipl" "$D/kdriver" "$D/am2"
calls "vipd and vipctl (kdriver/)" "$OBJ/kdriver/*.o" "$D/vipl" "$D/ext" "$D/am2"
calls "the control socket (ctlsock/)" "$OBJ/ctlsock/*.o" "$D/above_nic" "$D/nic"
grep -v '^Vip' "$D/vipl" >"$D/vipl_inner" # libam2 may call the public API (Vip*) only
calls "libam2" "$OBJ/am2/src/*.o" "$D/vipl_inner" "$D/kdriver" "$D/ext" "$D/nic" "$D/ctlsock"
for from in vipl kdriver ext; do
    case $from in
    vipl) objs="$OBJ/vipl/src/*.o" ;;
    kdriver) objs="$OBJ/kdriver/*.o" ;;
    ext) objs="$OBJ/extensions/*.o" ;;
    esac
    for s in $(undefs $objs | comm -12 - "$D/nic" | comm -23 - "$D/iface"); do
        say "$from calls the NIC's $s, which its interface (nic.h, fw_model.h, fw_lock.h) does not declare"
    done
done
# acyclic FOLDER: the folder's objects call each other in no loop. tsort
# orders the file-to-file calls and names the files of each loop it meets;
# the calls between those files are listed with the symbols behind them.
acyclic() {
    local folder=$1 o name loop
    local objs=()
    mapfile -t objs < <(find "$OBJ/$folder" -name '*.o' 2>/dev/null | LC_ALL=C sort)
    if [ "${#objs[@]}" = 0 ]; then
        say "no objects under $OBJ/$folder: its files' loops not checked"
        return
    fi
    for o in "${objs[@]}"; do
        name=$(basename "$o" .o)
        nm --defined-only -g "$o" | awk -v f="$name" 'NF == 3 { print $3, f }'
    done | LC_ALL=C sort -u >"$D/acyclic_defs"
    for o in "${objs[@]}"; do
        name=$(basename "$o" .o)
        nm -u "$o" | awk -v f="$name" '{ print $NF, f }'
    done | LC_ALL=C sort -u >"$D/acyclic_uses"
    # caller callee symbol, one line per call between two files
    LC_ALL=C join "$D/acyclic_uses" "$D/acyclic_defs" |
        awk '$2 != $3 { print $2, $3, $1 }' >"$D/acyclic_calls"
    loop=$(awk '{ print $1, $2 }' "$D/acyclic_calls" | LC_ALL=C tsort 2>&1 >/dev/null |
        sed -n 's/^tsort: \([^ ]*\)$/\1/p' | LC_ALL=C sort -u | tr '\n' ' ')
    [ -n "$loop" ] || return
    say "the files of $folder call each other in a loop: ${loop% }"
    awk -v loop=" $loop" 'index(loop, " " $1 " ") && index(loop, " " $2 " ") {
            calls[$1 " -> " $2] = calls[$1 " -> " $2] " " $3
        }
        END { for (c in calls) print c ":" calls[c] }' "$D/acyclic_calls" | LC_ALL=C sort |
        while read -r line; do say "  $line"; done
}
for folder in $ACYCLIC; do
    acyclic "$folder"
done

[ "$bad" = 0 ] && echo "check-layers: every include and call goes down"
exit "$bad"

#!/usr/bin/env bash
# Installation and data files (docs/install.md): the data-path search
# order (the platform's directory, then $LOONG_DATA_PATH, then the installed
# directory) with temporary directories; bare platform names; the installed
# layout after `make install DESTDIR=...` and its removal by `make
# uninstall`; the man pages rendered by groff without a warning; the bash
# completion. Run by `make check` with the install directories in the
# environment (Makefile.am, AM_TESTS_ENVIRONMENT).
set -uo pipefail
top=${srcdir:-$(dirname "$0")/..}
L=${LOONG:-$loong_builddir/loong}
tmp=$(mktemp -d /tmp/loong-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
expect() { # NAME WANT GOT
    if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: want '$2', got '$3'"; fi
}

# ---- the search order, with tables whose peaks tell them apart ----
# A copy of loong out of its build directory: the build directory's own
# also searches the source tree (checked last), which would find the
# shipped tables these cases must miss.
mkdir -p "$tmp/plat" "$tmp/a" "$tmp/b" "$tmp/empty" "$tmp/bin"
cp "$L" "$tmp/bin/loong"
Lb=$L L=$tmp/bin/loong
"$L" topo --nodes 1 --gpus-per-node 8 --gpu h100 -o "$tmp/plat/my.xml" || bad "topo"
table() { sed "s/^peak .*/peak    $2/" "$top/topologies/h100.calib" >"$1"; }
table "$tmp/a/h100.calib" 900T
table "$tmp/b/h100.calib" 800T
cp "$tmp/a/h100.calib" "$tmp/a/mine.calib"
peak() { # the GPU peak loong sim used, from its MFU line
    "$L" sim --quiet --model tiny --seq 4K --mesh 2x4 --layers 1 "$@" 2>&1 |
        sed -n 's/.*peak \([0-9.]*\) TFLOP\/s.*/\1/p;s/^loong sim: error: \(.*\)/\1/p'
}
expect "LOONG_DATA_PATH in order (a first)" 900.0 "$(LOONG_DATA_PATH=$tmp/a:$tmp/b peak --platform "$tmp/plat/my.xml")"
expect "LOONG_DATA_PATH in order (b first)" 800.0 "$(LOONG_DATA_PATH=$tmp/b:$tmp/a peak --platform "$tmp/plat/my.xml")"
table "$tmp/plat/h100.calib" 700T
expect "the platform's directory first" 700.0 "$(LOONG_DATA_PATH=$tmp/a peak --platform "$tmp/plat/my.xml")"
expect "--calib NAME on the data path" 900.0 "$(LOONG_DATA_PATH=$tmp/a peak --platform "$tmp/plat/my.xml" --calib mine)"
rm "$tmp/plat/h100.calib"
msg=$(LOONG_DATA_PATH=$tmp/empty: peak --platform "$tmp/plat/my.xml")
want="unknown GPU kind 'h100': calibration table 'h100.calib' not found in: $tmp/plat, $tmp/empty, $loong_pkgdatadir (give one with --calib FILE)"
expect "a missing table lists every place, in order" "$want" "$msg"
expect "a bare platform name" 900.0 "$(cd "$tmp/empty" && LOONG_DATA_PATH=$tmp/plat:$tmp/a peak --platform my)"
msg=$(cd "$tmp/empty" && LOONG_DATA_PATH=$tmp/a peak --platform my)
expect "a missing platform lists every place" \
    "platform 'my' not found in: ., $tmp/a, $loong_pkgdatadir (give its path, set LOONG_DATA_PATH to its directory, or make install; loong topo --list)" "$msg"
LOONG_DATA_PATH=$tmp/plat:$tmp/a "$L" topo --list >"$tmp/list.txt"
grep -q "^  my.xml  *platform: 1 node(s) x 8 h100 GPUs" "$tmp/list.txt" && grep -q "^  mine.calib " "$tmp/list.txt" &&
    ok "topo --list" || bad "topo --list: $(cat "$tmp/list.txt")"
# the build directory's loong: the source tree after LOONG_DATA_PATH, before the installed directory
src=$(cd "$top/topologies" && pwd -P)
msg=$(cd "$tmp/empty" && LOONG_DATA_PATH=$tmp/a "$Lb" sim --platform my 2>&1)
# (the places only: long build paths may cut the message's advice at LOONG_ERRLEN)
expect "the build directory's loong searches its source tree" \
    "loong sim: error: platform 'my' not found in: ., $tmp/a, $src, $loong_pkgdatadir" "${msg%% (*}"
expect "... and finds the shipped platforms from anywhere" 989.0 "$(cd / && L=$Lb peak --platform dgx-h100-1n)"
L=$Lb

# ---- make install DESTDIR=..., the staged layout, make uninstall ----
stage=$tmp/stage
if env -u MAKEFLAGS -u MFLAGS ${loong_make:-make} -s -C "$loong_builddir" install DESTDIR="$stage" >"$tmp/install.log" 2>&1; then
    ok "make install DESTDIR"
    for f in "$loong_bindir/loong" "$loong_pkgdatadir/dgx-h100-8n.xml" "$loong_pkgdatadir/h100.calib" \
        "$loong_bashcompletiondir/loong"; do
        [ -f "$stage$f" ] && ok "installed $f" || bad "not installed: $f"
    done
    if [ -n "${loong_help2man:-}" ]; then
        for c in $("$L" --help | awk '/^commands:/ { on = 1; next } on && !NF { exit } on { print $1 }'); do
            [ -f "$stage$loong_mandir/man1/loong-$c.1" ] && ok "man page loong-$c(1)" || bad "no man page for $c"
        done
    fi
    S=$stage$loong_bindir/loong
    out=$(cd "$tmp/empty" && LOONG_DATA_PATH=$stage$loong_pkgdatadir "$S" sim --quiet --platform dgx-h100-1n \
        --model tiny --seq 4K --mesh 2x4 --layers 1 2>&1 | grep -c "^# step time")
    expect "the staged loong finds its platform and table by name" 1 "$out"
    env -u MAKEFLAGS -u MFLAGS ${loong_make:-make} -s -C "$loong_builddir" uninstall DESTDIR="$stage" >>"$tmp/install.log" 2>&1
    left=$(find "$stage" -type f | wc -l)
    expect "make uninstall leaves no file" 0 "$left"
else
    bad "make install DESTDIR: $(tail -3 "$tmp/install.log")"
fi

# ---- man pages: groff without warnings ----
if [ -n "${loong_help2man:-}" ]; then
    for m in "$loong_builddir"/doc/*.1; do
        w=$(groff -ww -man -Tutf8 "$m" 2>&1 >/dev/null)
        [ -z "$w" ] && ok "groff -ww $(basename "$m")" || bad "groff -ww $(basename "$m"): $w"
    done
else
    echo "skip man pages: no help2man (apt-get install help2man)"
fi

# ---- bash completion ----
complete_words() { # WORDS...: what <TAB> offers after them
    bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _loong; printf "%s\n" "${COMPREPLY[@]}"' \
        _ "$top/completions/loong" "$@"
}
complete_words "$L" si | grep -qx sim && ok "completes commands" || bad "completes commands"
complete_words "$L" sim --pla | grep -qx -- --platform && ok "completes sim's options" || bad "completes sim's options"
complete_words "$L" plan --rob | grep -qx -- --robust && ok "completes plan's options" || bad "completes plan's options"

echo "# install: $fails failed"
[ $fails -eq 0 ]

#!/usr/bin/env bash
# Simulator speed against the build before the mesh, TP and PP (d602a6c,
# issue 51): the 256-GPU llama3-8b step at S = 1M (loongtrain 8x32, w = 4,
# every layer simulated) on d602a6c's own platform and calibration table
# (topologies/dgx-h100-32n.xml, topologies/h100.calib), run by both builds
# in turn, A B A B, so that a shared machine's drift hits both alike. Each
# run is the whole `loong sim` process: wall and user seconds and peak RSS
# from /usr/bin/time. Prints each pair, then the medians: the ratio of wall
# times new / old per pair, the same per simulated task (today's step has
# the memory-bound kernels d602a6c's lacks, so more tasks), and RSS.
#
# usage: experiments/simspeed/run.sh [OLD_LOONG|build] [NEW_LOONG] [PAIRS]
#   OLD_LOONG  a loong built from d602a6c; `build' (the default) builds one
#              in a temporary detached worktree and removes it at the end
#   NEW_LOONG  today's loong (default build/loong)
#   PAIRS      interleaved pairs (default 5)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
REV=d602a6c
OLD=${1:-build}
NEW=${2:-$TOP/build/loong}
PAIRS=${3:-5}
die() { echo "simspeed: $*" >&2; exit 2; }
[ -x "$NEW" ] || die "no loong at $NEW: build it (./setup.sh) or give its path"
case $PAIRS in '' | *[!0-9]* | 0) die "PAIRS must be a positive count, not '$PAIRS'" ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/simspeed.XXXXXX")
WT=""
cleanup() {
    [ -z "$WT" ] || git -C "$TOP" worktree remove --force "$WT" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# d602a6c's inputs, whatever today's topologies/ holds
git -C "$TOP" show "$REV:topologies/dgx-h100-32n.xml" >"$WORK/dgx-h100-32n.xml" || die "no revision $REV in $TOP"
git -C "$TOP" show "$REV:topologies/h100.calib" >"$WORK/h100.calib"

if [ "$OLD" = build ]; then
    WT=$WORK/old
    echo "# building $REV in a temporary worktree (a few minutes)" >&2
    git -C "$TOP" worktree add --detach "$WT" "$REV" >/dev/null 2>&1 || die "git worktree add $REV failed"
    (cd "$WT" && autoreconf -fi >/dev/null 2>&1 && mkdir -p build && cd build && ../configure -q >/dev/null &&
        make -s -j"${JOBS:-2}" >/dev/null 2>&1) || die "the build of $REV failed (see $WT/build)"
    OLD=$WT/build/loong
fi
[ -x "$OLD" ] || die "no loong at $OLD"

ARGS=(sim --model llama3-8b --seq 1M --mesh 8x32 --strategy loongtrain --window 4 --scope step
    --platform "$WORK/dgx-h100-32n.xml" --calib "$WORK/h100.calib")

# run NAME LOONG: one timed run; appends "wall user rss_kb tasks step_s" to NAME.runs
run() {
    local name=$1 bin=$2
    /usr/bin/time -f 'TIME %e %U %M' -o "$WORK/$name.time" "$bin" "${ARGS[@]}" >"$WORK/$name.out" 2>/dev/null ||
        die "$bin ${ARGS[*]} failed"
    local tasks step
    tasks=$(sed -nE 's/^# platform .*; ([0-9]+) tasks$/\1/p' "$WORK/$name.out")
    step=$(sed -nE 's/^# step time: ([0-9.]+) s.*/\1/p' "$WORK/$name.out")
    echo "$(awk '/^TIME/ {print $2, $3, $4}' "$WORK/$name.time") $tasks $step" >>"$WORK/$name.runs"
}

median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '# %4s %10s %10s %8s %10s %10s\n' pair old_wall_s new_wall_s new/old old_RSS_MB new_RSS_MB
for i in $(seq "$PAIRS"); do
    run old "$OLD"
    run new "$NEW"
    o=$(tail -1 "$WORK/old.runs") n=$(tail -1 "$WORK/new.runs")
    echo "$o $n" | awk -v i="$i" '{printf "  %4d %10.2f %10.2f %8.3f %10.0f %10.0f\n", i, $1, $6, $6 / $1, $3 / 1024, $8 / 1024}'
    echo "$o $n" | awk '{print $6 / $1}' >>"$WORK/ratio"
    echo "$o $n" | awk '{print ($6 / $9) / ($1 / $4)}' >>"$WORK/ratio_task"
done
read -r ot os <<<"$(awk 'NR == 1 {print $4, $5}' "$WORK/old.runs")"
read -r nt ns <<<"$(awk 'NR == 1 {print $4, $5}' "$WORK/new.runs")"
echo "# tasks: old $ot, new $nt; step time: old $os s, new $ns s"
echo "# median wall: old $(awk '{print $1}' "$WORK/old.runs" | median) s, new $(awk '{print $1}' "$WORK/new.runs" | median) s"
echo "# median user: old $(awk '{print $2}' "$WORK/old.runs" | median) s, new $(awk '{print $2}' "$WORK/new.runs" | median) s"
echo "# median RSS: old $(awk '{print $3 / 1024}' "$WORK/old.runs" | median) MB, new $(awk '{print $3 / 1024}' "$WORK/new.runs" | median) MB"
echo "# median ratio new/old per pair: wall $(median <"$WORK/ratio"), wall per simulated task $(median <"$WORK/ratio_task")"

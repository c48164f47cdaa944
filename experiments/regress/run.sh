#!/usr/bin/env bash
# Regression check for refactors: records what loong prints and writes for a
# fixed set of configurations (every strategy and scope, dp, ZeRO 0-3,
# recompute, TP and PP with their folding; DAG JSON and stats, sim summaries, JSON summaries and traces,
# sim --compose, plan tables and CSV, topo platforms, calibrate and compare
# on simulated traces, exec --check tables and dumps), then compares two
# recordings byte for byte. Lines that carry wall-clock times are dropped
# (the plan's "# time:" footer, "sim_wall_s" in JSON summaries); exec step
# times are measured, so only its --check table and --dump arrays count.
#
# usage: experiments/regress/run.sh record LOONG OUTDIR
#        experiments/regress/run.sh compare OLDDIR NEWDIR
#        experiments/regress/run.sh base OUTDIR [LOONG]   record with paths normalised
#        experiments/regress/run.sh against BASEDIR [LOONG]  record LOONG, compare with a base
#        experiments/regress/run.sh vs REV [LOONG]   build REV (a git revision) in a
#            temporary worktree, record it (with its own script and data files)
#            and LOONG (default build/loong), compare with the paths of
#            each tree and binary made the same
# Exit status: 0 identical, 1 some output differs (listed), 2 usage or a run failed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
TOPO=$TOP/topologies
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

die() { echo "regress: $*" >&2; exit 2; }

# Drop the lines that carry wall-clock times.
normalise() { sed -E -e '/^# time: /d' -e 's/"sim_wall_s": *[-0-9.e+]+,?//' "$@"; }

record() {
    local L O=$2 n=0
    L=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    [ -x "$L" ] || die "no loong at $1"
    mkdir -p "$O"
    O=$(cd "$O" && pwd)
    # one step: NAME then a loong command line; stdout goes to NAME.out
    step() {
        local name=$1; shift
        n=$((n + 1))
        printf '  [%2d] %s\n' "$n" "$name" >&2
        if ! (cd "$O" && "$@" >"$O/$name.out" 2>"$O/$name.err"); then
            echo "regress: '$name' failed: $(head -c 300 "$O/$name.err")" >&2
            return 2
        fi
    }
    # DAGs: every strategy, scope, ZeRO stage and recompute policy
    local T="--model tiny --seq 4K --gpus-per-node 4"
    step dag-lt-attn "$L" dag $T --mesh 2x4 --strategy loongtrain --window 2 --scope attn --format json
    step dag-ring-fwd "$L" dag $T --mesh 1x4 --strategy ring --scope attn-fwd --format json
    step dag-zz-attn "$L" dag $T --mesh 1x4 --strategy zigzag --scope attn --format json
    step dag-uly-z0 "$L" dag $T --mesh 4x1 --strategy ulysses --scope step --zero 0 --format json
    step dag-usp-z1-sel "$L" dag $T --mesh 2x2 --strategy usp --scope step --zero 1 --recompute selective --format json
    step dag-dual-z2-full "$L" dag $T --mesh 2x2 --strategy dualring --scope step --zero 2 --recompute full --format json
    step dag-lt-cf-z3 "$L" dag $T --mesh 2x4 --strategy loongtrain --window 2 --placement context-first --scope step \
        --zero 3 --format json
    step dag-ct-double "$L" dag --model 7b-mha --seq 64K --mesh 1x16 --strategy ring --ring double --window 4 \
        --scope step --format json
    step dag-repl-stats "$L" dag --model llama3-8b --seq 128K --mesh 16x4 --strategy loongtrain --scope step --format stats
    step dag-8b-stats "$L" dag --model llama3-8b --seq 1M --mesh 8x8 --strategy loongtrain --window 4 --scope step
    step dag-8b-json "$L" dag --model llama3-8b --seq 128K --mesh 4x16 --strategy loongtrain --window 4 --scope attn \
        --format json
    step dag-dot "$L" dag $T --mesh 2x2 --strategy usp --scope attn --format dot
    # tensor and pipeline parallelism, recompute as the frameworks name it
    local P="--model $TOP/tests/data/tiny6.model --seq 4K --gpus-per-node 8 --scope step"
    step dag-tp2-pp2 "$L" dag $P --tp 2 --mesh 1x2 --strategy zigzag --pp 2 --micro-batches 4 --format json
    step dag-vpp-uneven "$L" dag $P --mesh 1x1 --strategy ulysses --pp 2 --micro-batches 4 \
        --schedule interleaved --vpp 2 --pp-first-layers 2 --format stats
    step dag-sccpp "$L" dag $T --mesh 2x2 --strategy usp --scope step --recompute sc++ --format json
    step dag-full-block "$L" dag $P --mesh 2x2 --strategy usp --recompute full --recompute-method block \
        --recompute-num-layers 2 --format stats
    # platforms
    step topo-a100 "$L" topo --nodes 4 --gpus-per-node 8 --gpu a100 --nics-per-node 4 --oversubscription 2
    step topo-cpu "$L" topo --nodes 1 --gpus-per-node 4 --gpu cpu -o cpu4.xml
    cp "$TOP/topologies/cpu.calib" "$O/cpu.calib"
    # simulations: summaries, JSON summaries, traces
    local S="--platform $TOPO/dgx-h100-4n.xml --model llama3-8b --seq 256K --links 5 --quiet"
    step sim-lt-step "$L" sim $S --mesh 8x4 --strategy loongtrain --window 2 --scope step --layers 2 \
        --trace sim-lt-step.trace.json --json sim-lt-step.json
    step sim-zz-z0 "$L" sim $S --mesh 1x32 --strategy zigzag --scope step --zero 0 --layers 2 --json sim-zz-z0.json
    step sim-usp-z3-full "$L" sim $S --mesh 4x8 --strategy usp --placement context-first --scope step --zero 3 \
        --recompute full --layers 2
    step sim-dual-attn "$L" sim $S --mesh 4x8 --strategy dualring --scope attn --trace sim-dual-attn.trace.json
    step sim-ring-fwd "$L" sim $S --mesh 1x32 --strategy ring --scope attn-fwd --trace-rank 3 \
        --trace sim-ring-fwd.trace.json
    step sim-uly-z2-sel "$L" sim $S --mesh 8x1 --strategy ulysses --scope step --zero 2 --recompute selective --layers 3
    step sim-a100 "$L" sim --platform "$TOPO/a100-4n-4nic.xml" --model 7b-gqa --seq 128K --mesh 4x8 \
        --strategy loongtrain --window 4 --scope step --layers 2 --quiet --trace-layer 1 --trace sim-a100.trace.json
    step sim-compose "$L" sim $S --mesh 8x4 --strategy loongtrain --window 2 --scope step --compose \
        --json sim-compose.json
    step sim-cpu "$L" sim --platform cpu4.xml $T --mesh 1x4 --strategy zigzag --scope attn --quiet \
        --trace sim-cpu.trace.json
    step sim-cpu2 "$L" sim --platform cpu4.xml --model tiny --seq 8K --gpus-per-node 4 --mesh 2x2 --strategy usp --scope attn --quiet \
        --trace sim-cpu2.trace.json
    # data parallelism: ZeRO 0-3 over dp replicas, by symmetry and in full
    local D="--platform $TOPO/dgx-h100-4n.xml --model llama3-8b --seq 128K --mesh 2x4 --strategy usp --scope step \
        --layers 2 --links 5 --quiet"
    for z in 0 1 2 3; do
        step sim-dp2-z$z "$L" sim $D --dp 2 --zero $z --json sim-dp2-z$z.json --trace sim-dp2-z$z.trace.json
    done
    step sim-dp4-full "$L" sim $D --dp 4 --dp-mode full --zero 1 --json sim-dp4-full.json
    step sim-dp1-z3 "$L" sim $D --dp 1 --zero 3 --json sim-dp1-z3.json --trace sim-dp1-z3.trace.json
    # folding: TP ranks by symmetry and in full, pipelines (1F1B, interleaved with uneven ends)
    local F="--platform $TOPO/dgx-h100-4n.xml --model llama3-8b --seq 64K --scope step --layers 4 --links 5 --quiet"
    for m in symmetric full; do
        step sim-tp2-$m "$L" sim $F --tp 2 --mesh 2x2 --strategy usp --tp-mode $m --json sim-tp2-$m.json
    done
    step sim-pp2-1f1b "$L" sim $F --mesh 1x4 --strategy zigzag --pp 2 --micro-batches 4 --json sim-pp2-1f1b.json \
        --trace sim-pp2-1f1b.trace.json
    step sim-pp2-vpp "$L" sim $F --layers 6 --mesh 2x2 --strategy usp --pp 2 --micro-batches 4 --schedule interleaved \
        --vpp 2 --pp-first-layers 2 --dp 2 --json sim-pp2-vpp.json
    # the step as the frameworks run it: unfused attention with dropout, FP8 GEMMs, the memory timeline
    step sim-unfused "$L" sim $F --tp 2 --mesh 2x1 --strategy ulysses --attention unfused --attention-dropout 0.1 \
        --hidden-dropout 0.1 --json sim-unfused.json --trace sim-unfused.trace.json
    step sim-fp8-mem "$L" sim $F --mesh 2x4 --strategy usp --precision fp8-delayed --json sim-fp8-mem.json \
        --trace sim-fp8-mem.trace.json --trace-memory
    step dag-mxfp8 "$L" dag $P --tp 2 --mesh 1x2 --strategy zigzag --precision mxfp8 --format stats
    # a rack-scale NVLink domain
    step topo-nvl72 "$L" topo --preset gb200-nvl72 -o nvl72.xml
    cp "$TOP/topologies/gb200.calib" "$O/gb200.calib"
    step sim-nvl72 "$L" sim --platform nvl72.xml --model llama3-8b --seq 128K --mesh 8x8 --strategy usp --scope step \
        --layers 2 --gpus-per-node 72 --quiet --json sim-nvl72.json
    # compare of a dp 1 and a dp 2 trace: its message and exit status
    step compare-dp sh -c '"$0" compare sim-dp1-z3.trace.json sim-dp2-z3.trace.json --by kind --top 3 2>&1; echo "exit $?"' "$L"
    # closing the loop on simulated traces (deterministic inputs)
    step compare "$L" compare sim-cpu.trace.json sim-cpu.trace.json --by rank --top 3
    step calibrate "$L" calibrate sim-cpu.trace.json sim-cpu2.trace.json --platform cpu4.xml -o fitted
    # plans: the main job, dp search, ZeRO 0 (full layers), analytical only, CSV
    step plan-main "$L" plan --quiet --platform "$TOPO/dgx-h100-8n.xml" --csv plan-main.csv
    step plan-dp "$L" plan --quiet --platform "$TOPO/dgx-h100-1n.xml" --seq 128K --dp auto --top 3
    step plan-dp2-z3 "$L" plan --quiet --platform "$TOPO/dgx-h100-4n.xml" --model llama3-8b --seq 128K --gpus 32 \
        --dp 2 --zero 3 --global-batch 2 --top 3 --csv plan-dp2-z3.csv
    step plan-z0 "$L" plan --quiet --platform "$TOPO/dgx-h100-1n.xml" --model tiny --seq 64K --zero 0 \
        --recompute full --top 2
    step plan-model "$L" plan --quiet --platform "$TOPO/a100-8n-4nic.xml" --seq 256K --top 0 --rows 0 \
        --csv plan-model.csv --gpu-mem 74.5GiB
    # the frameworks' languages out and in, and the plausibility check
    step plan-emit-megatron "$L" plan --quiet --platform "$TOPO/dgx-h100-1n.xml" --model tiny --seq 64K --top 2 \
        --emit megatron
    step plan-emit-titan "$L" plan --quiet --platform "$TOPO/dgx-h100-1n.xml" --model tiny --seq 64K --top 2 \
        --emit torchtitan
    step check-megatron sh -c '"$0" check --megatron-args "$1"/experiments/tp-published/gpt-1.7b.megatron \
        --platform "$1"/topologies/a100-4n-4nic.xml --measured-tflops 137 2>&1; echo "exit $?"' "$L" "$TOP"
    # exec: the --check tables and the dumped arrays
    if "$L" exec --help >/dev/null 2>&1; then
        local E="$L exec $T --dtype fp32 --iters 1 --warmup 0 --check"
        step exec-lt "${MPIRUN:-mpirun}" -np 8 $E --mesh 2x4 --strategy loongtrain --window 2 --scope attn --dump dump-lt
        step exec-step "${MPIRUN:-mpirun}" -np 4 $E --mesh 2x2 --strategy dualring --scope step --zero 2 \
            --recompute selective --dump dump-step
        step exec-tp-pp "${MPIRUN:-mpirun}" -np 8 $E --tp 2 --mesh 1x2 --strategy zigzag --pp 2 --micro-batches 2 \
            --scope step
        for f in exec-lt exec-step exec-tp-pp; do
            sed -nE '/^# tensor|^  [A-Za-z]/p' "$O/$f.out" >"$O/$f.check" && rm "$O/$f.out"
        done
    fi
    rm -f "$O"/*.err
    for f in "$O"/*.out "$O"/*.json "$O"/*.csv; do
        [ -f "$f" ] && normalise -i "$f"
    done
    echo "recorded $n runs in $O" >&2
}

compare() {
    local A=$1 B=$2 bad=0
    [ -d "$A" ] && [ -d "$B" ] || die "compare needs two recorded directories"
    while IFS= read -r f; do
        if [ ! -f "$B/$f" ]; then
            echo "missing in $B: $f"
            bad=1
        elif ! cmp -s "$A/$f" "$B/$f"; then
            echo "differs: $f"
            bad=1
        fi
    done < <(cd "$A" && find . -type f | sort)
    while IFS= read -r f; do
        [ -f "$A/$f" ] || { echo "new in $B: $f"; bad=1; }
    done < <(cd "$B" && find . -type f | sort)
    local count
    count=$(cd "$A" && find . -type f | wc -l)
    if [ $bad -eq 0 ]; then echo "regress: $count files identical"; else echo "regress: outputs differ"; fi
    return $bad
}

# Record LOONG into OUTDIR with its binary and tree paths written LOONG and TOP
# (the form vs compares), so that a recording from one checkout compares with
# one from another.
base() {
    local O=$1 L=${2:-$TOP/build/loong} abs
    record "$L" "$O"
    abs=$(realpath "$L")
    find "$O" -type f -exec sed -i -e "s|$abs|LOONG|g" -e "s|$TOP|TOP|g" {} +
}

# Compare LOONG with a recording made by base (a saved baseline).
against() {
    local A=$1 L=${2:-$TOP/build/loong} new
    [ -d "$A" ] || die "no baseline at $A: make one with '$0 base DIR'"
    new=$(mktemp -d /tmp/loong-regress-XXXXXX)
    base "$new" "$L"
    compare "$A" "$new"
}

vs() {
    local rev=$1 L=${2:-$TOP/build/loong} wt
    wt=$(mktemp -d /tmp/loong-regress-XXXXXX)
    git -C "$TOP" worktree add -q --detach "$wt/src" "$rev"
    (cd "$wt/src" && autoreconf -fi >/dev/null 2>&1 && mkdir build && cd build && ../configure -q >/dev/null &&
        make -s -j"$(nproc)" src/model/fidelity_rows.inc loong >/dev/null 2>&1) || die "cannot build $rev"
    # the revision records with its own script and data files (a data
    # format changed since would not read in it), and the paths each
    # recording names, its tree and its binary, become the same words
    "$wt/src/experiments/regress/run.sh" record "$wt/src/build/loong" "$wt/old"
    record "$L" "$wt/new"
    local abs
    abs=$(realpath "$L")
    find "$wt/old" -type f -exec sed -i -e "s|$wt/src/build/loong|LOONG|g" -e "s|$wt/src|TOP|g" {} +
    find "$wt/new" -type f -exec sed -i -e "s|$abs|LOONG|g" -e "s|$TOP|TOP|g" {} +
    local rc=0
    compare "$wt/old" "$wt/new" || rc=$?
    git -C "$TOP" worktree remove --force "$wt/src"
    echo "recordings kept in $wt/old and $wt/new" >&2
    return $rc
}

case "${1:-}" in
record) [ $# -eq 3 ] || die "usage: record LOONG OUTDIR"; record "$2" "$3" ;;
compare) [ $# -eq 3 ] || die "usage: compare OLDDIR NEWDIR"; compare "$2" "$3" ;;
base) [ $# -ge 2 ] || die "usage: base OUTDIR [LOONG]"; base "$2" "${3:-}" ;;
against) [ $# -ge 2 ] || die "usage: against BASEDIR [LOONG]"; against "$2" "${3:-}" ;;
vs) [ $# -ge 2 ] || die "usage: vs REV [LOONG]"; vs "$2" "${3:-}" ;;
*) sed -n '2,19p' "$0" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The validation loop on this machine, end to end:
#   1. measure with `loong exec` (CPU device, 2 ranks = 2 cores) on 10
#      configurations (strategies, sizes, scopes), in --rounds rounds (5)
#      that visit the configurations forward, backward, forward..., and
#      keep each configuration's fastest timed iteration over all rounds
#      (loong exec --trace-iter fastest): this machine is shared, its cores
#      slow down by up to 35 % for seconds to minutes at a time, and
#      interference only ever adds time, so the fastest iteration is the
#      closest to what it can do (iterations of one run share a slow spell:
#      rounds spread out in time beat iterations), and a machine gate
#      waits out slow spells before each run;
#   2. calibrate compute rates and the MPI link from the first half;
#   3. predict the other half with `loong sim` on a platform describing this
#      machine (one node, one "GPU" per core, kind cpu), fitted in step 2;
#   4. compare each prediction with its measurement.
# The ranks run at niceness --nice (-19), where the user may raise priority
# (root, CAP_SYS_NICE): a busy process beside them at the default
# niceness then takes the time the ranks leave idle, not a share of their
# cores (one `sha256sum /dev/zero` beside the loop: held-out MAPE 14-25 %
# at niceness 0). Where it may not, the loop says so and measures at 0.
# Prints the step-time error per held-out configuration and the MAPE; with
# --repeat N the whole loop runs N times and the MAPE of each repetition,
# their mean and spread, and the kinds kept from the base table follow.
#
# usage: experiments/validate-cpu/run.sh [--repeat N] [--rounds N] [--max-wait S] [--quick]
#                                        [--max-mape PCT] [--nice N] [path/to/loong] [outdir]
#   --rounds N      measuring rounds per configuration (default 5; 3 with --quick)
#   --max-wait S    seconds per repetition the machine gate may wait for slow
#                   spells to pass (default 300; 0: no gate, no probes)
#   --quick         5 attention configurations (3 to calibrate, 2 held out), 2
#                   timed iterations: a smoke test of the loop, about 1 min
#   --max-mape PCT  exit 1 when a repetition's MAPE exceeds PCT
#   --nice N        the ranks' niceness, -20 .. 19 (default -19; 0: as started)
# Exit status: 0; 1 above --max-mape; 2 when a step of the loop fails.
set -uo pipefail
REPEAT=1 QUICK=0 MAX="" NICE=-19 ROUNDS="" MAXWAIT=300
while [ $# -gt 0 ]; do
    case "$1" in
    --repeat) REPEAT=${2:?--repeat needs a count}; shift 2 ;;
    --rounds) ROUNDS=${2:?--rounds needs a count}; shift 2 ;;
    --max-wait) MAXWAIT=${2:?--max-wait needs seconds}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --max-mape) MAX=${2:?--max-mape needs a percentage}; shift 2 ;;
    --nice) NICE=${2:?--nice needs a niceness}; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    -*) echo "validate-cpu: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
case "$REPEAT" in ''|*[!0-9]*|0) echo "validate-cpu: --repeat takes a positive count" >&2; exit 2 ;; esac
case "$MAXWAIT" in ''|*[!0-9]*) echo "validate-cpu: --max-wait takes whole seconds (0: no machine gate)" >&2; exit 2 ;; esac
case "${ROUNDS:-1}" in *[!0-9]*|0) echo "validate-cpu: --rounds takes a positive count (e.g. --rounds 5)" >&2; exit 2 ;; esac
case "$NICE" in -[0-9]|-1[0-9]|-20|[0-9]|1[0-9]) ;; *) echo "validate-cpu: --nice takes a niceness in -20 .. 19 (e.g. --nice 0)" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
LOONG=$(readlink -f "${1:-$HERE/../../build/loong}")
OUT=${2:-$HERE/out}
TOPO=$HERE/../../topologies
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
[ -x "$LOONG" ] || { echo "validate-cpu: no loong at ${1:-build/loong}" >&2; exit 2; }
# nice(1) runs its command anyway when it may not raise the priority: ask
# what niceness a child gets
if [ "$(nice -n "$NICE" nice 2>/dev/null)" != "$(($(nice) + NICE))" ]; then
    echo "# validate-cpu: may not set niceness $NICE (needs root or CAP_SYS_NICE): measuring at $(nice); a busy process beside the loop then takes a share of the ranks' cores" >&2
    NICE=0
fi
COMMON="--model tiny --gpus-per-node 2"
# name|mesh and strategy|size and scope ; the first NTRAIN calibrate, the rest are predicted
if [ $QUICK -eq 1 ]; then
    CONFIGS=(
      "zz-4k|--mesh 2 --strategy zigzag|--seq 4K --scope attn"
      "ring-2k|--mesh 2 --strategy ring|--seq 2K --scope attn"
      "uly-8k|--mesh 2 --strategy ulysses|--seq 8K --scope attn"
      "zz-8k|--mesh 2 --strategy zigzag|--seq 8K --scope attn"
      "lt-4k|--mesh 1x2 --strategy loongtrain --window 1|--seq 4K --scope attn"
    )
    NTRAIN=3 ITERS=2 ROUNDS=${ROUNDS:-3}
else
    CONFIGS=(
      "zz-4k|--mesh 2 --strategy zigzag|--seq 4K --scope attn"
      "uly-8k|--mesh 2 --strategy ulysses|--seq 8K --scope attn"
      "ring-8k|--mesh 2 --strategy ring|--seq 8K --scope attn"
      "dual-4k|--mesh 1x2 --strategy dualring|--seq 4K --scope attn"
      "zz-step-2k|--mesh 2 --strategy zigzag|--seq 2K --scope step"
      "zz-8k|--mesh 2 --strategy zigzag|--seq 8K --scope attn"
      "uly-4k|--mesh 2 --strategy ulysses|--seq 4K --scope attn"
      "lt-8k|--mesh 1x2 --strategy loongtrain --window 1|--seq 8K --scope attn"
      "ring-4k|--mesh 2 --strategy ring|--seq 4K --scope attn"
      "uly-step-2k|--mesh 2 --strategy ulysses|--seq 2K --scope step"
    )
    NTRAIN=5 ITERS=2 ROUNDS=${ROUNDS:-5}
fi

fail() { echo "validate-cpu: $*" >&2; exit 2; }

# The fastest timed iteration a `loong exec` report ($1) gives, ms.
fastest_ms() { sed -nE 's/^# fastest step ([0-9.]+) ms.*/\1/p' "$1"; }

# The machine gate. Before each measuring run, one single-rank run on each
# core at once (loong exec, ring 1K attn, no messages) times the machine; a
# probe more than GATE_TOL % above the fastest seen in this invocation means a slow spell, and the
# loop waits for it to pass (5 s steps, up to --max-wait seconds per
# repetition, then it measures anyway and counts the run as SLOW).
PROBE="--model tiny --mesh 1 --strategy ring --seq 1K --scope attn --iters 4 --warmup 1"
GATE_TOL=10 BEST_PROBE="" WAITED=0 SLOW=0 PROBES=0
probe() { # prints the slower core's fastest step, ms
    local c
    for c in 0 1; do
        nice -n "$NICE" taskset -c $c "$LOONG" exec $PROBE >"$1/probe.$c.txt" 2>"$1/probe.err" &
    done
    wait
    { fastest_ms "$1/probe.0.txt"; fastest_ms "$1/probe.1.txt"; } | sort -g | tail -n 1
}
gate() {
    local p
    while :; do
        p=$(probe "$1")
        PROBES=$((PROBES + 1))
        echo "$(date +%T) $p" >>"$1/gate.log"
        [ -n "$p" ] || fail "the machine probe failed: $(head -c 300 "$1/probe.err")"
        if [ -z "$BEST_PROBE" ] || awk -v p="$p" -v b="$BEST_PROBE" 'BEGIN{exit !(p < b)}'; then BEST_PROBE=$p; fi
        awk -v p="$p" -v b="$BEST_PROBE" -v t="$GATE_TOL" 'BEGIN{exit !(p <= b * (1 + t / 100))}' && return 0
        if [ "$WAITED" -ge "$MAXWAIT" ]; then
            SLOW=$((SLOW + 1))
            return 0
        fi
        sleep 5
        WAITED=$((WAITED + 5))
    done
}

# One loop into directory $1; prints the table and sets MAPE, WORST, KEPT.
loop() {
    local out=$1 c name layout size
    mkdir -p "$out"
    echo "# 1. measuring ${#CONFIGS[@]} configurations with loong exec on 2 ranks, $ROUNDS rounds" >&2
    local r i order
    WAITED=0 SLOW=0 PROBES=0
    for ((r = 1; r <= ROUNDS; r++)); do
        order=$(seq 0 $((${#CONFIGS[@]} - 1)))
        [ $((r % 2)) -eq 0 ] && order=$(echo "$order" | tac)
        for i in $order; do
            IFS='|' read -r name layout size <<<"${CONFIGS[$i]}"
            [ "$MAXWAIT" -gt 0 ] && gate "$out"
            nice -n "$NICE" mpirun --oversubscribe -np 2 "$LOONG" exec $COMMON $layout $size --iters $ITERS --warmup 1 --trace-iter fastest \
                --trace "$out/$name.r$r.json" >"$out/$name.r$r.txt" 2>"$out/$name.exec.err" ||
                fail "measuring $name failed: $(head -c 300 "$out/$name.exec.err")"
        done
    done
    for c in "${CONFIGS[@]}"; do # the fastest round's fastest iteration is the measurement
        name=${c%%|*}
        r=$(for ((i = 1; i <= ROUNDS; i++)); do
            echo "$(fastest_ms "$out/$name.r$i.txt") $i"
        done | sort -g | head -n 1 | cut -d' ' -f2)
        cp "$out/$name.r$r.json" "$out/$name.measured.json"
        echo "   $name: rounds $(for ((i = 1; i <= ROUNDS; i++)); do fastest_ms "$out/$name.r$i.txt"; done |
            paste -sd' ') ms; fastest round $r" >&2
    done
    [ "$MAXWAIT" -gt 0 ] && echo "   machine gate: $PROBES probes, fastest ${BEST_PROBE} ms; waited ${WAITED} s for slow spells to pass; $SLOW run(s) measured in one (--max-wait ${MAXWAIT} s)" >&2
    echo "# 2. calibrating from the first $NTRAIN" >&2
    "$LOONG" topo --nodes 1 --gpus-per-node 2 --nics-per-node 2 --gpu cpu -o "$out/cpu-2.xml" || fail "loong topo failed"
    cp "$TOPO/cpu.calib" "$out/cpu.calib"
    local train=()
    for c in "${CONFIGS[@]:0:$NTRAIN}"; do train+=("$out/${c%%|*}.measured.json"); done
    # a shared machine's MPI transfers can be too noisy for the link's fit
    # gate: then the link keeps the platform's values (--hold), said so
    if ! "$LOONG" calibrate "${train[@]}" --platform "$out/cpu-2.xml" -o "$out/fit" >"$out/calibrate.txt" \
        2>"$out/calibrate.err"; then
        grep -q '^loong calibrate: error: same-node links' "$out/calibrate.err" ||
            fail "calibration failed (see $out/calibrate.txt and $out/calibrate.err)"
        echo "#    $(sed 's/^loong calibrate: error: //; s/: nothing written.*//' "$out/calibrate.err"): the link held at the platform's values" >&2
        "$LOONG" calibrate "${train[@]}" --platform "$out/cpu-2.xml" -o "$out/fit" --hold nvlink_bw,nvlink_lat \
            >"$out/calibrate.txt" 2>"$out/calibrate.err" ||
            fail "calibration failed (see $out/calibrate.txt and $out/calibrate.err)"
    fi
    sed 's/^/   /' "$out/calibrate.txt" >&2
    KEPT=$(grep -c '^# kept from base:' "$out/calibrate.txt")
    echo "# 3-4. predicting the other $((${#CONFIGS[@]} - NTRAIN)) with loong sim and comparing" >&2
    printf '# %-12s %-50s %12s %12s %9s\n' config layout measured_ms predicted_ms error_%
    local sum=0 n=0 line pred meas err
    WORST=0
    for c in "${CONFIGS[@]:$NTRAIN}"; do
        IFS='|' read -r name layout size <<<"$c"
        "$LOONG" sim --platform "$out/fit/cpu-2.xml" $COMMON $layout $size --dtype fp32 --quiet \
            --trace "$out/$name.predicted.json" -o "$out/$name.sim.txt" || fail "simulating $name failed"
        "$LOONG" compare "$out/$name.predicted.json" "$out/$name.measured.json" >"$out/$name.compare.txt" ||
            fail "comparing $name failed"
        line=$(grep '^# step time:' "$out/$name.compare.txt")
        pred=$(echo "$line" | sed -E 's/.*predicted ([0-9.]+) ms.*/\1/')
        meas=$(echo "$line" | sed -E 's/.*measured ([0-9.]+) ms.*/\1/')
        err=$(echo "$line" | sed -E 's/.*error ([-+0-9.]+) %.*/\1/')
        printf '  %-12s %-50s %12s %12s %9s\n' "$name" "$layout $size" "$meas" "$pred" "$err"
        sum=$(awk -v s="$sum" -v e="$err" 'BEGIN{print s + (e < 0 ? -e : e)}')
        WORST=$(awk -v w="$WORST" -v e="$err" 'BEGIN{a = (e < 0 ? -e : e) + 0; print (a > w ? a : w)}')
        n=$((n + 1))
    done
    MAPE=$(awk -v s="$sum" -v n="$n" 'BEGIN{printf "%.2f", s / n}')
    echo "# step-time MAPE over $n held-out configurations: $MAPE % (worst $WORST %; $KEPT kind(s) kept from base)"
}

mapes=() worsts=() kept=() bad=0
for ((i = 1; i <= REPEAT; i++)); do
    dir=$OUT
    [ "$REPEAT" -gt 1 ] && dir=$OUT/rep$i && echo "# ---- repetition $i of $REPEAT" && echo "# ---- repetition $i of $REPEAT" >&2
    loop "$dir"
    mapes+=("$MAPE") worsts+=("$WORST") kept+=("$KEPT")
    if [ -n "$MAX" ] && awk -v m="$MAPE" -v x="$MAX" 'BEGIN{exit !(m > x)}'; then bad=1; fi
done
if [ "$REPEAT" -gt 1 ]; then
    echo "# repetitions: MAPE ${mapes[*]} %; kinds kept from base ${kept[*]}"
    printf '%s\n' "${mapes[@]}" | awk '{s += $1; q += $1 * $1; if (NR == 1 || $1 < lo) lo = $1; if ($1 > hi) hi = $1}
        END {m = s / NR; sd = sqrt(q / NR - m * m > 0 ? q / NR - m * m : 0);
             printf "# MAPE over %d repetitions: mean %.2f %%, spread %.2f %% (std), %.2f .. %.2f %%\n", NR, m, sd, lo, hi}'
fi
if [ $bad -eq 1 ]; then
    echo "validate-cpu: a repetition's MAPE is above --max-mape $MAX %" >&2
    exit 1
fi
exit 0

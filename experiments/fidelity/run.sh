#!/usr/bin/env bash
# The fidelity table: every published figure the docs compare loong with,
# predicted again, in one table of what is compared, its setup, its source,
# the published figure, loong's prediction and the error. Deterministic
# simulations only (loong sim and loong coll on the shipped platforms and
# calibration tables), nothing timed on this machine, about 15 s.
#
# Rows (the setups, and why they are comparable, in docs/validation.md#the-fidelity-table):
#   attn   ring-flash-attention's README tables (github.com/zhuzilin/ring-
#          flash-attention at 01c8baf, benchmark/benchmark_{kv,varlen_kv}
#          packed_func.py): one DGX A100 node, Llama-3.1-8B attention (32
#          query heads, 8 KV heads, head dim 128), bf16, causal, 8K tokens per
#          GPU, iterations per second of one attention forward (fwd) or
#          forward + backward (fwdbwd); the varlen rows cycle four packings.
#          The 8xH800 rows are left out: that code runs FlashAttention-2,
#          and loong's Hopper tables are FlashAttention-3's.
#   coll   nccl-tests bus bandwidth at 8 GiB on the shipped DGX H100
#          platforms (the public issues and reports named per row).
#   e2e    Megatron-LM's Table 1 rows without pipeline parallelism
#          (experiments/tp-published: GPT 1.7B-18.4B, TP 1-8, A100), and its
#          three smallest with it (experiments/pp-published: GPT 39.1B-
#          145.6B, TP 8, PP 2-8, 1F1B and interleaved, A100).
#          And SimuMax's A100-PCIe runs (experiments/simumax-published:
#          Llama3-70B cut to 12 layers, TP 1-8, PP 2, 4-32 micro-batches,
#          one 8-GPU PCIe server): their source also measured the GEMM and
#          FlashAttention tables of topologies/a100-pcie.calib, so kernel
#          source and validation rows share one project (the source column
#          says so). And NeMo's DGX H100 FP8 Llama 3 runs with context
#          parallelism (experiments/nemo-published: 8B on 8 GPUs, 70B on
#          64), in tokens/s/GPU. And SimuMax's B200 runs with all-to-all CP
#          (experiments/simumax-b200: Llama3-70B cut to 12 layers and 405B
#          cut to 4, TP x CP = 8 on one server, 32K and 128K, bf16), their
#          step as tokens/s/GPU; b200.calib owes SimuMax nothing, so these
#          rows count in the plan's quoted error. And the same release's
#          runs without CP (experiments/simumax-b200-dense: the same models,
#          TP 1-8 with PP 2 or DP, 4K tokens, 4-32 micro-batches). The same runs again under
#          b200-simumax.calib, SimuMax's kernels measured on that server
#          (source simumax-b200-calib, the moe rows below too): reported,
#          never quoted.
#   mem    per-GPU memory of Megatron-LM runs at CP 1-8 and TP 8 (gpustat:
#          the GPU's memory in use) against loong's reserved peak
#          (experiments/tp-memory); and SimuMax's B200 runs' torch
#          max_reserved against loong's reserved peak, in GiB.
#   moe    SimuMax's B200 DeepSeek-V2 and V3 runs cut to 4 layers
#          (experiments/simumax-b200-moe: EP 8 over 8 replicas, EP 4 x PP 2,
#          4-32 micro-batches of 4K tokens, MLA), tokens/s/GPU; their memory
#          (torch max_allocated, once per layout) as mem rows. A bf16 plan of a
#          mixture of experts quotes the moe rows' error. And SimuMax's
#          A100-PCIe DeepSeek-V2 runs (experiments/simumax-a100-moe: the
#          same layouts on 8 PCIe GPUs, TFLOP/s/GPU read off its chart),
#          which share a100-pcie.calib's source and so are not quoted.
#          And Megatron-Bridge's FP8 Qwen3 MoE runs (experiments/megatron-
#          bridge-moe: Qwen3-30B-A3B on 8 B200, GB200, GB300 and 16 H100,
#          Qwen3-235B-A22B on 64 B200; EP 8), tokens/s/GPU: an FP8 MoE
#          plan quotes them.
#   oom    the same runs' published out-of-memory outcomes: the error is 0
#          when loong predicts OOM too, 100 when it predicts a fit.
#   FP8    torchtitan's Llama 3.1 8B FSDP x CP runs (experiments/torchtitan-
#          cp: Table 2, 8 H100 96 GB at a 500 W cap, Float8, full
#          recompute, 32K-256K tokens): e2e rows in tokens/s/GPU and mem
#          rows (torch's max_reserved against loong's reserved peak, GiB),
#          on a platform whose capped peak the script derives.
# Rank correlation: for each group of e2e rows that share a source, a model
# and a sequence length, Spearman's rho between the published and the
# predicted figures (average ranks for ties; n/a below 3 rows): whether
# loong orders the layouts of one model as the runs did.
#
# usage: experiments/fidelity/run.sh [--check FILE | --record FILE] [LOONG]
#        experiments/fidelity/run.sh --spearman < PAIRS   ('x y' lines: rho)
#   --check FILE   compare each row's error with FILE's recorded one: exit 1
#                  when one moved by more than FIDELITY_TOLERANCE points (2),
#                  or a row is missing or new; the check of `make check`
#   --record FILE  write the rows' errors to FILE (a change of a recorded
#                  value is committed with the reason it moved)
# Exit status: 0; 1 when --check finds a move; 2 when a prediction fails.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
TOPO=$TOP/topologies
MODE="" FILE=""
# spearman: 'x y' lines on stdin -> Spearman's rank correlation of x and y,
# each ranked with ties at their average rank, as Pearson's r of the ranks;
# n/a below 3 pairs or when either side is constant (no order to compare).
spearman() {
    awk 'NF >= 2 {x[++n] = $1; y[n] = $2}
        function rank(v, i, j, lt, eq) {
            lt = 0; eq = 0
            for (j = 1; j <= n; j++) { if (v[j] < v[i]) lt++; else if (v[j] == v[i]) eq++ }
            return lt + (eq + 1) / 2
        }
        END {
            if (n < 3) { print "n/a"; exit }
            for (i = 1; i <= n; i++) { rx[i] = rank(x, i); ry[i] = rank(y, i); mx += rx[i] / n; my += ry[i] / n }
            for (i = 1; i <= n; i++) { sxy += (rx[i] - mx) * (ry[i] - my); sxx += (rx[i] - mx) ^ 2; syy += (ry[i] - my) ^ 2 }
            if (sxx == 0 || syy == 0) print "n/a"; else printf "%.2f\n", sxy / sqrt(sxx * syy)
        }'
}

case "${1:-}" in
--check | --record) MODE=${1#--} FILE=${2:?$1 needs a file}; shift 2 ;;
--spearman) spearman; exit 0 ;;
-h | --help) sed -n '2,58p' "$0"; exit 0 ;;
-*) echo "fidelity: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
L=${1:-${LOONG:-$TOP/build/loong}}
TOL=${FIDELITY_TOLERANCE:-2}
[ -x "$L" ] || { echo "fidelity: no loong at $L (build first)" >&2; exit 2; }
if [ "$MODE" = check ] && ! { [ -f "$FILE" ] && [ -r "$FILE" ]; }; then
    echo "fidelity: cannot read the recorded errors $FILE" >&2
    exit 2
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "fidelity: $*" >&2; exit 2; }

ROWS=$TMP/rows # name|kind|setup|source|published|predicted|unit|error|group
row() {        # name kind setup source published predicted unit [group: source/model/seq, e2e rows]
    local err
    [[ $6 =~ ^[0-9.]+$ ]] || fail "no prediction for row $1"
    err=$(awk -v p="$6" -v q="$5" 'BEGIN {printf "%+.1f", 100 * (p - q) / q}')
    printf '%s|%s|%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$err" "${8:-}" >>"$ROWS"
}

# ---- attention: ring-flash-attention on 8 A100s ----
A100=$TOPO/a100-1n-8nic.xml
RFA="zhuzilin/ring-flash-attention README"
# step_s SCOPE ARGS...: loong sim's step time of one attention layer
step_s() {
    local scope=$1 out
    shift
    out=$("$L" sim --platform "$A100" --model llama3-8b --scope "$scope" --quiet "$@" 2>&1) ||
        fail "loong sim $* failed: $(echo "$out" | tail -n 1)"
    echo "$out" | sed -n 's/^# step time: \([0-9.e+-]*\) s.*/\1/p'
}
# iters SCOPE "PACKING..." ARGS...: iterations per second over the packings
# (one iteration each, as the benchmark cycles them; "-" is one document)
iters() {
    local scope=$1 packs=$2 sum=0 n=0 p t docs
    shift 2
    for p in $packs; do
        docs=()
        [ "$p" != - ] && docs=(--docs "$p")
        t=$(step_s "$scope" "$@" "${docs[@]}")
        [ -n "$t" ] || exit 2
        sum=$(awk -v s="$sum" -v t="$t" 'BEGIN {print s + t}')
        n=$((n + 1))
    done
    awk -v n="$n" -v s="$sum" 'BEGIN {printf "%.1f", n / s}'
}
# the benchmark's local cu_seqlens; across 8 ranks every document is 8x as long
LOCAL_PACKS="8192 256,7392,544 4096,4096 3104,3200,1600,160,128"
GLOBAL_PACKS="65536 2048,59136,4352 32768,32768 24832,25600,12800,1280,1024"
attn_rows() { # api packs-local packs-global published: flash ring zigzag [llama3], fwd then fwdbwd
    local api=$1 lp=$2 gp=$3 pub=($4) i=0 scope pass impl args packs gpus
    for pass in fwd fwdbwd; do
        scope=attn-fwd
        [ $pass = fwdbwd ] && scope=attn
        for impl in flash ring zigzag llama3; do
            case $api/$impl in
            batch/llama3) continue ;;
            */flash) args=(--mesh 1 --seq 8K) packs=$lp ;;
            batch/ring) args=(--mesh 8 --strategy ring --seq 64K) packs=$gp ;;
            batch/zigzag) args=(--mesh 8 --strategy zigzag --seq 64K) packs=$gp ;;
            varlen/ring) args=(--mesh 8 --strategy ring --partition doc-contiguous --seq 64K) packs=$gp ;;
            varlen/zigzag) args=(--mesh 8 --strategy zigzag --partition doc-zigzag --seq 64K) packs=$gp ;;
            varlen/llama3) args=(--mesh 1x8 --strategy allgather --partition contiguous --kv-stride 4 --seq 64K) packs=$gp ;;
            esac
            gpus=8
            [ $impl = flash ] && gpus=1
            row "attn.$api.$impl.$pass" attn "$gpus A100, $api $impl, $pass" "$RFA" "${pub[$i]}" \
                "$(iters "$scope" "$packs" "${args[@]}")" iter/s
            i=$((i + 1))
        done
    done
}
# published iter/s (8xA100 rows), in attn_rows' order: flash ring zigzag [llama3], fwd then fwd + bwd
attn_rows batch "8192" "-" "373.4 24.0 38.2 94.7 6.2 10.6"
attn_rows varlen "$LOCAL_PACKS" "$GLOBAL_PACKS" "532.3 33.1 47.9 34.3 133.8 8.7 13.4 9.7"

# ---- collectives: nccl-tests bus bandwidth on the shipped DGX H100 platforms ----
coll_row() { # nodes op published source
    local out bw
    out=$("$L" coll --platform "$TOPO/dgx-h100-$1n.xml" --op "$2" -b 8G -e 8G 2>&1) ||
        fail "loong coll $1n $2 failed: $(echo "$out" | tail -n 1)"
    bw=$(echo "$out" | awk '!/^#/ && NF >= 15 {print $8}')
    [ -n "$bw" ] || fail "loong coll $1n $2 printed no size line"
    row "coll.$1n.$2" coll "$((8 * $1)) H100, $2, 8 GiB" "$4" "$3" "$bw" GB/s
}
coll_row 1 all_reduce 480 "NVIDIA/nccl-tests#212 (NVLS)"
coll_row 1 all_gather 360 "NVIDIA/nccl-tests#326"
coll_row 1 reduce_scatter 360 "NVIDIA/nccl#1281"
coll_row 4 all_reduce 331 "aigatech/vpbenchmarking (IB, NCCL 2.24.3)"
coll_row 4 all_gather 324 "aigatech/vpbenchmarking (IB, NCCL 2.24.3)"
coll_row 4 alltoall 64 "NVIDIA/nccl-tests#267, #130 (48 GB/s per NIC x N/(N-1))"
coll_row 32 all_gather 200 "NVIDIA/nccl#1218 (RoCE, 2 GB, reported troubled)"
coll_row 32 alltoall 49.5 "NVIDIA/nccl-tests#267"

# ---- end to end: Megatron-LM's Table 1 (experiments/tp-published) ----
out=$("$TOP/experiments/tp-published/run.sh" "$L" 2>&1) || fail "experiments/tp-published failed: $(echo "$out" | tail -n 1)"
while read -r m tp gpus _ _ _ pub pred _; do
    row "e2e.megatron.$m" e2e "$gpus A100, tp$tp, seq 2K, full recompute" "Megatron-LM Table 1 (arXiv 2104.04473)" \
        "$pub" "$pred" TFLOP/s/GPU "megatron/$m/2K"
done < <(echo "$out" | grep -v -e '^#' -e '^loong ') # rows, not loong's progress lines

# ---- end to end, pipelined: Table 1's PP rows (experiments/pp-published; its 3 smallest) ----
out=$("$TOP/experiments/pp-published/run.sh" "$L" 3 2>&1) || fail "experiments/pp-published failed: $(echo "$out" | tail -n 1)"
while read -r m tp pp gpus _ _ mb sched _ _ pub pred _; do
    [ "$pred" = skipped ] && continue
    row "e2e.megatron.$m" e2e "$gpus A100, tp$tp pp$pp $sched m$mb, seq 2K" "Megatron-LM Table 1 (arXiv 2104.04473)" \
        "$pub" "$pred" TFLOP/s/GPU "megatron/$m/2K"
done < <(echo "$out" | grep -v -e '^#' -e '^loong ') # rows, not loong's progress lines

# ---- end to end: SimuMax's A100-PCIe runs (experiments/simumax-published) ----
out=$("$TOP/experiments/simumax-published/run.sh" "$L" 2>&1) || fail "experiments/simumax-published failed: $(echo "$out" | tail -n 1)"
while read -r m tp pp dp mbc gbs _ pub pred _; do
    layout=tp$tp
    [ "$pp" -gt 1 ] && layout=tp${tp}pp$pp
    row "e2e.simumax.${m#llama3-}.$layout.m$mbc" e2e "8 A100-PCIe, $layout dp$dp m$mbc, seq 4K" \
        "SimuMax A100-PCIe (also a100-pcie.calib's kernels)" "$pub" "$pred" TFLOP/s/GPU "simumax/$m/4K"
done < <(echo "$out" | grep -v -e '^#' -e '^loong ') # rows, not loong's progress lines

# ---- end to end, FP8: NeMo's DGX H100 Llama 3 runs (experiments/nemo-published) ----
out=$("$TOP/experiments/nemo-published/run.sh" "$L" 2>&1) || fail "experiments/nemo-published failed: $(echo "$out" | tail -n 1)"
while read -r m gpus tp pp cp vp dp mb _ pub pred _; do
    row "e2e.nemo.${m#llama3-}" e2e "$gpus H100 FP8, tp$tp pp$pp cp$cp vp$vp dp$dp m$mb, seq 8K" \
        "NeMo 24.07 performance summary (FP8)" "$pub" "$pred" tokens/s/GPU "nemo/$m/8K"
done < <(echo "$out" | grep -v -e '^#' -e '^loong ')

# ---- end to end and memory, B200: SimuMax's all-to-all CP runs (experiments/simumax-b200) ----
# time as tokens/s/GPU (4 micro-batches of one sample on 8 GPUs), so that
# a positive error is an optimistic prediction as in the other e2e rows;
# memory: torch's max_reserved against loong's reserved peak, in GiB.
# Twice: under b200.calib (source simumax-b200, quoted) and under
# b200-simumax.calib, SimuMax's kernels measured on the same server (source
# simumax-b200-calib, shared with the kernels: reported, never quoted)
simumax_b200_rows() { # CALIB SOURCE SOURCE_TEXT
    local out m tp cp seq rms pms rr pr tok id setup
    out=$("$TOP/experiments/simumax-b200/run.sh" "$L" "$1" 2>&1) ||
        fail "experiments/simumax-b200 failed: $(echo "$out" | tail -n 1)"
    while read -r m tp cp seq rms pms _ _ _ _ rr pr _; do
        tok=$((${seq%K} * 1024 * 4))
        id="${m#llama3-}.tp${tp}cp$cp.$seq"
        setup="8 B200, $m, tp$tp cp$cp a2a, seq $seq"
        row "e2e.$2.$id" e2e "$setup" "$3" \
            "$(awk -v t="$tok" -v ms="$rms" 'BEGIN {printf "%.1f", t / (ms / 1000) / 8}')" \
            "$(awk -v t="$tok" -v ms="$pms" 'BEGIN {printf "%.1f", t / (ms / 1000) / 8}')" tokens/s/GPU "$2/$m/$seq"
        [ "$2" = simumax-b200 ] &&
            row "mem.$2.$id" mem "$setup" "SimuMax B200 release v1.2 (real_reserved_gib)" "$rr" "$pr" GiB/GPU
    done < <(echo "$out" | grep -v '^#')
}

# ---- end to end and memory, B200: SimuMax's runs without CP (experiments/simumax-b200-dense) ----
# TP x PP x DP = 8 at 4K tokens, 4-32 micro-batches; as the CP rows: time
# as tokens/s/GPU under both tables, memory (torch's max_reserved against
# loong's reserved peak) once per layout, under b200.calib
simumax_b200_dense_rows() { # CALIB SOURCE SOURCE_TEXT
    local out m tp pp dp mb rms pms rr pr tok id setup
    out=$("$TOP/experiments/simumax-b200-dense/run.sh" "$L" "$1" 2>&1) ||
        fail "experiments/simumax-b200-dense failed: $(echo "$out" | tail -n 1)"
    while read -r m tp pp dp mb rms pms _ _ _ _ rr pr _; do
        tok=$((mb * dp * 4096))
        id="${m#llama3-}.tp${tp}pp$pp.m$mb"
        setup="8 B200, $m, tp$tp pp$pp dp$dp m$mb, seq 4K"
        row "e2e.$2.$id" e2e "$setup" "$3" \
            "$(awk -v t="$tok" -v ms="$rms" 'BEGIN {printf "%.1f", t / (ms / 1000) / 8}')" \
            "$(awk -v t="$tok" -v ms="$pms" 'BEGIN {printf "%.1f", t / (ms / 1000) / 8}')" tokens/s/GPU "$2/$m/4K"
        [ "$mb" = 4 ] && [ "$2" = simumax-b200 ] &&
            row "mem.$2.$id" mem "$setup" "SimuMax B200 release v1.2 (real_reserved_gib)" "$rr" "$pr" GiB/GPU
    done < <(echo "$out" | grep -v '^#')
}

# ---- mixtures of experts, B200: SimuMax's DeepSeek runs (experiments/simumax-b200-moe) ----
# kind moe (a plan of a mixture of experts quotes these rows, a dense one
# the e2e ones): the step as tokens/s/GPU, as the e2e rows; memory: torch's
# max_allocated against loong's allocated peak, in GiB; under both tables
# as the dense rows above
simumax_b200_moe_rows() { # CALIB SOURCE SOURCE_TEXT
    local out m ep pp mb rms pms ra pa id setup tok
    out=$("$TOP/experiments/simumax-b200-moe/run.sh" "$L" "$1" 2>&1) ||
        fail "experiments/simumax-b200-moe failed: $(echo "$out" | tail -n 1)"
    while read -r m ep pp mb rms pms _ ra pa _; do
        id="${m#deepseek-}.ep${ep}pp$pp.m$mb"
        setup="8 B200, $m, tp1 ep$ep pp$pp dp$((8 / pp)) m$mb, seq 4K"
        tok=$((mb * (8 / pp) * 4096))
        row "moe.$2.$id" moe "$setup" "$3" \
            "$(awk -v t="$tok" -v ms="$rms" 'BEGIN {printf "%.1f", t / (ms / 1000) / 8}')" \
            "$(awk -v t="$tok" -v ms="$pms" 'BEGIN {printf "%.1f", t / (ms / 1000) / 8}')" tokens/s/GPU \
            "$2/$m/4K"
        [ "$mb" = 4 ] && [ "$2" = simumax-b200 ] &&
            row "mem.$2.$id" mem "$setup" "SimuMax B200 release v1.2 (real_alloc_gib)" "$ra" "$pa" GiB/GPU
    done < <(echo "$out" | grep -v '^#')
}
simumax_b200_rows "$TOP/topologies/b200.calib" simumax-b200 "SimuMax B200 release v1.2 (real_ms)"
simumax_b200_moe_rows "$TOP/topologies/b200.calib" simumax-b200 "SimuMax B200 release v1.2 (real_ms)"
simumax_b200_dense_rows "$TOP/topologies/b200.calib" simumax-b200 "SimuMax B200 release v1.2 (real_ms)"
shared="SimuMax B200 v1.2 (real_ms), its kernels: b200-simumax.calib"
simumax_b200_rows "$TOP/topologies/b200-simumax.calib" simumax-b200-calib "$shared"
simumax_b200_moe_rows "$TOP/topologies/b200-simumax.calib" simumax-b200-calib "$shared"
simumax_b200_dense_rows "$TOP/topologies/b200-simumax.calib" simumax-b200-calib "$shared"

# ---- mixtures of experts, A100-PCIe: SimuMax's DeepSeek-V2 runs (experiments/simumax-a100-moe) ----
# TFLOP/s/GPU as SimuMax counts them; source "simumax": a100-pcie.calib's
# kernels come from the same project, so a plan's quoted error leaves them out
out=$("$TOP/experiments/simumax-a100-moe/run.sh" "$L" 2>&1) ||
    fail "experiments/simumax-a100-moe failed: $(echo "$out" | tail -n 1)"
while read -r layout mb pub pred _; do
    row "moe.simumax.v2-4l.$layout.m$mb" moe "8 A100-PCIe, deepseek-v2-4l, tp1 ${layout/pp/ pp} m$mb, seq 4K" \
        "SimuMax A100-PCIe (also a100-pcie.calib's kernels)" "$pub" "$pred" TFLOP/s/GPU "simumax/deepseek-v2-4l/4K"
done < <(echo "$out" | grep -v '^#')

# ---- mixtures of experts, FP8: Megatron-Bridge's Qwen3 MoE runs (experiments/megatron-bridge-moe) ----
# source "mbridge", an FP8 source: an FP8 MoE plan quotes these rows, a bf16 one SimuMax's B200 rows
out=$("$TOP/experiments/megatron-bridge-moe/run.sh" "$L" 2>&1) ||
    fail "experiments/megatron-bridge-moe failed: $(echo "$out" | tail -n 1)"
while read -r kind m gpus prec gbs mbs pp vp ep pub pred _; do
    row "moe.mbridge.$kind.${m#qwen3-}" moe "$gpus $kind, $m $prec, pp$pp vp$vp ep$ep mbs$mbs gbs$gbs, seq 4K" \
        "Megatron-Bridge 25.11 performance summary (FP8)" "$pub" "$pred" tokens/s/GPU
done < <(echo "$out" | grep -v '^#')

# ---- memory: Megatron-LM's per-GPU memory (experiments/tp-memory) ----
out=$("$TOP/experiments/tp-memory/run.sh" "$L" 2>&1) || fail "experiments/tp-memory failed: $(echo "$out" | tail -n 1)"
while read -r r m seq tp sp mesh strat rc pub pred _ _ verdict; do
    setup="8 H100, $m, S $seq, tp$tp, $mesh $strat, $rc"
    if [ "$pub" = oom ]; then # a verdict: right (0) or wrong (100)
        [ "$verdict" = oom_too ] && e=0.0 || e=100.0
        printf '%s|oom|%s|%s|oom|%s|verdict|%s|\n' "mem.megatron.$r" "$setup" "vuiseng9/megatron-tutorials (0b2c030)" \
            "$([ "$verdict" = oom_too ] && echo oom || echo fits)" "$e" >>"$ROWS"
        continue
    fi
    row "mem.megatron.$r" mem "$setup" "vuiseng9/megatron-tutorials (0b2c030)" "$pub" "$pred" "1000MiB/GPU"
done < <(echo "$out" | grep -v '^#')

# ---- end to end and memory, FP8: torchtitan's FSDP x CP runs on 500 W H100s (experiments/torchtitan-cp) ----
out=$("$TOP/experiments/torchtitan-cp/run.sh" "$L" 2>&1) || fail "experiments/torchtitan-cp failed: $(echo "$out" | tail -n 1)"
while read -r fsdp cp seq pub pred _ pubm resv _ _; do
    setup="8 H100 500W FP8, fsdp$fsdp cp$cp, seq $seq"
    row "e2e.torchtitan.8b.cp$cp" e2e "$setup, full recompute" "torchtitan H100 2024-12, Table 2 (Float8)" "$pub" "$pred" \
        tokens/s/GPU "torchtitan/llama3-8b/32K-256K"
    row "mem.torchtitan.8b.cp$cp" mem "$setup" "torchtitan H100 2024-12, Table 2 (max reserved)" "$pubm" "$resv" GiB/GPU
done < <(echo "$out" | grep -v '^#')

# ---- the table ----
printf '# %-31s %-4s %-36s %-56s %10s %10s %-12s %8s\n' row kind setup source published predicted unit error_%
awk -F'|' '{printf "  %-31s %-4s %-36s %-56s %10s %10s %-12s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8}' "$ROWS"
awk -F'|' '{e = $8 < 0 ? -$8 : $8; s[$2] += e; n[$2]++}
    END {for (k in s) printf "# %s: mean absolute error %.1f %% over %d rows\n", k, s[k] / n[k], n[k]}' "$ROWS" | sort
# rank correlation per group of e2e rows (published, predicted)
for g in $(awk -F'|' '$9 != "" && !seen[$9]++ {print $9}' "$ROWS"); do
    printf '# rank correlation %s (%d rows): %s\n' "$g" "$(awk -F'|' -v g="$g" '$9 == g' "$ROWS" | wc -l)" \
        "$(awk -F'|' -v g="$g" '$9 == g {print $5, $6}' "$ROWS" | spearman)"
done

case $MODE in
record)
    {
        echo "# experiments/fidelity/run.sh --record: each row's error (%) against its published figure."
        echo "# A regression guard, not a target: a commit that changes a value says why it moved."
        awk -F'|' '{print $1, $8}' "$ROWS"
    } >"$FILE.tmp" && mv "$FILE.tmp" "$FILE" || fail "cannot write $FILE"
    echo "# recorded $(wc -l <"$ROWS") rows in $FILE"
    ;;
check)
    awk -F'|' '{print $1, $8}' "$ROWS" | awk -v tol="$TOL" -v file="$FILE" '
        FNR == NR {if ($0 !~ /^#/ && NF == 2) rec[$1] = $2; next}
        {seen[$1] = 1
         if (!($1 in rec)) {printf "fidelity: row %s is new (%s %%): record it (--record) in the commit that adds it\n", $1, $2; bad++; next}
         d = $2 - rec[$1]
         if (d > tol || d < -tol) {printf "fidelity: row %s moved from %s to %s %% (more than %s points): find why, or re-record with the reason\n", $1, rec[$1], $2, tol; bad++}}
        END {for (r in rec) if (!(r in seen)) {printf "fidelity: recorded row %s is no longer predicted\n", r; bad++}
             if (bad) exit 1
             printf "# fidelity: every row within %s points of %s\n", tol, file}' "$FILE" -
    ;;
esac

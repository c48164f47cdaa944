#!/usr/bin/env bash
# NVIDIA Megatron-Bridge's published MoE pre-training runs against loong's
# prediction (github.com/NVIDIA-NeMo/Megatron-Bridge docs/performance-
# summary.md at 00b7660, "25.11 NeMo Container"; "In MoE training
# benchmarks, we force-balance the token distribution among experts and
# all benchmarks are token-dropless": loong's balanced, dropless routing):
#
#   kind   model             GPUs prec    GBS  MBS seq  TP PP VP EP GA   tokens/s/GPU
#   b200   Qwen3_30B_a3B        8 FP8-MX  512  1   4096 1  1  -  8  64   9299
#   gb200  Qwen3_30B_a3B        8 FP8-MX  512  4   4096 1  1  1  8  16   23766
#   gb300  Qwen3_30B_a3B        8 FP8-MX  512  4   4096 1  1  1  8  16   28934
#   h100   Qwen3_30B_a3B       16 FP8-CS  512  2   4096 1  2  24 8  32   5275
#   b200   Qwen3_235B_a22B     64 FP8-MX  1024 1   4096 1  8  2  8  128  3269
#
# DP = GPUs / (TP PP), EP over the data-parallel ranks (MoE Parallel
# Folding: EP 8 across 8 replicas of P = 1), GA micro-batches of MBS
# samples per replica. What the table omits, from the repo's performance
# scripts at 0fa501a (scripts/performance/configs/qwen3/
# qwen3_llm_pretrain.py, workload_base_configs.py) and the recipe
# (recipes/qwen/qwen3_moe.py), an assumption per line:
#  - no recomputation; grad_reduce_in_fp32 False (--grad-reduce bf16); the
#    distributed optimizer (--zero 1); moe_router_force_load_balancing;
#    expert TP 1; Megatron's all-to-all dispatcher with grouped GEMMs;
#    TE's FP8 recipes (FP8-MX: --precision mxfp8, FP8-CS: fp8-current);
#  - Qwen3-235B: account_for_embedding_in_pipeline_split and ..._loss_...
#    (94 blocks + 2 slots = 96 = PP x VP x 6: --pp-embedding-slot on
#    --pp-loss-slot on), interleaved 1F1B;
#  - the H100 Qwen3-30B row's VP is the table's 24 (one block a chunk);
#    the scripts at 0fa501a say 12, so the table's run was another
#    revision;
#  - CUDA graphs (full iteration on B200/GB200/GB300) are not modelled:
#    loong has no launch overhead to remove.
# Platforms from `loong topo` (the GPU kind's shipped fit): one DGX B200,
# one GB200 or GB300 NVL72 rack (18 trays of 4 GPUs, one NVLink domain; the run takes 2 trays), two DGX
# H100, eight DGX B200. Calibration: topologies/{b200,gb200,gb300,h100}
# .calib, nothing fitted to these runs; --fold none (a mixture of experts'
# replicas cross the NICs, sim.md). About a minute, most of it the 64-GPU
# row; the fidelity table runs it.
#
# usage: experiments/megatron-bridge-moe/run.sh [LOONG]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
L=${1:-$TOP/build/loong}
[ -x "$L" ] || { echo "megatron-bridge-moe: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# kind nodes model gpus precision gbs mbs pp vp ep published
rows="b200 1 qwen3-30b-a3b 8 mxfp8 512 1 1 1 8 9299
gb200 18 qwen3-30b-a3b 8 mxfp8 512 4 1 1 8 23766
gb300 18 qwen3-30b-a3b 8 mxfp8 512 4 1 1 8 28934
h100 2 qwen3-30b-a3b 16 fp8-current 512 2 2 24 8 5275
b200 8 qwen3-235b-a22b 64 mxfp8 1024 1 8 2 8 3269"


printf '# %-5s %-16s %4s %-11s %4s %3s %2s %2s %2s %9s %9s %7s\n' kind model gpus precision gbs mbs pp vp ep published \
    predicted err_%
while read -r kind nodes m gpus prec gbs mbs pp vp ep pub; do
    plat=$TMP/$kind-$nodes.xml
    [ -f "$plat" ] || "$L" topo --gpu "$kind" --nodes "$nodes" -o "$plat" >/dev/null
    dp=$((gpus / pp)) ga=$((gbs / (gpus / pp) / mbs))
    pipe=(--pp "$pp")
    [ "$vp" -gt 1 ] && pipe+=(--vpp "$vp" --schedule interleaved)
    [ "$m" = qwen3-235b-a22b ] && pipe+=(--pp-embedding-slot on --pp-loss-slot on)
    gpn=8
    [ "${kind#gb}" != "$kind" ] && gpn=72 # an NVL72 rack is loong's node of 72 GPUs
    cfg=(--platform "$plat" --gpus-per-node "$gpn" --calib "$TOP/topologies/$kind.calib" --model "$m" --seq 4K --batch "$mbs"
        --micro-batches "$ga" --mesh 1x1 --strategy ulysses --dp "$dp" --ep "$ep" "${pipe[@]}"
        --placement tp-cp-ep-dp-pp --zero 1 --recompute none --precision "$prec" --grad-reduce bf16)
    out=$("$L" sim --quiet "${cfg[@]}" --fold none --json "$TMP/r.json" 2>&1) ||
        { echo "megatron-bridge-moe: loong sim failed: $(echo "$out" | tail -n 1)" >&2; exit 2; }
    step=$(json_num step_s "$TMP/r.json")
    plausible megatron-bridge-moe "$L" "$((pub * gpus))" "${cfg[@]}"
    awk -v k="$kind" -v m="$m" -v g="$gpus" -v p="$prec" -v gbs="$gbs" -v mbs="$mbs" -v pp="$pp" -v vp="$vp" \
        -v ep="$ep" -v pub="$pub" -v s="$step" 'BEGIN {
        pred = gbs * 4096 / s / g
        printf "  %-5s %-16s %4d %-11s %4d %3d %2d %2d %2d %9d %9.0f %+7.1f\n", k, m, g, p, gbs, mbs, pp, vp, ep, pub,
            pred, 100 * (pred - pub) / pub }'
done <<<"$rows"

#!/usr/bin/env bash
# NVIDIA Megatron-Bridge's published FP8 pre-training runs of Llama 3.1 405B
# against loong's prediction (github.com/NVIDIA-NeMo/Megatron-Bridge
# docs/performance-summary.md at 00b7660, "25.11 NeMo Container", FP8-CS =
# Transformer Engine's current scaling, --precision fp8-current):
#
#   DGX-GB300  256 GPUs, GBS 1536, MBS 1, seq 8192, TP2 PP8 CP2 VP4, GA 192:
#              999 tokens/s/GPU
#   DGX-B200   128 GPUs, GBS 64,   MBS 1, seq 8192, TP4 PP8 CP2 VP8, GA 32:
#              661 tokens/s/GPU
#   DGX-H100  1024 GPUs, GBS 512,  MBS 1, seq 8192, TP8 PP8 CP2 VP8, GA 64:
#              292 tokens/s/GPU
#
# DP = GPUs / (TP PP CP) (8, 2, 8), GA micro-batches per step (GBS / DP /
# MBS). What the table omits, taken from the repo's recipe, an assumption
# per line (files at the commits the index holds):
#  - src/megatron/bridge/recipes/llama/llama3.py (0d5f555),
#    llama31_405b_pretrain_config: no recomputation (recompute_granularity
#    None), no activation offloading, account_for_embedding_in_pipeline_split
#    and account_for_loss_in_pipeline_split (126 layers + 2 slots = 128 =
#    PP x VP x k: --pp-embedding-slot on --pp-loss-slot on), the distributed
#    optimizer (--zero 1), sequence parallelism with TP, TE attention,
#    CUDA graphs off, tp_comm_overlap=True (--tp-overlap on).
#  - scripts/performance/configs/llama31/llama31_405b_llm_pretrain.yaml
#    (0cfe9a4) and workload_base_configs.py (0fa501a): cuda_graphs false,
#    no FSDP, no recompute or offload for the B200 and H100 layouts above;
#    grad_reduce_in_fp32 False: a bf16 gradient buffer and bf16 gradient
#    collectives (--grad-reduce bf16).
#  - The GB300 layout of the table (TP2 PP8 CP2 VP4 on 256 GPUs) is in no
#    stored version of those files (they give GB300 FP8-CS as TP2 + FSDP +
#    CPU offload on 128 GPUs), so its recompute/offload settings are the
#    recipe defaults above, an assumption.
#  - Context parallelism: TE's load-balanced (zigzag) ring (cp_comm_type
#    p2p, Megatron's default).
# Platforms, generated with `loong topo` (the GPU kind's shipped fit):
#  - B200: 16 DGX B200 nodes (--gpu b200 --nodes 16).
#  - H100: 128 DGX H100 nodes (--gpu h100 --nodes 128).
#  - GB300: 256 GPUs in 4-GPU compute trays. 256 is not a multiple of an
#    NVL72's 72 GPUs; assumed: 4 racks of 16 trays each, one 64-GPU NVLink
#    domain per rack (--gpu gb300 --nodes 64 --nvlink-domain 64), NICs
#    between racks. A replica (TP PP CP = 32 GPUs) is half a domain, so dp
#    cannot fold by symmetry there and all 256 ranks are simulated.
# Calibration: topologies/{b200,h100,gb300}.calib, nothing fitted to these
# runs. Memory: loong's reserved peak against the GPU's HBM (--gpu-mem
# default per kind); Megatron-Bridge ran all three, so all three fit.
#
# Slow: the B200 row takes about 11 s, H100 about 3 min, GB300 longer (TP
# overlap keeps the TP ranks from folding), so these rows are out of the
# fidelity table that CI runs (docs/validation.md lists them).
#
# usage: experiments/megatron-bridge-published/run.sh [LOONG] [ROWS]
#        ROWS: gpu kinds to run, comma-separated (default b200,h100,gb300)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
L=${1:-$TOP/build/loong}
WANT=${2:-b200,h100,gb300}
[ -x "$L" ] || { echo "megatron-bridge-published: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# gpu  GPUs  topo-args  gpus-per-node(sim)  tp  pp  cp  vp  dp  micro-batches  dp-mode  published
rows="b200 128 --nodes=16 8 4 8 2 8 2 32 symmetric 661
h100 1024 --nodes=128 8 8 8 2 8 8 64 symmetric 292
gb300 256 --nodes=64,--nvlink-domain=64 64 2 8 2 4 8 192 full 999"

printf '# %-5s %4s %3s %3s %3s %3s %3s %4s %9s %9s %10s %8s %11s %s\n' gpu GPUs tp pp cp vp dp m step_s published \
    predicted error_% reserved_GB memory
while read -r g gpus targs gpn tp pp cp vp dp mb dpm pub; do
    [[ ",$WANT," == *",$g,"* ]] || continue
    # shellcheck disable=SC2086
    "$L" topo --gpu "$g" ${targs//,/ } -o "$TMP/$g.xml" ||
        { echo "megatron-bridge-published: loong topo --gpu $g failed" >&2; exit 1; }
    out=$("$L" sim --quiet --platform "$TMP/$g.xml" --calib "$TOP/topologies/$g.calib" --gpus-per-node "$gpn" \
        --model llama3-405b --seq 8K --batch 1 --tp "$tp" --mesh "1x$cp" --strategy zigzag --pp "$pp" \
        --schedule interleaved --vpp "$vp" --pp-embedding-slot on --pp-loss-slot on --dp "$dp" --dp-mode "$dpm" \
        --micro-batches "$mb" --zero 1 --recompute none --precision fp8-current --grad-reduce bf16 --tp-overlap on \
        --json "$TMP/$g.json" 2>&1) || { echo "megatron-bridge-published: $g: $(echo "$out" | tail -n 1)" >&2; exit 1; }
    step=$(printf '%s\n' "$out" | sed -n 's/^# step time: \([0-9.]*\) s.*/\1/p')
    pred=$(printf '%s\n' "$out" | sed -n 's|^# throughput: \([0-9.]*\) tokens/s/GPU.*|\1|p')
    if [ -z "$step" ] || [ -z "$pred" ]; then
        echo "megatron-bridge-published: $g: $(echo "$out" | tail -n 1)" >&2
        exit 1
    fi
    resv=$(sed -n 's/.*"reserved": *\([0-9.e+]*\).*/\1/p' "$TMP/$g.json" | awk '{printf "%.1f", $1 / 1e9}')
    mem=$(printf '%s\n' "$out" | grep -q 'predicted OOM' && echo "oom (published: fits)" || echo fits)
    err=$(awk -v p="$pred" -v q="$pub" 'BEGIN {printf "%.1f", 100 * (p - q) / q}')
    printf '  %-5s %4s %3s %3s %3s %3s %3s %4s %9.3f %9s %10s %8s %11s %s\n' "$g" "$gpus" "$tp" "$pp" "$cp" "$vp" "$dp" \
        "$mb" "$step" "$pub" "$pred" "$err" "$resv" "$mem"
done <<<"$rows"

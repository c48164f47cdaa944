#!/usr/bin/env bash
# SimuMax's published B200 runs of DeepSeek mixtures of experts against
# loong's prediction, in time and memory (github.com/MooreThreads/SimuMax
# docs/b200/b200_release_v1.2_summary.md at 1b8ca90 and its .json at
# e691807, the "DeepSeek MoE" rows): Megatron-LM with Transformer Engine
# 2.11 on one 8-GPU B200 server, bf16 (configs/system/b200_bf16_ceperm.json),
# DeepSeek-V2 and DeepSeek-V3 cut to 4 layers with one dense leading layer
# ("DeepSeekV3 formal rows use dense_layers=1"; the models' shapes are
# configs/models/deepseekv2.json and deepseekv3.json: MLA, 160 and 256
# routed experts, top-6 and top-8, shared experts), TP 1 and EP 8 over the
# 8 data-parallel ranks, or EP 4 with PP 2 over 4 of them, 4, 8 and 32
# micro-batches of one 4096-token sample (tools/b200/run_params/
# b200_bf16_ceperm_sweep.json: seq_len 4096, mbs 1). Published: "real_ms",
# the measured step (steady iterations 2-3, rank 7), and "real_alloc_gib"
# (torch max_allocated over all ranks), against loong's step and its
# allocated peak in GiB.
#
# Assumed where the summary is silent, as for its dense rows
# (experiments/simumax-b200): ZeRO-1 (the distributed optimizer), no
# recomputation, fp32 gradient accumulation, Megatron-Core's default rank
# order tp-cp-ep-dp-pp (a stage's replicas side by side), the all-to-all
# token dispatcher with grouped GEMMs, balanced routing (loong draws no
# router: the measured steps route by the tokens).
#
# Predicted with loong sim --fold none (one GPU per replica) on
# `loong topo --gpu b200` (one node) and topologies/b200.calib; nothing
# fitted to these runs. A few seconds.
#
# usage: experiments/simumax-b200-moe/run.sh [LOONG [CALIB]]   (default build/loong,
#        topologies/b200.calib; topologies/b200-simumax.calib is SimuMax's
#        measured kernels on the same server: docs/validation.md)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
# shellcheck source=experiments/simumax-b200/server.sh
. "$TOP/experiments/simumax-b200/server.sh"
b200_server simumax-b200-moe "${1:-}" "${2:-}"

# model  ep  pp  micro-batches  real_ms  real_alloc_gib
rows="deepseek-v2-4l 8 1 4 366.6 45.63
deepseek-v2-4l 4 2 4 282.1 44.70
deepseek-v3-4l 8 1 4 603.2 104.30
deepseek-v3-4l 4 2 4 452.2 114.00
deepseek-v2-4l 8 1 8 676.2 45.63
deepseek-v2-4l 4 2 8 492.6 44.70
deepseek-v3-4l 8 1 8 1101.7 104.30
deepseek-v3-4l 4 2 8 771.6 114.00
deepseek-v2-4l 8 1 32 2721.3 45.63
deepseek-v2-4l 4 2 32 1727.7 44.70
deepseek-v3-4l 8 1 32 4141.2 104.30
deepseek-v3-4l 4 2 32 2718.6 114.00"


printf '# %-14s %2s %2s %3s %9s %9s %7s %9s %9s %7s\n' model ep pp m real_ms pred_ms err_% alloc_GiB pred %
while read -r m ep pp mb rms ralloc; do
    dp=$((8 / pp))
    # shellcheck disable=SC2086
    cfg="--platform $TMP/b200.xml --calib $CALIB --model $HERE/$m.model --seq 4K --batch 1
        --micro-batches $mb --mesh 1x1 --strategy ulysses --dp $dp --ep $ep --pp $pp --placement tp-cp-ep-dp-pp
        --zero 1 --recompute none"
    # shellcheck disable=SC2086
    out=$("$L" sim --quiet $cfg --fold none --json "$TMP/r.json" 2>&1) ||
        { echo "simumax-b200-moe: loong sim failed: $(echo "$out" | tail -n 1)" >&2; exit 2; }
    step=$(json_num step_s "$TMP/r.json") alloc=$(json_num allocated "$TMP/r.json")
    # the published step: mb micro-batches of 4096 tokens on each of dp replicas
    # shellcheck disable=SC2086
    plausible simumax-b200-moe "$L" "$(awk -v m="$mb" -v d="$dp" -v ms="$rms" 'BEGIN {printf "%.6g", m * d * 4096 / (ms / 1000)}')" $cfg
    awk -v m="$m" -v ep="$ep" -v pp="$pp" -v mb="$mb" -v rms="$rms" -v ra="$ralloc" -v s="$step" -v a="$alloc" 'BEGIN {
        g = 1024 ^ 3; pms = 1000 * s; pa = a / g
        printf "  %-14s %2s %2s %3s %9.1f %9.1f %+7.1f %9.2f %9.2f %+7.1f\n", m, ep, pp, mb, rms, pms,
            100 * (pms - rms) / rms, ra, pa, 100 * (pa - ra) / ra }'
done <<<"$rows"

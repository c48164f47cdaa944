#!/usr/bin/env bash
# SimuMax's published A100-PCIe runs of DeepSeek-V2 (236B) against loong's
# prediction (github.com/MooreThreads/SimuMax at 4dcaae5, docs/
# FULL_RESULTS.md's "ds 236b" rows and the chart it shows, assets/
# A100-Pcie.png, right panel): Megatron-LM on one server of 8 A100 PCIe
# 80GB GPUs (no NVLink: PCIe Gen4), DeepSeek-V2 cut to 4 layers with its
# one dense leading layer (configs/models/deepseekv2.json: MLA, 160 routed
# experts, top-6, two shared experts' width), TP 1 and EP 8 over the 8
# data-parallel ranks, or EP 4 with PP 2 over 4 of them; 4, 8 and 32
# micro-batches of one 4096-token sample.
#
# Their setup (examples/perf_deepseekv2_layer4_ep8_pp1.py and _ep4_pp2.py,
# configs/strategy/ep8_pp1_dp8_mbs1.json and ep4_pp2_dp4_mbs1.json): bf16,
# sequence parallelism, ZeRO-1 (zero_state 1), no recomputation
# (enable_recompute without a granularity), the all-to-all dispatcher,
# capacity factor 1 with the experts' input padded to capacity, flash
# attention, fused norms, fp32 gradient accumulation, the vocabulary
# padded to a multiple of 128. Assumed where they are silent: Megatron-
# Core's default rank order tp-cp-ep-dp-pp and balanced routing (loong's
# DAG routes by expected rows; padded to capacity, every expert computes
# capacity rows anyway).
#
# The published figure is the measured ("Actual") TFLOP/s per GPU, read
# off the chart by pixel: its gridlines 70-100 TFLOP/s (11.92 px a unit,
# fitted within 0.04), each circle's centre (its 11-pixel run; +-0.1
# TFLOP/s). TFLOP/s as SimuMax counts them (simumax/core/config.py
# flops_per_token, perf_llm.py): per token, over the 4 layers, 6 (the MLA
# projections + the output projection) + 6 x 3 h F_e (1 + (k-1) + F_s/F_e)
# + 6 h E (the router) + 6 s H (d_qk + d_rope + d_v) + 6 h V, every layer
# counted as an expert layer; times the step's tokens, over step time x
# GPUs. loong's step goes through the same formula, so the error is that
# of the step.
#
# Predicted with loong sim --fold none on `loong topo --gpu a100-pcie`
# and topologies/a100-pcie.calib, whose GEMM and FlashAttention
# efficiencies are SimuMax's measured kernel tables for this card (the
# kernel source and these rows come from the same project; the fidelity
# table says so). Nothing was fitted to these runs. About a second.
#
# usage: experiments/simumax-a100-moe/run.sh [LOONG]   (default build/loong)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
# shellcheck source=experiments/fidelity/plausible.sh
. "$TOP/experiments/fidelity/plausible.sh"
L=${1:-$TOP/build/loong}
[ -x "$L" ] || { echo "simumax-a100-moe: no loong at $L (build first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$L" topo --gpu a100-pcie -o "$TMP/a100-pcie.xml" >/dev/null
MODEL=$TOP/experiments/simumax-b200-moe/deepseek-v2-4l.model

# SimuMax's FLOPs per token of this model at s = 4096 (see above)
FLOPS_PER_TOKEN=$(awk 'BEGIN {
    L = 4; h = 5120; H = 128; qk = 128; pe = 64; v = 128; ql = 1536; kl = 512; Fe = 1536; Fs = 3072
    E = 160; k = 6; V = 102400; s = 4096
    qkv = h * ql + ql * H * (qk + pe) + h * (kl + pe) + kl * H * (qk + v); o = v * H * h
    f = 6 * L * (qkv + o) + 6 * L * 3 * h * Fe * (k + Fs / Fe) + 6 * L * h * E
    f += 6 * L * (s * (qk + pe) * H + s * v * H) + 6 * h * V
    printf "%.0f", f }')

# ep  pp  micro-batches  measured TFLOP/s per GPU (the chart's "Actual")
rows="8 1 4 70.22
4 2 4 74.17
8 1 8 82.47
4 2 8 88.85
8 1 32 95.22
4 2 32 102.86"


printf '# %-6s %3s %9s %9s %7s %9s\n' layout m meas_TF pred_TF err_% pred_ms
while read -r ep pp mb meas; do
    dp=$((8 / pp))
    cfg="--platform $TMP/a100-pcie.xml --calib $TOP/topologies/a100-pcie.calib --model $MODEL --seq 4K --batch 1
        --micro-batches $mb --mesh 1x1 --strategy ulysses --dp $dp --ep $ep --pp $pp --placement tp-cp-ep-dp-pp
        --zero 1 --recompute none --capacity-factor 1"
    # shellcheck disable=SC2086
    out=$("$L" sim --quiet $cfg --fold none --json "$TMP/r.json" 2>&1) ||
        { echo "simumax-a100-moe: loong sim failed: $(echo "$out" | tail -n 1)" >&2; exit 2; }
    step=$(json_num step_s "$TMP/r.json")
    # the measured step's tokens/s: mb micro-batches of 4096 tokens on each of dp replicas
    tok=$((mb * dp * 4096))
    # shellcheck disable=SC2086
    plausible simumax-a100-moe "$L" "$(awk -v t="$tok" -v f="$FLOPS_PER_TOKEN" -v m="$meas" \
        'BEGIN {printf "%.6g", m * 1e12 * 8 / f}')" $cfg
    awk -v ep="$ep" -v pp="$pp" -v mb="$mb" -v meas="$meas" -v s="$step" -v t="$tok" -v f="$FLOPS_PER_TOKEN" 'BEGIN {
        pred = f * t / 8 / s / 1e12
        printf "  ep%spp%s %3s %9.2f %9.2f %+7.1f %9.1f\n", ep, pp, mb, meas, pred, 100 * (pred - meas) / meas, 1000 * s }'
done <<<"$rows"

#!/usr/bin/env bash
# GEMM shape rows and attention curves (docs/sim.md, "Calibration tables")
# from a SimuMax system config: the kernels SimuMax's calibration pipeline
# measured on one machine (github.com/MooreThreads/SimuMax,
# simu_tools/efficency_test: Transformer Engine GEMMs and causal
# DotProductAttention timed after warm-up), as loong calib rows.
#
#   experiments/gemm-tables/simumax-rows.sh SYSTEM.json
#
# e.g. SimuMax's configs/system/b200_bf16_ceperm.json (topologies/
# b200-simumax.calib). Prints, 4 significant digits:
#
# - `gemm shape LAYOUT M N K EFF` for every accelerator.op.matmul
#   accurate_efficient_factor entry as Megatron-Core runs it, in SimuMax's
#   order: its m, n, k are M, N, K (output M x N, reduction K), its TN and
#   NN layouts with bf16 output loong's tn (forward) and nn (dgrad), its NT
#   with fp32 output nt (the wgrad accumulating into fp32 main grads,
#   gradient-accumulation fusion; NT entries with bf16 output are left out);
# - `gemm shape grouped-tn|grouped-nn|grouped-nt` from group_matmul's bf16
#   entries with fp32 main grads (the experts' grouped GEMM over ng local
#   experts, one group's M, N, K as SimuMax keys the forward; stages fwd, bwd_grad_act and
#   bwd_grad_w loong's forward, dgrad (M, K, N) and wgrad (N, K, M));
# - `attn_fwd curve flops` and `attn_bwd curve flops` from sdp_fwd and
#   sdp_bwd's entries with head dims 128/128 (the GQA shapes; MLA's 192 are
#   left out), one point per (sequence, query heads): the entries that
#   differ only in KV heads or qkv_contiguous averaged. SimuMax counts a
#   causal kernel's FLOPs as the full square (forward 4 s^2 h d, backward
#   2.5x that); loong counts the work at tile granularity (tiles 128x128
#   forward, 64x128 backward, the tables' `tile` rows), a fraction f(s) of
#   the square (0.515625 at s = 4096), so a point's abscissa is SimuMax's
#   FLOPs x f(s) and its efficiency SimuMax's x f(s). T0 5 us (the other
#   tables' assumption).
#
# An efficiency above 1 after that conversion is refused (exit 1): no
# kernel runs above the peak.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 SIMUMAX_SYSTEM.json" >&2; exit 2; }
[ -r "$1" ] || { echo "simumax-rows: cannot read $1" >&2; exit 2; }
command -v jq >/dev/null || { echo "simumax-rows: needs jq (apt-get install jq)" >&2; exit 2; }

jq -r '.accelerator.op.matmul.accurate_efficient_factor | to_entries[] |
    (.key | capture("m=(?<m>[0-9]+), k=(?<k>[0-9]+), n=(?<n>[0-9]+), layout=(?<l>[A-Z]+).*out_dtype=(?<o>[a-z0-9]+)")) as $s |
    select(($s.l == "NT") == ($s.o == "fp32")) |
    "\($s.l | ascii_downcase) \($s.m) \($s.n) \($s.k) \(.value)"' "$1" |
    awk '$5 > 1 { print "simumax-rows: GEMM " $0 " is above the peak" > "/dev/stderr"; bad = 1 }
         { printf "gemm shape %s %s %s %s %.4g\n", $1, $2, $3, $4, $5 }
         END { exit bad }'

# the experts' grouped GEMMs: SimuMax keys each by the forward's one-group
# shape; the backward's dgrad is (M, K, N) and its wgrad (N, K, M)
if jq -e '.accelerator.op.group_matmul.accurate_efficient_factor | length > 0' "$1" >/dev/null; then
    jq -r '.accelerator.op.group_matmul.accurate_efficient_factor | to_entries[] |
        (.key | capture("ng=(?<g>[0-9]+), M=(?<m>[0-9]+), N=(?<n>[0-9]+), K=(?<k>[0-9]+), dtype=bf16.*" +
            "main_grad_dtype=(?<mg>[a-z0-9]+).*stage=(?<s>[a-z_]+)")) as $s | select($s.mg == "fp32") |
        "\($s.s) \($s.m) \($s.n) \($s.k) \(.value) \($s.g)"' "$1" |
        awk '$5 > 1 { print "simumax-rows: grouped GEMM " $0 " is above the peak" > "/dev/stderr"; bad = 1 }
             $1 == "fwd" { printf "gemm shape grouped-tn %s %s %s %.4g\n", $2, $3, $4, $5 }
             $1 == "bwd_grad_act" { printf "gemm shape grouped-nn %s %s %s %.4g\n", $2, $4, $3, $5 }
             $1 == "bwd_grad_w" { printf "gemm shape grouped-nt %s %s %s %.4g\n", $3, $4, $2, $5 }
             $1 !~ /^(fwd|bwd_grad_act|bwd_grad_w)$/ { print "simumax-rows: unknown grouped stage " $1 > "/dev/stderr"; bad = 1 }
             END { exit bad }'
fi

for dir in fwd bwd; do
    jq -r --arg op "sdp_$dir" '.accelerator.op[$op].accurate_efficient_factor | to_entries[] |
        (.key | capture("seq_len=(?<s>[0-9]+), head_num=(?<h>[0-9]+), kv_head_num=[0-9]+, qk_head_dim=(?<dk>[0-9]+), v_head_dim=(?<dv>[0-9]+)")) as $a |
        select($a.dk == "128" and $a.dv == "128") | "\($a.s) \($a.h) \(.value)"' "$1" |
        awk -v dir="$dir" '
        # the fraction of the causal square a br x bc tiling computes
        function tiled(s, br, bc,   i, n, sum) {
            n = s / br
            for (i = 0; i < n; i++) sum += br * (int(((i + 1) * br - 1) / bc) + 1) * bc
            return sum / (s * s)
        }
        function sig(x,   e) { return sprintf("%.4g", x) }
        { k = $1 " " $2; if (!(k in n)) order[++no] = k; n[k]++; e[k] += $3 }
        END {
            br = dir == "fwd" ? 128 : 64; bc = 128; mult = dir == "fwd" ? 1 : 2.5
            for (i = 1; i <= no; i++) {
                split(order[i], a, " "); f = tiled(a[1], br, bc)
                x[i] = 4 * a[1] * a[1] * a[2] * 128 * mult * f; y[i] = e[order[i]] / n[order[i]] * f
                if (y[i] > 1) { print "simumax-rows: attention " order[i] " above the peak" > "/dev/stderr"; exit 1 }
            }
            for (i = 1; i <= no; i++) for (j = i + 1; j <= no; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t; t = y[i]; y[i] = y[j]; y[j] = t }
            line = "attn_" dir " curve flops 5us"
            for (i = 1; i <= no; i++) line = line " " (x[i] < 1e12 ? sig(x[i] / 1e9) "G" : sig(x[i] / 1e12) "T") ":" sig(y[i])
            print line
        }'
done

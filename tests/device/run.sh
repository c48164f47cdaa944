#!/usr/bin/env bash
# tests/device/run.sh: the CUDA device's checks on a lent GPU machine (one
# H200, nvcc 13 and PyTorch, no MPI, no Debian packages, no network).
# Must finish in <= 8 minutes. Three parts, each reported in the final table:
#   1. kernel lab: nvcc builds experiments/cuda-lab/cuda_lab.c with the
#      kernels from source (needs nothing but nvcc and cuBLAS); it validates
#      every kernel against float64, then times attention fwd/bwd at d=128 and
#      4K/8K/16K tokens per block and cuBLAS GEMMs;
#   2. PyTorch's scaled_dot_product_attention (flash) on the same shapes, in
#      the same run, for the ratio;
#   3. `loong exec --device cuda --transport local --check` over a matrix of
#      meshes/strategies: needs a `loong` built elsewhere (it links jansson,
#      GSL, OpenBLAS and Open MPI, absent there) and carried with its
#      libraries: run `tests/device/run.sh --pack` on a build machine first
#      (writes build-devpack/, ignored by git) and name build-devpack in the
#      device call's carry. Without it, part 3 is reported as NOT RUN.
#
# usage: tests/device/run.sh [--dry-run] [--quick] [--out DIR]
#        tests/device/run.sh --pack        (on the build machine, no GPU needed)
#   --dry-run  print the commands and check the inputs, run nothing on a GPU
#   --quick    one size (4K) and fewer iterations
#   --out DIR  logs and the table (default: $OUT if set, else /tmp/loong-device)
# The exact call from a session with the device tool:
#   run(command="bash tests/device/run.sh", carry=["build-devpack"], timeout_s=540)
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
dry=0 quick=0 pack=0
out=${OUT:-/tmp/loong-device}
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --quick) quick=1 ;;
    --pack) pack=1 ;;
    --out) shift; out=${1:?--out needs a directory} ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# ---- --pack: build loong with CUDA here and collect its non-system libraries ----
if [ $pack = 1 ]; then
  set -e
  b="$here/build-devpack"
  mkdir -p "$b/lib"
  (cd "$b" && "$here/configure" --without-simgrid --with-cuda >/dev/null && make -j1 loong >/dev/null)
  # every shared library outside glibc and CUDA/NCCL (the machine has those)
  ldd "$b/loong" | awk '/=> \//{print $3}' | while read -r l; do
    case "$(basename "$l")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
      libcuda*|libcudart*|libcublas*|libnccl*) ;;
      *) cp -L "$l" "$b/lib/" ;;
    esac
  done
  du -sh "$b/loong" "$b/lib"
  echo "packed: carry build-devpack (and keep the working tree + it under 64 MiB)"
  exit 0
fi

mkdir -p "$out"
log="$out/device.log"
: > "$log"
say() { echo "$@" | tee -a "$log"; }
run() { say "+ $*"; [ $dry = 1 ] && return 0; "$@" 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; }
t_start=$(date +%s)
left() { echo $((480 - ($(date +%s) - t_start))); }

sizes=4096,8192,16384 iters=5
[ $quick = 1 ] && sizes=4096 iters=2

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
py=${PYTHON:-python3}
say "# loong device run: $(date -u +%FT%TZ) nvcc=$nvcc out=$out dry=$dry quick=$quick"
[ $dry = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$log"

# ---- 1. kernel lab ----
lab="$out/cuda_lab"
lab_rc=NOT-RUN
cuinc=$(dirname "$(dirname "$nvcc")")/include
if run "$nvcc" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Isrc -I. -c src/cuda/kernels_cuda.cu \
      -o "$out/kernels_cuda.o" &&
   run "$nvcc" -O2 -Isrc -I. -I"$cuinc" -Xcompiler -std=c11 -c experiments/cuda-lab/cuda_lab.c -o "$out/cuda_lab.o" &&
   run "$nvcc" -O2 -Isrc -I. -Xcompiler -std=c11 -c src/exec/attn_ref.c -o "$out/attn_ref.o" &&
   run "$nvcc" -gencode arch=compute_90,code=sm_90 "$out/kernels_cuda.o" "$out/cuda_lab.o" "$out/attn_ref.o" \
      -lcublas -lm -o "$lab"; then
  run timeout 240 "$lab" --sizes "$sizes" --iters "$iters" | tee "$out/lab.txt" >/dev/null
  lab_rc=${PIPESTATUS[0]}
else
  lab_rc=BUILD-FAILED
fi
[ $dry = 1 ] && lab_rc=DRY

# ---- 2. PyTorch SDPA on the same shapes (hq=8, KV heads expanded: same FLOPs) ----
cat > "$out/sdpa.py" <<'PY'
import sys, torch, torch.nn.functional as F
sizes = [int(s) for s in sys.argv[1].split(",")]; iters = int(sys.argv[2])
hq, hkv, d = 8, 2, 128
for n in sizes:
    q = torch.randn(1, hq, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, hkv, n, d, device="cuda", dtype=torch.bfloat16).repeat_interleave(hq // hkv, 1).requires_grad_()
    v = torch.randn_like(k).requires_grad_()
    do = torch.randn_like(q)
    from torch.nn.attention import sdpa_kernel, SDPBackend
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        for w in range(2): F.scaled_dot_product_attention(q, k, v).backward(do)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); a.record()
        for i in range(iters): o = F.scaled_dot_product_attention(q, k, v)
        b.record(); torch.cuda.synchronize(); fwd = a.elapsed_time(b) / iters
        a.record()
        for i in range(iters): F.scaled_dot_product_attention(q, k, v).backward(do)
        b.record(); torch.cuda.synchronize(); both = a.elapsed_time(b) / iters
    fl = 4.0 * n * n * hq * d
    print(f"sdpa_fwd n={n} ms={fwd:.4f} tflops={fl / fwd / 1e9:.1f}")
    print(f"sdpa_bwd n={n} ms={both - fwd:.4f} tflops={2.5 * fl / (both - fwd) / 1e9:.1f}")
PY
sdpa_rc=NOT-RUN
run timeout 180 "$py" "$out/sdpa.py" "$sizes" "$iters" | tee "$out/sdpa.txt" >/dev/null
sdpa_rc=${PIPESTATUS[0]}
[ $dry = 1 ] && sdpa_rc=DRY

# ---- 3. the schedule through the local transport ----
matrix=(
  "--mesh 4 --strategy ulysses"
  "--mesh 4 --strategy ring"
  "--mesh 8 --strategy zigzag"
  "--mesh 2x2 --strategy usp"
  "--mesh 2x4 --strategy loongtrain --window 2"
  "--mesh 4x2 --strategy loongtrain --window 2 --placement context-first"
  "--mesh 2x4 --strategy dualring"
)
: > "$out/local.txt"
if [ -x build-devpack/loong ]; then
  nccl_lib=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null)
  blas_lib=$("$py" -c 'import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib"))' 2>/dev/null)
  export LD_LIBRARY_PATH="$here/build-devpack/lib:/usr/local/cuda/lib64:${nccl_lib:-}:${blas_lib:-}:${LD_LIBRARY_PATH:-}"
  for m in "${matrix[@]}" "STEP"; do
    if [ "$(left)" -lt 60 ]; then echo "TIME $m" >> "$out/local.txt"; continue; fi
    if [ "$m" = STEP ]; then
      args="--model tiny --seq 512 --mesh 2x2 --strategy usp --scope step --check --iters 1 --warmup 0"
    else
      args="--model tiny --seq 2K $m --scope attn --check --iters 2 --warmup 1"
    fi
    # shellcheck disable=SC2086
    if run timeout 120 build-devpack/loong exec --device cuda --transport local $args > "$out/one.txt"; then
      echo "ok $m" >> "$out/local.txt"
    else
      echo "FAIL $m" >> "$out/local.txt"
    fi
    [ $dry = 1 ] || cat "$out/one.txt" >> "$log"
  done
else
  say "# part 3 NOT RUN: build-devpack/loong missing (run tests/device/run.sh --pack on a build machine and carry build-devpack)"
  echo "NOT-RUN (no carried loong)" > "$out/local.txt"
fi

# ---- the table ----
val() { awk -v k="$1" -v n="n=$2" '$1==k && $2==n {for(i=1;i<=NF;i++) if($i ~ /^tflops=/){sub("tflops=","",$i); print $i}}' "$3" 2>/dev/null; }
echo
echo "# ================= loong CUDA device: summary ($(($(date +%s) - t_start)) s) ================="
cnt() { local c; c=$(grep -c "$1" "$2" 2>/dev/null); echo "${c:-0}"; }
echo "# kernel validation vs float64 (bf16 tol 1e-2): $(cnt ' OK$' "$out/lab.txt") OK, $(cnt 'NOT OK' "$out/lab.txt") NOT OK (lab exit $lab_rc)"
printf "# %-6s %12s %12s %8s %12s %12s %8s\n" n fwd_TFLOP/s sdpa_fwd ratio bwd_TFLOP/s sdpa_bwd ratio
for n in ${sizes//,/ }; do
  f=$(val attn_fwd "$n" "$out/lab.txt"); b=$(val attn_bwd "$n" "$out/lab.txt")
  sf=$(awk -v n="n=$n" '$1=="sdpa_fwd" && $2==n {sub("tflops=","",$4); print $4}' "$out/sdpa.txt" 2>/dev/null)
  sb=$(awk -v n="n=$n" '$1=="sdpa_bwd" && $2==n {sub("tflops=","",$4); print $4}' "$out/sdpa.txt" 2>/dev/null)
  rf=$(awk -v a="${f:-0}" -v b="${sf:-0}" 'BEGIN{print (b>0)? sprintf("%.2f", a/b) : "-"}')
  rb=$(awk -v a="${b:-0}" -v b="${sb:-0}" 'BEGIN{print (b>0)? sprintf("%.2f", a/b) : "-"}')
  printf "  %-6s %12s %12s %8s %12s %12s %8s\n" "$n" "${f:--}" "${sf:--}" "$rf" "${b:--}" "${sb:--}" "$rb"
done
echo "# (attention: full blocks, hq=8 hkv=2 d=128; fwd peak 989 TFLOP/s bf16 dense; sdpa exit $sdpa_rc)"
grep '^gemm_' "$out/lab.txt" 2>/dev/null | sed 's/^/  /'
echo "# local transport --check (exec exit 0 = within 1e-2 of float64):"
sed 's/^/  /' "$out/local.txt"

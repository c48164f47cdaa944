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
#   3. tests/check_cuda on the GPU (every kernel against float64, causal,
#      document-masked and zigzag positions, GQA; `loong exec --device cuda
#      --transport local --check` over nine layouts and one --scope step),
#      then one measured trace per line of tests/device/traces.txt (for
#      loong calibrate and loong compare), returned as traces.tgz. Needs
#      loong, its plug-in and check_cuda built elsewhere (they link
#      jansson, GSL, OpenBLAS, Check and Open MPI, absent there) and carried
#      with their libraries: run `tests/device/run.sh --pack` on a build
#      machine first (writes build-devpack/, ignored by git) and carry the
#      paths it prints. Without them, part 3 is reported as NOT RUN.
#
# usage: tests/device/run.sh [--dry-run] [--quick] [--out DIR]
#        tests/device/run.sh --pack        (on the build machine, no GPU needed)
#   --dry-run  print the commands and check the inputs, run nothing on a GPU
#   --quick    one size (4K) and fewer iterations
#   --out DIR  logs and the table (default: $OUT if set, else /tmp/loong-device)
#   --parts L  which parts, comma-separated: lab, sdpa, check, traces [all]
#   --only N,N the traces of these names only (tests/device/traces.txt)
#   --budget S traces start only while S seconds from the start remain > 40 [420]
# The exact call from a session with the device tool:
#   run(command="bash tests/device/run.sh", carry=["build-devpack/loong",
#       "build-devpack/loong-cuda.so", "build-devpack/tests/check_cuda",
#       "build-devpack/lib", "build-devpack/PACKED"], timeout_s=480)
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
dry=0 quick=0 pack=0 parts=lab,sdpa,check,traces only="" budget=420
out=${OUT:-/tmp/loong-device}
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1 ;;
    --quick) quick=1 ;;
    --pack) pack=1 ;;
    --parts) shift; parts=${1:?--parts needs a list, e.g. lab,check} ;;
    --only) shift; only=${1:?--only needs trace names} ;;
    --budget) shift; budget=${1:?--budget needs seconds} ;;
    --out) shift; out=${1:?--out needs a directory} ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# build_lab DIR: the kernel lab from source with nvcc alone (objects in DIR)
build_lab() {
  local d=$1 nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  local cuinc; cuinc=$(dirname "$(dirname "$nvcc")")/include
  "$nvcc" -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Isrc -I. -c src/cuda/kernels_cuda.cu -o "$d/kernels_cuda.o" &&
    "$nvcc" -O2 -Isrc -I. -I"$cuinc" -Xcompiler -std=c11 -c experiments/cuda-lab/cuda_lab.c -o "$d/cuda_lab.o" &&
    "$nvcc" -O2 -Isrc -I. -Xcompiler -std=c11 -c src/exec/attn_ref.c -o "$d/attn_ref.o" &&
    "$nvcc" -gencode arch=compute_90,code=sm_90 "$d/kernels_cuda.o" "$d/cuda_lab.o" "$d/attn_ref.o" -lcublas -lm \
      -o "$d/cuda_lab"
}

# ---- --pack: build loong, its CUDA plug-in and check_cuda here, with their non-system libraries ----
if [ $pack = 1 ]; then
  set -e
  b="$here/build-devpack"
  mkdir -p "$b/lib"
  (cd "$b" && "$here/configure" --without-simgrid --with-cuda >/dev/null &&
    make -j2 src/model/fidelity_rows.inc >/dev/null && make -j2 loong loong-cuda.so tests/check_cuda >/dev/null)
  # every shared library outside glibc and CUDA/NCCL (the GPU machine has those)
  for f in "$b/loong" "$b/loong-cuda.so" "$b/tests/check_cuda"; do ldd "$f"; done | awk '/=> \//{print $3}' | sort -u |
    while read -r l; do
      case "$(basename "$l")" in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
        libcuda*|libcudart*|libcublas*|libnccl*) ;;
        *) cp -L "$l" "$b/lib/" ;;
      esac
    done
  build_lab "$b"
  # check_cuda runs loong by this absolute path: the device run links it to its copy
  echo "packed-at: $b" > "$b/PACKED"
  du -shc "$b/loong" "$b/loong-cuda.so" "$b/tests/check_cuda" "$b/cuda_lab" "$b/lib" | tail -1
  echo "packed: carry build-devpack/loong build-devpack/loong-cuda.so build-devpack/tests/check_cuda"
  echo "        build-devpack/cuda_lab build-devpack/lib build-devpack/PACKED (with the working tree, under 64 MiB)"
  exit 0
fi

mkdir -p "$out"
log="$out/device.log"
: > "$log"
say() { echo "$@" | tee -a "$log"; }
run() { say "+ $*"; [ $dry = 1 ] && return 0; "$@" 2>&1 | tee -a "$log"; return "${PIPESTATUS[0]}"; }
t_start=$(date +%s)
left() { echo $((budget - ($(date +%s) - t_start))); }
want() { [[ ",$parts," == *",$1,"* ]]; }

sizes=4096,8192,16384 iters=5
[ $quick = 1 ] && sizes=4096 iters=2

nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
py=${PYTHON:-python3}
say "# loong device run: $(date -u +%FT%TZ) nvcc=$nvcc out=$out dry=$dry quick=$quick"
if [ $dry = 0 ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader 2>&1 | tee -a "$log"
  say "# nvcc: $("$nvcc" --version 2>&1 | tail -1); torch: $("$py" -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1 | tail -1); $(grep -m1 PRETTY /etc/os-release)"
fi

# ---- 1. kernel lab (the packed build, else built here) ----
lab=build-devpack/cuda_lab
lab_rc=NOT-RUN
if want lab; then
  if [ ! -x "$lab" ] && [ $dry = 0 ]; then
    mkdir -p /tmp/loong-lab && lab=/tmp/loong-lab/cuda_lab
    run build_lab /tmp/loong-lab || lab_rc=BUILD-FAILED
  fi
  if [ "$lab_rc" = NOT-RUN ]; then
    run timeout 150 "$lab" --sizes "$sizes" --iters "$iters" | tee "$out/lab.txt" >/dev/null
    lab_rc=${PIPESTATUS[0]}
  fi
  [ $dry = 1 ] && lab_rc=DRY
fi

# ---- 2. PyTorch SDPA on the same shapes (hq=8, KV heads expanded: same FLOPs) ----
cat > "$out/sdpa.py" <<'PY'
import sys, torch, torch.nn.functional as F
sizes = [int(s) for s in sys.argv[1].split(",")]; iters = int(sys.argv[2])
hq, hkv, d = 8, 2, 128
for n, causal in [(n, c) for n in sizes for c in (False, True)]:
    q = torch.randn(1, hq, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, hkv, n, d, device="cuda", dtype=torch.bfloat16).repeat_interleave(hq // hkv, 1).requires_grad_()
    v = torch.randn_like(k).requires_grad_()
    do = torch.randn_like(q)
    from torch.nn.attention import sdpa_kernel, SDPBackend
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        for w in range(2): F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(do)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); a.record()
        for i in range(iters): o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        b.record(); torch.cuda.synchronize(); fwd = a.elapsed_time(b) / iters
        a.record()
        for i in range(iters): F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(do)
        b.record(); torch.cuda.synchronize(); both = a.elapsed_time(b) / iters
    fl = 4.0 * n * n * hq * d / (2 if causal else 1)
    tag = "_causal" if causal else ""
    print(f"sdpa_fwd{tag} n={n} ms={fwd:.4f} tflops={fl / fwd / 1e9:.1f}")
    print(f"sdpa_bwd{tag} n={n} ms={both - fwd:.4f} tflops={2.5 * fl / (both - fwd) / 1e9:.1f}")
PY
sdpa_rc=NOT-RUN
if want sdpa; then
  run timeout 90 "$py" "$out/sdpa.py" "$sizes" "$iters" | tee "$out/sdpa.txt" >/dev/null
  sdpa_rc=${PIPESTATUS[0]}
  [ $dry = 1 ] && sdpa_rc=DRY
fi

# ---- 3. check_cuda (kernels + the schedule through --transport local), then measured traces ----
# check_cuda's LOONG_BIN is the pack's absolute path on the build machine:
# make that path lead to this copy's pack when the trees differ.
packdir=$(sed -n 's/^packed-at: //p' build-devpack/PACKED 2>/dev/null)
check_rc=NOT-RUN
: > "$out/local.txt"
if [ -x build-devpack/loong ] && [ -n "$packdir" ]; then
  if [ $dry = 0 ] && [ "$packdir" != "$here/build-devpack" ] && [ ! -e "$packdir" ]; then
    mkdir -p "$(dirname "$packdir")" && ln -s "$here/build-devpack" "$packdir"
  fi
  nccl_lib=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null)
  export LD_LIBRARY_PATH="$here/build-devpack/lib:/usr/local/cuda/lib64:${nccl_lib:-}:${LD_LIBRARY_PATH:-}"
  if want check; then
    CK_VERBOSITY=verbose CK_DEFAULT_TIMEOUT=120 run timeout 150 build-devpack/tests/check_cuda > "$out/check_cuda.txt"
    check_rc=$?
    [ $dry = 1 ] && check_rc=DRY
  fi
  # measured traces for calibrate and compare (no --check: timing only)
  mkdir -p "$out/traces"
  want traces && while read -r name args; do
    case "$name" in ''|'#'*) continue ;; esac
    [ -z "$only" ] || [[ ",$only," == *",$name,"* ]] || continue
    if [ "$(left)" -lt 40 ]; then echo "TIME $name" >> "$out/local.txt"; continue; fi
    # shellcheck disable=SC2086
    if run timeout 90 build-devpack/loong exec --device cuda --transport local $args --iters 3 --warmup 1 \
        --trace "$out/traces/$name.json" > "$out/one.txt"; then
      echo "ok $name $(grep -m1 -i 'step\|iteration' "$out/one.txt" | head -c 100)" >> "$out/local.txt"
    else
      echo "FAIL $name" >> "$out/local.txt"
    fi
    [ $dry = 1 ] || cat "$out/one.txt" >> "$log"
  done < tests/device/traces.txt
  [ $dry = 1 ] || (cd "$out" && tar czf traces.tgz traces && rm -rf traces one.txt)
else
  say "# part 3 NOT RUN: build-devpack/loong missing (run tests/device/run.sh --pack on a build machine and carry its files)"
  echo "NOT-RUN (no carried loong)" > "$out/local.txt"
fi

# ---- the table ----
val() { awk -v k="$1" -v n="n=$2" '$1==k && $2==n {for(i=1;i<=NF;i++) if($i ~ /^tflops=/){sub("tflops=","",$i); print $i}}' "$3" 2>/dev/null; }
echo
echo "# ================= loong CUDA device: summary ($(($(date +%s) - t_start)) s) ================="
cnt() { local c; c=$(grep -c "$1" "$2" 2>/dev/null); echo "${c:-0}"; }
echo "# kernel validation vs float64 (bf16 tol 1e-2): $(cnt ' OK$' "$out/lab.txt") OK, $(cnt 'NOT OK' "$out/lab.txt") NOT OK (lab exit $lab_rc)"
printf "# %-13s %12s %12s %8s %12s %12s %8s\n" n fwd_TFLOP/s sdpa_fwd ratio bwd_TFLOP/s sdpa_bwd ratio
for tag in "" _causal; do
  for n in ${sizes//,/ }; do
    f=$(val "attn_fwd$tag" "$n" "$out/lab.txt"); b=$(val "attn_bwd$tag" "$n" "$out/lab.txt")
    sf=$(awk -v k="sdpa_fwd$tag" -v n="n=$n" '$1==k && $2==n {sub("tflops=","",$4); print $4}' "$out/sdpa.txt" 2>/dev/null)
    sb=$(awk -v k="sdpa_bwd$tag" -v n="n=$n" '$1==k && $2==n {sub("tflops=","",$4); print $4}' "$out/sdpa.txt" 2>/dev/null)
    rf=$(awk -v a="${f:-0}" -v b="${sf:-0}" 'BEGIN{print (b>0)? sprintf("%.2f", a/b) : "-"}')
    rb=$(awk -v a="${b:-0}" -v b="${sb:-0}" 'BEGIN{print (b>0)? sprintf("%.2f", a/b) : "-"}')
    printf "  %-13s %12s %12s %8s %12s %12s %8s\n" "$n${tag:+ causal}" "${f:--}" "${sf:--}" "$rf" "${b:--}" "${sb:--}" "$rb"
  done
done
echo "# (attention: hq=8 hkv=2 d=128, full and causal blocks (causal FLOPs: half); bf16 dense peak 989 TFLOP/s; sdpa exit $sdpa_rc)"
grep '^gemm_\|^copy_' "$out/lab.txt" 2>/dev/null | sed 's/^/  /'
echo "# check_cuda (kernels vs float64, --transport local --check): exit $check_rc"
grep -E '^[0-9]+%|:F:|:E:' "$out/check_cuda.txt" 2>/dev/null | sed 's/^/  /'
echo "# measured traces (tests/device/traces.txt):"
sed 's/^/  /' "$out/local.txt"

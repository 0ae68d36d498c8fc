#!/usr/bin/env bash
# One call on an H100/H200 for dot's warpgroup (wgmma, sm_90a) path: build (scripts/gpu-session.sh
# "build"), the cuda kernel suite with the path on (the default) and its GEMMs again with it off
# (METILE_CUDA_WGMMA=0), the SASS of one wgmma GEMM kernel (HGMMA), then bench/gemm_vs_cublas.py
# for f16/bf16 at 4096^3 and 8192^3 with the path on and off, each against cuBLAS and Triton.
#   bench/gemm_wgmma_run.sh OUTDIR [DEBS_DIR] [SASS_SOURCE.cu]
# MB: a build folder holding libmetile.so and tests/metile_unit built elsewhere (SKIP_BUILD=1
# then skips the build); SKIP_OFF=1 skips the suite GEMMs with the path off.
# SASS_SOURCE is CUDA C++ the emitter wrote for a wgmma GEMM (the same text NVRTC compiles); nvcc
# builds it for sm_90a there and cuobjdump lists its matrix instructions.
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
sass=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
mb=${MB:-/tmp/mb}
mkdir -p "$out"
if [ -z "${SKIP_BUILD:-}" ]; then
  bash "$here/scripts/gpu-session.sh" "$out/session" "$debs" build > /dev/null 2>&1
  tail -3 "$out/session/build.log"
fi
export METILE_CACHE_DIR=/tmp/metile-cache PYTHONUNBUFFERED=1
$mb/tests/metile_unit --gtest_filter="${SUITE:-*cuda_*:CudaRuntime*}" --gtest_brief=1 > "$out/tests_wgmma.log" 2>&1
echo "suite, wgmma on: rc=$? $(grep -cE '^\[  FAILED  \] ' "$out/tests_wgmma.log") failed"
grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/tests_wgmma.log" | head -20
if [ -z "${SKIP_OFF:-}" ]; then
  METILE_CUDA_WGMMA=0 $mb/tests/metile_unit --gtest_filter='*cuda_gemm*' --gtest_brief=1 > "$out/tests_mma.log" 2>&1
  echo "suite GEMMs, wgmma off: rc=$? $(grep -E '^\[  PASSED' "$out/tests_mma.log")"
fi
if [ -n "$sass" ]; then
  nvcc -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/wg.cubin "$sass" 2>&1 |
    grep -E 'registers|spill' | tee "$out/ptxas.txt"
  cuobjdump -sass /tmp/wg.cubin > "$out/sass.txt" 2>&1
  echo "SASS: $(grep -c HGMMA "$out/sass.txt") HGMMA, $(grep -c 'HMMA' "$out/sass.txt") HMMA"
  grep -m3 HGMMA "$out/sass.txt"
fi
# CONFIGS1 / CONFIGS0: indices into gemm_vs_cublas.py's CONFIGS tried with the path on / off.
for mode in 1 0; do
  configs=${CONFIGS1:-0,1,2,4,5}
  [ $mode = 0 ] && configs=${CONFIGS0:-4}
  METILE_CUDA_WGMMA=$mode METILE_LIBRARY=$mb/libmetile.so python3 "$here/bench/gemm_vs_cublas.py" \
    --dtypes f16,bf16 --shapes 4096x4096x4096,8192x8192x8192 --configs $configs \
    --out "$out/gemm_wgmma$mode.json" > "$out/bench_wgmma$mode.log" 2>&1
  echo "=== METILE_CUDA_WGMMA=$mode"
  grep -E '^(dtype|f16|bf16)|WRONG|skip' "$out/bench_wgmma$mode.log"
done

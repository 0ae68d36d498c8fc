#!/usr/bin/env bash
# One call on an H100/H200 for TMA in checked programs (issue 19): build, the TMA and cuda GEMM
# unit cases, the bounds tests and the Python GEMM tests on cuda (checked: TMA engaged), then
# bench/gemm_tma_checked.py (checked vs unchecked=True vs cuBLAS, f16/bf16, issue 19's shapes)
# and bench/gemm_vs_cublas.py (checked, with Triton) on the large shapes.
#   bench/gemm_tma_checked_run.sh OUTDIR [DEBS_DIR]
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build, summary
mb=${MB:-/tmp/mb_tma}
mkdir -p "$out"
use_debs "$debs"
t0=$SECONDS
release_build "$here" $mb metile metile_unit > "$out/build.log" 2>&1
echo "build rc=$? $((SECONDS - t0))s"; tail -1 "$out/build.log"
export METILE_LIBRARY=$mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache-tma PYTHONUNBUFFERED=1
timeout 90 $mb/tests/metile_unit --gtest_filter='*cuda_*:CudaRuntime*:GpuTma*:TmaMap*' --gtest_brief=1 > "$out/unit.log" 2>&1
summary "unit cuda + TMA" $? "$out/unit.log"
grep -E '^\[  FAILED' "$out/unit.log" | head -10
(cd "$here" && timeout 100 python3 -m pytest bindings/python/tests -q -p no:cacheprovider \
  -k "cuda and (gemm or matmul or dot or bounds)" > "$out/py.log" 2>&1)
summary "pytest cuda gemm/bounds" $? "$out/py.log"
grep -E '^FAILED' "$out/py.log" | head -10
timeout "${BENCH_S:-110}" python3 "$here/bench/gemm_tma_checked.py" --out "$out/checked.json" > "$out/checked.log" 2>&1
echo "bench checked/unchecked rc=$? $((SECONDS - t0))s"
grep -vE '^\{' "$out/checked.log" | tail -13
timeout "${TRITON_S:-80}" python3 "$here/bench/gemm_vs_cublas.py" --dtypes f16,bf16 \
  --shapes 4096x4096x4096,8192x8192x8192 --configs 6 --out "$out/triton.json" > "$out/triton.log" 2>&1
echo "bench vs Triton rc=$? $((SECONDS - t0))s"
grep -vE '^\{' "$out/triton.log" | tail -6

#!/usr/bin/env bash
# One call on an H100/H200 for persistent tiles (issue 19, lower_persistent.cpp): build, the
# cuda and TMA unit cases with the kernel suite's GEMMs (the *_persistent ones among them) on
# cuda vs interp and float64, the persistent suite cases again with METILE_GPU_OFF=persistent,
# the Python cuda GEMM tests, then bench/gemm_persistent.py: the grid GEMM vs the persistent
# GEMM (piece on; then off, in a second process) vs cuBLAS vs Triton at issue 19's shapes.
#   bench/gemm_persistent_run.sh OUTDIR [DEBS_DIR]
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build, summary
mb=${MB:-/tmp/mb}
mkdir -p "$out"
use_debs "$debs"
t0=$SECONDS
release_build "$here" $mb metile metile_unit > "$out/build.log" 2>&1
echo "build rc=$? $((SECONDS - t0))s"; tail -1 "$out/build.log"
export METILE_LIBRARY=$mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache-pers PYTHONUNBUFFERED=1
timeout 70 $mb/tests/metile_unit --gtest_filter='*cuda_gemm*:GpuTma*:TmaMap*:GpuPersistent*' \
  --gtest_brief=1 > "$out/unit.log" 2>&1
summary "unit cuda gemm suite + TMA + persistent" $? "$out/unit.log"
grep -E '^\[  FAILED' "$out/unit.log" | head -10
METILE_GPU_OFF=persistent timeout 30 $mb/tests/metile_unit --gtest_filter='*cuda_gemm*persistent*' \
  --gtest_brief=1 > "$out/unit_off.log" 2>&1
summary "suite persistent, piece off" $? "$out/unit_off.log"
if [ -n "${PYTEST:-}" ]; then
  (cd "$here" && timeout 100 python3 -m pytest bindings/python/tests -q -p no:cacheprovider \
    -k "cuda and (gemm or matmul or dot or bounds)" > "$out/py.log" 2>&1)
  summary "pytest cuda gemm/bounds" $? "$out/py.log"
fi
B="python3 $here/bench/gemm_persistent.py"
show() { grep -v "^{" "$1" | cut -c1-150; }
timeout 110 $B --dtype f16 --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x8192x16384 \
  --configs "128,256,64,256" --triton --out "$out/f16.json" > "$out/f16.log" 2>&1
echo "f16 rc=$? $((SECONDS - t0))s"; show "$out/f16.log"
METILE_GPU_OFF=persistent timeout 40 $B --dtype f16 --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 \
  --configs "128,256,64,256" --variants persistent --out "$out/f16_off.json" > "$out/f16_off.log" 2>&1
echo "f16 piece off rc=$? $((SECONDS - t0))s"; show "$out/f16_off.log"
timeout 60 $B --dtype bf16 --shapes 4096x4096x4096,8192x8192x8192 --configs "128,256,64,256" --triton \
  --out "$out/bf16.json" > "$out/bf16.log" 2>&1
echo "bf16 rc=$? $((SECONDS - t0))s"; show "$out/bf16.log"
timeout 30 $B --dtype f16 --shapes 128x8192x8192 --configs "64,128,64,128" --out "$out/m128.json" \
  > "$out/m128.log" 2>&1
echo "m128 rc=$? $((SECONDS - t0))s"; show "$out/m128.log"

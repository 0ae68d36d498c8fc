#!/usr/bin/env bash
# One device call for the tf32 wgmma work (issue 19): build (scripts/gpu-session.sh), the cuda
# kernel-suite GEMMs touching wgmma or tf32 against float64 and interp, test_wgmma_tf32.py on
# cuda, then bench/gemm_tf32.py (NT wgmma / NN mma.sync / cuBLAS / Triton) and the NT GEMM with
# METILE_CUDA_WGMMA=0 (mma.sync). Run from the repository root:  bash bench/gemm_tf32_run.sh OUT DEBS
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
bash scripts/gpu-session.sh "$out/s1" "$debs" "build"
export METILE_LIBRARY=/tmp/mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache PYTHONUNBUFFERED=1
timeout 150 /tmp/mb/tests/metile_unit --gtest_filter='*cuda_gemm_*wg*:*cuda_gemm_tf32*:*Tf32*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$? $(grep -E 'PASSED|FAILED' "$out/unit.log" | tr '\n' ' ')"
timeout 100 python3 -m pytest bindings/python/tests/test_wgmma_tf32.py -q -p no:cacheprovider -k cuda > "$out/pytest.log" 2>&1
echo "pytest rc=$? $(tail -1 "$out/pytest.log")"
timeout 240 python3 bench/gemm_tf32.py --out "$out/gemm_tf32.json" > "$out/bench.log" 2>&1
echo "bench rc=$?"
METILE_CUDA_WGMMA=0 timeout 80 python3 bench/gemm_tf32.py --shapes 4096x4096x4096,8192x8192x8192 --modes nt --no-peers \
  --out "$out/gemm_tf32_nowgmma.json" > "$out/bench_nowgmma.log" 2>&1
echo "bench (METILE_CUDA_WGMMA=0) rc=$?"
grep -E "FAILED|Failure" "$out/unit.log" | head -20
grep -E "WRONG|skip|Error" "$out/bench.log" | head -10
sed -n '/^mode/,$p' "$out/bench.log"
sed -n '/^mode/,$p' "$out/bench_nowgmma.log"

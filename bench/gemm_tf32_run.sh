#!/usr/bin/env bash
# One device call for the tf32 wgmma work (issue 19): build (scripts/gpu-session.sh),
# test_wgmma_tf32.py, test_gemm_options.py and test_split_k.py on cuda, bench/gemm_tf32.py (NT wgmma / NN mma.sync / cuBLAS / Triton), the
# cuda kernel-suite tf32 and f16/bf16 wgmma GEMMs against float64 and interp, then both layouts
# at 4096^3 with METILE_CUDA_WGMMA=0 (mma.sync). Each step has its own time limit; logs land in OUT.
# Run from the repository root:  bash bench/gemm_tf32_run.sh OUT DEBS  (SKIP_OFF=1: no mma.sync run;
# BENCH_MODES=nn: one layout)
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
bash scripts/gpu-session.sh "$out/s1" "$debs" "build" | tail -3
export METILE_LIBRARY=/tmp/mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache PYTHONUNBUFFERED=1
timeout 120 python3 -m pytest bindings/python/tests/test_wgmma_tf32.py bindings/python/tests/test_gemm_options.py \
  bindings/python/tests/test_split_k.py -q -p no:cacheprovider -k cuda > "$out/pytest.log" 2>&1
echo "pytest rc=$? $(tail -1 "$out/pytest.log")"
timeout 150 python3 bench/gemm_tf32.py --modes "${BENCH_MODES:-nt,nn}" --out "$out/gemm_tf32.json" > "$out/bench.log" 2>&1
echo "bench rc=$?"
timeout 80 /tmp/mb/tests/metile_unit --gtest_filter='*cuda_gemm_tf32*:*cuda_gemm_f16_wg*:*cuda_gemm_bf16_wg*' --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$? $(grep -E 'PASSED|FAILED' "$out/unit.log" | tr '\n' ' ')"
[ -n "${SKIP_OFF:-}" ] || METILE_CUDA_WGMMA=0 timeout 40 python3 bench/gemm_tf32.py --shapes 4096x4096x4096 --modes nt,nn \
  --no-peers --out "$out/gemm_tf32_nowgmma.json" > "$out/bench_nowgmma.log" 2>&1
echo "bench (METILE_CUDA_WGMMA=0) rc=$?"
grep -E "FAILED|Failure" "$out/unit.log" | head -10
grep -E "FAILED|Error" "$out/pytest.log" | head -10
grep -E "WRONG|skip|Error" "$out/bench.log" | head -10
sed -n '/^mode/,$p' "$out/bench.log"
grep '^{' "$out/bench.log" | cut -c1-200 | tail -12
[ -f "$out/bench_nowgmma.log" ] && sed -n '/^mode/,$p' "$out/bench_nowgmma.log"

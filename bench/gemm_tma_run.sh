#!/usr/bin/env bash
# One call on an H100/H200 for the TMA copies of the wgmma path (lower_tma.cpp): build, the cuda kernel suite and the TMA unit cases with TMA on (the
# default), the suite's GEMMs with METILE_GPU_OFF=tma, the Python GEMM tests on cuda with TMA on, bench/gemm_vs_cublas.py for f16/bf16 at issue 19's shapes (cuBLAS and Triton in the
# same process), ncu's tensor-pipe utilisation of one GEMM launch, then the Python GEMM tests
# with TMA off.
#   bench/gemm_tma_run.sh OUTDIR [DEBS_DIR]
# CONFIGS: indices into gemm_vs_cublas.py's CONFIGS (default 3,6,9); NCU_CONFIG / NCU_N / NCU_DTYPE:
# the launch ncu profiles (default 128,256,64,256 at 8192, f16).
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build, summary
mb=${MB:-/tmp/mb_tma}  # its own build folder: a warm machine may hold another tree's /tmp/mb
mkdir -p "$out"
use_debs "$debs"
release_build "$here" $mb metile metile_unit > "$out/build.log" 2>&1
echo "build rc=$?"; tail -1 "$out/build.log"
export METILE_LIBRARY=$mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache-tma PYTHONUNBUFFERED=1
$mb/tests/metile_unit --gtest_filter='*cuda_*:CudaRuntime*:GpuTma*:TmaMap*' --gtest_brief=1 > "$out/unit_tma.log" 2>&1
summary "unit, TMA on" $? "$out/unit_tma.log"
grep -E '^\[  FAILED' "$out/unit_tma.log" | head -10
METILE_GPU_OFF=tma $mb/tests/metile_unit --gtest_filter='*cuda_gemm*' --gtest_brief=1 > "$out/unit_notma.log" 2>&1
summary "unit GEMMs, TMA off" $? "$out/unit_notma.log"
(cd "$here" && timeout 100 python3 -m pytest bindings/python/tests -q -p no:cacheprovider -k "cuda and (gemm or matmul or dot)" > "$out/py_tma.log" 2>&1)
summary "pytest gemm cuda, TMA on" $? "$out/py_tma.log"
grep -E '^FAILED' "$out/py_tma.log" | head -10
timeout "${BENCH_S:-200}" python3 "$here/bench/gemm_vs_cublas.py" --dtypes f16,bf16 \
  --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x8192x16384,128x8192x8192 \
  --configs "${CONFIGS:-3,6,9}" --out "$out/bench.json" > "$out/bench.log" 2>&1
echo "bench rc=$?"
grep -vE '^\{' "$out/bench.log" | tail -14
# The same process's peers with TMA off (cp.async staging), for the on/off ratio.
METILE_GPU_OFF=tma timeout 90 python3 "$here/bench/gemm_vs_cublas.py" --dtypes f16 \
  --shapes 4096x4096x4096,8192x8192x8192 --configs 3,6 --out "$out/bench_notma.json" > "$out/bench_notma.log" 2>&1
echo "bench, TMA off: rc=$?"
grep -vE '^\{' "$out/bench_notma.log" | tail -3
# The tensor-pipe metrics this ncu knows for the chip (their names differ between versions).
mets=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
for m in $(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' | grep -iE '^sm__(pipe_tensor_op_hmma_cycles_active|inst_executed_pipe_tensor_op_gmma)$'); do
  case $m in *cycles_active*) mets="$mets,$m.avg.pct_of_peak_sustained_active" ;; *) mets="$mets,$m.sum" ;; esac
done
echo "ncu metrics: $mets"
timeout 60 ncu --clock-control none -k regex:gemm --launch-skip 1 -c 1 --metrics "$mets" \
  python3 "$here/bench/gemm_profile.py" --dtype "${NCU_DTYPE:-f16}" --n "${NCU_N:-8192}" --config "${NCU_CONFIG:-128,256,64,256}" \
  > "$out/ncu.txt" 2>&1
echo "ncu rc=$?"
grep -E 'gmma|hmma|duration|throughput|Error|ERR' "$out/ncu.txt" | head -16
(cd "$here" && METILE_GPU_OFF=tma timeout 100 python3 -m pytest bindings/python/tests -q -p no:cacheprovider -k "cuda and (gemm or matmul or dot)" > "$out/py_notma.log" 2>&1)
summary "pytest gemm cuda, TMA off" $? "$out/py_notma.log"

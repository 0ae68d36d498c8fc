#!/usr/bin/env bash
# One device call for specialize-warps (opt-in, METILE_GPU_ON): the cuda GEMM, FP8 GEMM and
# attention tests with the pass on (attention and persistent GEMMs stay unspecialized; they
# check that nothing else moved), then bench/gemm_ab.py alternating the pass off and on in one
# library, on the 128x128 and the one-block-a-multiprocessor 128x256 / 256x128 configurations.
# A kernel that deadlocks has no cancel points (warpgroup MMAs), hence the timeouts.
#   bench/specialize_warps_run.sh OUTDIR LIB
set -uo pipefail
out=${1:?output directory}
lib=${2:?libmetile.so of this tree}
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1 METILE_LIBRARY=$lib
mkdir -p "$out"
METILE_GPU_ON=specialize-warps timeout 300 python3 -m pytest -q -p no:cacheprovider \
  "$here"/bindings/python/tests/{test_gemm_options,test_kernels,test_fp8_gemm,test_attention}.py \
  -k cuda > "$out/pytest.log" 2>&1
echo "pytest rc=$? $(tail -1 "$out/pytest.log") ${SECONDS}s"
grep -E "FAILED|Error" "$out/pytest.log" | head -5
timeout 600 python3 "$here/bench/gemm_ab.py" --variant off="$lib": --variant ws="$lib"::specialize-warps \
  ${CASES:---case f16:4096:3 --case f16:4096:6 --case f16:8192:6 --case f16:8192:17 --case f16:4096:4} \
  --rounds 2 --out "$out/ws.json" 2>&1 | tee "$out/ws.log"
echo "ab ${SECONDS}s"

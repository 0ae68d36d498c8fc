#!/usr/bin/env bash
# One device call: the predicated aligned-body copies (this tree) against the branch around
# them (BEFORE, a library built one commit earlier): the cuda GEMM/dot tests on this tree's
# library (ragged tiles take the per-chunk path), then bench/gemm_ab.py alternating the two
# libraries (mma.sync, METILE_CUDA_WGMMA=0).
#   bench/gemm_pred_run.sh OUTDIR AFTER_LIB BEFORE_LIB
set -uo pipefail
out=${1:?output directory}
after=${2:?library of this tree}
before=${3:?library before}
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$out"
METILE_LIBRARY=$after timeout 80 python3 -m pytest -q -p no:cacheprovider \
  "$here/bindings/python/tests/test_gemm_options.py" "$here/bindings/python/tests/test_kernels.py" \
  -k 'cuda and (gemm or dot or matmul)' > "$out/pytest.log" 2>&1
echo "pytest rc=$? $(tail -1 "$out/pytest.log") ${SECONDS}s"
grep -E "FAILED|Error" "$out/pytest.log" | head -5
METILE_CUDA_WGMMA=0 timeout 80 python3 "$here/bench/gemm_ab.py" --variant branch="$before": --variant predicated="$after": \
  ${CASES:---case f16:4096:2 --case f16:4096:4 --case f16:8192:7 --case tf32:4096:5} --rounds 2 --out "$out/pred.json" 2>&1 | tee "$out/pred.log"
echo "ab ${SECONDS}s"

#!/usr/bin/env bash
# The GEMV GPU session in one call (issue 33): builds libmetile from this tree, runs
# bench/gemv.py's default run (metile vs cuBLAS vs copy), a config sweep on f16 at three shapes
# (SWEEP_SHAPES), and the cuda tests of test_gemv.py. Everything lands in OUTDIR.
#   bash bench/gemv_run.sh OUTDIR [DEBS_DIR]
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build
mkdir -p "$out"
use_debs "$debs"
export METILE_CACHE_DIR=/tmp/metile-cache
t0=$SECONDS
release_build "$here" /tmp/mb metile > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build: $((SECONDS - t0)) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export METILE_LIBRARY=/tmp/mb/libmetile.so
cd "$here"
t0=$SECONDS
python3 bench/gemv.py --out "$out/gemv.jsonl" > "$out/gemv.log" 2>&1
echo "== default run ($((SECONDS - t0)) s)"; sed -n '/whole run/,$p' "$out/gemv.log"
t0=$SECONDS
python3 bench/gemv.py --sweep --dtypes f16 --m 1,16 --shapes "${SWEEP_SHAPES:-4096x4096,16384x16384,4096x14336}" \
  --out "$out/gemv_sweep.jsonl" > "$out/gemv_sweep.log" 2>&1
echo "== sweep ($((SECONDS - t0)) s)"; sed -n '/whole run/,$p' "$out/gemv_sweep.log"
t0=$SECONDS
python3 -m pytest -q -p no:cacheprovider -k cuda bindings/python/tests/test_gemv.py \
  > "$out/pytest.log" 2>&1
echo "pytest ($((SECONDS - t0)) s): $(tail -1 "$out/pytest.log")"
grep -E "^FAILED|Error" "$out/pytest.log" | head -10

#!/usr/bin/env bash
# The row kernels' GPU session in one call (bench/results/cuda_rows_h100.md): builds libmetile
# twice, BEFORE from BEFORE_SRC (default: none) and this tree, runs bench/cuda_rows.py for each
# build, the cuda tests of the row kernels (pytest -k cuda on TEST_FILES), the exp error bench
# (EXP_ERROR=0 skips it) and Nsight Compute on the seed softmax at PROFILE shapes ("ROWSxCOLS ...").
#   bash bench/cuda_rows_run.sh OUTDIR DEBS_DIR [BEFORE_SRC]
set -uo pipefail
out=${1:?output directory}
debs=${2:?debs directory}
before=${3:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build
mkdir -p "$out"
use_debs "$debs"
export METILE_CACHE_DIR=/tmp/metile-cache
build() { release_build "$1" "$2" metile; }  # src dir
t0=$SECONDS
[ -n "$before" ] && { build "$before" /tmp/mb0 > "$out/build0.log" 2>&1 & }
build "$here" /tmp/mb > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
wait
echo "builds: $((SECONDS - t0)) s"; tail -1 "$out/build.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export METILE_LIBRARY=/tmp/mb/libmetile.so
cd "$here"
# The benches first (the numbers this call is for), then the tests, the exp error and ncu.
args="--fused-only --no-keep --only ${KERNELS:-seed_softmax,layernorm,rmsnorm}"
if [ -n "$before" ]; then
  METILE_LIBRARY=/tmp/mb0/libmetile.so python3 bench/cuda_rows.py $args --out "$out/before.json" \
    > "$out/bench_before.log" 2>&1
  echo "== before"; tail -16 "$out/bench_before.log"
fi
python3 bench/cuda_rows.py $args --out "$out/after.json" > "$out/bench_after.log" 2>&1
echo "== after"; tail -16 "$out/bench_after.log"
t0=$SECONDS
python3 -m pytest -q -p no:cacheprovider -k cuda ${TEST_FILES:-} > "$out/pytest.log" 2>&1
echo "pytest ($((SECONDS - t0)) s): $(tail -1 "$out/pytest.log")"
grep -E "^FAILED|Error" "$out/pytest.log" | head -10
[ "${EXP_ERROR:-1}" = 1 ] && python3 bench/cuda_exp_error.py 2>&1 | tail -5
for p in ${PROFILE:-}; do
  r=${p%x*}; c=${p#*x}
  ncu --clock-control none -k regex:seed_softmax --launch-skip 1 -c 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section InstructionStats \
    --section Occupancy --section LaunchStats --section WarpStateStats \
    python3 bench/cuda_rows_profile.py seed_softmax "$r" "$c" > "$out/ncu_$p.txt" 2>&1
  echo "== ncu seed_softmax $p"
  grep -E 'Duration|DRAM Throughput|L2 Hit|Executed Instructions  |Registers Per|Achieved Occupancy|Warp Cycles Per Issued' \
    "$out/ncu_$p.txt" | sed 's/  */ /g' | head -12
done

#!/usr/bin/env bash
# Everything the GPU machine is needed for, in one call: build, the cuda tests, then the benches
# against torch and Triton. Run from the repository root on a machine with an NVIDIA GPU:
#
#   bash scripts/gpu-session.sh OUTDIR [DEBS_DIR] [STEPS]
#
# DEBS_DIR holds Debian .deb files (libffi-dev, zlib1g-dev, libgtest-dev, libbenchmark-dev) for
# an image without those headers; bench/lib.sh (use_debs) unpacks them, never over /.
# STEPS (default "build tests pytest torch bench") picks the steps; the build stays in /tmp/mb,
# so a second call on the same machine can run "bench" alone. Each step runs even after another
# failed; every log lands in OUTDIR and the last lines are a summary table.
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
steps=${3:-build tests pytest torch bench}
. "$(dirname "$0")/../bench/lib.sh"  # here, use_debs, release_build
mb=/tmp/mb
mkdir -p "$out"
export METILE_LIBRARY=$mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache PYTHONUNBUFFERED=1
summary=()

run_step() {  # name timeout command...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  timeout "$limit" bash -c "$1" > "$out/$name.log" 2>&1
  rc=$?
  summary+=("$(printf '%-8s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" \
    "$(grep -E 'passed|failed|PASSED|FAILED' "$out/$name.log" | tail -1 | cut -c1-90)")")
}

step_build() {
  use_debs "$debs"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  deps_prefix+=(-DMETILE_BUILD_BENCH=ON)
  release_build "$here" $mb metile metile_unit metile_capi_test
}

step_tests() {
  local rc=0
  $mb/tests/metile_unit --gtest_filter='*cuda*:*Cuda*:*CUDA*:*Nvrtc*' --gtest_brief=1 || rc=1
  $mb/tests/capi/metile_capi_test --gtest_brief=1 || rc=1
  return $rc
}

step_pytest() {
  python3 -m pytest "$here/bindings/python/tests" -q -p no:cacheprovider -k cuda -x --maxfail=20
}

step_torch() { python3 -m pytest "$here/tests/gpu" -q -p no:cacheprovider; }

step_bench() {
  local rc=0
  for b in ${BENCHES:-cuda_vs_triton.py bounds_cost.py gemm_vs_cublas.py}; do
    [ -f "$here/bench/$b" ] || continue
    echo "=== $b"
    local extra=()
    [ "$b" = bounds_cost.py ] && extra=(--device cuda --markdown)
    timeout 300 python3 "$here/bench/$b" "${extra[@]}" 2>&1 | tee "$out/bench_${b%.py}.log" | grep -v '^{' || rc=1
  done
  return $rc
}

export out debs here mb
export -f use_debs release_build step_build step_tests step_pytest step_torch step_bench
for s in $steps; do
  case $s in
    build) run_step build 400 step_build ;;
    tests) run_step tests 300 step_tests ;;
    pytest) run_step pytest 300 step_pytest ;;
    torch) run_step torch 120 step_torch ;;
    bench) run_step bench 560 step_bench ;;
  esac
done
echo
for s in $steps; do [ -f "$out/$s.log" ] && { echo "--- $s (tail)"; tail -15 "$out/$s.log"; }; done
echo
printf '%s\n' "${summary[@]}"

#!/usr/bin/env bash
# One call on a CUDA machine: build with every core, run the cuda cases of the unit suite (the
# kernel suite on the cuda device, NVRTC compiles; SKIP_TESTS=1 skips them), then
# bench/gemm_vs_cublas.py (BENCH_ARGS: its extra arguments).
#   bench/gemm_gpu_run.sh OUTDIR [DEBS_DIR]
# DEBS_DIR holds googletest/benchmark .deb files for an image without them; they are unpacked
# by bench/lib.sh (use_debs) and found through CMAKE_PREFIX_PATH.
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build
use_debs "$debs"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
cmake -S "$here" -B /tmp/mb -G Ninja -DCMAKE_BUILD_TYPE=Release "${deps_prefix[@]}" > "$out/cmake.log" 2>&1 ||
  { tail -30 "$out/cmake.log"; exit 1; }
targets="metile_unit metile"
[ -n "${SKIP_TESTS:-}" ] && targets=metile  # the bench alone
ninja -C /tmp/mb -j"$(nproc)" $targets > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
[ -z "${SKIP_TESTS:-}" ] && /tmp/mb/tests/metile_unit --gtest_filter='Devices/KernelSuite.*/cuda_*:Suite/CudaCodegen.*:Cuda*' \
  > "$out/tests.log" 2>&1
echo "tests exit $?"
[ -z "${SKIP_TESTS:-}" ] && grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]' "$out/tests.log" | head -40
METILE_LIBRARY=/tmp/mb/libmetile.so PYTHONUNBUFFERED=1 python3 "$here/bench/gemm_vs_cublas.py" \
  --out "$out/gemm.json" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | grep -v '^{'
if [ -n "${PROBE_DLPACK:-}" ]; then  # the same shapes on torch's device memory (DLPack)
  METILE_LIBRARY=/tmp/mb/libmetile.so PYTHONUNBUFFERED=1 python3 "$here/bench/gemm_vs_cublas.py" \
    --out "$out/gemm_dlpack.json" --memory dlpack ${BENCH_ARGS:-} 2>&1 | tee "$out/bench_dlpack.log" | grep -v '^{'
fi
if [ -n "${PROFILE:-}" ]; then  # one launch under Nsight Compute
  METILE_LIBRARY=/tmp/mb/libmetile.so ncu --clock-control none -k regex:gemm -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    --section WarpStateStats python3 "$here/bench/gemm_profile.py" > "$out/ncu.txt" 2>&1
  grep -vE '^\s*$|^==PROF==' "$out/ncu.txt" | cut -c1-110 | tail -80
fi

#!/usr/bin/env bash
# One device call for the before/after tables of bench/results/gemm_h100.md: a Release build
# (scripts/gpu-session.sh), the cuda GEMM tests on it, a second library built from the same tree
# with the CUDA prelude of commit BEFORE_PRELUDE (the asm mt_smem_addr), then bench/gemm_ab.py over
#   after  = this tree;  counter_off = this tree with METILE_GPU_OFF=stage_counter;
#   before = the old prelude with stage_counter off (the code before both changes),
# then one Nsight Compute pass per library (executed SASS opcode mix, bench/gemm_sass_mix.py).
#   bench/gemm_ab_run.sh OUTDIR DEBS_DIR [BEFORE_PRELUDE_FILE]
set -uo pipefail
out=${1:?output directory}
debs=${2:?debs}
old=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
mb=/tmp/mb
export METILE_CUDA_WGMMA=0 PYTHONUNBUFFERED=1
t0=$SECONDS
bash "$here/scripts/gpu-session.sh" "$out/s1" "$debs" build | tail -3
mkdir -p /tmp/after && cp $mb/libmetile.so /tmp/after/
echo "build ${SECONDS}s"
timeout 150 $mb/tests/metile_unit --gtest_filter='Devices/KernelSuite.*/cuda_*gemm*:Devices/KernelSuite.*/cuda_*att*:Devices/KernelSuite.*/cuda_*dot*:Devices/KernelSuite.*/cuda_*matmul*:GpuGemm*:GpuWgmma*:GpuTma*' \
  --gtest_brief=1 > "$out/unit.log" 2>&1
echo "unit rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$out/unit.log" | tr '\n' ' ') ${SECONDS}s"
grep -E 'FAILED  \]' "$out/unit.log" | head
METILE_LIBRARY=/tmp/after/libmetile.so timeout 150 python3 -m pytest -q -p no:cacheprovider \
  "$here/bindings/python/tests/test_gemm_options.py" "$here/bindings/python/tests/test_kernels.py" -k 'cuda and (gemm or dot or matmul or attention)' \
  > "$out/pytest.log" 2>&1
echo "pytest rc=$? $(tail -1 "$out/pytest.log") ${SECONDS}s"
variants=(--variant after=/tmp/after/libmetile.so: --variant counter_off=/tmp/after/libmetile.so:stage_counter)
if [ -n "$old" ]; then
  prelude="$here/src/codegen/cuda/prelude/cuda_prelude.h"
  cp "$prelude" /tmp/new_prelude.h && cp "$old" "$prelude"
  ninja -C $mb metile > "$out/build_before.log" 2>&1 && mkdir -p /tmp/before && cp $mb/libmetile.so /tmp/before/
  cp /tmp/new_prelude.h "$prelude"
  variants+=(--variant before=/tmp/before/libmetile.so:stage_counter)
  echo "before build ${SECONDS}s"
fi
timeout 200 python3 "$here/bench/gemm_ab.py" "${variants[@]}" --case f16:4096:2 --case f16:8192:7 --case tf32:4096:4 \
  --rounds 2 --out "$out/ab.json" 2>&1 | tee "$out/ab.log"
echo "ab ${SECONDS}s"
for v in after ${old:+before}; do
  off=""; [ "$v" = before ] && off=stage_counter
  METILE_LIBRARY=/tmp/$v/libmetile.so METILE_GPU_OFF=$off METILE_CACHE_DIR=/tmp/ncu-$v timeout 90 \
    ncu --clock-control none -k regex:gemm --launch-skip 1 -c 1 --section SourceCounters --section SpeedOfLight \
    --import-source yes -f -o /tmp/prof_$v python3 "$here/bench/gemm_profile.py" --dtype f16 --n 4096 \
    --config 128,128,32,256 > "$out/ncu_$v.log" 2>&1
  ncu --import /tmp/prof_$v.ncu-rep --page source --print-source sass --csv > /tmp/sass_$v.csv 2>&1
  ncu --import /tmp/prof_$v.ncu-rep --page details > "$out/ncu_details_$v.txt" 2>&1
  echo "== $v"; python3 "$here/bench/gemm_sass_mix.py" --ncu /tmp/sass_$v.csv | head -16
  grep -E 'Duration|Compute \(SM\) Throughput' "$out/ncu_details_$v.txt" | head -3
done
echo "total ${SECONDS}s"

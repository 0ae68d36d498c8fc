#!/usr/bin/env bash
# One device call: where the mma.sync GEMM's warps wait. Nsight Compute (clocks not locked) on
# f16 4096^3 for each CONFIG (BLOCK_M,BLOCK_N,BLOCK_K,threads of bench/gemm_profile.py):
# SpeedOfLight, WarpStateStats, SourceCounters, the stall reasons per issued instruction, the
# SM clock and the tensor pipe's activity; then the executed SASS mix and the stall samples by
# opcode with the most stalled instructions (bench/gemm_sass_mix.py --stalls).
#   bench/gemm_stalls_run.sh OUTDIR LIB [CONFIG ...]
set -uo pipefail
out=${1:?output directory}
lib=${2:?libmetile.so}
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
metrics='regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active'
for cfg in "${@:-128,256,32,256}"; do
  tag=${cfg//,/x}
  METILE_LIBRARY=$lib METILE_CUDA_WGMMA=0 METILE_CACHE_DIR=/tmp/ncu-$tag timeout 90 \
    ncu --clock-control none -k regex:gemm --launch-skip 1 -c 1 --section SourceCounters --section SpeedOfLight \
    --section WarpStateStats --metrics "$metrics" --import-source yes -f -o /tmp/prof_$tag \
    python3 "$here/bench/gemm_profile.py" --dtype f16 --n 4096 --config "$cfg" > "$out/ncu_$tag.log" 2>&1
  ncu --import /tmp/prof_$tag.ncu-rep --page source --print-source sass --csv > /tmp/sass_$tag.csv 2>&1
  ncu --import /tmp/prof_$tag.ncu-rep --page details > "$out/details_$tag.txt" 2>&1
  { echo "== $cfg"
    grep -E 'Duration|L2 Cache Throughput|Compute \(SM\) Throughput|Warp Cycles Per Issued|per_second|hmma|issue_active' "$out/details_$tag.txt" | head -12
    grep -E 'issue_stalled' "$out/details_$tag.txt" | awk '{print $1, $NF}' | sort -k2 -rn | head -10
    python3 "$here/bench/gemm_sass_mix.py" --ncu /tmp/sass_$tag.csv --stalls 24; } >> "$out/stalls.txt" 2>&1
done
cat "$out/stalls.txt"

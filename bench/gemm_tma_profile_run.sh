#!/usr/bin/env bash
# One call on an H100/H200: build, ncu's tensor-pipe utilisation of the checked TMA GEMM
# (bench/gemm_profile.py, 128x256x64 at 256 threads, f16, at 8192 and 4096), then
# bench/gemm_tma_sweep.py on the shapes that fall short.
#   bench/gemm_tma_profile_run.sh OUTDIR [DEBS_DIR]
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build, summary
mb=${MB:-/tmp/mb_tma}
mkdir -p "$out"
use_debs "$debs"
t0=$SECONDS
release_build "$here" $mb metile \
  > "$out/build.log" 2>&1
echo "build rc=$? $((SECONDS - t0))s"
export METILE_LIBRARY=$mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache-tma PYTHONUNBUFFERED=1
mets=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
for m in $(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}' |
  grep -iE '^sm__(pipe_tensor_op_hmma_cycles_active|pipe_tensor_op_gmma_cycles_active|inst_executed_pipe_tensor_op_gmma)$'); do
  case $m in *cycles_active*) mets="$mets,$m.avg.pct_of_peak_sustained_active" ;; *) mets="$mets,$m.sum" ;; esac
done
echo "ncu metrics: $mets"
for n in 8192 4096; do
  timeout 60 ncu --clock-control none -k regex:gemm --launch-skip 1 -c 1 --metrics "$mets" \
    python3 "$here/bench/gemm_profile.py" --dtype f16 --n $n --config 128,256,64,256 > "$out/ncu_$n.txt" 2>&1
  echo "ncu $n rc=$? $((SECONDS - t0))s"
  grep -E 'gmma|hmma|duration|throughput|rror' "$out/ncu_$n.txt" | head -8
done
timeout "${SWEEP_S:-120}" python3 "$here/bench/gemm_tma_sweep.py" --out "$out/sweep.json" > "$out/sweep.log" 2>&1
echo "sweep rc=$? $((SECONDS - t0))s"
cat "$out/sweep.log" | cut -c1-150

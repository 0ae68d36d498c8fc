#!/usr/bin/env bash
# One device call for bench/results/gemm_h100.md's "ceiling and larger tiles" section:
#   1. bench/mma_sync_peak.cu: register-only mma.sync peak (f16/bf16 m16n8k16, tf32 m16n8k8)
#      and cuBLAS (cublasGemmEx) at 4096^3 / 8192^3 in the same process;
#   2. METILE_CUDA_WGMMA=0 bench/gemm_ab.py over CASES (mma.sync; 128x128 against the larger
#      programs of gemm_vs_cublas.py's CONFIGS 4, 5, 6, 17-19), each checked against float64;
#   3. Nsight Compute (SpeedOfLight + SourceCounters, clocks not locked) of f16 4096^3 at
#      128x128x32 and 128x256x32 on 256 threads, summed by opcode (bench/gemm_sass_mix.py).
#
#   bench/gemm_tiles_run.sh OUTDIR DEBS_DIR [LIB] [PEAK_BINARY]
#
# LIB / PEAK_BINARY: a libmetile.so and an mma_sync_peak binary built elsewhere (x86-64); each is
# built here (scripts/gpu-session.sh, nvcc) when missing or when it does not load.
set -uo pipefail
out=${1:?output directory}
debs=${2:?debs}
lib=${3:-}
peak=${4:-}
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [ -z "$peak" ] || ldd "$peak" | grep -q 'not found'; then
  nvcc -O3 -gencode arch=compute_90,code=sm_90 "$here/bench/mma_sync_peak.cu" -lcublas -o /tmp/mma_sync_peak
  peak=/tmp/mma_sync_peak
fi
timeout 60 "$peak" > "$out/peak.txt" 2>&1
echo "peak rc=$? ${SECONDS}s"
if [ -z "$lib" ] || ! python3 -c "import ctypes,sys; ctypes.CDLL(sys.argv[1])" "$lib"; then
  bash "$here/scripts/gpu-session.sh" "$out/s1" "$debs" build | tail -2
  lib=/tmp/mb/libmetile.so
  echo "built ${SECONDS}s"
fi
CASES=${CASES:---case f16:4096:2 --case f16:4096:4 --case f16:4096:5 --case f16:4096:6 --case f16:4096:17 \
  --case f16:4096:18 --case f16:4096:19 --case f16:8192:7 --case f16:8192:4 --case f16:8192:5 \
  --case tf32:4096:4 --case tf32:4096:5 --case tf32:8192:4}
# shellcheck disable=SC2086
METILE_CUDA_WGMMA=0 timeout 150 python3 "$here/bench/gemm_ab.py" --variant mma="$lib": $CASES \
  --rounds "${ROUNDS:-1}" --out "$out/tiles.json" > "$out/tiles.log" 2>&1
echo "ab rc=$? ${SECONDS}s"
for cfg in 128,128,32,256 128,256,32,256; do
  tag=${cfg//,/x}
  METILE_LIBRARY=$lib METILE_CUDA_WGMMA=0 METILE_CACHE_DIR=/tmp/ncu-$tag timeout 60 \
    ncu --clock-control none -k regex:gemm --launch-skip 1 -c 1 --section SourceCounters --section SpeedOfLight \
    --import-source yes -f -o /tmp/prof_$tag python3 "$here/bench/gemm_profile.py" --dtype f16 --n 4096 \
    --config $cfg > /tmp/ncu_$tag.log 2>&1
  ncu --import /tmp/prof_$tag.ncu-rep --page source --print-source sass --csv > /tmp/sass_$tag.csv 2>&1
  ncu --import /tmp/prof_$tag.ncu-rep --page details > /tmp/details_$tag.txt 2>&1
  { echo "== $cfg"; python3 "$here/bench/gemm_sass_mix.py" --ncu /tmp/sass_$tag.csv | head -14
    grep -E 'Duration|Throughput|Registers' /tmp/details_$tag.txt | head -8; } >> "$out/ncu.txt" 2>&1
done
echo "ncu ${SECONDS}s"
echo; cat "$out/peak.txt"
echo; tail -16 "$out/tiles.log"
echo; cat "$out/ncu.txt"

#!/usr/bin/env bash
# One GEMM kernel under Nsight Compute on a CUDA machine, with its SASS: the findings behind
# bench/results/gemm_h100.md. Run after a build of libmetile.so (METILE_LIBRARY):
#   bench/gemm_ncu.sh OUTDIR [DTYPE N CONFIG]      (defaults: f16 4096 128,128,32,256)
# Writes OUTDIR/ncu_details.txt (every section of --set full), OUTDIR/ncu_sass.txt (the source
# page: SASS with per-instruction stall samples), OUTDIR/sass.txt (cuobjdump of the cubin the
# device built) and prints the lines that say the most.
set -uo pipefail
out=${1:?output directory}
dt=${2:-f16}
n=${3:-4096}
cfg=${4:-128,128,32,256}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export METILE_DEBUG=cuda METILE_DEBUG_DIR="$out/src" PYTHONUNBUFFERED=1
mkdir -p "$out/src"
ncu --clock-control none -k regex:gemm --launch-skip 1 -c 1 --set full --import-source yes \
  -f -o "$out/prof" python3 "$here/bench/gemm_profile.py" --dtype "$dt" --n "$n" --config "$cfg" \
  > "$out/ncu_run.log" 2>&1 || { tail -20 "$out/ncu_run.log"; exit 1; }
unset METILE_DEBUG
ncu --import "$out/prof.ncu-rep" --page details > "$out/ncu_details.txt" 2>&1
ncu --import "$out/prof.ncu-rep" --page source --print-source sass --csv > "$out/ncu_sass.csv" 2>&1
ncu --import "$out/prof.ncu-rep" --page raw --csv > "$out/ncu_raw.csv" 2>&1
# The same source through nvcc for the disassembly (NVRTC's cubin is not kept on disk).
src=$(ls "$out"/src/*.cuda.txt | head -1)
cp "$src" /tmp/gemm_k.cu
nvcc -cubin -arch=sm_90 -std=c++17 -Xptxas -v -o /tmp/gemm_k.cubin /tmp/gemm_k.cu > "$out/ptxas.txt" 2>&1
cuobjdump -sass /tmp/gemm_k.cubin > "$out/sass.txt" 2>&1
grep -E 'registers|spill' "$out/ptxas.txt"
grep -cE 'HMMA' "$out/sass.txt" | sed 's/^/HMMA in SASS: /'
grep -cE 'LDSM' "$out/sass.txt" | sed 's/^/LDSM in SASS: /'
grep -cE 'LDGSTS' "$out/sass.txt" | sed 's/^/LDGSTS in SASS: /'
grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Ipc|Executed Ipc|No Eligible|Active Warps Per|Eligible Warps|Bank|bank|Stall|stall' \
  "$out/ncu_details.txt" | cut -c1-150 | head -60
# Stall reasons (cycles per issued instruction, by reason), largest first.
python3 - "$out/ncu_raw.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
names, units, vals = rows[head], rows[head + 1], rows[head + 2]
pick = [(n, v) for n, v in zip(names, vals)
        if n.startswith("smsp__average_warps_issue_stalled_") and n.endswith("_per_issue_active.ratio")]
def num(v):
    try: return float(v.replace(",", ""))
    except ValueError: return 0.0
for n, v in sorted(pick, key=lambda x: -num(x[1]))[:12]:
    print("stall %-40s %s" % (n[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")], v))
for n, v in zip(names, vals):
    if "bank_conflict" in n or n.startswith("sm__pipe_tensor") or n.startswith("sm__inst_executed_pipe_tensor") \
       or n in ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "smsp__issue_active.avg.pct_of_peak_sustained_active"):
        print("metric %-70s %s" % (n, v))
PY

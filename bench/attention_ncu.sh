#!/usr/bin/env bash
# One flash attention launch under Nsight Compute, with its CUDA text, ptxas resources and SASS:
# the findings behind bench/results/attention_h100.md. Run after a build (METILE_LIBRARY):
#   bench/attention_ncu.sh OUTDIR [SEQ CONFIG [--causal]]   (defaults: 4096 128,64,256)
# Writes OUTDIR/ncu_details.txt (--set full), ncu_raw.csv, ptxas.txt, the CUDA text under src/,
# and prints duration, occupancy, stall reasons, local/shared traffic and the SASS mix.
set -uo pipefail
out=${1:?output directory}
seq=${2:-4096}
cfg=${3:-128,64,256}
causal=${4:-}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/src"
export METILE_DEBUG=cuda METILE_DEBUG_DIR="$out/src" PYTHONUNBUFFERED=1
ncu --clock-control none -k regex:flash --launch-skip 2 -c 1 --set full --import-source yes \
  -f -o "$out/prof" python3 "$here/bench/attention_profile.py" --seq "$seq" --config "$cfg" $causal \
  > "$out/ncu_run.log" 2>&1 || { tail -20 "$out/ncu_run.log"; exit 1; }
unset METILE_DEBUG
grep "max error" "$out/ncu_run.log"
ncu --import "$out/prof.ncu-rep" --page details > "$out/ncu_details.txt" 2>&1
ncu --import "$out/prof.ncu-rep" --page raw --csv > "$out/ncu_raw.csv" 2>&1
ncu --import "$out/prof.ncu-rep" --page source --print-source sass --csv > "$out/ncu_sass.csv" 2>&1
src=$(ls "$out"/src/*flash*.cuda.txt | head -1)
cp "$src" /tmp/flash_k.cu
nvcc -cubin -arch=sm_90 -std=c++17 -Xptxas -v -o /tmp/flash_k.cubin /tmp/flash_k.cu > "$out/ptxas.txt" 2>&1
grep -E 'registers|spill' "$out/ptxas.txt"
grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Ipc|No Eligible|Eligible Warps|Executed Instructions  ' \
  "$out/ncu_details.txt" | cut -c1-120 | head -30
python3 - "$out/ncu_raw.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
names, vals = rows[head], rows[head + 2]
def num(v):
    try: return float(v.replace(",", ""))
    except ValueError: return 0.0
pick = [(n, v) for n, v in zip(names, vals)
        if n.startswith("smsp__average_warps_issue_stalled_") and n.endswith("_per_issue_active.ratio")]
for n, v in sorted(pick, key=lambda x: -num(x[1]))[:10]:
    print("stall %-28s %s" % (n[len("smsp__average_warps_issue_stalled_"):-len("_per_issue_active.ratio")], v))
for n, v in zip(names, vals):
    if any(s in n for s in ("bank_conflict", "pipe_tensor_op_hmma_cycles_active.avg.pct", "inst_executed_op_local",
                            "lsu_mem_local", "inst_executed_op_shared", "inst_executed_op_global_ld.sum",
                            "sm__warps_active.avg.pct")) and "per_second" not in n:
        print("metric %-64s %s" % (n[:64], v))
PY
python3 "$here/bench/gemm_sass_mix.py" --ncu "$out/ncu_sass.csv" 2>&1 | head -24

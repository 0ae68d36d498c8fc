#!/usr/bin/env bash
# One call on an H100/H200 (issue 19): where the 4096^3 wgmma/TMA GEMM loses time. Build, ncu
# (speed of light, warp stall reasons, tensor pipe) of the 128x256x64 grid kernel and its
# persistent form (bench/gemm_persistent.py), then timings: grid vs persistent vs cuBLAS at
# 2048/4096/8192, and a K sweep at M=N=4096 (time over K: the intercept is the per-tile cost
# outside the K loop).
#   bench/gemm_hopper_probe_run.sh OUTDIR [DEBS_DIR]
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build, summary
mb=${MB:-/tmp/mb}
mkdir -p "$out"
use_debs "$debs"
t0=$SECONDS
release_build "$here" $mb metile \
  > "$out/build.log" 2>&1
echo "build rc=$? $((SECONDS - t0))s"
export METILE_LIBRARY=$mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache-probe PYTHONUNBUFFERED=1
timeout 120 ncu --clock-control none -k regex:gemm -c 4 --section SpeedOfLight --section WarpStateStats \
  --section LaunchStats --section Occupancy \
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio \
  python3 "$here/bench/gemm_persistent.py" --profile --shapes 4096x4096x4096 --configs "128,256,64,256" \
  > "$out/ncu.txt" 2>&1
echo "ncu rc=$? $((SECONDS - t0))s"
python3 - "$out/ncu.txt" <<'PY'
import re, sys
blocks = re.split(r"\n  (?=gemm)", open(sys.argv[1]).read())
for b in blocks[1:]:
    name = b.split("(")[0].strip()
    vals = {}
    for line in b.splitlines():
        m = re.match(r"\s+(\S[\w.%/ ()-]*?)\s{2,}(\S+)?\s+([\d.,]+)$", line)
        if m: vals[m.group(1).strip()] = m.group(3)
    keep = [k for k in vals if any(s in k for s in ("Duration", "tensor_op", "Compute (SM) Throughput",
            "Memory Throughput", "Registers Per Thread", "Achieved Occupancy", "Warp Cycles Per Issued"))]
    stalls = sorted(((float(v.replace(",", "")), k) for k, v in vals.items() if "issue_stalled" in k), reverse=True)[:7]
    print("==", name, "; ".join("%s=%s" % (k, vals[k]) for k in keep))
    print("   stalls/issue:", ", ".join("%s %.2f" % (k.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""), v) for v, k in stalls))
PY
timeout 150 python3 "$here/bench/gemm_persistent.py" --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192 \
  --configs "128,256,64,256;128,256,64,256,4" --out "$out/persistent.json" > "$out/persistent.log" 2>&1
echo "persistent rc=$? $((SECONDS - t0))s"; cat "$out/persistent.log" | cut -c1-160
timeout 80 python3 "$here/bench/gemm_persistent.py" --ksweep --configs "128,256,64,256" --out "$out/ksweep.json" \
  > "$out/ksweep.log" 2>&1
echo "ksweep rc=$? $((SECONDS - t0))s"; cat "$out/ksweep.log" | cut -c1-160

#!/usr/bin/env bash
# Everything the attention work needs from the GPU machine, in one call (issue 20): a Release
# build, the attention tests on cuda, an A/B of the lowering pieces by METILE_GPU_OFF (each in
# its own process: the launcher keeps compiled kernels), the bench against torch and Triton,
# then one launch under Nsight Compute. Run from the repository root:
#   bash bench/attention_run.sh OUTDIR [DEBS_DIR] [CONFIGS]
# CONFIGS ("BM,BN,THREADS;..."), default 128,64,256: the configurations timed. Logs in OUTDIR.
set -uo pipefail
out=${1:?output directory}
debs=${2:-}
configs=${3:-128,64,256}
. "$(dirname "$0")/lib.sh"  # here, use_debs, release_build, summary
mb=/tmp/mb
mkdir -p "$out"
export METILE_LIBRARY=$mb/libmetile.so METILE_CACHE_DIR=/tmp/metile-cache PYTHONUNBUFFERED=1
use_debs "$debs"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$SECONDS
release_build "$here" $mb metile \
  > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
echo "build $((SECONDS - t0)) s"
t0=$SECONDS
timeout 150 python3 -m pytest "$here/bindings/python/tests/test_attention.py" -q -p no:cacheprovider -k cuda \
  > "$out/pytest.log" 2>&1
echo "pytest test_attention -k cuda: $(tail -1 "$out/pytest.log") ($((SECONDS - t0)) s)"
cd "$here/bench"
for off in "kmajor_b,early_copy" "early_copy" ""; do
  METILE_GPU_OFF=$off timeout 90 python3 attention_regs.py --seqs 1024,4096,16384 --configs "$configs" \
    --label "off=$off" >> "$out/ab.jsonl" 2> "$out/ab_err.log" || tail -5 "$out/ab_err.log"
done
python3 - "$out/ab.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
keys = sorted({(r["seq"], r["causal"], tuple(r["config"])) for r in rows})
offs = []
for r in rows:
    if r["gpu_off"] not in offs: offs.append(r["gpu_off"])
print("TFLOP/s by METILE_GPU_OFF:", " | ".join(o or "(none)" for o in offs))
for k in keys:
    v = {r["gpu_off"]: r for r in rows if (r["seq"], r["causal"], tuple(r["config"])) == k}
    print("seq %5d %-6s %-14s" % (k[0], "causal" if k[1] else "", k[2]),
          " ".join("%7.1f (%d regs, err %.0e)" % (v[o]["tflops"], v[o]["registers"], v[o]["max_err"]) if o in v else "      -" for o in offs))
PY
timeout 200 python3 attention_gpu.py --only flash --configs "$configs" --out "$out/attention_h100.json" \
  > "$out/bench.log" 2>&1
tail -9 "$out/bench.log"
cd "$here"
timeout 60 bash bench/attention_ncu.sh "$out/ncu" 4096 128,64,256 > "$out/ncu.log" 2>&1
rm -f "$out/ncu/prof.ncu-rep" "$out/ncu/ncu_sass.csv"
head -40 "$out/ncu.log"
# At most 8 files come back: keep the tables, the logs that say why, the profile and its source.
rm -f "$out/build.log" "$out/ncu/ncu_raw.csv" "$out/ncu/ncu_run.log" "$out/ncu/ptxas.txt"
[ -s "$out/ab_err.log" ] || rm -f "$out/ab_err.log"

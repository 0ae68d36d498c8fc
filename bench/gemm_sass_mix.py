"""The instruction mix of a GEMM kernel, by SASS opcode: what bench/results/gemm_h100.md's
"integer address math" lines are counted from.

    python3 bench/gemm_sass_mix.py --ncu OUTDIR/ncu_sass.csv   # executed (bench/gemm_ncu.sh's source page)
    python3 bench/gemm_sass_mix.py --sass FILE.sass            # static: the K loop of cuobjdump -sass
    python3 bench/gemm_sass_mix.py --ncu CSV --stalls 20        # + stall samples by opcode, top lines

--ncu sums each instruction's executed count (warp-level) by opcode; --sass counts the
instructions between the backward branch with the most HMMA and its target (the K loop,
its untaken fallback blocks included, so only a rough guide). Integer address math is the
integer ALU opcodes below; the table prints each opcode's share.
"""

import argparse
import csv
import re
from collections import Counter

INTEGER = {"IMAD", "IADD3", "LEA", "SHF", "LOP3", "ISETP", "IMNMX", "SEL", "IABS", "IADD", "PRMT",
           "SGXT", "BMSK", "I2F", "F2I", "POPC", "FLO", "UIMAD", "UIADD3", "ULEA", "USHF", "ULOP3",
           "UISETP", "USEL", "UMOV", "MOV", "S2R", "S2UR", "P2R", "R2P", "PLOP3", "CS2R", "R2UR"}


def opcode(text):
    t = text.strip().rstrip(";")
    t = re.sub(r"^@!?U?P\w+\s+", "", t)  # predicate guard
    return t.split()[0].split(".")[0] if t else ""


def from_ncu(path):
    rows = list(csv.reader(open(path)))
    head = next(i for i, r in enumerate(rows) if "Source" in r)
    names = rows[head]
    src = names.index("Source")
    cand = [i for i, n in enumerate(names) if n in ("Warp Instructions Executed", "Instructions Executed")]
    if not cand:
        raise SystemExit("no executed-instructions column in %s: %s" % (path, names))
    col = cand[0]
    mix = Counter()
    for r in rows[head + 1:]:
        if len(r) <= max(src, col):
            continue
        try:
            n = float(r[col].replace(",", ""))
        except ValueError:
            continue
        mix[opcode(r[src])] += n
    return mix


def stalls(path, top):
    """Warp stall samples (ncu's per-instruction sampling) summed by opcode, and the `top`
    instructions with the most samples with their neighbours' opcodes (where a stall comes from)."""
    rows = list(csv.reader(open(path)))
    head = next(i for i, r in enumerate(rows) if "Source" in r)
    names = rows[head]
    src = names.index("Source")
    cols = [i for i, n in enumerate(names) if n.startswith("Warp Stall Sampling (All")]
    if not cols:
        print("no stall-sampling column:", names)
        return
    col = cols[0]
    body = []
    for r in rows[head + 1:]:
        if len(r) <= max(src, col):
            continue
        try:
            body.append((r[src].strip(), float(r[col].replace(",", "") or 0)))
        except ValueError:
            continue
    total = sum(n for _, n in body) or 1.0
    by_op = Counter()
    for text, n in body:
        by_op[opcode(text)] += n
    print("stall samples by opcode (%s): " % names[col] +
          ", ".join("%s %.1f%%" % (k, 100 * v / total) for k, v in by_op.most_common(12)))
    order = sorted(range(len(body)), key=lambda i: -body[i][1])[:top]
    for i in sorted(order):
        before = " ".join(opcode(t) for t, _ in body[max(0, i - 3):i])
        print("  %5.1f%%  #%-5d %-60s  after: %s" % (100 * body[i][1] / total, i, body[i][0][:60], before))


def from_sass(path):
    lines, labels, pending = [], {}, []
    for line in open(path):
        lab = re.match(r"\s*(\.L_x_\d+):", line)
        if lab:
            pending.append(lab.group(1))
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            lines.append((addr, m.group(2)))
    best = None
    for addr, text in lines:
        m = re.search(r"\bBRA\s+(?:`\((\.L_x_\d+)\)|0x([0-9a-f]+))", text)
        if not m:
            continue
        target = labels.get(m.group(1), -1) if m.group(1) else int(m.group(2), 16)
        if target < 0 or target >= addr:
            continue
        body = [t for a, t in lines if target <= a <= addr]
        hmma = sum(opcode(t) == "HMMA" for t in body)
        if hmma and (best is None or hmma > best[0]):
            best = (hmma, body)
    if best is None:
        raise SystemExit("no loop with HMMA in " + path)
    return Counter(opcode(t) for t in best[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu")
    ap.add_argument("--sass")
    ap.add_argument("--label", default="")
    ap.add_argument("--stalls", type=int, default=0, help="with --ncu: the N most stalled instructions")
    args = ap.parse_args()
    mix = from_ncu(args.ncu) if args.ncu else from_sass(args.sass)
    total = sum(mix.values())
    ints = sum(v for k, v in mix.items() if k in INTEGER)
    print("%s total %.0f, integer ALU %.1f%%, HMMA %.1f%%, LDSM %.1f%%, LDGSTS %.1f%%" % (
        args.label, total, 100 * ints / total, 100 * mix["HMMA"] / total, 100 * mix["LDSM"] / total,
        100 * mix["LDGSTS"] / total))
    print("  " + ", ".join("%s %.1f%%" % (k, 100 * v / total) for k, v in mix.most_common(12)))
    if args.stalls and args.ncu:
        stalls(args.ncu, args.stalls)


if __name__ == "__main__":
    main()

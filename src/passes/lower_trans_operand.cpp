// A transposed tile that only a dot reads is never transposed in registers.
//
// trans(x) in registers is an exchange through threadgroup memory (two barriers, lower_scan.cpp),
// and a dot then stages the result into its own threadgroup array anyway (lower_dot.cpp). When
// the dot is trans(x)'s only reader (flash attention's dot(q, trans(k))), staging can write x's
// element (i, j) straight to the place of the result's element (j, i): the same array contents,
// one pass and no barriers of its own. trans() records such a value as a view of x here and
// stage() reads the view.
//
// On CUDA's mma.sync the registers are skipped too: when x is a tile_load the dot could copy
// straight to threadgroup memory (assign_layouts.cpp, direct_copies), B = trans(x) is copied as
// x is laid out, n rows of k (DotChoice::b_kmajor), with cp.async like any direct operand. The
// m16n8k16 B fragment (k = 2t, 2t + 1 and +8 of column g) is then row g of x's 8 x 8 blocks,
// which ldmatrix without .trans hands each lane (cuda.cpp): the K tile never passes through
// registers as f32, and no 2-byte transposed stores conflict in the banks.
#include "passes/lower_internal.h"

namespace metile::lowering {

int Lowering::reads_of(ValueId tile_value) {
  if (read_counts.empty()) {
    read_counts.assign(p.values.size(), 0);
    walk(p.body, [&](const Op& o) {
      for (ValueId x : o.operands) ++read_counts[x];
    });
  }
  return read_counts[tile_value];
}

bool Lowering::only_a_dot_reads(ValueId tile_value) {
  if (reads_of(tile_value) != 1) return false;
  bool dot = false;
  walk(p.body, [&](const Op& o) {
    if (o.kind == OpKind::DOT && (o.operands[0] == tile_value || o.operands[1] == tile_value))
      dot = true;
  });
  return dot;
}

}  // namespace metile::lowering

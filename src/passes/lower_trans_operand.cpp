// A transposed tile that only a dot reads is never transposed in registers.
//
// trans(x) in registers is an exchange through threadgroup memory (two barriers, lower_scan.cpp),
// and a dot then stages the result into its own threadgroup array anyway (lower_dot.cpp). When
// the dot is trans(x)'s only reader (flash attention's dot(q, trans(k))), staging can write x's
// element (i, j) straight to the place of the result's element (j, i): the same array contents,
// one pass and no barriers of its own. trans() records such a value as a view of x here and
// stage() reads the view.
#include "passes/lower_internal.h"

namespace metile::lowering {

bool Lowering::only_a_dot_reads(ValueId tile_value) {
  if (read_counts.empty()) {
    read_counts.assign(p.values.size(), 0);
    walk(p.body, [&](const Op& o) {
      for (ValueId x : o.operands) ++read_counts[x];
    });
  }
  if (read_counts[tile_value] != 1) return false;
  bool dot = false;
  walk(p.body, [&](const Op& o) {
    if (o.kind == OpKind::DOT && (o.operands[0] == tile_value || o.operands[1] == tile_value))
      dot = true;
  });
  return dot;
}

}  // namespace metile::lowering

// dot_precision: every dot says how it rounds f32 inputs, or means its device's default.
// Needs: verified Tile IR. Guarantees: when the compile names a precision for dots without
// their own (metile_compile_options.dot_precision, or allow_tf32 as its alias), each such dot
// carries it as its input_precision attribute, so backends read one attribute; a dot's own
// attribute is never changed. Without a compile default nothing changes, and a dot without the
// attribute means f32 accuracy by the device's own means (docs/semantics.md, "dot precision").
#include "ir/dot_precision.h"
#include "ir/walk.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"

namespace metile {

void set_dot_precision(Program& program, const TilePassContext& ctx) {
  const DotPrecision fallback = ctx.options.dot_default();
  if (fallback == DotPrecision::device_default) return;
  walk_mut(program.body, [&](Op& op) {
    if (op.kind == OpKind::DOT && op.find_attr("input_precision") == nullptr)
      op.set_attr("input_precision", std::string(dot_precision_name(fallback)));
  });
}

}  // namespace metile

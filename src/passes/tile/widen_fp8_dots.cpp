// fp8_dots: a dot on FP8 operands computes in f16 on every device without an FP8 matrix unit.
// Needs: verified Tile IR. Guarantees: each f8e4m3 or f8e5m2 operand of a dot is replaced by its
// cast to f16, placed right in front of the dot, so no backend sees an FP8 dot. Exact: every
// E4M3 and E5M2 value, subnormals included, is an f16 value (f16 has 10 mantissa bits and
// exponents down to 2^-24; E5M2 reaches 2^-16, E4M3 2^-9), so the f16 dot's products — exact
// in f32, summed in f32 — are the FP8 dot's of docs/semantics.md. Mixed e4m3 x e5m2 dots become
// plain f16 dots. interp evaluates FP8 dots itself too: with the pass off it is the oracle the
// pass is checked against. A device whose GPU lowering takes FP8 dots itself (cuda:
// DeviceInfo::lowers_fp8_dots, src/passes/dot_choices.cpp) is left its FP8 dots: there the
// FP8 warpgroup atom computes them where it fits and the same exact f16 staging everywhere else.
#include "passes/tile/tile_emit.h"

namespace metile {

namespace {

void widen_fp8_operands(Program& p, Block& block) {
  std::vector<Op> out;
  out.reserve(block.ops.size());
  for (Op& op : block.ops) {
    for (Block& r : op.regions) widen_fp8_operands(p, r);
    if (op.kind == OpKind::DOT)
      for (size_t i = 0; i < 2; ++i) {
        const Type t = p.type(op.operands[i]);
        if (is_f8(t.dtype))
          op.operands[i] = append_op(p, out, OpKind::CAST, {op.operands[i]},
                                     Type::tile(DType::f16, t.shape), op.loc);
      }
    out.push_back(std::move(op));
  }
  block.ops = std::move(out);
}

}  // namespace

void widen_fp8_dots(Program& program, const TilePassContext& ctx) {
  if (ctx.lowers_fp8_dots) return;  // cuda: dot_choices.cpp
  widen_fp8_operands(program, program.body);
}

}  // namespace metile

// defer_reductions: a loop that adds a reduction of each iteration's tile into what it carries,
//
//   acc' = acc * s + reduce_sum(x, axis)      (or acc + reduce_sum(x, axis); s loop-carried or not)
//
// carries the unreduced tile instead and reduces once after the loop:
//
//   accT' = accT * s + x      (accT starts at zeros of x's shape)      acc = reduce_sum(accT, axis)
//
// Needs: verified Tile IR. Applies when the carried value starts at zero (a zero constant or its
// broadcast), s is a scalar, and the body reads the carried value only in that product (or sum)
// and the reduction's result only in that sum. Guarantees: the loop computes the same sums
// (acc_final = sum over iterations of x_i times the later scales, whichever way round it is
// added up), in a different order of floating-point additions; nothing else changes.
// Why, and only on GPUs: a reduction across a tile that spans warps is an exchange through
// threadgroup memory with two barriers; decode attention made four of its six barriers per
// K/V block this way (the softmax denominator and the output row). A host device adds in a loop
// either way, and the carried tile would cost it an array.
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "passes/tile/tile_emit.h"
#include "passes/tile/tile_pass.h"

namespace metile {

namespace {

struct Defer {
  Program& p;
  std::unordered_set<ValueId> zeros;  // zero constants and their broadcasts

  explicit Defer(Program& program) : p(program) {
    walk(p.body, [&](const Op& op) {
      if (op.results.size() != 1) return;
      if (op.kind == OpKind::BROADCAST && zeros.count(op.operands[0])) zeros.insert(op.result());
      if (op.kind != OpKind::CONST) return;
      const AttrValue* value = op.find_attr("value");
      const auto* i = std::get_if<int64_t>(value);
      const auto* d = std::get_if<double>(value);
      if ((i != nullptr && *i == 0) || (d != nullptr && *d == 0.0)) zeros.insert(op.result());
    });
  }

  // Rewrites carried value j of `loop` if it has the form above; ops for after the loop go to
  // `after`.
  void carried(Op& loop, size_t j, std::vector<Op>& before, std::vector<Op>& after) {
    Block& body = loop.regions[0];
    const ValueId arg = body.args[1 + j];
    const ValueId init = loop.operands[3 + j];
    Op& yield = body.ops.back();
    if (!zeros.count(init)) return;
    std::unordered_map<ValueId, size_t> at, uses;
    for (size_t k = 0; k < body.ops.size(); ++k)
      for (ValueId r : body.ops[k].results) at[r] = k;
    walk(body, [&](const Op& op) {
      for (ValueId v : op.operands) ++uses[v];
    });
    auto def = [&](ValueId v) -> Op* {
      auto it = at.find(v);
      return it == at.end() ? nullptr : &body.ops[it->second];
    };
    Op* sum = def(yield.operands[j]);
    if (sum == nullptr || sum->kind != OpKind::ADD || uses[sum->result()] != 1) return;
    for (int side : {0, 1}) {
      Op* red = def(sum->operands[side]);
      Op* scaled = def(sum->operands[1 - side]);
      if (red == nullptr || red->kind != OpKind::REDUCE_SUM || uses[red->result()] != 1) continue;
      ValueId scale = kNoValue;
      if (sum->operands[1 - side] != arg) {
        if (scaled == nullptr || scaled->kind != OpKind::MUL || uses[scaled->result()] != 1) continue;
        const int a = scaled->operands[0] == arg ? 0 : scaled->operands[1] == arg ? 1 : -1;
        if (a < 0 || !p.type(scaled->operands[1 - a]).is_scalar()) continue;
        scale = scaled->operands[1 - a];
      }
      if (uses[arg] != 1) return;  // read only by the product (or the sum)
      rewrite(loop, j, *red, *sum, scaled, scale, before, after);
      return;
    }
  }

  void rewrite(Op& loop, size_t j, Op& red, Op& sum, Op* scaled, ValueId scale,
               std::vector<Op>& before, std::vector<Op>& after) {
    Block& body = loop.regions[0];
    const ValueId x = red.operands[0];
    const Type tile = p.type(x);
    const Type scalar = Type::scalar(tile.dtype);
    const ValueId zero = append_op(p, before, OpKind::CONST, {}, scalar, loop.loc,
                                   {Attr{"value", is_float(tile.dtype) ? AttrValue{0.0} : AttrValue{int64_t{0}}}});
    loop.operands[3 + j] = append_op(p, before, OpKind::BROADCAST, {zero}, tile, loop.loc);
    zeros.insert(loop.operands[3 + j]);
    const ValueId arg = p.new_value(tile);
    body.args[1 + j] = arg;
    // In place: the product (if any) scales the tile, the sum adds x instead of its reduction.
    ValueId carried = arg;
    if (scaled != nullptr) {
      scaled->operands = {arg, scale};
      scaled->results[0] = carried = p.new_value(tile);
    }
    sum.operands = {carried, x};
    const ValueId next = sum.results[0] = p.new_value(tile);
    body.ops.back().operands[j] = next;
    // After the loop: the loop's result j is the tile; the old result id becomes its reduction.
    Op r;
    r.kind = OpKind::REDUCE_SUM;
    r.attrs = red.attrs;
    r.loc = red.loc;
    r.results = {loop.results[j]};
    loop.results[j] = p.new_value(tile);
    r.operands = {loop.results[j]};
    after.push_back(std::move(r));
    const ValueId reduced = red.result();  // `red` is not read below: erasing moves the ops
    std::erase_if(body.ops, [&](const Op& op) { return op.results.size() == 1 && op.result() == reduced; });
  }

  void block(Block& b) {
    std::vector<Op> out;
    out.reserve(b.ops.size());
    for (Op& op : b.ops) {
      for (Block& r : op.regions) block(r);  // inner loops first
      std::vector<Op> before, after;
      if (op.kind == OpKind::FOR)
        for (size_t j = 0; j < op.results.size(); ++j) carried(op, j, before, after);
      for (Op& o : before) out.push_back(std::move(o));
      out.push_back(std::move(op));
      for (Op& o : after) out.push_back(std::move(o));
    }
    b.ops = std::move(out);
  }
};

}  // namespace

void defer_loop_reductions(Program& program, const TilePassContext&) { Defer(program).block(program.body); }

}  // namespace metile

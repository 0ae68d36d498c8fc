// hoist: pure ops whose operands do not change inside a tile_range move in front of the loop.
// Needs: verified Tile IR. Guarantees:
//   - an op moves out of a loop body (innermost loops first, so an op can leave a whole nest)
//     when it is pure, every operand is defined outside the loop (or by an op that moved), and
//     running it once instead of once per iteration cannot change what the program does: ops
//     that can fault (integer div, floordiv and mod, shifts, integer pow: interp reports them
//     as device errors; not with a divisor positive_integers() finds), memory ops, SIMT ops
//     and regions stay, so a loop that runs no iteration still faults exactly when it did before;
//   - the moved ops keep their order and source locations; nothing else changes.
// Why here and not in the backends: a broadcast, reshape or transpose of a loop-invariant tile
// (decode attention's `k * q[None, :]`) is an exchange through threadgroup memory with barriers
// on GPUs, which no C compiler moves out of a loop.
#include <unordered_set>
#include <utility>
#include <vector>

#include "passes/tile/tile_pass.h"

namespace metile {

namespace {

// Hoists from every loop inside `block` (after their own inner loops), in place. `positive`:
// positive_integers(p), the divisors a division may be hoisted with.
void hoist_block(Program& p, Block& block, const std::unordered_set<ValueId>& positive);

// The body ops of `loop` that may run once before it, removed from the body in order.
std::vector<Op> take_invariants(Program& p, Op& loop, const std::unordered_set<ValueId>& positive) {
  Block& body = loop.regions[0];
  hoist_block(p, body, positive);
  std::unordered_set<ValueId> inside(body.args.begin(), body.args.end());
  std::vector<Op> moved, kept;
  for (Op& op : body.ops) {
    bool invariant = runs_anywhere(p, op, &positive);
    for (ValueId v : op.operands) invariant = invariant && !inside.count(v);
    if (invariant) {
      moved.push_back(std::move(op));
      continue;
    }
    for (ValueId r : op.results) inside.insert(r);
    kept.push_back(std::move(op));
  }
  body.ops = std::move(kept);
  return moved;
}

void hoist_block(Program& p, Block& block, const std::unordered_set<ValueId>& positive) {
  std::vector<Op> out;
  out.reserve(block.ops.size());
  for (Op& op : block.ops) {
    if (op.kind == OpKind::FOR) {
      std::vector<Op> moved = take_invariants(p, op, positive);
      for (Op& m : moved) out.push_back(std::move(m));
    } else {
      for (Block& region : op.regions) hoist_block(p, region, positive);
    }
    out.push_back(std::move(op));
  }
  block.ops = std::move(out);
}

}  // namespace

void hoist_loop_invariants(Program& program, const TilePassContext&) {
  hoist_block(program, program.body, positive_integers(program));
}

}  // namespace metile

// carried_offsets: a scalar a tile_range loop carries only to keep it, or to add the same constant
// to it each iteration (a block pointer's offsets: `p = advance(p, (0, BLOCK_K))`), is read in
// the body as the loop index gives it: `init` when it never changes, `init + iv * (c / step)`
// for a loop from 0 whose constant step divides the constant c.
// Needs: verified Tile IR. Guarantees: every iteration reads the values it read before; the
// carried value, its update and the loop's results stay (uses after the loop are unchanged).
// Why: the pointer_tiles pass and GPU pipelining (async copies, TMA) read a tile's coordinates as
// functions of the loop index; a coordinate the loop carries is opaque to them.
#include <optional>
#include <unordered_map>

#include "ir/walk.h"
#include "passes/tile/tile_emit.h"
#include "passes/tile/tile_pass.h"

namespace metile {

namespace {

class Indexer {
 public:
  explicit Indexer(Program& p) : p_(p), def_(defining_ops(p.body)) {
    walk(p.body, [&](const Op& op) {
      if (op.kind == OpKind::CONST && p.type(op.result()).is_scalar())
        if (const auto* v = std::get_if<int64_t>(op.find_attr("value"))) consts_[op.result()] = *v;
    });
  }

  void run(Block& block) {
    for (Op& op : block.ops) {
      for (Block& r : op.regions) run(r);
      if (op.kind == OpKind::FOR) index(op);
    }
  }

 private:
  std::optional<int64_t> constant(ValueId v) const {
    auto it = consts_.find(v);
    return it == consts_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }

  void index(Op& loop) {
    Block& body = loop.regions[0];
    const ValueId iv = body.args[0], start = loop.operands[0], step = loop.operands[2];
    const Op& yield = body.ops.back();
    std::vector<Op> prologue;
    for (size_t i = 1; i < body.args.size(); ++i) {
      const ValueId arg = body.args[i], init = loop.operands[2 + i], next = yield.operands[i - 1];
      const Type t = p_.type(arg);
      if (!t.is_scalar() || t.is_ptr || !is_int(t.dtype)) continue;
      if (next == arg) {
        replace_uses(body, arg, init, nullptr);
        continue;
      }
      auto it = def_.find(next);
      if (it == def_.end() || it->second->kind != OpKind::ADD) continue;
      const Op& add = *it->second;
      const int s = add.operands[0] == arg ? 1 : add.operands[1] == arg ? 0 : -1;
      const std::optional<int64_t> c = s < 0 ? std::nullopt : constant(add.operands[s]);
      const std::optional<int64_t> first = constant(start), by = constant(step);
      if (!c || !first || !by || *first != 0 || *by <= 0 || *c % *by != 0 ||
          p_.type(iv).dtype != t.dtype)
        continue;
      const Type scalar = Type::scalar(t.dtype);
      const ValueId q =
          append_op(p_, prologue, OpKind::CONST, {}, scalar, add.loc, {Attr{"value", *c / *by}});
      const ValueId moved = append_op(p_, prologue, OpKind::MUL, {iv, q}, scalar, add.loc);
      const ValueId now = append_op(p_, prologue, OpKind::ADD, {init, moved}, scalar, add.loc);
      replace_uses(body, arg, now, &add);
    }
    body.ops.insert(body.ops.begin(), std::make_move_iterator(prologue.begin()),
                    std::make_move_iterator(prologue.end()));
  }

  // Every use of `from` in `block` (nested blocks included) reads `to`, except in `keep`.
  static void replace_uses(Block& block, ValueId from, ValueId to, const Op* keep) {
    walk_mut(block, [&](Op& op) {
      if (&op == keep) return;
      for (ValueId& v : op.operands)
        if (v == from) v = to;
    });
  }

  Program& p_;
  std::unordered_map<ValueId, int64_t> consts_;
  DefiningOps<Block> def_;
};

}  // namespace

void index_carried_offsets(Program& program, const TilePassContext&) {
  Indexer(program).run(program.body);
}

}  // namespace metile

// Run-time control flow in the GPU IR -> C-family walker: `if` and `while` (gpu_ir.h) as the
// dialect's `if` / `else` and `for (;;)`. Their conditions are uniform, so every thread of the
// group takes the same path and the blocks may hold barriers (lower_control.cpp).
#include "codegen/gpu_emit_internal.h"

namespace metile::emit_detail {

// The variables of values that flow out of an if's blocks or around a while, declared where
// they are first needed (uninitialized: every path assigns them before a read).
void Emitter::declare_vars(const std::vector<ValueId>& vs) {
  for (ValueId v : vs) {
    int64_t n = regs(v);
    w_.line(type_of(v) + " " + name_[v] + (n > 1 ? "[" + std::to_string(n) + "]" : "") + ";");
  }
}

// if (cond) { then; results = its yield } else { else; results = its yield }. The condition is
// uniform (gpu_ir.h), so every thread of the group takes the same branch.
void Emitter::branch(const gpu::Op& op) {
  declare_vars(op.results);
  w_.open("if (" + strip_parens(expr(op.operands[0], "0")) + ")");
  block(op.regions[0]);
  assign_all(op.results, op.regions[0].ops.back().operands);
  w_.close();
  w_.open("else");
  block(op.regions[1]);
  assign_all(op.results, op.regions[1].ops.back().operands);
  w_.close();
}

// The producers are the threads past the function's: the consumers keep the indices every
// layout was built for. The branch is uniform per warp (roles are whole warpgroups).
void Emitter::warp_roles(const gpu::Op& op) {
  w_.open("if (" + d_.builtin(gpu::Builtin::thread_index, 0) + " >= " + std::to_string(f_.threads) + ")");
  block(op.regions[0]);
  w_.close();
  w_.open("else");
  block(op.regions[1]);
  w_.close();
}

// for (;;) { before; passed = its values; if (!cond) break; after; carried = its yield }: the
// results are the passed variables after the loop. The condition is uniform, so every thread
// turns the same number of times.
void Emitter::while_loop(const gpu::Op& op) {
  const gpu::Block& before = op.regions[0];
  const gpu::Block& after = op.regions[1];
  for (size_t i = 0; i < op.results.size(); ++i) name_[op.results[i]] = name_[after.args[i]];
  declare_vars(before.args);
  declare_vars(after.args);
  assign_all(before.args, op.operands);
  w_.open("for (;;)");
  block(before);
  const gpu::Op& y = before.ops.back();
  const std::string cond = strip_parens(expr(y.operands[0], "0"));
  assign_all(after.args, std::vector<ValueId>(y.operands.begin() + 1, y.operands.end()));
  w_.line("if (!(" + cond + ")) break;");
  block(after);
  assign_all(before.args, after.ops.back().operands);
  w_.close();
}

}  // namespace metile::emit_detail

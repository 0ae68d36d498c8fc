// Lowering of run-time control flow: the Tile IR `if` and `while` become the GPU IR's. Their
// conditions are bool scalars, uniform per program: every thread of the threadgroup takes the
// same branch and the same number of turns, so the blocks may hold barriers, simd operations
// and the exchanges through threadgroup memory that tile ops lower to. A scalar atomic (a
// spin lock's atomic_cas) is made by thread 0 and its old value reaches every thread through
// threadgroup memory (lower_atomic.cpp), so a `while` spinning on it turns the same number of
// times in every thread: the whole program waits, never one lane of a warp while the others
// hold the lock. Values carried by a `while` and the results of an `if` keep one layout
// (the one assigned to the op's result), so both blocks yield into the same registers.
#include "passes/lower_internal.h"

namespace metile::lowering {

// The GPU layout of Tile IR value v when it flows through an if or while: uniform for scalars.
LayoutId Lowering::carried_layout(ValueId v) {
  return p.type(v).is_tile() ? layout_of(v) : gpu::kUniform;
}

// Fresh GPU values of the types (and layouts) of `like`, named `stem`.
std::vector<ValueId> Lowering::fresh_values(const std::vector<ValueId>& like, const std::string& stem) {
  std::vector<ValueId> out;
  for (ValueId g : like) {
    const gpu::Value v = f.value(g);  // a copy: new values grow the table
    out.push_back(b.named(b.new_value(v.dtype, v.layout, v.is_ptr, v.space), stem));
  }
  return out;
}

// Lowers Tile IR block `tb` into `gb`, its arguments standing for `args`; its yield becomes a GPU
// yield of the values in `layouts` (after a leading condition when `cond`).
void Lowering::region(const Block& tb, gpu::Block& gb, const std::vector<ValueId>& args,
                      const std::vector<LayoutId>& layouts, bool cond) {
  gb.args = args;
  for (size_t i = 0; i < args.size(); ++i) set(tb.args[i], args[i]);
  gpu::Block* outer = b.block();
  b.set_block(&gb);
  const Block* saved = block_now;
  for (const Op& o : tb.ops) {
    block_now = &tb;
    if (o.kind != OpKind::YIELD) {
      if (!lowered_early.count(&o)) op(o);
      continue;
    }
    current = &o;
    b.set_loc(o.loc);
    gpu::Op y;
    y.kind = gpu::GpuOpKind::YIELD;
    const size_t skip = cond ? 1 : 0;
    if (cond) y.operands.push_back(uniform_condition(o.operands[0]));
    for (size_t i = skip; i < o.operands.size(); ++i)
      y.operands.push_back(materialize(get(o.operands[i]), layouts[i - skip]));
    b.append(std::move(y));
  }
  block_now = saved;
  b.set_block(outer);
}

ValueId Lowering::uniform_condition(ValueId cond) {
  ValueId c = get(cond);
  if (f.value(c).layout != gpu::kUniform)  // a per-thread scalar (SIMT view): threads may differ
    unsupported("the condition differs between the threads of a program on ", options.device,
                " (a run-time if or while needs one value per program)");
  return c;
}

void Lowering::branch(const Op& op) {
  ValueId cond = uniform_condition(op.operands[0]);
  std::vector<LayoutId> layouts;
  for (ValueId r : op.results) layouts.push_back(carried_layout(r));
  gpu::Op g;
  g.kind = gpu::GpuOpKind::IF;
  g.operands = {cond};
  g.regions.resize(2);
  for (size_t i = 0; i < 2; ++i) region(op.regions[i], g.regions[i], {}, layouts, false);
  for (size_t i = 0; i < op.results.size(); ++i) {
    const gpu::Value y = f.value(g.regions[0].ops.back().operands[i]);
    g.results.push_back(b.named(b.new_value(y.dtype, layouts[i], y.is_ptr, y.space), y.stem));
  }
  current = &op;
  b.set_loc(op.loc);
  std::vector<ValueId> results = b.append(std::move(g)).results;
  for (size_t i = 0; i < op.results.size(); ++i) set(op.results[i], results[i]);
}

void Lowering::while_loop(const Op& op) {
  std::vector<LayoutId> layouts;
  std::vector<ValueId> inits;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    layouts.push_back(carried_layout(op.results[i]));
    inits.push_back(materialize(get(op.operands[i]), layouts[i]));
  }
  gpu::Op g;
  g.kind = gpu::GpuOpKind::WHILE;
  g.operands = inits;
  g.regions.resize(2);
  ++loop_depth;
  region(op.regions[0], g.regions[0], fresh_values(inits, "carried"), layouts, true);
  region(op.regions[1], g.regions[1], fresh_values(inits, "passed"), layouts, false);
  --loop_depth;
  g.results = fresh_values(inits, "passed");
  current = &op;
  b.set_loc(op.loc);
  std::vector<ValueId> results = b.append(std::move(g)).results;
  for (size_t i = 0; i < op.results.size(); ++i) set(op.results[i], results[i]);
}

}  // namespace metile::lowering

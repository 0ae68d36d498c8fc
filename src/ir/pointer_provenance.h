/** \file pointer_provenance.h
 * Pointer provenance, written once for Tile IR and GPU IR: which ops hand a pointer operand on to
 * their result, and the fixed point that follows pointers through those ops and through
 * loop-carried values to the parameters they may point into. param_access (Tile IR: which
 * parameters are read and written) and the GPU emitter (which pointers may be `const`) both ask
 * here; guard_buffer_bounds follows the same ops but carries an offset with each pointer, so it
 * handles each op of pointer_sources itself (and asserts that it knows them all).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/ops.h"
#include "ir/tile_ir.h"
#include "ir/walk.h"

namespace metile {

/** Operands [begin, end) of an op whose pointers its result may carry on. */
struct OperandRange {
  size_t begin = 0, end = 0;
  bool empty() const { return begin == end; }
};

/** The Tile IR ops whose pointer result comes from pointer operands: offset, reshaped,
 * broadcast or chosen. Any other op makes no pointer from a pointer (`shared` makes a new one). */
inline OperandRange pointer_sources(OpKind k) {
  switch (k) {
    case OpKind::PTR_OFFSET:
    case OpKind::BROADCAST:
    case OpKind::RESHAPE:
      return {0, 1};
    case OpKind::SELECT:
      return {1, 3};
    default:
      return {};
  }
}

/** Bit i of a mask: the pointer may point into parameter i. Parameters from the 64th on have no
 * bit of their own and count as all of them, so a mask errs towards "may point into". */
inline uint64_t param_bit(size_t i) { return i < 64 ? uint64_t{1} << i : ~uint64_t{0}; }

/** For every value id below `num_values`, the mask of parameters (given by their value ids, in
 * order) it may point into. `sources(op)` names the operands whose pointers op's result carries
 * on; `is_loop(op)` marks `for(start, end, step, inits...)` ops, whose block args (iv,
 * carried...) and results take the inits and the yielded values (the block's last op). Loops
 * iterate to a fixed point, so a carried pointer points exactly where its init or a yield can. */
template <typename Block, typename Sources, typename IsLoop>
std::vector<uint64_t> pointer_params(size_t num_values, const std::vector<ValueId>& params,
                                     const Block& body, Sources&& sources, IsLoop&& is_loop) {
  std::vector<uint64_t> of(num_values, 0);
  for (size_t i = 0; i < params.size(); ++i) of[params[i]] = param_bit(i);
  for (bool changed = true; changed;) {
    changed = false;
    auto flow = [&](ValueId from, ValueId to) {
      const uint64_t m = of[to] | of[from];
      changed = changed || m != of[to];
      of[to] = m;
    };
    walk(body, [&](const auto& op) {
      if (is_loop(op)) {
        const auto& b = op.regions[0];
        for (size_t i = 0; i + 3 < op.operands.size(); ++i) {
          flow(op.operands[3 + i], b.args[1 + i]);
          flow(b.ops.back().operands[i], b.args[1 + i]);
          flow(b.args[1 + i], op.results[i]);
        }
        return;
      }
      const OperandRange r = sources(op);
      for (size_t i = r.begin; i < r.end && !op.results.empty(); ++i) flow(op.operands[i], op.results[0]);
    });
  }
  return of;
}

}  // namespace metile

/** \file cpu_plan.h
 * Decisions the CPU C++ generator makes before writing code: which tile values become arrays
 * and which are recomputed inline inside the loops that consume them (fusing element-wise
 * chains into one loop), which arrays share storage (in-place loop-carried updates, `dot`
 * accumulating into its accumulator), which integer arithmetic only computes addresses and
 * masks, and loop-invariant hoisting. The plan works on its own copy of the program.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/tile_ir.h"

namespace metile {

enum class Form : uint8_t {
  none,    // no value (unused slot)
  scalar,  // a C local variable
  array,   // a C array (the storage may belong to another value: see ValuePlan::storage)
  inline_, // recomputed per element where it is used; never stored
};

struct ValuePlan {
  Form form = Form::none;
  /** The C name of a scalar, or of the array holding this value (its storage owner's name). */
  std::string name;
  /** "%12" as the Tile IR printer names this value (for comments). */
  std::string ir_name;
  /** For arrays: the value whose array holds this one (itself unless aliased). */
  ValueId storage = kNoValue;
  /** Signed integer arithmetic that only feeds addresses, masks and loop bounds: spelled
   * with plain C operators (vectorizable) instead of wrap-around helpers. */
  bool index_arith = false;
  int uses = 0;
};

struct CpuPlan {
  Program program;                // after loop-invariant hoisting
  std::vector<ValuePlan> values;  // indexed by ValueId
  uint64_t array_bytes = 0;       // upper bound of the stack the arrays take

  const ValuePlan& operator[](ValueId v) const { return values.at(v); }
};

/** Plans `program` (verified) for the CPU generator. */
CpuPlan plan_cpu(const Program& program);

/** Moves pure, memory-free ops whose operands are all defined outside a loop to before it. */
void hoist_loop_invariants(Program& program);

}  // namespace metile

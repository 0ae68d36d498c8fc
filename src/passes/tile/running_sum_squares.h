/** \file running_sum_squares.h
 * A form of fuse_reductions' mean-then-centred-squares merge (fuse_reduction_loops.cpp) that
 * carries one tile beside the mean pass's own sum instead of Welford's three: the
 * Youngs-Cramer update, whose running mean is the sum the mean pass already carries.
 */
#pragma once

#include <vector>

#include "ir/tile_ir.h"

namespace metile {

/** The merge as fuse_reductions found it, in the merged body's values. */
struct CentredMerge {
  const Op& l1;                // the mean pass as written (the merged body holds its ops)
  ValueId e = kNoValue;        // the element L2 squares the distance of
  ValueId cond = kNoValue;     // the condition under which a lane takes e (none: always)
  ValueId m = kNoValue;        // the centre M, a value between the loops
  Type t;                      // L2's carried sum's type
  Loc loc;
  bool two_counts = true;      // two scalar counts per row where they serve (METILE_GPU_OFF=two_counts)
};

/**
 * When L1 carries the plain sum of the same elements under the same condition from 0, and the
 * condition can only turn off as the loop goes on (a lane that takes an element took one at
 * every earlier iteration), adds its carried values to `fused` / `body` / `yield` and returns
 * the value that, added to L2's initial value, stands for L2's result after the loop (its ops
 * appended to `before` and `after`). Otherwise changes nothing and returns kNoValue.
 */
ValueId merge_as_running_sums(Program& p, const CentredMerge& in, Op& fused, Block& body,
                              Op& yield, std::vector<Op>& before, std::vector<Op>& after);

}  // namespace metile

// Dot operands that do not change inside a loop are staged once, before it.
//
// A dot stages each operand into threadgroup arrays of its own (lower_dot.cpp) and nothing
// else writes them, so an operand defined outside the loop the dot runs in (flash attention's
// Q tile in `dot(q, trans(k))`) holds the same bytes every iteration. Staging it in the body
// would keep the tile and its staging addresses live in registers across the loop and store it
// again each iteration; staged before the loop, they die there. The barrier the body already
// places before each mma (after staging the other operand) orders these stores too.
//
// Only for dots directly in the loop's body without K chunks (one staging holds all of K), and
// operands not copied straight from device memory (that copy is a tile_load of the body) nor read
// from registers (the warpgroup atom's register A). A pipelined dot may hold such an operand while
// its other streams through the ring (lower_pipeline.cpp): the loop's top barrier orders these
// stores as it orders the ring's copies. A warpgroup operand goes to its
// swizzled offsets; the warpgroup_sync before the body's barrier fences these stores for the async
// proxy that the warpgroup atoms read through (lower_warpgroup.cpp).
#include "passes/lower_internal.h"

namespace metile::lowering {

void Lowering::prestage_invariant_operands(const Op& loop) {
  for (const Op& o : loop.body().ops) {
    if (o.kind != OpKind::DOT) continue;
    DotPlan& plan = dot_plans.at(&o);
    const int64_t k = p.type(o.operands[0]).shape.dims[1];
    if (plan.kc != k) continue;
    for (int i = 0; i < 2; ++i) {
      const ValueId v = o.operands[i];
      if (plan.direct[i] != nullptr || (i == 0 && plan.register_a != gpu::kUniform)) continue;
      if (v >= map.size() || map[v] == kNoValue) continue;
      auto bufs = dot_buffers(o, 1);
      stage(v, i == 0 ? bufs.first : bufs.second, plan.stage, plan.ld[i], i == 0 ? 1 : 0, 0, k,
            plan.warpgroup() ? &plan.staged[i] : nullptr);
      prestaged.insert({&o, i});
    }
  }
}

}  // namespace metile::lowering

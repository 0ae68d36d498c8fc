// A later dot's copies from device memory, issued at an earlier dot of the same block.
//
// A dot whose operand is copied straight from device memory (stage_direct, lower_dot.cpp)
// issues the copy where it runs and waits for it at once. In flash attention's loop the second
// dot's V tile is known from the top of the body, yet its copy would start only after the first
// dot and the softmax, and its latency is paid in full every iteration. When an earlier dot of
// the block runs after the later dot's loads (direct_copies already made sure that nothing
// between the loads and the later dot writes memory, so the copy may start anywhere in that
// range), the later dot's copies are issued there, as an asynchronous group committed after the
// earlier dot's own, which then waits only for its own group (cp.async.wait_group 1). The later
// dot waits for everything before its barrier. Its staging arrays are free: only it reads
// them, and every unpipelined dot ends with a barrier after its mma.
//
// Targets with asynchronous copies only (on others a copy completes where it is issued), and
// neither dot pipelined (its copies and waits are the loop's). An unpipelined warpgroup dot waits
// for its own warpgroup MMAs before it ends, and the later dot's warpgroup_sync, after its
// async_wait and before its barrier, fences the early copies for the async proxy as it does its
// own. LowerOptions::early_copy (METILE_GPU_OFF=early_copy) switches it off.
#include <algorithm>

#include "passes/lower_internal.h"

namespace metile::lowering {

void Lowering::plan_early_copies() {
  early_planned = true;
  if (!options.early_copy || !target.async_copies) return;
  auto unpiped = [&](const Op& d) { return pipelined_dots.count(&d) == 0; };
  auto plan_block = [&](auto& self, const Block& blk) -> void {
    for (const Op& o : blk.ops)
      for (const Block& r : o.regions) self(self, r);
    for (size_t j = 0; j < blk.ops.size(); ++j) {
      const Op& later = blk.ops[j];
      if (later.kind != OpKind::DOT || !unpiped(later)) continue;
      const DotPlan& plan = dot_plans.at(&later);
      size_t from = j;  // the position of its last direct load
      bool found = false;
      for (const Op* load : plan.direct) {
        if (load == nullptr) continue;
        for (size_t x = 0; x < j; ++x)
          if (&blk.ops[x] == load) from = found ? std::max(from, x) : x, found = true;
      }
      if (!found) continue;
      for (size_t x = from + 1; x < j; ++x)
        if (blk.ops[x].kind == OpKind::DOT && unpiped(blk.ops[x])) {
          early_copies[&blk.ops[x]].push_back(&later);
          break;
        }
    }
  };
  plan_block(plan_block, p.body);
}

int64_t Lowering::issue_early_copies(const Op& dot) {
  if (!early_planned) plan_early_copies();
  auto it = early_copies.find(&dot);
  if (it == early_copies.end()) return 0;
  for (const Op* later : it->second) {
    auto [a_buf, b_buf] = dot_buffers(*later, 1);
    const DotPlan& plan = dot_plans.at(later);
    for (int i = 0; i < 2; ++i)
      if (plan.direct[i] != nullptr) stage_direct(*plan.direct[i], i == 0 ? a_buf : b_buf, plan.ld[i]);
    early_issued.insert(later);
  }
  async_commit();
  return 1;
}

}  // namespace metile::lowering

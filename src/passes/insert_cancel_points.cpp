// insert-cancel-points: puts a cancel_point at each loop back-edge (gpu::loop_back_edge), where
// a running kernel checks the host's stop word, reading it every kCancelEvery-th time it gets
// there, so a time limit or metile_cancel_launches can stop a GPU kernel that spins in a loop
// (docs/semantics.md, "Stopping a launch"; cuda exits, MSL returns from the whole
// threadgroup: msl.cpp). Where the target checks at entry too (GpuTarget::cancel_at_entry),
// one more, `every=0`, goes before the first top-level op that writes or holds a region, so a
// huge grid of short programs stops soon; none where that op is a loop, whose back-edge check
// then acts on the first turn (cuda acts at every back-edge on the value it read last). Placed
// after the program's first reads, it costs no wait for its own read. Needs: verified GPU IR.
// Guarantees: every loop body ends in one cancel_point before its yield, except in a function
// with Hopper's warpgroup MMAs, which gets none: ptxas serializes every warpgroup MMA of a
// function that may trap on a divergent path (its C7518 "Potential Performance Loss"), and such
// loops are bounded K loops. Nothing else changes. Runs last: it writes, so earlier passes
// would keep loops it touched.
#include <algorithm>

#include "passes/pass.h"

namespace metile {

namespace {

// 2^10: the counter costs an add, an AND and a compare per back-edge (cuda: predicated, no branch,
// so a K loop's warpgroup MMAs stay asynchronous; MSL: a decrement and a branch); the read of the
// word (MSL: and two barriers) then comes once per 1024, a small fraction of any loop body that
// reads memory, while a loop spinning at ~10 ns per turn still stops within ~10 us.
constexpr int64_t kCancelEvery = 1024;

bool ends_in_cancel_point(const gpu::Block& b) {
  return b.ops.size() >= 2 && b.ops[b.ops.size() - 2].kind == gpu::GpuOpKind::CANCEL_POINT;
}

gpu::Op cancel_point(int64_t every, const Loc& loc) {
  gpu::Op point;
  point.kind = gpu::GpuOpKind::CANCEL_POINT;
  point.attrs.push_back({"every", every});
  point.loc = loc;
  return point;
}

/** Before the body's first op that writes or holds a region, unless that is a loop (its
 * back-edge checks) or a cancel_point already. */
void check_at_entry(gpu::Block& body) {
  auto first = std::find_if(body.ops.begin(), body.ops.end(), [](const gpu::Op& op) {
    return gpu::has_gpu_trait(op.kind, gpu::kGWrite | gpu::kGRegion);
  });
  if (first == body.ops.end() || first->kind == gpu::GpuOpKind::CANCEL_POINT ||
      gpu::loop_back_edge(*first) != nullptr)
    return;
  const Loc loc = first->loc;
  body.ops.insert(first, cancel_point(0, loc));
}

}  // namespace

void insert_cancel_points(gpu::Function& f, const PassContext& ctx) {
  bool warpgroup = false;
  gpu::walk(f.body, [&](const gpu::Op& op) {
    warpgroup = warpgroup || (op.kind == gpu::GpuOpKind::MMA && atom_kind_threads(mma_atom_kind(op)) > 32);
  });
  if (warpgroup) return;
  gpu::walk_mut(f.body, [&](gpu::Op& op) {
    gpu::Block* body = gpu::loop_back_edge(op);
    if (body == nullptr || ends_in_cancel_point(*body)) return;
    body->ops.insert(body->ops.end() - 1, cancel_point(kCancelEvery, op.loc));  // before the yield
  });
  if (ctx.target.cancel_at_entry) check_at_entry(f.body);
}

}  // namespace metile

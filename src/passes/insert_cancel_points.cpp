// insert-cancel-points: puts a cancel_point at each loop back-edge (gpu::loop_back_edge), where
// a running kernel checks the host's stop word every kCancelEvery-th time it gets there, so a
// time limit or metile_cancel_launches can stop a GPU kernel that spins in a loop
// (docs/semantics.md, "Stopping a launch"; cuda traps there, MSL returns from the whole
// threadgroup: msl.cpp). Needs: verified GPU IR. Guarantees: every loop body
// ends in one cancel_point before its yield, except in a function with Hopper warpgroup MMAs
// (wgmma), which gets none: ptxas serializes every wgmma of a function that may trap on a
// divergent path (its C7518 "Potential Performance Loss"), and such loops are bounded K loops.
// Nothing else changes. Runs last: it writes, so earlier passes would keep loops it touched.
#include "passes/pass.h"

namespace metile {

namespace {

// 2^10: the counter costs an add, an AND and a compare per back-edge (cuda: predicated, no
// branch, so a K loop's wgmma stays asynchronous; MSL: a decrement and a branch); the check
// itself (a read of host-visible memory; MSL: and two barriers) then comes once per 1024, a
// small fraction of any loop body that reads memory, while a loop spinning at ~10 ns per turn
// still stops within ~10 us.
constexpr int64_t kCancelEvery = 1024;

bool ends_in_cancel_point(const gpu::Block& b) {
  return b.ops.size() >= 2 && b.ops[b.ops.size() - 2].kind == gpu::GpuOpKind::CANCEL_POINT;
}

}  // namespace

void insert_cancel_points(gpu::Function& f, const PassContext&) {
  bool warpgroup = false;
  gpu::walk(f.body, [&](const gpu::Op& op) {
    warpgroup = warpgroup || (op.kind == gpu::GpuOpKind::MMA && mma_atom_kind(op) == AtomKind::wgmma);
  });
  if (warpgroup) return;
  gpu::walk_mut(f.body, [&](gpu::Op& op) {
    gpu::Block* body = gpu::loop_back_edge(op);
    if (body == nullptr || ends_in_cancel_point(*body)) return;
    gpu::Op point;
    point.kind = gpu::GpuOpKind::CANCEL_POINT;
    point.attrs.push_back({"every", kCancelEvery});
    point.loc = op.loc;
    body->ops.insert(body->ops.end() - 1, std::move(point));  // before the yield
  });
}

}  // namespace metile

// dce: removes ops whose results are never used and that have no effect: pure ops, loads,
// allocations, and loops and ifs whose blocks write nothing (never a while). Needs: verified GPU IR. Guarantees: the
// same stores and barriers in the same order; repeats until nothing more can go.
#include "passes/pass.h"

namespace metile {

namespace {

bool writes(const gpu::Block& b) {
  bool any = false;
  gpu::walk(b, [&](const gpu::Op& op) { any = any || gpu::has_gpu_trait(op.kind, gpu::kGWrite); });
  return any;
}

bool removable(const gpu::Op& op, const std::vector<int>& uses) {
  for (ValueId r : op.results)
    if (uses[r] != 0) return false;
  if (op.kind == gpu::GpuOpKind::FOR) return !writes(op.body());
  // An if without effects is dropped too; a while stays (whether it ends is its effect).
  if (op.kind == gpu::GpuOpKind::IF) return !writes(op.regions[0]) && !writes(op.regions[1]);
  return gpu::has_gpu_trait(op.kind, gpu::kGPure | gpu::kGRead);
}

}  // namespace

void eliminate_dead_code(gpu::Function& f, const PassContext&) {
  // Each round counts the uses again: what it removed may leave more unused.
  while (erase_ops_if(f.body, [uses = gpu::use_counts(f)](const gpu::Op& op) { return removable(op, uses); })) {
  }
}

}  // namespace metile

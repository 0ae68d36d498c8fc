// dot on Hopper's warpgroup matrix units (sm_90a; GpuTarget::warpgroup_atoms).
//
// Which dots take a warpgroup atom, in which form (f16/bf16, tf32 K-major or transposed, FP8),
// and the accumulator's fragment layout: layout assignment decides (dot_choices.cpp); a
// DotChoice whose warpgroup() holds is what lowering finds here.
//
// Operands: A (M x K) and B (K x N) stay row-major as loaded (A K-major, B N-major: the warpgroup
// atom's transposed-B form; B K-major, N x K, where the plan says so) in the swizzled blocks of
// src/target/swizzled_tile.h, written chunk by chunk by the same async copies as the warp-level
// path, only to swizzled offsets, unpadded. An A computed in registers (attention's Q) is stored
// element by element to the same offsets (stage()), at the dot, or in the prologue of a pipelined
// loop that holds it (lower_pipeline.cpp); hoist-invariant-staging may move the former in front of
// the loop. Those stores are generic-proxy writes, which the warpgroup_sync before the dot's (or
// the loop top's) barrier fences for the async proxy as it does the copies. An A taken from registers
// (DotChoice::register_a) has no array. The arrays are the first in threadgroup memory and each
// stage is whole 1024-byte blocks, so every block sits where the hardware's swizzle (on absolute
// address bits) expects it. The warpgroup atom reads threadgroup memory through the async proxy:
// after the copies are waited for, each thread fences (proxy_fence) before the barrier that
// publishes them.
#include "passes/lower_internal.h"

namespace metile::lowering {

ValueId Lowering::staging_offset(const Op& load, ValueId r, ValueId c, int64_t ld) {
  auto it = warpgroup_staging.find(&load);
  if (it == warpgroup_staging.end()) return b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {r, c_i32(ld)}), c});
  return swizzled_offset(it->second, r, c, true);
}

ValueId Lowering::swizzled_offset(const SwizzledTile& t, ValueId r, ValueId c, bool chunk_start) {
  const int64_t w = t.width(), v = t.chunk();
  auto op = [&](OpKind k, ValueId x, int64_t y) { return b.ew(k, {x, c_i32(y)}); };
  ValueId block = op(OpKind::MUL, op(OpKind::DIV, c, w), t.rows * w);
  ValueId chunk = op(OpKind::DIV, op(OpKind::MOD, c, w), v);
  ValueId phase = op(OpKind::MOD, op(OpKind::DIV, r, 128 / t.swizzle), t.swizzle / 16);
  ValueId swizzled = op(OpKind::MUL, b.ew(OpKind::BITXOR, {chunk, phase}), v);
  if (!chunk_start) swizzled = b.ew(OpKind::ADD, {swizzled, op(OpKind::MOD, c, v)});  // the element in its chunk
  return b.ew(OpKind::ADD, {b.ew(OpKind::ADD, {block, op(OpKind::MUL, r, w)}), swizzled});
}

void Lowering::warpgroup_sync_for(const std::vector<const Op*>& dots) {
  for (const Op* d : dots)
    if (dot_plans.at(d).warpgroup()) {
      gpu::Op g;
      g.kind = gpu::GpuOpKind::WARPGROUP_SYNC;
      b.append(std::move(g));
      return;
    }
}

}  // namespace metile::lowering

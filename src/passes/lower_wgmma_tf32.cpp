// tf32 dots on Hopper's warpgroup atom (wgmma .tf32, sm_90a).
//
// wgmma has no transposed form for 32-bit operands: A and B must both be K-major in threadgroup
// memory. A (M x K, K contiguous) is; B of dot(a, b) is a K x N tile whose N is contiguous, so it
// is not. A dot takes the tf32 atom only where the program's B is already K-major in memory:
// dot(a, trans(t)) with t an N x K tile_load of the same block, read by that trans alone, the
// trans read by that dot alone, and nothing between the load and the dot writes memory (the
// rule of assign_layouts' direct copies). The dot then copies t itself (async copies or TMA)
// into the same swizzled K-major layout A uses (src/target/wgmma_layout.h with rows N, cols K),
// the trans is never lowered (lower_scan.cpp), and the emitter reads B with A's descriptor form
// (gpu_emit_wgmma.cpp). Every other f32 dot keeps mma.sync's tf32 atom (lower_dot.cpp).
//
// Rounding: the operands stay f32 in threadgroup memory and the tensor cores read their tf32
// bits, dropping the low 13 mantissa bits (truncation), where mma.sync's fragments round to
// nearest with cvt.rna: each product differs by at most one tf32 ulp from it.
#include "passes/wgmma_tf32.h"

#include "ir/walk.h"

namespace metile {

namespace {

// The block holding `target` (the program body or a region of some op), and its index there.
const Block* block_of(const Block& blk, const Op* target, size_t* at) {
  for (size_t j = 0; j < blk.ops.size(); ++j) {
    if (&blk.ops[j] == target) {
      *at = j;
      return &blk;
    }
    for (const Block& r : blk.ops[j].regions)
      if (const Block* found = block_of(r, target, at)) return found;
  }
  return nullptr;
}

}  // namespace

const Op* wgmma_kmajor_b(const Program& p, const Op& dot, const LowerOptions& options) {
  if (!options.async_copy || p.type(dot.operands[1]).dtype != DType::f32) return nullptr;
  size_t at_dot = 0;
  const Block* blk = block_of(p.body, &dot, &at_dot);
  if (blk == nullptr) return nullptr;
  std::vector<int> reads(p.values.size(), 0);
  walk(p.body, [&](const Op& o) {
    for (ValueId x : o.operands) ++reads[x];
  });
  // The trans making B and the N x K tile_load it reads, both earlier in the dot's block.
  const Op* trans = nullptr;
  const Op* load = nullptr;
  size_t at_load = 0;
  for (size_t j = 0; j < at_dot; ++j) {
    const Op& o = blk->ops[j];
    if (o.kind == OpKind::TRANS && o.result() == dot.operands[1]) trans = &o;
  }
  if (trans == nullptr || reads[trans->result()] != 1 || reads[trans->operands[0]] != 1) return nullptr;
  for (size_t j = 0; j < at_dot; ++j)
    if (blk->ops[j].kind == OpKind::TILE_LOAD && blk->ops[j].result() == trans->operands[0]) {
      load = &blk->ops[j];
      at_load = j;
    }
  if (load == nullptr) return nullptr;
  const Type& t = p.type(load->result());
  if (t.dtype != DType::f32 || t.shape.rank != 2 || t.shape.dims[1] % 4 != 0) return nullptr;  // 16-byte chunks
  for (size_t x = at_load + 1; x < at_dot; ++x) {
    const OpKind k = blk->ops[x].kind;
    if (!has_trait(k, kPure) && k != OpKind::TILE_LOAD && k != OpKind::LOAD) return nullptr;
  }
  return load;
}

}  // namespace metile

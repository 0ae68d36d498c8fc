// FP8 dots (f8e4m3 / f8e5m2 operands, f32 accumulator) on Hopper's warpgroup atom
// (wgmma.mma_async ... m64nNk32.f32.<a>.<b>, sm_90a).
//
// Which dots: on cuda the fp8_dots Tile IR pass leaves FP8 dots to lowering (DeviceInfo::
// lowers_fp8_dots). assign_layouts plans each as an f16 dot (dot_atom: the operands stage as their
// exact f16 values, cast in registers by stage()), and choose_wgmma replaces that plan with the
// FP8 atom where wgmma can read the operands: wgmma has no transposed form for 8-bit operands,
// so A and B must both be K-major in threadgroup memory. A is when it is an M x K tile_load; B is
// when the program wrote dot(a, trans(b)) with b an N x K tile_load (torch._scaled_mm's
// column-major B, attention's K^T), each load read once in the dot's block with nothing writing
// memory before the dot (wgmma_copied_a, wgmma_kmajor_b). Both are copied as loaded (async copies
// or TMA) into the swizzled K-major blocks of src/target/wgmma_layout.h, K staged whole, the
// trans never lowered (lower_scan.cpp). Everything else stays on the exact f16 path: B as
// loaded for dot(a, b) (K x N, N-major), loads read twice or across a store, threads not whole
// warpgroups, tiles no wgmma shape fits, K chunked, async copies off.
//
// Accumulation: Hopper's FP8 wgmma adds its products into the accumulator with fewer bits than
// f32 (about 14 significant bits kept, as the DeepSeek-V3 report measured), so a long K loop on
// one accumulator loses accuracy. By default (plan.promote) each mma op computes its wgmma sums
// into a separate register tile, starting from zero, and adds that tile into the f32
// accumulator every kFp8PromoteK elements of K (and at the op's end): the two-level accumulation
// of DeepGEMM and cuBLAS's default. METILE_GPU_OFF=fp8_promote (a piece of disabled_passes) is
// the fast accumulation: every wgmma accumulates straight into the accumulator, no extra
// registers and no wait before the additions.
#include "passes/wgmma_fp8.h"

#include "passes/wgmma_tf32.h"

namespace metile {

bool wgmma_fp8_copies(const Program& p, const Op& o, const GpuTarget& target,
                      const LowerOptions& options, DotChoice& plan) {
  const Op* a = wgmma_copied_a(p, o, options);
  const Op* b = wgmma_kmajor_b(p, o, options);
  if (a == nullptr || b == nullptr) return false;
  const int64_t m = p.type(o.operands[0]).shape.dims[0], k = p.type(o.operands[0]).shape.dims[1];
  const int64_t n = p.type(o.operands[1]).shape.dims[1];
  // K staged whole: both tiles (one byte an element) within half the threadgroup memory, the
  // rule dot_chunk applies to every staging.
  if (static_cast<uint64_t>((m + n) * k) > target.threadgroup_memory_bytes / 2) return false;
  plan.stage = p.type(o.operands[0]).dtype;
  plan.direct[0] = a;
  plan.direct[1] = b;
  plan.kc = k;
  plan.b_kmajor = false;
  plan.promote = 0;
  if (options.fp8_promote) {  // the largest multiple of 32 up to kFp8PromoteK that divides K
    plan.promote = kFp8PromoteK;
    while (plan.promote > 32 && k % plan.promote != 0) plan.promote -= 32;
  }
  return true;
}

}  // namespace metile

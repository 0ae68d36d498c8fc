/** \file wgmma_tf32.h
 * tf32 dots on the warpgroup atom (lower_wgmma_tf32.cpp): wgmma reads 32-bit operands K-major
 * only, so an f32 dot takes it where its B is trans() of an N x K tile_load. FP8 operands are
 * K-major only too (lower_wgmma_fp8.cpp) and find their copies the same way.
 */
#pragma once

#include "ir/tile_ir.h"
#include "passes/assign_layouts.h"
#include "passes/lower.h"

namespace metile {

/**
 * The N x K tile_load that an f32 or FP8 dot's B operand is the transpose of, when the dot may
 * copy it straight into K-major threadgroup memory (the trans and the load each read once, in
 * the dot's block, nothing between the load and the dot writing memory, rows of whole 16-byte
 * chunks, async copies on); nullptr otherwise.
 */
const Op* wgmma_kmajor_b(const Program& program, const Op& dot, const LowerOptions& options);
/** The M x K tile_load a dot's A operand is, under the same rules (FP8: lower_wgmma_fp8.cpp,
 * where assign_layouts' direct copies, made for the f16 staging, do not apply). */
const Op* wgmma_copied_a(const Program& program, const Op& dot, const LowerOptions& options);

/**
 * An f32 dot whose B is N-major (K x N as loaded) on the tf32 warpgroup atom as C^T = B^T A^T:
 * wgmma's A is B^T, read from B's threadgroup array into registers (rounded with cvt.rna), its B
 * is A (M x K, K-major, a descriptor), and the accumulator holds C^T's fragments, which the
 * accumulator layout maps back to C's elements. Sets c's atom, warp grid (warps_m: 4 per
 * warpgroup along N; warps_n: warpgroups along M), layout (added to f), staged tiles and
 * `transposed`; false (c untouched) when the tile does not fit.
 */
bool choose_wgmma_transposed(const Program& program, const Op& dot, const GpuTarget& target, bool rows_reduced,
                             gpu::Function& f, DotChoice& c);

}  // namespace metile

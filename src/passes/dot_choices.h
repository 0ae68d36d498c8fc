/** \file dot_choices.h
 * The choices layout assignment makes for a dot beyond its warp-level atom (dot_atom,
 * assign_layouts.h): the warpgroup atom (Hopper, sm_90a) with its transposed tf32 and its FP8
 * forms, and B staged K-major for mma.sync. Each fills the dot's DotChoice; lowering reads the
 * result and never chooses again (dot_choices.cpp says what each form needs).
 */
#pragma once

#include <cstdint>

#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/assign_layouts.h"
#include "passes/lower_options.h"
#include "target/gpu_target.h"

namespace metile {

/**
 * Moves dot `o` of `program` to a warpgroup atom of `target` (Hopper's, sm_90a) when it fits:
 * both operands copied directly, K staged whole, whole warpgroups, 64-row blocks; sets c's
 * atom, warp grid, accumulator layout (added to f) and staged tiles. rows_reduced: the result's
 * rows are reduced later (then one warpgroup column). a_source: the plan of the dot whose
 * accumulator A is an element-wise function of, same shape (nullptr: none); a 16-bit A may then
 * come from registers in its fragments (c.register_a). A 16-bit B = trans(t) with t computed in the
 * dot's block is stored K-major from registers (c.b_stored) when A is copied.
 */
bool choose_warpgroup_atom(const Program& program, const Op& o, const GpuTarget& target,
                           const LowerOptions& options, bool rows_reduced, const DotChoice* a_source,
                           gpu::Function& f, DotChoice& c);

/**
 * An f32 dot whose B is N-major (K x N as loaded) on the tf32 warpgroup atom as C^T = B^T A^T:
 * the warpgroup atom's A is B^T, read from B's threadgroup array into registers (rounded with cvt.rna), its B
 * is A (M x K, K-major, a descriptor), and the accumulator holds C^T's fragments, which the
 * accumulator layout maps back to C's elements. Sets c's atom, warp grid (warps_m: 4 per
 * warpgroup along N; warps_n: warpgroups along M), layout (added to f), staged tiles and
 * `transposed`; false (c untouched) when the tile does not fit.
 */
bool choose_warpgroup_transposed(const Program& program, const Op& dot, const GpuTarget& target, bool rows_reduced,
                             gpu::Function& f, DotChoice& c);

/**
 * The N x K tile_load that an f32 or FP8 dot's B operand is the transpose of, when the dot may
 * copy it straight into K-major threadgroup memory (the trans and the load each read once, in
 * the dot's block, nothing between the load and the dot writing memory, rows of whole 16-byte
 * chunks, async copies on); nullptr otherwise.
 */
const Op* warpgroup_kmajor_b(const Program& program, const Op& dot, const LowerOptions& options);
/** The M x K tile_load a dot's A operand is, under the same rules (FP8, where assign_layouts'
 * direct copies, made for the f16 staging, do not apply). */
const Op* warpgroup_copied_a(const Program& program, const Op& dot, const LowerOptions& options);

/** K elements of FP8 warpgroup partial sums between two promotions into the f32 accumulator. */
inline constexpr int64_t kFp8PromoteK = 128;

/**
 * Fills `plan` for an FP8 dot on the warpgroup atom when its operands can be copied K-major:
 * A's and B's tile_loads as plan.direct, plan.stage A's FP8 dtype, K staged whole and
 * plan.promote (LowerOptions::fp8_promote); false (plan untouched in the fields that matter)
 * otherwise. choose_warpgroup_atom checks the rest (swizzle, warpgroups) as for every warpgroup dot.
 */
bool warpgroup_fp8_copies(const Program& program, const Op& dot, const GpuTarget& target,
                      const LowerOptions& options, DotChoice& plan);

/**
 * Whether dot `c` may stage B = trans(tile_load) as loaded, n rows of k (lower_trans_operand.cpp):
 * a warp-level atom that reads B K-major (kBKMajor: mma.sync's 16-bit ones) with ldmatrix (the
 * ldmatrix-fragments pass runs and its rows fit, ldmatrix_fits), K staged whole,
 * LowerOptions::kmajor_b.
 */
bool kmajor_b_fits(const LowerOptions& options, const DotChoice& c, int64_t k);

/** Whether `op` writes no memory, so a dot's tile_load may be copied past it to the dot: a pure
 * op, a load, or an `if` whose blocks hold only such ops (whole_tiles' branch around attention's
 * mask). */
bool writes_no_memory(const Op& op);

}  // namespace metile

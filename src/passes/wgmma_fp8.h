/** \file wgmma_fp8.h
 * FP8 dots on the warpgroup atom (lower_wgmma_fp8.cpp): wgmma reads f8e4m3 and f8e5m2 operands
 * K-major only, so an FP8 dot takes it where A is an M x K tile_load and B is trans() of an
 * N x K tile_load, both copied straight into threadgroup memory.
 */
#pragma once

#include "ir/tile_ir.h"
#include "passes/assign_layouts.h"
#include "passes/lower.h"
#include "target/gpu_target.h"

namespace metile {

/** K elements of FP8 wgmma partial sums between two promotions into the f32 accumulator. */
inline constexpr int64_t kFp8PromoteK = 128;

/**
 * Fills `plan` for an FP8 dot on the warpgroup atom when its operands can be copied K-major:
 * A's and B's tile_loads as plan.direct, plan.stage A's FP8 dtype, K staged whole and
 * plan.promote (LowerOptions::fp8_promote); false (plan untouched in the fields that matter)
 * otherwise. choose_wgmma checks the rest (swizzle, warpgroups) as for every wgmma dot.
 */
bool wgmma_fp8_copies(const Program& program, const Op& dot, const GpuTarget& target,
                      const LowerOptions& options, DotChoice& plan);

}  // namespace metile

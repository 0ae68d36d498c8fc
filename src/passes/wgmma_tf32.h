/** \file wgmma_tf32.h
 * tf32 dots on the warpgroup atom (lower_wgmma_tf32.cpp): wgmma reads 32-bit operands K-major
 * only, so an f32 dot takes it where its B is trans() of an N x K tile_load.
 */
#pragma once

#include "ir/tile_ir.h"
#include "passes/lower.h"

namespace metile {

/**
 * The N x K tile_load that an f32 dot's B operand is the transpose of, when the dot may copy it
 * straight into K-major threadgroup memory (the trans and the load each read once, in the dot's
 * block, nothing between the load and the dot writing memory, rows of whole 16-byte chunks,
 * async copies on); nullptr otherwise.
 */
const Op* wgmma_kmajor_b(const Program& program, const Op& dot, const LowerOptions& options);

}  // namespace metile

/** \file lower.h
 * Lowering of a verified Tile IR program to the GPU IR of one threadgroup (see gpu_ir.h).
 */
#pragma once

#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/lower_options.h"
#include "target/gpu_target.h"

namespace metile {

struct LayoutAssignment;

/**
 * Turns each Tile IR op into per-thread GPU IR in the layouts `layouts` assigned
 * (assign_layouts.h). Throws
 * METILE_ERROR_UNSUPPORTED naming the op and the device for what the target cannot run yet
 * (an op without a GPU lowering), METILE_ERROR_INVALID_ARGUMENT for an impossible thread count.
 */
gpu::Function lower_to_gpu(const Program& program, const LayoutAssignment& layouts,
                           const GpuTarget& target, const LowerOptions& options);
/** assign_layouts, then lower_to_gpu in its layouts (tests and tools that need no layout text). */
gpu::Function lower_to_gpu(const Program& program, const GpuTarget& target,
                           const LowerOptions& options);

}  // namespace metile

/** \file tile_pipeline.h
 * The Tile IR pipeline: the passes every device's program goes through between the verifier and
 * its backend (interp included). compile_kernel runs it once per compile; backends see only its
 * output.
 */
#pragma once

#include <memory>

#include "ir/tile_ir.h"
#include "passes/tile/tile_pass.h"

namespace metile {

struct CompileOptions;

struct TilePipelineResult {
  std::shared_ptr<const Program> program;
  /** Parameters appended after the user's, which the runtime must pass. */
  TileHiddenArgs hidden;
};

/**
 * Runs the Tile IR passes in order (skipping CompileOptions::disabled_passes) on a copy of
 * `program`. compile_kernel keeps the result's text as the "tile_ir_opt" stage
 * (METILE_DEBUG=tile_ir_opt, metile_kernel_source). `device_checks_accesses`: the device
 * reports out-of-buffer accesses itself (interp).
 */
TilePipelineResult run_tile_pipeline(const Program& program, const CompileOptions& options,
                                     bool device_checks_accesses,
                                     bool whole_tiles_in_order = false,
                                     bool lowers_fp8_dots = false,
                                     uint64_t threadgroup_memory_bytes = 0);

}  // namespace metile

/** \file pipeline.h
 * Tile IR -> GPU IR -> optimized GPU IR: the part of a GPU compile every GPU backend shares.
 */
#pragma once

#include <string>

#include "ir/gpu_ir.h"
#include "target/gpu_target.h"
#include "target/options.h"

namespace metile {

struct GpuPipelineResult {
  gpu::Function function;
  std::string layouts;     // layout assignment's choices (the "layouts" stage)
  std::string gpu_ir;      // after lowering (the "gpu_ir" stage)
  std::string gpu_ir_opt;  // after the passes ("gpu_ir_opt")
};

/**
 * Assigns layouts, lowers `program` for `target` and runs the pass pipeline (none at opt_level 0). Checks the
 * threadgroup memory the function needs against the target's limit: where it is over and the
 * K-loop stages were the target's choice (num_stages 0), lowers again with 2 stages, then none;
 * still over, or over with the user's num_stages, is METILE_ERROR_UNSUPPORTED naming the kernel,
 * the bytes and the limit. `device` names the device in messages.
 */
GpuPipelineResult run_gpu_pipeline(const Program& program, const GpuTarget& target,
                                   const CompileOptions& options, const std::string& device);

}  // namespace metile

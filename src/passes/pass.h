/** \file pass.h
 * GPU IR passes: each is a free function in its own file, registered once in passes.def. The
 * pipeline (pipeline.cpp) runs them in a fixed, readable order; tests run them by name.
 */
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/gpu_ir.h"
#include "target/gpu_target.h"

namespace metile {

struct PassContext {
  const GpuTarget& target;
  bool one_align = true;  // vectorize-access: one alignment test per access (METILE_GPU_OFF=one_align)
  std::string_view device = "the target";  // allocate-threadgroup-memory's error: "cuda allows ..."
  // allocate-threadgroup-memory: fail over the target's limit (false: place the arrays anyway,
  // for a caller that lowers again with fewer pipeline stages when the total is over).
  bool check_threadgroup_limit = true;
};

using GpuPassFn = void (*)(gpu::Function&, const PassContext&);

struct PassInfo {
  std::string_view name;
  GpuPassFn run;
  std::string_view summary;
};

#define PASS(name, fn, summary) void fn(gpu::Function& f, const PassContext& ctx);
#include "passes/passes.def"

/** Every registered pass, in passes.def order. */
const std::vector<PassInfo>& gpu_passes();
/**
 * METILE_ERROR_INVALID_ARGUMENT naming the first name in `names` (CompileOptions::disabled_passes)
 * that is no Tile IR pass, GPU IR pass or piece (kPassPieces), with the known ones; and for
 * "lower-convert-layout", which every pipeline needs (no emitter reads a convert_layout).
 */
void check_pass_names(const std::vector<std::string>& names);
/** METILE_ERROR_INVALID_ARGUMENT naming the first name in `names` (CompileOptions::enabled_passes)
 * that is no opt-in pass (kOptInPasses), with the known ones. */
void check_enabled_pass_names(const std::vector<std::string>& names);
/** Runs the named pass and verifies the result; METILE_ERROR_INVALID_ARGUMENT for an unknown name. */
void run_gpu_pass(std::string_view name, gpu::Function& f, const PassContext& ctx);
/**
 * Text in, text out: parses GPU IR text (gpu::parse), runs the named passes in order on it and
 * returns the printed result, so a pass's test states the IR before and after it.
 */
std::string run_gpu_passes_on_text(std::string_view text, const std::vector<std::string>& passes,
                                   const GpuTarget& target);

}  // namespace metile

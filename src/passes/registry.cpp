// The pass table, expanded from passes.def.
#include "passes/pass.h"

#include "ir/gpu_parse.h"
#include "passes/tile/tile_pass.h"
#include "support/error.h"
#include "target/options.h"

namespace metile {

const std::vector<PassInfo>& gpu_passes() {
  static const std::vector<PassInfo> passes = {
#define PASS(name, fn, summary) {name, fn, summary},
#include "passes/passes.def"
  };
  return passes;
}

void run_gpu_pass(std::string_view name, gpu::Function& f, const PassContext& ctx) {
  for (const PassInfo& p : gpu_passes())
    if (p.name == name) {
      p.run(f, ctx);
      gpu::verify(f);
      return;
    }
  std::string known;
  for (const PassInfo& p : gpu_passes()) known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "unknown pass \"", name, "\" (known: ", known, ")");
}

void check_pass_names(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (n == "lower-convert-layout")
      fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "the GPU IR pass \"", n,
           "\" cannot be disabled: no emitter reads a convert_layout");
    if (n == "allocate-threadgroup-memory")
      fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "the GPU IR pass \"", n,
           "\" cannot be disabled: the emitters read the offsets it gives the threadgroup arrays");
    if (n == "copy-rows-async")
      fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "the GPU IR pass \"", n,
           "\" cannot be disabled: its barrier orders a kept row's reads after the copies "
           "(METILE_GPU_OFF=threadgroup_rows keeps no row in threadgroup memory)");
    std::string tile, gpu, pieces;
    bool found = false;
    for (const TilePassInfo& p : tile_passes()) {
      found = found || p.name == n;
      tile += (tile.empty() ? "" : ", ") + std::string(p.name);
    }
    for (const PassInfo& p : gpu_passes()) {
      found = found || p.name == n;
      if (p.name != "lower-convert-layout" && p.name != "copy-rows-async" &&
          p.name != "allocate-threadgroup-memory")
        gpu += (gpu.empty() ? "" : ", ") + std::string(p.name);
    }
    for (std::string_view p : kPassPieces) {
      found = found || p == n;
      pieces += (pieces.empty() ? "" : ", ") + std::string(p);
    }
    for (const PassAlias& a : kPassAliases) found = found || a.earlier == n;
    if (!found)
      fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "unknown pass \"", n,
           "\" to disable (METILE_GPU_OFF / disabled_passes; Tile IR passes: ", tile,
           "; GPU IR passes: ", gpu, "; pieces: ", pieces, ")");
  }
}

void check_enabled_pass_names(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    std::string known;
    bool found = false;
    for (std::string_view p : kOptInPasses) {
      found = found || p == n;
      known += (known.empty() ? "" : ", ") + std::string(p);
    }
    if (!found)
      fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "unknown pass \"", n,
           "\" to enable (METILE_GPU_ON / enabled_passes; opt-in GPU IR passes: ", known, ")");
  }
}

std::string run_gpu_passes_on_text(std::string_view text, const std::vector<std::string>& passes,
                                   const GpuTarget& target) {
  gpu::Function f = gpu::parse(text);
  PassContext ctx{target};
  for (const std::string& p : passes) run_gpu_pass(p, f, ctx);
  return gpu::print(f);
}

}  // namespace metile

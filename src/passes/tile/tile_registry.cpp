// The Tile IR pass table, expanded from tile_passes.def.
#include "passes/tile/tile_pass.h"

#include <algorithm>

#include "support/error.h"
#include "target/options.h"

namespace metile {

namespace {

[[noreturn]] void unknown(std::string_view name) {
  std::string known;
  for (const TilePassInfo& p : tile_passes())
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "unknown Tile IR pass \"", name, "\" (known: ",
       known, ")");
}

}  // namespace

const std::vector<TilePassInfo>& tile_passes() {
  static const std::vector<TilePassInfo> passes = {
#define TILE_PASS(name, fn, summary) {name, fn, summary},
#include "passes/tile/tile_passes.def"
  };
  return passes;
}

void run_tile_pass(std::string_view name, Program& program, const TilePassContext& ctx) {
  const auto& off = ctx.options.gpu_off;  // METILE_GPU_OFF names some passes (kGpuOffPieces)
  for (const TilePassInfo& p : tile_passes())
    if (p.name == name) {
      if (std::find(off.begin(), off.end(), name) != off.end()) return;
      p.run(program, ctx);
      verify(program);
      return;
    }
  unknown(name);
}

void check_tile_pass_names(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    bool found = false;
    for (const TilePassInfo& p : tile_passes()) found = found || p.name == n;
    if (!found) unknown(n);
  }
}

}  // namespace metile

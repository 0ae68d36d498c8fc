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
  for (const TilePassInfo& p : tile_passes())
    if (p.name == name) {
      if (ctx.options.disables(name)) return;
      p.run(program, ctx);
      verify(program);
      return;
    }
  unknown(name);
}

}  // namespace metile

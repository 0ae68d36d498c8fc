// The Tile IR pipeline, in order. Each pass leaves verified Tile IR behind (run_tile_pass checks).
#include "passes/tile/tile_pipeline.h"

#include <algorithm>

#include "passes/pass.h"
#include "passes/tile/tile_pass.h"
#include "support/error.h"
#include "target/options.h"

namespace metile {

TilePipelineResult run_tile_pipeline(const Program& program, const CompileOptions& options,
                                     bool device_checks_accesses, bool whole_tiles_in_order,
                                     bool lowers_fp8_dots, uint64_t threadgroup_memory_bytes) {
  check_pass_names(options.disabled_passes);
  auto out = std::make_shared<Program>(program);
  TilePipelineResult result;
  TilePassContext ctx{options, device_checks_accesses, result.hidden, whole_tiles_in_order, lowers_fp8_dots,
                      threadgroup_memory_bytes};
  auto run = [&](std::string_view name) { run_tile_pass(name, *out, ctx); };
  run("dot_precision");  // before split_k copies dots: each copy keeps its precision
  run("fp8_dots");  // the casts it adds are element-wise ops every later pass knows
  run("activity");  // semantics first: later passes see explicit selects and masks
  // After activity (a masked-off lane of a load reads 0 then, as outside a tile_load's matrix);
  // before every pass that treats tile loads as tiles (bounds, split_k, keep_rows, whole_tiles).
  run("carried_offsets");  // before pointer_tiles, which reads tile coordinates off the index
  run("pointer_tiles");
  // After activity: it merges loops whose inactive lanes are explicit selects.
  if (options.fuse_reductions) run("fuse_reductions");
  run("bounds");    // after activity, whose masks and selects it guards as written
  // After bounds: the epilogue it moves keeps its guards; its own workspace accesses are in
  // range by construction. Its parameters go before the extents.
  if (options.split_k != 1) run("split_k");
  // After bounds: a kept value is the guarded load it stands for, and the guards stay cheap.
  if (options.keep_rows) run("keep_rows");
  // After bounds, whose per-access limits are often loop-invariant, and keep_rows, whose runtime
  // check it moves out of the loop. Host devices leave it to
  // their C++ compiler: a hoisted tile would become an array kept across the loop there.
  if (!whole_tiles_in_order) run("hoist");
  // After hoist (a loop-invariant scale is then outside the body); before whole_tiles, so both
  // of its loops carry the tile. Host devices: see the pass.
  if (!whole_tiles_in_order) run("defer_reductions");
  // After bounds and hoist: the guards' limits are then loop-invariant scalars in front of the
  // loop, which is what its one check per loop compares with.
  run("whole_tiles");
  run("loop_steps");  // after bounds: shares its error flag, which comes last
  // Backends run uniform loops only; the activity pass is what makes per-thread ones uniform.
  walk(out->body, [&](const Op& op) {
    if (op.kind == OpKind::FOR && out->type(op.operands[0]).is_tile())
      fail(METILE_ERROR_INVALID_ARGUMENT, "passes", out->where(op.loc),
           "a tile_range with per-thread bounds needs the \"activity\" pass (it is disabled)");
  });
  // interp evaluates FP8 dots itself (the oracle of the fp8_dots pass), cuda's lowering takes
  // them (dot_choices.cpp); the other devices' dot paths start at f16.
  if (!device_checks_accesses && !lowers_fp8_dots)
    walk(out->body, [&](const Op& op) {
      if (op.kind == OpKind::DOT && (is_f8(out->type(op.operands[0]).dtype) ||
                                     is_f8(out->type(op.operands[1]).dtype)))
        fail(METILE_ERROR_INVALID_ARGUMENT, "passes", out->where(op.loc),
             "a dot on FP8 operands needs the \"fp8_dots\" pass on this device (it is disabled)");
    });
  result.program = std::move(out);
  return result;
}

}  // namespace metile

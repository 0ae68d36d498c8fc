/** \file tile_pass.h
 * Tile IR passes: each is a free function in its own file, registered once in tile_passes.def.
 * The Tile IR pipeline (tile_pipeline.cpp) runs them in a fixed, readable order before every
 * device's backend; tests run them by name. A pass may be switched off by name through
 * CompileOptions::disabled_passes (differential tests compare a program with and without it).
 */
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <variant>
#include <vector>

#include "ir/tile_ir.h"

namespace metile {

struct CompileOptions;

/**
 * The hidden parameters the passes appended after the user's, in this order: one i64 extent per
 * entry of `extent_of` (the index of the pointer parameter it measures: elements from the
 * argument's offset to the end of its buffer), then, when `error_flag`, a pointer to one i32
 * that the kernel sets to a site number (1-based index into `sites`, each "file:line: op: what
 * went wrong") when an access falls outside its buffer (check_bounds) or a loop's step is 0 at
 * run time (loop_steps). runtime/hidden_args.cpp passes them.
 */
struct TileHiddenArgs {
  std::vector<size_t> extent_of;
  bool error_flag = false;
  std::vector<std::string> sites;
  /**
   * The split_k pass's parameters, right after the user's (before the extents): the ticket
   * counters (ptr<i32>, one per output tile), the f32 workspace (ptr<f32>, n partial tiles of
   * `split_k_tile` elements per output tile) and n (i32). The runtime launches n times the
   * grid's axis 2. `split_k` is the option's value, n (2..64).
   */
  bool split_k_on = false;
  int64_t split_k = 0;
  int64_t split_k_tile = 0;
  /**
   * Loop steps the runtime checks on the host before a launch instead of through the flag (whose
   * read-back synchronizes every launch): a `for` at the top of the program body, which every
   * program runs, whose step is the user's scalar parameter `param`. A zero argument fails the
   * launch, before anything runs, with `sites[site - 1]`.
   */
  struct NonzeroParam {
    size_t param = 0;
    size_t site = 0;
  };
  std::vector<NonzeroParam> nonzero_params;
  bool empty() const {
    return extent_of.empty() && !error_flag && !split_k_on && nonzero_params.empty();
  }
};

struct TilePassContext {
  const CompileOptions& options;
  /** The device reports bad accesses itself (interp): no guards, no error flag. */
  bool device_checks_accesses = false;
  TileHiddenArgs& hidden;
  /** The device runs each program's tiles in order on one host thread (DeviceInfo): a tile
   * reduction is a cheap loop there, while lane-wise work costs per element. */
  bool whole_tiles_in_order = false;
  /** The device's GPU lowering takes FP8 dots itself (DeviceInfo::lowers_fp8_dots): fp8_dots
   * leaves them alone. */
  bool lowers_fp8_dots = false;
  /** Threadgroup memory a program may use on the device (DeviceInfo; 0: none): keep_rows keeps
   * longer rows there. */
  uint64_t threadgroup_memory_bytes = 0;
};

using TilePassFn = void (*)(Program&, const TilePassContext&);

struct TilePassInfo {
  std::string_view name;
  TilePassFn run;
  std::string_view summary;
};

#define TILE_PASS(name, fn, summary) void fn(Program& program, const TilePassContext& ctx);
#include "passes/tile/tile_passes.def"

/**
 * The integer values that are positive wherever they are defined: positive integer constants and
 * `maximum(x, c)` with c one of them (the divisor of the bounds pass's row counts).
 */
inline std::unordered_set<ValueId> positive_integers(const Program& p) {
  std::unordered_set<ValueId> out;
  walk(p.body, [&](const Op& op) {
    if (op.results.size() != 1 || is_float(p.type(op.result()).dtype)) return;
    if (op.kind == OpKind::CONST) {
      const auto* v = std::get_if<int64_t>(op.find_attr("value"));
      if (v != nullptr && *v > 0) out.insert(op.result());
    } else if (op.kind == OpKind::MAXIMUM && (out.count(op.operands[0]) || out.count(op.operands[1]))) {
      out.insert(op.result());
    }
  });
  return out;
}

/**
 * Whether `op` may run where the program does not run it, or more often (hoisted out of a loop,
 * copied in front of one): pure, no SIMT collective, no region, and unable to fault (integer
 * division, remainder, shifts and powers can, on the values a skipped iteration would not see;
 * a division by one of `positive` (positive_integers) cannot).
 */
inline bool runs_anywhere(const Program& p, const Op& op,
                          const std::unordered_set<ValueId>* positive = nullptr) {
  if (!has_trait(op.kind, kPure) || has_trait(op.kind, kSimt) || !op.regions.empty()) return false;
  switch (op.kind) {
    case OpKind::DIV:
    case OpKind::FLOORDIV:
    case OpKind::MOD:
      return is_float(p.type(op.result()).dtype) ||
             (positive != nullptr && positive->count(op.operands[1]) != 0);
    case OpKind::SHL:
    case OpKind::SHR:
    case OpKind::POW:
      return is_float(p.type(op.result()).dtype);
    default:
      return true;
  }
}

/** Every registered Tile IR pass, in tile_passes.def order. */
const std::vector<TilePassInfo>& tile_passes();
/** Runs the named pass and verifies the result; METILE_ERROR_INVALID_ARGUMENT for an unknown
 * name. A pass ctx.options.disabled_passes names does not run. */
void run_tile_pass(std::string_view name, Program& program, const TilePassContext& ctx);

}  // namespace metile

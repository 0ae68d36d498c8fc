/** \file options.h
 * The compile options that change generated code: what the C API's metile_compile_options
 * becomes, read by the Tile IR passes, layout assignment, lowering and the backends, and
 * hashed into the compile cache's key.
 */
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dot_precision.h"

namespace metile {

/** The pieces of a pass that CompileOptions::disabled_passes (and so METILE_GPU_OFF) may name
 * beside the passes themselves: the K-loop features inside GPU lowering (pipeline.cpp maps each to
 * its LowerOptions switch; "pipeline" is num_stages = 1), vectorize-access's one alignment test
 * per access ("one_align"), whole_tiles' last-first order ("last_first") and its branch around the
 * masks of dot loops ("whole_blocks"), layout assignment's
 * choices ("wide_chunks", "broadcast_loads", "warpgroup_kmajor_b", "warpgroup_register_a",
 * "warpgroup_stored_b");
 * fuse_reductions' running-sum form of centred squares ("running_sums") and its two counts per
 * row after the loop ("two_counts": off, a count per lane); keep_rows' rows in threadgroup memory
 * ("threadgroup_rows": off, the tiles are kept in registers or local arrays as for one-tile rows). */
inline constexpr std::array<std::string_view, 20> kPassPieces = {
    "async_copy", "aligned_body", "pipeline", "tma",
    "double_buffer", "stage_counter", "kmajor_b", "persistent", "one_align",
    "last_first", "wide_chunks", "fp8_promote", "broadcast_loads", "warpgroup_kmajor_b", "warpgroup_register_a",
    "warpgroup_stored_b", "running_sums", "two_counts", "whole_blocks", "threadgroup_rows"};

/** Earlier names of passes and pieces, still accepted wherever the current name is (users'
 * METILE_GPU_OFF settings and scripts): {earlier, current}. The warpgroup pieces were first named
 * after the PTX instruction that implements them; "preload", "serpentine", "ldmatrix" and
 * "early_copy" were pieces of lowering before they became GPU IR passes. */
struct PassAlias {
  std::string_view earlier, current;
};
inline constexpr std::array<PassAlias, 6> kPassAliases = {{
    {"wgmma_kmajor_b", "warpgroup_kmajor_b"}, {"wgmma_register_a", "warpgroup_register_a"},
    {"preload", "preload-fragments"}, {"serpentine", "serpentine-mma"}, {"ldmatrix", "ldmatrix-fragments"},
    {"early_copy", "issue-copies-early"}}};

/** GPU IR passes that run only where CompileOptions::enabled_passes (METILE_GPU_ON) names them:
 * new ones not yet measured on a device. Naming one in disabled_passes still turns it off. */
inline constexpr std::array<std::string_view, 1> kOptInPasses = {"specialize-warps"};

struct CompileOptions {
  int num_threads = 0;
  int allow_tf32 = -1;
  /** metile_compile_options.dot_precision (a DotPrecision); with allow_tf32, dot_default(). */
  int dot_precision = 0;
  int opt_level = 1;
  bool no_cache = false;
  /**
   * What not to run, by name: Tile IR passes (src/passes/tile/tile_passes.def), GPU IR passes
   * (src/passes/passes.def) and kPassPieces; METILE_GPU_OFF, a comma list of the same names, adds
   * to it. Differential tests and debugging only, since a disabled semantic pass changes results.
   * check_pass_names (passes/pass.h) refuses unknown names.
   */
  std::vector<std::string> disabled_passes;
  /** Whether disabled_passes names `name`, or an earlier name of it (kPassAliases). */
  bool disables(std::string_view name) const {
    for (const std::string& p : disabled_passes) {
      if (p == name) return true;
      for (const PassAlias& a : kPassAliases)
        if (p == a.earlier && name == a.current) return true;
    }
    return false;
  }
  /** Opt-in passes (kOptInPasses) to run; METILE_GPU_ON, a comma list of them, adds to it. */
  std::vector<std::string> enabled_passes;
  /** Whether the pipeline runs `name`: not disabled, and, for an opt-in pass, enabled. */
  bool runs(std::string_view name) const {
    if (disables(name)) return false;
    if (std::find(kOptInPasses.begin(), kOptInPasses.end(), name) == kOptInPasses.end()) return true;
    return std::find(enabled_passes.begin(), enabled_passes.end(), name) != enabled_passes.end();
  }
  /** Report the first access outside its buffer (METILE_ERROR_DEVICE with its source line)
   * instead of only keeping it inside; METILE_CHECK=1 turns it on for every compile. */
  bool check_bounds = false;
  /** No bounds guards (docs/semantics.md): an access outside its buffer is undefined behaviour. */
  bool unchecked = false;
  /** Run the "fuse_reductions" Tile IR pass (metile_compile_options.no_fuse_reductions). */
  bool fuse_reductions = true;
  /** Run the "keep_rows" Tile IR pass (metile_compile_options.keep_rows; off by default). */
  bool keep_rows = false;
  /** The K-loop pipeline's stages and the dot warp grid (metile_compile_options; 0 = choose). */
  int num_stages = 0;
  int warps_m = 0, warps_n = 0;
  /** Split-K parts of a GEMM's K loop (metile_compile_options.split_k: 0 = choose, 1 = off;
   * the "split_k" Tile IR pass; disabling that pass is 1). */
  int split_k = 0;
  /** At most this many registers a thread on cuda (metile_compile_options.maxnreg; 0: the
   * compiler's choice). */
  int max_registers = 0;
  /** The precision of dots without their own: dot_precision, else allow_tf32's (1: tf32,
   * 0: ieee), else DotPrecision::device_default (which each backend resolves). */
  DotPrecision dot_default() const {
    if (dot_precision != 0) return static_cast<DotPrecision>(dot_precision);
    if (allow_tf32 >= 0) return allow_tf32 ? DotPrecision::tf32 : DotPrecision::ieee;
    return DotPrecision::device_default;
  }
  /** Canonical text of the options that affect code (part of the cache key). */
  std::string key() const;
};

}  // namespace metile

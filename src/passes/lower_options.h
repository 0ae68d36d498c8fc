/** \file lower_options.h
 * The switches of the GPU middle: layout assignment (assign_layouts.h) and lowering (lower.h)
 * both read them, so they sit in a header of their own that neither side owns.
 */
#pragma once

#include <string>

#include "ir/dot_precision.h"

namespace metile {

struct LowerOptions {
  /** Threads per program instance; 0 lets lowering choose (T for SIMT kernels). */
  int num_threads = 0;
  /** The device name for error messages ("metal-sim"). */
  std::string device;
  /** The precision of dots without input_precision (CompileOptions::dot_default(); its
   * device_default is the target's GpuTarget::dot_default). */
  DotPrecision dot_default = DotPrecision::device_default;
  /**
   * A dot operand that comes straight from a tile_load is copied from device to threadgroup
   * memory with async_copy (cp.async on CUDA) instead of through registers (lower_dot.cpp).
   * Off: the register path, for differential tests.
   */
  bool async_copy = true;
  /**
   * The ldmatrix-fragments GPU IR pass runs (pipeline.cpp), so mma.sync may read 16-bit
   * fragments with ldmatrix: a K-major B (kmajor_b_fits) has no other read. Lowering itself
   * writes no ldmatrix choice.
   */
  bool ldmatrix_fragments = true;
  /**
   * Stages of the K-loop pipeline for dots whose operands are copied straight to threadgroup
   * memory (lower_pipeline.cpp): 0 = the target's choice (3 where copies are asynchronous, as
   * far as threadgroup memory allows), 1 = none.
   */
  int num_stages = 0;
  /**
   * Targets without asynchronous copies (Apple GPUs): a K loop that qualifies for the pipeline
   * keeps two threadgroup stages and loads the next iteration's tiles into registers before
   * this iteration's mmas, storing them into the other stage after (lower_double_buffer.cpp);
   * num_stages 1 or off (METILE_GPU_OFF=double_buffer): the single-buffer loop.
   */
  bool double_buffer = true;
  /**
   * Aligned body + masked tail for async copies of bounded tile_loads: a uniform test per copy
   * (the whole tile in bounds, rows and base aligned to the chunk) picks plain 16-byte copies,
   * else the per-chunk bounds path (lower_dot.cpp). Off: the per-chunk path always.
   */
  bool aligned_body = true;
  /**
   * A pipelined K loop carries its stage index (0, 1, .., stages-1, 0, ..) from iteration to
   * iteration instead of computing (iteration % stages) and the prefetch's stage from the
   * induction variable each step (lower_pipeline.cpp). Off: computed, for differential tests.
   */
  bool stage_counter = true;
  /**
   * mma.sync (CUDA): a dot's B = trans(tile_load) (attention's K^T) is copied as it is loaded,
   * n rows of k, straight to threadgroup memory, and its fragments are read by ldmatrix without
   * .trans (lower_trans_operand.cpp). Off: staged element by element through registers.
   */
  bool kmajor_b = true;
  /** The warp grid of dots on matrix units (metile_compile_options.warps_m/n); 0 = choose. */
  int warps_m = 0, warps_n = 0;
  /**
   * Dots that fit a warpgroup atom of the target (Hopper's, sm_90a) use it (dot_choices.cpp);
   * off: the warp-level atoms, for differential tests.
   */
  bool warpgroup = true;
  /**
   * A pipelined warpgroup dot's bounded tile_loads whose base, row stride and bounds are kernel
   * parameters or constants are copied by the tensor memory accelerator (cp.async.bulk.tensor,
   * completing on mbarriers) through tensor maps the runtime builds (lower_tma.cpp). Off: the
   * cp.async copies (METILE_GPU_OFF=tma).
   */
  bool tma = true;
  /**
   * A TMA-only warpgroup K loop nested in a loop over output tiles (persistent_range) keeps its
   * mbarriers across tiles and issues the next tile's first stages before this tile's
   * epilogue (lower_persistent.cpp). Off: each tile fills its pipeline after the previous
   * tile's epilogue (METILE_GPU_OFF=persistent).
   */
  bool persistent = true;
  /**
   * Canonical layouts take the target's wider chunks (GpuTarget::chunk_bytes: 16-byte runs of
   * 16-bit tiles on cuda). Off: 4 elements a chunk on every target (METILE_GPU_OFF=wide_chunks).
   */
  bool wide_chunks = true;
  /**
   * A tile loaded only to be broadcast (a row's scale, a bias row) is loaded in the layout the
   * broadcast reads, each thread the elements it needs. Off: loaded in the canonical layout and
   * moved through threadgroup memory (METILE_GPU_OFF=broadcast_loads).
   */
  bool broadcast_loads = true;
  /**
   * FP8 warpgroup dots add their warpgroup partial sums into the f32 accumulator every kFp8PromoteK
   * elements of K from a separate register tile (dot_choices.cpp). Off: fast accumulation,
   * straight into the accumulator (METILE_GPU_OFF=fp8_promote).
   */
  bool fp8_promote = true;
  /**
   * 16-bit warpgroup dots whose B is trans(tile_load) (attention's K^T) read B K-major, copied as
   * loaded, and stage an A computed outside their loop (attention's Q) into the swizzled layout
   * before it (dot_choices.cpp). Off: such dots keep mma.sync (METILE_GPU_OFF=warpgroup_kmajor_b).
   */
  bool warpgroup_kmajor_b = true;
  /**
   * A 16-bit warpgroup dot whose A is an element-wise function of another warpgroup dot's accumulator
   * (attention's P of its scores) takes A from registers in that accumulator's fragments
   * (dot_choices.cpp). Off: A is staged through threadgroup memory, which keeps such a dot on
   * mma.sync (METILE_GPU_OFF=warpgroup_register_a).
   */
  bool warpgroup_register_a = true;
  /**
   * A 16-bit warpgroup dot whose B is trans(t) with t computed in registers in the dot's block
   * (dot_scaled's decoded weights) stores t K-major into the swizzled B tile each iteration, while
   * A streams through the pipeline's ring (dot_choices.cpp, lower_pipeline.cpp). Off: such dots
   * keep mma.sync with B staged element by element (METILE_GPU_OFF=warpgroup_stored_b).
   */
  bool warpgroup_stored_b = true;
  /**
   * Consecutive whole-tile reductions of a dtype take turns between two scratch arrays
   * (lower_reduce.cpp), so the barrier that ends one orders nothing against the next one's
   * writes and the elide-barriers pass removes it. Off where that pass does not run
   * (METILE_GPU_OFF=elide-barriers, opt_level 0): one scratch array per dtype for every exchange.
   */
  bool alternate_scratch = true;
};

}  // namespace metile

/** \file in_place_reduce.h
 * Values that stay where a tile had them: how an axis reduction of a tile runs without moving it
 * between threads (its result's layout, replicated over the lanes that combine it) and the
 * register map that broadcasts such a value back over the tile. Layout assignment asks the
 * first to give a reduction of a fragment-layout tile the layout it leaves (assign_layouts.cpp);
 * lowering follows both plans (lower_reduce.cpp). Everything this cannot prove goes through
 * threadgroup memory instead.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"

namespace metile {

/** How an axis reduction of a tile in layout `in` runs without moving the tile. */
struct InPlaceReduce {
  std::vector<int64_t> fold;         // operand register -> result register (per thread)
  gpu::Layout part;                  // the folded values' layout, replicated over the flipped bits
  std::vector<int64_t> lane_masks;   // shuffle_xor masks whose lanes hold the same outputs
  std::vector<int> sg_bits;          // thread-index bits of simdgroups holding the same outputs
};
/** The plan for reducing axis `axis` of the 2-D tile shape s (outputs elements) laid out as
 * `in`, or nothing when the layout does not allow it (padding, non power-of-two counts, an
 * output spread other than over whole lane or simdgroup bits, a result map not linear in the
 * thread index). */
std::optional<InPlaceReduce> plan_in_place_reduce(const gpu::Layout& in, int64_t threads,
                                                  int64_t width, const Shape& s, int axis,
                                                  int64_t outputs);
/** For each register of `to`, the register of `from` in the same thread that holds
 * source(its element), the same in every thread; nothing when some thread lacks one. */
std::optional<std::vector<int64_t>> gather_map(const gpu::Layout& from, const gpu::Layout& to,
                                               int64_t threads,
                                               const std::function<int64_t(int64_t)>& source);

}  // namespace metile

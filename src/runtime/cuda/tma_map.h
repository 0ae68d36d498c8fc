/** \file tma_map.h
 * Turning a kernel's TMA tensor map description (src/target/tma.h) and one launch's arguments
 * into what cuTensorMapEncodeTiled takes, or the reason TMA cannot read that tensor (the launch
 * then runs the kernel built without TMA, cuda_device.cpp). No driver needed: unit-tested on
 * any machine.
 *
 * TMA's rules that a launch can break: the base address and the row stride in bytes must be
 * multiples of 16 (the stride also below 2^40), and the bounds at least 1 and below 2^31 (the
 * kernel's coordinates are 32-bit). metile's own: every element of the tensor (rows x cols at
 * the row stride) lies inside the argument's buffer, since a TMA copy reads the whole box
 * without the bounds pass's extent checks (docs/semantics.md: no access leaves its buffer). A map with
 * clamp=1 (checked programs) first keeps its bounds inside the buffer as the bounds pass does, so
 * its tensor always lies inside; a row stride below 1 or no row left falls back. A stack of
 * matrices (slabs=1) holds the slabs that lie wholly inside the buffer; a clamped one falls back
 * where the buffer ends inside a slab (the guarded loads would read that slab's first rows).
 */
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "target/tma.h"

namespace metile::cuda {

struct TmaEncoding {
  int data_type = 0;       // CU_TENSOR_MAP_DATA_TYPE_UINT8/16/32: the bits are copied as they are
  uint64_t base = 0;
  uint32_t rank = 2;       // 3 for a stack of matrices (TmaMap::slabs)
  uint64_t dims[3] = {};   // {cols, rows, slabs}: the contiguous axis first
  uint64_t stride[2] = {}; // bytes between rows, between slabs
  uint32_t box[3] = {};    // {box_cols, box_rows, 1}
  int swizzle = 0;         // CU_TENSOR_MAP_SWIZZLE_32B/64B/128B
};

/**
 * The encoding of `m` for a launch whose base pointer is `base`, with `bytes` of its buffer from
 * there on; `param` gives an integer parameter's value (nullopt when it is not one). nullopt
 * with *why when TMA's rules exclude it or the tensor reaches past the buffer.
 */
std::optional<TmaEncoding> tma_encoding(const TmaMap& m, uint64_t base, uint64_t bytes,
                                        const std::function<std::optional<int64_t>(int64_t)>& param,
                                        std::string* why);

}  // namespace metile::cuda

/** \file reduction.h
 * What a reduction computes: sum, max or min. Tile IR spells it as the op (REDUCE_SUM/MAX/MIN),
 * GPU IR as the `reduce` field of simd_reduce and reg_reduce; every lowering, emitter and
 * executor asks here for the op that combines two partials and the value a fold starts from.
 */
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "ir/ops.h"
#include "ir/types.h"

namespace metile {

enum class Reduction : uint8_t { sum, max, min };

/** The reduction a Tile IR REDUCE_* op performs; nullopt for every other op. */
inline std::optional<Reduction> reduction_of(OpKind k) {
  switch (k) {
    case OpKind::REDUCE_SUM: return Reduction::sum;
    case OpKind::REDUCE_MAX: return Reduction::max;
    case OpKind::REDUCE_MIN: return Reduction::min;
    default: return std::nullopt;
  }
}

/** The element-wise op that combines two partials: ADD, MAXIMUM or MINIMUM. */
inline OpKind combining_op(Reduction r) {
  return r == Reduction::sum ? OpKind::ADD : r == Reduction::max ? OpKind::MAXIMUM : OpKind::MINIMUM;
}

/** "sum", "max", "min" (the GPU IR printer, value names). */
inline std::string_view reduction_name(Reduction r) {
  return r == Reduction::sum ? "sum" : r == Reduction::max ? "max" : "min";
}

/** The identity of a float reduction: 0, -inf (max) or +inf (min), so NaN-free folds ignore it. */
inline double float_identity(Reduction r) {
  double inf = std::numeric_limits<double>::infinity();
  return r == Reduction::sum ? 0.0 : r == Reduction::max ? -inf : inf;
}

/** The identity of an integer (or bool) reduction: 0, the lowest (max) or highest (min) value. */
inline int64_t int_identity(Reduction r, DType d) {
  if (r == Reduction::sum) return 0;
  std::optional<IntRange> range = int_range(d);
  if (!range) return 0;  // not an integer dtype: callers check is_float first
  return r == Reduction::max ? range->lo : range->hi;
}

}  // namespace metile

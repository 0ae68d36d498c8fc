/** \file values.h
 * Run-time values of the interp device and the per-element semantics of the Tile IR's
 * element-wise ops (the contract is written out at the top of executor.cpp).
 *
 * A value is a row-major array of elements (one for a scalar). An element holds a float (f32,
 * f16, bf16, f8e4m3, f8e5m2; all but f32 already rounded to their storage type), an integer
 * (every integer dtype and bool, normalized to its dtype: sign- or zero-extended to 64 bits, bool
 * 0 or 1), or a pointer (an element offset into a memory region, the region index kept
 * alongside).
 */
#pragma once

#include <cmath>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops.h"
#include "ir/types.h"

namespace metile::interp {

union Elem {
  int64_t i;
  float f;
};

inline Elem int_elem(int64_t v) {
  Elem e;
  e.i = v;
  return e;
}
inline Elem float_elem(float v) {
  Elem e;
  e.i = 0;
  e.f = v;
  return e;
}

struct Val {
  std::vector<Elem> e;
  std::vector<uint32_t> region;  // pointer values only: the memory region of each element
};

/** Thrown by the element functions; the executor adds the op, its location and the program id. */
struct OpFault {
  std::string message;
};

/** Stops the current op with `message` (the executor adds where). */
[[noreturn]] inline void fault(std::string message) { throw OpFault{std::move(message)}; }

/** Wraps `v` to the dtype's width (two's complement), or to 0/1 for bool. */
int64_t wrap_int(int64_t v, DType d);
/** Rounds an f32 result to the storage type (round to nearest even). */
float round_float(float v, DType d);

/**
 * Float maximum / minimum (and the max / min reductions and atomics): IEEE 754-2019
 * maximumNumber / minimumNumber, where quiet and signalling NaNs alike are missing values, as on
 * every compiled device. libm's fmax follows the 2008 maxNum instead and turns a signalling NaN
 * operand into NaN.
 */
inline float max_number(float a, float b) { return std::isnan(a) ? b : std::isnan(b) ? a : std::fmax(a, b); }
inline float min_number(float a, float b) { return std::isnan(a) ? b : std::isnan(b) ? a : std::fmin(a, b); }

/** One element of a binary op or comparison on operands of dtype `d`. */
Elem binary_elem(OpKind kind, DType d, Elem a, Elem b);
/** One element of a unary op on an operand of dtype `d`. */
Elem unary_elem(OpKind kind, DType d, Elem a);
/** Converts one element from dtype `from` to dtype `to`. */
Elem cast_elem(DType from, DType to, Elem a);
/** One element's bits (as stored in memory) read as dtype `to`, of `from`'s width. */
Elem bitcast_elem(DType from, DType to, Elem a);

/** Reads / writes one element of dtype `d` at `p` (unaligned access is fine). */
Elem read_elem(const uint8_t* p, DType d);
void write_elem(uint8_t* p, DType d, Elem v);

/** A scalar launch argument (LaunchArg::bits) as an element. */
Elem elem_from_bits(uint64_t bits, DType d);

}  // namespace metile::interp

/** \file const_range.h
 * Whether a constant is a value of its dtype. The builder and the verifier reject constants that
 * are not: devices would disagree on them (some wrap, some keep the wider value).
 */
#pragma once

#include <cstdint>

#include "ir/types.h"

namespace metile {

/** Whether `v` is a value of the integer or bool dtype `t` (bool: 0 or 1). */
bool int_fits(DType t, int64_t v);
/** Whether the float `v` rounds to a finite value of the float dtype `t` (inf and NaN: true, but
 * f8e4m3 has no infinity); for the FP8 types, whether |v| is at most the largest finite value. */
bool float_fits(DType t, double v);

}  // namespace metile

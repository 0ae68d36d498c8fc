/** \file dot_precision.h
 * How an f32 `dot` rounds its inputs (docs/semantics.md, "dot precision"): the `input_precision`
 * attribute of a dot (Triton's spellings) and the compile's default for dots without one. The
 * enum's values are the C ABI's METILE_DOT_PRECISION_*.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "ir/tile_ir.h"

namespace metile {

enum class DotPrecision : int {
  /** No attribute, no option: f32 accuracy by the device's fastest means (cuda: tf32x3 on its
   * tensor cores; interp, cpu, metal, metal-sim: ieee). */
  device_default = 0,
  ieee = 1,    // f32 products and sums (FMA allowed)
  tf32 = 2,    // inputs rounded to TF32 (10 mantissa bits), products exact, sums in f32
  tf32x3 = 3,  // each input split into a TF32 high part and a TF32 residual; hi*hi + hi*lo + lo*hi
};

/** The attribute's spellings, in enum order from ieee. */
inline constexpr const char* kDotPrecisionNames[] = {"ieee", "tf32", "tf32x3"};
inline constexpr const char* kDotPrecisionList = "\"ieee\", \"tf32\", \"tf32x3\"";

inline std::optional<DotPrecision> parse_dot_precision(std::string_view s) {
  for (int i = 0; i < 3; ++i)
    if (s == kDotPrecisionNames[i]) return static_cast<DotPrecision>(i + 1);
  return std::nullopt;
}

inline const char* dot_precision_name(DotPrecision p) {
  return p == DotPrecision::device_default ? "default" : kDotPrecisionNames[static_cast<int>(p) - 1];
}

/** A dot's own precision, or `fallback` (the compile's default) when it has none. */
inline DotPrecision dot_precision(const Op& dot, DotPrecision fallback) {
  if (const AttrValue* a = dot.find_attr("input_precision"))
    if (const std::string* s = std::get_if<std::string>(a))
      if (auto p = parse_dot_precision(*s)) return *p;
  return fallback;
}

/** Round to TF32 as cvt.rna.tf32.f32 does: nearest, ties away from zero, low 13 bits cleared;
 * infinities and NaNs pass through. */
inline float round_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace metile

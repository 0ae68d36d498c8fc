/** \file float8.h
 * FP8 conversions, the one implementation of docs/semantics.md's FP8 rules: the interp device
 * includes this file and the cpu, MSL and CUDA code generators paste it (embedded like
 * swizzle.h), so every device gives the same bits. Written in the subset of C++ that host C++,
 * MSL and CUDA all accept, in integer arithmetic on f32 bit patterns, so no rounding mode,
 * subnormal flushing or fast-math setting of a device can change a result. Generated code that
 * uses FP8 defines MT_FN (its function qualifiers), mt_f32_bits(float) and
 * mt_bits_f32(unsigned int) and pastes this file after them (cpu_cpp.cpp, msl.cpp, cuda.cpp);
 * host C++ without MT_FN gets plain inline definitions.
 *
 * Formats: a sign bit, 7 - m exponent bits with bias `bias`, m mantissa bits.
 *   f8e4m3 (m = 3, bias 7): the "fn" variant: no infinities, NaN only as S.1111.111, max 448.
 *   f8e5m2 (m = 2, bias 15): IEEE-like: S.11111.00 is infinity, S.11111.xx NaN, max 57344.
 */
#ifndef METILE_SUPPORT_FLOAT8_H
#define METILE_SUPPORT_FLOAT8_H

#ifndef MT_FN
#define METILE_FLOAT8_HOST
#define MT_FN inline
inline unsigned int mt_f32_bits(float f) { return __builtin_bit_cast(unsigned int, f); }
inline float mt_bits_f32(unsigned int u) { return __builtin_bit_cast(float, u); }
#endif

// f32 -> FP8, round to nearest even. Finite magnitudes beyond the largest finite code
// (`max_code`) saturate to it; an infinity stays one where the format has them (`ieee`, whose
// infinity is the code after `max_code`) and saturates where it has not; NaN gives S.1..1 with
// the sign kept.
MT_FN unsigned char mt_f32_to_f8(float f, unsigned int m, int bias, unsigned int max_code,
                                 bool ieee) {
  unsigned int u = mt_f32_bits(f);
  unsigned int sign = (u >> 24) & 0x80u;
  unsigned int a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
  if (ieee && a == 0x7f800000u) return (unsigned char)(sign | (max_code + 1u));
  int e = int(a >> 23) - 127;  // the exponent of a normal f32 (f32 subnormals round to zero)
  int emin = 1 - bias;         // the format's smallest normal exponent
  // Keep m bits below the leading one, or fewer for a subnormal result (units of 2^(emin - m)).
  int shift = 23 - int(m) + (e < emin ? emin - e : 0);
  if (shift > 24) return (unsigned char)sign;  // below half the smallest subnormal
  unsigned int mant = (a & 0x7fffffu) | 0x800000u;
  unsigned int q = mant >> shift;
  unsigned int rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  q += (rem > half || (rem == half && (q & 1u) != 0u)) ? 1u : 0u;
  // Codes are consecutive across binades: a rounding carry out of the mantissa, or out of the
  // subnormals, lands on the next binade's first code by itself.
  unsigned int code = (e >= emin ? (unsigned int)(e - emin) << m : 0u) + q;
  return (unsigned char)(sign | (code < max_code ? code : max_code));
}

// FP8 -> f32, exact. `ieee` selects E5M2's specials (all-ones exponent: infinity or NaN); without
// it only S.1..1 is NaN (E4M3 fn).
MT_FN float mt_f8_to_f32(unsigned int b, unsigned int m, int bias, bool ieee) {
  unsigned int sign = (b & 0x80u) << 24;
  unsigned int mag = b & 0x7fu;
  unsigned int exp = mag >> m, mant = mag & ((1u << m) - 1u);
  if (ieee ? exp == (0x7fu >> m) : mag == 0x7fu)
    return mt_bits_f32(sign | (ieee && mant == 0u ? 0x7f800000u : 0x7fc00000u));
  if (exp == 0u) {
    float v = float(mant) * mt_bits_f32((unsigned int)(128 - bias - int(m)) << 23);  // 2^(1-bias-m)
    return sign != 0u ? -v : v;
  }
  return mt_bits_f32(sign | ((unsigned int)(int(exp) + 127 - bias) << 23) | (mant << (23u - m)));
}

MT_FN unsigned char mt_f32_to_f8e4m3(float f) { return mt_f32_to_f8(f, 3u, 7, 0x7eu, false); }
MT_FN unsigned char mt_f32_to_f8e5m2(float f) { return mt_f32_to_f8(f, 2u, 15, 0x7bu, true); }
MT_FN float mt_f8e4m3_to_f32(unsigned char b) { return mt_f8_to_f32(b, 3u, 7, false); }
MT_FN float mt_f8e5m2_to_f32(unsigned char b) { return mt_f8_to_f32(b, 2u, 15, true); }
MT_FN float mt_round_f8e4m3(float f) { return mt_f8e4m3_to_f32(mt_f32_to_f8e4m3(f)); }
MT_FN float mt_round_f8e5m2(float f) { return mt_f8e5m2_to_f32(mt_f32_to_f8e5m2(f)); }

#ifdef METILE_FLOAT8_HOST
#undef MT_FN
#undef METILE_FLOAT8_HOST
#endif

#endif  // METILE_SUPPORT_FLOAT8_H

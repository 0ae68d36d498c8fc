/** \file metal_shim_math.h
 * metal_shim.h's math and relational functions (MSL's metal_math, metal_common,
 * metal_relational), over the scalar and vector types metal_shim.h defines first; included by it,
 * never on its own.
 */
#pragma once

namespace metal {

// ---- math ----------------------------------------------------------------------------------
// Float functions map to clang builtins (no <math.h>, whose global overloads would make calls
// such as exp(1) ambiguous); half computes in float; vectors apply the scalar function per lane.

#define METAL_SIM_FLOAT1(name, expr)                                      \
  inline float name(float x) { return expr; }                             \
  inline half name(half h) { return half(name(float(h))); }               \
  template <typename V, detail::when<detail::is_vector<V> &&              \
                                     detail::is_float_like<V>> = 0>       \
  inline V name(V v) {                                                    \
    return detail::map(v, [](auto e) { return name(e); });                \
  }
#define METAL_SIM_FLOAT2(name, expr)                                      \
  inline float name(float x, float y) { return expr; }                    \
  inline half name(half a, half b) { return half(name(float(a), float(b))); } \
  template <typename V, detail::when<detail::is_vector<V> &&              \
                                     detail::is_float_like<V>> = 0>       \
  inline V name(V a, V b) {                                               \
    return detail::map(a, b, [](auto p, auto q) { return name(p, q); });  \
  }

METAL_SIM_FLOAT1(exp, __builtin_expf(x))
METAL_SIM_FLOAT1(exp2, __builtin_exp2f(x))
METAL_SIM_FLOAT1(exp10, __builtin_powf(10.0f, x))
METAL_SIM_FLOAT1(log, __builtin_logf(x))
METAL_SIM_FLOAT1(log2, __builtin_log2f(x))
METAL_SIM_FLOAT1(log10, __builtin_log10f(x))
METAL_SIM_FLOAT1(sqrt, __builtin_sqrtf(x))
METAL_SIM_FLOAT1(rsqrt, 1.0f / __builtin_sqrtf(x))
METAL_SIM_FLOAT1(fabs, __builtin_fabsf(x))
METAL_SIM_FLOAT1(sin, __builtin_sinf(x))
METAL_SIM_FLOAT1(cos, __builtin_cosf(x))
METAL_SIM_FLOAT1(tan, __builtin_tanf(x))
METAL_SIM_FLOAT1(asin, __builtin_asinf(x))
METAL_SIM_FLOAT1(acos, __builtin_acosf(x))
METAL_SIM_FLOAT1(atan, __builtin_atanf(x))
METAL_SIM_FLOAT1(sinh, __builtin_sinhf(x))
METAL_SIM_FLOAT1(cosh, __builtin_coshf(x))
METAL_SIM_FLOAT1(tanh, __builtin_tanhf(x))
METAL_SIM_FLOAT1(asinh, __builtin_asinhf(x))
METAL_SIM_FLOAT1(acosh, __builtin_acoshf(x))
METAL_SIM_FLOAT1(atanh, __builtin_atanhf(x))
METAL_SIM_FLOAT1(floor, __builtin_floorf(x))
METAL_SIM_FLOAT1(ceil, __builtin_ceilf(x))
METAL_SIM_FLOAT1(round, __builtin_roundf(x))
METAL_SIM_FLOAT1(trunc, __builtin_truncf(x))
METAL_SIM_FLOAT1(rint, __builtin_rintf(x))
METAL_SIM_FLOAT1(fract, __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f))
METAL_SIM_FLOAT1(saturate, __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f))
METAL_SIM_FLOAT1(sign, x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == x ? x : 0.0f)
METAL_SIM_FLOAT2(pow, __builtin_powf(x, y))
METAL_SIM_FLOAT2(powr, __builtin_powf(x, y))
METAL_SIM_FLOAT2(atan2, __builtin_atan2f(x, y))
METAL_SIM_FLOAT2(fmod, __builtin_fmodf(x, y))
METAL_SIM_FLOAT2(copysign, __builtin_copysignf(x, y))
METAL_SIM_FLOAT2(fdim, __builtin_fdimf(x, y))
METAL_SIM_FLOAT2(fmax, __builtin_fmaxf(x, y))
METAL_SIM_FLOAT2(fmin, __builtin_fminf(x, y))
METAL_SIM_FLOAT2(divide, x / y)
METAL_SIM_FLOAT2(step, y < x ? 0.0f : 1.0f)
#undef METAL_SIM_FLOAT1
#undef METAL_SIM_FLOAT2

inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline half fma(half a, half b, half c) {
  return half(__builtin_fmaf(float(a), float(b), float(c)));
}
inline float mix(float x, float y, float a) { return x + (y - x) * a; }
inline half mix(half x, half y, half a) { return half(mix(float(x), float(y), float(a))); }
inline float smoothstep(float e0, float e1, float x) {
  float t = __builtin_fminf(__builtin_fmaxf((x - e0) / (e1 - e0), 0.0f), 1.0f);
  return t * t * (3.0f - 2.0f * t);
}
template <typename V, detail::when<detail::is_vector<V> && detail::is_float_like<V>> = 0>
inline V fma(V a, V b, V c) {
  return detail::map(a, b, c, [](auto p, auto q, auto r) { return fma(p, q, r); });
}
template <typename V, detail::when<detail::is_vector<V> && detail::is_float_like<V>> = 0>
inline V mix(V x, V y, V a) {
  return detail::map(x, y, a, [](auto p, auto q, auto r) { return mix(p, q, r); });
}

template <typename V, detail::when<detail::is_vector<V> && detail::is_float_like<V>> = 0>
inline detail::element_of<V> dot(V a, V b) {
  float s = 0.0f;
  for (int i = 0; i < detail::size_of<V>; ++i) s += float(a[i]) * float(b[i]);
  return detail::element_of<V>(s);
}

// max/min: fmax/fmin for floating point (a NaN operand yields the other one), plain compare else.
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline half max(half a, half b) { return half(__builtin_fmaxf(float(a), float(b))); }
inline half min(half a, half b) { return half(__builtin_fminf(float(a), float(b))); }
#define METAL_SIM_INTEGER(T)                                             \
  inline T max(T a, T b) { return a < b ? b : a; }                      \
  inline T min(T a, T b) { return b < a ? b : a; }                      \
  inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
METAL_SIM_INTEGER(signed char)
METAL_SIM_INTEGER(uchar)
METAL_SIM_INTEGER(short)
METAL_SIM_INTEGER(ushort)
METAL_SIM_INTEGER(int)
METAL_SIM_INTEGER(uint)
METAL_SIM_INTEGER(long)
METAL_SIM_INTEGER(ulong)
#undef METAL_SIM_INTEGER
inline float clamp(float x, float lo, float hi) { return min(max(x, lo), hi); }
inline half clamp(half x, half lo, half hi) { return min(max(x, lo), hi); }
template <typename V, detail::when<detail::is_vector<V>> = 0>
inline V max(V a, V b) {
  return detail::map(a, b, [](auto p, auto q) { return max(p, q); });
}
template <typename V, detail::when<detail::is_vector<V>> = 0>
inline V min(V a, V b) {
  return detail::map(a, b, [](auto p, auto q) { return min(p, q); });
}
template <typename V, detail::when<detail::is_vector<V>> = 0>
inline V clamp(V x, V lo, V hi) {
  return min(max(x, lo), hi);
}

inline float abs(float x) { return __builtin_fabsf(x); }
inline half abs(half x) { return half(__builtin_fabsf(float(x))); }
inline int abs(int x) { return x < 0 ? -x : x; }
inline long abs(long x) { return x < 0 ? -x : x; }
inline short abs(short x) { return short(x < 0 ? -x : x); }
inline signed char abs(signed char x) { return (signed char)(x < 0 ? -x : x); }
template <typename V, detail::when<detail::is_vector<V>> = 0>
inline V abs(V v) {
  return detail::map(v, [](auto e) { return abs(e); });
}

inline uint popcount(uint x) { return uint(__builtin_popcount(x)); }
inline uint clz(uint x) { return x == 0 ? 32u : uint(__builtin_clz(x)); }
inline uint ctz(uint x) { return x == 0 ? 32u : uint(__builtin_ctz(x)); }
inline int popcount(int x) { return int(popcount(uint(x))); }
inline int clz(int x) { return int(clz(uint(x))); }
inline int ctz(int x) { return int(ctz(uint(x))); }

// ---- relational ------------------------------------------------------------------------------

inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
inline bool signbit(float x) { return __builtin_signbit(x); }
inline bool isnan(half x) { return isnan(float(x)); }
inline bool isinf(half x) { return isinf(float(x)); }
inline bool isfinite(half x) { return isfinite(float(x)); }
inline bool signbit(half x) { return signbit(float(x)); }
#define METAL_SIM_TEST(name)                                                           \
  template <typename V, detail::when<detail::is_vector<V> && detail::is_float_like<V>> = 0> \
  inline vec<char, detail::size_of<V>> name(V v) {                                    \
    return detail::test(v, [](auto e) { return name(e); });                           \
  }
METAL_SIM_TEST(isnan)
METAL_SIM_TEST(isinf)
METAL_SIM_TEST(isfinite)
METAL_SIM_TEST(signbit)
#undef METAL_SIM_TEST

/** all/any take bool vectors and the integer masks that vector comparisons produce. */
template <typename V, detail::when<detail::is_vector<V>> = 0>
inline bool all(V v) {
  for (int i = 0; i < detail::size_of<V>; ++i)
    if (!v[i]) return false;
  return true;
}
template <typename V, detail::when<detail::is_vector<V>> = 0>
inline bool any(V v) {
  for (int i = 0; i < detail::size_of<V>; ++i)
    if (v[i]) return true;
  return false;
}
inline bool all(bool b) { return b; }
inline bool any(bool b) { return b; }

/** select(a, b, c): b where c is true, else a; c is a bool, a bool vector or a comparison mask. */
template <typename T, typename C>
inline T select(T a, T b, C c) {
  if constexpr (detail::is_vector<T> && detail::is_vector<C>) {
    static_assert(detail::size_of<T> == detail::size_of<C>, "select: condition size differs");
    T r;
    for (int i = 0; i < detail::size_of<T>; ++i) r[i] = c[i] ? b[i] : a[i];
    return r;
  } else {
    static_assert(!detail::is_vector<C>, "select: a vector condition needs vector operands");
    return c ? b : a;
  }
}

template <typename T, typename U>
inline T as_type(const U& u) {
  static_assert(sizeof(T) == sizeof(U), "as_type: the two types differ in size");
  return __builtin_bit_cast(T, u);
}

namespace precise {
using metal::acos; using metal::acosh; using metal::asin; using metal::asinh; using metal::atan;
using metal::atan2; using metal::atanh; using metal::ceil; using metal::cos; using metal::cosh;
using metal::divide; using metal::exp; using metal::exp10; using metal::exp2; using metal::fabs;
using metal::floor; using metal::fmax; using metal::fmin; using metal::fmod; using metal::fract;
using metal::log; using metal::log10; using metal::log2; using metal::pow; using metal::powr;
using metal::rint; using metal::round; using metal::rsqrt; using metal::sin; using metal::sinh;
using metal::sqrt; using metal::tan; using metal::tanh; using metal::trunc;
}  // namespace precise
namespace fast {
using namespace precise;
}  // namespace fast

}  // namespace metal

// metile MSL prelude: pasted after `using namespace metal;` into every generated Metal kernel
// (src/codegen/msl.cpp). It defines the helpers the C-like emitter (src/codegen/c_like.h)
// spells ops with, so that every op has the meaning of docs/semantics.md on any input: wrapping
// integer arithmetic, non-trapping division and shifts, saturating float -> int, maxNum/minNum.

#define MT_FN inline
typedef ulong mt_u64;

// ---- integers: two's complement wrap-around (signed overflow is undefined in C++) -----------

inline int mt_wrap_add(int a, int b) { return as_type<int>(as_type<uint>(a) + as_type<uint>(b)); }
inline int mt_wrap_sub(int a, int b) { return as_type<int>(as_type<uint>(a) - as_type<uint>(b)); }
inline int mt_wrap_mul(int a, int b) { return as_type<int>(as_type<uint>(a) * as_type<uint>(b)); }
inline int mt_wrap_neg(int a) { return as_type<int>(0u - as_type<uint>(a)); }
inline int mt_wrap_abs(int a) { return a < 0 ? mt_wrap_neg(a) : a; }
inline long mt_wrap_add(long a, long b) { return as_type<long>(as_type<ulong>(a) + as_type<ulong>(b)); }
inline long mt_wrap_sub(long a, long b) { return as_type<long>(as_type<ulong>(a) - as_type<ulong>(b)); }
inline long mt_wrap_mul(long a, long b) { return as_type<long>(as_type<ulong>(a) * as_type<ulong>(b)); }
inline long mt_wrap_neg(long a) { return as_type<long>(0ul - as_type<ulong>(a)); }
inline long mt_wrap_abs(long a) { return a < 0 ? mt_wrap_neg(a) : a; }

// mt_div, mt_mod, mt_floordiv, mt_shl, mt_shr: gpu_integer.h, pasted after this prelude.
inline float mt_floordiv(float a, float b) { return floor(a / b); }
inline half mt_floordiv(half a, half b) { return floor(a / b); }

// ---- floats ------------------------------------------------------------------------------

// maxNum/minNum: a NaN operand yields the other one.
inline float mt_fmax(float a, float b) { return fmax(a, b); }
inline float mt_fmin(float a, float b) { return fmin(a, b); }
inline half mt_fmax(half a, half b) { return fmax(a, b); }
inline half mt_fmin(half a, half b) { return fmin(a, b); }
inline float mt_sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
inline float mt_rsqrt(float x) { return 1.0f / sqrt(x); }

// MSL has no erf. Polynomials fitted for metile (least squares against a float64 erf) keep it
// within 2 ulp of libm's erff everywhere: |x| < 1 as x + x * P(x^2) (the leading term added last,
// so tiny and subnormal x keep their precision); 1 <= |x| < 4 as 1 - exp(-x^2) * R(|x|) on two
// pieces; beyond, erf rounds to 1. bindings/python/tests/test_nan_rules.py checks it against
// libm over the whole range.
inline float mt_erf(float x) {
  float a = fabs(x), y;
  if (a < 1.0f) {
    float u = a * a;
    float p = -9.809228963e-06f;
    p = p * u + 1.131310470e-04f;
    p = p * u - 8.490193940e-04f;
    p = p * u + 5.221422822e-03f;
    p = p * u - 2.686555830e-02f;
    p = p * u + 1.128378446e-01f;
    p = p * u - 3.761263858e-01f;
    p = p * u + 1.283791671e-01f;  // 2/sqrt(pi) - 1
    y = a + a * p;
  } else if (a < 4.0f) {
    const bool near = a < 2.0f;
    float t = a - (near ? 1.5f : 3.0f), r;
    if (near) {
      r = 2.440324026e-05f;
      r = r * t - 7.739639444e-05f;
      r = r * t + 2.228926272e-04f;
      r = r * t - 6.607943133e-04f;
      r = r * t + 1.886186454e-03f;
      r = r * t - 5.146075181e-03f;
      r = r * t + 1.337733810e-02f;
      r = r * t - 3.293090038e-02f;
      r = r * t + 7.615103991e-02f;
      r = r * t - 1.636229178e-01f;
      r = r * t + 3.215854165e-01f;
    } else {
      r = 3.362749034e-07f;
      r = r * t - 1.423191824e-06f;
      r = r * t + 5.094579735e-06f;
      r = r * t - 2.080448119e-05f;
      r = r * t + 8.357998779e-05f;
      r = r * t - 3.242027992e-04f;
      r = r * t + 1.223033300e-03f;
      r = r * t - 4.479418032e-03f;
      r = r * t + 1.588437162e-02f;
      r = r * t - 5.437226061e-02f;
      r = r * t + 1.790011512e-01f;
    }
    y = 1.0f - exp(-a * a) * r;
  } else {
    y = isnan(a) ? a : 1.0f;
  }
  return copysign(y, x);  // erf(-0) is -0
}

// Float -> integer: truncation toward zero, saturating at the type's range, NaN -> 0.
template <typename T>
inline T mt_f2i(float x) {
  const bool is_signed = T(-1) < T(0);
  const float lo = is_signed ? -float(1ul << (sizeof(T) * 8 - 1)) : 0.0f;
  const float hi = is_signed ? float(1ul << (sizeof(T) * 8 - 1)) : 2.0f * float(1ul << (sizeof(T) * 8 - 1));
  if (isnan(x)) return T(0);
  if (x <= lo) return is_signed ? T(1ul << (sizeof(T) * 8 - 1)) : T(0);
  if (x >= hi) return T(~(is_signed ? (1ul << (sizeof(T) * 8 - 1)) : 0ul));
  return T(x);
}

// ---- atomics: mt_atomic_<op>(address, [cmp,] value) -> the old value ------------------------
// Relaxed order, the only one Metal has. int and uint have every op; float only add (lowering
// rejects the rest). cas retries the weak exchange until it fails for a real mismatch.
#define MT_ATOMIC(T, A)                                                                          \
  inline T mt_atomic_add(device T* p, T v) { return atomic_fetch_add_explicit((device A*)p, v, memory_order_relaxed); } \
  inline T mt_atomic_max(device T* p, T v) { return atomic_fetch_max_explicit((device A*)p, v, memory_order_relaxed); } \
  inline T mt_atomic_min(device T* p, T v) { return atomic_fetch_min_explicit((device A*)p, v, memory_order_relaxed); } \
  inline T mt_atomic_xchg(device T* p, T v) { return atomic_exchange_explicit((device A*)p, v, memory_order_relaxed); } \
  inline T mt_atomic_cas(device T* p, T cmp, T v) {                                              \
    T seen = cmp;                                                                                \
    while (!atomic_compare_exchange_weak_explicit((device A*)p, &seen, v, memory_order_relaxed,   \
                                                  memory_order_relaxed)) {                       \
      if (seen != cmp) return seen;                                                              \
    }                                                                                            \
    return cmp;                                                                                  \
  }
MT_ATOMIC(int, atomic_int)
MT_ATOMIC(uint, atomic_uint)
#undef MT_ATOMIC
inline float mt_atomic_add(device float* p, float v) {
  return atomic_fetch_add_explicit((device atomic_float*)p, v, memory_order_relaxed);
}

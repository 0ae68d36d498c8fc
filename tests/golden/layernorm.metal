#include <metal_stdlib>
using namespace metal;

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

// Integer division and shifts with the meaning of docs/semantics.md on any input, shared by the MSL
// and CUDA preludes (pasted after them by src/codegen/msl.cpp and cuda.cpp). Written in the C++
// subset both languages accept; the including prelude defines MT_FN (its function qualifiers)
// and mt_u64 (a 64-bit unsigned integer type) first.

// Truncating division and remainder: x / 0 gives 0 and MIN / -1 wraps instead of trapping.
template <typename T>
MT_FN T mt_div(T a, T b) {
  if (b == T(0)) return T(0);
  if (T(-1) < T(0) && b == T(-1)) return T(mt_u64(0) - mt_u64(a));  // no signed overflow
  return T(a / b);
}
template <typename T>
MT_FN T mt_mod(T a, T b) {
  if (b == T(0) || (T(-1) < T(0) && b == T(-1))) return T(0);
  return T(a % b);
}
template <typename T>
MT_FN T mt_floordiv(T a, T b) {
  T q = mt_div(a, b);
  bool adjust = T(-1) < T(0) && b != T(0) && mt_mod(a, b) != T(0) && ((a < T(0)) != (b < T(0)));
  return adjust ? T(q - T(1)) : q;
}

// Shift counts are taken modulo the operand's bit width.
template <typename T>
MT_FN T mt_shl(T a, T b) { return T(a << (b & T(sizeof(T) * 8 - 1))); }
template <typename T>
MT_FN T mt_shr(T a, T b) { return T(a >> (b & T(sizeof(T) * 8 - 1))); }

inline bool mt_stop_requested(device atomic<uint>* word, threadgroup uint* seen, uint index) {
  if (index == 0u) *seen = atomic_load_explicit(word, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const bool stop = *seen != 0u;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (stop && index == 0u) atomic_store_explicit(word, 2u, memory_order_relaxed);
  return stop;
}

struct mt_scalars {
  int N;
};

[[kernel]] void layernorm(
    device const float* X [[buffer(0)]],
    device const float* W [[buffer(1)]],
    device const float* B [[buffer(2)]],
    device float* Out [[buffer(3)]],
    constant mt_scalars& mt_s [[buffer(4)]],
    device atomic<uint>* mt_cancel [[buffer(5)]],
    threadgroup float* scratch_f32 [[threadgroup(0)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tiitg [[thread_index_in_threadgroup]],
    uint tiisg [[thread_index_in_simdgroup]],
    uint sgitg [[simdgroup_index_in_threadgroup]]) {
  const int N = mt_s.N;
  uint mt_polls = 1u;  threadgroup uint mt_stop_seen;
  const int pid_x = int(tgpig.x);
  const int tid = int(tiitg);
  const int lane = int(tiisg);
  const int sg = int(sgitg);
  const int t = pid_x * N;
  float acc[4];
  float acc1[4];
  #pragma unroll
  for (int r = 0; r < 4; ++r) acc[r] = 0.0f;
  #pragma unroll
  for (int r = 0; r < 4; ++r) acc1[r] = 0.0f;
  for (int i = 0; i < N; i += 1024) {
    int offs[4];
    bool mask[4];
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
      offs[r] = i + tid * 4 + r;
      mask[r] = offs[r] < N;
    }
    float x[4];
    if (mask[0] && mask[1] && mask[2] && mask[3]) {
      const float4 x_vec = *(device const packed_float4*)(X + t + offs[0]);
      x[0] = x_vec[0];
      x[1] = x_vec[1];
      x[2] = x_vec[2];
      x[3] = x_vec[3];
    } else {
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        x[j] = mask[j] ? X[t + offs[j]] : 0.0f;
      }
    }
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
      acc[r] = acc[r] + (x[r] * x[r]);
      acc1[r] = acc1[r] + x[r];
    }
    if (--mt_polls == 0u) { mt_polls = 1024u; if (mt_stop_requested(mt_cancel, &mt_stop_seen, tiitg)) return; }
  }
  float local_sum = acc[0];
  #pragma unroll
  for (int r = 1; r < 4; ++r) local_sum = local_sum + acc[r];
  const float sg_sum = simd_sum(local_sum);
  float local_sum1 = acc1[0];
  #pragma unroll
  for (int r = 1; r < 4; ++r) local_sum1 = local_sum1 + acc1[r];
  const float sg_sum1 = simd_sum(local_sum1);
  const bool first_lane = lane == 0;
  if (first_lane) scratch_f32[sg] = sg_sum;
  if (first_lane) scratch_f32[sg + 8] = sg_sum1;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const bool has_partial = lane < 8;
  const float partial = has_partial ? scratch_f32[lane] : 0.0f;
  const float sum = simd_sum(partial);
  const float partial1 = has_partial ? scratch_f32[lane + 8] : 0.0f;
  const float sum1 = simd_sum(partial1);
  const float N1 = float(N);
  const float t7 = sum1 / N1;
  const float t13 = 1.0f / sqrt(((sum / N1) - (t7 * t7)) + 1e-05f);
  for (int i1 = 0; i1 < N; i1 += 1024) {
    int offs1[4];
    bool mask1[4];
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
      offs1[r] = i1 + tid * 4 + r;
      mask1[r] = offs1[r] < N;
    }
    float x1[4];
    if (mask1[0] && mask1[1] && mask1[2] && mask1[3]) {
      const float4 x1_vec = *(device const packed_float4*)(X + t + offs1[0]);
      x1[0] = x1_vec[0];
      x1[1] = x1_vec[1];
      x1[2] = x1_vec[2];
      x1[3] = x1_vec[3];
    } else {
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        x1[j] = mask1[j] ? X[t + offs1[j]] : 0.0f;
      }
    }
    float w[4];
    if (mask1[0] && mask1[1] && mask1[2] && mask1[3]) {
      const float4 w_vec = *(device const packed_float4*)(W + offs1[0]);
      w[0] = w_vec[0];
      w[1] = w_vec[1];
      w[2] = w_vec[2];
      w[3] = w_vec[3];
    } else {
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[j] = mask1[j] ? W[offs1[j]] : 0.0f;
      }
    }
    float b[4];
    if (mask1[0] && mask1[1] && mask1[2] && mask1[3]) {
      const float4 b_vec = *(device const packed_float4*)(B + offs1[0]);
      b[0] = b_vec[0];
      b[1] = b_vec[1];
      b[2] = b_vec[2];
      b[3] = b_vec[3];
    } else {
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        b[j] = mask1[j] ? B[offs1[j]] : 0.0f;
      }
    }
    if (mask1[0] && mask1[1] && mask1[2] && mask1[3]) {
      *(device packed_float4*)(Out + t + offs1[0]) = float4((((x1[0] - t7) * t13) * w[0]) + b[0], (((x1[1] - t7) * t13) * w[1]) + b[1], (((x1[2] - t7) * t13) * w[2]) + b[2], (((x1[3] - t7) * t13) * w[3]) + b[3]);
    } else {
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (mask1[j]) Out[t + offs1[j]] = (((x1[j] - t7) * t13) * w[j]) + b[j];
      }
    }
    if (--mt_polls == 0u) { mt_polls = 1024u; if (mt_stop_requested(mt_cancel, &mt_stop_seen, tiitg)) return; }
  }
}

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

[[kernel]] void fft_kernel(
    device const float* X_re [[buffer(0)]],
    device const float* X_im [[buffer(1)]],
    device float* Y_re [[buffer(2)]],
    device float* Y_im [[buffer(3)]],
    device const int* BIT_REV_ [[buffer(4)]],
    device const float* TW_re [[buffer(5)]],
    device const float* TW_im [[buffer(6)]],
    device atomic<uint>* mt_cancel [[buffer(7)]],
    threadgroup float* smem [[threadgroup(0)]],
    threadgroup float* smem1 [[threadgroup(1)]],
    threadgroup float* smem2 [[threadgroup(2)]],
    threadgroup float* smem3 [[threadgroup(3)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tiitg [[thread_index_in_threadgroup]]) {
  uint mt_polls = 1u;  threadgroup uint mt_stop_seen;
  const int pid_x = int(tgpig.x);
  const int tid = int(tiitg);
  smem[tid] = 0.0f;
  smem1[tid] = 0.0f;
  smem2[tid] = 0.0f;
  smem3[tid] = 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const bool mask = tid < 255;
  const float tw_re = mask ? TW_re[tid] : 0.0f;
  if (mask) smem2[tid] = tw_re;
  const float tw_im = mask ? TW_im[tid] : 0.0f;
  if (mask) smem3[tid] = tw_im;
  const int t4 = pid_x * 256;
  const int bit_rev = BIT_REV_[tid];
  const float x_re = X_re[t4 + tid];
  smem[bit_rev] = x_re;
  const float x_im = X_im[t4 + tid];
  smem1[bit_rev] = x_im;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  threadgroup float* smem_ptrs4 = smem + tid;
  const float smem_val = *smem_ptrs4;
  threadgroup float* smem_ptrs5 = smem1 + tid;
  const float smem_val1 = *smem_ptrs5;
  const float smem_val2 = simd_shuffle_xor(smem_val, 1);
  const float smem_val3 = simd_shuffle_xor(smem_val1, 1);
  const int tid2 = tid & 1;
  const bool mask1 = tid2 == 0;
  const float t7 = mask1 ? (smem_val + smem_val2) : (smem_val2 - smem_val);
  const float t10 = mask1 ? (smem_val1 + smem_val3) : (smem_val3 - smem_val1);
  const float t11 = simd_shuffle_xor(t7, 2);
  const float t12 = simd_shuffle_xor(t10, 2);
  const bool mask2 = (tid & 2) == 0;
  const int tid4 = 1 + tid2;
  const float smem_val4 = smem2[tid4];
  const float smem_val5 = smem3[tid4];
  const float t13 = mask2 ? t7 : t11;
  const float t14 = mask2 ? t10 : t12;
  const float t15 = mask2 ? t11 : t7;
  const float t16 = mask2 ? t12 : t10;
  const float t19 = (smem_val4 * t15) - (smem_val5 * t16);
  const float t22 = (smem_val4 * t16) + (smem_val5 * t15);
  const float t25 = mask2 ? (t13 + t19) : (t13 - t19);
  const float t28 = mask2 ? (t14 + t22) : (t14 - t22);
  const float t29 = simd_shuffle_xor(t25, 4);
  const float t30 = simd_shuffle_xor(t28, 4);
  const bool mask3 = (tid & 4) == 0;
  const int tid7 = 3 + (tid & 3);
  const float smem_val6 = smem2[tid7];
  const float smem_val7 = smem3[tid7];
  const float t31 = mask3 ? t25 : t29;
  const float t32 = mask3 ? t28 : t30;
  const float t33 = mask3 ? t29 : t25;
  const float t34 = mask3 ? t30 : t28;
  const float t37 = (smem_val6 * t33) - (smem_val7 * t34);
  const float t40 = (smem_val6 * t34) + (smem_val7 * t33);
  const float t43 = mask3 ? (t31 + t37) : (t31 - t37);
  const float t46 = mask3 ? (t32 + t40) : (t32 - t40);
  const float t47 = simd_shuffle_xor(t43, 8);
  const float t48 = simd_shuffle_xor(t46, 8);
  const bool mask4 = (tid & 8) == 0;
  const int tid10 = 7 + (tid & 7);
  const float smem_val8 = smem2[tid10];
  const float smem_val9 = smem3[tid10];
  const float t49 = mask4 ? t43 : t47;
  const float t50 = mask4 ? t46 : t48;
  const float t51 = mask4 ? t47 : t43;
  const float t52 = mask4 ? t48 : t46;
  const float t55 = (smem_val8 * t51) - (smem_val9 * t52);
  const float t58 = (smem_val8 * t52) + (smem_val9 * t51);
  const float t61 = mask4 ? (t49 + t55) : (t49 - t55);
  const float t64 = mask4 ? (t50 + t58) : (t50 - t58);
  const float t65 = simd_shuffle_xor(t61, 16);
  const float t66 = simd_shuffle_xor(t64, 16);
  const bool mask5 = (tid & 16) == 0;
  const int tid13 = 15 + (tid & 15);
  const float smem_val10 = smem2[tid13];
  const float smem_val11 = smem3[tid13];
  const float t67 = mask5 ? t61 : t65;
  const float t68 = mask5 ? t64 : t66;
  const float t69 = mask5 ? t65 : t61;
  const float t70 = mask5 ? t66 : t64;
  const float t73 = (smem_val10 * t69) - (smem_val11 * t70);
  const float t76 = (smem_val10 * t70) + (smem_val11 * t69);
  *smem_ptrs4 = mask5 ? (t67 + t73) : (t67 - t73);
  *smem_ptrs5 = mask5 ? (t68 + t76) : (t68 - t76);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = 0; i < 3; i += 1) {
    const int t84 = mt_shl(1, (i + 5));
    const bool mask6 = (tid & t84) == 0;
    const int tid15 = tid & (~t84);
    const int tid16 = tid15 + t84;
    const int t86 = t84 - 1;
    const int tid18 = t86 + (tid & t86);
    const float smem_val12 = smem2[tid18];
    const float smem_val13 = smem3[tid18];
    const float smem_val14 = smem[tid15];
    const float smem_val15 = smem1[tid15];
    const float smem_val16 = smem[tid16];
    const float smem_val17 = smem1[tid16];
    const float t89 = (smem_val12 * smem_val16) - (smem_val13 * smem_val17);
    const float t92 = (smem_val12 * smem_val17) + (smem_val13 * smem_val16);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    *smem_ptrs4 = mask6 ? (smem_val14 + t89) : (smem_val14 - t89);
    *smem_ptrs5 = mask6 ? (smem_val15 + t92) : (smem_val15 - t92);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (--mt_polls == 0u) { mt_polls = 1024u; if (mt_stop_requested(mt_cancel, &mt_stop_seen, tiitg)) return; }
  }
  const float smem_val18 = *smem_ptrs4;
  Y_re[t4 + tid] = smem_val18;
  const float smem_val19 = *smem_ptrs5;
  Y_im[t4 + tid] = smem_val19;
}

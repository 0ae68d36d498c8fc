// metile CPU prelude: included at the top of every generated CPU kernel (embedded in the
// library; see src/codegen/cpu_cpp.cpp). It defines the helpers that the C-like emitter
// (src/codegen/c_like.h) spells ops with, narrow-float conversions, a vectorizable exp, and the
// register-blocked matrix-multiply micro-kernel behind `dot`.
//
// Kernels are compiled without fast-math and with -ffp-contract=off, so element-wise results
// match the interp device bit for bit wherever both use the same formula; only `dot` (explicit
// FMA) and reductions (vectorized, so summed in another order) may differ in the last bits.
#include <stdint.h>

#define MT_INLINE static inline __attribute__((always_inline))
#if defined(__clang__)
#define MT_CONTRACT_FN
#define MT_CONTRACT_BODY _Pragma("clang fp contract(fast)")
#else
#define MT_CONTRACT_FN __attribute__((optimize("fp-contract=fast")))
#define MT_CONTRACT_BODY
#endif

// Which program instances one call runs: linear ids [begin, end) of a grid, x fastest. The
// kernel sets `fault` (0 on entry) when it stops early: see cpu_cpp.h. `stream` is 1 when the
// launch touches more memory than the cache holds: stores may then bypass the cache.
typedef struct mt_range {
  uint32_t grid[3];
  uint32_t fault;
  uint64_t begin, end;
  uint32_t stream;
} mt_range;

// ---- bits and narrow floats (round to nearest even, like src/support/half.h) ------------------

// Bit casts without taking addresses: vectorizers privatize addressable locals of
// `omp simd` loops per lane, which GCC 12 gets wrong under AVX-512 masking.
MT_INLINE float mt_bits_f32(uint32_t u) { return __builtin_bit_cast(float, u); }
MT_INLINE uint32_t mt_f32_bits(float f) { return __builtin_bit_cast(uint32_t, f); }

MT_INLINE float mt_bf16_to_f32(uint16_t h) { return mt_bits_f32((uint32_t)h << 16); }
MT_INLINE uint16_t mt_f32_to_bf16(float f) {
  uint32_t u = mt_f32_bits(f);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r);
}

MT_INLINE float mt_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float sub = (float)mant * (1.0f / 16777216.0f);  // 2^-24 units
  uint32_t normal = sign | ((exp + 112u) << 23) | (mant << 13);
  uint32_t special = sign | 0x7f800000u | (mant << 13);
  float r = mt_bits_f32(exp == 31u ? special : normal);
  return exp == 0u ? (sign ? -sub : sub) : r;
}
MT_INLINE uint16_t mt_f32_to_f16(float f) {
  uint32_t u = mt_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  // Normal range: drop 13 mantissa bits with round-to-nearest-even.
  uint32_t n = (a - 0x38000000u) >> 13;
  uint32_t rem = a & 0x1fffu;
  n += (rem > 0x1000u || (rem == 0x1000u && (n & 1u))) ? 1u : 0u;
  // Subnormal range: scale to units of 2^-24 and round (the FPU rounds to nearest even).
  uint32_t s = (uint32_t)__builtin_rintf(mt_bits_f32(a) * 16777216.0f);
  uint32_t r = a >= 0x477ff000u ? 0x7c00u : (a < 0x38800000u ? s : n);
  r = a > 0x7f800000u ? 0x7e00u : r;
  return (uint16_t)(sign | r);
}
MT_INLINE float mt_round_f16(float f) { return mt_f16_to_f32(mt_f32_to_f16(f)); }
MT_INLINE float mt_round_bf16(float f) { return mt_bf16_to_f32(mt_f32_to_bf16(f)); }

// ---- streaming stores ----------------------------------------------------------------------
// Copies n bytes to dst with non-temporal stores (no read of the destination's lines, no
// eviction of the cache's working set) where the target has them; mt_stream_fence orders them
// before anything that follows (the pool's hand-off is not a fence for these stores). Builtins
// rather than <immintrin.h>, whose parsing would add half a second to every kernel's compile.
#if defined(__x86_64__) && defined(__AVX512F__)
#define MT_NT_BYTES 64
#elif defined(__x86_64__) && defined(__AVX__)
#define MT_NT_BYTES 32
#elif defined(__x86_64__) && defined(__SSE2__)
#define MT_NT_BYTES 16
#endif
#if defined(MT_NT_BYTES)
typedef long long mt_nt_vec __attribute__((vector_size(MT_NT_BYTES)));
MT_INLINE void mt_nt_store(char* d, const char* s) {
  mt_nt_vec v;
  __builtin_memcpy(&v, s, sizeof v);
#if defined(__clang__)
  __builtin_nontemporal_store(v, (mt_nt_vec*)d);
#elif MT_NT_BYTES == 64
  __builtin_ia32_movntdq512((mt_nt_vec*)d, v);
#elif MT_NT_BYTES == 32
  __builtin_ia32_movntdq256((mt_nt_vec*)d, v);
#else
  __builtin_ia32_movntdq((mt_nt_vec*)d, v);
#endif
}
#endif
MT_INLINE void mt_stream_bytes(void* dst, const void* src, uint64_t n) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
#if defined(MT_NT_BYTES)
  uint64_t head = (uint64_t)(-(uintptr_t)d & (MT_NT_BYTES - 1));
  head = head < n ? head : n;
  __builtin_memcpy(d, s, head);
  d += head, s += head, n -= head;
  for (; n >= MT_NT_BYTES; n -= MT_NT_BYTES, d += MT_NT_BYTES, s += MT_NT_BYTES) mt_nt_store(d, s);
#endif
  __builtin_memcpy(d, s, n);
}
MT_INLINE void mt_stream_fence(void) {
#if defined(MT_NT_BYTES)
  __builtin_ia32_sfence();
#endif
}

// ---- integers: wrap-around arithmetic and non-trapping division -------------------------------

MT_INLINE int32_t mt_wrap_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
MT_INLINE int32_t mt_wrap_sub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
MT_INLINE int32_t mt_wrap_mul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }
MT_INLINE int32_t mt_wrap_neg(int32_t a) { return (int32_t)(0u - (uint32_t)a); }
MT_INLINE int32_t mt_wrap_abs(int32_t a) { return a < 0 ? mt_wrap_neg(a) : a; }
MT_INLINE int64_t mt_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
MT_INLINE int64_t mt_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
MT_INLINE int64_t mt_wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
MT_INLINE int64_t mt_wrap_neg(int64_t a) { return (int64_t)(0ull - (uint64_t)a); }
MT_INLINE int64_t mt_wrap_abs(int64_t a) { return a < 0 ? mt_wrap_neg(a) : a; }

// Truncating division and remainder; x / 0 gives 0 and MIN / -1 wraps instead of trapping.
template <class T>
MT_INLINE T mt_div(T a, T b) {
  if (b == 0) return 0;
  if ((T)-1 < (T)0 && b == (T)-1) return (T)(0ull - (uint64_t)a);
  return (T)(a / b);
}
template <class T>
MT_INLINE T mt_mod(T a, T b) {
  if (b == 0 || ((T)-1 < (T)0 && b == (T)-1)) return 0;
  return (T)(a % b);
}
template <class T>
MT_INLINE T mt_floordiv(T a, T b) {
  T q = mt_div(a, b);
  bool adjust = (T)-1 < (T)0 && b != 0 && mt_mod(a, b) != 0 && ((a < 0) != (b < 0));
  return adjust ? (T)(q - 1) : q;
}
MT_INLINE float mt_floordiv(float a, float b) { return __builtin_floorf(a / b); }

// Shift counts are taken modulo the operand's bit width.
template <class T>
MT_INLINE T mt_shl(T a, T b) {
  const unsigned bits = sizeof(T) * 8;
  return (T)((uint64_t)a << ((uint64_t)b & (bits - 1)));
}
template <class T>
MT_INLINE T mt_shr(T a, T b) {
  const unsigned bits = sizeof(T) * 8;
  return (T)(a >> ((uint64_t)b & (bits - 1)));
}

// The bits of x read as T, a type of the same width (the bitcast op, on storage types).
template <class T, class F>
MT_INLINE T mt_bitcast(F x) {
  static_assert(sizeof(T) == sizeof(F), "mt_bitcast: the types differ in width");
  T y;
  __builtin_memcpy(&y, &x, sizeof y);
  return y;
}

// Float -> integer: truncation toward zero, saturating at the type's range, NaN -> 0.
template <class T>
MT_INLINE T mt_f2i(float x) {
  const bool is_signed = (T)-1 < (T)0;
  const float lo = is_signed ? -(float)((uint64_t)1 << (sizeof(T) * 8 - 1)) : 0.0f;
  const float hi = is_signed ? (float)((uint64_t)1 << (sizeof(T) * 8 - 1))
                             : (float)((uint64_t)1 << (sizeof(T) * 8 - 1)) * 2.0f;
  if (x != x) return 0;
  if (x <= lo) return is_signed ? (T)((uint64_t)1 << (sizeof(T) * 8 - 1)) : (T)0;
  if (x >= hi) return (T)~(is_signed ? ((uint64_t)1 << (sizeof(T) * 8 - 1)) : 0ull) ;
  return (T)x;
}

// Identities of integer max/min reductions.
template <class T>
MT_INLINE T mt_lowest() {
  return (T)-1 < (T)0 ? (T)((uint64_t)1 << (sizeof(T) * 8 - 1)) : (T)0;
}
template <class T>
MT_INLINE T mt_highest() {
  return (T)~mt_lowest<T>();
}

// ---- float math ------------------------------------------------------------------------------

// maxNum / minNum: a NaN operand yields the other operand.
MT_INLINE float mt_fmax(float a, float b) { return (a >= b || b != b) ? a : b; }
MT_INLINE float mt_fmin(float a, float b) { return (a <= b || b != b) ? a : b; }

// 2^k * exp(r) for an integral k in [-150, 128] and |r| <= ln2 / 2. Branch-free, so loops over
// it vectorize (the libm call would not). The polynomial is Cephes' expf minimax fit.
#if defined(__FMA__)
#define MT_MADD(a, b, c) __builtin_fmaf(a, b, c)
#else
#define MT_MADD(a, b, c) ((a) * (b) + (c))
#endif
MT_INLINE float mt_exp_scaled(float k, float r) {
  // Horner steps fused where the hardware has FMA (this exp is not libm's anyway).
  float p = 1.9875691500e-4f;
  p = MT_MADD(p, r, 1.3981999507e-3f);
  p = MT_MADD(p, r, 8.3334519073e-3f);
  p = MT_MADD(p, r, 4.1665795894e-2f);
  p = MT_MADD(p, r, 1.6666665459e-1f);
  p = MT_MADD(p, r, 5.0000001201e-1f);
  float y = MT_MADD(p, r * r, r) + 1.0f;
  // Two power-of-two steps keep each factor normal down to subnormal results.
  int32_t ki = (int32_t)k;
  int32_t k1 = ki >> 1, k2 = ki - k1;
  y = y * mt_bits_f32((uint32_t)(k1 + 127) << 23);
  return y * mt_bits_f32((uint32_t)(k2 + 127) << 23);
}
MT_INLINE float mt_exp(float x) {
  float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  xc = x != x ? 0.0f : xc;
  float k = __builtin_rintf(xc * 1.44269504088896341f);
  // Cody-Waite: k * 0.693359375 is exact (the constant has 9 significant bits).
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float y = mt_exp_scaled(k, r);
  return x != x ? x : y;
}
MT_INLINE float mt_exp2(float x) {
  float xc = x < -150.0f ? -150.0f : (x > 129.0f ? 129.0f : x);
  xc = x != x ? 0.0f : xc;
  float k = __builtin_rintf(xc);
  float y = mt_exp_scaled(k, (xc - k) * 0.693147180559945309f);
  return x != x ? x : y;
}
MT_INLINE float mt_sigmoid(float x) { return 1.0f / (1.0f + mt_exp(-x)); }
MT_INLINE float mt_rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }

// ---- dot: c (M x N) += a (M x K) @ b (K x N), row-major f32, register-blocked ------------------

#if defined(__AVX512F__)
#define MT_VW 16
#define MT_VREGS 32
#elif defined(__AVX__)
#define MT_VW 8
#define MT_VREGS 16
#else
#define MT_VW 4
#define MT_VREGS 16
#endif
typedef float mt_vf __attribute__((vector_size(MT_VW * 4)));

MT_INLINE mt_vf mt_vload(const float* p) {
  mt_vf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MT_INLINE void mt_vstore(float* p, mt_vf v) { __builtin_memcpy(p, &v, sizeof v); }

// One MR x (NV * MT_VW) block of c, accumulated in registers over k in [0, K).
template <int MR, int NV, int LDA, int LDB, int LDC>
MT_CONTRACT_FN static inline void mt_dot_block(const float* a, const float* b, float* c, int K) {
  MT_CONTRACT_BODY
  mt_vf acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = mt_vload(c + i * LDC + j * MT_VW);
  for (int k = 0; k < K; ++k) {
    mt_vf bv[NV];
    for (int j = 0; j < NV; ++j) bv[j] = mt_vload(b + k * LDB + j * MT_VW);
    for (int i = 0; i < MR; ++i) {
      // x - 0 is x for every x (0 + x is not: -0 + 0 = +0), so the compiler drops it and
      // broadcasts a straight from memory; 0 + x cost an add and a shuffle per row (the block
      // ran 1.6x slower on a Zen 3 core: bench/results/cpu_seed_rows.md).
      mt_vf av = a[i * LDA + k] - (mt_vf){};
      for (int j = 0; j < NV; ++j) acc[i][j] = av * bv[j] + acc[i][j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) mt_vstore(c + i * LDC + j * MT_VW, acc[i][j]);
}

// Columns [j0, N) that do not fill a vector: plain loops (j innermost, so they still vectorize).
template <int M, int N, int K>
MT_CONTRACT_FN static inline void mt_dot_tail(const float* a, const float* b, float* c, int j0) {
  MT_CONTRACT_BODY
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) {
      const float av = a[i * K + k];
      for (int j = j0; j < N; ++j) c[i * N + j] = av * b[k * N + j] + c[i * N + j];
    }
}

// Rows [i0, M) of one column panel: MR rows at a time, the rest with halved blocks.
template <int M, int N, int K, int NV, int MR>
static inline void mt_dot_panel(const float* a, const float* b, float* c, int i0, int j, int k0,
                                int kc) {
  int i = i0;
  for (; i + MR <= M; i += MR)
    mt_dot_block<MR, NV, K, N, N>(a + i * K + k0, b + k0 * N + j, c + i * N + j, kc);
  if (MR > 1 && i < M) mt_dot_panel<M, N, K, NV, (MR > 1 ? MR / 2 : 1)>(a, b, c, i, j, k0, kc);
}

template <int M, int N, int K>
static inline void mt_dot_f32(const float* __restrict a, const float* __restrict b,
                              float* __restrict c) {
  // K is split so that a b panel (KC x NR) stays in L1 while every row block streams past it.
  const int KC = 128;
  for (int k0 = 0; k0 < K; k0 += KC) {
    const int kc = K - k0 < KC ? K - k0 : KC;
    int j = 0;
    // The accumulators, b's vectors and a's broadcast must stay in the vector registers:
    // with 32 (AVX-512) blocks of 6 x 4 and 8 x 2 vectors (24 or 16 accumulators); with 16
    // (AVX2, SSE) 6 x 2 and 8 x 1 (on a Zen 3 core the 6 x 4 form's spills cost ~2%:
    // bench/results/cpu_seed_rows.md).
    if (MT_VREGS >= 32)
      for (; j + 4 * MT_VW <= N; j += 4 * MT_VW) mt_dot_panel<M, N, K, 4, 6>(a, b, c, 0, j, k0, kc);
    for (; j + 2 * MT_VW <= N; j += 2 * MT_VW)
      mt_dot_panel<M, N, K, 2, (MT_VREGS >= 32 ? 8 : 6)>(a, b, c, 0, j, k0, kc);
    for (; j + MT_VW <= N; j += MT_VW) mt_dot_panel<M, N, K, 1, 8>(a, b, c, 0, j, k0, kc);
    if (j < N && k0 == 0) mt_dot_tail<M, N, K>(a, b, c, j);
  }
}

// TF32 as cvt.rna.tf32.f32 rounds (nearest, ties away from zero); infinities and NaNs pass.
static inline float mt_round_tf32(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  __builtin_memcpy(&x, &u, 4);
  return x;
}

// An f32 dot under input_precision "tf32" (TF32 = 1: inputs rounded) or "tf32x3" (0: each
// input split into hi = tf32(x) and lo = tf32(x - hi); lo*hi, hi*lo, then hi*hi accumulate).
// TF32 products are exact in f32, so the rounding differs from interp's only in sum order.
template <int M, int N, int K, int TF32>
static inline void mt_dot_f32_tf32(const float* __restrict a, const float* __restrict b,
                                   float* __restrict c) {
  alignas(64) float ah[M * K], bh[K * N];
  for (int i = 0; i < M * K; ++i) ah[i] = mt_round_tf32(a[i]);
  for (int i = 0; i < K * N; ++i) bh[i] = mt_round_tf32(b[i]);
  if (!TF32) {
    alignas(64) float al[M * K], bl[K * N];
    for (int i = 0; i < M * K; ++i) al[i] = mt_round_tf32(a[i] - ah[i]);
    for (int i = 0; i < K * N; ++i) bl[i] = mt_round_tf32(b[i] - bh[i]);
    mt_dot_f32<M, N, K>(al, bh, c);
    mt_dot_f32<M, N, K>(ah, bl, c);
  }
  mt_dot_f32<M, N, K>(ah, bh, c);
}

// Integer dot (8-bit inputs, i32 accumulator); wraps like every i32 operation.
template <int M, int N, int K, class T>
static inline void mt_dot_int(const T* __restrict a, const T* __restrict b, int32_t* __restrict c) {
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) {
      const uint32_t av = (uint32_t)(int32_t)a[i * K + k];
      for (int j = 0; j < N; ++j)
        c[i * N + j] = (int32_t)((uint32_t)c[i * N + j] + av * (uint32_t)(int32_t)b[k * N + j]);
    }
}

// ---- atomics: mt_atomic_<op>_<dtype>(address, [cmp,] value) -> the old value ----------------
// Programs run in parallel on a thread pool. Relaxed order, as on the GPUs; max/min on floats
// are fmax/fmin and cas compares bits (as the interp does), so both loop on compare-exchange.
#define MT_ATOMIC_INT(T, S)                                                                      \
  MT_INLINE T mt_atomic_add_##S(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); } \
  MT_INLINE T mt_atomic_xchg_##S(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); } \
  MT_INLINE T mt_atomic_cas_##S(T* p, T cmp, T v) {                                              \
    __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);              \
    return cmp;                                                                                  \
  }                                                                                              \
  MT_INLINE T mt_atomic_max_##S(T* p, T v) {                                                     \
    T o = __atomic_load_n(p, __ATOMIC_RELAXED);                                                  \
    while (o < v && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                            \
    return o;                                                                                    \
  }                                                                                              \
  MT_INLINE T mt_atomic_min_##S(T* p, T v) {                                                     \
    T o = __atomic_load_n(p, __ATOMIC_RELAXED);                                                  \
    while (v < o && !__atomic_compare_exchange_n(p, &o, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { \
    }                                                                                            \
    return o;                                                                                    \
  }
MT_ATOMIC_INT(int32_t, i32)
MT_ATOMIC_INT(uint32_t, u32)
MT_ATOMIC_INT(int64_t, i64)
#undef MT_ATOMIC_INT

#define MT_ATOMIC_F32(NAME, EXPR)                                                                \
  MT_INLINE float mt_atomic_##NAME##_f32(float* p, float v) {                                    \
    uint32_t* bits = (uint32_t*)p;                                                               \
    uint32_t o = __atomic_load_n(bits, __ATOMIC_RELAXED);                                        \
    for (;;) {                                                                                   \
      float old = mt_bits_f32(o);                                                                \
      if (__atomic_compare_exchange_n(bits, &o, mt_f32_bits(EXPR), 1, __ATOMIC_RELAXED,          \
                                      __ATOMIC_RELAXED))                                         \
        return old;                                                                              \
    }                                                                                            \
  }
MT_ATOMIC_F32(add, old + v)
MT_ATOMIC_F32(max, mt_fmax(old, v))
MT_ATOMIC_F32(min, mt_fmin(old, v))
#undef MT_ATOMIC_F32
MT_INLINE float mt_atomic_xchg_f32(float* p, float v) {
  return mt_bits_f32(__atomic_exchange_n((uint32_t*)p, mt_f32_bits(v), __ATOMIC_RELAXED));
}
MT_INLINE float mt_atomic_cas_f32(float* p, float cmp, float v) {
  uint32_t expected = mt_f32_bits(cmp);
  __atomic_compare_exchange_n((uint32_t*)p, &expected, mt_f32_bits(v), 0, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
  return mt_bits_f32(expected);
}

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
  int M;
  int N;
  int K;
};

[[kernel]] void matmul_gelu_bounded_bias(
    device const float* A [[buffer(0)]],
    device const float* B [[buffer(1)]],
    device float* C [[buffer(2)]],
    device const float* Bias [[buffer(3)]],
    constant mt_scalars& mt_s [[buffer(4)]],
    device atomic<uint>* mt_cancel [[buffer(5)]],
    threadgroup float* a_smem [[threadgroup(0)]],
    threadgroup float* b_smem [[threadgroup(1)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tiitg [[thread_index_in_threadgroup]]) {
  const int M = mt_s.M;
  const int N = mt_s.N;
  const int K = mt_s.K;
  uint mt_polls = 1u;  threadgroup uint mt_stop_seen;
  const int pid_x = int(tgpig.x);
  const int pid_y = int(tgpig.y);
  const int tid = int(tiitg);
  const int t = pid_x * 32;
  const int t1 = pid_y * 32;
  const bool in_range = 0 < K;
  const int t2 = tid * 4;
  const int t3 = mt_div(t2, 32);
  int t5[2];
  int t6[2];
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    t5[r] = mt_div((tid * 4 + r * 512 - t2), 32);
    t6[r] = t3 + t5[r];
  }
  const int t7 = mt_mod(t2, 32);
  device const float* a_ptrs[2];
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    a_ptrs[r] = A + ((t + t3) * K + t7) + (t5[r] * K);
  }
  const int t14 = t3 * 36 + t7;
  int t16[2];
  int row[2];
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    t16[r] = t5[r] * 36;
    row[r] = t + t6[r];
  }
  const bool t33 = 32 <= K;
  if ((((mt_mod(K, 4) == 0) & ((t >= 0) & ((t + 32) <= M))) & t33) & in_range) {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      *(threadgroup packed_float4*)(a_smem + t14 + t16[r]) = *(device const packed_float4*)(a_ptrs[r]);
    }
  } else {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      if ((((0 - t7) > 0 ? (0 - t7) : 0) < 4 ? ((0 - t7) > 0 ? (0 - t7) : 0) : 4) == 0 && ((in_range & ((row[r] >= 0) & (row[r] < M))) ? (((K - t7) > 0 ? (K - t7) : 0) < 4 ? ((K - t7) > 0 ? (K - t7) : 0) : 4) : 0) == 4) {
        *(threadgroup packed_float4*)(a_smem + t14 + t16[r]) = *(device const packed_float4*)(a_ptrs[r]);
      } else {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (j >= (((0 - t7) > 0 ? (0 - t7) : 0) < 4 ? ((0 - t7) > 0 ? (0 - t7) : 0) : 4) && j < ((in_range & ((row[r] >= 0) & (row[r] < M))) ? (((K - t7) > 0 ? (K - t7) : 0) < 4 ? ((K - t7) > 0 ? (K - t7) : 0) : 4) : 0)) (a_smem + t14 + t16[r])[j] = (a_ptrs[r])[j]; else (a_smem + t14 + t16[r])[j] = 0.0f;
        }
      }
    }
  }
  const int t36 = t1 + t7;
  device const float* b_ptrs[2];
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    b_ptrs[r] = B + (t3 * N + t36) + (t5[r] * N);
  }
  if (((((mt_mod(t1, 4) == 0) & (mt_mod(N, 4) == 0)) & t33) & ((t1 >= 0) & ((t1 + 32) <= N))) & in_range) {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      *(threadgroup packed_float4*)(b_smem + t14 + t16[r]) = *(device const packed_float4*)(b_ptrs[r]);
    }
  } else {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      if ((((0 - t36) > 0 ? (0 - t36) : 0) < 4 ? ((0 - t36) > 0 ? (0 - t36) : 0) : 4) == 0 && ((in_range & ((t6[r] >= 0) & (t6[r] < K))) ? (((N - t36) > 0 ? (N - t36) : 0) < 4 ? ((N - t36) > 0 ? (N - t36) : 0) : 4) : 0) == 4) {
        *(threadgroup packed_float4*)(b_smem + t14 + t16[r]) = *(device const packed_float4*)(b_ptrs[r]);
      } else {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (j >= (((0 - t36) > 0 ? (0 - t36) : 0) < 4 ? ((0 - t36) > 0 ? (0 - t36) : 0) : 4) && j < ((in_range & ((t6[r] >= 0) & (t6[r] < K))) ? (((N - t36) > 0 ? (N - t36) : 0) < 4 ? ((N - t36) > 0 ? (N - t36) : 0) : 4) : 0)) (b_smem + t14 + t16[r])[j] = (b_ptrs[r])[j]; else (b_smem + t14 + t16[r])[j] = 0.0f;
        }
      }
    }
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float acc[8];
  #pragma unroll
  for (int r = 0; r < 8; ++r) acc[r] = 0.0f;
  for (int i = 0; i < K; i += 32) {
    const int stage = mt_mod(mt_div(i, 32), 2);
    const int next_k = i + 32;
    const bool in_range1 = next_k < K;
    int t61[8];
    int row1[8];
    int t62[8];
    int col[8];
    bool pred2[8];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int idx1 = tid * 4 + r % 4 + ((r / 4)) * 512;
      t61[r] = mt_div(idx1, 32);
      row1[r] = t + t61[r];
      t62[r] = mt_mod(idx1, 32);
      col[r] = next_k + t62[r];
      pred2[r] = (((row1[r] >= 0) & (row1[r] < M)) & ((col[r] >= 0) & (col[r] < K))) & in_range1;
    }
    float a_next[8];
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      if (pred2[c] && pred2[c + 1] && pred2[c + 2] && pred2[c + 3]) {
        const float4 a_next_vec = *(device const packed_float4*)(A + (row1[c] * K + col[c]));
        a_next[c] = a_next_vec[0];
        a_next[c + 1] = a_next_vec[1];
        a_next[c + 2] = a_next_vec[2];
        a_next[c + 3] = a_next_vec[3];
      } else {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          a_next[c + j] = pred2[c + j] ? A[row1[c + j] * K + col[c + j]] : 0.0f;
        }
      }
    }
    int row2[8];
    int col1[8];
    bool pred3[8];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
      row2[r] = next_k + t61[r];
      col1[r] = t1 + t62[r];
      pred3[r] = (((row2[r] >= 0) & (row2[r] < K)) & ((col1[r] >= 0) & (col1[r] < N))) & in_range1;
    }
    float b_next[8];
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      if (pred3[c] && pred3[c + 1] && pred3[c + 2] && pred3[c + 3]) {
        const float4 b_next_vec = *(device const packed_float4*)(B + (row2[c] * N + col1[c]));
        b_next[c] = b_next_vec[0];
        b_next[c + 1] = b_next_vec[1];
        b_next[c + 2] = b_next_vec[2];
        b_next[c + 3] = b_next_vec[3];
      } else {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          b_next[c + j] = pred3[c + j] ? B[row2[c + j] * N + col1[c + j]] : 0.0f;
        }
      }
    }
    const int t77 = stage * 1152;
    float acc1[8];
    #pragma unroll
    for (int r = 0; r < 8; ++r) acc1[r] = acc[r];
    {
      const int mma_warp = tid / 32;
      const int mma_row = (mma_warp % 2) * 16;
      const int mma_col = (mma_warp / 2) * 16;
      simdgroup_float8x8 mma_c[4];
      for (int mma_i = 0; mma_i < 4; ++mma_i) {
        mma_c[mma_i].thread_elements()[0] = acc1[2 * mma_i];
        mma_c[mma_i].thread_elements()[1] = acc1[2 * mma_i + 1];
      }
      for (int mma_k = 0; mma_k < 32; mma_k += 8) {
        simdgroup_float8x8 mma_a[2], mma_b[2];
        for (int mma_i = 0; mma_i < 2; ++mma_i) simdgroup_load(mma_a[mma_i], (a_smem + t77) + (mma_row + 8 * mma_i) * 36 + mma_k, 36);
        for (int mma_j = 0; mma_j < 2; ++mma_j) simdgroup_load(mma_b[mma_j], (b_smem + t77) + mma_k * 36 + mma_col + 8 * mma_j, 36);
        for (int mma_i = 0; mma_i < 2; ++mma_i)
          for (int mma_j = 0; mma_j < 2; ++mma_j)
            simdgroup_multiply_accumulate(mma_c[mma_i + 2 * mma_j], mma_a[mma_i], mma_b[mma_j], mma_c[mma_i + 2 * mma_j]);
      }
      for (int mma_i = 0; mma_i < 4; ++mma_i) {
        acc1[2 * mma_i] = mma_c[mma_i].thread_elements()[0];
        acc1[2 * mma_i + 1] = mma_c[mma_i].thread_elements()[1];
      }
    }
    const int t82 = (1 - stage) * 1152;
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      *(threadgroup packed_float4*)(a_smem + t82 + (t61[c] * 36 + t62[c])) = float4(a_next[c], a_next[c + 1], a_next[c + 2], a_next[c + 3]);
    }
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      *(threadgroup packed_float4*)(b_smem + t82 + (t61[c] * 36 + t62[c])) = float4(b_next[c], b_next[c + 1], b_next[c + 2], b_next[c + 3]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (--mt_polls == 0u) { mt_polls = 1024u; if (mt_stop_requested(mt_cancel, &mt_stop_seen, tiitg)) return; }
    #pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = acc1[r];
  }
  int offs[4];
  bool mask[4];
  #pragma unroll
  for (int r = 0; r < 4; ++r) {
    offs[r] = t1 + (tid % 2) * 2 + ((tid / 8) % 2) * 4 + ((tid / 64)) * 16 + r % 2 + ((r / 2)) * 8;
    mask[r] = offs[r] < N;
  }
  float bias[4];
  #pragma unroll
  for (int c = 0; c < 4; c += 2) {
    if (mask[c] && mask[c + 1]) {
      const float2 bias_vec = *(device const packed_float2*)(Bias + offs[c]);
      bias[c] = bias_vec[0];
      bias[c + 1] = bias_vec[1];
    } else {
      #pragma unroll
      for (int j = 0; j < 2; ++j) {
        bias[c + j] = mask[c + j] ? Bias[offs[c + j]] : 0.0f;
      }
    }
  }
  float bias1[8];
  bias1[0] = bias[0];
  bias1[1] = bias[1];
  bias1[2] = bias[0];
  bias1[3] = bias[1];
  bias1[4] = bias[2];
  bias1[5] = bias[3];
  bias1[6] = bias[2];
  bias1[7] = bias[3];
  #pragma unroll
  for (int c = 0; c < 8; c += 2) {
    if ((((t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + c % 2 + ((c / 2) % 2) * 256 + ((c / 4)) * 8), 32)) >= 0) & ((t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + c % 2 + ((c / 2) % 2) * 256 + ((c / 4)) * 8), 32)) < M)) & (((t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + c % 2 + ((c / 2) % 2) * 256 + ((c / 4)) * 8), 32)) >= 0) & ((t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + c % 2 + ((c / 2) % 2) * 256 + ((c / 4)) * 8), 32)) < N)) && (((t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + 1) % 2 + (((c + 1) / 2) % 2) * 256 + (((c + 1) / 4)) * 8), 32)) >= 0) & ((t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + 1) % 2 + (((c + 1) / 2) % 2) * 256 + (((c + 1) / 4)) * 8), 32)) < M)) & (((t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + 1) % 2 + (((c + 1) / 2) % 2) * 256 + (((c + 1) / 4)) * 8), 32)) >= 0) & ((t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + 1) % 2 + (((c + 1) / 2) % 2) * 256 + (((c + 1) / 4)) * 8), 32)) < N))) {
      *(device packed_float2*)(C + ((t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + c % 2 + ((c / 2) % 2) * 256 + ((c / 4)) * 8), 32)) * N + t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + c % 2 + ((c / 2) % 2) * 256 + ((c / 4)) * 8), 32))) = float2((acc[c] + bias1[c]) / (1.0f + exp(0.0f - (1.702f * (acc[c] + bias1[c])))), (acc[c + 1] + bias1[c + 1]) / (1.0f + exp(0.0f - (1.702f * (acc[c + 1] + bias1[c + 1])))));
    } else {
      #pragma unroll
      for (int j = 0; j < 2; ++j) {
        if ((((t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + j) % 2 + (((c + j) / 2) % 2) * 256 + (((c + j) / 4)) * 8), 32)) >= 0) & ((t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + j) % 2 + (((c + j) / 2) % 2) * 256 + (((c + j) / 4)) * 8), 32)) < M)) & (((t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + j) % 2 + (((c + j) / 2) % 2) * 256 + (((c + j) / 4)) * 8), 32)) >= 0) & ((t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + j) % 2 + (((c + j) / 2) % 2) * 256 + (((c + j) / 4)) * 8), 32)) < N))) C[(t + mt_div(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + j) % 2 + (((c + j) / 2) % 2) * 256 + (((c + j) / 4)) * 8), 32)) * N + t1 + mt_mod(((tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + (c + j) % 2 + (((c + j) / 2) % 2) * 256 + (((c + j) / 4)) * 8), 32)] = (acc[c + j] + bias1[c + j]) / (1.0f + exp(0.0f - (1.702f * (acc[c + j] + bias1[c + j]))));
      }
    }
  }
}

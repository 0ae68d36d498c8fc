#include <metal_stdlib>
using namespace metal;

// metile MSL prelude: pasted after `using namespace metal;` into every generated Metal kernel
// (src/codegen/msl.cpp). It defines the helpers the C-like emitter (src/codegen/c_like.h)
// spells ops with, so that every op has the meaning of DESIGN.md §3 on any input: wrapping
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

// MSL has no erf: Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7).
inline float mt_erf(float x) {
  float t = 1.0f / (1.0f + 0.3275911f * fabs(x));
  float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float y = 1.0f - p * exp(-x * x);
  return x < 0.0f ? -y : y;
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

// Integer division and shifts with the meaning of DESIGN.md §3 on any input, shared by the MSL
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

[[kernel]] void matmul_gelu_bounded_bias(
    device const float* A [[buffer(0)]],
    device const float* B [[buffer(1)]],
    device float* C [[buffer(2)]],
    device const float* Bias [[buffer(3)]],
    constant int& M [[buffer(4)]],
    constant int& N [[buffer(5)]],
    constant int& K [[buffer(6)]],
    threadgroup float* a_smem [[threadgroup(0)]],
    threadgroup float* b_smem [[threadgroup(1)]],
    threadgroup float* scratch_f32 [[threadgroup(2)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tiitg [[thread_index_in_threadgroup]]) {
  const int pid_x = int(tgpig.x);
  const int pid_y = int(tgpig.y);
  const int tid = int(tiitg);
  const int t = pid_x * 32;
  const int t1 = pid_y * 32;
  float acc[8];
  #pragma unroll
  for (int r = 0; r < 8; ++r) acc[r] = 0.0f;
  for (int i = 0; i < K; i += 32) {
    int t2[8];
    int row[8];
    int t3[8];
    int col[8];
    bool in_bounds[8];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
      const int idx = tid * 4 + r % 4 + ((r / 4)) * 512;
      t2[r] = mt_div(idx, 32);
      row[r] = t + t2[r];
      t3[r] = mt_mod(idx, 32);
      col[r] = i + t3[r];
      in_bounds[r] = ((row[r] >= 0) & (row[r] < M)) & ((col[r] >= 0) & (col[r] < K));
    }
    float tile[8];
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      if (in_bounds[c] && in_bounds[c + 1] && in_bounds[c + 2] && in_bounds[c + 3]) {
        const float4 tile_vec = *(device const packed_float4*)(A + (row[c] * K + col[c]));
        tile[c] = tile_vec[0];
        tile[c + 1] = tile_vec[1];
        tile[c + 2] = tile_vec[2];
        tile[c + 3] = tile_vec[3];
      } else {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          tile[c + j] = in_bounds[c + j] ? A[row[c + j] * K + col[c + j]] : 0.0f;
        }
      }
    }
    int row1[8];
    int col1[8];
    bool in_bounds1[8];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
      row1[r] = i + t2[r];
      col1[r] = t1 + t3[r];
      in_bounds1[r] = ((row1[r] >= 0) & (row1[r] < K)) & ((col1[r] >= 0) & (col1[r] < N));
    }
    float tile1[8];
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      if (in_bounds1[c] && in_bounds1[c + 1] && in_bounds1[c + 2] && in_bounds1[c + 3]) {
        const float4 tile1_vec = *(device const packed_float4*)(B + (row1[c] * N + col1[c]));
        tile1[c] = tile1_vec[0];
        tile1[c + 1] = tile1_vec[1];
        tile1[c + 2] = tile1_vec[2];
        tile1[c + 3] = tile1_vec[3];
      } else {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          tile1[c + j] = in_bounds1[c + j] ? B[row1[c + j] * N + col1[c + j]] : 0.0f;
        }
      }
    }
    int t19[8];
    #pragma unroll
    for (int r = 0; r < 8; ++r) {
      t19[r] = t2[r] * 36 + t3[r];
    }
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      *(threadgroup packed_float4*)(a_smem + t19[c]) = float4(tile[c], tile[c + 1], tile[c + 2], tile[c + 3]);
    }
    #pragma unroll
    for (int c = 0; c < 8; c += 4) {
      *(threadgroup packed_float4*)(b_smem + t19[c]) = float4(tile1[c], tile1[c + 1], tile1[c + 2], tile1[c + 3]);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
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
        for (int mma_i = 0; mma_i < 2; ++mma_i) simdgroup_load(mma_a[mma_i], a_smem + (mma_row + 8 * mma_i) * 36 + mma_k, 36);
        for (int mma_j = 0; mma_j < 2; ++mma_j) simdgroup_load(mma_b[mma_j], b_smem + mma_k * 36 + mma_col + 8 * mma_j, 36);
        for (int mma_i = 0; mma_i < 2; ++mma_i)
          for (int mma_j = 0; mma_j < 2; ++mma_j)
            simdgroup_multiply_accumulate(mma_c[mma_i + 2 * mma_j], mma_a[mma_i], mma_b[mma_j], mma_c[mma_i + 2 * mma_j]);
      }
      for (int mma_i = 0; mma_i < 4; ++mma_i) {
        acc1[2 * mma_i] = mma_c[mma_i].thread_elements()[0];
        acc1[2 * mma_i + 1] = mma_c[mma_i].thread_elements()[1];
      }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    #pragma unroll
    for (int r = 0; r < 8; ++r) acc[r] = acc1[r];
  }
  const int offs = t1 + tid;
  const bool in_tile = tid < 32;
  const float bias = ((offs < N) & in_tile) ? Bias[offs] : 0.0f;
  if (in_tile) scratch_f32[tid] = bias;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int t24[8];
  int t25[8];
  #pragma unroll
  for (int r = 0; r < 8; ++r) {
    const int idx1 = (tid % 2) * 2 + ((tid / 2) % 4) * 32 + ((tid / 8) % 2) * 4 + ((tid / 16) % 2) * 128 + ((tid / 32) % 2) * 512 + ((tid / 64)) * 16 + r % 2 + ((r / 2) % 2) * 256 + ((r / 4)) * 8;
    t24[r] = mt_div(idx1, 32);
    t25[r] = mt_mod(idx1, 32);
  }
  float bias1[8];
  #pragma unroll
  for (int c = 0; c < 8; c += 2) {
    const float2 bias1_vec = *(threadgroup packed_float2*)(scratch_f32 + t25[c]);
    bias1[c] = bias1_vec[0];
    bias1[c + 1] = bias1_vec[1];
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float t32[8];
  int row2[8];
  int col2[8];
  bool in_bounds2[8];
  #pragma unroll
  for (int r = 0; r < 8; ++r) {
    const float t27 = acc[r] + bias1[r];
    t32[r] = t27 / (1.0f + exp(0.0f - (1.702f * t27)));
    row2[r] = t + t24[r];
    col2[r] = t1 + t25[r];
    in_bounds2[r] = ((row2[r] >= 0) & (row2[r] < M)) & ((col2[r] >= 0) & (col2[r] < N));
  }
  #pragma unroll
  for (int c = 0; c < 8; c += 2) {
    if (in_bounds2[c] && in_bounds2[c + 1]) {
      *(device packed_float2*)(C + (row2[c] * N + col2[c])) = float2(t32[c], t32[c + 1]);
    } else {
      #pragma unroll
      for (int j = 0; j < 2; ++j) {
        if (in_bounds2[c + j]) C[row2[c + j] * N + col2[c + j]] = t32[c + j];
      }
    }
  }
}

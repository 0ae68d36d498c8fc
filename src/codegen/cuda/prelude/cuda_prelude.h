// metile CUDA prelude: pasted at the top of every generated CUDA kernel (src/codegen/cuda.cpp).
// It defines the helpers the C-like emitter (src/codegen/c_like.h) spells ops with, so every op
// has the meaning of docs/semantics.md on any input, and the narrow float and vector types, without
// including any CUDA header (NVRTC compiles it with no include path).

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef long long llong;
typedef unsigned long long ullong;
typedef ullong mt_u64;

#define MT_FN static __device__ __forceinline__

// ---- f16 / bf16: stored as 16 bits, computed in f32, rounded to nearest even ---------------

MT_FN float mt_f16_to_f32(ushort h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
MT_FN ushort mt_f32_to_f16(float f) {
  ushort h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
MT_FN float mt_bf16_to_f32(ushort h) { return __uint_as_float(uint(h) << 16); }
MT_FN ushort mt_f32_to_bf16(float f) {
  uint u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ushort((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return ushort(u >> 16);
}
MT_FN float mt_round_f16(float x) { return mt_f16_to_f32(mt_f32_to_f16(x)); }
MT_FN float mt_round_bf16(float x) { return mt_bf16_to_f32(mt_f32_to_bf16(x)); }

// ---- integers: two's complement wrap-around (signed overflow is undefined in C++) -----------

MT_FN int mt_wrap_add(int a, int b) { return int(uint(a) + uint(b)); }
MT_FN int mt_wrap_sub(int a, int b) { return int(uint(a) - uint(b)); }
MT_FN int mt_wrap_mul(int a, int b) { return int(uint(a) * uint(b)); }
MT_FN int mt_wrap_neg(int a) { return int(0u - uint(a)); }
MT_FN int mt_wrap_abs(int a) { return a < 0 ? mt_wrap_neg(a) : a; }
MT_FN llong mt_wrap_add(llong a, llong b) { return llong(ullong(a) + ullong(b)); }
MT_FN llong mt_wrap_sub(llong a, llong b) { return llong(ullong(a) - ullong(b)); }
MT_FN llong mt_wrap_mul(llong a, llong b) { return llong(ullong(a) * ullong(b)); }
MT_FN llong mt_wrap_neg(llong a) { return llong(0ull - ullong(a)); }
MT_FN llong mt_wrap_abs(llong a) { return a < 0 ? mt_wrap_neg(a) : a; }

// mt_div, mt_mod, mt_floordiv, mt_shl, mt_shr: gpu_integer.h, pasted after this prelude.
MT_FN float mt_floordiv(float a, float b) { return floorf(a / b); }

// ---- floats ------------------------------------------------------------------------------

MT_FN float mt_fmax(float a, float b) { return fmaxf(a, b); }  // maxNum: NaN yields the other
MT_FN float mt_fmin(float a, float b) { return fminf(a, b); }
// exp as the hardware computes it: ex2.approx of x * log2(e), two instructions where expf's
// accurate range reduction takes eight (what Triton's exp does too). The relative error is that
// of ex2.approx (2 ulp) plus the rounding of x * log2(e), |x| * 2^-24 * ln 2 at most: about 4e-6
// near the overflow point (x = 88), 6e-7 for |x| <= 10. +-inf and NaN map as expf maps them.
MT_FN float mt_exp(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
  return y;
}
MT_FN float mt_sigmoid(float x) { return 1.0f / (1.0f + mt_exp(-x)); }
MT_FN float mt_rsqrt(float x) { return 1.0f / sqrtf(x); }  // rsqrtf is approximate

// The bits of x read as T, a type of the same width (the bitcast op, on storage types).
template <typename T, typename F>
MT_FN T mt_bitcast(F x) {
  static_assert(sizeof(T) == sizeof(F), "mt_bitcast: the types differ in width");
  union {  // NVRTC compiles without <cstring>, so no memcpy: a union reinterprets
    F from;
    T to;
  } u;
  u.from = x;
  return u.to;
}

// Float -> integer: truncation toward zero, saturating at the type's range, NaN -> 0.
template <typename T>
MT_FN T mt_f2i(float x) {
  const bool is_signed = T(-1) < T(0);
  const int bits = int(sizeof(T) * 8);
  const float lo = is_signed ? -ldexpf(1.0f, bits - 1) : 0.0f;
  const float hi = is_signed ? ldexpf(1.0f, bits - 1) : ldexpf(1.0f, bits);
  if (x != x) return T(0);  // NaN
  if (x <= lo) return is_signed ? T(ullong(1) << (bits - 1)) : T(0);
  if (x >= hi) return T(~(is_signed ? (ullong(1) << (bits - 1)) : 0ull));
  return T(x);
}

// ---- warps -------------------------------------------------------------------------------

// The lanes of this thread's warp that exist: the last warp of a block whose size is not a
// multiple of 32 is partial, and shuffles must name only existing lanes.
MT_FN uint mt_warp_mask() {
  uint n = blockDim.x - (threadIdx.x & ~31u);
  return n >= 32u ? 0xffffffffu : ((1u << n) - 1u);
}

// ---- vectors: element arrays aligned to their size, so whole-vector copies are single
// 8- or 16-byte accesses (CUDA's own vector types have no operator[]) -----------------------

template <typename T, int N>
struct alignas(sizeof(T) * N) mt_vec {
  T v[N];
  __device__ mt_vec() {}
  template <typename... A>
  __device__ mt_vec(A... a) : v{T(a)...} {}
  __device__ T operator[](int i) const { return v[i]; }
};

// ---- matrix units (mma.sync, sm_80+): fragments are 32-bit registers --------------------------

MT_FN uint mt_tf32(float x) {  // round to TF32 (nearest, ties away), as cuBLAS's TF32 mode does
  uint r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
MT_FN uint mt_pair(const ushort* p) { return *reinterpret_cast<const uint*>(p); }
MT_FN uint mt_pack(ushort lo, ushort hi) { return uint(lo) | (uint(hi) << 16); }
#define MT_MMA(name, shape, types)                                                                 \
  MT_FN void name(float* d, const uint* a, const uint* b) {                                        \
    asm("mma.sync.aligned." shape ".row.col.f32." types ".f32 {%0, %1, %2, %3}, "         \
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                                   \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));              \
  }
MT_MMA(mt_mma_tf32, "m16n8k8", "tf32.tf32")
MT_MMA(mt_mma_f16, "m16n8k16", "f16.f16")
MT_MMA(mt_mma_bf16, "m16n8k16", "bf16.bf16")
#undef MT_MMA
// 3xTF32: w[0..N) holds f32 bits; afterwards w[i] = hi = tf32(x) and w[N + i] = tf32(x - hi).
// The mask keeps hi's low 13 bits zero whatever the conversion leaves there, so x - hi is exact.
template <int N>
MT_FN void mt_split_tf32(uint* w) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const float x = __uint_as_float(w[i]);
    const uint hi = mt_tf32(x) & 0xffffe000u;
    w[i] = hi;
    w[N + i] = mt_tf32(x - __uint_as_float(hi));
  }
}
// The tensor core adds into its accumulator truncating, not rounding: fed the running sum, every
// atom would cut a little off it, and over a long K those cuts add up (3e-5 relative at K = 4096
// on an H200, 30x f32's error). So each atom's three products (residuals first, then hi*hi) go
// into a fresh sum that is only one atom's size, and that joins the running sum with a rounded
// f32 add.
MT_FN void mt_mma_tf32x3(float* d, const uint* a, const uint* b) {
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mt_mma_tf32(t, a + 4, b);
  mt_mma_tf32(t, a, b + 2);
  mt_mma_tf32(t, a, b);
#pragma unroll
  for (int i = 0; i < 4; ++i) d[i] += t[i];
}

// ---- threadgroup copies and fragment loads (cp.async, ldmatrix: sm_80+) ----------------------
// Shared-memory addresses for these instructions are 32-bit offsets into the shared window.
// The compiler's own conversion (not an asm): it sees that the pointer is the shared array plus
// an offset and folds the conversion into 32-bit arithmetic on that offset, so a copy or
// fragment address computed per K step costs no 64-bit generic-pointer math.
MT_FN uint mt_smem_addr(const void* p) { return uint(__cvta_generic_to_shared(p)); }
// 16 bytes, global -> shared, bypassing L1 and registers; complete after wait_group + barrier.
MT_FN void mt_cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(mt_smem_addr(dst)), "l"(src) : "memory");
}
// Issued only where `p` holds, as a predicated instruction (no branch): the aligned body's copies
// then sit in the same basic block as the mma before them, and ptxas may interleave the two.
MT_FN void mt_cp_async16_if(void* dst, const void* src, bool p) {
  asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q cp.async.cg.shared.global [%0], [%1], 16; }"
               ::"r"(mt_smem_addr(dst)), "l"(src), "r"(int(p)) : "memory");
}
MT_FN void mt_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Four 8x8 16-bit matrices: lanes 8q..8q+7 give the row addresses of matrix q (volatile: it
// reads shared memory, so it must stay between the barriers it was written between). The
// address is a shared-window offset (mt_smem_addr of the array once, plus 32-bit offsets).
MT_FN void mt_ldmatrix_x4(uint* r, uint a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
MT_FN void mt_ldmatrix_x4_trans(uint* r, uint a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
MT_FN void mt_ldmatrix_x2_trans(uint* r, uint a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
MT_FN void mt_ldmatrix_x2(uint* r, uint a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}

// ---- atomics: mt_atomic_<op>(address, [cmp,] value) -> the old value ------------------------
// 64-bit integers go through the unsigned long long forms (wrap-around add is the same bits);
// f32 max/min follow mt_fmax/mt_fmin and f32 cas compares bits, all looping on atomicCAS.
MT_FN int mt_atomic_add(int* p, int v) { return atomicAdd(p, v); }
MT_FN uint mt_atomic_add(uint* p, uint v) { return atomicAdd(p, v); }
MT_FN llong mt_atomic_add(llong* p, llong v) { return llong(atomicAdd((ullong*)p, ullong(v))); }
MT_FN float mt_atomic_add(float* p, float v) { return atomicAdd(p, v); }
MT_FN int mt_atomic_max(int* p, int v) { return atomicMax(p, v); }
MT_FN uint mt_atomic_max(uint* p, uint v) { return atomicMax(p, v); }
MT_FN llong mt_atomic_max(llong* p, llong v) { return atomicMax(p, v); }
MT_FN int mt_atomic_min(int* p, int v) { return atomicMin(p, v); }
MT_FN uint mt_atomic_min(uint* p, uint v) { return atomicMin(p, v); }
MT_FN llong mt_atomic_min(llong* p, llong v) { return atomicMin(p, v); }
MT_FN int mt_atomic_xchg(int* p, int v) { return atomicExch(p, v); }
MT_FN uint mt_atomic_xchg(uint* p, uint v) { return atomicExch(p, v); }
MT_FN llong mt_atomic_xchg(llong* p, llong v) { return llong(atomicExch((ullong*)p, ullong(v))); }
MT_FN float mt_atomic_xchg(float* p, float v) { return atomicExch(p, v); }
MT_FN int mt_atomic_cas(int* p, int c, int v) { return atomicCAS(p, c, v); }
MT_FN uint mt_atomic_cas(uint* p, uint c, uint v) { return atomicCAS(p, c, v); }
MT_FN llong mt_atomic_cas(llong* p, llong c, llong v) {
  return llong(atomicCAS((ullong*)p, ullong(c), ullong(v)));
}
MT_FN float mt_atomic_cas(float* p, float c, float v) {
  return __uint_as_float(atomicCAS((uint*)p, __float_as_uint(c), __float_as_uint(v)));
}
#define MT_ATOMIC_F32(NAME, EXPR)                                                                \
  MT_FN float mt_atomic_##NAME(float* p, float v) {                                              \
    uint* bits = (uint*)p;                                                                       \
    uint seen = *(volatile uint*)bits, was;                                                      \
    do {                                                                                         \
      was = seen;                                                                                \
      float old = __uint_as_float(was);                                                          \
      seen = atomicCAS(bits, was, __float_as_uint(EXPR));                                        \
    } while (seen != was);                                                                       \
    return __uint_as_float(was);                                                                 \
  }
MT_ATOMIC_F32(max, mt_fmax(old, v))
MT_ATOMIC_F32(min, mt_fmin(old, v))
#undef MT_ATOMIC_F32

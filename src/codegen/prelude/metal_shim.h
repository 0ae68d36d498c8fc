/** \file metal_shim.h
 * The Metal Shading Language surface that generated kernels use, as C++20 for clang >= 15, so the
 * metal-sim device can run MSL on any host. The runtime compiles
 *   clang++ -x c++ -std=c++20 -O2 -Werror -include metal_shim.h <prepared MSL + trampoline>
 * where "prepared" (src/runtime/metal_sim/msl_prepare.cpp) rewrites the two constructs a header
 * cannot express: kernel-scope `threadgroup` variables (one object shared by the threads of a
 * group, while `threadgroup` on a pointer is only a qualifier) and `[[attribute]]` lists (whose
 * names would clash with parameter names if they were macros).
 *
 * Threads run as fibers, one simdgroup's lanes exchanging values through metal_sim_abi.h; every
 * collective (simd_*, simdgroup_barrier, simdgroup_multiply_accumulate, matmul2d::run) needs all
 * live lanes of the simdgroup at the same call site, and threadgroup_barrier all threads of the
 * group. C++20 for one construct: matmul2d takes its descriptor as a template argument.
 *
 * Deliberate differences from MSL (none matter for the code metile emits):
 * - vectors are clang ext_vector_type: a vector comparison yields an integer mask (-1/0), which
 *   select/all/any/boolN(...) accept; static_cast or a C cast between vector types reinterprets
 *   bits, so convert with the constructor spelling `float4(v)`;
 * - half arithmetic may keep float precision inside one expression; bfloat computes in float;
 * - simdgroup_matrix is 8x8 float or half; there is no erf (MSL has none either);
 * - tensors and tensor_ops are the subset in metal_shim_tensor.h.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "metal_sim_abi.h"

namespace metal {

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef _Float16 half;

namespace detail {
template <bool B, typename T = int>
struct enable_if {};
template <typename T>
struct enable_if<true, T> {
  typedef T type;
};
template <bool B>
using when = typename enable_if<B>::type;

template <typename T, typename U>
inline constexpr bool same = false;
template <typename T>
inline constexpr bool same<T, T> = true;

template <typename T>
inline constexpr bool is_scalar = false;
#define METAL_SIM_SCALAR(T) \
  template <>               \
  inline constexpr bool is_scalar<T> = true;
METAL_SIM_SCALAR(bool)
METAL_SIM_SCALAR(char)
METAL_SIM_SCALAR(signed char)
METAL_SIM_SCALAR(uchar)
METAL_SIM_SCALAR(short)
METAL_SIM_SCALAR(ushort)
METAL_SIM_SCALAR(int)
METAL_SIM_SCALAR(uint)
METAL_SIM_SCALAR(long)
METAL_SIM_SCALAR(ulong)
METAL_SIM_SCALAR(half)
METAL_SIM_SCALAR(float)
METAL_SIM_SCALAR(double)
#undef METAL_SIM_SCALAR
}  // namespace detail

/** bfloat16: stored as the upper half of a float, rounded to nearest even; computes in float. */
struct bfloat {
  uint16_t bits;
  bfloat() = default;
  template <typename U, detail::when<detail::is_scalar<U>> = 0>
  constexpr bfloat(U v) : bits(from_float(float(v))) {}
  constexpr operator float() const { return __builtin_bit_cast(float, uint32_t(bits) << 16); }
  bfloat& operator+=(float v) { return *this = float(*this) + v; }
  bfloat& operator-=(float v) { return *this = float(*this) - v; }
  bfloat& operator*=(float v) { return *this = float(*this) * v; }
  bfloat& operator/=(float v) { return *this = float(*this) / v; }
  static constexpr uint16_t from_float(float f) {
    uint32_t u = __builtin_bit_cast(uint32_t, f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet the NaN
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

namespace detail {
template <>
inline constexpr bool is_scalar<bfloat> = true;
}  // namespace detail

// bfloat mixed with any scalar computes in float (without these, bfloat * half is ambiguous).
#define METAL_SIM_BFLOAT_OP(op, R)                                                         \
  template <typename U, detail::when<detail::is_scalar<U>> = 0>                            \
  constexpr R operator op(bfloat a, U b) {                                                 \
    return float(a) op float(b);                                                           \
  }                                                                                        \
  template <typename U, detail::when<detail::is_scalar<U> && !detail::same<U, bfloat>> = 0> \
  constexpr R operator op(U a, bfloat b) {                                                 \
    return float(a) op float(b);                                                           \
  }
METAL_SIM_BFLOAT_OP(+, float)
METAL_SIM_BFLOAT_OP(-, float)
METAL_SIM_BFLOAT_OP(*, float)
METAL_SIM_BFLOAT_OP(/, float)
METAL_SIM_BFLOAT_OP(<, bool)
METAL_SIM_BFLOAT_OP(>, bool)
METAL_SIM_BFLOAT_OP(<=, bool)
METAL_SIM_BFLOAT_OP(>=, bool)
METAL_SIM_BFLOAT_OP(==, bool)
METAL_SIM_BFLOAT_OP(!=, bool)
#undef METAL_SIM_BFLOAT_OP

template <typename T, int N>
using vec = T __attribute__((ext_vector_type(N)));

#define METAL_SIM_VECTORS(T, name) \
  typedef vec<T, 2> name##2;       \
  typedef vec<T, 3> name##3;       \
  typedef vec<T, 4> name##4;
// bool vectors hold plain char (0/1): clang's own bool vectors are bit-packed and have no .x.
METAL_SIM_VECTORS(char, bool)
METAL_SIM_VECTORS(signed char, char)
METAL_SIM_VECTORS(uchar, uchar)
METAL_SIM_VECTORS(short, short)
METAL_SIM_VECTORS(ushort, ushort)
METAL_SIM_VECTORS(int, int)
METAL_SIM_VECTORS(uint, uint)
METAL_SIM_VECTORS(long, long)
METAL_SIM_VECTORS(ulong, ulong)
METAL_SIM_VECTORS(half, half)
METAL_SIM_VECTORS(float, float)
#undef METAL_SIM_VECTORS

// packed_<T>2/4: the same vectors aligned to one element, for loads and stores at any element
// offset (packed_<T>3 is 3 elements wide in MSL and has no clang counterpart, so it is absent).
#define METAL_SIM_PACKED(T, name)                                                        \
  typedef T packed_##name##2 __attribute__((ext_vector_type(2), aligned(alignof(T)))); \
  typedef T packed_##name##4 __attribute__((ext_vector_type(4), aligned(alignof(T))));
METAL_SIM_PACKED(signed char, char)
METAL_SIM_PACKED(uchar, uchar)
METAL_SIM_PACKED(short, short)
METAL_SIM_PACKED(ushort, ushort)
METAL_SIM_PACKED(int, int)
METAL_SIM_PACKED(uint, uint)
METAL_SIM_PACKED(half, half)
METAL_SIM_PACKED(float, float)
#undef METAL_SIM_PACKED

namespace detail {

template <typename V>
struct vector_traits {
  static constexpr bool is_vector = false;
  static constexpr int size = 1;
  typedef V element;
};
template <typename T, int N>
struct vector_traits<vec<T, N>> {
  static constexpr bool is_vector = true;
  static constexpr int size = N;
  typedef T element;
};
template <typename V>
inline constexpr bool is_vector = vector_traits<V>::is_vector;
template <typename V>
inline constexpr int size_of = vector_traits<V>::size;
template <typename V>
using element_of = typename vector_traits<V>::element;
template <typename V>
inline constexpr bool is_float_like = same<element_of<V>, float> || same<element_of<V>, half>;

template <typename V, typename P>
void append(V& r, int& k, const P& p) {
  if constexpr (is_vector<P>) {
    for (int i = 0; i < size_of<P>; ++i) r[k++] = element_of<V>(p[i]);
  } else {
    r[k++] = element_of<V>(p);
  }
}

/** Builds vector V from scalars and vectors whose components add up to V's size (MSL's
 *  `float4(a, b.xy, c)`), or splats one scalar, or converts one vector of the same size. */
template <typename V, typename... A>
V make_vector(const A&... parts) {
  constexpr int n = size_of<V>;
  V r{};
  if constexpr (sizeof...(A) == 1 && (!is_vector<A> && ...)) {
    for (int i = 0; i < n; ++i) r[i] = element_of<V>(parts...);
  } else if constexpr (sizeof...(A) == 1 && (is_vector<A> && ...)) {
    static_assert(((size_of<A> == n) && ...), "vector conversion needs vectors of the same size");
    auto convert = [&](const auto& p) {
      for (int i = 0; i < n; ++i)
        r[i] = same<element_of<V>, char> ? element_of<V>(p[i] != 0) : element_of<V>(p[i]);
    };
    (convert(parts), ...);
  } else if constexpr (sizeof...(A) > 1) {
    static_assert((size_of<A> + ...) == n,
                  "vector constructor: the components do not add up to its size");
    int k = 0;
    (append(r, k, parts), ...);
  }
  return r;
}

template <typename V, typename F>
V map(const V& v, F f) {
  V r;
  for (int i = 0; i < size_of<V>; ++i) r[i] = f(v[i]);
  return r;
}
template <typename V, typename F>
V map(const V& a, const V& b, F f) {
  V r;
  for (int i = 0; i < size_of<V>; ++i) r[i] = f(a[i], b[i]);
  return r;
}
template <typename V, typename F>
V map(const V& a, const V& b, const V& c, F f) {
  V r;
  for (int i = 0; i < size_of<V>; ++i) r[i] = f(a[i], b[i], c[i]);
  return r;
}
template <typename V, typename F>
vec<char, size_of<V>> test(const V& v, F f) {
  vec<char, size_of<V>> r;
  for (int i = 0; i < size_of<V>; ++i) r[i] = f(v[i]);
  return r;
}

/** The simulated thread running on this OS thread; set by the trampoline and after every fiber
 *  switch (all threads of a group share one OS thread). */
inline thread_local metal_sim_thread* current = nullptr;

/** At the top of every loop body (metal-sim's MSL preparation puts it there): every 4096
 *  iterations the runtime checks the launch's time limit and metile_cancel_launches, so a long
 *  loop cannot hang a launch. */
inline void loop_tick() {
  metal_sim_thread* t = current;
  if (__builtin_expect(++t->loop_ticks >= 4096, 0)) {
    t->loop_ticks = 0;
    t->ops->check_time(t);
  }
}

inline uint lane_of(const metal_sim_thread* t) {
  return t->builtin[METAL_SIM_THREAD_INDEX_IN_SIMDGROUP][0];
}

/** The values the lanes published for one collective. */
template <typename T>
struct lane_values {
  const metal_sim_thread* t;
  uint parity;
  T operator[](uint lane) const {
    T v;
    __builtin_memcpy(&v, t->simd_slots[parity][lane], sizeof(T));
    return v;
  }
  uint32_t active() const { return t->simd_active; }
  bool is_active(uint lane) const {
    return lane < METAL_SIM_SIMD_WIDTH && ((active() >> lane) & 1u);
  }
  uint self() const { return lane_of(t); }
};

/** Publishes `value` and waits until every live lane of the simdgroup did the same. */
template <typename T>
lane_values<T> exchange(const T& value, const char* what, uint32_t line, uint32_t column) {
  static_assert(sizeof(T) <= METAL_SIM_SLOT_BYTES,
                "simd collectives take values of at most 32 bytes");
  metal_sim_thread* t = current;
  uint parity = t->simd_parity;
  t->simd_parity = parity ^ 1u;
  __builtin_memcpy(t->simd_slots[parity][lane_of(t)], &value, sizeof(T));
  t->ops->simd_sync(t, line, column, what);
  current = t;
  return {t, parity};
}

template <typename T, typename F>
T fold_active(const lane_values<T>& l, F f) {
  uint32_t m = l.active();
  T r = l[uint(__builtin_ctz(m))];
  for (m &= m - 1; m != 0; m &= m - 1) r = f(r, l[uint(__builtin_ctz(m))]);
  return r;
}

/** Lanes that are active and below `lane` (exclusive) or up to it (inclusive). */
inline uint32_t lanes_before(uint32_t active, uint lane, bool inclusive) {
  uint32_t below = lane >= 31 ? 0xffffffffu >> (inclusive ? 0 : 1)
                              : (1u << (lane + (inclusive ? 1 : 0))) - 1u;
  return active & below;
}

/** A builtin argument; converts to whatever scalar or vector type the kernel declares. */
struct builtin_value {
  uint32_t v[3];
  template <typename T>
  operator T() const {
    if constexpr (is_vector<T>) {
      T r{};
      for (int i = 0; i < size_of<T> && i < 3; ++i) r[i] = element_of<T>(v[i]);
      return r;
    } else {
      return T(v[0]);
    }
  }
};
inline builtin_value builtin(const metal_sim_thread* t, int which) {
  return {{t->builtin[which][0], t->builtin[which][1], t->builtin[which][2]}};
}

/** A kernel-scope `threadgroup T name[...]` after preparation: the group's shared object. */
template <typename T>
T& threadgroup_variable(uint32_t id, const char* name) {
  metal_sim_thread* t = current;
  return *static_cast<T*>(t->ops->threadgroup_variable(t, id, sizeof(T), alignof(T), name));
}

}  // namespace detail

}  // namespace metal

#include "metal_shim_math.h"

namespace metal {

// ---- synchronization -------------------------------------------------------------------------

enum class mem_flags : uint {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(uint(a) | uint(b)); }

// The fence flags need no action: a group's threads share one OS thread.
inline void threadgroup_barrier(mem_flags, uint32_t line = __builtin_LINE(),
                                uint32_t column = __builtin_COLUMN()) {
  metal_sim_thread* t = detail::current;
  t->ops->threadgroup_barrier(t, line, column);
  detail::current = t;
}
inline void simdgroup_barrier(mem_flags, uint32_t line = __builtin_LINE(),
                              uint32_t column = __builtin_COLUMN()) {
  metal_sim_thread* t = detail::current;
  t->ops->simd_sync(t, line, column, "simdgroup_barrier");
  detail::current = t;
}

// ---- simdgroup functions ---------------------------------------------------------------------
// Lanes beyond the group size and threads that returned are inactive: reductions skip them, and a
// shuffle whose source lane is inactive or outside the simdgroup returns the caller's own value
// (undefined in MSL; shuffle_up/down define it that way for lanes past the edge).

#define METAL_SIM_SITE uint32_t line = __builtin_LINE(), uint32_t column = __builtin_COLUMN()

#define METAL_SIM_REDUCE(name, op)                                       \
  template <typename T>                                                  \
  inline T name(T x, METAL_SIM_SITE) {                                   \
    auto l = detail::exchange(x, #name, line, column);                   \
    return detail::fold_active(l, [](T a, T b) { return T(op); });       \
  }
METAL_SIM_REDUCE(simd_sum, a + b)
METAL_SIM_REDUCE(simd_product, a * b)
METAL_SIM_REDUCE(simd_max, max(a, b))
METAL_SIM_REDUCE(simd_min, min(a, b))
METAL_SIM_REDUCE(simd_and, a & b)
METAL_SIM_REDUCE(simd_or, a | b)
METAL_SIM_REDUCE(simd_xor, a ^ b)
#undef METAL_SIM_REDUCE

#define METAL_SIM_SCAN(name, op, inclusive, identity)                              \
  template <typename T>                                                            \
  inline T name(T x, METAL_SIM_SITE) {                                             \
    auto l = detail::exchange(x, #name, line, column);                             \
    T r = T(identity);                                                             \
    for (uint32_t m = detail::lanes_before(l.active(), l.self(), inclusive); m != 0; \
         m &= m - 1)                                                               \
      r = T(r op l[uint(__builtin_ctz(m))]);                                       \
    return r;                                                                      \
  }
METAL_SIM_SCAN(simd_prefix_inclusive_sum, +, true, 0)
METAL_SIM_SCAN(simd_prefix_exclusive_sum, +, false, 0)
METAL_SIM_SCAN(simd_prefix_inclusive_product, *, true, 1)
METAL_SIM_SCAN(simd_prefix_exclusive_product, *, false, 1)
#undef METAL_SIM_SCAN

#define METAL_SIM_SHUFFLE(name, P, source)                                \
  template <typename T>                                                   \
  inline T name(T x, P arg, METAL_SIM_SITE) {                             \
    auto l = detail::exchange(x, #name, line, column);                    \
    long src = (source);                                                  \
    return src >= 0 && l.is_active(uint(src)) ? l[uint(src)] : x;        \
  }
METAL_SIM_SHUFFLE(simd_shuffle, ushort, long(arg))
METAL_SIM_SHUFFLE(simd_broadcast, ushort, long(arg))
METAL_SIM_SHUFFLE(simd_shuffle_xor, ushort, long(l.self() ^ uint(arg)))
METAL_SIM_SHUFFLE(simd_shuffle_up, ushort, long(l.self()) - long(arg))
METAL_SIM_SHUFFLE(simd_shuffle_down, ushort, long(l.self()) + long(arg))
METAL_SIM_SHUFFLE(simd_shuffle_rotate_up, ushort,
                  long((l.self() + METAL_SIM_SIMD_WIDTH - arg % METAL_SIM_SIMD_WIDTH) %
                       METAL_SIM_SIMD_WIDTH))
METAL_SIM_SHUFFLE(simd_shuffle_rotate_down, ushort,
                  long((l.self() + arg) % METAL_SIM_SIMD_WIDTH))
#undef METAL_SIM_SHUFFLE

template <typename T>
inline T simd_broadcast_first(T x, METAL_SIM_SITE) {
  auto l = detail::exchange(x, "simd_broadcast_first", line, column);
  return l[uint(__builtin_ctz(l.active()))];
}

/** The result of simd_ballot: one bit per lane, plus which lanes were active. */
class simd_vote {
 public:
  typedef ulong vote_t;
  explicit constexpr simd_vote(vote_t bits = 0, vote_t active = ~vote_t(0))
      : bits_(bits), active_(active) {}
  explicit constexpr operator vote_t() const { return bits_; }
  constexpr bool all() const { return (bits_ & active_) == active_; }
  constexpr bool any() const { return bits_ != 0; }

 private:
  vote_t bits_, active_;
};

inline simd_vote simd_ballot(bool b, METAL_SIM_SITE) {
  auto l = detail::exchange(b, "simd_ballot", line, column);
  ulong bits = 0;
  for (uint32_t m = l.active(); m != 0; m &= m - 1)
    if (l[uint(__builtin_ctz(m))]) bits |= ulong(1) << __builtin_ctz(m);
  return simd_vote(bits, l.active());
}
inline simd_vote simd_active_threads_mask(METAL_SIM_SITE) {
  auto l = detail::exchange(true, "simd_active_threads_mask", line, column);
  return simd_vote(l.active(), l.active());
}
inline bool simd_all(bool b, METAL_SIM_SITE) { return simd_ballot(b, line, column).all(); }
inline bool simd_any(bool b, METAL_SIM_SITE) { return simd_ballot(b, line, column).any(); }
inline bool simd_is_first(METAL_SIM_SITE) {
  auto l = detail::exchange(true, "simd_is_first", line, column);
  return uint(__builtin_ctz(l.active())) == l.self();
}

// ---- atomics ---------------------------------------------------------------------------------
// Real atomics: threadgroups run concurrently on several OS threads.

enum memory_order {
  memory_order_relaxed = __ATOMIC_RELAXED,
  memory_order_acquire = __ATOMIC_ACQUIRE,
  memory_order_release = __ATOMIC_RELEASE,
  memory_order_acq_rel = __ATOMIC_ACQ_REL,
  memory_order_seq_cst = __ATOMIC_SEQ_CST,
};

template <typename T>
struct atomic {
  T storage;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<bool> atomic_bool;
typedef atomic<float> atomic_float;  // add/sub only

namespace detail {
template <typename T>
struct identity {
  typedef T type;
};
template <typename T>
using same_as = typename identity<T>::type;
}  // namespace detail

template <typename T>
inline void atomic_store_explicit(volatile atomic<T>* a, detail::same_as<T> v, memory_order o) {
  __atomic_store_n(&a->storage, v, o);
}
template <typename T>
inline T atomic_load_explicit(volatile atomic<T>* a, memory_order o) {
  return __atomic_load_n(&a->storage, o);
}
template <typename T>
inline T atomic_exchange_explicit(volatile atomic<T>* a, detail::same_as<T> v, memory_order o) {
  return __atomic_exchange_n(&a->storage, v, o);
}
template <typename T>
inline bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* a, T* expected,
                                                  detail::same_as<T> desired, memory_order success,
                                                  memory_order failure) {
  return __atomic_compare_exchange_n(&a->storage, expected, desired, true, success, failure);
}
#define METAL_SIM_ATOMIC_RMW(function, builtin)                                               \
  template <typename T, detail::when<!detail::same<T, float>> = 0>                            \
  inline T function(volatile atomic<T>* a, detail::same_as<T> v, memory_order o) {           \
    return builtin(&a->storage, v, o);                                                        \
  }
METAL_SIM_ATOMIC_RMW(atomic_fetch_add_explicit, __atomic_fetch_add)
METAL_SIM_ATOMIC_RMW(atomic_fetch_sub_explicit, __atomic_fetch_sub)
METAL_SIM_ATOMIC_RMW(atomic_fetch_and_explicit, __atomic_fetch_and)
METAL_SIM_ATOMIC_RMW(atomic_fetch_or_explicit, __atomic_fetch_or)
METAL_SIM_ATOMIC_RMW(atomic_fetch_xor_explicit, __atomic_fetch_xor)
#undef METAL_SIM_ATOMIC_RMW
#define METAL_SIM_ATOMIC_CAS(function, update)                                                \
  template <typename T>                                                                       \
  inline T function(volatile atomic<T>* a, detail::same_as<T> v, memory_order o) {            \
    T old = __atomic_load_n(&a->storage, __ATOMIC_RELAXED);                                   \
    while (!__atomic_compare_exchange_n(&a->storage, &old, T(update), true, o,                \
                                        __ATOMIC_RELAXED)) {                                  \
    }                                                                                         \
    return old;                                                                               \
  }
METAL_SIM_ATOMIC_CAS(atomic_fetch_min_explicit, v < old ? v : old)
METAL_SIM_ATOMIC_CAS(atomic_fetch_max_explicit, old < v ? v : old)
#undef METAL_SIM_ATOMIC_CAS
inline float atomic_fetch_add_explicit(volatile atomic<float>* a, float v, memory_order o) {
  volatile uint32_t* bits = reinterpret_cast<volatile uint32_t*>(&a->storage);
  uint32_t old = __atomic_load_n(bits, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(
      bits, &old, __builtin_bit_cast(uint32_t, __builtin_bit_cast(float, old) + v), true, o,
      __ATOMIC_RELAXED)) {
  }
  return __builtin_bit_cast(float, old);
}
inline float atomic_fetch_sub_explicit(volatile atomic<float>* a, float v, memory_order o) {
  return atomic_fetch_add_explicit(a, -v, o);
}

}  // namespace metal

#include "metal_shim_matrix.h"
#include "metal_shim_tensor.h"

#undef METAL_SIM_SITE

// MSL spells half literals 1.5h; C++14 lets a library claim the `h` suffix.
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wuser-defined-literals"
constexpr metal::half operator""h(long double v) { return metal::half(v); }
constexpr metal::half operator""h(unsigned long long v) { return metal::half(v); }
#pragma clang diagnostic pop

// ---- MSL keywords and constants --------------------------------------------------------------
// Address spaces are qualifiers only (one host address space); `threadgroup` is handled when the
// source is prepared. `constant` memory is read-only, so it becomes const; MSL code often adds its
// own const (`constant const T*`), hence the one diagnostic silenced here.
#pragma clang diagnostic ignored "-Wduplicate-decl-specifier"
// Generated kernels may compare a value with itself (`x < x` is valid Tile IR); Metal's compiler
// does not reject that, so the simulator's -Werror must not either.
#pragma clang diagnostic ignored "-Wtautological-compare"
#define kernel
#define device
#define constant const
#define thread
#define METAL_FUNC inline __attribute__((always_inline))

#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_huge_valf()
#define MAXFLOAT 0x1.fffffep127f
#define FLT_MAX 0x1.fffffep127f
#define FLT_MIN 0x1p-126f
#define FLT_EPSILON 0x1p-23f
#define HALF_MAX 65504.0h
#define HALF_MIN 0x1p-14h
#define M_PI_F 3.14159265358979323846f
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LN2_F 0.693147180559945309417f
#define M_SQRT2_F 1.41421356237309504880f

// MSL constructs vectors with function-call syntax (float4(x), float4(a.xy, b)); clang's vector
// types only take braces, so each name used as a call becomes a call of make_<name>, declared in
// namespace metal (so metal::float4(x) works too). A name not followed by '(' stays the type.
namespace metal {
#define METAL_SIM_MAKERS(name)                                           \
  template <typename... A>                                               \
  inline name##2 make_##name##2(const A&... parts) {                     \
    return detail::make_vector<name##2>(parts...);                       \
  }                                                                      \
  template <typename... A>                                               \
  inline name##3 make_##name##3(const A&... parts) {                     \
    return detail::make_vector<name##3>(parts...);                       \
  }                                                                      \
  template <typename... A>                                               \
  inline name##4 make_##name##4(const A&... parts) {                     \
    return detail::make_vector<name##4>(parts...);                       \
  }
METAL_SIM_MAKERS(bool)
METAL_SIM_MAKERS(char)
METAL_SIM_MAKERS(uchar)
METAL_SIM_MAKERS(short)
METAL_SIM_MAKERS(ushort)
METAL_SIM_MAKERS(int)
METAL_SIM_MAKERS(uint)
METAL_SIM_MAKERS(long)
METAL_SIM_MAKERS(ulong)
METAL_SIM_MAKERS(half)
METAL_SIM_MAKERS(float)
#undef METAL_SIM_MAKERS
}  // namespace metal
#define bool2(...) make_bool2(__VA_ARGS__)
#define bool3(...) make_bool3(__VA_ARGS__)
#define bool4(...) make_bool4(__VA_ARGS__)
#define char2(...) make_char2(__VA_ARGS__)
#define char3(...) make_char3(__VA_ARGS__)
#define char4(...) make_char4(__VA_ARGS__)
#define uchar2(...) make_uchar2(__VA_ARGS__)
#define uchar3(...) make_uchar3(__VA_ARGS__)
#define uchar4(...) make_uchar4(__VA_ARGS__)
#define short2(...) make_short2(__VA_ARGS__)
#define short3(...) make_short3(__VA_ARGS__)
#define short4(...) make_short4(__VA_ARGS__)
#define ushort2(...) make_ushort2(__VA_ARGS__)
#define ushort3(...) make_ushort3(__VA_ARGS__)
#define ushort4(...) make_ushort4(__VA_ARGS__)
#define int2(...) make_int2(__VA_ARGS__)
#define int3(...) make_int3(__VA_ARGS__)
#define int4(...) make_int4(__VA_ARGS__)
#define uint2(...) make_uint2(__VA_ARGS__)
#define uint3(...) make_uint3(__VA_ARGS__)
#define uint4(...) make_uint4(__VA_ARGS__)
#define long2(...) make_long2(__VA_ARGS__)
#define long3(...) make_long3(__VA_ARGS__)
#define long4(...) make_long4(__VA_ARGS__)
#define ulong2(...) make_ulong2(__VA_ARGS__)
#define ulong3(...) make_ulong3(__VA_ARGS__)
#define ulong4(...) make_ulong4(__VA_ARGS__)
#define half2(...) make_half2(__VA_ARGS__)
#define half3(...) make_half3(__VA_ARGS__)
#define half4(...) make_half4(__VA_ARGS__)
#define float2(...) make_float2(__VA_ARGS__)
#define float3(...) make_float3(__VA_ARGS__)
#define float4(...) make_float4(__VA_ARGS__)

/** \file dsl.h
 * A thin layer over metile::Builder that lets the suite's kernels read like the seed's Python:
 * values carry their builder, operators build ops, and every named call records the C++ line it
 * was written on as the op's source location (operators inherit the last recorded line; call
 * `k.at()` to start a statement made only of operators).
 */
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "frontend/builder.h"

namespace metile::kernels {

class KernelBuilder;

/** A value of the kernel being built. */
struct V {
  KernelBuilder* k = nullptr;
  ValueId id = kNoValue;
};

/** The caller's source position, captured by a default argument (GCC and clang builtins). */
struct Here {
  const char* file;
  int line;
  Here(const char* f = __builtin_FILE(), int l = __builtin_LINE()) : file(f), line(l) {}
};

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name) : b_(std::move(name)) {}

  Builder& raw() { return b_; }

  /** Sets the location of the ops built next to the caller's line. */
  KernelBuilder& at(Here here = Here()) {
    std::string file = here.file;
    size_t slash = file.find_last_of('/');
    b_.set_loc(slash == std::string::npos ? file : file.substr(slash + 1), here.line);
    return *this;
  }

  V ptr(const std::string& name, DType d = DType::f32, Here h = Here()) {
    at(h);
    return wrap(b_.param(name, Type::ptr(d)));
  }
  V scalar(const std::string& name, DType d = DType::i32, Here h = Here()) {
    at(h);
    return wrap(b_.param(name, Type::scalar(d)));
  }
  void constexpr_(const std::string& name, int64_t value) {
    b_.set_constexpr(name, std::to_string(value));
  }

  V i32(int64_t v) { return wrap(b_.const_int(DType::i32, v)); }
  V f32(double v) { return wrap(b_.const_float(DType::f32, v)); }
  V program_id(int axis, Here h = Here()) { return at(h).wrap(b_.grid(OpKind::PROGRAM_ID, axis)); }
  V num_programs(int axis, Here h = Here()) { return at(h).wrap(b_.grid(OpKind::NUM_PROGRAMS, axis)); }
  V arange(V start, int64_t size, Here h = Here()) { return at(h).wrap(b_.arange(start.id, size)); }
  V arange(int64_t start, int64_t size, Here h = Here()) { return arange(i32(start), size, h); }
  V zeros(Shape s, Here h = Here()) { return full(s, 0.0, h); }
  V full(Shape s, double v, Here h = Here()) { return at(h).wrap(b_.broadcast(f32(v).id, s)); }
  V cast(V x, DType d, Here h = Here()) { return at(h).wrap(b_.cast(x.id, d)); }

  V load(V ptrs, Here h = Here()) { return at(h).wrap(b_.load(ptrs.id, kNoValue, kNoValue)); }
  V load(V ptrs, V mask, Here h = Here()) {
    return at(h).wrap(b_.load(ptrs.id, mask.id, kNoValue));
  }
  V load(V ptrs, V mask, double other, Here h = Here()) {
    at(h);
    return wrap(b_.load(ptrs.id, mask.id, f32(other).id));
  }
  void store(V ptrs, V value, Here h = Here()) { at(h).b_.store(ptrs.id, value.id, kNoValue); }
  void store(V ptrs, V value, V mask, Here h = Here()) {
    at(h).b_.store(ptrs.id, value.id, mask.id);
  }
  V atomic(OpKind op, V ptrs, V value, V mask, Here h = Here()) {
    return at(h).wrap(b_.atomic(op, ptrs.id, kNoValue, value.id, mask.id));
  }
  V atomic_cas(V ptrs, V cmp, V value, V mask, Here h = Here()) {
    return at(h).wrap(b_.atomic(OpKind::ATOMIC_CAS, ptrs.id, cmp.id, value.id, mask.id));
  }
  V atomic(OpKind op, V ptrs, V value, Here h = Here()) {
    return at(h).wrap(b_.atomic(op, ptrs.id, kNoValue, value.id, kNoValue));
  }
  V tile_load(V ptr, V row, V col, V stride, Shape s, Here h = Here()) {
    return at(h).wrap(b_.tile_load(ptr.id, row.id, col.id, stride.id, s, kNoValue, kNoValue));
  }
  V tile_load(V ptr, V row, V col, V stride, Shape s, V rows, V cols, Here h = Here()) {
    return at(h).wrap(b_.tile_load(ptr.id, row.id, col.id, stride.id, s, rows.id, cols.id));
  }
  void tile_store(V ptr, V row, V col, V stride, V value, Here h = Here()) {
    at(h).b_.tile_store(ptr.id, row.id, col.id, stride.id, value.id, kNoValue, kNoValue);
  }
  void tile_store(V ptr, V row, V col, V stride, V value, V rows, V cols, Here h = Here()) {
    at(h).b_.tile_store(ptr.id, row.id, col.id, stride.id, value.id, rows.id, cols.id);
  }
  V dot(V a, V b, V acc, Here h = Here()) { return at(h).wrap(b_.dot(a.id, b.id, acc.id)); }
  V trans(V x, Here h = Here()) { return at(h).wrap(b_.trans(x.id)); }

  V unary(OpKind op, V x, Here h = Here()) { return at(h).wrap(b_.unary(op, x.id)); }
  V exp(V x, Here h = Here()) { return unary(OpKind::EXP, x, h); }
  V sqrt(V x, Here h = Here()) { return unary(OpKind::SQRT, x, h); }
  V maximum(V a, V b, Here h = Here()) {
    return at(h).wrap(b_.binary(OpKind::MAXIMUM, a.id, b.id));
  }
  V where(V c, V a, V b, Here h = Here()) { return at(h).wrap(b_.select(c.id, a.id, b.id)); }
  V where(V c, V a, double b, Here h = Here()) { return where(c, a, f32(b), h); }
  V sum(V x, int axis = -1, Here h = Here()) { return reduce(OpKind::REDUCE_SUM, x, axis, h); }
  V max(V x, int axis = -1, Here h = Here()) { return reduce(OpKind::REDUCE_MAX, x, axis, h); }
  V reduce(OpKind op, V x, int axis, Here h = Here()) {
    return at(h).wrap(b_.reduce(op, x.id, axis));
  }

  /** `for iv in tile_range(start, end, step)` with carried values; body(iv, carried) -> yields. */
  template <typename Body>
  std::vector<V> tile_range(V start, V end, V step, const std::vector<V>& inits, Body&& body,
                            Here h = Here()) {
    at(h);
    std::vector<ValueId> ids;
    for (const V& v : inits) ids.push_back(v.id);
    auto [iv, carried] = b_.for_begin(start.id, end.id, step.id, ids);
    std::vector<V> in;
    for (ValueId c : carried) in.push_back(wrap(c));
    std::vector<V> out = body(wrap(iv), in);
    at(h);
    std::vector<ValueId> yields;
    for (const V& v : out) yields.push_back(v.id);
    std::vector<V> results;
    for (ValueId r : b_.for_end(yields)) results.push_back(wrap(r));
    return results;
  }

  V thread_id(Here h = Here()) { return at(h).wrap(b_.simt(OpKind::THREAD_ID)); }
  void barrier(Here h = Here()) { at(h).b_.simt(OpKind::BARRIER); }
  V shuffle_xor(V x, V mask, Here h = Here()) {
    return at(h).wrap(b_.simd(OpKind::SIMD_SHUFFLE_XOR, x.id, mask.id));
  }
  V shared(int64_t size, DType d = DType::f32, Here h = Here()) {
    return at(h).wrap(b_.shared(size, d));
  }
  std::pair<V, V> tile_swizzle(V pm, V pn, const std::string& pattern, int block, Here h = Here()) {
    auto [m, n] = at(h).b_.tile_swizzle(pm.id, pn.id, pattern, block);
    return {wrap(m), wrap(n)};
  }

  Program finish() { return b_.finish(); }

  V wrap(ValueId id) { return V{this, id}; }
  V lit(int v) { return i32(v); }
  V lit(int64_t v) { return i32(v); }
  V lit(double v) { return f32(v); }
  V lit(V v) { return v; }
  V binary(OpKind op, V a, V b) { return wrap(b_.binary(op, a.id, b.id)); }

 private:
  Builder b_;
};

namespace detail {
inline KernelBuilder* builder_of(const V& v) { return v.k; }
template <typename T>
KernelBuilder* builder_of(const T&) {
  return nullptr;
}
template <typename A, typename B>
V bin(OpKind op, const A& a, const B& b) {
  KernelBuilder* k = builder_of(a) ? builder_of(a) : builder_of(b);
  return k->binary(op, k->lit(a), k->lit(b));
}
template <typename A, typename B>
constexpr bool one_value = std::is_same_v<A, V> || std::is_same_v<B, V>;
}  // namespace detail

#define METILE_KERNELS_BINOP(sym, kind)                                                   \
  template <typename A, typename B, typename = std::enable_if_t<detail::one_value<A, B>>> \
  V operator sym(const A& a, const B& b) {                                                \
    return detail::bin(OpKind::kind, a, b);                                               \
  }
METILE_KERNELS_BINOP(+, ADD)
METILE_KERNELS_BINOP(-, SUB)
METILE_KERNELS_BINOP(*, MUL)
METILE_KERNELS_BINOP(/, DIV)
METILE_KERNELS_BINOP(%, MOD)
METILE_KERNELS_BINOP(<, LT)
METILE_KERNELS_BINOP(<=, LE)
METILE_KERNELS_BINOP(>, GT)
METILE_KERNELS_BINOP(>=, GE)
METILE_KERNELS_BINOP(==, EQ)
METILE_KERNELS_BINOP(!=, NE)
METILE_KERNELS_BINOP(&, BITAND)
METILE_KERNELS_BINOP(|, BITOR)
METILE_KERNELS_BINOP(<<, SHL)
METILE_KERNELS_BINOP(>>, SHR)
#undef METILE_KERNELS_BINOP

inline V operator~(const V& x) { return x.k->wrap(x.k->raw().unary(OpKind::NOT, x.id)); }

}  // namespace metile::kernels

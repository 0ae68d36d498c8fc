/** \file types.h
 * Element types and value types of the Tile IR: scalars, 1-D/2-D tiles, pointers (and tiles of
 * pointers) with an address space.
 */
#pragma once

#include <metile/metile.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace metile {

enum class DType : uint8_t {
  invalid = METILE_DTYPE_INVALID,
  f32 = METILE_DTYPE_F32,
  f16 = METILE_DTYPE_F16,
  bf16 = METILE_DTYPE_BF16,
  i32 = METILE_DTYPE_I32,
  u32 = METILE_DTYPE_U32,
  i64 = METILE_DTYPE_I64,
  boolean = METILE_DTYPE_BOOL,
  i8 = METILE_DTYPE_I8,
  u8 = METILE_DTYPE_U8,
  f8e4m3 = METILE_DTYPE_F8E4M3,
  f8e5m2 = METILE_DTYPE_F8E5M2,
};

size_t dtype_size(DType t);
const char* dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view s);
bool is_float(DType t);  // f32, f16, bf16 and the FP8 types
/** FP8 (f8e4m3, f8e5m2): storage-only floats. Ops move and convert them (load, store, cast,
 * select, broadcast, ...); arithmetic, comparisons, reductions and dots refuse them. */
bool is_f8(DType t);
bool is_int(DType t);  // integers, not bool
bool is_signed(DType t);
bool is_valid_dtype(int v);
/** The smallest and largest value of an integer or bool dtype; nullopt for floats. */
struct IntRange {
  int64_t lo, hi;
};
std::optional<IntRange> int_range(DType t);

enum class AddrSpace : uint8_t { device = 0, threadgroup = 1 };

/** Threadgroup arrays start on 16-byte boundaries, so vector accesses into them stay aligned:
 * the bytes one array of `bytes` occupies before the next may start. */
inline uint64_t align_threadgroup(uint64_t bytes) { return (bytes + 15) / 16 * 16; }

/** Rank-0..2 static shape. dims[i] for i >= rank is 1. */
struct Shape {
  int rank = 0;
  std::array<int64_t, 2> dims{1, 1};

  static Shape scalar() { return {}; }
  static Shape of(int64_t n) { return {1, {n, 1}}; }
  static Shape of(int64_t r, int64_t c) { return {2, {r, c}}; }
  int64_t numel() const { return dims[0] * dims[1]; }
  bool operator==(const Shape& o) const { return rank == o.rank && dims == o.dims; }
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "256", "64x32", "" for scalars
};

/** Symbolic dimension "T" (the SIMT thread count) while a builder has not fixed it yet. */
inline constexpr int64_t kThreadsDim = -1;

/** Largest number of elements of one tile (and of an arange); keeps element counts far from
 * overflow and tiles within what every backend can hold. */
inline constexpr int64_t kMaxTileElements = int64_t{1} << 24;

struct Type {
  DType dtype = DType::invalid;  // element type, or the pointee type for pointers
  Shape shape;                   // rank 0: scalar (or a single pointer)
  bool is_ptr = false;
  AddrSpace space = AddrSpace::device;

  static Type scalar(DType d) { return {d, Shape::scalar(), false, AddrSpace::device}; }
  static Type tile(DType d, Shape s) { return {d, s, false, AddrSpace::device}; }
  static Type ptr(DType d, AddrSpace sp = AddrSpace::device, Shape s = {}) {
    return {d, s, true, sp};
  }
  bool is_tile() const { return shape.rank > 0; }
  bool is_scalar() const { return shape.rank == 0; }
  /** Same type with another shape (kept pointer-ness). */
  Type with_shape(Shape s) const { return {dtype, s, is_ptr, space}; }
  Type with_dtype(DType d) const { return {d, shape, is_ptr, space}; }
  /** Scalar counterpart (element type of a tile, or the pointer itself). */
  Type element() const { return with_shape(Shape::scalar()); }
  bool operator==(const Type& o) const {
    return dtype == o.dtype && shape == o.shape && is_ptr == o.is_ptr &&
           (!is_ptr || space == o.space);
  }
  bool operator!=(const Type& o) const { return !(*this == o); }
  /** "f32", "tile<256xf32>", "ptr<f16>", "ptr<f32, threadgroup>", "tile<64xptr<f32>>". */
  std::string str() const;
};

/** Parses Type::str() output; nullopt when malformed. */
std::optional<Type> parse_type(std::string_view s);

Type from_c_type(const metile_type& t);
metile_type to_c_type(const Type& t);

}  // namespace metile

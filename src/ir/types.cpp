#include "ir/types.h"
#include "ir/const_range.h"

#include <charconv>
#include <cmath>
#include <cstdint>

#include "support/half.h"

namespace metile {

namespace {
struct DTypeInfo {
  DType t;
  const char* name;
  size_t size;
  int64_t lo, hi;  // value range of integer and bool dtypes
};
constexpr DTypeInfo kDTypes[] = {
    {DType::f32, "f32", 4, 0, 0},
    {DType::f16, "f16", 2, 0, 0},
    {DType::bf16, "bf16", 2, 0, 0},
    {DType::i32, "i32", 4, INT32_MIN, INT32_MAX},
    {DType::u32, "u32", 4, 0, UINT32_MAX},
    {DType::i64, "i64", 8, INT64_MIN, INT64_MAX},
    {DType::boolean, "bool", 1, 0, 1},
    {DType::i8, "i8", 1, INT8_MIN, INT8_MAX},
    {DType::u8, "u8", 1, 0, UINT8_MAX},
    {DType::f8e4m3, "f8e4m3", 1, 0, 0},
    {DType::f8e5m2, "f8e5m2", 1, 0, 0},
};
const DTypeInfo* info(DType t) {
  for (const auto& d : kDTypes)
    if (d.t == t) return &d;
  return nullptr;
}
}  // namespace

size_t dtype_size(DType t) {
  const DTypeInfo* i = info(t);
  return i ? i->size : 0;
}
const char* dtype_name(DType t) {
  const DTypeInfo* i = info(t);
  return i ? i->name : "invalid";
}
std::optional<DType> parse_dtype(std::string_view s) {
  for (const auto& d : kDTypes)
    if (s == d.name) return d.t;
  return std::nullopt;
}
std::optional<IntRange> int_range(DType t) {
  const DTypeInfo* i = info(t);
  if (i == nullptr || is_float(t)) return std::nullopt;
  return IntRange{i->lo, i->hi};
}
bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || is_f8(t);
}
bool is_f8(DType t) { return t == DType::f8e4m3 || t == DType::f8e5m2; }
bool is_int(DType t) {
  return t == DType::i32 || t == DType::u32 || t == DType::i64 || t == DType::i8 ||
         t == DType::u8;
}
bool is_signed(DType t) { return t == DType::i32 || t == DType::i64 || t == DType::i8; }
// Range-checked before the cast: DType is one byte, so 257 would otherwise pass as f32.
bool is_valid_dtype(int v) { return v > 0 && v <= 0xff && info(static_cast<DType>(v)) != nullptr; }

bool int_fits(DType t, int64_t v) {
  std::optional<IntRange> r = int_range(t);
  return r && v >= r->lo && v <= r->hi;
}

bool float_fits(DType t, double v) {
  if (!std::isfinite(v)) return t != DType::f8e4m3 || std::isnan(v);  // e4m3 has no infinity
  float f = static_cast<float>(v);
  switch (t) {
    case DType::f32: return std::isfinite(f);
    case DType::f16: return std::isfinite(f) && std::isfinite(f16_to_float(float_to_f16(f)));
    case DType::bf16: return std::isfinite(f) && std::isfinite(bf16_to_float(float_to_bf16(f)));
    // A cast saturates; a constant beyond the finite range is refused as for f16.
    case DType::f8e4m3: return std::fabs(v) <= 448.0;
    case DType::f8e5m2: return std::fabs(v) <= 57344.0;
    default: return false;
  }
}

std::string Shape::str() const {
  std::string s;
  for (int i = 0; i < rank; ++i) {
    if (i) s += 'x';
    s += dims[i] == kThreadsDim ? std::string("T") : std::to_string(dims[i]);
  }
  return s;
}

std::string Type::str() const {
  std::string elem = dtype_name(dtype);
  if (is_ptr) elem = "ptr<" + elem + (space == AddrSpace::threadgroup ? ", threadgroup>" : ">");
  if (shape.rank == 0) return elem;
  return "tile<" + shape.str() + "x" + elem + ">";
}

namespace {
bool consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

std::optional<Type> parse_elem(std::string_view s) {
  if (consume(s, "ptr<")) {
    if (s.empty() || s.back() != '>') return std::nullopt;
    s.remove_suffix(1);
    AddrSpace sp = AddrSpace::device;
    size_t comma = s.find(',');
    if (comma != std::string_view::npos) {
      std::string_view rest = s.substr(comma + 1);
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      if (rest != "threadgroup") return std::nullopt;
      sp = AddrSpace::threadgroup;
      s = s.substr(0, comma);
    }
    auto d = parse_dtype(s);
    if (!d) return std::nullopt;
    return Type::ptr(*d, sp);
  }
  auto d = parse_dtype(s);
  if (!d) return std::nullopt;
  return Type::scalar(*d);
}
}  // namespace

std::optional<Type> parse_type(std::string_view s) {
  if (!consume(s, "tile<")) return parse_elem(s);
  if (s.empty() || s.back() != '>') return std::nullopt;
  s.remove_suffix(1);
  Shape shape;
  // dims are "N" followed by 'x'; the element type begins with a letter.
  while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || v <= 0 || shape.rank == 2) return std::nullopt;
    shape.dims[shape.rank++] = v;
    s.remove_prefix(static_cast<size_t>(p - s.data()));
    if (!consume(s, "x")) return std::nullopt;
  }
  if (shape.rank == 0) return std::nullopt;
  auto elem = parse_elem(s);
  if (!elem) return std::nullopt;
  return elem->with_shape(shape);
}

Type from_c_type(const metile_type& t) {
  Type r;
  r.dtype = static_cast<DType>(t.dtype);
  r.shape.rank = t.rank;
  for (int i = 0; i < t.rank && i < 2; ++i) r.shape.dims[i] = t.shape[i];
  r.is_ptr = t.is_pointer != 0;
  r.space = t.address_space == METILE_ADDRESS_SPACE_THREADGROUP ? AddrSpace::threadgroup
                                                                 : AddrSpace::device;
  return r;
}

metile_type to_c_type(const Type& t) {
  metile_type r{};
  r.dtype = static_cast<metile_dtype>(t.dtype);
  r.rank = t.shape.rank;
  for (int i = 0; i < 2; ++i) r.shape[i] = i < t.shape.rank ? t.shape.dims[i] : 0;
  r.is_pointer = t.is_ptr ? 1 : 0;
  r.address_space = t.space == AddrSpace::threadgroup ? METILE_ADDRESS_SPACE_THREADGROUP
                                                      : METILE_ADDRESS_SPACE_DEVICE;
  return r;
}

}  // namespace metile

// Per-element semantics of the element-wise ops and of memory reads and writes (see the
// contract in executor.cpp). Float math happens in `float`, never in double; integer math wraps.
#include "runtime/interp/values.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "support/error.h"
#include "support/float8.h"
#include "support/half.h"

namespace metile::interp {

namespace {

int bits_of(DType d) { return static_cast<int>(dtype_size(d)) * 8; }

int64_t int_binary(OpKind k, DType d, int64_t a, int64_t b) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (k) {
    case OpKind::ADD:
      return wrap_int(static_cast<int64_t>(ua + ub), d);
    case OpKind::SUB:
      return wrap_int(static_cast<int64_t>(ua - ub), d);
    case OpKind::MUL:
      return wrap_int(static_cast<int64_t>(ua * ub), d);
    case OpKind::DIV:
    case OpKind::FLOORDIV:
    case OpKind::MOD: {
      if (b == 0) fault(cat("integer ", op_name(k), " by zero (", a, " / 0)"));
      // INT64_MIN / -1 overflows in C++; two's complement wraps it back to INT64_MIN.
      if (b == -1) return k == OpKind::MOD ? 0 : wrap_int(static_cast<int64_t>(0 - ua), d);
      int64_t q = a / b, r = a % b;
      if (k == OpKind::MOD) return r;
      if (k == OpKind::FLOORDIV && r != 0 && ((r < 0) != (b < 0))) --q;
      return wrap_int(q, d);
    }
    case OpKind::MAXIMUM:
      return a > b ? a : b;
    case OpKind::MINIMUM:
      return a < b ? a : b;
    case OpKind::BITAND:
      return a & b;
    case OpKind::BITOR:
      return a | b;
    case OpKind::BITXOR:
      return a ^ b;
    case OpKind::SHL:
    case OpKind::SHR: {
      if (b < 0 || b >= bits_of(d))
        fault(cat("shift count ", b, " is outside [0, ", bits_of(d), ") for ", dtype_name(d)));
      if (k == OpKind::SHL) return wrap_int(static_cast<int64_t>(ua << b), d);
      // Values are normalized: unsigned ones are non-negative, so >> is logical for them and
      // arithmetic for signed ones.
      return a >> b;
    }
    case OpKind::LT:
      return a < b;
    case OpKind::LE:
      return a <= b;
    case OpKind::GT:
      return a > b;
    case OpKind::GE:
      return a >= b;
    case OpKind::EQ:
      return a == b;
    case OpKind::NE:
      return a != b;
    default:
      METILE_ASSERT(false, "not an integer binary op: ", op_name(k));
  }
}

Elem float_binary(OpKind k, DType d, float a, float b) {
  float r = 0;
  switch (k) {
    case OpKind::ADD:
      r = a + b;
      break;
    case OpKind::SUB:
      r = a - b;
      break;
    case OpKind::MUL:
      r = a * b;
      break;
    case OpKind::DIV:
      r = a / b;
      break;
    case OpKind::FLOORDIV:
      r = std::floor(a / b);
      break;
    case OpKind::MOD:
      r = std::fmod(a, b);
      break;
    case OpKind::MAXIMUM:
      r = max_number(a, b);
      break;
    case OpKind::MINIMUM:
      r = min_number(a, b);
      break;
    case OpKind::POW:
      r = std::pow(a, b);  // the float overload (powf)
      break;
    case OpKind::LT:
      return int_elem(a < b);
    case OpKind::LE:
      return int_elem(a <= b);
    case OpKind::GT:
      return int_elem(a > b);
    case OpKind::GE:
      return int_elem(a >= b);
    case OpKind::EQ:
      return int_elem(a == b);
    case OpKind::NE:
      return int_elem(a != b);
    default:
      METILE_ASSERT(false, "not a float binary op: ", op_name(k));
  }
  return float_elem(round_float(r, d));
}

float float_unary(OpKind k, float x) {
  switch (k) {
    case OpKind::NEG:
      return -x;
    case OpKind::ABS:
      return std::fabs(x);
    case OpKind::EXP:
      return std::exp(x);
    case OpKind::LOG:
      return std::log(x);
    case OpKind::SQRT:
      return std::sqrt(x);
    case OpKind::RSQRT:
      return 1.0f / std::sqrt(x);
    case OpKind::TANH:
      return std::tanh(x);
    case OpKind::SIN:
      return std::sin(x);
    case OpKind::COS:
      return std::cos(x);
    case OpKind::EXP2:
      return std::exp2(x);
    case OpKind::LOG2:
      return std::log2(x);
    case OpKind::FLOOR:
      return std::floor(x);
    case OpKind::CEIL:
      return std::ceil(x);
    case OpKind::ERF:
      return std::erf(x);
    case OpKind::SIGMOID:
      return 1.0f / (1.0f + std::exp(-x));
    default:
      METILE_ASSERT(false, "not a float unary op: ", op_name(k));
  }
}

}  // namespace

int64_t wrap_int(int64_t v, DType d) {
  switch (d) {
    case DType::i32:
      return static_cast<int32_t>(static_cast<uint32_t>(v));
    case DType::u32:
      return static_cast<uint32_t>(v);
    case DType::i8:
      return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DType::u8:
      return static_cast<uint8_t>(v);
    case DType::boolean:
      return v != 0;
    default:
      return v;
  }
}

float round_float(float v, DType d) {
  if (d == DType::f16) return f16_to_float(float_to_f16(v));
  if (d == DType::bf16) return bf16_to_float(float_to_bf16(v));
  if (d == DType::f8e4m3) return mt_round_f8e4m3(v);
  if (d == DType::f8e5m2) return mt_round_f8e5m2(v);
  return v;
}

Elem binary_elem(OpKind k, DType d, Elem a, Elem b) {
  if (is_float(d)) return float_binary(k, d, a.f, b.f);
  return int_elem(int_binary(k, d, a.i, b.i));
}

Elem unary_elem(OpKind k, DType d, Elem a) {
  if (is_float(d)) return float_elem(round_float(float_unary(k, a.f), d));
  const uint64_t u = static_cast<uint64_t>(a.i);
  switch (k) {
    case OpKind::NEG:
      return int_elem(wrap_int(static_cast<int64_t>(0 - u), d));
    case OpKind::ABS:
      return int_elem(a.i < 0 ? wrap_int(static_cast<int64_t>(0 - u), d) : a.i);
    case OpKind::NOT:
      return int_elem(d == DType::boolean ? !a.i : wrap_int(~a.i, d));
    default:
      METILE_ASSERT(false, "not an integer unary op: ", op_name(k));
  }
}

Elem cast_elem(DType from, DType to, Elem a) {
  if (is_float(from)) {
    if (is_float(to)) return float_elem(round_float(a.f, to));
    if (to == DType::boolean) return int_elem(a.f != 0.0f);
    // Truncation toward zero, saturating at the type's range, NaN -> 0: what every compiled
    // device does (the mt_f2i helpers of the preludes), so the reference agrees with them.
    if (std::isnan(a.f)) return int_elem(0);
    double t = std::trunc(static_cast<double>(a.f));
    const int bits = bits_of(to);
    const double lo = is_signed(to) ? -std::ldexp(1.0, bits - 1) : 0.0;
    const double hi = std::ldexp(1.0, is_signed(to) ? bits - 1 : bits);  // exclusive
    if (t < lo) return int_elem(int_range(to)->lo);
    if (t >= hi) return int_elem(int_range(to)->hi);
    return int_elem(static_cast<int64_t>(t));
  }
  if (is_float(to)) {
    // Integers convert to f32 (round to nearest) and then to the storage type.
    float f = is_signed(from) || from == DType::boolean
                  ? static_cast<float>(a.i)
                  : static_cast<float>(static_cast<uint64_t>(a.i));
    return float_elem(round_float(f, to));
  }
  return int_elem(wrap_int(a.i, to));
}

Elem read_elem(const uint8_t* p, DType d) {
  switch (d) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return float_elem(f);
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return float_elem(d == DType::f16 ? f16_to_float(h) : bf16_to_float(h));
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return int_elem(v);
    }
    case DType::u32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return int_elem(v);
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return int_elem(v);
    }
    case DType::f8e4m3:
      return float_elem(mt_f8e4m3_to_f32(*p));
    case DType::f8e5m2:
      return float_elem(mt_f8e5m2_to_f32(*p));
    case DType::i8:
      return int_elem(static_cast<int8_t>(*p));
    case DType::u8:
      return int_elem(*p);
    case DType::boolean:
      return int_elem(*p != 0);
    default:
      METILE_ASSERT(false, "read of dtype ", dtype_name(d));
  }
}

void write_elem(uint8_t* p, DType d, Elem v) {
  switch (d) {
    case DType::f32:
      std::memcpy(p, &v.f, 4);
      return;
    case DType::f16:
    case DType::bf16: {
      uint16_t h = d == DType::f16 ? float_to_f16(v.f) : float_to_bf16(v.f);
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::i32:
    case DType::u32: {
      uint32_t u = static_cast<uint32_t>(v.i);
      std::memcpy(p, &u, 4);
      return;
    }
    case DType::i64:
      std::memcpy(p, &v.i, 8);
      return;
    case DType::f8e4m3:
      *p = mt_f32_to_f8e4m3(v.f);
      return;
    case DType::f8e5m2:
      *p = mt_f32_to_f8e5m2(v.f);
      return;
    case DType::i8:
    case DType::u8:
    case DType::boolean:
      *p = static_cast<uint8_t>(v.i);
      return;
    default:
      METILE_ASSERT(false, "write of dtype ", dtype_name(d));
  }
}

Elem bitcast_elem(DType from, DType to, Elem a) {
  uint8_t bytes[8] = {};
  write_elem(bytes, from, a);
  return read_elem(bytes, to);
}

Elem elem_from_bits(uint64_t bits, DType d) {
  switch (d) {
    case DType::f32:
      return float_elem(bits_float(static_cast<uint32_t>(bits)));
    case DType::f16:
      return float_elem(f16_to_float(static_cast<uint16_t>(bits)));
    case DType::bf16:
      return float_elem(bf16_to_float(static_cast<uint16_t>(bits)));
    default:
      return int_elem(wrap_int(static_cast<int64_t>(bits), d));
  }
}

}  // namespace metile::interp

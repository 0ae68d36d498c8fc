// fold-constants: evaluates element-wise ops whose operands are all constants, and forwards
// identities (x + 0, x - 0, x * 1, x | 0, x ^ 0, x & ~0, shifts by 0, select on a constant).
// Needs: verified GPU IR. Guarantees: same results bit for bit. Only exact operations fold:
// integer arithmetic (wrapping at the dtype's width, never a division by zero) and f32 +, -, *,
// /, comparisons and int<->f32 casts; f16/bf16 and math functions are left to the device.
// Folded ops become `const` ops defining the same value; forwarded ones leave dead code for DCE.
#include <cmath>
#include <optional>
#include <unordered_map>

#include "passes/pass.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

struct Num {
  bool is_float = false;
  int64_t i = 0;
  double f = 0;
};

int bits(DType d) { return d == DType::boolean ? 1 : static_cast<int>(dtype_size(d) * 8); }

// Wraps an integer to the dtype's width (two's complement), as the device computes it.
int64_t wrap(DType d, int64_t v) {
  int w = bits(d);
  if (w >= 64) return v;
  uint64_t mask = (uint64_t{1} << w) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (is_signed(d) && (u >> (w - 1)) & 1) u |= ~mask;
  return static_cast<int64_t>(u);
}

std::optional<Num> int_binary(OpKind k, DType d, int64_t a, int64_t b) {
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  auto num = [&](int64_t v) { return Num{false, wrap(d, v), 0}; };
  auto flag = [](bool v) { return Num{false, v ? 1 : 0, 0}; };
  bool uns = !is_signed(d);
  auto lt = [&](int64_t x, int64_t y) {
    return uns ? static_cast<uint64_t>(x) < static_cast<uint64_t>(y) : x < y;
  };
  // Unsigned 64-bit values above INT64_MAX do not occur: u32 and u8 fit in int64.
  switch (k) {
    case OpKind::ADD: return num(static_cast<int64_t>(ua + ub));
    case OpKind::SUB: return num(static_cast<int64_t>(ua - ub));
    case OpKind::MUL: return num(static_cast<int64_t>(ua * ub));
    case OpKind::DIV:
    case OpKind::MOD:
    case OpKind::FLOORDIV: {
      if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
      int64_t q = a / b, r = a % b;
      if (k == OpKind::MOD) return num(r);
      if (k == OpKind::FLOORDIV && r != 0 && ((r < 0) != (b < 0))) --q;
      return num(q);
    }
    case OpKind::MAXIMUM: return num(lt(a, b) ? b : a);
    case OpKind::MINIMUM: return num(lt(b, a) ? b : a);
    case OpKind::BITAND: return num(a & b);
    case OpKind::BITOR: return num(a | b);
    case OpKind::BITXOR: return num(a ^ b);
    case OpKind::SHL:
    case OpKind::SHR: {
      if (b < 0 || b >= bits(d)) return std::nullopt;
      if (k == OpKind::SHL) return num(static_cast<int64_t>(ua << b));
      return num(a >> b);  // unsigned values are held non-negative, so this is logical for them
    }
    case OpKind::LT: return flag(lt(a, b));
    case OpKind::LE: return flag(!lt(b, a));
    case OpKind::GT: return flag(lt(b, a));
    case OpKind::GE: return flag(!lt(a, b));
    case OpKind::EQ: return flag(a == b);
    case OpKind::NE: return flag(a != b);
    default: return std::nullopt;
  }
}

std::optional<Num> f32_binary(OpKind k, float a, float b) {
  auto num = [](float v) { return Num{true, 0, static_cast<double>(v)}; };
  auto flag = [](bool v) { return Num{false, v ? 1 : 0, 0}; };
  switch (k) {
    case OpKind::ADD: return num(a + b);
    case OpKind::SUB: return num(a - b);
    case OpKind::MUL: return num(a * b);
    case OpKind::DIV: return num(a / b);
    case OpKind::LT: return flag(a < b);
    case OpKind::LE: return flag(a <= b);
    case OpKind::GT: return flag(a > b);
    case OpKind::GE: return flag(a >= b);
    case OpKind::EQ: return flag(a == b);
    case OpKind::NE: return flag(a != b);
    default: return std::nullopt;
  }
}

std::optional<Num> cast(DType from, DType to, const Num& x) {
  if (to == DType::boolean) return Num{false, x.is_float ? (x.f != 0) : (x.i != 0), 0};
  if (!x.is_float && is_int(to)) return Num{false, wrap(to, x.i), 0};
  if (!x.is_float && to == DType::f32 && from != DType::boolean)
    return Num{true, 0, static_cast<double>(static_cast<float>(x.i))};
  if (!x.is_float && to == DType::f32) return Num{true, 0, static_cast<double>(x.i)};
  if (x.is_float && from == DType::f32 && is_int(to)) {
    // Only values that truncate into range fold; the device decides the rest.
    double t = std::trunc(x.f);
    if (!(t >= -2147483648.0 && t <= 2147483647.0)) return std::nullopt;
    int64_t v = static_cast<int64_t>(t);
    if (wrap(to, v) != v) return std::nullopt;
    return Num{false, v, 0};
  }
  return std::nullopt;
}

struct Folder {
  gpu::Function& f;
  std::unordered_map<ValueId, Num> consts;
  std::unordered_map<ValueId, ValueId> subst;

  ValueId resolve(ValueId v) const {
    auto it = subst.find(v);
    return it == subst.end() ? v : it->second;
  }
  const Num* constant(ValueId v) const {
    auto it = consts.find(v);
    return it == consts.end() ? nullptr : &it->second;
  }
  bool is_const(ValueId v, double value) const {
    const Num* n = constant(v);
    if (n == nullptr) return false;
    return n->is_float ? n->f == value && !std::signbit(n->f) : n->i == static_cast<int64_t>(value);
  }
  bool same_type(ValueId a, ValueId b) const {
    const gpu::Value &x = f.value(a), &y = f.value(b);
    return x.dtype == y.dtype && x.is_ptr == y.is_ptr && x.layout == y.layout && x.space == y.space;
  }

  // The value `op` is equal to without computing, if any.
  ValueId identity(const gpu::Op& op) const {
    const std::vector<ValueId>& o = op.operands;
    ValueId r = op.result();
    auto fwd = [&](ValueId v) { return same_type(v, r) ? v : kNoValue; };
    DType d = f.value(o[0]).dtype;
    bool integer = is_int(d) || d == DType::boolean;
    switch (op.tile_op) {
      case OpKind::ADD:
        if (integer && is_const(o[1], 0)) return fwd(o[0]);
        if (integer && is_const(o[0], 0)) return fwd(o[1]);
        break;
      case OpKind::SUB:
        if (is_const(o[1], 0)) return fwd(o[0]);  // x - (+0.0) is x, even for -0.0
        break;
      case OpKind::MUL:
        if (is_const(o[1], 1)) return fwd(o[0]);
        if (is_const(o[0], 1)) return fwd(o[1]);
        break;
      case OpKind::BITOR:
      case OpKind::BITXOR:
        if (is_const(o[1], 0)) return fwd(o[0]);
        if (is_const(o[0], 0)) return fwd(o[1]);
        break;
      case OpKind::BITAND: {
        double ones = d == DType::boolean ? 1 : -1;
        if (d == DType::boolean || is_signed(d)) {
          if (is_const(o[1], ones)) return fwd(o[0]);
          if (is_const(o[0], ones)) return fwd(o[1]);
        }
        break;
      }
      case OpKind::SHL:
      case OpKind::SHR:
        if (is_const(o[1], 0)) return fwd(o[0]);
        break;
      case OpKind::PTR_OFFSET:
        if (is_const(o[1], 0)) return fwd(o[0]);
        break;
      case OpKind::SELECT:
        if (const Num* c = constant(o[0])) return fwd(c->i ? o[1] : o[2]);
        if (o[1] == o[2]) return fwd(o[1]);
        break;
      case OpKind::CAST:
        if (f.value(o[0]).dtype == f.value(r).dtype) return fwd(o[0]);
        break;
      default:
        break;
    }
    return kNoValue;
  }

  std::optional<Num> evaluate(const gpu::Op& op) const {
    std::vector<const Num*> args;
    for (ValueId v : op.operands) {
      const Num* n = constant(v);
      if (n == nullptr) return std::nullopt;
      args.push_back(n);
    }
    DType d = f.value(op.operands[0]).dtype;
    DType rd = f.value(op.result()).dtype;
    if (op.tile_op == OpKind::CAST) return cast(d, rd, *args[0]);
    if (op.tile_op == OpKind::SELECT) {
      if (is_float(rd) && rd != DType::f32) return std::nullopt;
      return args[0]->i ? *args[1] : *args[2];
    }
    if (has_trait(op.tile_op, kBinary | kCompare)) {
      if (is_int(d) || d == DType::boolean) return int_binary(op.tile_op, d, args[0]->i, args[1]->i);
      if (d == DType::f32)
        return f32_binary(op.tile_op, static_cast<float>(args[0]->f), static_cast<float>(args[1]->f));
      return std::nullopt;
    }
    if (op.tile_op == OpKind::NEG) {
      if (d == DType::f32) return Num{true, 0, -args[0]->f};
      if (is_int(d)) return Num{false, wrap(d, static_cast<int64_t>(0 - static_cast<uint64_t>(args[0]->i))), 0};
    }
    if (op.tile_op == OpKind::NOT) {
      if (d == DType::boolean) return Num{false, args[0]->i ? 0 : 1, 0};
      if (is_int(d)) return Num{false, wrap(d, ~args[0]->i), 0};
    }
    return std::nullopt;
  }

  // Pre-order: a loop's operands are resolved before its body, every value before its uses.
  void visit(gpu::Op& op) {
    for (ValueId& v : op.operands) v = resolve(v);
    if (op.kind == GpuOpKind::CONST) {
      const AttrValue& a = *op.find_attr("value");
      if (const auto* d = std::get_if<double>(&a)) consts[op.result()] = Num{true, 0, *d};
      else consts[op.result()] = Num{false, std::get<int64_t>(a), 0};
      return;
    }
    if (op.kind != GpuOpKind::ELEMENTWISE) return;
    if (ValueId to = identity(op); to != kNoValue) {
      subst[op.result()] = to;
      return;
    }
    std::optional<Num> n = evaluate(op);
    const gpu::Value& r = f.value(op.result());
    if (!n || r.layout != gpu::kUniform || r.is_ptr || is_float(r.dtype) != n->is_float) return;
    op.kind = GpuOpKind::CONST;
    op.operands.clear();
    op.attrs = {{"value", n->is_float ? AttrValue{n->f} : AttrValue{n->i}}};
    consts[op.result()] = *n;
  }
};

}  // namespace

void fold_constants(gpu::Function& f, const PassContext&) {
  Folder folder{f, {}, {}};
  gpu::walk_mut(f.body, [&](gpu::Op& op) { folder.visit(op); });
}

}  // namespace metile

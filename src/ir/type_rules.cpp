// Result-type rules of every Tile IR op. The builder calls them to type new ops (after it has
// promoted and broadcast operands); the verifier calls them again to check a finished or parsed
// program. Ops whose result type is declared rather than derived (const, cast, broadcast,
// reshape, shared, tile_load) have that type checked here instead.
#include <algorithm>

#include "ir/const_range.h"
#include "ir/dot_precision.h"
#include "ir/swizzle_names.h"
#include "ir/tile_ir.h"
#include "support/error.h"
#include "support/text.h"

namespace metile {

namespace {

struct Checker {
  const Op& op;
  const TypeContext& ctx;

  template <typename... Args>
  [[noreturn]] void bad(Args&&... parts) const {
    fail(METILE_ERROR_INVALID_PROGRAM, "verify", ctx.program->where(op.loc), op_name(op.kind),
         ": ", std::forward<Args>(parts)...);
  }

  const Type& operand(size_t i) const { return ctx.program->type(op.operands[i]); }
  // Declared result types are where arbitrary shapes enter; bound them before any rule counts
  // their elements.
  const Type& declared() const {
    if (op.results.size() != 1) bad("expected one result");
    const Type& t = ctx.program->type(op.results[0]);
    const Shape& s = t.shape;
    bool too_big = false;
    for (int i = 0; i < s.rank; ++i) too_big = too_big || s.dims[i] > kMaxTileElements;
    if (!too_big && s.rank == 2 && s.dims[0] > 0 && s.dims[1] > 0)
      too_big = s.dims[0] * s.dims[1] > kMaxTileElements;
    if (too_big) bad("result ", t.str(), " has more than 2^24 elements");
    return t;
  }

  bool same_dim(int64_t a, int64_t b) const {
    if (a == b) return true;
    int64_t* t = ctx.num_threads;
    if (a == kThreadsDim) std::swap(a, b);
    if (b != kThreadsDim) return false;
    if (t != nullptr && *t != 0) return a == *t;
    if (t != nullptr && ctx.allow_unresolved_threads) {
      *t = a;  // the first concrete size a T-element tile meets fixes T
      return true;
    }
    return false;
  }
  bool same_shape(const Shape& a, const Shape& b) const {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; ++i)
      if (!same_dim(a.dims[i], b.dims[i])) return false;
    return true;
  }
  // Element-wise operands: scalars mix with tiles; tiles must have one common shape.
  Shape common_shape(std::initializer_list<size_t> idx) const {
    Shape s;
    for (size_t i : idx) {
      const Shape& o = operand(i).shape;
      if (o.rank == 0) continue;
      if (s.rank == 0) {
        s = o;
      } else if (!same_shape(s, o)) {
        bad("operand shapes differ: ", Type::tile(DType::f32, s).shape.str(), " vs ", o.str(),
            " (broadcast them first)");
      }
    }
    return s;
  }
  // FP8 values are storage only: arithmetic on them goes through f32 (docs/semantics.md).
  void refuse_f8(size_t i) const {
    DType d = operand(i).dtype;
    if (!is_f8(d) || operand(i).is_ptr) return;
    bad("does not take ", dtype_name(d), " operands: FP8 is a storage type (cast to f32 first)");
  }
  void need_value(size_t i, const char* what) const {
    if (operand(i).is_ptr) bad(what, " must not be a pointer, got ", operand(i).str());
  }
  void need_int_scalar(size_t i, const char* what) const {
    const Type& t = operand(i);
    if (t.is_ptr || !t.is_scalar() || !is_int(t.dtype))
      bad(what, " must be an integer scalar, got ", t.str());
  }
  void need_threads_shape(const Shape& s) const {
    if (s.rank != 1 || !same_dim(s.dims[0], kThreadsDim))
      bad("SIMT values are ", ctx.num_threads && *ctx.num_threads ? "" : "T-element ",
          "1-D tiles of the thread count",
          ctx.num_threads && *ctx.num_threads ? cat(" (", *ctx.num_threads, ")") : std::string(),
          ", got shape ", s.rank ? s.str() : "scalar");
  }
  Type threads_tile(DType d) const {
    int64_t t = ctx.num_threads ? *ctx.num_threads : 0;
    return Type::tile(d, Shape::of(t ? t : kThreadsDim));
  }

  std::vector<Type> run() const;
  Type binary() const;
  Type unary() const;
  std::vector<Type> memory() const;
  Type reduce() const;
  Type scan() const;
};

bool numeric(DType d) { return is_float(d) || is_int(d); }

Type Checker::binary() const {
  const Type &a = operand(0), &b = operand(1);
  need_value(0, "lhs");
  need_value(1, "rhs");
  refuse_f8(0);
  refuse_f8(1);
  if (a.dtype != b.dtype)
    bad("operand dtypes differ: ", dtype_name(a.dtype), " vs ", dtype_name(b.dtype),
        " (cast one first)");
  Shape s = common_shape({0, 1});
  DType d = a.dtype;
  OpKind k = op.kind;
  if (has_trait(k, kCompare)) return Type::tile(DType::boolean, s);
  bool bitwise = k == OpKind::BITAND || k == OpKind::BITOR || k == OpKind::BITXOR;
  if (bitwise && !(is_int(d) || d == DType::boolean)) bad("needs integer or bool operands, got ", dtype_name(d));
  if ((k == OpKind::SHL || k == OpKind::SHR) && !is_int(d)) bad("needs integer operands, got ", dtype_name(d));
  if (k == OpKind::POW && !is_float(d)) bad("needs float operands, got ", dtype_name(d));
  if (!bitwise && !numeric(d)) bad("needs numeric operands, got ", dtype_name(d));
  return Type::tile(d, s);
}

Type Checker::unary() const {
  const Type& a = operand(0);
  need_value(0, "operand");
  refuse_f8(0);
  if (has_trait(op.kind, kFloatOnly) && !is_float(a.dtype))
    bad("needs a float operand, got ", dtype_name(a.dtype), " (cast it first)");
  if (op.kind == OpKind::NOT && !(is_int(a.dtype) || a.dtype == DType::boolean))
    bad("needs an integer or bool operand, got ", dtype_name(a.dtype));
  if (op.kind != OpKind::NOT && !numeric(a.dtype))
    bad("needs a numeric operand, got ", dtype_name(a.dtype));
  return a;
}

std::vector<Type> Checker::memory() const {
  const Type& p = operand(0);
  switch (op.kind) {
    case OpKind::PTR_OFFSET: {
      if (!p.is_ptr) bad("first operand must be a pointer, got ", p.str());
      const Type& o = operand(1);
      if (o.is_ptr || !is_int(o.dtype)) bad("offsets must be integers, got ", o.str());
      return {p.with_shape(common_shape({0, 1}))};
    }
    case OpKind::ATOMIC_ADD:
    case OpKind::ATOMIC_MAX:
    case OpKind::ATOMIC_MIN:
    case OpKind::ATOMIC_XCHG:
    case OpKind::ATOMIC_CAS: {
      if (!p.is_ptr) bad("needs a pointer operand, got ", p.str(), " (use ptr + offsets)");
      if (p.space != AddrSpace::device) bad("needs a pointer to device memory, not shared memory");
      const bool cas = op.kind == OpKind::ATOMIC_CAS;
      const size_t values = cas ? 2 : 1;
      for (size_t i = 1; i <= values; ++i) {
        const Type& v = operand(i);
        need_value(i, cas && i == 1 ? "compared value" : "value");
        if (v.dtype != p.dtype)
          bad("value is ", dtype_name(v.dtype), " but the pointer is to ", dtype_name(p.dtype));
        if (v.is_tile() && !same_shape(v.shape, p.shape))
          bad("value shape ", v.shape.str(), " differs from pointer shape ",
              p.shape.rank ? p.shape.str() : "scalar");
      }
      if (op.operands.size() > values + 1) {
        const Type& m = operand(values + 1);
        if (m.is_ptr || m.dtype != DType::boolean) bad("mask must be bool, got ", m.str());
        if (m.is_tile() && !same_shape(m.shape, p.shape))
          bad("mask shape ", m.shape.str(), " differs from pointer shape ",
              p.shape.rank ? p.shape.str() : "scalar");
      }
      if (p.dtype != DType::i32 && p.dtype != DType::u32 && p.dtype != DType::i64 &&
          p.dtype != DType::f32)
        bad("no atomic on ", dtype_name(p.dtype), " (i32, u32, i64 and f32 have one)");
      return {Type::tile(p.dtype, p.shape)};
    }
    case OpKind::LOAD:
    case OpKind::STORE: {
      if (!p.is_ptr) bad("needs a pointer operand, got ", p.str(), " (use ptr + offsets)");
      bool load = op.kind == OpKind::LOAD;
      size_t mask_i = load ? 1 : 2;
      if (!load) {
        const Type& v = operand(1);
        need_value(1, "stored value");
        if (v.dtype != p.dtype)
          bad("stored value is ", dtype_name(v.dtype), " but the pointer is to ",
              dtype_name(p.dtype));
        if (v.is_tile() && !same_shape(v.shape, p.shape))
          bad("value shape ", v.shape.str(), " differs from pointer shape ",
              p.shape.rank ? p.shape.str() : "scalar");
      }
      if (op.operands.size() > mask_i) {
        const Type& m = operand(mask_i);
        if (m.is_ptr || m.dtype != DType::boolean) bad("mask must be bool, got ", m.str());
        if (m.is_tile() && !same_shape(m.shape, p.shape))
          bad("mask shape ", m.shape.str(), " differs from pointer shape ",
              p.shape.rank ? p.shape.str() : "scalar");
      }
      if (load && op.operands.size() > 2) {
        const Type& o = operand(2);
        if (o.is_ptr || o.dtype != p.dtype)
          bad("`other` must be ", dtype_name(p.dtype), ", got ", o.str());
        if (o.is_tile() && !same_shape(o.shape, p.shape)) bad("`other` shape differs from pointer shape");
      }
      if (load) return {Type::tile(p.dtype, p.shape)};
      return {};
    }
    case OpKind::TILE_LOAD:
    case OpKind::TILE_STORE: {
      bool load = op.kind == OpKind::TILE_LOAD;
      if (!p.is_ptr || p.is_tile()) bad("needs a (scalar) pointer, got ", p.str());
      need_int_scalar(1, "row");
      need_int_scalar(2, "col");
      need_int_scalar(3, "stride");
      size_t first_bound = load ? 4 : 5;
      size_t n = op.operands.size();
      if (n != first_bound && n != first_bound + 2) bad("bounds need both rows and cols");
      if (n == first_bound + 2) {
        need_int_scalar(first_bound, "bound rows");
        need_int_scalar(first_bound + 1, "bound cols");
      }
      const Type& t = load ? declared() : operand(4);
      if (t.is_ptr || t.shape.rank != 2 || t.dtype != p.dtype)
        bad(load ? "result" : "value", " must be a 2-D tile of ", dtype_name(p.dtype), ", got ",
            t.str());
      if (load) return {t};
      return {};
    }
    default:
      METILE_ASSERT(false, "not a memory op");
  }
}

Type Checker::reduce() const {
  const Type& a = operand(0);
  need_value(0, "operand");
  refuse_f8(0);
  if (!numeric(a.dtype)) bad("needs a numeric operand, got ", dtype_name(a.dtype));
  int64_t axis = op.attr_int("axis");
  if (axis == -1) return Type::scalar(a.dtype);
  if (a.shape.rank != 2 || (axis != 0 && axis != 1))
    bad("axis ", axis, " is invalid for ", a.str(), " (use -1, or 0/1 on 2-D tiles)");
  return Type::tile(a.dtype, Shape::of(a.shape.dims[1 - axis]));
}

Type Checker::scan() const {
  const Type& a = operand(0);
  need_value(0, "operand");
  if (!a.is_tile()) bad("needs a 1-D or 2-D tile, got ", a.str());
  refuse_f8(0);
  if (!numeric(a.dtype)) bad("needs a numeric operand, got ", dtype_name(a.dtype));
  int64_t axis = op.attr_int("axis"), reverse = op.attr_int("reverse");
  if (axis < 0 || axis >= a.shape.rank)
    bad("axis ", axis, " is invalid for ", a.str(), " (0", a.shape.rank == 2 ? " or 1" : "", ")");
  if (reverse != 0 && reverse != 1) bad("reverse must be 0 or 1, got ", reverse);
  return a;
}

std::vector<Type> Checker::run() const {
  const OpInfo& info = op_info(op.kind);
  int n = static_cast<int>(op.operands.size());
  if (n < info.min_operands || (info.max_operands >= 0 && n > info.max_operands))
    bad("takes ", info.min_operands,
        info.max_operands == info.min_operands ? std::string()
        : info.max_operands < 0                ? std::string(" or more")
                                               : cat(" to ", info.max_operands),
        " operands, got ", n);
  for (ValueId v : op.operands)
    if (!ctx.program->valid(v)) bad("uses an undefined value");
  size_t known = 0;
  for (const AttrSpec& spec : info.attrs) {
    const AttrValue* v = op.find_attr(spec.name);
    if (v == nullptr && spec.optional) continue;
    if (v == nullptr) bad("missing attribute ", spec.name);
    ++known;
    bool ok = spec.kind == AttrKind::string    ? std::holds_alternative<std::string>(*v)
              : spec.kind == AttrKind::integer ? std::holds_alternative<int64_t>(*v)
                                               : !std::holds_alternative<std::string>(*v);
    if (!ok) bad("attribute ", spec.name, " has the wrong kind");
  }
  if (op.attrs.size() != known) bad("has unknown attributes");

  const OpKind k = op.kind;
  if (has_trait(k, kBinary | kCompare)) return {binary()};
  if (has_trait(k, kUnary)) return {unary()};
  if (has_trait(k, kReduce)) return {reduce()};
  if (has_trait(k, kScan)) return {scan()};
  if (has_trait(k, kMemory) || k == OpKind::PTR_OFFSET) return memory();
  switch (k) {
    case OpKind::CONST: {
      const Type& t = declared();
      if (t.is_ptr || t.is_tile() || t.dtype == DType::invalid) bad("result must be a scalar, got ", t.str());
      const AttrValue* v = op.find_attr("value");
      if (is_float(t.dtype) != std::holds_alternative<double>(*v))
        bad("value kind does not match ", dtype_name(t.dtype));
      // Devices would disagree on an out-of-range value (some wrap it, some keep it wider).
      if (const int64_t* i = std::get_if<int64_t>(v); i && !int_fits(t.dtype, *i))
        bad("value ", *i, " does not fit in ", dtype_name(t.dtype));
      if (const double* f = std::get_if<double>(v); f && !float_fits(t.dtype, *f))
        bad("value ", *f, " overflows ", dtype_name(t.dtype));
      return {t};
    }
    case OpKind::PROGRAM_ID:
    case OpKind::NUM_PROGRAMS: {
      int64_t axis = op.attr_int("axis");
      if (axis < 0 || axis > 2) bad("axis must be 0, 1 or 2, got ", axis);
      return {Type::scalar(DType::i32)};
    }
    case OpKind::ARANGE: {
      need_int_scalar(0, "start");
      int64_t size = op.attr_int("size");
      if (size <= 0 || size > kMaxTileElements) bad("size must be in [1, 2^24], got ", size);
      return {Type::tile(DType::i32, Shape::of(size))};
    }
    case OpKind::CAST: {
      const Type& t = declared();
      need_value(0, "operand");
      if (t.is_ptr || !same_shape(t.shape, operand(0).shape) || t.dtype == DType::invalid)
        bad("cannot cast ", operand(0).str(), " to ", t.str());
      return {t};
    }
    case OpKind::BITCAST: {
      const Type& t = declared();
      need_value(0, "operand");
      const Type& a = operand(0);
      if (t.is_ptr || !same_shape(t.shape, a.shape) || t.dtype == DType::invalid ||
          t.dtype == DType::boolean || a.dtype == DType::boolean ||
          dtype_size(t.dtype) != dtype_size(a.dtype))
        bad("cannot bitcast ", a.str(), " to ", t.str(),
            " (the dtypes must have the same width and neither be bool)");
      return {t};
    }
    case OpKind::BROADCAST: {
      const Type &t = declared(), &a = operand(0);
      if (t.is_ptr != a.is_ptr || t.dtype != a.dtype || t.space != a.space)
        bad("result ", t.str(), " must keep the element type of ", a.str());
      if (a.shape.rank > t.shape.rank) bad("cannot broadcast ", a.str(), " to ", t.str());
      int off = t.shape.rank - a.shape.rank;  // numpy rule: align trailing dimensions
      for (int i = 0; i < a.shape.rank; ++i)
        if (a.shape.dims[i] != 1 && !same_dim(a.shape.dims[i], t.shape.dims[i + off]))
          bad("cannot broadcast ", a.str(), " to ", t.str());
      return {t};
    }
    case OpKind::RESHAPE: {
      const Type &t = declared(), &a = operand(0);
      if (t.is_ptr != a.is_ptr || t.dtype != a.dtype || t.shape.numel() != a.shape.numel() ||
          a.shape.numel() < 0)
        bad("cannot reshape ", a.str(), " to ", t.str());
      return {t};
    }
    case OpKind::SELECT: {
      const Type &c = operand(0), &a = operand(1), &b = operand(2);
      if (c.is_ptr || c.dtype != DType::boolean) bad("condition must be bool, got ", c.str());
      if (a.is_ptr != b.is_ptr || a.dtype != b.dtype || a.space != b.space)
        bad("branches differ: ", a.element().str(), " vs ", b.element().str());
      return {a.with_shape(common_shape({0, 1, 2}))};
    }
    case OpKind::SHARED: {
      const Type& t = declared();
      int64_t size = op.attr_int("size");
      if (size <= 0) bad("size must be positive, got ", size);
      if (!t.is_ptr || t.is_tile() || t.space != AddrSpace::threadgroup)
        bad("result must be a threadgroup pointer, got ", t.str());
      return {t};
    }
    case OpKind::DOT: {
      const Type &a = operand(0), &b = operand(1), &c = operand(2);
      for (size_t i = 0; i < 3; ++i) {
        need_value(i, "operand");
        if (operand(i).shape.rank != 2) bad("operands must be 2-D tiles, got ", operand(i).str());
      }
      if (!same_dim(a.shape.dims[1], b.shape.dims[0]) || !same_dim(a.shape.dims[0], c.shape.dims[0]) ||
          !same_dim(b.shape.dims[1], c.shape.dims[1]))
        bad("shapes do not chain: a ", a.shape.str(), ", b ", b.shape.str(), ", acc ",
            c.shape.str(), " (need MxK, KxN, MxN)");
      // FP8 dots: exact products, f32 sums (docs/semantics.md); the two formats mix, since each
      // converts exactly to the f16 the fp8_dots pass computes in.
      if (is_f8(a.dtype) || is_f8(b.dtype)) {
        const bool a8 = is_f8(a.dtype);
        const Type& other = a8 ? b : a;
        if (!is_f8(other.dtype))
          bad("operand ", a8 ? "b" : "a", " is ", other.str(), " but operand ", a8 ? "a" : "b",
              " is ", (a8 ? a : b).str(), ": an FP8 dot takes f8e4m3 or f8e5m2 on both sides (cast ",
              a8 ? "b" : "a", " to FP8, or both to f16)");
        if (c.dtype != DType::f32)
          bad("accumulator ", c.str(), " does not fit FP8 inputs (", dtype_name(a.dtype), " x ",
              dtype_name(b.dtype), "): FP8 dots accumulate in f32");
      } else {
        refuse_f8(2);
        if (a.dtype != b.dtype) bad("a and b dtypes differ: ", dtype_name(a.dtype), " vs ", dtype_name(b.dtype));
      }
      bool fl = is_float(a.dtype);
      bool ok = fl ? (c.dtype == DType::f32 || c.dtype == a.dtype)
                   : ((a.dtype == DType::i8 || a.dtype == DType::u8) && c.dtype == DType::i32);
      if (!ok && !is_f8(a.dtype))
        bad("accumulator ", dtype_name(c.dtype), " does not fit ", dtype_name(a.dtype),
            " inputs (f32 or the input type for floats, i32 for 8-bit integers)");
      if (op.find_attr("input_precision") != nullptr) {
        const std::string& prec = op.attr_str("input_precision");
        if (!parse_dot_precision(prec)) bad("unknown input_precision \"", prec, "\" (", kDotPrecisionList, ")");
      }
      return {c};
    }
    case OpKind::FOR: {
      const Type& s = operand(0);
      // Scalars, or 1-D tiles for per-thread bounds (the activity pass makes them uniform).
      if (s.is_ptr || !is_int(s.dtype) || s.shape.rank > 1)
        bad("start must be an integer scalar or 1-D tile, got ", s.str());
      if (operand(1) != s || operand(2) != s)
        bad("start, end and step must have one type, got ", s.str(), ", ", operand(1).str(),
            ", ", operand(2).str());
      std::vector<Type> out;
      for (size_t i = 3; i < op.operands.size(); ++i) out.push_back(operand(i));
      return out;
    }
    case OpKind::IF: {
      if (operand(0) != Type::scalar(DType::boolean))
        bad("condition must be a bool scalar (uniform per program), got ", operand(0).str());
      if (op.regions.empty() || op.regions[0].ops.empty() || op.regions[0].ops.back().kind != OpKind::YIELD)
        bad("then block must end with yield");
      std::vector<Type> out;
      for (ValueId v : op.regions[0].ops.back().operands) {
        if (!ctx.program->valid(v)) bad("then block yields an undefined value");
        out.push_back(ctx.program->type(v));
      }
      return out;
    }
    case OpKind::WHILE: {
      std::vector<Type> out;
      for (size_t i = 0; i < op.operands.size(); ++i) out.push_back(operand(i));
      return out;
    }
    case OpKind::YIELD:
      return {};
    case OpKind::SIMDGROUP_ROLE: {
      int64_t role = op.attr_int("role"), n = op.attr_int("num_roles");
      if (n < 1 || role < 0 || role >= n) bad("role ", role, " of ", n, " is out of range");
      if (op.attr_int("first_sg") < 0 || op.attr_int("num_sgs") < 0)
        bad("first_sg and num_sgs must not be negative");
      return {};
    }
    case OpKind::THREAD_ID:
    case OpKind::SIMD_LANE_ID:
      return {threads_tile(DType::i32)};
    case OpKind::SIMD_SHUFFLE_XOR:
    case OpKind::SIMD_BROADCAST: {
      const Type& x = operand(0);
      need_value(0, "value");
      if (x.is_tile()) need_threads_shape(x.shape);
      need_int_scalar(1, k == OpKind::SIMD_BROADCAST ? "lane" : "mask");
      return {x};
    }
    case OpKind::BARRIER:
      return {};
    case OpKind::TRANS: {
      const Type& a = operand(0);
      need_value(0, "operand");
      if (a.shape.rank != 2) bad("needs a 2-D tile, got ", a.str());
      return {Type::tile(a.dtype, Shape::of(a.shape.dims[1], a.shape.dims[0]))};
    }
    case OpKind::DEVICE_PRINT: {
      const std::string& prefix = op.attr_str("prefix");
      if (std::string why = text_problem(prefix, kMaxNameBytes); !why.empty())
        bad("prefix \"", printable_ascii(prefix), "\" ", why);
      const int64_t masked = op.attr_int("masked");
      if (masked != 0 && masked != 1) bad("masked must be 0 or 1, got ", masked);
      const size_t n = masked ? op.operands.size() / 2 : op.operands.size();
      if (masked && op.operands.size() % 2 != 0) bad("a masked print needs one mask per value");
      for (size_t i = 0; i < n; ++i) {
        if (operand(i).is_ptr) bad("cannot print pointer value ", i, " (", operand(i).str(), ")");
        if (masked && (operand(n + i).dtype != DType::boolean || operand(n + i).is_ptr ||
                       !same_shape(operand(n + i).shape, operand(i).shape)))
          bad("mask ", i, " must be bool of value ", i, "'s shape, got ", operand(n + i).str());
      }
      return {};
    }
    case OpKind::TILE_SWIZZLE: {
      for (size_t i = 0; i < 2; ++i)
        if (operand(i) != Type::scalar(DType::i32)) bad("program ids must be i32 scalars, got ", operand(i).str());
      const std::string& pat = op.attr_str("pattern");
      if (swizzle_code(pat) < 0) bad("unknown pattern \"", pat, "\" (", swizzle_name_list(), ")");
      if (op.attr_int("block_size") < 1) bad("block_size must be at least 1");
      return {Type::scalar(DType::i32), Type::scalar(DType::i32)};
    }
    default:
      bad("has no type rule");
  }
}

}  // namespace

std::vector<Type> infer_result_types(const Op& op, const TypeContext& ctx) {
  METILE_ASSERT(ctx.program != nullptr);
  return Checker{op, ctx}.run();
}

}  // namespace metile

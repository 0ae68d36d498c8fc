#include "frontend/builder.h"

#include <set>

#include "ir/const_range.h"
#include "ir/swizzle_names.h"
#include "support/error.h"
#include "support/text.h"

namespace metile {

namespace {
int category(DType d) { return d == DType::boolean ? 0 : is_int(d) ? 1 : 2; }
// FP8 is a storage type: arithmetic on it computes in f32, as numpy computes exp(i32) in f64.
DType arithmetic_dtype(DType d) { return is_f8(d) ? DType::f32 : d; }
}  // namespace

Builder::Builder(std::string name) {
  check_text(name, "kernel name", "builder", kMaxNameBytes);
  p_.name = std::move(name);
  in_scope_.push_back(false);
}

template <typename... Args>
void Builder::bad(OpKind kind, Args&&... parts) const {
  fail(METILE_ERROR_INVALID_PROGRAM, "builder", p_.where(loc_), op_name(kind), ": ",
       std::forward<Args>(parts)...);
}

void Builder::check_open() const {
  if (finished_)
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "the builder was already finished");
}

void Builder::check_value(OpKind kind, ValueId v, const char* what) const {
  if (v == kNoValue || v >= p_.values.size()) bad(kind, what, " is not a value of this builder");
  if (!in_scope_[v])
    bad(kind, what, " is not in scope here (it was defined inside a loop or role that is closed)");
}

void Builder::set_loc(const std::string& file, int line) {
  check_open();
  check_text(file, "source file name", "builder");
  loc_ = file.empty() ? Loc{} : Loc{p_.intern_file(file), line};
}

void Builder::set_constexpr(const std::string& name, const std::string& value) {
  check_open();
  check_text(name, "constexpr name", "builder", kMaxNameBytes);
  check_text(value, cat("constexpr ", name, "'s value"), "builder");
  for (auto& kv : p_.constexprs)
    if (kv.first == name) {
      kv.second = value;
      return;
    }
  p_.constexprs.emplace_back(name, value);
}

void Builder::set_num_threads(int64_t n) {
  check_open();
  if (n < 1 || n > 4096)
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "num_threads must be in [1, 4096], got ", n);
  if (threads_ != 0 && threads_ != n)
    fail(METILE_ERROR_INVALID_PROGRAM, "builder", "num_threads ", n,
         " conflicts with the SIMT tiles already built (", threads_, " elements)");
  threads_ = n;
  threads_fixed_ = true;
}

ValueId Builder::param(const std::string& name, const Type& type) {
  check_open();
  check_text(name, "parameter name", "builder", kMaxNameBytes);
  if (!p_.body.ops.empty() || !open_.empty())
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "parameter ", name,
         " must be declared before any op");
  if (!is_valid_dtype(static_cast<int>(type.dtype)))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "parameter ", name, " has an invalid dtype");
  if (type.is_tile() || (type.is_ptr && type.space != AddrSpace::device))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "parameter ", name,
         " must be a scalar or a device pointer, got ", type.str());
  if (!type.is_ptr && is_f8(type.dtype))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "parameter ", name, " is an ", dtype_name(type.dtype),
         " scalar: FP8 parameters must be pointers (pass an f32 scalar and cast it)");
  for (const Param& prm : p_.params)
    if (prm.name == name)
      fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "parameter ", name, " is declared twice");
  ValueId v = p_.new_value(type);
  in_scope_.push_back(true);
  p_.params.push_back({name, v});
  return v;
}

const Type& Builder::type(ValueId v) const {
  if (v == kNoValue || v >= p_.values.size())
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "value ", v, " is not a value of this builder");
  return p_.type(v);
}

Block& Builder::current() { return open_.empty() ? p_.body : open_.back().regions.back(); }

std::vector<ValueId> Builder::emit(OpKind kind, std::vector<ValueId> operands,
                                   std::vector<Attr> attrs, const Type* declared) {
  check_open();
  for (ValueId v : operands) check_value(kind, v, "an operand");
  Op op;
  op.kind = kind;
  op.operands = std::move(operands);
  op.attrs = std::move(attrs);
  op.loc = loc_;
  if (declared) op.results.push_back(p_.new_value(*declared));
  TypeContext ctx{&p_, &threads_, !threads_fixed_};
  std::vector<Type> types = infer_result_types(op, ctx);
  if (!declared)
    for (const Type& t : types) op.results.push_back(p_.new_value(t));
  in_scope_.resize(p_.values.size(), false);
  for (ValueId r : op.results) in_scope_[r] = true;
  std::vector<ValueId> results = op.results;
  current().ops.push_back(std::move(op));
  return results;
}

ValueId Builder::emit1(OpKind kind, std::vector<ValueId> operands, std::vector<Attr> attrs,
                       const Type* declared) {
  std::vector<ValueId> r = emit(kind, std::move(operands), std::move(attrs), declared);
  return r.empty() ? kNoValue : r[0];
}

ValueId Builder::const_int(DType dtype, int64_t value) {
  if (!is_int(dtype) && dtype != DType::boolean)
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "const_int needs an integer or bool dtype, got ",
         dtype_name(dtype));
  if (dtype == DType::boolean) value = value != 0;
  if (!int_fits(dtype, value))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", p_.where(loc_), "const_int: ", value,
         " does not fit in ", dtype_name(dtype));
  Type t = Type::scalar(dtype);
  ValueId v = emit1(OpKind::CONST, {}, {{"value", value}}, &t);
  int_consts_[v] = value;
  return v;
}

ValueId Builder::const_float(DType dtype, double value) {
  if (!is_float(dtype))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "const_float needs a float dtype, got ",
         dtype_name(dtype));
  if (!float_fits(dtype, value))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", p_.where(loc_), "const_float: ", value,
         " overflows ", dtype_name(dtype));
  Type t = Type::scalar(dtype);
  return emit1(OpKind::CONST, {}, {{"value", value}}, &t);
}

ValueId Builder::grid(OpKind kind, int axis) {
  if (kind != OpKind::PROGRAM_ID && kind != OpKind::NUM_PROGRAMS)
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "grid() takes program_id or num_programs");
  return emit1(kind, {}, {{"axis", int64_t{axis}}});
}

ValueId Builder::arange(ValueId start, int64_t size) {
  if (start == kNoValue) start = const_int(DType::i32, 0);
  check_value(OpKind::ARANGE, start, "start");
  if (is_int(type(start).dtype) && type(start).dtype != DType::i32 && type(start).is_scalar())
    start = cast(start, DType::i32);
  return emit1(OpKind::ARANGE, {start}, {{"size", size}});
}

ValueId Builder::cast(ValueId x, DType dtype) {
  check_value(OpKind::CAST, x, "the operand");
  if (!is_valid_dtype(static_cast<int>(dtype)))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "cast to an invalid dtype");
  if (type(x).dtype == dtype && !type(x).is_ptr) return x;
  Type t = type(x).with_dtype(dtype);
  return emit1(OpKind::CAST, {x}, {}, &t);
}

ValueId Builder::bitcast(ValueId x, DType dtype) {
  check_value(OpKind::BITCAST, x, "the operand");
  if (!is_valid_dtype(static_cast<int>(dtype)))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "bitcast to an invalid dtype");
  if (type(x).dtype == dtype && !type(x).is_ptr) return x;
  Type t = type(x).with_dtype(dtype);
  return emit1(OpKind::BITCAST, {x}, {}, &t);
}

ValueId Builder::broadcast(ValueId x, Shape shape) {
  check_value(OpKind::BROADCAST, x, "the operand");
  for (int i = 0; i < shape.rank; ++i)
    if (shape.dims[i] == kThreadsDim && threads_ != 0) shape.dims[i] = threads_;
  if (type(x).shape == shape) return x;
  Type t = type(x).with_shape(shape);
  return emit1(OpKind::BROADCAST, {x}, {}, &t);
}

ValueId Builder::reshape(ValueId x, Shape shape) {
  check_value(OpKind::RESHAPE, x, "the operand");
  if (type(x).shape == shape) return x;
  Type t = type(x).with_shape(shape);
  return emit1(OpKind::RESHAPE, {x}, {}, &t);
}

DType Builder::promote(const Type& a, const Type& b) const {
  if (a.dtype == b.dtype) return a.dtype;
  int ca = category(a.dtype), cb = category(b.dtype);
  if (ca != cb) return ca > cb ? a.dtype : b.dtype;
  // Same kind: a tile's dtype wins over a scalar's (a literal never changes a tile's type).
  if (a.is_tile() != b.is_tile()) return a.is_tile() ? a.dtype : b.dtype;
  if (ca == 2) return DType::f32;  // f16 with bf16, or either with f32
  size_t sa = dtype_size(a.dtype), sb = dtype_size(b.dtype);
  if (sa != sb) return sa > sb ? a.dtype : b.dtype;
  if (sa == 8) return DType::i64;
  return sa == 4 ? DType::i64 : DType::i32;  // mixed signedness needs the next wider type
}

DType Builder::promote(ValueId x, ValueId y) const {
  const Type &a = type(x), &b = type(y);
  if (a.is_tile() != b.is_tile() && is_int(a.dtype) && is_int(b.dtype)) {
    ValueId s = a.is_tile() ? y : x;
    DType tile = a.is_tile() ? a.dtype : b.dtype;
    auto c = int_consts_.find(s);
    bool weak = c != int_consts_.end() && int_fits(tile, c->second);
    if (!weak) return promote(Type::scalar(a.dtype), Type::scalar(b.dtype));
  }
  return promote(a, b);
}

Shape Builder::broadcast_shape(OpKind kind, const std::vector<ValueId>& vs) const {
  Shape out;
  for (ValueId v : vs) {
    const Shape& s = type(v).shape;
    if (s.rank == 0) continue;
    if (out.rank == 0) {
      out = s;
      continue;
    }
    // numpy rule: align trailing dimensions; size 1 stretches.
    Shape r;
    r.rank = std::max(out.rank, s.rank);
    for (int i = 0; i < r.rank; ++i) {
      int ia = i - (r.rank - out.rank), ib = i - (r.rank - s.rank);
      int64_t da = ia >= 0 ? out.dims[ia] : 1, db = ib >= 0 ? s.dims[ib] : 1;
      if (da == db || db == 1) r.dims[i] = da;
      else if (da == 1) r.dims[i] = db;
      else if (da == kThreadsDim || db == kThreadsDim) {
        int64_t other = da == kThreadsDim ? db : da;
        if (threads_ != 0 && threads_ != other)
          bad(kind, "shapes ", out.str(), " and ", s.str(), " do not broadcast (T = ", threads_, ")");
        r.dims[i] = other;
      } else {
        bad(kind, "shapes ", out.str(), " and ", s.str(), " do not broadcast");
      }
    }
    out = r;
  }
  return out;
}

bool Builder::same_modulo_threads(const Type& a, const Type& b) {
  if (a.with_shape({}) != b.with_shape({}) || a.shape.rank != b.shape.rank) return false;
  for (int i = 0; i < a.shape.rank; ++i) {
    int64_t da = a.shape.dims[i], db = b.shape.dims[i];
    if (da == db) continue;
    if (da != kThreadsDim && db != kThreadsDim) return false;
    int64_t other = da == kThreadsDim ? db : da;
    if (threads_ == 0 && !threads_fixed_) threads_ = other;  // as a T-tile meeting a size in an op
    if (threads_ != other) return false;
  }
  return true;
}

ValueId Builder::to_dtype(ValueId v, DType d) { return type(v).dtype == d ? v : cast(v, d); }

ValueId Builder::to_shape(ValueId v, const Shape& s) {
  const Type& t = type(v);
  if (t.is_scalar() || t.shape == s) return v;
  if (t.shape.rank == s.rank) {
    bool same = true;  // T-element tiles already match a resolved size
    for (int i = 0; i < s.rank; ++i)
      same = same && (t.shape.dims[i] == s.dims[i] ||
                      (t.shape.dims[i] == kThreadsDim && (threads_ == s.dims[i] || threads_ == 0)));
    if (same) return v;
  }
  return broadcast(v, s);
}

ValueId Builder::unary(OpKind kind, ValueId x) {
  if (!has_trait(kind, kUnary))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", op_name(kind), " is not a unary op");
  check_value(kind, x, "the operand");
  // Like numpy, a float-only op on an integer or bool value computes in f32 (exp(i32) is f32).
  if (has_trait(kind, kFloatOnly) && !type(x).is_ptr && !is_float(type(x).dtype))
    x = cast(x, DType::f32);
  if (!type(x).is_ptr) x = to_dtype(x, arithmetic_dtype(type(x).dtype));
  return emit1(kind, {x});
}

ValueId Builder::binary(OpKind kind, ValueId x, ValueId y) {
  if (!has_trait(kind, kBinary | kCompare))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", op_name(kind), " is not a binary op");
  check_value(kind, x, "the lhs");
  check_value(kind, y, "the rhs");
  if (kind == OpKind::ADD && type(y).is_ptr && !type(x).is_ptr) std::swap(x, y);
  if (kind == OpKind::ADD && type(x).is_ptr) return ptr_offset(x, y);
  if (type(x).is_ptr || type(y).is_ptr) bad(kind, "pointers support only `ptr + offsets`");
  DType d = arithmetic_dtype(promote(x, y));
  x = to_dtype(x, d);
  y = to_dtype(y, d);
  Shape s = broadcast_shape(kind, {x, y});
  return emit1(kind, {to_shape(x, s), to_shape(y, s)});
}

ValueId Builder::select(ValueId cond, ValueId x, ValueId y) {
  check_value(OpKind::SELECT, cond, "the condition");
  check_value(OpKind::SELECT, x, "the true value");
  check_value(OpKind::SELECT, y, "the false value");
  if (type(cond).dtype != DType::boolean || type(cond).is_ptr)
    bad(OpKind::SELECT, "the condition must be bool, got ", type(cond).str());
  if (!type(x).is_ptr && !type(y).is_ptr) {
    DType d = promote(x, y);
    x = to_dtype(x, d);
    y = to_dtype(y, d);
  }
  Shape s = broadcast_shape(OpKind::SELECT, {cond, x, y});
  return emit1(OpKind::SELECT, {to_shape(cond, s), to_shape(x, s), to_shape(y, s)});
}

ValueId Builder::ptr_offset(ValueId ptr, ValueId offsets) {
  check_value(OpKind::PTR_OFFSET, ptr, "the pointer");
  check_value(OpKind::PTR_OFFSET, offsets, "the offsets");
  if (!type(ptr).is_ptr) bad(OpKind::PTR_OFFSET, "the first operand must be a pointer");
  if (!is_int(type(offsets).dtype) || type(offsets).is_ptr)
    bad(OpKind::PTR_OFFSET, "offsets must be integers, got ", type(offsets).str());
  // (base + a) + b == base + (a + b): keep pointer tiles one offset away from a scalar base.
  auto def = ptr_defs_.find(ptr);
  if (def != ptr_defs_.end())
    return ptr_offset(def->second.first, binary(OpKind::ADD, def->second.second, offsets));
  Shape s = broadcast_shape(OpKind::PTR_OFFSET, {ptr, offsets});
  ValueId off = to_shape(offsets, s);
  ValueId r = emit1(OpKind::PTR_OFFSET, {to_shape(ptr, s), off});
  if (type(ptr).is_scalar() && s.rank > 0) ptr_defs_[r] = {ptr, off};
  return r;
}

ValueId Builder::load(ValueId ptrs, ValueId mask, ValueId other) {
  check_value(OpKind::LOAD, ptrs, "the pointer");
  if (!type(ptrs).is_ptr) bad(OpKind::LOAD, "needs a pointer (ptr + offsets), got ", type(ptrs).str());
  std::vector<ValueId> all{ptrs};
  if (mask != kNoValue) {
    check_value(OpKind::LOAD, mask, "the mask");
    all.push_back(mask);
  }
  if (other != kNoValue) {
    check_value(OpKind::LOAD, other, "`other`");
    if (mask == kNoValue) bad(OpKind::LOAD, "`other` needs a mask");
    all.push_back(other);
  }
  Shape s = broadcast_shape(OpKind::LOAD, all);
  std::vector<ValueId> ops{to_shape(ptrs, s)};
  if (mask != kNoValue) ops.push_back(to_shape(mask, s));
  if (other != kNoValue) ops.push_back(to_shape(to_dtype(other, type(ptrs).dtype), s));
  return emit1(OpKind::LOAD, std::move(ops));
}

void Builder::store(ValueId ptrs, ValueId value, ValueId mask) {
  check_value(OpKind::STORE, ptrs, "the pointer");
  check_value(OpKind::STORE, value, "the value");
  if (!type(ptrs).is_ptr) bad(OpKind::STORE, "needs a pointer (ptr + offsets), got ", type(ptrs).str());
  if (type(value).is_ptr) bad(OpKind::STORE, "cannot store a pointer");
  std::vector<ValueId> all{ptrs, value};
  if (mask != kNoValue) {
    check_value(OpKind::STORE, mask, "the mask");
    all.push_back(mask);
  }
  Shape s = broadcast_shape(OpKind::STORE, all);
  if (type(ptrs).is_scalar() && s.rank > 0)
    bad(OpKind::STORE, "a tile value needs a tile of pointers (ptr + offsets), got one pointer");
  std::vector<ValueId> ops{to_shape(ptrs, s), to_shape(to_dtype(value, type(ptrs).dtype), s)};
  if (mask != kNoValue) ops.push_back(to_shape(mask, s));
  emit(OpKind::STORE, std::move(ops), {});
}

ValueId Builder::atomic(OpKind kind, ValueId ptrs, ValueId cmp, ValueId value, ValueId mask) {
  if (!has_trait(kind, kAtomic)) bad(kind, "is not an atomic op");
  const bool cas = kind == OpKind::ATOMIC_CAS;
  check_value(kind, ptrs, "the pointer");
  if (!type(ptrs).is_ptr) bad(kind, "needs a pointer (ptr + offsets), got ", type(ptrs).str());
  std::vector<ValueId> all{ptrs};
  if (cas) {
    check_value(kind, cmp, "the compared value");
    all.push_back(cmp);
  } else if (cmp != kNoValue) {
    bad(kind, "takes no compared value (only atomic_cas does)");
  }
  check_value(kind, value, "the value");
  all.push_back(value);
  for (ValueId v : all)
    if (v != ptrs && type(v).is_ptr) bad(kind, "cannot take a pointer as its value");
  if (mask != kNoValue) {
    check_value(kind, mask, "the mask");
    all.push_back(mask);
  }
  Shape s = broadcast_shape(kind, all);
  if (type(ptrs).is_scalar() && s.rank > 0)
    bad(kind, "a tile value needs a tile of pointers (ptr + offsets), got one pointer");
  DType d = type(ptrs).dtype;
  std::vector<ValueId> ops{to_shape(ptrs, s)};
  if (cas) ops.push_back(to_shape(to_dtype(cmp, d), s));
  ops.push_back(to_shape(to_dtype(value, d), s));
  if (mask != kNoValue) ops.push_back(to_shape(mask, s));
  return emit1(kind, std::move(ops));
}

ValueId Builder::tile_load(ValueId ptr, ValueId row, ValueId col, ValueId stride, Shape shape,
                           ValueId bound_rows, ValueId bound_cols) {
  check_value(OpKind::TILE_LOAD, ptr, "the pointer");
  if (!type(ptr).is_ptr) bad(OpKind::TILE_LOAD, "needs a pointer, got ", type(ptr).str());
  if ((bound_rows == kNoValue) != (bound_cols == kNoValue))
    bad(OpKind::TILE_LOAD, "bounds need both rows and cols");
  if (shape.rank != 2 || shape.dims[0] <= 0 || shape.dims[1] <= 0)
    bad(OpKind::TILE_LOAD, "shape must be (rows, cols) with positive sizes");
  Type t = Type::tile(type(ptr).dtype, shape);
  std::vector<ValueId> ops{ptr, row, col, stride};
  if (bound_rows != kNoValue) {
    ops.push_back(bound_rows);
    ops.push_back(bound_cols);
  }
  return emit1(OpKind::TILE_LOAD, std::move(ops), {}, &t);
}

void Builder::tile_store(ValueId ptr, ValueId row, ValueId col, ValueId stride, ValueId value,
                         ValueId bound_rows, ValueId bound_cols) {
  check_value(OpKind::TILE_STORE, ptr, "the pointer");
  check_value(OpKind::TILE_STORE, value, "the value");
  if (!type(ptr).is_ptr) bad(OpKind::TILE_STORE, "needs a pointer, got ", type(ptr).str());
  if ((bound_rows == kNoValue) != (bound_cols == kNoValue))
    bad(OpKind::TILE_STORE, "bounds need both rows and cols");
  std::vector<ValueId> ops{ptr, row, col, stride, to_dtype(value, type(ptr).dtype)};
  if (bound_rows != kNoValue) {
    ops.push_back(bound_rows);
    ops.push_back(bound_cols);
  }
  emit(OpKind::TILE_STORE, std::move(ops), {});
}

ValueId Builder::dot(ValueId a, ValueId b, ValueId acc, DotPrecision precision) {
  if (precision == DotPrecision::device_default) return emit1(OpKind::DOT, {a, b, acc});
  return emit1(OpKind::DOT, {a, b, acc}, {{"input_precision", std::string(dot_precision_name(precision))}});
}

ValueId Builder::reduce(OpKind kind, ValueId x, int axis) {
  if (!has_trait(kind, kReduce))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", op_name(kind), " is not a reduction");
  check_value(kind, x, "the operand");
  if (!type(x).is_ptr) x = to_dtype(x, arithmetic_dtype(type(x).dtype));
  return emit1(kind, {x}, {{"axis", int64_t{axis}}});
}

ValueId Builder::scan(OpKind kind, ValueId x, int axis, bool reverse) {
  if (!has_trait(kind, kScan))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", op_name(kind), " is not a scan (cumsum, cumprod)");
  check_value(kind, x, "the operand");
  // As Triton does: a running count of bools is an i32 count.
  if (type(x).dtype == DType::boolean && !type(x).is_ptr) x = cast(x, DType::i32);
  if (!type(x).is_ptr) x = to_dtype(x, arithmetic_dtype(type(x).dtype));
  return emit1(kind, {x}, {{"axis", int64_t{axis}}, {"reverse", int64_t{reverse ? 1 : 0}}});
}

ValueId Builder::trans(ValueId x) {
  check_value(OpKind::TRANS, x, "the operand");
  // trans(trans(y)) is y itself, so no pair of transposes that cancel is emitted: on GPUs each
  // is a trip through threadgroup memory (dot_scaled's decode works on the K-major bytes that
  // a kernel transposed to hand over as its K x N operand).
  auto it = trans_sources_.find(x);
  if (it != trans_sources_.end() && in_scope_[it->second]) return it->second;
  ValueId r = emit1(OpKind::TRANS, {x});
  trans_sources_[r] = x;
  return r;
}

void Builder::device_print(const std::string& prefix, const std::vector<ValueId>& values) {
  check_text(prefix, "device_print prefix", "builder", kMaxNameBytes);
  emit(OpKind::DEVICE_PRINT, values, {{"prefix", prefix}, {"masked", int64_t{0}}});
}

std::pair<ValueId, std::vector<ValueId>> Builder::for_begin(ValueId start, ValueId end,
                                                            ValueId step,
                                                            const std::vector<ValueId>& inits) {
  check_open();
  if (open_.size() >= static_cast<size_t>(kMaxRegionDepth))
    bad(OpKind::FOR, "regions nest deeper than ", kMaxRegionDepth, " levels");
  for (ValueId v : {start, end, step}) check_value(OpKind::FOR, v, "a bound");
  for (ValueId v : inits) check_value(OpKind::FOR, v, "an init value");
  for (ValueId v : {start, end, step})
    if (!is_int(type(v).dtype) || type(v).shape.rank > 1 || type(v).is_ptr)
      bad(OpKind::FOR, "start, end and step must be integer scalars or 1-D integer tiles "
          "(per-thread bounds), got ", type(v).str());
  if (auto c = int_consts_.find(step); c != int_consts_.end() && c->second == 0)
    bad(OpKind::FOR, "step is 0 (the loop would never end)");
  DType d = promote(type(start), type(end));
  d = promote(Type::scalar(d), type(step));
  // Per-thread bounds: one tile shape for all three (docs/semantics.md, "Loops").
  const Shape shape = broadcast_shape(OpKind::FOR, {start, end, step});
  auto bound = [&](ValueId v) {
    v = to_dtype(v, d);
    return shape.rank == 0 || type(v).is_tile() ? v : broadcast(v, shape);
  };
  Op op;
  op.kind = OpKind::FOR;
  op.operands = {bound(start), bound(end), bound(step)};
  op.operands.insert(op.operands.end(), inits.begin(), inits.end());
  op.loc = loc_;
  Block body;
  ValueId iv = p_.new_value(type(op.operands[0]));
  body.args.push_back(iv);
  std::vector<ValueId> carried;
  for (ValueId v : inits) {
    carried.push_back(p_.new_value(type(v)));
    body.args.push_back(carried.back());
  }
  in_scope_.resize(p_.values.size(), false);
  for (ValueId a : body.args) in_scope_[a] = true;
  op.regions.push_back(std::move(body));
  open_.push_back(std::move(op));
  return {iv, carried};
}

std::vector<ValueId> Builder::for_end(const std::vector<ValueId>& yields) {
  check_open();
  if (open_.empty() || open_.back().kind != OpKind::FOR)
    fail(METILE_ERROR_INVALID_PROGRAM, "builder", p_.where(loc_),
         "for_end without an open loop", open_.empty() ? "" : " (a simdgroup_role is open)");
  Op& loop = open_.back();
  size_t n = loop.operands.size() - 3;
  if (yields.size() != n)
    bad(OpKind::FOR, "the loop carries ", n, " values but ", yields.size(), " were yielded");
  std::vector<ValueId> ys;
  for (size_t i = 0; i < n; ++i) {
    check_value(OpKind::YIELD, yields[i], "a yielded value");
    const Type& want = type(loop.operands[3 + i]);
    ValueId y = yields[i];
    if (type(y).dtype != want.dtype && !type(y).is_ptr && !want.is_ptr && type(y).shape == want.shape)
      bad(OpKind::FOR, "carried value ", i, " changes type from ", want.str(), " to ",
          type(y).str(), "; cast the init or the update");
    if (!same_modulo_threads(type(y), want))
      bad(OpKind::FOR, "carried value ", i, " changes type from ", want.str(), " to ",
          type(y).str(), (want.is_scalar() && type(y).is_tile()) ? "; broadcast the init value" : "");
    ys.push_back(y);
  }
  Op yield;
  yield.kind = OpKind::YIELD;
  yield.operands = ys;
  yield.loc = loc_;
  current().ops.push_back(std::move(yield));

  Op done = std::move(open_.back());
  open_.pop_back();
  for (ValueId a : done.body().args) in_scope_[a] = false;
  walk(done.body(), [&](const Op& o) {
    for (ValueId r : o.results) in_scope_[r] = false;
  });
  for (size_t i = 0; i < n; ++i) done.results.push_back(p_.new_value(type(done.operands[3 + i])));
  in_scope_.resize(p_.values.size(), false);
  for (ValueId r : done.results) in_scope_[r] = true;
  std::vector<ValueId> results = done.results;
  current().ops.push_back(std::move(done));
  return results;
}

// Pointer provenance (ir/pointer_provenance.h), which bounds every access, does not follow
// values through if and while: they carry offsets, and the pointer is formed after them.
void Builder::no_pointer(OpKind kind, ValueId v) const {
  if (type(v).is_ptr)
    bad(kind, "cannot carry a pointer (", type(v).str(), "); carry the integer offset and add it to the pointer after");
}

void Builder::open_region(Op op) {
  if (open_.size() >= static_cast<size_t>(kMaxRegionDepth))
    bad(op.kind, "regions nest deeper than ", kMaxRegionDepth, " levels");
  op.loc = loc_;
  open_.push_back(std::move(op));
}

void Builder::leave_block(const Block& b) {
  for (ValueId a : b.args) in_scope_[a] = false;
  walk(b, [&](const Op& o) {
    for (ValueId r : o.results) in_scope_[r] = false;
  });
}

std::vector<ValueId> Builder::check_yields(OpKind kind, const std::vector<ValueId>& yields,
                                           const std::vector<Type>& want, const char* what) {
  if (yields.size() != want.size())
    bad(kind, what, " gives ", yields.size(), " values, expected ", want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    check_value(OpKind::YIELD, yields[i], "a yielded value");
    no_pointer(kind, yields[i]);
    if (!same_modulo_threads(type(yields[i]), want[i]))
      bad(kind, what, " value ", i, " has type ", type(yields[i]).str(), ", expected ",
          want[i].str(), "; cast or broadcast it so both agree");
  }
  return yields;
}

void Builder::push_yield(std::vector<ValueId> values) {
  Op y;
  y.kind = OpKind::YIELD;
  y.operands = std::move(values);
  y.loc = loc_;
  current().ops.push_back(std::move(y));
}

Op& Builder::open_op(OpKind kind, size_t regions, const char* call) {
  check_open();
  if (open_.empty() || open_.back().kind != kind || open_.back().regions.size() != regions)
    fail(METILE_ERROR_INVALID_PROGRAM, "builder", p_.where(loc_), call, " without an open ",
         op_name(kind), open_.empty() ? "" : cat(" (the innermost open region is a ",
                                                 op_name(open_.back().kind), ")"));
  return open_.back();
}

std::vector<ValueId> Builder::close_region(const std::vector<Type>& types) {
  Op done = std::move(open_.back());
  open_.pop_back();
  leave_block(done.regions.back());
  for (const Type& t : types) done.results.push_back(p_.new_value(t));
  in_scope_.resize(p_.values.size(), false);
  for (ValueId r : done.results) in_scope_[r] = true;
  std::vector<ValueId> results = done.results;
  current().ops.push_back(std::move(done));
  return results;
}

void Builder::if_begin(ValueId cond) {
  check_open();
  check_value(OpKind::IF, cond, "the condition");
  const Type& t = type(cond);
  if (t.is_tile() || t.is_ptr || t.dtype != DType::boolean)
    bad(OpKind::IF, "the condition must be a bool scalar (uniform per program), got ", t.str(),
        t.is_tile() ? "; for a tile condition select values with where()" : "");
  Op op;
  op.kind = OpKind::IF;
  op.operands = {cond};
  op.regions.emplace_back();
  open_region(std::move(op));
}

void Builder::if_else(const std::vector<ValueId>& then_yields) {
  Op& op = open_op(OpKind::IF, 1, "if_else");
  for (ValueId v : then_yields) {
    check_value(OpKind::YIELD, v, "a yielded value");
    no_pointer(OpKind::IF, v);
  }
  push_yield(then_yields);
  leave_block(op.regions[0]);
  op.regions.emplace_back();
}

std::vector<ValueId> Builder::if_end(const std::vector<ValueId>& else_yields) {
  check_open();
  if (!open_.empty() && open_.back().kind == OpKind::IF && open_.back().regions.size() == 1) {
    if (!else_yields.empty())
      bad(OpKind::IF, "without an else branch the if has no results, but ", else_yields.size(),
          " values were given");
    push_yield({});
    leave_block(open_.back().regions[0]);
    open_.back().regions.emplace_back();
  }
  Op& op = open_op(OpKind::IF, 2, "if_end");
  std::vector<Type> want;
  for (ValueId v : op.regions[0].ops.back().operands) want.push_back(type(v));
  push_yield(check_yields(OpKind::IF, else_yields, want, "the else branch"));
  return close_region(want);
}

std::vector<ValueId> Builder::while_begin(const std::vector<ValueId>& inits) {
  check_open();
  for (ValueId v : inits) {
    check_value(OpKind::WHILE, v, "an init value");
    no_pointer(OpKind::WHILE, v);
  }
  Op op;
  op.kind = OpKind::WHILE;
  op.operands = inits;
  Block before;
  for (ValueId v : inits) before.args.push_back(p_.new_value(type(v)));
  in_scope_.resize(p_.values.size(), false);
  for (ValueId a : before.args) in_scope_[a] = true;
  std::vector<ValueId> args = before.args;
  op.regions.push_back(std::move(before));
  open_region(std::move(op));
  return args;
}

std::vector<ValueId> Builder::while_do(ValueId cond, const std::vector<ValueId>& passed) {
  Op& op = open_op(OpKind::WHILE, 1, "while_do");
  check_value(OpKind::WHILE, cond, "the condition");
  const Type& t = type(cond);
  if (t.is_tile() || t.is_ptr || t.dtype != DType::boolean)
    bad(OpKind::WHILE, "the condition must be a bool scalar (uniform per program), got ", t.str(),
        t.is_tile() ? "; reduce it to a scalar first (e.g. max over the tile)" : "");
  std::vector<Type> want;
  for (ValueId v : op.operands) want.push_back(type(v));
  std::vector<ValueId> values{cond};
  for (ValueId v : check_yields(OpKind::WHILE, passed, want, "the condition block"))
    values.push_back(v);
  push_yield(std::move(values));
  leave_block(op.regions[0]);
  Block after;
  for (const Type& w : want) after.args.push_back(p_.new_value(w));
  in_scope_.resize(p_.values.size(), false);
  for (ValueId a : after.args) in_scope_[a] = true;
  std::vector<ValueId> args = after.args;
  op.regions.push_back(std::move(after));
  return args;
}

std::vector<ValueId> Builder::while_end(const std::vector<ValueId>& yields) {
  Op& op = open_op(OpKind::WHILE, 2, "while_end");
  std::vector<Type> want;
  for (ValueId v : op.operands) want.push_back(type(v));
  push_yield(check_yields(OpKind::WHILE, yields, want, "the body"));
  return close_region(want);
}

void Builder::role_begin(int role, int num_roles, int first_sg, int num_sgs) {
  check_open();
  if (open_.size() >= static_cast<size_t>(kMaxRegionDepth))
    bad(OpKind::SIMDGROUP_ROLE, "regions nest deeper than ", kMaxRegionDepth, " levels");
  Op op;
  op.kind = OpKind::SIMDGROUP_ROLE;
  op.attrs = {{"role", int64_t{role}}, {"num_roles", int64_t{num_roles}},
              {"first_sg", int64_t{first_sg}}, {"num_sgs", int64_t{num_sgs}}};
  op.loc = loc_;
  TypeContext ctx{&p_, &threads_, !threads_fixed_};
  infer_result_types(op, ctx);  // validates the attributes now, at the user's line
  op.regions.emplace_back();
  open_.push_back(std::move(op));
}

void Builder::role_end() {
  check_open();
  if (open_.empty() || open_.back().kind != OpKind::SIMDGROUP_ROLE)
    fail(METILE_ERROR_INVALID_PROGRAM, "builder", p_.where(loc_),
         "role_end without an open simdgroup_role", open_.empty() ? "" : " (a loop is open)");
  Op done = std::move(open_.back());
  open_.pop_back();
  walk(done.body(), [&](const Op& o) {
    for (ValueId r : o.results) in_scope_[r] = false;
  });
  current().ops.push_back(std::move(done));
}

ValueId Builder::simt(OpKind kind) {
  if (kind != OpKind::THREAD_ID && kind != OpKind::SIMD_LANE_ID && kind != OpKind::BARRIER)
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", op_name(kind),
         " is not thread_id, simd_lane_id or barrier");
  return emit1(kind, {});
}

ValueId Builder::simd(OpKind kind, ValueId x, ValueId lane_or_mask) {
  if (kind != OpKind::SIMD_SHUFFLE_XOR && kind != OpKind::SIMD_BROADCAST)
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", op_name(kind),
         " is not simd_shuffle_xor or simd_broadcast");
  check_value(kind, lane_or_mask, "the lane");
  if (is_int(type(lane_or_mask).dtype) && type(lane_or_mask).dtype != DType::i32)
    lane_or_mask = cast(lane_or_mask, DType::i32);
  return emit1(kind, {x, lane_or_mask});
}

ValueId Builder::shared(int64_t size, DType dtype) {
  if (!is_valid_dtype(static_cast<int>(dtype)))
    fail(METILE_ERROR_INVALID_ARGUMENT, "builder", "shared() with an invalid dtype");
  Type t = Type::ptr(dtype, AddrSpace::threadgroup);
  return emit1(OpKind::SHARED, {}, {{"size", size}}, &t);
}

std::pair<ValueId, ValueId> Builder::tile_swizzle(ValueId pid_m, ValueId pid_n,
                                                  std::string pattern, int block_size) {
  check_text(pattern, "tile_swizzle pattern", "builder", kMaxNameBytes);
  canonical_swizzle(pattern, block_size);
  std::vector<ValueId> r = emit(OpKind::TILE_SWIZZLE, {pid_m, pid_n},
                                {{"pattern", pattern}, {"block_size", int64_t{block_size}}});
  return {r[0], r[1]};
}

Program Builder::finish() {
  check_open();
  if (!open_.empty()) {
    const Op& o = open_.back();
    fail(METILE_ERROR_INVALID_PROGRAM, "builder", p_.where(o.loc), op_name(o.kind),
         " is still open at finish()");
  }
  if (uses_simt(p_) && threads_ == 0) {
    std::set<int64_t> sizes;
    walk(p_.body, [&](const Op& op) {
      if (op.kind == OpKind::ARANGE) sizes.insert(op.attr_int("size"));
    });
    // Without an arange the original took its BLOCK constexpr as the threadgroup size; its
    // SIMT kernels (attention decode) rely on that, so it is the second default here.
    if (sizes.empty())
      for (const auto& [name, value] : p_.constexprs)
        if (name == "BLOCK" && !value.empty() &&
            value.find_first_not_of("0123456789") == std::string::npos && value.size() <= 4 &&
            std::stoll(value) >= 1 && std::stoll(value) <= 4096)
          sizes.insert(std::stoll(value));
    if (sizes.size() != 1) {
      const Op* first = nullptr;
      walk(p_.body, [&](const Op& op) {
        if (!first && has_trait(op.kind, kSimt)) first = &op;
      });
      fail(METILE_ERROR_INVALID_PROGRAM, "builder", p_.where(first->loc), op_name(first->kind),
           ": the kernel uses the SIMT view but its thread count is unknown (",
           sizes.empty() ? std::string("no arange and no BLOCK constexpr")
                         : cat(sizes.size(), " different arange sizes"),
           "); set num_threads");
    }
    threads_ = *sizes.begin();
  }
  p_.num_threads = (uses_simt(p_) || threads_fixed_) ? threads_ : 0;
  for (Type& t : p_.values)
    for (int i = 0; i < t.shape.rank; ++i)
      if (t.shape.dims[i] == kThreadsDim) t.shape.dims[i] = threads_;
  verify(p_);
  finished_ = true;
  return std::move(p_);
}

}  // namespace metile

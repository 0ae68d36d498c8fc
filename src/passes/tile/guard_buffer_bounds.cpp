// bounds: docs/semantics.md "No access leaves its buffer" and the tile_load/tile_store default matrix.
// Needs: verified Tile IR after the activity pass. Guarantees:
//   - one hidden i64 parameter per pointer parameter, appended in parameter order (named
//     `<name>_extent`): the element count from the argument's offset to its buffer's end, passed
//     by the runtime (runtime/hidden_args.cpp), described in TileHiddenArgs;
//   - tile_load/tile_store without bounds get (extent // stride, stride), extent counted from the
//     op's pointer (docs/semantics.md); always, since it is semantics;
//   - unless the device checks accesses itself (interp) or CompileOptions::unchecked: every load,
//     store and atomic is masked by 0 <= offset < extent, so an out-of-range load reads 0 and an
//     out-of-range store is dropped, and tile accesses keep inside (extent // stride, stride);
//     accesses to threadgroup memory whose offsets are provably in range keep no guard;
//   - with CompileOptions::check_bounds (on a device that does not check itself) a hidden i32
//     error-flag pointer comes last: the first guarded access with a lane out of range stores
//     its site number there (TileHiddenArgs::sites names the op and source line), as does a
//     tile access whose given bounds reach past its buffer where the tile touches that part.
// Every pointer is traced to the parameter or shared allocation it came from (through the ops of
// pointer_sources and loop-carried values, whose offset is carried alongside); a
// pointer that cannot be traced to one buffer is an UNSUPPORTED error naming the op.
#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "ir/pointer_provenance.h"
#include "passes/tile/tile_emit.h"
#include "support/error.h"
#include "target/options.h"

namespace metile {

namespace {

// Where a pointer points: its buffer and the element offset from the argument. A tile of
// pointers `p + lanes`, with p's offset a scalar and `lanes` a signed integer tile of at most 32
// bits (the common `X + row * stride + cols`), keeps the two apart so that its guard compares the
// narrow lanes with two bounds computed once per access, rather than widening every lane to i64.
struct Prov {
  int base = -1;               // index into Bounds::bases_
  ValueId offset = kNoValue;   // i64 element offset (scalar or tile); none = 0
  ValueId lanes = kNoValue;    // when set: offset is `offset + i64(lanes)`, offset scalar or none
};

struct Range {
  int64_t lo, hi;
};

class Bounds {
 public:
  Bounds(Program& p, const TilePassContext& ctx)
      : p_(p), ctx_(ctx),
        guard_(!ctx.device_checks_accesses && !ctx.options.unchecked),
        report_(!ctx.device_checks_accesses && ctx.options.check_bounds) {}

  void run() {
    const size_t n = p_.params.size();
    for (size_t i = 0; i < n; ++i) {
      const Param prm = p_.params[i];
      if (!p_.type(prm.value).is_ptr) continue;
      ValueId extent = p_.new_value(Type::scalar(DType::i64));
      p_.params.push_back({fresh_param_name(p_, prm.name + "_extent"), extent});
      ctx_.hidden.extent_of.push_back(i);
      bases_.push_back({extent, std::nullopt});
      prov_[prm.value] = {static_cast<int>(bases_.size() - 1), kNoValue};
    }
    if (report_) {
      error_ = p_.new_value(Type::ptr(DType::i32));
      p_.params.push_back({fresh_param_name(p_, "bounds_error"), error_});
      ctx_.hidden.error_flag = true;
    }
    block(p_.body);
  }

 private:
  struct Base {
    ValueId extent;                 // i64 scalar
    std::optional<int64_t> known;   // shared memory: the extent as a constant
  };

  ValueId emit(OpKind k, std::vector<ValueId> operands, Type t, std::vector<Attr> attrs = {}) {
    ValueId r = append_op(p_, *out_, k, std::move(operands), t, loc_, std::move(attrs));
    note_range(out_->back());
    return r;
  }
  ValueId constant(DType d, int64_t v) {
    return emit(OpKind::CONST, {}, Type::scalar(d), {Attr{"value", v}});
  }
  ValueId to_i64(ValueId v) {
    const Type t = p_.type(v);
    return t.dtype == DType::i64 ? v : emit(OpKind::CAST, {v}, t.with_dtype(DType::i64));
  }
  ValueId like(OpKind k, ValueId v, const Shape& s) {
    return emit(k, {v}, Type::tile(p_.type(v).dtype, s));
  }
  ValueId bool_op(OpKind k, ValueId a, ValueId b) {
    const Shape s = p_.type(a).is_tile() ? p_.type(a).shape : p_.type(b).shape;
    return emit(k, {a, b}, Type::tile(DType::boolean, s));
  }
  // The i64 offset of `pv` (a split offset is added up here, at the point of use).
  ValueId offset_of(const Prov& pv) {
    if (pv.lanes == kNoValue) return pv.offset;
    const Type wide = p_.type(pv.lanes).with_dtype(DType::i64);
    const ValueId lanes = emit(OpKind::CAST, {pv.lanes}, wide);
    return pv.offset == kNoValue ? lanes : emit(OpKind::ADD, {pv.offset, lanes}, wide);
  }
  static bool narrow_lanes(const Type& t) {
    return t.is_tile() && is_int(t.dtype) && is_signed(t.dtype) && dtype_size(t.dtype) <= 4;
  }
  ValueId offset_or_zero(const Prov& pv, const Shape& s) {
    if (pv.lanes != kNoValue || pv.offset != kNoValue) return offset_of(pv);
    ValueId z = constant(DType::i64, 0);
    return s.rank ? emit(OpKind::BROADCAST, {z}, Type::tile(DType::i64, s)) : z;
  }

  // Constant ranges of integer index arithmetic (constants, aranges of constant start, + - *).
  std::optional<Range> range(ValueId v) const {
    auto it = ranges_.find(v);
    if (it == ranges_.end()) return std::nullopt;
    return it->second;
  }
  void note_range(const Op& op);

  const Prov* prov(ValueId v) const {
    auto it = prov_.find(v);
    return it == prov_.end() ? nullptr : &it->second;
  }
  const Prov& need_prov(const Op& op, ValueId ptr) {
    const Prov* pv = prov(ptr);
    if (pv == nullptr)
      fail(METILE_ERROR_UNSUPPORTED, "bounds", p_.where(op.loc), op_name(op.kind),
           ": cannot tell which buffer this pointer points into (a select or loop mixes "
           "pointers of different buffers); compile with `unchecked` to run it unguarded");
    return *pv;
  }

  void block(Block& b) {
    std::vector<Op> ops = std::move(b.ops);
    b.ops.clear();
    for (Op& op : ops) {
      std::vector<Op>* saved = out_;
      out_ = &b.ops;
      loc_ = op.loc;
      rewrite(op);
      out_ = saved;
    }
  }
  void rewrite(Op& op);
  void pointer_op(Op& op);
  void access(Op& op);
  void tile_access(Op& op);
  void loop(Op& op);
  // The lanes of an access of `shape` at `pv` inside their buffer; kNoValue when provably all.
  ValueId in_range(const Prov& pv, const Shape& shape);
  ValueId lanes_in_range(const Prov& pv, ValueId limit = kNoValue);
  ValueId mask_limit(ValueId mask, ValueId lanes) const;
  void report(ValueId active, ValueId inside, const Op& op);
  void report_past_buffer(const Op& op, size_t first_bound, ValueId rows, ValueId cols);

  Program& p_;
  const TilePassContext& ctx_;
  const bool guard_, report_;
  std::vector<Base> bases_;
  std::unordered_map<ValueId, Prov> prov_;
  std::unordered_map<ValueId, Range> ranges_;
  std::unordered_map<ValueId, std::pair<ValueId, ValueId>> less_than_;  // r = a < b: (a, b)
  std::unordered_map<ValueId, ValueId> broadcast_of_;                   // r = broadcast(x): x
  ValueId error_ = kNoValue;
  std::vector<Op>* out_ = nullptr;
  Loc loc_;
};

void Bounds::note_range(const Op& op) {
  auto put = [&](int64_t lo, int64_t hi) { ranges_[op.result()] = {lo, hi}; };
  constexpr int64_t kBig = int64_t{1} << 40;  // keeps sums and products far from overflow
  auto small = [&](const Range& r) { return r.lo > -kBig && r.hi < kBig; };
  switch (op.kind) {
    case OpKind::CONST:
      if (const auto* i = std::get_if<int64_t>(op.find_attr("value"))) put(*i, *i);
      return;
    case OpKind::ARANGE:
      if (auto s = range(op.operands[0]); s && small(*s))
        put(s->lo, s->hi + op.attr_int("size") - 1);
      return;
    case OpKind::CAST:
    case OpKind::BROADCAST:
    case OpKind::RESHAPE:
      if (auto s = range(op.operands[0]); s && is_int(p_.type(op.result()).dtype) &&
                                          is_signed(p_.type(op.result()).dtype))
        put(s->lo, s->hi);
      return;
    case OpKind::ADD:
    case OpKind::SUB:
    case OpKind::MUL: {
      auto a = range(op.operands[0]), b = range(op.operands[1]);
      if (!a || !b || !small(*a) || !small(*b)) return;
      if (op.kind == OpKind::ADD) put(a->lo + b->lo, a->hi + b->hi);
      if (op.kind == OpKind::SUB) put(a->lo - b->hi, a->hi - b->lo);
      if (op.kind == OpKind::MUL && a->lo >= 0 && b->lo >= 0 && a->hi < (1 << 20) &&
          b->hi < (1 << 20))
        put(a->lo * b->lo, a->hi * b->hi);
      return;
    }
    default:
      return;
  }
}

ValueId Bounds::in_range(const Prov& pv, const Shape& shape) {
  const Base& base = bases_[static_cast<size_t>(pv.base)];
  if (base.known) {
    std::optional<Range> r = pv.offset == kNoValue ? Range{0, 0} : range(pv.offset);
    if (r && r->lo >= 0 && r->hi < *base.known) return kNoValue;
  }
  if (pv.lanes != kNoValue) return lanes_in_range(pv);
  const ValueId off = offset_or_zero(pv, shape);
  const ValueId lo = bool_op(OpKind::GE, off, constant(DType::i64, 0));
  const ValueId hi = bool_op(OpKind::LT, off, base.extent);
  return bool_op(OpKind::BITAND, lo, hi);
}

ValueId Bounds::lanes_in_range(const Prov& pv, ValueId limit) {
  // offset + lane in [0, extent)  <=>  lane in [-offset, extent - 1 - offset]: two scalar bounds,
  // clamped into the lanes' type; an empty interval becomes (max, min), which no lane satisfies.
  // With a `limit` (the access's mask is `lane < limit`) the upper bound also takes limit - 1,
  // so the guard's compares are the mask too.
  const DType d = p_.type(pv.lanes).dtype;
  const int bits = static_cast<int>(dtype_size(d)) * 8;
  const int64_t dmax = (int64_t{1} << (bits - 1)) - 1, dmin = -dmax - 1;
  const Type i64 = Type::scalar(DType::i64);
  const ValueId extent = bases_[static_cast<size_t>(pv.base)].extent;
  ValueId lo = constant(DType::i64, 0);
  ValueId hi = emit(OpKind::SUB, {extent, constant(DType::i64, 1)}, i64);
  if (pv.offset != kNoValue) {
    lo = emit(OpKind::SUB, {lo, pv.offset}, i64);
    hi = emit(OpKind::SUB, {hi, pv.offset}, i64);
  }
  if (limit != kNoValue)
    hi = emit(OpKind::MINIMUM,
              {hi, emit(OpKind::SUB, {to_i64(limit), constant(DType::i64, 1)}, i64)}, i64);
  if (pv.offset == kNoValue) {
    // lane in [0, hi]  <=>  u32(lane) < u32(clamp(hi + 1, 0, 2^31)): one compare (a negative
    // lane is at least 2^31 as u32, above every bound).
    ValueId count = emit(OpKind::ADD, {hi, constant(DType::i64, 1)}, i64);
    count = emit(OpKind::MAXIMUM, {count, constant(DType::i64, 0)}, i64);
    count = emit(OpKind::MINIMUM, {count, constant(DType::i64, int64_t{1} << 31)}, i64);
    const ValueId bound = emit(OpKind::CAST, {count}, Type::scalar(DType::u32));
    const ValueId wide = emit(OpKind::CAST, {pv.lanes}, p_.type(pv.lanes).with_dtype(DType::u32));
    return bool_op(OpKind::LT, wide, bound);
  }
  const ValueId big = constant(DType::i64, dmax), small = constant(DType::i64, dmin);
  ValueId empty = bool_op(OpKind::GT, lo, hi);
  empty = bool_op(OpKind::BITOR, empty, bool_op(OpKind::GT, lo, big));
  empty = bool_op(OpKind::BITOR, empty, bool_op(OpKind::LT, hi, small));
  auto clamp = [&](ValueId v) {
    v = emit(OpKind::MINIMUM, {emit(OpKind::MAXIMUM, {v, small}, i64), big}, i64);
    return emit(OpKind::CAST, {v}, Type::scalar(d));
  };
  const Type nt = Type::scalar(d);
  lo = emit(OpKind::SELECT, {empty, constant(d, dmax), clamp(lo)}, nt);
  hi = emit(OpKind::SELECT, {empty, constant(d, dmin), clamp(hi)}, nt);
  return bool_op(OpKind::BITAND, bool_op(OpKind::GE, pv.lanes, lo),
                 bool_op(OpKind::LE, pv.lanes, hi));
}

void Bounds::report(ValueId active, ValueId inside, const Op& op) {
  // A lane that would access memory and is outside: store this site's number in the flag.
  ValueId outside = emit(OpKind::NOT, {inside}, p_.type(inside));
  if (active != kNoValue) outside = bool_op(OpKind::BITAND, outside, active);
  if (p_.type(outside).is_tile())
    outside = emit(OpKind::REDUCE_MAX,
                   {emit(OpKind::CAST, {outside}, p_.type(outside).with_dtype(DType::i32))},
                   Type::scalar(DType::i32), {Attr{"axis", int64_t{-1}}});
  else
    outside = emit(OpKind::CAST, {outside}, Type::scalar(DType::i32));
  const ValueId any = bool_op(OpKind::NE, outside, constant(DType::i32, 0));
  ctx_.hidden.sites.push_back(
      cat(p_.where(op.loc), op_name(op.kind), ": an access outside its buffer (check_bounds)"));
  const ValueId site = constant(DType::i32, static_cast<int64_t>(ctx_.hidden.sites.size()));
  Op st;
  st.kind = OpKind::STORE;
  st.operands = {error_, site, any};
  st.loc = op.loc;
  out_->push_back(std::move(st));
}

// The scalar n when `mask` is `lanes < n` (n a scalar integer, or a broadcast of one).
ValueId Bounds::mask_limit(ValueId mask, ValueId lanes) const {
  auto lt = less_than_.find(mask);
  if (lt == less_than_.end() || lt->second.first != lanes) return kNoValue;
  ValueId n = lt->second.second;
  if (auto b = broadcast_of_.find(n); b != broadcast_of_.end()) n = b->second;
  // Only a limit of the lanes' own (signed, at most 32-bit) type: `limit - 1` then cannot wrap
  // in i64, and the compare is the signed one the mask meant.
  const Type t = p_.type(n);
  return t.is_tile() || t.dtype != p_.type(lanes).dtype ? kNoValue : n;
}

void Bounds::access(Op& op) {
  const bool is_load = op.kind == OpKind::LOAD;
  const ValueId ptr = op.operands[0];
  const Prov pv = need_prov(op, ptr);
  const Shape s = p_.type(ptr).shape;
  // Masks: load(ptr, mask), store(ptr, v, mask), atomics(ptr, v, mask), atomic_cas(ptr, c, v, mask).
  const size_t mask_i = is_load ? 1 : op.kind == OpKind::ATOMIC_CAS ? 3 : 2;
  const bool has_mask = op.operands.size() > mask_i;
  const ValueId mask = has_mask ? op.operands[mask_i] : kNoValue;
  // `X + row * N + cols` under `cols < N`: the mask folds into the guard's upper bound.
  const ValueId limit = has_mask && pv.lanes != kNoValue ? mask_limit(mask, pv.lanes) : kNoValue;
  const ValueId inside = limit != kNoValue ? lanes_in_range(pv, limit) : in_range(pv, s);
  if (inside == kNoValue) {
    out_->push_back(std::move(op));
    return;
  }
  if (report_) report(mask, inside, op);
  const ValueId guarded =
      has_mask && limit == kNoValue ? bool_op(OpKind::BITAND, mask, inside) : inside;
  if (has_mask)
    op.operands[mask_i] = guarded;
  else
    op.operands.push_back(guarded);
  if (is_load && op.operands.size() >= 3) {
    // A load with `other`: lanes the mask allows but the buffer does not read 0, not `other`;
    // lanes the mask turns off still read `other`.
    const Type rt = p_.type(op.result());
    const ValueId zero = is_float(rt.dtype) ? emit(OpKind::CONST, {}, Type::scalar(rt.dtype),
                                                   {Attr{"value", 0.0}})
                                            : constant(rt.dtype, 0);
    const ValueId other = op.operands[2];
    const bool tile = p_.type(mask).is_tile() || p_.type(other).is_tile();
    op.operands[2] = emit(OpKind::SELECT, {mask, zero, other}, tile ? rt : Type::scalar(rt.dtype));
  }
  out_->push_back(std::move(op));
}

void Bounds::tile_access(Op& op) {
  const bool is_load = op.kind == OpKind::TILE_LOAD;
  const size_t first_bound = is_load ? 4 : 5;
  const bool bounded = op.operands.size() > first_bound;
  // hopper (issue 19): the `bounds` attribute tells TMA lowering (lower_tma.cpp) that the bounds
  // are this pass's: "buffer" the appended default matrix, "clamped" MINIMUM(given, buffer's)
  // with the given bound its first operand. Only this pass sets it: any other copy is dropped.
  std::erase_if(op.attrs, [](const Attr& a) { return a.name == "bounds"; });
  if (bounded && !guard_) {
    out_->push_back(std::move(op));
    return;
  }
  const Prov pv = need_prov(op, op.operands[0]);
  const DType d = p_.type(op.operands[1]).dtype;  // the row's type: bounds are compared with it
  // The matrix the buffer holds from this pointer: (extent - offset) // stride rows of stride.
  const Base& base = bases_[static_cast<size_t>(pv.base)];
  ValueId avail = base.extent;
  if (pv.offset != kNoValue || pv.lanes != kNoValue)
    avail = emit(OpKind::SUB, {avail, offset_of(pv)}, Type::scalar(DType::i64));
  const ValueId stride = to_i64(op.operands[3]);
  const ValueId zero = constant(DType::i64, 0), one = constant(DType::i64, 1);
  const ValueId positive = bool_op(OpKind::GT, stride, zero);
  // max(stride, 1): positive, so the divisions below can move out of loops (positive_integers).
  const ValueId divisor = emit(OpKind::MAXIMUM, {stride, one}, Type::scalar(DType::i64));
  ValueId rows = emit(OpKind::FLOORDIV, {avail, divisor}, Type::scalar(DType::i64));
  if (bounded) {
    // A strided view's span ends at its last element, so its last row may be shorter than the
    // stride: a row is inside the buffer when the columns the given bounds allow are, and
    // (avail - width) // stride + 1 rows are (width = the given columns, at most a positive
    // stride).
    const ValueId given = emit(OpKind::MAXIMUM, {to_i64(op.operands[first_bound + 1]), zero},
                               Type::scalar(DType::i64));
    const ValueId width = emit(OpKind::SELECT,
                               {positive, emit(OpKind::MINIMUM, {given, stride}, Type::scalar(DType::i64)), given},
                               Type::scalar(DType::i64));
    const ValueId room = emit(OpKind::SUB, {avail, width}, Type::scalar(DType::i64));
    const ValueId whole = emit(OpKind::FLOORDIV, {room, divisor}, Type::scalar(DType::i64));
    const ValueId fits = bool_op(OpKind::GE, room, zero);
    rows = emit(OpKind::SELECT, {fits, emit(OpKind::ADD, {whole, one}, Type::scalar(DType::i64)), zero},
                Type::scalar(DType::i64));
    // Stride 0 (a broadcast view, one row read for all): every row is that first row.
    const ValueId all = emit(OpKind::SELECT,
                             {fits, constant(DType::i64, std::numeric_limits<int64_t>::max()), zero},
                             Type::scalar(DType::i64));
    rows = emit(OpKind::SELECT, {bool_op(OpKind::EQ, stride, zero), all, rows}, Type::scalar(DType::i64));
    rows = emit(OpKind::SELECT, {bool_op(OpKind::LT, stride, zero), zero, rows}, Type::scalar(DType::i64));
  } else {
    rows = emit(OpKind::SELECT, {positive, rows, zero}, Type::scalar(DType::i64));
  }
  // Under stride 0 each row is the first: its columns run to the end of the buffer.
  ValueId cols = bounded ? emit(OpKind::SELECT, {bool_op(OpKind::EQ, stride, zero), avail, stride},
                                Type::scalar(DType::i64))
                         : stride;
  auto narrow = [&](ValueId v) {
    if (d == DType::i64) return v;
    const int bits = static_cast<int>(dtype_size(d)) * 8;
    const int64_t hi = is_signed(d) ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
    v = emit(OpKind::MINIMUM, {v, constant(DType::i64, hi)}, Type::scalar(DType::i64));
    return emit(OpKind::CAST, {v}, Type::scalar(d));
  };
  rows = narrow(rows);
  cols = narrow(cols);
  if (bounded && report_) report_past_buffer(op, first_bound, rows, cols);
  if (bounded) {
    // A given matrix, kept inside the buffer.
    const ValueId given_rows = op.operands[first_bound], given_cols = op.operands[first_bound + 1];
    const Type rt = p_.type(given_rows);
    auto as = [&](ValueId v) { return rt.dtype == d ? v : emit(OpKind::CAST, {v}, rt); };
    op.operands[first_bound] = emit(OpKind::MINIMUM, {given_rows, as(rows)}, rt);
    op.operands[first_bound + 1] = emit(OpKind::MINIMUM, {given_cols, as(cols)}, rt);
    op.attrs.push_back({"bounds", std::string("clamped")});
  } else {
    op.operands.push_back(rows);
    op.operands.push_back(cols);
    op.attrs.push_back({"bounds", std::string("buffer")});
  }
  out_->push_back(std::move(op));
}

// Given bounds may claim a matrix larger than the buffer holds; the guard then reads 0 (skips
// the store) past the buffer, and check_bounds reports it, as interp does: when the tile's part
// of the given matrix, [max(row,0), min(row+R, given rows)) x [max(col,0), min(col+C, given
// cols)), is not empty and reaches past the buffer's (rows, cols).
void Bounds::report_past_buffer(const Op& op, size_t first_bound, ValueId rows, ValueId cols) {
  const bool is_load = op.kind == OpKind::TILE_LOAD;
  const Shape& s = p_.type(is_load ? op.results[0] : op.operands[4]).shape;
  const Type i64 = Type::scalar(DType::i64);
  const ValueId zero = constant(DType::i64, 0);
  auto span = [&](ValueId at, int64_t n, ValueId given, ValueId have, ValueId* fits) {
    const ValueId start = to_i64(at);
    const ValueId lo = emit(OpKind::MAXIMUM, {start, zero}, i64);
    const ValueId end = emit(OpKind::ADD, {start, constant(DType::i64, n)}, i64);
    const ValueId hi = emit(OpKind::MINIMUM, {end, to_i64(given)}, i64);
    *fits = bool_op(OpKind::LE, hi, to_i64(have));
    return bool_op(OpKind::LT, lo, hi);
  };
  ValueId rows_fit, cols_fit;
  const ValueId some_rows = span(op.operands[1], s.dims[0], op.operands[first_bound], rows, &rows_fit);
  const ValueId some_cols = span(op.operands[2], s.dims[1], op.operands[first_bound + 1], cols, &cols_fit);
  const ValueId touches = bool_op(OpKind::BITAND, some_rows, some_cols);
  const ValueId fits = bool_op(OpKind::BITAND, rows_fit, cols_fit);
  report(kNoValue, bool_op(OpKind::BITOR, emit(OpKind::NOT, {touches}, p_.type(touches)), fits), op);
}

void Bounds::pointer_op(Op& op) {
  const ValueId r = op.result();
  const Shape s = p_.type(r).shape;
  switch (op.kind) {
    case OpKind::PTR_OFFSET: {
      const Prov* pv = prov(op.operands[0]);
      if (pv == nullptr) break;
      const Prov base = *pv;
      const ValueId raw = op.operands[1];
      const Type rt = p_.type(raw);
      if (narrow_lanes(rt) && rt.shape == s && base.lanes == kNoValue &&
          (base.offset == kNoValue || !p_.type(base.offset).is_tile()) &&
          !bases_[static_cast<size_t>(base.base)].known) {
        out_->push_back(std::move(op));
        prov_[r] = {base.base, base.offset, raw};
        return;
      }
      ValueId off = to_i64(raw);
      if (base.offset != kNoValue || base.lanes != kNoValue)
        off = emit(OpKind::ADD, {offset_of(base), off}, Type::tile(DType::i64, s));
      else if (p_.type(off).shape != s)
        off = like(OpKind::BROADCAST, off, s);
      out_->push_back(std::move(op));
      prov_[r] = {base.base, off};
      return;
    }
    case OpKind::BROADCAST:
    case OpKind::RESHAPE: {
      const Prov* pv = prov(op.operands[0]);
      if (pv == nullptr) break;
      const Prov base = *pv;
      const OpKind k = op.kind;
      out_->push_back(std::move(op));
      if (base.lanes != kNoValue)
        prov_[r] = {base.base, base.offset, like(k, base.lanes, s)};
      else
        prov_[r] = {base.base, base.offset == kNoValue ? kNoValue : like(k, base.offset, s)};
      return;
    }
    case OpKind::SELECT: {
      const Prov *a = prov(op.operands[1]), *b = prov(op.operands[2]);
      if (a == nullptr || b == nullptr || a->base != b->base) break;
      const Prov pa = *a, pb = *b;
      const ValueId c = op.operands[0];
      out_->push_back(std::move(op));
      prov_[r] = {pa.base, emit(OpKind::SELECT, {c, offset_or_zero(pa, s), offset_or_zero(pb, s)},
                                Type::tile(DType::i64, s))};
      return;
    }
    case OpKind::SHARED: {
      const int64_t size = op.attr_int("size");
      out_->push_back(std::move(op));
      bases_.push_back({constant(DType::i64, size), size});
      prov_[r] = {static_cast<int>(bases_.size() - 1), kNoValue};
      return;
    }
    default:
      METILE_ASSERT(pointer_sources(op.kind).empty(), "bounds: no offset rule for a pointer-carrying op");
      break;
  }
  out_->push_back(std::move(op));  // an untraceable pointer: its accesses say so
}

void Bounds::loop(Op& op) {
  Block& body = op.body();
  const size_t n = op.operands.size() - 3;
  // A carried pointer carries its offset alongside (an extra i64 value).
  std::vector<std::pair<size_t, int>> carried;  // (carried index, base)
  for (size_t i = 0; i < n; ++i) {
    const ValueId init = op.operands[3 + i];
    const Prov* pv = p_.type(init).is_ptr ? prov(init) : nullptr;
    if (pv == nullptr) continue;
    const Prov base = *pv;
    carried.emplace_back(i, base.base);
    op.operands.push_back(offset_or_zero(base, p_.type(init).shape));
  }
  for (size_t t = 0; t < carried.size(); ++t) {
    const ValueId arg = p_.new_value(Type(p_.type(op.operands[3 + n + t])));
    body.args.push_back(arg);
    prov_[body.args[1 + carried[t].first]] = {carried[t].second, arg};
  }
  block(body);
  Op& yield = body.ops.back();
  std::vector<Op>* saved = out_;
  out_ = &body.ops;
  Op y = std::move(yield);
  body.ops.pop_back();
  for (auto [i, base] : carried) {
    const Prov* pv = prov(y.operands[i]);
    if (pv == nullptr || pv->base != base)
      fail(METILE_ERROR_UNSUPPORTED, "bounds", p_.where(op.loc),
           "for: carried pointer ", i, " moves to another buffer inside the loop; compile with "
           "`unchecked` to run it unguarded");
    const Prov yp = *pv;
    y.operands.push_back(offset_or_zero(yp, p_.type(y.operands[i]).shape));
  }
  body.ops.push_back(std::move(y));
  out_ = saved;
  loc_ = op.loc;
  for (size_t t = 0; t < carried.size(); ++t) {
    const ValueId r = p_.new_value(Type(p_.type(body.args[1 + n + t])));
    op.results.push_back(r);
    prov_[op.results[carried[t].first]] = {carried[t].second, r};
  }
  out_->push_back(std::move(op));
}

void Bounds::rewrite(Op& op) {
  note_range(op);
  if (op.kind == OpKind::LT) less_than_[op.result()] = {op.operands[0], op.operands[1]};
  if (op.kind == OpKind::BROADCAST && !p_.type(op.result()).is_ptr)
    broadcast_of_[op.result()] = op.operands[0];
  switch (op.kind) {
    case OpKind::LOAD:
    case OpKind::STORE:
    case OpKind::ATOMIC_ADD:
    case OpKind::ATOMIC_MAX:
    case OpKind::ATOMIC_MIN:
    case OpKind::ATOMIC_XCHG:
    case OpKind::ATOMIC_CAS:
      if (guard_ || report_) {
        access(op);
        return;
      }
      break;
    case OpKind::TILE_LOAD:
    case OpKind::TILE_STORE:
      tile_access(op);
      return;
    case OpKind::FOR:
      loop(op);
      return;
    case OpKind::SIMDGROUP_ROLE:
    case OpKind::IF:
    case OpKind::WHILE:
      for (Block& b : op.regions) block(b);
      break;
    default:
      if (op.results.size() == 1 && p_.type(op.result()).is_ptr) {
        pointer_op(op);
        return;
      }
      break;
  }
  out_->push_back(std::move(op));
}

}  // namespace

void guard_buffer_bounds(Program& program, const TilePassContext& ctx) {
  Bounds(program, ctx).run();
}

}  // namespace metile

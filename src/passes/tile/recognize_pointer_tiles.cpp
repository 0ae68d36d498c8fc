// pointer_tiles: a load or store through a 2-D tile of pointers `base + rows[:, None] * stride +
// cols[None, :]` (Triton's GEMM idiom) becomes the tile_load / tile_store it stands for, so it
// gets the tile ops' staging, threadgroup memory and speed on GPUs (docs/semantics.md lists
// what is recognized). Needs: verified Tile IR after the activity pass (a load's masked-off
// lanes read 0 there, so a load with or without `other = 0` is the same). Guarantees: the same
// program, with each recognized access rewritten and pointer tiles it no longer needs
// (loop-carried ones included) removed. An access is recognized when
//   - its pointer tile is `base + s + rows[:, None] * stride_r + cols[None, :] * stride_c` (in
//     any order and nesting of adds, broadcasts and pointer offsets), with `base` a scalar device
//     pointer, `s` scalar offsets, `rows` and `cols` `start + arange(n)` of one integer type,
//     stride_c the constant 1 (Python passes an integer argument equal to 1 as a constant) and
//     stride_r any integer scalar;
//   - or a loop-carried pointer tile whose initial value is such a tile and which each iteration
//     advances by a loop-invariant `m * stride_r` (m rows) or a constant m (m columns), m >= 0,
//     in a loop with a constant step that divides m;
//   - its mask is absent or a conjunction of `rows[:, None] < bound` and `cols[None, :] < bound`
//     with scalar bounds (an axis without one is unbounded) and of `rows[:, None] >= 0` /
//     `cols[None, :] >= 0` (true here: see below), and a load's `other` is absent or 0;
//   - the tile's first row and column are provably >= 0 (sums, products, minima of constants,
//     program ids, loop counters from such starts, loop-carried scalars that start >= 0 and
//     grow by amounts >= 0: block pointers' offsets), where a masked-in lane of the pointer form
//     and the matrix element of the tile form coincide.
// Everything else (strides not 1 in the inner dimension at compile time, masks that are not
// bounds, `%` on the row or column indices, offsets of unknown sign) is left as written. The
// tile form's matrix rows have `stride_r` columns: a column bound above the row stride, or a
// buffer that ends inside a row, reads (or skips) what tile_load does there, not what the
// pointer would (docs/semantics.md "tile_load").
// Why a Tile IR pass: every device gets the one rewrite; GPU lowering stages tile_load operands
// through threadgroup memory once per tile, where pointer tiles cost a pointer per element.
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "passes/tile/tile_emit.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"

namespace metile {

namespace {

constexpr int kMaxDepth = 32;  // expression depth the matcher follows (programs are traced code)
// Expression nodes one access may visit: shared subexpressions (x + x, nested) would otherwise
// cost 2^depth.
constexpr int kBudget = 4096;

// What the matcher needs about the op defining a value (copied: blocks are rebuilt as it runs).
struct OperandDef {
  OpKind kind{};
  std::vector<ValueId> operands;
  std::optional<int64_t> int_value;  // integer const
  std::optional<double> float_value;  // float const
  size_t loop = 0;                   // innermost enclosing loop (0: none)
};

// A loop's block argument: the induction variable (index 0) or a carried value.
struct LoopArg {
  size_t loop = 0;  // this loop's id
  size_t index = 0;
  ValueId start = kNoValue, step = kNoValue, init = kNoValue, next = kNoValue;
};

// (iv - start) * q: how far a loop-carried pointer has advanced along one axis.
struct Advance {
  ValueId iv = kNoValue, start = kNoValue;
  int64_t q = 0;
};

struct Axis {
  ValueId vec = kNoValue;     // the 1-D index vector (`start + arange(n)`)
  ValueId stride = kNoValue;  // none: 1
  std::vector<Advance> advances;
  std::vector<ValueId> shifts;  // scalar offsets in rows (columns) of the pointer's scalar part
};

struct Affine {
  ValueId base = kNoValue;
  std::vector<ValueId> scalars;
  Axis row, col;
};

class PointerTiles {
 public:
  explicit PointerTiles(Program& p) : p_(p) {}

  bool run() {
    index(p_.body, 0);
    rebuild(p_.body);
    if (rewritten_) drop_dead_pointer_tiles();
    return rewritten_;
  }

 private:
  // ---- facts ----------------------------------------------------------------------------------
  void index(const Block& b, size_t loop) {
    for (const Op& op : b.ops) {
      OperandDef d{op.kind, op.operands, std::nullopt, std::nullopt, loop};
      if (op.kind == OpKind::CONST) {
        const AttrValue* v = op.find_attr("value");
        if (const auto* i = std::get_if<int64_t>(v)) d.int_value = *i;
        if (const auto* f = std::get_if<double>(v)) d.float_value = *f;
      }
      for (ValueId r : op.results) defs_[r] = d;
      if (op.kind == OpKind::FOR) {
        const size_t id = parent_.size();
        parent_.push_back(loop);
        const Block& body = op.regions[0];
        ivs_.push_back(body.args[0]);
        const Op& yield = body.ops.back();
        for (size_t i = 0; i < body.args.size(); ++i) {
          LoopArg a{id, i, op.operands[0], op.operands[2], kNoValue, kNoValue};
          if (i > 0) {
            a.init = op.operands[2 + i];
            a.next = yield.operands[i - 1];
          }
          args_[body.args[i]] = a;
          defs_[body.args[i]] = OperandDef{OpKind::FOR, {}, std::nullopt, std::nullopt, id};
        }
        index(body, id);
      } else {
        for (const Block& r : op.regions) index(r, loop);
      }
    }
  }

  bool spend() const { return --budget_ >= 0; }
  const OperandDef* def(ValueId v) const {
    auto it = defs_.find(v);
    return it == defs_.end() ? nullptr : &it->second;
  }
  std::optional<int64_t> int_const(ValueId v, int depth = 0) const {
    const OperandDef* d = def(v);
    if (d == nullptr || depth > kMaxDepth || !is_int_type(v) || !spend()) return std::nullopt;
    if (d->int_value) return d->int_value;
    if (d->kind == OpKind::MUL) {
      auto a = int_const(d->operands[0], depth + 1), b = int_const(d->operands[1], depth + 1);
      int64_t r = 0;
      if (a && b && !__builtin_mul_overflow(*a, *b, &r) && int_fits_type(v, r)) return r;
    }
    return std::nullopt;
  }
  bool is_int_type(ValueId v) const {
    return !p_.type(v).is_ptr && is_int(p_.type(v).dtype);
  }
  bool int_fits_type(ValueId v, int64_t x) const {
    const DType d = p_.type(v).dtype;
    if (dtype_size(d) >= 8) return true;
    const int bits = static_cast<int>(dtype_size(d)) * 8;
    return is_signed(d) ? x >= -(int64_t{1} << (bits - 1)) && x < (int64_t{1} << (bits - 1))
                        : x >= 0 && x < (int64_t{1} << bits);
  }
  // Whether loop `inner` is `outer` or nested in it.
  bool within(size_t inner, size_t outer) const {
    for (size_t l = inner; l != 0; l = parent_[l])
      if (l == outer) return true;
    return false;
  }
  // Whether `v` has one value throughout loop `loop`.
  bool invariant(ValueId v, size_t loop, int depth = 0) const {
    const OperandDef* d = def(v);
    if (d == nullptr || !within(d->loop, loop)) return true;  // a parameter, or defined outside
    if (d->kind == OpKind::FOR || depth > kMaxDepth || !has_trait(d->kind, kPure) ||
        has_trait(d->kind, kSimt) || !spend())
      return false;
    for (ValueId o : d->operands)
      if (!invariant(o, loop, depth + 1)) return false;
    return true;
  }
  bool nonnegative(ValueId v, int depth = 0) const {
    const OperandDef* d = def(v);
    if (d == nullptr || depth > kMaxDepth || !is_int_type(v) || !spend()) return false;
    if (d->int_value) return *d->int_value >= 0;
    auto nn = [&](size_t i) { return nonnegative(d->operands[i], depth + 1); };
    switch (d->kind) {
      case OpKind::PROGRAM_ID:
      case OpKind::NUM_PROGRAMS:
      case OpKind::TILE_SWIZZLE:
        return true;
      case OpKind::ADD:
      case OpKind::MUL:
      case OpKind::DIV:
      case OpKind::FLOORDIV:
      case OpKind::MINIMUM:
        return nn(0) && nn(1);
      case OpKind::MOD:  // the dividend's sign (docs/semantics.md)
        return nn(0);
      case OpKind::MAXIMUM:
        return nn(0) || nn(1);
      case OpKind::CAST:
        return nn(0) && dtype_size(p_.type(d->operands[0]).dtype) <= dtype_size(p_.type(v).dtype) &&
               is_signed(p_.type(v).dtype) == is_signed(p_.type(d->operands[0]).dtype);
      case OpKind::FOR: {
        const LoopArg& a = args_.at(v);
        if (a.index > 0) return advances_nonnegatively(v, a, depth);
        auto step = int_const(a.step);
        return step && *step > 0 && nonnegative(a.start, depth + 1);
      }
      default:
        return false;
    }
  }

  // A carried scalar (a block pointer's offset) that starts >= 0 and each iteration yields
  // itself (an offset the loop does not advance) or itself plus an amount >= 0.
  bool advances_nonnegatively(ValueId v, const LoopArg& a, int depth) const {
    if (a.next == v) return nonnegative(a.init, depth + 1);
    const OperandDef* n = def(a.next);
    if (n == nullptr || n->kind != OpKind::ADD || !nonnegative(a.init, depth + 1)) return false;
    for (int s = 0; s < 2; ++s)
      if (n->operands[s] == v && nonnegative(n->operands[1 - s], depth + 1)) return true;
    return false;
  }

  // ---- matching -------------------------------------------------------------------------------
  // `v` (a 1-D index vector) as start + arange(n): the scalars whose sum is its start.
  bool origin(ValueId v, std::vector<ValueId>& out, int depth = 0) const {
    const OperandDef* d = def(v);
    if (d == nullptr || depth > kMaxDepth || !spend()) return false;
    if (d->kind == OpKind::ARANGE) {
      out.push_back(d->operands[0]);
      return true;
    }
    if (d->kind != OpKind::ADD) return false;
    for (int s = 0; s < 2; ++s)
      if (p_.type(d->operands[s]).is_scalar() && p_.type(d->operands[1 - s]).is_tile()) {
        out.push_back(d->operands[s]);
        return origin(d->operands[1 - s], out, depth + 1);
      }
    return false;
  }

  // `t`, a reshape of a 1-D vector to R x 1 or 1 x C, as a term of `a` with `stride`.
  bool term(ValueId t, ValueId stride, const Shape& full, Affine& a) const {
    const OperandDef* d = def(t);
    if (d == nullptr || d->kind != OpKind::RESHAPE) return false;
    const ValueId v = d->operands[0];
    const Shape& s = p_.type(t).shape;
    if (p_.type(v).shape.rank != 1 || s.rank != 2 || full.dims[0] == 1 || full.dims[1] == 1)
      return false;
    Axis* axis = nullptr;
    if (s.dims[0] == full.dims[0] && s.dims[1] == 1) axis = &a.row;
    if (s.dims[0] == 1 && s.dims[1] == full.dims[1]) axis = &a.col;
    if (axis == nullptr || axis->vec != kNoValue) return false;
    axis->vec = v;
    axis->stride = stride;
    return true;
  }

  bool offsets(ValueId off, const Shape& full, Affine& a, int depth = 0) const {
    if (depth > kMaxDepth || !is_int_type(off) || !spend()) return false;
    if (p_.type(off).is_scalar()) {
      a.scalars.push_back(off);
      return true;
    }
    const OperandDef* d = def(off);
    if (d == nullptr) return false;
    switch (d->kind) {
      case OpKind::ADD:
        return offsets(d->operands[0], full, a, depth + 1) &&
               offsets(d->operands[1], full, a, depth + 1);
      case OpKind::BROADCAST:
        return offsets(d->operands[0], full, a, depth + 1);
      case OpKind::MUL:
        for (int s = 0; s < 2; ++s)
          if (p_.type(d->operands[s]).is_scalar() && p_.type(d->operands[1 - s]).is_tile())
            return term(d->operands[1 - s], d->operands[s], full, a);
        return false;
      case OpKind::RESHAPE:
        return term(off, kNoValue, full, a);
      default:
        return false;
    }
  }

  bool is_stride(ValueId v, ValueId stride) const {
    if (v == stride) return true;
    auto a = int_const(v), b = stride == kNoValue ? std::optional<int64_t>(1) : int_const(stride);
    return a && b && *a == *b;
  }

  // The pointer tile `ptr` as an affine form (`full`: its 2-D shape).
  bool pointer(ValueId ptr, const Shape& full, Affine& a, int depth = 0) const {
    const OperandDef* d = def(ptr);
    if (d == nullptr || depth > kMaxDepth || !spend()) return false;
    switch (d->kind) {
      case OpKind::PTR_OFFSET: {
        const ValueId from = d->operands[0];
        if (p_.type(from).is_scalar()) {
          if (p_.type(from).space != AddrSpace::device) return false;
          a.base = from;
        } else if (!pointer(from, full, a, depth + 1)) {
          return false;
        }
        return offsets(d->operands[1], full, a);
      }
      case OpKind::BROADCAST:
        return p_.type(d->operands[0]).is_tile() && pointer(d->operands[0], full, a, depth + 1);
      case OpKind::FOR:
        return carried(ptr, full, a, depth);
      default:
        return false;
    }
  }

  // A loop-carried pointer tile: its initial tile, advanced each iteration.
  bool carried(ValueId ptr, const Shape& full, Affine& a, int depth) const {
    const LoopArg& la = args_.at(ptr);
    if (la.index == 0 || !pointer(la.init, full, a, depth + 1)) return false;
    const OperandDef* next = def(la.next);
    if (next == nullptr || next->kind != OpKind::PTR_OFFSET || next->operands[0] != ptr)
      return false;
    const ValueId delta = next->operands[1];
    if (!p_.type(delta).is_scalar() || !invariant(delta, la.loop)) return false;
    auto step = int_const(la.step);
    if (!step || *step <= 0) return false;
    // m rows: delta = m * stride_r (either order) or, with constant strides, a multiple of it.
    std::optional<int64_t> rows;
    const OperandDef* dd = def(delta);
    if (dd != nullptr && dd->kind == OpKind::MUL)
      for (int s = 0; s < 2 && !rows; ++s)
        if (is_stride(dd->operands[s], a.row.stride)) rows = int_const(dd->operands[1 - s]);
    auto cols = int_const(delta);
    auto stride_r = a.row.stride == kNoValue ? std::optional<int64_t>(1) : int_const(a.row.stride);
    if (!rows && cols && stride_r && *stride_r > 0 && *cols % *stride_r == 0 && *cols != 0) {
      rows = *cols / *stride_r;
      cols.reset();
    }
    if (rows) cols.reset();
    if (!rows && !cols) return false;
    if (!rows && stride_r && *cols >= *stride_r) return false;  // would leave the row
    const int64_t m = rows ? *rows : *cols;
    if (m < 0 || m % *step != 0) return false;
    (rows ? a.row : a.col).advances.push_back({ivs_[la.loop], la.start, m / *step});
    return true;
  }

  // The mask as bounds: conjunctions of rows[:, None] < b and cols[None, :] < b; a conjunct
  // rows[:, None] >= 0 (a block pointer's boundary check) holds already, since match() has
  // proven each index's start >= 0.
  bool bounds(ValueId mask, const Affine& a, std::vector<ValueId>& rows, std::vector<ValueId>& cols,
              int depth = 0) const {
    if (mask == kNoValue) return true;
    const OperandDef* d = def(mask);
    if (d == nullptr || depth > kMaxDepth || !spend()) return false;
    if (d->int_value && p_.type(mask).is_scalar()) return *d->int_value == 1;
    switch (d->kind) {
      case OpKind::BITAND:
        return bounds(d->operands[0], a, rows, cols, depth + 1) &&
               bounds(d->operands[1], a, rows, cols, depth + 1);
      case OpKind::BROADCAST:
        return p_.type(d->operands[0]).is_tile() &&
               bounds(d->operands[0], a, rows, cols, depth + 1);
      case OpKind::GE:
      case OpKind::LE: {
        const int idx = d->kind == OpKind::GE ? 0 : 1;
        const OperandDef* r = def(d->operands[idx]);
        return zero(d->operands[1 - idx]) && r != nullptr && r->kind == OpKind::RESHAPE &&
               (r->operands[0] == a.row.vec || r->operands[0] == a.col.vec);
      }
      case OpKind::LT:
      case OpKind::GT: {
        const int idx = d->kind == OpKind::LT ? 0 : 1;
        const ValueId lhs = d->operands[idx], bound = d->operands[1 - idx];
        const OperandDef* r = def(lhs);
        if (!p_.type(bound).is_scalar() || r == nullptr || r->kind != OpKind::RESHAPE) return false;
        const ValueId v = r->operands[0];
        const Shape& s = p_.type(lhs).shape;
        if (s.rank != 2) return false;
        if (v == a.row.vec && s.dims[1] == 1) rows.push_back(bound);
        else if (v == a.col.vec && s.dims[0] == 1) cols.push_back(bound);
        else return false;
        return true;
      }
      default:
        return false;
    }
  }

  bool zero(ValueId v) const {
    if (v == kNoValue) return true;
    const OperandDef* d = def(v);
    if (d != nullptr && d->kind == OpKind::BROADCAST) return zero(d->operands[0]);
    if (d == nullptr) return false;
    if (d->int_value) return *d->int_value == 0;
    return d->float_value && *d->float_value == 0.0 && !std::signbit(*d->float_value);
  }

  // The access through `ptr` with `mask` as a tile access, or nothing.
  std::optional<Affine> match(ValueId ptr, ValueId mask, std::vector<ValueId>& rows,
                              std::vector<ValueId>& cols) const {
    const Type& t = p_.type(ptr);
    if (!t.is_ptr || t.shape.rank != 2 || t.space != AddrSpace::device) return std::nullopt;
    Affine a;
    if (!pointer(ptr, t.shape, a) || a.base == kNoValue || a.row.vec == kNoValue ||
        a.col.vec == kNoValue)
      return std::nullopt;
    const DType d = p_.type(a.row.vec).dtype;
    if (p_.type(a.col.vec).dtype != d || !is_signed(d) || !is_stride(a.col.stride, kNoValue) ||
        (a.row.stride != kNoValue && !p_.type(a.row.stride).is_scalar()))
      return std::nullopt;
    std::vector<ValueId> ro, co;
    if (!origin(a.row.vec, ro) || !origin(a.col.vec, co)) return std::nullopt;
    for (ValueId v : ro)
      if (!nonnegative(v)) return std::nullopt;
    for (ValueId v : co)
      if (!nonnegative(v)) return std::nullopt;
    if (!bounds(mask, a, rows, cols)) return std::nullopt;
    // Scalar offsets: `x * stride_r` moves x rows and a constant c >= 0 moves c columns (the
    // tile's indices and bounds move with them); any other stays in the base pointer, whose
    // matrix then starts there.
    std::vector<ValueId> rest;
    for (ValueId v : a.scalars) {
      const OperandDef* dv = def(v);
      bool placed = false;
      if (dv != nullptr && dv->kind == OpKind::MUL && a.row.stride != kNoValue)
        for (int s = 0; s < 2 && !placed; ++s)
          if (dv->operands[s] == a.row.stride && nonnegative(dv->operands[1 - s]) &&
              p_.type(dv->operands[1 - s]).dtype == d) {
            a.row.shifts.push_back(dv->operands[1 - s]);
            placed = true;
          }
      auto c = int_const(v);
      if (!placed && c && *c >= 0 && int_fits_type(a.col.vec, *c)) {
        a.col.shifts.push_back(v);
        placed = true;
      }
      if (!placed) rest.push_back(v);
    }
    a.scalars = std::move(rest);
    return a;
  }

  // ---- emitting -------------------------------------------------------------------------------
  ValueId emit(OpKind k, std::vector<ValueId> operands, Type t, std::vector<Attr> attrs = {}) {
    return append_op(p_, *out_, k, std::move(operands), t, loc_, std::move(attrs));
  }
  ValueId constant(DType d, int64_t v) {
    return emit(OpKind::CONST, {}, Type::scalar(d), {Attr{"value", v}});
  }
  ValueId as(ValueId v, DType d) {
    return p_.type(v).dtype == d ? v : emit(OpKind::CAST, {v}, Type::scalar(d));
  }
  ValueId add(ValueId a, ValueId b, DType d) {
    if (a == kNoValue) return as(b, d);
    if (b == kNoValue) return as(a, d);
    return emit(OpKind::ADD, {as(a, d), as(b, d)}, Type::scalar(d));
  }
  ValueId advance(const Advance& adv, DType d) {
    const DType l = p_.type(adv.iv).dtype;
    auto start = int_const(adv.start);
    ValueId t = start && *start == 0 ? adv.iv
                                     : emit(OpKind::SUB, {adv.iv, adv.start}, Type::scalar(l));
    if (adv.q != 1) t = emit(OpKind::MUL, {t, constant(l, adv.q)}, Type::scalar(l));
    return as(t, d);
  }
  // Whether `v` is the value advance(adv) computes.
  bool is_advance(ValueId v, const Advance& adv) const {
    auto start = int_const(adv.start);
    if (!start || *start != 0) return false;
    if (adv.q == 1 && v == adv.iv) return true;
    const OperandDef* d = def(v);
    if (d == nullptr || d->kind != OpKind::MUL) return false;
    for (int s = 0; s < 2; ++s) {
      auto q = int_const(d->operands[1 - s]);
      if (d->operands[s] == adv.iv && q && *q == adv.q) return true;
    }
    return false;
  }
  // The tile's first index along `axis`.
  ValueId first(const Axis& axis, DType d) {
    std::vector<ValueId> parts;
    origin(axis.vec, parts);
    ValueId sum = kNoValue;
    for (ValueId v : parts) {
      auto c = int_const(v);
      if (!c || *c != 0) sum = add(sum, v, d);
    }
    for (const Advance& adv : axis.advances) sum = add(sum, advance(adv, d), d);
    for (ValueId v : axis.shifts) sum = add(sum, v, d);
    return sum == kNoValue ? constant(d, 0) : sum;
  }
  // The matrix extent along `axis`: the least of the mask's bounds, moved by the advance.
  ValueId extent(const Axis& axis, const std::vector<ValueId>& bounds, DType d) {
    if (bounds.empty())  // the type's largest value
      return constant(d, std::numeric_limits<int64_t>::max() >> (64 - 8 * dtype_size(d)));
    ValueId least = kNoValue;
    for (ValueId b : bounds) {
      ValueId moved = b;
      const OperandDef* db = def(b);
      if (axis.advances.size() == 1 && db != nullptr && db->kind == OpKind::SUB &&
          is_advance(db->operands[1], axis.advances[0])) {
        moved = db->operands[0];  // adv + (x - adv)
      } else {
        for (const Advance& adv : axis.advances) moved = add(moved, advance(adv, d), d);
      }
      for (ValueId v : axis.shifts) moved = add(moved, v, d);
      moved = as(moved, d);
      least = least == kNoValue ? moved : emit(OpKind::MINIMUM, {least, moved}, Type::scalar(d));
    }
    return least;
  }

  // `op` (a load or store) as a tile access appended to out_, or false (nothing appended).
  bool rewrite(Op& op) {
    const bool is_load = op.kind == OpKind::LOAD;
    const ValueId ptr = op.operands[0];
    const size_t at = is_load ? 1 : 2;
    const ValueId mask = op.operands.size() > at ? op.operands[at] : kNoValue;
    if (is_load && op.operands.size() > 2 && !zero(op.operands[2])) return false;
    std::vector<ValueId> rows, cols;
    budget_ = kBudget;
    std::optional<Affine> a = match(ptr, mask, rows, cols);
    if (!a) return false;
    budget_ = kBudget;  // emitting repeats a few of the look-ups
    const Type& pt = p_.type(ptr);
    ValueId value = kNoValue;
    if (!is_load) {
      value = op.operands[1];
      const Type& vt = p_.type(value);
      if (vt.is_ptr || vt.shape != pt.shape) return false;
    }
    loc_ = op.loc;
    const DType d = p_.type(a->row.vec).dtype;
    ValueId base = a->base;
    for (ValueId s : a->scalars) base = emit(OpKind::PTR_OFFSET, {base, s}, p_.type(a->base));
    const ValueId row = first(a->row, d), col = first(a->col, d);
    const ValueId stride = a->row.stride == kNoValue ? constant(d, 1) : a->row.stride;
    const ValueId nrows = extent(a->row, rows, d), ncols = extent(a->col, cols, d);
    Op t;
    t.loc = op.loc;
    if (is_load) {
      t.kind = OpKind::TILE_LOAD;
      t.operands = {base, row, col, stride, nrows, ncols};
      t.results = op.results;
    } else {
      if (p_.type(value).dtype != pt.dtype)
        value = emit(OpKind::CAST, {value}, Type::tile(pt.dtype, pt.shape));
      t.kind = OpKind::TILE_STORE;
      t.operands = {base, row, col, stride, value, nrows, ncols};
    }
    out_->push_back(std::move(t));
    return true;
  }

  void rebuild(Block& b) {
    std::vector<Op> out;
    out.reserve(b.ops.size());
    for (Op& op : b.ops) {
      for (Block& r : op.regions) rebuild(r);
      out_ = &out;
      if ((op.kind == OpKind::LOAD || op.kind == OpKind::STORE) && rewrite(op)) {
        rewritten_ = true;
        continue;
      }
      out.push_back(std::move(op));
    }
    b.ops = std::move(out);
  }

  // ---- clean-up -------------------------------------------------------------------------------
  std::vector<int> uses() const {
    std::vector<int> n(p_.values.size(), 0);
    walk(p_.body, [&](const Op& op) {
      for (ValueId v : op.operands) ++n[v];
    });
    return n;
  }
  // Carried pointer tiles that only advance themselves, then the ops nothing uses.
  void drop_dead_pointer_tiles() {
    sweep_all();  // first the uses the rewritten accesses left behind
    std::vector<int> n = uses();
    walk_mut(p_.body, [&](Op& loop) {
      if (loop.kind != OpKind::FOR) return;
      Block& body = loop.regions[0];
      for (size_t k = body.args.size(); k-- > 1;) {
        const ValueId arg = body.args[k];
        Op& yield = body.ops.back();
        const ValueId next = yield.operands[k - 1];
        if (!p_.type(arg).is_ptr || n[arg] != 1 || n[next] != 1 || n[loop.results[k - 1]] != 0)
          continue;
        const OperandDef* d = def(next);
        if (d == nullptr || d->kind != OpKind::PTR_OFFSET || d->operands[0] != arg) continue;
        --n[next];
        yield.operands.erase(yield.operands.begin() + static_cast<ptrdiff_t>(k - 1));
        --n[loop.operands[2 + k]];
        loop.operands.erase(loop.operands.begin() + static_cast<ptrdiff_t>(2 + k));
        loop.results.erase(loop.results.begin() + static_cast<ptrdiff_t>(k - 1));
        body.args.erase(body.args.begin() + static_cast<ptrdiff_t>(k));
      }
    });
    sweep_all();
  }
  void sweep_all() {
    for (bool changed = true; changed;) {
      changed = false;
      sweep(p_.body, uses(), changed);
    }
  }
  void sweep(Block& b, const std::vector<int>& n, bool& changed) {
    std::vector<Op> kept;
    kept.reserve(b.ops.size());
    for (Op& op : b.ops) {
      for (Block& r : op.regions) sweep(r, n, changed);
      bool dead = runs_anywhere(p_, op) && !op.results.empty();
      for (ValueId r : op.results) dead = dead && n[r] == 0;
      if (dead) {
        changed = true;
        continue;
      }
      kept.push_back(std::move(op));
    }
    b.ops = std::move(kept);
  }

  Program& p_;
  std::unordered_map<ValueId, OperandDef> defs_;
  std::unordered_map<ValueId, LoopArg> args_;
  std::vector<size_t> parent_{0};  // parent_[loop id]: the enclosing loop (ids from 1)
  std::vector<ValueId> ivs_{kNoValue};  // ivs_[loop id]: its induction variable
  std::vector<Op>* out_ = nullptr;
  Loc loc_;
  bool rewritten_ = false;
  mutable int budget_ = 0;
};

}  // namespace

void recognize_pointer_tiles(Program& program, const TilePassContext&) {
  PointerTiles(program).run();
}

}  // namespace metile

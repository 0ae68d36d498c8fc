// activity: makes the lane activity of docs/semantics.md ("Masked-off lanes are inactive") explicit,
// so that no backend implements a rule of its own. Needs: verified Tile IR. Guarantees: the same
// program in which every value is fully active, with
//   - load: the mask also covers lanes whose pointer (or mask) is inactive: they touch no memory;
//   - atomics: masked like a store; the result is inactive where the mask is false;
//   - store: the mask is the conjunction of the mask and the activity of pointer, value, mask and
//     the enclosing region (a per-thread loop's lane activity);
//   - reductions: inactive lanes replaced by the identity (0, -inf/min, +inf/max), so all-inactive
//     input gives the identity; dot: inactive lanes of a and b replaced by 0;
//   - scans (cumsum, cumprod): inactive lanes count as the identity (0, 1) and stay inactive in
//     the result; trans moves activity with the elements;
//   - device_print: prints only active lanes (each value gets a bool mask operand, masked = 1);
//   - loops: a carried value keeps its previous value in lanes where the yielded one is inactive;
//     a carried value whose initial value has inactive lanes carries its activity as an extra bool
//     value (active once any iteration yields an active lane there).
// Activity is tracked per value as a bool value of the value's shape, or "none" (all active), and
// propagates: element-wise results (casts, pointer offsets, aranges, broadcasts, reshapes, simd
// shuffles) are inactive where any operand is; `load` without `other` is inactive where masked off;
// `load` with `other` is active there; `where(c, a, b)` takes c's activity and the selected
// operand's. Values produced by whole-tile ops (reductions, tile_load, dot's a/b side) are active.
// A program with no masked load changes not at all.
#include <span>

#include "ir/reduction.h"
#include "passes/tile/tile_emit.h"
#include "support/error.h"

namespace metile {

namespace {

class Activity {
 public:
  explicit Activity(Program& p) : p_(p), act_(p.values.size(), kNoValue) {}

  void run() { block(p_.body, kNoValue); }

 private:
  // ---- building ops -------------------------------------------------------------------------
  // Types are taken by value: new_value() may move the table an argument points into.
  ValueId emit(OpKind k, std::vector<ValueId> operands, Type t, std::vector<Attr> attrs = {}) {
    return append_op(p_, *out_, k, std::move(operands), t, loc_, std::move(attrs));
  }
  ValueId constant(DType d, AttrValue v) {
    return emit(OpKind::CONST, {}, Type::scalar(d), {Attr{"value", std::move(v)}});
  }
  ValueId truth() { return constant(DType::boolean, int64_t{1}); }
  // `a` (a bool scalar or tile) spread over `shape`.
  ValueId shaped(ValueId a, Shape shape) {
    const Type t = p_.type(a);
    if (t.shape == shape) return a;
    const bool same_count =
        t.is_tile() && t.shape.rank != shape.rank && t.shape.numel() == shape.numel();
    return emit(same_count ? OpKind::RESHAPE : OpKind::BROADCAST, {a},
                Type::tile(DType::boolean, shape));
  }
  // Conjunction; either side may be none (all active).
  ValueId both(ValueId a, ValueId b) {
    if (a == kNoValue) return b;
    if (b == kNoValue) return a;
    const Shape s = p_.type(a).is_tile() ? p_.type(a).shape : p_.type(b).shape;
    return emit(OpKind::BITAND, {a, b}, Type::tile(DType::boolean, s));
  }
  ValueId either(ValueId a, ValueId b) {
    if (a == kNoValue || b == kNoValue) return kNoValue;
    const Shape s = p_.type(a).is_tile() ? p_.type(a).shape : p_.type(b).shape;
    return emit(OpKind::BITOR, {a, b}, Type::tile(DType::boolean, s));
  }
  // select(active, v, fill): the value with its inactive lanes replaced.
  ValueId fill(ValueId v, ValueId active, ValueId fill_value) {
    if (active == kNoValue) return v;
    return emit(OpKind::SELECT, {active, v, fill_value}, p_.type(v));
  }
  // The fill that leaves a reduction unchanged (a dot sums its products, so it fills with 0).
  ValueId identity(Reduction reduce, DType d) {
    return is_float(d) ? constant(d, float_identity(reduce)) : constant(d, int_identity(reduce, d));
  }

  ValueId act(ValueId v) const { return v < act_.size() ? act_[v] : kNoValue; }
  void set_act(ValueId v, ValueId a) {
    if (act_.size() < p_.values.size()) act_.resize(p_.values.size(), kNoValue);
    act_[v] = a;
  }
  // The activity of operand `v` as seen by a result of `shape`.
  ValueId act_as(ValueId v, Shape shape) {
    ValueId a = act(v);
    return a == kNoValue ? a : shaped(a, shape);
  }

  // ---- rewriting ----------------------------------------------------------------------------
  // Rewrites `b`'s ops in place; the first `keep` ops are already explicit.
  void block(Block& b, ValueId region_act, size_t keep = 0) {
    std::vector<Op> ops = std::move(b.ops);
    b.ops.assign(std::make_move_iterator(ops.begin()),
                 std::make_move_iterator(ops.begin() + static_cast<std::ptrdiff_t>(keep)));
    for (Op& op : std::span(ops).subspan(keep)) {
      std::vector<Op>* saved = out_;
      out_ = &b.ops;
      loc_ = op.loc;
      rewrite(op, region_act);
      out_ = saved;
    }
  }

  // The enclosing per-thread loops' lane activity as seen by an access or yield of `shape`:
  // lane-shaped values are masked per lane; other side effects run whenever the loop body runs.
  ValueId region_for(ValueId region_act, const Shape& shape) {
    if (region_act == kNoValue) return kNoValue;
    const Shape rs = p_.type(region_act).shape;
    if (rs == shape) return region_act;
    return rs.rank == 0 ? shaped(region_act, shape) : kNoValue;
  }

  void rewrite(Op& op, ValueId region_act);
  size_t make_uniform(Op& op, ValueId& region_act);
  void elementwise(Op& op);
  void load(Op& op, ValueId region_act);
  void store(Op& op, ValueId region_act);
  void atomic(Op& op, ValueId region_act);
  void loop(Op& op, ValueId region_act);
  void branch(Op& op, ValueId region_act);
  void while_loop(Op& op, ValueId region_act);
  /** Rewrites the yield ending `b` with `f(yield operands)`, emitting into `b`. */
  template <typename F>
  void at_yield(Block& b, F&& f) {
    Op yield = std::move(b.ops.back());
    b.ops.pop_back();
    std::vector<Op>* saved = out_;
    out_ = &b.ops;
    loc_ = yield.loc;
    f(yield.operands);
    b.ops.push_back(std::move(yield));
    out_ = saved;
  }

  Program& p_;
  std::vector<ValueId> act_;  // by ValueId
  std::vector<Op>* out_ = nullptr;  // where the op being rewritten and its helpers go
  Loc loc_;
};

void Activity::elementwise(Op& op) {
  const Shape s = p_.type(op.result()).shape;
  ValueId a = kNoValue;
  for (ValueId v : op.operands) a = both(a, act_as(v, s));
  set_act(op.result(), a);
  out_->push_back(std::move(op));
}

void Activity::load(Op& op, ValueId region_act) {
  const Shape s = p_.type(op.result()).shape;
  const bool has_mask = op.operands.size() > 1, has_other = op.operands.size() > 2;
  ValueId mask = has_mask ? both(op.operands[1], act_as(op.operands[1], s)) : kNoValue;
  mask = both(mask, act_as(op.operands[0], s));
  mask = both(mask, region_for(region_act, s));
  if (mask != kNoValue) {
    if (has_mask)
      op.operands[1] = mask;
    else
      op.operands.push_back(mask);
  }
  ValueId result_act = mask;
  if (has_other) {
    // Masked-off lanes take `other` and its activity.
    ValueId other_act = act_as(op.operands[2], s);
    result_act = other_act == kNoValue ? kNoValue
                                       : emit(OpKind::SELECT, {mask, truth(), other_act},
                                              Type::tile(DType::boolean, s));
  }
  set_act(op.result(), result_act);
  out_->push_back(std::move(op));
}

// An atomic writes like a store and gives old values like a load without `other`: its mask
// covers every operand's activity and the region's, and its result is inactive where masked.
void Activity::atomic(Op& op, ValueId region_act) {
  const Shape s = p_.type(op.operands[0]).shape;
  const size_t mask_i = op.kind == OpKind::ATOMIC_CAS ? 3 : 2;
  const bool has_mask = op.operands.size() > mask_i;
  ValueId mask = has_mask ? both(op.operands[mask_i], act_as(op.operands[mask_i], s)) : kNoValue;
  for (size_t i = 0; i < mask_i; ++i) mask = both(mask, act_as(op.operands[i], s));
  mask = both(mask, region_for(region_act, s));
  if (mask != kNoValue) {
    if (has_mask)
      op.operands[mask_i] = mask;
    else
      op.operands.push_back(mask);
  }
  set_act(op.result(), mask);
  out_->push_back(std::move(op));
}

void Activity::store(Op& op, ValueId region_act) {
  const Shape s = p_.type(op.operands[0]).shape;
  const bool has_mask = op.operands.size() > 2;
  ValueId mask = has_mask ? both(op.operands[2], act_as(op.operands[2], s)) : kNoValue;
  mask = both(mask, act_as(op.operands[0], s));
  mask = both(mask, act_as(op.operands[1], s));
  mask = both(mask, region_for(region_act, s));
  if (mask != kNoValue) {
    if (has_mask)
      op.operands[2] = mask;
    else
      op.operands.push_back(mask);
  }
  out_->push_back(std::move(op));
}

// A loop with per-thread bounds becomes a uniform loop over j in [0, max trip count) whose body
// first computes the lanes' induction variable start + j*step and their activity j < trip; lanes
// past their own end are inactive (docs/semantics.md, "Loops"). A lane whose step is 0 runs no iteration.
// Returns the number of ops put at the front of the body; `region_act` becomes the body's.
size_t Activity::make_uniform(Op& op, ValueId& region_act) {
  const ValueId start = op.operands[0], end = op.operands[1], step = op.operands[2];
  const Type t = p_.type(start);
  const Type lanes_bool = Type::tile(DType::boolean, t.shape);
  const ValueId zero = constant(t.dtype, int64_t{0}), one = constant(t.dtype, int64_t{1});
  const ValueId moving = emit(OpKind::NE, {step, zero}, lanes_bool);
  const ValueId safe_step = emit(OpKind::SELECT, {moving, step, one}, t);
  // trip = ceil((end - start) / step) = -floor((start - end) / step), at least 0.
  const ValueId q = emit(OpKind::FLOORDIV, {emit(OpKind::SUB, {start, end}, t), safe_step}, t);
  const ValueId trips = emit(OpKind::MAXIMUM, {emit(OpKind::NEG, {q}, t), zero}, t);
  const ValueId trip = emit(OpKind::SELECT, {moving, trips, zero}, t);
  const ValueId max_trip = emit(OpKind::REDUCE_MAX, {trip}, Type::scalar(t.dtype),
                                {Attr{"axis", int64_t{-1}}});
  op.operands[0] = zero;
  op.operands[1] = max_trip;
  op.operands[2] = one;

  Block& body = op.body();
  const ValueId lane_iv = body.args[0];
  const ValueId j = p_.new_value(Type::scalar(t.dtype));
  body.args[0] = j;
  std::vector<Op> prefix;
  std::vector<Op>* saved = out_;
  out_ = &prefix;
  const ValueId jb = emit(OpKind::BROADCAST, {j}, t);
  const ValueId offset = emit(OpKind::MUL, {jb, step}, t);
  Op iv;
  iv.kind = OpKind::ADD;
  iv.operands = {start, offset};
  iv.results = {lane_iv};
  iv.loc = loc_;
  prefix.push_back(std::move(iv));
  ValueId lane_act = emit(OpKind::LT, {jb, trip}, lanes_bool);
  set_act(lane_iv, lane_act);
  const ValueId outer = region_for(region_act, t.shape);
  if (outer != kNoValue) lane_act = both(outer, lane_act);
  out_ = saved;
  const size_t n = prefix.size();
  body.ops.insert(body.ops.begin(), std::make_move_iterator(prefix.begin()),
                  std::make_move_iterator(prefix.end()));
  region_act = lane_act;
  return n;
}

void Activity::loop(Op& op, ValueId region_act) {
  const size_t keep = p_.type(op.operands[0]).is_tile() ? make_uniform(op, region_act) : 0;
  Block& body = op.body();
  const size_t n = op.operands.size() - 3;
  // Carried values whose initial value has inactive lanes carry their activity along.
  std::vector<size_t> tracked;
  for (size_t i = 0; i < n; ++i) {
    const ValueId init = op.operands[3 + i];
    if (act(init) == kNoValue) continue;
    tracked.push_back(i);
    op.operands.push_back(act_as(init, p_.type(init).shape));
  }
  for (size_t t = 0; t < tracked.size(); ++t) {
    ValueId arg = p_.new_value(Type(p_.type(op.operands[3 + n + t])));
    body.args.push_back(arg);
    set_act(body.args[1 + tracked[t]], arg);
  }
  block(body, region_act, keep);
  // The yield is the last op of the body: keep the previous value where the new one is inactive.
  Op yield = std::move(body.ops.back());
  body.ops.pop_back();
  std::vector<Op>* saved = out_;
  out_ = &body.ops;
  loc_ = yield.loc;
  const std::vector<ValueId> yield_values = yield.operands;
  for (size_t i = 0; i < n; ++i) {
    const ValueId y = yield.operands[i], prev = body.args[1 + i];
    const Shape s = p_.type(y).shape;
    ValueId ya = act_as(y, s);
    ya = both(ya, region_for(region_act, s));
    yield.operands[i] = fill(y, ya, prev);
  }
  for (size_t t = 0; t < tracked.size(); ++t) {
    const size_t i = tracked[t];
    const ValueId prev_act = body.args[1 + n + t];
    const Shape s = p_.type(prev_act).shape;
    ValueId next = either(prev_act, act_as(yield_values[i], s));
    yield.operands.push_back(next == kNoValue ? shaped(truth(), s) : next);
  }
  body.ops.push_back(std::move(yield));
  out_ = saved;
  loc_ = op.loc;
  for (size_t t = 0; t < tracked.size(); ++t) {
    ValueId r = p_.new_value(Type(p_.type(body.args[1 + n + t])));
    op.results.push_back(r);
    set_act(op.results[tracked[t]], r);
  }
  out_->push_back(std::move(op));
}

// An if's result has the activity of the value its branch yielded: a result whose yield has
// inactive lanes in either branch gets a bool result beside it carrying that activity.
void Activity::branch(Op& op, ValueId region_act) {
  for (Block& b : op.regions) block(b, region_act);
  const size_t n = op.results.size();
  std::vector<size_t> tracked;
  for (size_t i = 0; i < n; ++i)
    if (act(op.regions[0].ops.back().operands[i]) != kNoValue ||
        act(op.regions[1].ops.back().operands[i]) != kNoValue)
      tracked.push_back(i);
  for (Block& b : op.regions)
    at_yield(b, [&](std::vector<ValueId>& ys) {
      for (size_t i : tracked) {
        const Shape s = p_.type(ys[i]).shape;
        const ValueId a = act_as(ys[i], s);
        ys.push_back(a == kNoValue ? shaped(truth(), s) : a);
      }
    });
  loc_ = op.loc;
  for (size_t i : tracked) {
    ValueId r = p_.new_value(Type::tile(DType::boolean, p_.type(op.results[i]).shape));
    op.results.push_back(r);
    set_act(op.results[i], r);
  }
  out_->push_back(std::move(op));
}

// A while's carried values are whole: a lane that a yielded (or passed) value leaves inactive
// keeps the block argument's value, as a for loop keeps its previous value; an init's inactive
// lanes enter as 0 (docs/semantics.md, "Control flow").
void Activity::while_loop(Op& op, ValueId region_act) {
  for (ValueId& init : op.operands)
    if (act(init) != kNoValue) {
      const DType d = p_.type(init).dtype;
      init = fill(init, act(init), is_float(d) ? constant(d, 0.0) : constant(d, int64_t{0}));
    }
  for (size_t r = 0; r < 2; ++r) {
    Block& b = op.regions[r];
    block(b, region_act);
    at_yield(b, [&](std::vector<ValueId>& ys) {
      for (size_t i = r == 0 ? 1 : 0, k = 0; i < ys.size(); ++i, ++k)
        ys[i] = fill(ys[i], act(ys[i]) == kNoValue ? kNoValue : act_as(ys[i], p_.type(ys[i]).shape),
                     b.args[k]);
    });
  }
  loc_ = op.loc;
  out_->push_back(std::move(op));
}

void Activity::rewrite(Op& op, ValueId region_act) {
  switch (op.kind) {
    case OpKind::LOAD:
      load(op, region_act);
      return;
    case OpKind::STORE:
      store(op, region_act);
      return;
    case OpKind::ATOMIC_ADD:
    case OpKind::ATOMIC_MAX:
    case OpKind::ATOMIC_MIN:
    case OpKind::ATOMIC_XCHG:
    case OpKind::ATOMIC_CAS:
      atomic(op, region_act);
      return;
    case OpKind::FOR:
      loop(op, region_act);
      return;
    case OpKind::IF:
      branch(op, region_act);
      return;
    case OpKind::WHILE:
      while_loop(op, region_act);
      return;
    case OpKind::SIMDGROUP_ROLE:
      block(op.body(), region_act);
      break;
    case OpKind::REDUCE_SUM:
    case OpKind::REDUCE_MAX:
    case OpKind::REDUCE_MIN: {
      const ValueId x = op.operands[0];
      if (act(x) != kNoValue)
        op.operands[0] = fill(x, act(x), identity(*reduction_of(op.kind), p_.type(x).dtype));
      break;
    }
    case OpKind::CUMSUM:
    case OpKind::CUMPROD: {
      const ValueId x = op.operands[0], a = act(x);
      if (a != kNoValue) {
        const DType d = p_.type(x).dtype;
        const bool sum = op.kind == OpKind::CUMSUM;
        const ValueId id = is_float(d) ? constant(d, sum ? 0.0 : 1.0) : constant(d, int64_t{sum ? 0 : 1});
        op.operands[0] = fill(x, a, id);
      }
      set_act(op.result(), a);
      break;
    }
    case OpKind::TRANS: {
      if (ValueId a = act(op.operands[0]); a != kNoValue)
        set_act(op.result(), emit(OpKind::TRANS, {a}, Type(p_.type(op.result())).with_dtype(DType::boolean)));
      break;
    }
    case OpKind::DEVICE_PRINT: {
      const size_t n = op.operands.size();
      std::vector<ValueId> masks(n);
      bool any = false;
      for (size_t i = 0; i < n; ++i) {
        const Shape s = p_.type(op.operands[i]).shape;
        masks[i] = both(act(op.operands[i]), region_for(region_act, s));
        any = any || masks[i] != kNoValue;
      }
      if (!any) break;
      for (size_t i = 0; i < n; ++i)
        op.operands.push_back(masks[i] != kNoValue ? masks[i]
                                                   : shaped(truth(), p_.type(op.operands[i]).shape));
      op.set_attr("masked", int64_t{1});
      break;
    }
    case OpKind::DOT: {
      for (size_t i = 0; i < 2; ++i) {
        const ValueId x = op.operands[i];
        if (act(x) != kNoValue)
          op.operands[i] = fill(x, act(x), identity(Reduction::sum, p_.type(x).dtype));
      }
      set_act(op.result(), act(op.operands[2]));
      break;
    }
    case OpKind::SELECT: {
      const Shape s = p_.type(op.result()).shape;
      const ValueId c = op.operands[0];
      ValueId ta = act_as(op.operands[1], s), tb = act_as(op.operands[2], s);
      ValueId chosen = kNoValue;
      if (ta != kNoValue || tb != kNoValue)
        chosen = emit(OpKind::SELECT,
                      {c, ta == kNoValue ? truth() : ta, tb == kNoValue ? truth() : tb},
                      Type::tile(DType::boolean, s));
      set_act(op.result(), both(act_as(c, s), chosen));
      break;
    }
    case OpKind::TILE_STORE: {
      ValueId a = both(act(op.operands[4]), region_act);
      if (a != kNoValue)
        fail(METILE_ERROR_UNSUPPORTED, "activity", p_.where(op.loc),
             "tile_store of a value with inactive lanes (from a masked load, or inside a "
             "per-thread loop) is not supported; give the load an `other=` value");
      break;
    }
    default:
      if (is_elementwise(op.kind) || op.kind == OpKind::PTR_OFFSET || op.kind == OpKind::ARANGE ||
          op.kind == OpKind::BROADCAST || op.kind == OpKind::RESHAPE ||
          op.kind == OpKind::SIMD_SHUFFLE_XOR || op.kind == OpKind::SIMD_BROADCAST) {
        const Shape s = p_.type(op.result()).shape;
        ValueId a = kNoValue;
        if (op.kind == OpKind::BROADCAST || op.kind == OpKind::RESHAPE) {
          if (ValueId src = act(op.operands[0]); src != kNoValue)
            a = emit(op.kind, {src}, Type::tile(DType::boolean, s));
        } else if (op.kind == OpKind::SIMD_SHUFFLE_XOR || op.kind == OpKind::SIMD_BROADCAST) {
          if (ValueId src = act(op.operands[0]); src != kNoValue)
            a = emit(op.kind, {src, op.operands[1]}, p_.type(src));
        } else {
          elementwise(op);
          return;
        }
        set_act(op.result(), a);
      }
      break;  // whole-tile or effect ops: results are active
  }
  out_->push_back(std::move(op));
}

}  // namespace

void make_activity_explicit(Program& program, const TilePassContext&) { Activity(program).run(); }

}  // namespace metile

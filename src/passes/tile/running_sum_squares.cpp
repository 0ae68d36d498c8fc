// fuse_reductions' running-sum form of a mean pass then a centred sum of squares (the caller,
// fuse_reduction_loops.cpp, has found the square v' = select(c, v + (e - M)^2, v); see there).
// Needs: L1 carries T with yield select(c, T + e, T) (or T + e) from 0, on L2's e and c; the
// loop's step a positive constant; c a conjunction of comparisons iv + w < X (<=, or the mirror
// images > and >=) with w and X loop-invariant, so the iterations at which a lane takes its
// element are a prefix of the loop. Guarantees: L2's result per lane up to rounding, from T, one
// carried tile q and one carried scalar k.
//
// Youngs and Cramer's update (Chan, Golub and LeVeque, "Algorithms for computing the sample
// variance", 1983): with k elements taken before e and T their sum,
//   q' = q + (k e - T)^2 / (k (k + 1))     (0 for k = 0, where k e - T = 0;
//                                            computed as (k' e - T')^2 from L1's T' = T + e)
// is the sum of squares about the mean of the k + 1 elements: Welford's update with the running
// mean T / k, as stable, with T the sum L1 carries anyway. k is one scalar for the whole tile:
// by the prefix condition a lane that takes an element at iteration k took one at each of the k
// before. After the loop a lane's count n follows from the loop bounds (the iterations before its
// comparison fails) and, exactly in real arithmetic,
//   sum over the lane's elements of (e - M)^2 = q + (T - n M)^2 / n     (0 for n = 0).
// The counts are computed in i64 from the comparisons' i32 operands: the same as the loop's
// unless its iv + w wraps around i32, which no row of fewer than 2^31 elements does. For the
// usual mask iv + arange(w0, size) < X, size <= step, they are two scalars per row and a lane
// picks one (two_counts): per lane, an i64 quotient, conversion and IEEE division cost CUDA more
// than the loop does at one iteration (4096 columns, 256 threads: 3496 SASS instructions in the
// kernel, 2568 with two_counts, 2160 for the merged sum and sum of squares).
// Why: Welford's per-lane count and mean are two more tiles in registers through the loop
// (at 4096 columns, 256 threads: 114 registers a thread against 79 for the merged sum and sum of
// squares) and an IEEE division per element; this form carries what that merged layernorm does
// (79 registers at 4096 columns; at 1024 columns, 128 threads, 56 against 63 and 48).
#include "passes/tile/running_sum_squares.h"

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "passes/tile/tile_emit.h"

namespace metile {

namespace {

// One comparison of the condition: iv + w < x (<= when inclusive); w is none for iv itself.
struct Bound {
  ValueId w = kNoValue;
  ValueId x = kNoValue;
  bool inclusive = false;
};

class RunningSums {
 public:
  RunningSums(Program& p, const CentredMerge& in, const Block& body)
      : p_(p), in_(in), iv_(body.args[0]), body_args_(body.args.begin(), body.args.end()),
        outer_defs_(defining_ops(p.body)) {
    for (const Op& op : body.ops)
      for (ValueId r : op.results) body_defs_[r] = &op;
  }

  // L1's carried sum of e under cond from 0, and the condition's bounds; false when not there.
  bool analyse(const Op& fused) {
    const Op* step = outer(fused.operands[2]);

    if (step == nullptr || step->kind != OpKind::CONST || step->attr_num("value") <= 0)
      return false;
    step_ = step->attr_num("value");
    if (in_.cond != kNoValue && !bounds(in_.cond)) return false;
    const Block& b1 = in_.l1.body();
    const Op& y1 = b1.ops.back();
    for (size_t k = 0; k + 1 < b1.args.size(); ++k) {
      const ValueId s = b1.args[1 + k];
      if (p_.type(s) != in_.t || !is_zero(in_.l1.operands[3 + k])) continue;
      ValueId u = y1.operands[k], c = kNoValue;
      const Op* sel = local(u, OpKind::SELECT);
      if (sel != nullptr && sel->operands[2] == s) {
        c = sel->operands[0];
        u = sel->operands[1];
      }
      const Op* add = local(u, OpKind::ADD);
      if (add == nullptr || same_condition(c) != same_condition(in_.cond)) continue;
      if ((add->operands[0] == s && add->operands[1] == in_.e) ||
          (add->operands[1] == s && add->operands[0] == in_.e)) {
        sum_index_ = k;
        sum_next_ = add->results[0];
        return true;
      }
    }
    return false;
  }

  ValueId emit(Op& fused, Block& body, Op& yield, std::vector<Op>& before, std::vector<Op>& after) {
    const Type t = in_.t, st = Type::scalar(t.dtype);
    auto op = [&](std::vector<Op>& out, OpKind k, std::vector<ValueId> operands, Type rt) {
      return append_op(p_, out, k, std::move(operands), rt, in_.loc);
    };
    auto real = [&](std::vector<Op>& out, double x) {
      return append_op(p_, out, OpKind::CONST, {}, st, in_.loc, {Attr{"value", x}});
    };
    const ValueId q = p_.new_value(t), k = p_.new_value(st);
    const ValueId q_out = p_.new_value(t), k_out = p_.new_value(st);

    // After the loop, first (the bounds' values are the body's, read before it changes).
    ValueId per = kNoValue;
    if (const std::optional<Counts> two = in_.two_counts ? two_counts(fused, after) : std::nullopt) {
      const ValueId spread = op(after, OpKind::SUB,
                                {fused.results[sum_index_], op(after, OpKind::MUL, {two->n, in_.m}, t)}, t);
      per = op(after, OpKind::MUL, {op(after, OpKind::MUL, {spread, spread}, t), two->r}, t);
    } else {
      const ValueId n = lane_counts(fused, after);
      const Type nt = p_.type(n).with_dtype(t.dtype);
      const ValueId nf = op(after, OpKind::CAST, {n}, nt);
      const ValueId spread = op(after, OpKind::SUB,
                                {fused.results[sum_index_], op(after, OpKind::MUL, {nf, in_.m}, wider(nt, in_.m))}, t);
      per = op(after, OpKind::DIV, {op(after, OpKind::MUL, {spread, spread}, t),
                                    op(after, OpKind::MAXIMUM, {nf, real(after, 1.0)}, nt)}, t);
    }
    const ValueId total = op(after, OpKind::ADD, {q_out, per}, t);

    // The body: q' = q + (k' e - T')^2 * (1 / max(k k', 1)) with k' = k + 1 and T' = T + e,
    // L1's own update (k' e - T' = k e - T): T is dead once T' is computed, so a lane holds one
    // sum at a time.
    const ValueId cond = same_condition(in_.cond);  // before body.ops grows (body_defs_)
    // The scalars right after the loads, before any element-wise op: on GPUs a run of
    // element-wise ops is one loop over a thread's elements, and a division between two such
    // runs (a call on CUDA) would keep both runs' values live across it; in front of the loads
    // k' and r would be live while the loads are in flight (CUDA at 1024 columns, 128 threads:
    // 48 registers in front of the loads, 44 after, against 41 for the merged sum of squares).
    size_t at = 0;
    for (size_t i = 0; i < body.ops.size(); ++i)
      if (body.ops[i].kind == OpKind::LOAD || body.ops[i].kind == OpKind::TILE_LOAD) at = i + 1;
    std::vector<Op> scalars;
    const ValueId one = real(scalars, 1.0);
    const ValueId k_next = op(scalars, OpKind::ADD, {k, one}, st);
    const ValueId r = op(scalars, OpKind::DIV,
                         {one, op(scalars, OpKind::MAXIMUM, {op(scalars, OpKind::MUL, {k, k_next}, st), one}, st)}, st);
    body.ops.insert(body.ops.begin() + static_cast<std::ptrdiff_t>(at), scalars.begin(), scalars.end());
    std::vector<Op>& ops = body.ops;
    const ValueId u = op(ops, OpKind::SUB, {op(ops, OpKind::MUL, {k_next, in_.e}, t), sum_next_}, t);
    ValueId q_next = op(ops, OpKind::ADD, {q, op(ops, OpKind::MUL, {op(ops, OpKind::MUL, {u, u}, t), r}, t)}, t);
    if (in_.cond != kNoValue) q_next = op(ops, OpKind::SELECT, {cond, q_next, q}, t);

    const ValueId zero = real(before, 0.0);
    const ValueId zeros = t.is_tile() ? op(before, OpKind::BROADCAST, {zero}, t) : zero;
    fused.operands.insert(fused.operands.end(), {zeros, zero});
    body.args.insert(body.args.end(), {q, k});
    yield.operands.insert(yield.operands.end(), {q_next, k_next});
    fused.results.insert(fused.results.end(), {q_out, k_out});
    return total;
  }

 private:
  const Op* local(ValueId v, OpKind k) const {
    auto it = body_defs_.find(v);
    return it != body_defs_.end() && it->second->kind == k ? it->second : nullptr;
  }
  const Op* outer(ValueId v) const {
    auto it = outer_defs_.find(v);
    return it == outer_defs_.end() ? nullptr : it->second;
  }
  const Op* defining(ValueId v) const {
    auto it = body_defs_.find(v);
    return it != body_defs_.end() ? it->second : outer(v);
  }
  // `c`, or the condition it repeats: the activity pass states a lane's activity in both
  // operands of an element-wise op as bitand(c, c).
  ValueId same_condition(ValueId c) const {
    for (const Op* d = local(c, OpKind::BITAND); d != nullptr && d->operands[0] == d->operands[1];
         d = local(c, OpKind::BITAND))
      c = d->operands[0];
    return c;
  }
  // 0 as a constant, possibly broadcast or cast.
  bool is_zero(ValueId v) const {
    for (int depth = 0; depth < 4; ++depth) {
      const Op* d = outer(v);
      if (d == nullptr) return false;
      if (d->kind == OpKind::CONST) return d->attr_num("value") == 0.0;
      if (d->kind != OpKind::BROADCAST && d->kind != OpKind::CAST) return false;
      v = d->operands[0];
    }
    return false;
  }
  // Computed without the body's arguments (the loop index and carried values).
  bool invariant(ValueId v) {
    if (body_args_.count(v)) return false;
    auto it = body_defs_.find(v);
    if (it == body_defs_.end()) return true;
    auto seen = invariant_.find(v);
    if (seen != invariant_.end()) return seen->second;
    const Op& d = *it->second;
    bool ok = has_trait(d.kind, kPure) && d.regions.empty();
    for (ValueId o : d.operands) ok = ok && invariant(o);
    return invariant_[v] = ok;
  }
  // The element's shape, or a scalar: the counts are computed in it.
  bool fits(ValueId v) const {
    const Type vt = p_.type(v);
    return vt.is_scalar() || vt.shape == in_.t.shape;
  }
  // cond as a conjunction of bounds on iv + w (into bounds_).
  bool bounds(ValueId cond) {
    const Op* d = local(cond, OpKind::BITAND);
    if (d != nullptr && d->operands[0] == d->operands[1]) return bounds(d->operands[0]);  // activity's c & c
    if (d != nullptr) return bounds(d->operands[0]) && bounds(d->operands[1]);
    auto it = body_defs_.find(cond);
    if (it == body_defs_.end()) return false;
    const Op& c = *it->second;
    const bool mirrored = c.kind == OpKind::GT || c.kind == OpKind::GE;
    if (c.kind != OpKind::LT && c.kind != OpKind::LE && !mirrored) return false;
    Bound b;
    b.inclusive = c.kind == OpKind::LE || c.kind == OpKind::GE;
    const ValueId index = c.operands[mirrored ? 1 : 0];
    b.x = c.operands[mirrored ? 0 : 1];
    if (!is_int(p_.type(index).dtype) || !invariant(b.x) || !fits(b.x)) return false;
    if (index != iv_) {
      const Op* add = local(index, OpKind::ADD);
      if (add == nullptr) return false;
      b.w = add->operands[0] == iv_ ? add->operands[1] : add->operands[1] == iv_ ? add->operands[0] : kNoValue;
      if (b.w == kNoValue || !invariant(b.w) || !fits(b.w)) return false;
    }
    bounds_.push_back(b);
    return true;
  }
  // The body's op computing an invariant `v`, copied in front of its use after the loop.
  ValueId hoisted(ValueId v, std::vector<Op>& after) {
    auto it = body_defs_.find(v);
    if (it == body_defs_.end()) return v;
    auto done = copies_.find(v);
    if (done != copies_.end()) return done->second;
    Op copy = *it->second;
    for (ValueId& o : copy.operands) o = hoisted(o, after);
    const Type vt = p_.type(v);
    copy.results = {p_.new_value(vt)};
    after.push_back(std::move(copy));
    return copies_[v] = after.back().results[0];
  }
  // i64 arithmetic after the loop: v widened, a op b (a tile if either is), the constant x.
  ValueId wide(ValueId v, std::vector<Op>& after) {
    const Type vt = p_.type(v);
    return vt.dtype == DType::i64 ? v : append_op(p_, after, OpKind::CAST, {v}, vt.with_dtype(DType::i64), in_.loc);
  }
  ValueId arith(OpKind k, ValueId a, ValueId b, std::vector<Op>& after) {
    const Type ta = p_.type(a);
    return append_op(p_, after, k, {a, b}, ta.is_tile() ? ta : p_.type(b), in_.loc);
  }
  ValueId integer(int64_t x, std::vector<Op>& after) {
    return append_op(p_, after, OpKind::CONST, {}, Type::scalar(DType::i64), in_.loc, {Attr{"value", x}});
  }
  // The loop's start, step and trip count in i64, and `before_limit(a)`: the iterations i with
  // i * step < a, i < ceil(a / step) clamped below at 0 (a truncated quotient of a negative
  // a + step - 1 is <= 0, which the clamp makes 0; the trip count does not bound it).
  struct Iterations {
    ValueId start, step, zero, step_less_one, trips;
  };
  Iterations iterations(const Op& fused, std::vector<Op>& after) {
    Iterations it;
    it.start = wide(fused.operands[0], after);
    it.step = wide(fused.operands[2], after);
    it.zero = integer(0, after);
    it.step_less_one = arith(OpKind::SUB, it.step, integer(1, after), after);
    it.trips = before_limit(it, arith(OpKind::SUB, wide(fused.operands[1], after), it.start, after), after);
    return it;
  }
  ValueId before_limit(const Iterations& it, ValueId a, std::vector<Op>& after) {
    return arith(OpKind::MAXIMUM,
                 arith(OpKind::DIV, arith(OpKind::ADD, a, it.step_less_one, after), it.step, after), it.zero, after);
  }
  // Per lane, the iterations before its first false comparison (i64): the elements it took.
  ValueId lane_counts(const Op& fused, std::vector<Op>& after) {
    const Iterations it = iterations(fused, after);
    ValueId n = it.trips;
    for (const Bound& b : bounds_) {
      // iv = start + i * step: iv + w < x  <=>  i * step < x - start - w (+ 1 when <=).
      ValueId a = arith(OpKind::SUB, wide(hoisted(b.x, after), after), it.start, after);
      if (b.w != kNoValue) a = arith(OpKind::SUB, a, wide(hoisted(b.w, after), after), after);
      if (b.inclusive) a = arith(OpKind::ADD, a, integer(1, after), after);
      n = arith(OpKind::MINIMUM, before_limit(it, a, after), n, after);
    }
    return n;
  }
  // The lanes' counts n (a float tile) and 1 / max(n, 1), when they are one of two scalars: one
  // bound iv + w < X with X one value for all lanes and w = arange(w0, size), size <= step. The
  // lanes' a - w (a = X - start) then lie in (a - w0 - step, a - w0], so their counts are c and
  // c - 1 with c = ceil((a - w0) / step): c where a - w > (c - 1) step, i.e. w < a - (c - 1) step
  // (clamped to [0, trips] as lane_counts does; both 0 when c = 0). Per element a comparison and
  // two selects instead of lane_counts' i64 quotient, conversion and an IEEE division (on CUDA,
  // at 4096 columns and one iteration, most of what the running sums cost beyond the merged sum
  // and sum of squares).
  struct Counts {
    ValueId n, r;
  };
  std::optional<Counts> two_counts(const Op& fused, std::vector<Op>& after) {
    if (bounds_.size() != 1) return std::nullopt;
    const Bound& b = bounds_[0];
    if (b.w == kNoValue || !p_.type(b.x).is_scalar()) return std::nullopt;
    const Op* w = defining(b.w);
    const Op* w0 = w != nullptr && w->kind == OpKind::ARANGE ? defining(w->operands[0]) : nullptr;
    if (w0 == nullptr || w0->kind != OpKind::CONST) return std::nullopt;
    const int64_t first = w0->attr_int("value"), size = w->attr_int("size");
    if (static_cast<double>(size) > step_ || first + size > std::numeric_limits<int32_t>::max())
      return std::nullopt;

    const Iterations it = iterations(fused, after);
    ValueId a = arith(OpKind::SUB, wide(hoisted(b.x, after), after), it.start, after);
    if (b.inclusive) a = arith(OpKind::ADD, a, integer(1, after), after);
    const ValueId c = before_limit(it, arith(OpKind::SUB, a, integer(first, after), after), after);
    const ValueId c_less_one = arith(OpKind::SUB, c, integer(1, after), after);
    const ValueId high = arith(OpKind::MINIMUM, c, it.trips, after);
    const ValueId low =
        arith(OpKind::MINIMUM, arith(OpKind::MAXIMUM, c_less_one, it.zero, after), it.trips, after);
    // The threshold in [first, first + size] (where every lane compares alike), so in i32.
    // One op per statement: the order of a call's arguments is the compiler's (the text tests
    // pin the order g++ gave).
    const ValueId top = integer(first + size, after);
    const ValueId bottom = integer(first, after);
    const ValueId lowest = arith(OpKind::SUB, a, arith(OpKind::MUL, c_less_one, it.step, after), after);
    const ValueId threshold =
        arith(OpKind::MINIMUM, arith(OpKind::MAXIMUM, lowest, bottom, after), top, after);
    const Type wt = p_.type(b.w);
    const ValueId w_after = hoisted(b.w, after);
    const ValueId fewer = append_op(
        p_, after, OpKind::GE,
        {w_after, append_op(p_, after, OpKind::CAST, {threshold}, Type::scalar(wt.dtype), in_.loc)},
        wt.with_dtype(DType::boolean), in_.loc);

    const Type st = Type::scalar(in_.t.dtype);
    auto op = [&](OpKind k, std::vector<ValueId> operands, Type rt) {
      return append_op(p_, after, k, std::move(operands), rt, in_.loc);
    };
    const ValueId one = append_op(p_, after, OpKind::CONST, {}, st, in_.loc, {Attr{"value", 1.0}});
    const ValueId n_high = op(OpKind::CAST, {high}, st), n_low = op(OpKind::CAST, {low}, st);
    const ValueId r_high = op(OpKind::DIV, {one, op(OpKind::MAXIMUM, {n_high, one}, st)}, st);
    const ValueId r_low = op(OpKind::DIV, {one, op(OpKind::MAXIMUM, {n_low, one}, st)}, st);
    // r_low exactly (r_high <= r_low <= 2 r_high: the difference is exact, Sterbenz), as a sum:
    // NVVM turns select(c, 1 / x, 1 / y) into 1 / select(c, x, y), a reciprocal per element.
    const ValueId r_low_sum = op(OpKind::ADD, {op(OpKind::SUB, {r_low, r_high}, st), r_high}, st);
    const Type lanes = wt.with_dtype(in_.t.dtype);
    return Counts{op(OpKind::SELECT, {fewer, n_low, n_high}, lanes),
                  op(OpKind::SELECT, {fewer, r_low_sum, r_high}, lanes)};
  }
  Type wider(const Type& a, ValueId b) const { return a.is_tile() ? a : p_.type(b); }

  Program& p_;
  const CentredMerge& in_;
  ValueId iv_;
  std::set<ValueId> body_args_;
  std::unordered_map<ValueId, const Op*> body_defs_, outer_defs_;
  std::unordered_map<ValueId, bool> invariant_;
  std::unordered_map<ValueId, ValueId> copies_;
  std::vector<Bound> bounds_;
  double step_ = 0;  // the loop's step, a positive constant
  size_t sum_index_ = 0;
  ValueId sum_next_ = kNoValue;  // T + e in L1's update
};

}  // namespace

ValueId merge_as_running_sums(Program& p, const CentredMerge& in, Op& fused, Block& body,
                              Op& yield, std::vector<Op>& before, std::vector<Op>& after) {
  RunningSums rs(p, in, body);
  if (!rs.analyse(fused)) return kNoValue;
  return rs.emit(fused, body, yield, before, after);
}

}  // namespace metile

// fuse_reductions: merges two consecutive tile_range passes over the same iteration space into
// one pass when the compiler can show, on the IR, that the merged pass computes the same values.
// Needs: activity-explicit Tile IR (the "activity" pass: every value is fully active and inactive
// lanes are explicit selects). Guarantees: the same stores in the same order; every value used
// after the loops is the same up to floating-point rounding of the argued kind below.
//
// Two loops L1, L2 qualify when they have the same start, end and step, neither body has a side
// effect (loads only, so reading an address in either order gives the same value), and the ops
// between them are pure. Then, with D the values computed from L1's results between the loops:
//   - L2 uses nothing in D: the loops are independent and run as one (sum and sum of squares, or
//     any set of reductions over the same rows).
//   - L2 uses D only through the rescalable form of an online softmax, checked op by op:
//       L1 carries a with yield  select(c, maximum(a, e), a)  (or maximum(a, e)), e and c free of
//          carried values: a running lane-wise max;
//       M = reduce_max(L1's a) is a scalar between the loops (max is associative and commutative,
//          so the max of lane maxima is the max of all elements, whatever a's initial value);
//       L2 carries s with initial value 0 (the identity of +) and yield
//          select(c, s + E(e - M), s)  (or s + E(e - M)), E one of exp, exp2, with the same e and c
//          (the same ops on the same loads, found by value numbering the merged body);
//       nothing else in L2 depends on M, and s is used only there.
//     The merged pass keeps s relative to the running max m (the homomorphism
//     E(x - m') = E(x - m) * E(m - m')):  s' = select(c, s * E(m - r(m')) + E(e - r(m')), s)
//     with r(m) = (m == -inf ? 0 : m), and after the loop s * E(m - M) stands for L2's result.
//     The running max m is L1's own lane-wise a on GPUs (lanes never communicate), where
//     m' = max(m, e) makes one of the two exponentials E(0) = 1: s' = s * E(m - e) + 1 when e > m,
//     else s + E(e - r(m)), one exponential per element; on devices that
//     run whole tiles in order (TilePassContext::whole_tiles_in_order) it is one scalar carried
//     beside it, max(m, max of e over active lanes) from max(a's initial value), so each element
//     costs one exponential as in L2 and the rescale one per iteration; when M is all that reads
//     L1's a, the lane-wise max goes and M is the scalar (see drop_lane_max).
//     Numerics: every exponent is <= 0 as in the original (e <= m' and m <= m' lane-wise), the
//     rescale factor is exactly 1 when the max does not move, and r keeps lanes that saw only
//     -inf at 0 instead of NaN; a rescale from a max that is still -inf is E(-inf) = 0 (never
//     E(0 - m'), which overflows for m' far below 0); a lane's sum picks up at most one extra
//     rounding per max change.
//   - L2 uses D only through a centre M in a sum of squares about it, checked op by op:
//       L2 carries v with yield  select(c, v + d * d, v)  (or v + d * d), both factors
//          d = e - M  or  select(c', e - M, 0)  (the same e, M and c'), e, c, c' free of M and of
//          carried values; nothing else in L2 sees M, v or that chain; M any float of D (the
//          mean sum(x) / N is the usual one, but nothing here depends on what M is).
//     When L1's carried value is the plain sum of the same e under the same condition from 0 and
//     that condition only turns off as the loop goes on (iv + w < X), the merged pass carries
//     one more tile and a scalar count: Youngs and Cramer's update on L1's own sum
//     (running_sum_squares.cpp; METILE_GPU_OFF=running_sums keeps Welford's form, to compare;
//     METILE_GPU_OFF=two_counts a count per lane after the loop).
//     Otherwise it runs Welford's update per lane over the elements
//     it takes (c and c'):
//       n' = n + 1, a' = a + (e - a) / n', q' = q + (e - a) * (e - a')
//     from n = a = q = 0, and after the loop v0 + q + n * (a - M)^2 stands for L2's result
//     (sum over a lane's elements of (e - M)^2 = q + n * (a - M)^2, exact in real arithmetic for
//     any M). Numerics: q is a sum of non-negative terms about the running mean, so no
//     cancellation as in sum(x^2) - n * mean^2; one division per element.
// Anything else leaves the IR unchanged. CompileOptions::fuse_reductions = false switches the
// pass off (tile_pipeline.cpp).
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "passes/tile/running_sum_squares.h"
#include "passes/tile/tile_emit.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"

namespace metile {

namespace {

using ValueMap = std::unordered_map<ValueId, ValueId>;

ValueId mapped(const ValueMap& m, ValueId v) {
  auto it = m.find(v);
  return it == m.end() ? v : it->second;
}

bool effect_free(const Block& b) {
  bool ok = true;
  walk(b, [&](const Op& op) {
    ok = ok && (has_trait(op.kind, kPure) || op.kind == OpKind::LOAD || op.kind == OpKind::FOR ||
                op.kind == OpKind::YIELD);
  });
  return ok;
}

// Values a block uses that it does not define (its own args and results are defined in it).
std::set<ValueId> free_values(const Block& b) {
  std::set<ValueId> defined(b.args.begin(), b.args.end()), used;
  walk(b, [&](const Op& op) {
    for (ValueId r : op.results) defined.insert(r);
    for (const Block& r : op.regions) defined.insert(r.args.begin(), r.args.end());
    used.insert(op.operands.begin(), op.operands.end());
  });
  std::set<ValueId> out;
  for (ValueId v : used)
    if (!defined.count(v)) out.insert(v);
  return out;
}

// A key under which two ops compute the same value: kind, operands, attributes, result types.
struct OpKey {
  OpKind kind;
  std::vector<ValueId> operands;
  std::vector<std::pair<std::string, AttrValue>> attrs;
  std::vector<Type> types;
  bool operator<(const OpKey& o) const {
    if (kind != o.kind) return kind < o.kind;
    if (operands != o.operands) return operands < o.operands;
    if (attrs != o.attrs) return attrs < o.attrs;
    for (size_t i = 0; i < std::min(types.size(), o.types.size()); ++i)
      if (!(types[i] == o.types[i])) return types[i].str() < o.types[i].str();
    return types.size() < o.types.size();
  }
};

// The centred sum of squares found in L2: v' = select(c, v + d * d, v) (or v + d * d) with
// d = e - M or select(c_term, e - M, 0); e, c and c_term free of M, v and L2's carried values.
struct CentredSquares {
  size_t sum_index = 0;        // L2's carried v
  ValueId e = kNoValue;        // the element
  ValueId c = kNoValue;        // the yield's condition, or none
  ValueId c_term = kNoValue;   // the condition that zeroes d, or none
  std::set<ValueId> replaced;  // the chain from v's update down to M (by result)
};

class Fuser {
 public:
  Fuser(Program& p, bool whole_tiles, bool running_sums, bool two_counts)
      : p_(p), whole_tiles_(whole_tiles), running_sums_(running_sums), two_counts_(two_counts) {}

  void block(Block& b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      for (Block& r : b.ops[i].regions) block(r);
      if (b.ops[i].kind != OpKind::FOR) continue;
      // Retry at i after a merge: the merged loop may merge with the next one too.
      while (std::optional<size_t> j = next_loop(b, i)) {
        for (Block& r : b.ops[*j].regions) block(r);
        std::optional<size_t> merged = fuse(b, i, *j);
        if (!merged) break;
        i = *merged;
      }
    }
  }

 private:
  // The next loop after b.ops[i] when only pure, region-free ops lie between.
  static std::optional<size_t> next_loop(const Block& b, size_t i) {
    for (size_t j = i + 1; j < b.ops.size(); ++j) {
      const Op& op = b.ops[j];
      if (op.kind == OpKind::FOR) return j;
      if (!has_trait(op.kind, kPure) || !op.regions.empty()) return std::nullopt;
    }
    return std::nullopt;
  }

  void index_defs() {
    defs_ = defining_ops(p_.body);
  }
  const Op* def(ValueId v) const {
    auto it = defs_.find(v);
    return it == defs_.end() ? nullptr : it->second;
  }
  const Op* def_of_kind(ValueId v, OpKind k) const {
    const Op* d = def(v);
    return d != nullptr && d->kind == k ? d : nullptr;
  }
  bool same_scalar(ValueId a, ValueId b) const {
    if (a == b) return true;
    const Op *da = def_of_kind(a, OpKind::CONST), *db = def_of_kind(b, OpKind::CONST);
    return da != nullptr && db != nullptr && p_.type(a) == p_.type(b) &&
           da->attr_num("value") == db->attr_num("value");
  }
  // A constant (possibly broadcast or cast) with value `x`.
  bool is_constant(ValueId v, double x) const {
    for (int depth = 0; depth < 4; ++depth) {
      const Op* d = def(v);
      if (d == nullptr) return false;
      if (d->kind == OpKind::CONST) return d->attr_num("value") == x;
      if (d->kind != OpKind::BROADCAST && d->kind != OpKind::CAST) return false;
      v = d->operands[0];
    }
    return false;
  }

  // Merges b.ops[i] and b.ops[j] where the laws hold; returns the merged loop's index.
  std::optional<size_t> fuse(Block& b, size_t i, size_t j);
  // L2's carried sum of (e - m)^2, where m is the one value of D L2 uses (see the file comment).
  std::optional<CentredSquares> centred_squares(const Op& l2, ValueId m) const;
  // With the scalar running max the lane-wise one is only M's source: M becomes the scalar.
  void drop_lane_max(Op& fused, Block& body, Op& yield, std::vector<Op>& after, size_t k,
                     ValueId m, ValueId m_final);
  // Welford's form of the centred squares (see the file comment); the running-sum form
  // (running_sum_squares.cpp) is tried first.
  ValueId welford(Op& fused, Block& body, Op& yield, std::vector<Op>& before, std::vector<Op>& after,
                  ValueId e, ValueId c, ValueId c_term, ValueId m, const Type& t, const Loc& loc);

  Program& p_;
  bool whole_tiles_;
  bool running_sums_;  // the running-sum form of centred squares (METILE_GPU_OFF=running_sums)
  bool two_counts_;    // its counts after the loop as two scalars (METILE_GPU_OFF=two_counts)
  DefiningOps<Block> defs_;
};

// The online softmax pair found in L1 and L2 (see the file comment).
struct OnlinePair {
  size_t max_index;    // L1's carried a
  size_t sum_index;    // L2's carried s
  ValueId e1, c1;      // L1's element and condition (c1 = none without a select)
  ValueId e2, c2;      // L2's, before value numbering
  ValueId m;           // M = reduce_max(a's result)
  OpKind exp_kind;     // exp or exp2
  std::set<ValueId> replaced;  // L2 ops the merged body computes differently (by result)
};

// Body-local definitions of a loop body's top-level ops.
std::unordered_map<ValueId, const Op*> local_defs(const Block& body) {
  std::unordered_map<ValueId, const Op*> d;
  for (const Op& op : body.ops)
    for (ValueId r : op.results) d[r] = &op;
  return d;
}

// True when `v` depends on none of `vals` within `body` (top-level ops and their operands).
bool independent_of(ValueId v, const std::set<ValueId>& vals,
                    const std::unordered_map<ValueId, const Op*>& defs) {
  std::vector<ValueId> work{v};
  std::set<ValueId> seen;
  while (!work.empty()) {
    ValueId x = work.back();
    work.pop_back();
    if (x == kNoValue || !seen.insert(x).second) continue;
    if (vals.count(x)) return false;
    auto it = defs.find(x);
    if (it == defs.end()) continue;
    if (!it->second->regions.empty()) {
      for (ValueId f : free_values(it->second->regions[0]))
        if (vals.count(f)) return false;
    }
    for (ValueId o : it->second->operands) work.push_back(o);
  }
  return true;
}

// yield value `y` of carried `arg`: select(c, u, arg) or u. Returns (u, c).
std::pair<ValueId, ValueId> kept_update(ValueId y, ValueId arg,
                                        const std::unordered_map<ValueId, const Op*>& defs) {
  auto it = defs.find(y);
  if (it != defs.end() && it->second->kind == OpKind::SELECT && it->second->operands[2] == arg)
    return {it->second->operands[1], it->second->operands[0]};
  return {y, kNoValue};
}

// The other operand of a commutative binary op `op` whose one operand is `x`, or none.
ValueId other_operand(const Op* op, OpKind kind, ValueId x) {
  if (op == nullptr || op->kind != kind) return kNoValue;
  if (op->operands[0] == x) return op->operands[1];
  if (op->operands[1] == x) return op->operands[0];
  return kNoValue;
}

std::optional<CentredSquares> Fuser::centred_squares(const Op& l2, ValueId m) const {
  const Block& body = l2.body();
  const auto defs = local_defs(body);
  const Op& y = body.ops.back();
  const std::set<ValueId> carried(body.args.begin() + 1, body.args.end());
  auto local = [&](ValueId v, OpKind k) -> const Op* {
    auto it = defs.find(v);
    return it != defs.end() && it->second->kind == k ? it->second : nullptr;
  };
  // d = e - M or select(c', e - M, 0): (e, c'), the ops on the way added to `chain`.
  auto centred = [&](ValueId d, std::set<ValueId>& chain)
      -> std::optional<std::pair<ValueId, ValueId>> {
    ValueId cond = kNoValue;
    const Op* sel = local(d, OpKind::SELECT);
    if (sel != nullptr && is_constant(sel->operands[2], 0.0)) {
      chain.insert(d);
      cond = sel->operands[0];
      d = sel->operands[1];
    }
    const Op* sub = local(d, OpKind::SUB);
    if (sub == nullptr) return std::nullopt;
    const ValueId mb = sub->operands[1];
    if (mb != m) {
      const Op* bc = local(mb, OpKind::BROADCAST);
      if (bc == nullptr || bc->operands[0] != m) return std::nullopt;
      chain.insert(mb);
    }
    chain.insert(d);
    return std::make_pair(sub->operands[0], cond);
  };
  const Type mt = p_.type(m);
  for (size_t q = 0; q < carried.size(); ++q) {
    const ValueId v = body.args[1 + q];
    const Type vt = p_.type(v);
    if (!is_float(vt.dtype) || (mt != vt && mt != Type::scalar(vt.dtype))) continue;
    CentredSquares cs;
    auto [u, c] = kept_update(y.operands[q], v, defs);
    auto du = defs.find(u);
    const ValueId t = other_operand(du == defs.end() ? nullptr : du->second, OpKind::ADD, v);
    const Op* square = local(t, OpKind::MUL);
    if (square == nullptr || p_.type(t) != vt) continue;
    cs.replaced = {u, t};
    if (y.operands[q] != u) cs.replaced.insert(y.operands[q]);
    // Both factors the same difference from M under the same condition: a square.
    auto f0 = centred(square->operands[0], cs.replaced);
    auto f1 = centred(square->operands[1], cs.replaced);
    if (!f0 || f0 != f1 || p_.type(f0->first) != vt) continue;
    cs.sum_index = q;
    cs.e = f0->first;
    cs.c = c;
    cs.c_term = f0->second;
    // Nothing else in L2 sees M, v or the chain; e and the conditions see none of them.
    std::set<ValueId> seen{m, v};
    seen.insert(cs.replaced.begin(), cs.replaced.end());
    bool ok = true;
    for (const Op& o : body.ops) {
      if (o.kind == OpKind::YIELD) {
        for (size_t k = 0; k < o.operands.size(); ++k) ok = ok && (k == q || !seen.count(o.operands[k]));
        continue;
      }
      bool touches = false;
      for (ValueId x : o.operands) touches = touches || seen.count(x);
      for (const Block& r : o.regions)
        for (ValueId f : free_values(r)) touches = touches || seen.count(f);
      ok = ok && (!touches || (!o.results.empty() && cs.replaced.count(o.results[0])));
    }
    for (ValueId x : {cs.e, cs.c, cs.c_term})
      ok = ok && independent_of(x, seen, defs) && independent_of(x, carried, defs);
    if (ok) return cs;
  }
  return std::nullopt;
}

std::optional<size_t> Fuser::fuse(Block& b, size_t i, size_t j) {
  index_defs();
  const Op& l1 = b.ops[i];
  const Op& l2 = b.ops[j];
  for (int k = 0; k < 3; ++k)
    if (!same_scalar(l1.operands[k], l2.operands[k])) return std::nullopt;
  if (!effect_free(l1.body()) || !effect_free(l2.body())) return std::nullopt;

  // D: values between the loops computed from L1's results.
  std::set<ValueId> dependent(l1.results.begin(), l1.results.end());
  for (size_t k = i + 1; k < j; ++k)
    for (ValueId o : b.ops[k].operands)
      if (dependent.count(o)) dependent.insert(b.ops[k].results.begin(), b.ops[k].results.end());
  std::set<ValueId> l2_uses = free_values(l2.body());
  for (size_t k = 3; k < l2.operands.size(); ++k) l2_uses.insert(l2.operands[k]);
  std::set<ValueId> used_d;
  for (ValueId v : l2_uses)
    if (dependent.count(v)) used_d.insert(v);

  const size_t n1 = l1.operands.size() - 3, n2 = l2.operands.size() - 3;
  const auto defs1 = local_defs(l1.body()), defs2 = local_defs(l2.body());
  const Op& y1 = l1.body().ops.back();
  const Op& y2 = l2.body().ops.back();
  for (size_t k = 3; k < l2.operands.size(); ++k)
    if (dependent.count(l2.operands[k])) return std::nullopt;
  std::optional<OnlinePair> online;
  std::optional<CentredSquares> centred;
  // Exactly one value of D reaches L2.
  if (used_d.size() > 1) return std::nullopt;
  if (!used_d.empty()) online = [&]() -> std::optional<OnlinePair> {
    // M = reduce_max(a), with L1's a a running max.
    OnlinePair op{};
    op.m = *used_d.begin();
    const Op* red = def_of_kind(op.m, OpKind::REDUCE_MAX);
    if (red == nullptr || red->attr_int("axis") != -1) return std::nullopt;
    auto res = std::find(l1.results.begin(), l1.results.end(), red->operands[0]);
    if (res == l1.results.end()) return std::nullopt;
    op.max_index = static_cast<size_t>(res - l1.results.begin());
    const ValueId a = l1.body().args[1 + op.max_index];
    const std::set<ValueId> carried1(l1.body().args.begin() + 1, l1.body().args.end());
    auto [u1, c1] = kept_update(y1.operands[op.max_index], a, defs1);
    auto du1 = defs1.find(u1);
    op.e1 = other_operand(du1 == defs1.end() ? nullptr : du1->second, OpKind::MAXIMUM, a);
    op.c1 = c1;
    if (op.e1 == kNoValue || !is_float(p_.type(a).dtype) || !independent_of(op.e1, carried1, defs1) ||
        !independent_of(op.c1, carried1, defs1) || p_.type(op.e1) != p_.type(a))
      return std::nullopt;

    // L2: find the carried s whose update is select(c, s + E(e - M), s).
    const std::set<ValueId> carried2(l2.body().args.begin() + 1, l2.body().args.end());
    bool found = false;
    for (size_t q = 0; q < n2 && !found; ++q) {
      const ValueId s = l2.body().args[1 + q];
      auto [v, c2] = kept_update(y2.operands[q], s, defs2);
      auto dv = defs2.find(v);
      const ValueId t = other_operand(dv == defs2.end() ? nullptr : dv->second, OpKind::ADD, s);
      auto dt = defs2.find(t);
      if (t == kNoValue || dt == defs2.end()) continue;
      const Op* e = dt->second;
      if (e->kind != OpKind::EXP && e->kind != OpKind::EXP2) continue;
      auto dd = defs2.find(e->operands[0]);
      if (dd == defs2.end() || dd->second->kind != OpKind::SUB) continue;
      const Op* sub = dd->second;
      ValueId mb = sub->operands[1];
      std::set<ValueId> replaced{y2.operands[q] == v ? kNoValue : y2.operands[q], v, t,
                                 sub->results[0]};
      if (mb != op.m) {
        auto db = defs2.find(mb);
        if (db == defs2.end() || db->second->kind != OpKind::BROADCAST ||
            db->second->operands[0] != op.m)
          continue;
        replaced.insert(mb);
      }
      replaced.erase(kNoValue);
      if (p_.type(s) != p_.type(a) || !is_constant(l2.operands[3 + q], 0.0)) continue;
      op.sum_index = q;
      op.e2 = sub->operands[0];
      op.c2 = c2;
      op.exp_kind = e->kind;
      op.replaced = std::move(replaced);
      found = true;
    }
    if (!found) return std::nullopt;
    // Nothing else in L2 may see M or the replaced chain; s only feeds the chain.
    const ValueId s = l2.body().args[1 + op.sum_index];
    std::set<ValueId> tainted{op.m, s};
    tainted.insert(op.replaced.begin(), op.replaced.end());
    for (const Op& o : l2.body().ops) {
      const bool in_chain = !o.results.empty() && op.replaced.count(o.results[0]);
      bool touches = false;
      for (ValueId x : o.operands) touches = touches || tainted.count(x);
      for (const Block& r : o.regions)
        for (ValueId f : free_values(r)) touches = touches || tainted.count(f);
      if (o.kind == OpKind::YIELD) {
        for (size_t q = 0; q < o.operands.size(); ++q)
          if (q != op.sum_index && tainted.count(o.operands[q])) return std::nullopt;
        continue;
      }
      if (touches && !in_chain) return std::nullopt;
    }
    if (!independent_of(op.e2, tainted, defs2) || !independent_of(op.c2, tainted, defs2) ||
        !independent_of(op.e2, carried2, defs2) || !independent_of(op.c2, carried2, defs2))
      return std::nullopt;
    return op;
  }();
  if (!used_d.empty() && !online) centred = centred_squares(l2, *used_d.begin());
  if (!used_d.empty() && !online && !centred) return std::nullopt;

  // ---- build the merged loop ------------------------------------------------------------------
  Op fused;
  fused.kind = OpKind::FOR;
  fused.loc = l1.loc;
  fused.operands.assign(l1.operands.begin(), l1.operands.end());
  fused.operands.insert(fused.operands.end(), l2.operands.begin() + 3, l2.operands.end());
  fused.results = l1.results;
  fused.results.insert(fused.results.end(), l2.results.begin(), l2.results.end());
  Block body;
  body.args = l1.body().args;
  body.args.insert(body.args.end(), l2.body().args.begin() + 1, l2.body().args.end());
  ValueMap map{{l2.body().args[0], l1.body().args[0]}};
  std::map<OpKey, std::vector<ValueId>> numbered;
  auto key_of = [&](const Op& op) {
    OpKey k{op.kind, {}, {}, {}};
    for (ValueId o : op.operands) k.operands.push_back(mapped(map, o));
    for (const Attr& a : op.attrs) k.attrs.emplace_back(a.name, a.value);
    for (ValueId r : op.results) k.types.push_back(p_.type(r));
    return k;
  };
  auto numberable = [](const Op& op) {
    return op.regions.empty() && !op.results.empty() &&
           (has_trait(op.kind, kPure) || op.kind == OpKind::LOAD);
  };
  for (size_t k = 0; k + 1 < l1.body().ops.size(); ++k) {
    const Op& op = l1.body().ops[k];
    if (numberable(op)) numbered.emplace(key_of(op), op.results);
    body.ops.push_back(op);
  }
  auto remap_nested = [&](Block& r) {
    walk_mut(r, [&](Op& o) {
      for (ValueId& x : o.operands) x = mapped(map, x);
    });
  };
  for (size_t k = 0; k + 1 < l2.body().ops.size(); ++k) {
    const Op& op = l2.body().ops[k];
    if (online && !op.results.empty() && online->replaced.count(op.results[0])) continue;
    if (centred && !op.results.empty() && centred->replaced.count(op.results[0])) continue;
    if (numberable(op)) {
      OpKey key = key_of(op);
      auto it = numbered.find(key);
      if (it != numbered.end()) {
        for (size_t r = 0; r < op.results.size(); ++r) map[op.results[r]] = it->second[r];
        continue;
      }
      numbered.emplace(std::move(key), op.results);
    }
    Op copy = op;
    for (ValueId& x : copy.operands) x = mapped(map, x);
    for (Block& r : copy.regions) remap_nested(r);
    body.ops.push_back(std::move(copy));
  }
  Op yield = y1;
  for (ValueId y : y2.operands) yield.operands.push_back(mapped(map, y));

  std::vector<Op> after;  // the ops between the loops that depend on L1, then the rescale
  std::vector<Op> before;
  for (size_t k = i + 1; k < j; ++k) {
    const Op& op = b.ops[k];
    bool dep = false;
    for (ValueId o : op.operands) dep = dep || dependent.count(o);
    (dep ? after : before).push_back(op);
  }

  if (online) {
    OnlinePair& op = *online;
    // The merged body's element and condition must be L1's (same ops on the same loads).
    if (mapped(map, op.e2) != op.e1 || mapped(map, op.c2) != op.c1) return std::nullopt;
    const ValueId a = l1.body().args[1 + op.max_index];
    const ValueId s = l2.body().args[1 + op.sum_index];
    const Type t = p_.type(a);
    std::vector<Op>* out = &body.ops;
    auto emit = [&](OpKind k, std::vector<ValueId> operands, Type rt, std::vector<Attr> attrs = {},
                    ValueId result = kNoValue) {
      Op o;
      o.kind = k;
      o.operands = std::move(operands);
      o.results = {result == kNoValue ? p_.new_value(rt) : result};
      o.attrs = std::move(attrs);
      o.loc = l2.loc;
      out->push_back(std::move(o));
      return out->back().results[0];
    };
    auto constant = [&](double x) {
      return emit(OpKind::CONST, {}, Type::scalar(t.dtype), {Attr{"value", x}});
    };
    const double inf = std::numeric_limits<double>::infinity();
    const Type st = Type::scalar(t.dtype);
    // r(m): a max that is still -inf measures against 0 (no -inf - -inf).
    auto reference = [&](ValueId m) {
      const Type mt = p_.type(m);
      const ValueId is_inf =
          emit(OpKind::EQ, {m, constant(-inf)}, Type{DType::boolean, mt.shape, false, mt.space});
      return emit(OpKind::SELECT, {is_inf, constant(0.0), m}, mt);
    };
    auto exp_of_difference = [&](ValueId x, ValueId y, const Type& rt) {
      return emit(op.exp_kind, {emit(OpKind::SUB, {x, y}, rt)}, rt);
    };
    // L2's result is s * E(m - M) after the loop; the merged loop's own s is a new value.
    const ValueId l2_result = l2.results[op.sum_index];
    const ValueId s_out = p_.new_value(t);
    fused.results[n1 + op.sum_index] = s_out;
    ValueId m_final = kNoValue, new_s = kNoValue;
    if (!whole_tiles_) {
      // Lane-wise: s is relative to L1's own running max; lanes never talk to each other.
      // One exponential per element: the new max is either the element (it rose: s rescales
      // by E(a - e) and the element's own term is E(0) = 1) or a (s + E(e - r(a))). a - e is
      // -inf, not NaN, when a is -inf (then s is 0 and e is finite, since e > a).
      const Type bt{DType::boolean, t.shape, false, t.space};
      const ValueId rose = emit(OpKind::GT, {op.e1, a}, bt);
      const ValueId u = emit(OpKind::SELECT,
                             {rose, emit(OpKind::SUB, {a, op.e1}, t),
                              emit(OpKind::SUB, {op.e1, reference(a)}, t)},
                             t);
      const ValueId x = emit(op.exp_kind, {u}, t);
      const ValueId one = t.is_tile() ? emit(OpKind::BROADCAST, {constant(1.0)}, t) : constant(1.0);
      const ValueId moved =
          emit(OpKind::SELECT,
               {rose, emit(OpKind::ADD, {emit(OpKind::MUL, {s, x}, t), one}, t),
                emit(OpKind::ADD, {s, x}, t)},
               t);
      new_s = op.c1 == kNoValue ? moved : emit(OpKind::SELECT, {op.c1, moved, s}, t);
      m_final = l1.results[op.max_index];
    } else {
      // One scalar running max over the tile (a tile reduction is a loop here): one exponential
      // per element as in L2, one per iteration for the rescale. It starts at the max of L1's
      // initial value, so it ends equal to M.
      out = &before;
      const ValueId a0 = l1.operands[3 + op.max_index];
      const ValueId m0 =
          t.is_tile() ? emit(OpKind::REDUCE_MAX, {a0}, st, {Attr{"axis", int64_t{-1}}}) : a0;
      out = &body.ops;
      const ValueId ms = p_.new_value(st);
      const ValueId elem =
          op.c1 == kNoValue ? op.e1 : emit(OpKind::SELECT, {op.c1, op.e1, constant(-inf)}, t);
      const ValueId block_max =
          t.is_tile() ? emit(OpKind::REDUCE_MAX, {elem}, st, {Attr{"axis", int64_t{-1}}}) : elem;
      const ValueId ms_new = emit(OpKind::MAXIMUM, {ms, block_max}, st);
      const ValueId alpha = exp_of_difference(ms, reference(ms_new), st);  // 0 from -inf
      const ValueId kept = emit(OpKind::MUL, {s, alpha}, t);
      const ValueId moved = emit(OpKind::ADD, {kept, exp_of_difference(op.e1, reference(ms_new), t)}, t);
      new_s = op.c1 == kNoValue ? moved : emit(OpKind::SELECT, {op.c1, moved, kept}, t);
      fused.operands.push_back(m0);
      body.args.push_back(ms);
      yield.operands.push_back(ms_new);
      m_final = p_.new_value(st);
      fused.results.push_back(m_final);
    }
    yield.operands[n1 + op.sum_index] = new_s;
    out = &after;
    const Type mt = p_.type(m_final);
    const ValueId mb = mt.is_tile() ? emit(OpKind::BROADCAST, {op.m}, mt) : op.m;
    // A lane whose max is still -inf holds s = 0: its scale E(-inf) = 0, not E(0 - M), which
    // overflows to inf (0 * inf = NaN) for rows far below 0.
    const ValueId scale = exp_of_difference(m_final, mb, mt);
    emit(OpKind::MUL, {s_out, scale}, t, {}, l2_result);
    if (whole_tiles_) drop_lane_max(fused, body, yield, after, op.max_index, op.m, m_final);
  }
  if (centred) {
    const CentredSquares& cs = *centred;
    const ValueId v = l2.body().args[1 + cs.sum_index];
    const Type t = p_.type(v);
    const Loc& loc = l2.loc;
    auto op = [&](std::vector<Op>& out, OpKind k, std::vector<ValueId> operands, const Type& rt) {
      return append_op(p_, out, k, std::move(operands), rt, loc);
    };
    const ValueId c = mapped(map, cs.c), c_term = mapped(map, cs.c_term);
    const ValueId e = mapped(map, cs.e);
    // L2's v is v0 + (what either form computes) after the loop; v0 is v's initial value.
    ValueId spread = kNoValue;
    if (running_sums_ && (c == kNoValue || c_term == kNoValue)) {
      const CentredMerge in{l1, e, c == kNoValue ? c_term : c, *used_d.begin(), t, loc, two_counts_};
      spread = merge_as_running_sums(p_, in, fused, body, yield, before, after);
    }
    if (spread == kNoValue) spread = welford(fused, body, yield, before, after, e, c, c_term,
                                             *used_d.begin(), t, loc);
    yield.operands[n1 + cs.sum_index] = v;  // v keeps its initial value through the loop
    const ValueId v0 = p_.new_value(t);
    fused.results[n1 + cs.sum_index] = v0;
    op(after, OpKind::ADD, {v0, spread}, t);
    after.back().results[0] = l2.results[cs.sum_index];
  }
  body.ops.push_back(std::move(yield));
  fused.regions.push_back(std::move(body));

  std::vector<Op> ops;
  ops.reserve(b.ops.size() + after.size());
  for (size_t k = 0; k < i; ++k) ops.push_back(std::move(b.ops[k]));
  for (Op& op : before) ops.push_back(std::move(op));
  const size_t merged = ops.size();
  ops.push_back(std::move(fused));
  for (Op& op : after) ops.push_back(std::move(op));
  for (size_t k = j + 1; k < b.ops.size(); ++k) ops.push_back(std::move(b.ops[k]));
  b.ops = std::move(ops);
  return merged;
}

// The scalar running max ends equal to M = reduce_max(a) (both are the max of a's initial value
// and every element taken; max is exact), so when M is all that reads L1's lane-wise a after the
// loop and a feeds nothing in the body but its own update, a and its update chain go and M is
// the scalar (as maximum(m, m), which is m bit for bit). The two can differ only in the sign of
// a zero max (maximum keeps its first operand on ties), which no exp(x - M) can see.
void Fuser::drop_lane_max(Op& fused, Block& body, Op& yield, std::vector<Op>& after, size_t k,
                          ValueId m, ValueId m_final) {
  const ValueId a_out = fused.results[k], a = body.args[1 + k];
  auto red = std::find_if(after.begin(), after.end(), [&](const Op& o) {
    return o.results.size() == 1 && o.results[0] == m && o.kind == OpKind::REDUCE_MAX;
  });
  if (red == after.end() || red->operands[0] != a_out) return;
  size_t reads_of_a = 0;  // in the program as it still is (M's reduce_max between the loops)
  walk(p_.body, [&](const Op& o) {
    for (ValueId x : o.operands) reads_of_a += x == a_out;
  });
  if (reads_of_a != 1) return;
  // The update chain: the body ops reached from a; each may feed only the chain and yield k.
  std::set<ValueId> chain{a};
  for (const Op& o : body.ops) {
    bool reads = false;
    for (ValueId x : o.operands) reads = reads || chain.count(x);
    for (const Block& r : o.regions)
      for (ValueId f : free_values(r)) reads = reads || chain.count(f);
    if (!reads) continue;
    if (!has_trait(o.kind, kPure) || !o.regions.empty()) return;
    chain.insert(o.results.begin(), o.results.end());
  }
  for (const Op& o : body.ops) {
    const bool in_chain = !o.results.empty() && chain.count(o.results[0]);
    for (size_t q = 0; q < o.operands.size(); ++q) {
      if (!chain.count(o.operands[q]) || in_chain) continue;
      if (o.kind != OpKind::YIELD || q != k) return;
    }
    for (const Block& r : o.regions)
      for (ValueId f : free_values(r))
        if (chain.count(f)) return;
  }
  if (!chain.count(yield.operands[k])) return;
  body.ops.erase(std::remove_if(body.ops.begin(), body.ops.end(),
                                [&](const Op& o) { return !o.results.empty() && chain.count(o.results[0]); }),
                 body.ops.end());
  fused.operands.erase(fused.operands.begin() + 3 + static_cast<std::ptrdiff_t>(k));
  fused.results.erase(fused.results.begin() + static_cast<std::ptrdiff_t>(k));
  body.args.erase(body.args.begin() + 1 + static_cast<std::ptrdiff_t>(k));
  yield.operands.erase(yield.operands.begin() + static_cast<std::ptrdiff_t>(k));
  red->kind = OpKind::MAXIMUM;
  red->operands = {m_final, m_final};
  red->attrs.clear();
}


// Welford per lane: the count n, mean a and centred sum of squares q of the elements the lane
// took (under c and c_term), from 0. Returns q + n * (a - M)^2, computed after the loop.
ValueId Fuser::welford(Op& fused, Block& body, Op& yield, std::vector<Op>& before,
                       std::vector<Op>& after, ValueId e, ValueId c, ValueId c_term, ValueId m,
                       const Type& t, const Loc& loc) {
  const Type st = Type::scalar(t.dtype);
  auto op = [&](std::vector<Op>& out, OpKind k, std::vector<ValueId> operands, const Type& rt) {
    return append_op(p_, out, k, std::move(operands), rt, loc);
  };
  auto constant = [&](std::vector<Op>& out, double x) {
    return append_op(p_, out, OpKind::CONST, {}, st, loc, {Attr{"value", x}});
  };
  const ValueId zero = constant(before, 0.0);
  const ValueId zeros = t.is_tile() ? op(before, OpKind::BROADCAST, {zero}, t) : zero;
  const ValueId n = p_.new_value(t), a = p_.new_value(t), q = p_.new_value(t);
  std::vector<Op>& ops = body.ops;
  const ValueId n_next = op(ops, OpKind::ADD, {n, constant(ops, 1.0)}, t);
  const ValueId delta = op(ops, OpKind::SUB, {e, a}, t);
  const ValueId a_next = op(ops, OpKind::ADD, {a, op(ops, OpKind::DIV, {delta, n_next}, t)}, t);
  const ValueId q_next = op(
      ops, OpKind::ADD, {q, op(ops, OpKind::MUL, {delta, op(ops, OpKind::SUB, {e, a_next}, t)}, t)},
      t);
  ValueId cond = c == kNoValue ? c_term : c;
  if (c != kNoValue && c_term != kNoValue) cond = op(ops, OpKind::BITAND, {c, c_term}, p_.type(c));
  std::vector<ValueId> next{n_next, a_next, q_next}, carried{n, a, q}, out(3);
  for (size_t k = 0; k < 3; ++k) {
    if (cond != kNoValue) next[k] = op(ops, OpKind::SELECT, {cond, next[k], carried[k]}, t);
    fused.operands.push_back(zeros);
    body.args.push_back(carried[k]);
    yield.operands.push_back(next[k]);
    out[k] = p_.new_value(t);
    fused.results.push_back(out[k]);
  }
  const ValueId off = op(after, OpKind::SUB, {out[1], m}, t);
  const ValueId spread = op(after, OpKind::MUL, {out[0], op(after, OpKind::MUL, {off, off}, t)}, t);
  return op(after, OpKind::ADD, {out[2], spread}, t);
}
}  // namespace

void fuse_reduction_loops(Program& program, const TilePassContext& ctx) {
  const CompileOptions& o = ctx.options;
  Fuser(program, ctx.whole_tiles_in_order, !o.disables("running_sums"), !o.disables("two_counts")).block(program.body);
}

}  // namespace metile

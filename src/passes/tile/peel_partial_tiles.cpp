// whole_tiles: a tile_range whose masks hold on every lane of its whole tiles runs those tiles
// without the masks, and only the rest (the last, partial tile of a row) as written.
// Needs: verified, activity-explicit Tile IR with the bounds guards in the masks ("bounds" ran):
// a row loop's loads then carry `lane < N` (the user's mask) and the guards' `lane >= lo`,
// `lane <= hi` against loop-invariant limits. Guarantees: the same loads, stores and values in
// the same order; no access outside a buffer that the guarded program did not make.
//
// A loop qualifies when its step is a positive constant, its induction variable is i32 and its
// body holds no region, atomic or SIMT op. In its body a boolean tile is "whole" when it is a
// comparison (<, <=, >, >=) between an index of the form iv + arange(a0, B) + invariant scalars
// (broadcast or reshaped: the same values) and a loop-invariant scalar, or the `bitand` of whole
// tiles. A bounded tile_load or tile_store (decode attention's K and V blocks) is whole when its
// row and column coordinates are such indices without the arange, or such an index
// floor-divided by a positive constant (packed or grouped columns: int4 GEMV's words k // 8 and
// scales k // G), and its bounds loop-invariant: its [R, C] block then lies in [0, rows) x
// [0, cols) on every whole tile, and the copy uses the unbounded form.
// Over the first n = (end - start) / step iterations (the whole tiles) such an index lies in
// [start + c + a0, last + c + a0 + B - 1] (last = start + (n - 1) * step, c the scalars' sum),
// so each comparison holds on every lane of every one of them exactly when one scalar
// comparison of that range's end holds; so does the index staying inside i32 (no wrap-around).
// A comparison against a loop-invariant tile of the same index form without iv (causal
// attention's cols <= rows[:, None], rows = start_m + arange) is whole on a prefix of the
// iterations when it is an upper one (<, <=; the index grows with iv): those whose last lane is
// below the tile's least value; the prefix's length is computed in front of the loop. (A lower
// one holds on every iteration when it holds on the first, against the tile's greatest value.)
// Computed in i64 once in front of the loop, the conjunction `whole` of the scalar comparisons
// and the least of the prefixes decide the split:
//
//   split = start + min(whole ? n : 0, prefixes) * step
//   for iv = start to split step s   { the body; whole masks true: loads and stores unmasked,
//                                      select(mask, a, b) -> a, bitand(mask, m) -> m }
//   for iv = split to end step s     { the body as written }  (carried values flow through)
//
// When `whole` fails (a row whose guards clip it, an index that would wrap) every iteration runs
// the second loop, i.e. as written. Switched off by disabled_passes / METILE_GPU_OFF "whole_tiles" (every device).
// Why: the guards and masks cost ~9 instructions per element in the row kernels (ncu on an H100,
// bench/results/cuda_rows_h100.md run 5), while a row has at most one partial tile.
//
// Whole blocks (METILE_GPU_OFF=whole_blocks; off with whole_tiles too): a loop holding a dot
// keeps its one body; only its selects of a dot's result, or of an element-wise function of one
// (attention's where(keep, s, -inf) on the scores, scaled or not), whose masks are whole are put
// behind a branch on iv < split, uniform per program:
//
//   %s = if iv < split { yield dot } else { the mask as written; select(mask, dot, b) }
//
// Its loads keep their bounds. Why not the split: a GEMM or attention loop is pipelined (its
// copies issued stages ahead, on sm_90 TMA copies into a ring filled by a prologue), and two
// loops would refill the pipeline between them, in front of the one or two masked blocks
// (attention's last, partial block; causal, the diagonal ones), besides doubling the largest
// body of the program. The branch costs one compare and jump per iteration; on the whole blocks
// it removes each thread's index math, comparisons and one select per score element, which sit
// on the softmax's path. The loads' bounds are not worth a second body: on sm_90 the TMA
// hardware clamps them, elsewhere they are part of the copy into threadgroup memory. The
// selects' results keep the dot's layout (assign_layouts follows a dot through the `if`).
//
// Last-first (GPUs; METILE_GPU_OFF=last_first): a loop that re-reads the range an earlier loop
// of its block read (same start, end and step), carries nothing, makes one store whose lanes
// iv + c .. iv + c + w (w < step) keep iterations apart, in a program that writes no parameter
// it reads and has no threadgroup memory, runs the partial tile first and then its whole tiles
// from the last to the first. The iterations are independent, so the order changes no value.
// Why: on long rows the earlier pass's last tiles are the ones still in L2 when the re-read
// starts (an H100 holds 50 MB of L2 against ~118 MB of rows in flight at 1024x32768: run 5 and
// run 6 of bench/results/cuda_rows_h100.md).
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "ir/param_access.h"
#include "passes/tile/tile_emit.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"

namespace metile {

namespace {

constexpr size_t kMaxBodyOps = 512;  // larger bodies are not row loops; doubling them is not free

// What the pass needs to know about an op defined outside the loop it looks at (copied: the
// blocks are rebuilt while it runs).
struct Def {
  OpKind kind{};
  std::vector<ValueId> operands;
  int64_t size = 0;                 // arange
  std::optional<int64_t> int_value;  // integer const
};

// A tile_load or tile_store with its bounds operands (rows, cols): the first bound's index.
std::optional<size_t> tile_bounds(const Op& op) {
  const size_t first = op.kind == OpKind::TILE_LOAD ? 4 : op.kind == OpKind::TILE_STORE ? 5 : 0;
  if (first == 0 || op.operands.size() != first + 2) return std::nullopt;
  return first;
}

bool bounded_tile(const Op& op) { return tile_bounds(op).has_value(); }

// How a loop's masks that hold on its whole tiles are dropped: a loop of its own for those tiles
// (row loops), or one loop whose dot results skip their masks behind a uniform branch (loops
// holding dots: see the file comment).
enum class Form { none, split, guard };

Form form_of(const Program& p, const Op& loop, const std::unordered_map<ValueId, Def>& defs,
             bool guard_dots) {
  if (p.type(loop.operands[0]).dtype != DType::i32 || !p.type(loop.operands[0]).is_scalar())
    return Form::none;
  auto step = defs.find(loop.operands[2]);
  if (step == defs.end() || !step->second.int_value || *step->second.int_value <= 0) return Form::none;
  const Block& body = loop.regions[0];
  if (body.ops.size() > kMaxBodyOps) return Form::none;
  bool masked = false, dots = false, selects = false;
  for (const Op& op : body.ops) {
    if (!op.regions.empty() || has_trait(op.kind, kSimt) || has_trait(op.kind, kAtomic))
      return Form::none;
    dots = dots || op.kind == OpKind::DOT;
    selects = selects || (op.kind == OpKind::SELECT && p.type(op.operands[0]).is_tile());
    masked = masked || (op.kind == OpKind::LOAD && op.operands.size() > 1) ||
             (op.kind == OpKind::STORE && op.operands.size() > 2) || op.kind == OpKind::SELECT ||
             bounded_tile(op);
  }
  if (dots) return guard_dots && selects ? Form::guard : Form::none;
  return masked ? Form::split : Form::none;
}

// Fresh values for every result and block argument of `block` (recursively), operands renamed.
Block clone_block(Program& p, const Block& block, std::unordered_map<ValueId, ValueId>& map) {
  auto renamed = [&](ValueId v) {
    auto it = map.find(v);
    return it == map.end() ? v : it->second;
  };
  Block out;
  for (ValueId a : block.args) out.args.push_back(map[a] = p.new_value(p.type(a)));
  for (const Op& op : block.ops) {
    Op c;
    c.kind = op.kind;
    c.attrs = op.attrs;
    c.loc = op.loc;
    for (ValueId v : op.operands) c.operands.push_back(renamed(v));
    for (const Block& r : op.regions) c.regions.push_back(clone_block(p, r, map));
    for (ValueId r : op.results) c.results.push_back(map[r] = p.new_value(p.type(r)));
    out.ops.push_back(std::move(c));
  }
  return out;
}

// One loop: the scalar facts in front of it, then the rewrite of its whole-tile copy.
class Peel {
 public:
  Peel(Program& p, const std::unordered_map<ValueId, Def>& defs, const Op& loop,
       std::vector<Op>& pre)
      : p_(p), defs_(defs), loc_(loop.loc), pre_(pre) {}

  // Form::split: the whole-tile copy of `loop` (masks that hold dropped) and the split point.
  // With `last_first` (see the file comment) and a body that allows it, the copy runs its
  // iterations last-first and `reversed` says so.
  // Form::guard: `loop` itself, each select of a dot result (of_dot) whose mask is whole made an
  // `if` on iv < split (the split point).
  // Nothing when no mask of the body is whole.
  std::optional<std::pair<Op, ValueId>> run(const Op& loop, Form form, bool last_first, bool& reversed) {
    reversed = false;
    std::unordered_map<ValueId, ValueId> map;
    Block body = clone_block(p_, loop.regions[0], map);
    iv_ = body.args[0];
    for (size_t k = 0; k < body.ops.size(); ++k)
      for (ValueId r : body.ops[k].results) inside_[r] = k;
    body_ = &body;
    step_of_ = loop.operands[2];
    const int64_t step = *defs_.at(step_of_).int_value;
    start_ = emit(OpKind::CAST, {loop.operands[0]}, Type::scalar(DType::i64));
    const ValueId end = emit(OpKind::CAST, {loop.operands[1]}, Type::scalar(DType::i64));
    step_ = constant(step);
    const ValueId zero = constant(0);
    const ValueId span = emit(OpKind::MAXIMUM, {emit(OpKind::SUB, {end, start_}, i64()), zero}, i64());
    whole_n_ = emit(OpKind::DIV, {span, step_}, i64());
    const ValueId before_last = emit(OpKind::SUB, {whole_n_, constant(1)}, i64());
    last_ = emit(OpKind::ADD, {start_, emit(OpKind::MUL, {before_last, step_}, i64())}, i64());

    std::unordered_map<ValueId, ValueId> subst;
    std::vector<bool> dead(body.ops.size(), false);
    std::vector<size_t> guarded;  // Form::guard: the selects to put behind the branch
    bool changed = false;
    for (size_t k = 0; k < body.ops.size(); ++k) {
      Op& op = body.ops[k];
      if (form == Form::guard) {
        if (op.kind == OpKind::SELECT && p_.type(op.operands[0]).is_tile() && of_dot(op.operands[1]) &&
            whole(op.operands[0]))
          guarded.push_back(k);
        continue;
      }
      for (ValueId& v : op.operands)
        if (auto it = subst.find(v); it != subst.end()) v = it->second;
      if (op.kind == OpKind::LOAD && op.operands.size() > 1 && whole(op.operands[1])) {
        op.operands.resize(1);
        changed = true;
      } else if (op.kind == OpKind::STORE && op.operands.size() > 2 && whole(op.operands[2])) {
        op.operands.resize(2);
        changed = true;
      } else if (auto first = tile_bounds(op); first && whole_tile(op, *first)) {
        op.operands.resize(*first);  // the unbounded form: every element of the tile
        std::erase_if(op.attrs, [](const Attr& a) { return a.name == "bounds"; });
        changed = true;
      } else if (op.kind == OpKind::SELECT && p_.type(op.operands[0]).is_tile() &&
                 whole(op.operands[0])) {
        subst[op.result()] = op.operands[1];
        dead[k] = changed = true;
      } else if (op.kind == OpKind::BITAND && p_.type(op.result()).dtype == DType::boolean) {
        for (int side : {0, 1})
          if (!dead[k] && p_.type(op.operands[side]) == p_.type(op.result()) &&
              whole(op.operands[side])) {
            subst[op.result()] = op.operands[1 - side];
            dead[k] = changed = true;
          }
      }
    }
    if (!changed && guarded.empty()) return std::nullopt;
    if (form == Form::split) {
      std::vector<Op> kept;
      for (size_t k = 0; k < body.ops.size(); ++k)
        if (!dead[k]) kept.push_back(std::move(body.ops[k]));
      body.ops = std::move(kept);
      drop_unused(body);
      inside_.clear();
      for (size_t k = 0; k < body.ops.size(); ++k)
        for (ValueId r : body.ops[k].results) inside_[r] = k;
    }

    // The whole tiles: all of them when every all-tiles condition holds, else none; no more
    // than each prefix-true comparison's prefix.
    ValueId all = kNoValue;
    for (ValueId c : conditions_)
      all = all == kNoValue ? c : emit(OpKind::BITAND, {all, c}, Type::scalar(DType::boolean));
    ValueId n = all == kNoValue ? whole_n_ : emit(OpKind::SELECT, {all, whole_n_, zero}, i64());
    for (ValueId prefix : prefixes_) n = emit(OpKind::MINIMUM, {n, prefix}, i64());
    const ValueId split64 = emit(OpKind::ADD, {start_, emit(OpKind::MUL, {n, step_}, i64())}, i64());
    const ValueId split = emit(OpKind::CAST, {split64}, Type::scalar(DType::i32));
    if (form == Form::guard) {
      guard(body, guarded, split);
      drop_unused(body);
      Op same = loop;  // its results and operands as they were; only the body changes
      same.regions[0] = std::move(body);
      return std::make_pair(std::move(same), split);
    }
    if (last_first && loop.results.empty() && stores_apart(body)) {
      // iv = (split - step) - (t - start): the same iterations, the last first.
      const ValueId iv = body.args[0];
      body.args[0] = p_.new_value(p_.type(iv));
      const ValueId last = emit(OpKind::SUB, {split64, step_}, i64());
      std::vector<Op> head;
      const ValueId t = append_op(p_, head, OpKind::CAST, {body.args[0]}, i64(), loc_);
      const ValueId done = append_op(p_, head, OpKind::SUB, {t, start_}, i64(), loc_);
      const ValueId back = append_op(p_, head, OpKind::SUB, {last, done}, i64(), loc_);
      append_op(p_, head, OpKind::CAST, {back}, p_.type(iv), loc_);
      head.back().results[0] = iv;
      body.ops.insert(body.ops.begin(), std::make_move_iterator(head.begin()),
                      std::make_move_iterator(head.end()));
      reversed = true;
    }

    Op main;
    main.kind = OpKind::FOR;
    main.loc = loop.loc;
    main.attrs = loop.attrs;
    main.operands = loop.operands;
    main.operands[1] = split;
    for (ValueId r : loop.results) main.results.push_back(p_.new_value(p_.type(r)));
    main.regions.push_back(std::move(body));
    return std::make_pair(std::move(main), split);
  }

 private:
  static Type i64() { return Type::scalar(DType::i64); }

  ValueId emit(OpKind k, std::vector<ValueId> operands, Type t, std::vector<Attr> attrs = {}) {
    return append_op(p_, pre_, k, std::move(operands), t, loc_, std::move(attrs));
  }
  ValueId constant(int64_t v) {
    auto [it, added] = constants_.try_emplace(v, kNoValue);
    if (added) it->second = emit(OpKind::CONST, {}, i64(), {Attr{"value", v}});
    return it->second;
  }

  // `v` as a value defined in front of the loop: itself when it is defined outside, a copy of
  // its (pure, invariant) definition otherwise; nothing when it changes with the iteration.
  std::optional<ValueId> outside(ValueId v) {
    if (v == iv_) return std::nullopt;
    auto at = inside_.find(v);
    if (at == inside_.end()) {
      for (ValueId a : body_->args)
        if (a == v) return std::nullopt;
      return v;
    }
    if (auto it = copied_.find(v); it != copied_.end()) return it->second;
    const Op& op = body_->ops[at->second];
    if (!runs_anywhere(p_, op) || op.results.size() != 1) return std::nullopt;
    std::vector<ValueId> operands;
    for (ValueId o : op.operands) {
      auto x = outside(o);
      if (!x) return std::nullopt;
      operands.push_back(*x);
    }
    const ValueId r = emit(op.kind, operands, p_.type(v), op.attrs);
    copied_[v] = r;
    return r;
  }

  // The kind and operands of the op defining `v`, inside the body or outside it.
  std::optional<Def> def(ValueId v) const {
    if (auto at = inside_.find(v); at != inside_.end()) {
      const Op& op = body_->ops[at->second];
      Def d{op.kind, op.operands, 0, std::nullopt};
      if (op.kind == OpKind::ARANGE) d.size = op.attr_int("size");
      return d;
    }
    if (auto it = defs_.find(v); it != defs_.end()) return it->second;
    return std::nullopt;
  }

  // An index iv + arange(a0, B) + scalars: the values to add to iv (in front of the loop) and
  // B - 1 (0 without an arange).
  struct Index {
    int ivs = 0;
    std::vector<ValueId> terms;
    int64_t width = 0;
    int aranges = 0;
  };

  std::optional<Index> index(ValueId v) {
    const Type& t = p_.type(v);
    if (t.is_ptr || t.dtype != DType::i32) return std::nullopt;
    if (v == iv_) return Index{1, {}, 0, 0};
    std::optional<Def> d = def(v);
    if (d && d->kind == OpKind::ADD) {
      auto a = index(d->operands[0]), b = index(d->operands[1]);
      if (!a || !b) return std::nullopt;
      a->ivs += b->ivs;
      a->aranges += b->aranges;
      a->width += b->width;
      a->terms.insert(a->terms.end(), b->terms.begin(), b->terms.end());
      if (a->ivs > 1 || a->aranges > 1) return std::nullopt;
      return a;
    }
    if (d && d->kind == OpKind::ARANGE) {  // its start may hold iv (arange(start_n, ...))
      std::optional<Index> a = index(d->operands[0]);
      if (!a)
        if (auto a0 = outside(d->operands[0])) a = Index{0, {*a0}, 0, 0};
      if (!a || d->size < 1) return std::nullopt;
      a->width = d->size - 1;
      a->aranges = 1;
      return a;
    }
    if (d && (d->kind == OpKind::BROADCAST || d->kind == OpKind::RESHAPE)) {
      // A tile broadcast or reshaped holds the values it held: its least and greatest stay.
      if (p_.type(d->operands[0]).is_tile()) return index(d->operands[0]);
      return scalar_term(d->operands[0]);
    }
    if (t.is_scalar()) return scalar_term(v);
    return std::nullopt;
  }

  std::optional<Index> scalar_term(ValueId v) {
    if (!p_.type(v).is_scalar() || p_.type(v).dtype != DType::i32) return std::nullopt;
    auto x = outside(v);
    if (!x) return std::nullopt;
    return Index{0, {*x}, 0, 0};
  }

  // An i32 index of the loop's lanes, or (`is_unsigned`) one cast to u32 (a lane's bit pattern).
  std::optional<Index> lanes(ValueId e, bool& is_unsigned) {
    is_unsigned = false;
    std::optional<Def> d = def(e);
    if (d && d->kind == OpKind::CAST && p_.type(e).dtype == DType::u32 &&
        p_.type(d->operands[0]).dtype == DType::i32) {
      is_unsigned = true;
      e = d->operands[0];
    }
    std::optional<Index> ix = index(e);
    if (!ix || ix->ivs != 1) return std::nullopt;
    return ix;
  }

  // The loop-invariant scalar of type `dtype` that `v` stands for on every lane, widened to i64
  // (a u32 by its value).
  std::optional<ValueId> bound(ValueId v, DType dtype) {
    std::optional<Def> d = def(v);
    if (p_.type(v).is_tile()) {
      if (!d || d->kind != OpKind::BROADCAST) return std::nullopt;
      v = d->operands[0];
    }
    if (!p_.type(v).is_scalar() || p_.type(v).dtype != dtype) return std::nullopt;
    auto x = outside(v);
    if (!x) return std::nullopt;
    return emit(OpKind::CAST, {*x}, i64());
  }

  // Adds the scalar conditions under which `v` is true on every lane of every whole tile;
  // false when that cannot be shown.
  bool whole(ValueId v) {
    if (auto it = known_.find(v); it != known_.end()) return it->second;
    const bool r = prove(v);
    known_[v] = r;
    return r;
  }

  bool prove(ValueId v) {
    const Type& t = p_.type(v);
    std::optional<Def> d = def(v);
    if (!t.is_tile() || t.dtype != DType::boolean || !d) return false;
    if (d->kind == OpKind::BITAND) return whole(d->operands[0]) && whole(d->operands[1]);
    if ((d->kind == OpKind::BROADCAST || d->kind == OpKind::RESHAPE) && p_.type(d->operands[0]).is_tile())
      return whole(d->operands[0]);  // true on every lane stays so (cols[None, :] < seq, broadcast)
    OpKind k = d->kind;
    if (k != OpKind::LT && k != OpKind::LE && k != OpKind::GT && k != OpKind::GE) return false;
    ValueId e = d->operands[0], s = d->operands[1];
    bool is_unsigned = false;
    std::optional<Index> ix = lanes(e, is_unsigned);
    if (!ix) {  // `s op e`: the same comparison turned around
      std::swap(e, s);
      ix = lanes(e, is_unsigned);
      if (!ix) return false;
      k = k == OpKind::LT ? OpKind::GT : k == OpKind::LE ? OpKind::GE
        : k == OpKind::GT ? OpKind::LT : OpKind::LE;
    }
    std::optional<ValueId> b = bound(s, is_unsigned ? DType::u32 : DType::i32);
    if (!b) return !is_unsigned && against_tile(k, *ix, s);
    const auto [lo, hi] = range(*ix);
    // The bounds pass's one-compare guard: unsigned(lane) < limit is lane < limit once no lane
    // is negative.
    if (is_unsigned) {
      auto [it, added] = nonnegative_.try_emplace(lo, kNoValue);
      if (added) it->second = emit(OpKind::GE, {lo, constant(0)}, Type::scalar(DType::boolean));
      conditions_.insert(it->second);
    }
    const bool upper = k == OpKind::LT || k == OpKind::LE;
    conditions_.insert(emit(k, {upper ? hi : lo, *b}, Type::scalar(DType::boolean)));
    return true;
  }

  // `lanes k t` for t a loop-invariant tile of the index form (no induction variable: causal
  // attention's rows[:, None]), true on every lane when it is for the lanes' extreme against t's:
  // t_lo (its first lane) and t_hi (its last). The lanes grow with the iterations, so a lower
  // comparison (>, >=) holds on all of them when it holds on the first tile's first lane, and an
  // upper one (<, <=) holds on a prefix: the iterations j whose last lane lo + width + j * step
  // is <= t_lo (< t_lo for <). That prefix's length, in i64 (sums of i32 values and the step
  // cannot overflow it) and 0 when even the first tile fails, joins prefixes_; run() takes the
  // least of them and the whole-tile count.
  bool against_tile(OpKind k, const Index& ix, ValueId t) {
    if (!p_.type(t).is_tile()) return false;
    std::optional<Index> tx = index(t);
    if (!tx || tx->ivs != 0) return false;
    const auto [t_lo, t_hi] = range(*tx);
    const auto [lo, hi] = range(ix);
    const Type flag = Type::scalar(DType::boolean);
    if (k == OpKind::GT || k == OpKind::GE) {
      conditions_.insert(emit(k, {lo, t_hi}, flag));
      return true;
    }
    const ValueId last_lane = ix.width == 0 ? lo : emit(OpKind::ADD, {lo, constant(ix.width)}, i64());
    ValueId room = emit(OpKind::SUB, {t_lo, last_lane}, i64());
    if (k == OpKind::LT) room = emit(OpKind::SUB, {room, constant(1)}, i64());
    const ValueId count = emit(OpKind::ADD, {emit(OpKind::DIV, {room, step_}, i64()), constant(1)}, i64());
    const ValueId fits = emit(OpKind::GE, {room, constant(0)}, flag);
    prefixes_.push_back(emit(OpKind::SELECT, {fits, count, constant(0)}, i64()));
    return true;
  }

  // Whether `v` is the result of a dot of the body or an element-wise function of one (the
  // scores a select masks, scaled first as in Triton's tutorial: where(valid, dot(q, k) * scale,
  // -inf)).
  bool of_dot(ValueId v) {
    auto at = inside_.find(v);
    if (at == inside_.end()) return false;
    if (auto known = of_dot_.find(v); known != of_dot_.end()) return known->second;
    const Op& op = body_->ops[at->second];
    bool r = op.kind == OpKind::DOT;
    if (is_elementwise(op.kind) && op.kind != OpKind::PTR_OFFSET)
      for (ValueId x : op.operands) r = r || (p_.type(x).shape == p_.type(v).shape && of_dot(x));
    return of_dot_[v] = r;
  }

  // Form::guard: each select of `at` (positions in `body`) becomes
  //   %r = if iv < split { yield a } else { the mask's ops; %m = select mask, a, b; yield %m }
  // with the select's result: the whole tiles take a, the rest compute the mask as written.
  void guard(Block& body, const std::vector<size_t>& at, ValueId split) {
    std::vector<Op> branches;  // built first: the masks are cloned from the body as it stands
    ValueId in_whole = kNoValue;
    std::vector<Op> head;
    for (size_t k : at) {
      const Op& sel = body.ops[k];
      if (in_whole == kNoValue)
        in_whole = append_op(p_, head, OpKind::LT, {iv_, split}, Type::scalar(DType::boolean), sel.loc);
      Op branch;
      branch.kind = OpKind::IF;
      branch.loc = sel.loc;
      branch.operands = {in_whole};
      branch.results = sel.results;
      branch.regions.resize(2);
      auto yield = [&](ValueId v) {
        Op y;
        y.kind = OpKind::YIELD;
        y.loc = sel.loc;
        y.operands = {v};
        return y;
      };
      branch.regions[0].ops.push_back(yield(sel.operands[1]));
      std::unordered_map<ValueId, ValueId> cloned;
      Block& rest = branch.regions[1];
      Op masked = sel;
      masked.operands[0] = clone_cone(sel.operands[0], rest.ops, cloned);
      masked.results = {p_.new_value(p_.type(sel.result()))};
      const ValueId r = masked.result();
      rest.ops.push_back(std::move(masked));
      rest.ops.push_back(yield(r));
      branches.push_back(std::move(branch));
    }
    std::vector<Op> out;
    for (size_t k = 0, next = 0; k < body.ops.size(); ++k) {
      if (next < at.size() && at[next] == k) {
        if (next == 0)
          for (Op& h : head) out.push_back(std::move(h));
        out.push_back(std::move(branches[next++]));
        continue;
      }
      out.push_back(std::move(body.ops[k]));
    }
    body.ops = std::move(out);
  }

  // `v` computed in `out`: the ops of the body it depends on that may run anywhere, copied
  // (values defined outside the body, or by other ops, are read as they are).
  ValueId clone_cone(ValueId v, std::vector<Op>& out, std::unordered_map<ValueId, ValueId>& cloned) {
    auto at = inside_.find(v);
    if (at == inside_.end()) return v;
    if (auto it = cloned.find(v); it != cloned.end()) return it->second;
    const Op& op = body_->ops[at->second];
    if (!runs_anywhere(p_, op) || op.results.size() != 1 || op.kind == OpKind::DOT) return v;
    Op c = op;
    for (ValueId& o : c.operands) o = clone_cone(o, out, cloned);
    c.results = {p_.new_value(p_.type(v))};
    out.push_back(std::move(c));
    return cloned[v] = out.back().result();
  }

  // Adds the scalar conditions under which a bounded tile access covers only rows and columns
  // inside its bounds on every whole tile (the lowering's per-element `0 <= row < rows`,
  // `0 <= col < cols`); false when a coordinate is not an index this pass follows.
  // A coordinate may also be floordiv(index, c) for a positive constant c (a column of packed
  // or grouped data: k // 8 words of 4-bit codes, k // G group scales): floordiv is monotone, so
  // its least and greatest values are the index's, divided.
  bool whole_tile(const Op& op, size_t first_bound) {
    const Shape& shape = p_.type(op.kind == OpKind::TILE_LOAD ? op.result() : op.operands[4]).shape;
    std::optional<Index> at[2];
    std::optional<ValueId> limit[2];
    int64_t divisor[2] = {1, 1};
    for (int d : {0, 1}) {
      ValueId c = op.operands[1 + d];
      if (std::optional<Def> q = def(c); q && q->kind == OpKind::FLOORDIV)
        if (auto k = defs_.find(q->operands[1]);
            k != defs_.end() && k->second.int_value && *k->second.int_value > 0) {
          divisor[d] = *k->second.int_value;
          c = q->operands[0];
        }
      at[d] = index(c);
      const ValueId b = op.operands[first_bound + d];
      limit[d] = bound(b, p_.type(b).dtype);
      if (!at[d] || at[d]->aranges != 0 || !limit[d]) return false;
      at[d]->width = divisor[d] == 1 ? shape.dims[d] - 1 : 0;
    }
    const Type flag = Type::scalar(DType::boolean);
    for (int d : {0, 1}) {
      auto [lo, hi] = range(*at[d]);
      if (divisor[d] != 1) {
        lo = emit(OpKind::FLOORDIV, {lo, constant(divisor[d])}, i64());
        hi = emit(OpKind::ADD, {emit(OpKind::FLOORDIV, {hi, constant(divisor[d])}, i64()),
                                constant(shape.dims[d] - 1)}, i64());
      }
      conditions_.insert(emit(OpKind::GE, {lo, constant(0)}, flag));
      conditions_.insert(emit(OpKind::LT, {hi, *limit[d]}, flag));
    }
    return true;
  }

  // The index's least value (first tile, lane 0) and greatest (last whole tile, last lane), in
  // i64, once per index; adds the condition that both are i32 values (no wrap-around). An index
  // without the induction variable is the same on every tile.
  std::pair<ValueId, ValueId> range(Index ix) {
    std::sort(ix.terms.begin(), ix.terms.end());
    ix.terms.push_back(static_cast<ValueId>(ix.width));  // the key: the terms, the width, ivs
    ix.terms.push_back(static_cast<ValueId>(ix.ivs));
    auto [it, added] = ranges_.try_emplace(ix.terms);
    if (!added) return it->second;
    ix.terms.resize(ix.terms.size() - 2);
    ValueId c = kNoValue;
    for (ValueId term : ix.terms) {
      const ValueId t = emit(OpKind::CAST, {term}, i64());
      c = c == kNoValue ? t : emit(OpKind::ADD, {c, t}, i64());
    }
    const ValueId first = ix.ivs == 1 ? start_ : constant(0), final = ix.ivs == 1 ? last_ : constant(0);
    const ValueId lo = c == kNoValue ? first : emit(OpKind::ADD, {first, c}, i64());
    const ValueId last = c == kNoValue ? final : emit(OpKind::ADD, {final, c}, i64());
    const ValueId hi = ix.width == 0 ? last : emit(OpKind::ADD, {last, constant(ix.width)}, i64());
    const Type flag = Type::scalar(DType::boolean);
    conditions_.insert(emit(OpKind::GE, {lo, constant(INT32_MIN)}, flag));
    conditions_.insert(emit(OpKind::LE, {hi, constant(INT32_MAX)}, flag));
    return it->second = {lo, hi};
  }

  // One store, no other side effect, and its lanes iv + c .. iv + c + w with w < step: the
  // iterations write apart, so their order does not matter (what they read nobody writes:
  // checked by the caller).
  bool stores_apart(const Block& body) {
    const Op* store = nullptr;
    for (const Op& op : body.ops) {
      if (op.kind == OpKind::STORE) {
        if (store != nullptr) return false;
        store = &op;
      } else if (has_trait(op.kind, kSideEffect)) {
        return false;
      }
    }
    if (store == nullptr) return false;
    std::optional<Def> d = def(store->operands[0]);
    if (!d || d->kind != OpKind::PTR_OFFSET || !p_.type(d->operands[0]).is_scalar() ||
        !outside(d->operands[0]))
      return false;
    std::optional<Index> ix = index(d->operands[1]);
    return ix && ix->ivs == 1 && ix->width < *defs_.at(step_of_).int_value;
  }

  // Removes pure ops of `block` whose results nothing uses (the masks the copy no longer needs).
  void drop_unused(Block& block) {
    for (bool again = true; again;) {
      again = false;
      std::set<ValueId> used;
      walk(block, [&](const Op& op) { used.insert(op.operands.begin(), op.operands.end()); });
      std::vector<Op> kept;
      for (Op& op : block.ops) {
        bool live = !has_trait(op.kind, kPure) || !op.regions.empty();
        for (ValueId r : op.results) live = live || used.count(r);
        if (live) kept.push_back(std::move(op));
        else again = true;
      }
      block.ops = std::move(kept);
    }
  }

  Program& p_;
  const std::unordered_map<ValueId, Def>& defs_;
  Loc loc_;
  std::vector<Op>& pre_;
  const Block* body_ = nullptr;
  ValueId step_of_ = kNoValue;
  ValueId iv_ = kNoValue, start_ = kNoValue, step_ = kNoValue, whole_n_ = kNoValue, last_ = kNoValue;
  std::unordered_map<ValueId, size_t> inside_;
  std::unordered_map<ValueId, ValueId> copied_;
  std::unordered_map<ValueId, bool> known_;
  std::unordered_map<ValueId, bool> of_dot_;
  std::set<ValueId> conditions_;
  std::vector<ValueId> prefixes_;  // iteration counts, each clamped below at 0
  std::unordered_map<int64_t, ValueId> constants_;
  std::unordered_map<ValueId, ValueId> nonnegative_;
  std::map<std::vector<ValueId>, std::pair<ValueId, ValueId>> ranges_;
};

// Whether an earlier loop of the block (`ranges`: their start, end and step as written) runs
// over the same range as `loop`: then `loop` re-reads what that one read, its last tiles most
// recently.
bool rereads(const Op& loop, const std::vector<std::array<ValueId, 3>>& ranges,
             const std::unordered_map<ValueId, Def>& defs) {
  auto same = [&](ValueId a, ValueId b) {
    if (a == b) return true;
    auto x = defs.find(a), y = defs.find(b);
    return x != defs.end() && y != defs.end() && x->second.int_value && y->second.int_value &&
           *x->second.int_value == *y->second.int_value;
  };
  for (const auto& r : ranges)
    if (same(r[0], loop.operands[0]) && same(r[1], loop.operands[1]) && same(r[2], loop.operands[2]))
      return true;
  return false;
}

void peel_block(Program& p, Block& block, const std::unordered_map<ValueId, Def>& defs,
                bool last_first, bool guard_dots) {
  std::vector<Op> out;
  out.reserve(block.ops.size());
  std::vector<std::array<ValueId, 3>> ranges;
  for (Op& op : block.ops) {
    for (Block& r : op.regions) peel_block(p, r, defs, last_first, guard_dots);
    if (op.kind != OpKind::FOR) {
      out.push_back(std::move(op));
      continue;
    }
    const std::array<ValueId, 3> range{op.operands[0], op.operands[1], op.operands[2]};
    const bool again = rereads(op, ranges, defs);
    ranges.push_back(range);
    if (const Form form = form_of(p, op, defs, guard_dots); form != Form::none) {
      std::vector<Op> pre;
      Peel peel(p, defs, op, pre);
      bool reversed = false;
      if (auto main = peel.run(op, form, last_first && again, reversed)) {
        for (Op& x : pre) out.push_back(std::move(x));
        if (form == Form::guard) {
          out.push_back(std::move(main->first));
          continue;
        }
        op.operands[0] = main->second;
        for (size_t k = 0; k < main->first.results.size(); ++k) op.operands[3 + k] = main->first.results[k];
        if (reversed) {  // the partial tile, then the whole ones from the last
          out.push_back(std::move(op));
          out.push_back(std::move(main->first));
          continue;
        }
        out.push_back(std::move(main->first));
      }
    }
    out.push_back(std::move(op));
  }
  block.ops = std::move(out);
}

}  // namespace

void peel_partial_tiles(Program& program, const TilePassContext& ctx) {
  std::unordered_map<ValueId, Def> defs;
  walk(program.body, [&](const Op& op) {
    if (op.results.size() != 1) return;
    Def d{op.kind, op.operands, 0, std::nullopt};
    if (op.kind == OpKind::ARANGE) d.size = op.attr_int("size");
    if (op.kind == OpKind::CONST && is_int(program.type(op.result()).dtype))
      if (const auto* i = std::get_if<int64_t>(op.find_attr("value"))) d.int_value = *i;
    defs[op.result()] = std::move(d);
  });
  // Last-first re-reads: GPUs only (host devices' caches hold a row; interp and check_bounds
  // report the first bad access, which the order decides), and only when nothing the program
  // reads is written by it (distinct pointer parameters do not alias, as keep_rows assumes).
  bool last_first = !ctx.whole_tiles_in_order && !ctx.device_checks_accesses &&
                    !ctx.options.check_bounds && !ctx.options.disables("last_first");
  if (last_first) {
    const ParamAccess access = param_access(program);
    for (ValueId w : access.written) last_first = last_first && !access.read.count(w);
    // Threadgroup memory is no parameter: a kernel with any may read what it wrote.
    walk(program.body, [&](const Op& op) { last_first = last_first && op.kind != OpKind::SHARED; });
  }
  peel_block(program, program.body, defs, last_first, !ctx.options.disables("whole_blocks"));
}

}  // namespace metile

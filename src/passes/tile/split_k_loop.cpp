// split_k: the K loop of a GEMM-shaped program runs as n program instances (GPU devices).
// Needs: verified Tile IR after the bounds pass. Guarantees:
//   - on devices that run tiles in order on the host (interp, cpu), with split_k 0 (the
//     compiler's choice: no split; on an H100 every split measured slower than none,
//     bench/results/gemm_splitk_h100.md) or 1, with the METILE_GPU_OFF piece "split_k", and
//     for programs of another shape, nothing changes;
//   - a program qualifies when it has no SIMT ops and exactly one top-level tile_range with a
//     positive constant step that carries one value, a 2-D f32 accumulator that starts as a
//     broadcast 0, is read only by the dot that yields it, and whose body has no side effects.
//     Then, with n the hidden i32 parameter (TileHiddenArgs: counters, workspace, n follow the
//     user's parameters; the runtime launches n times the grid's axis 2):
//       - program_id(2) and num_programs(2) mean the user's grid (raw / n); split = raw % n;
//       - part `split` runs iterations [split * c, (split + 1) * c) of the loop's T, c = ceil(T / n);
//       - with n > 1 it stores its accumulator as partial tile (tile * n + split) of the
//         workspace and takes a ticket from the tile's counter (a scalar atomic, which orders
//         the program's device memory: lower_atomic.cpp); the part whose ticket is n - 1 resets
//         the counter to 0 and runs, inside a loop of one iteration, 0 + the n partials in part
//         order (its own read back too) and the rest of the program on that sum;
//       - with n = 1 the partial, the ticket and the workspace are skipped (masked, a loop of
//         no iterations) and the rest of the program reads the accumulator;
//       - an explicit option n larger than max(T, 1) stores the loop's site into the hidden
//         error flag (the runtime fails the launch naming the loop).
//   The workspace accesses stay inside it by construction: the runtime sizes it from the same
//   grid and n (runtime/hidden_args.cpp).
#include <map>
#include <unordered_map>

#include "ir/walk.h"
#include "passes/tile/tile_emit.h"
#include "support/error.h"
#include "target/options.h"

namespace metile {

namespace {

class SplitK {
 public:
  SplitK(Program& p, const TilePassContext& ctx) : p_(p), ctx_(ctx) {}

  void run() {
    def_ = defining_ops(p_.body);
    size_t at = p_.body.ops.size();
    for (size_t i = 0; i < p_.body.ops.size(); ++i)
      if (qualifies(p_.body.ops[i])) {
        if (at != p_.body.ops.size()) return;  // two K loops: which to split is not clear
        at = i;
      }
    if (at == p_.body.ops.size()) return;
    rewrite(at);
  }

 private:
  const Op* def(ValueId v) const {
    auto it = def_.find(v);
    return it == def_.end() ? nullptr : it->second;
  }
  bool is_const(ValueId v, double* value = nullptr) const {
    const Op* d = def(v);
    if (d == nullptr || d->kind != OpKind::CONST) return false;
    if (value) *value = d->attr_num("value");
    return true;
  }

  bool qualifies(const Op& loop) const {
    if (loop.kind != OpKind::FOR || loop.operands.size() != 4 || loop.results.size() != 1) return false;
    const Type& acc = p_.type(loop.results[0]);
    if (!acc.is_tile() || acc.shape.rank != 2 || acc.dtype != DType::f32) return false;
    double step = 0, zero = 1;
    if (!is_const(loop.operands[2], &step) || step <= 0) return false;
    if (!p_.type(loop.operands[0]).is_scalar() || !p_.type(loop.operands[1]).is_scalar()) return false;
    const Op* init = def(loop.operands[3]);
    if (init == nullptr || init->kind != OpKind::BROADCAST || !is_const(init->operands[0], &zero) || zero != 0)
      return false;
    const Block& body = loop.body();
    const ValueId carried = body.args[1];
    const Op& yield = body.ops.back();
    const Op* dot = def(yield.operands.at(0));
    if (dot == nullptr || dot->kind != OpKind::DOT || dot->operands[2] != carried) return false;
    bool ok = true;
    int uses = 0;
    walk(body, [&](const Op& o) {
      if (has_trait(o.kind, kSideEffect)) ok = false;
      for (ValueId x : o.operands) uses += x == carried;
    });
    return ok && uses == 1;
  }

  ValueId emit(OpKind k, std::vector<ValueId> operands, Type t, std::vector<Attr> attrs = {}) {
    return append_op(p_, *out_, k, std::move(operands), t, loc_, std::move(attrs));
  }
  void emit_void(OpKind k, std::vector<ValueId> operands) {
    Op o;
    o.kind = k;
    o.operands = std::move(operands);
    o.loc = loc_;
    out_->push_back(std::move(o));
  }
  ValueId num(DType d, int64_t v) { return emit(OpKind::CONST, {}, Type::scalar(d), {Attr{"value", v}}); }
  ValueId bin(OpKind k, ValueId a, ValueId b) {
    const bool cmp = has_trait(k, kCompare);
    return emit(k, {a, b}, Type::scalar(cmp ? DType::boolean : p_.type(a).dtype));
  }
  ValueId sel(ValueId c, ValueId a, ValueId b) { return emit(OpKind::SELECT, {c, a, b}, p_.type(a)); }
  ValueId as(ValueId v, DType d) { return p_.type(v).dtype == d ? v : emit(OpKind::CAST, {v}, Type::scalar(d)); }
  ValueId grid(OpKind k, int axis) { return emit(k, {}, Type::scalar(DType::i32), {Attr{"axis", int64_t{axis}}}); }

  void rewrite(size_t at) {
    Op& loop = p_.body.ops[at];
    loc_ = loop.loc;
    const Shape tile = p_.type(loop.results[0]).shape;
    const int64_t bm = tile.dims[0], bn = tile.dims[1];
    // The hidden parameters go right after the user's: the bounds pass's extents and error flag
    // stay last (runtime/hidden_args.cpp appends in that order).
    const size_t user = p_.params.size() - ctx_.hidden.extent_of.size() - (ctx_.hidden.error_flag ? 1 : 0);
    const ValueId counters = p_.new_value(Type::ptr(DType::i32));
    const ValueId ws = p_.new_value(Type::ptr(DType::f32));
    const ValueId n = p_.new_value(Type::scalar(DType::i32));
    p_.params.insert(p_.params.begin() + static_cast<std::ptrdiff_t>(user),
                     {Param{fresh_param_name(p_, "split_k_counters"), counters},
                      Param{fresh_param_name(p_, "split_k_workspace"), ws},
                      Param{fresh_param_name(p_, "split_k_parts"), n}});
    ctx_.hidden.split_k_on = true;
    ctx_.hidden.split_k = ctx_.options.split_k;
    ctx_.hidden.split_k_tile = bm * bn;

    std::vector<Op> head;
    out_ = &head;
    const DType i32 = DType::i32;
    const ValueId raw2 = grid(OpKind::PROGRAM_ID, 2);
    const ValueId pid2 = bin(OpKind::FLOORDIV, raw2, n);
    const ValueId split = bin(OpKind::MOD, raw2, n);
    const ValueId np2 = bin(OpKind::FLOORDIV, grid(OpKind::NUM_PROGRAMS, 2), n);
    // The user's axis 2 is the launched one divided by n, wherever the program reads it.
    std::unordered_map<ValueId, ValueId> subst;
    walk(p_.body, [&](const Op& o) {
      if ((o.kind == OpKind::PROGRAM_ID || o.kind == OpKind::NUM_PROGRAMS) && o.attr_int("axis") == 2)
        subst[o.result()] = o.kind == OpKind::PROGRAM_ID ? pid2 : np2;
    });
    rename(p_.body, subst);

    // This part's share of the iterations, computed where the loop's bounds are defined.
    std::vector<Op> pre;
    out_ = &pre;
    const ValueId start = loop.operands[0], end = loop.operands[1], step = loop.operands[2];
    const DType d = p_.type(start).dtype;
    const ValueId one_d = num(d, 1), zero_d = num(d, 0);
    const ValueId trips = bin(OpKind::MAXIMUM,
                              bin(OpKind::FLOORDIV, bin(OpKind::SUB, bin(OpKind::ADD, bin(OpKind::SUB, end, start), step), one_d), step),
                              zero_d);
    const ValueId nd = as(n, d);
    const ValueId chunk = bin(OpKind::FLOORDIV, bin(OpKind::SUB, bin(OpKind::ADD, trips, nd), one_d), nd);
    const ValueId span = bin(OpKind::MUL, chunk, step);
    const ValueId lo = bin(OpKind::ADD, start, bin(OpKind::MUL, as(split, d), span));
    const ValueId hi = bin(OpKind::MINIMUM, end, bin(OpKind::ADD, lo, span));
    ctx_.hidden.sites.push_back(cat(p_.where(loc_), "for: split_k ", ctx_.options.split_k,
                                    " is more than the loop's iterations (split_k <= K / BLOCK_K)"));
    const ValueId bad = bin(OpKind::GT, nd, bin(OpKind::MAXIMUM, trips, one_d));
    const ValueId flag = hidden_error_flag(p_, ctx_.hidden, "split_k_error");
    emit_void(OpKind::STORE, {flag, num(i32, static_cast<int64_t>(ctx_.hidden.sites.size())), bad});
    loop.operands[0] = lo;
    loop.operands[1] = hi;

    std::vector<Op> tail;
    out_ = &tail;
    const ValueId acc = loop.results[0];
    const ValueId tile_id = bin(OpKind::ADD, grid(OpKind::PROGRAM_ID, 0),
                                bin(OpKind::MUL, grid(OpKind::NUM_PROGRAMS, 0),
                                    bin(OpKind::ADD, grid(OpKind::PROGRAM_ID, 1),
                                        bin(OpKind::MUL, grid(OpKind::NUM_PROGRAMS, 1), pid2))));
    const ValueId one = num(i32, 1), zero = num(i32, 0);
    const ValueId multi = bin(OpKind::GT, n, one);
    const ValueId base = bin(OpKind::MUL, tile_id, n);
    const ValueId own_row = bin(OpKind::MUL, bin(OpKind::ADD, base, split), num(i32, bm));
    const ValueId ld = num(i32, bn);
    // Rows bound 0 masks the whole partial when there is nothing to combine (n = 1).
    emit_void(OpKind::TILE_STORE,
              {ws, own_row, zero, ld, acc, sel(multi, bin(OpKind::ADD, own_row, num(i32, bm)), zero), ld});
    const ValueId counter = emit(OpKind::PTR_OFFSET, {counters, tile_id}, Type::ptr(i32));
    const ValueId ticket = emit(OpKind::ATOMIC_ADD, {counter, one, multi}, Type::scalar(i32));
    const ValueId last = bin(OpKind::EQ, ticket, bin(OpKind::SUB, n, one));
    emit(OpKind::ATOMIC_XCHG, {counter, zero, sel(multi, last, multi)}, Type::scalar(i32));

    // if (last): a loop of one iteration (Tile IR has no branch), holding the sum and the rest.
    Op wrap;
    wrap.kind = OpKind::FOR;
    wrap.loc = loc_;
    wrap.operands = {zero, sel(last, one, zero), one};
    Block& wb = wrap.regions.emplace_back();
    wb.args = {p_.new_value(Type::scalar(i32))};
    out_ = &wb.ops;
    // The sum starts from the accumulator itself when there is nothing to add (n = 1), else
    // from 0 plus every partial in part order, this part's read back too: the accumulator is
    // dead before the loop, so the sum takes its registers.
    const Type tt = Type::tile(DType::f32, tile);
    const Type bt = Type::tile(DType::boolean, tile);
    const ValueId zeros = emit(OpKind::BROADCAST, {emit(OpKind::CONST, {}, Type::scalar(DType::f32), {Attr{"value", 0.0}})}, tt);
    const ValueId first = emit(OpKind::SELECT, {emit(OpKind::BROADCAST, {multi}, bt), zeros, acc}, tt);
    Op sum;
    sum.kind = OpKind::FOR;
    sum.loc = loc_;
    sum.operands = {zero, sel(multi, n, zero), one, first};
    const ValueId total = p_.new_value(tt);
    sum.results = {total};
    Block& sb = sum.regions.emplace_back();
    const ValueId j = p_.new_value(Type::scalar(i32)), partial = p_.new_value(tt);
    sb.args = {j, partial};
    out_ = &sb.ops;
    const ValueId row = bin(OpKind::MUL, bin(OpKind::ADD, base, j), num(i32, bm));
    const ValueId other = emit(OpKind::TILE_LOAD, {ws, row, zero, ld}, tt);
    emit_void(OpKind::YIELD, {bin_tile(OpKind::ADD, partial, other, tt)});
    out_ = &wb.ops;
    wb.ops.push_back(std::move(sum));
    // The rest of the program reads the sum where it read the accumulator.
    std::vector<Op> rest(std::make_move_iterator(p_.body.ops.begin() + static_cast<std::ptrdiff_t>(at) + 1),
                         std::make_move_iterator(p_.body.ops.end()));
    p_.body.ops.resize(at + 1);
    Block moved;
    moved.ops = std::move(rest);
    rename(moved, {{acc, total}});
    for (Op& o : moved.ops) wb.ops.push_back(std::move(o));
    emit_void(OpKind::YIELD, {});
    tail.push_back(std::move(wrap));

    std::vector<Op> ops = std::move(head);
    for (size_t i = 0; i < p_.body.ops.size(); ++i) {
      if (i == at)
        for (Op& o : pre) ops.push_back(std::move(o));
      ops.push_back(std::move(p_.body.ops[i]));
    }
    for (Op& o : tail) ops.push_back(std::move(o));
    p_.body.ops = std::move(ops);
  }

  ValueId bin_tile(OpKind k, ValueId a, ValueId b, const Type& t) { return emit(k, {a, b}, t); }

  static void rename(Block& b, const std::unordered_map<ValueId, ValueId>& subst) {
    if (subst.empty()) return;
    for (Op& o : b.ops) {
      for (ValueId& x : o.operands) {
        auto it = subst.find(x);
        if (it != subst.end()) x = it->second;
      }
      for (Block& r : o.regions) rename(r, subst);
    }
  }

  Program& p_;
  const TilePassContext& ctx_;
  DefiningOps<Block> def_;
  std::vector<Op>* out_ = nullptr;
  Loc loc_;
};

}  // namespace

void split_k_loop(Program& program, const TilePassContext& ctx) {
  if (ctx.whole_tiles_in_order || ctx.device_checks_accesses || ctx.options.split_k <= 1) return;
  // SIMT programs (not a num_threads option alone): their threads may exchange partial state.
  bool simt = false;
  walk(program.body, [&](const Op& o) { simt = simt || has_trait(o.kind, kSimt); });
  if (!simt) SplitK(program, ctx).run();
}

}  // namespace metile

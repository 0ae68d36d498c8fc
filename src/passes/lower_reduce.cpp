// Reductions and the ops that move elements between threads (broadcast, reshape).
//
// A whole-tile reduction folds each thread's registers (padding replaced by the identity: 0,
// the lowest or the highest value, never 0 for max/min), then the simdgroup (simd_sum/max/min),
// then the simdgroups' partials through threadgroup memory; every thread ends with the result.
// An axis reduction folds in place where the layout allows (axis_reduce_in_place): each thread
// folds its registers of one output, lanes holding the same outputs combine by shuffles, and
// only when several simdgroups share an output do their partials meet in threadgroup memory;
// the result keeps the input's distribution (replicated over the lanes that combined), so a dot
// accumulator's rows reduce without leaving fragment layout. Otherwise, and for broadcasts, the
// tile is exchanged through threadgroup memory. A reshape is always free: layouts address the
// row-major flattening, which a reshape keeps.
// Whole-tile reductions of one block whose operands are ready share one exchange (one barrier
// pair). Every exchange ends with a barrier, so one scratch array per dtype serves them all;
// whole-tile reductions take turns with a second one, so that barrier can go between two of them.

#include "passes/lower_internal.h"

namespace metile::lowering {

ValueId Lowering::identity(Reduction k, DType d) {
  if (k == Reduction::sum) return zero(d);
  if (is_float(d)) return b.constant_float(d, float_identity(k));
  METILE_ASSERT(int_range(d).has_value(), "no reduction identity for ", dtype_name(d));
  return b.constant_int(d, int_identity(k, d));
}

ValueId Lowering::combine(Reduction k, ValueId x, ValueId y) { return b.ew(combining_op(k), {x, y}); }

ValueId Lowering::scratch(DType d, int64_t size, int turn) {
  auto it = scratch_arrays.find({d, turn});
  if (it == scratch_arrays.end()) {
    ValueId v = b.new_value(d, gpu::kUniform, true, AddrSpace::threadgroup);
    b.named(v, cat("scratch", turn == 0 ? "" : "2", "_", dtype_name(d)));
    it = scratch_arrays.emplace(std::make_pair(d, turn), std::make_pair(v, size)).first;
  }
  it->second.second = std::max(it->second.second, size);
  return it->second.first;
}

namespace {

// Whether two indices of l give the same element (a stride-0 mode).
bool replicated(const metile::Layout& l) {
  const metile::Layout flat = flatten(l);
  const std::vector<int64_t> sizes = flat.shape().leaves(), strides = flat.stride().leaves();
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] > 1 && strides[i] == 0) return true;
  return false;
}

}  // namespace

ValueId Lowering::owner_pred(LayoutId l) {
  // Thread t holds a copy when its coordinate along a stride-0 mode of thr is not 0.
  const metile::Layout flat = flatten(f.layout(l).thr);
  const std::vector<int64_t> sizes = flat.shape().leaves(), strides = flat.stride().leaves();
  ValueId tid = builtin(gpu::Builtin::thread_index), pred = kNoValue;
  int64_t below = 1;
  for (size_t i = 0; i < sizes.size(); below *= sizes[i], ++i) {
    if (sizes[i] == 1 || strides[i] != 0) continue;
    ValueId coord = b.ew(OpKind::MOD, {b.ew(OpKind::DIV, {tid, c_i32(below)}), c_i32(sizes[i])});
    pred = and_pred(pred, b.ew(OpKind::EQ, {coord, c_i32(0)}));
  }
  return pred == kNoValue ? kNoValue : b.named(pred, "owner");
}

void Lowering::reduce(const Op& op) {
  Reduction k = *reduction_of(op.kind);
  int64_t axis = op.attr_int("axis");
  const Type& xt = p.type(op.operands[0]);
  std::string what(reduction_name(k));
  std::string stem = k == Reduction::sum ? what : what + "_val";
  // f16/bf16 accumulate in f32 and round once, as interp does.
  DType out_t = xt.dtype;
  DType d = out_t == DType::f16 || out_t == DType::bf16 ? DType::f32 : out_t;
  auto widen = [&](ValueId v) { return d != out_t ? b.ew(OpKind::CAST, {v}, d) : v; };
  ValueId own = get(op.operands[0]);
  auto finish = [&](ValueId r) {
    if (d != out_t) r = b.ew(OpKind::CAST, {r}, out_t);
    set(op.result(), b.named(r, stem));
  };
  int64_t folded = axis == -1 ? xt.shape.numel() : xt.shape.dims[axis];
  if (f.value(own).layout == gpu::kUniform) {
    // Every element is x: max and min are x, a sum is x times the count.
    ValueId r = widen(own);
    if (k == Reduction::sum && folded != 1) {
      ValueId n = is_float(d) ? b.constant_float(d, static_cast<double>(folded))
                              : b.constant_int(d, folded);
      r = b.ew(OpKind::MUL, {r, n});
    }
    finish(r);
    return;
  }
  if (axis != -1) {
    const Shape& out_shape = p.type(op.result()).shape;
    // In the layout the operand already has (a dot's fragments), else in the canonical one.
    const int ax = static_cast<int>(axis);
    ValueId r = f.layout_of(own).is_tile()
                    ? axis_reduce_in_place(k, widen(own), d, xt.shape, ax, out_shape)
                    : kNoValue;
    if (r == kNoValue) {
      ValueId x = widen(canonical(op.operands[0]));
      r = axis_reduce_in_place(k, x, d, xt.shape, ax, out_shape);
      if (r == kNoValue) r = axis_reduce(k, x, d, xt.shape, ax, out_shape);
    }
    finish(r);
    return;
  }
  // Whole-tile reductions: this one and the later ones of its block that can share its exchange
  // (layernorm's sum and sum of squares): each folds its registers and its simdgroup, then all
  // partials cross threadgroup memory together, one barrier pair for the lot.
  std::vector<const Op*> ops = reductions_together(op, out_t);
  std::vector<ValueId> warp_results;
  int64_t nsg = f.threads / f.simd_width;
  for (const Op* o : ops) {
    current = o;
    b.set_loc(o->loc);
    const Reduction ko = *reduction_of(o->kind);
    const std::string w(reduction_name(ko));
    // In the layout the operand has (a row reduction's slice layout, a dot's fragments) when its
    // registers hold distinct elements: threads that hold copies of the same elements count once
    // in a sum (owner_pred), and max / min do not mind copies.
    ValueId mine = get(o->operands[0]);
    ValueId owner = kNoValue;
    const bool in_place = f.layout_of(mine).is_tile() && !replicated(f.layout_of(mine).reg);
    if (in_place && ko != Reduction::max && ko != Reduction::min) owner = owner_pred(f.value(mine).layout);
    ValueId x = widen(in_place ? mine : canonical(o->operands[0]));
    LayoutId l = f.value(x).layout;
    if (ValueId valid = valid_pred(l); valid != kNoValue) x = b.ew(OpKind::SELECT, {valid, x, identity(ko, d)});
    ValueId part = f.layout(l).regs() > 1 ? b.named(b.reg_reduce(ko, x), "local_" + w) : x;
    if (owner != kNoValue) part = b.ew(OpKind::SELECT, {owner, part, identity(ko, d)});
    warp_results.push_back(b.named(b.simd_reduce(ko, part, nsg == 1), "sg_" + w));
  }
  current = &op;
  b.set_loc(op.loc);
  if (nsg > 1) {
    // Lane 0 of each simdgroup publishes its partials (reduction j at j * nsg + simdgroup);
    // every simdgroup then folds them all.
    const int64_t count = static_cast<int64_t>(ops.size());
    // Every other reduction takes the second array: the next one's writes then need no barrier
    // after this one's reads (elide-barriers removes it), only the one before its own reads.
    const int turn = options.alternate_scratch ? reductions_lowered[d]++ % 2 : 0;
    ValueId buf = scratch(d, nsg * count, turn);
    ValueId lane = builtin(gpu::Builtin::simd_lane), sg = builtin(gpu::Builtin::simdgroup_index);
    ValueId first = b.named(b.ew(OpKind::EQ, {lane, c_i32(0)}), "first_lane");
    for (int64_t j = 0; j < count; ++j) {
      ValueId at = j == 0 ? sg : b.ew(OpKind::ADD, {sg, c_i32(j * nsg)});
      b.store(b.named(b.ew(OpKind::PTR_OFFSET, {buf, at}), "slot"), warp_results[j], first);
    }
    b.barrier();
    // Where the simdgroup reduction is a shuffle tree (5 steps), lane l reads partial l % nsg:
    // each aligned group of nsg lanes then holds all partials and log2(nsg) steps fold them.
    const bool grouped = !target.simd_reduce_instruction && nsg < f.simd_width && (nsg & (nsg - 1)) == 0;
    ValueId from = grouped ? b.ew(OpKind::BITAND, {lane, c_i32(nsg - 1)}) : lane;
    ValueId has_partial = nsg == f.simd_width || grouped
                              ? kNoValue
                              : b.named(b.ew(OpKind::LT, {lane, c_i32(nsg)}), "has_partial");
    for (int64_t j = 0; j < count; ++j) {
      const Reduction kj = *reduction_of(ops[j]->kind);
      ValueId at = b.named(b.ew(OpKind::PTR_OFFSET, {buf, j == 0 ? from : b.ew(OpKind::ADD, {from, c_i32(j * nsg)})}),
                           "lane_slot");
      ValueId partial = has_partial == kNoValue ? b.load(at) : b.load(at, has_partial, identity(kj, d));
      warp_results[j] = b.simd_reduce(kj, b.named(partial, "partial"), true, grouped ? nsg : 0);
    }
    b.barrier();
  }
  for (size_t j = 0; j < ops.size(); ++j) {
    const Reduction kj = *reduction_of(ops[j]->kind);
    ValueId r = warp_results[j];
    if (d != out_t) r = b.ew(OpKind::CAST, {r}, out_t);
    set(ops[j]->result(), b.named(r, kj == Reduction::sum ? std::string(reduction_name(kj))
                                                          : std::string(reduction_name(kj)) + "_val"));
    if (j > 0) lowered_early.insert(ops[j]);
  }
}

std::vector<const Op*> Lowering::reductions_together(const Op& op, DType dtype) {
  std::vector<const Op*> out{&op};
  if (f.threads <= f.simd_width || block_now == nullptr || block_now->ops.empty()) return out;
  const Op* first = &block_now->ops.front();
  if (&op < first || &op >= first + block_now->ops.size()) return out;
  // A later whole-tile reduction of the same block can move up to here when its operand is
  // lowered already (defined before `op`): it reads registers only, so no op in between can
  // change what it computes, and every thread that reaches `op` reaches it.
  for (const Op* o = &op + 1; o < first + block_now->ops.size(); ++o) {
    if (!reduction_of(o->kind) || o->attr_int("axis") != -1 || lowered_early.count(o)) continue;
    ValueId x = o->operands[0];
    if (x >= map.size() || map[x] == kNoValue || f.value(map[x]).layout == gpu::kUniform) continue;
    if (p.type(x).dtype != dtype) continue;
    out.push_back(o);
  }
  return out;
}

ValueId Lowering::axis_reduce(Reduction k, ValueId x, DType d, const Shape& s, int axis,
                              const Shape& out_shape) {
  // The tile goes to threadgroup memory. Each output is then folded by a group of G lanes of
  // one simdgroup (G a power of two, as many as the outputs leave threads for): lane g folds
  // the elements g, g + G, ... of its row or column, and a shuffle_xor tree combines the G
  // partials. Lane 0 of each group publishes the result, which every thread then reads in the
  // output's layout.
  int64_t numel = f.layout_of(x).numel;
  int64_t outputs = out_shape.numel(), length = s.dims[axis];
  int64_t g = 1;
  while (g * 2 <= f.simd_width && g * 2 <= length && outputs * g * 2 <= f.threads) g *= 2;
  LayoutId to = layout_for(out_shape);
  ValueId buf = scratch(d, numel + outputs);
  ValueId tid = builtin(gpu::Builtin::thread_index);
  ValueId e = b.named(b.coord(f.value(x).layout, tid), "idx");
  b.store(b.ew(OpKind::PTR_OFFSET, {buf, e}), x, valid_pred(f.value(x).layout));
  b.barrier();
  // With g == 1 the groups are single threads and each thread folds whole rows: when the
  // outputs outnumber the threads, one loop over them per thread.
  int64_t rounds = (outputs * g + f.threads - 1) / f.threads;
  ValueId lane = b.named(b.ew(OpKind::BITAND, {tid, c_i32(g - 1)}), "part");
  ValueId slot = b.named(b.ew(OpKind::DIV, {tid, c_i32(g)}), "out_slot");
  auto fold = [&](ValueId round) {
    ValueId o = b.named(b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {round, c_i32(f.threads / g)}), slot}), "out_idx");
    ValueId has_output = b.ew(OpKind::LT, {o, c_i32(outputs)});
    ValueId init = b.splat(identity(k, d), gpu::kThread);
    ValueId acc = for_loop(c_i32(0), c_i32((length + g - 1) / g), c_i32(1), {init}, "r",
                           [&](ValueId jj, const std::vector<ValueId>& carried) {
      ValueId j = b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {jj, c_i32(g)}), lane});
      ValueId in = b.ew(OpKind::BITAND, {has_output, b.ew(OpKind::LT, {j, c_i32(length)})});
      ValueId src = axis == 1 ? b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {o, c_i32(s.dims[1])}), j})
                              : b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {j, c_i32(s.dims[1])}), o});
      ValueId v = b.load(b.ew(OpKind::PTR_OFFSET, {buf, src}), in, identity(k, d));
      return std::vector<ValueId>{combine(k, carried[0], v)};
    })[0];
    for (int64_t m = g / 2; m >= 1; m /= 2) acc = combine(k, acc, b.shuffle_xor(acc, c_i32(m)));
    ValueId first = b.ew(OpKind::EQ, {lane, c_i32(0)});
    const ValueId slot = b.ew(OpKind::PTR_OFFSET, {buf, b.ew(OpKind::ADD, {o, c_i32(numel)})});
    b.store(slot, acc, b.ew(OpKind::BITAND, {first, has_output}));  // in this order on every compiler
  };
  each_round(rounds, fold);
  b.barrier();
  ValueId at = b.ew(OpKind::PTR_OFFSET, {buf, b.ew(OpKind::ADD, {b.coord(to, tid), c_i32(numel)})});
  ValueId pred = valid_pred(to);
  ValueId out = pred == kNoValue ? b.load(at) : b.load(at, pred, identity(k, d));
  b.barrier();
  return out;
}

ValueId Lowering::axis_reduce_in_place(Reduction k, ValueId x, DType d, const Shape& s, int axis,
                                       const Shape& out_shape) {
  std::optional<InPlaceReduce> plan =
      plan_in_place_reduce(f.layout_of(x), f.threads, f.simd_width, s, axis, out_shape.numel());
  if (!plan) return kNoValue;
  LayoutId part_l = f.add_layout(plan->part);
  std::string what(reduction_name(k));
  ValueId part = b.named(b.reg_fold(k, x, part_l, plan->fold), "row_" + what);
  for (int64_t m : plan->lane_masks)
    part = b.named(combine(k, part, b.shuffle_xor(part, c_i32(m))), "row_" + what);
  if (plan->sg_bits.empty()) return part;
  // Several simdgroups hold each output: one partial each through threadgroup memory, at
  // output * slots + (the thread's simdgroup bits, packed); every holder writes the same value.
  const std::vector<int>& sg_bits = plan->sg_bits;
  const int64_t slots = int64_t{1} << sg_bits.size(), outputs = out_shape.numel();
  ValueId tid = builtin(gpu::Builtin::thread_index);
  ValueId slot = c_i32(0);
  for (size_t i = 0; i < sg_bits.size(); ++i) {
    ValueId bit = b.ew(OpKind::MOD, {b.ew(OpKind::DIV, {tid, c_i32(int64_t{1} << sg_bits[i])}), c_i32(2)});
    slot = b.ew(OpKind::ADD, {slot, b.ew(OpKind::MUL, {bit, c_i32(int64_t{1} << i)})});
  }
  slot = b.named(slot, "sg_slot");
  ValueId buf = scratch(d, outputs * slots);
  ValueId where = b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {b.coord(part_l, tid), c_i32(slots)}), slot});
  b.store(b.ew(OpKind::PTR_OFFSET, {buf, where}), part);
  b.barrier();
  LayoutId to = layout_for(out_shape);
  ValueId base = b.ew(OpKind::MUL, {b.named(b.coord(to, tid), "out_idx"), c_i32(slots)});
  ValueId pred = valid_pred(to);
  ValueId acc = kNoValue;
  for (int64_t i = 0; i < slots; ++i) {
    ValueId ptr = b.ew(OpKind::PTR_OFFSET, {buf, b.ew(OpKind::ADD, {base, c_i32(i)})});
    ValueId v = pred == kNoValue ? b.load(ptr) : b.load(ptr, pred, identity(k, d));
    acc = acc == kNoValue ? v : combine(k, acc, v);
  }
  b.barrier();
  return b.named(acc, what);
}

void Lowering::broadcast(const Op& op) {
  ValueId x = get(op.operands[0]);
  const Shape& from = p.type(op.operands[0]).shape;
  const Shape& to = p.type(op.result()).shape;
  LayoutId l = layout_of(op.result());
  if (f.value(x).layout == gpu::kUniform || f.value(x).layout == l) {
    set(op.result(), x);  // all elements equal, or only size-1 dimensions were added
    return;
  }
  // numpy alignment: the source's dimensions match the destination's trailing ones.
  int64_t cols = to.rank == 2 ? to.dims[1] : to.dims[0];
  // Where every thread already holds the elements it needs (a row statistic broadcast back
  // over the rows it came from), the registers are only renamed.
  if (f.layout_of(x).is_tile() && f.layout(l).is_tile()) {
    auto source = [&](int64_t e) -> int64_t {
      int64_t row = to.rank == 2 ? e / cols : 0, col = to.rank == 2 ? e % cols : e;
      if (from.rank == 1) return from.dims[0] == 1 ? 0 : col;
      int64_t r = from.dims[0] == 1 ? 0 : row * from.dims[1];
      return from.dims[1] == 1 ? r : r + col;
    };
    if (auto map = gather_map(f.layout_of(x), f.layout(l), f.threads, source)) {
      set(op.result(), b.named(b.reg_gather(x, l, *map), f.value(x).stem));
      return;
    }
  }
  set(op.result(), exchange(x, l, [&](ValueId e) {
        ValueId row = to.rank == 2 ? b.ew(OpKind::DIV, {e, c_i32(cols)}) : kNoValue;
        ValueId col = to.rank == 2 ? b.ew(OpKind::MOD, {e, c_i32(cols)}) : e;
        if (from.rank == 1) return from.dims[0] == 1 ? c_i32(0) : col;
        ValueId r = from.dims[0] == 1 ? c_i32(0) : b.ew(OpKind::MUL, {row, c_i32(from.dims[1])});
        return from.dims[1] == 1 ? r : b.ew(OpKind::ADD, {r, col});
      }));
}

void Lowering::reshape(const Op& op) {
  // A layout maps (thread, register) to the index in the row-major flattening, which a reshape
  // keeps: the value stays where it is, in whatever layout it has.
  set(op.result(), get(op.operands[0]));
}

}  // namespace metile::lowering

// Reductions and the ops that move elements between threads (broadcast, reshape).
//
// A whole-tile reduction folds each thread's registers (padding replaced by the identity: 0,
// the lowest or the highest value, never 0 for max/min), then the simdgroup (simd_sum/max/min),
// then the simdgroups' partials through threadgroup memory; every thread ends with the result.
// An axis reduction and a broadcast exchange the tile through threadgroup memory, and a reshape
// is free whenever both shapes have the same layout (always, with the layouts of lower.cpp).
// Every exchange ends with a barrier, so one scratch array per dtype serves them all.
#include <limits>

#include "passes/lower_internal.h"

namespace metile::lowering {

ValueId Lowering::identity(OpKind k, DType d) {
  if (k == OpKind::REDUCE_SUM) return zero(d);
  bool max = k == OpKind::REDUCE_MAX;
  if (is_float(d)) {
    double inf = std::numeric_limits<double>::infinity();
    return b.constant_float(d, max ? -inf : inf);
  }
  int64_t lo = 0, hi = 0;
  switch (d) {
    case DType::i32: lo = INT32_MIN; hi = INT32_MAX; break;
    case DType::u32: lo = 0; hi = UINT32_MAX; break;
    case DType::i64: lo = INT64_MIN; hi = INT64_MAX; break;
    case DType::i8: lo = INT8_MIN; hi = INT8_MAX; break;
    case DType::u8: lo = 0; hi = UINT8_MAX; break;
    default: METILE_ASSERT(false, "no reduction identity for ", dtype_name(d));
  }
  return b.constant_int(d, max ? lo : hi);
}

ValueId Lowering::combine(OpKind k, ValueId x, ValueId y) {
  OpKind e = k == OpKind::REDUCE_SUM ? OpKind::ADD
             : k == OpKind::REDUCE_MAX ? OpKind::MAXIMUM
                                       : OpKind::MINIMUM;
  return b.ew(e, {x, y});
}

ValueId Lowering::scratch(DType d, int64_t size) {
  auto it = scratch_arrays.find(d);
  if (it == scratch_arrays.end()) {
    ValueId v = b.new_value(d, gpu::kUniform, true, AddrSpace::threadgroup);
    b.named(v, cat("scratch_", dtype_name(d)));
    it = scratch_arrays.emplace(d, std::make_pair(v, size)).first;
  }
  it->second.second = std::max(it->second.second, size);
  return it->second.first;
}

void Lowering::reduce(const Op& op) {
  OpKind k = op.kind;
  int64_t axis = op.attr_int("axis");
  const Type& xt = p.type(op.operands[0]);
  ValueId x = get(op.operands[0]);
  std::string stem = k == OpKind::REDUCE_SUM ? "sum" : k == OpKind::REDUCE_MAX ? "max_val" : "min_val";
  // f16/bf16 accumulate in f32 and round once, as interp does.
  DType out_t = xt.dtype;
  DType d = out_t == DType::f16 || out_t == DType::bf16 ? DType::f32 : out_t;
  if (d != out_t) x = b.ew(OpKind::CAST, {x}, d);
  auto finish = [&](ValueId r) {
    if (d != out_t) r = b.ew(OpKind::CAST, {r}, out_t);
    set(op.result(), b.named(r, stem));
  };
  int64_t folded = axis == -1 ? xt.shape.numel() : xt.shape.dims[axis];
  if (f.value(x).layout == gpu::kUniform) {
    // Every element is x: max and min are x, a sum is x times the count.
    ValueId r = x;
    if (k == OpKind::REDUCE_SUM && folded != 1) {
      ValueId n = is_float(d) ? b.constant_float(d, static_cast<double>(folded))
                              : b.constant_int(d, folded);
      r = b.ew(OpKind::MUL, {x, n});
    }
    finish(r);
    return;
  }
  if (axis != -1) {
    // Through threadgroup memory: each output register folds its row or column in order.
    const Shape& s = xt.shape;
    int64_t numel = f.layout_of(x).numel;
    LayoutId to = layout_for(p.type(op.result()).shape);
    ValueId buf = scratch(d, numel);
    ValueId e = b.named(b.coord(f.value(x).layout, builtin("thread_index")), "idx");
    b.store(b.ew(OpKind::PTR_OFFSET, {buf, e}), x, valid_pred(f.value(x).layout));
    b.barrier();
    ValueId out_i = b.named(b.coord(to, builtin("thread_index")), "out_idx");
    ValueId pred = valid_pred(to);
    ValueId init = b.named(b.splat(identity(k, d), to), "acc");
    ValueId result = for_loop(c_i32(0), c_i32(s.dims[axis]), c_i32(1), {init}, "r",
                              [&](ValueId j, const std::vector<ValueId>& acc) {
      ValueId src = axis == 1
                        ? b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {out_i, c_i32(s.dims[1])}), j})
                        : b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {j, c_i32(s.dims[1])}), out_i});
      ValueId at = b.ew(OpKind::PTR_OFFSET, {buf, src});
      ValueId v = pred == kNoValue ? b.load(at) : b.load(at, pred, identity(k, d));
      return std::vector<ValueId>{combine(k, acc[0], v)};
    })[0];
    b.barrier();
    finish(result);
    return;
  }
  LayoutId l = f.value(x).layout;
  if (ValueId valid = valid_pred(l); valid != kNoValue) x = b.ew(OpKind::SELECT, {valid, x, identity(k, d)});
  std::string what = stem.substr(0, 3);  // sum, max, min
  ValueId part = f.layout(l).regs() > 1 ? b.named(b.reg_reduce(k, x), "local_" + what) : x;
  int64_t nsg = f.threads / f.simd_width;
  ValueId r = b.named(b.simd_reduce(k, part, nsg == 1), "sg_" + what);
  if (nsg > 1) {
    // Lane 0 of each simdgroup publishes its partial; every simdgroup then folds them all.
    ValueId buf = scratch(d, nsg);
    ValueId lane = builtin("simd_lane"), sg = builtin("simdgroup_index");
    ValueId slot = b.named(b.ew(OpKind::PTR_OFFSET, {buf, sg}), "slot");
    b.store(slot, r, b.named(b.ew(OpKind::EQ, {lane, c_i32(0)}), "first_lane"));
    b.barrier();
    ValueId at = b.named(b.ew(OpKind::PTR_OFFSET, {buf, lane}), "lane_slot");
    ValueId partial = nsg == f.simd_width
                          ? b.load(at)
                          : b.load(at, b.named(b.ew(OpKind::LT, {lane, c_i32(nsg)}), "has_partial"),
                                   identity(k, d));
    r = b.simd_reduce(k, b.named(partial, "partial"), true);
    b.barrier();
  }
  finish(r);
}

void Lowering::broadcast(const Op& op) {
  ValueId x = get(op.operands[0]);
  const Shape& from = p.type(op.operands[0]).shape;
  const Shape& to = p.type(op.result()).shape;
  LayoutId l = layout_for(to);
  if (f.value(x).layout == gpu::kUniform || f.value(x).layout == l) {
    set(op.result(), x);  // all elements equal, or only size-1 dimensions were added
    return;
  }
  // numpy alignment: the source's dimensions match the destination's trailing ones.
  int64_t cols = to.rank == 2 ? to.dims[1] : to.dims[0];
  set(op.result(), exchange(x, l, [&](ValueId e) {
        ValueId row = to.rank == 2 ? b.ew(OpKind::DIV, {e, c_i32(cols)}) : kNoValue;
        ValueId col = to.rank == 2 ? b.ew(OpKind::MOD, {e, c_i32(cols)}) : e;
        if (from.rank == 1) return from.dims[0] == 1 ? c_i32(0) : col;
        ValueId r = from.dims[0] == 1 ? c_i32(0) : b.ew(OpKind::MUL, {row, c_i32(from.dims[1])});
        return from.dims[1] == 1 ? r : b.ew(OpKind::ADD, {r, col});
      }));
}

void Lowering::reshape(const Op& op) {
  ValueId x = get(op.operands[0]);
  LayoutId l = layout_for(p.type(op.result()).shape);
  if (f.value(x).layout == gpu::kUniform || f.value(x).layout == l) {
    set(op.result(), x);
    return;
  }
  set(op.result(), exchange(x, l, [](ValueId e) { return e; }));
}

}  // namespace metile::lowering

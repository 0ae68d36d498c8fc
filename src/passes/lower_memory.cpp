// Lowering of memory ops. Every access is predicated per register: the user's mask, the
// layout's padding (registers past the tile's end touch nothing) and, for stores to T-element
// tiles, the enclosing simdgroup role. A write whose operands are all uniform happens once,
// in thread 0, rather than once per thread. tile_load/tile_store compute each register's
// (row, col) from its element index, so rows and columns are honoured exactly, and the
// blocked layout makes consecutive threads cover consecutive columns (coalesced).
#include "passes/lower_internal.h"

namespace metile::lowering {

namespace {

// The index type of a tile access: wide enough for every operand.
DType index_type(const gpu::Function& f, const std::vector<ValueId>& vs) {
  for (ValueId v : vs) {
    DType d = f.value(v).dtype;
    if (d == DType::i64 || d == DType::u32) return DType::i64;
  }
  return DType::i32;
}

}  // namespace

void Lowering::load(const Op& op) {
  ValueId ptrs = get(op.operands[0]);
  // Masks and fill values follow the pointers' layout (a fragment-layout mask is converted).
  auto follow = [&](size_t i) {
    ValueId v = get(op.operands[i]);
    LayoutId pl = f.value(ptrs).layout;
    return f.layout(pl).is_tile() && f.layout_of(v).is_tile() ? operand_in(op.operands[i], pl) : v;
  };
  ValueId mask = op.operands.size() > 1 ? follow(1) : kNoValue;
  ValueId other = op.operands.size() > 2 ? follow(2) : kNoValue;
  std::vector<ValueId> all{ptrs};
  if (mask != kNoValue) all.push_back(mask);
  if (other != kNoValue) all.push_back(other);
  LayoutId l = b.join(all);
  ValueId pred = and_pred(mask, f.layout(l).is_tile() ? valid_pred(l) : kNoValue);
  DType d = f.value(ptrs).dtype;
  ValueId r = pred == kNoValue ? b.load(ptrs)
                               : b.load(ptrs, pred, other != kNoValue ? other : zero(d));
  std::string stem = param_stem(ptrs);
  bool taken = f.value(ptrs).space == AddrSpace::threadgroup;  // the array's own name
  for (const gpu::GpuParam& prm : f.params) taken = taken || prm.name == stem;
  if (taken) stem += "_val";
  set(op.result(), b.named(r, stem));
}

void Lowering::store(const Op& op) {
  ValueId ptrs = get(op.operands[0]);
  auto follow = [&](size_t i) {
    ValueId v = get(op.operands[i]);
    LayoutId pl = f.value(ptrs).layout;
    return f.layout(pl).is_tile() && f.layout_of(v).is_tile() ? operand_in(op.operands[i], pl) : v;
  };
  ValueId value = follow(1);
  ValueId mask = op.operands.size() > 2 ? follow(2) : kNoValue;
  std::vector<ValueId> all{ptrs, value};
  if (mask != kNoValue) all.push_back(mask);
  LayoutId l = b.join(all);
  if (f.value(value).stem == "t" && f.value(ptrs).space == AddrSpace::device)
    b.named(value, param_stem(ptrs));  // the value stored to Out reads as out[r]
  ValueId pred = mask;
  if (f.layout(l).is_tile()) {
    pred = and_pred(and_pred(pred, valid_pred(l)), role_predicate(op.operands[0]));
  } else {
    // All elements equal and one address: one thread writes it.
    ValueId leader = b.ew(OpKind::EQ, {builtin(gpu::Builtin::thread_index), c_i32(0)});
    pred = and_pred(pred, b.named(leader, "leader"));
  }
  b.store(ptrs, value, pred);
}

std::pair<ValueId, ValueId> Lowering::tile_access(ValueId ptr, std::vector<ValueId> ix,
                                                  const Shape& shape, LayoutId l) {
  DType it = index_type(f, ix);
  for (ValueId& v : ix)
    if (f.value(v).dtype != it) v = b.ew(OpKind::CAST, {v}, it);
  ValueId e = b.named(b.coord(l, builtin(gpu::Builtin::thread_index)), "idx");
  if (it != DType::i32) e = b.ew(OpKind::CAST, {e}, it);
  ValueId cols = b.constant_int(it, shape.dims[1]);
  ValueId row = b.named(b.ew(OpKind::ADD, {ix[0], b.ew(OpKind::DIV, {e, cols})}), "row");
  ValueId col = b.named(b.ew(OpKind::ADD, {ix[1], b.ew(OpKind::MOD, {e, cols})}), "col");
  ValueId off = b.named(b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {row, ix[2]}), col}), "off");
  ValueId ptrs = b.named(b.ew(OpKind::PTR_OFFSET, {ptr, off}), param_stem(ptr) + "_ptrs");
  ValueId pred = valid_pred(l);
  if (ix.size() == 5) {
    ValueId z = b.constant_int(it, 0);
    ValueId in_rows =
        b.ew(OpKind::BITAND, {b.ew(OpKind::GE, {row, z}), b.ew(OpKind::LT, {row, ix[3]})});
    ValueId in_cols =
        b.ew(OpKind::BITAND, {b.ew(OpKind::GE, {col, z}), b.ew(OpKind::LT, {col, ix[4]})});
    pred = and_pred(pred, b.named(b.ew(OpKind::BITAND, {in_rows, in_cols}), "in_bounds"));
  }
  return {ptrs, pred};
}

void Lowering::tile_load(const Op& op) {
  if (direct_loads.count(&op)) return;  // its dot copies it to threadgroup memory itself
  std::vector<ValueId> ix;
  for (size_t i = 1; i < op.operands.size(); ++i) ix.push_back(get(op.operands[i]));
  // In its assigned layout: a tile loaded only to be broadcast is read where it is used.
  auto [ptrs, pred] = tile_access(get(op.operands[0]), ix, p.type(op.result()).shape, layout_of(op.result()));
  DType d = f.value(ptrs).dtype;
  ValueId r = pred == kNoValue ? b.load(ptrs) : b.load(ptrs, pred, zero(d));
  set(op.result(), b.named(r, "tile"));
}

void Lowering::tile_store(const Op& op) {
  std::vector<ValueId> ix;
  for (size_t i = 1; i < op.operands.size(); ++i)
    if (i != 4) ix.push_back(get(op.operands[i]));
  // Written from the layout the value lives in: a dot's accumulator straight from its fragments.
  ValueId value = get(op.operands[4]);
  const Shape& shape = p.type(op.operands[4]).shape;
  LayoutId l = f.layout_of(value).is_tile() ? f.value(value).layout : layout_for(shape);
  auto [ptrs, pred] = tile_access(get(op.operands[0]), ix, shape, l);
  b.store(ptrs, value, pred);
}

void Lowering::shared(const Op& op) {
  // interp gives every program instance zero-filled shared memory; so does the GPU: the
  // threads clear it together before the body runs (one barrier for all arrays).
  DType d = p.type(op.result()).dtype;
  int64_t size = op.attr_int("size");
  const bool row = op.find_attr("row") != nullptr && op.attr_int("row") != 0;
  ValueId buf = pb.alloc(d, gpu::SharedArray::linear({size}), row ? "row" : "smem");
  set(op.result(), buf);
  // A kept row (keep_rows): read only where its copy loop wrote, so never cleared; the alloc
  // says so to copy-rows-async.
  if (row) {
    pb.block()->ops.back().set_attr("row", int64_t{1});
    return;
  }
  gpu::Block* saved = b.block();
  b.set_block(&init);
  ValueId tid = builtin(gpu::Builtin::thread_index);
  auto clear = [&](ValueId base) {
    ValueId i = b.ew(OpKind::ADD, {tid, base});
    ValueId in = size % f.threads == 0 ? kNoValue : b.ew(OpKind::LT, {i, c_i32(size)});
    b.store(b.ew(OpKind::PTR_OFFSET, {buf, i}), zero(d), in);
  };
  if (size <= f.threads) {
    clear(c_i32(0));
  } else {
    for_loop(c_i32(0), c_i32(size), c_i32(f.threads), {}, "i", [&](ValueId base, const auto&) {
      clear(base);
      return std::vector<ValueId>{};
    });
  }
  b.set_block(saved);
}

}  // namespace metile::lowering

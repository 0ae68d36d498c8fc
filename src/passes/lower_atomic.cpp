// Lowering of atomics. A tile atomic does one atomic per register under the predicate a store
// would get (the user's mask, the layout's padding, the enclosing simdgroup role), and masked
// registers read 0, as on interp. A scalar atomic happens once per program: thread 0 does it
// and its old value reaches every thread through threadgroup memory. Types and ops the target
// has no atomic for are rejected here, before any source is written.
#include <algorithm>

#include "passes/lower_internal.h"

namespace metile::lowering {

namespace {

template <typename T>
bool has(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

void Lowering::atomic(const Op& op) {
  const DType d = p.type(op.operands[0]).dtype;
  if (!has(target.atomic_dtypes, d) || (d == DType::f32 && !has(target.atomic_f32_ops, op.kind))) {
    std::string have;
    for (DType t : target.atomic_dtypes) {
      bool all = t != DType::f32 || target.atomic_f32_ops.size() == 5;
      have += std::string(have.empty() ? "" : ", ") + dtype_name(t) + (all ? "" : " (add only)");
    }
    unsupported("no atomic on ", dtype_name(d), " in ", target.dialect, " (it has ", have, ")");
  }
  const bool cas = op.kind == OpKind::ATOMIC_CAS;
  const size_t values = cas ? 2 : 1;
  const Shape& shape = p.type(op.result()).shape;
  ValueId ptrs = get(op.operands[0]);
  // A tile whose operands are all uniform still does one atomic per element: spread it out.
  if (shape.rank > 0 && !f.layout(b.join({ptrs})).is_tile()) {
    bool uniform = true;
    for (ValueId v : op.operands) uniform = uniform && !f.layout_of(get(v)).is_tile();
    if (uniform) ptrs = materialize(ptrs, layout_for(shape));
  }
  auto follow = [&](size_t i) {
    ValueId v = get(op.operands[i]);
    LayoutId pl = f.value(ptrs).layout;
    return f.layout(pl).is_tile() && f.layout_of(v).is_tile() ? materialize(v, pl) : v;
  };
  ValueId cmp = cas ? follow(1) : kNoValue;
  ValueId value = follow(values);
  ValueId mask = op.operands.size() > values + 1 ? follow(values + 1) : kNoValue;
  std::vector<ValueId> all{ptrs, value};
  if (cmp != kNoValue) all.push_back(cmp);
  if (mask != kNoValue) all.push_back(mask);
  LayoutId l = b.join(all);
  if (f.layout(l).is_tile()) {
    ValueId pred = and_pred(and_pred(mask, valid_pred(l)), role_predicate(op.operands[0]));
    set(op.result(), b.named(b.atomic(op.kind, ptrs, cmp, value, pred), "old"));
    return;
  }
  // In a kernel that both writes and reads some buffer, a scalar atomic also orders the
  // program's device memory: what every thread stored before it is visible to a program that
  // sees its result, and what they load after it sees what such programs stored (split_k's
  // tickets rely on this).
  const bool order = device_exchange();
  auto barrier = [&] {
    b.barrier();
    if (order) b.block()->ops.back().attrs.push_back({"device", int64_t{1}});
  };
  if (order) barrier();
  ValueId leader = b.named(b.ew(OpKind::EQ, {builtin(gpu::Builtin::thread_index), c_i32(0)}), "leader");
  ValueId mine = b.atomic(op.kind, ptrs, cmp, value, and_pred(mask, leader));
  ValueId slot = scratch(d, 1);
  b.store(slot, mine, leader);
  barrier();
  ValueId old = b.named(b.load(slot), "old");
  b.barrier();  // the slot is free again for the next exchange
  set(op.result(), old);
}

}  // namespace metile::lowering

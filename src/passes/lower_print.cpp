// device_print: each thread prints the elements it holds (the activity masks and padding
// predicated off); a scalar, or a print without values, prints from one thread. The user's text
// travels as the op's head and label attributes, which the emitters write as byte arrays.
#include "passes/lower_internal.h"

namespace metile::lowering {

void Lowering::print(const Op& op) {
  if (options.device == "metal")
    unsupported("the metal device has no printf; run the kernel on metal-sim, cpu or interp to "
                "see its prints");
  const std::string head = p.where(op.loc);
  const size_t n = device_print_values(op);
  const bool masked = op.attr_int("masked") != 0;
  std::vector<ValueId> pid;
  for (int axis = 0; axis < 3; ++axis) pid.push_back(builtin(gpu::Builtin::threadgroup_position, axis));
  ValueId tid = builtin(gpu::Builtin::thread_index);
  // One thread speaks for the program: the first of the enclosing role's threads.
  ValueId first = b.named(b.ew(OpKind::EQ, {tid, c_i32(role_lo)}), "first_thread");
  if (n == 0) {
    b.print(first, pid, c_i32(0), c_i32(0), c_i32(0), head, device_print_label(op, 0), -1);
    return;
  }
  for (size_t k = 0; k < n; ++k) {
    const Type& t = p.type(op.operands[k]);
    const std::string label = device_print_label(op, k);
    if (t.is_scalar()) {
      ValueId pred = masked ? and_pred(first, get(op.operands[n + k])) : first;
      b.print(pred, pid, c_i32(0), c_i32(0), get(op.operands[k]), head, label, 0);
      continue;
    }
    ValueId x = as_tile(op.operands[k]);
    LayoutId l = f.value(x).layout;
    ValueId pred = valid_pred(l);
    if (masked) pred = and_pred(pred, as_tile(op.operands[n + k]));
    if (pred == kNoValue) pred = b.splat(b.constant_int(DType::boolean, 1), l);
    ValueId e = b.named(b.coord(l, tid), "idx");
    ValueId i = e, j = c_i32(0);
    if (t.shape.rank == 2) {
      i = b.ew(OpKind::DIV, {e, c_i32(t.shape.dims[1])});
      j = b.ew(OpKind::MOD, {e, c_i32(t.shape.dims[1])});
    }
    b.print(pred, pid, i, j, x, head, label, t.shape.rank);
  }
}

}  // namespace metile::lowering

// lower_convert_layout: replaces each convert_layout with a round trip through its scratch
// array: every thread stores its registers at their element index, a barrier, every thread
// loads the elements it owns in the new layout, and a barrier before the array is reused.
// Needs: verified GPU IR in thread-uniform control flow (lowering's). Guarantees: no
// convert_layout is left; padding registers neither store nor load (they read 0).
#include "passes/pass.h"

namespace metile {

namespace {

void expand(gpu::Function& f, const gpu::Op& c, gpu::Block& out) {
  gpu::GpuBuilder b(f, &out);
  b.set_loc(c.loc);
  const ValueId x = c.operands[0], buf = c.operands[1], tid = c.operands[2];
  const gpu::Value r = f.value(c.result());  // copies: new values grow the tables
  const gpu::LayoutId from = f.value(x).layout, to = r.layout;
  auto valid = [&](gpu::LayoutId l) {
    return f.layout(l).padded ? b.named(b.valid(l, tid), "in_tile") : kNoValue;
  };
  ValueId e_from = b.named(b.coord(from, tid), "idx");
  // One statement each: the order of a call's arguments is the compiler's, the ops' is not.
  const ValueId in_from = valid(from);
  const ValueId at_from = b.ew(OpKind::PTR_OFFSET, {buf, e_from});
  b.store(at_from, x, in_from);
  b.barrier();
  ValueId e_to = b.named(b.coord(to, tid), "idx");
  ValueId at = b.ew(OpKind::PTR_OFFSET, {buf, e_to});
  ValueId pred = valid(to);
  if (pred == kNoValue) {
    b.load(at);
  } else {
    ValueId zero = is_float(r.dtype) ? b.constant_float(r.dtype, 0.0) : b.constant_int(r.dtype, 0);
    b.load(at, pred, zero);
  }
  out.ops.back().results[0] = c.result();  // the load defines the converted value itself
  b.barrier();
}

void rewrite(gpu::Function& f, gpu::Block& blk) {
  std::vector<gpu::Op> ops;
  ops.reserve(blk.ops.size());
  for (gpu::Op& op : blk.ops) {
    for (gpu::Block& r : op.regions) rewrite(f, r);
    if (op.kind != gpu::GpuOpKind::CONVERT_LAYOUT) {
      ops.push_back(std::move(op));
      continue;
    }
    gpu::Block expanded;
    expand(f, op, expanded);
    for (gpu::Op& e : expanded.ops) ops.push_back(std::move(e));
  }
  blk.ops = std::move(ops);
}

}  // namespace

void lower_convert_layout(gpu::Function& f, const PassContext&) { rewrite(f, f.body); }

}  // namespace metile

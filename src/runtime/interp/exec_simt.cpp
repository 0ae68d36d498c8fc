// The interp executor's SIMT view (thread and lane ids, shuffles) and tile_swizzle (semantics:
// the opening comment of executor.cpp).
#include "runtime/interp/instance.h"

#include "ir/swizzle_names.h"

namespace metile::interp {

void Instance::simt(const Op& op) {
  const size_t t = static_cast<size_t>(threads_);
  Val out;
  if (op.kind == OpKind::THREAD_ID || op.kind == OpKind::SIMD_LANE_ID) {
    out.e.resize(t);
    for (size_t i = 0; i < t; ++i)
      out.e[i] = int_elem(op.kind == OpKind::THREAD_ID ? static_cast<int64_t>(i)
                                                       : static_cast<int64_t>(i % kLanes));
    set(op, std::move(out));
    return;
  }
  const Val& x = val(op.operands[0]);
  const int64_t lane = scalar(op.operands[1]);
  const bool xor_mode = op.kind == OpKind::SIMD_SHUFFLE_XOR;
  if (lane < 0 || lane >= kLanes)
    fault(cat(xor_mode ? "mask " : "lane ", lane, " is outside [0, 32)"));
  if (type(op.operands[0]).is_scalar()) {
    set(op, x);
    return;
  }
  out.e.resize(t);
  for (size_t i = 0; i < t; ++i) {
    const size_t from = xor_mode
                            ? i ^ static_cast<size_t>(lane)
                            : (i & ~static_cast<size_t>(kLanes - 1)) + static_cast<size_t>(lane);
    if (from >= t)
      fault(cat("thread ", i, " reads lane ", from % kLanes, " of its simdgroup, thread ", from,
                ", which is past the thread count ", t));
    out.e[i] = x.e[from];
  }
  set(op, std::move(out));
}

void Instance::swizzle(const Op& op) {
  const int64_t pm = scalar(op.operands[0]), pn = scalar(op.operands[1]);
  const int64_t gm = l_.grid.dims[0], gn = l_.grid.dims[1];
  if (pm < 0 || pm >= gm || pn < 0 || pn >= gn)
    fault(cat("program ids (", pm, ", ", pn, ") are outside the ", gm, " x ", gn, " grid"));
  const std::string& pattern = op.attr_str("pattern");
  const int code = swizzle_code(pattern);
  metile_swizzled<int64_t> r =
      metile_swizzle<int64_t>(code, pm, pn, gm, gn, op.attr_int("block_size"));
  env_[op.results[0]] = Val{{int_elem(r.m)}, {}};
  env_[op.results[1]] = Val{{int_elem(r.n)}, {}};
}

}  // namespace metile::interp

// Scans (cumsum, cumprod) and the transpose: ops that move elements between threads.
//
// A scan writes the tile to threadgroup memory and gives each line (a row or column along the
// axis; the whole tile when 1-D) to one thread, which folds it in order in place, as interp
// does, so float results agree bit for bit. Lines beyond the thread count take further rounds.
// Every thread then reads its elements back in the result's layout. A transpose is one exchange
// through threadgroup memory that reads each element from its mirrored index.
#include "passes/lower_internal.h"

namespace metile::lowering {

void Lowering::scan(const Op& op) {
  const Type& xt = p.type(op.operands[0]);
  const Shape& s = xt.shape;
  const int64_t axis = op.attr_int("axis");
  const bool reverse = op.attr_int("reverse") != 0, sum = op.kind == OpKind::CUMSUM;
  DType out_t = xt.dtype;
  // f16/bf16 accumulate in f32 and round each output once, as interp does.
  DType d = out_t == DType::f16 || out_t == DType::bf16 ? DType::f32 : out_t;
  ValueId x = as_tile(op.operands[0]);
  if (d != out_t) x = b.ew(OpKind::CAST, {x}, d);
  LayoutId l = f.value(x).layout;
  const int64_t numel = s.numel();
  const int64_t cols = s.rank == 2 ? s.dims[1] : s.dims[0];
  const int64_t len = s.rank == 2 && axis == 0 ? s.dims[0] : cols;
  const int64_t lines = numel / len;
  ValueId buf = scratch(d, numel);
  ValueId tid = builtin(gpu::Builtin::thread_index);
  ValueId e = b.named(b.coord(l, tid), "idx");
  b.store(b.ew(OpKind::PTR_OFFSET, {buf, e}), x, valid_pred(l));
  b.barrier();
  ValueId identity = is_float(d) ? b.constant_float(d, sum ? 0.0 : 1.0) : b.constant_int(d, sum ? 0 : 1);
  auto fold = [&](ValueId round) {
    ValueId line = b.named(b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {round, c_i32(f.threads)}), tid}), "line");
    ValueId has_line = b.named(b.ew(OpKind::LT, {line, c_i32(lines)}), "has_line");
    ValueId init = b.splat(identity, gpu::kThread);
    for_loop(c_i32(0), c_i32(len), c_i32(1), {init}, "n", [&](ValueId n, const std::vector<ValueId>& carried) {
      ValueId at = reverse ? b.ew(OpKind::SUB, {c_i32(len - 1), n}) : n;
      // Element `at` of the line: along a row (1-D, axis 1) or down a column (axis 0).
      ValueId k = s.rank == 2 && axis == 0
                      ? b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {at, c_i32(cols)}), line})
                      : b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {line, c_i32(len)}), at});
      ValueId ptr = b.ew(OpKind::PTR_OFFSET, {buf, k});
      ValueId v = b.load(ptr, has_line, identity);
      ValueId acc = b.named(b.ew(sum ? OpKind::ADD : OpKind::MUL, {carried[0], v}), sum ? "running_sum" : "running_prod");
      b.store(ptr, acc, has_line);
      return std::vector<ValueId>{acc};
    });
  };
  int64_t rounds = (lines + f.threads - 1) / f.threads;
  each_round(rounds, fold);
  b.barrier();
  ValueId at = b.ew(OpKind::PTR_OFFSET, {buf, b.coord(l, tid)});
  ValueId pred = valid_pred(l);
  ValueId out = pred == kNoValue ? b.load(at) : b.load(at, pred, identity);
  b.barrier();
  if (d != out_t) out = b.ew(OpKind::CAST, {out}, out_t);
  set(op.result(), b.named(out, sum ? "cumsum" : "cumprod"));
}

void Lowering::trans(const Op& op) {
  // B = trans(x) of a dot that copies x itself (DotChoice::b_kmajor on mma.sync, K-major for the
  // tf32 and FP8 warpgroup atoms: dot_choices.cpp): x, one of direct_loads, was never lowered,
  // and the dot reads neither value.
  if (map[op.operands[0]] == kNoValue) return;
  // Nothing reads it (a transpose that a later trans() cancelled in the builder: dot_scaled's
  // decode of bytes transposed from an N x K load): no exchange and no barriers for it.
  if (reads_of(op.result()) == 0) return;
  ValueId x = get(op.operands[0]);
  const Shape& from = p.type(op.operands[0]).shape;
  if (f.value(x).layout == gpu::kUniform) {
    set(op.result(), x);  // every element is the same
    return;
  }
  if (only_a_dot_reads(op.result())) {  // the dot stages x transposed (lower_trans_operand.cpp)
    trans_views[op.result()] = op.operands[0];
    set(op.result(), x);
    return;
  }
  // Result element e = (i, j) of the C x R result is element (j, i) of the R x C operand.
  const int64_t rows = from.dims[0], cols = from.dims[1];
  set(op.result(), exchange(x, layout_for(p.type(op.result()).shape), [&](ValueId e) {
        ValueId i = b.ew(OpKind::DIV, {e, c_i32(rows)}), j = b.ew(OpKind::MOD, {e, c_i32(rows)});
        return b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {j, c_i32(cols)}), i});
      }));
}

}  // namespace metile::lowering

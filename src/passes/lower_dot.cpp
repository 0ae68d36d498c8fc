// dot on matrix units.
//
// Layout assignment (assign_layouts.cpp) chose each dot's atom, warp grid and accumulator
// fragment layout, and carried that layout through the epilogue and the loop-carried
// accumulator, so a K loop never leaves fragment layout and tile_store writes straight from the
// fragments. A dot without an atom runs as exact FMAs (products and sums in f32, as interp
// computes) over the same staged operands, in layout_for(acc shape): the exact-f32 path when
// TF32 is off, and the path for 1-row or 1-column tiles.
//
// Operands are staged into their own threadgroup arrays with rows padded by 16 bytes, so the
// row-strided fragment reads of one warp fall in distinct banks; a barrier before the `mma`
// op (spelled by each dialect: simdgroup_matrix on MSL, mma.sync on CUDA) and one after it,
// before the next stage overwrites the arrays. When A and B would take more than half the
// target's threadgroup memory, K is staged in chunks (each a stage, an mma and two barriers).
//
// A dot operand that a tile_load of the same block produces, with nothing that writes memory
// between the two and no other use, skips the registers: the dot copies it from device memory
// straight into its staging array with async_copy (cp.async on CUDA, 16-byte chunks in a
// coalesced layout of its own, zero-filled outside the bounds), then async_commit, async_wait
// and the barrier. Only for atoms, unchunked K and rows of whole 16-byte chunks
// (LowerOptions::async_copy switches it off).
//
// An atom whose accumulator layout is the hardware's secret (acc_through_threadgroup: Metal 4
// tensor_ops) also gets an f32 m x n threadgroup array the mma passes the registers through. It
// is taken only when that array and the smallest staging fit in 3/4 of the threadgroup memory
// (else the next atom, e.g. simdgroup_matrix); the array counts in the staging budget.
#include <algorithm>
#include <cmath>
#include <set>

#include "passes/lower_internal.h"

namespace metile::lowering {

void Lowering::stage(ValueId tile_value, ValueId buf, DType d, int64_t ld, int axis, int64_t lo,
                     int64_t len, const SwizzledTile* swizzled, bool kmajor) {
  // A trans only this dot reads: x holds its operand (lower_trans_operand.cpp).
  const auto view = trans_views.find(tile_value);
  const bool transposed = view != trans_views.end();
  const int64_t axis_len = p.type(tile_value).shape.dims[axis];
  if (transposed) tile_value = view->second;
  const Shape& s = p.type(tile_value).shape;
  ValueId x = get(tile_value);
  LayoutId l = f.value(x).layout;
  if (!f.layout(l).is_tile()) {
    l = layout_for(s);
    x = materialize(x, l);
  }
  if (f.value(x).dtype != d) x = b.ew(OpKind::CAST, {x}, d);
  ValueId e = b.named(b.coord(l, builtin(gpu::Builtin::thread_index)), "idx");
  ValueId cols = c_i32(s.dims[1]);
  ValueId row = b.ew(OpKind::DIV, {e, cols}), col = b.ew(OpKind::MOD, {e, cols});
  METILE_ASSERT(!kmajor || (transposed && len == axis_len), "a K-major B is stored whole from trans(t)");
  if (transposed && !kmajor) std::swap(row, col);
  ValueId pred = valid_pred(l);
  if (len < axis_len) {  // one chunk of the K axis: its elements, shifted to index 0
    ValueId& at = axis == 0 ? row : col;
    ValueId in = b.ew(OpKind::BITAND, {b.ew(OpKind::GE, {at, c_i32(lo)}),
                                       b.ew(OpKind::LT, {at, c_i32(lo + len)})});
    pred = and_pred(pred, b.named(in, "in_chunk"));
    at = b.ew(OpKind::SUB, {at, c_i32(lo)});
  }
  ValueId off = swizzled != nullptr ? swizzled_offset(*swizzled, row, col, false)
                                    : b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {row, c_i32(ld)}), col});
  b.store(b.ew(OpKind::PTR_OFFSET, {buf, off}), x, pred);
}

void Lowering::async_commit() {
  gpu::Op g;
  g.kind = gpu::GpuOpKind::ASYNC_COMMIT;
  b.append(std::move(g));
}

void Lowering::async_wait(int64_t pending) {
  gpu::Op g;
  g.kind = gpu::GpuOpKind::ASYNC_WAIT;
  g.attrs = {{"pending", pending}};
  b.append(std::move(g));
}

void Lowering::stage_direct(const Op& load, ValueId buf, int64_t ld, ValueId in_range) {
  const Shape& s = p.type(load.result()).shape;
  const DType d = p.type(load.result()).dtype;
  const int64_t vec = 16 / static_cast<int64_t>(dtype_size(d)), threads = f.threads;
  // One register per 16-byte chunk: thread t copies chunks t, t + T, ... (consecutive threads,
  // consecutive memory), and each register holds the chunk's first element. A chunk lies in
  // one row (the columns are a multiple of vec), so its bounds are one interval [lo, hi).
  const int64_t chunks = (s.numel() / vec + threads - 1) / threads;
  LayoutId l = f.add_layout(gpu::tile_layout(s.numel(), make_layout(threads, vec),
                                             make_layout(chunks, threads * vec)));
  std::vector<ValueId> ix;
  for (size_t i = 1; i < load.operands.size(); ++i) ix.push_back(get(load.operands[i]));
  DType it = DType::i32;
  for (ValueId v : ix)
    if (f.value(v).dtype == DType::i64 || f.value(v).dtype == DType::u32) it = DType::i64;
  for (ValueId& v : ix)
    if (f.value(v).dtype != it) v = b.ew(OpKind::CAST, {v}, it);
  ValueId tid = builtin(gpu::Builtin::thread_index);
  ValueId e = b.named(b.coord(l, tid), "idx");
  ValueId cols = c_i32(s.dims[1]);
  auto wide = [&](ValueId x) { return it == DType::i32 ? x : b.ew(OpKind::CAST, {x}, it); };
  ValueId r, c, src = kNoValue, dst = kNoValue;
  const ValueId base = get(load.operands[0]);
  const std::string stem = param_stem(base) + "_ptrs";
  if ((threads * vec) % s.dims[1] == 0) {
    // Register j's chunk lies j * threads * vec / cols whole rows below register 0's, so every
    // address is a per-thread base (one value per K step) plus a per-register part that does
    // not change across the loop (a constant in threadgroup memory, a multiple of the row
    // stride in device memory): no per-register index math in the K loop.
    ValueId et = b.ew(OpKind::MUL, {tid, c_i32(vec)});  // element(t, 0)
    ValueId rt = b.ew(OpKind::DIV, {et, cols});
    ValueId rr = b.ew(OpKind::DIV, {b.ew(OpKind::SUB, {e, et}), cols});  // j * threads * vec / cols
    r = b.ew(OpKind::ADD, {rt, rr});
    c = b.ew(OpKind::MOD, {et, cols});
    ValueId at = b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {b.ew(OpKind::ADD, {ix[0], wide(rt)}), ix[2]}),
                                    b.ew(OpKind::ADD, {ix[1], wide(c)})});
    src = b.named(b.ew(OpKind::PTR_OFFSET, {b.ew(OpKind::PTR_OFFSET, {base, at}),
                                            b.ew(OpKind::MUL, {wide(rr), ix[2]})}), stem);
    if (!warpgroup_staging.count(&load))
      dst = b.ew(OpKind::PTR_OFFSET, {b.ew(OpKind::PTR_OFFSET, {buf, b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {rt, c_i32(ld)}), c})}),
                                      b.ew(OpKind::MUL, {rr, c_i32(ld)})});
  } else {
    r = b.ew(OpKind::DIV, {e, cols});
    c = b.ew(OpKind::MOD, {e, cols});
  }
  if (dst == kNoValue) dst = b.ew(OpKind::PTR_OFFSET, {buf, staging_offset(load, r, c, ld)});
  ValueId row = b.named(b.ew(OpKind::ADD, {ix[0], wide(r)}), "row");
  ValueId col = b.named(b.ew(OpKind::ADD, {ix[1], wide(c)}), "col");
  if (src == kNoValue)
    src = b.named(b.ew(OpKind::PTR_OFFSET, {base, b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {row, ix[2]}), col})}), stem);
  ValueId lo = c_i32(0), hi = c_i32(vec);
  ValueId full = in_range;
  if (ix.size() == 5) {
    // Elements [lo, hi) of the chunk are in bounds: columns in [0, cols), rows in [0, rows).
    auto clamp = [&](ValueId x) {
      ValueId z = b.constant_int(it, 0), w = b.constant_int(it, vec);
      ValueId v = b.ew(OpKind::MINIMUM, {b.ew(OpKind::MAXIMUM, {x, z}), w});
      return it == DType::i32 ? v : b.ew(OpKind::CAST, {v}, DType::i32);
    };
    lo = b.named(clamp(b.ew(OpKind::SUB, {b.constant_int(it, 0), col})), "lo");
    hi = clamp(b.ew(OpKind::SUB, {ix[4], col}));
    ValueId row_in = b.ew(OpKind::BITAND, {b.ew(OpKind::GE, {row, b.constant_int(it, 0)}),
                                           b.ew(OpKind::LT, {row, ix[3]})});
    full = and_pred(full, row_in);
  }
  if (full != kNoValue) hi = b.ew(OpKind::SELECT, {full, hi, c_i32(0)});
  gpu::Op g;
  g.kind = gpu::GpuOpKind::ASYNC_COPY;
  g.operands = {dst, src, lo, b.named(hi, "hi")};
  // Padding registers (more threads than chunks) copy nothing: their rows lie past the array.
  if (ValueId live = valid_pred(l); live != kNoValue) g.operands.push_back(live);
  // The aligned body: one uniform test that the whole tile is in bounds, its first column and
  // the row stride multiples of the chunk, so every chunk is whole and (with an aligned base,
  // which the dialect tests) aligned; the per-chunk bounds are then never looked at.
  if (options.aligned_body) {
    auto ge0 = [&](ValueId x) { return b.ew(OpKind::GE, {x, b.constant_int(it, 0)}); };
    auto multiple = [&](ValueId x) {
      return b.ew(OpKind::EQ, {b.ew(OpKind::MOD, {x, b.constant_int(it, vec)}), b.constant_int(it, 0)});
    };
    ValueId whole = b.ew(OpKind::BITAND, {multiple(ix[1]), multiple(ix[2])});
    if (ix.size() == 5)
      for (int axis = 0; axis < 2; ++axis) {
        ValueId end = b.ew(OpKind::ADD, {ix[axis], b.constant_int(it, s.dims[axis])});
        whole = b.ew(OpKind::BITAND, {whole, b.ew(OpKind::BITAND, {ge0(ix[axis]),
                                                                   b.ew(OpKind::LE, {end, ix[3 + axis]})})});
      }
    if (in_range != kNoValue) whole = b.ew(OpKind::BITAND, {whole, in_range});
    g.operands.push_back(b.named(whole, "whole"));
    g.operands.push_back(get(load.operands[0]));
    g.attrs.push_back({"whole", int64_t{1}});
  }
  // vector: the dialect has vector types for d, for the synchronous fallback (no bf16 on MSL).
  const bool vector = std::find(target.vector_dtypes.begin(), target.vector_dtypes.end(), d) !=
                      target.vector_dtypes.end();
  g.attrs.insert(g.attrs.begin(), {{"width", vec}, {"vector", int64_t{vector}}});
  b.append(std::move(g));
}

std::pair<ValueId, ValueId> Lowering::dot_buffers(const Op& op, int64_t stages) {
  DotPlan& plan = dot_plans.at(&op);
  if (plan.bufs[1] == kNoValue) {
    const int64_t m = p.type(op.operands[0]).shape.dims[0], n = p.type(op.operands[1]).shape.dims[1];
    const int64_t pad = plan.warpgroup() ? 0 : staging_pad(plan.stage);  // warpgroup: swizzled, unpadded
    plan.ld[0] = plan.kc + pad;
    plan.ld[1] = (plan.b_kmajor ? plan.kc : n) + pad;  // k-major B: n rows of k (lower_trans_operand.cpp)
    plan.elems[0] = m * plan.ld[0];
    plan.elems[1] = (plan.b_kmajor ? n : plan.kc) * plan.ld[1];
    const std::vector<int64_t> shape[2] = {{m, plan.kc}, {plan.b_kmajor ? n : plan.kc, plan.b_kmajor ? plan.kc : n}};
    // warpgroup FP8: B keeps its own format (e4m3 x e5m2 dots; dot_choices.cpp).
    const DType bt = plan.warpgroup() && is_f8(plan.stage) ? p.type(plan.direct[1]->result()).dtype : plan.stage;
    for (int i = 0; i < 2; ++i) {
      if (i == 0 && plan.register_a != gpu::kUniform) continue;  // A in registers (dot_choices.cpp)
      // Warpgroup arrays take the staged tile's shape: a K-major B is staged N x K.
      const auto& t = plan.staged[i];
      // A ring of `stages` for an operand copied each iteration; one for an operand held (lower_pipeline.cpp).
      // B stored from registers in a pipelined loop: two slots, written while the other is read.
      const int64_t ring = plan.direct[i] != nullptr ? stages : i == 1 && plan.b_stored && stages > 1 ? 2 : 1;
      const gpu::SharedArray a = plan.warpgroup() ? gpu::SharedArray::swizzled({t.rows, t.cols}, t.swizzle, ring)
                                            : gpu::SharedArray::padded(shape[i], pad, ring);
      plan.bufs[i] = pb.alloc(i == 0 ? plan.stage : bt, a, i == 0 ? "a_smem" : "b_smem");
    }
  }
  return {plan.bufs[0], plan.bufs[1]};
}

void Lowering::dot(const Op& op) {
  const DotPlan& plan = dot_plans.at(&op);
  const Shape &as = p.type(op.operands[0]).shape, &bs = p.type(op.operands[1]).shape;
  const int64_t m = as.dims[0], k = as.dims[1], n = bs.dims[1];
  const DType ct = p.type(op.result()).dtype;
  LayoutId acc_l = layout_of(op.result());
  ValueId acc = materialize(get(op.operands[2]), acc_l);
  // K is staged in chunks of kc columns of A / rows of B (dot_chunk). A pipelined dot
  // (lower_pipeline.cpp) finds its operands already in stage `pipe_stage` of its arrays.
  const bool acc_array = plan.atom != nullptr && plan.atom->acc_through_threadgroup;
  const int64_t kc = plan.kc;
  const auto piped = pipelined_dots.find(&op);
  auto [a_buf, b_buf] = dot_buffers(op, piped != pipelined_dots.end() ? piped->second->stages : 1);
  // the warpgroup atom's register-A form: A in the fragments of the accumulator it was computed from
  // (dot_choices.cpp); a tile in another layout is converted, one of another dtype cast.
  const bool reg_a = plan.register_a != gpu::kUniform;
  METILE_ASSERT(!reg_a || plan.kc == k, "register-A warpgroup dot: all of K in one stage");
  ValueId a_regs = kNoValue;
  if (reg_a) {
    a_regs = materialize(get(op.operands[0]), plan.register_a);
    if (f.value(a_regs).dtype != plan.stage) a_regs = b.ew(OpKind::CAST, {a_regs}, plan.stage);
  }
  const int64_t lda = plan.ld[0], ldb = plan.ld[1];
  ValueId c_buf = acc_array ? pb.alloc(DType::f32, gpu::SharedArray::linear({m, n}), "c_smem") : kNoValue;
  ValueId tid = builtin(gpu::Builtin::thread_index);
  DType sum_t = plan.atom != nullptr || !is_float(ct) ? ct : DType::f32;
  ValueId r = f.value(acc).dtype == sum_t ? acc : b.ew(OpKind::CAST, {acc}, sum_t);
  if (piped != pipelined_dots.end()) {
    ValueId stage = piped->second->stage;  // an operand held for the loop has one stage
    if (plan.direct[0] != nullptr) a_buf = b.ew(OpKind::PTR_OFFSET, {a_buf, b.ew(OpKind::MUL, {stage, c_i32(plan.elems[0])})});
    if (plan.direct[1] != nullptr) b_buf = b.ew(OpKind::PTR_OFFSET, {b_buf, b.ew(OpKind::MUL, {stage, c_i32(plan.elems[1])})});
  }
  for (int64_t k0 = 0; k0 < k; k0 += kc) {
    if (piped == pipelined_dots.end()) {  // else staged, waited for and synchronized by the loop
      // Copies from device memory form one group waited for at once; issue-copies-early may start
      // it at an earlier dot.
      const bool direct = plan.direct[0] != nullptr || plan.direct[1] != nullptr;
      if (plan.direct[0] != nullptr) {
        stage_direct(*plan.direct[0], a_buf, lda);
      } else if (!reg_a) {
        stage(op.operands[0], a_buf, plan.stage, lda, 1, k0, kc, plan.warpgroup() ? &plan.staged[0] : nullptr);
      }
      if (plan.direct[1] != nullptr) {
        stage_direct(*plan.direct[1], b_buf, ldb);
      } else {
        stage(op.operands[1], b_buf, plan.stage, ldb, 0, k0, kc, plan.warpgroup() ? &plan.staged[1] : nullptr,
              plan.b_stored);
      }
      if (direct) {
        async_commit();
        async_wait(0);
      }
      // Warpgroup: copies and stores fenced for the async proxy, earlier warpgroup MMAs done with the arrays.
      warpgroup_sync_for({&op});
      b.barrier();
    } else if (plan.b_stored) {  // B into its slot of two, then the ring waited for (lower_pipeline.cpp)
      ValueId slot = b.ew(OpKind::BITAND, {piped->second->iteration, c_i32(1)});
      b_buf = b.ew(OpKind::PTR_OFFSET, {b_buf, b.ew(OpKind::MUL, {slot, c_i32(plan.elems[1])})});
      stage(op.operands[1], b_buf, plan.stage, ldb, 0, 0, k, &plan.staged[1], true);
      pipeline_sync(op);
    }
    if (plan.atom != nullptr) {
      gpu::Op g;
      g.kind = gpu::GpuOpKind::MMA;
      g.operands = {reg_a ? a_regs : a_buf, b_buf, r, tid};
      if (acc_array) g.operands.push_back(c_buf);
      g.attrs = {{"atom", std::string(atom_kind_name(plan.atom->kind))}, {"atom_m", int64_t{plan.atom->m}},
                 {"atom_n", int64_t{plan.atom->n}}, {"atom_k", int64_t{plan.atom->k}},
                 {"m", m}, {"n", n}, {"k", kc}, {"lda", lda}, {"ldb", ldb},
                 {"warps_m", int64_t{plan.warps_m}}, {"warps_n", int64_t{plan.warps_n}},
                 {"tf32", int64_t{plan.atom->relaxed}}};
      if (plan.b_kmajor) g.attrs.push_back({"b_kmajor", int64_t{1}});
      // A pipelined warpgroup dot whose result only the next iteration's mma reads is waited for
      // at the next iteration's top and after the loop (lower_pipeline.cpp).
      if (plan.warpgroup())
        g.attrs.push_back({"wait", int64_t{piped == pipelined_dots.end() || !piped->second->in_flight.count(&op)}});
      if (reg_a) g.attrs.push_back({"register_a", int64_t{1}});  // dot_choices.cpp
      if (plan.transposed) g.attrs.push_back({"transposed", int64_t{1}});  // dot_choices.cpp
      if (plan.promote != 0) g.attrs.push_back({"promote", plan.promote});  // dot_choices.cpp
      if (plan.tf32x3) g.attrs.push_back({"tf32x3", int64_t{1}});
      g.results = {b.new_value(ct, acc_l)};
      r = b.append(std::move(g)).result();
    } else {
      // Exact FMAs: each register sums its element's row of A times column of B, in f32 for
      // floats (as interp does) and in the accumulator's type for integers.
      ValueId e = b.coord(acc_l, tid);
      if (f.layout(acc_l).padded)  // padding registers read element 0 and are never stored
        e = b.ew(OpKind::SELECT, {b.valid(acc_l, tid), e, c_i32(0)});
      ValueId row = b.ew(OpKind::MUL, {b.ew(OpKind::DIV, {e, c_i32(n)}), c_i32(lda)});
      ValueId col = b.ew(OpKind::MOD, {e, c_i32(n)});
      r = for_loop(c_i32(0), c_i32(kc), c_i32(1), {r}, "kk", [&](ValueId kk, const auto& carried) {
        ValueId av = b.load(b.ew(OpKind::PTR_OFFSET, {a_buf, b.ew(OpKind::ADD, {row, kk})}));
        ValueId bv = b.load(b.ew(OpKind::PTR_OFFSET,
                                 {b_buf, b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {kk, c_i32(ldb)}), col})}));
        if (plan.stage != sum_t) {
          av = b.ew(OpKind::CAST, {av}, sum_t);
          bv = b.ew(OpKind::CAST, {bv}, sum_t);
        }
        return std::vector<ValueId>{b.ew(OpKind::ADD, {carried[0], b.ew(OpKind::MUL, {av, bv})})};
      })[0];
    }
    // Before the next chunk or dot overwrites the arrays (a pipeline writes the stage read
    // here only after the next iteration's barrier).
    if (piped == pipelined_dots.end()) b.barrier();
  }
  if (f.value(r).dtype != ct) r = b.ew(OpKind::CAST, {r}, ct);
  set(op.result(), b.named(r, "acc"));
}

}  // namespace metile::lowering

// Double buffering of a GEMM's K loop on targets whose copies are synchronous (Apple GPUs have
// no cp.async): the loop lower_pipeline.cpp picks (dots whose A and B come straight from
// tile_loads, addresses computed from the induction variable) gets two threadgroup stages and
// the device loads of iteration it+1 are issued before the mmas of iteration it, so their
// latency hides behind the math:
//
//   prologue:  copy the tiles of iteration 0 into stage 0 (zeros past the end); barrier
//   body:      load the tiles of iteration it+1 into registers (zeros past the end)
//              ... the body, each pipelined dot's mma reading stage it % 2 ...
//              store those registers into stage (it+1) % 2; barrier
//
// One barrier per iteration suffices: the stage stored at the bottom of iteration it was last
// read by the mmas of iteration it-1, which every thread finished before passing that
// iteration's barrier; the mmas of it+1 read it only after this iteration's barrier. The
// registers use a coalesced layout of 4-element chunks (thread t holds chunks t, t + T, ...),
// so vectorize-access turns the loads and stores into vector accesses; a bounded
// tile_load keeps its bounds per element (ragged M, N and K are exact). Two stages must fit
// 3/4 of the threadgroup memory (the rule lower_pipeline.cpp applies to any stage count), else
// the loop keeps the single-buffer form: stage, barrier, mma, barrier; so does a loop whose
// body writes memory (the next tiles would be read before those writes).
#include <algorithm>

#include "passes/lower_internal.h"

namespace metile::lowering {

int64_t Lowering::double_buffer_stages() const {
  return options.double_buffer && options.num_stages != 1 ? 2 : 1;
}

void Lowering::prefetch_prologue(const Op& loop, Pipeline& pl) {
  METILE_ASSERT(pl.stages == 2, "double buffering keeps two stages");
  const ValueId iv = loop.body().args[0];
  const ValueId saved = map[iv];
  map[iv] = pl.start;
  for (const Op* o : pl.slice) op(*o);
  ValueId in_range = b.named(b.ew(OpKind::LT, {pl.start, pl.end}), "in_range");
  for (const Op* d : pl.dots) {
    auto [a_buf, b_buf] = dot_buffers(*d, pl.stages);
    const DotPlan& plan = dot_plans.at(d);
    stage_direct(*plan.direct[0], a_buf, plan.ld[0], in_range);
    stage_direct(*plan.direct[1], b_buf, plan.ld[1], in_range);
  }
  map[iv] = saved;
  b.barrier();
}

void Lowering::prefetch_next(const Op& loop, Pipeline& pl) {
  const ValueId iv = loop.body().args[0];
  const ValueId saved = map[iv];
  ValueId kv = b.named(b.ew(OpKind::ADD, {saved, pl.step}), "next_k");
  map[iv] = kv;
  for (const Op* o : pl.slice) op(*o);
  ValueId in_range = b.named(b.ew(OpKind::LT, {kv, pl.end}), "in_range");
  pl.prefetched.clear();
  for (const Op* d : pl.dots)
    for (const Op* load : dot_plans.at(d).direct) {
      const Shape& s = p.type(load->result()).shape;
      const DType t = p.type(load->result()).dtype;
      // Chunks of 4 elements at most 16 bytes (MSL's widest vectors), consecutive threads on
      // consecutive chunks; a chunk lies in one row (direct copies have rows of whole 16-byte
      // chunks, lower_dot.cpp).
      const int64_t vec = std::min<int64_t>(4, 16 / static_cast<int64_t>(dtype_size(t))), threads = f.threads;
      const int64_t chunks = (s.numel() / vec + threads - 1) / threads;
      LayoutId l = f.add_layout(gpu::tile_layout(s.numel(), make_layout(threads, vec),
                                                 make_layout(tup(vec, chunks), tup(1, threads * vec))));
      std::vector<ValueId> ix;
      for (size_t i = 1; i < load->operands.size(); ++i) ix.push_back(get(load->operands[i]));
      const ValueId base = get(load->operands[0]);
      auto [ptrs, pred] = tile_access(base, ix, s, l);
      ValueId x = b.load(ptrs, and_pred(pred, in_range), zero(t));
      pl.prefetched.push_back(b.named(x, param_stem(base) + "_next"));
    }
  map[iv] = saved;
}

void Lowering::prefetch_store(Pipeline& pl) {
  ValueId next = b.named(b.ew(OpKind::SUB, {c_i32(1), pl.stage}), "next_stage");
  ValueId tid = builtin(gpu::Builtin::thread_index);
  size_t at = 0;
  for (const Op* d : pl.dots) {
    auto [a_buf, b_buf] = dot_buffers(*d, pl.stages);
    const DotPlan& plan = dot_plans.at(d);
    for (int i = 0; i < 2; ++i) {
      ValueId x = pl.prefetched.at(at++);
      const LayoutId l = f.value(x).layout;
      if (f.value(x).dtype != plan.stage) x = b.ew(OpKind::CAST, {x}, plan.stage);
      const int64_t cols = p.type(plan.direct[i]->result()).shape.dims[1];
      ValueId e = b.named(b.coord(l, tid), "idx");
      ValueId off = b.ew(OpKind::ADD, {b.ew(OpKind::MUL, {b.ew(OpKind::DIV, {e, c_i32(cols)}), c_i32(plan.ld[i])}),
                                       b.ew(OpKind::MOD, {e, c_i32(cols)})});
      ValueId stage = b.ew(OpKind::PTR_OFFSET, {i == 0 ? a_buf : b_buf, b.ew(OpKind::MUL, {next, c_i32(plan.elems[i])})});
      b.store(b.ew(OpKind::PTR_OFFSET, {stage, off}), x, valid_pred(l));
    }
  }
  b.barrier();
}

}  // namespace metile::lowering

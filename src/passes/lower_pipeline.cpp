// Multi-stage K-loop pipelining for dots whose A and B come straight from tile_loads (their
// copies are async_copy ops, lower_dot.cpp).
//
// A loop qualifies when its step is a positive constant and every address operand of those
// tile_loads is computed from values outside the loop, the induction variable and pure scalar
// ops of the body (the "slice"), never from carried values, and the body writes no memory.
// With S stages each dot's arrays hold S copies of A and B, and the loop becomes
//
//   prologue:  for s < S-1: copy the tiles of iteration s into stage s (zeros past the end); commit
//   body:      wait until at most S-2 groups are in flight; barrier (TMA copies: then wait on
//              the stage's mbarrier, lower_tma.cpp)
//              ... the body, each pipelined dot's mma reading stage it % S ...
//              copy the tiles of iteration it+S-1 into stage (it+S-1) % S; commit
//   after:     wait for every group
//
// The stage it % S is carried by the loop as a counter (LowerOptions::stage_counter; the
// prefetch's stage (it+S-1) % S is one below it): a compare and a select per step instead of a
// division and two remainders of the induction variable.
//
// One barrier per iteration suffices: the stage written at the bottom of iteration it was last
// read in iteration it-1, which every thread finished before passing this iteration's barrier.
// The slice is lowered again for each prefetched iteration with the induction variable
// replaced. S comes from LowerOptions::num_stages, else 3 on targets whose copies are
// asynchronous; it shrinks until the stages fit 3/4 of the threadgroup memory, and a loop with
// fewer than 2 stages is left alone (a kernel whose epilogue arrays then overflow the limit is
// lowered again with fewer stages: run_gpu_pipeline). Targets whose copies are synchronous
// (Apple GPUs) get two stages filled through registers instead (lower_double_buffer.cpp).
//
// A dot may also stream one operand and hold the other for the whole loop: A in registers (the
// warpgroup atom's register A) or an operand defined before the loop, staged once in the prologue
// (pipeline_prologue); flash attention's Q K^T and P V. Only the streamed operand gets a ring.
// Such a loop issues its copies at the top, right after the barrier, instead of the bottom: its
// dots' results feed the softmax, so their mmas end waited for, and at two stages (all its
// arrays fit) copies issued at the bottom would be waited for at the very next top, hiding
// nothing; from the top they overlap the whole body. A warpgroup mma stays in flight only where
// its result is read by nothing but the next iteration's same dot (chained); else it waits.
//
// A loop whose one dot streams A and stores B from registers each iteration (DotChoice::b_stored:
// dot_scaled's decoded weights on the warpgroup atom) has no wait or barrier at its top. B gets
// two slots, iteration & 1, and the dot is
//
//   ... the body's register work (B's loads and decode) ...
//   store B into its slot                     (the slot the MMAs of iteration it-2 read)
//   wait until at most S-2 copy groups are in flight; wait for this thread's warpgroup MMAs
//   (iteration it-1's) and fence the stores for the async proxy; barrier; wait on TMA's mbarrier
//   copy the tiles of iteration it+S-1 into stage (it+S-1) % S (read by iteration it-1's MMAs)
//   the mma, left in flight
//
// so the decode and its stores overlap the previous iteration's warpgroup MMAs, and one barrier
// a step orders everything: the stores against the MMAs of it-2 (waited for before the barrier
// of it-1) and of it, the refilled stage against the MMAs of it-1.
#include <algorithm>
#include <set>

#include "passes/lower_internal.h"

namespace metile::lowering {

namespace {

// Whether an op of `body` writes memory (the op table's memory ops with a side effect: stores,
// tile stores, atomics).
bool writes_memory(const Block& body) {
  bool writes = false;
  walk(body, [&](const Op& o) { writes = writes || (has_trait(o.kind, kMemory) && has_trait(o.kind, kSideEffect)); });
  return writes;
}

// Whether `dot`'s only reader is the next iteration's same dot, as its accumulator (a GEMM's
// K loop): its warpgroup mma may then stay in flight until the next top's warpgroup_sync. Any
// other reader (the softmax of attention's scores, the rescale of its output) needs it done.
bool chained(const Op& dot, const Block& body) {
  std::map<ValueId, int> reads;
  walk(body, [&](const Op& o) {
    for (ValueId x : o.operands) ++reads[x];
  });
  if (reads[dot.result()] != 1) return false;
  for (const Op& y : body.ops) {
    if (y.kind != OpKind::YIELD) continue;
    for (size_t j = 0; j < y.operands.size(); ++j)
      if (y.operands[j] == dot.result())
        return body.args[1 + j] == dot.operands[2] && reads[dot.operands[2]] == 1;
  }
  return false;
}

}  // namespace

bool Lowering::held_operands(const Op& dot, const std::map<ValueId, size_t>& pos, const Block& body) const {
  const DotPlan& plan = dot_plans.at(&dot);
  if (!target.async_copies || plan.kc != p.type(dot.operands[0]).shape.dims[1]) return false;
  for (int i = 0; i < 2; ++i) {
    if (plan.direct[i] != nullptr || (i == 0 && plan.register_a != gpu::kUniform)) continue;
    const ValueId v = dot.operands[i];  // staged in the prologue (pipeline_prologue) if it never changes
    if (pos.count(v) || std::count(body.args.begin(), body.args.end(), v)) return false;
  }
  return true;
}

bool scalar_slice(const Program& p, const Block& body, const std::map<ValueId, size_t>& pos,
                  const std::set<ValueId>& excluded, ValueId v, std::set<size_t>& slice) {
  for (size_t i = 1; i < body.args.size(); ++i)
    if (v == body.args[i]) return false;  // carried
  if (excluded.count(v)) return false;
  auto at = pos.find(v);
  if (at == pos.end()) return true;  // outside the loop, or its induction variable
  const Op& o = body.ops[at->second];
  if (!has_trait(o.kind, kPure) || p.type(v).is_tile()) return false;
  if (!slice.insert(at->second).second) return true;
  for (ValueId x : o.operands)
    if (!scalar_slice(p, body, pos, excluded, x, slice)) return false;
  return true;
}

void Lowering::plan_pipelines() {
  int64_t want = !target.async_copies ? double_buffer_stages()
                                      : options.num_stages != 0 ? options.num_stages : 3;
  if (want < 2) return;
  const DefiningOps<Block> defs = defining_ops(p.body);
  walk(p.body, [&](const Op& loop) {
    if (loop.kind != OpKind::FOR) return;
    auto step = defs.find(loop.operands[2]);
    if (step == defs.end() || step->second->kind != OpKind::CONST || step->second->attr_num("value") <= 0)
      return;
    const Block& body = loop.body();
    std::map<ValueId, size_t> pos;  // body op results -> position
    for (size_t i = 0; i < body.ops.size(); ++i)
      for (ValueId r : body.ops[i].results) pos[r] = i;
    Pipeline pl;
    std::set<size_t> slice;
    uint64_t bytes = 0, fixed = 0;  // a stage's bytes; the arrays staged once (one each)
    bool rejected = false;          // a dot streaming one operand that cannot be pipelined
    for (const Op& o : body.ops) {
      if (o.kind != OpKind::DOT) continue;
      const DotPlan& plan = dot_plans.at(&o);
      const bool streams[2] = {plan.direct[0] != nullptr, plan.direct[1] != nullptr};
      if (!streams[0] && !streams[1]) continue;
      if (!streams[0] || !streams[1]) {
        if (plan.b_stored && streams[0] && target.async_copies) {
          pl.sync_at_dot = true;
        } else if (!held_operands(o, pos, body)) {
          rejected = true;
          continue;
        }
        pl.copies_at_top = true;
      }
      bool ok = true;
      for (const Op* load : plan.direct)
        if (load != nullptr)
          for (ValueId x : load->operands) ok = ok && scalar_slice(p, body, pos, {}, x, slice);
      if (!ok) return;  // the slice may hold ops of a rejected dot: no pipeline for this loop
      const int64_t m = p.type(o.operands[0]).shape.dims[0], n = p.type(o.operands[1]).shape.dims[1];
      const int64_t pad = 16 / static_cast<int64_t>(dtype_size(plan.stage));
      const uint64_t operand_bytes[2] = {
          plan.register_a != gpu::kUniform ? 0 : static_cast<uint64_t>(m * (plan.kc + pad)) * dtype_size(plan.stage),
          static_cast<uint64_t>(plan.kc * (n + pad)) * dtype_size(plan.stage)};
      for (int i = 0; i < 2; ++i) (streams[i] ? bytes : fixed) += operand_bytes[i];
      if (plan.b_stored) fixed += operand_bytes[1];  // its second slot
      if (plan.atom != nullptr && plan.atom->acc_through_threadgroup) fixed += static_cast<uint64_t>(m * n) * 4;
      if (plan.warpgroup() && chained(o, body)) pl.in_flight.insert(&o);
      pl.dots.push_back(&o);
    }
    // Attention's second dot left unpipelined would lose the early copy of its operand
    // (issue-copies-early, which starts it only at an unpipelined dot) to a pipelined first dot:
    // such a loop keeps the unpipelined form.
    if (pl.dots.empty() || (pl.copies_at_top && rejected) || (pl.sync_at_dot && pl.dots.size() != 1)) return;
    // Copies of later iterations move ahead of this one's stores, which may write what they
    // read: a body that writes memory keeps its loads in order.
    if (writes_memory(body)) return;
    int64_t stages = want;
    while (stages > 1 && stages * bytes + fixed > target.threadgroup_memory_bytes / 4 * 3) --stages;
    if (stages < 2) return;
    pl.stages = stages;
    pl.prefetch = !target.async_copies;  // lower_double_buffer.cpp
    for (size_t i : slice) pl.slice.push_back(&body.ops[i]);
    Pipeline& placed = pipelines[&loop] = std::move(pl);
    for (const Op* d : placed.dots) pipelined_dots[d] = &placed;
  });
}

void Lowering::pipeline_copies(const Op& loop, Pipeline& pl, ValueId kv, ValueId stage) {
  const ValueId iv = loop.body().args[0];
  const ValueId saved = map[iv];
  map[iv] = kv;
  for (const Op* o : pl.slice) op(*o);
  ValueId in_range = b.named(and_pred(b.ew(OpKind::LT, {kv, pl.end}), pl.guard), "in_range");
  for (const Op* d : pl.dots) {
    auto [a_buf, b_buf] = dot_buffers(*d, pl.stages);
    const DotPlan& plan = dot_plans.at(d);
    for (int i = 0; i < 2; ++i) {
      if (plan.direct[i] == nullptr) continue;  // held for the whole loop
      ValueId at = b.ew(OpKind::MUL, {stage, c_i32(plan.elems[i])});
      stage_operand(*d, i, b.ew(OpKind::PTR_OFFSET, {i == 0 ? a_buf : b_buf, at}), stage, in_range, pl);
    }
  }
  map[iv] = saved;
  async_commit();
}

ValueId Lowering::pipeline_prologue(const Op& loop, ValueId start, ValueId end, ValueId step) {
  auto it = pipelines.find(&loop);
  if (it == pipelines.end()) return kNoValue;
  Pipeline& pl = it->second;
  pl.start = start;
  pl.end = end;
  pl.step = step;
  if (pl.prefetch) {  // its stage is iteration % 2 (lower_double_buffer.cpp), not carried
    prefetch_prologue(loop, pl);
    return kNoValue;
  }
  ValueId counter = kNoValue;
  if (pl.outer != nullptr) {
    counter = persistent_prologue(pl);  // filled a tile ahead (lower_persistent.cpp)
  } else {
    const DType t = f.value(start).dtype;
    tma_prologue(pl);
    for (int64_t s = 0; s + 1 < pl.stages; ++s) {
      ValueId kv = b.ew(OpKind::ADD, {start, b.ew(OpKind::MUL, {step, b.constant_int(t, s)})});
      pipeline_copies(loop, pl, kv, c_i32(s));
    }
    if (options.stage_counter) counter = c_i32(0);
  }
  // A held operand is the ring's one-stage counterpart: written here, once, and ordered before
  // the first mma by the top's barrier (and, for a warpgroup operand, fenced for the async proxy
  // by the top's warpgroup_sync). Written in the body instead, it would need a barrier of its
  // own after the previous iteration's mmas, which the pipelined body does not have.
  for (const Op* d : pl.dots) {
    const DotPlan& plan = dot_plans.at(d);
    for (int i = 0; i < 2; ++i) {
      const ValueId v = d->operands[i];  // unmapped: defined in the body (a b_stored B)
      if (plan.direct[i] != nullptr || (i == 0 && plan.register_a != gpu::kUniform) || v >= map.size() ||
          map[v] == kNoValue)
        continue;
      auto [a_buf, b_buf] = dot_buffers(*d, pl.stages);
      stage(v, i == 0 ? a_buf : b_buf, plan.stage, plan.ld[i], i == 0 ? 1 : 0, 0, plan.kc,
            plan.warpgroup() ? &plan.staged[i] : nullptr);
    }
  }
  return counter;
}

void Lowering::pipeline_top(const Op& loop, ValueId iv, ValueId counter) {
  auto it = pipelines.find(&loop);
  if (it == pipelines.end()) return;
  Pipeline& pl = it->second;
  // sync_at_dot: the wait, barrier and copies come at the dot (pipeline_sync).
  if (!pl.tma_only && !pl.prefetch && !pl.sync_at_dot) {  // else the warpgroup mmas of the last iteration stay in flight (tma_release)
    async_wait(pl.stages - 2);
    warpgroup_sync_for(pl.dots);
    b.barrier();
  }
  ValueId n = b.ew(OpKind::DIV, {b.ew(OpKind::SUB, {iv, pl.start}), pl.step});
  if (f.value(n).dtype != DType::i32) n = b.ew(OpKind::CAST, {n}, DType::i32);
  if (pl.base != kNoValue) n = b.ew(OpKind::ADD, {pl.base, n});  // counted across tiles (lower_persistent.cpp)
  pl.iteration = b.named(n, "iteration");
  pl.stage = counter != kNoValue ? counter : b.named(b.ew(OpKind::MOD, {pl.iteration, c_i32(pl.stages)}), "stage");
  if (pl.sync_at_dot) {
    pl.loop = &loop;
    pl.iv = iv;
    return;
  }
  tma_wait(pl);  // each thread waits for the stage's TMA copies itself (lower_tma.cpp)
  if (pl.prefetch) prefetch_next(loop, pl);
  if (pl.copies_at_top) {
    const DType t = f.value(iv).dtype;
    next_copies(loop, pl, b.ew(OpKind::ADD, {iv, b.ew(OpKind::MUL, {pl.step, b.constant_int(t, pl.stages - 1)})}));
  }
}

void Lowering::pipeline_sync(const Op& dot) {
  Pipeline& pl = pipelines.at(pipelined_dots.at(&dot)->loop);
  async_wait(pl.stages - 2);
  // The previous iteration's MMAs (their stage is refilled below, their B slot next iteration)
  // done, this iteration's B stores fenced for the async proxy, then published.
  warpgroup_sync_for(pl.dots);
  b.barrier();
  tma_wait(pl);
  const DType t = f.value(pl.iv).dtype;
  next_copies(*pl.loop, pl, b.ew(OpKind::ADD, {pl.iv, b.ew(OpKind::MUL, {pl.step, b.constant_int(t, pl.stages - 1)})}));
}

void Lowering::next_copies(const Op& loop, Pipeline& pl, ValueId kv) {
  if (!options.stage_counter) {
    ValueId next = b.ew(OpKind::MOD, {b.ew(OpKind::ADD, {pl.iteration, c_i32(pl.stages - 1)}), c_i32(pl.stages)});
    pipeline_copies(loop, pl, kv, b.named(next, "next_stage"));
    return;
  }
  // The carried stage s: the prefetch goes to (s + stages - 1) % stages = s - 1 (stages - 1 at 0).
  ValueId prev = b.ew(OpKind::SELECT, {b.ew(OpKind::EQ, {pl.stage, c_i32(0)}), c_i32(pl.stages - 1),
                                       b.ew(OpKind::SUB, {pl.stage, c_i32(1)})});
  pipeline_copies(loop, pl, kv, b.named(prev, "next_stage"));
}

ValueId Lowering::pipeline_bottom(const Op& loop, ValueId iv) {
  auto it = pipelines.find(&loop);
  if (it == pipelines.end()) return kNoValue;
  Pipeline& pl = it->second;
  if (pl.prefetch) {
    prefetch_store(pl);
    return kNoValue;
  }
  if (!pl.copies_at_top) {
    const DType t = f.value(iv).dtype;
    ValueId kv = b.ew(OpKind::ADD, {iv, b.ew(OpKind::MUL, {pl.step, b.constant_int(t, pl.stages - 1)})});
    if (pl.tma_only) tma_release(pl);
    next_copies(loop, pl, kv);
  }
  if (!options.stage_counter) return kNoValue;
  // The next iteration reads s + 1 (0 after stages - 1): a compare and a select.
  return b.ew(OpKind::SELECT, {b.ew(OpKind::EQ, {pl.stage, c_i32(pl.stages - 1)}), c_i32(0),
                               b.ew(OpKind::ADD, {pl.stage, c_i32(1)})});
}

void Lowering::pipeline_epilogue(const Op& loop) {
  if (!pipelines.count(&loop) || pipelines.at(&loop).prefetch) return;
  async_wait(0);  // copies past the end (zeros) still in flight
  warpgroup_sync_for(pipelines.at(&loop).dots);  // the last iteration's warpgroup mmas, before the epilogue
  if (pipelines.at(&loop).outer != nullptr) persistent_next_tile(pipelines.at(&loop));
}

}  // namespace metile::lowering

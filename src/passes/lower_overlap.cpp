// The softmax overlap of attention loops on Hopper (FlashAttention-3's intra-warpgroup
// pipelining): a form of the pipelined loop (lower_pipeline.cpp) whose ring TMA fills
// (lower_tma.cpp).
//
// The loop: S = dot(Q, trans(K(j))) streaming K, a softmax of S giving P, the carried row
// statistics and alpha, and O' = dot(P, V(j), O * alpha) with P in registers (register A). Lowered
// as written, each warpgroup waits for S, runs the softmax with its tensor cores idle, then waits
// for P V. Here iteration j issues S(j) and P(j-1) V(j-1) as two warpgroup groups, waits for the
// first only (a warpgroup's groups complete in order), computes softmax(j) while P(j-1) V(j-1)
// runs, then waits for that and rescales:
//
//   prologue: copies of iterations 0 and 1 (stages 0, 1); if the loop runs: S(0), softmax(0),
//             O * alpha(0), else P = 0 and the carried values as given
//   for j from 1: barrier; wait for stage j % 3; copies of iteration j + 1 into (j + 1) % 3;
//             issue S(j) on K(j); issue P(j-1) V(j-1) + O on V in stage (j - 1) % 3;
//             wait until one group is pending (S done); softmax(j); wait for the output product
//             (O'); O' * alpha(j)
//   epilogue: if the loop ran: O = P(n-1) V(n-1) + O, waited for
//
// Every element sees the operations of the loop as written, in the same order: O * alpha(j) is
// the accumulator P(j) V(j) starts from either way; only its place in the program moves (from
// before the output product of iteration j to the end of the iteration that computed alpha(j)).
// P crosses iterations as the 16-bit registers the mma reads, O scaled, with the statistics.
//
// The ring holds three stages of K and V: iteration j reads K(j) and V(j-1), two stages, and
// the copies issued at its top fill the third, which held iteration j-2, read by S(j-2) and
// P(j-2) V(j-2), both waited for before iteration j-1 ended and so before this top's barrier. One
// mbarrier per stage counts K's and V's copies together, as in the loop as written. (Separate
// rings of two stages, K's one ahead of V's, would need no more memory than today but a
// barrier set and a stage counter per ring; three stages fit head_dim 128 with 128-key blocks,
// Q 32 KB + 3 x 64 KB, so the loop keeps one ring.) Three stages are taken wherever they fit
// the whole of threadgroup memory; where the epilogue's arrays then overflow it, lowering again
// with two stages (run_gpu_pipeline) gives the loop as written.
#include "passes/lower_internal.h"

namespace metile::lowering {

namespace {

// Bytes of the arrays a warpgroup dot stages: its streamed operands' (one stage) and those it
// holds for the loop (register A holds none).
void ring_and_held_bytes(const Lowering::DotPlan& plan, uint64_t& ring, uint64_t& held) {
  for (int i = 0; i < 2; ++i) {
    if (i == 0 && plan.register_a != gpu::kUniform) continue;
    const SwizzledTile& t = plan.staged[i];
    (plan.direct[i] != nullptr ? ring : held) += static_cast<uint64_t>(t.rows * t.cols * t.elem);
  }
}

// Whether x (or an op nested in it) reads a value of `set`.
bool reads_one_of(const Op& x, const std::set<ValueId>& set) {
  bool reads = false;
  auto check = [&](const Op& o) {
    for (ValueId v : o.operands) reads = reads || set.count(v) != 0;
  };
  check(x);
  for (const Block& r : x.regions) walk(r, check);
  return reads;
}

}  // namespace

bool Lowering::plan_overlap(const Op& loop, Pipeline& pl) {
  if (!options.overlap_softmax || !options.stage_counter || !target.async_copies || !pl.copies_at_top ||
      pl.outer != nullptr || pl.dots.size() != 2)
    return false;
  const Op &scores = *pl.dots[0], &output = *pl.dots[1];
  const DotPlan &sp = dot_plans.at(&scores), &outp = dot_plans.at(&output);
  if (!sp.warpgroup() || !outp.warpgroup() || sp.register_a != gpu::kUniform || outp.register_a == gpu::kUniform ||
      sp.direct[0] != nullptr || sp.direct[1] == nullptr || outp.direct[1] == nullptr)
    return false;
  const Block& body = loop.body();
  const Op& yield = body.ops.back();
  // The output's result is yielded, once, and read by nothing else: the carried accumulator.
  size_t k = yield.operands.size(), uses = 0;
  for (size_t i = 0; i < yield.operands.size(); ++i)
    if (yield.operands[i] == output.result()) k = i, ++uses;
  for (const Op& x : body.ops)
    if (&x != &yield && reads_one_of(x, {output.result()})) ++uses;
  if (k == yield.operands.size() || uses != 1) return false;
  // The rescale: pure ops on the carried accumulator, read by the output's accumulator operand only.
  std::set<ValueId> scaled{body.args[1 + k]};
  std::set<const Op*> rescale;
  for (const Op& x : body.ops) {
    if (&x == &output || &x == &yield || !reads_one_of(x, scaled)) continue;
    if (!has_trait(x.kind, kPure) || !x.regions.empty()) return false;
    rescale.insert(&x);
    scaled.insert(x.results.begin(), x.results.end());
  }
  if (!scaled.count(output.operands[2]) || scaled.count(output.operands[0]) || scaled.count(output.operands[1]))
    return false;
  for (const Op& x : body.ops)
    if (!rescale.count(&x) && &x != &output && reads_one_of(x, scaled)) return false;
  uint64_t ring = 0, held = 0;
  ring_and_held_bytes(sp, ring, held);
  ring_and_held_bytes(outp, ring, held);
  if (3 * ring + held > target.threadgroup_memory_bytes) return false;
  tma_plan(pl);  // every streamed operand by TMA: the ring's waits are its mbarriers
  if (pl.arrivals != 2) return false;
  pl.output = &output;
  pl.acc_index = k;
  pl.rescale = std::move(rescale);
  return true;
}

namespace {

// Until at most `pending` warpgroup groups are in flight; the async mma result `acc` as then.
ValueId wait_for_groups(GpuBuilder& b, gpu::Function& f, int64_t pending, ValueId acc) {
  gpu::Op g;
  g.kind = gpu::GpuOpKind::WARPGROUP_WAIT;
  g.attrs = {{"pending", pending}};
  g.operands = {acc};
  const gpu::Value v = f.value(acc);  // a copy: new values grow the table
  g.results = {b.named(b.new_value(v.dtype, v.layout), v.stem)};
  return b.append(std::move(g)).result();
}

}  // namespace

void Lowering::overlap_loop(const Op& loop, const std::vector<ValueId>& operands,
                            const std::vector<LayoutId>& layouts) {
  Pipeline& pl = pipelines.at(&loop);
  const Op &scores = *pl.dots[0], &output = *pl.output;
  const Block& tb = loop.body();
  const Op& yield = tb.ops.back();
  const size_t k = pl.acc_index, carried = layouts.size();
  const ValueId start = operands[0], end = operands[1], step = operands[2];
  const LayoutId acc_l = layout_of(output.result());
  const LayoutId p_l = dot_plans.at(&output).register_a;
  const DType p_t = dot_plans.at(&output).stage;
  pipeline_prologue(loop, start, end, step);  // the mbarriers; iterations 0 and 1 into stages 0 and 1
  prestage_invariant_operands(loop);
  // Lowers the body ops `pick` accepts, in order (the output dot and the yield are lowered apart).
  auto lower = [&](auto&& pick) {
    const Block* saved = block_now;
    for (const Op& o : tb.ops) {
      block_now = &tb;
      if (&o != &output && o.kind != OpKind::YIELD && pick(o) && !lowered_early.count(&o)) op(o);
    }
    block_now = saved;
  };
  auto before_scores = [&](const Op& o) { return &o < &scores && !pl.rescale.count(&o); };
  auto after_scores = [&](const Op& o) { return &o > &scores && !pl.rescale.count(&o); };
  auto rescale = [&](const Op& o) { return pl.rescale.count(&o) != 0; };
  // What an iteration hands the next: P, the rescaled accumulator, the other carried values.
  auto handed = [&] {
    std::vector<ValueId> v{register_a_operand(output), materialize(get(output.operands[2]), acc_l)};
    for (size_t i = 0; i < carried; ++i)
      if (i != k) v.push_back(materialize(get(yield.operands[i]), layouts[i]));
    return v;
  };
  auto yield_values = [&](std::vector<ValueId> v) {
    gpu::Op y;
    y.kind = gpu::GpuOpKind::YIELD;
    y.operands = std::move(v);
    b.append(std::move(y));
  };
  gpu::Block* outer = b.block();
  current = &loop;
  b.set_loc(loop.loc);
  const ValueId runs = b.named(b.ew(OpKind::LT, {start, end}), "runs");

  // Prologue: iteration 0 up to its rescale, where the loop runs at all.
  gpu::Op first;
  first.kind = gpu::GpuOpKind::IF;
  first.operands = {runs};
  first.regions.resize(2);
  b.set_block(&first.regions[0]);
  warpgroup_sync_for(pl.dots);  // Q's stores fenced for the async proxy, before the barrier
  b.barrier();
  pl.iteration = pl.stage = c_i32(0);
  tma_wait(pl);
  set(tb.args[0], start);
  for (size_t i = 0; i < carried; ++i) set(tb.args[1 + i], operands[3 + i]);
  lower([](const Op&) { return true; });
  std::vector<ValueId> given = handed();
  yield_values(given);
  b.set_block(&first.regions[1]);
  std::vector<ValueId> none{materialize(zero(p_t), p_l), materialize(operands[3 + k], acc_l)};
  for (size_t i = 0; i < carried; ++i)
    if (i != k) none.push_back(operands[3 + i]);
  yield_values(none);
  for (ValueId v : given) {
    const gpu::Value x = f.value(v);  // a copy: new values grow the table
    first.results.push_back(b.named(b.new_value(x.dtype, x.layout, x.is_ptr, x.space), x.stem));
  }
  b.set_block(outer);
  current = &loop;
  b.set_loc(loop.loc);
  const std::vector<ValueId> entry = b.append(std::move(first)).results;

  // The loop from iteration 1, carrying what the prologue hands it and the stage counter.
  std::vector<ValueId> inits = entry;
  inits.push_back(c_i32(1));
  std::vector<ValueId> results = for_loop(
      b.ew(OpKind::ADD, {start, step}), end, step, inits, "i", [&](ValueId iv, const std::vector<ValueId>& in) {
        warpgroup_sync_for(pl.dots);
        b.barrier();
        pl.iteration = pipeline_iteration(pl, iv);
        pl.stage = in.back();
        tma_wait(pl);
        const ValueId next = b.named(next_stage(pl, pl.stage), "next_stage");
        pipeline_copies(loop, pl, b.ew(OpKind::ADD, {iv, step}), next);
        set(tb.args[0], iv);
        for (size_t i = 0, j = 2; i < carried; ++i)
          if (i != k) set(tb.args[1 + i], in[j++]);
        lower(before_scores);
        async_dots = {&scores, &output};
        op(scores);
        const ValueId stage = pl.stage;
        pl.stage = b.named(previous_stage(pl, stage), "v_stage");
        set(output.operands[0], in[0]);
        set(output.operands[2], in[1]);
        op(output);
        async_dots.clear();
        pl.stage = stage;
        const ValueId product = get(output.result());
        set(scores.result(), wait_for_groups(b, f, 1, get(scores.result())));
        lower(after_scores);
        set(tb.args[1 + k], wait_for_groups(b, f, 0, product));
        lower(rescale);
        std::vector<ValueId> out = handed();
        out.push_back(next);
        return out;
      });

  // Epilogue: the last iteration's output product, where the loop ran.
  gpu::Op last;
  last.kind = gpu::GpuOpKind::IF;
  last.operands = {runs};
  last.regions.resize(2);
  b.set_block(&last.regions[0]);
  pl.stage = b.named(previous_stage(pl, results.back()), "v_stage");
  set(output.operands[0], results[0]);
  set(output.operands[2], results[1]);
  op(output);
  const ValueId product = materialize(get(output.result()), acc_l);
  yield_values({product});
  b.set_block(&last.regions[1]);
  yield_values({results[1]});
  b.set_block(outer);
  current = &loop;
  b.set_loc(loop.loc);
  last.results = {b.named(b.new_value(f.value(product).dtype, acc_l), "acc")};
  const ValueId acc = b.append(std::move(last)).result();
  pipeline_epilogue(loop);
  for (size_t i = 0, j = 2; i < carried; ++i) set(loop.results[i], i == k ? acc : results[j++]);
}

}  // namespace metile::lowering

// Persistent tiles for TMA pipelines of warpgroup dots (issue 19): a pipelined K loop (lower_pipeline.cpp)
// whose copies are all TMA's (lower_tma.cpp), nested directly in a loop over output tiles
// (persistent_range: for each tile this program runs, the K loop, then the tile's epilogue).
//
// Without this each tile sets up its mbarriers, fills S-1 stages and waits for the first one
// before its first warpgroup mma: the tensor cores idle through that latency and through the tile's
// epilogue. Here the outer loop is rotated by one tile's prologue:
//
//   before the outer loop: the mbarriers (once), the first tile's first S-1 stages
//   each tile:  the K loop, whose global iteration g = base + it picks the stage g % S and
//               the phase (g / S) & 1, so the barriers run on from tile to tile without being
//               set up again (base counts the iterations of earlier tiles modulo 2S, which is
//               all that stage and phase need, so it never overflows);
//               after it every warpgroup mma is waited for and a barrier passed (no stage is read any
//               more), then the next tile's first S-1 stages, if there is a next tile, then
//               this tile's epilogue, which runs while those copies fly.
//
// The next tile's copy addresses come from the pure scalar ops of the outer body that the
// copies need (the outer slice), lowered again with the outer induction variable one step on.
// Conditions: the K loop's bounds are defined outside the outer loop (every tile has the same
// iteration count), the outer slice reads no value the outer loop carries, and nothing in the
// outer loop writes a buffer the copies read (the next tile's copies move ahead of this
// tile's stores).
//
// The epilogue's addresses depend on the thread index and the tile; the compiler would hoist
// their thread-dependent part out of the tile loop and keep it live through the K loop (an
// H100 GEMM with 128x256 tiles: 255 registers and spills, against 154 without the tile loop).
// So the rest of the tile's body reads the thread index through an `opaque` copy made in each
// tile, which nothing is hoisted past. METILE_GPU_OFF=persistent (LowerOptions::persistent)
// turns all of this off: each tile then sets up and fills its pipeline after the last epilogue.
#include <algorithm>
#include <set>

#include "passes/lower_internal.h"

namespace metile::lowering {

namespace {

// The buffer a pointer value starts at: through ptr_offset ops to a parameter or another op.
ValueId buffer_root(const DefiningOps<Block>& defs, ValueId v) {
  for (auto d = defs.find(v); d != defs.end() && d->second->kind == OpKind::PTR_OFFSET; d = defs.find(v))
    v = d->second->operands[0];
  return v;
}

// Every value defined under `b`: its arguments, and the results and block arguments of its ops.
void defined_under(const Block& b, std::set<ValueId>& out) {
  out.insert(b.args.begin(), b.args.end());
  for (const Op& o : b.ops) {
    out.insert(o.results.begin(), o.results.end());
    for (const Block& r : o.regions) defined_under(r, out);
  }
}

}  // namespace

void Lowering::plan_persistent() {
  if (!options.persistent || !options.tma) return;
  const DefiningOps<Block> defs = defining_ops(p.body);
  walk(p.body, [&](const Op& outer) {
    if (outer.kind != OpKind::FOR) return;
    const Block& body = outer.body();
    const Op* inner = nullptr;
    for (const Op& o : body.ops)
      if (pipelines.count(&o)) {
        if (inner != nullptr) return;  // one K loop per tile
        inner = &o;
      }
    if (inner == nullptr) return;
    Pipeline& pl = pipelines.at(inner);
    if (pl.prefetch || pl.outer != nullptr) return;
    tma_plan(pl);
    if (!pl.tma_only) return;
    std::set<ValueId> in_inner, nested;
    for (const Block& r : inner->regions) defined_under(r, in_inner);
    for (const Op& o : body.ops)
      for (const Block& r : o.regions) defined_under(r, nested);
    std::map<ValueId, size_t> pos;  // outer body op results -> position
    for (size_t i = 0; i < body.ops.size(); ++i)
      for (ValueId r : body.ops[i].results) pos[r] = i;
    for (size_t i = 0; i < 3; ++i) {  // the K loop's bounds: the same for every tile
      const ValueId v = inner->operands[i];
      if (pos.count(v) || nested.count(v) || std::count(body.args.begin(), body.args.end(), v)) return;
    }
    std::set<size_t> slice;
    std::vector<ValueId> used;  // what the copies read from outside the K loop
    std::set<ValueId> read;     // the buffers they copy from
    for (const Op* d : pl.dots)
      for (const Op* load : dot_plans.at(d).direct) {
        used.insert(used.end(), load->operands.begin(), load->operands.end());
        read.insert(buffer_root(defs, load->operands[0]));
      }
    for (const Op* o : pl.slice) used.insert(used.end(), o->operands.begin(), o->operands.end());
    for (ValueId v : used)
      if (!in_inner.count(v) && !scalar_slice(p, body, pos, nested, v, slice)) return;  // nested: another region's
    bool writes_read = false;
    walk(body, [&](const Op& o) {
      if (!has_trait(o.kind, kMemory) || !has_trait(o.kind, kSideEffect)) return;
      for (ValueId x : o.operands) writes_read = writes_read || (p.type(x).is_ptr && read.count(buffer_root(defs, x)));
    });
    if (writes_read) return;
    pl.outer = &outer;
    for (size_t i : slice) pl.outer_slice.push_back(&body.ops[i]);
    persistent_loops[&outer] = inner;
  });
}

void Lowering::persistent_before(const Op& outer, ValueId start, ValueId end, ValueId step) {
  auto it = persistent_loops.find(&outer);
  if (it == persistent_loops.end()) return;
  const Op& inner = *it->second;
  Pipeline& pl = pipelines.at(&inner);
  pl.outer_start = start;
  pl.outer_end = end;
  pl.outer_step = step;
  pl.start = get(inner.operands[0]);
  pl.end = get(inner.operands[1]);
  pl.step = get(inner.operands[2]);
  // Iterations per tile: span / step rounded up (no overflow near the type's end), 0 when empty.
  const DType t = f.value(pl.start).dtype;
  ValueId span = b.ew(OpKind::SUB, {pl.end, pl.start});
  ValueId whole = b.ew(OpKind::DIV, {span, pl.step});
  ValueId part = b.ew(OpKind::NE, {b.ew(OpKind::MOD, {span, pl.step}), b.constant_int(t, 0)});
  ValueId count = b.ew(OpKind::ADD, {whole, b.ew(OpKind::SELECT, {part, b.constant_int(t, 1), b.constant_int(t, 0)})});
  count = b.ew(OpKind::SELECT, {b.ew(OpKind::GT, {span, b.constant_int(t, 0)}), count, b.constant_int(t, 0)});
  // Only count % 2S matters (stages and phases); kept as i32.
  count = b.ew(OpKind::MOD, {count, b.constant_int(t, 2 * pl.stages)});
  if (t != DType::i32) count = b.ew(OpKind::CAST, {count}, DType::i32);
  pl.count = b.named(count, "tile_steps");
  tma_prologue(pl);  // the mbarriers, once for every tile
  persistent_copies(pl, start, c_i32(0), outer_runs(pl, start));
}

ValueId Lowering::outer_runs(const Pipeline& pl, ValueId iv) {
  // The outer loop's own test (gpu_emit's for): step > 0 ? iv < end : step < 0 && iv > end.
  const DType t = f.value(pl.outer_step).dtype;
  ValueId zero_step = b.constant_int(t, 0);
  ValueId up = b.ew(OpKind::LT, {iv, pl.outer_end});
  ValueId down = b.ew(OpKind::BITAND, {b.ew(OpKind::LT, {pl.outer_step, zero_step}), b.ew(OpKind::GT, {iv, pl.outer_end})});
  return b.named(b.ew(OpKind::SELECT, {b.ew(OpKind::GT, {pl.outer_step, zero_step}), up, down}), "tile_exists");
}

void Lowering::persistent_copies(Pipeline& pl, ValueId outer_iv, ValueId base, ValueId exists) {
  const std::vector<ValueId> saved = map;  // the slices rebind what they compute
  map[pl.outer->body().args[0]] = outer_iv;
  for (const Op* o : pl.outer_slice) op(*o);
  const Op& inner = *persistent_loops.at(pl.outer);
  const DType t = f.value(pl.start).dtype;
  pl.guard = exists;
  for (int64_t s = 0; s + 1 < pl.stages; ++s) {
    ValueId kv = b.ew(OpKind::ADD, {pl.start, b.ew(OpKind::MUL, {pl.step, b.constant_int(t, s)})});
    ValueId stage = b.ew(OpKind::MOD, {b.ew(OpKind::ADD, {base, c_i32(s)}), c_i32(pl.stages)});
    pipeline_copies(inner, pl, kv, b.named(stage, "next_stage"));
  }
  pl.guard = kNoValue;
  map = saved;
}

ValueId Lowering::persistent_prologue(Pipeline& pl) {
  // This tile's ordinal among the program's tiles, and its first global iteration (mod 2S).
  const ValueId iv = get(pl.outer->body().args[0]);
  ValueId j = b.ew(OpKind::DIV, {b.ew(OpKind::SUB, {iv, pl.outer_start}), pl.outer_step});
  const DType t = f.value(j).dtype;
  j = b.ew(OpKind::MOD, {j, b.constant_int(t, 2 * pl.stages)});
  if (t != DType::i32) j = b.ew(OpKind::CAST, {j}, DType::i32);
  pl.base = b.named(b.ew(OpKind::MOD, {b.ew(OpKind::MUL, {j, pl.count}), c_i32(2 * pl.stages)}), "tile_base");
  return options.stage_counter ? b.named(b.ew(OpKind::MOD, {pl.base, c_i32(pl.stages)}), "stage") : kNoValue;
}

void Lowering::persistent_next_tile(Pipeline& pl) {
  b.barrier();  // every warpgroup is done with every stage
  const ValueId iv = get(pl.outer->body().args[0]);
  ValueId next = b.named(b.ew(OpKind::ADD, {iv, pl.outer_step}), "next_tile");
  ValueId base = b.ew(OpKind::MOD, {b.ew(OpKind::ADD, {pl.base, pl.count}), c_i32(2 * pl.stages)});
  persistent_copies(pl, next, base, outer_runs(pl, next));
  // The rest of the tile reads the thread index through a copy made here (see the top).
  const auto key = std::make_pair(gpu::Builtin::thread_index, 0);
  const ValueId tid = builtin(gpu::Builtin::thread_index);
  gpu::Op g;
  g.kind = gpu::GpuOpKind::OPAQUE;
  g.operands = {tid};
  g.results = {b.named(b.new_value(f.value(tid).dtype, f.value(tid).layout), "tile_tid")};
  const ValueId copy = g.results[0];
  b.append(std::move(g));
  persistent_tid[pl.outer] = tid;
  builtins[key] = copy;
}

void Lowering::persistent_body_done(const Op& outer) {
  auto it = persistent_tid.find(&outer);
  if (it == persistent_tid.end()) return;
  builtins[std::make_pair(gpu::Builtin::thread_index, 0)] = it->second;
  persistent_tid.erase(it);
}

}  // namespace metile::lowering

// The tensor memory accelerator (TMA, cp.async.bulk.tensor, sm_90) for the operands of pipelined
// warpgroup dots (lower_pipeline.cpp, lower_warpgroup.cpp).
//
// A direct tile_load of such a dot is copied by TMA when the runtime can describe its tensor
// with a tensor map (src/target/tma.h): the base is a pointer parameter itself, the row stride
// and both bounds are integer parameters or constants, the coordinates are i32 and a box fits
// (at most 256 rows; one box per `swizzle`-byte column block of the warpgroup staging layout, which
// is the layout TMA's swizzle modes write). Everything else keeps the async copies.
//
// Per pipeline stage one mbarrier counts the stage's TMA copies: thread 0 initialises them
// before the prologue's copies (expecting one arrival per TMA copy), and for each copy arms the
// stage's barrier with the box bytes (arrive.expect_tx) and issues the boxes, which complete on
// it. Out-of-range box elements are zeros, so ragged M, N, K read exactly what the async copies'
// bounds read; copies of iterations past the loop's end are not issued at all. At the top of
// iteration it every thread waits for the phase (it / stages) & 1 of barrier it % stages.
//
// When every copy of the loop is TMA's and every dot on the warpgroup atom (tma_only), the loop
// keeps one warpgroup MMA group in flight: the top has no barrier, and before the bottom's copies
// each warpgroup waits until at most one group (this iteration's) is pending, then a barrier; the
// stage the copies overwrite, (it - 1) % stages, was read by the previous iteration's groups only.
// Otherwise the top keeps its cp.async wait, warpgroup wait and barrier, and waits on the mbarrier
// after them.
//
// Bounds the bounds pass made (its `bounds` attribute on the load, guard_buffer_bounds.cpp):
// "clamped" bounds are MINIMUM(given, the buffer's), of which the map takes the given bound and
// clamp=1, so the runtime keeps it inside the buffer as the guarded load does; "buffer" bounds
// are the default matrix (rows and cols "*" with clamp=1). A MINIMUM the user wrote is no
// parameter or constant: that load keeps the async copies.
//
// A loop whose dots stream one operand and hold the other (attention's K and V, copied at the top
// of the iteration: lower_pipeline.cpp) takes TMA for its streamed operands too, with the same
// mbarriers and phase waits; its top keeps the cp.async wait, warpgroup wait and barrier (its mmas
// end waited for), so tma_only never holds there. Its loads may also read a stack of matrices
// (TmaMap::slabs): a base that is the parameter plus slab * rows * ld, rows and ld the load's
// bound and row stride (K + (batch, head) * seq * head_dim), copied as 3-D boxes at (col, row,
// slab), which read zeros past each slab's rows as the guarded copies do. GEMM's loops keep
// 2-D maps of a parameter's base.
//
// The runtime falls back to a build with TMA off where a launch's tensors break TMA's rules
// (runtime/cuda/tma_map.h): base address and row stride in bytes multiples of 16.
#include <algorithm>
#include <functional>

#include "passes/lower_internal.h"

namespace metile::lowering {

namespace {

// A kernel parameter ("p<index>", integer scalars) or an integer constant, as tma.h spells it.
std::string map_source(const Program& p, const DefiningOps<Block>& defs, ValueId v) {
  const Type& t = p.type(v);
  if (t.is_ptr || t.is_tile() || (t.dtype != DType::i32 && t.dtype != DType::i64 && t.dtype != DType::u32)) return "";
  for (size_t i = 0; i < p.params.size(); ++i)
    if (p.params[i].value == v) return "p" + std::to_string(i);
  auto d = defs.find(v);
  if (d != defs.end() && d->second->kind == OpKind::CONST)
    return std::to_string(static_cast<int64_t>(d->second->attr_num("value")));
  return "";
}

// The slab index of a base offset `off` = slab * rows * ld (TmaMap::slabs): the factors of off's
// products less one spelled m.rows and one spelled m.ld must leave one, an i32 scalar.
ValueId slab_index(const Program& p, const DefiningOps<Block>& defs, ValueId off, const TmaMap& m) {
  std::vector<ValueId> factors;
  std::function<void(ValueId)> split = [&](ValueId v) {
    auto d = defs.find(v);
    if (d == defs.end() || d->second->kind != OpKind::MUL) return factors.push_back(v);
    for (ValueId x : d->second->operands) split(x);
  };
  split(off);
  for (const std::string& src : {m.rows, m.ld}) {
    auto f = std::find_if(factors.begin(), factors.end(), [&](ValueId v) { return map_source(p, defs, v) == src; });
    if (f == factors.end()) return kNoValue;
    factors.erase(f);
  }
  if (factors.size() != 1 || p.type(factors[0]).is_tile() || p.type(factors[0]).dtype != DType::i32) return kNoValue;
  return factors[0];
}

}  // namespace

void Lowering::tma_plan(Pipeline& pl) {
  pl.arrivals = 0;
  if (!options.tma) return;
  const DefiningOps<Block> defs = defining_ops(p.body);
  for (const Op* d : pl.dots) {
    const DotPlan& plan = dot_plans.at(d);
    if (!plan.warpgroup()) continue;
    for (int i = 0; i < 2; ++i) {
      if (plan.direct[i] == nullptr) continue;  // held for the whole loop
      const Op& load = *plan.direct[i];
      const SwizzledTile& t = plan.staged[i];
      if (load.operands.size() != 6 || t.rows > 256 || t.width() > 256 || t.cols % t.width() != 0) continue;
      if (p.type(load.operands[1]).dtype != DType::i32 || p.type(load.operands[2]).dtype != DType::i32) continue;
      TmaMap m;
      ValueId base = load.operands[0], off = kNoValue;
      auto at = defs.find(base);
      if (pl.copies_at_top && at != defs.end() && at->second->kind == OpKind::PTR_OFFSET) {
        base = at->second->operands[0];
        off = at->second->operands[1];
      }
      for (size_t k = 0; k < p.params.size(); ++k)
        if (p.params[k].value == base) m.param = static_cast<int64_t>(k);
      m.ld = map_source(p, defs, load.operands[3]);
      const AttrValue* made = load.find_attr("bounds");
      const std::string* how = made ? std::get_if<std::string>(made) : nullptr;
      if (how && *how == "buffer") {
        m.rows = m.cols = "*";
        m.clamp = true;
      } else if (how && *how == "clamped") {
        auto given = [&](ValueId v) {
          auto d = defs.find(v);
          if (d == defs.end() || d->second->kind != OpKind::MINIMUM) return std::string();
          return map_source(p, defs, d->second->operands[0]);
        };
        m.rows = given(load.operands[4]);
        m.cols = given(load.operands[5]);
        m.clamp = true;
      } else {
        m.rows = map_source(p, defs, load.operands[4]);
        m.cols = map_source(p, defs, load.operands[5]);
      }
      if (m.param < 0 || m.ld.empty() || m.rows.empty() || m.cols.empty()) continue;
      ValueId slab = off == kNoValue ? kNoValue : slab_index(p, defs, off, m);
      if (off != kNoValue && slab == kNoValue) continue;
      m.slabs = slab != kNoValue;
      m.elem = t.elem;
      m.box_rows = t.rows;
      m.box_cols = t.width();
      m.swizzle = t.swizzle;
      if (!tma_loads.count(&load)) tma_loads[&load] = {static_cast<int64_t>(tma_loads.size()), m};
      if (slab != kNoValue) tma_slabs[&load] = slab;
      ++pl.arrivals;
    }
  }
  pl.tma_only = !pl.copies_at_top && pl.arrivals != 0 && pl.arrivals == 2 * static_cast<int64_t>(pl.dots.size());
}

void Lowering::tma_prologue(Pipeline& pl) {
  tma_plan(pl);
  if (pl.arrivals == 0) return;
  pl.bars = pb.alloc(DType::i64, gpu::SharedArray::linear({1}, pl.stages), "tma_bar");
  gpu::Op g;
  g.kind = gpu::GpuOpKind::MBAR_INIT;
  g.operands = {pl.bars, builtin(gpu::Builtin::thread_index)};
  g.attrs = {{"count", pl.arrivals}, {"n", pl.stages}};
  b.append(std::move(g));
  b.barrier();  // every thread sees the barriers set up before it waits on one
}

void Lowering::stage_operand(const Op& d, int i, ValueId buf, ValueId stage, ValueId in_range, const Pipeline& pl) {
  const DotPlan& plan = dot_plans.at(&d);
  const Op& load = *plan.direct[i];
  auto it = tma_loads.find(&load);
  if (pl.bars == kNoValue || it == tma_loads.end()) return stage_direct(load, buf, plan.ld[i], in_range);
  const TmaMap& m = it->second.second;
  gpu::Op g;
  g.kind = gpu::GpuOpKind::TMA_LOAD;
  g.operands = {buf, b.ew(OpKind::PTR_OFFSET, {pl.bars, stage}), get(load.operands[1]), get(load.operands[2]),
                builtin(gpu::Builtin::thread_index)};
  if (m.slabs) g.operands.push_back(get(tma_slabs.at(&load)));  // the third coordinate
  if (in_range != kNoValue) g.operands.push_back(in_range);
  g.attrs = {{"map", it->second.first},
             {"spec", m.text()},
             {"box_rows", m.box_rows},
             {"box_cols", m.box_cols},
             {"blocks", plan.staged[i].cols / m.box_cols}};
  if (m.slabs) g.attrs.push_back({"slabs", int64_t{1}});
  b.append(std::move(g));
}

void Lowering::tma_wait(const Pipeline& pl) {
  if (pl.bars == kNoValue) return;
  gpu::Op g;
  g.kind = gpu::GpuOpKind::MBAR_WAIT;
  ValueId phase = b.ew(OpKind::BITAND, {b.ew(OpKind::DIV, {pl.iteration, c_i32(pl.stages)}), c_i32(1)});
  g.operands = {b.ew(OpKind::PTR_OFFSET, {pl.bars, pl.stage}), b.named(phase, "phase")};
  b.append(std::move(g));
}

void Lowering::tma_release(const Pipeline&) {
  gpu::Op g;
  g.kind = gpu::GpuOpKind::WARPGROUP_WAIT;
  g.attrs = {{"pending", int64_t{1}}};
  b.append(std::move(g));
  b.barrier();
}

}  // namespace metile::lowering

// release-stages: a TMA-fed K loop of warpgroup MMAs (lower_tma.cpp) lets every warp meet the
// others once per iteration, at the barrier before it refills the stage the previous iteration
// read. This pass gives the ring a second set of mbarriers, one per stage ("empty"), and replaces
// that barrier:
//
//   after the MMAs of chunk it-1 are retired (a warpgroup_wait or warpgroup_sync, or MMAs that end
//   waited for), lane 0 of each warp arrives on empty[s], s the stage chunk it-1 used, which is
//   the stage the iteration refills (the copies' mbarrier offset); thread 0 (the one issuing the
//   copies) waits on empty[s] before it issues them. Both only where chunk it-1 exists: not on
//   the first iteration since the mbarriers were set up.
//
// The j-th release of stage s (j from 0) is chunk s + j * stages, so chunk c's is completion c /
// stages of empty[c % stages]; the wait for chunk it-1's has parity ((it-1) / stages) & 1, the
// full wait's phase (it / stages) & 1 flipped where it % stages == 0. When thread 0 waits for
// completion j, completion j+1 (chunk it-1+stages) cannot have happened: that chunk is not
// copied yet. Each stage's first fill (the prologue, and at iteration 0 stage stages-1) waits for
// nothing, and an iteration whose copies are past the end waits for nothing (its arrivals still
// count). A persistent tile loop (lower_persistent.cpp) carries the ring from tile to tile with
// its iteration counted across tiles (mod 2 stages, which keeps stage and parity), so "chunk it-1
// exists" there is "not the first iteration of the first tile"; the next tile's first copies,
// issued after the tile's barrier, need no wait, since every warp arrived for every chunk but
// the tile's last before it. No thread waits for an arrival that never comes: every warp runs
// every iteration (control flow is thread-uniform), arrives before thread 0 waits at the same
// place, and reaches it without waiting on thread 0's later copies.
//
// The barrier goes only where it orders nothing else: what it orders (barrier_flow.h, the
// asynchronous accesses counted by operand) may touch only the ring's arrays and mbarriers.
// Where the rest is ordered against ops before the loop only (attention's Q, staged once before
// its K/V loop), a warpgroup_sync and a barrier in front of the loop take that over. Otherwise the
// loop keeps its barrier.
// Needs: GPU IR as lowering leaves it (the ring's shape above), before fold-constants and cse,
// which clean up what it adds. Guarantees: the same values; every stage is overwritten only after
// every warp finished reading its previous chunk.
#include <map>
#include <set>

#include "passes/barrier_flow.h"
#include "passes/pass.h"
#include "target/matrix_atom.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

gpu::Op op_of(GpuOpKind kind) {
  gpu::Op op;
  op.kind = kind;
  return op;
}

// One TMA ring: its K loop and what the pass reads from it.
struct Ring {
  gpu::Block* parent = nullptr;  // the block holding the loop
  size_t loop = 0;               // its index there
  gpu::Op* outer = nullptr;      // a persistent tile loop around it (in the function's body)
  size_t bars_alloc = 0, init = 0;  // indices of the full barriers' alloc and mbar_init (function body)
  ValueId bars = kNoValue;
  int64_t stages = 0;
  size_t wait = 0, barrier = 0, first_copy = 0;  // indices in the loop body
  ValueId stage = kNoValue, phase = kNoValue, next = kNoValue, tid = kNoValue, in_range = kNoValue;
  uint64_t arrays = 0;  // the copies' destinations and the mbarriers
};

class Releaser {
 public:
  explicit Releaser(gpu::Function& f) : f_(f), defs_(defining_ops(f.body)) {}

  // Releases the stages of the first ring not in `seen` (adding it there); false where none is
  // left. One at a time: a release moves the ops after it, so the next ring is found again.
  bool next_ring(std::set<ValueId>& seen) {
    // A ring: an mbar_init at top level, its loop after it at top level or one tile loop down.
    for (size_t i = 0; i < f_.body.ops.size(); ++i) {
      const gpu::Op& init = f_.body.ops[i];
      if (init.kind != GpuOpKind::MBAR_INIT || !seen.insert(init.operands[0]).second) continue;
      const gpu::Op* alloc = def(init.operands[0]);
      if (alloc == nullptr || alloc->kind != GpuOpKind::ALLOC) return true;
      std::vector<Ring> found;
      for (size_t j = i + 1; j < f_.body.ops.size(); ++j) {
        gpu::Op& op = f_.body.ops[j];
        if (op.kind != GpuOpKind::FOR) continue;
        Ring r;
        r.bars = init.operands[0];
        r.stages = init.attr_int("n");
        r.init = i;
        r.bars_alloc = static_cast<size_t>(alloc - f_.body.ops.data());
        if (waits_on(op.body(), r.bars)) {
          r.parent = &f_.body;
          r.loop = j;
        } else {
          for (size_t k = 0; k < op.body().ops.size(); ++k)
            if (op.body().ops[k].kind == GpuOpKind::FOR && waits_on(op.body().ops[k].body(), r.bars)) {
              r.parent = &op.body();
              r.loop = k;
              r.outer = &op;
            }
        }
        if (r.parent != nullptr) found.push_back(r);
      }
      if (found.size() == 1 && shaped(found[0]) && barrier_orders_only_the_ring(found[0])) release(found[0]);
      return true;
    }
    return false;
  }

 private:
  const gpu::Op* def(ValueId v) const {
    auto d = defs_.find(v);
    return d == defs_.end() ? nullptr : d->second;
  }

  // `p` = ptr_offset(base, offset): the offset (kNoValue otherwise).
  ValueId offset_into(ValueId p, ValueId base) const {
    const gpu::Op* d = def(p);
    if (d == nullptr || d->kind != GpuOpKind::ELEMENTWISE || d->tile_op != OpKind::PTR_OFFSET || d->operands[0] != base)
      return kNoValue;
    return d->operands[1];
  }

  bool waits_on(const gpu::Block& body, ValueId bars) const {
    for (const gpu::Op& op : body.ops)
      if (op.kind == GpuOpKind::MBAR_WAIT && offset_into(op.operands[0], bars) != kNoValue) return true;
    return false;
  }

  static bool is_const(const gpu::Op* d) { return d != nullptr && d->kind == GpuOpKind::CONST; }

  // A warpgroup MMA whose group stays in flight after it (see the CUDA spelling in codegen/cuda).
  static bool in_flight(const gpu::Op& mma) {
    return atom_kind_threads(mma_atom_kind(mma)) > 32 && !mma.find_attr("register_a") &&
           (!mma.find_attr("wait") || mma.attr_int("wait") == 0) &&
           (!mma.find_attr("promote") || mma.attr_int("promote") == 0);
  }

  // The loop has the ring's shape (the top of this file) and nothing else touches the ring.
  bool shaped(Ring& r) {
    gpu::Op& loop = r.parent->ops[r.loop];
    const gpu::Block& body = loop.body();
    const std::vector<uint64_t> masks = gpu::array_masks(f_);
    const uint64_t bars_bit = masks[r.bars];
    if (bars_bit == 0 || bars_bit == kEveryArray || f_.threads % f_.simd_width != 0 || r.stages < 2) return false;
    // A positive constant step: the induction variable is its start on the first iteration only.
    const gpu::Op* step = def(loop.operands[2]);
    if (!is_const(step) || step->attr_num("value") <= 0) return false;
    if (r.outer != nullptr && !persistent(r, loop)) return false;
    bool waited = false, copied = false;
    for (size_t i = 0; i < body.ops.size(); ++i) {
      const gpu::Op& op = body.ops[i];
      if (op.kind == GpuOpKind::MBAR_WAIT && offset_into(op.operands[0], r.bars) != kNoValue) {
        if (waited || op.operands.size() != 2) return false;
        waited = true;
        r.wait = i;
        r.stage = offset_into(op.operands[0], r.bars);
        r.phase = op.operands[1];
      }
      if (op.kind != GpuOpKind::TMA_LOAD || offset_into(op.operands[1], r.bars) == kNoValue) continue;
      const bool slab = op.find_attr("slabs") != nullptr;
      const ValueId pred = op.operands.size() > (slab ? 6u : 5u) ? op.operands.back() : kNoValue;
      if (!copied) {
        copied = true;
        r.first_copy = i;
        r.next = offset_into(op.operands[1], r.bars);
        r.tid = op.operands[4];
        r.in_range = pred;
      }
      if (offset_into(op.operands[1], r.bars) != r.next || op.operands[4] != r.tid || pred != r.in_range) return false;
      r.arrays |= masks[op.operands[0]];
    }
    if (!waited || !copied || r.wait > r.first_copy || r.arrays == 0 || (r.arrays & bars_bit) != 0) return false;
    // The barrier: the last one before the copies.
    r.barrier = r.first_copy;
    for (size_t i = r.first_copy; i-- > 0 && r.barrier == r.first_copy;)
      if (body.ops[i].kind == GpuOpKind::BARRIER) r.barrier = i;
    if (r.barrier == r.first_copy || !body.ops[r.barrier].attrs.empty()) return false;
    r.arrays |= bars_bit;
    return ring_accesses_are_known(r, masks) && reads_retired(r, masks);
  }

  // Persistent tiles: the K loop's bounds are the same for every tile, and the tile loop's
  // induction variable is its start on the first tile only.
  bool persistent(const Ring& r, const gpu::Op& loop) const {
    std::set<ValueId> inside;
    gpu::walk(r.outer->body(), [&](const gpu::Op& op) {
      inside.insert(op.results.begin(), op.results.end());
      for (const gpu::Block& b : op.regions) inside.insert(b.args.begin(), b.args.end());
    });
    inside.insert(r.outer->body().args.begin(), r.outer->body().args.end());
    for (size_t i = 0; i < 3; ++i)
      if (inside.count(loop.operands[i])) return false;
    const gpu::Op* step = def(r.outer->operands[2]);
    if (is_const(step)) return step->attr_num("value") > 0;
    return step != nullptr && step->kind == GpuOpKind::BUILTIN && step->builtin == gpu::Builtin::threadgroups_per_grid;
  }

  // The ring's arrays are written by its copies alone and read by MMAs of the loop's body (at its
  // top level, at the stage the full wait waited for); its mbarriers serve no other loop, and
  // copies outside the loop come before its first iteration or (persistent) after a barrier that
  // follows it in the tile loop.
  bool ring_accesses_are_known(const Ring& r, const std::vector<uint64_t>& masks) const {
    const gpu::Block& body = r.parent->ops[r.loop].body();
    std::set<const gpu::Op*> top;
    for (const gpu::Op& op : body.ops) top.insert(&op);
    // Where a copy outside the loop may sit.
    std::set<const gpu::Op*> allowed;
    const gpu::Op* outer_at = r.outer != nullptr ? r.outer : &r.parent->ops[r.loop];
    for (const gpu::Op& op : f_.body.ops) {
      if (&op == outer_at) break;
      allowed.insert(&op);
    }
    if (r.outer != nullptr) {
      bool fenced = false;
      for (size_t i = r.loop + 1; i < r.parent->ops.size(); ++i) {
        fenced = fenced || r.parent->ops[i].kind == GpuOpKind::BARRIER;
        if (fenced) allowed.insert(&r.parent->ops[i]);
      }
    }
    bool ok = true;
    gpu::walk(f_.body, [&](const gpu::Op& op) {
      uint64_t touched = 0;
      for (ValueId v : op.operands) {
        const gpu::Value& x = f_.value(v);
        touched |= x.is_ptr && x.space == AddrSpace::threadgroup && masks[v] == 0 ? kEveryArray : masks[v];
      }
      if (op.kind == GpuOpKind::ALLOC || (touched & r.arrays) == 0) return;
      if (op.kind == GpuOpKind::ELEMENTWISE && op.tile_op == OpKind::PTR_OFFSET) return;
      if (op.kind == GpuOpKind::MBAR_INIT) {
        ok = ok && op.operands[0] == r.bars;
      } else if (op.kind == GpuOpKind::TMA_LOAD) {
        ok = ok && (masks[op.operands[1]] & r.arrays) != 0 && (top.count(&op) || allowed.count(&op));
      } else if (op.kind == GpuOpKind::MBAR_WAIT) {
        ok = ok && &op == &body.ops[r.wait];
      } else if (op.kind == GpuOpKind::MMA) {
        ok = ok && top.count(&op) && reads_stage(op, r, masks);
      } else {
        ok = false;
      }
    });
    return ok;
  }

  // Each ring operand of the MMA is its array at the stage the full wait waited for.
  bool reads_stage(const gpu::Op& mma, const Ring& r, const std::vector<uint64_t>& masks) const {
    for (size_t i = 0; i < 2; ++i) {
      const gpu::Op* d = def(mma.operands[i]);
      if ((masks[mma.operands[i]] & r.arrays) == 0) continue;
      if (d == nullptr || d->kind != GpuOpKind::ELEMENTWISE || d->tile_op != OpKind::PTR_OFFSET) return false;
      const ValueId off = d->operands[1];
      const gpu::Op* m = def(off);
      const bool scaled = m != nullptr && m->kind == GpuOpKind::ELEMENTWISE && m->tile_op == OpKind::MUL &&
                          (m->operands[0] == r.stage || m->operands[1] == r.stage);
      if (off != r.stage && !scaled) return false;
    }
    return true;
  }

  // Every MMA of chunk it-1 that reads the ring is retired before iteration it arrives: on the
  // path from it to the first copy of the next iteration, a warpgroup_sync, a warpgroup MMA that
  // ends waited for (it waits for every group), or a warpgroup_wait {pending} with at least
  // `pending` groups committed after it.
  bool reads_retired(const Ring& r, const std::vector<uint64_t>& masks) const {
    const gpu::Block& body = r.parent->ops[r.loop].body();
    const size_t n = body.ops.size();
    for (size_t m = 0; m < n; ++m) {
      const gpu::Op& mma = body.ops[m];
      if (mma.kind != GpuOpKind::MMA || !in_flight(mma)) continue;
      if (((masks[mma.operands[0]] | masks[mma.operands[1]]) & r.arrays) == 0) continue;
      // The rest of its iteration, then the next one up to its copies.
      std::vector<size_t> path;
      for (size_t i = m + 1; i < n; ++i) path.push_back(i);
      for (size_t i = 0; i < r.first_copy; ++i) path.push_back(i);
      bool retired = false;
      int64_t groups = 0;
      for (size_t i : path) {
        const gpu::Op& op = body.ops[i];
        if (op.kind == GpuOpKind::WARPGROUP_SYNC) retired = true;
        if (op.kind == GpuOpKind::WARPGROUP_WAIT) retired = retired || op.attr_int("pending") <= groups;
        if (op.kind == GpuOpKind::MMA && atom_kind_threads(mma_atom_kind(op)) > 32) {
          if (!in_flight(op)) retired = true;
          ++groups;
        }
      }
      if (!retired) return false;
    }
    return true;
  }

  // Whether the barrier orders accesses of other arrays; if only against ops before the loop, a
  // warpgroup_sync and a barrier in front of the loop take that over (they stay).
  bool barrier_orders_only_the_ring(Ring& r) {
    if (!orders_other_arrays(r)) return true;
    gpu::Block fence;
    gpu::GpuBuilder b(f_, &fence);
    b.set_loc(r.parent->ops[r.loop].loc);
    b.append(op_of(GpuOpKind::WARPGROUP_SYNC));
    b.barrier();
    r.parent->ops.insert(r.parent->ops.begin() + static_cast<std::ptrdiff_t>(r.loop), fence.ops.begin(), fence.ops.end());
    r.loop += 2;
    if (!orders_other_arrays(r)) return true;
    r.loop -= 2;
    r.parent->ops.erase(r.parent->ops.begin() + static_cast<std::ptrdiff_t>(r.loop),
                        r.parent->ops.begin() + static_cast<std::ptrdiff_t>(r.loop + 2));
    return false;
  }

  bool orders_other_arrays(const Ring& r) const {
    FlowGraph g(f_, AsyncEffects::by_operand);
    const size_t n = g.node_of(&r.parent->ops[r.loop].body().ops[r.barrier]);
    const ArrayEffect before = g.until_barrier(n, false).without(r.arrays);
    return before.conflicts(g.until_barrier(n, true).without(r.arrays));
  }

  void release(Ring& r) {
    // The empty mbarriers next to the full ones, set up with them: one arrival per warp.
    const int64_t warps = f_.threads / f_.simd_width;
    gpu::Block setup;
    gpu::GpuBuilder b(f_, &setup);
    b.set_loc(f_.body.ops[r.init].loc);
    const ValueId empty = b.alloc(DType::i64, gpu::SharedArray::linear({1}, r.stages), "empty_bar");
    gpu::Op alloc = std::move(setup.ops.back());
    setup.ops.clear();
    const ValueId lane = b.builtin(gpu::Builtin::simd_lane, 0, gpu::kThread);
    gpu::Op init = op_of(GpuOpKind::MBAR_INIT);
    init.operands = {empty, f_.body.ops[r.init].operands[1]};
    init.attrs = {{"count", warps}, {"n", r.stages}};
    b.append(std::move(init));
    // The release and the wait, before the iteration's copies (after the retiring waits).
    gpu::Block& body = r.parent->ops[r.loop].body();
    gpu::Op& loop = r.parent->ops[r.loop];
    gpu::Block step;
    b.set_block(&step);
    b.set_loc(body.ops[r.barrier].loc);
    ValueId has_prev = b.ew(OpKind::NE, {body.args[0], loop.operands[0]});
    if (r.outer != nullptr)
      has_prev = b.ew(OpKind::BITOR, {has_prev, b.ew(OpKind::NE, {r.outer->body().args[0], r.outer->operands[0]})});
    has_prev = b.named(has_prev, "reused");
    const ValueId slot = b.ew(OpKind::PTR_OFFSET, {empty, r.next});
    gpu::Op arrive = op_of(GpuOpKind::MBAR_ARRIVE);
    arrive.operands = {slot, lane, has_prev};
    b.append(std::move(arrive));
    const ValueId first = b.ew(OpKind::EQ, {r.stage, b.constant_int(DType::i32, 0)});
    const ValueId flipped = b.ew(OpKind::BITXOR, {r.phase, b.constant_int(DType::i32, 1)});
    const ValueId parity = b.named(b.ew(OpKind::SELECT, {first, flipped, r.phase}), "empty_phase");
    gpu::Op wait = op_of(GpuOpKind::MBAR_WAIT);
    wait.operands = {slot, parity, r.tid, r.in_range != kNoValue ? b.ew(OpKind::BITAND, {r.in_range, has_prev}) : has_prev};
    b.append(std::move(wait));
    body.ops.insert(body.ops.begin() + static_cast<std::ptrdiff_t>(r.first_copy), step.ops.begin(), step.ops.end());
    body.ops.erase(body.ops.begin() + static_cast<std::ptrdiff_t>(r.barrier));
    // Top level last (the loop may sit in it): the init after the full ones', the alloc after theirs.
    f_.body.ops.insert(f_.body.ops.begin() + static_cast<std::ptrdiff_t>(r.init + 1), setup.ops.begin(), setup.ops.end());
    f_.body.ops.insert(f_.body.ops.begin() + static_cast<std::ptrdiff_t>(r.bars_alloc + 1), std::move(alloc));
  }

  gpu::Function& f_;
  DefiningOps<gpu::Block> defs_;
};

}  // namespace

void release_stages(gpu::Function& f, const PassContext&) {
  std::set<ValueId> seen;
  while (Releaser(f).next_ring(seen)) {
  }
}

}  // namespace metile

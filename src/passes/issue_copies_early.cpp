// issue-copies-early: starts a dot's asynchronous copies from device memory at an earlier dot of
// the same block. Lowering issues each unpipelined dot's copies where the dot runs, commits them
// as one group and waits for it at once (async_commit, async_wait pending=0). In flash
// attention's loop the second dot's V tile is known from the top of the body, yet its copy would
// start only after the first dot and the softmax, and its latency is paid in full every
// iteration. Moved behind the first dot's commit, as a group of its own, it is in flight during
// Q K^T and the softmax; the first dot's wait then lets that one group stay in flight (pending=1),
// and the second dot still waits for everything before its barrier (cp.async.wait_group 1, then 0).
//
// A later group, a top-level `async_commit` followed at once by `async_wait pending=0` (an
// unpipelined dot's), goes with its top-level `async_copy` ops since the previous asynchronous op
// and the pure top-level ops after the target that compute their operands. Its target is the
// earliest of the block's
//   - groups waited for at once: it goes right behind their commit, and their wait leaves it in
//     flight (pending=1);
//   - dots without copies of their own: a barrier followed by an `mma` (with a warpgroup atom's
//     `warpgroup_sync` before the barrier) and no `async_wait` before them; it goes in front of
//     them, committed and not waited for;
// where
//   - those operands are defined: before the target, outside the block, or by the moved pure
//     ops (an operand a load or any other impure op after the target computes keeps the group
//     where it is);
//   - the ops it passes (nested ones included) neither read nor write the arrays its copies
//     write, write no device memory, and hold no asynchronous op in a nested block; their own
//     top-level groups may stay (they are committed after the moved group now, and every wait
//     among them waits for at least what it waited for before);
//   - what runs before the target back to a barrier, along every path (the previous iteration of
//     a loop included: barrier_flow.h), touches none of those arrays, so the copies cannot
//     overtake another thread's earlier access.
// Every later group that may move to one target goes there, in order, as one group under one
// commit; the later dot's wait, which stays where it was, waits for it. A pipelined loop's groups
// (waits that leave groups in flight) do not move, nor go behind. Targets whose copies
// complete where they are issued (GpuTarget::async_copies false: Apple GPUs) are left alone.
// Needs: verified GPU IR after copy-rows-async (every asynchronous op present). Guarantees: the
// same values everywhere; a moved copy starts earlier and is waited for, before any barrier-ordered
// read of its arrays, where it was before.
#include <set>
#include <string>
#include <vector>

#include "ir/walk.h"
#include "passes/barrier_flow.h"
#include "passes/pass.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

bool is_async(GpuOpKind k) {
  return k == GpuOpKind::ASYNC_COPY || k == GpuOpKind::ASYNC_COMMIT || k == GpuOpKind::ASYNC_WAIT;
}

// A top-level commit at `c` followed at once by a wait for every group: an unpipelined dot's.
bool waits_for_all(const gpu::Block& block, size_t c) {
  if (c + 1 >= block.ops.size() || block.ops[c].kind != GpuOpKind::ASYNC_COMMIT) return false;
  const gpu::Op& w = block.ops[c + 1];
  return w.kind == GpuOpKind::ASYNC_WAIT && w.attr_int("pending") == 0;
}

// Whether `op` or an op nested in it may not be passed by copies into `arrays`: it touches one
// of them through a threadgroup pointer (every array for a pointer whose array is not known),
// writes device memory or other threadgroup memory through ops the check does not model (atomics,
// TMA and mbarrier ops), or is a nested asynchronous op, whose groups the move would reorder.
bool blocks(const gpu::Function& f, const std::vector<uint64_t>& masks, const gpu::Op& top,
            uint64_t arrays) {
  bool no = false;
  auto check = [&](const gpu::Op& op, bool nested) {
    if (nested && is_async(op.kind)) no = true;
    if (gpu::has_gpu_trait(op.kind, gpu::kGPure) || op.kind == GpuOpKind::ALLOC) return;
    for (ValueId x : op.operands) {
      const gpu::Value& v = f.value(x);
      const uint64_t m = masks[x] != 0 ? masks[x] : kEveryArray;
      if (v.is_ptr && v.space == AddrSpace::threadgroup && (m & arrays) != 0) no = true;
    }
    switch (op.kind) {
      case GpuOpKind::STORE:
      case GpuOpKind::VSTORE: {
        const gpu::Value& p = f.value(op.operands[0]);
        if (!p.is_ptr || p.space != AddrSpace::threadgroup) no = true;  // device memory
        break;
      }
      case GpuOpKind::ATOMIC:
      case GpuOpKind::TMA_LOAD:
      case GpuOpKind::MBAR_INIT:
      case GpuOpKind::MBAR_WAIT:
      case GpuOpKind::MBAR_ARRIVE:
        no = true;
        break;
      default:
        break;
    }
  };
  check(top, false);
  for (const gpu::Block& r : top.regions) gpu::walk(r, [&](const gpu::Op& o) { check(o, true); });
  return no;
}

// Moves every later group that may go there to block.ops[at], in front of the earlier dot's
// barrier, or behind its commit where `wait` (its wait, right after that commit) is not npos;
// returns the number of ops put in front of block.ops[at].
size_t issue_at(gpu::Function& f, gpu::Block& block, size_t at, size_t wait) {
  const std::vector<uint64_t> masks = gpu::array_masks(f);
  const auto defs = defining_ops(block);
  // The top-level index of the op defining v, or npos: defined before the block or in a nested one.
  auto top_index = [&](ValueId v) {
    auto d = defs.find(v);
    const gpu::Op* first = block.ops.data();
    if (d == defs.end() || d->second < first || d->second >= first + block.ops.size()) return std::string::npos;
    return static_cast<size_t>(d->second - block.ops.data());
  };
  const FlowGraph graph(f, AsyncEffects::by_operand);
  const ArrayEffect before = graph.until_barrier(graph.node_of(&block.ops[at]), false);

  std::set<size_t> moved;  // the ops of the groups that go, and the commits they leave
  std::set<size_t> dropped_commits;
  for (size_t e = at; e < block.ops.size(); ++e) {
    if (!waits_for_all(block, e)) continue;
    std::set<size_t> slice;
    uint64_t arrays = 0;
    bool ok = true;
    for (size_t i = e; i-- > at;) {  // the copies since the previous asynchronous op
      if (block.ops[i].kind != GpuOpKind::ASYNC_COPY) {
        if (is_async(block.ops[i].kind)) break;
        continue;
      }
      slice.insert(i);
      const uint64_t m = masks[block.ops[i].operands[0]];
      ok = ok && m != 0;
      arrays |= m;
    }
    if (slice.empty() || !ok) continue;
    // The operands' pure top-level producers after the target go with the copies.
    std::vector<size_t> work(slice.begin(), slice.end());
    while (ok && !work.empty()) {
      const gpu::Op& op = block.ops[work.back()];
      work.pop_back();
      for (ValueId x : op.operands) {
        const size_t d = top_index(x);
        if (d == std::string::npos || d < at || moved.count(d) || slice.count(d)) continue;
        const gpu::Op& def = block.ops[d];
        if (!gpu::has_gpu_trait(def.kind, gpu::kGPure) || def.kind == GpuOpKind::CONVERT_LAYOUT) {
          ok = false;  // defined only later, by an op that must stay
          break;
        }
        slice.insert(d);
        work.push_back(d);
      }
    }
    ok = ok && ((before.reads | before.writes) & arrays) == 0;
    for (size_t i = at; ok && i < e; ++i)
      if (!slice.count(i) && !moved.count(i) && !dropped_commits.count(i))
        ok = !blocks(f, masks, block.ops[i], arrays);
    if (!ok) continue;
    moved.insert(slice.begin(), slice.end());
    dropped_commits.insert(e);
  }
  if (moved.empty()) return 0;

  // The moved ops in order, then one commit (the last dropped one), then the rest.
  std::vector<gpu::Op> ops;
  ops.reserve(block.ops.size());
  for (size_t i = 0; i < at; ++i) ops.push_back(std::move(block.ops[i]));
  for (size_t i : moved) ops.push_back(std::move(block.ops[i]));
  ops.push_back(std::move(block.ops[*dropped_commits.rbegin()]));
  for (size_t i = at; i < block.ops.size(); ++i)
    if (!moved.count(i) && !dropped_commits.count(i)) ops.push_back(std::move(block.ops[i]));
  block.ops = std::move(ops);
  if (wait != std::string::npos) block.ops[wait + moved.size() + 1].set_attr("pending", int64_t{1});
  return moved.size() + 1;
}

void issue_in(gpu::Function& f, gpu::Block& block) {
  for (gpu::Op& op : block.ops)
    for (gpu::Block& r : op.regions) issue_in(f, r);
  // Behind a group waited for at once (an unpipelined dot's own), or in front of the barrier
  // (and a warpgroup atom's warpgroup_sync) before a dot's mma where no wait precedes them.
  for (size_t i = 0; i < block.ops.size(); ++i) {
    if (waits_for_all(block, i)) {
      i += issue_at(f, block, i + 1, i + 1) + 1;
      continue;
    }
    if (block.ops[i].kind != GpuOpKind::BARRIER || i + 1 == block.ops.size() ||
        block.ops[i + 1].kind != GpuOpKind::MMA)
      continue;
    size_t at = i;
    if (at > 0 && block.ops[at - 1].kind == GpuOpKind::WARPGROUP_SYNC) --at;
    if (at > 0 && block.ops[at - 1].kind == GpuOpKind::ASYNC_WAIT) continue;  // the dot waits for copies
    i += issue_at(f, block, at, std::string::npos);
  }
}

}  // namespace

void issue_copies_early(gpu::Function& f, const PassContext& ctx) {
  if (ctx.target.async_copies) issue_in(f, f.body);  // elsewhere a copy completes where it is issued
}

}  // namespace metile

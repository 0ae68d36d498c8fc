// hoist-invariant-staging: moves out of a `for` the stores into a threadgroup array that write the
// same elements with the same values in every iteration. Lowering stages each dot's operands at
// the dot, so an operand defined before the loop (flash attention's Q in dot(q, trans(k))) would be
// stored again every iteration, its tile and staging addresses live in registers across the loop;
// moved in front of the loop it is stored once and they die there.
//
// A store at the top level of the body moves, with the pure ops of the body's top level that
// compute its operands (in body order, just before the loop), when
//   - its operands are defined outside the loop or by such ops (not the loop's arguments, not a
//     convert_layout, whose expansion goes through a scratch array);
//   - no other op of the function writes its array, and every op that reads it is in the loop,
//     after the store at the top level (a K chunk staged per store, or an array read before the
//     store, keeps its stores);
//   - a barrier at the body's top level lies between the store and the array's first read, so
//     every iteration's reads stay ordered after it; the ops between the two do not change, so a
//     warpgroup_sync there still fences the stores for the async proxy before the warpgroup MMAs
//     read them (lower_warpgroup.cpp). The pass moves no barrier, so it never has to add one;
//   - the reads of an earlier run of the loop (inside an outer loop) stay ordered before the moved
//     store: a barrier follows the array's last read in the body, or none precedes the store there
//     (then the path from those reads to the store crosses the same barriers as before).
// A loop that runs no iteration now writes the array too, which nothing reads.
// Needs: verified GPU IR before lower-convert-layout. Guarantees: the same values everywhere; each
// moved store runs once before its loop instead of once per iteration.
#include <algorithm>
#include <map>
#include <set>

#include "passes/pass.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

// The arrays an op with memory effects reaches through its threadgroup pointer operands (every
// array for a pointer whose array is not known).
uint64_t touched(const gpu::Function& f, const std::vector<uint64_t>& masks, const gpu::Op& op) {
  if ((gpu::has_gpu_trait(op.kind, gpu::kGPure) && op.kind != GpuOpKind::CONVERT_LAYOUT) ||
      op.kind == GpuOpKind::ALLOC)
    return 0;
  uint64_t m = 0;
  for (ValueId x : op.operands) {
    const gpu::Value& v = f.value(x);
    if (v.is_ptr && v.space == AddrSpace::threadgroup) m |= masks[x] != 0 ? masks[x] : ~uint64_t{0};
  }
  return m;
}

// Whether op, which touches `arrays`, only reads them: loads, and mma's A and B (its optional
// accumulator array is written).
bool only_reads(const gpu::Function& f, const std::vector<uint64_t>& masks, const gpu::Op& op,
                uint64_t arrays) {
  if (op.kind == GpuOpKind::LOAD || op.kind == GpuOpKind::VLOAD) return true;
  if (op.kind != GpuOpKind::MMA) return false;
  if (op.operands.size() < 5) return true;
  const ValueId c = op.operands[4];
  return !f.value(c).is_ptr || ((masks[c] != 0 ? masks[c] : ~uint64_t{0}) & arrays) == 0;
}

bool has_barrier(const gpu::Op& op) {
  bool any = op.kind == GpuOpKind::BARRIER;
  for (const gpu::Block& r : op.regions)
    gpu::walk(r, [&](const gpu::Op& o) { any = any || o.kind == GpuOpKind::BARRIER; });
  return any;
}

// Moves the first store of the loop at block.ops[at] that may go, with its slice, in front of
// the loop; returns the number of ops moved (0: none may).
size_t hoist_one(gpu::Function& f, gpu::Block& block, size_t at) {
  const std::vector<uint64_t> masks = gpu::array_masks(f);
  gpu::Block& body = block.ops[at].body();
  std::map<ValueId, size_t> pos;  // top-level body results -> their op's index
  for (size_t i = 0; i < body.ops.size(); ++i)
    for (ValueId r : body.ops[i].results) pos[r] = i;
  // Every op of the function touching a threadgroup array, with its top-level index in the body
  // (npos: outside the loop).
  struct Touch {
    const gpu::Op* op;
    size_t top;
  };
  std::vector<Touch> touches;
  auto visit = [&](const gpu::Block& b, size_t top, auto& self) -> void {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const gpu::Op& op = b.ops[i];
      const size_t t = &b == &body ? i : top;
      if (touched(f, masks, op) != 0) touches.push_back({&op, t});
      for (const gpu::Block& r : op.regions) self(r, t, self);
    }
  };
  visit(f.body, std::string::npos, visit);

  for (size_t s = 0; s < body.ops.size(); ++s) {
    const gpu::Op& store = body.ops[s];
    if (store.kind != GpuOpKind::STORE) continue;
    const gpu::Value& ptr = f.value(store.operands[0]);
    const uint64_t array = masks[store.operands[0]];
    if (!ptr.is_ptr || ptr.space != AddrSpace::threadgroup || array == 0) continue;
    // Its operands, from outside the loop or from pure top-level ops of the body.
    std::set<size_t> slice;
    auto invariant = [&](ValueId v, auto& self) -> bool {
      if (std::count(body.args.begin(), body.args.end(), v) != 0) return false;
      auto d = pos.find(v);
      if (d == pos.end()) return true;
      const gpu::Op& op = body.ops[d->second];
      if (!gpu::has_gpu_trait(op.kind, gpu::kGPure) || op.kind == GpuOpKind::CONVERT_LAYOUT)
        return false;
      if (!slice.insert(d->second).second) return true;
      for (ValueId x : op.operands)
        if (!self(x, self)) return false;
      return true;
    };
    bool ok = true;
    for (ValueId x : store.operands) ok = ok && invariant(x, invariant);
    // Its array: read only in the loop, after it; written by nothing else.
    size_t first = body.ops.size(), last = s;
    for (const Touch& t : touches) {
      if (!ok) break;
      if (t.op == &store || (touched(f, masks, *t.op) & array) == 0) continue;
      ok = t.top != std::string::npos && t.top > s && only_reads(f, masks, *t.op, array);
      first = std::min(first, t.top);
      last = std::max(last, t.top);
    }
    if (!ok) continue;
    bool ordered = first == body.ops.size(), after_last = false, before = false;
    for (size_t i = 0; i < body.ops.size(); ++i) {
      const bool barrier = body.ops[i].kind == GpuOpKind::BARRIER;
      if (barrier && i > s && i < first) ordered = true;
      if (barrier && i > last) after_last = true;
      if (i < s && has_barrier(body.ops[i])) before = true;
    }
    if (!ordered || (before && !after_last)) continue;

    slice.insert(s);
    std::vector<gpu::Op> moved, kept;
    for (size_t i = 0; i < body.ops.size(); ++i)
      (slice.count(i) ? moved : kept).push_back(std::move(body.ops[i]));
    body.ops = std::move(kept);
    const size_t n = moved.size();
    block.ops.insert(block.ops.begin() + static_cast<std::ptrdiff_t>(at),
                     std::make_move_iterator(moved.begin()), std::make_move_iterator(moved.end()));
    return n;
  }
  return 0;
}

void hoist_in(gpu::Function& f, gpu::Block& block) {
  for (size_t i = 0; i < block.ops.size(); ++i) {
    for (gpu::Block& r : block.ops[i].regions) hoist_in(f, r);
    if (block.ops[i].kind != GpuOpKind::FOR) continue;
    while (size_t n = hoist_one(f, block, i)) i += n;
  }
}

}  // namespace

void hoist_invariant_staging(gpu::Function& f, const PassContext&) { hoist_in(f, f.body); }

}  // namespace metile

// elide-barriers: removes a barrier that orders no threadgroup-memory hazard. A barrier is
// needed only between an access before it and a conflicting access after it (a write and any
// access of the same array, possibly by other threads) where no other barrier lies between them
// on some path; the trailing barrier of an exchange whose array nothing touches before the next
// barrier (the next block reduction takes the other scratch array, or the kernel ends) orders
// nothing. Paths follow the structured control flow: a loop's body runs again after its back
// edge (or not at all), an if runs either block, a while runs its before block, then its after
// block and its before block again. Arrays are told apart by the pointers' provenance
// (gpu::array_masks); one array counts as one location, whatever the offsets. Ops whose memory
// effects this pass does not model (matrix ops, async and TMA copies, mbarriers, warpgroup
// waits) count as reading and writing every array, so the barriers around them stay, as do
// barriers with attributes (they also order device memory or fence the async proxy).
// Needs: verified GPU IR with thread-uniform control flow, before allocate-threadgroup-memory
// (arrays that come to share bytes get their barrier back there). Guarantees: two conflicting
// threadgroup accesses that had a barrier between them on every path still have one; nothing
// but plain barriers changes.
#include <set>

#include "passes/pass.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

// What an op does to threadgroup memory: bit i of reads / writes is the i-th array.
struct ArrayEffect {
  uint64_t reads = 0, writes = 0;
  bool conflicts(const ArrayEffect& later) const {
    return (writes & (later.reads | later.writes)) != 0 || (reads & later.writes) != 0;
  }
  void add(const ArrayEffect& e) {
    reads |= e.reads;
    writes |= e.writes;
  }
};

constexpr uint64_t kEveryArray = ~uint64_t{0};

// One op of the program (or an empty join of paths: a loop's head) and where control goes next.
struct FlowNode {
  const gpu::Op* op = nullptr;
  ArrayEffect effect;
  bool barrier = false;
  std::vector<size_t> next, prev;
};

class FlowGraph {
 public:
  explicit FlowGraph(const gpu::Function& f) : f_(f), masks_(gpu::array_masks(f)) { flow(f.body, {}); }

  std::vector<FlowNode> nodes;

 private:
  // The arrays an access through `ptrs` may touch (none outside threadgroup memory).
  uint64_t arrays(ValueId ptrs) const {
    const gpu::Value& v = f_.value(ptrs);
    if (!v.is_ptr || v.space != AddrSpace::threadgroup) return 0;
    return masks_[ptrs] != 0 ? masks_[ptrs] : kEveryArray;
  }

  ArrayEffect effect(const gpu::Op& op) const {
    switch (op.kind) {
      case GpuOpKind::LOAD:
      case GpuOpKind::VLOAD:
        return {arrays(op.operands[0]), 0};
      case GpuOpKind::STORE:
      case GpuOpKind::VSTORE:
        return {0, arrays(op.operands[0])};
      case GpuOpKind::ATOMIC:
        return {arrays(op.operands[0]), arrays(op.operands[0])};
      case GpuOpKind::CONVERT_LAYOUT:  // pure as a value, but its expansion goes through its array
        return {kEveryArray, kEveryArray};
      // No threadgroup array: an alloc only names one, a print writes device memory, opaque
      // is a register, and a cancel_point's check keeps its own word between its own barriers
      // (msl.cpp; cuda's reads device memory only).
      case GpuOpKind::ALLOC:
      case GpuOpKind::BARRIER:
      case GpuOpKind::YIELD:
      case GpuOpKind::PRINT:
      case GpuOpKind::OPAQUE:
      case GpuOpKind::CANCEL_POINT:
        return {};
      default:
        if (gpu::has_gpu_trait(op.kind, gpu::kGPure)) return {};
        return {kEveryArray, kEveryArray};
    }
  }

  size_t add(const gpu::Op* op, const std::vector<size_t>& from) {
    FlowNode n;
    n.op = op;
    if (op != nullptr) {
      n.effect = effect(*op);
      n.barrier = op->kind == GpuOpKind::BARRIER;
    }
    const size_t id = nodes.size();
    nodes.push_back(std::move(n));
    link(from, id);
    return id;
  }

  void link(const std::vector<size_t>& from, size_t to) {
    for (size_t p : from) {
      nodes[p].next.push_back(to);
      nodes[to].prev.push_back(p);
    }
  }

  // Adds the block's ops after `from`; returns the nodes control leaves the block from.
  std::vector<size_t> flow(const gpu::Block& b, std::vector<size_t> from) {
    for (const gpu::Op& op : b.ops) {
      switch (op.kind) {
        case GpuOpKind::FOR: {
          const size_t head = add(nullptr, from);
          link(flow(op.body(), {head}), head);
          from = {head};
          break;
        }
        case GpuOpKind::WHILE: {
          const size_t head = add(nullptr, from);
          std::vector<size_t> tested = flow(op.regions[0], {head});
          link(flow(op.regions[1], tested), head);
          from = tested;
          break;
        }
        case GpuOpKind::IF: {
          std::vector<size_t> out = flow(op.regions[0], from);
          for (size_t n : flow(op.regions[1], from)) out.push_back(n);
          from = out;
          break;
        }
        default:
          from = {add(&op, from)};
      }
    }
    return from;
  }

  const gpu::Function& f_;
  std::vector<uint64_t> masks_;
};

// What the nodes reachable from `start` (along next or prev) do before a barrier stops the path.
ArrayEffect effects_until_barrier(const std::vector<FlowNode>& nodes, size_t start, bool forward) {
  ArrayEffect seen;
  std::vector<bool> visited(nodes.size(), false);
  std::vector<size_t> work = forward ? nodes[start].next : nodes[start].prev;
  while (!work.empty()) {
    const size_t n = work.back();
    work.pop_back();
    if (visited[n] || nodes[n].barrier) continue;
    visited[n] = true;
    seen.add(nodes[n].effect);
    for (size_t m : forward ? nodes[n].next : nodes[n].prev) work.push_back(m);
  }
  return seen;
}

}  // namespace

void elide_barriers(gpu::Function& f, const PassContext&) {
  FlowGraph g(f);
  std::set<const gpu::Op*> gone;
  // One at a time, in program order: a removed barrier's node passes the paths on, so the
  // barriers after it are judged without it (of two barriers in a row between a write and a
  // read, one stays).
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    FlowNode& node = g.nodes[n];
    if (!node.barrier || !node.op->attrs.empty()) continue;
    if (effects_until_barrier(g.nodes, n, false).conflicts(effects_until_barrier(g.nodes, n, true))) continue;
    node.barrier = false;
    gone.insert(node.op);
  }
  if (!gone.empty()) erase_ops_if(f.body, [&](const gpu::Op& op) { return gone.count(&op) != 0; });
}

}  // namespace metile

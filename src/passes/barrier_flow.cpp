// The flow graph of threadgroup-memory effects that elide-barriers and release-stages read.
#include "passes/barrier_flow.h"

namespace metile {

using gpu::GpuOpKind;

FlowGraph::FlowGraph(const gpu::Function& f, AsyncEffects async) : f_(f), async_(async), masks_(gpu::array_masks(f)) {
  if (async_ == AsyncEffects::by_operand)
    gpu::walk(f.body, [&](const gpu::Op& op) {
      if (op.kind == GpuOpKind::MMA) mma_.add(effect(op));
      if (op.kind == GpuOpKind::ASYNC_COPY) async_copies_.writes |= arrays(op.operands[0]);
      if (op.kind == GpuOpKind::TMA_LOAD) tma_.writes |= arrays(op.operands[0]);
    });
  flow(f.body, {});
}

uint64_t FlowGraph::arrays(ValueId ptrs) const {
  const gpu::Value& v = f_.value(ptrs);
  if (!v.is_ptr || v.space != AddrSpace::threadgroup) return 0;
  return masks_[ptrs] != 0 ? masks_[ptrs] : kEveryArray;
}

size_t FlowGraph::node_of(const gpu::Op* op) const {
  for (size_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].op == op) return n;
  return nodes.size();
}

ArrayEffect FlowGraph::effect(const gpu::Op& op) const {
  const bool by_operand = async_ == AsyncEffects::by_operand;
  auto at = [&](size_t i) { return i < op.operands.size() ? arrays(op.operands[i]) : 0; };
  switch (op.kind) {
    case GpuOpKind::LOAD:
    case GpuOpKind::VLOAD:
      return {at(0), 0};
    case GpuOpKind::STORE:
    case GpuOpKind::VSTORE:
      return {0, at(0)};
    case GpuOpKind::ATOMIC:
      return {at(0), at(0)};
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
      break;
  }
  if (gpu::has_gpu_trait(op.kind, gpu::kGPure)) return {};
  if (!by_operand) return {kEveryArray, kEveryArray};
  switch (op.kind) {
    case GpuOpKind::MMA:  // (a, b, acc, tid [, c]): c passes the accumulator through an array
      return {at(0) | at(1) | at(4), at(4)};
    case GpuOpKind::WARPGROUP_WAIT:
    case GpuOpKind::WARPGROUP_SYNC:
      return mma_;
    case GpuOpKind::ASYNC_COPY:
      return {0, at(0)};
    case GpuOpKind::ASYNC_WAIT:
      return async_copies_;
    case GpuOpKind::ASYNC_COMMIT:
      return {};
    case GpuOpKind::TMA_LOAD:
      return {at(1), at(0)};
    case GpuOpKind::MBAR_INIT:
      return {0, at(0)};
    case GpuOpKind::MBAR_WAIT:
      return {at(0), tma_.writes};
    case GpuOpKind::MBAR_ARRIVE:
      return {at(0), 0};
    default:
      return {kEveryArray, kEveryArray};
  }
}

size_t FlowGraph::add(const gpu::Op* op, const std::vector<size_t>& from) {
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

void FlowGraph::link(const std::vector<size_t>& from, size_t to) {
  for (size_t p : from) {
    nodes[p].next.push_back(to);
    nodes[to].prev.push_back(p);
  }
}

// Adds the block's ops after `from`; returns the nodes control leaves the block from.
std::vector<size_t> FlowGraph::flow(const gpu::Block& b, std::vector<size_t> from) {
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
      // The warp roles run side by side; each role's barriers order its own threads only, so
      // as for an if, a path goes through one role's block.
      case GpuOpKind::WARP_SPECIALIZE:
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

ArrayEffect FlowGraph::until_barrier(size_t start, bool forward) const {
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

}  // namespace metile

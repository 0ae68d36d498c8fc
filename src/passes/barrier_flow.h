/** \file barrier_flow.h
 * Which threadgroup arrays the ops around a barrier touch, along the structured control flow:
 * the analysis behind elide-barriers (a barrier that orders nothing goes) and release-stages
 * (a K loop's barrier that orders only its TMA ring's reuse gives way to mbarriers).
 */
#pragma once

#include <cstdint>
#include <vector>

#include "ir/gpu_ir.h"

namespace metile {

/** What an op does to threadgroup memory: bit i of reads / writes is the i-th array (gpu::array_masks). */
struct ArrayEffect {
  uint64_t reads = 0, writes = 0;
  bool conflicts(const ArrayEffect& later) const {
    return (writes & (later.reads | later.writes)) != 0 || (reads & later.writes) != 0;
  }
  void add(const ArrayEffect& e) {
    reads |= e.reads;
    writes |= e.writes;
  }
  /** The same effect on the arrays outside `mask` only. */
  ArrayEffect without(uint64_t mask) const { return {reads & ~mask, writes & ~mask}; }
};

inline constexpr uint64_t kEveryArray = ~uint64_t{0};

/** One op of the program (or an empty join of paths: a loop's head) and where control goes next. */
struct FlowNode {
  const gpu::Op* op = nullptr;
  ArrayEffect effect;
  bool barrier = false;
  std::vector<size_t> next, prev;
};

/**
 * How the graph counts the ops whose accesses are asynchronous (matrix ops, async and TMA copies,
 * mbarriers, warpgroup waits). every_array: each reads and writes every array, so the barriers
 * around them stay. by_operand: each touches the arrays its operands point into, and an access
 * that completes later is counted again where it completes: a warpgroup wait reads what the
 * matrix ops read, an async wait writes what the async copies write, an mbarrier wait writes
 * what the TMA copies write; mbarrier ops read their barriers (mbar_init writes them).
 */
enum class AsyncEffects : uint8_t { every_array, by_operand };

/** The function's ops as a flow graph: a loop's body runs again after its back edge (or not at
 * all), an if runs either block, a while runs its before block, then its after block and its
 * before block again. Arrays are told apart by the pointers' provenance; one array counts as one
 * location, whatever the offsets. */
class FlowGraph {
 public:
  explicit FlowGraph(const gpu::Function& f, AsyncEffects async = AsyncEffects::every_array);

  std::vector<FlowNode> nodes;

  /** The arrays an access through `ptrs` may touch (none outside threadgroup memory). */
  uint64_t arrays(ValueId ptrs) const;
  /** The node of `op` (nodes.size() for none). */
  size_t node_of(const gpu::Op* op) const;
  /** What the nodes reachable from `start` (along next or prev) do before a barrier stops the path. */
  ArrayEffect until_barrier(size_t start, bool forward) const;

 private:
  ArrayEffect effect(const gpu::Op& op) const;
  size_t add(const gpu::Op* op, const std::vector<size_t>& from);
  void link(const std::vector<size_t>& from, size_t to);
  std::vector<size_t> flow(const gpu::Block& b, std::vector<size_t> from);

  const gpu::Function& f_;
  AsyncEffects async_;
  std::vector<uint64_t> masks_;
  // by_operand: what the asynchronous accesses touch, counted again where they complete.
  ArrayEffect mma_, async_copies_, tma_;
};

}  // namespace metile

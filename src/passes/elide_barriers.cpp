// elide-barriers: removes a barrier that orders no threadgroup-memory hazard. A barrier is
// needed only between an access before it and a conflicting access after it (a write and any
// access of the same array, possibly by other threads) where no other barrier lies between them
// on some path; the trailing barrier of an exchange whose array nothing touches before the next
// barrier (the next block reduction takes the other scratch array, or the kernel ends) orders
// nothing. Paths follow the structured control flow: a loop's body runs again after its back
// edge (or not at all), an if runs either block, a while runs its before block, then its after
// block and its before block again. Arrays are told apart by the pointers' provenance
// (gpu::array_masks); one array counts as one location, whatever the offsets. Ops whose memory
// effects are asynchronous (matrix ops, async and TMA copies, mbarriers, warpgroup waits) count
// as reading and writing every array (AsyncEffects::every_array, barrier_flow.h), so the barriers
// around them stay, as do barriers with attributes (they also order device memory or fence the
// async proxy) other than a warp role's name (id, threads: the same barrier among fewer threads,
// whose paths the flow graph keeps in their role's block).
// Needs: verified GPU IR with thread-uniform control flow, before allocate-threadgroup-memory
// (arrays that come to share bytes get their barrier back there). Guarantees: two conflicting
// threadgroup accesses that had a barrier between them on every path still have one; nothing
// but plain barriers changes.
#include <set>

#include "passes/barrier_flow.h"
#include "passes/pass.h"

namespace metile {

namespace {

bool plain(const gpu::Op& barrier) {
  for (const Attr& a : barrier.attrs)
    if (a.name != "id" && a.name != "threads") return false;
  return true;
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
    if (!node.barrier || !plain(*node.op)) continue;
    if (g.until_barrier(n, false).conflicts(g.until_barrier(n, true))) continue;
    node.barrier = false;
    gone.insert(node.op);
  }
  if (!gone.empty()) erase_ops_if(f.body, [&](const gpu::Op& op) { return gone.count(&op) != 0; });
}

}  // namespace metile

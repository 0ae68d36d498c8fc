// preload-fragments: marks each warp-level mma.sync op `preload=1`, so its CUDA spelling keeps
// two fragment buffers and reads the next k step's fragments while this step's mmas run, hiding
// the threadgroup-memory latency behind them (an op of one k step has nothing to read ahead and
// is spelled as before). Warpgroup atoms read their operands from threadgroup memory themselves
// and Apple's atoms load whole fragments, so only mma.sync is marked. Needs: verified GPU IR.
// Guarantees: the same ops; only the attribute changes.
#include "passes/pass.h"
#include "target/matrix_atom.h"

namespace metile {

void preload_fragments(gpu::Function& f, const PassContext&) {
  gpu::walk_mut(f.body, [](gpu::Op& op) {
    if (op.kind == gpu::GpuOpKind::MMA && mma_atom_kind(op) == AtomKind::mma_sync)
      op.set_attr("preload", int64_t{1});
  });
}

}  // namespace metile

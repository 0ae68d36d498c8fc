// serpentine-mma: marks each warp-level mma.sync op `serpentine=1`, so its CUDA spelling walks
// the odd rows of atoms backwards over the columns and consecutive mmas share an operand's
// fragments (fewer register moves between them). Only mma.sync has that order to choose: a
// warpgroup atom is one instruction over the whole tile, and Apple's atoms leave the order to
// their compiler. Needs: verified GPU IR. Guarantees: the same ops; only the attribute changes.
#include "passes/pass.h"
#include "target/matrix_atom.h"

namespace metile {

void order_mmas_serpentine(gpu::Function& f, const PassContext&) {
  gpu::walk_mut(f.body, [](gpu::Op& op) {
    if (op.kind == gpu::GpuOpKind::MMA && mma_atom_kind(op) == AtomKind::mma_sync)
      op.set_attr("serpentine", int64_t{1});
  });
}

}  // namespace metile

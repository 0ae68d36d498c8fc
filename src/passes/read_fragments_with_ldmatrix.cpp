// ldmatrix-fragments: marks each warp-level mma.sync op `ldmatrix=1` whose threadgroup arrays
// ldmatrix can read (ldmatrix_fits: 16-bit operands with 16-byte aligned rows, or a tf32 atom's
// A), so its CUDA spelling reads a warp's fragments with one ldmatrix per four 8x8 blocks instead
// of a shared-memory load per register. Every target with mma.sync has ldmatrix; warpgroup atoms
// read threadgroup memory themselves and Apple's atoms load whole fragments, so only mma.sync is
// marked. A K-major B (`b_kmajor=1`, dot_choices.cpp) has no other spelling: layout assignment
// chooses it only where this pass runs and its rows fit. Needs: verified GPU IR. Guarantees: the
// same ops; only the attribute changes.
#include "passes/pass.h"
#include "target/matrix_atom.h"

namespace metile {

void read_fragments_with_ldmatrix(gpu::Function& f, const PassContext&) {
  gpu::walk_mut(f.body, [&](gpu::Op& op) {
    if (op.kind != gpu::GpuOpKind::MMA || mma_atom_kind(op) != AtomKind::mma_sync) return;
    if (ldmatrix_fits(f.value(op.operands[0]).dtype, op.attr_int("tf32") != 0, op.attr_int("lda"),
                      op.attr_int("ldb")))
      op.set_attr("ldmatrix", int64_t{1});
  });
}

}  // namespace metile

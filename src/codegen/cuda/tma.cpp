// The TMA ops (lower_tma.cpp) in CUDA: thread 0 sets up the mbarriers and issues each tile's
// boxes (cp.async.bulk.tensor.2d, or .3d at a slab coordinate for a stack of matrices (TmaMap::slabs),
// through the kernel's tensor map parameter mt_tmap<map>, one box per column block of the staging layout, each block box_rows x box_cols elements, in
// order); every thread waits on the barrier's phase itself. The stages' "empty" mbarriers
// (release_stages.cpp) take one arrival from lane 0 of each warp and are waited for by thread 0
// alone, before it refills the stage. `opaque` (lower_persistent.cpp) is an
// empty asm over a copy of an i32, so what is computed from it stays in the loop that computes it. The helpers are in
// prelude/cuda_tma.h and, for 3-D boxes, prelude/cuda_tma_3d.h; Metal has no such ops (lowering makes them for wgmma dots only).
#include "codegen/cuda/tma.h"

#include "support/error.h"

namespace metile {

using gpu::GpuOpKind;

void emit_cuda_tma(SourceWriter& w, const gpu::Op& op, const std::vector<std::string>& operands, DType element,
                   const std::string& result) {
  auto at = [&](size_t i) { return strip_parens(operands[i]); };
  switch (op.kind) {
    case GpuOpKind::MBAR_INIT: {
      w.open("if (" + at(1) + " == 0)");
      for (int64_t i = 0; i < op.attr_int("n"); ++i)
        w.line("mt_mbar_init(" + at(0) + " + " + std::to_string(i) + ", " + std::to_string(op.attr_int("count")) + ");");
      w.line("mt_mbar_init_fence();");
      w.close();
      return;
    }
    case GpuOpKind::TMA_LOAD: {
      const int64_t rows = op.attr_int("box_rows"), cols = op.attr_int("box_cols"), blocks = op.attr_int("blocks");
      const int64_t bytes = rows * cols * blocks * static_cast<int64_t>(dtype_size(element));
      const bool slabs = op.find_attr("slabs") != nullptr;  // a third coordinate, operand 5
      const size_t pred = slabs ? 6 : 5;
      std::string cond = at(4) + " == 0";
      if (operands.size() > pred) cond += " && " + operands[pred];
      w.open("if (" + cond + ")");
      const std::string bar = at(1), map = "&mt_tmap" + std::to_string(op.attr_int("map"));
      w.line("mt_mbar_expect_tx(" + bar + ", " + std::to_string(bytes) + "u);");
      for (int64_t j = 0; j < blocks; ++j)
        w.line(std::string(slabs ? "mt_tma_load_3d(" : "mt_tma_load_2d(") + at(0) + " + " +
               std::to_string(j * rows * cols) + ", " + map + ", " + at(3) + " + " + std::to_string(j * cols) + ", " +
               at(2) + (slabs ? ", " + at(5) : "") + ", " + bar + ");");
      w.close();
      return;
    }
    case GpuOpKind::MBAR_WAIT:  // with a thread index and a predicate: thread 0 only (release_stages.cpp)
      if (operands.size() == 4) w.open("if (" + at(2) + " == 0 && " + operands[3] + ")");
      w.line("mt_mbar_wait(" + at(0) + ", " + at(1) + ");");
      if (operands.size() == 4) w.close();
      return;
    case GpuOpKind::MBAR_ARRIVE:
      w.open("if (" + at(1) + " == 0" + (operands.size() == 3 ? " && " + operands[2] : "") + ")");
      // Release semantics: the warp's earlier accesses happen before the phase completes. Spelled
      // here rather than in the prelude, which stays as it was for kernels without the op.
      w.line("asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\" :: \"r\"(mt_smem_addr(" + at(0) +
             ")) : \"memory\");");
      w.close();
      return;
    case GpuOpKind::OPAQUE:  // an empty asm that "changes" the value: nothing after it is hoisted
      w.line("int " + result + " = " + at(0) + ";");
      w.line("asm volatile(\"\" : \"+r\"(" + result + "));");
      return;
    case GpuOpKind::WARPGROUP_WAIT:
      w.line("asm volatile(\"wgmma.wait_group.sync.aligned " + std::to_string(op.attr_int("pending")) +
             ";\" ::: \"memory\");");
      return;
    default:
      METILE_ASSERT(false, "tma: not a TMA op");
  }
}

}  // namespace metile

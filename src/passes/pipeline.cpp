// The GPU pipeline, in order. Each pass leaves verified GPU IR behind (run_gpu_pass checks).
#include "passes/pipeline.h"

#include "passes/assign_layouts.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "support/error.h"

namespace metile {

namespace {

// Lowering and the passes for one choice of LowerOptions.
// `last`: this lowering is the last try, so allocate-threadgroup-memory fails over the limit.
GpuPipelineResult lower_and_optimize(const Program& program, const GpuTarget& target,
                                     const CompileOptions& options, const LowerOptions& lo,
                                     const std::string& device, bool last) {
  GpuPipelineResult out;
  LayoutAssignment layouts = assign_layouts(program, target, lo);
  out.layouts = print_layouts(program, layouts);
  out.function = lower_to_gpu(program, layouts, target, lo);
  gpu::Function& f = out.function;
  f.max_registers = options.max_registers;
  for (ValueId v = 1; v < f.values.size(); ++v)
    if (f.regs(v) > target.max_elements_per_thread)
      fail(METILE_ERROR_UNSUPPORTED, "lower", program.name, ": a tile needs ", f.regs(v),
           " elements per thread over ", f.threads, " threads; ", device, " holds at most ",
           target.max_elements_per_thread, " (about ", target.max_elements_per_thread * f.threads,
           "-element tiles): use smaller tiles");
  out.gpu_ir = gpu::print(f);
  PassContext ctx{target};
  ctx.one_align = !options.disables("one_align");
  ctx.device = device;
  ctx.check_threadgroup_limit = last;
  auto run = [&](std::string_view name) {  // CompileOptions::disabled_passes may name any but the first
    if (options.runs(name)) run_gpu_pass(name, f, ctx);
  };
  // What lowering left unread goes before its layout conversions become stores and barriers.
  if (options.opt_level > 0) run("dce");
  // Dot operands lowering stages at the dot that the loop does not change, stored once in front
  // of it instead: at every opt level, before lower-convert-layout adds barriers to loop bodies.
  run("hoist-invariant-staging");
  run_gpu_pass("lower-convert-layout", f, ctx);  // at every opt level: emitters never see one
  // Kept rows' copies, all in flight at once, and the barrier in front of their reads: at every
  // opt level (a row's readers need the barrier), before vectorize-access takes the copy loops.
  run_gpu_pass("copy-rows-async", f, ctx);
  // A later dot's copies from device memory in flight during an earlier dot (attention's V during
  // Q K^T and the softmax): after copy-rows-async, so every asynchronous group is there to count.
  run("issue-copies-early");
  // How mma.sync's CUDA spelling reads its fragments and orders its atoms, at every opt level.
  run("ldmatrix-fragments");
  run("serpentine-mma");
  run("preload-fragments");
  if (options.opt_level > 0) {
    run("release-stages");    // a TMA ring's stages freed by mbarriers, not the K loop's barrier
    run("specialize-warps");  // its copies on a producer warpgroup (opt-in: kOptInPasses)
    run("fold-constants");    // index math on literals, x + 0 from aranges
    run("cse");               // repeated coords, masks and addresses
    run("dce");               // what folding and merging left unused
    run("vectorize-access");  // 16-byte accesses over the cleaned-up addresses
  }
  run("order-device-memory");  // program order between threads: at every opt level
  // Loops check the host's stop word (time limits, metile_cancel_launches): cuda stops a kernel
  // with `trap`, Metal with a return the whole threadgroup takes together.
  run("insert-cancel-points");
  // Barriers that order nothing (a reduction's trailing one where the next reduction takes the
  // other scratch array): before the arrays are placed, where ones that come to share bytes get
  // their barrier back.
  if (options.opt_level > 0) run("elide-barriers");
  // Offsets for the arrays the passes above left, and the limit check: last, at every opt level.
  run_gpu_pass("allocate-threadgroup-memory", f, ctx);
  out.gpu_ir_opt = gpu::print(f);
  return out;
}

}  // namespace

GpuPipelineResult run_gpu_pipeline(const Program& program, const GpuTarget& target,
                                   const CompileOptions& options, const std::string& device) {
  LowerOptions lo;
  lo.num_threads = options.num_threads;
  lo.device = device;
  lo.dot_default = options.dot_default();
  lo.num_stages = options.num_stages;
  lo.warps_m = options.warps_m;
  lo.warps_n = options.warps_n;
  // The K-loop features inside lowering, switched off by name like the passes (kPassPieces).
  lo.async_copy = !options.disables("async_copy");
  lo.ldmatrix_fragments = !options.disables("ldmatrix-fragments");  // K-major B needs that pass
  lo.aligned_body = !options.disables("aligned_body");
  if (options.disables("pipeline")) lo.num_stages = 1;
  lo.tma = !options.disables("tma");
  lo.double_buffer = !options.disables("double_buffer");
  lo.stage_counter = !options.disables("stage_counter");
  lo.kmajor_b = !options.disables("kmajor_b");
  lo.persistent = !options.disables("persistent");
  lo.wide_chunks = !options.disables("wide_chunks");
  lo.broadcast_loads = !options.disables("broadcast_loads");
  lo.fp8_promote = !options.disables("fp8_promote");
  lo.warpgroup_kmajor_b = !options.disables("warpgroup_kmajor_b");
  lo.warpgroup_register_a = !options.disables("warpgroup_register_a");
  lo.warpgroup_stored_b = !options.disables("warpgroup_stored_b");
  // A second scratch array pays only where elide-barriers removes the barrier it frees.
  lo.alternate_scratch = options.opt_level > 0 && !options.disables("elide-barriers");
  // The pipeline's stages are sized against 3/4 of the limit before the epilogue's arrays are
  // known; where the whole kernel does not fit even with arrays sharing memory
  // (allocate-threadgroup-memory), the stages the target chose give way (3 -> 2 -> none) rather
  // than the compile. A num_stages the user asked for is kept, and the pass's error names it.
  // The stage count is fixed inside lowering (the K loop's ring, its waits and the copies'
  // stage indices are built for it), so fewer stages means lowering again.
  const bool chosen = lo.num_stages == 0;
  GpuPipelineResult out = lower_and_optimize(program, target, options, lo, device, !chosen);
  auto over = [&] { return gpu::threadgroup_bytes(out.function) > target.threadgroup_memory_bytes; };
  for (int stages = 2; chosen && stages >= 1 && over(); --stages) {
    lo.num_stages = stages;
    out = lower_and_optimize(program, target, options, lo, device, stages == 1);
  }
  return out;
}

}  // namespace metile

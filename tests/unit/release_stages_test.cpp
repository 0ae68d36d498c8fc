// release-stages (src/passes/release_stages.cpp): a TMA ring's K-loop barrier replaced by per-stage
// "empty" mbarriers, text in and text out on what lowering writes (GEMM, persistent GEMM, FP8
// GEMM, attention's K/V ring); the barrier kept where it orders other memory; switched off by
// name; and the whole pipeline's CUDA for those kernels compiles through NVRTC for sm_90a.
#include <gtest/gtest.h>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_parse.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/tile/tile_pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "support/error.h"
#include "target/options.h"
#include "gpu_text_edits.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

const GpuTarget& hopper() {
  static const GpuTarget t = nvidia_gpu_target("sm_90");
  return t;
}

// Lowering's GPU IR of `g` (Tile IR passes first, as compile_kernel runs them for cuda, which
// lowers FP8 dots itself).
std::string lowered_text(const kernels::GemmConfig& g, int threads, int stages = 0) {
  LowerOptions o;
  o.device = "cuda";
  o.num_threads = threads;
  o.num_stages = stages;
  const Program p = *run_tile_pipeline(kernels::gemm(g), CompileOptions{}, false, false, true).program;
  return gpu::print(lower_to_gpu(p, hopper(), o));
}

std::string released(const std::string& text) { return run_gpu_passes_on_text(text, {"release-stages"}, hopper()); }

// The K loop's text: from its `for` to the end of its body.
std::string loop_of(const std::string& text, const std::string& head = "  for ") {
  const size_t at = text.find(head);
  return at == std::string::npos ? "" : text.substr(at, text.find("\n" + head.substr(0, head.size() - 4) + "}", at) - at);
}

std::string gpu_ir_opt(const Program& p, std::vector<std::string> off = {}) {
  CompileOptions o;
  o.num_threads = 256;
  o.disabled_passes = std::move(off);
  return run_gpu_pipeline(*run_tile_pipeline(p, o, false, false, true).program, hopper(), o, "cuda").gpu_ir_opt;
}

// The GEMM's loop: the barrier after the warpgroup wait goes; each warp arrives on the stage the
// previous iteration read, which the copying thread waits for before it copies into it.
TEST(GpuPasses, ReleaseStagesReplacesTheGemmLoopsBarrier) {
  for (int stages : {2, 3, 4}) {
    const std::string in = lowered_text(kernels::gemm_config(DType::f16, 128, 128, 64, true), 256, stages);
    const std::string out = released(in);
    const std::string what = std::to_string(stages) + " stages\n" + out;
    EXPECT_EQ(count(loop_of(in), " barrier\n"), 1) << in;
    EXPECT_EQ(count(loop_of(out), " barrier\n"), 0) << what;
    EXPECT_EQ(count(out, " barrier\n"), 1) << "the one after the mbarriers' setup\n" << what;
    EXPECT_TRUE(count(out, "%empty_bar: ptr<i64, threadgroup> = alloc shape=\"1\" stages=" + std::to_string(stages) +
                               " layout=\"linear\"\n") == 1) << what;
    // Eight warps arrive on each; set up with the full ones, before their barrier.
    EXPECT_NE(out.find(" mbar_init %empty_bar, %tid count=8 n=" + std::to_string(stages) + "\n  barrier\n"),
              std::string::npos) << what;
    // In the loop: the wait for the previous group, then the arrival and thread 0's wait on the
    // refilled stage, with the parity of its previous release, then the copies.
    const std::string body = loop_of(out);
    const size_t retire = body.find("warpgroup_wait pending=1"), arrive = body.find(" mbar_arrive "),
                 wait = body.find(" mbar_wait ", arrive), copy = body.find(" tma_load ");
    EXPECT_TRUE(retire < arrive && arrive < wait && wait < copy && copy != std::string::npos) << what;
    EXPECT_NE(body.find(" = ptr_offset %empty_bar, %next_stage\n"), std::string::npos) << what;
    EXPECT_NE(body.find("%reused: bool = ne %i, "), std::string::npos) << "not on the first iteration\n" << what;
    EXPECT_NE(body.find("%empty_phase: i32 = select "), std::string::npos) << what;
    EXPECT_NE(body.find(", %empty_phase, %tid, "), std::string::npos) << "thread 0 waits\n" << what;
    EXPECT_EQ(count(body, " mbar_wait "), 2) << what;
    // Run again: nothing more changes.
    EXPECT_EQ(released(out), out);
  }
}

// A barrier that also orders another array's accesses inside the loop stays, and so does the
// loop's form: no empty mbarriers.
TEST(GpuPasses, ReleaseStagesKeepsABarrierThatOrdersOtherMemory) {
  std::string in = lowered_text(kernels::gemm_config(DType::f16, 128, 128, 64, true), 256);
  const std::string tid = "  %tid: i32 thread = builtin thread_index.x\n";
  ASSERT_NE(in.find(tid), std::string::npos) << in;
  in.replace(in.find(tid), tid.size(),
             tid + "  %scr: ptr<i32, threadgroup> = alloc shape=\"256\" stages=1 layout=\"linear\"\n"
                   "  %sp: ptr<i32, threadgroup> thread = ptr_offset %scr, %tid\n");
  const std::string wait = "    warpgroup_wait pending=1\n    barrier\n";
  ASSERT_NE(in.find(wait), std::string::npos) << in;
  // Each thread writes its word before the barrier and reads its neighbour's after it.
  in.replace(in.find(wait), wait.size(),
             "    store %sp, %tid\n" + wait + "    %sq: ptr<i32, threadgroup> thread = ptr_offset %sp, %tid\n"
             "    %got: i32 thread = load %sq\n");
  const std::string out = released(in);
  EXPECT_EQ(out, run_gpu_passes_on_text(in, {}, hopper())) << out;
  EXPECT_EQ(count(out, "empty_bar"), 0) << out;
}

// Persistent tiles carry the ring from tile to tile: the first iteration of every tile but the
// first releases the previous tile's last stage.
TEST(GpuPasses, ReleaseStagesCountsAcrossPersistentTiles) {
  kernels::GemmConfig g = kernels::gemm_config(DType::bf16, 128, 128, 64, true);
  g.persistent = true;
  const std::string out = released(lowered_text(g, 256));
  EXPECT_EQ(count(out, " mbar_init "), 2) << out;
  const std::string body = loop_of(out, "    for ");
  EXPECT_EQ(count(body, " barrier\n"), 0) << out;
  EXPECT_EQ(count(body, " mbar_arrive "), 1) << out;
  EXPECT_NE(body.find("%reused: bool = bitor "), std::string::npos) << out;
  // The tile's barrier before the next tile's copies stays.
  EXPECT_EQ(count(out, " barrier\n"), 2) << out;
}

// The whole pipeline: GEMM, FP8 GEMM (B transposed, the wgmma form) and attention take the
// empty mbarriers; attention's Q, stored before its loop, gets a barrier in front of the loop
// instead of the loop's own. Switched off by name, the pipeline's output has none of it.
TEST(GpuPasses, ReleaseStagesRunsInThePipelineAndIsSwitchedOffByName) {
  kernels::GemmConfig fp8 = kernels::gemm_config(DType::f8e4m3, 128, 128, 64, true);
  fp8.trans_b = true;
  for (const Program& p : {kernels::gemm(kernels::gemm_config(DType::f16, 128, 256, 64, true)), kernels::gemm(fp8)}) {
    const std::string on = gpu_ir_opt(p), off = gpu_ir_opt(p, {"release-stages"});
    EXPECT_EQ(count(on, " mbar_arrive "), 1) << on;
    EXPECT_EQ(count(loop_of(on), " barrier\n"), 0) << on;
    EXPECT_EQ(count(off, "mbar_arrive"), 0) << off;
    EXPECT_EQ(count(off, "empty_bar"), 0) << off;
    EXPECT_EQ(count(loop_of(off), " barrier\n"), 1) << off;
  }
}

// The ops it adds print, parse back and verify; a predicate must be a uniform bool, and
// mbar_wait's thread-0 form takes both a thread index and a predicate.
TEST(GpuPasses, ReleaseStagesOpsRoundTripAndAreChecked) {
  const std::string ok = "gpu_kernel @k(%n: i32) threads=128 simd=32 {\n"
                         "  %bar: ptr<i64, threadgroup> = alloc shape=\"1\" stages=2 layout=\"linear\"\n"
                         "  %tid: i32 thread = builtin thread_index.x\n"
                         "  %lane: i32 thread = builtin simd_lane.x\n"
                         "  %z: i32 = const value=0\n"
                         "  %go: bool = lt %z, %n\n"
                         "  mbar_init %bar, %tid count=4 n=2\n"
                         "  barrier\n"
                         "  mbar_arrive %bar, %lane, %go\n"
                         "  mbar_arrive %bar, %lane\n"
                         "  mbar_wait %bar, %z, %tid, %go\n"
                         "  mbar_wait %bar, %z\n"
                         "}\n";
  EXPECT_EQ(gpu::print(gpu::parse(ok)), ok);
  expect_edits_refused(ok, {{"mbar_wait %bar, %z, %tid, %go", "mbar_wait %bar, %z, %tid"},
                           {"mbar_arrive %bar, %lane, %go", "mbar_arrive %bar, %lane, %tid"},
                           {"mbar_wait %bar, %z, %tid, %go", "mbar_wait %bar, %z, %tid, %n"}});
}

TEST(GpuPasses, ReleaseStagesCompilesThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  kernels::GemmConfig fp8 = kernels::gemm_config(DType::f8e4m3, 128, 128, 64, true);
  fp8.trans_b = true;
  kernels::GemmConfig persistent = kernels::gemm_config(DType::f16, 128, 256, 64, true);
  persistent.persistent = true;
  for (const kernels::GemmConfig& g : {kernels::gemm_config(DType::f16, 128, 256, 64, true),
                                       kernels::gemm_config(DType::bf16, 64, 64, 32, false), fp8, persistent}) {
    CompileOptions o;
    o.num_threads = g.block_m == 64 ? 128 : 256;
    const GpuPipelineResult r = run_gpu_pipeline(*run_tile_pipeline(kernels::gemm(g), o, false, false, true).program, hopper(), o, "cuda");
    const CudaKernelSource s = emit_cuda(r.function);
    ASSERT_EQ(count(s.source, "mbarrier.arrive.shared::cta.b64"), 1) << r.gpu_ir_opt;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log)) << log << s.source;
  }
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

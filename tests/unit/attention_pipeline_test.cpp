// Attention's K/V loop pipelined (lower_pipeline.cpp): dots with one operand copied straight
// from a tile_load (K in dot(q, trans(k)), V in dot(p, v)) keep that operand in a ring of
// stages copied S-1 iterations ahead, while the other (Q, staged once before the loop; P,
// computed from the loop's carried row max and stored every iteration) has one array. GPU IR
// text; CUDA compiled by NVRTC for sm_80 and sm_90a where it is installed; results on every
// device against float64 in bindings/python/tests/test_attention.py and test_examples.py.
#include <gtest/gtest.h>

#include <string>

#include "codegen/cuda.h"
#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "runtime/cuda/cuda_api.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// Attention's loop over key blocks of 32 (head dim 64, M query rows): S = Q K^T, P = S minus
// the carried running value m (so P depends on the loop's carried state), O += P V; m = S.
std::string attention(int m) {
  const std::string ms = std::to_string(m);
  return R"(kernel @k(%Q: ptr<f16>, %K: ptr<f16>, %V: ptr<f16>, %O: ptr<f32>, %n: i32) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c32 = const {value = 32} : i32
  %c64 = const {value = 64} : i32
  %q = tile_load %Q, %c0, %c0, %c64 : tile<)" + ms + R"(x64xf16>
  %z = const {value = 0.0} : f32
  %o0 = broadcast %z : tile<)" + ms + R"(x64xf32>
  %m0 = broadcast %z : tile<)" + ms + R"(x32xf32>
  %o, %mo = for %i = %c0 to %n step %c32 iter_args(%a = %o0, %m = %m0) -> (tile<)" + ms + R"(x64xf32>, tile<)" + ms + R"(x32xf32>) {
    %k = tile_load %K, %i, %c0, %c64, %n, %c64 : tile<32x64xf16>
    %v = tile_load %V, %i, %c0, %c64, %n, %c64 : tile<32x64xf16>
    %kt = trans %k : tile<64x32xf16>
    %s0 = broadcast %z : tile<)" + ms + R"(x32xf32>
    %s = dot %q, %kt, %s0 : tile<)" + ms + R"(x32xf32>
    %d = sub %s, %m : tile<)" + ms + R"(x32xf32>
    %p = cast %d : tile<)" + ms + R"(x32xf16>
    %an = dot %p, %v, %a : tile<)" + ms + R"(x64xf32>
    yield %an, %s
  }
  tile_store %O, %c0, %c0, %c64, %o
}
)";
}

LowerOptions options(int stages = 0) {
  LowerOptions o;
  o.device = "test";
  o.num_stages = stages;
  return o;
}

gpu::Function lowered(const GpuTarget& t, const LowerOptions& o, int m = 64) {
  return lower_to_gpu(parse(attention(m)), t, o);
}

// The text before the loop, and the loop.
std::pair<std::string, std::string> split_at_loop(const std::string& text) {
  const size_t at = text.find("\n  for ");
  EXPECT_NE(at, std::string::npos) << text;
  return {text.substr(0, at), text.substr(at, text.find("\n  }", at) - at)};
}

TEST(AttentionPipeline, KAndVStreamThroughThreeStagesCopiedTwoIterationsAhead) {
  const std::string text = gpu::print(lowered(nvidia_gpu_target("sm_90"), options()));
  auto [before, loop] = split_at_loop(text);
  // K's and V's rings: three stages each (32 rows of 64 + 8 padding elements: 2304 a stage);
  // Q and P one array each.
  EXPECT_EQ(count(text, "stages=3"), 2) << text;
  EXPECT_EQ(count(text, "stages=1"), 2) << "Q's and P's arrays\n" << text;
  // Prologue: iterations 0 and 1 of K and V, one group each; Q staged once, before the loop.
  EXPECT_EQ(count(before, " async_copy "), 4) << before;
  EXPECT_EQ(count(before, " async_commit"), 2) << before;
  EXPECT_EQ(count(before, "= ptr_offset %a_smem, "), 1) << "Q's one staging\n" << before;
  // Body: wait until at most S-2 = 1 group is in flight, then the loop's barrier, then the
  // copies of iteration it+2; every group waited for after the loop.
  EXPECT_EQ(count(loop, "async_wait pending=1"), 1) << loop;
  EXPECT_EQ(count(text, "async_wait pending=0"), 1) << text;
  EXPECT_LT(loop.find("async_wait pending=1"), loop.find(" mma ")) << loop;
  EXPECT_EQ(count(loop, " async_copy "), 2) << loop;
  EXPECT_EQ(count(loop, " async_commit"), 1) << loop;
  // Issued right after the loop's barrier (the stage they overwrite was read in the previous
  // iteration), so they are in flight during this iteration's whole body.
  const std::string top = loop.substr(0, loop.find(" mma "));
  EXPECT_EQ(count(top, " barrier"), 1) << loop;
  EXPECT_EQ(count(top, " async_copy "), 2) << loop;
  EXPECT_EQ(count(top, " async_commit"), 1) << loop;
  // The mmas read K's and V's stage `stage` (2304 elements apart: 32 rows of 64 + 8
  // padding), the copies write stage `next_stage`; Q's and P's arrays have no stage offset.
  EXPECT_EQ(count(loop, "= mul %stage, "), 2) << loop;
  EXPECT_EQ(count(loop, "= mul %next_stage, "), 2) << loop;
  EXPECT_EQ(count(loop, "mma %a_smem, "), 1) << loop;
  EXPECT_EQ(count(loop, "mma %a_smem1, "), 1) << loop;
  // Two barriers per iteration: the loop's, and P's (stored by every thread, read by every
  // warp's mma), in place of the four of the unpipelined loop.
  EXPECT_EQ(count(loop, " barrier"), 2) << loop;
  const size_t p_store = loop.find("= ptr_offset %a_smem1, "), p_barrier = loop.find(" barrier", p_store);
  EXPECT_NE(p_store, std::string::npos) << "P stored in the body\n" << loop;
  EXPECT_LT(p_barrier, loop.rfind(" mma ")) << loop;
  EXPECT_EQ(count(loop, "= ptr_offset %a_smem, "), 0) << "Q is not stored again\n" << loop;
  // The printed GPU IR parses, verifies and runs through the GPU passes.
  EXPECT_NO_THROW(run_gpu_passes_on_text(text, {}, nvidia_gpu_target("sm_90"))) << text;
}

TEST(AttentionPipeline, ALoopInsideAnotherEndsWithABarrier) {
  // Each pass of the outer loop stages Q and fills the first stages again, over arrays the
  // inner loop's last mmas read: a barrier after the inner loop orders them.
  std::string inner = attention(64);
  const size_t from = inner.find("  %q = "), to = inner.find("  tile_store");
  const std::string body = inner.substr(from, inner.find('\n', to) + 1 - from);
  std::string nested = inner.substr(0, from) + "  for %j = %c0 to %n step %c64 {\n" + body + "    yield\n  }\n}\n";
  const std::string text = gpu::print(lower_to_gpu(parse(nested), nvidia_gpu_target("sm_90"), options()));
  const size_t wait0 = text.find("async_wait pending=0");
  ASSERT_NE(wait0, std::string::npos) << text;
  EXPECT_EQ(text.substr(wait0, text.find('\n', text.find('\n', wait0) + 1) - wait0), "async_wait pending=0\n    barrier")
      << text;
  // At the top level the loop runs once: nothing follows it.
  const std::string once = gpu::print(lowered(nvidia_gpu_target("sm_90"), options()));
  EXPECT_EQ(count(once.substr(once.find("async_wait pending=0")), " barrier"), 0) << once;
}

TEST(AttentionPipeline, StagesFollowTheOptionAndOneStageLeavesTheLoopAlone) {
  for (int stages : {2, 4}) {
    const std::string text = gpu::print(lowered(nvidia_gpu_target("sm_80"), options(stages)));
    SCOPED_TRACE(stages);
    EXPECT_EQ(count(text, "stages=" + std::to_string(stages)), 2) << text;
    EXPECT_EQ(count(split_at_loop(text).second, "async_wait pending=" + std::to_string(stages - 2)), 1) << text;
    EXPECT_EQ(count(split_at_loop(text).first, " async_copy "), 2 * (stages - 1)) << text;
  }
  // One stage: each dot copies and waits where it runs; V's copy starts at the first dot
  // (lower_early_copy.cpp), which waits for K's group alone.
  const std::string one = gpu::print(lowered(nvidia_gpu_target("sm_90"), options(1)));
  EXPECT_EQ(count(one, "stages=1"), 4) << one;
  EXPECT_EQ(count(split_at_loop(one).first, " async_copy "), 0) << one;
  EXPECT_EQ(count(one, "async_wait pending=1"), 1) << one;
  EXPECT_EQ(count(one, " barrier"), 4) << one;
}

TEST(AttentionPipeline, AppleGpusDoubleBufferKAndVThroughRegisters) {
  // 32 query rows (Apple's 32 KB): K^T is staged through registers there (no k-major copy on
  // simdgroup_matrix), V is copied straight: V alone gets two stages.
  const std::string text = gpu::print(lowered(apple_gpu_target(), options(), 32));
  auto [before, loop] = split_at_loop(text);
  EXPECT_EQ(count(text, "stages=2"), 1) << text;
  EXPECT_EQ(count(text, "async_wait"), 0) << "Metal's copies are synchronous\n" << text;
  // Before the loop: Q staged, then V's iteration 0 copied, then the barrier publishing both.
  const size_t q_store = before.find("= ptr_offset %a_smem, "), v_copy = before.find(" async_copy "),
               barrier = before.rfind(" barrier");
  EXPECT_LT(q_store, barrier) << before;
  EXPECT_LT(v_copy, barrier) << before;
  // Body: V's next tile into registers first, stored into the other stage at the bottom
  // before the ring's one barrier; Q K^T runs unpipelined (K^T stored, barrier, mma,
  // barrier), P is stored and published by a barrier of its own.
  EXPECT_EQ(count(loop, "%v_next: "), 1) << loop;
  EXPECT_LT(loop.find("%v_next: "), loop.find(" mma ")) << loop;
  EXPECT_EQ(count(loop, " barrier"), 4) << loop;
  EXPECT_EQ(count(loop, "= ptr_offset %a_smem1, "), 1) << "P\n" << loop;
  EXPECT_EQ(count(loop, "= ptr_offset %a_smem, "), 0) << "Q is staged once\n" << loop;
  EXPECT_LT(loop.rfind("store "), loop.rfind(" barrier")) << loop;
  EXPECT_NO_THROW(run_gpu_passes_on_text(text, {}, apple_gpu_target())) << text;
}

TEST(AttentionPipeline, CompilesThroughNvrtc) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  for (int stages : {0, 2})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      CudaKernelSource s = emit_cuda(lowered(nvidia_gpu_target(arch[4] == '8' ? "sm_80" : "sm_90"), options(stages)));
      std::string log;
      EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, arch, &log)) << arch << " stages " << stages << "\n"
                                                                          << log;
    }
}

}  // namespace
}  // namespace metile

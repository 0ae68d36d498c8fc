// The register budget behind the CUDA emitter's __launch_bounds__ (src/codegen/register_budget.h):
// a kernel whose loop keeps more registers live than the old accumulator-only bound allowed
// (flash attention: the carried output beside the scores and the K/V tiles) names no minimum
// of blocks, so ptxas is not held to 128 registers and does not spill; a GEMM keeps its minimum.
#include <gtest/gtest.h>

#include <string>

#include "codegen/cuda/cuda.h"
#include "codegen/register_budget.h"
#include "ir/tile_ir.h"
#include "passes/pipeline.h"
#include "target/gpu_target.h"
#include "target/options.h"

namespace metile {
namespace METILE_UNITY_ID {

// examples/python/flash_attention.py's loop at BLOCK_M 128, BLOCK_N 64, head_dim 128, 256
// threads: Q @ K^T into fresh scores each block, P @ V into the carried output.
const char* const kFlash = R"(kernel @flash(%Q: ptr<f16>, %K: ptr<f16>, %V: ptr<f16>, %O: ptr<f16>, %seq: i32) num_threads(256) {
  %c0 = const {value = 0} : i32
  %c64 = const {value = 64} : i32
  %c128 = const {value = 128} : i32
  %q = tile_load %Q, %c0, %c0, %c128, %seq, %c128 : tile<128x128xf16>
  %ninf = const {value = -inf} : f32
  %z = const {value = 0.0} : f32
  %m0 = broadcast %ninf : tile<128xf32>
  %l0 = broadcast %z : tile<128xf32>
  %acc0 = broadcast %z : tile<128x128xf32>
  %acc, %l, %m = for %i = %c0 to %seq step %c64 iter_args(%a = %acc0, %li = %l0, %mi = %m0) -> (tile<128x128xf32>, tile<128xf32>, tile<128xf32>) {
    %k = tile_load %K, %i, %c0, %c128, %seq, %c128 : tile<64x128xf16>
    %v = tile_load %V, %i, %c0, %c128, %seq, %c128 : tile<64x128xf16>
    %kt = trans %k : tile<128x64xf16>
    %s0 = broadcast %z : tile<128x64xf32>
    %s = dot %q, %kt, %s0 : tile<128x64xf32>
    %rmax = reduce_max %s {axis = 1} : tile<128xf32>
    %mn = maximum %mi, %rmax : tile<128xf32>
    %d = sub %mi, %mn : tile<128xf32>
    %alpha = exp2 %d : tile<128xf32>
    %mc = reshape %mn : tile<128x1xf32>
    %mb = broadcast %mc : tile<128x64xf32>
    %sd = sub %s, %mb : tile<128x64xf32>
    %p = exp2 %sd : tile<128x64xf32>
    %ls = mul %li, %alpha : tile<128xf32>
    %rs = reduce_sum %p {axis = 1} : tile<128xf32>
    %ln = add %ls, %rs : tile<128xf32>
    %ph = cast %p : tile<128x64xf16>
    %ac = reshape %alpha : tile<128x1xf32>
    %ab = broadcast %ac : tile<128x128xf32>
    %as = mul %a, %ab : tile<128x128xf32>
    %an = dot %ph, %v, %as : tile<128x128xf32>
    yield %an, %ln, %mn
  }
  %lc = reshape %l : tile<128x1xf32>
  %lb = broadcast %lc : tile<128x128xf32>
  %out = div %acc, %lb : tile<128x128xf32>
  %oh = cast %out : tile<128x128xf16>
  tile_store %O, %c0, %c0, %c128, %oh, %seq, %c128
}
)";

// A 128 x 128 GEMM tile at 256 threads (bench/gemm_vs_cublas.py's first configuration).
const char* const kGemm = R"(kernel @gemm(%A: ptr<f16>, %B: ptr<f16>, %C: ptr<f32>, %n: i32) num_threads(256) {
  %c0 = const {value = 0} : i32
  %c32 = const {value = 32} : i32
  %c128 = const {value = 128} : i32
  %z = const {value = 0.0} : f32
  %acc0 = broadcast %z : tile<128x128xf32>
  %acc = for %k = %c0 to %n step %c32 iter_args(%a = %acc0) -> (tile<128x128xf32>) {
    %x = tile_load %A, %c0, %k, %n, %c128, %n : tile<128x32xf16>
    %y = tile_load %B, %k, %c0, %c128, %n, %c128 : tile<32x128xf16>
    %an = dot %x, %y, %a : tile<128x128xf32>
    yield %an
  }
  tile_store %C, %c0, %c0, %c128, %acc, %c128, %c128
}
)";

GpuPipelineResult lower_for_h100(const char* text) {
  GpuTarget t = nvidia_gpu_target("sm_90");
  t.threadgroup_memory_bytes = 227 * 1024;
  t.warpgroup_atoms.clear();  // the mma.sync path, whose accumulators the bound counts
  return run_gpu_pipeline(parse(text), t, CompileOptions{}, "test");
}

TEST(RegisterBudget, MinimumBlocksCountTheLoopsLiveRegisters) {
  EXPECT_EQ(min_blocks_per_multiprocessor(256, 64, 0), 2) << "accumulator + 64: 128 registers";
  EXPECT_EQ(min_blocks_per_multiprocessor(256, 64, 96), 2) << "the loop fits beside it";
  EXPECT_EQ(min_blocks_per_multiprocessor(256, 64, 200), 0) << "one block: no minimum";
  EXPECT_EQ(min_blocks_per_multiprocessor(128, 32, 0), 5);
  EXPECT_EQ(min_blocks_per_multiprocessor(128, 32, 150), 2);
  EXPECT_EQ(min_blocks_per_multiprocessor(128, 0, 150), 0) << "no mma: no minimum";
  EXPECT_EQ(min_blocks_per_multiprocessor(0, 64, 0), 0);
  EXPECT_EQ(min_blocks_per_multiprocessor(64, 8, 1000), 4) << "at most 255 registers a thread";
}

TEST(RegisterBudget, FlashAttentionsLoopCountsItsOutputAndScores) {
  GpuPipelineResult r = lower_for_h100(kFlash);
  // The carried output (128 x 128 f32 over 256 threads: 64) and the scores (32) at least.
  EXPECT_GE(loop_live_registers(r.function), 64 + 32);
  std::string src = emit_cuda(r.function).source;
  EXPECT_NE(src.find("__launch_bounds__(256) flash("), std::string::npos)
      << src.substr(src.find("__launch_bounds__"), 60);
}

TEST(RegisterBudget, AGemmKeepsItsMinimumOfBlocks) {
  GpuPipelineResult r = lower_for_h100(kGemm);
  const int64_t live = loop_live_registers(r.function);
  EXPECT_GE(live, 64) << "the carried accumulator";
  EXPECT_LE(live, 64 + 32) << "the in-place mma is not counted twice";
  std::string src = emit_cuda(r.function).source;
  EXPECT_NE(src.find("__launch_bounds__(256, 2) gemm("), std::string::npos)
      << src.substr(src.find("__launch_bounds__"), 60);
}

TEST(RegisterBudget, NoLoopNoCount) {
  const char* text = R"(kernel @k(%A: ptr<f32>) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c64 = const {value = 64} : i32
  %x = tile_load %A, %c0, %c0, %c64 : tile<64x64xf32>
  %y = add %x, %x : tile<64x64xf32>
  tile_store %A, %c0, %c0, %c64, %y
}
)";
  EXPECT_EQ(loop_live_registers(lower_for_h100(text).function), 0);
}

}  // namespace
}  // namespace metile

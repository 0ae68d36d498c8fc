// A later dot's copies from device memory start at an earlier dot of the same block
// (lower_early_copy.cpp): flash attention's V is copied while Q K^T and the softmax run. GPU IR
// text; results on the GPU are checked by test_attention.py against float64. On sm_80's mma.sync
// P is staged in the body, so the loop is not pipelined; on sm_90 both dots take the warpgroup
// atom (P in registers) and the loop is (lower_pipeline.cpp, gpu_wgmma_attention_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/lower.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// The shape of attention's loop body: S = Q K^T, P = S as f16, O += P V, K and V loaded first.
const char* const kTwoDots = R"(kernel @k(%Q: ptr<f16>, %K: ptr<f16>, %V: ptr<f16>, %O: ptr<f32>, %n: i32) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c32 = const {value = 32} : i32
  %c64 = const {value = 64} : i32
  %q = tile_load %Q, %c0, %c0, %c64 : tile<64x64xf16>
  %z = const {value = 0.0} : f32
  %o0 = broadcast %z : tile<64x64xf32>
  %o = for %i = %c0 to %n step %c32 iter_args(%a = %o0) -> (tile<64x64xf32>) {
    %k = tile_load %K, %i, %c0, %c64, %n, %c64 : tile<32x64xf16>
    %v = tile_load %V, %i, %c0, %c64, %n, %c64 : tile<32x64xf16>
    %kt = trans %k : tile<64x32xf16>
    %s0 = broadcast %z : tile<64x32xf32>
    %s = dot %q, %kt, %s0 : tile<64x32xf32>
    %p = cast %s : tile<64x32xf16>
    %an = dot %p, %v, %a : tile<64x64xf32>
    yield %an
  }
  tile_store %O, %c0, %c0, %c64, %o
}
)";

std::string lowered(const GpuTarget& t, bool early) {
  LowerOptions o;
  o.device = "test";
  o.early_copy = early;
  return gpu::print(lower_to_gpu(parse(kTwoDots), t, o));
}

TEST(EarlyCopy, TheSecondDotsCopyStartsAtTheFirstDot) {
  std::string text = lowered(nvidia_gpu_target("sm_80"), true);
  // K's group, then V's; the first dot waits for K's alone, the second for both.
  EXPECT_EQ(count(text, "async_commit"), 2) << text;
  EXPECT_EQ(count(text, "async_wait pending=1"), 1) << text;
  EXPECT_EQ(count(text, "async_wait pending=0"), 1) << text;
  const size_t first_wait = text.find("async_wait");
  EXPECT_EQ(count(text.substr(0, first_wait), "async_copy"), 2) << "K's and V's copies before it\n" << text;
  EXPECT_EQ(count(text, " barrier"), 4) << "two per dot, as before\n" << text;
}

TEST(EarlyCopy, SwitchedOffEachDotCopiesAndWaitsWhereItRuns) {
  std::string text = lowered(nvidia_gpu_target("sm_80"), false);
  EXPECT_EQ(count(text, "async_wait pending=1"), 0) << text;
  EXPECT_EQ(count(text, "async_wait pending=0"), 2) << text;
  const size_t first_wait = text.find("async_wait");
  EXPECT_EQ(count(text.substr(0, first_wait), "async_copy"), 1) << text;
}

TEST(EarlyCopy, TargetsWithoutAsynchronousCopiesKeepTheOrder) {
  // Apple GPUs: a copy completes where it is issued, so starting V's earlier gains nothing.
  std::string text = lowered(apple_gpu_target(), true);
  EXPECT_EQ(count(text, "async_wait pending=1"), 0) << text;
}

}  // namespace
}  // namespace metile

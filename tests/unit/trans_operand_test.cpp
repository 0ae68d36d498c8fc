// A transposed tile that only a dot reads is staged transposed by the dot itself
// (lower_trans_operand.cpp): no exchange through threadgroup memory of its own. GPU IR text.
#include <gtest/gtest.h>

#include <string>

#include "ir/gpu_ir.h"
#include "passes/lower.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// Out = A @ B^T, A 32x64, B 16x64; with `shared`, a second dot reads trans(B) too.
std::string kernel(bool shared) {
  std::string tail = shared ? R"(
  %e = dot %a, %bt, %d : tile<32x16xf32>
  tile_store %O, %c0, %c0, %c16, %e
}
)" : R"(
  tile_store %O, %c0, %c0, %c16, %d
}
)";
  return std::string(R"(kernel @k(%A: ptr<f16>, %B: ptr<f16>, %O: ptr<f32>) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c16 = const {value = 16} : i32
  %c64 = const {value = 64} : i32
  %a = tile_load %A, %c0, %c0, %c64 : tile<32x64xf16>
  %b = tile_load %B, %c0, %c0, %c64 : tile<16x64xf16>
  %bt = trans %b : tile<64x16xf16>
  %z = const {value = 0.0} : f32
  %acc = broadcast %z : tile<32x16xf32>
  %d = dot %a, %bt, %acc : tile<32x16xf32>)") + tail;
}

std::string lowered(const std::string& src, const GpuTarget& t) {
  LowerOptions o;
  o.device = "test";
  o.warpgroup = false;
  return gpu::print(lower_to_gpu(parse(src), t, o));
}

TEST(TransOperand, ADotStagesATransposeOnlyItReadsWithoutAnExchange) {
  for (const GpuTarget* t : {&nvidia_gpu_target(), &apple_gpu_target()}) {
    std::string text = lowered(kernel(false), *t);
    EXPECT_EQ(count(text, "%scratch"), 0) << "no exchange array\n" << text;
    EXPECT_EQ(count(text, " barrier"), 2) << "before and after the mma only\n" << text;
  }
}

TEST(TransOperand, ATransposeWithAnotherReaderIsExchanged) {
  std::string text = lowered(kernel(true), nvidia_gpu_target());
  EXPECT_GE(count(text, "%scratch"), 2) << "the exchange's array\n" << text;
  EXPECT_GT(count(text, " barrier"), 2) << text;
}

}  // namespace
}  // namespace metile

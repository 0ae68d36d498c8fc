// Dot operands a loop does not change are staged into threadgroup memory once, before the loop
// (lower_prestage.cpp): flash attention's Q in dot(q, trans(k)). GPU IR text is checked for
// where the stores into the dot's staging arrays land.
#include <gtest/gtest.h>

#include <string>

#include "ir/gpu_ir.h"
#include "passes/lower.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// out = sum over K/V blocks of dot(a, trans(b_block)); a is loaded before the loop, b in it.
// With `inner` the A operand is a product computed in the body instead (staged every time).
std::string kernel(bool inner) {
  std::string a = inner ? "%ai" : "%a";
  return std::string(R"(kernel @k(%A: ptr<f16>, %B: ptr<f16>, %O: ptr<f32>, %n: i32) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c32 = const {value = 32} : i32
  %a = tile_load %A, %c0, %c0, %c32 : tile<32x32xf16>
  %z = const {value = 0.0} : f32
  %acc0 = broadcast %z : tile<32x32xf32>
  %r = for %i = %c0 to %n step %c32 iter_args(%acc = %acc0) -> (tile<32x32xf32>) {
    %b = tile_load %B, %i, %c0, %c32 : tile<32x32xf16>
    %bt = trans %b : tile<32x32xf16>
    %ai = mul %a, %a : tile<32x32xf16>
    %d = dot )") + a + R"(, %bt, %acc : tile<32x32xf32>
    yield %d
  }
  tile_store %O, %c0, %c0, %c32, %r
}
)";
}

// The text before the loop and the loop's body.
std::pair<std::string, std::string> split_at_loop(const std::string& text) {
  size_t at = text.find("  for ");
  EXPECT_NE(at, std::string::npos) << text;
  return {text.substr(0, at), text.substr(at)};
}

std::string lowered(const std::string& src, const GpuTarget& t) {
  LowerOptions o;
  o.device = "test";
  o.warpgroup = false;
  return gpu::print(lower_to_gpu(parse(src), t, o));
}

TEST(PrestageInvariantOperands, ALoopInvariantOperandIsStagedOnceBeforeTheLoop) {
  for (const GpuTarget* t : {&nvidia_gpu_target(), &apple_gpu_target()}) {
    auto [before, body] = split_at_loop(lowered(kernel(false), *t));
    EXPECT_EQ(count(before, "%a_smem"), 2) << "allocated, then written once\n" << before;
    EXPECT_EQ(count(body, "%a_smem,"), 1) << "the body only reads it (the mma)\n" << body;
    EXPECT_GE(count(body, "%b_smem"), 2) << "B is still staged every iteration\n" << body;
  }
}

TEST(PrestageInvariantOperands, AnOperandTheBodyComputesIsStagedInTheBody) {
  auto [before, body] = split_at_loop(lowered(kernel(true), nvidia_gpu_target()));
  EXPECT_EQ(count(before, "%a_smem"), 1) << "only its allocation\n" << before;
  EXPECT_EQ(count(body, "%a_smem"), 2) << "staged, then read by the mma\n" << body;
}

}  // namespace
}  // namespace metile

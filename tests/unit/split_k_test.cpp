// The split_k Tile IR pass (src/passes/tile/split_k_loop.cpp): what it rewrites in a GEMM (the
// loop's share of the iterations, the partial tile, the ticket, the ordered sum and the moved
// epilogue), where its hidden parameters go, and what it leaves alone. Results on every device
// are in bindings/python/tests/test_split_k.py.
#include <gtest/gtest.h>

#include <string>

#include "ir/tile_ir.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& text, const std::string& needle) { return count(text, needle) > 0; }

// C = relu(A @ B + bias) with a tile_range over K, as the bounds pass leaves it (no extents).
const char* const kGemm = R"(kernel @gemm(%A: ptr<f32>, %B: ptr<f32>, %C: ptr<f32>, %M: i32, %N: i32, %K: i32) {
  %0 = program_id {axis = 0} : i32
  %1 = program_id {axis = 1} : i32
  %2 = const {value = 32} : i32
  %3 = mul %0, %2 : i32
  %4 = mul %1, %2 : i32
  %5 = const {value = 0.0} : f32
  %6 = broadcast %5 : tile<32x32xf32>
  %7 = const {value = 16} : i32
  %8 = const {value = 0} : i32
  %9 = for %10 = %8 to %K step %7 iter_args(%11 = %6) -> (tile<32x32xf32>) {
    %12 = tile_load %A, %3, %10, %K : tile<32x16xf32>
    %13 = tile_load %B, %10, %4, %N : tile<16x32xf32>
    %14 = dot %12, %13, %11 : tile<32x32xf32>
    yield %14
  }
  %15 = maximum %9, %5 : tile<32x32xf32>
  tile_store %C, %3, %4, %N, %15
}
)";

std::string run_split(const char* text, int split_k, TileHiddenArgs& hidden, bool gpu = true,
                      std::vector<std::string> off = {}) {
  Program p = parse(text);
  CompileOptions o;
  o.split_k = split_k;
  o.disabled_passes = std::move(off);
  TilePassContext ctx{o, !gpu, hidden, !gpu};
  run_tile_pass("split_k", p, ctx);
  return print(p, false);
}

TEST(SplitK, SplitsTheKLoopAndRunsTheEpilogueOnceOnTheOrderedSum) {
  TileHiddenArgs hidden;
  const std::string out = run_split(kGemm, 2, hidden);
  // The hidden parameters follow the user's; the runtime learns the partial tile's size.
  EXPECT_TRUE(has(out, "%K: i32, %split_k_counters: ptr<i32>, %split_k_workspace: ptr<f32>, "
                       "%split_k_parts: i32, %split_k_error: ptr<i32>)"));
  EXPECT_TRUE(hidden.split_k_on);
  EXPECT_EQ(hidden.split_k, 2);
  EXPECT_EQ(hidden.split_k_tile, 32 * 32);
  // The part index comes from axis 2; the loop runs this part's share.
  EXPECT_TRUE(has(out, "program_id {axis = 2}"));
  EXPECT_TRUE(has(out, "mod "));
  EXPECT_EQ(count(out, " for %"), 3);  // the K loop, the one-trip "if last", the ordered sum
  EXPECT_TRUE(has(out, "tile_store %split_k_workspace"));
  EXPECT_TRUE(has(out, "atomic_add "));
  EXPECT_TRUE(has(out, "atomic_xchg "));  // the last part resets its tile's counter
  EXPECT_TRUE(has(out, "tile_load %split_k_workspace"));
  // The epilogue and the store moved into the last part's branch and read the sum.
  const size_t sum = out.find("tile_load %split_k_workspace");
  EXPECT_NE(out.find(": tile<32x32xf32>\n", out.find("maximum", sum)), std::string::npos);
  EXPECT_EQ(count(out, "maximum"), count(print(parse(kGemm), false), "maximum") + 2);  // + the share, the check
  EXPECT_GT(out.find("tile_store %C"), sum);
  EXPECT_EQ(count(out, "tile_store %C"), 1);
}

TEST(SplitK, AnExplicitSplitChecksTheIterationsThroughTheErrorFlag) {
  TileHiddenArgs hidden;
  const std::string out = run_split(kGemm, 4, hidden);
  EXPECT_EQ(hidden.split_k, 4);
  ASSERT_TRUE(hidden.error_flag);
  ASSERT_EQ(hidden.sites.size(), 1u);
  EXPECT_TRUE(has(hidden.sites[0], "for: split_k 4 is more than the loop's iterations"));
  // The flag is the last parameter, after the split_k ones.
  EXPECT_TRUE(has(out, "%split_k_parts: i32, %split_k_error: ptr<i32>)"));
}

TEST(SplitK, LeavesOtherProgramsDevicesAndSwitchesAlone) {
  const std::string plain = print(parse(kGemm), false);
  for (int variant = 0; variant < 4; ++variant) {
    TileHiddenArgs hidden;
    std::string out = variant == 0   ? run_split(kGemm, 1, hidden)                      // off
                      : variant == 1 ? run_split(kGemm, 0, hidden)                      // the choice: off
                      : variant == 2 ? run_split(kGemm, 2, hidden, false)               // interp, cpu
                                     : run_split(kGemm, 2, hidden, true, {"split_k"});  // METILE_GPU_OFF
    EXPECT_EQ(out, plain) << variant;
    EXPECT_TRUE(hidden.empty()) << variant;
  }
  // An accumulator that does not start at 0 (a bias): the partials would count it n times.
  std::string biased = kGemm;
  biased.replace(biased.find("value = 0.0"), 11, "value = 1.0");
  TileHiddenArgs hidden;
  EXPECT_EQ(run_split(biased.c_str(), 2, hidden), print(parse(biased), false));
  EXPECT_TRUE(hidden.empty());
  // An explicit split takes a 128x128 accumulator too.
  std::string big = kGemm;
  for (auto [from, to] : {std::pair<std::string, std::string>{"tile<32x32xf32>", "tile<128x128xf32>"},
                          {"tile<32x16xf32>", "tile<128x16xf32>"}, {"tile<16x32xf32>", "tile<16x128xf32>"}})
    for (size_t at = big.find(from); at != std::string::npos; at = big.find(from, at))
      big.replace(at, from.size(), to);
  TileHiddenArgs asked;
  EXPECT_TRUE(has(run_split(big.c_str(), 2, asked), "split_k_workspace"));
  EXPECT_EQ(asked.split_k_tile, 128 * 128);
}

}  // namespace
}  // namespace metile

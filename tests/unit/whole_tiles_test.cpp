// The whole_tiles Tile IR pass on IR text: which row loops split into an unmasked whole-tile
// loop and the rest as written, what the check in front of them compares, and which loops stay
// as written. Results on every device, with and without it, against float64 numpy are in
// bindings/python/tests/test_whole_tiles.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "passes/pass.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"

namespace metile {
namespace METILE_UNITY_ID {

// One pass over a row of X into Out: lanes %8 = i + arange(0, 32), masked by `mask`, stepping
// by `step`.
std::string row_loop(const std::string& mask = "lt %8, %N", const std::string& step = "%3") {
  return "kernel @row(%X: ptr<f32>, %Out: ptr<f32>, %N: i32, %S: i32) {\n"
         "  %0 = const {value = 1.0} : f32\n"
         "  %2 = const {value = 0} : i32\n"
         "  %3 = const {value = 32} : i32\n"
         "  for %5 = %2 to %N step " + step + " {\n"
         "    %7 = arange %2 {size = 32} : tile<32xi32>\n"
         "    %8 = add %5, %7 : tile<32xi32>\n"
         "    %9 = " + mask + " : tile<32xbool>\n"
         "    %10 = ptr_offset %X, %8 : tile<32xptr<f32>>\n"
         "    %11 = load %10, %9 : tile<32xf32>\n"
         "    %12 = add %11, %0 : tile<32xf32>\n"
         "    %13 = ptr_offset %Out, %8 : tile<32xptr<f32>>\n"
         "    store %13, %12, %9\n"
         "    yield\n"
         "  }\n"
         "}\n";
}

std::string run(const std::string& text, const std::vector<std::string>& passes,
                const std::vector<std::string>& gpu_off = {}) {
  Program p = parse(text);
  CompileOptions o;
  o.disabled_passes = gpu_off;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden, false};
  for (const std::string& name : passes) run_tile_pass(name, p, ctx);  // verifies each result
  return print(p, false);
}

int count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re),
                                        std::sregex_iterator()));
}

TEST(WholeTiles, ARowLoopRunsItsWholeTilesUnmasked) {
  const std::string out = run(row_loop(), {"whole_tiles"});
  ASSERT_EQ(count(out, "\\n *for "), 2) << out;
  const size_t second = out.rfind(" for ");
  const std::string whole = out.substr(0, second), rest = out.substr(second);
  EXPECT_EQ(count(whole, "= load %\\w+ :"), 1) << "no mask: " << out;
  EXPECT_EQ(count(whole, "store %\\w+, %\\w+\\n"), 1) << out;
  EXPECT_EQ(count(whole, "xbool>"), 0) << "the mask is gone from the whole tiles: " << out;
  EXPECT_EQ(count(rest, "= load %\\w+, %\\w+ :"), 1) << "the rest as written: " << out;
  EXPECT_EQ(count(rest, "store %\\w+, %\\w+, %\\w+\\n"), 1) << out;
  // The check: the last whole tile's last lane (n - 1) * 32 + 31 is below N, the whole tiles
  // n = (N - 0) / 32 of them; the split point start + n * 32 starts the rest.
  EXPECT_NE(whole.find(" div "), std::string::npos) << out;
  EXPECT_NE(whole.find("{value = 31} : i64"), std::string::npos) << out;
  EXPECT_NE(whole.find("{value = 2147483647} : i64"), std::string::npos) << "no wrap-around";
  EXPECT_EQ(count(whole, "= lt %\\w+, %\\w+ : bool"), 1) << out;
  EXPECT_EQ(count(out, "for %\\w+ = %\\w+ to %N "), 1) << "the rest ends where the loop did";
}

TEST(WholeTiles, ComparisonsEitherWayRound) {
  // N > lane is lane < N; a lower limit needs the first lane's check.
  for (const std::string& mask : {std::string("gt %N, %8"), std::string("le %8, %N")}) {
    const std::string out = run(row_loop(mask), {"whole_tiles"});
    EXPECT_EQ(count(out, "\\n *for "), 2) << out;
  }
  const std::string lower = run(row_loop("ge %8, %S"), {"whole_tiles"});
  ASSERT_EQ(count(lower, "\\n *for "), 2) << lower;
  // first lane >= S, and first lane >= INT32_MIN (no wrap-around)
  EXPECT_EQ(count(lower.substr(0, lower.rfind(" for ")), "= ge %\\w+, %\\w+ : bool"), 2) << lower;
}

TEST(WholeTiles, LoopsItCannotShowWholeStayAsWritten) {
  const std::string cases[] = {
      row_loop("lt %8, %N", "%S"),    // a step known only at run time
      row_loop("lt %8, %8"),          // no loop-invariant limit
      row_loop("eq %8, %N"),          // == holds on one lane at most
      row_loop("lt %7, %N"),          // no induction variable in the index
  };
  for (const std::string& text : cases)
    EXPECT_EQ(run(text, {"whole_tiles"}), print(parse(text), false)) << text;
}

// A loop over [16, 64] blocks of K (rows i .. i+15 of a matrix of `R` rows, columns `C0` .. C0+63
// of `C`), summed into a carried tile: decode attention's K/V loop without its softmax.
std::string block_loop(const std::string& row = "%5", const std::string& col = "%C0",
                       const std::string& rows = "%R") {
  return "kernel @blocks(%K: ptr<f16>, %N: i32, %R: i32, %C: i32, %C0: i32) {\n"
         "  %2 = const {value = 0} : i32\n"
         "  %3 = const {value = 16} : i32\n"
         "  %4 = const {value = 0.0} : f32\n"
         "  %6 = broadcast %4 : tile<16x64xf32>\n"
         "  %7 = const {value = 64} : i32\n"
         "  %20 = for %5 = %2 to %N step %3 iter_args(%21 = %6) -> (tile<16x64xf32>) {\n"
         "    %8 = tile_load %K, " + row + ", " + col + ", %7, " + rows + ", %C : tile<16x64xf16>\n"
         "    %9 = cast %8 : tile<16x64xf32>\n"
         "    %10 = add %21, %9 : tile<16x64xf32>\n"
         "    yield %10\n"
         "  }\n"
         "}\n";
}

TEST(WholeTiles, BoundedTileLoadsOfWholeTilesLoseTheirBounds) {
  const std::string out = run(block_loop(), {"whole_tiles"});
  ASSERT_EQ(count(out, "\\n *%\\w+ = for "), 2) << out;
  const size_t second = out.rfind(" for ");
  const std::string whole = out.substr(0, second), rest = out.substr(second);
  // The whole tiles read [16, 64] blocks without bounds; the rest keeps R and C.
  EXPECT_EQ(count(whole, "tile_load %K, %\\w+, %C0, %\\w+ :"), 1) << out;
  EXPECT_EQ(count(rest, "tile_load %K, %\\w+, %C0, %\\w+, %R, %C :"), 1) << out;
  // In front: the first block's rows and columns start at >= 0, the last whole block ends
  // below R (its last row: last + 15) and the columns below C (C0 + 63).
  EXPECT_EQ(count(whole, "const \\{value = 15\\} : i64"), 1) << out;
  EXPECT_EQ(count(whole, "const \\{value = 63\\} : i64"), 1) << out;
  // Bounds that change with the iteration: nothing to check once, the loop stays as written.
  const std::string moving = block_loop("%5", "%C0", "%5");
  EXPECT_EQ(run(moving, {"whole_tiles"}), print(parse(moving), false));
}

// A loop over K in steps of 64 reading [16, 8] blocks of u32 words (8 4-bit codes each) at column
// k // 8 of a matrix of `R` rows and `C` words: int4 GEMV's weights.
std::string word_loop(const std::string& divisor = "%7") {
  return "kernel @words(%W: ptr<u32>, %N: i32, %R: i32, %C: i32, %R0: i32, %D: i32) {\n"
         "  %2 = const {value = 0} : i32\n"
         "  %3 = const {value = 64} : i32\n"
         "  %4 = const {value = 0.0} : f32\n"
         "  %6 = broadcast %4 : tile<16x8xf32>\n"
         "  %7 = const {value = 8} : i32\n"
         "  %20 = for %5 = %2 to %N step %3 iter_args(%21 = %6) -> (tile<16x8xf32>) {\n"
         "    %9 = floordiv %5, " + divisor + " : i32\n"
         "    %8 = tile_load %W, %R0, %9, %C, %R, %C : tile<16x8xu32>\n"
         "    %10 = cast %8 : tile<16x8xf32>\n"
         "    %11 = add %21, %10 : tile<16x8xf32>\n"
         "    yield %11\n"
         "  }\n"
         "}\n";
}

TEST(WholeTiles, FloorDividedColumnsOfWholeTilesLoseTheirBounds) {
  const std::string out = run(word_loop(), {"whole_tiles"});
  ASSERT_EQ(count(out, "\\n *%\\w+ = for "), 2) << out;
  const size_t second = out.rfind(" for ");
  const std::string whole = out.substr(0, second), rest = out.substr(second);
  EXPECT_EQ(count(whole, "tile_load %W, %R0, %\\w+, %C :"), 1) << out;
  EXPECT_EQ(count(rest, "tile_load %W, %R0, %\\w+, %C, %R, %C :"), 1) << out;
  // In front: the first and the last whole tile's columns, divided by 8 in i64; the last
  // block's last column is that + 7.
  EXPECT_EQ(count(whole, "floordiv %\\w+, %\\w+ : i64"), 2) << out;
  EXPECT_EQ(count(whole, "const \\{value = 7\\} : i64"), 1) << out;
  // A divisor known only at run time: nothing to show, the loop stays as written.
  const std::string unknown = word_loop("%D");
  EXPECT_EQ(run(unknown, {"whole_tiles"}), print(parse(unknown), false));
}

TEST(WholeTiles, MetileGpuOffSwitchesItOff) {
  const std::string text = row_loop();
  EXPECT_EQ(run(text, {"whole_tiles"}, {"whole_tiles"}), print(parse(text), false));
  EXPECT_NO_THROW(check_pass_names({"whole_tiles"}));  // a name METILE_GPU_OFF accepts
}

TEST(WholeTiles, TheBoundsGuardsAreCheckedOncePerLoop) {
  // After "bounds" the load and store also carry the guard unsigned(lane) < limit (an access
  // with no offset before the lanes) against the buffers' extents: the whole tiles drop it only
  // when the lanes lie inside both buffers (first lane >= 0, last lane < limit).
  const std::string out = run(row_loop(), {"bounds", "whole_tiles"});
  ASSERT_EQ(count(out, "\\n *for "), 2) << out;
  const size_t second = out.rfind(" for ");
  const std::string whole = out.substr(0, second), rest = out.substr(second);
  EXPECT_EQ(count(whole.substr(whole.find(" for ")), "xbool>"), 0) << out;
  EXPECT_GE(count(rest, "xbool>"), 3) << "the rest keeps mask and guards: " << out;
  EXPECT_EQ(count(whole, "= ge %\\w+, %\\w+ : bool"), 2) << "no wrap, first lane >= 0: " << out;
  EXPECT_EQ(count(whole, "= lt %\\w+, %\\w+ : bool"), 2) << "both limits (the mask is folded into them): " << out;
}

}  // namespace
}  // namespace metile

namespace metile {
namespace METILE_UNITY_ID {

// A sum pass over X, then a pass over the same range that re-reads X and stores into `dst`.
std::string two_passes(const std::string& dst = "%Out") {
  return "kernel @two(%X: ptr<f32>, %Out: ptr<f32>, %N: i32) {\n"
         "  %0 = const {value = 0.0} : f32\n"
         "  %1 = broadcast %0 : tile<32xf32>\n"
         "  %2 = const {value = 0} : i32\n"
         "  %3 = const {value = 32} : i32\n"
         "  %4 = for %5 = %2 to %N step %3 iter_args(%6 = %1) -> (tile<32xf32>) {\n"
         "    %7 = arange %2 {size = 32} : tile<32xi32>\n"
         "    %8 = add %5, %7 : tile<32xi32>\n"
         "    %9 = lt %8, %N : tile<32xbool>\n"
         "    %10 = ptr_offset %X, %8 : tile<32xptr<f32>>\n"
         "    %11 = load %10, %9 : tile<32xf32>\n"
         "    %12 = add %6, %11 : tile<32xf32>\n"
         "    %13 = select %9, %12, %6 : tile<32xf32>\n"
         "    yield %13\n"
         "  }\n"
         "  %14 = reduce_sum %4 {axis = -1} : f32\n"
         "  %15 = const {value = 0} : i32\n"
         "  for %16 = %15 to %N step %3 {\n"
         "    %17 = arange %2 {size = 32} : tile<32xi32>\n"
         "    %18 = add %16, %17 : tile<32xi32>\n"
         "    %19 = lt %18, %N : tile<32xbool>\n"
         "    %20 = ptr_offset %X, %18 : tile<32xptr<f32>>\n"
         "    %21 = load %20, %19 : tile<32xf32>\n"
         "    %22 = sub %21, %14 : tile<32xf32>\n"
         "    %23 = ptr_offset " + dst + ", %18 : tile<32xptr<f32>>\n"
         "    store %23, %22, %19\n"
         "    yield\n"
         "  }\n"
         "}\n";
}

std::string on(const std::string& text, bool gpu, const std::vector<std::string>& gpu_off = {}) {
  Program p = parse(text);
  CompileOptions o;
  o.disabled_passes = gpu_off;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, !gpu, hidden, !gpu};
  run_tile_pass("whole_tiles", p, ctx);
  return print(p, false);
}

// The re-reading pass's loops in order: "partial" (masked, as written) or "whole".
std::vector<std::string> second_pass(const std::string& text) {
  std::vector<std::string> order;
  size_t at = text.find("reduce_sum");
  while ((at = text.find(" for ", at + 1)) != std::string::npos) {
    const std::string body = text.substr(at, text.find("yield", at) - at);
    order.push_back(body.find("xbool>") == std::string::npos ? "whole" : "partial");
  }
  return order;
}

TEST(WholeTiles, ARereadRunsLastFirstOnGpus) {
  const std::string gpu = on(two_passes(), true);
  ASSERT_EQ(second_pass(gpu), (std::vector<std::string>{"partial", "whole"})) << gpu;
  // The whole tiles count down: iv = (split - 32) - (t - start).
  const std::string whole = gpu.substr(gpu.rfind(" for "));
  EXPECT_EQ(count(whole, "= sub %\\w+, %\\w+ : i64"), 2) << gpu;
  // Host devices and METILE_GPU_OFF=last_first keep the order; so does a pass that writes what
  // the program reads.
  EXPECT_EQ(second_pass(on(two_passes(), false)), (std::vector<std::string>{"whole", "partial"}));
  EXPECT_EQ(second_pass(on(two_passes(), true, {"last_first"})),
            (std::vector<std::string>{"whole", "partial"}));
  EXPECT_EQ(second_pass(on(two_passes("%X"), true)), (std::vector<std::string>{"whole", "partial"}));
}

}  // namespace
}  // namespace metile

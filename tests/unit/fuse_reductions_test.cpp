// The fuse_reductions Tile IR pass on IR text: which loop pairs merge, in which form, and which
// stay as written. Results on every device, fused and not, against float64 numpy are in
// bindings/python/tests/test_fuse_reductions.py.
#include <gtest/gtest.h>

#include <string>

#include "passes/tile/tile_pass.h"
#include "runtime/device.h"

namespace metile {
namespace METILE_UNITY_ID {

// A max pass then a sum-of-exp pass in activity-explicit form; `term` is the second loop's
// summand, computed from the load %24 and the max %14.
std::string two_passes(const std::string& term) {
  return R"(kernel @two_passes(%X: ptr<f32>, %Out: ptr<f32>, %N: i32) {
  %0 = const {value = -1e+38} : f32
  %1 = broadcast %0 : tile<32xf32>
  %2 = const {value = 0} : i32
  %3 = const {value = 32} : i32
  %4 = for %5 = %2 to %N step %3 iter_args(%6 = %1) -> (tile<32xf32>) {
    %7 = arange %2 {size = 32} : tile<32xi32>
    %8 = add %5, %7 : tile<32xi32>
    %9 = lt %8, %N : tile<32xbool>
    %10 = ptr_offset %X, %8 : tile<32xptr<f32>>
    %11 = load %10, %9 : tile<32xf32>
    %12 = maximum %6, %11 : tile<32xf32>
    %13 = select %9, %12, %6 : tile<32xf32>
    yield %13
  }
  %14 = reduce_max %4 {axis = -1} : f32
  %15 = const {value = 0.0} : f32
  %16 = broadcast %15 : tile<32xf32>
  %17 = for %18 = %2 to %N step %3 iter_args(%19 = %16) -> (tile<32xf32>) {
    %20 = arange %2 {size = 32} : tile<32xi32>
    %21 = add %18, %20 : tile<32xi32>
    %22 = lt %21, %N : tile<32xbool>
    %23 = ptr_offset %X, %21 : tile<32xptr<f32>>
    %24 = load %23, %22 : tile<32xf32>
)" + term + R"(
    %27 = add %19, %26 : tile<32xf32>
    %28 = select %22, %27, %19 : tile<32xf32>
    yield %28
  }
  %29 = reduce_sum %17 {axis = -1} : f32
  store %Out, %29
}
)";
}

const char* kRescalable = "    %25 = sub %24, %14 : tile<32xf32>\n    %26 = exp %25 : tile<32xf32>";

std::string fused(const std::string& text, bool whole_tiles) {
  Program p = parse(text);
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden, whole_tiles};
  run_tile_pass("fuse_reductions", p, ctx);  // verifies the result
  return print(p, false);
}

// A lane-wise (tile) maximum anywhere in the printed IR.
bool tile_maximum(const std::string& text) {
  for (size_t at = text.find("= maximum "); at != std::string::npos; at = text.find("= maximum ", at + 1))
    if (text.substr(at, text.find('\n', at) - at).find("tile<") != std::string::npos) return true;
  return false;
}

int loops(const std::string& text) {
  int n = 0;
  for (size_t at = text.find(" for "); at != std::string::npos; at = text.find(" for ", at + 1))
    ++n;
  return n;
}

TEST(FuseReductions, MaxThenSumOfExpBecomesOneOnlinePass) {
  const std::string text = two_passes(kRescalable);
  ASSERT_EQ(loops(print(parse(text), false)), 2);
  const std::string lanes = fused(text, false);
  EXPECT_EQ(loops(lanes), 1) << lanes;
  EXPECT_EQ(lanes.find("load", lanes.find("load") + 1), std::string::npos)
      << "the merged body reads X once: " << lanes;
  // Lane-wise rescale: no reduction inside the loop.
  const size_t body = lanes.find(" for "), end = lanes.find("yield");
  EXPECT_EQ(lanes.substr(body, end - body).find("reduce_max"), std::string::npos) << lanes;
  const std::string scalar = fused(text, true);
  EXPECT_EQ(loops(scalar), 1) << scalar;
  const size_t sbody = scalar.find(" for "), send = scalar.find("yield");
  EXPECT_NE(scalar.substr(sbody, send - sbody).find("reduce_max"), std::string::npos)
      << "one scalar running max per iteration: " << scalar;
  // The lane-wise max only fed M, which the scalar one equals: it goes, and M reads the scalar.
  EXPECT_FALSE(tile_maximum(scalar)) << scalar;
  EXPECT_EQ(scalar.find("-> (tile<32xf32>, tile<32xf32>"), std::string::npos) << scalar;
  EXPECT_TRUE(tile_maximum(lanes)) << lanes;
}

TEST(FuseReductions, ALaneWiseMaxUsedElsewhereStays) {
  // %4 is also stored: the merged loop keeps computing it beside the scalar max.
  std::string text = two_passes(kRescalable);
  const std::string tail = "  store %Out, %29\n";
  text.replace(text.find(tail), tail.size(),
               tail + "  %30 = arange %2 {size = 32} : tile<32xi32>\n"
                      "  %31 = ptr_offset %Out, %30 : tile<32xptr<f32>>\n  store %31, %4\n");
  const std::string scalar = fused(text, true);
  EXPECT_EQ(loops(scalar), 1) << scalar;
  EXPECT_TRUE(tile_maximum(scalar)) << scalar;
  EXPECT_NE(scalar.find("reduce_max %7"), std::string::npos) << scalar;
}

TEST(FuseReductions, NonRescalableUsesOfTheMaxStayAsWritten) {
  const std::string cases[] = {
      // M - x: exponents >= 0, not E(e - M).
      "    %25 = sub %14, %24 : tile<32xf32>\n    %26 = exp %25 : tile<32xf32>",
      // exp(x) * M: M outside an exponent.
      "    %25 = exp %24 : tile<32xf32>\n    %26 = mul %25, %14 : tile<32xf32>",
      // exp(x - M) then log: not a bare exponential.
      "    %25 = sub %24, %14 : tile<32xf32>\n    %26 = log %25 : tile<32xf32>",
  };
  for (const std::string& term : cases) {
    const std::string text = two_passes(term);
    EXPECT_EQ(fused(text, false), print(parse(text), false)) << term;
    EXPECT_EQ(fused(text, true), print(parse(text), false)) << term;
  }
}

TEST(FuseReductions, AnotherElementOrBoundsStayAsWritten) {
  std::string other = two_passes(kRescalable);
  // The second loop reads Out, not X: its exponents are not bounded by X's max.
  const std::string from = "%23 = ptr_offset %X, %21";
  other.replace(other.find(from), from.size(), "%23 = ptr_offset %Out, %21");
  EXPECT_EQ(fused(other, false), print(parse(other), false));
  std::string bounds = two_passes(kRescalable);
  const std::string loop2 = "for %18 = %2 to %N step %3";
  bounds.replace(bounds.find(loop2), loop2.size(), "for %18 = %3 to %N step %3");
  EXPECT_EQ(fused(bounds, true), print(parse(bounds), false));
}

// A sum pass, the mean, then a pass summing `term` (from the load %24 and the mean %16).
std::string mean_then(const std::string& term) {
  return R"(kernel @centred(%X: ptr<f32>, %Out: ptr<f32>, %N: i32) {
  %0 = const {value = 0.0} : f32
  %1 = broadcast %0 : tile<32xf32>
  %2 = const {value = 0} : i32
  %3 = const {value = 32} : i32
  %4 = for %5 = %2 to %N step %3 iter_args(%6 = %1) -> (tile<32xf32>) {
    %7 = arange %2 {size = 32} : tile<32xi32>
    %8 = add %5, %7 : tile<32xi32>
    %9 = lt %8, %N : tile<32xbool>
    %10 = ptr_offset %X, %8 : tile<32xptr<f32>>
    %11 = load %10, %9 : tile<32xf32>
    %12 = add %6, %11 : tile<32xf32>
    %13 = select %9, %12, %6 : tile<32xf32>
    yield %13
  }
  %14 = reduce_sum %4 {axis = -1} : f32
  %15 = cast %N : f32
  %16 = div %14, %15 : f32
  %17 = for %18 = %2 to %N step %3 iter_args(%19 = %1) -> (tile<32xf32>) {
    %20 = arange %2 {size = 32} : tile<32xi32>
    %21 = add %18, %20 : tile<32xi32>
    %22 = lt %21, %N : tile<32xbool>
    %23 = ptr_offset %X, %21 : tile<32xptr<f32>>
    %24 = load %23, %22 : tile<32xf32>
)" + term + R"(
    %27 = add %19, %26 : tile<32xf32>
    %28 = select %22, %27, %19 : tile<32xf32>
    yield %28
  }
  %29 = reduce_sum %17 {axis = -1} : f32
  store %Out, %29
}
)";
}

// The merged loop's result types: the running-sum form carries one more tile and an f32 count
// beside the sum and v; Welford's, three more tiles.
std::string carried(const std::string& out) {
  const size_t at = out.find(" for "), arrow = out.find("-> (", at);
  return out.substr(arrow, out.find(')', arrow) - arrow + 1);
}
const char* kRunningSums = "-> (tile<32xf32>, tile<32xf32>, tile<32xf32>, f32)";
const char* kWelford = "-> (tile<32xf32>, tile<32xf32>, tile<32xf32>, tile<32xf32>, tile<32xf32>)";
const char* kSquare = "    %25 = sub %24, %16 : tile<32xf32>\n    %26 = mul %25, %25 : tile<32xf32>";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

TEST(FuseReductions, MeanThenCentredSquaresBecomeOneRunningSumPass) {
  // The mean pass sums the same loads under the same mask from 0, and the mask `iv + w < N`
  // only turns off: its sum serves the update, which carries q and a scalar count.
  for (const char* term : {kSquare,
                           "    %25 = sub %24, %16 : tile<32xf32>\n    %30 = sub %24, %16 : tile<32xf32>\n"
                           "    %26 = mul %25, %30 : tile<32xf32>"}) {
    for (const auto& [m1, m2] : {std::pair<std::string, std::string>{"lt %8, %N", "lt %21, %N"},
                                 {"le %8, %N", "le %21, %N"}, {"gt %N, %8", "gt %N, %21"},
                                 {"ge %N, %8", "ge %N, %21"}}) {
      const std::string text =
          replaced(replaced(mean_then(term), "lt %8, %N", m1), "lt %21, %N", m2);
      for (bool whole_tiles : {false, true}) {
        const std::string out = fused(text, whole_tiles);
        EXPECT_EQ(loops(out), 1) << out;
        EXPECT_EQ(carried(out), kRunningSums) << out;
        // One load, and no division of tiles in the loop (one of scalars: 1 / (k (k + 1))).
        const size_t body = out.find(" for "), end = out.find("yield");
        EXPECT_EQ(out.find("load", out.find("load") + 1), std::string::npos) << out;
        EXPECT_EQ(out.substr(body, end - body).find("div %"), out.substr(body, end - body).rfind("div %")) << out;
      }
    }
  }
}

// The ops after the merged loop, up to L2's reduce_sum.
std::string after_loop(const std::string& out) {
  const size_t from = out.find("\n  }\n", out.find("yield")) + 5;
  return out.substr(from, out.find("reduce_sum", out.find("reduce_sum", from) + 1) - from);
}

// After the running-sum loop, each lane's count for `iv + arange(0, 32) < N` (step 32) is one of
// two scalars, c = ceil((N - 0) / 32) (%52) clamped to the trips (%45), or c - 1: c - 1 where
// the lane's w >= N - (c - 1) 32 (%66). Its reciprocal is one of two scalars too, r_low written
// as (r_low - r_high) + r_high (exact). No i64 tile, no division of tiles.
TEST(FuseReductions, RunningSumCountsAreTwoScalars) {
  EXPECT_EQ(after_loop(fused(mean_then(kSquare), false)), R"(  %34 = reduce_sum %7 {axis = -1} : f32
  %35 = div %34, %4 : f32
  %36 = cast %2 : i64
  %37 = cast %3 : i64
  %38 = const {value = 0} : i64
  %39 = const {value = 1} : i64
  %40 = sub %37, %39 : i64
  %41 = cast %N : i64
  %42 = sub %41, %36 : i64
  %43 = add %42, %40 : i64
  %44 = div %43, %37 : i64
  %45 = maximum %44, %38 : i64
  %46 = cast %N : i64
  %47 = sub %46, %36 : i64
  %48 = const {value = 0} : i64
  %49 = sub %47, %48 : i64
  %50 = add %49, %40 : i64
  %51 = div %50, %37 : i64
  %52 = maximum %51, %38 : i64
  %53 = const {value = 1} : i64
  %54 = sub %52, %53 : i64
  %55 = minimum %52, %45 : i64
  %56 = maximum %54, %38 : i64
  %57 = minimum %56, %45 : i64
  %58 = const {value = 32} : i64
  %59 = const {value = 0} : i64
  %60 = mul %54, %37 : i64
  %61 = sub %47, %60 : i64
  %62 = maximum %61, %59 : i64
  %63 = minimum %62, %58 : i64
  %64 = arange %2 {size = 32} : tile<32xi32>
  %65 = cast %63 : i32
  %66 = ge %64, %65 : tile<32xbool>
  %67 = const {value = 1.0} : f32
  %68 = cast %55 : f32
  %69 = cast %57 : f32
  %70 = maximum %68, %67 : f32
  %71 = div %67, %70 : f32
  %72 = maximum %69, %67 : f32
  %73 = div %67, %72 : f32
  %74 = sub %73, %71 : f32
  %75 = add %74, %71 : f32
  %76 = select %66, %69, %68 : tile<32xf32>
  %77 = select %66, %75, %71 : tile<32xf32>
  %78 = mul %76, %35 : tile<32xf32>
  %79 = sub %7, %78 : tile<32xf32>
  %80 = mul %79, %79 : tile<32xf32>
  %81 = mul %80, %77 : tile<32xf32>
  %82 = add %9, %81 : tile<32xf32>
  %83 = add %8, %82 : tile<32xf32>
  %84 = )");
  // Lanes whose counts may take more than two values keep the count per lane: an arange wider
  // than the step (two steps' worth of lanes), or a bound that is a tile.
  const std::string wide =
      replaced(mean_then(kSquare), "%3 = const {value = 32} : i32", "%3 = const {value = 16} : i32");
  const std::string tile_bound = replaced(
      replaced(replaced(mean_then(kSquare), "lt %8, %N", "lt %8, %41"), "lt %21, %N", "lt %21, %41"),
      "  %3 = const {value = 32} : i32\n", "  %3 = const {value = 32} : i32\n  %41 = broadcast %N : tile<32xi32>\n");
  for (const std::string& text : {wide, tile_bound}) {
    const std::string out = fused(text, false);
    EXPECT_EQ(carried(out), kRunningSums) << out;
    EXPECT_NE(after_loop(out).find("div %"), std::string::npos) << out;
    EXPECT_NE(after_loop(out).find(": tile<32xi64>"), std::string::npos) << out;
  }
}

TEST(FuseReductions, CentredSquaresWithoutTheRunningSumTakeWelford) {
  const std::string text = mean_then(kSquare);
  const std::string cases[] = {
      // The mean pass adds every lane (no select): not the sum of the elements L2 takes.
      replaced(text, "yield %13", "yield %12"),
      // It starts from 1, not 0.
      replaced(text, "iter_args(%6 = %1)", "iter_args(%6 = %40)"),
      // A mask that turns on as the loop goes (N < iv + w): a lane's elements are no prefix.
      replaced(replaced(text, "lt %8, %N", "lt %N, %8"), "lt %21, %N", "lt %N, %21"),
      // A bound that moves with the loop (iv + w < iv + w): no count from the loop bounds.
      replaced(replaced(text, "%9 = lt %8, %N", "%9 = lt %8, %8"), "%22 = lt %21, %N", "%22 = lt %21, %21"),
  };
  for (std::string c : cases) {
    if (c.find("%40") != std::string::npos)
      c = replaced(c, "  %2 = const {value = 0} : i32\n",
                   "  %2 = const {value = 0} : i32\n  %39 = const {value = 1.0} : f32\n"
                   "  %40 = broadcast %39 : tile<32xf32>\n");
    const std::string out = fused(c, false);
    EXPECT_EQ(loops(out), 1) << out;
    EXPECT_EQ(carried(out), kWelford) << out;
  }
}

TEST(FuseReductions, SumsThatAreNotCentredSquaresStayAsWritten) {
  const std::string cases[] = {
      // (x - M) * x: not a square.
      "    %25 = sub %24, %16 : tile<32xf32>\n    %26 = mul %25, %24 : tile<32xf32>",
      // (M - x) * (x - M): the factors differ.
      "    %25 = sub %24, %16 : tile<32xf32>\n    %30 = sub %16, %24 : tile<32xf32>\n"
      "    %26 = mul %25, %30 : tile<32xf32>",
      // (x - M) / (x - M)... as a quotient, not a product.
      "    %25 = sub %24, %16 : tile<32xf32>\n    %26 = div %25, %25 : tile<32xf32>",
  };
  for (const std::string& term : cases) {
    const std::string text = mean_then(term);
    EXPECT_EQ(fused(text, false), print(parse(text), false)) << term;
  }
}

}  // namespace
}  // namespace metile

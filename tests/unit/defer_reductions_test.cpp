// The defer_reductions Tile IR pass on IR text: which carried sums of reductions become carried
// tiles reduced once after the loop, and which stay. Decode attention, which it rewrites, runs
// against float64 on every device in bindings/python/tests/test_attention.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "passes/pass.h"
#include "passes/tile/tile_pass.h"
#include "passes/tile/tile_pipeline.h"
#include "target/options.h"

namespace metile {
namespace METILE_UNITY_ID {

// Column sums (acc * s + reduce_sum(x, 0)) and a total (tot + reduce_sum(x)) of [8, 32] blocks
// of V; `acc0` and `tot0` start them, `extra` goes into the body.
std::string sums(const std::string& acc0 = "%3", const std::string& tot0 = "%2",
                 const std::string& extra = "") {
  return "kernel @sums(%V: ptr<f32>, %Out: ptr<f32>, %N: i32, %s: f32) {\n"
         "  %0 = const {value = 0} : i32\n"
         "  %1 = const {value = 8} : i32\n"
         "  %2 = const {value = 0.0} : f32\n"
         "  %3 = broadcast %2 : tile<32xf32>\n"
         "  %4 = const {value = 32} : i32\n"
         "  %20 = const {value = 1.0} : f32\n"
         "  %21 = broadcast %20 : tile<32xf32>\n"
         "  %10, %11 = for %5 = %0 to %N step %1 iter_args(%6 = " + acc0 + ", %7 = " + tot0 +
         ") -> (tile<32xf32>, f32) {\n"
         "    %8 = tile_load %V, %5, %0, %4 : tile<8x32xf32>\n"
         "    %9 = reduce_sum %8 {axis = 0} : tile<32xf32>\n"
         "    %12 = mul %6, %s : tile<32xf32>\n"
         "    %13 = add %12, %9 : tile<32xf32>\n"
         "    %14 = reduce_sum %8 {axis = -1} : f32\n"
         "    %15 = add %7, %14 : f32\n" + extra +
         "    yield %13, %15\n"
         "  }\n"
         "  %16 = arange %0 {size = 32} : tile<32xi32>\n"
         "  %17 = ptr_offset %Out, %16 : tile<32xptr<f32>>\n"
         "  %18 = add %10, %11 : tile<32xf32>\n"
         "  store %17, %18\n"
         "}\n";
}

std::string run(const std::string& text) {
  Program p = parse(text);
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden, false};
  run_tile_pass("defer_reductions", p, ctx);  // verifies the result
  return print(p, false);
}

TEST(DeferReductions, CarriedSumsOfReductionsCarryTheTiles) {
  const std::string out = run(sums());
  const size_t loop = out.find(" = for ");
  ASSERT_NE(loop, std::string::npos) << out;
  const std::string head = out.substr(out.rfind('\n', loop) + 1, out.find('\n', loop) - out.rfind('\n', loop));
  EXPECT_NE(head.find("-> (tile<8x32xf32>, tile<8x32xf32>)"), std::string::npos) << out;
  const std::string body = out.substr(loop, out.find("  }\n", loop) - loop);
  EXPECT_EQ(body.find("reduce_sum"), std::string::npos) << out;
  EXPECT_NE(body.find(", %s : tile<8x32xf32>"), std::string::npos) << out;  // the scale stays
  const std::string after = out.substr(out.find("  }\n", loop));
  EXPECT_NE(after.find("reduce_sum %") , std::string::npos) << out;
  EXPECT_NE(after.find("{axis = 0} : tile<32xf32>"), std::string::npos) << out;
  EXPECT_NE(after.find("{axis = -1} : f32"), std::string::npos) << out;
}

TEST(DeferReductions, SumsItCannotDeferStayAsWritten) {
  const std::string cases[] = {
      sums("%21", "%20"),  // starting at 1: the start would need every later scale
      // the carried sum read elsewhere in the body (a running value the body needs)
      sums("%3", "%2", "    %19 = add %13, %6 : tile<32xf32>\n    %22 = add %14, %7 : f32\n"),
  };
  for (const std::string& text : cases) EXPECT_EQ(run(text), print(parse(text), false)) << text;
}

TEST(DeferReductions, RunsOnGpusUnlessMetileGpuOffNamesIt) {
  const Program p = parse(sums());
  auto reduces_in_loop = [&](const CompileOptions& o, bool host) {
    const std::string out = print(*run_tile_pipeline(p, o, false, host).program, false);
    const size_t loop = out.find(" = for ");
    return out.substr(loop, out.find("  }\n", loop) - loop).find("reduce_sum") != std::string::npos;
  };
  CompileOptions o;
  EXPECT_FALSE(reduces_in_loop(o, false));
  EXPECT_TRUE(reduces_in_loop(o, true)) << "host devices keep the loop as written";
  o.disabled_passes = {"defer_reductions"};
  EXPECT_TRUE(reduces_in_loop(o, false));
  EXPECT_NO_THROW(check_pass_names({"defer_reductions"}));  // a name METILE_GPU_OFF accepts
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

// The pointer_tiles Tile IR pass (src/passes/tile/recognize_pointer_tiles.cpp) on IR text: which
// pointer-tile loads and stores become tile_load / tile_store, with which operands, and which
// stay as written. Results on every device, and the threadgroup memory of the two GEMM forms,
// are in bindings/python/tests/test_pointer_tiles.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/tile/tile_pass.h"
#include "target/options.h"

namespace metile {
namespace METILE_UNITY_ID {

// The Triton GEMM idiom after the activity pass: A (M x K, row stride %SA) and B (K x N, row
// stride %SB) through loop-carried pointer tiles advanced by 16 columns and 16 rows, masked by
// the matrix bounds (the B load without `other`), C stored through a pointer tile.
const char* kGemm = R"(kernel @mm(%A: ptr<f32>, %B: ptr<f32>, %C: ptr<f32>, %M: i32, %N: i32, %K: i32, %SA: i32, %SB: i32, %SC: i32, %S: i32) {
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c16 = const {value = 16} : i32
  %pm = program_id {axis = 0} : i32
  %pn = program_id {axis = 1} : i32
  %m0 = mul %pm, %c16 : i32
  %n0 = mul %pn, %c16 : i32
  %ar = arange %c0 {size = 16} : tile<16xi32>
  %rm = add %m0, %ar : tile<16xi32>
  %neg = sub %c0, %m0 : i32
  %rneg = add %neg, %ar : tile<16xi32>
  %rn = add %n0, %ar : tile<16xi32>
  %rk = arange %c0 {size = 16} : tile<16xi32>
  %rm2 = reshape %rm : tile<16x1xi32>
  %am1 = mul %rm2, %SA : tile<16x1xi32>
  %rk2 = reshape %rk : tile<1x16xi32>
  %ak1 = mul %rk2, %c1 : tile<1x16xi32>
  %amb = broadcast %am1 : tile<16x16xi32>
  %akb = broadcast %ak1 : tile<16x16xi32>
  %aoff = add %amb, %akb : tile<16x16xi32>
  %ap0 = ptr_offset %A, %aoff : tile<16x16xptr<f32>>
  %rk3 = reshape %rk : tile<16x1xi32>
  %bk1 = mul %rk3, %SB : tile<16x1xi32>
  %rn2 = reshape %rn : tile<1x16xi32>
  %bkb = broadcast %bk1 : tile<16x16xi32>
  %bnb = broadcast %rn2 : tile<16x16xi32>
  %boff = add %bkb, %bnb : tile<16x16xi32>
  %bp0 = ptr_offset %B, %boff : tile<16x16xptr<f32>>
  %z = const {value = 0.0} : f32
  %acc0 = broadcast %z : tile<16x16xf32>
  %nk = floordiv %K, %c16 : i32
  %oa, %oacc, %ob = for %k = %c0 to %nk step %c1 iter_args(%ap = %ap0, %acc = %acc0, %bp = %bp0) -> (tile<16x16xptr<f32>>, tile<16x16xf32>, tile<16x16xptr<f32>>) {
    %mr = lt %rm2, %M : tile<16x1xbool>
    %kk = mul %k, %c16 : i32
    %kl = sub %K, %kk : i32
    %mk = lt %rk2, %kl : tile<1x16xbool>
    %mrb = broadcast %mr : tile<16x16xbool>
    %mkb = broadcast %mk : tile<16x16xbool>
    %am = bitand %mrb, %mkb : tile<16x16xbool>
    %odd = lt %akb, %kl : tile<16x16xbool>
    %a = load %ap, %am, %z : tile<16x16xf32>
    %mk3 = lt %rk3, %kl : tile<16x1xbool>
    %mn = lt %rn2, %N : tile<1x16xbool>
    %mk3b = broadcast %mk3 : tile<16x16xbool>
    %mnb = broadcast %mn : tile<16x16xbool>
    %bm = bitand %mk3b, %mnb : tile<16x16xbool>
    %b = load %bp, %bm : tile<16x16xf32>
    %d = dot %a, %b, %acc : tile<16x16xf32>
    %astep = mul %c16, %c1 : i32
    %ap1 = ptr_offset %ap, %astep : tile<16x16xptr<f32>>
    %bstep = mul %c16, %SB : i32
    %bp1 = ptr_offset %bp, %bstep : tile<16x16xptr<f32>>
    yield %ap1, %d, %bp1
  }
  %cm1 = mul %rm2, %SC : tile<16x1xi32>
  %cmb = broadcast %cm1 : tile<16x16xi32>
  %coff = add %cmb, %bnb : tile<16x16xi32>
  %cp = ptr_offset %C, %coff : tile<16x16xptr<f32>>
  %cmr = lt %rm2, %M : tile<16x1xbool>
  %cmrb = broadcast %cmr : tile<16x16xbool>
  %cmn = lt %rn2, %N : tile<1x16xbool>
  %cmnb = broadcast %cmn : tile<16x16xbool>
  %cmask = bitand %cmrb, %cmnb : tile<16x16xbool>
  store %cp, %oacc, %cmask
}
)";

// kGemm with the first `from` replaced by `to`.
std::string gemm(const std::string& from = "", const std::string& to = "") {
  std::string text = kGemm;
  if (from.empty()) return text;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

std::string run(const std::string& text, std::vector<std::string> gpu_off = {}) {
  Program p = parse(text);
  CompileOptions o;
  o.disabled_passes = std::move(gpu_off);
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  run_tile_pass("pointer_tiles", p, ctx);  // verifies the result
  return print(p, false);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(PointerTiles, TritonGemmBecomesTheTileLoadGemm) {
  // The pointer tiles are gone, the loop-carried ones too (the loop carries the accumulator).
  // A: rows from pid_m * 16, columns k * 16, bounds (M, K): the mask's K - k * 16, moved by the
  // columns advanced, is K. B: rows k * 16, bounds (K, N). C: bounds (M, N).
  EXPECT_EQ(run(gemm()), R"(kernel @mm(%A: ptr<f32>, %B: ptr<f32>, %C: ptr<f32>, %M: i32, %N: i32, %K: i32, %SA: i32, %SB: i32, %SC: i32, %S: i32) {
  %0 = const {value = 0} : i32
  %1 = const {value = 1} : i32
  %2 = const {value = 16} : i32
  %3 = program_id {axis = 0} : i32
  %4 = program_id {axis = 1} : i32
  %5 = mul %3, %2 : i32
  %6 = mul %4, %2 : i32
  %7 = const {value = 0.0} : f32
  %8 = broadcast %7 : tile<16x16xf32>
  %9 = floordiv %K, %2 : i32
  %10 = for %11 = %0 to %9 step %1 iter_args(%12 = %8) -> (tile<16x16xf32>) {
    %13 = const {value = 16} : i32
    %14 = mul %11, %13 : i32
    %15 = tile_load %A, %5, %14, %SA, %M, %K : tile<16x16xf32>
    %16 = const {value = 16} : i32
    %17 = mul %11, %16 : i32
    %18 = tile_load %B, %17, %6, %SB, %K, %N : tile<16x16xf32>
    %19 = dot %15, %18, %12 : tile<16x16xf32>
    yield %19
  }
  tile_store %C, %5, %6, %SC, %10, %M, %N
}
)");
}

TEST(PointerTiles, ScalarOffsetsMoveRowsOrColumns) {
  // A read one row and 16 columns past the carried tile: the tile moves, the base stays.
  const std::string out = run(gemm("    %a = load %ap, %am, %z",
                                   "    %sh = mul %c1, %SA : i32\n"
                                   "    %apr = ptr_offset %ap, %sh : tile<16x16xptr<f32>>\n"
                                   "    %apc = ptr_offset %apr, %c16 : tile<16x16xptr<f32>>\n"
                                   "    %a = load %apc, %am, %z"));
  EXPECT_EQ(count(out, "= load "), 0) << out;
  EXPECT_EQ(count(out, "ptr_offset"), 0) << out;
  EXPECT_EQ(count(out, "tile_load %A, "), 1) << out;
  EXPECT_NE(out.find("-> (tile<16x16xf32>)"), std::string::npos) << out;
}

TEST(PointerTiles, AnAxisWithoutABoundIsUnbounded) {
  const std::string out = run(gemm("%cmask = bitand %cmrb, %cmnb", "%cmask = bitand %cmrb, %cmrb"));
  EXPECT_EQ(count(out, "tile_store %C, "), 1) << out;
  EXPECT_NE(out.find("const {value = 2147483647} : i32"), std::string::npos) << out;
}

TEST(PointerTiles, LeavesWhatItCannotProve) {
  // A column stride known only at run time: the A load stays; B and C are still tiles.
  std::string out = run(gemm("%ak1 = mul %rk2, %c1", "%ak1 = mul %rk2, %S"));
  EXPECT_EQ(count(out, "tile_load "), 1) << out;
  EXPECT_EQ(count(out, "= load "), 1) << out;
  EXPECT_EQ(count(out, "tile_store "), 1) << out;
  // A mask that is not the tile's bounds (it compares offsets, not the column index).
  out = run(gemm("load %ap, %am,", "load %ap, %odd,"));
  EXPECT_EQ(count(out, "= load "), 1) << out;
  EXPECT_EQ(count(out, "tile_load "), 1) << out;
  // `other` not 0.
  out = run(gemm("load %ap, %am, %z", "load %ap, %am, %acc"));
  EXPECT_EQ(count(out, "= load "), 1) << out;
  EXPECT_EQ(count(out, "tile_load %A"), 0) << out;
  // An advance by a run-time amount that is not a multiple of the row stride.
  out = run(gemm("%bp1 = ptr_offset %bp, %bstep", "%bp1 = ptr_offset %bp, %S"));
  EXPECT_EQ(count(out, "= load "), 1) << out;
  EXPECT_EQ(count(out, "tile_load %B"), 0) << out;
  // Rows whose first index may be negative: a masked-in lane of the pointer form could read
  // where the tile form reads 0.
  out = run(gemm("%rm2 = reshape %rm ", "%rm2 = reshape %rneg "));
  EXPECT_EQ(count(out, "tile_load %A"), 0) << out;
  EXPECT_EQ(count(out, "tile_store"), 0) << out;
  EXPECT_EQ(count(out, "tile_load %B"), 1) << out;
}

// A block pointer (make_block_ptr / advance in Python): the loop carries a scalar column offset
// from 0 by 16, the pointer tile is rebuilt from it each iteration, and the boundary check
// masks 0 <= index < bound on both axes.
const char* kBlockPointer = R"(kernel @bp(%A: ptr<f32>, %M: i32, %K: i32, %SA: i32) {
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c16 = const {value = 16} : i32
  %cm1 = const {value = -1} : i32
  %pm = program_id {axis = 0} : i32
  %m0 = mul %pm, %c16 : i32
  %ar = arange %c0 {size = 16} : tile<16xi32>
  %rm = add %m0, %ar : tile<16xi32>
  %rm2 = reshape %rm : tile<16x1xi32>
  %am1 = mul %rm2, %SA : tile<16x1xi32>
  %amb = broadcast %am1 : tile<16x16xi32>
  %z = const {value = 0.0} : f32
  %acc0 = broadcast %z : tile<16x16xf32>
  %nk = floordiv %K, %c16 : i32
  %oko, %oacc = for %k = %c0 to %nk step %c1 iter_args(%ko = %c0, %acc = %acc0) -> (i32, tile<16x16xf32>) {
    %rk = add %ko, %ar : tile<16xi32>
    %rk2 = reshape %rk : tile<1x16xi32>
    %akb = broadcast %rk2 : tile<16x16xi32>
    %aoff = add %amb, %akb : tile<16x16xi32>
    %ap = ptr_offset %A, %aoff : tile<16x16xptr<f32>>
    %g0 = ge %rm2, %c0 : tile<16x1xbool>
    %l0 = lt %rm2, %M : tile<16x1xbool>
    %g1 = ge %rk2, %c0 : tile<1x16xbool>
    %l1 = lt %rk2, %K : tile<1x16xbool>
    %mr = bitand %g0, %l0 : tile<16x1xbool>
    %mc = bitand %g1, %l1 : tile<1x16xbool>
    %mrb = broadcast %mr : tile<16x16xbool>
    %mcb = broadcast %mc : tile<16x16xbool>
    %am = bitand %mrb, %mcb : tile<16x16xbool>
    %a = load %ap, %am, %z : tile<16x16xf32>
    %sum = add %acc, %a : tile<16x16xf32>
    %ko1 = add %ko, %c16 : i32
    yield %ko1, %sum
  }
}
)";

TEST(PointerTiles, BlockPointersAdvancedByACarriedOffsetAreTiles) {
  std::string text = kBlockPointer;
  std::string out = run(text);
  EXPECT_EQ(count(out, "tile_load %A, "), 1) << out;
  EXPECT_EQ(count(out, "= load "), 0) << out;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    return run(t.replace(t.find(from), from.size(), to));
  };
  // The row offset carried unchanged too (Python carries each offset of a block pointer).
  std::string carried = text;
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"%oko, %oacc = for", "%oro, %oko, %oacc = for"},
           {"iter_args(%ko = %c0, %acc = %acc0) -> (i32, tile<16x16xf32>) {",
            "iter_args(%ro = %m0, %ko = %c0, %acc = %acc0) -> (i32, i32, tile<16x16xf32>) {\n"
            "    %rmc = add %ro, %ar : tile<16xi32>\n"
            "    %rm2c = reshape %rmc : tile<16x1xi32>\n"
            "    %am1c = mul %rm2c, %SA : tile<16x1xi32>\n"
            "    %ambc = broadcast %am1c : tile<16x16xi32>"},
           {"%aoff = add %amb,", "%aoff = add %ambc,"},
           {"%g0 = ge %rm2,", "%g0 = ge %rm2c,"},
           {"%l0 = lt %rm2,", "%l0 = lt %rm2c,"},
           {"yield %ko1, %sum", "yield %ro, %ko1, %sum"}})
    carried.replace(carried.find(from), from.size(), to);
  out = run(carried);
  EXPECT_EQ(count(out, "tile_load %A, "), 1) << out;
  // An offset that may be negative: from -1, or advanced by a run-time amount of unknown sign.
  out = with("iter_args(%ko = %c0,", "iter_args(%ko = %cm1,");
  EXPECT_EQ(count(out, "tile_load "), 0) << out;
  out = with("%ko1 = add %ko, %c16", "%ko1 = add %ko, %M");
  EXPECT_EQ(count(out, "tile_load "), 0) << out;
  // A lower bound other than 0 is not a tile's bound.
  out = with("%g1 = ge %rk2, %c0", "%g1 = ge %rk2, %c1");
  EXPECT_EQ(count(out, "tile_load "), 0) << out;
}

// The carried_offsets pass (src/passes/tile/index_carried_offsets.cpp) on kBlockPointer: the row
// offset carried unchanged reads its initial value, the column offset advanced by 16 in a loop
// from 0 by 16 reads `0 + k * 1`; the carry itself stays.
TEST(CarriedOffsets, OffsetsAdvancedByTheStepReadTheLoopIndex) {
  std::string text = kBlockPointer;
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"%nk = floordiv %K, %c16 : i32", "%nk = mul %K, %c1 : i32"},
           {"for %k = %c0 to %nk step %c1", "for %k = %c0 to %nk step %c16"},
           {"%oko, %oacc = for", "%oro, %oko, %oacc = for"},
           {"iter_args(%ko = %c0,", "iter_args(%ro = %m0, %ko = %c0,"},
           {"-> (i32, tile<16x16xf32>)", "-> (i32, i32, tile<16x16xf32>)"},
           {"    %rk = add %ko, %ar", "    %rr = add %ro, %c1 : i32\n    %rk = add %ko, %ar"},
           {"yield %ko1, %sum", "yield %ro, %ko1, %sum"}})
    text.replace(text.find(from), from.size(), to);
  Program p = parse(text);
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  run_tile_pass("carried_offsets", p, ctx);
  const std::string out = print(p, false);
  EXPECT_NE(out.find(R"(iter_args(%18 = %5, %19 = %0, %20 = %12) -> (i32, i32, tile<16x16xf32>) {
    %21 = const {value = 1} : i32
    %22 = mul %17, %21 : i32
    %23 = add %0, %22 : i32
    %24 = add %5, %1 : i32
    %25 = add %23, %6 : tile<16xi32>)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("%41 = add %19, %2 : i32\n    yield %5, %41, %40"), std::string::npos) << out;
  // A step known at run time only, a start other than 0, an advance read at run time: the
  // body reads the carried value as before.
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"step %c16", "step %SA"}, {"for %k = %c0 to", "for %k = %c1 to"},
           {"%ko1 = add %ko, %c16", "%ko1 = add %ko, %M"}}) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    Program q = parse(t);
    run_tile_pass("carried_offsets", q, ctx);
    EXPECT_NE(print(q, false).find("= add %19, %6 : tile<16xi32>"), std::string::npos)
        << from << "\n" << print(q, false);
  }
}

TEST(PointerTiles, RowsTakenModuloAreLeftAlone) {
  // Triton's `offs_am = (pid_m * BM + arange(BM)) % M`: rows that wrap are not a tile.
  std::string text = gemm("%rm2 = reshape %rm ", "%rm2 = reshape %rmod ");
  text.insert(text.find("  %rm2 = "), "  %rmod = mod %rm, %M : tile<16xi32>\n");
  const std::string out = run(text);
  EXPECT_EQ(count(out, "tile_load %A"), 0) << out;
  EXPECT_EQ(count(out, "tile_store"), 0) << out;
  EXPECT_EQ(count(out, "tile_load %B"), 1) << out;
}

TEST(PointerTiles, SharedSubexpressionsCostLinearTime) {
  // 2^25 paths through the offsets (within the depth limit): the matcher gives up after a fixed number of nodes.
  std::string chain = "  %t0 = broadcast %c1 : tile<16x16xi32>\n";
  for (int i = 1; i <= 25; ++i)
    chain += "  %t" + std::to_string(i) + " = add %t" + std::to_string(i - 1) + ", %t" +
             std::to_string(i - 1) + " : tile<16x16xi32>\n";
  chain += "  %off = add %t25, %coff : tile<16x16xi32>\n"
           "  %p = ptr_offset %C, %off : tile<16x16xptr<f32>>\n"
           "  store %p, %oacc\n";
  const std::string out = run(gemm("  store %cp, %oacc, %cmask\n", chain));
  EXPECT_EQ(count(out, "store %"), 1) << out;
  EXPECT_EQ(count(out, "tile_store"), 0) << out;
}

TEST(PointerTiles, SwitchedOffByGpuOff) {
  const std::string text = gemm();
  EXPECT_EQ(run(text, {"pointer_tiles"}), print(parse(text), false));
  EXPECT_NO_THROW(check_pass_names({"pointer_tiles"}));  // a name METILE_GPU_OFF accepts
}

}  // namespace
}  // namespace metile

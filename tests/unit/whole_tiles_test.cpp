// The whole_tiles Tile IR pass on IR text: which row loops split into an unmasked whole-tile
// loop and the rest as written, what the check in front of them compares, and which loops stay
// as written. Results on every device, with and without it, against float64 numpy are in
// bindings/python/tests/test_whole_tiles.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <string>

#include "ir/gpu_ir.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/tile/tile_pass.h"
#include "target/gpu_target.h"
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

namespace metile {
namespace METILE_UNITY_ID {

// Flash attention's K/V loop as the tracer writes it (examples/python/flash_attention.py; head
// dim `hd`, Q, K and V of `dt`, 256 threads when 16-bit): the scores q k^T masked by `mask` (over
// %cb, the columns i + arange broadcast down the rows, and %rb, the rows start + arange
// broadcast along them), an online softmax, p v accumulated. The loop ends at `end`: %seq, or
// %diag (causal: the block of the last query row).
std::string attention(const std::string& mask, int block_m = 64, int block_n = 32,
                      const std::string& end = "%seq", const std::string& dt = "f32", int hd = 16) {
  const std::string m = std::to_string(block_m), n = std::to_string(block_n), d = std::to_string(hd);
  const std::string p = dt == "f32" ? "%p" : "%ph";
  const std::string s = "tile<" + m + "x" + n + "xf32>", idx = "tile<" + m + "x" + n + "xi32>";
  return "kernel @attn(%Q: ptr<" + dt + ">, %K: ptr<" + dt + ">, %V: ptr<" + dt +
         ">, %O: ptr<f32>, %seq: i32, %X: ptr<i32>)" + (dt == "f32" ? "" : " num_threads(256)") + " {\n"
         "  %c0 = const {value = 0} : i32\n"
         "  %cn = const {value = " + n + "} : i32\n"
         "  %cm = const {value = " + m + "} : i32\n"
         "  %cd = const {value = " + d + "} : i32\n"
         "  %pid = program_id {axis = 0} : i32\n"
         "  %start = mul %pid, %cm : i32\n"
         "  %rows = arange %start {size = " + m + "} : tile<" + m + "xi32>\n"
         "  %rr = reshape %rows : tile<" + m + "x1xi32>\n"
         "  %rb = broadcast %rr : " + idx + "\n"
         "  %xp = ptr_offset %X, %rb : tile<" + m + "x" + n + "xptr<i32>>\n"
         "  %xs = load %xp : " + idx + "\n"
         "  %q = tile_load %Q, %start, %c0, %cd, %seq, %cd : tile<" + m + "x" + d + "x" + dt + ">\n"
         "  %last = add %start, %cm : i32\n"
         "  %diag = minimum %last, %seq : i32\n"
         "  %ninf = const {value = -inf} : f32\n"
         "  %z = const {value = 0.0} : f32\n"
         "  %m0 = broadcast %ninf : tile<" + m + "xf32>\n"
         "  %acc0 = broadcast %z : tile<" + m + "x" + d + "xf32>\n"
         "  %ninfb = broadcast %ninf : " + s + "\n"
         "  %s0 = broadcast %z : " + s + "\n"
         "  %acc, %mx = for %i = %c0 to " + end + " step %cn iter_args(%a = %acc0, %mi = %m0) -> (tile<" + m +
         "x" + d + "xf32>, tile<" + m + "xf32>) {\n"
         "    %k = tile_load %K, %i, %c0, %cd, %seq, %cd : tile<" + n + "x" + d + "x" + dt + ">\n"
         "    %v = tile_load %V, %i, %c0, %cd, %seq, %cd : tile<" + n + "x" + d + "x" + dt + ">\n"
         "    %kt = trans %k : tile<" + d + "x" + n + "x" + dt + ">\n"
         "    %sc = dot %q, %kt, %s0 : " + s + "\n"
         "    %cols = arange %i {size = " + n + "} : tile<" + n + "xi32>\n"
         "    %cr = reshape %cols : tile<1x" + n + "xi32>\n"
         "    %cb = broadcast %cr : " + idx + "\n"
         "    %keep = " + mask + "\n"
         "    %sm = select %keep, %sc, %ninfb : " + s + "\n"
         "    %rmax = reduce_max %sm {axis = 1} : tile<" + m + "xf32>\n"
         "    %mn = maximum %mi, %rmax : tile<" + m + "xf32>\n"
         "    %mc = reshape %mn : tile<" + m + "x1xf32>\n"
         "    %mb = broadcast %mc : " + s + "\n"
         "    %sx = sub %sm, %mb : " + s + "\n"
         "    %p = exp2 %sx : " + s + "\n" +
         (dt == "f32" ? "" : "    %ph = cast %p : tile<" + m + "x" + n + "x" + dt + ">\n") +
         "    %an = dot " + p + ", %v, %a : tile<" + m + "x" + d + "xf32>\n"
         "    yield %an, %mn\n"
         "  }\n"
         "  tile_store %O, %start, %c0, %cd, %acc, %seq, %cd\n"
         "}\n";
}

std::string bools(int block_m, int block_n) {
  return " : tile<" + std::to_string(block_m) + "x" + std::to_string(block_n) + "xbool>";
}

// The causal loop: columns below seq and at most the row, up to the last row's block.
std::string causal_loop(int block_m = 64, int block_n = 32, const std::string& dt = "f32", int hd = 16) {
  std::string t = attention("MASK", block_m, block_n, "%diag", dt, hd);
  const std::string b = bools(block_m, block_n);
  t.replace(t.find("%keep = MASK"), 12,
            "%k1 = lt %cb, %seq" + b + "\n    %k2 = le %cb, %rb" + b + "\n    %keep = bitand %k1, %k2" + b);
  return t;
}

// The scalar ops in front of the attention loop evaluated for `seq` and program `pid`; returns
// the split point the loop's branch compares iv with (-1: no branch).
int64_t split_point(const std::string& text, int64_t seq, int64_t pid) {
  Program p = parse(text);
  std::map<ValueId, int64_t> v;
  for (const Param& prm : p.params)
    if (prm.name == "seq") v[prm.value] = seq;
  const Op* loop = nullptr;
  for (const Op& op : p.body.ops) {
    if (op.kind == OpKind::FOR) {
      loop = &op;
      break;
    }
    if (op.results.size() != 1 || !p.type(op.result()).is_scalar()) continue;
    const DType t = p.type(op.result()).dtype;
    if (!is_int(t) && t != DType::boolean) continue;
    auto x = [&](int i) { return v.at(op.operands[i]); };
    int64_t r = 0;
    switch (op.kind) {
      case OpKind::CONST: r = op.attr_int("value"); break;
      case OpKind::PROGRAM_ID: r = pid; break;
      case OpKind::CAST: r = t == DType::i32 ? static_cast<int32_t>(x(0)) : x(0); break;
      case OpKind::ADD: r = x(0) + x(1); break;
      case OpKind::SUB: r = x(0) - x(1); break;
      case OpKind::MUL: r = x(0) * x(1); break;
      case OpKind::DIV: r = x(0) / x(1); break;
      case OpKind::MINIMUM: r = std::min(x(0), x(1)); break;
      case OpKind::MAXIMUM: r = std::max(x(0), x(1)); break;
      case OpKind::SELECT: r = x(0) ? x(1) : x(2); break;
      case OpKind::LT: r = x(0) < x(1); break;
      case OpKind::LE: r = x(0) <= x(1); break;
      case OpKind::GT: r = x(0) > x(1); break;
      case OpKind::GE: r = x(0) >= x(1); break;
      case OpKind::BITAND: r = x(0) & x(1); break;
      default: continue;  // tiles and pointers: not read by the split
    }
    if (t == DType::i32) r = static_cast<int32_t>(r);
    v[op.result()] = r;
  }
  if (loop == nullptr) return -1;
  for (const Op& op : loop->body().ops)
    if (op.kind == OpKind::LT && op.operands[0] == loop->body().args[0]) return v.at(op.operands[1]);
  return -1;
}

TEST(WholeTiles, AttentionMasksTheScoresOfItsLastBlockOnly) {
  const std::string out = run(attention("lt %cb, %seq" + bools(64, 32)), {"whole_tiles"});
  // One loop (its pipeline stays one); the select of the scores behind a branch on iv < split.
  EXPECT_EQ(count(out, "\\n *%\\w+, %\\w+ = for "), 1) << out;
  const size_t at = out.find(" = if ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string branch = out.substr(at, out.find("reduce_max") - at);
  const std::string whole = branch.substr(0, branch.find("} else {")), rest = branch.substr(branch.find("} else {"));
  EXPECT_EQ(count(whole, "xbool>"), 0) << "whole blocks take the scores as they are: " << out;
  std::smatch dot;  // the scores (the printer numbers the values)
  ASSERT_TRUE(std::regex_search(out, dot, std::regex("(%\\w+) = dot %\\w+, %\\w+, %\\w+ : tile<64x32xf32>")));
  EXPECT_EQ(count(whole, "yield " + dot.str(1) + "\\n"), 1) << out;
  EXPECT_EQ(count(rest, "= lt %\\w+, %seq : tile<64x32xbool>"), 1) << "the rest masks: " << out;
  EXPECT_EQ(count(rest, "= select %\\w+, " + dot.str(1) + ", %\\w+ :"), 1) << out;
  EXPECT_EQ(count(out, "xbool>"), 1) << "no mask outside the branch's rest: " << out;
  // The loads keep their bounds (the pipeline's copies; TMA clamps them on sm_90).
  EXPECT_EQ(count(out, "tile_load %K, %\\w+, %\\w+, %\\w+, %seq, %\\w+ :"), 1) << out;
  // Whole blocks: all but a partial last one.
  EXPECT_EQ(split_point(out, 4096, 0), 4096);
  EXPECT_EQ(split_point(out, 4001, 5), 4000);
  EXPECT_EQ(split_point(out, 31, 0), 0);
  EXPECT_EQ(split_point(out, 1, 0), 0);
}

TEST(WholeTiles, CausalAttentionMasksTheDiagonalBlocksOnly) {
  for (auto [bm, bn] : {std::pair{64, 32}, std::pair{32, 64}, std::pair{64, 64}}) {
    const std::string out = run(causal_loop(bm, bn), {"whole_tiles"});
    ASSERT_NE(out.find(" = if "), std::string::npos) << out;
    const std::string rest = out.substr(out.find("} else {"), out.find("reduce_max") - out.find("} else {"));
    EXPECT_EQ(count(rest, "= le %\\w+, %\\w+ : tile<"), 1) << out;
    EXPECT_EQ(count(rest, "= lt %\\w+, %seq : tile<"), 1) << out;
    // The prefix: blocks whose last column is at most the program's first row.
    for (int64_t pid : {0, 1, 2, 7}) {
      const int64_t first_row = pid * bm, diag = std::min<int64_t>(first_row + bm, 1000);
      int64_t want = 0;
      while (want + bn <= diag && want + bn - 1 <= first_row) want += bn;
      EXPECT_EQ(split_point(out, 1000, pid), want) << bm << "x" << bn << " pid " << pid << "\n" << out;
    }
    // The first program's prefix is empty: every block runs as written.
    EXPECT_EQ(split_point(out, 1000, 0), 0);
  }
}

TEST(WholeTiles, ScoresScaledBeforeTheirMaskAreGuardedAlike) {
  // Triton's tutorial: where(valid, dot(q, k) * scale, -inf). A select of anything else in a
  // dot loop (here the fill the scores' select takes) keeps its mask.
  const std::string b = bools(64, 32);
  std::string scaled = attention("lt %cb, %seq" + b);
  scaled.replace(scaled.find("%sm = select %keep, %sc,"), 24,
                 "%two = const {value = 2.0} : f32\n    %ss = mul %sc, %two : tile<64x32xf32>\n"
                 "    %sm = select %keep, %ss,");
  const std::string out = run(scaled, {"whole_tiles"});
  EXPECT_EQ(count(out, " = if "), 1) << out;
  EXPECT_EQ(split_point(out, 4001, 0), 4000);
  std::string other = attention("lt %cb, %seq" + b);
  other.replace(other.find("%sm = select %keep, %sc, %ninfb"), 31,
                "%fill = select %keep, %ninfb, %s0 : tile<64x32xf32>\n    %sm = select %keep, %sc, %fill");
  const std::string kept = run(other, {"whole_tiles"});
  EXPECT_EQ(count(kept, " = if "), 1) << kept;
  const std::string before = kept.substr(0, kept.find(" = if "));
  EXPECT_EQ(count(before, "= select %\\w+, %\\w+, %\\w+ : tile<64x32xf32>"), 1) << kept;
}

TEST(WholeTiles, ComparisonsThatAreNotPrefixTrueStayInTheScores) {
  const std::string b = bools(64, 32);
  const std::string cases[] = {
      attention("le %cb, %xs" + b),  // a bound loaded from memory: no least value known
      attention("ge %cb, %cb" + b),  // the bound moves with the iteration
  };
  for (const std::string& text : cases)
    EXPECT_EQ(run(text, {"whole_tiles"}), print(parse(text), false)) << text;
  // A decreasing index (the columns negated) is no index this pass follows.
  std::string down = attention("le %neg, %rb" + b);
  down.replace(down.find("    %keep"), 0, "    %neg = sub %c0, %cb : tile<64x32xi32>\n");
  EXPECT_EQ(run(down, {"whole_tiles"}), print(parse(down), false));
  // A lower comparison against the rows holds on a suffix (the columns grow): it is a condition
  // on the first block, which fails here, so every block keeps its mask.
  const std::string lower = run(attention("ge %cb, %rb" + b), {"whole_tiles"});
  ASSERT_NE(lower.find(" = if "), std::string::npos) << lower;
  for (int64_t pid : {0, 3}) EXPECT_EQ(split_point(lower, 4096, pid), 0) << lower;
}

// On sm_90 the branch keeps both dots on the warpgroup atom (assign_layouts follows the scores
// through the `if`): P stays in the scores' registers and K and V stream through the TMA ring.
TEST(WholeTiles, TheScoresBranchKeepsAttentionOnTheWarpgroupAtom) {
  for (bool causal : {false, true}) {
    Program p = parse(causal ? causal_loop(128, 64, "f16", 64)
                             : attention("lt %cb, %seq" + bools(128, 64), 128, 64, "%seq", "f16", 64));
    CompileOptions o;
    TileHiddenArgs hidden;
    TilePassContext ctx{o, false, hidden, false};
    run_tile_pass("whole_tiles", p, ctx);
    const std::string ir = gpu::print(run_gpu_pipeline(p, nvidia_gpu_target("sm_90"), o, "cuda").function);
    EXPECT_EQ(count(ir, " = if "), 1) << ir;
    EXPECT_EQ(count(ir, "atom=\"wgmma\""), 2) << ir;
    EXPECT_EQ(count(ir, "register_a=1"), 1) << "P from the scores' registers\n" << ir;
    EXPECT_EQ(count(ir, "convert_layout"), 0) << ir;
    ASSERT_NE(ir.find(" for %"), std::string::npos) << ir;
    EXPECT_EQ(count(ir.substr(ir.find(" for %")), " tma_load "), 2) << "K and V, one loop\n" << ir;
  }
}

TEST(WholeTiles, WholeBlocksAndWholeTilesSwitchItOff) {
  const std::string text = causal_loop();
  EXPECT_EQ(run(text, {"whole_tiles"}, {"whole_blocks"}), print(parse(text), false));
  EXPECT_EQ(run(text, {"whole_tiles"}, {"whole_tiles"}), print(parse(text), false));
  EXPECT_NO_THROW(check_pass_names({"whole_blocks"}));
  // Row loops keep splitting without the branch.
  EXPECT_EQ(count(run(row_loop(), {"whole_tiles"}, {"whole_blocks"}), "\\n *for "), 2);
}

}  // namespace
}  // namespace metile

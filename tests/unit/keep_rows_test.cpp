// The keep_rows Tile IR pass on IR text: which re-reads take kept tiles, how many iterations are
// kept on each kind of device, and which stay as written. Results on every device, with and
// without it, against float64 numpy are in bindings/python/tests/test_keep_rows.py.
#include <gtest/gtest.h>

#include <string>

#include "passes/lower.h"
#include "passes/pass.h"
#include "passes/tile/tile_pass.h"
#include "runtime/device.h"
#include "target/gpu_target.h"

namespace metile {
namespace METILE_UNITY_ID {

// A sum pass over X, then a pass that re-reads X through `ptr2` and stores into `dst`, with
// `step` and `block` elements per tile.
std::string two_passes(const std::string& ptr2 = "%X", const std::string& dst = "%Out",
                       const std::string& step = "%3", int block = 32) {
  const std::string b = std::to_string(block);
  const std::string tile = "tile<" + b + "xf32>", itile = "tile<" + b + "xi32>",
                    btile = "tile<" + b + "xbool>", ptile = "tile<" + b + "xptr<f32>>";
  return "kernel @two_passes(%X: ptr<f32>, %Out: ptr<f32>, %N: i32, %S: i32) {\n"
         "  %0 = const {value = 0.0} : f32\n"
         "  %1 = broadcast %0 : " + tile + "\n"
         "  %2 = const {value = 0} : i32\n"
         "  %3 = const {value = " + b + "} : i32\n"
         "  %4 = for %5 = %2 to %N step %3 iter_args(%6 = %1) -> (" + tile + ") {\n"
         "    %7 = arange %2 {size = " + b + "} : " + itile + "\n"
         "    %8 = add %5, %7 : " + itile + "\n"
         "    %9 = lt %8, %N : " + btile + "\n"
         "    %10 = ptr_offset %X, %8 : " + ptile + "\n"
         "    %11 = load %10, %9 : " + tile + "\n"
         "    %12 = add %6, %11 : " + tile + "\n"
         "    %13 = select %9, %12, %6 : " + tile + "\n"
         "    yield %13\n"
         "  }\n"
         "  %14 = reduce_sum %4 {axis = -1} : f32\n"
         "  for %15 = %2 to %N step " + step + " {\n"
         "    %16 = arange %2 {size = " + b + "} : " + itile + "\n"
         "    %17 = add %15, %16 : " + itile + "\n"
         "    %18 = lt %17, %N : " + btile + "\n"
         "    %19 = ptr_offset " + ptr2 + ", %17 : " + ptile + "\n"
         "    %20 = load %19, %18 : " + tile + "\n"
         "    %21 = sub %20, %14 : " + tile + "\n"
         "    %22 = ptr_offset " + dst + ", %17 : " + ptile + "\n"
         "    store %22, %21, %18\n"
         "    yield\n"
         "  }\n"
         "}\n";
}

// whole_tiles: as interp sees it (it checks accesses itself); `cpu`: as the cpu device does.
std::string kept(const std::string& text, bool whole_tiles, int num_threads = 0, bool cpu = false) {
  Program p = parse(text);
  CompileOptions o;
  o.num_threads = num_threads;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, whole_tiles && !cpu, hidden, whole_tiles};
  run_tile_pass("keep_rows", p, ctx);  // verifies the result
  return print(p, false);
}

// The number of values the first loop carries.
int carried(const std::string& text) {
  const size_t at = text.find(" for "), open = text.find("iter_args(", at),
               close = text.find(')', open);
  int n = 1;
  for (size_t k = open; k < close; ++k) n += text[k] == ',';
  return n;
}

TEST(KeepRows, TheSecondPassTakesTheKeptTileWhenTheRowFits) {
  const std::string text = two_passes();
  // interp: 32-float tiles, 64 KiB of local arrays: the most slots (4); GPUs keep one slot at
  // most. The cpu keeps nothing (its caches hold the row).
  EXPECT_EQ(kept(text, true, 0, true), print(parse(text), false));
  for (bool whole_tiles : {true, false}) {
    const std::string out = kept(text, whole_tiles);
    const int slots = whole_tiles ? 4 : 1;
    EXPECT_EQ(carried(out), 1 + slots) << out;
    EXPECT_NE(out.find("{value = " + std::to_string(slots * 32) + "} : i64"), std::string::npos)
        << "fits: N - 0 <= K * 32\n" << out;
    const std::string second = out.substr(out.rfind(" for "));
    EXPECT_NE(second.find(" bitand "), std::string::npos) << "the load is masked off: " << out;
    EXPECT_NE(second.find(" select "), std::string::npos) << out;
  }
}

TEST(KeepRows, TheBudgetSetsHowManyIterationsAreKept) {
  // 4096 floats: one tile on a GPU of 256 threads (16 per thread), none with 128 or 64; 64 KiB
  // of local arrays hold 4.
  const std::string text = two_passes("%X", "%Out", "%3", 4096);
  EXPECT_EQ(carried(kept(text, false)), 1 + 1);
  EXPECT_EQ(kept(text, false, 128), print(parse(text), false));
  const std::string none = kept(text, false, 64);
  EXPECT_EQ(none, print(parse(text), false));
  EXPECT_EQ(carried(kept(text, true)), 1 + 4);
  // One slot: the loaded tile itself, no iteration number.
  const std::string one = kept(text, false);
  EXPECT_EQ(one.find(" div "), std::string::npos) << one;
}

TEST(KeepRows, RereadsThatMayDifferStayAsWritten) {
  const std::string cases[] = {
      two_passes("%Out"),               // another buffer
      two_passes("%X", "%X"),           // the kernel writes what it reads
      two_passes("%X", "%Out", "%S"),   // a step known only at run time
  };
  for (const std::string& text : cases)
    for (bool whole_tiles : {true, false})
      EXPECT_EQ(kept(text, whole_tiles), print(parse(text), false)) << text;
  std::string bounds = two_passes();
  bounds.replace(bounds.find("for %15 = %2"), 12, "for %15 = %3");  // another range
  EXPECT_EQ(kept(bounds, true), print(parse(bounds), false));
}

// As a device with `threadgroup_bytes` of threadgroup memory sees it (a GPU: whole_tiles false).
std::string kept_in_threadgroup(const std::string& text, uint64_t threadgroup_bytes,
                                std::vector<std::string> off = {}) {
  Program p = parse(text);
  CompileOptions o;
  o.disabled_passes = std::move(off);
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden, false, false, threadgroup_bytes};
  run_tile_pass("keep_rows", p, ctx);
  return print(p, false);
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(KeepRows, LongRowsAreKeptInAThreadgroupArray) {
  const std::string text = two_passes();
  // 32 KiB less the 4 KiB reserve: 224 tiles of 32 floats, rows of up to 7168 elements.
  const std::string out = kept_in_threadgroup(text, 32768);
  EXPECT_NE(out.find("shared {size = 7168, row = 1} : ptr<f32, threadgroup>"), std::string::npos) << out;
  EXPECT_NE(out.find("{value = 7168} : i64"), std::string::npos) << "fits: N - 0 <= 224 * 32\n" << out;
  const std::string head = out.substr(out.find(" for "), out.find('{', out.find(" for ")) - out.find(" for "));
  EXPECT_EQ(head.find("iter_args"), std::string::npos) << "the copy loop comes first, carrying nothing\n" << out;
  // The copy loop stores what it loads (as L1 did) to the row; both passes read the row where it
  // fits and memory (masked off where it fits) otherwise.
  const std::string copy = out.substr(out.find(" for "), out.find("yield") - out.find(" for "));
  EXPECT_EQ(count(copy, "= load "), 1u) << copy;
  EXPECT_EQ(count(copy, "store "), 1u) << copy;
  EXPECT_EQ(count(out, "ptr<f32, threadgroup>>"), 3u) << out;  // the copy's store, two reads
  EXPECT_EQ(count(out, "= load "), 5u) << out;                 // the copy's, two in each pass
  const std::string second = out.substr(out.rfind(" for "));
  EXPECT_NE(second.find(" select "), std::string::npos) << out;
  // Too little memory for a tile: the register form; the switch: the same.
  const std::string slots = kept(text, false);
  EXPECT_EQ(kept_in_threadgroup(text, 4096), slots);
  EXPECT_EQ(kept_in_threadgroup(text, 32768, {"threadgroup_rows"}), slots);
  // What stays as written stays so here too.
  EXPECT_EQ(kept_in_threadgroup(two_passes("%X", "%X"), 32768), print(parse(two_passes("%X", "%X")), false));
}

TEST(KeepRows, RowCopiesAreIssuedTogetherThenWaitedForOnce) {
  // copy-rows-async on the lowered program: the copy loop's load and store become one async
  // copy, and one commit, wait and barrier stand between the copy loop and the first pass.
  Program p = parse(kept_in_threadgroup(two_passes(), 32768));
  gpu::Function f = lower_to_gpu(p, apple_gpu_target(), {0, "metal-sim"});
  const std::string before = gpu::print(f);
  EXPECT_EQ(count(before, "async_copy"), 0u) << before;
  EXPECT_EQ(count(before, "row=1"), 1u) << before;
  PassContext ctx{apple_gpu_target()};
  run_gpu_pass("copy-rows-async", f, ctx);
  const std::string after = gpu::print(f);
  EXPECT_EQ(count(after, "async_copy"), 1u) << after;
  const size_t copy = after.find("async_copy"), commit = after.find("async_commit"),
               wait = after.find("async_wait pending=0"), barrier = after.find("barrier", wait),
               first = after.find(" for ", copy);
  ASSERT_NE(commit, std::string::npos) << after;
  EXPECT_LT(copy, commit);
  EXPECT_LT(commit, wait);
  EXPECT_LT(wait, barrier);
  EXPECT_LT(barrier, first) << "the wait comes before the first pass\n" << after;
  EXPECT_EQ(count(after, "async_commit"), 1u) << after;
  EXPECT_EQ(count(after, "= load "), count(before, "= load ") - 1) << after;
  // Unmasked copies (whole_tiles' loop of whole tiles) of runs of 4 floats in a thread: 16-byte
  // chunks; the masked rest element by element.
  Program whole = parse(kept_in_threadgroup(two_passes("%X", "%Out", "%3", 1024), 32768));
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext tctx{o, false, hidden, false, false, 32768};
  run_tile_pass("whole_tiles", whole, tctx);
  gpu::Function g = lower_to_gpu(whole, apple_gpu_target(), {0, "metal-sim"});
  run_gpu_pass("copy-rows-async", g, ctx);
  const std::string chunked = gpu::print(g);
  EXPECT_EQ(count(chunked, "async_copy"), 2u) << chunked;
  EXPECT_EQ(count(chunked, "width=4 vector=1 row=1"), 1u) << chunked;
  EXPECT_EQ(count(chunked, "width=1 vector=0 row=1"), 1u) << chunked;
  EXPECT_EQ(count(chunked, "async_commit"), 1u) << chunked;
  // Nothing to copy: nothing changes.
  gpu::Function plain = lower_to_gpu(parse(two_passes()), apple_gpu_target(), {0, "metal-sim"});
  const std::string text = gpu::print(plain);
  run_gpu_pass("copy-rows-async", plain, ctx);
  EXPECT_EQ(gpu::print(plain), text);
}

}  // namespace
}  // namespace metile

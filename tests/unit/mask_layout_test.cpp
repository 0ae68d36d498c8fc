// Index math reaching a dot's fragment layout through a reshape (flash attention's key mask,
// `cols[None, :] < seq` over the scores) is computed in the layout its use needs
// (assign_layouts.cpp), not converted through threadgroup memory every iteration. GPU IR text.
#include <gtest/gtest.h>

#include <string>

#include "ir/gpu_ir.h"
#include "passes/lower.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// Scores A @ B accumulated over column blocks, columns at or past n masked to -inf; the
// arange before the loop, as the Tile IR hoist leaves flash attention's.
const char* const kMaskedScores = R"(kernel @k(%A: ptr<f16>, %B: ptr<f16>, %O: ptr<f32>, %n: i32) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c16 = const {value = 16} : i32
  %c64 = const {value = 64} : i32
  %a = tile_load %A, %c0, %c0, %c64 : tile<32x64xf16>
  %b = tile_load %B, %c0, %c0, %c16 : tile<64x16xf16>
  %z = const {value = 0.0} : f32
  %acc = broadcast %z : tile<32x16xf32>
  %ar = arange %c0 {size = 16} : tile<16xi32>
  %ninf = const {value = -inf} : f32
  %r = for %i = %c0 to %n step %c16 iter_args(%x = %acc) -> (tile<32x16xf32>) {
    %s = dot %a, %b, %x : tile<32x16xf32>
    %cols = add %i, %ar : tile<16xi32>
    %row = reshape %cols : tile<1x16xi32>
    %keep = lt %row, %n : tile<1x16xbool>
    %kb = broadcast %keep : tile<32x16xbool>
    %m = select %kb, %s, %ninf : tile<32x16xf32>
    yield %m
  }
  tile_store %O, %c0, %c0, %c16, %r
}
)";

TEST(MaskLayout, AColumnMaskThroughAReshapeIsMadeWhereTheScoresAre) {
  for (const GpuTarget* t : {&nvidia_gpu_target(), &apple_gpu_target()}) {
    LowerOptions o;
    o.device = "test";
    o.warpgroup = false;
    std::string text = gpu::print(lower_to_gpu(parse(kMaskedScores), *t, o));
    EXPECT_EQ(count(text, "scratch"), 0) << "no conversion array\n" << text;
    EXPECT_EQ(count(text, " barrier"), 2) << "the dot's two only\n" << text;
  }
}

}  // namespace
}  // namespace metile

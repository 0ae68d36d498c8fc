// convert_layout: lowering states a layout change where two uses of a tile disagree, and the
// lower-convert-layout pass expands it through threadgroup memory (text in, text out).
#include <gtest/gtest.h>

#include "codegen/metal/msl.h"
#include "ir/gpu_parse.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// 64 elements, two per thread: consecutive pairs (#2) -> strided by 32 (#3).
const char* const kPairsToStrided = R"(gpu_kernel @k(%x: ptr<f32>, %o: ptr<f32>) threads=32 simd=32 {
  #2 = tile<64> thr=32:2 reg=2:1
  #3 = tile<64> thr=32:1 reg=2:32
  %tid: i32 thread = builtin thread_index.x
  %s: ptr<f32, threadgroup> = alloc shape="64" stages=1 layout="linear"
  %i: i32 x2 #2 = coord #2 %tid
  %xs: ptr<f32> x2 #2 = ptr_offset %x, %i
  %v: f32 x2 #2 = load %xs
  %w: f32 x2 #3 = convert_layout %v, %s, %tid
  %j: i32 x2 #3 = coord #3 %tid
  %os: ptr<f32> x2 #3 = ptr_offset %o, %j
  store %os, %w
}
)";

TEST(ConvertLayout, ExpandsToAStoreBarrierLoadBarrierRoundTrip) {
  EXPECT_EQ(run_gpu_passes_on_text(kPairsToStrided, {"lower-convert-layout"}, apple_gpu_target()),
            R"(gpu_kernel @k(%x: ptr<f32>, %o: ptr<f32>) threads=32 simd=32 {
  #2 = tile<64> thr=32:2 reg=2:1
  #3 = tile<64> thr=32:1 reg=2:32
  %tid: i32 thread = builtin thread_index.x
  %s: ptr<f32, threadgroup> = alloc shape="64" stages=1 layout="linear"
  %i: i32 x2 #2 = coord #2 %tid
  %xs: ptr<f32> x2 #2 = ptr_offset %x, %i
  %v: f32 x2 #2 = load %xs
  %idx: i32 x2 #2 = coord #2 %tid
  %t: ptr<f32, threadgroup> x2 #2 = ptr_offset %s, %idx
  store %t, %v
  barrier
  %idx1: i32 x2 #3 = coord #3 %tid
  %t1: ptr<f32, threadgroup> x2 #3 = ptr_offset %s, %idx1
  %w: f32 x2 #3 = load %t1
  barrier
  %j: i32 x2 #3 = coord #3 %tid
  %os: ptr<f32> x2 #3 = ptr_offset %o, %j
  store %os, %w
}
)");
}

TEST(ConvertLayout, PaddingNeitherStoresNorLoads) {
  // 48 elements over 32 threads x 2 registers: the layouts' last 16 pairs are padding.
  const char* padded = R"(gpu_kernel @k(%x: ptr<i32>, %o: ptr<i32>) threads=32 simd=32 {
  #2 = tile<48> thr=32:2 reg=2:1 padded
  #3 = tile<48> thr=32:1 reg=2:32 padded
  %tid: i32 thread = builtin thread_index.x
  %s: ptr<i32, threadgroup> = alloc shape="48" stages=1 layout="linear"
  %i: i32 x2 #2 = coord #2 %tid
  %w: i32 x2 #3 = convert_layout %i, %s, %tid
  %j: i32 x2 #3 = coord #3 %tid
  %os: ptr<i32> x2 #3 = ptr_offset %o, %j
  %ok: bool x2 #3 = valid #3 %tid
  store %os, %w, %ok
}
)";
  EXPECT_EQ(run_gpu_passes_on_text(padded, {"lower-convert-layout"}, apple_gpu_target()),
            R"(gpu_kernel @k(%x: ptr<i32>, %o: ptr<i32>) threads=32 simd=32 {
  #2 = tile<48> thr=32:2 reg=2:1 padded
  #3 = tile<48> thr=32:1 reg=2:32 padded
  %tid: i32 thread = builtin thread_index.x
  %s: ptr<i32, threadgroup> = alloc shape="48" stages=1 layout="linear"
  %i: i32 x2 #2 = coord #2 %tid
  %idx: i32 x2 #2 = coord #2 %tid
  %in_tile: bool x2 #2 = valid #2 %tid
  %t: ptr<i32, threadgroup> x2 #2 = ptr_offset %s, %idx
  store %t, %i, %in_tile
  barrier
  %idx1: i32 x2 #3 = coord #3 %tid
  %t1: ptr<i32, threadgroup> x2 #3 = ptr_offset %s, %idx1
  %in_tile1: bool x2 #3 = valid #3 %tid
  %c: i32 = const value=0
  %w: i32 x2 #3 = load %t1, %in_tile1, %c
  barrier
  %j: i32 x2 #3 = coord #3 %tid
  %os: ptr<i32> x2 #3 = ptr_offset %o, %j
  %ok: bool x2 #3 = valid #3 %tid
  store %os, %w, %ok
}
)");
}

TEST(ConvertLayout, TheVerifierChecksItsOperands) {
  std::string text = kPairsToStrided;
  std::string wrong = text.substr(0, text.find("  %w:")) + "  %w: i32 x2 #3 = convert_layout %v, %s, %tid\n}\n";
  try {
    gpu::verify(gpu::parse(wrong));
    ADD_FAILURE() << "an i32 result of an f32 tile verified";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "convert_layout")) << e.what();
    EXPECT_TRUE(has(e.what(), "result must hold the operand's elements and dtype")) << e.what();
  }
}

TEST(ConvertLayout, EmittersRefuseAnUnexpandedConversion) {
  try {
    emit_msl(gpu::parse(kPairsToStrided));
    ADD_FAILURE() << "convert_layout emitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INTERNAL);
    EXPECT_TRUE(has(e.what(), "run the lower-convert-layout pass first")) << e.what();
  }
}

// A dot's accumulator (fragment layout) plus a tile loaded in the coalesced layout: the two
// uses disagree, so lowering states the conversion and the pipeline expands it.
const char* const kResidual = R"(kernel @residual(%A: ptr<f32>, %B: ptr<f32>, %R: ptr<f32>, %C: ptr<f32>) {
  %0 = const {value = 0} : i32
  %1 = const {value = 32} : i32
  %2 = const {value = 0.0} : f32
  %3 = broadcast %2 : tile<32x32xf32>
  %4 = tile_load %A, %0, %0, %1 : tile<32x32xf32>
  %5 = tile_load %B, %0, %0, %1 : tile<32x32xf32>
  %6 = dot %4, %5, %3 : tile<32x32xf32>
  %7 = tile_load %R, %0, %0, %1 : tile<32x32xf32>
  %8 = add %6, %7 : tile<32x32xf32>
  tile_store %C, %0, %0, %1, %8
}
)";

TEST(ConvertLayout, LoweringStatesTheConversionAndThePipelineExpandsIt) {
  Program p = parse(kResidual);
  std::string lowered = gpu::print(lower_to_gpu(p, apple_gpu_target(), {0, "metal-sim"}));
  EXPECT_TRUE(has(lowered, "%tile1: f32 x8 #2 = convert_layout %tile, %scratch_f32, %tid")) << lowered;
  for (int opt : {0, 2}) {
    CompileOptions o;
    o.opt_level = opt;
    GpuPipelineResult r = run_gpu_pipeline(p, apple_gpu_target(), o, "metal-sim");
    EXPECT_TRUE(has(r.gpu_ir, "convert_layout")) << r.gpu_ir;
    EXPECT_FALSE(has(r.gpu_ir_opt, "convert_layout")) << r.gpu_ir_opt;
    EXPECT_FALSE(has(gpu::print(r.function), "convert_layout"));
  }
}

}  // namespace
}  // namespace metile

// Layout assignment on its own (src/passes/assign_layouts.cpp): Tile IR text in, the layouts
// text out (the METILE_DEBUG "layouts" stage), and lowering in exactly the layouts it chose.
#include <gtest/gtest.h>

#include "driver/stage_text.h"
#include "kernels/kernels.h"
#include "passes/assign_layouts.h"
#include "passes/lower.h"
#include "passes/pipeline.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// out = x + 1 over one 1024-element block, masked by N.
const char* const kAddOne = R"(kernel @add_one(%X: ptr<f32>, %Out: ptr<f32>, %N: i32) {
  %0 = program_id {axis = 0} : i32
  %1 = const {value = 1024} : i32
  %2 = mul %0, %1 : i32
  %3 = arange %2 {size = 1024} : tile<1024xi32>
  %4 = lt %3, %N : tile<1024xbool>
  %5 = ptr_offset %X, %3 : tile<1024xptr<f32>>
  %6 = load %5, %4 : tile<1024xf32>
  %7 = const {value = 1.0} : f32
  %8 = add %6, %7 : tile<1024xf32>
  %9 = ptr_offset %Out, %3 : tile<1024xptr<f32>>
  store %9, %8, %4
}
)";

TEST(AssignLayouts, ElementwiseTilesTakeTheCanonicalCoalescedLayout) {
  // 1024 elements over 256 threads: 4 consecutive elements per thread (one 16-byte access),
  // consecutive threads on consecutive chunks; scalars stay uniform.
  EXPECT_EQ(assign_layouts_on_text(kAddOne, apple_gpu_target()), R"(// threads 256, simd width 32
kernel @add_one(%X: ptr<f32>, %Out: ptr<f32>, %N: i32) {
  %0 = program_id {axis = 0} : i32
  %1 = const {value = 1024} : i32
  %2 = mul %0, %1 : i32
  %3 = arange %2 {size = 1024} : tile<1024xi32> // tile<1024> thr=256:4 reg=4:1
  %4 = lt %3, %N : tile<1024xbool> // tile<1024> thr=256:4 reg=4:1
  %5 = ptr_offset %X, %3 : tile<1024xptr<f32>> // tile<1024> thr=256:4 reg=4:1
  %6 = load %5, %4 : tile<1024xf32> // tile<1024> thr=256:4 reg=4:1
  %7 = const {value = 1.0} : f32
  %8 = add %6, %7 : tile<1024xf32> // tile<1024> thr=256:4 reg=4:1
  %9 = ptr_offset %Out, %3 : tile<1024xptr<f32>> // tile<1024> thr=256:4 reg=4:1
  store %9, %8, %4
}
)");
  // num_threads asks for fewer threads: each holds two chunks of 4.
  LowerOptions o;
  o.num_threads = 128;
  EXPECT_TRUE(has(assign_layouts_on_text(kAddOne, apple_gpu_target(), o),
                  "%6 = load %5, %4 : tile<1024xf32> // tile<1024> thr=128:4 reg=(4,2):(1,512)"));
}

TEST(AssignLayouts, SixteenBitTilesTakeChunksOfSixteenBytesWhereTheTargetAsks) {
  // The same kernel on f16 data: on nvidia (chunk_bytes 16) a thread's chunk is 8 elements,
  // one 16-byte access, and the thread count follows (1024 / 8 = 128); the i32 index and bool
  // mask tiles share that layout. On apple (MSL vectors stop at 4) chunks stay at 4.
  std::string f16 = kAddOne;
  for (size_t at; (at = f16.find("f32")) != std::string::npos;) f16.replace(at, 3, "f16");
  std::string nv = assign_layouts_on_text(f16, nvidia_gpu_target());
  EXPECT_TRUE(has(nv, "// threads 128,")) << nv;
  EXPECT_TRUE(has(nv, "%6 = load %5, %4 : tile<1024xf16> // tile<1024> thr=128:8 reg=8:1")) << nv;
  EXPECT_TRUE(has(nv, "%4 = lt %3, %N : tile<1024xbool> // tile<1024> thr=128:8 reg=8:1")) << nv;
  EXPECT_TRUE(has(assign_layouts_on_text(f16, apple_gpu_target()),
                  "%6 = load %5, %4 : tile<1024xf16> // tile<1024> thr=256:4 reg=4:1"));
  // 256 threads asked: 1024 elements are chunks of 4 for each, not 8, so chunks stay 4.
  LowerOptions o;
  o.num_threads = 256;
  EXPECT_TRUE(has(assign_layouts_on_text(f16, nvidia_gpu_target(), o),
                  "%6 = load %5, %4 : tile<1024xf16> // tile<1024> thr=256:4 reg=4:1"));
  // wide_chunks off (METILE_GPU_OFF=wide_chunks): chunks of 4, so 256 threads.
  LowerOptions narrow;
  narrow.wide_chunks = false;
  EXPECT_TRUE(has(assign_layouts_on_text(f16, nvidia_gpu_target(), narrow),
                  "%6 = load %5, %4 : tile<1024xf16> // tile<1024> thr=256:4 reg=4:1"));
  // f32 data keeps chunks of 4 on nvidia too.
  EXPECT_TRUE(has(assign_layouts_on_text(kAddOne, nvidia_gpu_target()),
                  "%6 = load %5, %4 : tile<1024xf32> // tile<1024> thr=256:4 reg=4:1"));
}

// A 32x32 K-loop GEMM with a bias-row epilogue (kernels::gemm with bias).
const char* const kGemmBias = R"(kernel @matmul_bias(%A: ptr<f32>, %B: ptr<f32>, %C: ptr<f32>, %Bias: ptr<f32>, %M: i32, %N: i32, %K: i32) constexprs(BLOCK_M = "32", BLOCK_N = "32", BLOCK_K = "32") {
  %0 = program_id {axis = 0} : i32
  %1 = program_id {axis = 1} : i32
  %2 = const {value = 32} : i32
  %3 = mul %0, %2 : i32
  %4 = const {value = 32} : i32
  %5 = mul %1, %4 : i32
  %6 = const {value = 0.0} : f32
  %7 = broadcast %6 : tile<32x32xf32>
  %8 = const {value = 32} : i32
  %9 = const {value = 0} : i32
  %10 = for %11 = %9 to %K step %8 iter_args(%12 = %7) -> (tile<32x32xf32>) {
    %13 = tile_load %A, %3, %11, %K : tile<32x32xf32>
    %14 = tile_load %B, %11, %5, %N : tile<32x32xf32>
    %15 = dot %13, %14, %12 : tile<32x32xf32>
    yield %15
  }
  %16 = const {value = 0} : i32
  %17 = arange %16 {size = 32} : tile<32xi32>
  %18 = add %5, %17 : tile<32xi32>
  %19 = lt %18, %N : tile<32xbool>
  %20 = ptr_offset %Bias, %18 : tile<32xptr<f32>>
  %21 = const {value = 0.0} : f32
  %22 = load %20, %19, %21 : tile<32xf32>
  %23 = broadcast %22 : tile<32x32xf32>
  %24 = add %10, %23 : tile<32x32xf32>
  tile_store %C, %3, %5, %N, %24
}
)";

TEST(AssignLayouts, DotAccumulatorKeepsItsFragmentLayoutThroughTheLoopAndTheEpilogue) {
  // mma.sync m16n8k8 over 2x2 warps: lane bits 0-1 pick column pairs (stride 2), bits 2-4 rows
  // (stride 32 = one row), then the warp's 16-row and 16-column offsets; registers: the pair,
  // the row + 8 and the second atom of the warp's 16 columns. The loop-carried accumulator, the
  // broadcast bias row and the epilogue's add share it; the bias is loaded in the columns'
  // slice of it (#3, no exchange), the operands keep the coalesced layout.
  EXPECT_EQ(assign_layouts_on_text(kGemmBias, nvidia_gpu_target()), R"(// threads 128, simd width 32
kernel @matmul_bias(%A: ptr<f32>, %B: ptr<f32>, %C: ptr<f32>, %Bias: ptr<f32>, %M: i32, %N: i32, %K: i32) constexprs(BLOCK_M = "32", BLOCK_N = "32", BLOCK_K = "32") {
  %0 = program_id {axis = 0} : i32
  %1 = program_id {axis = 1} : i32
  %2 = const {value = 32} : i32
  %3 = mul %0, %2 : i32
  %4 = const {value = 32} : i32
  %5 = mul %1, %4 : i32
  %6 = const {value = 0.0} : f32
  %7 = broadcast %6 : tile<32x32xf32> // tile<1024> thr=128:4 reg=(4,2):(1,512)
  %8 = const {value = 32} : i32
  %9 = const {value = 0} : i32
  %10 = for %11 = %9 to %K step %8 iter_args(%12 = %7) -> (tile<32x32xf32>) { // #2 tile<1024> thr=(4,8,2,2):(2,32,512,16) reg=(2,2,2):(1,256,8)
    %13 = tile_load %A, %3, %11, %K : tile<32x32xf32> // tile<1024> thr=128:4 reg=(4,2):(1,512)
    %14 = tile_load %B, %11, %5, %N : tile<32x32xf32> // tile<1024> thr=128:4 reg=(4,2):(1,512)
    %15 = dot %13, %14, %12 : tile<32x32xf32> // #2 tile<1024> thr=(4,8,2,2):(2,32,512,16) reg=(2,2,2):(1,256,8) (mma.sync 16x8x8 f32, warps 2x2)
    yield %15
  }
  %16 = const {value = 0} : i32
  %17 = arange %16 {size = 32} : tile<32xi32> // #3 tile<32> thr=(4,16,2):(2,0,16) reg=(2,2):(1,8)
  %18 = add %5, %17 : tile<32xi32> // #3 tile<32> thr=(4,16,2):(2,0,16) reg=(2,2):(1,8)
  %19 = lt %18, %N : tile<32xbool> // #3 tile<32> thr=(4,16,2):(2,0,16) reg=(2,2):(1,8)
  %20 = ptr_offset %Bias, %18 : tile<32xptr<f32>> // #3 tile<32> thr=(4,16,2):(2,0,16) reg=(2,2):(1,8)
  %21 = const {value = 0.0} : f32
  %22 = load %20, %19, %21 : tile<32xf32> // #3 tile<32> thr=(4,16,2):(2,0,16) reg=(2,2):(1,8)
  %23 = broadcast %22 : tile<32x32xf32> // #2 tile<1024> thr=(4,8,2,2):(2,32,512,16) reg=(2,2,2):(1,256,8)
  %24 = add %10, %23 : tile<32x32xf32> // #2 tile<1024> thr=(4,8,2,2):(2,32,512,16) reg=(2,2,2):(1,256,8)
  tile_store %C, %3, %5, %N, %24
}
)");
  // The same tile on Apple: 8x8 simdgroup_matrix atoms.
  EXPECT_TRUE(has(assign_layouts_on_text(kGemmBias, apple_gpu_target()),
                  "%15 = dot %13, %14, %12 : tile<32x32xf32> // #2 tile<1024> "
                  "thr=(2,4,2,2,2,2):(2,32,4,128,512,16) reg=(2,2,2):(1,256,8) "
                  "(simdgroup_matrix 8x8x8 f32, warps 2x2)"));
  // "ieee" has no atom on CUDA: exact FMAs in the canonical layout.
  LowerOptions exact;
  exact.dot_default = DotPrecision::ieee;
  std::string fma = assign_layouts_on_text(kGemmBias, nvidia_gpu_target(), exact);
  EXPECT_TRUE(has(fma, "%15 = dot %13, %14, %12 : tile<32x32xf32> // tile<1024> thr=256:4 reg=4:1 (fma, f32)"))
      << fma;
}

TEST(AssignLayouts, TheLayoutsTextParsesBackToTheSameProgram) {
  for (const char* text : {kAddOne, kGemmBias}) {
    Program p = parse(text);
    std::string annotated = print_layouts(p, assign_layouts(p, nvidia_gpu_target(), {}));
    EXPECT_EQ(print(parse(annotated), false), print(p, false));
  }
}

TEST(AssignLayouts, LoweringRunsInTheAssignedLayouts) {
  Program p = parse(kGemmBias);
  LayoutAssignment a = assign_layouts(p, nvidia_gpu_target(), {0, "cuda"});
  gpu::Function f = lower_to_gpu(p, a, nvidia_gpu_target(), {0, "cuda"});
  EXPECT_EQ(f.threads, a.function.threads);
  // The assignment's layout table is the start of the function's, so its ids mean the same.
  ASSERT_GE(f.layouts.size(), a.function.layouts.size());
  for (size_t i = 0; i < a.function.layouts.size(); ++i) EXPECT_EQ(f.layouts[i], a.function.layouts[i]);
  // The K loop carries the accumulator in the fragment layout (#2): no conversion per iteration.
  std::string text = gpu::print(f);
  EXPECT_TRUE(has(text, "iter(%acc: f32 x8 #2 = ")) << text;
  // The pipeline prints the same choices as its "layouts" stage and lowers in them.
  GpuPipelineResult r = run_gpu_pipeline(p, nvidia_gpu_target(), CompileOptions{}, "cuda");
  EXPECT_EQ(r.layouts, print_layouts(p, a));
  EXPECT_EQ(r.gpu_ir, text);
  // METILE_DEBUG=layouts shows them after the Tile IR passes (which add bounds arguments).
  std::string dumped = stage_text(Stage::layouts, p, CompileOptions{});
  EXPECT_TRUE(dumped.starts_with("// threads 128, simd width 32\nkernel @matmul_bias(")) << dumped;
  EXPECT_TRUE(has(dumped, "(simdgroup_matrix 8x8x8 f32, warps 2x2)")) << dumped;
}

// out[r, c] = X[r, c] * S[r]: the row scale is loaded only to be broadcast over the block.
const char* const kRowScale = R"(kernel @row_scale(%X: ptr<f32>, %S: ptr<f32>, %Out: ptr<f32>) {
  %0 = const {value = 0} : i32
  %1 = arange %0 {size = 32} : tile<32xi32>
  %2 = arange %0 {size = 64} : tile<64xi32>
  %3 = ptr_offset %S, %1 : tile<32xptr<f32>>
  %4 = load %3 : tile<32xf32>
  %5 = reshape %4 : tile<32x1xf32>
  %6 = broadcast %5 : tile<32x64xf32>
  %7 = const {value = 64} : i32
  %8 = mul %1, %7 : tile<32xi32>
  %9 = reshape %8 : tile<32x1xi32>
  %10 = broadcast %9 : tile<32x64xi32>
  %11 = reshape %2 : tile<1x64xi32>
  %12 = broadcast %11 : tile<32x64xi32>
  %13 = add %10, %12 : tile<32x64xi32>
  %14 = ptr_offset %X, %13 : tile<32x64xptr<f32>>
  %15 = load %14 : tile<32x64xf32>
  %16 = mul %15, %6 : tile<32x64xf32>
  %17 = ptr_offset %Out, %13 : tile<32x64xptr<f32>>
  store %17, %16
}
)";

TEST(AssignLayouts, ATileLoadedOnlyToBeBroadcastIsLoadedWhereItIsUsed) {
  // The block is canonical (2048 elements over 256 threads: 16 threads a row, each with a chunk
  // of 4, twice); the scale takes the layout a row sum of the block would leave: each thread
  // holds its own two rows' scales (repeated over the 16 threads of a row), so the
  // broadcast is a renaming and nothing goes through threadgroup memory.
  Program p = parse(kRowScale);
  std::string text = assign_layouts_on_text(kRowScale, nvidia_gpu_target());
  EXPECT_TRUE(has(text, "%15 = load %14 : tile<32x64xf32> // tile<2048> thr=256:4 reg=(4,2):(1,1024)")) << text;
  EXPECT_TRUE(has(text, "%4 = load %3 : tile<32xf32> // #3 tile<32> thr=(16,16):(0,1) reg=2:16")) << text;
  GpuPipelineResult r = run_gpu_pipeline(p, nvidia_gpu_target(), CompileOptions{}, "cuda");
  EXPECT_FALSE(has(r.gpu_ir, "convert_layout")) << r.gpu_ir;
  EXPECT_FALSE(has(r.gpu_ir_opt, "barrier")) << r.gpu_ir_opt;
  // METILE_GPU_OFF=broadcast_loads: loaded canonically, one thread a scale, then exchanged.
  CompileOptions off;
  off.disabled_passes = {"broadcast_loads"};
  EXPECT_TRUE(has(run_gpu_pipeline(p, nvidia_gpu_target(), off, "cuda").gpu_ir_opt, "barrier"));
  // A scale that is also stored as it is (a use other than broadcasts) keeps the canonical
  // layout, and its broadcast goes through threadgroup memory as before.
  std::string stored = kRowScale;
  stored.insert(stored.rfind('}'), "  store %3, %4\n");
  GpuPipelineResult s = run_gpu_pipeline(parse(stored), nvidia_gpu_target(), CompileOptions{}, "cuda");
  EXPECT_TRUE(has(s.gpu_ir_opt, "barrier")) << s.gpu_ir_opt;
}

TEST(AssignLayouts, ImpossibleThreadCountsAreRefusedWithTheirReason) {
  Program p = parse(kAddOne);
  LowerOptions o;
  o.device = "cuda";
  o.num_threads = 48;
  try {
    assign_layouts(p, nvidia_gpu_target(), o);
    ADD_FAILURE() << "48 threads accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(e.what(), "add_one: num_threads 48 is not a multiple of the simd width 32 on cuda"))
        << e.what();
  }
  o.num_threads = 2048;
  try {
    assign_layouts(p, nvidia_gpu_target(), o);
    ADD_FAILURE() << "2048 threads accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED);
    EXPECT_TRUE(has(e.what(), "2048 threads per threadgroup exceed the limit of 1024")) << e.what();
  }
}

}  // namespace
}  // namespace metile

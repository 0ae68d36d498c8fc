// A 16-bit dot whose B is computed in registers each K step (dot_scaled's decoded weights, any
// dequantized weight tile) on Hopper's warpgroup atom (dot_choices.cpp, DotChoice::b_stored):
// B = trans(t) is stored as t is laid out, K-major, into two slots of the swizzled B tile with
// 16-byte stores, while A streams through the pipeline's ring (lower_pipeline.cpp). GPU IR and
// CUDA text and NVRTC compiles for sm_90a (no GPU needed); on an H100 test_low_precision.py
// checks mxfp4_gemm against float64 at cuda's default tiles.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "target/gpu_target.h"
#include "target/options.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// Y = X . dequant(W)^T over 128 x 128 tiles, 64 K values a step, 256 threads: W's u8 codes are
// dequantized in registers (code * 0.5, rounded to X's dtype t), the dot's B their transpose.
std::string dequant_gemm(const std::string& t) {
  return R"(kernel @dequant_gemm(%X: ptr<)" + t + R"(>, %W: ptr<u8>, %Y: ptr<)" + t +
         R"(>, %M: i32, %N: i32, %K: i32) num_threads(256) {
  %c0 = const {value = 0} : i32
  %c64 = const {value = 64} : i32
  %c128 = const {value = 128} : i32
  %pm = program_id {axis = 0} : i32
  %pn = program_id {axis = 1} : i32
  %m0 = mul %pm, %c128 : i32
  %n0 = mul %pn, %c128 : i32
  %z = const {value = 0.0} : f32
  %half = const {value = 0.5} : f32
  %acc0 = broadcast %z : tile<128x128xf32>
  %acc = for %k = %c0 to %K step %c64 iter_args(%a = %acc0) -> (tile<128x128xf32>) {
    %x = tile_load %X, %m0, %k, %K, %M, %K : tile<128x64x)" + t + R"(>
    %w = tile_load %W, %n0, %k, %K, %N, %K : tile<128x64xu8>
    %wf = cast %w : tile<128x64xf32>
    %ws = mul %wf, %half : tile<128x64xf32>
    %wh = cast %ws : tile<128x64x)" + t + R"(>
    %wt = trans %wh : tile<64x128x)" + t + R"(>
    %an = dot %x, %wt, %a : tile<128x128xf32>
    yield %an
  }
  %o = cast %acc : tile<128x128x)" + t + R"(>
  tile_store %Y, %m0, %n0, %N, %o, %M, %N
}
)";
}

// The kernel through the GPU pipeline for an H100 (sm_90), with the pieces named switched off.
gpu::Function compiled(const std::string& t, std::vector<std::string> off = {}) {
  CompileOptions o;
  o.disabled_passes = std::move(off);
  return run_gpu_pipeline(parse(dequant_gemm(t)), nvidia_gpu_target("sm_90"), o, "cuda").function;
}

std::string loop_body(const std::string& ir) {
  const size_t loop = ir.find(" for %");
  return loop == std::string::npos ? "" : ir.substr(loop, ir.find("\n  }\n", loop) - loop);
}

TEST(GpuStoredB, ComputedBTakesTheWarpgroupAtomKMajor) {
  for (const std::string t : {"f16", "bf16"}) {
    const gpu::Function f = compiled(t, {"tma"});  // the ring through async copies
    const std::string ir = gpu::print(f), body = loop_body(ir);
    EXPECT_EQ(count(ir, "atom=\"wgmma\""), 1) << ir;
    EXPECT_EQ(count(ir, "b_kmajor=1"), 1) << "B = trans(t) read as t is stored, n rows of k\n" << ir;
    EXPECT_EQ(count(ir, "alloc shape=\"128x64\" stages=3 layout=\"swizzle128\""), 1) << "A's ring\n" << ir;
    EXPECT_EQ(count(ir, "alloc shape=\"128x64\" stages=2 layout=\"swizzle128\""), 1) << "B's two slots\n" << ir;
    // One barrier a step: B stored into its slot, the ring waited for, this warpgroup's earlier
    // MMAs waited for and the stores fenced, the barrier, the copies of a later step, the mma.
    EXPECT_EQ(count(body, " barrier"), 1) << body;
    EXPECT_EQ(count(body, "vstore "), 1) << body;
    const size_t st = body.find("vstore "), wait = body.find("async_wait pending=1"),
                 sync = body.find("warpgroup_sync"), bar = body.find(" barrier"), copy = body.find(" async_copy "),
                 mma = body.find(" = mma ");
    // 16-byte stores, proven aligned (vectorize-access): no run-time test, no element-wise tail.
    EXPECT_LT(body.find("width=8 aligned=1", st), body.find("\n", st)) << body;
    EXPECT_TRUE(st < wait && wait < sync && sync < bar && bar < copy && copy < mma) << body;
    EXPECT_EQ(count(body, " wait=0"), 1) << "the mma stays in flight until the next step's barrier\n" << body;
    const std::string cuda = emit_cuda(f).source;
    EXPECT_EQ(count(cuda, "wgmma.mma_async.sync.aligned.m64n128k16.f32." + t + "." + t), 4) << cuda;
    EXPECT_EQ(count(cuda, ", p, 1, 1, 0, 0;"), 4) << "B K-major: transpose flag 0\n" << cuda;
    EXPECT_EQ(count(cuda, "mt_vec<ushort, 8>*)"), 1) << cuda;
    EXPECT_EQ(count(cuda, "b_smem["), 0) << "no element-wise tail for B\n" << cuda;
  }
}

// With TMA (sm_90's default for a parameter's tile), A's stages complete on mbarriers, waited
// for after the step's one barrier.
TEST(GpuStoredB, ARingIsFilledByTma) {
  const std::string ir = gpu::print(compiled("bf16")), body = loop_body(ir);
  EXPECT_EQ(count(ir, " async_copy "), 0) << ir;
  EXPECT_EQ(count(body, " tma_load "), 1) << body;
  EXPECT_EQ(count(body, " barrier"), 1) << body;
  EXPECT_TRUE(body.find(" barrier") < body.find("mbar_wait") && body.find("mbar_wait") < body.find(" tma_load "))
      << body;
}

TEST(GpuStoredB, SwitchedOffByName) {
  // warpgroup_stored_b off: mma.sync with B staged element by element, two barriers a step.
  const std::string ir = gpu::print(compiled("bf16", {"warpgroup_stored_b"})), body = loop_body(ir);
  EXPECT_EQ(count(ir, "atom=\"wgmma\""), 0) << ir;
  EXPECT_EQ(count(ir, "atom=\"mma.sync\""), 1) << ir;
  EXPECT_EQ(count(body, " barrier"), 2) << body;
  // The pipeline off: B stored once a step into one slot, at the dot (lower_dot.cpp).
  const std::string one = gpu::print(compiled("bf16", {"pipeline"}));
  EXPECT_EQ(count(one, "atom=\"wgmma\""), 1) << one;
  EXPECT_EQ(count(one, "stages=2"), 0) << one;
}

TEST(GpuStoredB, CompilesThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  for (const std::string t : {"f16", "bf16"})
    for (const std::vector<std::string>& off : {std::vector<std::string>{}, std::vector<std::string>{"tma"}}) {
      const CudaKernelSource s = emit_cuda(compiled(t, off));
      std::string log;
      EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log)) << t << "\n" << log;
    }
}

}  // namespace
}  // namespace metile

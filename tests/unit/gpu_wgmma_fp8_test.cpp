// FP8 dots on the warpgroup atom (dot_choices.cpp): which dots take it (A an M x K
// tile_load, B the trans of an N x K tile_load), the K-major staging of both operands in their
// own formats, the two-level accumulation and its switch (fp8_promote), the exact f16 staging
// every other FP8 dot keeps on cuda, and NVRTC compiles for sm_90a (no GPU needed). On an H100
// bindings/python/tests/test_fp8_dot.py runs them against interp and float64.
#include <gtest/gtest.h>

#include "codegen/cuda/cuda.h"
#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "runtime/cuda/cuda_api.h"
#include "target/swizzled_tile.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

LowerOptions options(int threads = 0, bool tma = false, bool promote = true) {
  LowerOptions o;
  o.device = "cuda";
  o.num_threads = threads;
  o.tma = tma;
  o.fp8_promote = promote;
  return o;
}

// C = A @ B^T, A M x K of `a`, B N x K of `b` (dot(a, trans(tile_load(B)))).
kernels::GemmConfig nt(DType a, DType b, int bm, int bn, int bk, bool bounds) {
  kernels::GemmConfig g = kernels::gemm_config(a, bm, bn, bk, bounds);
  g.b_dtype = b;
  g.trans_b = true;
  return g;
}

kernels::GemmConfig e4m3_nt(int bm, int bn, int bk, bool bounds = false) {
  return nt(DType::f8e4m3, DType::f8e4m3, bm, bn, bk, bounds);
}

std::string gpu_ir(const kernels::GemmConfig& g, const LowerOptions& o, const std::string& arch = "sm_90") {
  return gpu::print(lower_to_gpu(kernels::gemm(g), nvidia_gpu_target(arch), o));
}

CudaKernelSource emitted(const kernels::GemmConfig& g, const LowerOptions& o) {
  return emit_cuda(lower_to_gpu(kernels::gemm(g), nvidia_gpu_target("sm_90"), o));
}

// One-byte B is staged K-major: an N x K tile as A is (64-byte rows of 64 elements here).
TEST(WgmmaFp8Layout, OneByteBIsStagedKMajor) {
  EXPECT_TRUE(warpgroup_b_kmajor(1));
  const SwizzledTile t = swizzled_b_tile(64, 128, 1);
  EXPECT_EQ(t.rows, 128);
  EXPECT_EQ(t.cols, 64);
  EXPECT_EQ(t.swizzle, 64);
  EXPECT_EQ(t.width(), 64);
  EXPECT_EQ(t.chunk(), 16);
}

TEST(GpuWgmmaFp8Lower, TransposedBTakesTheFp8WarpgroupAtom) {
  const std::string text = gpu_ir(e4m3_nt(128, 128, 128, true), options(256));
  EXPECT_EQ(count(text, "atom=\"wgmma\""), 1) << text;
  EXPECT_EQ(count(text, "atom_k=32"), 1) << text;
  EXPECT_EQ(count(text, " promote=128"), 1) << text;
  EXPECT_EQ(count(text, "warps_m=8 warps_n=1"), 1) << "two warpgroups, 64 rows each\n" << text;
  EXPECT_EQ(count(text, " async_copy "), 6) << "A and B as loaded, three stages\n" << text;
  EXPECT_EQ(count(text, " cast "), 0) << "no f16 staging\n" << text;
  EXPECT_EQ(count(text, "ptr<f8e4m3, threadgroup> = alloc"), 2) << text;
}

TEST(GpuWgmmaFp8Lower, MixedFormatsStageEachOperandInItsOwn) {
  const std::string text = gpu_ir(nt(DType::f8e5m2, DType::f8e4m3, 64, 64, 64, false), options(128));
  EXPECT_EQ(count(text, "atom=\"wgmma\""), 1) << text;
  EXPECT_EQ(count(text, "ptr<f8e5m2, threadgroup> = alloc"), 1) << text;
  EXPECT_EQ(count(text, "ptr<f8e4m3, threadgroup> = alloc"), 1) << text;
  const std::string s = emitted(nt(DType::f8e5m2, DType::f8e4m3, 64, 64, 64, false), options(128)).source;
  EXPECT_EQ(count(s, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e4m3"), 2) << s;
}

// The promotion interval: K itself up to 128, else the largest multiple of 32 up to 128 that
// divides it; fp8_promote off (METILE_GPU_OFF=fp8_promote) drops it.
TEST(GpuWgmmaFp8Lower, PromotionIntervalAndItsSwitch) {
  EXPECT_EQ(count(gpu_ir(e4m3_nt(64, 64, 64), options(128)), " promote=64"), 1);
  EXPECT_EQ(count(gpu_ir(e4m3_nt(64, 64, 256), options(128)), " promote=128"), 1);
  const std::string fast = gpu_ir(e4m3_nt(64, 64, 128), options(128, false, false));
  EXPECT_EQ(count(fast, "atom=\"wgmma\""), 1) << fast;
  EXPECT_EQ(count(fast, "promote"), 0) << fast;
}

TEST(GpuWgmmaFp8Lower, OtherFp8DotsStageExactF16ValuesForMmaSync) {
  auto f16_path = [](const std::string& text) {
    return count(text, "atom=\"mma.sync\"") == 1 && count(text, "wgmma") == 0 &&
           count(text, "ptr<f16, threadgroup> = alloc") == 2 && count(text, " cast ") >= 2;
  };
  kernels::GemmConfig nn = kernels::gemm_config(DType::f8e4m3, 64, 64, 64, true);
  EXPECT_TRUE(f16_path(gpu_ir(nn, options(128)))) << "B N-major (K x N as loaded)\n" << gpu_ir(nn, options(128));
  EXPECT_TRUE(f16_path(gpu_ir(e4m3_nt(64, 64, 64, true), options(128), "sm_80"))) << "pre-Hopper";
  LowerOptions off = options(128);
  off.warpgroup = false;
  EXPECT_TRUE(f16_path(gpu_ir(e4m3_nt(64, 64, 64, true), off))) << "METILE_CUDA_WGMMA=0";
  LowerOptions no_async = options(128);
  no_async.async_copy = false;
  EXPECT_TRUE(f16_path(gpu_ir(e4m3_nt(64, 64, 64, true), no_async))) << "no direct copies";
  EXPECT_TRUE(f16_path(gpu_ir(e4m3_nt(32, 32, 32, true), options()))) << "32 rows: no m64 block";
  EXPECT_TRUE(f16_path(gpu_ir(e4m3_nt(64, 64, 96, true), options(128)))) << "96-byte rows fit no swizzle";
}

TEST(GpuWgmmaFp8Lower, CudaSpellsFp8WgmmaWithTwoLevelAccumulation) {
  const std::string s = emitted(e4m3_nt(128, 128, 256, false), options(256)).source;
  // Two warpgroups of 64 x 128, eight k32 steps, no transpose immediates.
  EXPECT_EQ(count(s, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 8) << s;
  EXPECT_EQ(count(s, ", p, 1, 1;"), 8) << s;
  // Both descriptors K-major (leading offset 1, stride 8 rows of 128 bytes = 64 units, 128-byte
  // swizzle): 1 << 62 | 64 << 32 | 1 << 16.
  EXPECT_EQ(count(s, "0x4000004000010000ull"), 16) << s;
  // Two runs of 128: each starts from zero (scale-d 0), is waited for and added in.
  EXPECT_EQ(count(s, "float mma_p[64];"), 1) << s;
  EXPECT_EQ(count(s, "\"r\"(0));"), 2) << s;
  EXPECT_EQ(count(s, "\"r\"(1));"), 6) << s;
  EXPECT_EQ(count(s, "\"+f\"(mma_p[mma_r])"), 2) << "waited for before each addition\n" << s;
  EXPECT_EQ(count(s, "[mma_r] += mma_p[mma_r];"), 2) << s;
  // The k steps move both starts by 32 bytes inside the 128-byte rows, then a block further.
  EXPECT_EQ(count(s, "mt_wgmma_desc(mma_a + 96,"), 1) << s;
  EXPECT_EQ(count(s, "mt_wgmma_desc(mma_b + 96,"), 1) << s;
  // __launch_bounds__ counts mma_p beside the accumulator: 128 + 64 registers a thread, one
  // block of 256 threads per multiprocessor (no minimum named), where 64 + 64 would ask for 4.
  EXPECT_EQ(count(s, "__launch_bounds__(256)"), 1) << s;
  // Fast accumulation: straight into the accumulator, one group.
  const std::string fast = emitted(e4m3_nt(128, 128, 256, false), options(256, false, false)).source;
  EXPECT_EQ(count(fast, "mma_p"), 0) << fast;
  EXPECT_EQ(count(fast, "__launch_bounds__(256, 2)"), 1) << fast;
  EXPECT_EQ(count(fast, "\"r\"(1));"), 8) << fast;
}

TEST(GpuWgmmaFp8Lower, BothOperandsTakeTma) {
  const std::string text = gpu_ir(e4m3_nt(128, 128, 128, true), options(256, true));
  EXPECT_EQ(count(text, " tma_load "), 6) << text;
  EXPECT_EQ(count(text, " async_copy "), 0) << text;
  EXPECT_EQ(count(text, "box_rows=128 box_cols=128"), 6) << text;
  // The golden lines: three stages of 128 x 128 bytes per operand, first in threadgroup memory,
  // and the op (pipelined: no wait of its own but the promotion's).
  EXPECT_NE(text.find("  %a_smem: ptr<f8e4m3, threadgroup> = alloc shape=\"128x128\" stages=3 layout=\"swizzle128\" offset=0\n"
                      "  %b_smem: ptr<f8e4m3, threadgroup> = alloc shape=\"128x128\" stages=3 layout=\"swizzle128\" offset=49152\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find(" atom=\"wgmma\" atom_m=64 atom_n=8 atom_k=32 m=128 n=128 k=128 lda=128 ldb=128 "
                      "warps_m=8 warps_n=1 tf32=0 wait=0 promote=128\n"),
            std::string::npos) << text;
}

TEST(GpuWgmmaFp8Lower, VariantsCompileThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  struct V {
    DType a, b;
    int bm, bn, bk, threads;
    bool bounds, tma, promote;
  };
  const DType e4 = DType::f8e4m3, e5 = DType::f8e5m2;
  // Every pair; 32-, 64- and 128-byte K rows; two m64 blocks; warpgroups side by side; TMA;
  // fast accumulation; two promotions per op.
  for (const V& v : {V{e4, e4, 64, 64, 32, 128, true, false, true}, V{e5, e5, 64, 64, 64, 128, true, true, true},
                     V{e4, e5, 128, 128, 128, 128, true, true, true}, V{e5, e4, 128, 256, 64, 256, false, true, false},
                     V{e4, e4, 128, 128, 256, 256, true, true, true}, V{e4, e4, 64, 256, 128, 256, false, false, true},
                     // bench/fp8_gemm.py's four-warpgroup tiles
                     V{e4, e4, 256, 128, 128, 512, true, true, true}, V{e4, e4, 128, 256, 128, 512, true, true, true}}) {
    const CudaKernelSource s = emitted(nt(v.a, v.b, v.bm, v.bn, v.bk, v.bounds), options(v.threads, v.tma, v.promote));
    const std::string what = std::string(dtype_name(v.a)) + " x " + dtype_name(v.b) + " " + std::to_string(v.bm) +
                             "x" + std::to_string(v.bn) + "x" + std::to_string(v.bk);
    ASSERT_GT(count(s.source, "k32.f32.e"), 0) << what << "\n" << s.source;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log)) << what << "\n" << log;
  }
  // The f16 staging of the other FP8 dots compiles too (B N-major).
  const CudaKernelSource s = emitted(kernels::gemm_config(DType::f8e5m2, 64, 64, 64, true), options(128));
  std::string log;
  EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log)) << log;
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

// The warpgroup (wgmma, sm_90a) path of dot: which dots take it, the swizzled staging layout it
// shares with the emitter, the GPU IR and CUDA it produces, and NVRTC compiles for sm_90a of
// its variants (no GPU needed). On an H100 the kernel suite's *_wg GEMMs run it against interp.
#include <gtest/gtest.h>

#include <set>

#include "codegen/cuda/cuda.h"
#include "golden.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "runtime/cuda/cuda_api.h"
#include "target/swizzled_tile.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// TMA off: these tests are about the cp.async staging (gpu_tma_lower_test.cpp has TMA's).
LowerOptions options(bool warpgroup = true, int threads = 0) {
  LowerOptions o;
  o.device = "cuda";
  o.warpgroup = warpgroup;
  o.num_threads = threads;
  o.tma = false;
  return o;
}

std::string gpu_ir(const kernels::GemmConfig& g, const LowerOptions& o, const std::string& arch = "sm_90") {
  return gpu::print(lower_to_gpu(kernels::gemm(g), nvidia_gpu_target(arch), o));
}

// Every chunk lands on its own slot, and the slot's 16-byte index within its 128-byte line is
// the chunk index XOR the line's address bits above it: the hardware swizzle on absolute
// addresses, given the block start the lowering guarantees (a multiple of 8 * swizzle bytes).
TEST(WgmmaLayout, ChunksFollowTheHardwareSwizzle) {
  for (int64_t elem : {2, 4})
    for (int64_t cols : {16, 32, 64, 128, 256}) {
      const SwizzledTile t = swizzled_tile(24, cols, elem);
      const int64_t bytes = cols * elem;
      if (bytes != 32 && bytes != 64 && bytes % 128 != 0) {
        EXPECT_EQ(t.swizzle, 0) << cols << "x" << elem;
        continue;
      }
      ASSERT_NE(t.swizzle, 0);
      const int64_t bits = t.swizzle == 128 ? 7 : t.swizzle == 64 ? 3 : 1;  // chunk-index mask
      std::set<int64_t> seen;
      for (int64_t r = 0; r < t.rows; ++r)
        for (int64_t c = 0; c < t.cols; c += t.chunk()) {
          const int64_t at = t.offset(r, c) * elem;  // bytes from the array start
          EXPECT_EQ(at % 16, 0);
          EXPECT_TRUE(seen.insert(at).second) << "two chunks at byte " << at;
          const int64_t unswizzled = ((c % t.width()) / t.chunk());
          EXPECT_EQ((at >> 4) & bits, unswizzled ^ ((at >> 7) & bits)) << "row " << r << " col " << c;
          EXPECT_EQ((at / t.block_bytes()), c / t.width()) << "column block";
        }
      EXPECT_EQ(static_cast<int64_t>(seen.size()) * 16, t.rows * bytes);
    }
}

TEST(GpuWgmmaLower, F16AndBf16DotsTakeTheWarpgroupAtomOnSm90) {
  for (DType d : {DType::f16, DType::bf16}) {
    const std::string text = gpu_ir(kernels::gemm_config(d, 64, 64, 32, true), options());
    EXPECT_EQ(count(text, "atom=\"wgmma\""), 1) << text;
    // Copies wait, fence for the async proxy, then the barrier publishes them (pipelined loop).
    EXPECT_EQ(count(text, " warpgroup_sync"), 2) << "top of the body and after the loop\n" << text;
    EXPECT_EQ(count(text, " async_copy "), 6) << "the same three-stage pipeline\n" << text;
  }
  // 128 x 256 over two warpgroups: each 64 rows by all 256 columns.
  const std::string two = gpu_ir(kernels::gemm_config(DType::f16, 128, 256, 64, false), options(true, 256));
  EXPECT_EQ(count(two, "warps_m=8 warps_n=1"), 1) << two;
}

// Without a pipeline the op waits for its own wgmmas; the copies still fence before the barrier.
TEST(GpuWgmmaLower, UnpipelinedDotsWaitInTheOp) {
  LowerOptions o = options();
  o.num_stages = 1;
  const std::string text = gpu_ir(kernels::gemm_config(DType::f16, 64, 64, 32, true), o);
  EXPECT_EQ(count(text, "atom=\"wgmma\""), 1) << text;
  EXPECT_EQ(count(text, " wait=1"), 1) << text;
  EXPECT_EQ(count(text, " warpgroup_sync"), 1) << text;
  CudaKernelSource s = emit_cuda(lower_to_gpu(kernels::gemm(kernels::gemm_config(DType::f16, 64, 64, 32, true)),
                                              nvidia_gpu_target("sm_90"), o));
  EXPECT_EQ(count(s.source, "  mt_wgmma_wait_all();"), 2) << "mt_wgmma_sync's and the op's\n" << s.source;
  EXPECT_EQ(count(text, " wait=0"), 0) << text;
  EXPECT_EQ(count(gpu_ir(kernels::gemm_config(DType::f16, 64, 64, 32, true), options()), " wait=0"), 1);
}

TEST(GpuWgmmaLower, GoldenGpuIr) {
  const std::string text = gpu_ir(kernels::gemm_config(DType::bf16, 128, 128, 64, true), options(true, 256));
  expect_golden(text, "gemm_bf16_wgmma.gpuir", "the wgmma GEMM's GPU IR");
}

TEST(GpuWgmmaLower, OtherDotsKeepTheWarpLevelAtoms) {
  auto warp_level = [](const std::string& text) {
    return count(text, "atom=\"mma.sync\"") == 1 && count(text, "wgmma") == 0 && count(text, "warpgroup_sync") == 0;
  };
  EXPECT_TRUE(warp_level(gpu_ir(kernels::gemm_config(DType::f16, 64, 64, 32, true), options(false))))
      << "switched off";
  EXPECT_TRUE(warp_level(gpu_ir(kernels::gemm_config(DType::f16, 64, 64, 32, true), options(), "sm_80"))) << "pre-Hopper";
  // tf32 dots: gpu_wgmma_tf32_test.cpp.
  EXPECT_TRUE(warp_level(gpu_ir(kernels::gemm_config(DType::f16, 32, 64, 32, true), options()))) << "32-row tile";
  EXPECT_TRUE(warp_level(gpu_ir(kernels::gemm_config(DType::f16, 64, 64, 32, true), options(true, 64))))
      << "two warps: no warpgroup";
  EXPECT_TRUE(warp_level(gpu_ir(kernels::gemm_config(DType::f16, 64, 64, 48, false), options())))
      << "96-byte rows fit no swizzle";
}

TEST(GpuWgmmaLower, CudaSpellsWgmmaWithDescriptors) {
  CudaKernelSource s =
      emit_cuda(lower_to_gpu(kernels::gemm(kernels::gemm_config(DType::bf16, 128, 128, 64, true)), nvidia_gpu_target("sm_90"),
                             options(true, 256)));
  // Two warpgroups of 64 x 128, four k16 steps.
  EXPECT_EQ(count(s.source, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), 4) << s.source;
  EXPECT_EQ(count(s.source, "mt_wgmma_commit();"), 1) << s.source;
  EXPECT_EQ(count(s.source, "mt_wgmma_sync();"), 2) << s.source;
  EXPECT_EQ(count(s.source, "mt_wgmma_wait_all();"), 1) << "only in mt_wgmma_sync\n" << s.source;
  EXPECT_EQ(count(s.source, "__align__(1024)"), 1) << s.source;
  // The arrays come first: a_smem at offset 0.
  EXPECT_EQ(count(s.source, "(mt_smem + 0)"), 1) << s.source;
}

// f16 and bf16, ragged and whole, the swizzles (K rows of 32, 64, 128 and 256 bytes), one and two
// warpgroups, N per warpgroup up to 256, two m64 blocks per warpgroup: each compiles for sm_90a.
TEST(GpuWgmmaLower, VariantsCompileThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  struct V {
    int bm, bn, bk, threads;
  };
  struct Variant {
    DType d;
    V v;
    bool bounds;
  };
  // Few compiles (NVRTC takes seconds each); the kernel suite's *_wg GEMMs add more.
  for (const Variant& x : {Variant{DType::f16, {64, 64, 16, 0}, true}, Variant{DType::bf16, {64, 64, 32, 0}, true},
                           Variant{DType::f16, {128, 256, 64, 256}, false},
                           Variant{DType::bf16, {128, 128, 128, 128}, true}}) {
        const DType d = x.d;
        const V v = x.v;
        const bool bounds = x.bounds;
        CudaKernelSource s = emit_cuda(lower_to_gpu(kernels::gemm(kernels::gemm_config(d, v.bm, v.bn, v.bk, bounds)),
                                                    nvidia_gpu_target("sm_90"), options(true, v.threads)));
        ASSERT_GT(count(s.source, "wgmma.mma_async"), 0) << v.bm << "x" << v.bn << "x" << v.bk;
        std::string log;
        EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log))
            << dtype_name(d) << " " << v.bm << "x" << v.bn << "x" << v.bk << " bounds " << bounds << "\n" << log;
      }
}

}  // namespace
}  // namespace metile

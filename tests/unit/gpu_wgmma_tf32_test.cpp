// tf32 dots on the warpgroup atom (dot_choices.cpp): which f32 dots take it (B the trans
// of an N x K tile_load, TF32 allowed), the K-major staging and descriptors of B, TMA for both
// operands, and NVRTC compiles for sm_90a (no GPU needed). On an H100 the kernel suite's
// gemm_tf32_*_nt GEMMs run it against interp and float64.
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

LowerOptions options(int threads = 0, bool tma = false, bool tf32 = true) {
  LowerOptions o;
  o.device = "cuda";
  o.num_threads = threads;
  o.tma = tma;
  o.dot_default = tf32 ? DotPrecision::tf32 : DotPrecision::ieee;
  return o;
}

kernels::GemmConfig nt(int bm, int bn, int bk, bool bounds) {
  kernels::GemmConfig g = kernels::gemm_config(DType::f32, bm, bn, bk, bounds);
  g.trans_b = true;
  return g;
}

std::string gpu_ir(const kernels::GemmConfig& g, const LowerOptions& o, const std::string& arch = "sm_90") {
  return gpu::print(lower_to_gpu(kernels::gemm(g), nvidia_gpu_target(arch), o));
}

CudaKernelSource emitted(const kernels::GemmConfig& g, const LowerOptions& o) {
  return emit_cuda(lower_to_gpu(kernels::gemm(g), nvidia_gpu_target("sm_90"), o));
}

std::string cuda(const kernels::GemmConfig& g, const LowerOptions& o) { return emitted(g, o).source; }

// B K-major: an N x K tile stages as A does (rows N, 128-byte rows of 32 elements).
TEST(WgmmaTf32Layout, FourByteBIsStagedKMajor) {
  EXPECT_TRUE(warpgroup_b_kmajor(4));
  EXPECT_FALSE(warpgroup_b_kmajor(2));
  const SwizzledTile t = swizzled_b_tile(64, 128, 4);
  EXPECT_EQ(t.rows, 128);
  EXPECT_EQ(t.cols, 64);
  EXPECT_EQ(t.swizzle, 128);
  EXPECT_EQ(t.width(), 32);
  const SwizzledTile h = swizzled_b_tile(64, 128, 2);
  EXPECT_EQ(h.rows, 64);
  EXPECT_EQ(h.cols, 128);
}

TEST(GpuWgmmaTf32Lower, TransposedBTakesTheTf32WarpgroupAtom) {
  const std::string text = gpu_ir(nt(64, 64, 32, true), options());
  EXPECT_EQ(count(text, "atom=\"wgmma\""), 1) << text;
  EXPECT_EQ(count(text, "atom_k=8"), 1) << text;
  EXPECT_EQ(count(text, " async_copy "), 6) << "A and B, three stages\n" << text;
  EXPECT_EQ(count(text, " warpgroup_sync"), 2) << text;
  // 128 x 256 over two warpgroups side by side (each all 128 rows, 128 columns: B's rows).
  const std::string two = gpu_ir(nt(64, 256, 32, false), options(256));
  EXPECT_EQ(count(two, "atom=\"wgmma\""), 1) << two;
  EXPECT_EQ(count(two, "warps_m=4 warps_n=2"), 1) << two;
}

TEST(GpuWgmmaTf32Lower, OtherF32DotsKeepMmaSyncOrFmas) {
  auto warp_level = [](const std::string& text) {
    return count(text, "atom=\"mma.sync\"") == 1 && count(text, "wgmma") == 0;
  };
  EXPECT_TRUE(warp_level(gpu_ir(nt(64, 64, 32, true), options(), "sm_80"))) << "pre-Hopper";
  LowerOptions off = options();
  off.warpgroup = false;
  EXPECT_TRUE(warp_level(gpu_ir(nt(64, 64, 32, true), off))) << "METILE_CUDA_WGMMA=0";
  LowerOptions no_async = options();
  no_async.async_copy = false;
  EXPECT_TRUE(warp_level(gpu_ir(nt(64, 64, 32, true), no_async))) << "no direct copies";
  EXPECT_TRUE(warp_level(gpu_ir(nt(64, 64, 24, false), options()))) << "96-byte rows fit no swizzle";
  // "ieee": exact f32 FMAs, no matrix atom at all.
  const std::string exact = gpu_ir(nt(64, 64, 32, true), options(0, false, false));
  EXPECT_EQ(count(exact, " mma "), 0) << exact;
  EXPECT_EQ(count(exact, "wgmma"), 0) << exact;
}

// B given K x N (N-major): C^T = B^T A^T, B^T's fragments from registers, A as wgmma's B.
TEST(GpuWgmmaTf32Lower, BGivenKByNTakesTheTransposedForm) {
  const std::string text = gpu_ir(kernels::gemm_config(DType::f32, 64, 64, 32, true), options());
  EXPECT_EQ(count(text, "atom=\"wgmma\""), 1) << text;
  EXPECT_EQ(count(text, " transposed=1"), 1) << text;
  EXPECT_EQ(count(text, " async_copy "), 6) << "A and B as for f16, three stages\n" << text;
  // 128 x 256 over two warpgroups: each 128 of C's columns (two m64 blocks) by all 128 rows.
  const std::string two = gpu_ir(kernels::gemm_config(DType::f32, 128, 256, 32, false), options(256));
  EXPECT_EQ(count(two, "warps_m=8 warps_n=1"), 1) << two;
  const std::string s = cuda(kernels::gemm_config(DType::f32, 128, 256, 32, false), options(256));
  EXPECT_EQ(count(s, "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32"), 8) << "4 k steps x 2 blocks\n" << s;
  EXPECT_EQ(count(s, "= mt_tf32(mma_at("), 32) << "4 per block and k step, rounded as mma.sync's\n" << s;
  EXPECT_EQ(count(s, "mt_wgmma_wait_all();"), 2) << "the op waits for its fragments' group\n" << s;
  EXPECT_EQ(count(s, "mt_mma_tf32(&"), 0) << s;
  // A reduction over C's rows keeps mma.sync (its rows would lie across warps).
  LowerOptions sync = options();
  sync.warpgroup = false;
  EXPECT_EQ(count(gpu_ir(kernels::gemm_config(DType::f32, 64, 64, 32, true), sync), "wgmma"), 0);
}

// A transposed tile something else also reads is not the dot's alone: it stays in registers.
TEST(GpuWgmmaTf32Lower, ATransposeReadTwiceKeepsMmaSync) {
  kernels::KernelBuilder k("nt_shared");
  kernels::V a = k.ptr("A"), b = k.ptr("B"), c = k.ptr("C"), d = k.ptr("D");
  kernels::V ta = k.tile_load(a, k.i32(0), k.i32(0), k.i32(32), Shape::of(64, 32));
  kernels::V tb = k.tile_load(b, k.i32(0), k.i32(0), k.i32(32), Shape::of(64, 32));
  kernels::V bt = k.trans(tb);
  k.tile_store(c, k.i32(0), k.i32(0), k.i32(64), k.dot(ta, bt, k.zeros(Shape::of(64, 64))));
  k.tile_store(d, k.i32(0), k.i32(0), k.i32(64), bt);
  const std::string text = gpu::print(lower_to_gpu(k.finish(), nvidia_gpu_target("sm_90"), options()));
  EXPECT_EQ(count(text, "atom=\"mma.sync\""), 1) << text;
  EXPECT_EQ(count(text, "wgmma"), 0) << text;
}

TEST(GpuWgmmaTf32Lower, CudaSpellsTf32WgmmaWithKMajorB) {
  const std::string s = cuda(nt(128, 128, 32, false), options(256));
  // Two warpgroups of 64 x 128, four k8 steps; no transpose immediates.
  EXPECT_EQ(count(s, "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32"), 4) << s;
  EXPECT_EQ(count(s, ", p, 1, 1;"), 4) << s;
  EXPECT_EQ(count(s, ", p, 1, 1, 0, 1;"), 0) << s;
  // B's descriptor is A's form (leading offset 1, stride 8 rows of 128 bytes = 64 units, 128-byte
  // swizzle): mode 1 << 62 | 64 << 32 | 1 << 16.
  EXPECT_EQ(count(s, "0x4000004000010000ull"), 8) << "both operands, four steps\n" << s;
  // The k steps move both starts by 32 bytes inside the 128-byte rows.
  EXPECT_EQ(count(s, "mt_wgmma_desc(mma_b + 96,"), 1) << s;
  EXPECT_EQ(count(s, "mt_wgmma_desc(mma_a + 96,"), 1) << s;
  // Side by side: the second warpgroup's B starts 128 rows of 128 bytes further.
  const std::string two = cuda(nt(64, 256, 32, false), options(256));
  EXPECT_EQ(count(two, "(mma_wg / 1) * 16384;"), 1) << two;
}

TEST(GpuWgmmaTf32Lower, BothOperandsTakeTma) {
  const std::string text = gpu_ir(nt(128, 128, 32, true), options(256, true));
  EXPECT_EQ(count(text, " tma_load "), 6) << text;
  EXPECT_EQ(count(text, " async_copy "), 0) << text;
  EXPECT_EQ(count(text, "box_rows=128 box_cols=32"), 6) << "B's box is N x 32, as A's is M x 32\n" << text;
}

TEST(GpuWgmmaTf32Lower, VariantsCompileThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  struct V {
    int bm, bn, bk, threads;
    bool bounds, tma;
  };
  for (const V& v : {V{64, 64, 16, 0, true, false}, V{128, 128, 32, 256, true, true}, V{128, 256, 32, 256, false, true},
                     V{64, 128, 32, 128, true, true}}) {
    const CudaKernelSource s = emitted(kernels::gemm_config(DType::f32, v.bm, v.bn, v.bk, v.bounds), options(v.threads, v.tma));
    ASSERT_GT(count(s.source, "k8.f32.tf32.tf32"), 0) << "transposed " << v.bm << "x" << v.bn << "x" << v.bk;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log))
        << "transposed " << v.bm << "x" << v.bn << "x" << v.bk << "\n" << log;
  }
  // 32-, 64- and 128-byte K rows, two m64 blocks, warpgroups side by side, TMA.
  for (const V& v : {V{64, 64, 8, 0, true, false}, V{64, 64, 16, 0, true, true}, V{128, 128, 64, 128, true, true},
                     V{64, 256, 32, 256, false, false}}) {
    const CudaKernelSource s = emitted(nt(v.bm, v.bn, v.bk, v.bounds), options(v.threads, v.tma));
    ASSERT_GT(count(s.source, ".tf32.tf32"), 0) << v.bm << "x" << v.bn << "x" << v.bk;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log))
        << v.bm << "x" << v.bn << "x" << v.bk << "\n" << log;
  }
}

}  // namespace
}  // namespace metile

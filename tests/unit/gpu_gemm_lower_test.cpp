// The GEMM structure of the GPU middle: dot operands copied straight from device to threadgroup
// memory (async_copy) and the multi-stage K-loop pipeline, each switched off by its LowerOptions
// field for differential tests, and ldmatrix fragment reads (the ldmatrix-fragments pass's choice,
// left out of the passes run). GPU IR text is checked
// against a golden file (tests/golden/*.gpuir, METILE_UPDATE_GOLDEN=1 rewrites it); the CUDA
// variants compile through NVRTC for sm_80 and sm_90 where NVRTC is installed (no GPU needed).
#include <gtest/gtest.h>

#include "codegen/cuda/cuda.h"
#include "golden.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "runtime/cuda/cuda_api.h"
#include "support/error.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

kernels::GemmConfig f16_gemm(bool bounds) {
  kernels::GemmConfig g;
  g.block_m = g.block_n = 64;
  g.block_k = 32;
  g.dtype = DType::f16;
  g.bounds = bounds;
  return g;
}

LowerOptions options(bool async_copy = true, int stages = 0) {
  LowerOptions o;
  o.device = "cuda";
  o.async_copy = async_copy;
  o.num_stages = stages;
  o.warpgroup = false;  // the warp-level path; gpu_wgmma_lower_test.cpp covers the warpgroup one
  return o;
}

std::string gpu_ir(const kernels::GemmConfig& g, const LowerOptions& o,
                   const GpuTarget& t = nvidia_gpu_target("sm_90")) {
  return gpu::print(lower_to_gpu(kernels::gemm(g), t, o));
}

// The passes that choose how mma.sync is spelled, as run_gpu_pipeline runs them; without ldmatrix.
const std::vector<const char*> kMmaPasses = {"ldmatrix-fragments", "serpentine-mma", "preload-fragments"};
const std::vector<const char*> kNoLdmatrix = {"serpentine-mma", "preload-fragments"};

// A lowered program after the passes that choose how its mmas are spelled (`passes`: those of
// them to run), and its CUDA.
CudaKernelSource cuda_kernel(const Program& p, const LowerOptions& o, const std::string& arch = "sm_90",
                             const std::vector<const char*>& passes = kMmaPasses) {
  const GpuTarget t = nvidia_gpu_target(arch);
  gpu::Function f = lower_to_gpu(p, t, o);
  PassContext ctx{t};
  for (const char* pass : passes) run_gpu_pass(pass, f, ctx);
  return emit_cuda(f);
}
std::string cuda_of(const Program& p, const LowerOptions& o) { return cuda_kernel(p, o).source; }

TEST(GpuGemmLower, OperandsCopyStraightToThreadgroupMemoryThroughAThreeStagePipeline) {
  std::string text = gpu_ir(f16_gemm(true), options());
  // Two stages ahead in the prologue and one in the body, for A and B each.
  EXPECT_EQ(count(text, " async_copy "), 6) << text;
  EXPECT_EQ(count(text, " async_commit"), 3) << text;
  EXPECT_EQ(count(text, "async_wait pending=1"), 1) << text;  // top of the body
  EXPECT_EQ(count(text, "async_wait pending=0"), 1) << text;  // after the loop
  EXPECT_EQ(count(text, " barrier"), 1) << "one barrier per iteration\n" << text;
  EXPECT_EQ(count(text, " load "), 0) << "nothing passes through registers\n" << text;
}

TEST(GpuGemmLower, EachPieceSwitchesOff) {
  std::string one = gpu_ir(f16_gemm(true), options(true, 1));
  EXPECT_EQ(count(one, " async_copy "), 2) << one;
  EXPECT_EQ(count(one, "async_wait pending=0"), 1) << one;
  EXPECT_EQ(count(one, " barrier"), 2) << "before and after the mma\n" << one;
  std::string regs = gpu_ir(f16_gemm(true), options(false));
  EXPECT_EQ(count(regs, "async_"), 0) << regs;
  EXPECT_EQ(count(regs, " load "), 2) << "A and B through registers\n" << regs;
  // ldmatrix is the ldmatrix-fragments pass's choice (gpu_passes_test.cpp), not lowering's.
  EXPECT_EQ(count(gpu_ir(f16_gemm(true), options()), "ldmatrix"), 0);
  kernels::GemmConfig tf32 = f16_gemm(true);
  tf32.dtype = DType::f32;
  // tf32: ldmatrix reads A's fragments (its 32-bit words land where m16n8k8 wants them); B's
  // stay scalar reads (.trans would move 16-bit halves).
  LowerOptions o = options();
  o.dot_default = DotPrecision::tf32;
  std::string cuda = cuda_of(kernels::gemm(tf32), o);
  EXPECT_EQ(count(cuda, "mt_ldmatrix_x4(mma_a[0][mma_i]"), 1) << cuda;
  EXPECT_EQ(count(cuda, "mt_ldmatrix_x4_trans(&"), 0) << cuda;
  EXPECT_EQ(count(cuda, "[mma_j][1] = mt_tf32(mma_q[4 * "), 2) << cuda;  // k step 0, then the next
  cuda = cuda_kernel(kernels::gemm(tf32), o, "sm_90", kNoLdmatrix).source;
  EXPECT_EQ(count(cuda, "mt_ldmatrix_x4("), 1) << cuda;  // the prelude's definition
  EXPECT_EQ(count(cuda, "[mma_i][3] = mt_tf32(mma_p[8 * "), 2) << cuda;
  // 3xTF32 (cuda's default): the fragments keep the f32 bits, split into TF32 hi and lo words
  // (twice as many registers) and three MMAs each (A's read without ldmatrix here too).
  o.dot_default = DotPrecision::tf32x3;
  cuda = cuda_kernel(kernels::gemm(tf32), o, "sm_90", kNoLdmatrix).source;
  EXPECT_EQ(count(cuda, "[mma_i][3] = __float_as_uint(mma_p[8 * "), 2) << cuda;
  EXPECT_EQ(count(cuda, "mt_split_tf32<4>(mma_a"), 2) << cuda;
  EXPECT_EQ(count(cuda, "mt_split_tf32<2>(mma_b"), 2) << cuda;
  EXPECT_EQ(count(cuda, "mt_mma_tf32x3(&"), 1) << cuda;
  EXPECT_EQ(count(cuda, "mt_mma_tf32(&"), 0) << cuda;
}

// Fragment preloading and serpentine order are attributes of the mma op that the GPU IR passes
// preload-fragments and serpentine-mma set (gpu_passes_test.cpp); the CUDA writer spells them.
TEST(GpuGemmLower, CudaSpellsPreloadAndSerpentine) {
  auto cuda = [&](const kernels::GemmConfig& g, const std::vector<const char*>& passes) {
    return cuda_kernel(kernels::gemm(g), options(), "sm_90", passes).source;
  };
  EXPECT_EQ(count(gpu_ir(f16_gemm(true), options()), "preload="), 0) << "lowering sets neither";
  const std::string c_on = cuda(f16_gemm(true), {"ldmatrix-fragments", "serpentine-mma", "preload-fragments"});
  const std::string c_off = cuda(f16_gemm(true), {});
  // Two fragment buffers, the first k step read before the loop, the next one inside it.
  EXPECT_EQ(count(c_on, "uint mma_a[2][2][4]"), 1) << c_on;
  EXPECT_EQ(count(c_on, "mt_ldmatrix_x4(mma_a[0][mma_i]"), 1) << c_on;
  EXPECT_EQ(count(c_on, "mt_ldmatrix_x4(mma_a[mma_s ^ 1][mma_i]"), 1) << c_on;
  EXPECT_EQ(count(c_on, "const int mma_jj = (mma_i & 1) ? "), 1) << c_on;
  EXPECT_EQ(count(c_off, "mma_s ^ 1"), 0) << c_off;
  EXPECT_EQ(count(c_off, "mma_jj"), 0) << c_off;
  // One k step (BLOCK_K 16) has nothing to preload.
  kernels::GemmConfig one = f16_gemm(true);
  one.block_k = 16;
  const std::string c_one = cuda(one, {"preload-fragments"});
  EXPECT_EQ(count(c_one, "mma_s ^ 1"), 0) << c_one;
}

TEST(GpuGemmLower, StagesShrinkToTheThreadgroupMemory) {
  kernels::GemmConfig g = f16_gemm(false);
  g.block_m = g.block_n = 128;
  // 19 KB a stage: three fit 3/4 of 227 KB; on a 48 KB target one does (no pipeline).
  gpu::Function big = lower_to_gpu(kernels::gemm(g), nvidia_gpu_target("sm_90"), options(true, 8));
  EXPECT_EQ(gpu::threadgroup_bytes(big), 8u * (128 * 40 + 32 * 136) * 2);
  gpu::Function small = lower_to_gpu(kernels::gemm(g), nvidia_gpu_target(), options());
  EXPECT_EQ(gpu::threadgroup_bytes(small), (128u * 40 + 32 * 136) * 2);
}

TEST(GpuGemmLower, MetalCopiesDirectlyWithoutAPipeline) {
  std::string text = gpu_ir(f16_gemm(true), options(), apple_gpu_target());
  EXPECT_EQ(count(text, " async_copy "), 2) << text;  // plain vector copies on MSL
  EXPECT_EQ(count(text, "async_wait pending=1"), 0) << text;
}

TEST(GpuGemmLower, GoldenGpuIr) {
  std::string text = gpu_ir(f16_gemm(true), options());
  expect_golden(text, "gemm_f16_pipelined.gpuir", "the pipelined GEMM's GPU IR");
}

TEST(GpuGemmLower, CudaSpellsCpAsyncAndLdmatrix) {
  std::string src = cuda_of(kernels::gemm(f16_gemm(true)), options());
  EXPECT_GT(count(src, "mt_cp_async16("), 6) << src;  // the prelude's definition and each copy
  EXPECT_EQ(count(src, "cp.async.wait_group 1;"), 1) << src;
  EXPECT_EQ(count(src, "mt_ldmatrix_x4(mma_a"), 2) << src;  // k step 0, then each next one (preload)
  EXPECT_EQ(count(src, "mt_ldmatrix_x4_trans(&mma_b"), 2) << src;
  std::string plain = cuda_kernel(kernels::gemm(f16_gemm(true)), options(false, 1), "sm_90", kNoLdmatrix).source;
  EXPECT_EQ(count(plain, "mt_cp_async16(a"), 0) << plain;
  EXPECT_EQ(count(plain, "mt_ldmatrix_x4(mma_a"), 0) << plain;
}

TEST(GpuGemmLower, AlignedBodyTestsTheWholeTileOnceAndSwitchesOff) {
  std::string text = gpu_ir(f16_gemm(true), options());
  EXPECT_EQ(count(text, " async_copy "), count(text, "whole=1")) << "every copy has its uniform test\n" << text;
  EXPECT_GT(count(text, "%whole"), 0) << text;
  LowerOptions off = options();
  off.aligned_body = false;
  EXPECT_EQ(count(gpu_ir(f16_gemm(true), off), "whole="), 0);
  // CUDA: one test of the tile and the base pointer's alignment per copy op, then cp.async per
  // chunk predicated on it (no branch around them), and the per-chunk path only where it fails.
  std::string src = cuda_of(kernels::gemm(f16_gemm(true)), options());
  EXPECT_EQ(count(src, " && (reinterpret_cast<ullong>(A) & 15ull) == 0;"), 3) << src;
  EXPECT_EQ(count(src, " && (reinterpret_cast<ullong>(B) & 15ull) == 0;"), 3) << src;
  EXPECT_EQ(count(src, "const bool whole"), 6) << src;
  EXPECT_EQ(count(src, "if (!whole"), 6) << src;
  EXPECT_EQ(count(src, "mt_cp_async16_if(a_smem"), 3) << src;
  EXPECT_EQ(count(src, "mt_cp_async16_if(b_smem"), 3) << src;
  // Without the aligned body: no predicated copies, each chunk tests its own bounds.
  std::string plain_src = cuda_of(kernels::gemm(f16_gemm(true)), off);
  EXPECT_EQ(count(plain_src, "mt_cp_async16_if(a_smem") + count(plain_src, "mt_cp_async16_if(b_smem"), 0) << plain_src;
  EXPECT_GT(count(plain_src, "mt_cp_async16(a_smem"), 0) << plain_src;
  // The verifier wants the two extra operands.
  std::string bad = text;
  const size_t at = bad.find("whole=1");
  ASSERT_NE(at, std::string::npos);
  const size_t line = bad.rfind('\n', at) + 1;
  std::string copy = bad.substr(line, bad.find('\n', at) - line);
  std::string cut = copy;
  cut.erase(cut.rfind(", %"), cut.find(" width=") - cut.rfind(", %"));  // drop the base operand
  bad.replace(line, copy.size(), cut);
  try {
    run_gpu_passes_on_text(bad, {}, nvidia_gpu_target("sm_90"));
    ADD_FAILURE() << "accepted " << cut;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("async_copy"), std::string::npos) << e.what();
  }
}

TEST(GpuGemmLower, WarpGridComesFromTheOptions) {
  kernels::GemmConfig g = f16_gemm(true);
  g.block_m = g.block_n = 128;
  LowerOptions o = options();
  o.warps_m = 4;
  o.warps_n = 2;
  gpu::Function f = lower_to_gpu(kernels::gemm(g), nvidia_gpu_target("sm_90"), o);
  EXPECT_EQ(f.threads, 256) << "4 x 2 warps when num_threads is 0";
  std::string text = gpu::print(f);
  EXPECT_EQ(count(text, "warps_m=4 warps_n=2"), 1) << text;
  LowerOptions wg = o;
  wg.warpgroup = true;  // an asked grid keeps the warp-level atoms where wgmma would apply
  std::string warp_level = gpu::print(lower_to_gpu(kernels::gemm(g), nvidia_gpu_target("sm_90"), wg));
  EXPECT_EQ(count(warp_level, "atom=\"mma.sync\" "), 1) << warp_level;
  EXPECT_EQ(count(warp_level, "warps_m=4 warps_n=2"), 1) << warp_level;
  EXPECT_EQ(count(gpu_ir(g, options()), "warps_m=2 warps_n=2"), 1) << "the compiler's choice, 4 warps";
  auto error = [&](int wm, int wn, int threads) {
    LowerOptions x = options();
    x.warps_m = wm;
    x.warps_n = wn;
    x.num_threads = threads;
    try {
      lower_to_gpu(kernels::gemm(g), nvidia_gpu_target("sm_90"), x);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(3, 1, 0).find("warps_m 3 x warps_n 1 does not tile the 128x128 dot by whole 16x8 atoms"),
            std::string::npos) << error(3, 1, 0);
  EXPECT_NE(error(2, 2, 256).find("warps_m 2 x warps_n 2 warps, but the kernel runs 8 (num_threads 256)"),
            std::string::npos) << error(2, 2, 256);
}

// Every combination of the switches, for f16, bf16 and tf32, ragged and whole tiles, compiles
// for sm_80 and sm_90.
TEST(GpuGemmLower, TheLoopCarriesItsStageAndSwitchesOff) {
  for (int stages : {2, 3, 4}) {
    LowerOptions on = options(true, stages), off = on;
    off.stage_counter = false;
    const std::string ir_on = gpu_ir(f16_gemm(true), on), ir_off = gpu_ir(f16_gemm(true), off);
    // On: the stage is a loop-carried i32 starting at 0, stepped by a compare and a select,
    // with no remainder anywhere in the kernel; off: two remainders of the iteration per step.
    EXPECT_EQ(count(ir_on, ", %stage: i32 = "), 1) << ir_on;
    EXPECT_EQ(count(ir_on, " = mod %iteration"), 0) << ir_on;
    EXPECT_EQ(count(ir_on, "%next_stage: i32 = select "), 1) << ir_on;
    EXPECT_EQ(count(ir_off, ", %stage: i32 = "), 0) << ir_off;
    EXPECT_EQ(count(ir_off, "%stage: i32 = mod %iteration"), 1) << ir_off;
    EXPECT_EQ(count(ir_off, "%next_stage: i32 = mod "), 1) << ir_off;
    const std::string c_on = cuda_of(kernels::gemm(f16_gemm(true)), on);
    EXPECT_EQ(count(c_on, "stage = (stage == " + std::to_string(stages - 1) + ") ? 0 : "), 1) << c_on;
  }
  // No pipeline (one stage): nothing is carried.
  EXPECT_EQ(count(gpu_ir(f16_gemm(true), options(true, 1)), "%stage"), 0);
}

TEST(GpuGemmLower, VariantsCompileThroughNvrtc) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  for (DType d : {DType::f16, DType::bf16, DType::f32})
    for (int variant = 0; variant < 4; ++variant) {
      kernels::GemmConfig g = f16_gemm(variant % 2 == 0);
      g.dtype = d;
      if (variant == 3) g.block_n = 40;  // an odd number of 8-column atoms per warp: ldmatrix x2
      LowerOptions o = options(variant != 1, variant == 2 ? 4 : 0);
      o.aligned_body = variant != 3;
      o.stage_counter = variant != 2;
      for (const char* arch : {"sm_80", "sm_90"}) {
        CudaKernelSource s = cuda_kernel(kernels::gemm(g), o, arch, variant == 2 ? kNoLdmatrix : kMmaPasses);
        std::string log;
        EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, arch, &log))
            << dtype_name(d) << " variant " << variant << " " << arch << "\n" << log;
      }
    }
}

}  // namespace
}  // namespace metile

// B = trans(tile_load) on CUDA's mma.sync is copied as loaded, n rows of k, with cp.async, and
// read by ldmatrix without .trans (lower_trans_operand.cpp, DotChoice::b_kmajor): flash
// attention's K never passes through registers. GPU IR and CUDA text; the results are checked
// on the GPU by test_attention.py (every device, float64 reference).
#include <gtest/gtest.h>

#include <string>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// Out = A @ B^T, A 64 x K, B N x K (dtype), 128 threads.
std::string kernel(int n, int k, const std::string& dtype) {
  const std::string ns = std::to_string(n), ks = std::to_string(k);
  return R"(kernel @k(%A: ptr<)" + dtype + R"(>, %B: ptr<)" + dtype + R"(>, %O: ptr<f32>) num_threads(128) {
  %c0 = const {value = 0} : i32
  %cn = const {value = )" + ns + R"(} : i32
  %ck = const {value = )" + ks + R"(} : i32
  %a = tile_load %A, %c0, %c0, %ck : tile<64x)" + ks + "x" + dtype + R"(>
  %b = tile_load %B, %c0, %c0, %ck : tile<)" + ns + "x" + ks + "x" + dtype + R"(>
  %bt = trans %b : tile<)" + ks + "x" + ns + "x" + dtype + R"(>
  %z = const {value = 0.0} : f32
  %acc = broadcast %z : tile<64x)" + ns + R"(xf32>
  %d = dot %a, %bt, %acc : tile<64x)" + ns + R"(xf32>
  tile_store %O, %c0, %c0, %cn, %d
}
)";
}

// Lowered, then marked by the passes that choose how mma.sync is spelled, as run_gpu_pipeline does.
gpu::Function lowered(const std::string& src, const GpuTarget& t, bool kmajor = true, bool wgmma = false) {
  LowerOptions o;
  o.device = "test";
  o.kmajor_b = kmajor;
  o.warpgroup_kmajor_b = wgmma;  // sm_90's wgmma reads the same copy (below)
  gpu::Function f = lower_to_gpu(parse(src), t, o);
  PassContext ctx{t};
  for (const char* pass : {"ldmatrix-fragments", "serpentine-mma", "preload-fragments"}) run_gpu_pass(pass, f, ctx);
  return f;
}

TEST(KmajorB, ATransposedLoadIsCopiedAsLoadedAndReadWithoutTrans) {
  for (const std::string dtype : {"f16", "bf16"}) {
    gpu::Function f = lowered(kernel(32, 64, dtype), nvidia_gpu_target("sm_90"));
    std::string ir = gpu::print(f), cuda = emit_cuda(f).source;
    EXPECT_EQ(count(ir, "b_kmajor=1"), 1) << ir;
    EXPECT_EQ(count(ir, "async_copy"), 2) << "A and B straight to threadgroup memory\n" << ir;
    EXPECT_EQ(count(ir, " barrier"), 2) << "before and after the mma only\n" << ir;
    EXPECT_EQ(count(cuda, "mt_ldmatrix_x4(&mma_b"), 2) << "first and next k step\n" << cuda;
    EXPECT_EQ(count(cuda, "mt_ldmatrix_x4_trans(&mma_b"), 0) << cuda;
    // B's array: 32 rows of 64 + 8 padding elements (16 bytes: conflict-free ldmatrix rows).
    EXPECT_NE(cuda.find("* 72 + ((mma_lane >> 3) & 1) * 8) * 2;"), std::string::npos) << cuda;
  }
}

TEST(KmajorB, AnOddNumberOfColumnTilesReadsTheLastWithX2) {
  gpu::Function f = lowered(kernel(24, 64, "f16"), nvidia_gpu_target("sm_90"));
  std::string cuda = emit_cuda(f).source;
  EXPECT_EQ(count(cuda, "mt_ldmatrix_x2(mma_b"), 2) << cuda;
}

// On sm_90 the warpgroup atom reads the same N x K copy K-major, as A (dot_choices.cpp): transpose
// flag 0 and A's descriptor form (leading offset 1, 8 rows of 128 bytes = 64 units, 128-byte
// swizzle), the k16 steps 32 bytes apart in both.
TEST(KmajorB, Sm90sWarpgroupAtomReadsTheCopyKMajor) {
  for (const std::string dtype : {"f16", "bf16"}) {
    gpu::Function f = lowered(kernel(32, 64, dtype), nvidia_gpu_target("sm_90"), true, true);
    std::string ir = gpu::print(f), cuda = emit_cuda(f).source;
    EXPECT_EQ(count(ir, "atom=\"wgmma\""), 1) << ir;
    EXPECT_EQ(count(ir, "b_kmajor=1"), 1) << ir;
    EXPECT_EQ(count(ir, "shape=\"32x64\""), 1) << "B staged N x K\n" << ir;
    EXPECT_EQ(count(cuda, "wgmma.mma_async.sync.aligned.m64n32k16.f32." + dtype + "." + dtype), 4) << cuda;
    EXPECT_EQ(count(cuda, ", p, 1, 1, 0, 0;"), 4) << cuda;
    EXPECT_EQ(count(cuda, "0x4000004000010000ull"), 8) << "both operands, four steps\n" << cuda;
    EXPECT_EQ(count(cuda, "mt_wgmma_desc(mma_b + 96,"), 1) << cuda;
  }
}

TEST(KmajorB, OffTargetsAndOperandsKeepTheTransposedStaging) {
  // Switched off (METILE_GPU_OFF=kmajor_b): staged element by element, read with .trans.
  std::string off = emit_cuda(lowered(kernel(32, 64, "f16"), nvidia_gpu_target("sm_90"), false)).source;
  EXPECT_EQ(count(off, "mt_ldmatrix_x4(&mma_b"), 0) << off;
  EXPECT_GT(count(off, "mt_ldmatrix_x4_trans(&mma_b"), 0) << off;
  // Metal (simdgroup_matrix) and TF32 operands (f32 through .trans moves 16-bit halves).
  EXPECT_EQ(count(gpu::print(lowered(kernel(32, 64, "f16"), apple_gpu_target())), "b_kmajor"), 0);
  EXPECT_EQ(count(gpu::print(lowered(kernel(32, 64, "f32"), nvidia_gpu_target("sm_90"))), "b_kmajor"), 0);
  // K staged in chunks (A and B over half of 48 KB): the copy needs K whole.
  EXPECT_EQ(count(gpu::print(lowered(kernel(32, 512, "f16"), nvidia_gpu_target())), "b_kmajor"), 0);
}

}  // namespace
}  // namespace metile

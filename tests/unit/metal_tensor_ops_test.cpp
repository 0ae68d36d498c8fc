// Metal 4 tensor_ops for dot: which Apple targets have the atom, when lowering falls back to
// simdgroup_matrix, and metal-sim's family option. The kernels themselves run in the kernel
// suite: the ctest entries metal_sim_tensor_ops and metal_standin_tensor_ops run its gemm cases
// (f32, f16, bf16, ragged) on an emulated apple10 and compare them with interp and float64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "codegen/metal/msl.h"
#include "kernels/kernels.h"
#include "metal_sim_test_util.h"
#include "passes/pipeline.h"
#include "runtime/backends.h"
#include "runtime/metal_sim/metal_sim_device.h"
#include "runtime/metal_sim/sim_kernel.h"
#include "support/env.h"
#include "support/half.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has_tensor_ops(const GpuTarget& t) {
  for (Atom a : t.matrix_atoms)
    if (matrix_atom(a).kind == AtomKind::tensor_ops) return true;
  return false;
}

// f32 dots may take matmul2d (TF32 on M5-class parts) only under "tf32": the tests ask for it.
std::string msl_of(const Program& p, const GpuTarget& t, int allow_tf32 = 1) {
  CompileOptions o;
  o.allow_tf32 = allow_tf32;
  return emit_msl(run_gpu_pipeline(p, t, o, "test").function).source;
}

TEST(TensorOpsTarget, OnlyFromApple9WithMetal4) {
  EXPECT_FALSE(has_tensor_ops(apple_gpu_target()));
  EXPECT_EQ(apple_gpu_target().family, kAppleDefaultFamily);
  EXPECT_FALSE(has_tensor_ops(apple_gpu_target(8, true)));
  EXPECT_FALSE(has_tensor_ops(apple_gpu_target(10, false)));
  for (int family : {9, 10}) {
    GpuTarget t = apple_gpu_target(family, true);
    EXPECT_EQ(t.family, family);
    ASSERT_TRUE(has_tensor_ops(t));
    EXPECT_EQ(matrix_atom(t.matrix_atoms.front()).kind, AtomKind::tensor_ops);  // preferred over simdgroup_matrix
    EXPECT_EQ(matrix_atom(t.matrix_atoms.back()).kind, AtomKind::simdgroup_matrix);  // kept for the fallback
  }
  EXPECT_EQ(apple_family_from_name("apple10"), 10);
  EXPECT_EQ(apple_family_from_name("apple7"), 7);
  EXPECT_EQ(apple_family_from_name("apple11"), -1);
  EXPECT_EQ(apple_family_from_name("m5"), -1);
}

TEST(TensorOpsTarget, DotTypesLowerToMatmul2d) {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    kernels::GemmConfig g;
    g.dtype = d;
    std::string msl = msl_of(kernels::gemm(g), apple_gpu_target(10, true));
    EXPECT_NE(msl.find("#include <MetalPerformancePrimitives/MetalPerformancePrimitives.h>"), std::string::npos);
    EXPECT_NE(msl.find("mpp::tensor_ops::matmul2d<mma_desc, execution_simdgroup>"), std::string::npos);
    EXPECT_EQ(msl.find("simdgroup_multiply_accumulate"), std::string::npos) << dtype_name(d);
    // The same program for an M1 keeps simdgroup_matrix and needs no Metal 4 header.
    std::string m1 = msl_of(kernels::gemm(g), apple_gpu_target());
    EXPECT_EQ(m1.find("MetalPerformancePrimitives"), std::string::npos);
    EXPECT_NE(m1.find("simdgroup_multiply_accumulate"), std::string::npos);
  }
  // f32 accuracy (the default, "ieee", "tf32x3") keeps f32 dots on simdgroup_matrix.
  for (int tf32 : {-1, 0}) {
    std::string exact = msl_of(kernels::gemm(kernels::GemmConfig{}), apple_gpu_target(10, true), tf32);
    EXPECT_EQ(exact.find("matmul2d"), std::string::npos) << tf32;
    EXPECT_NE(exact.find("simdgroup_multiply_accumulate"), std::string::npos) << tf32;
  }
}

TEST(TensorOpsTarget, MmaCarriesTheAccumulatorArrayAndTheVerifierChecksIt) {
  kernels::GemmConfig g;
  g.dtype = DType::f16;
  gpu::Function f = run_gpu_pipeline(kernels::gemm(g), apple_gpu_target(10, true), {}, "test").function;
  gpu::Op* mma = nullptr;
  gpu::walk_mut(f.body, [&](gpu::Op& op) {
    if (op.kind == gpu::GpuOpKind::MMA) mma = &op;
  });
  ASSERT_NE(mma, nullptr);
  EXPECT_EQ(mma->attr_str("atom"), "tensor_ops");
  ASSERT_EQ(mma->operands.size(), 5u);
  const gpu::Value& c = f.value(mma->operands[4]);
  EXPECT_TRUE(c.is_ptr && c.space == AddrSpace::threadgroup && c.dtype == DType::f32);
  mma->operands[4] = mma->operands[0];  // the f16 A array in its place
  try {
    gpu::verify(f);
    FAIL() << "the verifier accepted an f16 accumulator array";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the accumulator array must be a uniform f32 threadgroup pointer"),
              std::string::npos)
        << e.what();
  }
}

TEST(TensorOpsTarget, AccumulatorTooLargeForThreadgroupMemoryFallsBack) {
  // 64 x 64 f32 (16 KiB) and an 8-deep staging (5 KiB) fit in 3/4 of 32 KiB: tensor_ops, with
  // K staged in chunks.
  kernels::GemmConfig fits;
  fits.block_m = fits.block_n = fits.block_k = 64;
  std::string big = msl_of(kernels::gemm(fits), apple_gpu_target(10, true));
  EXPECT_NE(big.find("matmul2d"), std::string::npos);
  // 128 x 128 f32 is 64 KiB, more than the memory: the atom after tensor_ops is taken.
  kernels::GemmConfig g;
  g.block_m = g.block_n = 128;
  g.block_k = 16;
  std::string msl = msl_of(kernels::gemm(g), apple_gpu_target(10, true));
  EXPECT_EQ(msl.find("matmul2d"), std::string::npos);
  EXPECT_NE(msl.find("simdgroup_multiply_accumulate"), std::string::npos);
}

// Runs with and without METILE_METAL_SIM_FAMILY (ctest metal_sim_tensor_ops sets apple10):
// the device's kernels use matmul2d exactly when the emulated family has it.
TEST(MetalSimTensorOps, FamilyFromEnvironmentDecidesTheDotPath) {
  METAL_SIM_REQUIRE_CLANG();
  std::string family = env_string("METILE_METAL_SIM_FAMILY", "apple7");
  bool tensor_ops = family == "apple9" || family == "apple10";
  std::shared_ptr<Device> dev = open_device("metal-sim");
  EXPECT_NE(dev->info().description.find(family), std::string::npos) << dev->info().description;
  EXPECT_NE(dev->cache_identity().find(family), std::string::npos);
  kernels::GemmConfig g;
  g.dtype = DType::f16;
  Artifact a = dev->build(kernels::gemm(g), {});
  EXPECT_EQ(a.sources[Stage::msl].find("mpp::tensor_ops::matmul2d") != std::string::npos, tensor_ops)
      << family;
}

TEST(MetalSimTensorOps, UnknownFamilyIsAnError) {
  METAL_SIM_REQUIRE_CLANG();
  const DeviceEntry* sim = nullptr;
  for (const DeviceEntry& e : device_registry())
    if (std::string(e.name) == "metal-sim") sim = &e;
  ASSERT_NE(sim, nullptr);
  std::string saved = env_string("METILE_METAL_SIM_FAMILY");
  setenv("METILE_METAL_SIM_FAMILY", "apple11", 1);
  auto [status, message] = metal_sim::testing::error_of([&] { sim->create(); });
  if (saved.empty())
    unsetenv("METILE_METAL_SIM_FAMILY");
  else
    setenv("METILE_METAL_SIM_FAMILY", saved.c_str(), 1);
  EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("METILE_METAL_SIM_FAMILY is \"apple11\""), std::string::npos) << message;
  EXPECT_NE(message.find("metal-sim"), std::string::npos) << message;
}

// ---- the shim's tensor_ops (tests/metal/tensor_ops.metal) -------------------------------------

using metal_sim::MslArg;
using metal_sim::SimArg;
using B = metal_sim::MslBuiltin;

TEST(MetalSimTensorOps, Matmul2dMatchesFloat64WithEdgesAndDynamicK) {
  METAL_SIM_REQUIRE_CLANG();
  metal_sim::SimKernel k = metal_sim::compile_msl(
      metal_sim::testing::read_metal("tensor_ops.metal"),
      {"mtile_matmul2d",
       {MslArg::buffer("A", 0, DType::f32, true), MslArg::buffer("B", 1, DType::f16, true),
        MslArg::buffer("C", 2, DType::f32, false), MslArg::scalar("M", 3, DType::i32),
        MslArg::scalar("N", 4, DType::i32), MslArg::scalar("K", 5, DType::i32),
        MslArg::scalar("accumulate", 6, DType::i32)}});
  const int M = 13, N = 11, K = 21;  // inside the 16 x 16 descriptor: rows and columns at edges
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(M * K), bf(K * N), c0(M * N);
  std::vector<uint16_t> b(K * N);
  for (float& v : a) v = dist(rng);
  for (int i = 0; i < K * N; ++i) bf[i] = std::round(dist(rng) * 8) / 8, b[i] = float_to_f16(bf[i]);
  for (float& v : c0) v = dist(rng);
  auto i32 = [](int v) { return SimArg::scalar(static_cast<uint32_t>(v)); };
  for (int accumulate : {0, 1}) {
    std::vector<float> c = c0;
    c.resize(M * N + 32, 7.0f);  // past C: must stay untouched
    k.launch({1, 1, 1}, {32, 1, 1},
             {SimArg::buffer(a.data()), SimArg::buffer(b.data()), SimArg::buffer(c.data()), i32(M),
              i32(N), i32(K), i32(accumulate)});
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double want = accumulate ? c0[i * N + j] : 0.0;
        for (int p = 0; p < K; ++p) want += double(a[i * K + p]) * bf[p * N + j];
        ASSERT_NEAR(c[i * N + j], want, 1e-5) << i << "," << j << " accumulate " << accumulate;
      }
    for (int i = M * N; i < M * N + 32; ++i) ASSERT_EQ(c[i], 7.0f) << "wrote past C at " << i;
  }
}

TEST(MetalSimTensorOps, RunFromPartOfTheSimdgroupIsAnError) {
  METAL_SIM_REQUIRE_CLANG();
  metal_sim::SimKernel k = metal_sim::compile_msl(
      metal_sim::testing::read_metal("tensor_ops.metal"),
      {"mtile_matmul2d_divergent",
       {MslArg::buffer("C", 0, DType::f32, false),
        MslArg::builtin_arg("slid", B::thread_index_in_simdgroup)}});
  std::vector<float> c(64);
  auto [status, message] = metal_sim::testing::error_of(
      [&] { k.launch({1, 1, 1}, {32, 1, 1}, {SimArg::buffer(c.data())}); });
  EXPECT_EQ(status, METILE_ERROR_DEVICE);
  EXPECT_NE(message.find("matmul2d::run"), std::string::npos) << message;
  EXPECT_NE(message.find("simd_sum"), std::string::npos) << message;
}

// The metal device: the stand-in's supportsFamily: answers per METILE_STANDIN_GPU_FAMILY
// (ctest metal_standin_tensor_ops: apple10 with Metal 4; metal_standin_unit: an M1).
TEST(MetalDeviceTensorOps, SupportedFamilyDecidesTheDotPath) {
  const DeviceEntry* metal = nullptr;
  for (const DeviceEntry& e : device_registry())
    if (std::string(e.name) == "metal") metal = &e;
  ASSERT_NE(metal, nullptr);
  if (!metal->probe().empty()) GTEST_SKIP() << metal->probe();
  std::string family = env_string("METILE_STANDIN_GPU_FAMILY", "apple7");
  bool tensor_ops = family == "apple9" || family == "apple10";
  std::shared_ptr<Device> dev = open_device("metal");
  EXPECT_EQ(dev->info().architecture, family);
  kernels::GemmConfig g;
  g.dtype = DType::bf16;
  Artifact a = dev->build(kernels::gemm(g), {});
  EXPECT_EQ(a.sources[Stage::msl].find("mpp::tensor_ops::matmul2d") != std::string::npos, tensor_ops)
      << family;
}

}  // namespace
}  // namespace metile

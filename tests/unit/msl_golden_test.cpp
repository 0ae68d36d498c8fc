// Golden MSL: the emitted text of a few suite kernels, kept in tests/golden/*.metal and reviewed
// like code (names, casts, coalesced and vectorized accesses). A change to the emitter that
// changes them shows up as a diff; after reviewing it, regenerate with
//   METILE_UPDATE_GOLDEN=1 ./build/tests/metile_unit --gtest_filter='MslGolden*'
#include <gtest/gtest.h>

#include "codegen/metal/msl.h"
#include "golden.h"
#include "kernels/kernels.h"
#include "passes/pipeline.h"

namespace metile {
namespace METILE_UNITY_ID {

void check_golden(const Program& program, const std::string& file,
                  const GpuTarget& target = apple_gpu_target()) {
  std::string msl = emit_msl(run_gpu_pipeline(program, target, {}, "metal-sim").function).source;
  expect_golden(msl, file, "the MSL of " + program.name);
}

TEST(MslGolden, VectorAdd) { check_golden(kernels::vector_add(1024), "vector_add.metal"); }
TEST(MslGolden, Softmax) { check_golden(kernels::softmax(1024), "softmax.metal"); }
TEST(MslGolden, Layernorm) { check_golden(kernels::layernorm(1024), "layernorm.metal"); }
TEST(MslGolden, Fft) { check_golden(kernels::fft(256), "fft.metal"); }
TEST(MslGolden, GemmBiasGelu) {
  kernels::GemmConfig g;
  g.bias = true;
  g.bounds = true;
  g.epilogue = kernels::Epilogue::gelu;
  check_golden(kernels::gemm(g), "gemm_bias_gelu.metal");
}
// Metal 4 tensor_ops (apple10, an M5): reviewed against MetalPerformancePrimitives'
// MPPTensorOpsMatMul2d.h (matmul2d_descriptor, matmul2d<descriptor, execution_simdgroup>, run,
// get_destination_cooperative_tensor, cooperative tensor load/store) and <metal_tensor>'s
// tensor<threadgroup T, dextents<int32_t, 2>, tensor_inline>(pointer, extents, strides).
TEST(MslGolden, GemmTensorOpsF16) {
  kernels::GemmConfig g;
  g.dtype = DType::f16;
  g.bounds = true;
  check_golden(kernels::gemm(g), "gemm_tensor_ops_f16.metal", apple_gpu_target(10, true));
}

}  // namespace
}  // namespace metile

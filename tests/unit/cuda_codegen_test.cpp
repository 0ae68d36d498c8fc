// CUDA C++ from the GPU IR, compiled by NVRTC for sm_90 without a GPU (as CI does): every case of
// the shared kernel suite either compiles to a cubin or, for ops the GPU path does not lower yet
// (dot), fails with METILE_ERROR_UNSUPPORTED naming the op and the device. On a machine with a
// GPU the same cases run through the parameterized device suite (interp_kernels_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "kernels/kernels.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"

namespace metile {
namespace {

bool have_nvrtc() {
  std::string why;
  return cuda::load_nvrtc(&why) != nullptr;
}

class CudaCodegen : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaCodegen, CompilesForSm90) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  kernels::Case c = kernels::make_case(GetParam());
  CompileOptions options;
  options.allow_tf32 = 0;
  try {
    Artifact a = cuda_build_program(c.program, options, "sm_90");
    EXPECT_EQ(a.kind, "cubin");
    ASSERT_GT(a.bytes.size(), 4u);
    EXPECT_EQ(std::memcmp(a.bytes.data(), "\x7f" "ELF", 4), 0);
    const std::string& src = a.sources.at("cuda");
    EXPECT_NE(src.find("extern \"C\" __global__ void __launch_bounds__("), std::string::npos);
    EXPECT_NE(src.find(" " + c.program.name + "("), std::string::npos) << "named after the program";
    EXPECT_GE(a.threads_per_group, 32);
  } catch (const Error& e) {
    ASSERT_EQ(e.status(), METILE_ERROR_UNSUPPORTED) << e.what();
    EXPECT_NE(std::string(e.what()).find("dot"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

// One case per kernel and shape family keeps NVRTC time down; the full list runs on the GPU.
std::vector<std::string> cases() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& n : kernels::case_names()) {
    std::string kernel = n.substr(0, n.find('/'));
    if (seen.insert(kernel).second || n.find("ragged") != std::string::npos) out.push_back(n);
  }
  return out;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s;
  for (char ch : info.param) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Suite, CudaCodegen, ::testing::ValuesIn(cases()), test_name);

TEST(CudaCodegenSource, VectorAddIsCoalescedAndVectorized) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  Artifact a = cuda_build_program(kernels::vector_add(1024), CompileOptions{}, "sm_90");
  const std::string& src = a.sources.at("cuda");
  EXPECT_NE(src.find("mt_vec<float, 4>"), std::string::npos) << src;
  EXPECT_NE(src.find("blockIdx.x"), std::string::npos) << src;
  EXPECT_NE(src.find("const float* __restrict__ X"), std::string::npos) << src;
}

}  // namespace
}  // namespace metile

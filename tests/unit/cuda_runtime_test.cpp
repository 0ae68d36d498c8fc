// The cuda runtime below code generation: NVRTC compiles (also without a GPU, as in CI) and, on a
// machine with an NVIDIA GPU, hand-written kernels launched through the driver API.
#include <gtest/gtest.h>

#include <cstring>

#include "frontend/builder.h"
#include "runtime/backends.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

const char* kAddSource = R"(
extern "C" __global__ void add(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] + y[i];
}
)";

bool have_nvrtc() {
  std::string why;
  return cuda::load_nvrtc(&why) != nullptr;
}

TEST(CudaRuntime, NvrtcCompilesForSm90WithoutAGpu) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  std::string cubin = cuda::nvrtc_compile(kAddSource, "add", "sm_90");
  ASSERT_GT(cubin.size(), 4u);
  EXPECT_EQ(std::memcmp(cubin.data(), "\x7f" "ELF", 4), 0) << "a cubin is an ELF image";
  EXPECT_NE(cuda::nvrtc_version().find("nvrtc "), std::string::npos);
}

TEST(CudaRuntime, NvrtcErrorCarriesTheLog) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  try {
    cuda::nvrtc_compile("extern \"C\" __global__ void k() { undefined_name = 1; }", "k", "sm_90");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_COMPILE);
    EXPECT_NE(std::string(e.what()).find("undefined_name"), std::string::npos) << e.what();
  }
}

TEST(CudaRuntime, DeviceUnavailableSaysWhy) {
  std::string why = probe_cuda_device();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  try {
    open_device("cuda");
    FAIL() << "expected DEVICE_UNAVAILABLE";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_DEVICE_UNAVAILABLE);
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(CudaRuntime, HandWrittenKernelRunsOnTheGpu) {
  std::string why = probe_cuda_device();
  if (!why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto dev = open_device("cuda");
  Builder b("add");
  b.param("x", Type::ptr(DType::f32));
  b.param("y", Type::ptr(DType::f32));
  b.param("out", Type::ptr(DType::f32));
  b.param("n", Type::scalar(DType::i32));
  auto prog = std::make_shared<const Program>(b.finish());
  Artifact a = cuda_build_from_source({kAddSource, "add", 128, 0, ""}, dev->info().architecture);
  auto kernel = dev->load(prog, CompileOptions{}, a);
  const int n = 1000;
  auto x = dev->alloc(n * 4), y = dev->alloc(n * 4), out = dev->alloc(n * 4);
  for (int i = 0; i < n; ++i) {
    static_cast<float*>(x->contents())[i] = float(i);
    static_cast<float*>(y->contents())[i] = 0.5f * i;
  }
  std::vector<LaunchArg> args(4);
  args[0].buffer = x.get();
  args[1].buffer = y.get();
  args[2].buffer = out.get();
  args[3].bits = n;
  Grid g;
  g.dims = {(n + 127) / 128, 1, 1};
  kernel->launch(g, args);
  dev->synchronize();
  const float* o = static_cast<float*>(out->contents());
  for (int i = 0; i < n; ++i) ASSERT_EQ(o[i], 1.5f * i) << i;
}

}  // namespace
}  // namespace metile

// The resources a compiled kernel reports (metile_kernel_get_info: threadgroup memory used and
// allowed, threads, registers) and the threadgroup-memory limit compiling enforces, on the
// devices this machine has (interp, cpu, metal-sim) and on CUDA's compile-only path (NVRTC).
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <cstring>

#include "ir/gpu_ir.h"
#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/metal_sim/toolchain.h"
#include "support/error.h"
#include "target/gpu_target.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

// Out[i] = S[i] + 1 through a threadgroup array of `elements` f32.
Program shared_user(const char* name, int64_t elements) {
  KernelBuilder k(name);
  V out = k.ptr("Out");
  k.raw().set_num_threads(64);
  V s = k.shared(elements);
  V tid = k.thread_id();
  k.store(s + tid, k.cast(tid, DType::f32));
  k.barrier();
  k.store(out + tid, k.load(s + tid) + 1.0);
  return k.finish();
}

metile_device* open(const char* name) {
  metile_device* d = nullptr;
  if (metile_device_open(&d, name) != METILE_OK) return nullptr;
  return d;
}

metile_program* to_handle(const Program& p) {
  metile_program* h = nullptr;
  EXPECT_EQ(metile_program_parse(&h, print(p).c_str()), METILE_OK) << metile_last_error();
  return h;
}

struct Compiled {
  metile_status status;
  std::string error;
  metile_kernel* kernel;
};

Compiled compile(metile_device* d, const Program& p) {
  metile_program* prog = to_handle(p);
  Compiled c{METILE_OK, "", nullptr};
  c.status = metile_kernel_compile(&c.kernel, d, prog, nullptr);
  if (c.status != METILE_OK) c.error = metile_last_error();
  metile_program_release(prog);
  return c;
}

uint64_t device_limit(metile_device* d) {
  metile_device_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(metile_device_get_info(d, &info), METILE_OK);
  return info.threadgroup_memory_bytes;
}

// Each device reports what the kernel uses, the limit compiling checked it against (the
// device's own), and no register count (only cuda knows one).
TEST(KernelResources, InfoReportsUseLimitAndRegisters) {
  int devices = 0;
  for (const char* name : {"interp", "cpu", "metal-sim"}) {
    metile_device* d = open(name);
    if (d == nullptr) continue;  // metal-sim without a usable clang
    ++devices;
    Compiled c = compile(d, shared_user("tg_user", 1000));
    ASSERT_EQ(c.status, METILE_OK) << name << ": " << c.error;
    metile_kernel_info info = METILE_KERNEL_INFO_INIT;
    ASSERT_EQ(metile_kernel_get_info(c.kernel, &info), METILE_OK) << metile_last_error();
    EXPECT_EQ(info.threadgroup_memory_bytes, 4000u) << name;  // 1000 f32, 16-byte aligned
    EXPECT_EQ(info.threadgroup_memory_limit, device_limit(d)) << name;
    EXPECT_GT(info.threadgroup_memory_limit, info.threadgroup_memory_bytes) << name;
    EXPECT_EQ(info.registers_per_thread, 0) << name;
    EXPECT_EQ(info.threads_per_group, 64) << name;
    metile_kernel_release(c.kernel);
    metile_device_release(d);
  }
  EXPECT_GE(devices, 2);
}

// A caller built against the struct before threadgroup_memory_limit passes the old size: the
// fields it has are filled, the bytes after them are not touched; a smaller size is refused.
TEST(KernelResources, InfoKeepsTheOlderStructSize) {
  metile_device* d = open("interp");
  ASSERT_NE(d, nullptr);
  Compiled c = compile(d, shared_user("tg_user", 100));
  ASSERT_EQ(c.status, METILE_OK) << c.error;
  metile_kernel_info info;
  std::memset(&info, 0xab, sizeof info);
  info.struct_size = METILE_KERNEL_INFO_V1_SIZE;
  ASSERT_EQ(metile_kernel_get_info(c.kernel, &info), METILE_OK) << metile_last_error();
  EXPECT_EQ(info.threadgroup_memory_bytes, 400u);
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(&info) + METILE_KERNEL_INFO_V1_SIZE;
  for (size_t i = 0; i < sizeof info - METILE_KERNEL_INFO_V1_SIZE; ++i) EXPECT_EQ(tail[i], 0xab) << i;
  info.struct_size = METILE_KERNEL_INFO_V1_SIZE - 8;
  EXPECT_EQ(metile_kernel_get_info(c.kernel, &info), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(metile_last_error()).find("struct_size 32 is too small"), std::string::npos)
      << metile_last_error();
  metile_kernel_release(c.kernel);
  metile_device_release(d);
}

// The metal-sim device checks against its emulated Apple family's limit; the error names the
// kernel, the bytes and the limit.
TEST(KernelResources, MetalSimRefusesAKernelOverItsFamilysLimit) {
  metile_device* d = open("metal-sim");
  if (d == nullptr) GTEST_SKIP() << "no metal-sim: " << metile_last_error();
  EXPECT_EQ(device_limit(d), apple_gpu_target().threadgroup_memory_bytes);
  Compiled fits = compile(d, shared_user("fits", 8192));  // exactly 32 KiB
  EXPECT_EQ(fits.status, METILE_OK) << fits.error;
  if (fits.kernel) metile_kernel_release(fits.kernel);
  Compiled c = compile(d, shared_user("too_big", 8193));
  EXPECT_EQ(c.status, METILE_ERROR_UNSUPPORTED);
  EXPECT_NE(c.error.find("too_big needs 32784 bytes of threadgroup memory; metal-sim allows 32768"),
            std::string::npos)
      << c.error;
  metile_device_release(d);
}

// Without a GPU the CUDA path still lowers and compiles: the limit is the architecture's
// opt-in one (227 KiB on sm_90, the H100/H200 value), or the device's when one is open
// (cuda_build_program's shared_memory_limit, from MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).
TEST(KernelResources, CudaChecksTheDevicesSharedMemoryLimit) {
  const Program p = shared_user("smem_user", 20000);  // 80000 bytes: over 48 KiB, under 227 KiB
  GpuPipelineResult r = run_gpu_pipeline(p, nvidia_gpu_target("sm_90"), {}, "cuda");
  EXPECT_EQ(gpu::threadgroup_bytes(r.function), 80000u);
  auto error = [&](uint64_t limit) -> std::string {
    try {
      cuda_build_program(p, {}, "sm_90", limit);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED) << e.what();
      return e.what();
    }
    return "";
  };
  // A device that allows only 48 KiB (what pre-Volta GPUs opt into) refuses it before NVRTC.
  EXPECT_NE(error(48 * 1024).find("smem_user needs 80000 bytes of threadgroup memory; cuda allows 49152"),
            std::string::npos);
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  Artifact a = cuda_build_program(p, {}, "sm_90");  // 227 KiB: fits
  EXPECT_EQ(a.threadgroup_memory_bytes, 80000u);
  a = cuda_build_program(p, {}, "sm_90", 227 * 1024);
  EXPECT_EQ(a.threadgroup_memory_bytes, 80000u);
  EXPECT_NE(error(79999).find("cuda allows 79999"), std::string::npos);
}

// A TF32 128x128x32 GEMM with a bias + gelu epilogue on sm_80 (163 KiB): three K-loop stages fit the
// pipeline's budget but not beside the epilogue's arrays, so the epilogue's arrays take the
// stages' memory (allocate-threadgroup-memory) and the three stages stay, in less memory than two
// stages with the arrays apart; a num_stages=3 asked for on a much smaller device is refused,
// naming the largest arrays; sm_90 keeps three with the arrays apart. The epilogue's arrays are
// the bias row's exchange, so the bias is loaded canonically (broadcast_loads off: loaded where
// the broadcast reads it, the epilogue needs no array at all).
TEST(KernelResources, OverTheLimitTheEpilogueReusesThePipelinesMemory) {
  const kernels::Case c = kernels::make_case("gemm_tf32_big_bias_gelu/128x128x64");
  const GpuTarget sm80 = nvidia_gpu_target("sm_80");
  auto lowered = [&](const GpuTarget& t, int stages) {
    CompileOptions o;
    o.allow_tf32 = c.allow_tf32;
    o.dot_precision = c.dot_precision;
    o.num_stages = stages;
    o.disabled_passes = {"broadcast_loads"};
    return run_gpu_pipeline(c.program, t, o, "cuda").function;
  };
  auto bytes = [&](const GpuTarget& t, int stages) { return gpu::threadgroup_bytes(lowered(t, stages)); };
  const uint64_t chosen = bytes(sm80, 0);
  EXPECT_LE(chosen, sm80.threadgroup_memory_bytes);
  EXPECT_EQ(chosen, bytes(sm80, 3)) << "three stages, not two";
  EXPECT_LT(chosen, bytes(sm80, 2)) << "two stages fit with the arrays apart";
  // The staged operands start at 0, and an epilogue array there too.
  const std::string ir = gpu::print(lowered(sm80, 0));
  EXPECT_NE(ir.find("%a_smem: ptr<f32, threadgroup> = alloc shape=\"128x32\" stages=3 layout=\"pad4\" offset=0\n"),
            std::string::npos) << ir;
  EXPECT_NE(ir.find("layout=\"linear\" offset=0\n"), std::string::npos) << ir;
  GpuTarget smaller = sm80;
  smaller.threadgroup_memory_bytes = 80000;
  try {
    bytes(smaller, 3);
    ADD_FAILURE() << "num_stages=3 fits in " << smaller.threadgroup_memory_bytes;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED);
    const std::string what = e.what();
    EXPECT_NE(what.find("[allocate-threadgroup-memory] matmul_gelu_bias needs "),
              std::string::npos) << what;
    EXPECT_NE(what.find("cuda allows 80000 (largest arrays: "), std::string::npos) << what;
    EXPECT_NE(what.find("scratch_f32 65536 (f32 16384)"), std::string::npos) << what;
  }
  // Too small for any stage count: the error names no num_stages where none was asked for, or
  // where it was 1.
  GpuTarget small = sm80;
  small.threadgroup_memory_bytes = 50000;
  for (int stages : {0, 1}) {
    try {
      bytes(small, stages);
      ADD_FAILURE() << "fits in 50000 bytes";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(" bytes of threadgroup memory; cuda allows 50000"), std::string::npos) << what;
      EXPECT_EQ(what.find("num_stages"), std::string::npos) << what;
    }
  }
  const GpuTarget sm90 = nvidia_gpu_target("sm_90");
  EXPECT_EQ(bytes(sm90, 0), bytes(sm90, 3));
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  CompileOptions o;
  o.allow_tf32 = c.allow_tf32;
  o.dot_precision = c.dot_precision;
  EXPECT_EQ(cuda_build_program(c.program, o, "sm_80").threadgroup_memory_bytes, chosen);
}

}  // namespace
}  // namespace metile

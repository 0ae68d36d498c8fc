// The "metal-sim" device: registry entry, buffers, build() through the GPU pipeline and the MSL
// emitter, and loading an MSL artifact through the Device/Kernel interface.
#include "runtime/metal_sim/metal_sim_device.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/kernels.h"
#include "metal_sim_test_util.h"
#include "runtime/backends.h"
#include "support/env.h"

namespace metile::metal_sim {
namespace METILE_UNITY_ID {

using testing::error_of;

TEST(MetalSimDevice, RegisteredAndDescribed) {
  bool found = false;
  for (const DeviceEntry& e : device_registry()) found |= std::string(e.name) == "metal-sim";
  EXPECT_TRUE(found);
  METAL_SIM_REQUIRE_CLANG();
  EXPECT_EQ(probe_metal_sim_device(), "");
  std::shared_ptr<Device> dev = open_device("metal-sim");
  const DeviceInfo& info = dev->info();
  EXPECT_EQ(info.name, "metal-sim");
  EXPECT_EQ(info.simd_width, 32);
  EXPECT_EQ(info.max_threads_per_group, 1024);
  EXPECT_EQ(info.threadgroup_memory_bytes, 32768u);
  EXPECT_TRUE(info.unified_memory);
  EXPECT_NE(info.description.find(probe_clang().clang.version), std::string::npos);
  EXPECT_NE(dev->cache_identity().find("metal-sim;"), std::string::npos);
}

// METILE_METAL_SIM_OPT picks the kernels' optimization level, which the cache identity carries
// (an -O0 build is not served to an -O2 process); a bad level fails opening the device by name.
TEST(MetalSimDevice, OptimizationLevelIsPartOfTheIdentityAndChecked) {
  METAL_SIM_REQUIRE_CLANG();
  const DeviceEntry* sim = nullptr;  // a fresh device each time (open_device keeps one)
  for (const DeviceEntry& e : device_registry())
    if (std::string(e.name) == "metal-sim") sim = &e;
  ASSERT_NE(sim, nullptr);
  const std::string saved = env_string("METILE_METAL_SIM_OPT");
  auto restore = [&] {
    if (saved.empty())
      unsetenv("METILE_METAL_SIM_OPT");
    else
      setenv("METILE_METAL_SIM_OPT", saved.c_str(), 1);
  };
  setenv("METILE_METAL_SIM_OPT", "0", 1);
  const std::string o0 = sim->create()->cache_identity();
  setenv("METILE_METAL_SIM_OPT", "2", 1);
  const std::string o2 = sim->create()->cache_identity();
  EXPECT_NE(o0, o2);
  EXPECT_NE(o0.find(";O0"), std::string::npos) << o0;
  for (const char* bad : {"4", "-1", "O2", "fast", "22"}) {
    setenv("METILE_METAL_SIM_OPT", bad, 1);
    auto [status, message] = error_of([&] { sim->create(); });
    EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find(cat("METILE_METAL_SIM_OPT is \"", bad, "\"")), std::string::npos) << message;
  }
  restore();
}

TEST(MetalSimDevice, BuffersArePageAlignedHostMemory) {
  METAL_SIM_REQUIRE_CLANG();
  std::shared_ptr<Device> dev = open_device("metal-sim");
  auto b = dev->alloc(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->contents()) % 4096, 0u);
  EXPECT_EQ(b->size(), 1000u);
  // shares_memory() means "uses the memory given to wrap() in place" on every device.
  EXPECT_FALSE(b->shares_memory());
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(static_cast<unsigned char*>(b->contents())[i], 0);
  std::vector<float> host(10, 1.0f);
  auto w = dev->wrap(host.data(), host.size() * sizeof(float));
  EXPECT_EQ(w->contents(), host.data());
  EXPECT_TRUE(w->shares_memory());
  EXPECT_EQ(w->device, dev.get());
}

TEST(MetalSimDevice, BuildEmitsMslThroughTheGpuPipeline) {
  METAL_SIM_REQUIRE_CLANG();
  std::shared_ptr<Device> dev = open_device("metal-sim");
  Artifact art = dev->build(kernels::vector_add(1024), CompileOptions{});
  EXPECT_EQ(art.kind, ArtifactKind::shared_object);
  EXPECT_EQ(art.threads_per_group, 256);
  for (Stage stage : {Stage::gpu_ir, Stage::gpu_ir_opt, Stage::msl, Stage::msl_signature})
    EXPECT_FALSE(art.sources[stage].empty()) << stage_name(stage);
  EXPECT_NE(art.sources[Stage::msl].find("[[kernel]] void vector_add("), std::string::npos);
  Artifact gemm = dev->build(kernels::gemm({}), CompileOptions{});
  EXPECT_NE(gemm.sources[Stage::msl].find("simdgroup_multiply_accumulate("), std::string::npos);
}

MslSignature vector_add_signature() {
  return {"mtile_vector_add",
          {MslArg::buffer("X", 0, DType::f32, true), MslArg::buffer("Y", 1, DType::f32, true),
           MslArg::buffer("Out", 2, DType::f32, false), MslArg::scalar("N", 3, DType::i32),
           MslArg::builtin_arg("tid", MslBuiltin::thread_position_in_grid)}};
}

TEST(MetalSimDevice, LoadsAnMslArtifactAndLaunchesIt) {
  METAL_SIM_REQUIRE_CLANG();
  std::shared_ptr<Device> dev = open_device("metal-sim");
  std::string msl = testing::read_metal("vector_add.metal");
  Artifact art = make_msl_artifact(msl, vector_add_signature(), 128);
  EXPECT_EQ(art.kind, ArtifactKind::shared_object);
  EXPECT_EQ(art.sources.at(Stage::msl), msl);
  EXPECT_EQ(parse_signature(art.sources.at(Stage::msl_signature)), vector_add_signature());
  EXPECT_FALSE(art.bytes.empty());

  std::shared_ptr<Kernel> kernel = dev->load(nullptr, CompileOptions{}, art);
  const int n = 300;
  auto x = dev->alloc(n * 4), y = dev->alloc(n * 4), out = dev->alloc(n * 4);
  auto* xp = static_cast<float*>(x->contents());
  auto* yp = static_cast<float*>(y->contents());
  for (int i = 0; i < n; ++i) xp[i] = float(i), yp[i] = 0.5f;
  Grid grid;
  grid.dims = {3, 1, 1};  // 3 groups of 128 threads cover 300 elements
  std::vector<LaunchArg> args(4);
  args[0].buffer = x.get();
  args[1].buffer = y.get();
  args[2].buffer = out.get();
  args[3].bits = n;
  std::unique_ptr<PreparedLaunch> launch = kernel->prepare(grid, args);
  launch->run();
  auto* op = static_cast<float*>(out->contents());
  for (int i = 0; i < n; ++i) ASSERT_EQ(op[i], float(i) + 0.5f) << i;

  // A byte offset into a buffer reaches the kernel as a shifted pointer.
  args[0].offset = 4 * 100;
  args[3].bits = 50;
  kernel->launch(grid, args);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(op[i], float(i + 100) + 0.5f) << i;
}

TEST(MetalSimDevice, RejectsBadArtifactsAndArguments) {
  METAL_SIM_REQUIRE_CLANG();
  std::shared_ptr<Device> dev = open_device("metal-sim");
  Artifact wrong;
  wrong.kind = ArtifactKind::cubin;
  auto [status, message] = error_of([&] { dev->load(nullptr, CompileOptions{}, wrong); });
  EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("not a metal-sim kernel"), std::string::npos) << message;

  Artifact garbage;
  garbage.kind = ArtifactKind::shared_object;
  garbage.bytes = {1, 2, 3};
  garbage.sources[Stage::msl_signature] = print_signature(vector_add_signature());
  std::tie(status, message) = error_of([&] { dev->load(nullptr, CompileOptions{}, garbage); });
  EXPECT_EQ(status, METILE_ERROR_DEVICE);
  EXPECT_NE(message.find("cannot load the compiled kernel"), std::string::npos) << message;

  garbage.sources[Stage::msl_signature] =
      "kernel k\nthreadgroup a 0 f32 8192\nthreadgroup b 1 f32 8192\n";
  std::tie(status, message) = error_of([&] { dev->load(nullptr, CompileOptions{}, garbage); });
  EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("arguments need 65536 bytes"), std::string::npos) << message;

  Artifact art =
      make_msl_artifact(testing::read_metal("vector_add.metal"), vector_add_signature(), 64);
  std::shared_ptr<Kernel> kernel = dev->load(nullptr, CompileOptions{}, art);
  auto b = dev->alloc(64);
  std::vector<LaunchArg> args(4);
  args[0].buffer = args[1].buffer = args[2].buffer = b.get();
  std::tie(status, message) = error_of([&] { kernel->prepare(Grid{}, {args[0]}); });
  EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("1 launch arguments for 4 parameters"), std::string::npos) << message;
  args[3].buffer = b.get();
  std::tie(status, message) = error_of([&] { kernel->prepare(Grid{}, args); });
  EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("argument 'N' is a scalar, not a buffer"), std::string::npos) << message;
}

}  // namespace
}  // namespace metile::metal_sim

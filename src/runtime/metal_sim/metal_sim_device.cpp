#include "runtime/metal_sim/metal_sim_device.h"

#include "codegen/metal/msl.h"
#include "codegen/prelude/metal_sim_abi.h"
#include "passes/pipeline.h"
#include "runtime/backends.h"
#include "runtime/host_buffer.h"
#include "runtime/metal_sim/fiber.h"
#include "runtime/metal_sim/sim_kernel.h"
#include "runtime/metal_sim/toolchain.h"
#include "support/env.h"
#include "support/error.h"

namespace metile {

namespace {

using metal_sim::MslArg;
using metal_sim::MslSignature;
using metal_sim::SimArg;
using metal_sim::SimKernel;

#if defined(__x86_64__)
constexpr const char* kHostCpu = "x86_64";
#elif defined(__aarch64__)
constexpr const char* kHostCpu = "arm64";
#else
constexpr const char* kHostCpu = "unsupported";
#endif

class SimLaunch final : public PreparedLaunch {
 public:
  SimLaunch(SimKernel kernel, uint32_t threads) : kernel_(std::move(kernel)), threads_(threads) {}
  void run() override {
    std::vector<SimArg> sim_args;
    sim_args.reserve(args.size());
    for (const LaunchArg& a : args)
      sim_args.push_back(a.buffer
                             ? SimArg::buffer(static_cast<char*>(a.buffer->contents()) + a.offset)
                             : SimArg::scalar(a.bits));
    kernel_.launch(grid.dims, {threads_, 1, 1}, sim_args);
  }

 private:
  SimKernel kernel_;  // shares the loaded library, so the launch may outlive its Kernel
  uint32_t threads_;
};

class SimDeviceKernel final : public Kernel {
 public:
  SimDeviceKernel(SimKernel kernel, int threads) : kernel_(std::move(kernel)), threads_(threads) {}
  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override {
    const MslSignature& sig = kernel_.signature();
    if (args.size() != sig.launch_arg_count())
      fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", sig.kernel, ": ", args.size(),
           " launch arguments for ", sig.launch_arg_count(), " parameters");
    size_t next = 0;
    for (const MslArg& a : sig.args) {
      if (a.kind != MslArg::Kind::buffer && a.kind != MslArg::Kind::scalar &&
          a.kind != MslArg::Kind::member)
        continue;
      if ((a.kind == MslArg::Kind::buffer) != (args[next].buffer != nullptr))
        fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", sig.kernel, ": argument '", a.name,
             a.kind == MslArg::Kind::buffer ? "' needs a buffer" : "' is a scalar, not a buffer");
      ++next;
    }
    auto launch = std::make_unique<SimLaunch>(kernel_, static_cast<uint32_t>(threads_));
    launch->grid = grid;
    launch->args = std::move(args);
    return launch;
  }

 private:
  SimKernel kernel_;
  int threads_;
};

/**
 * The Apple GPU family metal-sim emulates: METILE_METAL_SIM_FAMILY ("apple7" ... "apple10"),
 * default apple7 (simdgroup_matrix dots). From apple9 on the family is taken to have Metal 4, so
 * dots lower to tensor_ops (matmul2d), which metal_shim_tensor.h runs.
 */
int emulated_family() {
  std::string name = env_string("METILE_METAL_SIM_FAMILY");
  if (name.empty()) return kAppleDefaultFamily;
  int family = apple_family_from_name(name);
  if (family < kAppleDefaultFamily)
    fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", "METILE_METAL_SIM_FAMILY is \"", name,
         "\"; metal-sim emulates apple7, apple8, apple9 or apple10");
  return family;
}

class MetalSimDevice final : public Device {
 public:
  MetalSimDevice() {
    const metal_sim::Clang& clang = metal_sim::probe_clang().clang;
    const int family = emulated_family();
    target_ = apple_gpu_target(family, family >= kAppleTensorOpsFamily);
    info_.name = "metal-sim";
    info_.description = cat("Metal Shading Language on the host CPU (", clang.version,
                            ", one fiber per GPU thread, apple", family, ")");
    info_.architecture = cat("metal-sim-", kHostCpu);
    info_.simd_width = METAL_SIM_SIMD_WIDTH;
    info_.max_threads_per_group = static_cast<int>(metal_sim::kMaxThreadsPerGroup);
    info_.threadgroup_memory_bytes = metal_sim::kThreadgroupMemoryLimit;
    info_.unified_memory = true;
    info_.asynchronous = false;
    identity_ = cat("metal-sim;", kHostCpu, ";", clang.version, ";abi=", METAL_SIM_ABI_VERSION,
                    ";apple", family, ";O", metal_sim::opt_level());
  }

  const DeviceInfo& info() const override { return info_; }

  // The simulated GPU addresses host memory directly.
  std::shared_ptr<Buffer> alloc(size_t bytes) override {
    return alloc_host_buffer(this, bytes, "metal-sim");
  }
  std::shared_ptr<Buffer> wrap(void* host, size_t bytes) override {
    return wrap_host_buffer(this, host, bytes);
  }

  std::string cache_identity() const override { return identity_; }

  Artifact build(const Program& program, const CompileOptions& options) override {
    GpuPipelineResult gpu = run_gpu_pipeline(program, target_, options, "metal-sim");
    MslKernel msl = emit_msl(gpu.function);
    Artifact a = metal_sim::make_msl_artifact(std::move(msl.source), msl.signature, msl.threads_per_group);
    a.sources[Stage::layouts] = std::move(gpu.layouts);
    a.sources[Stage::gpu_ir] = std::move(gpu.gpu_ir);
    a.sources[Stage::gpu_ir_opt] = std::move(gpu.gpu_ir_opt);
    return a;
  }

  std::shared_ptr<Kernel> load(std::shared_ptr<const Program>, const CompileOptions&,
                               const Artifact& artifact) override {
    auto sig = artifact.sources.find(Stage::msl_signature);
    if (artifact.kind != ArtifactKind::shared_object || sig == artifact.sources.end())
      fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim",
           "the artifact is not a metal-sim kernel (kind \"", artifact_kind_name(artifact.kind), "\")");
    if (artifact.threads_per_group < 1 ||
        artifact.threads_per_group > static_cast<int>(metal_sim::kMaxThreadsPerGroup))
      fail(METILE_ERROR_INVALID_ARGUMENT, "metal-sim", "artifact with ", artifact.threads_per_group,
           " threads per group");
    SimKernel kernel = metal_sim::load_msl(artifact.bytes, metal_sim::parse_signature(sig->second));
    return std::make_shared<SimDeviceKernel>(std::move(kernel), artifact.threads_per_group);
  }

 private:
  GpuTarget target_;
  DeviceInfo info_;
  std::string identity_;
};

}  // namespace

std::string probe_metal_sim_device() {
  if (!metal_sim::fibers_supported())
    return cat("metal-sim runs GPU threads as fibers, which are not implemented for ", kHostCpu);
  return metal_sim::probe_clang().unavailable;
}

std::shared_ptr<Device> make_metal_sim_device() { return std::make_shared<MetalSimDevice>(); }

namespace metal_sim {

Artifact make_msl_artifact(std::string msl, const MslSignature& signature, int threads_per_group) {
  Artifact a;
  a.kind = ArtifactKind::shared_object;
  MslSignature measured = signature;
  a.bytes = build_msl(msl, signature, &measured.stack_bytes);
  a.sources[Stage::msl] = std::move(msl);
  a.sources[Stage::msl_signature] = print_signature(measured);
  a.threads_per_group = threads_per_group;
  a.threadgroup_memory_bytes = signature.threadgroup_arg_bytes();
  return a;
}

}  // namespace metal_sim

}  // namespace metile

// The interp device: buffers are page-aligned host memory, "compiling" keeps the verified
// program, and a launch runs it through the executor (executor.cpp holds the semantics).


#include "runtime/backends.h"
#include "runtime/device.h"
#include "runtime/interp/executor.h"
#include "runtime/host_buffer.h"
#include "support/error.h"

namespace metile {

namespace {

class InterpLaunch final : public PreparedLaunch {
 public:
  InterpLaunch(std::shared_ptr<const Program> program, const Grid& g, std::vector<LaunchArg> a)
      : program_(std::move(program)) {
    grid = g;
    args = std::move(a);
  }
  void run() override { interp::execute(*program_, grid, args); }

 private:
  std::shared_ptr<const Program> program_;
};

class InterpKernel final : public Kernel {
 public:
  explicit InterpKernel(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override {
    return std::make_unique<InterpLaunch>(program_, grid, std::move(args));
  }
  void launch(const Grid& grid, std::vector<LaunchArg> args) override {
    interp::execute(*program_, grid, args);
  }

 private:
  std::shared_ptr<const Program> program_;
};

class InterpDevice final : public Device {
 public:
  InterpDevice() {
    info_.name = "interp";
    info_.description = "Tile IR interpreter (reference semantics, bounds-checked)";
    info_.architecture = "tile-ir";
    info_.simd_width = 1;
    info_.max_threads_per_group = interp::kMaxThreads;
    info_.threadgroup_memory_bytes = interp::kThreadgroupMemoryBytes;
    info_.unified_memory = true;
    info_.checks_accesses = true;
    info_.whole_tiles_in_order = true;
    info_.asynchronous = false;
  }

  const DeviceInfo& info() const override { return info_; }
  std::shared_ptr<Buffer> alloc(size_t bytes) override {
    return alloc_host_buffer(this, bytes, "interp");
  }
  std::shared_ptr<Buffer> wrap(void* host, size_t bytes) override {
    return wrap_host_buffer(this, host, bytes);
  }

  Artifact build(const Program& program, const CompileOptions& options) override {
    interp::check_supported(program);
    if (program.num_threads != 0 && options.num_threads != 0 &&
        options.num_threads != program.num_threads)
      fail(METILE_ERROR_INVALID_ARGUMENT, "interp",
           "compile option num_threads = ", options.num_threads, " conflicts with kernel ",
           program.name, "'s thread count ", program.num_threads);
    Artifact a;
    a.kind = ArtifactKind::none;
    a.threads_per_group = program.num_threads != 0 ? static_cast<int>(program.num_threads) : 1;
    a.threadgroup_memory_bytes = shared_memory_bytes(program);
    return a;
  }

  std::shared_ptr<Kernel> load(std::shared_ptr<const Program> program, const CompileOptions&,
                               const Artifact&) override {
    interp::check_supported(*program);
    return std::make_shared<InterpKernel>(std::move(program));
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::string probe_interp_device() { return {}; }

std::shared_ptr<Device> make_interp_device() { return std::make_shared<InterpDevice>(); }

}  // namespace metile

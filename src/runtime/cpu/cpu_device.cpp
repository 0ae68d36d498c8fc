// The `cpu` device: Tile IR -> C++ (codegen/cpu_cpp) -> host compiler -> shared object bytes
// (the artifact) -> loaded from memory and called through libffi (cpu_kernel). Buffers are
// page-aligned host memory; launches are synchronous.
#include <sys/utsname.h>

#include <fstream>

#include "codegen/cpu_cpp.h"
#include "runtime/backends.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/toolchain.h"
#include "runtime/host/parallel_for.h"
#include "runtime/host_buffer.h"
#include "support/debug_dump.h"
#include "support/error.h"

namespace metile {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string m = line.substr(line.find(':') + 1);
      return m.substr(m.find_first_not_of(' '));
    }
  }
  return "unknown CPU";
}

class CpuDevice : public Device {
 public:
  CpuDevice() {
    struct utsname u;
    info_.name = "cpu";
    info_.architecture = ::uname(&u) == 0 ? u.machine : "unknown";
    info_.description = cpu_model() + " (" +
                        std::to_string(host::ThreadPool::instance().concurrency()) + " threads)";
    info_.simd_width = 1;
    info_.max_threads_per_group = 4096;
    info_.whole_tiles_in_order = true;
    info_.threadgroup_memory_bytes = host::kWorkerStackBytes / 2;
    info_.unified_memory = true;
    info_.asynchronous = false;
  }

  const DeviceInfo& info() const override { return info_; }

  std::shared_ptr<Buffer> alloc(size_t bytes) override {
    return alloc_host_buffer(this, bytes, "cpu");
  }

  std::shared_ptr<Buffer> wrap(void* host, size_t bytes) override {
    return wrap_host_buffer(this, host, bytes);
  }

  std::string cache_identity() const override { return cpu::current_toolchain().identity(); }

  Artifact build(const Program& program, const CompileOptions&) override {
    CpuSource src = generate_cpu_cpp(program);
    // Tiles live on the stack of whichever thread runs an instance; workers have kWorkerStackBytes.
    if (src.stack_bytes > host::kWorkerStackBytes / 2)
      fail(METILE_ERROR_UNSUPPORTED, "cpu", "kernel ", program.name, " keeps ",
           src.stack_bytes >> 20, " MiB of tiles per program instance; the cpu device allows ",
           (host::kWorkerStackBytes / 2) >> 20, " MiB (use smaller blocks)");
    Artifact a;
    a.kind = ArtifactKind::shared_object;
    a.sources[Stage::cpp] = src.text;
    a.bytes = cpu::compile_shared_object(cpu::current_toolchain(), src.text, program.name);
    a.threads_per_group = program.num_threads > 0 ? static_cast<int>(program.num_threads) : 1;
    a.threadgroup_memory_bytes = shared_memory_bytes(program);
    return a;
  }

  std::shared_ptr<Kernel> load(std::shared_ptr<const Program> program, const CompileOptions&,
                               const Artifact& artifact) override {
    if (artifact.kind != ArtifactKind::shared_object)
      fail(METILE_ERROR_INVALID_ARGUMENT, "cpu", "cannot load a \"", artifact_kind_name(artifact.kind),
           "\" artifact (the cpu device runs shared objects)");
    return std::make_shared<cpu::CpuKernel>(std::move(program), artifact);
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::string probe_cpu_device() { return cpu::probe_compiler(); }

std::shared_ptr<Device> make_cpu_device() { return std::make_shared<CpuDevice>(); }

}  // namespace metile

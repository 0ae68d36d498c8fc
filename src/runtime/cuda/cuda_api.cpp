#include "runtime/cuda/cuda_api.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/host/process.h"
#include "support/env.h"
#include "support/error.h"

namespace metile::cuda {

namespace {

void* open_first(const std::vector<std::string>& names, std::string* tried) {
  for (const std::string& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += (tried->empty() ? "" : ", ") + n;
  }
  return nullptr;
}

template <typename T>
bool sym(void* lib, const char* name, T& out) {
  out = reinterpret_cast<T>(dlsym(lib, name));
  return out != nullptr;
}

struct Loaded {
  Driver driver{};
  std::string driver_why;
  bool driver_ok = false;
  Nvrtc nvrtc{};
  std::string nvrtc_why;
  bool nvrtc_ok = false;
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

void load_driver_once() {
  Loaded& l = loaded();
  std::string tried;
  // METILE_CUDA_DRIVER names another driver library: tests/cuda_standin's, which CI runs on.
  std::vector<std::string> names;
  std::string custom = env_string("METILE_CUDA_DRIVER");
  if (!custom.empty()) names.push_back(custom);
  names.insert(names.end(), {"libcuda.so.1", "libcuda.so"});
  void* lib = open_first(names, &tried);
  if (lib == nullptr) {
    l.driver_why = "the NVIDIA driver library was not found (tried " + tried + ")";
    return;
  }
  Driver& d = l.driver;
  bool ok = sym(lib, "cuInit", d.cuInit) && sym(lib, "cuDriverGetVersion", d.cuDriverGetVersion) &&
            sym(lib, "cuDeviceGetCount", d.cuDeviceGetCount) && sym(lib, "cuDeviceGet", d.cuDeviceGet) &&
            sym(lib, "cuDeviceGetName", d.cuDeviceGetName) &&
            sym(lib, "cuDeviceGetAttribute", d.cuDeviceGetAttribute) &&
            sym(lib, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain) &&
            sym(lib, "cuCtxSetCurrent", d.cuCtxSetCurrent) && sym(lib, "cuStreamCreate", d.cuStreamCreate) &&
            sym(lib, "cuStreamSynchronize", d.cuStreamSynchronize) &&
            sym(lib, "cuModuleLoadData", d.cuModuleLoadData) && sym(lib, "cuModuleUnload", d.cuModuleUnload) &&
            sym(lib, "cuModuleGetFunction", d.cuModuleGetFunction) &&
            sym(lib, "cuFuncSetAttribute", d.cuFuncSetAttribute) && sym(lib, "cuLaunchKernel", d.cuLaunchKernel) &&
            sym(lib, "cuFuncGetAttribute", d.cuFuncGetAttribute) &&
            sym(lib, "cuMemAllocManaged", d.cuMemAllocManaged) && sym(lib, "cuMemFree_v2", d.cuMemFree) &&
            sym(lib, "cuMemGetInfo_v2", d.cuMemGetInfo) && sym(lib, "cuMemsetD8_v2", d.cuMemsetD8) &&
            sym(lib, "cuGetErrorName", d.cuGetErrorName) && sym(lib, "cuGetErrorString", d.cuGetErrorString) &&
            sym(lib, "cuEventCreate", d.cuEventCreate) && sym(lib, "cuEventRecord", d.cuEventRecord) &&
            sym(lib, "cuEventDestroy_v2", d.cuEventDestroy) && sym(lib, "cuStreamWaitEvent", d.cuStreamWaitEvent) &&
            sym(lib, "cuStreamDestroy_v2", d.cuStreamDestroy) && sym(lib, "cuStreamQuery", d.cuStreamQuery) &&
            sym(lib, "cuEventQuery", d.cuEventQuery) && sym(lib, "cuEventSynchronize", d.cuEventSynchronize) &&
            sym(lib, "cuEventElapsedTime", d.cuEventElapsedTime) &&
            sym(lib, "cuDevicePrimaryCtxReset_v2", d.cuDevicePrimaryCtxReset) &&
            sym(lib, "cuMemHostRegister_v2", d.cuMemHostRegister) &&
            sym(lib, "cuMemHostGetDevicePointer_v2", d.cuMemHostGetDevicePointer) &&
            sym(lib, "cuMemAlloc_v2", d.cuMemAlloc) && sym(lib, "cuMemcpyHtoDAsync_v2", d.cuMemcpyHtoDAsync);
  if (!ok) {
    l.driver_why = std::string("the driver library lacks a needed function (") + dlerror() + ")";
    return;
  }
  if (!sym(lib, "cuMemPrefetchAsync_v2", d.cuMemPrefetchAsync_v2))
    sym(lib, "cuMemPrefetchAsync", d.cuMemPrefetchAsync);
  sym(lib, "cuTensorMapEncodeTiled", d.cuTensorMapEncodeTiled);  // CUDA >= 12.0; else no TMA
  sym(lib, "cuStreamGetCtx", d.cuStreamGetCtx);
  sym(lib, "cuMemGetAddressRange_v2", d.cuMemGetAddressRange);
  sym(lib, "cuPointerGetAttribute", d.cuPointerGetAttribute);
  CUresult r = d.cuInit(0);
  if (r != 0) {
    const char* name = "?";
    d.cuGetErrorName(r, &name);
    l.driver_why = std::string("cuInit failed: ") + name;
    return;
  }
  int count = 0;
  if (d.cuDeviceGetCount(&count) != 0 || count == 0) {
    l.driver_why = "no CUDA device is present";
    return;
  }
  l.driver_ok = true;
}

void load_nvrtc_once() {
  Loaded& l = loaded();
  std::vector<std::string> names;
  std::string custom = env_string("METILE_NVRTC");
  if (!custom.empty()) names.push_back(custom);
  for (const char* n : {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
                        "/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                        "/usr/local/cuda/lib64/libnvrtc.so.12"})
    names.push_back(n);
  std::string tried;
  void* lib = open_first(names, &tried);
  if (lib == nullptr) {
    l.nvrtc_why = "NVRTC was not found (tried " + tried + "; set METILE_NVRTC)";
    return;
  }
  Nvrtc& n = l.nvrtc;
  bool ok = sym(lib, "nvrtcVersion", n.nvrtcVersion) && sym(lib, "nvrtcGetErrorString", n.nvrtcGetErrorString) &&
            sym(lib, "nvrtcCreateProgram", n.nvrtcCreateProgram) &&
            sym(lib, "nvrtcDestroyProgram", n.nvrtcDestroyProgram) &&
            sym(lib, "nvrtcCompileProgram", n.nvrtcCompileProgram) &&
            sym(lib, "nvrtcGetProgramLogSize", n.nvrtcGetProgramLogSize) &&
            sym(lib, "nvrtcGetProgramLog", n.nvrtcGetProgramLog) &&
            sym(lib, "nvrtcGetCUBINSize", n.nvrtcGetCUBINSize) && sym(lib, "nvrtcGetCUBIN", n.nvrtcGetCUBIN);
  if (!ok) {
    l.nvrtc_why = std::string("NVRTC lacks a needed function (") + dlerror() + ")";
    return;
  }
  l.nvrtc_ok = true;
}

}  // namespace

const Driver* load_driver(std::string* why) {
  static std::once_flag once;
  std::call_once(once, load_driver_once);
  if (!loaded().driver_ok) {
    if (why) *why = loaded().driver_why;
    return nullptr;
  }
  return &loaded().driver;
}

const Nvrtc* load_nvrtc(std::string* why) {
  static std::once_flag once;
  std::call_once(once, load_nvrtc_once);
  if (!loaded().nvrtc_ok) {
    if (why) *why = loaded().nvrtc_why;
    return nullptr;
  }
  return &loaded().nvrtc;
}

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char *name = "CUDA_ERROR_UNKNOWN", *msg = "";
  if (const Driver* d = load_driver(nullptr)) {
    d->cuGetErrorName(r, &name);
    d->cuGetErrorString(r, &msg);
  }
  fail(r == 2 ? METILE_ERROR_OUT_OF_MEMORY : METILE_ERROR_DEVICE, "cuda", what, ": ", name, " (",
       msg, ")");
}

std::string nvrtc_version() {
  std::string why;
  const Nvrtc* n = load_nvrtc(&why);
  if (n == nullptr) return "nvrtc unavailable";
  int major = 0, minor = 0;
  n->nvrtcVersion(&major, &minor);
  return "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_compile(const std::string& source, const std::string& name,
                          const std::string& arch, std::string* log_out) {
  std::string why;
  const Nvrtc* n = load_nvrtc(&why);
  if (n == nullptr) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "cuda", why);
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n->nvrtcCreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != 0) fail(METILE_ERROR_COMPILE, "cuda", "nvrtcCreateProgram: ", n->nvrtcGetErrorString(r));
  // The compile runs on a worker so a time limit (METILE_TIMEOUT_S) can give up on it; the
  // worker owns the program and frees it whenever it finishes.
  struct Job {
    const Nvrtc* n;
    nvrtcProgram prog;
    std::string arch_opt;
    nvrtcResult r = 0;
    std::string log, cubin;
  };
  auto job = std::make_shared<Job>(Job{n, prog, "-arch=" + arch, 0, {}, {}});
  double limit = host::compile_timeout_s();
  bool finished = host::run_bounded([job] {
    const Nvrtc* n = job->n;
    // No fast-math: results must match the other devices within float rounding.
    const char* opts[] = {job->arch_opt.c_str(), "-std=c++17", "-default-device"};
    job->r = n->nvrtcCompileProgram(job->prog, 3, opts);
    size_t log_size = 0;
    n->nvrtcGetProgramLogSize(job->prog, &log_size);
    job->log.assign(log_size, '\0');
    if (log_size) n->nvrtcGetProgramLog(job->prog, job->log.data());
    if (job->r == 0) {
      size_t size = 0;
      n->nvrtcGetCUBINSize(job->prog, &size);
      job->cubin.assign(size, '\0');
      n->nvrtcGetCUBIN(job->prog, job->cubin.data());
    }
    n->nvrtcDestroyProgram(&job->prog);
  }, limit);
  if (!finished)
    fail(METILE_ERROR_COMPILE, "cuda", "NVRTC did not finish compiling ", name, " for ", arch,
         " within ", limit, " s (METILE_TIMEOUT_S); gave up on it");
  std::string log = job->log;
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (log_out) *log_out = log;
  if (job->r != 0)
    fail(METILE_ERROR_COMPILE, "cuda", "NVRTC failed to compile ", name, " for ", arch, ": ",
         n->nvrtcGetErrorString(job->r), "\n", log.substr(0, 8192));
  return job->cubin;
}

}  // namespace metile::cuda

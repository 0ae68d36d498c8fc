// Launch overhead on the cuda device, side by side in one process: a raw cuLaunchKernel of an
// empty kernel (the floor), metile_kernel_launch (one-shot: argument checks every call) and
// metile_launch_run (prepared) of the same empty kernel compiled by metile. Each iteration
// enqueues one launch; the queue is drained every 1024 launches and at the end, so the time per
// iteration is the host cost of a launch once the GPU keeps up. Needs an NVIDIA GPU.
#include <benchmark/benchmark.h>
#include <metile/metile.h>

#include <string>

#include "runtime/cuda/cuda_api.h"

namespace {

using namespace metile::cuda;

struct Raw {
  const Driver* d = nullptr;
  CUfunction fn = nullptr;
  CUstream stream = nullptr;
  void* args[1] = {};
  int n = 0;
};

Raw& raw() {
  static Raw r = [] {
    Raw x;
    std::string why;
    x.d = load_driver(&why);
    if (!x.d) return x;
    CUdevice dev;
    CUcontext ctx;
    x.d->cuDeviceGet(&dev, 0);
    x.d->cuDevicePrimaryCtxRetain(&ctx, dev);
    x.d->cuCtxSetCurrent(ctx);
    x.d->cuStreamCreate(&x.stream, 0);
    int major = 0, minor = 0;
    x.d->cuDeviceGetAttribute(&major, kAttrComputeMajor, dev);
    x.d->cuDeviceGetAttribute(&minor, kAttrComputeMinor, dev);
    std::string cubin = nvrtc_compile("extern \"C\" __global__ void empty(int n) {}", "empty",
                                      "sm_" + std::to_string(major) + std::to_string(minor));
    CUmodule mod;
    x.d->cuModuleLoadData(&mod, cubin.data());
    x.d->cuModuleGetFunction(&x.fn, mod, "empty");
    x.args[0] = &x.n;
    return x;
  }();
  return r;
}

void BM_RawCuLaunchKernel(benchmark::State& state) {
  Raw& r = raw();
  if (!r.fn) {
    state.SkipWithError("no CUDA device");
    return;
  }
  int64_t i = 0;
  for (auto _ : state) {
    r.d->cuLaunchKernel(r.fn, 1, 1, 1, 32, 1, 1, 0, r.stream, r.args, nullptr);
    if (++i % 1024 == 0) r.d->cuStreamSynchronize(r.stream);
  }
  r.d->cuStreamSynchronize(r.stream);
}
BENCHMARK(BM_RawCuLaunchKernel);

struct Metile {
  metile_device* dev = nullptr;
  metile_kernel* kernel = nullptr;
  metile_launch* launch = nullptr;
  metile_buffer* buf = nullptr;
  metile_arg args[2] = {};
  uint32_t grid[3] = {1, 1, 1};
};

Metile& ours() {
  static Metile m = [] {
    Metile x;
    if (metile_device_open(&x.dev, "cuda") != METILE_OK) return x;
    // An almost empty kernel: one masked store, so the program has a parameter of each kind.
    const char* text =
        "kernel @empty(%X: ptr<f32>, %N: i32) {\n"
        "  %0 = const {value = 0} : i32\n"
        "  %1 = arange %0 {size = 32} : tile<32xi32>\n"
        "  %2 = lt %1, %N : tile<32xbool>\n"
        "  %3 = ptr_offset %X, %1 : tile<32xptr<f32>>\n"
        "  %4 = const {value = 1.0} : f32\n"
        "  store %3, %4, %2\n"
        "}\n";
    metile_program* p = nullptr;
    if (metile_program_parse(&p, text) != METILE_OK) return x;
    if (metile_kernel_compile(&x.kernel, x.dev, p, nullptr) != METILE_OK) return x;
    metile_program_release(p);
    metile_buffer_alloc(&x.buf, x.dev, 128);
    x.args[0].kind = METILE_ARG_BUFFER;
    x.args[0].buffer = x.buf;
    x.args[1].kind = METILE_ARG_I32;
    x.args[1].i = 0;
    metile_launch_create(&x.launch, x.kernel, x.grid, x.args, 2);
    return x;
  }();
  return m;
}

void BM_MetileKernelLaunch(benchmark::State& state) {
  Metile& m = ours();
  if (!m.kernel) {
    state.SkipWithError(metile_last_error());
    return;
  }
  int64_t i = 0;
  for (auto _ : state) {
    metile_kernel_launch(m.kernel, m.grid, m.args, 2);
    if (++i % 1024 == 0) metile_device_synchronize(m.dev);
  }
  metile_device_synchronize(m.dev);
}
BENCHMARK(BM_MetileKernelLaunch);

void BM_MetilePreparedLaunch(benchmark::State& state) {
  Metile& m = ours();
  if (!m.launch) {
    state.SkipWithError(metile_last_error());
    return;
  }
  int64_t i = 0;
  for (auto _ : state) {
    metile_launch_run(m.launch);
    if (++i % 1024 == 0) metile_device_synchronize(m.dev);
  }
  metile_device_synchronize(m.dev);
}
BENCHMARK(BM_MetilePreparedLaunch);

}  // namespace

BENCHMARK_MAIN();

// Google Benchmark suites for the cpu device: bandwidth-bound (vector add against a plain -O3
// loop), row-wise (softmax, layernorm), compute-bound (f32 GEMM), launch overhead (prepared and
// one-shot launches of an empty kernel) and cold compile time. bench/cpu_vs_numpy.py runs this
// binary with --benchmark_format=json and sets numpy's timings beside it.
#include <benchmark/benchmark.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "bench_kernels.h"
#include "driver/compile.h"
#include "runtime/device.h"

namespace metile::bench {
namespace {

std::shared_ptr<Device> cpu() {
  static std::shared_ptr<Device> dev = open_device("cpu");
  return dev;
}

// Compiled once per process and key.
std::shared_ptr<Kernel> kernel(const std::string& key, Program (*make)(), bool* fresh = nullptr) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<CompiledKernel>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (fresh) *fresh = it == cache.end();
  if (it == cache.end())
    it = cache.emplace(key, compile_kernel(cpu(), std::make_shared<const Program>(make()), {})).first;
  return it->second->kernel;
}

std::shared_ptr<Buffer> filled(size_t n, float scale) {
  auto b = cpu()->alloc(n * sizeof(float));
  auto* p = static_cast<float*>(b->contents());
  for (size_t i = 0; i < n; ++i) p[i] = scale * static_cast<float>((i * 7919) % 1000) / 1000.0f;
  return b;
}

LaunchArg buf(const std::shared_ptr<Buffer>& b) { return {b.get(), 0, 0}; }
LaunchArg i32(int64_t v) { return {nullptr, 0, static_cast<uint32_t>(v)}; }
Grid grid(uint32_t x, uint32_t y = 1) {
  Grid g;
  g.dims = {x, y, 1};
  return g;
}

constexpr int kAddBlock = 8192;

void BM_VectorAdd_Metile(benchmark::State& state) {
  size_t n = static_cast<size_t>(state.range(0));
  auto k = kernel("vadd", [] { return vector_add(kAddBlock); });
  auto x = filled(n, 1), y = filled(n, 2), out = cpu()->alloc(n * 4);
  auto launch = k->prepare(grid(static_cast<uint32_t>((n + kAddBlock - 1) / kAddBlock)),
                           {buf(x), buf(y), buf(out), i32(static_cast<int64_t>(n))});
  for (auto _ : state) launch->run();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 12));
}

void BM_VectorAdd_PlainLoop(benchmark::State& state) {
  size_t n = static_cast<size_t>(state.range(0));
  auto x = filled(n, 1), y = filled(n, 2), out = cpu()->alloc(n * 4);
  for (auto _ : state) {
    plain_vector_add(static_cast<float*>(x->contents()), static_cast<float*>(y->contents()),
                     static_cast<float*>(out->contents()), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 12));
}

void BM_Softmax(benchmark::State& state) {
  int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  auto make = cols == 4096 ? [] { return softmax(4096); } : [] { return softmax(32768); };
  auto k = kernel("softmax" + std::to_string(cols), make);
  size_t n = static_cast<size_t>(rows) * cols;
  auto x = filled(n, 10), out = cpu()->alloc(n * 4);
  auto launch = k->prepare(grid(rows), {buf(x), buf(out), i32(cols)});
  for (auto _ : state) launch->run();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 8));
}

void BM_LayerNorm(benchmark::State& state) {
  int rows = static_cast<int>(state.range(0)), cols = static_cast<int>(state.range(1));
  auto make = cols == 4096 ? [] { return layernorm(4096); } : [] { return layernorm(32768); };
  auto k = kernel("layernorm" + std::to_string(cols), make);
  size_t n = static_cast<size_t>(rows) * cols;
  auto x = filled(n, 3), w = filled(cols, 1), b = filled(cols, 1), out = cpu()->alloc(n * 4);
  auto launch = k->prepare(grid(rows), {buf(x), buf(w), buf(b), buf(out), i32(cols)});
  for (auto _ : state) launch->run();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 8));
}

constexpr int kBM = 96, kBN = 128, kBK = 256;

void BM_Gemm(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  auto k = kernel("gemm", [] { return gemm(kBM, kBN, kBK); });
  size_t nn = static_cast<size_t>(n) * n;
  auto a = filled(nn, 1), b = filled(nn, 1), c = cpu()->alloc(nn * 4);
  auto launch = k->prepare(grid((n + kBM - 1) / kBM, (n + kBN - 1) / kBN),
                           {buf(a), buf(b), buf(c), i32(n), i32(n), i32(n)});
  for (auto _ : state) launch->run();
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * n * n * static_cast<double>(n) * state.iterations(),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_Launch_Prepared(benchmark::State& state) {
  auto k = kernel("empty", empty);
  auto x = cpu()->alloc(64);
  auto launch = k->prepare(grid(1), {buf(x)});
  for (auto _ : state) launch->run();
}

void BM_Launch_OneShot(benchmark::State& state) {
  auto k = kernel("empty", empty);
  auto x = cpu()->alloc(64);
  for (auto _ : state) k->launch(grid(1), {buf(x)});
}

// Generating C++, running the host compiler and loading the object, as a cache miss does.
void BM_ColdCompile(benchmark::State& state) {
  Program (*makers[])() = {
      [] { return vector_add(kAddBlock); }, [] { return softmax(4096); },
      [] { return layernorm(4096); }, [] { return gemm(kBM, kBN, kBK); }};
  static const char* names[] = {"vector_add", "softmax", "layernorm", "gemm"};
  auto program = std::make_shared<const Program>(makers[state.range(0)]());
  for (auto _ : state) {
    Artifact a = cpu()->build(*program, {});
    benchmark::DoNotOptimize(cpu()->load(program, {}, a));
  }
  state.SetLabel(names[state.range(0)]);
}

BENCHMARK(BM_VectorAdd_Metile)->Arg(1 << 24)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VectorAdd_PlainLoop)->Arg(1 << 24)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Softmax)->Args({4096, 4096})->Args({512, 32768})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LayerNorm)->Args({4096, 4096})->Args({512, 32768})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gemm)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Launch_Prepared)->UseRealTime();
BENCHMARK(BM_Launch_OneShot)->UseRealTime();
BENCHMARK(BM_ColdCompile)->DenseRange(0, 3)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace metile::bench

BENCHMARK_MAIN();

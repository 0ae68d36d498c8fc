// metal-sim speed: the raw fiber switch, and whole threadgroups with and without barriers
// (tests/metal/barrier_rounds.metal: two threadgroup barriers per round).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/host/parallel_for.h"
#include "runtime/metal_sim/fiber.h"
#include "runtime/metal_sim/sim_kernel.h"

namespace metile::metal_sim {
namespace {

// Ping-pong between the thread's own stack and one fiber: two switches per iteration.
Fiber g_main, g_fiber;
bool g_stop = false;

void ping_pong(void*) {
  fiber_started();
  while (!g_stop) fiber_switch(g_fiber, g_main);
  fiber_exit(g_fiber, g_main);
}

void BM_FiberSwitchPair(benchmark::State& state) {
  fiber_adopt_thread(g_main);
  StackPool stacks(64 * 1024);
  stacks.reserve(1);
  g_stop = false;
  fiber_init(g_fiber, stacks.bottom(0), stacks.stack_bytes(), &ping_pong, nullptr);
  for (auto _ : state) fiber_switch(g_main, g_fiber);
  g_stop = true;
  fiber_switch(g_main, g_fiber);
}
BENCHMARK(BM_FiberSwitchPair);

const SimKernel& barrier_kernel() {
  static const SimKernel kernel = [] {
    std::ifstream in(std::filesystem::path(__FILE__).parent_path().parent_path() / "tests" /
                     "metal" / "barrier_rounds.metal");
    std::ostringstream src;
    src << in.rdbuf();
    using B = MslBuiltin;
    return compile_msl(
        src.str(),
        {"mtile_barrier_rounds",
         {MslArg::buffer("In", 0, DType::u32, true), MslArg::buffer("Out", 1, DType::u32, false),
          MslArg::scalar("rounds", 2, DType::i32),
          MslArg::threadgroup("scratch", 0, DType::u32, 1024),
          MslArg::builtin_arg("tgp_id_x", B::threadgroup_position_in_grid),
          MslArg::builtin_arg("lid", B::thread_index_in_threadgroup),
          MslArg::builtin_arg("tpg", B::threads_per_threadgroup)}});
  }();
  return kernel;
}

// Args: threads per group, rounds (2 barriers each), threadgroups.
void BM_BarrierRounds(benchmark::State& state) {
  uint32_t threads = static_cast<uint32_t>(state.range(0));
  int rounds = static_cast<int>(state.range(1));
  uint32_t groups = static_cast<uint32_t>(state.range(2));
  std::vector<uint32_t> in(threads * groups, 1), out(threads * groups);
  std::vector<SimArg> args = {SimArg::buffer(in.data()), SimArg::buffer(out.data()),
                              SimArg::scalar(static_cast<uint32_t>(rounds))};
  const SimKernel& k = barrier_kernel();
  for (auto _ : state) k.launch({groups, 1, 1}, {threads, 1, 1}, args);
  state.counters["groups/s"] =
      benchmark::Counter(double(groups), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["barriers"] = 2.0 * rounds;
  state.counters["workers"] =
      double(std::min(host::ThreadPool::instance().concurrency(), kMaxPoolWorkers + 1));
}
BENCHMARK(BM_BarrierRounds)
    ->Args({256, 0, 1})
    ->Args({256, 5, 1})
    ->Args({256, 50, 1})
    ->Args({1024, 5, 1})
    ->Args({256, 5, 64})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace metile::metal_sim

BENCHMARK_MAIN();

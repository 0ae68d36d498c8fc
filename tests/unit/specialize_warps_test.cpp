// specialize-warps (src/passes/specialize_warps.cpp): a released TMA ring's copies on a producer
// warpgroup, text in and text out on what lowering and release-stages write (GEMM at 2, 3 and 4
// stages); loops that are no such ring left alone; opt-in and switched off by name; the ops it
// adds round-trip and are checked; the whole pipeline's CUDA compiles through NVRTC for sm_90a;
// and a model of the ring's mbarrier protocol with a producer and consumer warps run under
// random schedules.
#include <gtest/gtest.h>

#include <random>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_parse.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/tile/tile_pipeline.h"
#include "runtime/cuda/cuda_api.h"
#include "support/error.h"
#include "target/options.h"
#include "gpu_text_edits.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

const GpuTarget& hopper() {
  static const GpuTarget t = nvidia_gpu_target("sm_90");
  return t;
}

// Lowering's GPU IR of `g` (Tile IR passes first, as compile_kernel runs them for cuda).
std::string lowered_text(const kernels::GemmConfig& g, int threads, int stages = 0) {
  LowerOptions o;
  o.device = "cuda";
  o.num_threads = threads;
  o.num_stages = stages;
  const Program p = *run_tile_pipeline(kernels::gemm(g), CompileOptions{}, false, false, true).program;
  return gpu::print(lower_to_gpu(p, hopper(), o));
}

std::string passes(const std::string& text, const std::vector<std::string>& names) {
  return run_gpu_passes_on_text(text, names, hopper());
}

// The text of a block from its opening line to the line closing it at the same indent.
std::string block_of(const std::string& text, const std::string& head) {
  const size_t at = text.find(head);
  if (at == std::string::npos) return "";
  const size_t line = text.rfind('\n', at) + 1;
  const std::string pad(at - line, ' ');
  const size_t end = text.find("\n" + pad + "}", at);
  return text.substr(at, end - at);
}

GpuPipelineResult pipeline(const Program& p, std::vector<std::string> on, std::vector<std::string> off = {},
                           int threads = 256) {
  CompileOptions o;
  o.num_threads = threads;
  o.enabled_passes = std::move(on);
  o.disabled_passes = std::move(off);
  return run_gpu_pipeline(*run_tile_pipeline(p, o, false, false, true).program, hopper(), o, "cuda");
}

// The GEMM's ring at 2, 3 and 4 stages: the copies' loop on the producers, thread 0's wait
// and copies by the first producer thread; the consumers keep the full wait, the MMAs and the
// arrivals, then the epilogue; the prologue's copies stay before the split.
TEST(GpuPasses, SpecializeWarpsSplitsTheGemmRing) {
  for (int stages : {2, 3, 4}) {
    const std::string in = passes(lowered_text(kernels::gemm_config(DType::f16, 128, 128, 64, true), 256, stages),
                                  {"release-stages"});
    const std::string out = passes(in, {"specialize-warps"});
    const std::string what = std::to_string(stages) + " stages\n" + out;
    ASSERT_EQ(count(out, "  warp_specialize producers=128 {\n"), 1) << what;
    const std::string producers = block_of(out, "warp_specialize producers=128 {");
    const std::string consumers = out.substr(out.find("} consumers {"));
    EXPECT_EQ(producers.find("    setmaxnreg count=40 inc=0\n"), producers.find('\n') + 1) << what;
    EXPECT_EQ(consumers.find("    setmaxnreg count=232 inc=1\n"), consumers.find('\n') + 1) << what;
    EXPECT_NE(producers.find("%producer_tid: i32 thread = sub %tid, "), std::string::npos) << what;
    // Producers: the empty wait and the copies in their loop, by their first thread; no MMA.
    EXPECT_EQ(count(producers, " tma_load "), 2) << what;
    EXPECT_EQ(count(producers, ", %producer_tid, "), 3) << what;
    EXPECT_EQ(count(producers, " mbar_wait "), 1) << what;
    EXPECT_EQ(count(producers, " = mma "), 0) << what;
    EXPECT_EQ(count(producers, "mbar_arrive"), 0) << what;
    // Consumers: the full wait, the MMA and the arrival; no copy.
    EXPECT_EQ(count(consumers, " tma_load "), 0) << what;
    EXPECT_EQ(count(consumers, " = mma "), 1) << what;
    EXPECT_EQ(count(consumers, " mbar_arrive "), 1) << what;
    EXPECT_EQ(count(consumers, " mbar_wait "), 1) << what;
    EXPECT_NE(consumers.find(" store %c_ptrs"), std::string::npos) << "the epilogue\n" << what;
    // Before the split: the setup, its barrier and the prologue's stages-1 copies.
    const std::string before = out.substr(0, out.find("  warp_specialize"));
    EXPECT_EQ(count(before, " tma_load "), 2 * (stages - 1)) << what;
    EXPECT_EQ(count(before, "  barrier\n"), 1) << what;
    EXPECT_EQ(gpu::print(gpu::parse(out)), out);
    EXPECT_EQ(passes(out, {"specialize-warps"}), out) << "run again: nothing more changes";
  }
}

// No ring released by mbarriers (release-stages not run), and a persistent GEMM's ring one loop
// down: left as they are.
TEST(GpuPasses, SpecializeWarpsLeavesOtherLoopsAlone) {
  const std::string plain = lowered_text(kernels::gemm_config(DType::f16, 128, 128, 64, true), 256);
  EXPECT_EQ(passes(plain, {"specialize-warps"}), passes(plain, {}));
  kernels::GemmConfig g = kernels::gemm_config(DType::bf16, 128, 128, 64, true);
  g.persistent = true;
  const std::string persistent = passes(lowered_text(g, 256), {"release-stages"});
  EXPECT_EQ(passes(persistent, {"specialize-warps"}), persistent);
  // One consumer warpgroup: at launch (256 threads) it has nearly all the registers it can
  // use, so the split does not pay.
  const std::string small = passes(lowered_text(kernels::gemm_config(DType::f16, 64, 64, 32, false), 128), {"release-stages"});
  ASSERT_EQ(count(small, "mbar_arrive"), 1) << small;
  EXPECT_EQ(passes(small, {"specialize-warps"}), small);
}

// Off unless enabled: the default pipeline's GPU IR and CUDA are those with the pass disabled;
// enabled, the kernel launches 384 threads; enabled and disabled, it is off.
TEST(GpuPasses, SpecializeWarpsIsOptInAndSwitchedOffByName) {
  for (DType t : {DType::f16, DType::bf16}) {
    const Program p = kernels::gemm(kernels::gemm_config(t, 128, 128, 64, true));
    const GpuPipelineResult def = pipeline(p, {}), off = pipeline(p, {}, {"specialize-warps"}),
                            on = pipeline(p, {"specialize-warps"}),
                            both = pipeline(p, {"specialize-warps"}, {"specialize-warps"});
    EXPECT_EQ(def.gpu_ir_opt, off.gpu_ir_opt);
    EXPECT_EQ(def.gpu_ir_opt, both.gpu_ir_opt);
    EXPECT_EQ(emit_cuda(def.function).source, emit_cuda(off.function).source);
    EXPECT_EQ(count(def.gpu_ir_opt, "warp_specialize"), 0);
    EXPECT_EQ(count(on.gpu_ir_opt, "warp_specialize producers=128"), 1) << on.gpu_ir_opt;
    EXPECT_EQ(emit_cuda(def.function).threads_per_group, 256);
    EXPECT_EQ(emit_cuda(on.function).threads_per_group, 384);
  }
  CompileOptions o;
  EXPECT_FALSE(o.runs("specialize-warps"));
  EXPECT_TRUE(o.runs("release-stages"));
  o.enabled_passes = {"specialize-warps"};
  EXPECT_TRUE(o.runs("specialize-warps"));
  EXPECT_NE(o.key(), CompileOptions{}.key());
  EXPECT_THROW(check_enabled_pass_names({"release-stages"}), Error);
  EXPECT_NO_THROW(check_enabled_pass_names({"specialize-warps"}));
}

// The ops it adds print, parse back and verify; named barriers only inside a role and only the
// role's; setmaxnreg only inside a role, a multiple of 8 in 24..256; the split last at top level.
TEST(GpuPasses, SpecializeWarpsOpsRoundTripAndAreChecked) {
  const std::string ok = "gpu_kernel @k(%n: i32) threads=128 simd=32 {\n"
                         "  %tid: i32 thread = builtin thread_index.x\n"
                         "  barrier\n"
                         "  warp_specialize producers=128 {\n"
                         "    setmaxnreg count=40 inc=0\n"
                         "    barrier id=2 threads=128\n"
                         "    yield\n"
                         "  } consumers {\n"
                         "    setmaxnreg count=232 inc=1\n"
                         "    barrier id=1 threads=128\n"
                         "    barrier device=1 id=1 threads=128\n"
                         "    yield\n"
                         "  }\n"
                         "}\n";
  EXPECT_EQ(gpu::print(gpu::parse(ok)), ok);
  expect_edits_refused(ok, {{"    barrier id=1 threads=128\n", "    barrier\n"},
                           {"    barrier id=2 threads=128\n", "    barrier id=1 threads=128\n"},
                           {"  barrier\n", "  barrier id=1 threads=128\n"},
                           {"  barrier\n", "  setmaxnreg count=40 inc=0\n"},
                           {"count=40 inc=0", "count=20 inc=0"},
                           {"count=40 inc=0", "count=44 inc=0"},
                           {"producers=128", "producers=64"},
                           {"    yield\n  }\n}\n", "    yield\n  }\n  barrier\n}\n"}});
}

// The pipeline's CUDA with the pass on, f16 and bf16: both register limits, the producers past
// the consumers' threads, one block of all of them in the launch bounds (two consumer
// warpgroups: 384 threads, 232 registers; three: 512 and 152); NVRTC compiles it for sm_90a
// (ptxas included) without a word about setmaxnreg.
TEST(GpuPasses, SpecializeWarpsCompilesThroughNvrtcForSm90a) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  kernels::GemmConfig bias = kernels::gemm_config(DType::bf16, 128, 256, 64, true);
  bias.bias = true;
  struct Case {
    kernels::GemmConfig g;
    int threads, registers;
  };
  for (const Case& c : {Case{kernels::gemm_config(DType::f16, 128, 128, 64, true), 256, 232},
                        Case{kernels::gemm_config(DType::bf16, 128, 128, 64, true), 256, 232},
                        Case{kernels::gemm_config(DType::f16, 128, 256, 64, false), 256, 232}, Case{bias, 256, 232},
                        Case{kernels::gemm_config(DType::bf16, 192, 128, 64, true), 384, 152}}) {
    const GpuPipelineResult r = pipeline(kernels::gemm(c.g), {"specialize-warps"}, {}, c.threads);
    const CudaKernelSource s = emit_cuda(r.function);
    const std::string launch = std::to_string(c.threads + 128), consumers = std::to_string(c.threads);
    ASSERT_EQ(s.threads_per_group, c.threads + 128) << r.gpu_ir_opt;
    EXPECT_EQ(count(s.source, "setmaxnreg.dec.sync.aligned.u32 40;"), 1) << s.source;
    EXPECT_EQ(count(s.source, "setmaxnreg.inc.sync.aligned.u32 " + std::to_string(c.registers) + ";"), 1) << s.source;
    EXPECT_EQ(count(s.source, "if (int(threadIdx.x) >= " + consumers + ")"), 1) << s.source;
    EXPECT_NE(s.source.find("__launch_bounds__(" + launch + ", 1)"), std::string::npos) << s.source;
    EXPECT_EQ(count(s.source, "__syncthreads()"), count(r.gpu_ir_opt, "\n  barrier")) << "only before the split\n" << s.source;
    EXPECT_EQ(count(s.source, "bar.sync 1, " + consumers + ";"), count(r.gpu_ir_opt, "barrier id=1 threads=" + consumers))
        << s.source;
    std::string log;
    EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log)) << log << s.source;
    EXPECT_EQ(count(log, "setmaxnreg"), 0) << log;
  }
}

// A barrier in the epilogue (as a layout conversion there writes one) becomes the consumers'
// named barrier; through the passes after it and the CUDA emitter, that is bar.sync 1, 256 after
// the split and __syncthreads() only before it, and NVRTC compiles it for sm_90a.
TEST(GpuPasses, SpecializeWarpsNamesTheConsumersBarriers) {
  std::string in = passes(lowered_text(kernels::gemm_config(DType::bf16, 128, 128, 64, true), 256, 3), {"release-stages"});
  const std::string store = "  store %c_ptrs";
  ASSERT_NE(in.find(store), std::string::npos) << in;
  in.insert(in.find(store), "  barrier\n");
  const std::string out = passes(in, {"specialize-warps"});
  const std::string consumers = out.substr(out.find("} consumers {"));
  EXPECT_EQ(count(consumers, "    barrier id=1 threads=256\n"), 1) << out;
  EXPECT_EQ(count(out, " barrier\n"), 1) << "the setup's, before the split\n" << out;
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  const gpu::Function f = gpu::parse(passes(out, {"fold-constants", "cse", "dce", "vectorize-access", "order-device-memory",
                                                  "insert-cancel-points", "allocate-threadgroup-memory"}));
  const CudaKernelSource s = emit_cuda(f);
  EXPECT_EQ(count(s.source, "asm volatile(\"bar.sync 1, 256;\" ::: \"memory\");"), 1) << s.source;
  EXPECT_EQ(count(s.source, "__syncthreads();"), 1) << s.source;
  std::string log;
  EXPECT_NO_THROW(cuda::nvrtc_compile(s.source, s.entry, "sm_90a", &log)) << log << s.source;
}

// ---- the protocol, modelled ------------------------------------------------------------------
// One producer thread and `warps` consumer warps run the ring as the specialized kernel does
// (the index math of lower_tma.cpp and release_stages.cpp), each step of each picked at random;
// mbarriers complete a phase when their arrivals and bytes are in, and a wait on parity P
// passes once the phase of that parity completed (the current phase's parity differs from P).
// Copies land at random later steps. Checked: everyone finishes (no deadlock), a copy into a
// stage is issued only after every warp released the chunk there before it, and a warp's MMA
// reads only a chunk that landed.
struct Mbarrier {
  int count = 0, pending = 0, bytes = 0;
  int64_t completed = 0;
  void arrive(int tx = 0) {
    bytes += tx;
    --pending;
    settle();
  }
  void land(int tx) {
    bytes -= tx;
    settle();
  }
  void settle() {
    if (pending == 0 && bytes == 0) {
      ++completed;
      pending = count;
    }
  }
  bool passed(int parity) const { return (completed & 1) != parity; }
};

struct RingModel {
  int stages, trips, warps;
  std::mt19937* rng;
  std::vector<Mbarrier> full, empty;
  std::vector<int> holds;            // the chunk each stage holds once landed (-1: none)
  std::vector<int> released;         // warps that released each chunk
  std::vector<std::pair<int, int>> in_flight;  // (stage, chunk) of copies not landed
  std::string error;
  bool skip_empty_wait = false;  // the mutant the last test runs: the producer never waits

  RingModel(int s, int t, int w, std::mt19937* r) : stages(s), trips(t), warps(w), rng(r) {
    full.assign(s, Mbarrier{2, 2, 0, 0});  // two copies (A and B) arrive with their bytes
    empty.assign(s, Mbarrier{w, w, 0, 0});
    holds.assign(s, -1);
    released.assign(t + s, 0);
  }

  void copy(int chunk) {
    const int s = chunk % stages;
    if (chunk >= stages && released[chunk - stages] != warps)
      error = "chunk " + std::to_string(chunk) + " overwrites stage " + std::to_string(s) + " before its release";
    holds[s] = -1;
    for (int k = 0; k < 2; ++k) {
      full[s].arrive(1);
      in_flight.push_back({s, chunk});
    }
  }

  // The producer's turn `it` as specialize-warps leaves it: wait empty, then copy.
  struct Producer {
    int it = 0, step = 0;
  };
  // A consumer warp: the prologue (warp 0, thread 0's copies), then each turn wait full, MMA,
  // retire the previous MMA and release its stage; done after the loop.
  struct Consumer {
    int it = 0, step = 0;
    bool prologue = false;
  };

  // One step of the producer; false where it waits.
  bool step(Producer& p) {
    if (p.it >= trips) return false;
    const int stage = p.it % stages, phase = (p.it / stages) & 1;
    const int next = stage == 0 ? stages - 1 : stage - 1;
    const bool in_range = p.it + stages - 1 < trips, reused = p.it != 0;
    const int empty_phase = stage == 0 ? phase ^ 1 : phase;
    if (p.step == 0) {
      if (in_range && reused && !skip_empty_wait && !empty[next].passed(empty_phase)) return false;
      p.step = 1;
      return true;
    }
    if (in_range) copy(p.it + stages - 1);
    p.step = 0;
    ++p.it;
    return true;
  }

  bool step(Consumer& c, int w) {
    if (w == 0 && !c.prologue) {
      for (int chunk = 0; chunk < stages - 1; ++chunk)
        if (chunk < trips) copy(chunk);
      c.prologue = true;
      return true;
    }
    if (c.it >= trips) return false;
    const int stage = c.it % stages, phase = (c.it / stages) & 1;
    if (c.step == 0) {
      if (!full[stage].passed(phase)) return false;
      if (holds[stage] != c.it) error = "warp " + std::to_string(w) + " reads chunk " + std::to_string(c.it) + " before it landed";
      c.step = 1;
      return true;
    }
    // The MMA of chunk it is issued; waiting for all but one retires chunk it-1's, released.
    const int next = stage == 0 ? stages - 1 : stage - 1;
    if (c.it != 0) {
      ++released[c.it - 1];
      empty[next].arrive();
    }
    c.step = 0;
    ++c.it;
    return true;
  }

  // Runs to the end; "" or what went wrong.
  std::string run() {
    Producer p;
    std::vector<Consumer> cs(static_cast<size_t>(warps));
    for (;;) {
      std::vector<int> ready;  // -1: the producer, w: warp w, warps + i: copy i lands
      if (p.it < trips) ready.push_back(-1);
      for (int w = 0; w < warps; ++w)
        if (cs[w].it < trips || (w == 0 && !cs[0].prologue)) ready.push_back(w);
      for (size_t i = 0; i < in_flight.size(); ++i) ready.push_back(warps + static_cast<int>(i));
      if (ready.empty()) break;
      std::shuffle(ready.begin(), ready.end(), *rng);
      bool moved = false;
      for (int who : ready) {
        if (who == -1) moved = step(p);
        else if (who < warps) moved = step(cs[who], who);
        else {
          const auto [s, chunk] = in_flight[who - warps];
          in_flight.erase(in_flight.begin() + (who - warps));
          holds[s] = chunk;  // both halves land before the phase completes; the last one counts
          full[s].land(1);
          moved = true;
        }
        if (!error.empty()) return error;
        if (moved) break;
      }
      if (!moved) return "deadlock at producer turn " + std::to_string(p.it);
    }
    for (const Consumer& c : cs)
      if (c.it != trips) return "a warp stopped early";
    return "";
  }
};

TEST(GpuPasses, SpecializeWarpsProtocolNeverDeadlocksOverwritesOrReadsEarly) {
  std::mt19937 rng(34);
  for (int stages = 2; stages <= 4; ++stages)
    for (int trips = 0; trips <= 7; ++trips)
      for (int run = 0; run < 300; ++run) {
        RingModel m(stages, trips, 8, &rng);
        EXPECT_EQ(m.run(), "") << stages << " stages, " << trips << " turns, run " << run;
      }
  // The model catches what it is there to catch: without the producer's empty wait, a copy
  // overtakes a warp still reading its stage in some schedule.
  int caught = 0;
  for (int run = 0; run < 300; ++run) {
    RingModel m(2, 7, 8, &rng);
    m.skip_empty_wait = true;
    caught += m.run().find("before its release") != std::string::npos;
  }
  EXPECT_GT(caught, 0);
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

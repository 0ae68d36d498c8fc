// The MSL form of cancel_point (docs/semantics.md, "Stopping a launch"): the stop word as a
// signature entry and a buffer binding of its own, the check every loop back-edge makes (thread 0
// reads, the threadgroup decides together, all return), and what a kernel without loops or one
// that fills threadgroup memory gets. The checks stopping kernels: test_cancel.py (metal
// stand-in, metal-sim).
#include <gtest/gtest.h>

#include "codegen/metal/msl.h"
#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/pipeline.h"
#include "runtime/metal_sim/sim_kernel.h"
#include "runtime/metal_sim/toolchain.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;
using metal_sim::MslArg;

MslKernel emit(const Program& p) {
  return emit_msl(run_gpu_pipeline(p, apple_gpu_target(), {}, "metal-sim").function);
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// out[0] = the number of turns of a loop to N; `pointers` more output pointers, unused.
Program spin(int pointers = 0) {
  std::string params = "%X: ptr<f32>, %N: i32";
  for (int i = 0; i < pointers; ++i) params += ", %P" + std::to_string(i) + ": ptr<f32>";
  return parse("kernel @spin(" + params + ") {\n"
               "  %0 = const {value = 0} : i32\n"
               "  %1 = const {value = 1} : i32\n"
               "  %2 = const {value = 0.0} : f32\n"
               "  %3 = for %i = %0 to %N step %1 iter_args(%c = %2) -> (f32) {\n"
               "    %4 = const {value = 1.0} : f32\n"
               "    %5 = add %c, %4 : f32\n"
               "    yield %5\n"
               "  }\n"
               "  store %X, %3\n"
               "}\n");
}

TEST(MslCancel, LoopsCheckTheStopWordTogether) {
  MslKernel k = emit(spin());
  const metal_sim::MslSignature& s = k.signature;
  // X, the packed scalars (N), then the stop word: not a launch argument.
  EXPECT_EQ(s.args[0], MslArg::buffer("X", 0, DType::f32, false));
  ASSERT_EQ(s.args.back(), MslArg::builtin_arg("tiitg", metal_sim::MslBuiltin::thread_index_in_threadgroup))
      << "the check reads the thread index, whether the kernel does or not";
  EXPECT_EQ(std::count(s.args.begin(), s.args.end(), MslArg::stop_word("mt_cancel", 2)), 1);
  EXPECT_EQ(s.launch_arg_count(), 2u);  // X, N
  EXPECT_TRUE(has(k.source, "device atomic<uint>* mt_cancel [[buffer(2)]]")) << k.source;
  EXPECT_TRUE(has(k.source, "uint mt_polls = 1u;  threadgroup uint mt_stop_seen;")) << k.source;
  // At the loop's back-edge (before the carried value moves on): the first turn and every 1024th.
  EXPECT_TRUE(has(k.source, "if (--mt_polls == 0u) { mt_polls = 1024u; if (mt_stop_requested(mt_cancel, "
                            "&mt_stop_seen, tiitg)) return; }")) << k.source;
  // Thread 0 reads; every thread takes its value between two barriers; a group that stops says so.
  EXPECT_TRUE(has(k.source, "  if (index == 0u) *seen = atomic_load_explicit(word, memory_order_relaxed);\n"
                            "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                            "  const bool stop = *seen != 0u;\n"
                            "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                            "  if (stop && index == 0u) atomic_store_explicit(word, 2u, memory_order_relaxed);"))
      << k.source;
  if (!metal_sim::probe_clang().unavailable.empty()) GTEST_SKIP() << metal_sim::probe_clang().unavailable;
  metal_sim::check_msl(k.source, "spin");
}

TEST(MslCancel, AKernelWithoutLoopsHasNoStopWord) {
  MslKernel k = emit(kernels::vector_add(1024));
  EXPECT_FALSE(has(k.source, "mt_cancel")) << k.source;
  for (const MslArg& a : k.signature.args) EXPECT_NE(a.kind, MslArg::Kind::stop) << a.name;
}

TEST(MslCancel, SignatureTextCarriesTheStopWord) {
  MslKernel k = emit(spin());
  const std::string text = metal_sim::print_signature(k.signature);
  EXPECT_TRUE(has(text, "\nstop mt_cancel 2 u32\n")) << text;
  EXPECT_EQ(metal_sim::parse_signature(text), k.signature);
  auto refused = [&](const std::string& t, const std::string& why) {
    try {
      metal_sim::parse_signature(t);
      ADD_FAILURE() << "accepted:\n" << t;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
      EXPECT_TRUE(has(e.what(), why)) << e.what();
    }
  };
  refused("kernel k\nstop a 0 f32\n", "expected buffer|atomic|scalar|packed|member|threadgroup|builtin|stop");
  refused("kernel k\nstop a 0 u32\nstop b 1 u32\n", "stop word 'b': a kernel has at most one");
  refused("kernel k\nbuffer a 0 f32\nstop b 0 u32\n", "[[buffer(0)]] is already taken");
}

TEST(MslCancel, TheStopWordCountsAgainstMetalsBufferBindings) {
  // 29 more pointers: X, 29, the scalars and the stop word make 32 of Metal's 31.
  try {
    emit(spin(29));
    ADD_FAILURE() << "32 bindings accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED);
    EXPECT_TRUE(has(e.what(), "kernel 'spin' needs 32 buffer bindings (30 pointer parameters, one for "
                              "all its scalars and one for the stop word its loops check), over Metal's 31"))
        << e.what();
  }
  MslKernel k = emit(spin(28));  // 31: fits
  EXPECT_EQ(std::count(k.signature.args.begin(), k.signature.args.end(), MslArg::stop_word("mt_cancel", 30)), 1);
}

// Threads zero a threadgroup array in a loop; the store reads it back.
Program zeroing(int64_t elements) {
  KernelBuilder k("zeroing");
  V out = k.ptr("Out");
  k.raw().set_num_threads(64);
  V s = k.shared(elements);
  V tid = k.thread_id();
  k.store(s + tid, k.cast(tid, DType::f32));
  k.barrier();
  k.store(out + tid, k.load(s + tid) + 1.0);
  return k.finish();
}

TEST(MslCancel, AKernelFillingThreadgroupMemoryGoesWithoutChecks) {
  // The check's word takes 16 bytes (GpuTarget::cancel_threadgroup_bytes): with them the array
  // fits, and the loop checks; an array of the whole 32 KiB keeps it, and the loop goes without.
  EXPECT_TRUE(has(emit(zeroing(8188)).source, "mt_stop_requested(mt_cancel")) << "32752 bytes";
  EXPECT_FALSE(has(emit(zeroing(8192)).source, "mt_cancel")) << "32768 bytes";
  EXPECT_THROW(emit(zeroing(8193)), Error);
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

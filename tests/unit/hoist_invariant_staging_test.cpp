// hoist-invariant-staging: stores into a threadgroup array that write the same values every
// iteration leave their loop (flash attention's Q in dot(q, trans(k)), which lowering stages at
// the dot). GPU IR text in and out, and the lowered dot loop with the pass run and switched off.
#include <gtest/gtest.h>

#include <string>

#include "ir/gpu_ir.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// The text before the first loop and from it on.
std::pair<std::string, std::string> split_at_loop(const std::string& text) {
  const size_t at = text.find("\n  for ") + 1;
  EXPECT_NE(at, 0u) << text;
  return {text.substr(0, at), text.substr(at)};
}

// A loop whose body stores %v through %p into %a, a barrier, each thread reading its neighbour's
// element, and the trailing barrier; `extra` goes after the read.
std::string loop_kernel(const std::string& value, const std::string& extra = "") {
  return "gpu_kernel @k(%o: ptr<f32>, %n: i32) threads=64 simd=32 {\n"
         "  %a: ptr<f32, threadgroup> = alloc shape=\"64\" stages=1 layout=\"linear\"\n"
         "  %tid: i32 thread = builtin thread_index.x\n"
         "  %z: i32 = const value=0\n"
         "  %one: i32 = const value=1\n"
         "  %q: f32 thread = cast %tid\n"
         "  %s0: f32 thread = sub %q, %q\n"
         "  for %i: i32 = %z to %n step %one iter(%s: f32 thread = %s0) -> (%r) {\n"
         "    %p: ptr<f32, threadgroup> thread = ptr_offset %a, %tid\n"
         "    %iq: f32 = cast %i\n"
         "    %v: f32 thread = add " + value + "\n"
         "    store %p, %v\n"
         "    barrier\n"
         "    %nb: i32 thread = bitxor %tid, %one\n"
         "    %rp: ptr<f32, threadgroup> thread = ptr_offset %a, %nb\n"
         "    %x: f32 thread = load %rp\n"
         "    %s1: f32 thread = add %s, %x\n" + extra +
         "    barrier\n"
         "    yield %s1\n"
         "  }\n"
         "  %op: ptr<f32> thread = ptr_offset %o, %tid\n"
         "  store %op, %r\n"
         "}\n";
}

std::string hoisted(const std::string& text) {
  return run_gpu_passes_on_text(text, {"hoist-invariant-staging"}, nvidia_gpu_target());
}

TEST(HoistInvariantStaging, StoresOfValuesTheLoopDoesNotChangeMoveInFrontOfIt) {
  const std::string out = hoisted(loop_kernel("%q, %q"));
  auto [before, loop] = split_at_loop(out);
  // The store and the pure ops it needs, in body order, just before the loop.
  EXPECT_TRUE(contains(before, "  %p: ptr<f32, threadgroup> thread = ptr_offset %a, %tid\n"
                               "  %v: f32 thread = add %q, %q\n"
                               "  store %p, %v\n")) << out;
  EXPECT_EQ(count(loop, "store %p"), 0) << out;
  // What the store does not need stays; the barrier still orders every iteration's reads.
  EXPECT_TRUE(contains(loop, "    %iq: f32 = cast %i\n    barrier\n    %nb:")) << out;
  EXPECT_EQ(count(loop, "barrier"), 2) << out;
  // Nothing left to move: a second run changes nothing.
  EXPECT_EQ(hoisted(out), out);
}

TEST(HoistInvariantStaging, StoresOfAValueTheLoopComputesStay) {
  for (const char* value : {"%q, %iq", "%q, %s"}) {  // from the induction variable; carried
    const std::string in = loop_kernel(value);
    const std::string out = hoisted(in);
    EXPECT_EQ(count(split_at_loop(out).second, "store %p"), 1) << value << "\n" << out;
    EXPECT_EQ(out, run_gpu_passes_on_text(in, {}, nvidia_gpu_target()));
  }
}

TEST(HoistInvariantStaging, StoresIntoAnArrayTheLoopAlsoWritesStay) {
  // The read value written back into the array: the next iteration's store rewrites it.
  const std::string out = hoisted(loop_kernel("%q, %q", "    store %rp, %s1\n"));
  EXPECT_EQ(count(split_at_loop(out).second, "store %p, %v"), 1) << out;
}

TEST(HoistInvariantStaging, StoresNoBarrierOrdersBeforeTheirReadsStay) {
  std::string in = loop_kernel("%q, %q");
  in.replace(in.find("    barrier\n"), 12, "");  // the one between the store and the read
  const std::string out = hoisted(in);
  EXPECT_EQ(count(split_at_loop(out).second, "store %p, %v"), 1) << out;
}

// A dot in a loop whose A is loaded before it, B in it: out = sum of dot(a, trans(b_block)).
// With `inner` the A operand is computed in the body from B.
std::string dot_kernel(bool inner) {
  std::string a = inner ? "%ai" : "%a";
  // Only a dot's use keeps trans(b) a copy the pipeline may stream.
  std::string ai = inner ? "    %ai = add %a, %bt : tile<32x32xf16>\n" : "";
  return std::string(R"(kernel @k(%A: ptr<f16>, %B: ptr<f16>, %O: ptr<f32>, %n: i32) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c32 = const {value = 32} : i32
  %a = tile_load %A, %c0, %c0, %c32 : tile<32x32xf16>
  %z = const {value = 0.0} : f32
  %acc0 = broadcast %z : tile<32x32xf32>
  %r = for %i = %c0 to %n step %c32 iter_args(%acc = %acc0) -> (tile<32x32xf32>) {
    %b = tile_load %B, %i, %c0, %c32 : tile<32x32xf16>
    %bt = trans %b : tile<32x32xf16>
)") + ai + "    %d = dot " + a + R"(, %bt, %acc : tile<32x32xf32>
    yield %d
  }
  tile_store %O, %c0, %c0, %c32, %r
}
)";
}

// stages: 1 keeps the K loop unpipelined (a pipelined loop holds A in its prologue instead).
std::string compiled(const std::string& src, const GpuTarget& t, const std::string& device,
                     std::vector<std::string> off = {}, int stages = 1) {
  CompileOptions o;
  o.num_stages = stages;
  o.disabled_passes = std::move(off);
  return run_gpu_pipeline(parse(src), t, o, device).gpu_ir_opt;
}

TEST(HoistInvariantStaging, ADotOperandDefinedBeforeTheLoopIsStagedOnceUnlessSwitchedOff) {
  const GpuTarget& sm80 = nvidia_gpu_target("sm_80");
  const GpuTarget& apple = apple_gpu_target();
  for (const auto& [t, device] : {std::pair{&sm80, "cuda"}, std::pair{&apple, "metal-sim"}}) {
    // Lowering stages both operands at the dot.
    LowerOptions lo;
    lo.device = device;
    lo.num_stages = 1;
    const std::string lowered = gpu::print(lower_to_gpu(parse(dot_kernel(false)), *t, lo));
    EXPECT_EQ(count(split_at_loop(lowered).first, "%a_smem"), 1) << "only its allocation\n" << lowered;
    // The pass moves A's stores out; B's copy, read from the loop's block, stays.
    auto [before, body] = split_at_loop(compiled(dot_kernel(false), *t, device));
    EXPECT_GE(count(before, "%a_smem"), 2) << "allocated, then written once\n" << before;
    EXPECT_EQ(count(body, "%a_smem,"), 1) << "the body only reads it (the mma)\n" << body;
    EXPECT_GE(count(body, "%b_smem"), 2) << "B is still staged every iteration\n" << body;
    // METILE_GPU_OFF=hoist-invariant-staging: A is stored every iteration.
    auto [off_before, off_body] =
        split_at_loop(compiled(dot_kernel(false), *t, device, {"hoist-invariant-staging"}));
    EXPECT_EQ(count(off_before, "%a_smem"), 1) << off_before;
    EXPECT_GE(count(off_body, "%a_smem"), 2) << off_body;
  }
  // A pipelined K loop (cp.async ring for B) holds A for the whole loop: lowering stages it in the
  // loop's prologue, with or without the pass.
  using Names = std::vector<std::string>;
  for (const Names& off : {Names{}, Names{"hoist-invariant-staging"}}) {
    auto [piped_before, piped_body] = split_at_loop(compiled(dot_kernel(false), sm80, "cuda", off, 0));
    EXPECT_GE(count(piped_before, "%a_smem"), 2) << piped_before;
    EXPECT_EQ(count(piped_body, "%a_smem,"), 1) << piped_body;
  }
  // An A the body computes from its loads is staged there either way.
  auto [before, body] = split_at_loop(compiled(dot_kernel(true), sm80, "cuda"));
  EXPECT_EQ(count(before, "%a_smem"), 1) << "only its allocation\n" << before;
  EXPECT_GE(count(body, "%a_smem"), 2) << "staged, then read by the mma\n" << body;
}

}  // namespace
}  // namespace metile

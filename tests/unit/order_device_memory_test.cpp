// order-device-memory: a store and a later access of the same buffer that another thread may
// make get a barrier ordering device memory between them (text in, text out).
#include <gtest/gtest.h>

#include <string>

#include "passes/pass.h"
#include "target/gpu_target.h"

namespace metile {
namespace {

std::string run(const std::string& body, const std::string& layouts = "") {
  const std::string text =
      "gpu_kernel @k(%x: ptr<f32>, %o: ptr<f32>, %n: i32) threads=32 simd=32 {\n"
      "  #2 = tile<64> thr=32:2 reg=2:1\n  #3 = tile<64> thr=32:1 reg=2:32\n" +
      layouts + "  %tid: i32 thread = builtin thread_index.x\n" + body + "}\n";
  const std::string out = run_gpu_passes_on_text(text, {"order-device-memory"}, apple_gpu_target());
  const size_t from = out.find("thread_index.x\n") + 15;
  return out.substr(from, out.size() - from - 2);  // without the closing "}\n"
}

TEST(OrderDeviceMemory, OneThreadsOwnElementsNeedNoBarrier) {
  const std::string in_place = R"(  %i: i32 x2 #2 = coord #2 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %v: f32 x2 #2 = load %p
  store %p, %v
  %w: f32 x2 #2 = load %p
  store %p, %w
)";
  EXPECT_EQ(run(in_place), in_place);
  const std::string two_buffers = R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %o, %j
  %jf: f32 x2 #3 = cast %j
  %v: f32 x2 #2 = load %p
  store %q, %jf
  %w: f32 x2 #3 = load %q
)";
  // o written through #3 and read back through the same pointers: each thread its own elements.
  EXPECT_EQ(run(two_buffers), two_buffers);
}

TEST(OrderDeviceMemory, AnotherThreadsElementsGetADeviceBarrier) {
  // x read through #2 and written through #3: element e is read by one thread, written by another.
  EXPECT_EQ(run(R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %jf: f32 x2 #3 = cast %j
  %v: f32 x2 #2 = load %p
  store %q, %jf
  %w: f32 x2 #2 = load %p
)"),
            R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %jf: f32 x2 #3 = cast %j
  %v: f32 x2 #2 = load %p
  barrier device=1
  store %q, %jf
  barrier device=1
  %w: f32 x2 #2 = load %p
)");
  // A barrier already there (threadgroup memory only) gains the device order instead.
  EXPECT_EQ(run(R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %f: f32 x2 #2 = cast %i
  store %p, %f
  barrier
  %w: f32 x2 #3 = load %q
)"),
            R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %f: f32 x2 #2 = cast %i
  store %p, %f
  barrier device=1
  %w: f32 x2 #3 = load %q
)");
}

TEST(OrderDeviceMemory, AtomicsAmongThemselvesNeedNoOrder) {
  const std::string atomics = R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %if: f32 x2 #2 = cast %i
  %jf: f32 x2 #3 = cast %j
  %a: f32 x2 #2 = atomic_add %p, %if
  %b: f32 x2 #3 = atomic_add %q, %jf
)";
  EXPECT_EQ(run(atomics), atomics);
}

// A row loop: iteration iv touches iv .. iv + 63 through the same pointer value.
std::string row_loop(int step, const std::string& ahead) {
  return "  %c0: i32 = const value=0\n  %s: i32 = const value=" + std::to_string(step) +
         "\n  %t: i32 x2 #2 = coord #2 %tid\n  for %iv: i32 = %c0 to %n step %s {\n"
         "    %off: i32 x2 #2 = add %iv, %t\n    %p: ptr<f32> x2 #2 = ptr_offset %x, %off\n"
         "    %v: f32 x2 #2 = load %p\n" +
         ahead + "    store %p, %v\n    yield\n  }\n";
}

TEST(OrderDeviceMemory, LoopIterationsThatMoveApartNeedNoBarrier) {
  EXPECT_EQ(run(row_loop(64, "")), row_loop(64, ""));
  EXPECT_EQ(run(row_loop(-64, "")), row_loop(-64, ""));
  // Step 32 over 64-element tiles: the next iteration reads what another thread just stored.
  const std::string overlapping = run(row_loop(32, ""));
  EXPECT_NE(
      overlapping.find("    barrier device=1\n    %v: f32 x2 #2 = load %p\n    store %p, %v\n"),
      std::string::npos)
      << overlapping;
}

TEST(OrderDeviceMemory, StoresAheadOfTheNextIterationAreOrdered) {
  // The GEMM that writes the block its next K step reads, in one dimension: load x[iv..], store
  // x[iv + 64 ..] through another pointer; the barrier goes before the next iteration's load
  // (i.e. before the store that follows it in the same iteration: pending is then the load).
  const std::string in = R"(  %c0: i32 = const value=0
  %s: i32 = const value=64
  %t: i32 x2 #2 = coord #2 %tid
  for %iv: i32 = %c0 to %n step %s {
    %off: i32 x2 #2 = add %iv, %t
    %p: ptr<f32> x2 #2 = ptr_offset %x, %off
    %v: f32 x2 #2 = load %p
    %q: ptr<f32> x2 #2 = ptr_offset %p, %s
    store %q, %v
    yield
  }
)";
  const std::string out = run(in);
  EXPECT_NE(out.find("    barrier device=1\n    %v: f32 x2 #2 = load %p"), std::string::npos)
      << out;
}

TEST(OrderDeviceMemory, AConflictWithWhatCameBeforeALoopIsOrderedOnceBeforeIt) {
  const std::string before = R"(  %j: i32 x2 #3 = coord #3 %tid
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %jf: f32 x2 #3 = cast %j
  store %q, %jf
)";
  std::string expected = before + row_loop(64, "");
  expected.insert(expected.find("  for %iv"), "  barrier device=1\n");
  EXPECT_EQ(run(before + row_loop(64, "")), expected);
}

}  // namespace
}  // namespace metile

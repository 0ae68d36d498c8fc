// allocate-threadgroup-memory, text in and text out: offsets and alignment, arrays that are
// never live together sharing bytes (only over the limit, only where the target allows it, only
// once in-flight copies are drained), the limit's error; and the typed alloc's verifier.
#include <gtest/gtest.h>

#include "ir/gpu_parse.h"
#include "passes/pass.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::string run(const std::string& text, const GpuTarget& target) {
  return run_gpu_passes_on_text(text, {"allocate-threadgroup-memory"}, target);
}

GpuTarget cuda_with(uint64_t limit) {
  GpuTarget t = nvidia_gpu_target("sm_90");
  t.threadgroup_memory_bytes = limit;
  return t;
}

// The failure of the pass on `text`, or "" where it passed.
std::string error_of(const std::string& text, const GpuTarget& target) {
  try {
    run(text, target);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED) << e.what();
    return e.what();
  }
  return "";
}

const char* const kHead = R"(gpu_kernel @k(%x: ptr<f32>) threads=32 simd=32 {
  #2 = tile<64> thr=32:2 reg=2:1
  %tid: i32 thread = builtin thread_index.x
)";

// The most aligned first (the wgmma swizzle's 1024 bytes), then in IR order, each 16-aligned.
TEST(AllocateThreadgroupMemory, PlacesTheMostAlignedFirstThenInOrder) {
  const std::string in = std::string(kHead) + R"(  %s: ptr<f32, threadgroup> = alloc shape="100" stages=1 layout="linear"
  %w: ptr<f16, threadgroup> = alloc shape="64x64" stages=2 layout="swizzle128"
  %p: ptr<f16, threadgroup> = alloc shape="16x32" stages=3 layout="pad8"
  %bar: ptr<i64, threadgroup> = alloc shape="1" stages=3 layout="linear"
}
)";
  const std::string out = run(in, cuda_with(1 << 20));
  EXPECT_TRUE(has(out, "%w: ptr<f16, threadgroup> = alloc shape=\"64x64\" stages=2 layout=\"swizzle128\" offset=0\n"))
      << out;
  // 16384 bytes of %w, 400 of %s, then %p: 3 stages of 16 rows of 32 + 8 elements (3840 bytes).
  EXPECT_TRUE(has(out, "%s: ptr<f32, threadgroup> = alloc shape=\"100\" stages=1 layout=\"linear\" offset=16384\n")) << out;
  EXPECT_TRUE(has(out, "layout=\"pad8\" offset=16784\n")) << out;
  EXPECT_TRUE(has(out, "%bar: ptr<i64, threadgroup> = alloc shape=\"1\" stages=3 layout=\"linear\" offset=20624\n"))
      << out;
  gpu::Function f = gpu::parse(out);
  EXPECT_EQ(gpu::threadgroup_bytes(f), 20656u);  // 20624 + 24, to a multiple of 16
  // Placing again gives the same offsets (the pipeline places after lowering and after its passes).
  EXPECT_EQ(run(out, cuda_with(1 << 20)), out);
}

// %a is copied into asynchronously in a loop, drained, then %b is written: over the limit, %b
// takes %a's bytes, with a barrier before %b's first use so no thread overwrites what another
// still reads.
std::string loop_then_epilogue(bool drained, bool barrier) {
  return std::string(kHead) + R"(  %a: ptr<f32, threadgroup> = alloc shape="1024" stages=2 layout="linear"
  %b: ptr<f32, threadgroup> = alloc shape="2048" stages=1 layout="linear"
  %c0: i32 = const value=0
  %c4: i32 = const value=4
  %c1: i32 = const value=1
  %i: i32 x2 #2 = coord #2 %tid
  %src: ptr<f32> x2 #2 = ptr_offset %x, %i
  for %k: i32 = %c0 to %c4 step %c1 {
    %dst: ptr<f32, threadgroup> x2 #2 = ptr_offset %a, %i
    async_copy %dst, %src, %c0, %c1 width=1 vector=0
    async_commit
    yield
  }
)" + (drained ? "  async_wait pending=0\n" : "") +
         (barrier ? "  barrier\n" : "") + R"(  %pb: ptr<f32, threadgroup> x2 #2 = ptr_offset %b, %i
  %v: f32 x2 #2 = cast %i
  store %pb, %v
}
)";
}

TEST(AllocateThreadgroupMemory, OverTheLimitAnEpilogueReusesTheLoopsArrays) {
  // 8192 + 8192 bytes: under 16384 the arrays share, with the barrier the pass puts in.
  const std::string out = run(loop_then_epilogue(true, false), cuda_with(10000));
  EXPECT_TRUE(has(out, "layout=\"linear\" offset=0\n  %b: ptr<f32, threadgroup> = alloc shape=\"2048\" stages=1 "
                       "layout=\"linear\" offset=0\n"))
      << out;
  EXPECT_TRUE(has(out, "  async_wait pending=0\n  barrier\n  %pb:")) << out;
  EXPECT_EQ(gpu::threadgroup_bytes(gpu::parse(out)), 8192u);
  // A barrier already there: none added.
  const std::string kept = run(loop_then_epilogue(true, true), cuda_with(10000));
  EXPECT_TRUE(has(kept, "offset=0\n  %b:")) << kept;
  EXPECT_TRUE(has(kept, "  async_wait pending=0\n  barrier\n  %pb:")) << kept;
  // Under the limit the arrays stay apart: the placement every fitting kernel gets.
  const std::string apart = run(loop_then_epilogue(true, false), cuda_with(1 << 20));
  EXPECT_TRUE(has(apart, "shape=\"2048\" stages=1 layout=\"linear\" offset=8192\n")) << apart;
  EXPECT_FALSE(has(apart, "barrier")) << apart;
}

TEST(AllocateThreadgroupMemory, CopiesInFlightOrSeparateArgumentsKeepArraysApart) {
  // No async_wait {pending=0}: the loop's last copies may land after %b's stores.
  std::string e = error_of(loop_then_epilogue(false, true), cuda_with(10000));
  EXPECT_TRUE(has(e, "[allocate-threadgroup-memory] k needs 16384 bytes of threadgroup memory; the target allows "
                     "10000 (largest arrays: a 8192 (f32 1024 x 2 stages), b 8192 (f32 2048)); fewer pipeline "
                     "stages (num_stages) need less"))
      << e;
  // Metal binds each array as an argument of its own: nothing shares.
  GpuTarget apple = apple_gpu_target();
  apple.threadgroup_memory_bytes = 10000;
  e = error_of(loop_then_epilogue(true, true), apple);
  EXPECT_TRUE(has(e, "k needs 16384 bytes of threadgroup memory; the target allows 10000")) << e;
}

// mbarriers (and TMA destinations) may still be signalled by the copy engine: never shared,
// though the barriers' last use comes before the other array's first.
TEST(AllocateThreadgroupMemory, MbarriersNeverShare) {
  const std::string text = std::string(kHead) + R"(  %bar: ptr<i64, threadgroup> = alloc shape="1" stages=1024 layout="linear"
  %b: ptr<f32, threadgroup> = alloc shape="2048" stages=1 layout="linear"
  mbar_init %bar, %tid count=1 n=1
  async_wait pending=0
  barrier
  %i: i32 x2 #2 = coord #2 %tid
  %pb: ptr<f32, threadgroup> x2 #2 = ptr_offset %b, %i
  %v: f32 x2 #2 = cast %i
  store %pb, %v
}
)";
  EXPECT_TRUE(has(error_of(text, cuda_with(10000)), "k needs 16384 bytes of threadgroup memory")) << text;
  std::string plain = text;  // the same array as plain i64 storage shares
  plain.replace(plain.find("  mbar_init %bar, %tid count=1 n=1\n"), 35, "  %z: i64 = const value=0\n  store %bar, %z\n");
  const std::string out = run(plain, cuda_with(10000));
  EXPECT_TRUE(has(out, "stages=1024 layout=\"linear\" offset=0\n  %b: ptr<f32, threadgroup> = alloc shape=\"2048\" "
                       "stages=1 layout=\"linear\" offset=0\n"))
      << out;
}

TEST(AllocateThreadgroupMemory, CannotBeDisabled) {
  try {
    check_pass_names({"allocate-threadgroup-memory"});
    ADD_FAILURE() << "disabled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(e.what(), "cannot be disabled: the emitters read the offsets")) << e.what();
  }
}

// The verifier reads every attribute of a typed alloc.
TEST(AllocateThreadgroupMemory, TheVerifierChecksTypedAllocs) {
  const std::pair<const char*, const char*> bad[] = {
      {R"(shape="0x4" stages=1 layout="linear")", "shape \"0x4\" must be positive extents joined by x"},
      {R"(shape="4" stages=0 layout="linear")", "stages must be positive"},
      {R"(shape="4" stages=1 layout="swirl")", "layout \"swirl\" is none of linear, padN, swizzle128/64/32"},
      {R"(shape="4" stages=1 layout="swizzle128")", "a swizzle128 array needs two extents"},
      {R"(shape="64x64" stages=1 layout="swizzle128" offset=512)", "offset 512 is not a multiple of the 1024-byte alignment"},
      {R"(shape="4" stages=1 layout="linear" size=4)", "unknown attribute size"},
      {R"(stages=1 layout="linear")", "needs a text attribute shape"},
  };
  for (const auto& [attrs, why] : bad) {
    const std::string text = std::string(kHead) + "  %s: ptr<f16, threadgroup> = alloc " + attrs + "\n}\n";
    try {
      gpu::parse(text);
      ADD_FAILURE() << "verified: " << attrs;
    } catch (const Error& e) {
      EXPECT_TRUE(has(e.what(), std::string("alloc: ") + why)) << e.what();
    }
  }
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

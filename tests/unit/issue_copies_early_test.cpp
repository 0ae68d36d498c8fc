// issue-copies-early: a later dot's copies from device memory start at an earlier dot of the same
// block, flash attention's V while Q K^T and the softmax run. GPU IR text in and out, and
// attention's loop lowered and run through the pipeline, with the pass and switched off. Results
// on the GPU are checked by test_attention.py against float64.
#include <gtest/gtest.h>

#include <string>

#include "ir/gpu_ir.h"
#include "ir/tile_ir.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "target/gpu_target.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// Two groups as lowering writes two unpipelined dots: %x's chunks copied into %a, committed and
// waited for, a barrier, %a read (the first dot), a barrier; `between` (the softmax); then %y's
// chunks, at an offset computed there, into %b, committed and waited for, a barrier, %b read.
std::string two_groups(const std::string& between = "", const std::string& offset = "add %i, %i") {
  return R"(gpu_kernel @k(%x: ptr<f32>, %y: ptr<f32>, %o: ptr<f32>, %n: i32) threads=32 simd=32 {
  #2 = tile<64> thr=32:2 reg=2:1
  %a: ptr<f32, threadgroup> = alloc shape="64" stages=1 layout="linear"
  %b: ptr<f32, threadgroup> = alloc shape="64" stages=1 layout="linear"
  %tid: i32 thread = builtin thread_index.x
  %c0: i32 = const value=0
  %c1: i32 = const value=1
  %i: i32 x2 #2 = coord #2 %tid
  %xs: ptr<f32> x2 #2 = ptr_offset %x, %i
  %ad: ptr<f32, threadgroup> x2 #2 = ptr_offset %a, %i
  async_copy %ad, %xs, %c0, %c1 width=1 vector=0
  async_commit
  async_wait pending=0
  barrier
  %xv: f32 x2 #2 = load %ad
  barrier
)" + between +
         "  %yi: i32 x2 #2 = " + offset + "\n" + R"(  %ys: ptr<f32> x2 #2 = ptr_offset %y, %yi
  %bd: ptr<f32, threadgroup> x2 #2 = ptr_offset %b, %i
  async_copy %bd, %ys, %c0, %c1 width=1 vector=0
  async_commit
  async_wait pending=0
  barrier
  %yv: f32 x2 #2 = load %bd
  %s: f32 x2 #2 = add %xv, %yv
  %os: ptr<f32> x2 #2 = ptr_offset %o, %i
  store %os, %s
}
)";
}

std::string issued(const std::string& text) {
  return run_gpu_passes_on_text(text, {"issue-copies-early"}, nvidia_gpu_target("sm_80"));
}

std::string unchanged(const std::string& text) {
  return run_gpu_passes_on_text(text, {}, nvidia_gpu_target("sm_80"));
}

TEST(IssueCopiesEarly, ALaterGroupMovesBehindTheEarlierCommitAndTheEarlierWaitLetsItFly) {
  const std::string softmax = "  %e: f32 x2 #2 = cast %i\n";
  const std::string out = issued(two_groups(softmax));
  // %y's copy and the pure ops computing its addresses, as a group of their own, between the
  // first commit and the first wait, which now leaves that group in flight.
  EXPECT_TRUE(contains(out, "  async_copy %ad, %xs, %c0, %c1 width=1 vector=0\n"
                            "  async_commit\n"
                            "  %yi: i32 x2 #2 = add %i, %i\n"
                            "  %ys: ptr<f32> x2 #2 = ptr_offset %y, %yi\n"
                            "  %bd: ptr<f32, threadgroup> x2 #2 = ptr_offset %b, %i\n"
                            "  async_copy %bd, %ys, %c0, %c1 width=1 vector=0\n"
                            "  async_commit\n"
                            "  async_wait pending=1\n"
                            "  barrier\n")) << out;
  // The second reader still waits for everything before its barrier; nothing else moved.
  EXPECT_TRUE(contains(out, "  barrier\n" + softmax + "  async_wait pending=0\n  barrier\n  %yv:")) << out;
  EXPECT_EQ(count(out, "async_commit"), 2) << out;
  // Nothing left to move: a second run changes nothing.
  EXPECT_EQ(issued(out), out);
}

TEST(IssueCopiesEarly, AGroupStaysWhereAPassedOpTouchesItsArray) {
  // A store into %b between the two groups: the early copy would overwrite it, or be overwritten.
  const std::string in =
      two_groups("  %bs: ptr<f32, threadgroup> x2 #2 = ptr_offset %b, %i\n  store %bs, %xv\n");
  EXPECT_EQ(issued(in), unchanged(in));
  // So does a read of %b there, and a store to device memory, which the copy might read.
  const std::string read = two_groups("  %bs: ptr<f32, threadgroup> x2 #2 = ptr_offset %b, %i\n"
                                      "  %bv: f32 x2 #2 = load %bs\n");
  EXPECT_EQ(issued(read), unchanged(read));
  const std::string device = two_groups("  %ws: ptr<f32> x2 #2 = ptr_offset %o, %i\n  store %ws, %xv\n");
  EXPECT_EQ(issued(device), unchanged(device));
}

TEST(IssueCopiesEarly, AGroupStaysWhereAnOperandIsDefinedOnlyLater) {
  // The copy's offset comes from a value the first dot's read produced: it cannot start earlier.
  const std::string in = two_groups("  %late: i32 x2 #2 = cast %xv\n", "add %i, %late");
  EXPECT_EQ(issued(in), unchanged(in));
}

// The shape of attention's loop body: S = Q K^T, P = S as f16, O += P V, K and V loaded first.
const char* const kTwoDots =
    R"(kernel @k(%Q: ptr<f16>, %K: ptr<f16>, %V: ptr<f16>, %O: ptr<f32>, %n: i32) num_threads(128) {
  %c0 = const {value = 0} : i32
  %c32 = const {value = 32} : i32
  %c64 = const {value = 64} : i32
  %q = tile_load %Q, %c0, %c0, %c64 : tile<64x64xf16>
  %z = const {value = 0.0} : f32
  %o0 = broadcast %z : tile<64x64xf32>
  %o = for %i = %c0 to %n step %c32 iter_args(%a = %o0) -> (tile<64x64xf32>) {
    %k = tile_load %K, %i, %c0, %c64, %n, %c64 : tile<32x64xf16>
    %v = tile_load %V, %i, %c0, %c64, %n, %c64 : tile<32x64xf16>
    %kt = trans %k : tile<64x32xf16>
    %s0 = broadcast %z : tile<64x32xf32>
    %s = dot %q, %kt, %s0 : tile<64x32xf32>
    %p = cast %s : tile<64x32xf16>
    %an = dot %p, %v, %a : tile<64x64xf32>
    yield %an
  }
  tile_store %O, %c0, %c0, %c64, %o
}
)";

// On sm_80's mma.sync P is staged in the body, so the loop is not pipelined; lowering copies
// each dot's operand at the dot.
std::string compiled(const GpuTarget& t, const std::string& device, std::vector<std::string> off = {}) {
  CompileOptions o;
  o.disabled_passes = std::move(off);
  return run_gpu_pipeline(parse(kTwoDots), t, o, device).gpu_ir_opt;
}

TEST(IssueCopiesEarly, AttentionsVIsCopiedDuringTheFirstDotUnlessSwitchedOff) {
  const GpuTarget& sm80 = nvidia_gpu_target("sm_80");
  const GpuPipelineResult lowered = run_gpu_pipeline(parse(kTwoDots), sm80, CompileOptions{}, "cuda");
  EXPECT_EQ(count(lowered.gpu_ir, "async_wait pending=0"), 2) << "each dot waits at once\n" << lowered.gpu_ir;
  const std::string text = lowered.gpu_ir_opt;
  // K's group, then V's; the first dot waits for K's alone, the second for both.
  EXPECT_EQ(count(text, "async_commit"), 2) << text;
  EXPECT_EQ(count(text, "async_wait pending=1"), 1) << text;
  EXPECT_EQ(count(text, "async_wait pending=0"), 1) << text;
  const size_t first_wait = text.find("async_wait");
  EXPECT_EQ(count(text.substr(0, first_wait), "async_copy"), 2) << "K's and V's copies before it\n" << text;
  // METILE_GPU_OFF=issue-copies-early, or its earlier name early_copy: each dot copies and waits
  // where it runs.
  for (const char* name : {"issue-copies-early", "early_copy"}) {
    const std::string off = compiled(sm80, "cuda", {name});
    EXPECT_EQ(count(off, "async_wait pending=1"), 0) << name << "\n" << off;
    EXPECT_EQ(count(off, "async_wait pending=0"), 2) << name << "\n" << off;
    EXPECT_EQ(count(off.substr(0, off.find("async_wait")), "async_copy"), 1) << name << "\n" << off;
  }
  // Apple GPUs: a copy completes where it is issued; there is nothing to start earlier.
  const std::string apple = compiled(apple_gpu_target(), "metal-sim");
  EXPECT_EQ(apple, compiled(apple_gpu_target(), "metal-sim", {"issue-copies-early"}));
}

}  // namespace
}  // namespace metile

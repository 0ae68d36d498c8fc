// GPU IR passes, each on its own: what it rewrites, what it must leave alone.
#include <gtest/gtest.h>

#include "codegen/cuda/cuda.h"
#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "support/error.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

gpu::Function lower(const Program& p) { return lower_to_gpu(p, apple_gpu_target(), {0, "metal-sim"}); }

void run(gpu::Function& f, std::initializer_list<const char*> passes,
         const GpuTarget& target = apple_gpu_target()) {
  PassContext ctx{target};
  for (const char* p : passes) run_gpu_pass(p, f, ctx);
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// out[0..k) = the given scalar expressions, stored once.
gpu::Function scalars(const std::function<std::vector<V>(KernelBuilder&)>& body) {
  KernelBuilder k("scalars");
  V o = k.ptr("Out", DType::i32);
  std::vector<V> vs = body(k);
  for (size_t i = 0; i < vs.size(); ++i) k.store(o + static_cast<int>(i), vs[i]);
  return lower(k.finish());
}

TEST(GpuPasses, RegistryListsEveryPassAndRejectsUnknownNames) {
  std::vector<std::string> names;
  for (const PassInfo& p : gpu_passes()) names.push_back(std::string(p.name));
  EXPECT_EQ(names, (std::vector<std::string>{"hoist-invariant-staging", "lower-convert-layout",
                                             "copy-rows-async", "issue-copies-early", "ldmatrix-fragments", "serpentine-mma", "preload-fragments", "release-stages",
                                             "specialize-warps", "fold-constants", "cse", "dce",
                                             "vectorize-access", "insert-cancel-points",
                                             "order-device-memory", "elide-barriers",
                                             "allocate-threadgroup-memory"}));
  gpu::Function f = lower(kernels::vector_add(256));
  PassContext ctx{apple_gpu_target()};
  try {
    run_gpu_pass("unroll-everything", f, ctx);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(e.what(), "unknown pass \"unroll-everything\" (known: hoist-invariant-staging, "
                              "lower-convert-layout, copy-rows-async, issue-copies-early, ldmatrix-fragments, serpentine-mma, preload-fragments, "
                              "release-stages, specialize-warps, fold-constants, cse, dce"));
  }
}

TEST(GpuPasses, FoldConstantsEvaluatesExactOpsOnly) {
  gpu::Function f = scalars([](KernelBuilder& k) -> std::vector<V> {
    V big = k.i32(2147483647);
    V zero = k.i32(0);
    return {k.i32(6) * 7 + 1,                 // 43
            big + 1,                          // wraps to -2^31
            k.i32(-7) / 2,                    // truncates: -3
            k.i32(5) / zero,                  // undefined: left to the device
            k.cast(k.f32(2.5) * 4.0, DType::i32),  // 10
            k.cast(k.wrap(k.raw().unary(OpKind::EXP, k.f32(1.0).id)), DType::i32)};  // not folded
  });
  run(f, {"fold-constants", "dce"});
  std::string text = gpu::print(f);
  EXPECT_TRUE(has(text, "const value=43")) << text;
  EXPECT_TRUE(has(text, "const value=-2147483648")) << text;
  EXPECT_TRUE(has(text, "const value=-3")) << text;
  EXPECT_TRUE(has(text, "const value=10")) << text;
  EXPECT_TRUE(has(text, "= div %c")) << text;  // 5 / 0 stays
  EXPECT_TRUE(has(text, "= exp %c")) << text;
}

TEST(GpuPasses, FoldConstantsForwardsIdentities) {
  gpu::Function f = lower(kernels::vector_add(256));
  std::string before = gpu::print(f);
  EXPECT_TRUE(has(before, "%offs: i32 x4 #2 = add %c, %t")) << before;  // arange start 0
  run(f, {"fold-constants", "dce"});
  std::string text = gpu::print(f);
  EXPECT_FALSE(has(text, "= add %c, %t")) << text;
  EXPECT_FALSE(has(text, "value=0\n")) << text;  // the zero start is gone with its add
}

TEST(GpuPasses, CseMergesInDominatingScopesOnly) {
  gpu::Function f = lower(kernels::softmax(256));
  int coords_before = count(gpu::print(f), "= coord ");
  run(f, {"cse", "dce"});
  std::string text = gpu::print(f);
  // Each loop recomputes its coord (the loops are siblings, none dominates another) ...
  EXPECT_EQ(count(text, "= coord "), coords_before) << text;
  // ... but the reductions share one lane == 0 (their slot addresses differ: the sum takes the
  // second scratch array).
  EXPECT_EQ(count(text, "%first_lane: bool thread = eq"), 1) << text;
  EXPECT_EQ(count(text, "= ptr_offset %scratch_f32, %sg\n"), 1) << text;
  EXPECT_EQ(count(text, "= ptr_offset %scratch2_f32, %sg\n"), 1) << text;
  EXPECT_EQ(count(text, "= load "), 3 + 2) << text;  // loads are never merged
}

TEST(GpuPasses, DceKeepsEffectsAndRemovesDeadLoops) {
  KernelBuilder k("dead");
  V x = k.ptr("X"), o = k.ptr("Out");
  V offs = k.arange(0, 128);
  V unused = k.load(x + offs) * 2.0;
  (void)unused;
  k.tile_range(k.i32(0), k.i32(4), k.i32(1), {k.zeros(Shape::of(128))},
               [&](V, std::vector<V> c) -> std::vector<V> { return {c[0] + 1.0}; });
  k.store(o + offs, k.load(x + offs));
  gpu::Function f = lower(k.finish());
  run(f, {"dce"});
  std::string text = gpu::print(f);
  EXPECT_EQ(count(text, "= load "), 1) << text;
  EXPECT_EQ(count(text, "for "), 0) << text;
  EXPECT_EQ(count(text, "store "), 1) << text;
}

TEST(GpuPasses, InsertCancelPointsEndsEveryLoopBodyOnce) {
  const std::string in =
      "gpu_kernel @k(%o: ptr<f32>, %n: i32) threads=32 simd=32 {\n"
      "  %z: i32 = const value=0\n"
      "  %one: i32 = const value=1\n"
      "  %f: f32 = const value=0.0\n"
      "  for %i: i32 = %z to %n step %one iter(%a: f32 = %f) -> (%r) {\n"
      "    for %j: i32 = %z to %n step %one {\n"
      "      yield\n"
      "    }\n"
      "    %b: f32 = add %a, %f\n"
      "    yield %b\n"
      "  }\n"
      "  store %o, %r\n"
      "}\n";
  const std::string out = run_gpu_passes_on_text(in, {"insert-cancel-points"}, nvidia_gpu_target("sm_90"));
  EXPECT_EQ(count(out, "cancel_point every=1024\n"), 2) << out;
  EXPECT_TRUE(has(out, "      cancel_point every=1024\n      yield\n")) << out;  // the inner body
  EXPECT_TRUE(has(out, "    %b: f32 = add %a, %f\n    cancel_point every=1024\n    yield %b\n")) << out;
  // No entry check where a loop comes first: its back-edge check acts on the first turn.
  EXPECT_FALSE(has(out, "every=0")) << out;
  // Run again: still one per loop; and the printed form parses back to itself.
  EXPECT_EQ(run_gpu_passes_on_text(out, {"insert-cancel-points"}, nvidia_gpu_target("sm_90")), out);
  // Metal's check costs two barriers: its programs check in loops only.
  const std::string apple = run_gpu_passes_on_text(in, {"insert-cancel-points"}, apple_gpu_target());
  EXPECT_EQ(count(apple, "cancel_point every=1024\n"), 2) << apple;
  EXPECT_FALSE(has(apple, "every=0")) << apple;
}

// cuda checks at entry too: once, before the first op that writes or holds a region (an if here).
TEST(GpuPasses, InsertCancelPointsChecksAProgramBeforeItsFirstWrite) {
  const std::string in =
      "gpu_kernel @k(%o: ptr<f32>, %n: i32) threads=32 simd=32 {\n"
      "  %z: i32 = const value=0\n"
      "  %one: i32 = const value=1\n"
      "  %f: f32 = const value=1.0\n"
      "  %c: bool = lt %z, %n\n"
      "  if %c {\n"
      "    store %o, %f\n"
      "    yield\n"
      "  } else {\n"
      "    yield\n"
      "  }\n"
      "  for %i: i32 = %z to %n step %one {\n"
      "    yield\n"
      "  }\n"
      "  store %o, %f\n"
      "}\n";
  const std::string out = run_gpu_passes_on_text(in, {"insert-cancel-points"}, nvidia_gpu_target("sm_90"));
  EXPECT_EQ(count(out, "cancel_point every=0\n"), 1) << out;
  EXPECT_TRUE(has(out, "  %c: bool = lt %z, %n\n  cancel_point every=0\n  if %c {\n")) << out;
  EXPECT_EQ(count(out, "cancel_point every=1024\n"), 1) << out;
  EXPECT_EQ(run_gpu_passes_on_text(out, {"insert-cancel-points"}, nvidia_gpu_target("sm_90")), out);
}

TEST(GpuPasses, CancelPointEveryMustBeAPowerOfTwo) {
  const std::string in =
      "gpu_kernel @k(%n: i32) threads=32 simd=32 {\n"
      "  %z: i32 = const value=0\n"
      "  %one: i32 = const value=1\n"
      "  for %i: i32 = %z to %n step %one {\n"
      "    cancel_point every=1000\n"
      "    yield\n"
      "  }\n"
      "}\n";
  try {
    run_gpu_passes_on_text(in, {}, nvidia_gpu_target("sm_90"));
    FAIL() << "accepted every=1000";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "every must be a power of two")) << e.what();
  }
}

TEST(GpuPasses, VectorizeProvesContiguityThroughIndexMath) {
  gpu::Function f = lower(kernels::vector_add(1024));
  run(f, {"fold-constants", "cse", "dce", "vectorize-access"});
  std::string text = gpu::print(f);
  EXPECT_EQ(count(text, "vload "), 2) << text;
  EXPECT_EQ(count(text, "vstore "), 1) << text;
  EXPECT_TRUE(has(text, "width=4")) << text;
}

TEST(GpuPasses, VectorizeLeavesStridedAndRowStraddlingAccessesScalar) {
  KernelBuilder k("strided");
  V x = k.ptr("X"), o = k.ptr("Out");
  V offs = k.arange(0, 1024);
  V a = k.load(x + offs * 2);  // stride 2: not contiguous
  // 32x33 tile: a 4-element chunk crosses rows (33 % 4 != 0), so addresses are not contiguous.
  V t = k.tile_load(x, k.i32(0), k.i32(0), k.i32(40), Shape::of(32, 33));
  // 32x32 tile with stride 40: chunks stay in one row, so they are contiguous.
  V u = k.tile_load(x, k.i32(1), k.i32(4), k.i32(40), Shape::of(32, 32));
  k.store(o + offs, a);
  k.tile_store(o, k.i32(0), k.i32(0), k.i32(40), t);
  k.tile_store(o, k.i32(0), k.i32(0), k.i32(40), u);
  gpu::Function f = lower(k.finish());
  run(f, {"fold-constants", "cse", "dce", "vectorize-access"});
  std::string text = gpu::print(f);
  EXPECT_TRUE(has(text, "%x: f32 x4 #2 = load %x_ptrs\n")) << text;  // the strided load
  EXPECT_TRUE(has(text, "vstore %out_ptrs, %x width=4")) << text;    // stored contiguously
  EXPECT_TRUE(has(text, "%tile: f32 x8 #3 = load")) << text;         // 32x33
  EXPECT_TRUE(has(text, "%tile1: f32 x4 #2 = vload")) << text;       // 32x32
}

// An access of several 4-element chunks per thread: each chunk's first element is a multiple of
// 4 past register 0's (thread strides, a loop index in steps of 2048, a row start times a
// runtime stride shared by the whole thread), so one 16-byte test serves all chunks; an
// access whose chunks fall in rows a runtime stride apart keeps the test per chunk.
TEST(GpuPasses, VectorizeMarksAccessesWhoseChunksShareOneAlignment) {
  KernelBuilder k("rows");
  V x = k.ptr("X"), o = k.ptr("Out"), n = k.scalar("N");
  V base = k.program_id(0) * n;  // unknown alignment, the same in every register
  k.tile_range(k.i32(0), n, k.i32(2048), {}, [&](V i, std::vector<V>) -> std::vector<V> {
    V offs = base + i + k.arange(0, 2048);
    k.store(o + offs, k.load(x + offs));
    return {};
  });
  // 64x32 tile at a runtime stride: a thread's chunks lie in rows `n` apart.
  V t = k.tile_load(x, k.i32(0), k.i32(0), n, Shape::of(64, 32));
  k.tile_store(o, k.i32(0), k.i32(0), n, t);
  Program p = k.finish();
  const GpuTarget cuda = nvidia_gpu_target("sm_90");
  auto vectorized = [&](bool one_align) {
    gpu::Function f = lower_to_gpu(p, cuda, {128, "cuda"});
    PassContext ctx{cuda};
    ctx.one_align = one_align;
    for (const char* pass : {"fold-constants", "cse", "dce", "vectorize-access"}) run_gpu_pass(pass, f, ctx);
    return f;
  };
  gpu::Function f = vectorized(true);
  std::string text = gpu::print(f);
  EXPECT_EQ(count(text, "vload "), 2) << text;
  EXPECT_EQ(count(text, "vstore "), 2) << text;
  EXPECT_EQ(count(text, "width=4 one_align=1"), 2) << text;  // the row loop's load and store
  std::string src = emit_cuda(f).source;
  // The loads' chunks are tested all at once first (Dialect::vector_loads_in_flight), then
  // chunk by chunk where that fails: the row loop's load tests its first chunk's address twice
  // (its store once), the tile's load its 4 chunks' addresses at once, then per chunk.
  EXPECT_EQ(count(src, "& 15ull) == 0"), 9) << src;
  EXPECT_EQ(count(src, "[0]) & 15ull) == 0"), 4) << src;  // the first chunk's address
  EXPECT_EQ(count(src, "[c]) & 15ull) == 0"), 2) << src;  // the tile's, per chunk
  // Switched off: every access tests each chunk.
  gpu::Function g = vectorized(false);
  EXPECT_EQ(count(gpu::print(g), "one_align"), 0);
  EXPECT_EQ(count(emit_cuda(g).source, "[c]) & 15ull) == 0"), 4);
}

TEST(GpuPasses, VectorWidthFollowsTheTargetsBytesAndTypes) {
  for (DType d : {DType::i64, DType::f16, DType::boolean}) {
    KernelBuilder k("typed");
    V x = k.ptr("X", d), o = k.ptr("Out", d);
    V offs = k.arange(0, 1024);
    k.store(o + offs, k.load(x + offs));
    Program p = k.finish();
    gpu::Function f = lower(p);
    run(f, {"fold-constants", "cse", "dce", "vectorize-access"});
    std::string text = gpu::print(f);
    if (d == DType::i64) {
      EXPECT_FALSE(has(text, "vload")) << text;  // MSL has no packed long
      gpu::Function g = lower(p);
      run(g, {"fold-constants", "cse", "dce", "vectorize-access"}, nvidia_gpu_target());
      text = gpu::print(g);
      EXPECT_TRUE(has(text, "vload %x_ptrs width=2")) << text;  // 16 bytes: longlong2
    } else if (d == DType::f16) {
      EXPECT_TRUE(has(text, "vload %x_ptrs width=4")) << text;  // half4
    } else {
      EXPECT_FALSE(has(text, "vload")) << text;  // no packed bool
    }
  }
}

// serpentine-mma and preload-fragments mark mma.sync ops, once however often they run, and leave
// the other atoms alone (one warpgroup instruction covers its tile; Apple's compiler orders its own).
TEST(GpuPasses, SerpentineAndPreloadMarkWarpLevelMmasOnly) {
  const std::string in =
      "gpu_kernel @k(%K: i32) threads=128 simd=32 {\n"
      "  #2 = tile<4096> thr=(4,8,2,2):(2,64,2048,32) reg=(2,4,4):(1,512,8)\n"
      "  %a: ptr<f16, threadgroup> = alloc shape=\"64x32\" layout=\"pad8\"\n"
      "  %b: ptr<f16, threadgroup> = alloc shape=\"32x64\" layout=\"pad8\"\n"
      "  %tid: i32 thread = builtin thread_index.x\n"
      "  %z: i32 = const value=0\n"
      "  %kc: i32 = const value=32\n"
      "  %f: f32 = const value=0.0\n"
      "  %zeros: f32 x32 #2 = splat %f\n"
      "  for %i: i32 = %z to %K step %kc iter(%acc: f32 x32 #2 = %zeros) -> (%r) {\n"
      "    %acc1: f32 x32 #2 = mma %a, %b, %acc, %tid atom=\"mma.sync\" atom_m=16 atom_n=8 atom_k=16 "
      "m=64 n=64 k=32 lda=40 ldb=72 warps_m=2 warps_n=2 tf32=0 ldmatrix=1\n"
      "    %acc2: f32 x32 #2 = mma %a, %b, %acc1, %tid atom=\"simdgroup_matrix\" atom_m=8 atom_n=8 "
      "atom_k=8 m=64 n=64 k=32 lda=40 ldb=72 warps_m=2 warps_n=2 tf32=0 ldmatrix=1\n"
      "    yield %acc2\n"
      "  }\n"
      "}\n";
  const GpuTarget t = nvidia_gpu_target("sm_80");
  const std::string out = run_gpu_passes_on_text(in, {"serpentine-mma", "preload-fragments"}, t);
  const std::string marked = "warps_m=2 warps_n=2 tf32=0 ldmatrix=1 serpentine=1 preload=1\n";
  EXPECT_EQ(count(out, marked), 1) << out;
  EXPECT_TRUE(has(out, "atom=\"mma.sync\" atom_m=16 atom_n=8 atom_k=16 m=64 n=64 k=32 lda=40 ldb=72 " + marked)) << out;
  EXPECT_EQ(count(out, "serpentine="), 1) << out;  // not on the simdgroup_matrix op
  EXPECT_EQ(run_gpu_passes_on_text(out, {"serpentine-mma", "preload-fragments"}, t), out);
  EXPECT_EQ(count(run_gpu_passes_on_text(in, {"serpentine-mma"}, t), "preload="), 0);
}

// ldmatrix-fragments marks the mma.sync ops whose arrays' rows ldmatrix can read (ldmatrix_fits):
// 16-bit A and B rows 16-byte aligned, or a tf32 atom's f32 A; not 8-byte rows, not another atom.
TEST(GpuPasses, LdmatrixFragmentsMarksMmaSyncOpsWithAlignedRows) {
  auto mma = [](const std::string& r, const std::string& a, const std::string& b, const std::string& lds) {
    return "    %" + r + " = mma %" + a + ", %" + b + ", %acc, %tid atom=\"mma.sync\" atom_m=16 atom_n=8 " +
           "atom_k=" + (a == "a32" ? "8" : "16") + " m=64 n=64 k=32 " + lds + " warps_m=2 warps_n=2 tf32=" +
           (a == "a32" ? "1" : "0") + "\n";
  };
  const std::string in =
      "gpu_kernel @k(%K: i32) threads=128 simd=32 {\n"
      "  #2 = tile<4096> thr=(4,8,2,2):(2,64,2048,32) reg=(2,4,4):(1,512,8)\n"
      "  %a: ptr<f16, threadgroup> = alloc shape=\"64x32\" layout=\"pad8\"\n"
      "  %b: ptr<f16, threadgroup> = alloc shape=\"32x64\" layout=\"pad8\"\n"
      "  %a4: ptr<f16, threadgroup> = alloc shape=\"64x32\" layout=\"pad4\"\n"
      "  %a32: ptr<f32, threadgroup> = alloc shape=\"64x32\" layout=\"pad4\"\n"
      "  %b32: ptr<f32, threadgroup> = alloc shape=\"32x64\" layout=\"pad4\"\n"
      "  %tid: i32 thread = builtin thread_index.x\n"
      "  %f: f32 = const value=0.0\n"
      "  %acc: f32 x32 #2 = splat %f\n" +
      mma("r1: f32 x32 #2", "a", "b", "lda=40 ldb=72") +
      mma("r2: f32 x32 #2", "a4", "b", "lda=36 ldb=72") +
      mma("r3: f32 x32 #2", "a32", "b32", "lda=36 ldb=68") +
      "    %r4: f32 x32 #2 = mma %a, %b, %acc, %tid atom=\"simdgroup_matrix\" atom_m=8 atom_n=8 atom_k=8 "
      "m=64 n=64 k=32 lda=40 ldb=72 warps_m=2 warps_n=2 tf32=0\n"
      "}\n";
  const GpuTarget t = nvidia_gpu_target("sm_80");
  const std::string out = run_gpu_passes_on_text(in, {"ldmatrix-fragments"}, t);
  EXPECT_EQ(count(out, "ldmatrix=1"), 2) << out;
  EXPECT_TRUE(has(out, "%r1: f32 x32 #2 = mma %a, %b, %acc, %tid atom=\"mma.sync\" atom_m=16 atom_n=8 atom_k=16 "
                       "m=64 n=64 k=32 lda=40 ldb=72 warps_m=2 warps_n=2 tf32=0 ldmatrix=1\n")) << out;
  EXPECT_TRUE(has(out, "lda=36 ldb=68 warps_m=2 warps_n=2 tf32=1 ldmatrix=1\n")) << "tf32: A's rows\n" << out;
  EXPECT_TRUE(has(out, "lda=36 ldb=72 warps_m=2 warps_n=2 tf32=0\n")) << "8-byte rows\n" << out;
  EXPECT_TRUE(has(out, "atom=\"simdgroup_matrix\" atom_m=8 atom_n=8 atom_k=8 m=64 n=64 k=32 lda=40 ldb=72 "
                       "warps_m=2 warps_n=2 tf32=0\n")) << out;
  EXPECT_EQ(run_gpu_passes_on_text(out, {"ldmatrix-fragments"}, t), out);
}

// elide-barriers: a block reduction's exchange through threadgroup array `array`, as lowering
// writes it: lane 0 of each simdgroup publishes, a barrier, every thread reads the partials, and
// the trailing barrier that frees the array for the next exchange. `x` is the thread's value.
std::string exchange(const std::string& array, const std::string& x, const std::string& r,
                     const std::string& indent = "  ") {
  return indent + "%w_" + r + ": ptr<f32, threadgroup> thread = ptr_offset %" + array + ", %sg\n" +
         indent + "store %w_" + r + ", %" + x + ", %first\n" + indent + "barrier\n" + indent + "%r_" +
         r + ": ptr<f32, threadgroup> thread = ptr_offset %" + array + ", %lane\n" + indent + "%p_" + r +
         ": f32 thread = load %r_" + r + "\n" + indent + "%" + r + ": f32 = simd_reduce.sum %p_" + r +
         " lanes=2\n" + indent + "barrier\n";
}

const char* const kElideHead =
    "gpu_kernel @k(%o: ptr<f32>, %n: i32) threads=64 simd=32 {\n"
    "  %a: ptr<f32, threadgroup> = alloc shape=\"2\" stages=1 layout=\"linear\"\n"
    "  %b: ptr<f32, threadgroup> = alloc shape=\"2\" stages=1 layout=\"linear\"\n"
    "  %tid: i32 thread = builtin thread_index.x\n"
    "  %lane: i32 thread = builtin simd_lane.x\n"
    "  %sg: i32 thread = builtin simdgroup_index.x\n"
    "  %z: i32 = const value=0\n"
    "  %one: i32 = const value=1\n"
    "  %first: bool thread = eq %lane, %z\n"
    "  %x: f32 thread = cast %tid\n";

std::string elide(const std::string& body) {
  return run_gpu_passes_on_text(std::string(kElideHead) + body + "}\n", {"elide-barriers"},
                                nvidia_gpu_target("sm_90"));
}

// Two dependent reductions (layernorm's mean, then the squares about it), each through its own
// array: the first one's trailing barrier orders its reads of %a against nothing (the second
// writes %b) and the last one's against nothing at all; the barriers before the reads stay.
TEST(GpuPasses, ElideBarriersRemovesTrailingBarriersOfReductionsOnTwoArrays) {
  const std::string out = elide(exchange("a", "x", "m") + "  %d: f32 thread = sub %x, %m\n" +
                                exchange("b", "d", "v") + "  store %o, %v\n");
  EXPECT_EQ(count(out, "  barrier\n"), 2) << out;
  EXPECT_TRUE(has(out, "  store %w_m, %x, %first\n  barrier\n  %r_m:")) << out;
  EXPECT_TRUE(has(out, "lanes=2\n  %d: f32 thread = sub %x, %m\n")) << out;
  EXPECT_TRUE(has(out, "  store %w_v, %d, %first\n  barrier\n  %r_v:")) << out;
  EXPECT_TRUE(has(out, "lanes=2\n  store %o, %v\n}")) << out;
  // Run again: nothing more goes.
  EXPECT_EQ(run_gpu_passes_on_text(out, {"elide-barriers"}, nvidia_gpu_target("sm_90")), out);
}

// Through one array, the second reduction's writes overwrite what other threads of the first
// may still read (write after read), and each exchange's reads need its writes (read after
// write): of four barriers only the last goes.
TEST(GpuPasses, ElideBarriersKeepsBarriersBetweenAccessesOfOneArray) {
  const std::string out = elide(exchange("a", "x", "m") + "  %d: f32 thread = sub %x, %m\n" +
                                exchange("a", "d", "v") + "  store %o, %v\n");
  EXPECT_EQ(count(out, "  barrier\n"), 3) << out;
  EXPECT_TRUE(has(out, "lanes=2\n  barrier\n  %d: f32 thread = sub %x, %m\n")) << out;
  EXPECT_TRUE(has(out, "lanes=2\n  store %o, %v\n}")) << out;
  // Offsets do not tell slots apart: one array is one location.
  const std::string slots = elide(
      "  %wa: ptr<f32, threadgroup> = ptr_offset %a, %one\n  store %wa, %x\n  barrier\n"
      "  %ra: ptr<f32, threadgroup> = ptr_offset %a, %z\n  %y: f32 = load %ra\n  store %o, %y\n");
  EXPECT_EQ(count(slots, "  barrier\n"), 1) << slots;
}

// In a loop the next turn's writes follow this turn's reads: one exchange per turn keeps its
// trailing barrier (the back edge), two on alternating arrays need neither.
TEST(GpuPasses, ElideBarriersFollowsTheLoopsBackEdge) {
  const std::string one = elide("  for %i: i32 = %z to %n step %one {\n" + exchange("a", "x", "m", "    ") +
                                "    store %o, %m\n    yield\n  }\n");
  EXPECT_EQ(count(one, "    barrier\n"), 2) << one;
  const std::string two = elide("  for %i: i32 = %z to %n step %one {\n" + exchange("a", "x", "m", "    ") +
                                exchange("b", "m", "v", "    ") + "    store %o, %v\n    yield\n  }\n");
  EXPECT_EQ(count(two, "    barrier\n"), 2) << two;
  EXPECT_TRUE(has(two, "lanes=2\n    %w_v:")) << two;
  EXPECT_TRUE(has(two, "lanes=2\n    store %o, %v\n    yield\n")) << two;
  // A while's after block runs its before block, then itself, again.
  const std::string again = elide("  %k: i32 = while iter(%c: i32 = %z) {\n    %go: bool = lt %c, %n\n"
                                  "    yield %go, %c\n  } do (%d: i32) {\n" + exchange("a", "x", "m", "    ") +
                                  "    %e: i32 = add %d, %one\n    yield %e\n  }\n");
  EXPECT_EQ(count(again, "    barrier\n"), 2) << again;
}

// An if runs either block: a write to the array in one of them keeps the barrier before it.
TEST(GpuPasses, ElideBarriersFollowsBothBlocksOfAnIf) {
  auto after_if = [](const std::string& array) {
    return elide(exchange("a", "x", "m") + "  %c: bool = lt %z, %n\n  if %c {\n    yield\n  } else {\n" +
                 "    %q: ptr<f32, threadgroup> thread = ptr_offset %" + array + ", %sg\n" +
                 "    store %q, %m\n    yield\n  }\n");
  };
  EXPECT_EQ(count(after_if("a"), "  barrier\n"), 2) << after_if("a");
  EXPECT_EQ(count(after_if("b"), "  barrier\n"), 1) << after_if("b");
}

// Barriers with attributes also order device memory, and ops whose effects the pass does not
// model count as touching every array: both keep their barriers.
TEST(GpuPasses, ElideBarriersKeepsDeviceBarriersAndUnmodelledOps) {
  const std::string device = elide(exchange("a", "x", "m") + "  barrier memory=1\n  store %o, %m\n");
  EXPECT_TRUE(has(device, "  barrier memory=1\n")) << device;
  const std::string wait = elide(exchange("a", "x", "m") + "  async_wait pending=0\n  store %o, %m\n");
  EXPECT_TRUE(has(wait, "lanes=2\n  barrier\n  async_wait pending=0\n")) << wait;
}

}  // namespace
}  // namespace metile

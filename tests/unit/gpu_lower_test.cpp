// Lowering Tile IR -> GPU IR, per op family: layouts, predicates, reductions, exchanges through
// threadgroup memory, SIMT ops, roles, and the errors a valid program can still get.
#include <gtest/gtest.h>

#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/lower.h"
#include "passes/pipeline.h"
#include "support/error.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

gpu::Function lower(const Program& p, int num_threads = 0) {
  return lower_to_gpu(p, apple_gpu_target(), {num_threads, "metal-sim"});
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error";
  return Error(METILE_OK, "");
}

TEST(GpuLower, VectorAddIsBlockedCyclicAndPredicated) {
  gpu::Function f = lower(kernels::vector_add(1024));
  std::string text = gpu::print(f);
  EXPECT_EQ(f.threads, 256);  // min(256, 1024 / 4)
  // Thread t owns elements 4t .. 4t+3: coalesced, one 16-byte access per thread.
  EXPECT_TRUE(has(text, "#2 = tile<1024> thr=256:4 reg=4:1\n")) << text;
  EXPECT_TRUE(has(text, "%mask: bool x4 #2 = lt %offs")) << text;
  EXPECT_TRUE(has(text, "= load %x_ptrs, %mask, %c")) << text;
  EXPECT_TRUE(has(text, "store %out_ptrs, %out, %mask")) << text;
  EXPECT_TRUE(has(text, "%out: f32 x4 #2 = add %x, %y")) << text;
}

TEST(GpuLower, SmallTilesUseNarrowerChunksAndPadding) {
  gpu::Function f = lower(kernels::vector_add(100), 64);
  std::string text = gpu::print(f);
  // 100 elements over 64 threads: one element per thread in two rounds, 28 padding slots.
  EXPECT_TRUE(has(text, "tile<100> thr=64:1 reg=2:64 padded")) << text;
  EXPECT_TRUE(has(text, "valid #2 %tid")) << text;
  // The user's mask and the padding predicate both guard the accesses.
  EXPECT_TRUE(has(text, "= bitand %mask, %in_tile")) << text;
}

TEST(GpuLower, ThreadCountHeuristicAndOption) {
  EXPECT_EQ(lower(kernels::vector_add(16)).threads, 32);      // at least a simdgroup
  EXPECT_EQ(lower(kernels::vector_add(4096)).threads, 256);   // at most 256
  EXPECT_EQ(lower(kernels::vector_add(4096), 128).threads, 128);
  Error e = error_of([] { lower(kernels::vector_add(256), 100); });
  EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(e.what(), "num_threads 100 is not a multiple of the simd width 32")) << e.what();
  e = error_of([] { lower(kernels::vector_add(256), 2048); });
  EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED);
  EXPECT_TRUE(has(e.what(), "2048 threads per threadgroup exceed the limit of 1024")) << e.what();
}

TEST(GpuLower, TilesPastThePerThreadLimitAreRefusedOnEveryTarget) {
  // vector_add(2^18) over 256 threads: 1024 elements per thread, the limit, lowers; twice that
  // is refused before any compiler would spend minutes on it.
  const Program fits = kernels::vector_add(1 << 18), big = kernels::vector_add(1 << 19);
  for (const GpuTarget* t : {&apple_gpu_target(), &nvidia_gpu_target()}) {
    EXPECT_NO_THROW(run_gpu_pipeline(fits, *t, {}, t->name));
    Error e = error_of([&] { run_gpu_pipeline(big, *t, {}, t->name); });
    EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED) << t->name;
    EXPECT_TRUE(has(e.what(), "a tile needs 2048 elements per thread over 256 threads; " +
                                  t->name + " holds at most 1024")) << e.what();
  }
}

TEST(GpuLower, SimtKernelsUseTheIdentityLayout) {
  gpu::Function f = lower(kernels::fft(64));
  std::string text = gpu::print(f);
  EXPECT_EQ(f.threads, 64);
  EXPECT_TRUE(has(text, "tile<64> thr=64:1 reg=1:0\n")) << text;
  EXPECT_EQ(count(text, "shuffle_xor"), 2 * 5) << text;  // re and im for 5 simd stages
  EXPECT_TRUE(has(text, "alloc shape=\"64\"")) << text;
  EXPECT_TRUE(has(text, "barrier")) << text;

  Error e = error_of([] { lower(kernels::fft(64), 128); });
  EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(e.what(), "differs from the kernel's SIMT thread count 64")) << e.what();
}

TEST(GpuLower, SimtThreadCountRoundsUpToWholeSimdgroups) {
  KernelBuilder k("partial");
  V out = k.ptr("Out", DType::i32);
  k.raw().set_num_threads(48);
  V tid = k.thread_id();
  k.store(out + tid, tid * 2);
  gpu::Function f = lower(k.finish());
  EXPECT_EQ(f.threads, 64);
  std::string text = gpu::print(f);
  EXPECT_TRUE(has(text, "tile<48> thr=64:1 reg=1:0 padded")) << text;
  EXPECT_TRUE(has(text, "in_tile")) << text;  // threads 48..63 store nothing
}

TEST(GpuLower, WholeTileReductionsUseTheirIdentities) {
  for (OpKind op : {OpKind::REDUCE_SUM, OpKind::REDUCE_MAX, OpKind::REDUCE_MIN}) {
    KernelBuilder k("red");
    V x = k.ptr("X"), out = k.ptr("Out");
    V offs = k.arange(0, 1000);
    V r = k.reduce(op, k.load(x + offs), -1);
    k.store(out + k.program_id(0), r);
    std::string text = gpu::print(lower(k.finish()));
    // 1000 elements in 250 threads x 4 registers, 24 of them padding, folded with the identity.
    const char* ident = op == OpKind::REDUCE_SUM ? "value=0.0" : op == OpKind::REDUCE_MAX ? "value=-inf" : "value=inf";
    EXPECT_TRUE(has(text, ident)) << text;
    EXPECT_TRUE(has(text, "= select %in_tile")) << text;
    EXPECT_TRUE(has(text, "reg_reduce")) << text;
    EXPECT_EQ(count(text, "simd_reduce"), 2) << text;  // lanes, then the simdgroups' partials
    EXPECT_EQ(count(text, "barrier"), 2) << text;
    // A scalar store happens once, in thread 0.
    EXPECT_TRUE(has(text, "%leader: bool thread = eq %tid")) << text;
  }
}

TEST(GpuLower, HalfReductionsAccumulateInF32) {
  KernelBuilder k("red16");
  V x = k.ptr("X", DType::f16), out = k.ptr("Out", DType::f16);
  V s = k.sum(k.load(x + k.arange(0, 256)));
  k.store(out, s);
  std::string text = gpu::print(lower(k.finish()));
  EXPECT_TRUE(has(text, "f32 x4 #2 = cast %x")) << text;
  EXPECT_TRUE(has(text, "%sum: f16 = cast")) << text;
}

TEST(GpuLower, AxisReductionAndItsBroadcastBackStayInRegisters) {
  KernelBuilder k("rows");
  V x = k.ptr("X"), out = k.ptr("Out");
  V tile = k.tile_load(x, k.i32(0), k.i32(0), k.i32(64), Shape::of(16, 64));
  V row_max = k.max(tile, 1);                                           // (16)
  V col = k.wrap(k.raw().broadcast(k.raw().reshape(row_max.id, Shape::of(16, 1)), Shape::of(16, 64)));
  k.tile_store(out, k.i32(0), k.i32(0), k.i32(64), tile - col);
  std::string text = gpu::print(lower(k.finish()));
  // 16 rows on 256 threads, 4 consecutive elements each: a thread folds its 4 registers, then
  // the 16 lanes of a row combine by a 4-step shuffle_xor tree; the tile stays in registers.
  EXPECT_TRUE(has(text, "reg_reduce.max %tile fold=\"0,0,0,0\"") || has(text, "reg_reduce.max %tile fold=0,0,0,0")) << text;
  EXPECT_FALSE(has(text, "for %r: i32")) << text;
  EXPECT_EQ(count(text, "shuffle_xor"), 4) << text;
  // The row maxima are replicated over their 16 lanes, which hold that row's elements: the
  // reshape to 16x1 is free and the broadcast back renames registers. Nothing is exchanged.
  EXPECT_TRUE(has(text, "tile<16> thr=(16,16):(0,1) reg=1:0")) << text;
  EXPECT_TRUE(has(text, "reg_gather")) << text;
  EXPECT_FALSE(has(text, "scratch")) << text;
  EXPECT_EQ(count(text, "barrier"), 0) << text;
}

TEST(GpuLower, ColumnReductionCombinesOnePartialPerSimdgroup) {
  KernelBuilder k("cols");
  V x = k.ptr("X"), out = k.ptr("Out");
  V tile = k.tile_load(x, k.i32(0), k.i32(0), k.i32(64), Shape::of(16, 64));
  k.store(out + k.arange(0, 64), k.sum(tile, 0));
  std::string text = gpu::print(lower(k.finish()));
  // 256 threads, 4 consecutive elements each: lanes 0-15 hold 64 columns of one row, lane 16
  // the next row (one shuffle), and each of the 8 simdgroups two rows: 8 partials per column
  // meet in threadgroup memory (64 x 8 floats), not the 1024-element tile.
  EXPECT_TRUE(has(text, "reg_reduce.sum %tile fold=\"0,1,2,3\"") || has(text, "reg_reduce.sum %tile fold=0,1,2,3")) << text;
  EXPECT_EQ(count(text, "shuffle_xor"), 1) << text;
  EXPECT_TRUE(has(text, "sg_slot")) << text;
  EXPECT_TRUE(has(text, "alloc shape=\"512\"")) << text;
  EXPECT_EQ(count(text, "barrier"), 2) << text;
}

// s = A @ B (32x32); p = exp(s - rowmax(s)[:, None]) / rowsum(...)[:, None].
Program softmax_of_scores() {
  KernelBuilder k("scores");
  V a = k.ptr("A"), bm = k.ptr("B"), out = k.ptr("Out");
  V ta = k.tile_load(a, k.i32(0), k.i32(0), k.i32(32), Shape::of(32, 32));
  V tb = k.tile_load(bm, k.i32(0), k.i32(0), k.i32(32), Shape::of(32, 32));
  V s = k.dot(ta, tb, k.zeros(Shape::of(32, 32)));
  auto col = [&](V v) { return k.wrap(k.raw().reshape(v.id, Shape::of(32, 1))); };
  V e = k.exp(s - col(k.max(s, 1)));
  V pr = e / col(k.sum(e, 1));
  k.tile_store(out, k.i32(0), k.i32(0), k.i32(32), pr);
  return k.finish();
}

TEST(GpuLower, OnlineSoftmaxStatisticsStayInTheScoresFragments) {
  std::string text = gpu::print(lower(softmax_of_scores(), 128));  // 4 warps
  // Whole rows per warp (4 x 1 instead of 2 x 2), so each row statistic is one register fold
  // and two shuffles, and its broadcast back over the row renames registers.
  EXPECT_TRUE(has(text, "warps_m=4 warps_n=1")) << text;
  EXPECT_EQ(count(text, "reg_reduce"), 2) << text;
  EXPECT_EQ(count(text, "reg_gather"), 2) << text;
  EXPECT_FALSE(has(text, "scratch")) << text;
  EXPECT_EQ(count(text, "barrier"), 2) << text;  // staging the dot's operands only
}

// The whole-rows rule is the compiler's choice; a warp grid the user asks for wins over it.
TEST(GpuLower, AnAskedWarpGridWinsOverWholeRows) {
  LowerOptions o{128, "metal-sim"};
  o.warps_m = 2;
  o.warps_n = 2;
  std::string text = gpu::print(lower_to_gpu(softmax_of_scores(), apple_gpu_target(), o));
  EXPECT_TRUE(has(text, "warps_m=2 warps_n=2")) << text;
  EXPECT_FALSE(has(text, "warps_m=4 warps_n=1")) << text;
}

TEST(GpuLower, ReshapeWithTheSameLayoutMovesNothing) {
  KernelBuilder k("flat");
  V x = k.ptr("X"), out = k.ptr("Out");
  V t = k.tile_load(x, k.i32(0), k.i32(0), k.i32(32), Shape::of(8, 32));
  V flat = k.wrap(k.raw().reshape(t.id, Shape::of(256)));
  k.store(out + k.arange(0, 256), flat);
  std::string text = gpu::print(lower(k.finish()));
  EXPECT_FALSE(has(text, "barrier")) << text;
  EXPECT_FALSE(has(text, "scratch")) << text;
}

TEST(GpuLower, RolesPredicateStoresOfSimtTiles) {
  KernelBuilder k("roles");
  V out = k.ptr("Out", DType::i32), flag = k.ptr("Flag", DType::i32);
  k.raw().set_num_threads(128);
  V tid = k.thread_id();
  k.raw().role_begin(1, 2, 0, 0);  // simdgroups 2 and 3: threads 64..127
  k.store(out + tid, tid);
  k.store(flag, k.i32(1));  // a scalar store runs once
  k.raw().role_end();
  k.raw().role_begin(0, 1, 4, 1);  // simdgroup 4 does not exist: interp faults, lowering rejects it
  k.raw().role_end();
  Program p = k.finish();
  Error e = error_of([&] { lower(p); });
  EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
  EXPECT_TRUE(has(e.what(), "are past the 4 simdgroups of 128 threads")) << e.what();
}

TEST(GpuLower, RoleRangesFollowInterp) {
  KernelBuilder k("roles");
  V out = k.ptr("Out", DType::i32), flag = k.ptr("Flag", DType::i32);
  k.raw().set_num_threads(128);
  V tid = k.thread_id();
  k.raw().role_begin(1, 2, 0, 0);  // simdgroups 2 and 3: threads 64..127
  k.store(out + tid, tid);
  k.store(flag, k.i32(1));
  k.raw().role_end();
  std::string text = gpu::print(lower(k.finish()));
  EXPECT_TRUE(has(text, "%in_role: bool thread = bitand")) << text;
  EXPECT_TRUE(has(text, "value=64")) << text;
  EXPECT_TRUE(has(text, "value=128")) << text;
  EXPECT_TRUE(has(text, ", %in_role\n")) << text;
  EXPECT_TRUE(has(text, ", %leader\n")) << text;
}

TEST(GpuLower, UserBarriersOrderDeviceMemoryOnlyForBuffersWrittenAndRead) {
  // The FFT reads X and writes Y: its threads exchange data through shared memory only.
  std::string text = gpu::print(lower(kernels::fft(64)));
  EXPECT_FALSE(has(text, "device=1")) << text;
  KernelBuilder k("exchange");
  V buf = k.ptr("Buf");
  k.raw().set_num_threads(64);
  V tid = k.thread_id();
  k.store(buf + tid, k.cast(tid, DType::f32));
  k.barrier();
  k.store(buf + 64 + tid, k.load(buf + (63 - tid)));  // reads another thread's write
  text = gpu::print(lower(k.finish()));
  EXPECT_TRUE(has(text, "barrier device=1")) << text;
}

TEST(GpuLower, SharedMemoryIsZeroFilled) {
  gpu::Function f = lower(kernels::fft(64));
  std::string text = gpu::print(f);
  // Four 64-element arrays cleared by 64 threads: one store each, then one barrier.
  size_t first_barrier = text.find("barrier");
  EXPECT_EQ(count(text.substr(0, first_barrier), "store"), 4) << text;
}

// The accumulator of a K loop lives in the simdgroup_matrix fragment layout from the dot
// through the loop and the epilogue to the store: the loop body stages A and B, runs one mma
// between two barriers, and nothing converts the accumulator (no exchange scratch).
TEST(GpuLower, DotKeepsTheAccumulatorInFragmentLayout) {
  kernels::GemmConfig g;
  g.epilogue = kernels::Epilogue::relu;
  gpu::Function f = lower(kernels::gemm(g));
  std::string text = gpu::print(f);
  EXPECT_EQ(f.threads, 128) << text;  // 32x32 of 8x8 atoms: 2x2 simdgroups of 2x2 atoms
  EXPECT_EQ(count(text, " mma "), 1) << text;
  EXPECT_EQ(count(text, "barrier"), 2) << text;
  EXPECT_FALSE(has(text, "scratch")) << text;
  EXPECT_TRUE(has(text, "warps_m=2")) << text;
  // The accumulator layout is Apple's 8x8 lane map (metal_shim_matrix.h), tiled over warps.
  const gpu::Function& cf = f;
  const gpu::Layout* acc = nullptr;
  gpu::walk(cf.body, [&](const gpu::Op& op) {
    if (op.kind == gpu::GpuOpKind::MMA) acc = &cf.layout_of(op.result());
  });
  ASSERT_NE(acc, nullptr);
  for (int64_t t = 0; t < 128; ++t)
    for (int64_t r = 0; r < acc->regs(); ++r) {
      int64_t lane = t % 32, warp = t / 32, v = r % 2, tile = r / 2;
      int64_t row = ((lane & 7) >> 1) | ((lane >> 4) << 2), col = (((lane & 1) << 1) | ((lane & 8) >> 1)) + v;
      row += (warp % 2) * 16 + (tile % 2) * 8;
      col += (warp / 2) * 16 + (tile / 2) * 8;
      ASSERT_EQ(acc->element(t, r), row * 32 + col) << "thread " << t << " register " << r;
    }
}

// A thread count from the user (Python's num_threads sets the program's) picks the warp grid.
TEST(GpuLower, DotUsesTheRequestedThreadCount) {
  Program p = kernels::gemm({});
  p.num_threads = 64;
  gpu::Function f = lower(p);
  std::string text = gpu::print(f);
  EXPECT_EQ(f.threads, 64);
  EXPECT_EQ(count(text, " mma "), 1) << text;
  EXPECT_TRUE(has(text, "warps_m=2 warps_n=1") || has(text, "warps_m=1 warps_n=2")) << text;
}

TEST(GpuLower, DotWithoutAFittingAtomRunsExactFmas) {
  kernels::GemmConfig g;
  g.block_m = 1;
  g.bounds = true;
  std::string text = gpu::print(lower(kernels::gemm(g)));
  EXPECT_FALSE(has(text, " mma ")) << text;
  EXPECT_TRUE(has(text, "for %kk")) << text;
}

TEST(GpuLower, ThreadgroupMemoryIsCheckedAgainstTheLimit) {
  KernelBuilder k("big");
  V out = k.ptr("Out");
  k.raw().set_num_threads(64);
  V s = k.shared(9000);
  V tid = k.thread_id();
  k.store(out + tid, k.load(s + tid));
  Error e = error_of([&] { run_gpu_pipeline(k.finish(), apple_gpu_target(), {}, "metal-sim"); });
  EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED);
  EXPECT_TRUE(has(e.what(), "big needs 36000 bytes of threadgroup memory; metal-sim allows 32768"))
      << e.what();
}

// The staged operands of a dot count against the device's limit. A 128x128x32 f32 GEMM would
// stage 35 KB: on Apple (32 KB) K goes in chunks of 8 (10 KB, four mma ops); an sm_90 block may
// opt into 227 KB, so it stages K whole, three pipeline stages deep (104 KB). Where even one atom's K is too much, the error names
// the kernel, the bytes and the limit.
TEST(GpuLower, DotStagingFitsTheLimit) {
  kernels::GemmConfig g;
  g.block_m = g.block_n = 128;
  GpuPipelineResult apple = run_gpu_pipeline(kernels::gemm(g), apple_gpu_target(), {}, "metal-sim");
  EXPECT_EQ(gpu::threadgroup_bytes(apple.function), 10368u);
  EXPECT_EQ(count(apple.gpu_ir, " mma "), 4) << apple.gpu_ir;
  CompileOptions o;
  o.allow_tf32 = 1;
  // sm_80: mma.sync's padded staging (on sm_90 this tf32 dot takes wgmma, gpu_wgmma_tf32_test.cpp).
  GpuPipelineResult r = run_gpu_pipeline(kernels::gemm(g), nvidia_gpu_target("sm_80"), o, "cuda");
  EXPECT_EQ(gpu::threadgroup_bytes(r.function), 3 * 35328u);
  EXPECT_EQ(count(r.gpu_ir, " mma "), 1);
  EXPECT_EQ(nvidia_gpu_target("sm_90").threadgroup_memory_bytes, 227u * 1024);
  EXPECT_EQ(nvidia_gpu_target("sm_80").threadgroup_memory_bytes, 163u * 1024);
  // Enough threads that the accumulator fits each thread (256 elements), so the threadgroup
  // memory limit is what refuses it.
  g.block_m = g.block_n = 512;
  g.block_k = 8;
  CompileOptions wide;
  wide.num_threads = 1024;
  Error e = error_of([&] { run_gpu_pipeline(kernels::gemm(g), apple_gpu_target(), wide, "metal-sim"); });
  EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED);
  EXPECT_TRUE(has(e.what(), "matmul needs 41088 bytes of threadgroup memory; metal-sim allows 32768"))
      << e.what();
}

TEST(GpuLower, EverySuiteKernelLowersAndVerifies) {
  for (const Program& p : kernels::all_programs()) {
    GpuPipelineResult r = run_gpu_pipeline(p, apple_gpu_target(), {}, "metal-sim");
    EXPECT_FALSE(r.gpu_ir.empty());
    EXPECT_FALSE(r.gpu_ir_opt.empty());
  }
}

}  // namespace
}  // namespace metile

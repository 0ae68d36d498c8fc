// The generated C++ against the interp oracle for everything that is not one element-wise op:
// reductions on every axis (NaN max/min, wrapping integer sums, f16 accumulation), masks with
// `other`, loops (negative steps, swapped carried values, in-place updates, nested), SIMT ops and
// roles, shared memory, dot with ragged bounds and narrow inputs, and the readability of the
// generated text itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "codegen/cpu_cpp.h"
#include "kernels/dsl.h"
#include "kernels/launch.h"
#include "support/half.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

// Runs on cpu and interp with copies of the same float buffers and checks they agree.
void expect_agree(const Program& p, std::vector<std::vector<float>> bufs, double rel = 0,
                  std::array<uint32_t, 3> grid = {1, 1, 1}, float floor = 1.0f) {
  std::vector<std::vector<float>> cpu = bufs, ref = bufs;
  kernels::Launch a(p, "cpu"), b(p, "interp");
  for (auto& v : cpu) a.buffer(v);
  for (auto& v : ref) b.buffer(v);
  ASSERT_EQ(a.run(grid), METILE_OK) << a.error();
  ASSERT_EQ(b.run(grid), METILE_OK) << b.error();
  for (size_t k = 0; k < bufs.size(); ++k)
    for (size_t i = 0; i < bufs[k].size(); ++i) {
      float x = cpu[k][i], y = ref[k][i];
      bool ok = (std::isnan(x) && std::isnan(y)) || x == y ||
                std::fabs(x - y) <= rel * std::max(std::fabs(y), floor);
      ASSERT_TRUE(ok) << "buffer " << k << " [" << i << "]: cpu " << x << ", interp " << y;
    }
}

std::vector<float> ramp(size_t n, float scale = 1, float offset = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 37) % 101) - 50 * scale;
  return v;
}

V reshape(KernelBuilder& k, V x, Shape s) { return k.wrap(k.raw().reshape(x.id, s)); }

TEST(CpuCodegen, ReductionsOnEveryAxisWithNaNs) {
  KernelBuilder k("reduce");
  V x = k.ptr("X"), out = k.ptr("Out");
  V idx = reshape(k, k.arange(0, 8 * 33), Shape::of(8, 33));
  V t = k.load(x + idx);
  k.store(out + 0, k.sum(t));
  k.store(out + 1, k.max(t));
  k.store(out + 2, k.reduce(OpKind::REDUCE_MIN, t, -1));
  k.store(out + (k.arange(0, 33) + 3), k.sum(t, 0));
  k.store(out + (k.arange(0, 33) + 36), k.max(t, 0));
  k.store(out + (k.arange(0, 8) + 69), k.sum(t, 1));
  k.store(out + (k.arange(0, 8) + 77), k.reduce(OpKind::REDUCE_MIN, t, 1));
  std::vector<float> in = ramp(8 * 33, 0.37f);
  in[5] = in[40] = in[100] = std::nanf("");
  in[7] = -std::numeric_limits<float>::infinity();
  // Sums are vectorized (summed in another order): agree to rounding.
  expect_agree(k.finish(), {in, std::vector<float>(85)}, 1e-5);
}

TEST(CpuCodegen, IntegerSumsWrapAndHalfSumsRoundOnce) {
  KernelBuilder k("int_reduce");
  V x = k.ptr("X", DType::i32), y = k.ptr("Y", DType::f16), out = k.ptr("Out", DType::i32),
    hout = k.ptr("HOut", DType::f16);
  V xi = k.load(x + k.arange(0, 64));
  k.store(out + 0, k.sum(xi));
  k.store(out + 1, k.max(xi));
  k.store(hout + 0, k.sum(k.load(y + k.arange(0, 64))));
  std::vector<int32_t> xs(64, INT32_MAX / 8);
  xs[3] = INT32_MIN;
  std::vector<uint16_t> ys(64);
  for (int i = 0; i < 64; ++i) ys[i] = float_to_f16(0.1f * i + 0.01f);
  Program p = k.finish();
  std::vector<int32_t> o1(2), o2(2);
  std::vector<uint16_t> h1(1), h2(1);
  kernels::Launch a(p, "cpu"), b(p, "interp");
  std::vector<int32_t> xs2 = xs;
  std::vector<uint16_t> ys2 = ys;
  a.buffer(xs).buffer(ys).buffer(o1).buffer(h1);
  b.buffer(xs2).buffer(ys2).buffer(o2).buffer(h2);
  ASSERT_EQ(a.run(), METILE_OK) << a.error();
  ASSERT_EQ(b.run(), METILE_OK) << b.error();
  EXPECT_EQ(o1, o2);
  EXPECT_NEAR(f16_to_float(h1[0]), f16_to_float(h2[0]), 0.25);
}

TEST(CpuCodegen, MaskedLoadsUseOtherAndTouchNothing) {
  KernelBuilder k("masked");
  V x = k.ptr("X"), out = k.ptr("Out"), n = k.scalar("N");
  V offs = k.program_id(0) * 64 + k.arange(0, 64);
  V m = offs < n;
  V v = k.load(x + offs, m, -3.5);
  k.store(out + offs, v * 2.0 + 1.0, m & (offs != 5));
  Program p = k.finish();
  std::vector<float> in = ramp(100), o(128, 9.0f), in2 = in, o2 = o;
  kernels::Launch a(p, "cpu"), b(p, "interp");
  a.buffer(in).buffer(o).i32(100);
  b.buffer(in2).buffer(o2).i32(100);
  ASSERT_EQ(a.run({2, 1, 1}), METILE_OK) << a.error();
  ASSERT_EQ(b.run({2, 1, 1}), METILE_OK) << b.error();
  EXPECT_EQ(o, o2);
  EXPECT_EQ(o[5], 9.0f);
  EXPECT_EQ(o[120], 9.0f);
}

TEST(CpuCodegen, LoopsWithNegativeStepsAndSwappedCarriedValues) {
  KernelBuilder k("loops");
  V out = k.ptr("Out");
  V a0 = k.cast(k.arange(0, 16), DType::f32), b0 = k.full(Shape::of(16), 1.0);
  // (a, b) = (b, a + b) for i in range(20, 1, -3); s counts the iterations.
  auto r = k.tile_range(k.i32(20), k.i32(1), k.i32(-3), {a0, b0, k.f32(0)},
                        [&](V i, std::vector<V> c) -> std::vector<V> {
                          return {c[1], c[0] + c[1], c[2] + k.cast(i, DType::f32)};
                        });
  // Nested loop with an in-place update of a carried tile and a carried maximum.
  auto r2 = k.tile_range(k.i32(0), k.i32(3), k.i32(1), {r[0], k.f32(-1e9)},
                         [&](V i, std::vector<V> c) -> std::vector<V> {
                           auto in = k.tile_range(k.i32(0), i, k.i32(1), {c[0]},
                                                  [&](V, std::vector<V> d) -> std::vector<V> {
                                                    return {d[0] * 0.5 + 1.0};
                                                  });
                           return {in[0], k.maximum(c[1], k.max(in[0]))};
                         });
  k.store(out + k.arange(0, 16), r[1]);
  k.store(out + (k.arange(0, 16) + 16), r2[0]);
  k.store(out + 32, r[2]);
  k.store(out + 33, r2[1]);
  expect_agree(k.finish(), {std::vector<float>(34)});
}

TEST(CpuCodegen, SimtOpsRolesAndSharedMemory) {
  KernelBuilder k("simt");
  k.raw().set_num_threads(80);
  V x = k.ptr("X"), out = k.ptr("Out");
  V t = k.thread_id();
  V lane = k.wrap(k.raw().simt(OpKind::SIMD_LANE_ID));
  V xv = k.load(x + t, t < 80);
  V sh = k.shuffle_xor(xv, k.i32(3));
  V bc = k.wrap(k.raw().simd(OpKind::SIMD_BROADCAST, xv.id, k.i32(5).id));
  V buf = k.shared(80);
  k.store(buf + t, sh + bc);
  k.barrier();
  // Role 1 of 2 owns simdgroups [1, 3) = threads [32, 80); role 0 of 3 owns only simdgroup 0.
  k.raw().role_begin(1, 2, 0, 0);
  k.store(out + t, k.load(buf + (79 - t)) + k.cast(lane, DType::f32));
  k.raw().role_end();
  k.raw().role_begin(0, 3, 0, 0);
  k.store(out + (t + 80), k.cast(t, DType::f32));
  k.store(out + 160, k.f32(42));
  k.raw().role_end();
  expect_agree(k.finish(), {ramp(80), std::vector<float>(161, -1.0f)});
}

TEST(CpuCodegen, DotWithRaggedBoundsAndHalfInputs) {
  KernelBuilder k("dot");
  V a = k.ptr("A", DType::f16), b = k.ptr("B", DType::f16), c = k.ptr("C");
  V m = k.scalar("M"), n = k.scalar("N"), kk = k.scalar("K");
  V row = k.program_id(0) * 32, col = k.program_id(1) * 16;
  V acc = k.zeros(Shape::of(32, 16));
  auto r = k.tile_range(k.i32(0), kk, k.i32(24), {acc}, [&](V kb, std::vector<V> c0) -> std::vector<V> {
    V ta = k.tile_load(a, row, kb, kk, Shape::of(32, 24), m, kk);
    V tb = k.tile_load(b, kb, col, n, Shape::of(24, 16), kk, n);
    return {k.dot(ta, tb, c0[0])};
  });
  k.tile_store(c, row, col, n, k.maximum(r[0], k.f32(0.0)), m, n);
  Program p = k.finish();
  const int M = 45, N = 37, K = 50;
  std::vector<uint16_t> ha(M * K), hb(K * N);
  for (int i = 0; i < M * K; ++i) ha[i] = float_to_f16(0.01f * ((i * 7) % 29) - 0.1f);
  for (int i = 0; i < K * N; ++i) hb[i] = float_to_f16(0.02f * ((i * 5) % 31) - 0.3f);
  std::vector<float> c1(M * N, 5.0f), c2 = c1;
  std::vector<uint16_t> ha2 = ha, hb2 = hb;
  kernels::Launch x(p, "cpu"), y(p, "interp");
  x.buffer(ha).buffer(hb).buffer(c1).i32(M).i32(N).i32(K);
  y.buffer(ha2).buffer(hb2).buffer(c2).i32(M).i32(N).i32(K);
  ASSERT_EQ(x.run({2, 3, 1}), METILE_OK) << x.error();
  ASSERT_EQ(y.run({2, 3, 1}), METILE_OK) << y.error();
  for (int i = 0; i < M * N; ++i) ASSERT_NEAR(c1[i], c2[i], 1e-5) << i;
}

TEST(CpuCodegen, IntegerDotWraps) {
  KernelBuilder k("idot");
  V a = k.ptr("A", DType::i8), b = k.ptr("B", DType::u8), c = k.ptr("C", DType::i32);
  V ta = k.cast(reshape(k, k.load(a + k.arange(0, 64)), Shape::of(8, 8)), DType::i8);
  V tb = k.cast(reshape(k, k.load(b + k.arange(0, 64)), Shape::of(8, 8)), DType::i8);
  V acc = k.wrap(k.raw().broadcast(k.raw().const_int(DType::i32, 7), Shape::of(8, 8)));
  k.store(c + reshape(k, k.arange(0, 64), Shape::of(8, 8)), k.dot(ta, tb, acc));
  Program p = k.finish();
  std::vector<int8_t> av(64), av2;
  std::vector<uint8_t> bv(64), bv2;
  for (int i = 0; i < 64; ++i) {
    av[i] = static_cast<int8_t>(i * 37 - 100);
    bv[i] = static_cast<uint8_t>(i * 53);
  }
  av2 = av;
  bv2 = bv;
  std::vector<int32_t> c1(64), c2(64);
  kernels::Launch x(p, "cpu"), y(p, "interp");
  x.buffer(av).buffer(bv).buffer(c1);
  y.buffer(av2).buffer(bv2).buffer(c2);
  ASSERT_EQ(x.run(), METILE_OK) << x.error();
  ASSERT_EQ(y.run(), METILE_OK) << y.error();
  EXPECT_EQ(c1, c2);
}

TEST(CpuCodegen, GeneratedCodeFusesChainsAndReadsLikeTheIr) {
  KernelBuilder k("fused");
  V x = k.ptr("X"), out = k.ptr("Out"), n = k.scalar("N");
  V offs = k.program_id(0) * 256 + k.arange(0, 256);
  V m = offs < n;
  V v = k.load(x + offs, m);
  k.store(out + offs, k.exp(v * 2.0) + 1.0, m);
  CpuSource src = generate_cpu_cpp(k.finish());
  std::string body = src.text.substr(src.text.find("---- kernel fused"));
  // One loop over the tile: the load, the arithmetic and the masked store fused; no tile
  // arrays. (The streamed form of the store loops over pieces of it, from mt_b.) It is written
  // twice: once for tiles whose mask offs < N holds at both ends (then everywhere: offs steps by
  // 1), where the mask is `true`, and once as it is.
  EXPECT_EQ(body.find("alignas(64) float v"), std::string::npos) << body;
  size_t loops = 0;
  for (size_t at = body.find("for (int32_t i = 0"); at != std::string::npos; at = body.find("for (int32_t i = 0", at + 1))
    ++loops;
  EXPECT_EQ(loops, 2u) << body;
  const size_t whole = body.find("LL)) {"), rest = body.find("else {", whole);
  ASSERT_NE(whole, std::string::npos) << body;
  ASSERT_NE(rest, std::string::npos) << body;
  EXPECT_EQ(body.substr(whole, rest - whole).find("< N)"), std::string::npos) << body;
  EXPECT_NE(body.substr(rest).find("< N)"), std::string::npos) << body;
  EXPECT_NE(body.find("// store"), std::string::npos);
  EXPECT_NE(body.find("const float v"), std::string::npos);
  EXPECT_EQ(src.entry, "metile_entry");
}

// A mask that holds at both ends of a tile holds throughout only if its index did not wrap in
// between: here b + i passes INT32_MAX inside the tile, so b + i >= lo is true at i = 0 and at
// i = 255 but false from i = 101 to 205, and the store must take the masked loop.
TEST(CpuCodegen, WholeTileMasksSeeIndicesThatWrap) {
  KernelBuilder k("wraps");
  V out = k.ptr("Out"), b = k.scalar("B"), lo = k.scalar("LO");
  V i = k.arange(0, 256);
  k.store(out + i, k.full(Shape::of(256), 1.0), b + i >= lo);
  Program p = k.finish();
  for (int64_t base : {int64_t{2147483647 - 100}, int64_t{0}, int64_t{-300}}) {
    std::vector<float> a(256, 0.0f), r(256, 0.0f);
    kernels::Launch x(p, "cpu"), y(p, "interp");
    x.buffer(a).i32(base).i32(-2147483647 + 49);
    y.buffer(r).i32(base).i32(-2147483647 + 49);
    ASSERT_EQ(x.run(), METILE_OK) << x.error();
    ASSERT_EQ(y.run(), METILE_OK) << y.error();
    EXPECT_EQ(a, r) << "B = " << base;
    if (base > 0) {
      EXPECT_EQ(a[150], 0.0f);
    }
  }
}

TEST(CpuCodegen, VectorizedExpStaysWithinTwoUlpsOfLibm) {
  KernelBuilder k("exps");
  V x = k.ptr("X"), out = k.ptr("Out");
  V offs = k.arange(0, 4096);
  V v = k.load(x + offs);
  k.store(out + offs, k.exp(v));
  k.store(out + (offs + 4096), k.unary(OpKind::EXP2, v));
  k.store(out + (offs + 8192), k.unary(OpKind::SIGMOID, v));
  std::vector<float> in(4096);
  // Results stay normal floats over this range, so the bound is purely relative.
  for (int i = 0; i < 4096; ++i) in[i] = -86.0f + 174.0f * static_cast<float>(i) / 4095.0f;
  expect_agree(k.finish(), {in, std::vector<float>(3 * 4096)}, 2.4e-7, {1, 1, 1}, 0.0f);
}

TEST(CpuCodegen, ReductionsJoinTheLoopThatFillsTheirOperand) {
  KernelBuilder k("softmax_row");
  V x = k.ptr("X"), out = k.ptr("Out");
  V offs = k.arange(0, 512);
  V v = k.load(x + offs);
  V e = k.exp(v - k.max(v));
  k.store(out + offs, e / k.sum(e));
  Program p = k.finish();
  CpuSource src = generate_cpu_cpp(p);
  std::string body = src.text.substr(src.text.find("---- kernel softmax_row"));
  size_t fused = 0, loops = 0;
  for (size_t at = body.find("accumulated in the loop below"); at != std::string::npos;
       at = body.find("accumulated in the loop below", at + 1))
    ++fused;
  for (size_t at = body.find("for (int32_t i = 0"); at != std::string::npos; at = body.find("for (int32_t i = 0", at + 1))
    ++loops;
  EXPECT_EQ(fused, 2u) << body;
  EXPECT_EQ(loops, 3u) << body;  // load+max, exp+sum, divide+store
  std::vector<float> in = ramp(512, 0.05f);
  expect_agree(p, {in, std::vector<float>(512)}, 1e-6);
}

// A store of consecutive addresses gets a streamed form (non-temporal stores when the launch
// streams) and the entry point a fence; a strided store or a program with atomics gets neither.
TEST(CpuCodegen, OnlyConsecutiveStoresWithoutAtomicsStream) {
  auto streams = [](Program p) {
    std::string text = generate_cpu_cpp(p).text;
    bool piece = text.find("+ mt_b, mt_sv, ") != std::string::npos;
    bool fence = text.find("mt_stream_fence();") != std::string::npos;
    EXPECT_EQ(piece, fence) << text;
    return piece && fence;
  };
  {
    KernelBuilder k("consecutive");
    V x = k.ptr("X"), out = k.ptr("Out");
    V offs = k.program_id(0) * 256 + k.arange(0, 256);
    k.store(out + offs, k.load(x + offs));
    EXPECT_TRUE(streams(k.finish()));
  }
  {
    KernelBuilder k("strided");
    V x = k.ptr("X"), out = k.ptr("Out");
    V offs = k.arange(0, 256);
    k.store(out + offs * 2, k.load(x + offs));
    EXPECT_FALSE(streams(k.finish()));
  }
  {
    KernelBuilder k("with_atomic");
    V x = k.ptr("X"), out = k.ptr("Out"), count = k.ptr("Count", DType::i32);
    V offs = k.arange(0, 256);
    k.store(out + offs, k.load(x + offs));
    k.atomic(OpKind::ATOMIC_ADD, count + offs * 0, offs);
    EXPECT_FALSE(streams(k.finish()));
  }
}

}  // namespace
}  // namespace metile

// The GPU pipeline end to end on metal-sim, op family by op family, against interp: programs
// the shared suite does not cover (all-negative maxima, integer and half reductions, axis
// reductions and broadcasts, tile copies with offsets/strides/bounds, `other`, loops counting
// down, 2-D grids, simd_broadcast, roles, tile_swizzle, unaligned vector accesses).
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "runtime/backends.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::Arg;
using kernels::Array;
using kernels::Case;
using kernels::KernelBuilder;
using kernels::V;

Arg in(DType d, std::vector<double> v) { return Arg{Arg::Kind::buffer, {d, std::move(v)}, false, 0}; }
Arg out(DType d, size_t n) { return Arg{Arg::Kind::buffer, {d, std::vector<double>(n, 0.0)}, true, 0}; }
Arg i32(int64_t v) { return Arg{Arg::Kind::i32, {}, false, v}; }

std::vector<double> ramp(size_t n, double start, double step) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<double>(i);
  return v;
}

// Deterministic, irregular values in [-4, 4).
std::vector<double> noise(size_t n, uint32_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<double>(seed >> 8) / static_cast<double>(1u << 24) * 8.0 - 4.0;
  }
  return v;
}

class GpuMetalSim : public testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = probe_metal_sim_device(); !why.empty()) GTEST_SKIP() << why;
  }
  // Runs on interp and metal-sim; both must succeed and agree.
  static void agree(Case c, double tol = 1e-5) {
    kernels::RunResult ref = kernels::run_case("interp", c);
    ASSERT_EQ(ref.status, METILE_OK) << ref.message;
    kernels::RunResult got = kernels::run_case("metal-sim", c);
    ASSERT_EQ(got.status, METILE_OK) << got.message;
    EXPECT_EQ(kernels::compare(got.outputs, ref.outputs, tol, tol), "") << c.name;
  }
};

TEST_F(GpuMetalSim, WholeTileReductionsOfAllNegativeAndPositiveData) {
  for (OpKind op : {OpKind::REDUCE_SUM, OpKind::REDUCE_MAX, OpKind::REDUCE_MIN}) {
    KernelBuilder k("reduce");
    V x = k.ptr("X"), o = k.ptr("Out");
    V n = k.scalar("N");
    V offs = k.arange(0, 1000);
    V mask = offs < n;
    // Masked-off lanes read the identity, so only the mask decides what counts.
    double other = op == OpKind::REDUCE_MAX ? -INFINITY : op == OpKind::REDUCE_MIN ? INFINITY : 0.0;
    V r = k.reduce(op, k.load(x + k.program_id(0) * n + offs, mask, other), -1);
    k.store(o + k.program_id(0), r);
    Case c{"reduce", k.finish(), {}, {2, 1, 1}, {}, 1e-5, 1e-5};
    std::vector<double> data = ramp(1990, -2000.0, 1.0);  // row 0 all negative
    for (size_t i = 995; i < data.size(); ++i) data[i] = 1000.0 + static_cast<double>(i);  // row 1 positive
    c.args = {in(DType::f32, data), out(DType::f32, 2), i32(995)};
    agree(c, 1e-4);
  }
}

TEST_F(GpuMetalSim, IntegerAndHalfReductions) {
  for (DType d : {DType::i32, DType::f16}) {
    KernelBuilder k("reduce_typed");
    V x = k.ptr("X", d), o = k.ptr("Out", d);
    V v = k.load(x + k.arange(0, 300));
    k.store(o, k.sum(v));
    k.store(o + 1, k.max(v));
    k.store(o + 2, k.reduce(OpKind::REDUCE_MIN, v, -1));
    std::vector<double> data = noise(300, 7);
    if (d == DType::i32)
      for (double& e : data) e = std::floor(e * 1000.0);
    Case c{"reduce_typed", k.finish(), {in(d, data), out(d, 3)}, {1, 1, 1}, {}, 1e-3, 1e-3};
    agree(c, d == DType::f16 ? 1e-2 : 0.0);
  }
}

TEST_F(GpuMetalSim, AxisReductionsBroadcastsAndTileCopies) {
  // A 24x40 window at (3, 5) of a 50x64 matrix (stride 64), bounded to 25x43: row max and
  // column sum, broadcast back, written to (1, 2) of a 40x48 output (stride 48) with bounds.
  for (int axis : {0, 1}) {
    KernelBuilder k("axis");
    V a = k.ptr("A"), o = k.ptr("Out");
    V t = k.tile_load(a, k.i32(3), k.i32(5), k.i32(64), Shape::of(24, 40), k.i32(25), k.i32(43));
    V r = k.reduce(axis == 1 ? OpKind::REDUCE_MAX : OpKind::REDUCE_SUM, t, axis);
    Shape keep = axis == 1 ? Shape::of(24, 1) : Shape::of(1, 40);
    V b = k.wrap(k.raw().broadcast(k.raw().reshape(r.id, keep), Shape::of(24, 40)));
    k.tile_store(o, k.i32(1), k.i32(2), k.i32(48), t - b, k.i32(20), k.i32(30));
    Case c{"axis", k.finish(), {in(DType::f32, noise(50 * 64, 3)), out(DType::f32, 40 * 48)}, {1, 1, 1}, {}, 1e-5, 1e-5};
    agree(c);
  }
}

TEST_F(GpuMetalSim, AxisReductionsOfEveryShape) {
  // Long rows (32 lanes per output), more outputs than threads (several rounds), both axes.
  for (auto [rows, cols, axis, op] : {std::tuple{4, 512, 1, OpKind::REDUCE_SUM}, std::tuple{512, 2, 1, OpKind::REDUCE_MAX},
                                      std::tuple{3, 100, 0, OpKind::REDUCE_MIN}, std::tuple{64, 40, 0, OpKind::REDUCE_SUM}}) {
    KernelBuilder k("axes");
    V a = k.ptr("A"), o = k.ptr("Out");
    V t = k.tile_load(a, k.i32(0), k.i32(0), k.i32(cols), Shape::of(rows, cols));
    V r = k.reduce(op, t, axis);
    int n = axis == 1 ? rows : cols;
    k.store(o + k.arange(0, n), r);
    Case c{"axes", k.finish(), {in(DType::f32, noise(static_cast<size_t>(rows * cols), rows + cols)), out(DType::f32, n)},
           {1, 1, 1}, {}, 1e-5, 1e-5};
    agree(c, 1e-4);
  }
}

TEST_F(GpuMetalSim, MaskedLoadsUseOtherAndLoopsCountDown) {
  KernelBuilder k("down");
  V x = k.ptr("X"), o = k.ptr("Out");
  V n = k.scalar("N");
  // acc += x[i .. i+64) for i = 192, 128, ..., 0 (a negative step), masked past N with other 7.
  std::vector<V> res = k.tile_range(k.i32(192), k.i32(-1), k.i32(-64), {k.zeros(Shape::of(64)), k.f32(0.0)},
                                    [&](V i, std::vector<V> c) -> std::vector<V> {
                                      V offs = i + k.arange(0, 64);
                                      V v = k.load(x + offs, offs < n, 7.0);
                                      return {c[0] + v, c[1] + k.sum(v)};
                                    });
  V offs = k.arange(0, 64);
  k.store(o + offs, res[0], offs < 50);
  k.store(o + 64, res[1]);
  Case c{"down", k.finish(), {in(DType::f32, noise(256, 11)), out(DType::f32, 65), i32(200)}, {1, 1, 1}, {}, 1e-5, 1e-5};
  agree(c, 1e-4);
}

TEST_F(GpuMetalSim, LoopsWithARuntimeStepOfEitherSign) {
  KernelBuilder k("runtime_step");
  V x = k.ptr("X"), o = k.ptr("Out");
  V start = k.scalar("Start"), end = k.scalar("End"), step = k.scalar("Step");
  V offs = k.arange(0, 128);
  V acc = k.tile_range(start, end, step, {k.zeros(Shape::of(128))},
                       [&](V i, std::vector<V> c) -> std::vector<V> {
                         return {c[0] * 0.5 + k.load(x + i * 128 + offs)};
                       })[0];
  k.store(o + offs, acc);
  Program p = k.finish();
  for (auto [s, e, st] : {std::tuple{0, 7, 2}, std::tuple{6, -1, -3}, std::tuple{3, 3, 1}}) {
    Case c{"runtime_step", p, {in(DType::f32, noise(8 * 128, 9)), out(DType::f32, 128), i32(s), i32(e), i32(st)},
           {1, 1, 1}, {}, 0, 0};
    agree(c, 1e-6);
  }
}

TEST_F(GpuMetalSim, TwoDimensionalGridsAndUnalignedVectorRows) {
  KernelBuilder k("grid2d");
  V x = k.ptr("X"), o = k.ptr("Out");
  V n = k.scalar("N");
  V row = k.program_id(1), blk = k.program_id(0);
  V cols = blk * 128 + k.arange(0, 128);
  V mask = cols < n;
  V v = k.load(x + row * n + cols, mask);
  k.store(o + row * n + cols, v * k.cast(k.wrap(k.raw().grid(OpKind::NUM_PROGRAMS, 1)), DType::f32) + 1.0, mask);
  // N = 301: rows start at odd offsets, so vector chunks are misaligned and some straddle N.
  Case c{"grid2d", k.finish(), {in(DType::f32, noise(5 * 301, 5)), out(DType::f32, 5 * 301), i32(301)}, {3, 5, 1}, {}, 1e-6, 1e-6};
  agree(c);
}

TEST_F(GpuMetalSim, SimdBroadcastAndRoles) {
  KernelBuilder k("roles");
  V x = k.ptr("X", DType::i32), o = k.ptr("Out", DType::i32), flag = k.ptr("Flag", DType::i32);
  k.raw().set_num_threads(96);
  V tid = k.thread_id();
  V v = k.load(x + tid);
  V b = k.wrap(k.raw().simd(OpKind::SIMD_BROADCAST, v.id, k.i32(5).id));
  k.store(o + tid, b);
  k.raw().role_begin(1, 3, 0, 0);  // simdgroup 1: threads 32..63
  k.store(o + 96 + tid, v * 2);
  k.store(flag, k.i32(42));
  k.raw().role_end();
  std::vector<double> data(96);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<double>(i * i % 97);
  Case c{"roles", k.finish(), {in(DType::i32, data), out(DType::i32, 192), out(DType::i32, 1)}, {1, 1, 1}, {}, 0, 0};
  agree(c, 0.0);
}

TEST_F(GpuMetalSim, CastsAndIntegerArithmetic) {
  KernelBuilder k("ints");
  V a = k.ptr("A", DType::i32), b = k.ptr("B", DType::i32);
  V of = k.ptr("OutF"), oi = k.ptr("OutI", DType::i32);
  V offs = k.arange(0, 256);
  V x = k.load(a + offs), y = k.load(b + offs);
  k.store(of + offs, k.cast(x, DType::f32) / k.cast(y, DType::f32));  // true division
  k.store(oi + offs, x / y);                                          // truncating
  k.store(oi + 256 + offs, k.wrap(k.raw().binary(OpKind::FLOORDIV, x.id, y.id)));
  k.store(oi + 512 + offs, x % y);
  k.store(oi + 768 + offs, k.wrap(k.raw().binary(OpKind::BITXOR, (x >> 2).id, (x * 7).id)));
  k.store(oi + 1024 + offs, k.cast(k.cast(x, DType::f32) * 0.37, DType::i32));
  std::vector<double> xs = noise(256, 21), ys = noise(256, 22);
  for (double& v : xs) v = std::floor(v * 100000.0);
  for (double& v : ys) v = std::floor(v * 7.0) == 0 ? 3.0 : std::floor(v * 7.0);
  Case c{"ints", k.finish(), {in(DType::i32, xs), in(DType::i32, ys), out(DType::f32, 256), out(DType::i32, 1280)}, {1, 1, 1}, {}, 0, 0};
  agree(c, 1e-6);
}

TEST_F(GpuMetalSim, ThreadsExchangeThroughADeviceBufferAcrossABarrier) {
  KernelBuilder k("exchange");
  V buf = k.ptr("Buf");
  k.raw().set_num_threads(128);
  V tid = k.thread_id();
  V base = k.program_id(0) * 256;
  k.store(buf + base + tid, k.cast(tid * 3, DType::f32));
  k.barrier();
  k.store(buf + base + 128 + tid, k.load(buf + base + (127 - tid)));
  Case c{"exchange", k.finish(), {out(DType::f32, 512)}, {2, 1, 1}, {}, 0, 0};
  agree(c, 0.0);
}

TEST_F(GpuMetalSim, TileSwizzleOutsideGemm) {
  for (const char* pattern : {"morton", "diagonal", "grouped"}) {
    KernelBuilder k("swizzle");
    V o = k.ptr("Out", DType::i32);
    auto [m, nn] = k.tile_swizzle(k.program_id(0), k.program_id(1), pattern, 2);
    V at = (k.program_id(1) * 6 + k.program_id(0)) * 2;
    k.store(o + at, m);
    k.store(o + at + 1, nn);
    Case c{"swizzle", k.finish(), {out(DType::i32, 6 * 5 * 2)}, {6, 5, 1}, {}, 0, 0};
    agree(c, 0.0);
  }
}

}  // namespace
}  // namespace metile

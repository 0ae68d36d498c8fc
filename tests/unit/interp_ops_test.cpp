// Op semantics on the interp device (the contract at the top of runtime/interp/executor.cpp):
// broadcasting, promotion, integer division, casts, shifts, f16/bf16 rounding, masks,
// reductions, dot, tile access with bounds, loops, grids and shared memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/dsl.h"
#include "kernels/launch.h"
#include "support/half.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::Launch;
using kernels::V;

V reshape(KernelBuilder& k, V x, Shape s) { return k.wrap(k.raw().reshape(x.id, s)); }

// Stores a scalar or a whole (1-D or 2-D) tile to out[0, numel) in row-major order.
void store_all(KernelBuilder& k, V out, V value) {
  const Type t = k.raw().type(value.id);
  if (t.is_scalar()) {
    k.store(out, value);
    return;
  }
  V idx = k.arange(0, t.shape.numel());
  if (t.shape.rank == 2) idx = reshape(k, idx, t.shape);
  k.store(out + idx, value);
}

// Loads n elements of `ptr` as a 1-D tile.
V load_n(KernelBuilder& k, V ptr, int64_t n) { return k.load(ptr + k.arange(0, n)); }

template <typename T>
std::vector<T> run1(const Program& p, std::vector<T> out,
                    std::array<uint32_t, 3> grid = {1, 1, 1}) {
  Launch l(p);
  l.buffer(out);
  EXPECT_EQ(l.run(grid), METILE_OK) << l.error();
  return out;
}

TEST(InterpOps, BroadcastScalarsAndSizeOneDims) {
  KernelBuilder k("bcast");
  V out = k.ptr("Out");
  V col = k.cast(reshape(k, k.arange(0, 4), Shape::of(4, 1)), DType::f32);       // 4x1: i
  V row = k.cast(reshape(k, k.arange(0, 3) * 10, Shape::of(1, 3)), DType::f32);  // 1x3: 10j
  V grid = col + row;
  EXPECT_EQ(k.raw().type(grid.id).str(), "tile<4x3xf32>");
  V vec = k.cast(k.arange(0, 3), DType::f32) * 100.0;  // 1-D lines up with the columns
  store_all(k, out, grid + vec + 0.5);
  std::vector<float> r = run1(k.finish(), std::vector<float>(12));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(r[i * 3 + j], i + 10 * j + 100 * j + 0.5f) << i << "," << j;
}

TEST(InterpOps, PromotionKeepsTileTypes) {
  KernelBuilder k("promote");
  V xf = k.ptr("XF"), xh = k.ptr("XH", DType::f16), of = k.ptr("OF"), oh = k.ptr("OH", DType::f16);
  V oi = k.ptr("OI");
  V f = load_n(k, xf, 4), h = load_n(k, xh, 4);
  V twice = f * 2;  // an integer literal does not demote an f32 tile
  EXPECT_EQ(k.raw().type(twice.id).str(), "tile<4xf32>");
  V half = k.arange(0, 4) * 0.5;  // i32 tile with a float literal becomes f32
  EXPECT_EQ(k.raw().type(half.id).str(), "tile<4xf32>");
  V scaled = h * 0.1;  // an f32 literal keeps an f16 tile f16
  EXPECT_EQ(k.raw().type(scaled.id).str(), "tile<4xf16>");
  V mixed =
      k.wrap(k.raw().binary(OpKind::ADD, k.arange(0, 4).id, k.raw().const_int(DType::u32, 1)));
  EXPECT_EQ(k.raw().type(mixed.id).str(), "tile<4xi32>");  // a scalar never widens a tile
  store_all(k, of, twice);
  store_all(k, oi, half);
  store_all(k, oh, scaled);
  std::vector<float> xfv{1.5f, -2.0f, 3.25f, 0.0f}, ofv(4), oiv(4);
  std::vector<uint16_t> xhv, ohv(4);
  for (float v : {1.0f, 3.0f, -7.0f, 1000.0f}) xhv.push_back(float_to_f16(v));
  Launch l(k.finish());
  l.buffer(xfv).buffer(xhv).buffer(ofv).buffer(ohv).buffer(oiv);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  const float tenth = f16_to_float(float_to_f16(0.1f));  // the literal is cast to f16 first
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ofv[i], xfv[i] * 2.0f);
    EXPECT_EQ(oiv[i], i * 0.5f);
    EXPECT_EQ(ohv[i], float_to_f16(f16_to_float(xhv[i]) * tenth)) << i;
  }
}

TEST(InterpOps, IntegerDivisionTruncatesFloordivFloorsModTakesDividendSign) {
  KernelBuilder k("divs");
  V a = k.ptr("A", DType::i32), b = k.ptr("B", DType::i32), fa = k.ptr("FA"), fb = k.ptr("FB");
  V o = k.ptr("O", DType::i32), fo = k.ptr("FO");
  V av = load_n(k, a, 6), bv = load_n(k, b, 6), fav = load_n(k, fa, 2), fbv = load_n(k, fb, 2);
  auto put = [&](V out, int slot, int n, V v) { k.store(out + (k.arange(0, n) + slot * n), v); };
  put(o, 0, 6, k.binary(OpKind::DIV, av, bv));
  put(o, 1, 6, k.binary(OpKind::FLOORDIV, av, bv));
  put(o, 2, 6, av % bv);
  put(fo, 0, 2, fav / fbv);
  put(fo, 1, 2, k.binary(OpKind::FLOORDIV, fav, fbv));
  put(fo, 2, 2, fav % fbv);
  const int32_t mn = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> av_{7, -7, 7, -7, mn, 5}, bv_{2, 2, -2, -2, -1, 7}, ov(18);
  std::vector<float> fav_{-7.5f, 7.5f}, fbv_{2.0f, 2.0f}, fov(6);
  Launch l(k.finish());
  l.buffer(av_).buffer(bv_).buffer(fav_).buffer(fbv_).buffer(ov).buffer(fov);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  EXPECT_EQ(ov, (std::vector<int32_t>{3, -3, -3, 3, mn, 0,    // truncating; INT_MIN / -1 wraps
                                      3, -4, -4, 3, mn, 0,    // floor
                                      1, -1, 1, -1, 0, 5}));  // sign of the dividend
  EXPECT_EQ(fov, (std::vector<float>{-3.75f, 3.75f, -4.0f, 3.0f, -1.5f, 1.5f}));
}

TEST(InterpOps, CastsTruncateWrapAndTestNonZero) {
  KernelBuilder k("casts");
  V x = k.ptr("X"), i = k.ptr("I", DType::i32), u = k.ptr("U", DType::u32);
  V oi = k.ptr("OI", DType::i32), ou8 = k.ptr("OU8", DType::u8), ob = k.ptr("OB", DType::boolean);
  V obf = k.ptr("OBF"), ouf = k.ptr("OUF");
  V xv = load_n(k, x, 4), iv = load_n(k, i, 4);
  store_all(k, oi, k.cast(xv, DType::i32));
  store_all(k, ou8, k.cast(iv, DType::u8));
  V b = k.cast(iv, DType::boolean);
  store_all(k, ob, b);
  store_all(k, obf, k.cast(b, DType::f32));
  store_all(k, ouf, k.cast(load_n(k, u, 1), DType::f32));
  std::vector<float> xv_{2.7f, -2.7f, 0.5f, -0.5f}, obf_(4), ouf_(1);
  std::vector<int32_t> iv_{300, -1, 0, 5}, oi_(4);
  std::vector<uint32_t> uv_{4294967295u};
  std::vector<uint8_t> ou8_(4), ob_(4);
  Launch l(k.finish());
  l.buffer(xv_).buffer(iv_).buffer(uv_).buffer(oi_).buffer(ou8_).buffer(ob_).buffer(obf_).buffer(
      ouf_);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  EXPECT_EQ(oi_, (std::vector<int32_t>{2, -2, 0, 0}));
  EXPECT_EQ(ou8_, (std::vector<uint8_t>{44, 255, 0, 5}));
  EXPECT_EQ(ob_, (std::vector<uint8_t>{1, 1, 0, 1}));
  EXPECT_EQ(obf_, (std::vector<float>{1, 1, 0, 1}));
  EXPECT_EQ(ouf_[0], 4294967296.0f);
}

TEST(InterpOps, ShiftsAreArithmeticOnSignedAndLogicalOnUnsigned) {
  KernelBuilder k("shifts");
  V i = k.ptr("I", DType::i32), u = k.ptr("U", DType::u32);
  V oi = k.ptr("OI", DType::i32), ou = k.ptr("OU", DType::u32);
  V one = k.i32(1);
  V iv = load_n(k, i, 2), uv = load_n(k, u, 1);
  store_all(k, oi, iv >> one);
  store_all(k, ou, uv >> k.cast(one, DType::u32));
  k.store(oi + 2, one << 31);  // wraps to INT32_MIN
  std::vector<int32_t> iv_{-8, 9}, oi_(3);
  std::vector<uint32_t> uv_{0xFFFFFFF8u}, ou_(1);
  Launch l(k.finish());
  l.buffer(iv_).buffer(uv_).buffer(oi_).buffer(ou_);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  EXPECT_EQ(oi_, (std::vector<int32_t>{-4, 4, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(ou_[0], 0x7FFFFFFCu);
}

TEST(InterpOps, MathFollowsTheContract) {
  KernelBuilder k("math");
  V x = k.ptr("X"), out = k.ptr("Out");
  V xv = load_n(k, x, 4);
  const OpKind ops[] = {OpKind::SIGMOID, OpKind::RSQRT, OpKind::ERF,
                        OpKind::EXP,     OpKind::TANH,  OpKind::LOG2};
  int slot = 0;
  for (OpKind op : ops) k.store(out + (k.arange(0, 4) + 4 * slot++), k.unary(op, xv));
  V nan = k.f32(NAN);
  k.store(out + 4 * slot, k.maximum(nan, k.f32(1.0)));
  k.store(out + (4 * slot + 1), k.wrap(k.raw().binary(OpKind::MINIMUM, k.f32(2.0).id, nan.id)));
  k.store(out + (4 * slot + 2), k.wrap(k.raw().binary(OpKind::POW, k.f32(2.0).id, k.f32(10.0).id)));
  std::vector<float> xs{0.0f, 4.0f, 0.3f, -1.25f}, r(4 * slot + 3);
  Launch l(k.finish());
  l.buffer(xs).buffer(r);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  auto same = [](float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; };
  for (int i = 0; i < 4; ++i) {
    const float v = xs[i];
    EXPECT_EQ(r[i], 1.0f / (1.0f + std::exp(-v)));
    EXPECT_TRUE(same(r[4 + i], 1.0f / std::sqrt(v))) << r[4 + i];
    EXPECT_EQ(r[8 + i], std::erf(v));
    EXPECT_EQ(r[12 + i], std::exp(v));
    EXPECT_EQ(r[16 + i], std::tanh(v));
    EXPECT_TRUE(same(r[20 + i], std::log2(v))) << r[20 + i];
  }
  EXPECT_EQ(r[0], 0.5f);   // sigmoid(0)
  EXPECT_EQ(r[5], 0.5f);   // rsqrt(4)
  EXPECT_EQ(r[24], 1.0f);  // maximum / minimum ignore NaN
  EXPECT_EQ(r[25], 2.0f);
  EXPECT_EQ(r[26], 1024.0f);
}

TEST(InterpOps, HalfTypesRoundAfterEveryOp) {
  KernelBuilder k("halves");
  V h = k.ptr("H", DType::f16), b = k.ptr("B", DType::bf16);
  V oh = k.ptr("OH", DType::f16), ob = k.ptr("OB", DType::bf16), of = k.ptr("OF");
  // One-element tiles: an f32 literal keeps a tile's type (two scalars would promote to f32).
  V hv = load_n(k, h, 1), bv = load_n(k, b, 1);
  V one = k.arange(0, 1);
  k.store(oh + one, hv + 1.0 + 1.0);                      // 2049 rounds to 2048 (even) each time
  k.store(oh + (one + 1), hv * 40.0);                     // 81920 overflows f16
  k.store(ob + one, bv + 1.0 + 1.0);                      // bf16 spacing at 256 is 2
  k.store(of + one, k.cast(hv, DType::f32) + 1.0 + 1.0);  // in f32 the sum is 2050
  std::vector<uint16_t> hv_{float_to_f16(2048.0f)}, bv_{float_to_bf16(256.0f)}, oh_(2), ob_(1);
  std::vector<float> of_(1);
  Launch l(k.finish());
  l.buffer(hv_).buffer(bv_).buffer(oh_).buffer(ob_).buffer(of_);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  EXPECT_EQ(f16_to_float(oh_[0]), 2048.0f);
  EXPECT_TRUE(std::isinf(f16_to_float(oh_[1])));
  EXPECT_EQ(bf16_to_float(ob_[0]), 256.0f);
  EXPECT_EQ(of_[0], 2050.0f);
}

TEST(InterpOps, MasksSkipMemoryAndLoadsGiveOther) {
  KernelBuilder k("masks");
  V x = k.ptr("X"), out = k.ptr("Out");
  V n = k.scalar("N");
  V offs = k.arange(0, 16);
  V v = k.load(x + offs, offs < n, -1.0);  // lanes >= N read -1 and never touch X
  V skipped = k.load(x + offs, offs < n);  // without `other`: lanes >= N are inactive
  k.store(out + offs, v, offs < 12);
  k.store(out + 16 + offs, v + skipped, offs < 12);  // inactive where `skipped` is: not stored
  std::vector<float> xs(10), r(32, 99.0f);
  for (int i = 0; i < 10; ++i) xs[i] = static_cast<float>(i);
  Launch l(k.finish());
  l.buffer(xs).buffer(r).i32(10);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(r[i], i < 10 ? 1.0f * i : i < 12 ? -1.0f : 99.0f) << i;
    EXPECT_EQ(r[16 + i], i < 10 ? 2.0f * i : 99.0f) << i;
  }
}

TEST(InterpOps, ReductionsUseTrueIdentitiesAndAxes) {
  KernelBuilder k("reductions");
  V x = k.ptr("X"), i = k.ptr("I", DType::i32), out = k.ptr("Out"), oi = k.ptr("OI", DType::i32);
  V h = k.ptr("H", DType::f16), oh = k.ptr("OH", DType::f16);
  V neg = load_n(k, x, 4) - 10.0;  // all negative: max must not be 0
  V pos = load_n(k, x, 4) + 10.0;  // all positive: min must not be 0
  k.store(out, k.max(neg));
  k.store(out + 1, k.reduce(OpKind::REDUCE_MIN, pos, -1));
  k.store(out + 2, k.sum(k.f32(4.5)));  // a scalar reduces to itself
  V m = reshape(k, k.cast(k.arange(1, 6), DType::f32), Shape::of(2, 3));  // [[1,2,3],[4,5,6]]
  k.store(out + (k.arange(3, 3)), k.sum(m, 0));
  k.store(out + (k.arange(6, 2)), k.sum(m, 1));
  k.store(out + (k.arange(8, 3)), k.max(m, 0));
  k.store(out + (k.arange(11, 2)), k.reduce(OpKind::REDUCE_MIN, m, 1));
  V iv = load_n(k, i, 3);
  k.store(oi, k.max(iv));
  k.store(oi + 1, k.reduce(OpKind::REDUCE_MIN, iv, -1));
  k.store(oi + 2, k.sum(iv));
  k.store(oh, k.sum(load_n(k, h, 4096)));  // f16 accumulation would stop at 2048
  std::vector<float> xs{1, 2, 3, 4}, r(13);
  std::vector<int32_t> is{-5, -3, -9}, ri(3);
  std::vector<uint16_t> hs(4096, float_to_f16(1.0f)), rh(1);
  Launch l(k.finish());
  l.buffer(xs).buffer(is).buffer(r).buffer(ri).buffer(hs).buffer(rh);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  EXPECT_EQ(r, (std::vector<float>{-6, 11, 4.5f, 5, 7, 9, 6, 15, 4, 5, 6, 1, 4}));
  EXPECT_EQ(ri, (std::vector<int32_t>{-3, -9, -17}));
  EXPECT_EQ(f16_to_float(rh[0]), 4096.0f);
}

TEST(InterpOps, DotAccumulatesInOrderInF32AndI32) {
  KernelBuilder k("dots");
  V a = k.ptr("A", DType::i8), b = k.ptr("B", DType::i8), c = k.ptr("C", DType::i32);
  V fa = k.ptr("FA", DType::f16), fb = k.ptr("FB", DType::f16), fc = k.ptr("FC");
  V z = k.i32(0);
  V ta = k.tile_load(a, z, z, k.i32(2), Shape::of(1, 2));
  V tb = k.tile_load(b, z, z, k.i32(1), Shape::of(2, 1));
  V acc = k.wrap(k.raw().broadcast(k.raw().const_int(DType::i32, 1000), Shape::of(1, 1)));
  k.tile_store(c, z, z, k.i32(1), k.dot(ta, tb, acc));
  V tfa = k.tile_load(fa, z, z, k.i32(3), Shape::of(2, 3));
  V tfb = k.tile_load(fb, z, z, k.i32(2), Shape::of(3, 2));
  k.tile_store(fc, z, z, k.i32(2), k.dot(tfa, tfb, k.zeros(Shape::of(2, 2))));
  std::vector<int8_t> av{127, -128}, bv{127, 127};
  std::vector<int32_t> cv(1);
  std::vector<uint16_t> fav, fbv;
  for (float v : {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}) fav.push_back(float_to_f16(v));
  for (float v : {0.5f, 1.0f, 2048.0f, 1.0f, 1.0f, 1.0f}) fbv.push_back(float_to_f16(v));
  std::vector<float> fcv(4);
  Launch l(k.finish());
  l.buffer(av).buffer(bv).buffer(cv).buffer(fav).buffer(fbv).buffer(fcv);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  EXPECT_EQ(cv[0], 1000 + 127 * 127 - 128 * 127);
  // Products and sums in f32: 2*2048 + 1 + 3 stays exact (it would not in f16).
  EXPECT_EQ(fcv, (std::vector<float>{0.5f + 4096 + 3, 1 + 2 + 3, 2 + 10240 + 6, 4 + 5 + 6}));
}

TEST(InterpOps, TileLoadAndStoreHonourOffsetsStridesAndBounds) {
  KernelBuilder k("tiles");
  V m = k.ptr("M"), out = k.ptr("Out"), out2 = k.ptr("Out2");
  V rows = k.i32(3), cols = k.i32(4), stride = k.i32(5);  // a 3x4 matrix with leading dim 5
  V t = k.tile_load(m, k.i32(-1), k.i32(2), stride, Shape::of(3, 3), rows, cols);
  k.tile_store(out, k.i32(0), k.i32(0), k.i32(3), t);
  V inner = k.tile_load(m, k.i32(1), k.i32(1), stride, Shape::of(2, 2));
  k.tile_store(out2, k.i32(1), k.i32(3), k.i32(4), inner, k.i32(2), k.i32(4));
  std::vector<float> mv(15), r(9, 7.0f), r2(8, 7.0f);
  for (int i = 0; i < 15; ++i) mv[i] = static_cast<float>(i);
  Launch l(k.finish());
  l.buffer(mv).buffer(r).buffer(r2);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  // Row -1 and column 4 are outside the bounds: they read 0.
  EXPECT_EQ(r, (std::vector<float>{0, 0, 0, 2, 3, 0, 7, 8, 0}));
  // Only element (1, 3) of the 2x2 store at (1, 3) is inside a 2x4 bound.
  EXPECT_EQ(r2, (std::vector<float>{7, 7, 7, 7, 7, 7, 7, 6}));
}

TEST(InterpOps, LoopsCountExactlyAndCarryValues) {
  KernelBuilder k("loops");
  V out = k.ptr("Out", DType::i32);
  auto down = k.tile_range(k.i32(10), k.i32(0), k.i32(-3),
                           {k.i32(0), k.wrap(k.raw().broadcast(k.i32(0).id, Shape::of(2)))},
                           [&](V iv, std::vector<V> c) -> std::vector<V> {
                             return {c[0] + iv, c[1] + k.arange(iv, 2)};
                           });
  auto none = k.tile_range(k.i32(5), k.i32(5), k.i32(1), {k.i32(42)},
                           [&](V iv, std::vector<V> c) -> std::vector<V> { return {c[0] + iv}; });
  auto nested = k.tile_range(
      k.i32(0), k.i32(3), k.i32(1), {k.i32(0)}, [&](V, std::vector<V> c) -> std::vector<V> {
        return k.tile_range(k.i32(0), k.i32(4), k.i32(1), {c[0]},
                            [&](V, std::vector<V> d) -> std::vector<V> { return {d[0] + 1}; });
      });
  k.store(out, down[0]);
  k.store(out + k.arange(1, 2), down[1]);
  k.store(out + 3, none[0]);
  k.store(out + 4, nested[0]);
  std::vector<int32_t> r = run1(k.finish(), std::vector<int32_t>(5));
  // iv = 10, 7, 4, 1; the tile sums [iv, iv + 1].
  EXPECT_EQ(r, (std::vector<int32_t>{22, 22, 26, 42, 12}));
}

TEST(InterpOps, ThreeDimensionalGridIds) {
  KernelBuilder k("grid3");
  V out = k.ptr("Out", DType::i32), sizes = k.ptr("Sizes", DType::i32);
  V x = k.program_id(0), y = k.program_id(1), z = k.program_id(2);
  V nx = k.wrap(k.raw().grid(OpKind::NUM_PROGRAMS, 0)),
    ny = k.wrap(k.raw().grid(OpKind::NUM_PROGRAMS, 1));
  V nz = k.wrap(k.raw().grid(OpKind::NUM_PROGRAMS, 2));
  k.store(out + (x + nx * (y + ny * z)), x * 10000 + y * 100 + z);
  k.store(sizes, nx * 10000 + ny * 100 + nz);
  std::vector<int32_t> r(60, -1), s(1);
  Launch l(k.finish());
  l.buffer(r).buffer(s);
  ASSERT_EQ(l.run({3, 4, 5}), METILE_OK) << l.error();
  for (int zz = 0; zz < 5; ++zz)
    for (int yy = 0; yy < 4; ++yy)
      for (int xx = 0; xx < 3; ++xx)
        EXPECT_EQ(r[xx + 3 * (yy + 4 * zz)], xx * 10000 + yy * 100 + zz);
  EXPECT_EQ(s[0], 30405);
}

TEST(InterpOps, SharedMemoryIsFreshPerInstanceAndStablePerOp) {
  KernelBuilder k("shared_mem");
  V out = k.ptr("Out", DType::i32);
  V pid = k.program_id(0);
  V s = k.shared(4, DType::i32);
  V before = k.load(s + 2);  // zero in every instance, whatever ran before
  k.store(s + 2, pid + 100);
  // The same shared op inside a loop keeps one allocation: the count survives the iterations.
  k.tile_range(k.i32(0), k.i32(3), k.i32(1), {}, [&](V, std::vector<V>) -> std::vector<V> {
    V t = k.shared(1, DType::i32);
    k.store(t, k.load(t) + 1);
    k.store(out + (pid * 2 + 1), k.load(t));
    return {};
  });
  k.store(out + pid * 2, before);
  std::vector<int32_t> r = run1(k.finish(), std::vector<int32_t>(16, -1), {8, 1, 1});
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r[2 * i], 0) << i;
    EXPECT_EQ(r[2 * i + 1], 3) << i;
  }
}

}  // namespace
}  // namespace metile

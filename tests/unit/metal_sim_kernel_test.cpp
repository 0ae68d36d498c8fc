// metal-sim running the hand-written kernels of tests/metal against host references.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "metal_sim_test_util.h"
#include "support/half.h"

namespace metile::metal_sim {
namespace METILE_UNITY_ID {

using testing::error_of;
using testing::read_metal;
using B = MslBuiltin;

SimKernel compile_file(const std::string& file, const MslSignature& sig) {
  return compile_msl(read_metal(file), sig);
}

/** The line of the first `needle` after `after` in a tests/metal file. */
int line_of(const std::string& file, const std::string& after, const std::string& needle) {
  std::string text = read_metal(file);
  size_t at = text.find(needle, text.find(after));
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
}

SimArg buf(void* p) { return SimArg::buffer(p); }
SimArg scalar_i32(int32_t v) { return SimArg::scalar(static_cast<uint32_t>(v)); }

TEST(MetalSimKernel, VectorAddGuardsTheTail) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "vector_add.metal",
      {"mtile_vector_add",
       {MslArg::buffer("X", 0, DType::f32, true), MslArg::buffer("Y", 1, DType::f32, true),
        MslArg::buffer("Out", 2, DType::f32, false), MslArg::scalar("N", 3, DType::i32),
        MslArg::builtin_arg("tid", B::thread_position_in_grid)}});
  const int n = 1000;
  std::vector<float> x(1024), y(1024), out(1024, -7.0f);
  for (int i = 0; i < 1024; ++i) x[i] = 0.5f * i, y[i] = 1000.0f - 2.0f * i;
  k.launch({4, 1, 1}, {256, 1, 1}, {buf(x.data()), buf(y.data()), buf(out.data()), scalar_i32(n)});
  for (int i = 0; i < 1024; ++i) EXPECT_EQ(out[i], i < n ? x[i] + y[i] : -7.0f) << i;
}

TEST(MetalSimKernel, ManyGroupsRunInParallel) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "vector_add.metal",
      {"mtile_vector_add",
       {MslArg::buffer("X", 0, DType::f32, true), MslArg::buffer("Y", 1, DType::f32, true),
        MslArg::buffer("Out", 2, DType::f32, false), MslArg::scalar("N", 3, DType::i32),
        MslArg::builtin_arg("tid", B::thread_position_in_grid)}});
  const int n = 1 << 16;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) x[i] = float(i), y[i] = float(3 * i);
  k.launch({n / 128, 1, 1}, {128, 1, 1},
           {buf(x.data()), buf(y.data()), buf(out.data()), scalar_i32(n)});
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], float(4 * i)) << i;
}

TEST(MetalSimKernel, SoftmaxRowsThroughThreadgroupReductions) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "softmax.metal",
      {"mtile_softmax",
       {MslArg::buffer("X", 0, DType::f32, true), MslArg::buffer("Out", 1, DType::f32, false),
        MslArg::scalar("N", 2, DType::i32),
        MslArg::builtin_arg("tgp_id_x", B::threadgroup_position_in_grid),
        MslArg::builtin_arg("lid", B::thread_position_in_threadgroup),
        MslArg::builtin_arg("sgid", B::simdgroup_index_in_threadgroup),
        MslArg::builtin_arg("slid", B::thread_index_in_simdgroup)}});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-30.0f, 5.0f);  // all-negative rows are common
  for (int n : {1000, 2052, 4096, 7}) {
    SCOPED_TRACE(n);
    const int rows = 3;
    std::vector<float> x(rows * n), out(rows * n);
    for (float& v : x) v = dist(rng);
    k.launch({rows, 1, 1}, {256, 1, 1}, {buf(x.data()), buf(out.data()), scalar_i32(n)});
    for (int r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int i = 0; i < n; ++i) mx = std::max(mx, double(x[r * n + i]));
      for (int i = 0; i < n; ++i) sum += std::exp(double(x[r * n + i]) - mx);
      for (int i = 0; i < n; ++i) {
        double want = std::exp(double(x[r * n + i]) - mx) / sum;
        ASSERT_NEAR(out[r * n + i], want, 1e-6 * want + 1e-12) << "row " << r << " col " << i;
      }
    }
  }
}

TEST(MetalSimKernel, ShufflesGiveEachLaneTheRightValue) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "simd_shuffle.metal",
      {"mtile_shuffles",
       {MslArg::buffer("In", 0, DType::f32, true), MslArg::buffer("Out", 1, DType::f32, false),
        MslArg::builtin_arg("tid", B::thread_position_in_grid),
        MslArg::builtin_arg("slid", B::thread_index_in_simdgroup)}});
  // 48 threads per group: simdgroup 1 of each group has 16 live lanes.
  const int groups = 2, tpg = 48, n = groups * tpg;
  std::vector<float> in(n), out(n * 10);
  for (int i = 0; i < n; ++i) in[i] = float(i * i % 97) + 0.25f * float(i);
  k.launch({groups, 1, 1}, {tpg, 1, 1}, {buf(in.data()), buf(out.data())});
  for (int t = 0; t < n; ++t) {
    SCOPED_TRACE(t);
    int lane = t % tpg % 32, base = t - lane;
    int live = std::min(32, tpg - (t % tpg - lane));
    auto value = [&](int src) { return src >= 0 && src < live ? in[base + src] : in[t]; };
    const float* o = &out[t * 10];
    EXPECT_EQ(o[0], value(lane ^ 1));
    EXPECT_EQ(o[1], value(lane ^ 6));
    EXPECT_EQ(o[2], value(lane ^ 16));
    EXPECT_EQ(o[3], value(5));
    EXPECT_EQ(o[4], value(lane + 3 < 32 ? lane + 3 : lane));  // the top lanes keep their value
    EXPECT_EQ(o[5], value(lane >= 2 ? lane - 2 : lane));
    float sum = 0, prefix = 0, mx = -INFINITY;
    for (int l = 0; l < live; ++l) {
      sum += in[base + l];
      if (l < lane) prefix += in[base + l];
      mx = std::max(mx, in[base + l]);
    }
    EXPECT_EQ(o[6], sum);
    EXPECT_EQ(o[7], prefix);
    EXPECT_EQ(o[8], value(31 - lane));
    EXPECT_EQ(o[9], mx);
  }
}

TEST(MetalSimKernel, ShufflesOfOtherTypes) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "simd_shuffle.metal",
      {"mtile_shuffle_types",
       {MslArg::buffer("In", 0, DType::u32, true), MslArg::buffer("OutU", 1, DType::u32, false),
        MslArg::buffer("OutH", 2, DType::f16, false), MslArg::buffer("OutV", 3, DType::f32, false),
        MslArg::builtin_arg("tid", B::thread_position_in_grid)}});
  const int n = 64;
  std::vector<uint32_t> in(n), out_u(n * 3);
  std::vector<uint16_t> out_h(n);
  std::vector<float> out_v(n * 4);
  for (int i = 0; i < n; ++i) in[i] = uint32_t(i * 7 % 64);
  k.launch({1, 1, 1}, {n, 1, 1},
           {buf(in.data()), buf(out_u.data()), buf(out_h.data()), buf(out_v.data())});
  for (int t = 0; t < n; ++t) {
    SCOPED_TRACE(t);
    int base = t / 32 * 32, lane = t % 32;
    uint32_t mx = 0, sum = 0;
    float min_neg = INFINITY, sum_f = 0;
    for (int l = 0; l < 32; ++l) {
      mx = std::max(mx, in[base + l]);
      sum += in[base + l];
      sum_f += float(in[base + l]);
      min_neg = std::min(min_neg, -float(in[base + l]));
    }
    EXPECT_EQ(out_u[t * 3 + 0], in[base + (lane ^ 3)]);
    EXPECT_EQ(out_u[t * 3 + 1], mx);
    EXPECT_EQ(out_u[t * 3 + 2], sum);
    EXPECT_EQ(f16_to_float(out_h[t]), float(in[base + 7]) * 0.5f);
    float u = float(in[base + (lane ^ 8)]);
    EXPECT_EQ(out_v[t * 4 + 0], u + sum_f);
    EXPECT_EQ(out_v[t * 4 + 1], u + 1.0f);
    EXPECT_EQ(out_v[t * 4 + 2], -u + min_neg);
    EXPECT_EQ(out_v[t * 4 + 3], 2.0f);
  }
}

TEST(MetalSimKernel, ScalarAndVectorTypes) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "types.metal",
      {"mtile_types",
       {MslArg::buffer("In", 0, DType::f32, true), MslArg::buffer("Out", 1, DType::f32, false),
        MslArg::buffer("Bits", 2, DType::u32, false),
        MslArg::builtin_arg("tid", B::thread_position_in_grid)}});
  std::vector<float> in = {0.0f,        1.5f,   -2.25f,  3.14159f,    1e-3f,    65519.0f,
                           1.00390625f, -7.7f,  1000.7f, 0.33333f,    70000.0f, -0.4f,
                           2.5f,        -1e-8f, 1.0f,    1.00048828f, -3.5f,    12.75f};
  const size_t n = in.size();
  std::vector<float> out(n * 20);
  std::vector<uint32_t> bits(n * 2);
  k.launch({1, 1, 1}, {uint32_t(n), 1, 1}, {buf(in.data()), buf(out.data()), buf(bits.data())});
  for (size_t t = 0; t < n; ++t) {
    float x = in[t];
    SCOPED_TRACE(x);
    const float* o = &out[t * 20];
    float v[4] = {x, x + 1.0f, -x, 2.0f * x}, w[4] = {2.0f * x, -x, x + 1.0f, x};
    int mask = 0;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(o[i], v[i] < w[i] ? w[i] : v[i]) << i;
      mask |= (v[i] < w[i]) << i;
    }
    EXPECT_FLOAT_EQ(o[4], x * (x + 1.0f) + 1.0f);
    EXPECT_FLOAT_EQ(o[5], (x + 1.0f) * x + 1.0f);
    uint16_t h = float_to_f16(x), b = float_to_bf16(x);
    EXPECT_EQ(o[6], f16_to_float(h));
    EXPECT_EQ(o[7], f16_to_float(float_to_f16(x + 1.0f)) * 0.5f);
    EXPECT_EQ(o[8], bf16_to_float(b));
    EXPECT_EQ(o[9], bf16_to_float(b) * bf16_to_float(b));
    EXPECT_FLOAT_EQ(o[10], std::exp(x));
    EXPECT_FLOAT_EQ(o[11], std::tanh(x));
    EXPECT_EQ(o[12], float(mask == 15) + 2.0f * float(mask != 0));
    EXPECT_EQ(o[13], float(mask));
    int iv[4];
    for (int i = 0; i < 4; ++i) iv[i] = int(v[i]) * 3 - 1;
    EXPECT_EQ(o[14], float(iv[2]));
    EXPECT_EQ(o[15], float(uint32_t(std::abs(iv[0])) + uint32_t(std::abs(iv[1]))));
    EXPECT_EQ(o[16], std::max(x, -x) + std::min(-x, 0.0f) + std::clamp(x, -0.5f, 0.5f));
    EXPECT_EQ(o[17], -x);
    EXPECT_FLOAT_EQ(o[18], v[0] * w[0] + v[1] * w[1] + v[2] * w[2] + v[3] * w[3]);
    EXPECT_EQ(o[19], (x + 1.0f) + x);
    EXPECT_EQ(bits[t * 2], h);
    EXPECT_EQ(bits[t * 2 + 1], b);
  }
}

std::vector<uint32_t> barrier_rounds_reference(const std::vector<uint32_t>& in, int tpg,
                                               int rounds) {
  std::vector<uint32_t> out(in.size());
  for (size_t g = 0; g < in.size() / tpg; ++g) {
    std::vector<uint32_t> v(in.begin() + g * tpg, in.begin() + (g + 1) * tpg), scratch(tpg);
    for (int r = 0; r < rounds; ++r) {
      for (int l = 0; l < tpg; ++l) scratch[l] = v[(l + tpg - 1) % tpg] * 3u + v[l];
      for (int l = 0; l < tpg; ++l) v[l] = scratch[(l + 37) % tpg] ^ uint32_t(r);
    }
    std::copy(v.begin(), v.end(), out.begin() + g * tpg);
  }
  return out;
}

MslSignature barrier_rounds_signature(uint64_t scratch) {
  return {"mtile_barrier_rounds",
          {MslArg::buffer("In", 0, DType::u32, true), MslArg::buffer("Out", 1, DType::u32, false),
           MslArg::scalar("rounds", 2, DType::i32),
           MslArg::threadgroup("scratch", 0, DType::u32, scratch),
           MslArg::builtin_arg("tgp_id_x", B::threadgroup_position_in_grid),
           MslArg::builtin_arg("lid", B::thread_index_in_threadgroup),
           MslArg::builtin_arg("tpg", B::threads_per_threadgroup)}};
}

TEST(MetalSimKernel, BarriersOrderWritesAndReadsAcrossSimdgroups) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file("barrier_rounds.metal", barrier_rounds_signature(1024));
  for (int tpg : {256, 100, 1024, 1}) {
    SCOPED_TRACE(tpg);
    const int groups = 3, rounds = 5;
    std::vector<uint32_t> in(groups * tpg), out(groups * tpg);
    for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u);
    k.launch({groups, 1, 1}, {uint32_t(tpg), 1, 1},
             {buf(in.data()), buf(out.data()), scalar_i32(rounds)});
    EXPECT_EQ(out, barrier_rounds_reference(in, tpg, rounds));
  }
}

TEST(MetalSimKernel, BuiltinsOfATwoDimensionalLaunch) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file("barrier_rounds.metal",
                             {"mtile_builtins",
                              {MslArg::buffer("Out", 0, DType::u32, false),
                               MslArg::builtin_arg("gid", B::thread_position_in_grid),
                               MslArg::builtin_arg("tg", B::threadgroup_position_in_grid),
                               MslArg::builtin_arg("local", B::thread_position_in_threadgroup),
                               MslArg::builtin_arg("index", B::thread_index_in_threadgroup),
                               MslArg::builtin_arg("tpg", B::threads_per_threadgroup),
                               MslArg::builtin_arg("ntg", B::threadgroups_per_grid),
                               MslArg::builtin_arg("tpgrid", B::threads_per_grid),
                               MslArg::builtin_arg("lane", B::thread_index_in_simdgroup),
                               MslArg::builtin_arg("sg", B::simdgroup_index_in_threadgroup),
                               MslArg::builtin_arg("width", B::threads_per_simdgroup),
                               MslArg::builtin_arg("sgs", B::simdgroups_per_threadgroup)}});
  const uint32_t gx = 3, gy = 2, tx = 8, ty = 5;
  std::vector<uint32_t> out(gx * gy * tx * ty * 16, 12345);
  k.launch({gx, gy, 1}, {tx, ty, 1}, {buf(out.data())});
  for (uint32_t y = 0; y < gy * ty; ++y) {
    for (uint32_t x = 0; x < gx * tx; ++x) {
      SCOPED_TRACE(::testing::Message() << x << "," << y);
      const uint32_t* o = &out[(y * gx * tx + x) * 16];
      uint32_t index = (y % ty) * tx + x % tx;
      std::vector<uint32_t> want = {x,
                                    y,
                                    0,
                                    x / tx,
                                    y / ty,
                                    x % tx,
                                    y % ty,
                                    index,
                                    tx * 100 + ty,
                                    gx * 100 + gy,
                                    gx * tx * 100 + gy * ty,
                                    index % 32,
                                    index / 32,
                                    32,
                                    2,
                                    3};
      EXPECT_EQ(std::vector<uint32_t>(o, o + 16), want);
    }
  }
}

MslSignature gemm_signature(const char* name, DType in, DType out) {
  return {name,
          {MslArg::buffer("A", 0, in, true), MslArg::buffer("B", 1, in, true),
           MslArg::buffer("C", 2, out, false), MslArg::scalar("M", 3, DType::i32),
           MslArg::scalar("N", 4, DType::i32), MslArg::scalar("K", 5, DType::i32),
           MslArg::builtin_arg("tgp_id", B::threadgroup_position_in_grid),
           MslArg::builtin_arg("sgid", B::simdgroup_index_in_threadgroup),
           MslArg::builtin_arg("slid", B::thread_index_in_simdgroup)}};
}

TEST(MetalSimKernel, SimdgroupMatrixGemmF32) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file("simdgroup_matrix.metal",
                             gemm_signature("mtile_gemm_f32", DType::f32, DType::f32));
  const int M = 32, N = 48, K = 40;  // K is not a multiple of BK: the tail loads zeros
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(M * K), b(K * N), c(M * N, -1.0f);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  k.launch(
      {M / 16, N / 16, 1}, {128, 1, 1},
      {buf(a.data()), buf(b.data()), buf(c.data()), scalar_i32(M), scalar_i32(N), scalar_i32(K)});
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int p = 0; p < K; ++p) want += double(a[i * K + p]) * b[p * N + j];
      ASSERT_NEAR(c[i * N + j], want, 1e-5) << i << "," << j;
    }
}

TEST(MetalSimKernel, SimdgroupMatrixGemmF16WithReluEpilogue) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file("simdgroup_matrix.metal",
                             gemm_signature("mtile_gemm_f16", DType::f16, DType::f16));
  const int M = 32, N = 32, K = 48;
  // Multiples of 1/8 in [-2, 2]: every product and partial sum is exact in float, so the only
  // rounding is the final one to half.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> dist(-16, 16);
  std::vector<uint16_t> a(M * K), b(K * N), c(M * N);
  std::vector<float> af(M * K), bf(K * N);
  for (int i = 0; i < M * K; ++i) af[i] = dist(rng) / 8.0f, a[i] = float_to_f16(af[i]);
  for (int i = 0; i < K * N; ++i) bf[i] = dist(rng) / 8.0f, b[i] = float_to_f16(bf[i]);
  k.launch(
      {M / 16, N / 16, 1}, {128, 1, 1},
      {buf(a.data()), buf(b.data()), buf(c.data()), scalar_i32(M), scalar_i32(N), scalar_i32(K)});
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float want = 0;
      for (int p = 0; p < K; ++p) want += af[i * K + p] * bf[p * N + j];
      ASSERT_EQ(c[i * N + j], float_to_f16(std::max(want, 0.0f))) << i << "," << j;
    }
}

TEST(MetalSimKernel, FragmentLayoutIsApples) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "simdgroup_matrix.metal",
      {"mtile_fragment_layout",
       {MslArg::buffer("In", 0, DType::f32, true), MslArg::buffer("Out", 1, DType::f32, false),
        MslArg::builtin_arg("slid", B::thread_index_in_simdgroup)}});
  std::vector<float> in(64), out(320);
  for (int i = 0; i < 64; ++i) in[i] = float(i);
  k.launch({1, 1, 1}, {32, 1, 1}, {buf(in.data()), buf(out.data())});
  // Apple's lane ownership as metile-spec §8.6 states it, written out independently.
  for (int lane = 0; lane < 32; ++lane) {
    int row = ((lane & 7) >> 1) + ((lane >> 4) << 2);
    int col = ((lane & 1) << 1) | ((lane & 8) >> 1);
    EXPECT_EQ(out[lane * 2 + 0], in[row * 8 + col]) << lane;
    EXPECT_EQ(out[lane * 2 + 1], in[row * 8 + col + 1]) << lane;
  }
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(out[64 + r * 8 + c], in[c * 8 + r]) << "transposed load " << r << "," << c;
      EXPECT_EQ(out[128 + r * 8 + c], in[r * 8 + c]) << "hand-filled fragment " << r << "," << c;
      EXPECT_EQ(out[192 + r * 8 + c], 2.0f * in[r * 8 + c]) << "times 2I " << r << "," << c;
      EXPECT_EQ(out[256 + r * 8 + c], in[c * 8 + r]) << "transposed store " << r << "," << c;
    }
}

TEST(MetalSimKernel, ExitedLanesAreInactiveInSimdReductions) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "errors.metal",
      {"mtile_early_exit_sum",
       {MslArg::buffer("In", 0, DType::f32, true), MslArg::buffer("Out", 1, DType::f32, false),
        MslArg::scalar("n", 2, DType::u32),
        MslArg::builtin_arg("tid", B::thread_position_in_grid)}});
  std::vector<float> in(64), out(64, -1.0f);
  for (int i = 0; i < 64; ++i) in[i] = float(i + 1);
  k.launch({1, 1, 1}, {64, 1, 1}, {buf(in.data()), buf(out.data()), SimArg::scalar(40)});
  for (int i = 0; i < 64; ++i) {
    float want = i < 32 ? 528.0f : i < 40 ? float((33 + 40) * 8 / 2) : -1.0f;
    EXPECT_EQ(out[i], want) << i;
  }
}

MslSignature one_buffer(const char* kernel, B builtin, const char* builtin_name = "lid") {
  return {
      kernel,
      {MslArg::buffer("Out", 0, DType::f32, false), MslArg::builtin_arg(builtin_name, builtin)}};
}

TEST(MetalSimKernel, BarrierSkippedByFinishedThreadsIsAnError) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "errors.metal", one_buffer("mtile_divergent_barrier", B::thread_position_in_threadgroup));
  int line = line_of("errors.metal", "mtile_divergent_barrier(", "threadgroup_barrier");
  std::vector<float> out(64 * 4);
  auto [status, message] = error_of([&] { k.launch({4, 1, 1}, {64, 1, 1}, {buf(out.data())}); });
  EXPECT_EQ(status, METILE_ERROR_DEVICE);
  EXPECT_EQ(message, cat("[metal-sim] mtile_divergent_barrier: threadgroup_barrier not reached by "
                         "every thread (threads 0..31 waiting at threadgroup_barrier (line ",
                         line, "); threads 32..63 finished) in threadgroup (0,0,0)"));
}

TEST(MetalSimKernel, BarriersAtDifferentPlacesAreAnError) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file("errors.metal",
                             one_buffer("mtile_split_barrier", B::thread_position_in_threadgroup));
  int first = line_of("errors.metal", "mtile_split_barrier(", "threadgroup_barrier");
  int second = line_of("errors.metal", "} else {", "threadgroup_barrier");
  std::vector<float> out(64);
  auto [status, message] = error_of([&] { k.launch({1, 1, 1}, {64, 1, 1}, {buf(out.data())}); });
  EXPECT_EQ(status, METILE_ERROR_DEVICE);
  EXPECT_NE(message.find(cat("threadgroup_barrier not reached by every thread (threads 0..31 "
                             "waiting at threadgroup_barrier (line ",
                             first, "); threads 32..63 waiting at threadgroup_barrier (line ",
                             second, "))")),
            std::string::npos)
      << message;
}

TEST(MetalSimKernel, LanesAtDifferentSimdCallsAreAnError) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k =
      compile_file("errors.metal", {"mtile_divergent_simd",
                                    {MslArg::buffer("Out", 0, DType::f32, false),
                                     MslArg::builtin_arg("tid", B::thread_position_in_grid),
                                     MslArg::builtin_arg("slid", B::thread_index_in_simdgroup)}});
  int line = line_of("errors.metal", "mtile_divergent_simd(", "simd_sum");
  std::vector<float> out(32);
  auto [status, message] = error_of([&] { k.launch({1, 1, 1}, {32, 1, 1}, {buf(out.data())}); });
  EXPECT_EQ(status, METILE_ERROR_DEVICE);
  EXPECT_NE(message.find(cat("the lanes of simdgroup 0 called different simd functions (threads "
                             "0..15 waiting at simd_sum (line ",
                             line, "); threads 16..31 waiting at simd_max (line ", line, "))")),
            std::string::npos)
      << message;
}

TEST(MetalSimKernel, CollectiveInDivergentCodeIsAnError) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "errors.metal", one_buffer("mtile_simd_vs_barrier", B::thread_position_in_threadgroup));
  int sum = line_of("errors.metal", "mtile_simd_vs_barrier(", "simd_sum");
  int barrier = line_of("errors.metal", "mtile_simd_vs_barrier(", "threadgroup_barrier");
  std::vector<float> out(64);
  auto [status, message] = error_of([&] { k.launch({1, 1, 1}, {64, 1, 1}, {buf(out.data())}); });
  EXPECT_EQ(status, METILE_ERROR_DEVICE);
  EXPECT_EQ(message,
            cat("[metal-sim] mtile_simd_vs_barrier: a simd collective of simdgroup 0 is not "
                "reached by every live lane (threads 0..15 waiting at simd_sum (line ",
                sum, "); threads 16..31 waiting at threadgroup_barrier (line ", barrier,
                ")) in threadgroup (0,0,0); metal-sim needs every live lane of a simdgroup at "
                "the same simd_* call"));
}

TEST(MetalSimKernel, ThreadgroupMemoryOverTheLimitIsAnError) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file(
      "errors.metal", one_buffer("mtile_threadgroup_overflow", B::thread_position_in_threadgroup));
  std::vector<float> out(64);
  auto [status, message] = error_of([&] { k.launch({1, 1, 1}, {64, 1, 1}, {buf(out.data())}); });
  EXPECT_EQ(status, METILE_ERROR_DEVICE);
  EXPECT_EQ(message,
            "[metal-sim] mtile_threadgroup_overflow: threadgroup memory exceeds Apple's "
            "32768-byte limit: threadgroup variable 'big' needs 36000 bytes and 0 are in use");
}

TEST(MetalSimKernel, RunsCleanlyAfterAFailedLaunch) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel bad = compile_file(
      "errors.metal", one_buffer("mtile_divergent_barrier", B::thread_position_in_threadgroup));
  SimKernel good = compile_file("barrier_rounds.metal", barrier_rounds_signature(256));
  std::vector<float> junk(64 * 16);
  std::vector<uint32_t> in(16 * 256), out(16 * 256);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i);
  for (int attempt = 0; attempt < 3; ++attempt) {
    EXPECT_EQ(error_of([&] {
                bad.launch({16, 1, 1}, {64, 1, 1}, {buf(junk.data())});
              }).first,
              METILE_ERROR_DEVICE);
    good.launch({16, 1, 1}, {256, 1, 1}, {buf(in.data()), buf(out.data()), scalar_i32(3)});
    EXPECT_EQ(out, barrier_rounds_reference(in, 256, 3));
  }
}

TEST(MetalSimKernel, BadLaunchesAreRejected) {
  METAL_SIM_REQUIRE_CLANG();
  SimKernel k = compile_file("barrier_rounds.metal", barrier_rounds_signature(256));
  std::vector<uint32_t> in(256), out(256);
  std::vector<SimArg> args = {buf(in.data()), buf(out.data()), scalar_i32(1)};
  auto expect = [&](const std::function<void()>& f, const std::string& what) {
    auto [status, message] = error_of(f);
    EXPECT_EQ(status, METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(message.find(what), std::string::npos) << message;
  };
  expect([&] { k.launch({0, 1, 1}, {256, 1, 1}, args); }, "launch dimension 0 is 0");
  expect(
      [&] {
        k.launch({1, 1, 1}, {64, 32, 1}, args);
      },
      "2048 threads per threadgroup exceeds the maximum of 1024");
  expect(
      [&] {
        k.launch({1, 1, 1}, {256, 1, 1}, {buf(in.data())});
      },
      "the launch passes 1 arguments, the kernel takes 3");
  expect(
      [&] {
        k.launch({1, 1, 1}, {256, 1, 1}, {buf(in.data()), buf(nullptr), scalar_i32(1)});
      },
      "buffer argument 'Out' is NULL");
}

}  // namespace
}  // namespace metile::metal_sim

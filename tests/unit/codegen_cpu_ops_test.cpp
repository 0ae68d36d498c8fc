// The generated C++ against the interp oracle, op by op: every element-wise op on every dtype
// with edge values (negative division, NaN max/min, wrap-around, f16/bf16 rounding), casts
// between all dtypes, reductions, masks, loops (negative steps, swapped carried values), SIMT
// ops and roles, dot with ragged bounds and narrow inputs. Exact ops must agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "frontend/builder.h"
#include "kernels/kernels.h"
#include "kernels/launch.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::decode;
using kernels::encode;

constexpr int kN = 24;

// Raw bytes of one dtype, built from doubles with the interp's conversions.
// Runs `p` on cpu and on interp with the same buffers; returns {cpu, interp} copies.
std::pair<std::vector<std::vector<uint8_t>>, std::vector<std::vector<uint8_t>>> run_both(
    const Program& p, const std::vector<std::vector<uint8_t>>& buffers,
    std::array<uint32_t, 3> grid = {1, 1, 1}) {
  std::vector<std::vector<uint8_t>> out[2] = {buffers, buffers};
  const char* devices[2] = {"cpu", "interp"};
  for (int d = 0; d < 2; ++d) {
    kernels::Launch l(p, devices[d]);
    for (auto& b : out[d]) l.wrap(b.data(), b.size());
    metile_status s = l.run(grid);
    EXPECT_EQ(s, METILE_OK) << devices[d] << ": " << l.error();
  }
  return {out[0], out[1]};
}

// Compares element-wise: bit-exact (NaN matching NaN) unless `ulps` allows a relative slack.
void expect_same(DType d, const std::vector<uint8_t>& cpu, const std::vector<uint8_t>& ref,
                 const std::string& what, double rel = 0) {
  ASSERT_EQ(cpu.size(), ref.size());
  size_t n = cpu.size() / dtype_size(d);
  int bad = 0;
  for (size_t i = 0; i < n && bad < 5; ++i) {
    double a = decode(d, &cpu[i * dtype_size(d)]), b = decode(d, &ref[i * dtype_size(d)]);
    bool same = (std::isnan(a) && std::isnan(b)) || a == b ||
                (rel > 0 && std::fabs(a - b) <= rel * std::fabs(b));
    if (!same && std::signbit(a) != std::signbit(b) && a == 0 && b == 0) same = false;
    if (!same) {
      ++bad;
      ADD_FAILURE() << what << " [" << i << "]: cpu " << a << ", interp " << b;
    }
  }
}

std::vector<double> edge_values(DType d, bool divisor) {
  if (is_float(d)) {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    std::vector<double> v = {0.0, -0.0, 1.0,   -1.0, 0.5,  -2.5,   3.75,  1e-40, -1e30, 1e30, inf, -inf,
                             nan, 7.0,  -7.0,  2.0,  -3.0, 123.456, 1e-3, 0.1,   -0.7,  65504, 3e38, 1.0009765625};
    if (divisor) std::rotate(v.begin(), v.begin() + 5, v.end());
    if (d != DType::f32)
      for (double& x : v) x = std::fabs(x) > 60000 && d == DType::f16 ? x / 1e26 : x;
    return v;
  }
  std::vector<double> v;
  double lo = 0, hi = 0;
  switch (d) {
    case DType::i32: lo = INT32_MIN; hi = INT32_MAX; break;
    case DType::u32: lo = 0; hi = UINT32_MAX; break;
    case DType::i64: lo = -9.0e15; hi = 9.0e15; break;
    case DType::i8: lo = -128; hi = 127; break;
    case DType::u8: lo = 0; hi = 255; break;
    default: break;
  }
  bool uns = lo == 0;
  std::vector<double> base = {0, 1, 7, 2, 100, 3, 5, 13, 64, 9, 11, 6};
  for (size_t i = 0; i < base.size(); ++i) {
    double x = base[i];
    v.push_back(x);
    v.push_back(uns ? hi - x : -x);
  }
  v[0] = lo;
  v[1] = hi;
  if (divisor)
    for (double& x : v) x = x == 0 ? (uns ? 3 : -3) : (x == lo && !uns ? -1 : x);
  return v;
}

bool binary_valid(OpKind k, DType d) {
  bool bit = k == OpKind::BITAND || k == OpKind::BITOR || k == OpKind::BITXOR;
  if (bit || k == OpKind::SHL || k == OpKind::SHR) return !is_float(d);
  if (k == OpKind::POW) return is_float(d);
  return true;
}

class CpuOps : public testing::TestWithParam<DType> {};

TEST_P(CpuOps, BinaryAndCompareOpsMatchInterp) {
  DType d = GetParam();
  std::vector<OpKind> ops;
  for (OpKind k : all_ops())
    if (has_trait(k, kBinary | kCompare) && binary_valid(k, d)) ops.push_back(k);
  Builder b("binary");
  ValueId x = b.param("X", Type::ptr(d)), y = b.param("Y", Type::ptr(d)),
          s = b.param("S", Type::ptr(d)), z = b.param("Z", Type::ptr(d)),
          c = b.param("C", Type::ptr(DType::boolean));
  ValueId idx = b.arange(kNoValue, kN);
  ValueId xv = b.load(b.binary(OpKind::ADD, x, idx), kNoValue, kNoValue);
  ValueId yv = b.load(b.binary(OpKind::ADD, y, idx), kNoValue, kNoValue);
  ValueId sv = b.load(b.binary(OpKind::ADD, s, idx), kNoValue, kNoValue);
  int arith = 0, cmp = 0;
  for (OpKind k : ops) {
    bool shift = k == OpKind::SHL || k == OpKind::SHR;
    ValueId r = b.binary(k, xv, shift ? sv : yv);
    bool is_cmp = has_trait(k, kCompare);
    int slot = is_cmp ? cmp++ : arith++;
    ValueId at = b.arange(b.const_int(DType::i32, slot * kN), kN);
    b.store(b.binary(OpKind::ADD, is_cmp ? c : z, at), r, kNoValue);
  }
  Program p = b.finish();
  std::vector<double> shifts;
  for (int i = 0; i < kN; ++i) shifts.push_back(i % (dtype_size(d) * 8));
  auto [got, want] = run_both(p, {encode(d, edge_values(d, false)), encode(d, edge_values(d, true)),
                                  encode(d, shifts), std::vector<uint8_t>(arith * kN * dtype_size(d)),
                                  std::vector<uint8_t>(cmp * kN)});
  expect_same(d, got[3], want[3], std::string(dtype_name(d)) + " arithmetic");
  expect_same(DType::boolean, got[4], want[4], std::string(dtype_name(d)) + " comparisons");
}

TEST_P(CpuOps, UnaryOpsMatchInterp) {
  DType d = GetParam();
  std::vector<OpKind> ops;
  for (OpKind k : all_ops()) {
    if (!has_trait(k, kUnary)) continue;
    if (has_trait(k, kFloatOnly) && !is_float(d)) continue;
    if (k == OpKind::NOT && is_float(d)) continue;
    ops.push_back(k);
  }
  Builder b("unary");
  ValueId x = b.param("X", Type::ptr(d)), z = b.param("Z", Type::ptr(d));
  ValueId xv = b.load(b.binary(OpKind::ADD, x, b.arange(kNoValue, kN)), kNoValue, kNoValue);
  for (size_t i = 0; i < ops.size(); ++i) {
    ValueId at = b.arange(b.const_int(DType::i32, static_cast<int64_t>(i) * kN), kN);
    b.store(b.binary(OpKind::ADD, z, at), b.unary(ops[i], xv), kNoValue);
  }
  Program p = b.finish();
  auto [got, want] = run_both(p, {encode(d, edge_values(d, false)),
                                  std::vector<uint8_t>(ops.size() * kN * dtype_size(d))});
  // exp, exp2 and sigmoid use the prelude's vectorizable exp (within 2 ulp of libm's); the
  // other ops call the same functions as interp.
  for (size_t i = 0; i < ops.size(); ++i) {
    bool own_exp = ops[i] == OpKind::EXP || ops[i] == OpKind::EXP2 || ops[i] == OpKind::SIGMOID;
    double rel = !own_exp ? 0 : d == DType::f32 ? 2.5e-7 : d == DType::f16 ? 1e-3 : 8e-3;
    size_t bytes = kN * dtype_size(d);
    std::vector<uint8_t> g(got[1].begin() + i * bytes, got[1].begin() + (i + 1) * bytes);
    std::vector<uint8_t> w(want[1].begin() + i * bytes, want[1].begin() + (i + 1) * bytes);
    expect_same(d, g, w, std::string(dtype_name(d)) + " " + std::string(op_name(ops[i])), rel);
  }
}

void check_casts(DType from, const std::vector<DType>& targets, std::vector<double> vals) {
  Builder b("casts");
  ValueId x = b.param("X", Type::ptr(from));
  std::vector<ValueId> outs;
  for (DType t : targets) outs.push_back(b.param(std::string("Z_") + dtype_name(t), Type::ptr(t)));
  ValueId idx = b.arange(kNoValue, kN);
  ValueId xv = b.load(b.binary(OpKind::ADD, x, idx), kNoValue, kNoValue);
  for (size_t i = 0; i < outs.size(); ++i)
    b.store(b.binary(OpKind::ADD, outs[i], idx), b.cast(xv, targets[i]), kNoValue);
  Program p = b.finish();
  vals.resize(kN, 3.0);
  std::vector<std::vector<uint8_t>> bufs = {encode(from, vals)};
  for (DType t : targets) bufs.emplace_back(kN * dtype_size(t));
  auto [got, want] = run_both(p, bufs);
  for (size_t i = 0; i < outs.size(); ++i)
    expect_same(targets[i], got[i + 1], want[i + 1],
                std::string(dtype_name(from)) + " -> " + dtype_name(targets[i]));
}

TEST_P(CpuOps, CastsToEveryDtypeMatchInterp) {
  DType from = GetParam();
  const std::vector<DType> all = {DType::f32, DType::f16,     DType::bf16, DType::i32, DType::u32,
                                  DType::i64, DType::boolean, DType::i8,   DType::u8};
  if (!is_float(from)) return check_casts(from, all, edge_values(from, false));
  // Float -> integer casts of values outside the target's range are undefined (interp reports
  // them), so negative values only go to signed targets.
  check_casts(from, all, {0, -0.0, 1, 0.5, 1.7, 2.5, 100.9, 127.5, 0.999, 1e-30, 42, 7.5});
  check_casts(from, {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::i8},
              {-1, -0.5, -1.7, -2.5, -100.9, -128.5, -0.999, -1e-30, -42, -7.5, 3.25, -3.75});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuOps,
                         testing::Values(DType::f32, DType::f16, DType::bf16, DType::i32,
                                         DType::u32, DType::i64, DType::i8, DType::u8),
                         [](const testing::TestParamInfo<DType>& i) { return dtype_name(i.param); });

}  // namespace
}  // namespace metile

// Float-only math (exp, log, tanh, ...) on integer values through the C ABI: the builder
// promotes the operand to f32 for every language (as numpy does), so C, Rust and Go programs
// get the same result a Python kernel gets. Compared on every available device with a float64
// reference.
#include <metile/metile.h>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "capi_util.h"

using namespace metile_capi_test;

namespace METILE_UNITY_ID {

struct FloatOnly {
  metile_op op;
  double (*ref)(double);
};
const FloatOnly kOps[] = {
    {METILE_OP_EXP, [](double x) { return std::exp(x); }},
    {METILE_OP_LOG, [](double x) { return std::log(x); }},
    {METILE_OP_SQRT, [](double x) { return std::sqrt(x); }},
    {METILE_OP_RSQRT, [](double x) { return 1 / std::sqrt(x); }},
    {METILE_OP_TANH, [](double x) { return std::tanh(x); }},
    {METILE_OP_SIN, [](double x) { return std::sin(x); }},
    {METILE_OP_COS, [](double x) { return std::cos(x); }},
    {METILE_OP_EXP2, [](double x) { return std::exp2(x); }},
    {METILE_OP_LOG2, [](double x) { return std::log2(x); }},
    {METILE_OP_FLOOR, [](double x) { return std::floor(x); }},
    {METILE_OP_CEIL, [](double x) { return std::ceil(x); }},
    {METILE_OP_ERF, [](double x) { return std::erf(x); }},
    {METILE_OP_SIGMOID, [](double x) { return 1 / (1 + std::exp(-x)); }},
};
constexpr int kN = 64;
constexpr int kOpCount = sizeof kOps / sizeof kOps[0];

// Y[k * 64 + i] = op_k(X[i]) with X of integer dtype `in`.
metile_program* build_math(metile_dtype in) {
  metile_builder* b = nullptr;
  metile_program* p = nullptr;
  metile_type xp = pointer(in), yp = pointer(METILE_DTYPE_F32);
  metile_value x, y, offs, ptr, xs, out, kbase, r;
  EXPECT_EQ(metile_builder_create(&b, "float_only_math"), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "X", &xp, &x), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "Y", &yp, &y), METILE_OK);
  EXPECT_EQ(metile_builder_arange(b, 0, kN, &offs), METILE_OK);
  EXPECT_EQ(metile_builder_ptr_offset(b, x, offs, &ptr), METILE_OK);
  EXPECT_EQ(metile_builder_load(b, ptr, 0, 0, &xs), METILE_OK);
  for (int k = 0; k < kOpCount; ++k) {
    EXPECT_EQ(metile_builder_unary(b, kOps[k].op, xs, &r), METILE_OK)
        << metile_op_name(kOps[k].op) << ": " << metile_last_error();
    metile_type t{};
    EXPECT_EQ(metile_builder_value_type(b, r, &t), METILE_OK);
    EXPECT_EQ(t.dtype, METILE_DTYPE_F32) << metile_op_name(kOps[k].op);
    EXPECT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, k * kN, &kbase), METILE_OK);
    EXPECT_EQ(metile_builder_binary(b, METILE_OP_ADD, kbase, offs, &out), METILE_OK);
    EXPECT_EQ(metile_builder_ptr_offset(b, y, out, &ptr), METILE_OK);
    EXPECT_EQ(metile_builder_store(b, ptr, r, 0), METILE_OK);
  }
  EXPECT_EQ(metile_builder_finish(b, &p), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_builder_release(b), METILE_OK);
  return p;
}

std::vector<std::string> available_devices() {
  char* list = nullptr;
  EXPECT_EQ(metile_devices_available(&list), METILE_OK);
  std::vector<std::string> out;
  std::string names = list ? list : "";
  metile_free(list);
  for (size_t start = 0; start < names.size();) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    out.push_back(names.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Runs build_math(in) with X = 1..64 on `device`; returns Y.
std::vector<float> run(const std::string& device, metile_dtype in) {
  metile_device* d = nullptr;
  EXPECT_EQ(metile_device_open(&d, device.c_str()), METILE_OK) << last_error();
  metile_program* p = build_math(in);
  metile_kernel* k = nullptr;
  EXPECT_EQ(metile_kernel_compile(&k, d, p, nullptr), METILE_OK) << last_error();
  metile_buffer *xb = nullptr, *yb = nullptr;
  size_t width = metile_dtype_size(in);
  EXPECT_EQ(metile_buffer_alloc(&xb, d, kN * width), METILE_OK);
  EXPECT_EQ(metile_buffer_alloc(&yb, d, kOpCount * kN * sizeof(float)), METILE_OK);
  void* xh = nullptr;
  EXPECT_EQ(metile_buffer_contents(xb, &xh), METILE_OK);
  for (int i = 0; i < kN; ++i) {
    if (in == METILE_DTYPE_I64)
      static_cast<int64_t*>(xh)[i] = i + 1;
    else
      static_cast<int32_t*>(xh)[i] = i + 1;
  }
  metile_arg args[2] = {};
  args[0].kind = args[1].kind = METILE_ARG_BUFFER;
  args[0].buffer = xb;
  args[1].buffer = yb;
  uint32_t grid[3] = {1, 1, 1};
  EXPECT_EQ(metile_kernel_launch(k, grid, args, 2), METILE_OK) << last_error();
  EXPECT_EQ(metile_device_synchronize(d), METILE_OK) << last_error();
  void* yh = nullptr;
  EXPECT_EQ(metile_buffer_contents(yb, &yh), METILE_OK);
  std::vector<float> y(static_cast<float*>(yh), static_cast<float*>(yh) + kOpCount * kN);
  metile_buffer_release(xb);
  metile_buffer_release(yb);
  metile_kernel_release(k);
  metile_program_release(p);
  metile_device_release(d);
  return y;
}

TEST(FloatOnlyMath, IntegerOperandsArePromotedToF32OnEveryDevice) {
  for (const std::string& device : available_devices()) {
    if (device == "cuda") continue;  // needs a GPU: covered by the Python suite on the GPU host
    for (metile_dtype in : {METILE_DTYPE_I32, METILE_DTYPE_I64}) {
      SCOPED_TRACE(device + (in == METILE_DTYPE_I32 ? " i32" : " i64"));
      std::vector<float> y = run(device, in);
      for (int k = 0; k < kOpCount; ++k)
        for (int i = 0; i < kN; ++i) {
          double want = kOps[k].ref(i + 1.0);
          EXPECT_NEAR(y[k * kN + i], want, 2e-6 * std::fmax(1.0, std::fabs(want)))
              << metile_op_name(kOps[k].op) << "(" << i + 1 << ")";
        }
    }
  }
}

TEST(FloatOnlyMath, APointerOperandIsStillAnError) {
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "bad"), METILE_OK);
  metile_type xp = pointer(METILE_DTYPE_I32);
  metile_value x, r = 0;
  ASSERT_EQ(metile_builder_param(b, "X", &xp, &x), METILE_OK);
  EXPECT_EQ(metile_builder_unary(b, METILE_OP_EXP, x, &r), METILE_ERROR_INVALID_PROGRAM)
      << last_error();
  EXPECT_NE(last_error().find("exp"), std::string::npos) << last_error();
  EXPECT_EQ(r, 0u);
  metile_builder_release(b);
}

TEST(FloatOnlyMath, AbsKeepsTheIntegerDtype) {
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "abs"), METILE_OK);
  metile_value x, r;
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, -3, &x), METILE_OK);
  ASSERT_EQ(metile_builder_unary(b, METILE_OP_ABS, x, &r), METILE_OK) << last_error();
  metile_type t{};
  ASSERT_EQ(metile_builder_value_type(b, r, &t), METILE_OK);
  EXPECT_EQ(t.dtype, METILE_DTYPE_I32);
  metile_builder_release(b);
}

}  // namespace

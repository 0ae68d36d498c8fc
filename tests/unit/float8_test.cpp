// FP8 (f8e4m3, f8e5m2) in the Tile IR: the conversions every device shares (support/float8.h),
// the text form, the verifier's refusal of arithmetic on FP8 values (dots: fp8_dot_test.cpp), and the builder's promotion
// of that arithmetic to f32. The all-codes tables on every device are in
// bindings/python/tests/test_float8.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "codegen/metal/msl.h"
#include "frontend/builder.h"
#include "passes/pipeline.h"
#include "runtime/backends.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"
#include "support/float8.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

float bits(uint32_t u) { return __builtin_bit_cast(float, u); }

TEST(Float8, E4M3Encodes) {
  EXPECT_EQ(mt_f32_to_f8e4m3(1.0f), 0x38);
  EXPECT_EQ(mt_f32_to_f8e4m3(-2.0f), 0xc0);
  EXPECT_EQ(mt_f32_to_f8e4m3(448.0f), 0x7e);
  EXPECT_EQ(mt_f32_to_f8e4m3(464.0f), 0x7e);      // the tie with 480 (not a value) goes to even
  EXPECT_EQ(mt_f32_to_f8e4m3(1e9f), 0x7e);        // saturates
  EXPECT_EQ(mt_f32_to_f8e4m3(-INFINITY), 0xfe);   // infinities too
  EXPECT_EQ(mt_f32_to_f8e4m3(NAN), 0x7f);
  EXPECT_EQ(mt_f32_to_f8e4m3(bits(0xffc00000u)), 0xff);  // a negative NaN keeps its sign
  EXPECT_EQ(mt_f32_to_f8e4m3(-0.0f), 0x80);
  EXPECT_EQ(mt_f32_to_f8e4m3(std::ldexp(1.0f, -9)), 0x01);   // the smallest subnormal
  EXPECT_EQ(mt_f32_to_f8e4m3(std::ldexp(1.0f, -10)), 0x00);  // half of it: ties to even (0)
  EXPECT_EQ(mt_f32_to_f8e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 units: ties to even (2)
  EXPECT_EQ(mt_f32_to_f8e4m3(std::ldexp(15.0f, -10)), 0x08); // 7.5 units round up to 2^-6
  EXPECT_EQ(mt_f32_to_f8e4m3(1.0625f), 0x38);  // 1 + 1/16: tie, even mantissa 0
  EXPECT_EQ(mt_f32_to_f8e4m3(1.1875f), 0x3a);  // 1 + 3/16: tie, even mantissa 2
}

TEST(Float8, E5M2Encodes) {
  EXPECT_EQ(mt_f32_to_f8e5m2(1.0f), 0x3c);
  EXPECT_EQ(mt_f32_to_f8e5m2(57344.0f), 0x7b);
  EXPECT_EQ(mt_f32_to_f8e5m2(61440.0f), 0x7b);  // would round to infinity: saturates
  EXPECT_EQ(mt_f32_to_f8e5m2(-1e30f), 0xfb);
  EXPECT_EQ(mt_f32_to_f8e5m2(INFINITY), 0x7c);  // an infinity is not an overflow
  EXPECT_EQ(mt_f32_to_f8e5m2(-INFINITY), 0xfc);
  EXPECT_EQ(mt_f32_to_f8e5m2(NAN), 0x7f);
  EXPECT_EQ(mt_f32_to_f8e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(mt_f32_to_f8e5m2(std::ldexp(1.0f, -17)), 0x00);
}

TEST(Float8, DecodesAndRoundTripsEveryCode) {
  EXPECT_EQ(mt_f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(mt_f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(mt_f8e4m3_to_f32(0x7f)) && std::isnan(mt_f8e4m3_to_f32(0xff)));
  EXPECT_EQ(mt_f8e5m2_to_f32(0x7c), INFINITY);
  EXPECT_EQ(mt_f8e5m2_to_f32(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(mt_f8e5m2_to_f32(0x7d)));
  EXPECT_TRUE(std::signbit(mt_f8e4m3_to_f32(0x80)));
  for (unsigned c = 0; c < 256; ++c) {
    const auto b = static_cast<unsigned char>(c);
    // Every code is exact in f32 and encodes back to itself, but E5M2 NaNs become S.11111.11.
    const float a = mt_f8e4m3_to_f32(b), e = mt_f8e5m2_to_f32(b);
    EXPECT_EQ(mt_f32_to_f8e4m3(a), b) << c;
    EXPECT_EQ(mt_f32_to_f8e5m2(e), std::isnan(e) ? (b | 0x7f) : b) << c;
  }
}

const std::string kRoundTrip =
    "kernel @scale(%X: ptr<f8e4m3>, %Y: ptr<f8e5m2>) {\n"
    "  %0 = const {value = 0} : i32\n"
    "  %1 = arange %0 {size = 16} : tile<16xi32>\n"
    "  %2 = ptr_offset %X, %1 : tile<16xptr<f8e4m3>>\n"
    "  %3 = load %2 : tile<16xf8e4m3>\n"
    "  %4 = cast %3 : tile<16xf32>\n"
    "  %5 = const {value = 2.0} : f32\n"
    "  %6 = broadcast %5 : tile<16xf32>\n"
    "  %7 = mul %4, %6 : tile<16xf32>\n"
    "  %8 = cast %7 : tile<16xf8e5m2>\n"
    "  %9 = ptr_offset %Y, %1 : tile<16xptr<f8e5m2>>\n"
    "  store %9, %8\n"
    "}\n";

TEST(Float8, TextRoundTrips) {
  Program p = parse(kRoundTrip);
  EXPECT_EQ(print(p, false), kRoundTrip);
  EXPECT_EQ(parse_type("tile<4x8xf8e4m3>")->dtype, DType::f8e4m3);
  EXPECT_EQ(parse_type("ptr<f8e5m2>")->str(), "ptr<f8e5m2>");
  EXPECT_EQ(std::string(metile_dtype_name(METILE_DTYPE_F8E4M3)), "f8e4m3");
  EXPECT_EQ(metile_dtype_size(METILE_DTYPE_F8E5M2), 1u);
}

void expect_invalid(const std::string& text, const std::string& part) {
  try {
    parse(text);
    ADD_FAILURE() << "verified:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(has(e.what(), part)) << e.what() << "\nwanted: " << part;
  }
}

TEST(Float8, VerifierRefusesArithmeticOnFp8) {
  const std::string head =
      "kernel @k(%X: ptr<f8e4m3>) {\n  %0 = const {value = 0} : i32\n"
      "  %1 = arange %0 {size = 8} : tile<8xi32>\n  %2 = ptr_offset %X, %1 : tile<8xptr<f8e4m3>>\n"
      "  %3 = load %2 : tile<8xf8e4m3>\n";
  const std::string loc = " loc(\"f8.py\":7)\n}\n";
  expect_invalid(head + "  %4 = add %3, %3 : tile<8xf8e4m3>" + loc,
                 "f8.py:7: add: does not take f8e4m3 operands: FP8 is a storage type "
                 "(cast to f32 first)");
  expect_invalid(head + "  %4 = lt %3, %3 : tile<8xbool>" + loc,
                 "lt: does not take f8e4m3 operands");
  expect_invalid(head + "  %4 = exp %3 : tile<8xf8e4m3>" + loc,
                 "exp: does not take f8e4m3 operands");
  expect_invalid(head + "  %4 = reduce_max %3 {axis = -1} : f8e4m3" + loc,
                 "reduce_max: does not take f8e4m3 operands");
  expect_invalid("kernel @k(%s: f8e5m2) {\n}\n",
                 "parameter s is an f8e5m2 scalar: FP8 parameters must be pointers");
  expect_invalid("kernel @k(%X: ptr<f8e4m3>) {\n  %0 = const {value = 500.0} : f8e4m3" + loc,
                 "overflows f8e4m3");
}

TEST(Float8, BuilderComputesFp8ArithmeticInF32) {
  Builder b("k");
  ValueId x = b.param("X", Type::ptr(DType::f8e4m3));
  ValueId p = b.binary(OpKind::ADD, x, b.arange(kNoValue, 8));
  ValueId v = b.load(p, kNoValue, kNoValue);
  EXPECT_EQ(b.type(v).dtype, DType::f8e4m3);
  ValueId sum = b.binary(OpKind::ADD, v, v);
  EXPECT_EQ(b.type(sum).str(), "tile<8xf32>");
  EXPECT_EQ(b.type(b.unary(OpKind::EXP, v)).dtype, DType::f32);
  EXPECT_EQ(b.type(b.reduce(OpKind::REDUCE_SUM, v, -1)).str(), "f32");
  EXPECT_EQ(b.type(b.binary(OpKind::LT, v, b.const_float(DType::f32, 1.0))).dtype, DType::boolean);
  b.store(p, sum, kNoValue);  // the store casts back to f8e4m3
  Program prog = b.finish();
  EXPECT_TRUE(has(print(prog, false), "cast %")) << print(prog, false);
  try {
    Builder("k2").param("s", Type::scalar(DType::f8e4m3));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "FP8 parameters must be pointers")) << e.what();
  }
}

// MSL has no FP8 type: the kernel reads and writes bytes and converts with the prelude's
// float8.h (metal-sim runs it in bindings/python/tests/test_float8.py).
TEST(Float8, MslConvertsBytesThroughThePrelude) {
  const gpu::Function f =
      run_gpu_pipeline(parse(kRoundTrip), apple_gpu_target(), CompileOptions{}, "metal-sim").function;
  const std::string src = emit_msl(f).source;
  EXPECT_TRUE(has(src, "device const uchar*")) << src;
  EXPECT_TRUE(has(src, "mt_f8e4m3_to_f32(")) << src;
  EXPECT_TRUE(has(src, "mt_f32_to_f8e5m2(")) << src;
  EXPECT_TRUE(has(src, "MT_FN unsigned char mt_f32_to_f8(")) << "float8.h is pasted";
}

// The CUDA source compiles with NVRTC (software conversion, no cuda_fp8.h); on a GPU the Python
// test runs it on the cuda device.
TEST(Float8, CudaSourceCompilesWithNvrtc) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  Artifact a = cuda_build_program(parse(kRoundTrip), CompileOptions{}, "sm_90");
  EXPECT_EQ(a.kind, ArtifactKind::cubin);
  const std::string& src = a.sources.at(Stage::cuda);
  EXPECT_TRUE(has(src, "mt_f8e4m3_to_f32(")) << src;
  EXPECT_TRUE(has(src, "mt_f32_to_f8e5m2(")) << src;
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

// The bitcast op below the Python layer: the text form round-trips, the verifier and the builder
// name a width mismatch, bool and pointers, every dialect spells it through storage bits, and
// NVRTC compiles every width (values on every device: test_triton_combine.py).
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <string>

#include "driver/stage_text.h"
#include "frontend/builder.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void expect_invalid(const std::string& body, const std::string& part) {
  const std::string text = "kernel @k(%X: ptr<f32>) {\n" + body + "}\n";
  try {
    parse(text);
    ADD_FAILURE() << "verified:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(has(e.what(), part)) << e.what() << "\nwanted: " << part;
  }
}

// f32 -> i32 -> u32, f16 -> bf16 and f8e4m3 -> i8 -> u8, from an f32 tile of X (i64 has no
// other dtype of its width).
Program every_width() {
  Builder b("bits");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId o32 = b.param("O32", Type::ptr(DType::u32));
  ValueId o16 = b.param("O16", Type::ptr(DType::bf16));
  ValueId o8 = b.param("O8", Type::ptr(DType::u8));
  ValueId offs = b.arange(kNoValue, 64);
  ValueId v = b.load(b.ptr_offset(x, offs), kNoValue, kNoValue);
  b.store(b.ptr_offset(o32, offs), b.bitcast(b.bitcast(v, DType::i32), DType::u32), kNoValue);
  b.store(b.ptr_offset(o16, offs), b.bitcast(b.cast(v, DType::f16), DType::bf16), kNoValue);
  ValueId i8 = b.bitcast(b.cast(v, DType::f8e4m3), DType::i8);
  b.store(b.ptr_offset(o8, offs), b.bitcast(i8, DType::u8), kNoValue);
  return b.finish();
}

TEST(Bitcast, TextFormRoundTrips) {
  const std::string text = print(every_width());
  EXPECT_TRUE(has(text, "bitcast")) << text;
  EXPECT_TRUE(has(text, ": tile<64xbf16>")) << text;
  EXPECT_EQ(print(parse(text)), text);
}

TEST(Bitcast, VerifierNamesWidthBoolAndPointers) {
  const std::string tile =
      "  %0 = const {value = 0} : i32\n  %1 = arange %0 {size = 8} : tile<8xi32>\n"
      "  %2 = cast %1 : tile<8xf32>\n";
  expect_invalid(tile + "  %3 = bitcast %2 : tile<8xf16> loc(\"bad.py\":4)\n",
                 "bad.py:4: bitcast: cannot bitcast tile<8xf32> to tile<8xf16> (the dtypes must "
                 "have the same width and neither be bool)");
  expect_invalid(tile + "  %3 = cast %1 : tile<8xbool>\n  %4 = bitcast %3 : tile<8xi8>\n",
                 "cannot bitcast tile<8xbool> to tile<8xi8>");
  expect_invalid(tile + "  %3 = bitcast %2 : tile<4xi32>\n",
                 "cannot bitcast tile<8xf32> to tile<4xi32>");
  expect_invalid("  %0 = bitcast %X : i64\n",
                 "bitcast: operand must not be a pointer, got ptr<f32>");
}

TEST(Bitcast, BuilderAndCApiNameBadInput) {
  Builder b("k");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId v = b.load(x, kNoValue, kNoValue);
  EXPECT_EQ(b.bitcast(v, DType::f32), v) << "the same dtype is the value itself";
  try {
    b.bitcast(v, DType::i64);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "cannot bitcast f32 to i64")) << e.what();
  }
  metile_builder* cb = nullptr;
  ASSERT_EQ(metile_builder_create(&cb, "k"), METILE_OK);
  metile_value c = 0, out = 0;
  ASSERT_EQ(metile_builder_const_float(cb, METILE_DTYPE_F16, 1.5, &c), METILE_OK);
  EXPECT_EQ(metile_builder_bitcast(cb, c, METILE_DTYPE_BF16, &out), METILE_OK);
  EXPECT_EQ(metile_builder_bitcast(cb, c, METILE_DTYPE_I32, &out), METILE_ERROR_INVALID_PROGRAM);
  EXPECT_TRUE(has(metile_last_error(), "cannot bitcast f16 to i32")) << metile_last_error();
  EXPECT_EQ(metile_builder_bitcast(cb, c, static_cast<metile_dtype>(99), &out),
            METILE_ERROR_INVALID_ARGUMENT);
  metile_builder_release(cb);
}

// Each dialect reinterprets storage bits: the C++ and CUDA preludes' mt_bitcast, MSL's as_type.
TEST(Bitcast, DialectsReinterpretStorageBits) {
  const Program p = every_width();
  const CompileOptions o;
  EXPECT_TRUE(has(stage_text(Stage::cpp, p, o), "mt_bitcast<int32_t>("));
  EXPECT_TRUE(has(stage_text(Stage::cpp, p, o), "mt_bitcast<uint16_t>(mt_f32_to_f16("));
  EXPECT_TRUE(has(stage_text(Stage::msl, p, o), "as_type<bfloat>("));
  EXPECT_TRUE(has(stage_text(Stage::msl, p, o), "as_type<char>("));
  EXPECT_TRUE(has(stage_text(Stage::cuda, p, o), "mt_bitcast<ushort>("));
}

TEST(CudaCodegenSource, BitcastOfEveryWidthCompiles) {
  std::string why;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed";
  Artifact a = cuda_build_program(every_width(), CompileOptions{}, "sm_90");
  EXPECT_EQ(a.kind, ArtifactKind::cubin);
  EXPECT_TRUE(has(a.sources.at(Stage::cuda), "mt_bitcast<int>(")) << a.sources.at(Stage::cuda);
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

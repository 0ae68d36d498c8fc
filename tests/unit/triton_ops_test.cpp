// cumsum/cumprod, trans and device_print (issue 17 item 7) below the Python layer: the verifier
// and the C API name bad input, the text form round-trips, and device_print's prefix reaches
// generated source only as numbers (results on every device: test_scan_trans_print.py).
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <string>

#include "driver/stage_text.h"
#include "frontend/builder.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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

const std::string kTile =
    "  %0 = const {value = 0} : i32\n  %1 = arange %0 {size = 8} : tile<8xi32>\n"
    "  %2 = cast %1 : tile<8xf32>\n";

TEST(TritonOps, VerifierNamesBadScansTransposesAndPrints) {
  expect_invalid(kTile + "  %3 = cumsum %2 {axis = 1, reverse = 0} : tile<8xf32> loc(\"bad.py\":5)\n",
                 "[verify] bad.py:5: cumsum: axis 1 is invalid for tile<8xf32> (0)");
  expect_invalid(kTile + "  %3 = cumprod %2 {axis = 0, reverse = 2} : tile<8xf32>\n",
                 "cumprod: reverse must be 0 or 1, got 2");
  expect_invalid(kTile + "  %3 = trans %2 : tile<8xf32> loc(\"bad.py\":7)\n",
                 "bad.py:7: trans: needs a 2-D tile, got tile<8xf32>");
  expect_invalid(kTile + "  device_print %2 {prefix = \"a\tb\", masked = 0}\n",
                 "the string \"a\\x09b\" contains a control character");
  expect_invalid(kTile + "  device_print %X {prefix = \"p\", masked = 0}\n",
                 "cannot print pointer value 0");
  expect_invalid(kTile + "  device_print %2, %2 {prefix = \"p\", masked = 1}\n",
                 "mask 0 must be bool of value 0's shape");
}

TEST(TritonOps, TextFormRoundTrips) {
  Builder b("k");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId t = b.load(b.ptr_offset(x, b.arange(b.const_int(DType::i32, 0), 8)), kNoValue, kNoValue);
  ValueId m = b.reshape(t, Shape::of(2, 4));
  b.device_print("quote\" back\\ */ end", {b.scan(OpKind::CUMPROD, m, 1, true), b.trans(m)});
  Program p = b.finish();
  std::string text = print(p);
  EXPECT_TRUE(has(text, "cumprod")) << text;
  EXPECT_TRUE(has(text, "reverse = 1")) << text;
  EXPECT_EQ(print(parse(text)), text);
}

// trans(trans(m)) is m itself (no op emitted), and the first transpose, which nothing reads
// any more, costs no exchange through threadgroup memory on cuda (dot_scaled transposes back the
// bytes a kernel transposed from its N x K load).
TEST(TritonOps, TransposePairsCancel) {
  Builder b("k");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId idx = b.arange(b.const_int(DType::i32, 0), 64);
  ValueId m = b.reshape(b.load(b.ptr_offset(x, idx), kNoValue, kNoValue), Shape::of(8, 8));
  ValueId t = b.trans(m);
  EXPECT_EQ(b.trans(t), m);
  b.store(b.ptr_offset(x, idx), b.reshape(b.trans(t), Shape::of(64)), kNoValue);
  Program p = b.finish();
  std::string cuda = stage_text(Stage::cuda, p, CompileOptions{});
  EXPECT_FALSE(has(cuda, "__syncthreads")) << cuda;
}

// A prefix written to break out of a string literal or a comment is inert: it appears in no
// generated source, only its bytes do.
TEST(TritonOps, DevicePrintPrefixIsDataNotSource) {
  const std::string evil = "\"); system(\"id\"); /* */ // \\";
  Builder b("k");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  b.device_print(evil, {b.load(x, kNoValue, kNoValue)});
  Program p = b.finish();
  CompileOptions o;
  for (Stage s : {Stage::cpp, Stage::msl, Stage::cuda}) {
    std::string src = stage_text(s, p, o);
    EXPECT_FALSE(has(src, "system(")) << stage_name(s) << ":\n" << src;
    EXPECT_TRUE(has(src, "{32, 34, 41, 59, 32, 115, 121, 115")) << stage_name(s) << ":\n" << src;
  }
}

TEST(TritonOps, BuilderAndCApiNameBadInput) {
  Builder b("k");
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId v = b.load(x, kNoValue, kNoValue);
  try {
    b.device_print("tab\there", {v});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(has(e.what(), "device_print prefix \"tab\\x09here\" contains a control character")) << e.what();
  }
  // A bool tile scans as an i32 count.
  ValueId flags = b.binary(OpKind::GT, b.arange(b.const_int(DType::i32, 0), 8), b.const_int(DType::i32, 3));
  EXPECT_EQ(b.type(b.scan(OpKind::CUMSUM, flags, 0, false)).dtype, DType::i32);

  metile_builder* cb = nullptr;
  ASSERT_EQ(metile_builder_create(&cb, "k"), METILE_OK);
  metile_value zero = 0, r = 0, out = 0;
  ASSERT_EQ(metile_builder_const_int(cb, METILE_DTYPE_I32, 0, &zero), METILE_OK);
  ASSERT_EQ(metile_builder_arange(cb, zero, 8, &r), METILE_OK);
  EXPECT_EQ(metile_builder_scan(cb, METILE_OP_ADD, r, 0, 0, &out), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "add is not a scan")) << metile_last_error();
  EXPECT_EQ(metile_builder_scan(cb, METILE_OP_CUMSUM, r, 0, 2, &out), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "reverse must be 0 or 1")) << metile_last_error();
  EXPECT_EQ(metile_builder_trans(cb, r, &out), METILE_ERROR_INVALID_PROGRAM);
  EXPECT_TRUE(has(metile_last_error(), "trans: needs a 2-D tile")) << metile_last_error();
  EXPECT_EQ(metile_builder_device_print(cb, nullptr, &r, 1), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_builder_device_print(cb, "ok", &r, 1), METILE_OK);
  EXPECT_EQ(metile_builder_scan(cb, METILE_OP_CUMSUM, r, 0, 1, &out), METILE_OK);
  metile_builder_release(cb);
}

}  // namespace
}  // namespace metile

// Verifier errors on ill-typed programs the builder would refuse: built by hand as Program
// structs or parsed from text. Every message names the op and its source location.
#include <gtest/gtest.h>

#include <string>

#include "frontend/builder.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Parses a kernel body (one op per line, each at `loc("bad.py":LINE)`) and expects a verifier
// error containing `part`.
void expect_invalid(const std::string& params, const std::string& body, const std::string& part,
                    const std::string& header_extra = "") {
  const std::string text = "kernel @k(" + params + ")" + header_extra + " {\n" + body + "}\n";
  try {
    parse(text);
    ADD_FAILURE() << "verified:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(has(e.what(), part)) << e.what() << "\nwanted: " << part;
  }
}

const std::string kLoc = " loc(\"bad.py\":5)\n";

TEST(Verifier, ShapeMismatch) {
  expect_invalid("%X: ptr<f32>",
                 "  %0 = const {value = 0} : i32\n  %1 = arange %0 {size = 8} : tile<8xi32>\n"
                 "  %2 = arange %0 {size = 16} : tile<16xi32>\n  %3 = add %1, %2 : tile<8xi32>" +
                     kLoc,
                 "[verify] bad.py:5: add: operand shapes differ: 8 vs 16");
}

TEST(Verifier, BadBroadcast) {
  expect_invalid("%X: ptr<f32>",
                 "  %0 = const {value = 0} : i32\n  %1 = arange %0 {size = 3} : tile<3xi32>\n"
                 "  %2 = broadcast %1 : tile<4x4xi32>" +
                     kLoc,
                 "bad.py:5: broadcast: cannot broadcast tile<3xi32> to tile<4x4xi32>");
  expect_invalid("%X: ptr<f32>",
                 "  %0 = const {value = 0} : i32\n  %1 = broadcast %0 : tile<4xf32>" + kLoc,
                 "bad.py:5: broadcast: result tile<4xf32> must keep the element type of i32");
}

TEST(Verifier, LoadFromNonPointer) {
  expect_invalid("%N: i32", "  %0 = load %N : i32" + kLoc,
                 "bad.py:5: load: needs a pointer operand, got i32 (use ptr + offsets)");
}

TEST(Verifier, MaskShapeAndDtype) {
  const std::string pre =
      "  %0 = const {value = 0} : i32\n  %1 = arange %0 {size = 8} : tile<8xi32>\n"
      "  %2 = ptr_offset %X, %1 : tile<8xptr<f32>>\n";
  expect_invalid("%X: ptr<f32>", pre + "  %3 = load %2, %1 : tile<8xf32>" + kLoc,
                 "bad.py:5: load: mask must be bool, got tile<8xi32>");
  expect_invalid("%X: ptr<f32>",
                 pre +
                     "  %3 = arange %0 {size = 4} : tile<4xi32>\n  %4 = lt %3, %0 : tile<4xbool>\n"
                     "  store %2, %X, %4" +
                     kLoc,
                 "bad.py:5: store: stored value");
  expect_invalid("%X: ptr<f32>",
                 pre +
                     "  %3 = arange %0 {size = 4} : tile<4xi32>\n  %4 = lt %3, %0 : tile<4xbool>\n"
                     "  %5 = load %2, %4 : tile<8xf32>" +
                     kLoc,
                 "bad.py:5: load: mask shape 4 differs from pointer shape 8");
}

TEST(Verifier, DotShapesAndDtypes) {
  const std::string pre =
      "  %0 = const {value = 0} : i32\n  %1 = tile_load %A, %0, %0, %0 : tile<4x8xf32>\n"
      "  %2 = tile_load %A, %0, %0, %0 : tile<4x8xf32>\n  %3 = tile_load %A, %0, %0, %0 : "
      "tile<4x4xf32>\n"
      "  %4 = tile_load %H, %0, %0, %0 : tile<8x4xf16>\n  %5 = tile_load %A, %0, %0, %0 : "
      "tile<8x4xf32>\n"
      "  %6 = tile_load %I, %0, %0, %0 : tile<4x4xi32>\n";
  const std::string params = "%A: ptr<f32>, %H: ptr<f16>, %I: ptr<i32>";
  expect_invalid(params, pre + "  %7 = dot %1, %2, %3 : tile<4x4xf32>" + kLoc,
                 "bad.py:5: dot: shapes do not chain: a 4x8, b 4x8, acc 4x4 (need MxK, KxN, MxN)");
  expect_invalid(params, pre + "  %7 = dot %1, %4, %3 : tile<4x4xf32>" + kLoc,
                 "bad.py:5: dot: a and b dtypes differ: f32 vs f16");
  expect_invalid(params, pre + "  %7 = dot %1, %5, %6 : tile<4x4xi32>" + kLoc,
                 "bad.py:5: dot: accumulator i32 does not fit f32 inputs");
}

TEST(Verifier, CarriedValueTypeChange) {
  // Through the builder: for_end refuses it at the user's line.
  Builder b("k");
  b.set_loc("loop.py", 3);
  ValueId zero = b.const_int(DType::i32, 0);
  ValueId init = b.const_float(DType::f32, 0.0);
  auto [iv, carried] =
      b.for_begin(zero, b.const_int(DType::i32, 4), b.const_int(DType::i32, 1), {init});
  ValueId grown = b.binary(OpKind::ADD, carried[0], b.cast(b.arange(kNoValue, 8), DType::f32));
  b.set_loc("loop.py", 5);
  try {
    b.for_end({grown});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(has(e.what(),
                    "loop.py:5: for: carried value 0 changes type from f32 to tile<8xf32>; "
                    "broadcast the init value"))
        << e.what();
  }
  // In text the verifier checks the yield.
  expect_invalid(
      "%N: i32",
      "  %0 = const {value = 0.0} : f32\n  %1 = for %i = %N to %N step %N iter_args(%c = %0) -> "
      "(f32) {\n"
      "    %2 = cast %i : f32\n    %3 = arange %N {size = 2} : tile<2xi32>\n    yield %3" +
          kLoc + "  }\n",
      "bad.py:5: yield: carried value 0 changes type from f32 to tile<2xi32>");
}

TEST(Verifier, SimtOpWithoutThreadCount) {
  expect_invalid("%X: ptr<i32>", "  %0 = thread_id : tile<32xi32>" + kLoc,
                 "bad.py:5: thread_id: needs a thread count");
  // With the count it verifies.
  EXPECT_NO_THROW(parse("kernel @k() num_threads(32) {\n  %0 = thread_id : tile<32xi32>\n}\n"));
  // And tiles must have T elements.
  expect_invalid("%X: ptr<i32>", "  %0 = thread_id : tile<64xi32>" + kLoc,
                 "bad.py:5: thread_id: result 0 has type tile<64xi32>, expected tile<32xi32>",
                 " num_threads(32)");
}

TEST(Verifier, UnknownAxis) {
  expect_invalid("%X: ptr<f32>", "  %0 = program_id {axis = 3} : i32" + kLoc,
                 "bad.py:5: program_id: axis must be 0, 1 or 2, got 3");
  expect_invalid("%X: ptr<f32>",
                 "  %0 = const {value = 0} : i32\n  %1 = tile_load %X, %0, %0, %0 : tile<2x2xf32>\n"
                 "  %2 = reduce_sum %1 {axis = 2} : tile<2xf32>" +
                     kLoc,
                 "bad.py:5: reduce_sum: axis 2 is invalid for tile<2x2xf32>");
  expect_invalid("%X: ptr<f32>",
                 "  %0 = const {value = 0} : i32\n  %1 = arange %0 {size = 4} : tile<4xi32>\n"
                 "  %2 = reduce_max %1 {axis = 0} : tile<4xi32>" +
                     kLoc,
                 "bad.py:5: reduce_max: axis 0 is invalid for tile<4xi32>");
}

// A hand-built program: Out = param; one op whose operand or placement is wrong.
Program hand_built(OpKind kind, bool undefined_operand) {
  Program p;
  p.name = "k";
  ValueId n = p.new_value(Type::scalar(DType::i32));
  p.params.push_back({"N", n});
  Op op;
  op.kind = kind;
  op.loc = Loc{p.intern_file("bad.py"), 9};
  if (undefined_operand) {
    ValueId ghost = p.new_value(Type::scalar(DType::i32));  // typed but never defined
    op.operands = {n, ghost};
    op.results = {p.new_value(Type::scalar(DType::i32))};
  } else {
    op.operands = {n};
  }
  p.body.ops.push_back(op);
  return p;
}

TEST(Verifier, UndefinedValue) {
  try {
    verify(hand_built(OpKind::ADD, true));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(
        has(e.what(), "[verify] bad.py:9: add: uses a value that is not defined before it here"))
        << e.what();
  }
  // A value defined inside a loop is out of scope after it (here the parser's scoping finds it).
  expect_invalid("%N: i32",
                 "  for %i = %N to %N step %N {\n    %0 = add %i, %i : i32\n    yield\n  }\n"
                 "  %1 = add %0, %N : i32\n",
                 "[parse] line 6: value %0 is not defined here");
}

TEST(Verifier, YieldOutsideFor) {
  try {
    verify(hand_built(OpKind::YIELD, false));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(has(e.what(), "[verify] bad.py:9: yield: must be the last op of a for, if or while block"))
        << e.what();
  }
  expect_invalid("%N: i32", "  yield %N" + kLoc,
                 "bad.py:5: yield: must be the last op of a for, if or while block");
}

}  // namespace
}  // namespace metile

namespace metile {
namespace METILE_UNITY_ID {

TEST(Verifier, TilesHaveAtMostTwoToThe24Elements) {
  expect_invalid(
      "%X: ptr<f32>",
      "  %0 = const {value = 0} : i32\n  %1 = arange %0 {size = 4} : tile<4xi32>\n"
      "  %2 = reshape %1 : tile<4294967296x4294967296xi32>" +
          kLoc,
      "bad.py:5: reshape: result tile<4294967296x4294967296xi32> has more than 2^24 elements");
  expect_invalid(
      "%X: ptr<f32>",
      "  %0 = const {value = 0.0} : f32\n  %1 = broadcast %0 : tile<8192x4096xf32>" + kLoc,
      "bad.py:5: broadcast: result tile<8192x4096xf32> has more than 2^24 elements");
  Builder b("k");
  b.set_loc("big.py", 2);
  try {
    b.broadcast(b.const_float(DType::f32, 1.0), Shape::of(int64_t{1} << 40, int64_t{1} << 40));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "big.py:2: broadcast: result")) << e.what();
  }
}

TEST(Verifier, RegionNestingIsBounded) {
  auto nest = [](int depth) {
    std::string s = "kernel @k(%N: i32) {\n";
    for (int i = 0; i < depth; ++i) s += "for %i" + std::to_string(i) + " = %N to %N step %N {\n";
    for (int i = 0; i < depth; ++i) s += "yield\n}\n";
    return s + "}\n";
  };
  EXPECT_NO_THROW(parse(nest(kMaxRegionDepth)));
  try {
    parse(nest(100000));  // must fail cleanly, not overflow the stack
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(has(e.what(), "line 66: regions nest deeper than 64 levels")) << e.what();
  }
  Builder b("k");
  ValueId zero = b.const_int(DType::i32, 0), one = b.const_int(DType::i32, 1);
  for (int i = 0; i < kMaxRegionDepth; ++i) b.for_begin(zero, zero, one, {});
  b.set_loc("deep.py", 4);
  try {
    b.for_begin(zero, zero, one, {});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "deep.py:4: for: regions nest deeper than 64 levels")) << e.what();
  }
}

}  // namespace
}  // namespace metile

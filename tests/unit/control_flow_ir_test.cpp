// Run-time if and while in the Tile IR: the text form round trips, the verifier's rules of their
// own (a bool scalar condition, yields matching results and carried values, block arguments) and
// the builder's errors, each naming the op and the user's line.
#include <gtest/gtest.h>

#include <string>

#include "frontend/builder.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const std::string kIfWhile =
    "kernel @k(%X: ptr<i32>, %n: i32) {\n"
    "  %0 = const {value = 0} : i32\n"
    "  %1 = gt %n, %0 : bool\n"
    "  %2, %3 = if %1 : i32, f32 {\n"
    "    %4 = const {value = 1.5} : f32\n"
    "    yield %n, %4\n"
    "  } else {\n"
    "    %5 = const {value = 2.5} : f32\n"
    "    yield %0, %5\n"
    "  }\n"
    "  %6 = while (%7 = %0) : i32 {\n"
    "    %8 = lt %7, %2 : bool\n"
    "    yield %8, %7\n"
    "  } do (%9) {\n"
    "    %10 = const {value = 1} : i32\n"
    "    %11 = add %9, %10 : i32\n"
    "    yield %11\n"
    "  }\n"
    "  if %1 {\n"
    "    store %X, %6\n"
    "    yield\n"
    "  } else {\n"
    "    yield\n"
    "  }\n"
    "}\n";

TEST(ControlFlowIr, TextRoundTrips) {
  Program p = parse(kIfWhile);
  EXPECT_EQ(print(p, false), kIfWhile);
  const std::string with_locs = print(p, true);
  EXPECT_EQ(print(parse(with_locs), true), with_locs);
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

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(ControlFlowIr, VerifierRules) {
  // The condition is a bool scalar.
  expect_invalid(replaced(kIfWhile, "if %1 : i32, f32", "if %n : i32, f32"),
                 "if: condition must be a bool scalar (uniform per program), got i32");
  // Branches yield the results' types.
  expect_invalid(replaced(kIfWhile, "yield %0, %5", "yield %0, %0"),
                 "if: else block value 1 has type i32, expected f32");
  expect_invalid(replaced(kIfWhile, "yield %0, %5", "yield %0"),
                 "if: else block yields 1 values, expected 2");
  // A branch ends with yield.
  expect_invalid(replaced(kIfWhile, "    yield %n, %4\n", ""), "if: then block must end with yield");
  // The while condition block yields a bool scalar first, then the carried values.
  expect_invalid(replaced(kIfWhile, "yield %8, %7", "yield %7, %7"),
                 "while: condition must be a bool scalar");
  expect_invalid(replaced(kIfWhile, "yield %8, %7", "yield %8"),
                 "while: condition block yields 1 values, expected 2");
  expect_invalid(replaced(kIfWhile, "yield %11\n", "yield %3\n"),
                 "while: body value 0 has type f32, expected i32");
  expect_invalid(replaced(kIfWhile, "} do (%9) {", "} do () {"),
                 "while: the body takes 0 arguments, the loop carries 1");
  // Values defined in a block do not escape it.
  expect_invalid(replaced(kIfWhile, "store %X, %6", "store %X, %11"), "%11 is not defined here");
  // yield ends a block of for, if or while only.
  expect_invalid("kernel @k(%n: i32) {\n  yield %n loc(\"bad.py\":3)\n}\n",
                 "bad.py:3: yield: must be the last op of a for, if or while block");
}

TEST(ControlFlowIr, BuilderMakesWhatTheTextSays) {
  Builder b("k");
  b.set_loc("k.py", 7);
  ValueId x = b.param("X", Type::ptr(DType::i32));
  ValueId n = b.param("n", Type::scalar(DType::i32));
  ValueId zero = b.const_int(DType::i32, 0);
  b.if_begin(b.binary(OpKind::GT, n, zero));
  ValueId one = b.const_int(DType::i32, 1);
  b.if_else({one});
  auto r = b.if_end({zero});
  auto carried = b.while_begin({r[0]});
  auto args = b.while_do(b.binary(OpKind::LT, carried[0], n), carried);
  auto out = b.while_end({b.binary(OpKind::ADD, args[0], b.const_int(DType::i32, 2))});
  b.store(x, out[0], kNoValue);
  Program p = b.finish();
  const std::string text = print(p, false);
  EXPECT_TRUE(has(text, "= if %")) << text;
  EXPECT_TRUE(has(text, "= while (%")) << text;
  EXPECT_EQ(print(parse(print(p)), false), text);
}

template <typename F>
void expect_builder_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "built";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), part)) << e.what() << "\nwanted: " << part;
  }
}

TEST(ControlFlowIr, BuilderErrorsNameTheLine) {
  expect_builder_error([] {
    Builder b("k");
    b.set_loc("k.py", 9);
    ValueId x = b.param("X", Type::ptr(DType::f32));
    ValueId t = b.load(b.ptr_offset(x, b.arange(b.const_int(DType::i32, 0), 8)), kNoValue, kNoValue);
    b.if_begin(b.binary(OpKind::GT, t, b.const_float(DType::f32, 0.0)));
  }, "k.py:9: if: the condition must be a bool scalar (uniform per program), got tile<8xbool>");
  expect_builder_error([] {
    Builder b("k");
    b.set_loc("k.py", 4);
    ValueId n = b.param("n", Type::scalar(DType::i32));
    b.if_begin(b.binary(OpKind::GT, n, n));
    b.if_else({n});
    b.if_end({b.const_float(DType::f32, 1.0)});
  }, "k.py:4: if: the else branch value 0 has type f32, expected i32");
  expect_builder_error([] {
    Builder b("k");
    ValueId x = b.param("X", Type::ptr(DType::f32));
    b.set_loc("k.py", 5);
    b.while_begin({x});
  }, "k.py:5: while: cannot carry a pointer");
  expect_builder_error([] {
    Builder b("k");
    b.set_loc("k.py", 6);
    b.while_end({});
  }, "while_end without an open while");
  expect_builder_error([] {
    Builder b("k");
    ValueId n = b.param("n", Type::scalar(DType::i32));
    b.set_loc("k.py", 8);
    b.if_begin(b.binary(OpKind::GT, n, n));
    b.finish();
  }, "k.py:8: if is still open at finish()");
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

// The Tile IR text form: every kernel of the suite prints, parses back to the same text and
// re-verifies; malformed text is METILE_ERROR_INVALID_PROGRAM with the line of the problem.
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <string>

#include "kernels/kernels.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(RoundTrip, EverySuiteKernelPrintsParsesAndReverifies) {
  for (const Program& p : kernels::all_programs()) {
    for (bool locs : {true, false}) {
      const std::string text = print(p, locs);
      Program q = parse(text);  // parse() verifies
      EXPECT_EQ(print(q, locs), text) << p.name;
      EXPECT_NO_THROW(verify(q)) << p.name;
      EXPECT_EQ(q.name, p.name);
      EXPECT_EQ(q.params.size(), p.params.size());
      EXPECT_EQ(q.num_threads, p.num_threads);
      EXPECT_EQ(q.constexprs, p.constexprs);
    }
  }
}

TEST(RoundTrip, EveryCaseProgramRoundTripsThroughTheCApi) {
  for (const std::string& name : kernels::case_names()) {
    const kernels::Case c = kernels::make_case(name);
    const std::string text = print(c.program);
    metile_program* h = nullptr;
    ASSERT_EQ(metile_program_parse(&h, text.c_str()), METILE_OK)
        << name << ": " << metile_last_error();
    char* again = nullptr;
    ASSERT_EQ(metile_program_print(h, &again), METILE_OK);
    EXPECT_EQ(std::string(again), text) << name;
    metile_free(again);
    metile_program_release(h);
  }
}

// Parses `text`; expects INVALID_PROGRAM whose message has "line N" and `part`.
void expect_parse_error(const std::string& text, int line, const std::string& part) {
  try {
    parse(text);
    ADD_FAILURE() << "parsed:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    const std::string m = e.what();
    EXPECT_TRUE(has(m, "line " + std::to_string(line) + ":")) << m;
    EXPECT_TRUE(has(m, part)) << m;
  }
  metile_program* h = nullptr;
  EXPECT_EQ(metile_program_parse(&h, text.c_str()), METILE_ERROR_INVALID_PROGRAM);
  EXPECT_TRUE(has(metile_last_error(), "line " + std::to_string(line) + ":"))
      << metile_last_error();
}

TEST(RoundTrip, MalformedTextNamesTheLine) {
  const std::string head = "kernel @k(%X: ptr<f32>, %N: i32) {\n";
  expect_parse_error("kern @k() {\n}\n", 1, "expected 'kernel'");
  expect_parse_error(head + "  %0 = frobnicate %N : i32\n}\n", 2, "unknown op 'frobnicate'");
  expect_parse_error(head + "  %0 = add %N, %M : i32\n}\n", 2, "value %M is not defined here");
  expect_parse_error(head + "  %0 = const {value = 1} : i33\n}\n", 2, "bad type 'i33'");
  expect_parse_error(head + "  %0 = const {value = 1} : i32\n  %0 = const {value = 2} : i32\n}\n",
                     3, "value %0 is defined twice");
  expect_parse_error(head + "  %0 = const {value = 1x} : i32\n}\n", 2, "bad number '1x'");
  expect_parse_error(head + "  %0 = const {value = 1} : i32\n", 3, "missing '}'");
  expect_parse_error(head + "  %0, %1 = const {value = 1} : i32\n}\n", 2, "2 results but 1 types");
  expect_parse_error(head + "  %0 = const {value = 1} : i32 loc(\"a.py\n\":3)\n}\n", 2,
                     "newline in a string");
  expect_parse_error(head + "}\ntrailing\n", 3, "unexpected text after the kernel");
  expect_parse_error(head +
                         "  %0 = arange %N {size = 4} : tile<4xi32>\n  for %i = %N to %N step %N "
                         "iter_args(%c = %0) -> (tile<4xi32>, i32) {\n  }\n}\n",
                     3, "carried values");
  // Verifier errors after a successful parse carry the op's location instead.
  try {
    parse(head + "  %0 = add %X, %N : i32 loc(\"bad.py\":7)\n}\n");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
    EXPECT_TRUE(has(e.what(), "[verify] bad.py:7: add: lhs must not be a pointer")) << e.what();
  }
}

}  // namespace
}  // namespace metile

// Run-time if and while through the C ABI: the builder calls, the text they make, and their
// argument and nesting errors.
#include <metile/metile.h>

#include <gtest/gtest.h>

#include <string>

#include "capi_util.h"

namespace METILE_UNITY_ID {

using namespace metile_capi_test;

TEST(ControlFlow, IfAndWhileBuildPrintAndParse) {
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "ctrl"), METILE_OK);
  metile_type i32p = pointer(METILE_DTYPE_I32), i32 = scalar(METILE_DTYPE_I32);
  metile_value out, n, zero, three, cond, carried, args, next, i, lt10, ten, hundred, big, r;
  ASSERT_EQ(metile_builder_param(b, "out", &i32p, &out), METILE_OK);
  ASSERT_EQ(metile_builder_param(b, "n", &i32, &n), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 0, &zero), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 3, &three), METILE_OK);
  ASSERT_EQ(metile_builder_while_begin(b, &zero, 1, &carried), METILE_OK) << last_error();
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_LT, carried, n, &cond), METILE_OK);
  ASSERT_EQ(metile_builder_while_do(b, cond, &carried, 1, &args), METILE_OK) << last_error();
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_ADD, args, three, &next), METILE_OK);
  ASSERT_EQ(metile_builder_while_end(b, &next, 1, &i), METILE_OK) << last_error();
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 10, &ten), METILE_OK);
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_LT, n, ten, &lt10), METILE_OK);
  ASSERT_EQ(metile_builder_if_begin(b, lt10), METILE_OK) << last_error();
  ASSERT_EQ(metile_builder_if_else(b, &i, 1), METILE_OK) << last_error();
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 100, &hundred), METILE_OK);
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_ADD, i, hundred, &big), METILE_OK);
  ASSERT_EQ(metile_builder_if_end(b, &big, 1, &r), METILE_OK) << last_error();
  // An if without an else and without results.
  ASSERT_EQ(metile_builder_if_begin(b, lt10), METILE_OK);
  ASSERT_EQ(metile_builder_store(b, out, r, 0), METILE_OK) << last_error();
  ASSERT_EQ(metile_builder_if_end(b, nullptr, 0, nullptr), METILE_OK) << last_error();
  // A value of a closed branch is out of scope.
  metile_value bad = 0;
  EXPECT_TRUE(fails_with(metile_builder_binary(b, METILE_OP_ADD, big, big, &bad),
                         METILE_ERROR_INVALID_PROGRAM, "not in scope"));
  metile_program* p = nullptr;
  ASSERT_EQ(metile_builder_finish(b, &p), METILE_OK) << last_error();
  char* text = nullptr;
  ASSERT_EQ(metile_program_print(p, &text), METILE_OK);
  const std::string t = text;
  EXPECT_NE(t.find("= while (%"), std::string::npos) << t;
  EXPECT_NE(t.find("} do (%"), std::string::npos) << t;
  EXPECT_NE(t.find("= if %"), std::string::npos) << t;
  EXPECT_NE(t.find("} else {"), std::string::npos) << t;
  metile_program* q = nullptr;
  ASSERT_EQ(metile_program_parse(&q, text), METILE_OK) << last_error();
  char* again = nullptr;
  ASSERT_EQ(metile_program_print(q, &again), METILE_OK);
  EXPECT_EQ(std::string(again), t);
  metile_free(again);
  metile_free(text);
  metile_program_release(q);
  metile_program_release(p);
  EXPECT_EQ(metile_builder_release(b), METILE_OK);
}

TEST(ControlFlow, ArgumentAndNestingErrors) {
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "bad"), METILE_OK);
  ASSERT_EQ(metile_builder_set_loc(b, "ctrl.py", 12), METILE_OK);
  metile_type i32 = scalar(METILE_DTYPE_I32);
  metile_value n, lanes, c, zero, carried;
  ASSERT_EQ(metile_builder_param(b, "n", &i32, &n), METILE_OK);
  EXPECT_TRUE(fails_with(metile_builder_if_begin(b, n), METILE_ERROR_INVALID_PROGRAM,
                         "ctrl.py:12: if: the condition must be a bool scalar"));
  ASSERT_EQ(metile_builder_arange(b, 0, 8, &lanes), METILE_OK);
  ASSERT_EQ(metile_builder_binary(b, METILE_OP_LT, lanes, n, &c), METILE_OK);
  EXPECT_TRUE(fails_with(metile_builder_if_begin(b, c), METILE_ERROR_INVALID_PROGRAM,
                         "got tile<8xbool>"));
  EXPECT_TRUE(fails_with(metile_builder_if_else(b, nullptr, 0), METILE_ERROR_INVALID_PROGRAM,
                         "if_else without an open if"));
  EXPECT_TRUE(fails_with(metile_builder_while_do(b, c, nullptr, 0, nullptr),
                         METILE_ERROR_INVALID_PROGRAM, "while_do without an open while"));
  EXPECT_TRUE(fails_with(metile_builder_while_begin(b, nullptr, 1, &carried),
                         METILE_ERROR_INVALID_ARGUMENT, "inits"));
  ASSERT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 0, &zero), METILE_OK);
  ASSERT_EQ(metile_builder_while_begin(b, &zero, 1, &carried), METILE_OK);
  EXPECT_TRUE(fails_with(metile_builder_while_end(b, &carried, 1, &carried),
                         METILE_ERROR_INVALID_PROGRAM, "while_end without an open while"));
  EXPECT_TRUE(fails_with(metile_builder_while_do(b, c, &carried, 1, &carried),
                         METILE_ERROR_INVALID_PROGRAM, "reduce it to a scalar first"));
  EXPECT_EQ(metile_builder_release(b), METILE_OK);
}

}  // namespace METILE_UNITY_ID

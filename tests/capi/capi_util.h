/** \file capi_util.h
 * Helpers shared by the C API tests: status/message assertions and a small verified program.
 */
#pragma once

#include <metile/metile.h>

#include <gtest/gtest.h>

#include <string>

namespace metile_capi_test {

inline std::string last_error() { return metile_last_error(); }

// Replaces this thread's message with one that names no call under test, so a check cannot pass
// on a stale message.
inline void scrub_error() {
  ASSERT_EQ(metile_program_parse(nullptr, nullptr), METILE_ERROR_INVALID_ARGUMENT);
  ASSERT_NE(last_error().find("metile_program_parse"), std::string::npos);
}

inline ::testing::AssertionResult fails_with(metile_status got, metile_status want,
                                             const std::string& in_message) {
  if (got != want)
    return ::testing::AssertionFailure() << "got " << metile_status_name(got) << ", want "
                                         << metile_status_name(want) << " (message: \""
                                         << metile_last_error() << "\")";
  if (last_error().find(in_message) == std::string::npos)
    return ::testing::AssertionFailure() << "the message does not mention \"" << in_message
                                         << "\": \"" << metile_last_error() << "\"";
  return ::testing::AssertionSuccess();
}

inline metile_type scalar(metile_dtype d) {
  metile_type t{};
  t.dtype = d;
  return t;
}

inline metile_type pointer(metile_dtype d) {
  metile_type t = scalar(d);
  t.is_pointer = 1;
  return t;
}

// out[i] = alpha * x[i] for i < n, in blocks of 64.
inline metile_program* build_scale() {
  metile_builder* b = nullptr;
  metile_program* p = nullptr;
  metile_type f32p = pointer(METILE_DTYPE_F32), f32 = scalar(METILE_DTYPE_F32),
              i32 = scalar(METILE_DTYPE_I32);
  metile_value x, y, alpha, n, pid, c64, base, lanes, offs, mask, ptr, xs, prod;
  EXPECT_EQ(metile_builder_create(&b, "scale"), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "X", &f32p, &x), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "Y", &f32p, &y), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "alpha", &f32, &alpha), METILE_OK);
  EXPECT_EQ(metile_builder_param(b, "n", &i32, &n), METILE_OK);
  EXPECT_EQ(metile_builder_grid(b, METILE_OP_PROGRAM_ID, 0, &pid), METILE_OK);
  EXPECT_EQ(metile_builder_const_int(b, METILE_DTYPE_I32, 64, &c64), METILE_OK);
  EXPECT_EQ(metile_builder_binary(b, METILE_OP_MUL, pid, c64, &base), METILE_OK);
  EXPECT_EQ(metile_builder_arange(b, 0, 64, &lanes), METILE_OK);
  EXPECT_EQ(metile_builder_binary(b, METILE_OP_ADD, base, lanes, &offs), METILE_OK);
  EXPECT_EQ(metile_builder_binary(b, METILE_OP_LT, offs, n, &mask), METILE_OK);
  EXPECT_EQ(metile_builder_ptr_offset(b, x, offs, &ptr), METILE_OK);
  EXPECT_EQ(metile_builder_load(b, ptr, mask, 0, &xs), METILE_OK);
  EXPECT_EQ(metile_builder_binary(b, METILE_OP_MUL, alpha, xs, &prod), METILE_OK);
  EXPECT_EQ(metile_builder_ptr_offset(b, y, offs, &ptr), METILE_OK);
  EXPECT_EQ(metile_builder_store(b, ptr, prod, mask), METILE_OK);
  EXPECT_EQ(metile_builder_finish(b, &p), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_builder_release(b), METILE_OK);
  return p;
}

}  // namespace metile_capi_test

// c_identifier: the one place a user's name becomes an identifier of generated C++/MSL/CUDA.
#include <gtest/gtest.h>

#include "codegen/c_like.h"

namespace metile {
namespace METILE_UNITY_ID {

TEST(CIdentifier, OrdinaryNamesStayAsWritten) {
  for (const char* n : {"X", "Out", "N", "stride_am", "acc", "offs", "BLOCK", "a1", "float", "x_vec"})
    EXPECT_EQ(c_identifier(n), n == std::string("float") ? "float_" : n) << n;
}

TEST(CIdentifier, KeywordsTypesAndMacrosGetATrailingUnderscore) {
  for (const char* n : {"decltype", "co_await", "char8_t", "static_assert", "and_eq", "kernel",
                        "threadgroup", "int64_t", "uint_fast8_t", "size_t", "float4", "half2",
                        "packed_float3", "longlong2", "float4x4", "simdgroup_half8x8", "atomic_uint",
                        "memory_order_relaxed", "NULL", "EOF", "INFINITY", "INT64_C", "FLT_MAX",
                        "M_PI_F", "stdout", "offsetof", "errno"})
    EXPECT_EQ(c_identifier(n), std::string(n) + "_") << n;
}

TEST(CIdentifier, ThePreludesAndTheImplementationsPrefixesGetALeadingU) {
  for (const char* n : {"mt_pid", "mt_program", "metile_entry", "MT_INLINE", "METILE_PRINT_FN",
                        "__restrict", "_Bool"})
    EXPECT_EQ(c_identifier(n), "u" + std::string(n)) << n;
}

TEST(CIdentifier, OtherCharactersAndLeadingDigits) {
  EXPECT_EQ(c_identifier("a-b"), "a_b");
  EXPECT_EQ(c_identifier("3d"), "_3d");
  EXPECT_EQ(c_identifier(""), "_");
  EXPECT_EQ(c_identifier("atomic_sum"), "atomic_sum");  // not one of the atomic types
}

}  // namespace METILE_UNITY_ID
}  // namespace metile

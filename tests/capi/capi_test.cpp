// The C ABI through the shared library, as a user links it: status codes and enum names,
// per-thread error messages, devices by name, and builder/program errors with source locations.
// Handle validation is in capi_handles_test.cpp.
#include <metile/metile.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "capi_util.h"

namespace METILE_UNITY_ID {

using namespace metile_capi_test;

// ---------------------------------------------------------------------------------------------
// Status codes and enum names

TEST(Status, PinnedValuesAndNames) {
  const std::pair<metile_status, const char*> pinned[] = {
      {METILE_OK, "METILE_OK"},
      {METILE_ERROR_INVALID_ARGUMENT, "METILE_ERROR_INVALID_ARGUMENT"},
      {METILE_ERROR_INVALID_PROGRAM, "METILE_ERROR_INVALID_PROGRAM"},
      {METILE_ERROR_COMPILE, "METILE_ERROR_COMPILE"},
      {METILE_ERROR_UNSUPPORTED, "METILE_ERROR_UNSUPPORTED"},
      {METILE_ERROR_DEVICE_UNAVAILABLE, "METILE_ERROR_DEVICE_UNAVAILABLE"},
      {METILE_ERROR_DEVICE, "METILE_ERROR_DEVICE"},
      {METILE_ERROR_OUT_OF_MEMORY, "METILE_ERROR_OUT_OF_MEMORY"},
      {METILE_ERROR_IO, "METILE_ERROR_IO"},
      {METILE_ERROR_INTERNAL, "METILE_ERROR_INTERNAL"},
  };
  // The values are part of the ABI: they are listed in order, 0 through 9.
  for (size_t i = 0; i < std::size(pinned); ++i) {
    EXPECT_EQ(static_cast<int>(pinned[i].first), static_cast<int>(i));
    EXPECT_STREQ(metile_status_name(pinned[i].first), pinned[i].second);
  }
}

TEST(Status, UnknownValuesHaveAName) {
  for (int v : {10, 11, 100, 12345, 0x7fffffff})
    EXPECT_STREQ(metile_status_name(static_cast<metile_status>(v)), "METILE_STATUS_UNKNOWN") << v;
}

TEST(Dtype, NamesAndSizes) {
  struct Row {
    metile_dtype d;
    int pin;
    const char* name;
    size_t size;
  };
  const Row rows[] = {
      {METILE_DTYPE_F32, 1, "f32", 4}, {METILE_DTYPE_F16, 2, "f16", 2},
      {METILE_DTYPE_BF16, 3, "bf16", 2}, {METILE_DTYPE_I32, 4, "i32", 4},
      {METILE_DTYPE_U32, 5, "u32", 4}, {METILE_DTYPE_I64, 6, "i64", 8},
      {METILE_DTYPE_BOOL, 7, "bool", 1}, {METILE_DTYPE_I8, 8, "i8", 1},
      {METILE_DTYPE_U8, 9, "u8", 1},
      {METILE_DTYPE_F8E4M3, 10, "f8e4m3", 1},
      {METILE_DTYPE_F8E5M2, 11, "f8e5m2", 1},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(static_cast<int>(r.d), r.pin) << r.name;
    EXPECT_STREQ(metile_dtype_name(r.d), r.name);
    EXPECT_EQ(metile_dtype_size(r.d), r.size) << r.name;
  }
}

TEST(Dtype, InvalidAndUnknownValues) {
  // 257 and 513 alias valid dtypes when truncated to a byte; they must still be unknown.
  for (int v : {0, 12, 13, 255, 256, 257, 258, 513, 1000, 0x7fffffff}) {
    EXPECT_STREQ(metile_dtype_name(static_cast<metile_dtype>(v)), "invalid") << v;
    EXPECT_EQ(metile_dtype_size(static_cast<metile_dtype>(v)), 0u) << v;
  }
}

TEST(Op, EveryPinnedValueHasItsName) {
  const std::pair<metile_op, const char*> ops[] = {
      {METILE_OP_CONST, "const"},
      {METILE_OP_PROGRAM_ID, "program_id"},
      {METILE_OP_NUM_PROGRAMS, "num_programs"},
      {METILE_OP_ARANGE, "arange"},
      {METILE_OP_CAST, "cast"},
      {METILE_OP_BITCAST, "bitcast"},
      {METILE_OP_BROADCAST, "broadcast"},
      {METILE_OP_RESHAPE, "reshape"},
      {METILE_OP_ADD, "add"},
      {METILE_OP_SUB, "sub"},
      {METILE_OP_MUL, "mul"},
      {METILE_OP_DIV, "div"},
      {METILE_OP_FLOORDIV, "floordiv"},
      {METILE_OP_MOD, "mod"},
      {METILE_OP_MAXIMUM, "maximum"},
      {METILE_OP_MINIMUM, "minimum"},
      {METILE_OP_BITAND, "bitand"},
      {METILE_OP_BITOR, "bitor"},
      {METILE_OP_BITXOR, "bitxor"},
      {METILE_OP_SHL, "shl"},
      {METILE_OP_SHR, "shr"},
      {METILE_OP_POW, "pow"},
      {METILE_OP_LT, "lt"},
      {METILE_OP_LE, "le"},
      {METILE_OP_GT, "gt"},
      {METILE_OP_GE, "ge"},
      {METILE_OP_EQ, "eq"},
      {METILE_OP_NE, "ne"},
      {METILE_OP_NEG, "neg"},
      {METILE_OP_NOT, "not"},
      {METILE_OP_EXP, "exp"},
      {METILE_OP_LOG, "log"},
      {METILE_OP_SQRT, "sqrt"},
      {METILE_OP_RSQRT, "rsqrt"},
      {METILE_OP_ABS, "abs"},
      {METILE_OP_TANH, "tanh"},
      {METILE_OP_SIN, "sin"},
      {METILE_OP_COS, "cos"},
      {METILE_OP_EXP2, "exp2"},
      {METILE_OP_LOG2, "log2"},
      {METILE_OP_FLOOR, "floor"},
      {METILE_OP_CEIL, "ceil"},
      {METILE_OP_ERF, "erf"},
      {METILE_OP_SIGMOID, "sigmoid"},
      {METILE_OP_SELECT, "select"},
      {METILE_OP_PTR_OFFSET, "ptr_offset"},
      {METILE_OP_LOAD, "load"},
      {METILE_OP_STORE, "store"},
      {METILE_OP_TILE_LOAD, "tile_load"},
      {METILE_OP_TILE_STORE, "tile_store"},
      {METILE_OP_SHARED, "shared"},
      {METILE_OP_DOT, "dot"},
      {METILE_OP_REDUCE_SUM, "reduce_sum"},
      {METILE_OP_REDUCE_MAX, "reduce_max"},
      {METILE_OP_REDUCE_MIN, "reduce_min"},
      {METILE_OP_FOR, "for"},
      {METILE_OP_YIELD, "yield"},
      {METILE_OP_SIMDGROUP_ROLE, "simdgroup_role"},
      {METILE_OP_IF, "if"},
      {METILE_OP_WHILE, "while"},
      {METILE_OP_THREAD_ID, "thread_id"},
      {METILE_OP_SIMD_LANE_ID, "simd_lane_id"},
      {METILE_OP_SIMD_SHUFFLE_XOR, "simd_shuffle_xor"},
      {METILE_OP_SIMD_BROADCAST, "simd_broadcast"},
      {METILE_OP_BARRIER, "barrier"},
      {METILE_OP_TILE_SWIZZLE, "tile_swizzle"},
      {METILE_OP_ATOMIC_ADD, "atomic_add"},
      {METILE_OP_ATOMIC_MAX, "atomic_max"},
      {METILE_OP_ATOMIC_MIN, "atomic_min"},
      {METILE_OP_ATOMIC_XCHG, "atomic_xchg"},
      {METILE_OP_ATOMIC_CAS, "atomic_cas"},
      {METILE_OP_CUMSUM, "cumsum"},
      {METILE_OP_CUMPROD, "cumprod"},
      {METILE_OP_TRANS, "trans"},
      {METILE_OP_DEVICE_PRINT, "device_print"},
  };
  // Every value from 0 to past the last pin: the pinned ones have their spelling, the rest
  // (including METILE_OP_INVALID) are "invalid".
  for (int v = 0; v < 300; ++v) {
    const char* want = "invalid";
    for (const auto& [op, name] : ops)
      if (static_cast<int>(op) == v) want = name;
    EXPECT_STREQ(metile_op_name(static_cast<metile_op>(v)), want) << v;
  }
  for (int v : {1000, 65536 + 10, 0x7fffffff})
    EXPECT_STREQ(metile_op_name(static_cast<metile_op>(v)), "invalid") << v;
}

TEST(Version, MatchesTheHeader) {
  EXPECT_EQ(metile_version(), static_cast<uint32_t>(METILE_VERSION_NUMBER));
  std::string want = std::to_string(METILE_VERSION_MAJOR) + "." +
                     std::to_string(METILE_VERSION_MINOR) + "." +
                     std::to_string(METILE_VERSION_PATCH);
  EXPECT_EQ(want, metile_version_string());
}

// ---------------------------------------------------------------------------------------------
// metile_last_error

TEST(LastError, EmptyInAFreshThreadAndNeverNull) {
  std::string seen = "unset";
  std::thread([&] {
    const char* e = metile_last_error();
    seen = e == nullptr ? "NULL" : e;
  }).join();
  EXPECT_EQ(seen, "");
}

TEST(LastError, SetByAFailedCallNamingTheCallAndSubsystem) {
  std::thread([] {
    metile_builder* b = nullptr;
    EXPECT_TRUE(fails_with(metile_builder_create(&b, nullptr), METILE_ERROR_INVALID_ARGUMENT,
                           "[api] metile_builder_create"));
    EXPECT_NE(last_error().find("name"), std::string::npos) << last_error();
    EXPECT_EQ(b, nullptr) << "outputs are written only on success";
  }).join();
}

TEST(LastError, ASuccessfulCallKeepsTheMessage) {
  scrub_error();
  std::string before = last_error();
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  EXPECT_EQ(last_error(), before);
  EXPECT_EQ(metile_builder_release(b), METILE_OK);
  EXPECT_EQ(last_error(), before);
}

TEST(LastError, IsPerThread) {
  scrub_error();
  std::string mine = last_error();
  std::string theirs_before, theirs_after;
  std::thread([&] {
    theirs_before = metile_last_error();
    size_t n = 0;
    EXPECT_EQ(metile_program_num_params(nullptr, &n), METILE_ERROR_INVALID_ARGUMENT);
    theirs_after = metile_last_error();
  }).join();
  EXPECT_EQ(theirs_before, "");
  EXPECT_NE(theirs_after.find("metile_program_num_params"), std::string::npos) << theirs_after;
  EXPECT_EQ(last_error(), mine);
}

TEST(LastError, ManyThreadsFailingAtOnceKeepTheirOwnMessages) {
  std::vector<std::thread> threads;
  std::vector<std::string> got(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &got] {
      metile_builder* b = nullptr;
      EXPECT_EQ(metile_builder_create(&b, "k"), METILE_OK);
      std::string file = "thread" + std::to_string(t) + ".py";
      metile_value a, c, r;
      EXPECT_EQ(metile_builder_set_loc(b, file.c_str(), t + 1), METILE_OK);
      EXPECT_EQ(metile_builder_arange(b, 0, 8, &a), METILE_OK);
      EXPECT_EQ(metile_builder_arange(b, 0, 16, &c), METILE_OK);
      for (int i = 0; i < 50; ++i)
        EXPECT_EQ(metile_builder_binary(b, METILE_OP_ADD, a, c, &r), METILE_ERROR_INVALID_PROGRAM);
      got[t] = metile_last_error();
      EXPECT_EQ(metile_builder_release(b), METILE_OK);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    std::string where = "thread" + std::to_string(t) + ".py:" + std::to_string(t + 1);
    EXPECT_NE(got[t].find(where), std::string::npos) << got[t];
  }
}

TEST(Free, NullIsFine) { metile_free(nullptr); }

// ---------------------------------------------------------------------------------------------
// Devices without hardware assumptions

TEST(Devices, UnknownNameIsAnInvalidArgumentNamingIt) {
  metile_device* d = nullptr;
  EXPECT_TRUE(fails_with(metile_device_open(&d, "no-such-device"), METILE_ERROR_INVALID_ARGUMENT,
                         "no-such-device"));
  EXPECT_EQ(d, nullptr);
}

TEST(Devices, EveryAvailableDeviceOpensAndNamesItself) {
  char* list = nullptr;
  ASSERT_EQ(metile_devices_available(&list), METILE_OK) << last_error();
  ASSERT_NE(list, nullptr);
  std::string names = list;
  metile_free(list);
  size_t start = 0;
  while (start < names.size()) {
    size_t comma = names.find(',', start);
    size_t len = comma == std::string::npos ? std::string::npos : comma - start;
    std::string name = names.substr(start, len);
    start = comma == std::string::npos ? names.size() : comma + 1;
    SCOPED_TRACE(name);
    metile_device* d = nullptr;
    ASSERT_EQ(metile_device_open(&d, name.c_str()), METILE_OK) << last_error();
    metile_device_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(metile_device_get_info(d, &info), METILE_OK) << last_error();
    EXPECT_EQ(name, info.name);
    EXPECT_EQ(metile_device_release(d), METILE_OK);
  }
}

TEST(CompileOptions, InitFillsDefaults) {
  metile_compile_options o;
  std::memset(&o, 0x5A, sizeof o);
  metile_compile_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.num_threads, 0);
  EXPECT_EQ(o.allow_tf32, -1);
  EXPECT_EQ(o.opt_level, 1);
  EXPECT_EQ(o.no_cache, 0);
  metile_compile_options_init(nullptr);  // documented as harmless
}

// ---------------------------------------------------------------------------------------------
// Builder and program errors through the C API

class BuilderErrors : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(metile_builder_create(&b_, "k"), METILE_OK); }
  void TearDown() override { EXPECT_EQ(metile_builder_release(b_), METILE_OK); }
  metile_value arange(int64_t n) {
    metile_value v = 0;
    EXPECT_EQ(metile_builder_arange(b_, 0, n, &v), METILE_OK) << last_error();
    return v;
  }
  metile_builder* b_ = nullptr;
};

TEST_F(BuilderErrors, ShapeMismatchNamesTheSourceLocation) {
  // The file name is copied: the caller's buffer may change after set_loc.
  char file[] = "kernels/add.py";
  ASSERT_EQ(metile_builder_set_loc(b_, file, 42), METILE_OK);
  std::strcpy(file, "overwritten!!!");
  metile_value a = arange(8), c = arange(16), r = 0;
  EXPECT_TRUE(fails_with(metile_builder_binary(b_, METILE_OP_ADD, a, c, &r),
                         METILE_ERROR_INVALID_PROGRAM, "kernels/add.py:42"));
  EXPECT_NE(last_error().find("[builder]"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("add"), std::string::npos) << last_error();
  EXPECT_EQ(r, 0u) << "outputs are written only on success";
}

TEST_F(BuilderErrors, TheLatestLocationIsUsed) {
  ASSERT_EQ(metile_builder_set_loc(b_, "a.py", 1), METILE_OK);
  metile_value a = arange(4);
  ASSERT_EQ(metile_builder_set_loc(b_, "b.py", 9), METILE_OK);
  metile_value c = arange(3), r;
  EXPECT_TRUE(fails_with(metile_builder_binary(b_, METILE_OP_MUL, a, c, &r),
                         METILE_ERROR_INVALID_PROGRAM, "b.py:9"));
  EXPECT_EQ(last_error().find("a.py"), std::string::npos) << last_error();
}

TEST_F(BuilderErrors, VerificationAtFinishNamesTheOpLocation) {
  // A SIMT op with no arange and no num_threads: the thread count is unknown.
  ASSERT_EQ(metile_builder_set_loc(b_, "simt.py", 5), METILE_OK);
  metile_value tid;
  ASSERT_EQ(metile_builder_simt(b_, METILE_OP_THREAD_ID, &tid), METILE_OK) << last_error();
  metile_program* p = nullptr;
  EXPECT_TRUE(fails_with(metile_builder_finish(b_, &p), METILE_ERROR_INVALID_PROGRAM, "simt.py:5"));
  EXPECT_NE(last_error().find("num_threads"), std::string::npos) << last_error();
  EXPECT_EQ(p, nullptr);
}

TEST_F(BuilderErrors, SimtThreadCountFallsBackToTheBlockConstexpr) {
  // The original's rule for SIMT kernels without an arange: the BLOCK constexpr is T.
  ASSERT_EQ(metile_builder_set_constexpr(b_, "BLOCK", "64"), METILE_OK);
  metile_value tid;
  ASSERT_EQ(metile_builder_simt(b_, METILE_OP_THREAD_ID, &tid), METILE_OK) << last_error();
  metile_program* p = nullptr;
  ASSERT_EQ(metile_builder_finish(b_, &p), METILE_OK) << last_error();
  char* text = nullptr;
  ASSERT_EQ(metile_program_print(p, &text), METILE_OK) << last_error();
  EXPECT_NE(std::string(text).find("num_threads(64)"), std::string::npos) << text;
  metile_free(text);
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST_F(BuilderErrors, UnknownValuesOpsAndDtypes) {
  metile_value r = 0;
  metile_value a = arange(8);
  EXPECT_TRUE(fails_with(metile_builder_binary(b_, METILE_OP_ADD, a, 999, &r),
                         METILE_ERROR_INVALID_PROGRAM, "not a value of this builder"));
  EXPECT_TRUE(fails_with(metile_builder_binary(b_, static_cast<metile_op>(999), a, a, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "unknown op 999"));
  EXPECT_TRUE(fails_with(metile_builder_binary(b_, METILE_OP_EXP, a, a, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "not a binary op"));
  EXPECT_TRUE(fails_with(metile_builder_unary(b_, METILE_OP_ADD, a, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "not a unary op"));
  EXPECT_TRUE(fails_with(metile_builder_reduce(b_, METILE_OP_ADD, a, -1, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "not a reduction"));
  for (int d : {0, 12, 257}) {
    SCOPED_TRACE(d);
    EXPECT_TRUE(fails_with(metile_builder_const_int(b_, static_cast<metile_dtype>(d), 1, &r),
                           METILE_ERROR_INVALID_ARGUMENT, "invalid dtype"));
    EXPECT_TRUE(fails_with(metile_builder_cast(b_, a, static_cast<metile_dtype>(d), &r),
                           METILE_ERROR_INVALID_ARGUMENT, "invalid dtype"));
  }
  EXPECT_TRUE(fails_with(metile_builder_const_float(b_, METILE_DTYPE_I32, 1.5, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "float dtype"));
  int64_t shape3[3] = {2, 2, 2};
  EXPECT_TRUE(fails_with(metile_builder_reshape(b_, a, 3, shape3, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "rank"));
  int64_t bad_dims[2] = {4, 0};
  EXPECT_TRUE(fails_with(metile_builder_broadcast(b_, a, 2, bad_dims, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "positive"));
  EXPECT_TRUE(fails_with(metile_builder_broadcast(b_, a, 2, nullptr, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "NULL"));
  int64_t below_t[1] = {-2};  // -1 is T, the SIMT thread count; nothing else below 1
  EXPECT_TRUE(fails_with(metile_builder_broadcast(b_, a, 1, below_t, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "thread count T"));
  EXPECT_TRUE(fails_with(metile_builder_reshape(b_, a, 1, below_t, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "positive"));
}

TEST_F(BuilderErrors, BadAtomics) {
  metile_value p, one, r;
  metile_type t = pointer(METILE_DTYPE_I32);
  ASSERT_EQ(metile_builder_param(b_, "p", &t, &p), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b_, METILE_DTYPE_I32, 1, &one), METILE_OK);
  EXPECT_TRUE(fails_with(metile_builder_atomic(b_, static_cast<metile_op>(9999), p, 0, one, 0, &r),
                         METILE_ERROR_INVALID_ARGUMENT, "unknown op 9999"));
  EXPECT_TRUE(fails_with(metile_builder_atomic(b_, METILE_OP_ADD, p, 0, one, 0, &r),
                         METILE_ERROR_INVALID_PROGRAM, "add: is not an atomic op"));
  EXPECT_TRUE(fails_with(metile_builder_atomic(b_, METILE_OP_ATOMIC_CAS, p, 0, one, 0, &r),
                         METILE_ERROR_INVALID_PROGRAM, "the compared value"));
  EXPECT_TRUE(fails_with(metile_builder_atomic(b_, METILE_OP_ATOMIC_ADD, p, one, one, 0, &r),
                         METILE_ERROR_INVALID_PROGRAM, "only atomic_cas does"));
  EXPECT_TRUE(fails_with(metile_builder_atomic(b_, METILE_OP_ATOMIC_ADD, one, 0, one, 0, &r),
                         METILE_ERROR_INVALID_PROGRAM, "needs a pointer"));
  EXPECT_TRUE(fails_with(metile_builder_atomic(b_, METILE_OP_ATOMIC_ADD, p, 0, one, 0, nullptr),
                         METILE_ERROR_INVALID_ARGUMENT, "NULL"));
  ASSERT_EQ(metile_builder_atomic(b_, METILE_OP_ATOMIC_MAX, p, 0, one, 0, &r), METILE_OK);
}

TEST_F(BuilderErrors, BadParameters) {
  metile_value v;
  metile_type tile = scalar(METILE_DTYPE_F32);
  tile.rank = 1;
  tile.shape[0] = 16;
  EXPECT_TRUE(fails_with(metile_builder_param(b_, "t", &tile, &v), METILE_ERROR_INVALID_ARGUMENT,
                         "scalar or pointer"));
  for (int d : {0, 12, 257}) {
    SCOPED_TRACE(d);
    metile_type t = pointer(static_cast<metile_dtype>(d));
    EXPECT_TRUE(fails_with(metile_builder_param(b_, "p", &t, &v), METILE_ERROR_INVALID_ARGUMENT,
                           "invalid dtype"));
  }
  metile_type odd_space = pointer(METILE_DTYPE_F32);
  odd_space.address_space = static_cast<metile_address_space>(7);
  EXPECT_TRUE(fails_with(metile_builder_param(b_, "p", &odd_space, &v),
                         METILE_ERROR_INVALID_ARGUMENT, "address space"));
  metile_type shared_ptr = pointer(METILE_DTYPE_F32);
  shared_ptr.address_space = METILE_ADDRESS_SPACE_THREADGROUP;
  EXPECT_TRUE(fails_with(metile_builder_param(b_, "p", &shared_ptr, &v),
                         METILE_ERROR_INVALID_ARGUMENT, "device pointer"));
  metile_type i32 = scalar(METILE_DTYPE_I32);
  ASSERT_EQ(metile_builder_param(b_, "n", &i32, &v), METILE_OK) << last_error();
  EXPECT_TRUE(fails_with(metile_builder_param(b_, "n", &i32, &v), METILE_ERROR_INVALID_ARGUMENT,
                         "declared twice"));
  arange(4);
  EXPECT_TRUE(fails_with(metile_builder_param(b_, "m", &i32, &v), METILE_ERROR_INVALID_ARGUMENT,
                         "before any op"));
}

TEST_F(BuilderErrors, StructureErrors) {
  metile_value results[1];
  EXPECT_TRUE(fails_with(metile_builder_for_end(b_, nullptr, 0, results),
                         METILE_ERROR_INVALID_PROGRAM, "for"));
  EXPECT_TRUE(fails_with(metile_builder_role_end(b_), METILE_ERROR_INVALID_PROGRAM,
                         "role_end without an open simdgroup_role"));
  EXPECT_TRUE(fails_with(metile_builder_set_num_threads(b_, 0), METILE_ERROR_INVALID_ARGUMENT,
                         "num_threads"));
  metile_value zero, ten, one, iv;
  ASSERT_EQ(metile_builder_const_int(b_, METILE_DTYPE_I32, 0, &zero), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b_, METILE_DTYPE_I32, 10, &ten), METILE_OK);
  ASSERT_EQ(metile_builder_const_int(b_, METILE_DTYPE_I32, 1, &one), METILE_OK);
  ASSERT_EQ(metile_builder_set_loc(b_, "loop.py", 12), METILE_OK);
  ASSERT_EQ(metile_builder_for_begin(b_, zero, ten, one, nullptr, 0, &iv, nullptr), METILE_OK)
      << last_error();
  metile_program* p = nullptr;
  EXPECT_TRUE(
      fails_with(metile_builder_finish(b_, &p), METILE_ERROR_INVALID_PROGRAM, "loop.py:12"));
  EXPECT_NE(last_error().find("still open"), std::string::npos) << last_error();
}

TEST_F(BuilderErrors, AFinishedBuilderOnlyReleases) {
  metile_program* p = nullptr;
  ASSERT_EQ(metile_builder_finish(b_, &p), METILE_OK) << last_error();
  EXPECT_TRUE(fails_with(metile_builder_set_loc(b_, "x.py", 1), METILE_ERROR_INVALID_ARGUMENT,
                         "already finished"));
  metile_program* again = nullptr;
  EXPECT_TRUE(fails_with(metile_builder_finish(b_, &again), METILE_ERROR_INVALID_ARGUMENT,
                         "already finished"));
  EXPECT_EQ(again, nullptr);
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST(Program, PrintParseRoundTripAndSignature) {
  metile_program* p = build_scale();
  char* text = nullptr;
  ASSERT_EQ(metile_program_print(p, &text), METILE_OK) << last_error();
  std::string printed = text;
  metile_free(text);
  EXPECT_NE(printed.find("kernel @scale("), std::string::npos) << printed;

  metile_program* q = nullptr;
  ASSERT_EQ(metile_program_parse(&q, printed.c_str()), METILE_OK) << last_error();
  ASSERT_EQ(metile_program_print(q, &text), METILE_OK) << last_error();
  EXPECT_EQ(printed, text);
  metile_free(text);

  EXPECT_STREQ(metile_program_name(q), "scale");
  size_t n = 0;
  ASSERT_EQ(metile_program_num_params(q, &n), METILE_OK);
  ASSERT_EQ(n, 4u);
  const char* names[] = {"X", "Y", "alpha", "n"};
  const metile_dtype dtypes[] = {METILE_DTYPE_F32, METILE_DTYPE_F32, METILE_DTYPE_F32,
                                 METILE_DTYPE_I32};
  const int32_t ptrs[] = {1, 1, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    metile_type t{};
    ASSERT_EQ(metile_program_param(q, i, &name, &t), METILE_OK) << last_error();
    EXPECT_STREQ(name, names[i]);
    EXPECT_EQ(t.dtype, dtypes[i]);
    EXPECT_EQ(t.is_pointer, ptrs[i]);
    EXPECT_EQ(t.rank, 0);
  }
  EXPECT_TRUE(fails_with(metile_program_param(q, 4, nullptr, nullptr),
                         METILE_ERROR_INVALID_ARGUMENT, "out of range"));
  EXPECT_EQ(metile_program_release(q), METILE_OK);
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST(Program, ParamAccessSaysWhichPointersAreReadAndWritten) {
  metile_program* p = build_scale();  // loads X, stores Y; alpha and n are scalars
  const uint32_t expect[] = {METILE_PARAM_READ, METILE_PARAM_WRITE, 0, 0};
  for (size_t i = 0; i < 4; ++i) {
    uint32_t bits = 99;
    ASSERT_EQ(metile_program_param_access(p, i, &bits), METILE_OK) << last_error();
    EXPECT_EQ(bits, expect[i]) << "parameter " << i;
  }
  EXPECT_TRUE(fails_with(metile_program_param_access(p, 4, nullptr),
                         METILE_ERROR_INVALID_ARGUMENT, "out"));
  uint32_t bits = 0;
  EXPECT_TRUE(fails_with(metile_program_param_access(p, 4, &bits),
                         METILE_ERROR_INVALID_ARGUMENT, "out of range"));
  EXPECT_TRUE(fails_with(metile_program_param_access(nullptr, 0, &bits),
                         METILE_ERROR_INVALID_ARGUMENT, "program"));
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST(Program, ParseErrorsAreInvalidProgramWithALine) {
  metile_program* p = nullptr;
  EXPECT_TRUE(fails_with(metile_program_parse(&p, "kernel @k() {\n  %1 = frobnicate\n}\n"),
                         METILE_ERROR_INVALID_PROGRAM, "line 2"));
  EXPECT_NE(last_error().find("[parse]"), std::string::npos) << last_error();
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(fails_with(metile_program_parse(&p, ""), METILE_ERROR_INVALID_PROGRAM, "[parse]"));
}

}  // namespace

// The C ABI through the shared library, as a user links it: status and error reporting, handle
// validation (NULL, released, foreign and wrong-kind handles never crash), enum names, and
// builder/program errors with source locations.
#include <metile/metile.h>

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

std::string last_error() { return metile_last_error(); }

// Replaces this thread's message with one that names no call under test, so a check cannot pass
// on a stale message.
void scrub_error() {
  ASSERT_EQ(metile_program_parse(nullptr, nullptr), METILE_ERROR_INVALID_ARGUMENT);
  ASSERT_NE(last_error().find("metile_program_parse"), std::string::npos);
}

::testing::AssertionResult fails_with(metile_status got, metile_status want, const std::string& in_message) {
  if (got != want)
    return ::testing::AssertionFailure() << "got " << metile_status_name(got) << ", want "
                                         << metile_status_name(want) << " (message: \""
                                         << metile_last_error() << "\")";
  if (last_error().find(in_message) == std::string::npos)
    return ::testing::AssertionFailure() << "the message does not mention \"" << in_message
                                         << "\": \"" << metile_last_error() << "\"";
  return ::testing::AssertionSuccess();
}

metile_type scalar(metile_dtype d) {
  metile_type t{};
  t.dtype = d;
  return t;
}

metile_type pointer(metile_dtype d) {
  metile_type t = scalar(d);
  t.is_pointer = 1;
  return t;
}

// out[i] = alpha * x[i] for i < n, in blocks of 64.
metile_program* build_scale() {
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
  };
  for (const Row& r : rows) {
    EXPECT_EQ(static_cast<int>(r.d), r.pin) << r.name;
    EXPECT_STREQ(metile_dtype_name(r.d), r.name);
    EXPECT_EQ(metile_dtype_size(r.d), r.size) << r.name;
  }
}

TEST(Dtype, InvalidAndUnknownValues) {
  // 257 and 513 alias valid dtypes when truncated to a byte; they must still be unknown.
  for (int v : {0, 10, 11, 255, 256, 257, 258, 513, 1000, 0x7fffffff}) {
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
      {METILE_OP_THREAD_ID, "thread_id"},
      {METILE_OP_SIMD_LANE_ID, "simd_lane_id"},
      {METILE_OP_SIMD_SHUFFLE_XOR, "simd_shuffle_xor"},
      {METILE_OP_SIMD_BROADCAST, "simd_broadcast"},
      {METILE_OP_BARRIER, "barrier"},
      {METILE_OP_TILE_SWIZZLE, "tile_swizzle"},
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
// Handles: NULL, released, foreign and wrong-kind handles give INVALID_ARGUMENT naming the call.

// One API call taking a handle of some kind, made with an arbitrary pointer in its place.
struct Call {
  const char* fn;
  std::function<metile_status(void*)> run;
};

void expect_rejected(const std::vector<Call>& calls, void* handle, const char* flavor) {
  for (const Call& c : calls) {
    SCOPED_TRACE(std::string(c.fn) + " with a " + flavor + " handle");
    scrub_error();
    EXPECT_TRUE(fails_with(c.run(handle), METILE_ERROR_INVALID_ARGUMENT, c.fn));
  }
}

std::vector<Call> builder_calls() {
  auto B = [](void* h) { return static_cast<metile_builder*>(h); };
  return {
      {"metile_builder_set_loc", [=](void* h) { return metile_builder_set_loc(B(h), "f.c", 1); }},
      {"metile_builder_set_constexpr",
       [=](void* h) { return metile_builder_set_constexpr(B(h), "N", "1"); }},
      {"metile_builder_set_num_threads",
       [=](void* h) { return metile_builder_set_num_threads(B(h), 32); }},
      {"metile_builder_param",
       [=](void* h) {
         metile_type t = scalar(METILE_DTYPE_I32);
         metile_value v;
         return metile_builder_param(B(h), "n", &t, &v);
       }},
      {"metile_builder_value_type",
       [=](void* h) {
         metile_type t;
         return metile_builder_value_type(B(h), 1, &t);
       }},
      {"metile_builder_const_int",
       [=](void* h) {
         metile_value v;
         return metile_builder_const_int(B(h), METILE_DTYPE_I32, 1, &v);
       }},
      {"metile_builder_arange",
       [=](void* h) {
         metile_value v;
         return metile_builder_arange(B(h), 0, 8, &v);
       }},
      {"metile_builder_simt",
       [=](void* h) { return metile_builder_simt(B(h), METILE_OP_BARRIER, nullptr); }},
      {"metile_builder_role_end", [=](void* h) { return metile_builder_role_end(B(h)); }},
      {"metile_builder_finish",
       [=](void* h) {
         metile_program* p = nullptr;
         return metile_builder_finish(B(h), &p);
       }},
  };
}

std::vector<Call> program_calls() {
  auto P = [](void* h) { return static_cast<metile_program*>(h); };
  return {
      {"metile_program_print",
       [=](void* h) {
         char* s = nullptr;
         metile_status st = metile_program_print(P(h), &s);
         metile_free(s);
         return st;
       }},
      {"metile_program_num_params",
       [=](void* h) {
         size_t n;
         return metile_program_num_params(P(h), &n);
       }},
      {"metile_program_param",
       [=](void* h) { return metile_program_param(P(h), 0, nullptr, nullptr); }},
      {"metile_program_retain", [=](void* h) { return metile_program_retain(P(h)); }},
      {"metile_program_name",
       [=](void* h) {
         return metile_program_name(P(h)) == nullptr ? METILE_ERROR_INVALID_ARGUMENT : METILE_OK;
       }},
  };
}

std::vector<Call> device_calls() {
  auto D = [](void* h) { return static_cast<metile_device*>(h); };
  return {
      {"metile_device_get_info",
       [=](void* h) {
         metile_device_info info{};
         info.struct_size = sizeof info;
         return metile_device_get_info(D(h), &info);
       }},
      {"metile_device_synchronize", [=](void* h) { return metile_device_synchronize(D(h)); }},
      {"metile_device_retain", [=](void* h) { return metile_device_retain(D(h)); }},
      {"metile_buffer_alloc",
       [=](void* h) {
         metile_buffer* b = nullptr;
         return metile_buffer_alloc(&b, D(h), 64);
       }},
      {"metile_buffer_wrap",
       [=](void* h) {
         static float host[16];
         metile_buffer* b = nullptr;
         return metile_buffer_wrap(&b, D(h), host, sizeof host);
       }},
      {"metile_kernel_compile",
       [=](void* h) {
         metile_program* p = build_scale();
         metile_kernel* k = nullptr;
         metile_status st = metile_kernel_compile(&k, D(h), p, nullptr);
         metile_program_release(p);
         return st;
       }},
  };
}

std::vector<Call> buffer_calls() {
  auto B = [](void* h) { return static_cast<metile_buffer*>(h); };
  return {
      {"metile_buffer_contents",
       [=](void* h) {
         void* p = nullptr;
         return metile_buffer_contents(B(h), &p);
       }},
      {"metile_buffer_size",
       [=](void* h) {
         size_t n = 0;
         return metile_buffer_size(B(h), &n);
       }},
      {"metile_buffer_retain", [=](void* h) { return metile_buffer_retain(B(h)); }},
      {"metile_buffer_shares_memory",
       [=](void* h) {
         return metile_buffer_shares_memory(B(h)) == 0 ? METILE_ERROR_INVALID_ARGUMENT : METILE_OK;
       }},
  };
}

std::vector<Call> kernel_calls() {
  auto K = [](void* h) { return static_cast<metile_kernel*>(h); };
  return {
      {"metile_kernel_source",
       [=](void* h) {
         char* s = nullptr;
         return metile_kernel_source(K(h), "tile_ir", &s);
       }},
      {"metile_kernel_cache_key",
       [=](void* h) {
         char key[65];
         return metile_kernel_cache_key(K(h), key);
       }},
      {"metile_kernel_get_info",
       [=](void* h) {
         metile_kernel_info info{};
         info.struct_size = sizeof info;
         return metile_kernel_get_info(K(h), &info);
       }},
      {"metile_kernel_retain", [=](void* h) { return metile_kernel_retain(K(h)); }},
      {"metile_kernel_launch",
       [=](void* h) {
         uint32_t grid[3] = {1, 1, 1};
         return metile_kernel_launch(K(h), grid, nullptr, 0);
       }},
      {"metile_launch_create",
       [=](void* h) {
         metile_launch* l = nullptr;
         uint32_t grid[3] = {1, 1, 1};
         return metile_launch_create(&l, K(h), grid, nullptr, 0);
       }},
  };
}

std::vector<Call> launch_calls() {
  auto L = [](void* h) { return static_cast<metile_launch*>(h); };
  return {
      {"metile_launch_run", [=](void* h) { return metile_launch_run(L(h)); }},
      {"metile_launch_set_grid",
       [=](void* h) {
         uint32_t grid[3] = {1, 1, 1};
         return metile_launch_set_grid(L(h), grid);
       }},
      {"metile_launch_set_arg",
       [=](void* h) {
         metile_arg a{};
         a.kind = METILE_ARG_I32;
         return metile_launch_set_arg(L(h), 0, &a);
       }},
  };
}

// Release calls, one per kind; NULL is a no-op for each.
const std::vector<Call>& release_calls() {
  static const std::vector<Call> calls = {
      {"metile_device_release",
       [](void* h) { return metile_device_release(static_cast<metile_device*>(h)); }},
      {"metile_buffer_release",
       [](void* h) { return metile_buffer_release(static_cast<metile_buffer*>(h)); }},
      {"metile_builder_release",
       [](void* h) { return metile_builder_release(static_cast<metile_builder*>(h)); }},
      {"metile_program_release",
       [](void* h) { return metile_program_release(static_cast<metile_program*>(h)); }},
      {"metile_kernel_release",
       [](void* h) { return metile_kernel_release(static_cast<metile_kernel*>(h)); }},
      {"metile_launch_release",
       [](void* h) { return metile_launch_release(static_cast<metile_launch*>(h)); }},
  };
  return calls;
}

std::vector<Call> all_handle_calls() {
  std::vector<Call> all;
  for (auto* family : {builder_calls, program_calls, device_calls, buffer_calls, kernel_calls,
                       launch_calls})
    for (Call& c : family()) all.push_back(std::move(c));
  return all;
}

TEST(Handles, NullIsRejectedByEveryCall) { expect_rejected(all_handle_calls(), nullptr, "NULL"); }

TEST(Handles, ReleasingNullIsANoOp) {
  for (const Call& c : release_calls()) {
    SCOPED_TRACE(c.fn);
    EXPECT_EQ(c.run(nullptr), METILE_OK);
  }
}

TEST(Handles, ForeignPointersAreRejectedWithoutBeingRead) {
  // Local storage that looks like nothing the library made; also heap memory.
  alignas(64) unsigned char local[256];
  std::memset(local, 0xAB, sizeof local);
  expect_rejected(all_handle_calls(), local, "foreign (stack)");
  expect_rejected(release_calls(), local, "foreign (stack)");
  std::vector<unsigned char> heap(256, 0xCD);
  expect_rejected(all_handle_calls(), heap.data(), "foreign (heap)");
  expect_rejected(release_calls(), heap.data(), "foreign (heap)");
}

TEST(Handles, WrongKindIsRejected) {
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  metile_program* p = build_scale();
  ASSERT_NE(p, nullptr);

  // A program where a builder is expected, and a builder everywhere else.
  expect_rejected(builder_calls(), p, "program-as-builder");
  for (auto* family : {program_calls, device_calls, buffer_calls, kernel_calls, launch_calls})
    expect_rejected(family(), b, "builder-as-other-kind");
  for (const Call& c : release_calls()) {
    void* wrong = std::strcmp(c.fn, "metile_builder_release") == 0 ? static_cast<void*>(p)
                                                                    : static_cast<void*>(b);
    SCOPED_TRACE(c.fn);
    scrub_error();
    EXPECT_TRUE(fails_with(c.run(wrong), METILE_ERROR_INVALID_ARGUMENT, c.fn));
  }

  // Both handles survived every rejected call, including the rejected releases.
  size_t n = 0;
  EXPECT_EQ(metile_program_num_params(p, &n), METILE_OK) << metile_last_error();
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(metile_builder_set_loc(b, "still.c", 3), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_builder_release(b), METILE_OK);
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST(Handles, UseAfterReleaseIsRejected) {
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  ASSERT_EQ(metile_builder_release(b), METILE_OK);
  expect_rejected(builder_calls(), b, "released builder");
  scrub_error();
  EXPECT_TRUE(fails_with(metile_builder_release(b), METILE_ERROR_INVALID_ARGUMENT,
                         "metile_builder_release"));

  metile_program* p = build_scale();
  ASSERT_EQ(metile_program_release(p), METILE_OK);
  expect_rejected(program_calls(), p, "released program");
  scrub_error();
  EXPECT_TRUE(fails_with(metile_program_release(p), METILE_ERROR_INVALID_ARGUMENT,
                         "metile_program_release"));
}

TEST(Handles, RetainKeepsAProgramAliveUntilTheLastRelease) {
  metile_program* p = build_scale();
  ASSERT_EQ(metile_program_retain(p), METILE_OK);
  ASSERT_EQ(metile_program_release(p), METILE_OK);
  EXPECT_STREQ(metile_program_name(p), "scale");
  ASSERT_EQ(metile_program_release(p), METILE_OK);
  scrub_error();
  EXPECT_EQ(metile_program_name(p), nullptr);
  EXPECT_NE(last_error().find("metile_program_name"), std::string::npos);
}

TEST(Handles, NullOutputPointersAreRejected) {
  scrub_error();
  EXPECT_TRUE(fails_with(metile_builder_create(nullptr, "k"), METILE_ERROR_INVALID_ARGUMENT,
                         "argument `out` is NULL"));
  EXPECT_TRUE(fails_with(metile_devices_available(nullptr), METILE_ERROR_INVALID_ARGUMENT,
                         "metile_devices_available"));
  metile_program* p = build_scale();
  EXPECT_TRUE(fails_with(metile_program_print(p, nullptr), METILE_ERROR_INVALID_ARGUMENT,
                         "metile_program_print"));
  EXPECT_TRUE(fails_with(metile_program_num_params(p, nullptr), METILE_ERROR_INVALID_ARGUMENT,
                         "metile_program_num_params"));
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

// Handles that need a device: the released and wrong-kind cases of device, buffer, kernel and
// launch handles. They run wherever the interp device (the reference executor) is built in.
class DeviceHandles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (metile_device_open(&device_, "interp") != METILE_OK)
      GTEST_SKIP() << "no interp device in this build: " << metile_last_error();
  }
  void TearDown() override { metile_device_release(device_); }
  metile_device* device_ = nullptr;
};

TEST_F(DeviceHandles, ReleasedHandlesOfEveryKindAreRejected) {
  metile_program* p = build_scale();
  metile_buffer *x = nullptr, *y = nullptr;
  metile_kernel* k = nullptr;
  metile_launch* l = nullptr;
  metile_device* d2 = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&x, device_, 256 * sizeof(float)), METILE_OK) << last_error();
  ASSERT_EQ(metile_buffer_alloc(&y, device_, 256 * sizeof(float)), METILE_OK) << last_error();
  ASSERT_EQ(metile_kernel_compile(&k, device_, p, nullptr), METILE_OK) << last_error();
  metile_arg args[4] = {};
  args[0].kind = METILE_ARG_BUFFER;
  args[0].buffer = x;
  args[1].kind = METILE_ARG_BUFFER;
  args[1].buffer = y;
  args[2].kind = METILE_ARG_F32;
  args[2].f = 2.0;
  args[3].kind = METILE_ARG_I32;
  args[3].i = 256;
  uint32_t grid[3] = {4, 1, 1};
  ASSERT_EQ(metile_launch_create(&l, k, grid, args, 4), METILE_OK) << last_error();
  ASSERT_EQ(metile_device_open(&d2, "interp"), METILE_OK) << last_error();

  // Wrong kinds first, while everything is alive.
  expect_rejected(device_calls(), x, "buffer-as-device");
  expect_rejected(buffer_calls(), k, "kernel-as-buffer");
  expect_rejected(kernel_calls(), l, "launch-as-kernel");
  expect_rejected(launch_calls(), device_, "device-as-launch");

  ASSERT_EQ(metile_launch_release(l), METILE_OK);
  ASSERT_EQ(metile_kernel_release(k), METILE_OK);
  ASSERT_EQ(metile_buffer_release(y), METILE_OK);
  ASSERT_EQ(metile_device_release(d2), METILE_OK);
  expect_rejected(launch_calls(), l, "released launch");
  expect_rejected(kernel_calls(), k, "released kernel");
  expect_rejected(buffer_calls(), y, "released buffer");
  expect_rejected(device_calls(), d2, "released device");
  for (auto [fn, h] : {std::pair<const char*, void*>{"metile_launch_release", l},
                       {"metile_kernel_release", k}, {"metile_buffer_release", y},
                       {"metile_device_release", d2}})
    for (const Call& c : release_calls())
      if (std::strcmp(c.fn, fn) == 0) {
        SCOPED_TRACE(fn);
        scrub_error();
        EXPECT_TRUE(fails_with(c.run(h), METILE_ERROR_INVALID_ARGUMENT, fn));
      }

  // The first device handle and the other buffer are unaffected.
  size_t size = 0;
  EXPECT_EQ(metile_buffer_size(x, &size), METILE_OK) << last_error();
  EXPECT_EQ(size, 256 * sizeof(float));
  EXPECT_EQ(metile_buffer_release(x), METILE_OK);
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST_F(DeviceHandles, StructSizeTooSmallIsRejected) {
  metile_device_info info{};
  info.struct_size = sizeof info - 1;
  EXPECT_TRUE(fails_with(metile_device_get_info(device_, &info), METILE_ERROR_INVALID_ARGUMENT,
                         "struct_size"));
  metile_program* p = build_scale();
  metile_compile_options o;
  metile_compile_options_init(&o);
  o.struct_size = 4;
  metile_kernel* k = nullptr;
  EXPECT_TRUE(fails_with(metile_kernel_compile(&k, device_, p, &o), METILE_ERROR_INVALID_ARGUMENT,
                         "struct_size"));
  EXPECT_EQ(k, nullptr);
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

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
    std::string name = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
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
  for (int d : {0, 10, 257}) {
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
}

TEST_F(BuilderErrors, BadParameters) {
  metile_value v;
  metile_type tile = scalar(METILE_DTYPE_F32);
  tile.rank = 1;
  tile.shape[0] = 16;
  EXPECT_TRUE(fails_with(metile_builder_param(b_, "t", &tile, &v), METILE_ERROR_INVALID_ARGUMENT,
                         "scalar or pointer"));
  for (int d : {0, 10, 257}) {
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
  EXPECT_TRUE(fails_with(metile_builder_finish(b_, &p), METILE_ERROR_INVALID_PROGRAM, "loop.py:12"));
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

TEST(Program, ParseErrorsAreInvalidProgramWithALine) {
  metile_program* p = nullptr;
  EXPECT_TRUE(fails_with(metile_program_parse(&p, "kernel @k() {\n  %1 = frobnicate\n}\n"),
                         METILE_ERROR_INVALID_PROGRAM, "line 2"));
  EXPECT_NE(last_error().find("[parse]"), std::string::npos) << last_error();
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(fails_with(metile_program_parse(&p, ""), METILE_ERROR_INVALID_PROGRAM, "[parse]"));
}

}  // namespace

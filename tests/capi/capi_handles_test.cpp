// Handle validation through the shared library: NULL, released, foreign and wrong-kind handles
// of every kind are rejected with METILE_ERROR_INVALID_ARGUMENT naming the call, are never
// dereferenced (the handle table), and leave live handles intact.
#include <metile/metile.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "capi_util.h"

namespace METILE_UNITY_ID {

using namespace metile_capi_test;

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
  /** Compiles p with the options `set` writes over the defaults; the kernel is released. */
  metile_status compile_with(metile_program* p, const std::function<void(metile_compile_options&)>& set) {
    metile_compile_options o;
    metile_compile_options_init(&o);
    set(o);
    metile_kernel* k = nullptr;
    metile_status st = metile_kernel_compile(&k, device_, p, &o);
    if (k != nullptr) { EXPECT_EQ(metile_kernel_release(k), METILE_OK); }
    return st;
  }
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
  // Shorter than the struct before `ordinal` (what an older header's caller passes).
  info.struct_size = offsetof(metile_device_info, ordinal) - 1;
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

TEST_F(DeviceHandles, OptLevelOutsideZeroOrOneIsRejected) {
  metile_program* p = build_scale();
  for (int32_t level : {-1, 2, 3}) {
    metile_compile_options o;
    metile_compile_options_init(&o);
    o.opt_level = level;
    metile_kernel* k = nullptr;
    EXPECT_TRUE(fails_with(metile_kernel_compile(&k, device_, p, &o), METILE_ERROR_INVALID_ARGUMENT,
                           "opt_level must be 0 or 1, got " + std::to_string(level)));
    EXPECT_EQ(k, nullptr);
  }
  for (int32_t level : {0, 1}) {
    metile_compile_options o;
    metile_compile_options_init(&o);
    o.opt_level = level;
    metile_kernel* k = nullptr;
    ASSERT_EQ(metile_kernel_compile(&k, device_, p, &o), METILE_OK) << last_error();
    EXPECT_EQ(metile_kernel_release(k), METILE_OK);
  }
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST_F(DeviceHandles, PipelineStagesAndWarpGridAreChecked) {
  metile_program* p = build_scale();
  auto compile = [&](int32_t stages, int32_t wm, int32_t wn) {
    return compile_with(p, [&](metile_compile_options& o) {
      o.num_stages = stages;
      o.warps_m = wm;
      o.warps_n = wn;
    });
  };
  EXPECT_TRUE(fails_with(compile(-1, 0, 0), METILE_ERROR_INVALID_ARGUMENT, "num_stages -1 is out of range"));
  EXPECT_TRUE(fails_with(compile(9, 0, 0), METILE_ERROR_INVALID_ARGUMENT, "num_stages 9 is out of range"));
  EXPECT_TRUE(fails_with(compile(0, 33, 1), METILE_ERROR_INVALID_ARGUMENT, "warps_m 33 is out of range"));
  EXPECT_TRUE(fails_with(compile(0, 2, -1), METILE_ERROR_INVALID_ARGUMENT, "warps_n -1 is out of range"));
  EXPECT_TRUE(fails_with(compile(0, 2, 0), METILE_ERROR_INVALID_ARGUMENT,
                         "warps_m 2 and warps_n 0: set both (a warp grid) or neither"));
  for (int32_t stages : {0, 1, 2, 8}) EXPECT_EQ(compile(stages, 0, 0), METILE_OK) << last_error();
  EXPECT_EQ(compile(0, 2, 2), METILE_OK) << last_error();  // no dot: nothing to tile
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST_F(DeviceHandles, SplitKIsChecked) {
  metile_program* p = build_scale();
  auto compile = [&](int32_t split_k) {
    return compile_with(p, [&](metile_compile_options& o) { o.split_k = split_k; });
  };
  EXPECT_TRUE(fails_with(compile(-1), METILE_ERROR_INVALID_ARGUMENT, "split_k -1 is out of range"));
  EXPECT_TRUE(fails_with(compile(65), METILE_ERROR_INVALID_ARGUMENT, "split_k 65 is out of range"));
  for (int32_t n : {0, 1, 2, 64}) EXPECT_EQ(compile(n), METILE_OK) << last_error();  // no K loop: ignored
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

TEST_F(DeviceHandles, MaxnregIsChecked) {
  metile_program* p = build_scale();
  auto compile = [&](int32_t maxnreg, size_t struct_size) {
    return compile_with(p, [&](metile_compile_options& o) {
      o.maxnreg = maxnreg;
      o.struct_size = struct_size;
    });
  };
  const size_t full = sizeof(metile_compile_options);
  EXPECT_TRUE(fails_with(compile(-1, full), METILE_ERROR_INVALID_ARGUMENT, "maxnreg -1 is out of range"));
  EXPECT_TRUE(fails_with(compile(15, full), METILE_ERROR_INVALID_ARGUMENT, "maxnreg 15 is out of range"));
  EXPECT_TRUE(fails_with(compile(256, full), METILE_ERROR_INVALID_ARGUMENT, "maxnreg 256 is out of range"));
  for (int32_t n : {0, 16, 96, 255}) EXPECT_EQ(compile(n, full), METILE_OK) << last_error();  // host: ignored
  // A caller built before the field existed passes a shorter struct: the field is not read.
  EXPECT_EQ(compile(-1, offsetof(metile_compile_options, maxnreg)), METILE_OK) << last_error();
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

}  // namespace

// metile_launch_set_arg_memory: re-pointing a prepared launch at fresh host memory without a
// buffer handle (what the Python binding does for a new numpy array of a seen shape).
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <cstdint>
#include <vector>

#include "capi_util.h"

namespace METILE_UNITY_ID {

using namespace metile_capi_test;

TEST(LaunchMemory, ReRunsOverFreshHostMemoryOnEveryHostDevice) {
  for (const char* name : {"interp", "cpu", "metal-sim"}) {
    metile_device* d = nullptr;
    if (metile_device_open(&d, name) != METILE_OK) continue;
    metile_program* p = build_scale();  // Y[i] = alpha * X[i] for i < n, 64 per program
    metile_kernel* k = nullptr;
    ASSERT_EQ(metile_kernel_compile(&k, d, p, nullptr), METILE_OK) << last_error();
    std::vector<float> x0(64, 1.0f), y0(64, 0.0f);
    metile_buffer *bx = nullptr, *by = nullptr;
    ASSERT_EQ(metile_buffer_wrap(&bx, d, x0.data(), 256), METILE_OK);
    ASSERT_EQ(metile_buffer_wrap(&by, d, y0.data(), 256), METILE_OK);
    metile_arg args[4] = {};
    args[0].kind = METILE_ARG_BUFFER;
    args[0].buffer = bx;
    args[1].kind = METILE_ARG_BUFFER;
    args[1].buffer = by;
    args[2].kind = METILE_ARG_F64;
    args[2].f = 3.0;
    args[3].kind = METILE_ARG_I64;
    args[3].i = 64;
    const uint32_t grid[3] = {1, 1, 1};
    metile_launch* l = nullptr;
    ASSERT_EQ(metile_launch_create(&l, k, grid, args, 4), METILE_OK) << last_error();
    metile_buffer_release(bx);
    metile_buffer_release(by);
    for (int round = 1; round <= 3; ++round) {
      std::vector<float> x(64), y(64, -1.0f);
      for (int i = 0; i < 64; ++i) x[i] = float(i * round);
      ASSERT_EQ(metile_launch_set_arg_memory(l, 0, x.data(), 256), METILE_OK) << last_error();
      ASSERT_EQ(metile_launch_set_arg_memory(l, 1, y.data(), 256), METILE_OK) << last_error();
      ASSERT_EQ(metile_launch_run(l), METILE_OK) << last_error();
      ASSERT_EQ(metile_device_synchronize(d), METILE_OK);
      for (int i = 0; i < 64; ++i) ASSERT_EQ(y[i], 3.0f * float(i * round)) << name << " " << i;
      // Re-point before the vectors go out of scope.
      ASSERT_EQ(metile_launch_set_arg_memory(l, 0, x0.data(), 256), METILE_OK);
      ASSERT_EQ(metile_launch_set_arg_memory(l, 1, y0.data(), 256), METILE_OK);
    }
    EXPECT_TRUE(fails_with(metile_launch_set_arg_memory(l, 2, x0.data(), 4),
                           METILE_ERROR_INVALID_ARGUMENT, "`alpha` is a scalar"));
    EXPECT_TRUE(fails_with(metile_launch_set_arg_memory(l, 4, x0.data(), 4),
                           METILE_ERROR_INVALID_ARGUMENT, "out of range"));
    EXPECT_TRUE(fails_with(metile_launch_set_arg_memory(l, 0, nullptr, 4),
                           METILE_ERROR_INVALID_ARGUMENT, "host"));
    EXPECT_TRUE(fails_with(metile_launch_set_arg_memory(l, 0, x0.data(), 0),
                           METILE_ERROR_INVALID_ARGUMENT, "size"));
    EXPECT_TRUE(fails_with(metile_launch_set_arg_memory(l, 0, x0.data(), SIZE_MAX),
                           METILE_ERROR_INVALID_ARGUMENT, "address space"));
    EXPECT_TRUE(fails_with(metile_launch_set_arg_memory(nullptr, 0, x0.data(), 4),
                           METILE_ERROR_INVALID_ARGUMENT, "launch"));
    // Host devices have no GPU memory to point at (cuda: tests/cuda_standin).
    EXPECT_TRUE(fails_with(metile_launch_set_arg_device_memory(
                               l, 0, reinterpret_cast<uint64_t>(x0.data()), 256),
                           METILE_ERROR_UNSUPPORTED, "has no device memory of its own"));
    metile_launch_release(l);
    // An integer argument's value must fit the kind it claims, whatever the parameter (`n` is
    // i32 and could hold -5; a U32 of -5 is still a caller bug).
    ASSERT_EQ(metile_buffer_wrap(&bx, d, x0.data(), 256), METILE_OK);
    ASSERT_EQ(metile_buffer_wrap(&by, d, y0.data(), 256), METILE_OK);
    args[0].buffer = bx;
    args[1].buffer = by;
    args[3].kind = METILE_ARG_U32;
    args[3].i = -5;
    EXPECT_TRUE(fails_with(metile_launch_create(&l, k, grid, args, 4),
                           METILE_ERROR_INVALID_ARGUMENT, "value -5 is not a u32"));
    args[3].i = int64_t{1} << 32;
    EXPECT_TRUE(fails_with(metile_launch_create(&l, k, grid, args, 4),
                           METILE_ERROR_INVALID_ARGUMENT, "is not a u32"));
    args[3].kind = METILE_ARG_I32;
    args[3].i = int64_t{1} << 31;
    EXPECT_TRUE(fails_with(metile_launch_create(&l, k, grid, args, 4),
                           METILE_ERROR_INVALID_ARGUMENT, "is not a i32"));
    args[3].i = -5;  // fits i32 and the parameter
    ASSERT_EQ(metile_launch_create(&l, k, grid, args, 4), METILE_OK) << last_error();
    metile_launch_release(l);
    args[3].kind = METILE_ARG_U32;
    args[3].i = 64;
    ASSERT_EQ(metile_launch_create(&l, k, grid, args, 4), METILE_OK) << last_error();
    metile_launch_release(l);
    metile_buffer_release(bx);
    metile_buffer_release(by);
    metile_kernel_release(k);
    metile_program_release(p);
    metile_device_release(d);
  }
}

}  // namespace

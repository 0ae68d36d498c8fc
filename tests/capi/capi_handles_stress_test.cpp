// Handles under reuse and concurrency: a released handle stays invalid after a new object takes
// its place, and a handle released on one thread while another uses it gives that call either a
// result or METILE_ERROR_INVALID_ARGUMENT, never a use-after-free (the ASan build runs these).
#include <metile/metile.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "capi_util.h"

namespace METILE_UNITY_ID {

using namespace metile_capi_test;

class HandleStress : public ::testing::Test {
 protected:
  void SetUp() override {
    if (metile_device_open(&device_, "interp") != METILE_OK)
      GTEST_SKIP() << "no interp device in this build: " << metile_last_error();
  }
  void TearDown() override { metile_device_release(device_); }
  metile_device* device_ = nullptr;
};

bool ok_or_invalid(metile_status s) { return s == METILE_OK || s == METILE_ERROR_INVALID_ARGUMENT; }

TEST_F(HandleStress, StaleHandleIsRejectedAfterItsSlotIsReused) {
  for (int i = 0; i < 1000; ++i) {
    metile_buffer *old_b = nullptr, *new_b = nullptr;
    ASSERT_EQ(metile_buffer_alloc(&old_b, device_, 64), METILE_OK) << last_error();
    ASSERT_EQ(metile_buffer_release(old_b), METILE_OK);
    ASSERT_EQ(metile_buffer_alloc(&new_b, device_, 4096), METILE_OK) << last_error();
    ASSERT_NE(old_b, new_b);
    size_t size = 0;
    ASSERT_EQ(metile_buffer_size(old_b, &size), METILE_ERROR_INVALID_ARGUMENT);
    ASSERT_EQ(metile_buffer_release(old_b), METILE_ERROR_INVALID_ARGUMENT);
    ASSERT_EQ(metile_buffer_size(new_b, &size), METILE_OK);
    ASSERT_EQ(size, 4096u);
    ASSERT_EQ(metile_buffer_release(new_b), METILE_OK);
  }
}

// Readers query whatever kernel is current while the main thread compiles a replacement and
// releases the old one (the reviewed heap-use-after-free in metile_kernel_get_info).
TEST_F(HandleStress, KernelReleasedWhileOtherThreadsUseIt) {
  metile_program* p = build_scale();
  metile_kernel* first = nullptr;
  ASSERT_EQ(metile_kernel_compile(&first, device_, p, nullptr), METILE_OK) << last_error();
  std::atomic<metile_kernel*> current{first};
  std::atomic<bool> done{false};
  std::atomic<long> bad{0}, ok{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      while (!done.load()) {
        metile_kernel_info info{};
        info.struct_size = sizeof info;
        metile_status s = metile_kernel_get_info(current.load(), &info);
        char* src = nullptr;
        metile_status s2 = metile_kernel_source(current.load(), "tile_ir", &src);
        metile_free(src);
        if (!ok_or_invalid(s) || !ok_or_invalid(s2)) ++bad;
        if (s == METILE_OK) ++ok;
      }
    });
  for (int i = 0; i < 2000; ++i) {
    metile_kernel* next = nullptr;
    ASSERT_EQ(metile_kernel_compile(&next, device_, p, nullptr), METILE_OK) << last_error();
    metile_kernel* old = current.exchange(next);
    ASSERT_EQ(metile_kernel_release(old), METILE_OK);
  }
  done = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(metile_kernel_release(current.load()), METILE_OK);
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

// Launches run while another thread releases the buffers and the kernel they name: each launch
// either runs on live objects or is refused.
TEST_F(HandleStress, BuffersAndKernelsReleasedDuringLaunches) {
  metile_program* p = build_scale();
  std::atomic<metile_kernel*> kernel{nullptr};
  std::atomic<metile_buffer*> x{nullptr}, y{nullptr};
  auto fresh = [&] {
    metile_kernel* k = nullptr;
    metile_buffer *bx = nullptr, *by = nullptr;
    EXPECT_EQ(metile_kernel_compile(&k, device_, p, nullptr), METILE_OK) << last_error();
    EXPECT_EQ(metile_buffer_alloc(&bx, device_, 64 * sizeof(float)), METILE_OK);
    EXPECT_EQ(metile_buffer_alloc(&by, device_, 64 * sizeof(float)), METILE_OK);
    metile_kernel_release(kernel.exchange(k));
    metile_buffer_release(x.exchange(bx));
    metile_buffer_release(y.exchange(by));
  };
  fresh();
  std::atomic<bool> done{false};
  std::atomic<long> bad{0};
  std::vector<std::thread> launchers;
  for (int t = 0; t < 2; ++t)
    launchers.emplace_back([&] {
      uint32_t grid[3] = {1, 1, 1};
      while (!done.load()) {
        metile_arg args[4] = {};
        args[0].kind = METILE_ARG_BUFFER;
        args[0].buffer = x.load();
        args[1].kind = METILE_ARG_BUFFER;
        args[1].buffer = y.load();
        args[2].kind = METILE_ARG_F32;
        args[2].f = 2.0;
        args[3].kind = METILE_ARG_I32;
        args[3].i = 64;
        if (!ok_or_invalid(metile_kernel_launch(kernel.load(), grid, args, 4))) ++bad;
        metile_launch* l = nullptr;
        metile_status s = metile_launch_create(&l, kernel.load(), grid, args, 4);
        if (!ok_or_invalid(s)) ++bad;
        if (s == METILE_OK) {
          if (metile_launch_run(l) != METILE_OK) ++bad;
          if (metile_launch_release(l) != METILE_OK) ++bad;
        }
      }
    });
  for (int i = 0; i < 500; ++i) fresh();
  done = true;
  for (auto& t : launchers) t.join();
  EXPECT_EQ(bad.load(), 0) << last_error();
  metile_kernel_release(kernel.load());
  metile_buffer_release(x.load());
  metile_buffer_release(y.load());
  EXPECT_EQ(metile_program_release(p), METILE_OK);
}

// Retains and releases from many threads balance exactly: the handle dies at the last release.
TEST_F(HandleStress, ConcurrentRetainReleaseBalances) {
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, device_, 16), METILE_OK);
  std::vector<std::thread> threads;
  std::atomic<long> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        if (metile_buffer_retain(b) != METILE_OK) ++bad;
        size_t size = 0;
        if (metile_buffer_size(b, &size) != METILE_OK || size != 16) ++bad;
        if (metile_buffer_release(b) != METILE_OK) ++bad;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_EQ(metile_buffer_release(b), METILE_OK);
  size_t size = 0;
  EXPECT_EQ(metile_buffer_size(b, &size), METILE_ERROR_INVALID_ARGUMENT);
}

}  // namespace

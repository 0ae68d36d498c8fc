// The cuda device on the stand-in driver (cuda_driver.cpp: two GPUs or
// $METILE_STANDIN_CUDA_DEVICES, kernels that complete at
// once or, named "hang...", never): device indices, buffers of one GPU refused on the other,
// launches on created streams, events, and the watchdog that stops a kernel past its time limit
// through its stop word's copy in GPU memory (nothing is reset; metile_cancel_launches stops a
// running kernel the same way, and the copy is cleared before the word serves another launch)
// or, for a kernel that never checks it, by resetting the GPU, after which the device
// compiles and launches again while what it made before is reported gone. Kernels are compiled
// for real by NVRTC; the test skips without it.
#include <metile/metile.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Each instance stores 1 to X[0 .. 31]; the program's name is the CUDA kernel's.
std::string ones(const std::string& name) {
  return "kernel @" + name + R"((%X: ptr<f32>) {
  %0 = const {value = 0} : i32
  %1 = arange %0 {size = 32} : tile<32xi32>
  %2 = ptr_offset %X, %1 : tile<32xptr<f32>>
  %3 = const {value = 1.0} : f32
  store %2, %3
}
)";
}

class CudaStandin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(metile_cache_set_enabled(0), METILE_OK);
    if (metile_device_open(&gpu0_, "cuda") != METILE_OK) {
      std::string why = metile_last_error();
      ASSERT_TRUE(has(why, "NVRTC")) << "the stand-in driver did not load: " << why;
      GTEST_SKIP() << why;
    }
  }
  void TearDown() override { metile_device_release(gpu0_); }

  metile_kernel* compile(metile_device* d, const std::string& name) {
    metile_program* p = nullptr;
    EXPECT_EQ(metile_program_parse(&p, ones(name).c_str()), METILE_OK) << metile_last_error();
    metile_kernel* k = nullptr;
    EXPECT_EQ(metile_kernel_compile(&k, d, p, nullptr), METILE_OK) << metile_last_error();
    metile_program_release(p);
    return k;
  }
  metile_launch* prepare(metile_kernel* k, metile_buffer* b) {
    const uint32_t grid[3] = {4, 1, 1};
    metile_arg a = METILE_ARG_BUFFER_INIT(b);
    metile_launch* l = nullptr;
    EXPECT_EQ(metile_launch_create(&l, k, grid, &a, 1), METILE_OK) << metile_last_error();
    return l;
  }
  /** `k` on `b`, asynchronously, with a time limit of `seconds`. */
  metile_launch* run_limited(metile_kernel* k, metile_buffer* b, double seconds) {
    metile_launch* l = prepare(k, b);
    metile_launch_options o = METILE_LAUNCH_OPTIONS_INIT;
    o.timeout_s = seconds;
    EXPECT_EQ(metile_launch_set_options(l, &o), METILE_OK);
    EXPECT_EQ(metile_launch_run(l), METILE_OK) << metile_last_error();
    return l;
  }
  /** What a device made before a stop: a buffer, a stream and an event. */
  struct Made {
    metile_buffer* buffer = nullptr;
    uint64_t stream = 0;
    metile_event* event = nullptr;
  };
  Made make_some() {
    Made m;
    EXPECT_EQ(metile_buffer_alloc(&m.buffer, gpu0_, 128), METILE_OK);
    EXPECT_EQ(metile_stream_create(gpu0_, &m.stream), METILE_OK);
    EXPECT_EQ(metile_event_create(&m.event, gpu0_), METILE_OK);
    return m;
  }

  metile_device* gpu0_ = nullptr;
};

TEST_F(CudaStandin, DeviceIndices) {
  metile_device* d = nullptr;
  ASSERT_EQ(metile_device_open(&d, "cuda:2"), METILE_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_TRUE(has(metile_last_error(), "cuda:2 does not exist: this machine has 2 CUDA devices (cuda:0 to cuda:1)"))
      << metile_last_error();
  metile_device_info info = METILE_DEVICE_INFO_INIT;
  ASSERT_EQ(metile_device_open(&d, "cuda:1"), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_device_get_info(d, &info), METILE_OK);
  EXPECT_EQ(info.ordinal, 1);
  EXPECT_STREQ(info.name, "cuda");
  EXPECT_STREQ(info.description, "stand-in GPU 1");
  metile_device_release(d);
  ASSERT_EQ(metile_device_open(&d, "cuda:0"), METILE_OK);
  ASSERT_EQ(metile_device_get_info(d, &info), METILE_OK);
  EXPECT_EQ(info.ordinal, 0);
  EXPECT_STREQ(info.description, "stand-in GPU 0");
  metile_device_release(d);
}

// ctest runs this twice: with the stand-in's two GPUs and with METILE_STANDIN_CUDA_DEVICES=4.
TEST_F(CudaStandin, DeviceCountAndTheIndexPastTheLast) {
  const char* env = std::getenv("METILE_STANDIN_CUDA_DEVICES");
  const int gpus = env ? std::atoi(env) : 2;
  int32_t n = -1;
  ASSERT_EQ(metile_device_count("cuda", &n), METILE_OK) << metile_last_error();
  EXPECT_EQ(n, gpus);
  ASSERT_EQ(metile_device_count("interp", &n), METILE_OK);
  EXPECT_EQ(n, 1);
  metile_device* d = nullptr;
  const std::string last = "cuda:" + std::to_string(gpus - 1);
  ASSERT_EQ(metile_device_open(&d, last.c_str()), METILE_OK) << metile_last_error();
  metile_device_info info = METILE_DEVICE_INFO_INIT;
  ASSERT_EQ(metile_device_get_info(d, &info), METILE_OK);
  EXPECT_EQ(info.ordinal, gpus - 1);
  metile_device_release(d);
  const std::string past = "cuda:" + std::to_string(gpus);
  ASSERT_EQ(metile_device_open(&d, past.c_str()), METILE_ERROR_DEVICE_UNAVAILABLE);
  EXPECT_TRUE(has(metile_last_error(), past + " does not exist: this machine has " + std::to_string(gpus) +
                                           " CUDA devices (cuda:0 to " + last + ")"))
      << metile_last_error();
  for (const char* bad : {"gpu", "cuda:1", "", "cuda "}) {
    ASSERT_EQ(metile_device_count(bad, &n), METILE_ERROR_INVALID_ARGUMENT) << bad;
    EXPECT_TRUE(has(metile_last_error(), "unknown device kind")) << metile_last_error();
  }
  EXPECT_EQ(metile_device_count(nullptr, &n), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_device_count("cuda", nullptr), METILE_ERROR_INVALID_ARGUMENT);
  for (const char* bad : {"gpu", "cuda:-1", "cuda:x", "GPU:0"})
    EXPECT_EQ(metile_device_open(&d, bad), METILE_ERROR_INVALID_ARGUMENT) << bad;
}

TEST_F(CudaStandin, AStreamOfOneGpuIsRefusedOnTheOther) {
  metile_device* gpu1 = nullptr;
  ASSERT_EQ(metile_device_open(&gpu1, "cuda:1"), METILE_OK);
  metile_kernel* k = compile(gpu0_, "ones");
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, gpu0_, 128), METILE_OK);
  uint64_t s1 = 0;
  ASSERT_EQ(metile_stream_create(gpu1, &s1), METILE_OK);
  metile_launch* l = prepare(k, b);
  metile_launch_options o = METILE_LAUNCH_OPTIONS_INIT;
  o.stream = s1;
  ASSERT_EQ(metile_launch_set_options(l, &o), METILE_OK);
  ASSERT_EQ(metile_launch_run(l), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "belongs to cuda:1, but this launch or event is on cuda:0"))
      << metile_last_error();
  metile_event* e0 = nullptr;
  ASSERT_EQ(metile_event_create(&e0, gpu0_), METILE_OK);
  ASSERT_EQ(metile_event_record(e0, s1), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "belongs to cuda:1")) << metile_last_error();
  // Its own GPU's events and launches take it.
  metile_event *start = nullptr, *end = nullptr;
  ASSERT_EQ(metile_event_create(&start, gpu1), METILE_OK);
  ASSERT_EQ(metile_event_create(&end, gpu1), METILE_OK);
  ASSERT_EQ(metile_event_record(start, s1), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_event_record(end, s1), METILE_OK) << metile_last_error();
  double ms = 0;
  ASSERT_EQ(metile_event_elapsed_ms(start, end, &ms), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_event_record(e0, 0), METILE_OK);
  ASSERT_EQ(metile_event_elapsed_ms(e0, end, &ms), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "different devices (cuda:0 and cuda:1)")) << metile_last_error();
  // The default streams are every GPU's own; a destroyed stream is no stream at all.
  o.stream = 2;
  ASSERT_EQ(metile_launch_set_options(l, &o), METILE_OK);
  EXPECT_EQ(metile_launch_run(l), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_stream_destroy(gpu1, s1), METILE_OK);
  o.stream = s1;
  ASSERT_EQ(metile_launch_set_options(l, &o), METILE_OK);
  ASSERT_EQ(metile_launch_run(l), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "is not a live CUDA stream (cuStreamGetCtx: CUDA_ERROR_INVALID_HANDLE)"))
      << metile_last_error();
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_OK) << metile_last_error();
  metile_event_release(e0);
  metile_event_release(start);
  metile_event_release(end);
  metile_launch_release(l);
  metile_buffer_release(b);
  metile_kernel_release(k);
  metile_device_release(gpu1);
}

TEST_F(CudaStandin, ABufferOfOneGpuIsRefusedOnTheOther) {
  metile_device* gpu1 = nullptr;
  ASSERT_EQ(metile_device_open(&gpu1, "cuda:1"), METILE_OK);
  metile_kernel* k = compile(gpu1, "ones");
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, gpu0_, 128), METILE_OK);
  const uint32_t grid[3] = {1, 1, 1};
  metile_arg a = METILE_ARG_BUFFER_INIT(b);
  ASSERT_EQ(metile_kernel_launch(k, grid, &a, 1), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "the buffer belongs to device cuda:0, the kernel ones runs on cuda:1"))
      << metile_last_error();
  metile_buffer* mine = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&mine, gpu1, 128), METILE_OK);
  a.buffer = mine;
  EXPECT_EQ(metile_kernel_launch(k, grid, &a, 1), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_device_synchronize(gpu1), METILE_OK);
  metile_buffer_release(mine);
  metile_buffer_release(b);
  metile_kernel_release(k);
  metile_device_release(gpu1);
}

// A launch argument pointed at raw GPU memory (a torch tensor's data pointer, say) must lie inside
// one allocation of the launch's GPU; anything else is refused naming the address.
TEST_F(CudaStandin, DeviceMemoryArgumentsMustLieInsideOneAllocationOfTheGpu) {
  metile_kernel* k = compile(gpu0_, "ones");
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, gpu0_, 256), METILE_OK);
  void* mem = nullptr;
  ASSERT_EQ(metile_buffer_contents(b, &mem), METILE_OK);  // managed: the device address too
  const uint64_t at = reinterpret_cast<uint64_t>(mem);
  metile_launch* l = prepare(k, b);
  EXPECT_EQ(metile_launch_set_arg_device_memory(l, 0, at + 64, 128), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_launch_run(l), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_OK);
  EXPECT_EQ(metile_launch_set_arg_device_memory(l, 0, at + 64, 256), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "run past the end of their allocation (256 bytes at 0x"))
      << metile_last_error();
  int on_the_stack = 0;
  EXPECT_EQ(metile_launch_set_arg_device_memory(l, 0, reinterpret_cast<uint64_t>(&on_the_stack), 4),
            METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "is not in any allocation of GPU memory")) << metile_last_error();
  EXPECT_EQ(metile_launch_set_arg_device_memory(l, 0, 0, 4), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_launch_set_arg_device_memory(l, 0, at, 0), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_launch_set_arg_device_memory(l, 1, at, 4), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "argument index 1 out of range")) << metile_last_error();
  metile_device* gpu1 = nullptr;
  ASSERT_EQ(metile_device_open(&gpu1, "cuda:1"), METILE_OK);
  metile_buffer* other = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&other, gpu1, 64), METILE_OK);
  void* other_mem = nullptr;
  ASSERT_EQ(metile_buffer_contents(other, &other_mem), METILE_OK);
  EXPECT_EQ(metile_launch_set_arg_device_memory(l, 0, reinterpret_cast<uint64_t>(other_mem), 64),
            METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "belongs to cuda:1, the device is cuda:0")) << metile_last_error();
  metile_buffer_release(other);
  metile_device_release(gpu1);
  metile_launch_release(l);
  metile_kernel_release(k);
  metile_buffer_release(b);
}

TEST_F(CudaStandin, StreamsAndEvents) {
  metile_kernel* k = compile(gpu0_, "ones");
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, gpu0_, 128), METILE_OK);
  uint64_t s = 0, own = 0;
  ASSERT_EQ(metile_stream_create(gpu0_, &s), METILE_OK);
  ASSERT_EQ(metile_device_stream(gpu0_, &own), METILE_OK);
  EXPECT_NE(s, 0u);
  EXPECT_NE(s, own);
  metile_launch* l = prepare(k, b);
  metile_launch_options o = METILE_LAUNCH_OPTIONS_INIT;
  o.stream = s;
  ASSERT_EQ(metile_launch_set_options(l, &o), METILE_OK);
  metile_event *start = nullptr, *end = nullptr;
  ASSERT_EQ(metile_event_create(&start, gpu0_), METILE_OK);
  ASSERT_EQ(metile_event_create(&end, gpu0_), METILE_OK);
  double ms = 0;
  ASSERT_EQ(metile_event_elapsed_ms(start, end, &ms), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "both events recorded")) << metile_last_error();
  ASSERT_EQ(metile_event_record(start, s), METILE_OK);
  ASSERT_EQ(metile_launch_run(l), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_event_record(end, s), METILE_OK);
  ASSERT_EQ(metile_event_synchronize(end), METILE_OK);
  ASSERT_EQ(metile_event_elapsed_ms(start, end, &ms), METILE_OK) << metile_last_error();
  EXPECT_EQ(ms, 0.25);  // the stand-in's answer, passed through
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_OK);
  metile_launch_release(l);
  EXPECT_EQ(metile_stream_destroy(gpu0_, s), METILE_OK);
  ASSERT_EQ(metile_stream_destroy(gpu0_, s), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "is not one this cuda:0 device created")) << metile_last_error();
  metile_event_release(start);
  metile_event_release(end);
  metile_buffer_release(b);
  metile_kernel_release(k);
}

// A kernel past its limit leaves at its loop's next check: the wait reports the stop once, nothing
// is reset, and what the device made before keeps working.
TEST_F(CudaStandin, WatchdogStopsAKernelPastItsLimitAndNothingIsReset) {
  metile_kernel* normal = compile(gpu0_, "ones");
  metile_kernel* hang = compile(gpu0_, "hang_forever");
  auto [old, old_stream, old_event] = make_some();
  metile_launch* l = run_limited(hang, old, 0.3);
  ASSERT_EQ(metile_device_synchronize(gpu0_), METILE_ERROR_DEVICE);
  std::string e = metile_last_error();
  EXPECT_TRUE(has(e, "kernel hang_forever did not finish within 0.3 s (the launch's timeout) and "
                     "was stopped; its outputs are partly written")) << e;
  EXPECT_FALSE(has(e, "reset")) << e;
  metile_launch_release(l);
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_OK) << metile_last_error();  // reported once

  // What was made before still works: the buffer, the stream, the event.
  void* p = nullptr;
  ASSERT_EQ(metile_buffer_contents(old, &p), METILE_OK) << metile_last_error();
  metile_launch* on_old_stream = prepare(normal, old);
  metile_launch_options o = METILE_LAUNCH_OPTIONS_INIT;
  o.stream = old_stream;
  ASSERT_EQ(metile_launch_set_options(on_old_stream, &o), METILE_OK);
  ASSERT_EQ(metile_launch_run(on_old_stream), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_event_record(old_event, old_stream), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_event_synchronize(old_event), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_OK) << metile_last_error();
  metile_launch_release(on_old_stream);
  EXPECT_EQ(metile_stream_destroy(gpu0_, old_stream), METILE_OK) << metile_last_error();
  metile_event_release(old_event);
  metile_buffer_release(old);
  metile_kernel_release(hang);
  metile_kernel_release(normal);
}

TEST_F(CudaStandin, CancelStopsARunningKernelDuringABlockingWait) {
  metile_kernel* normal = compile(gpu0_, "ones");
  metile_kernel* hang = compile(gpu0_, "hang_until_cancelled");
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, gpu0_, 128), METILE_OK);
  // A cancel with nothing running stops nothing launched afterwards.
  metile_cancel_launches();
  metile_launch* before = prepare(normal, b);
  ASSERT_EQ(metile_launch_run(before), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_device_synchronize(gpu0_), METILE_OK) << metile_last_error();
  metile_launch_release(before);

  metile_launch* l = prepare(hang, b);  // no time limit: synchronize blocks in the driver
  ASSERT_EQ(metile_launch_run(l), METILE_OK) << metile_last_error();
  std::thread canceller([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    metile_cancel_launches();
  });
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_ERROR_DEVICE);
  canceller.join();
  std::string e = metile_last_error();
  EXPECT_TRUE(has(e, "kernel hang_until_cancelled (the last launched) was cancelled "
                     "(metile_cancel_launches, e.g. Ctrl-C) and stopped; its outputs are partly "
                     "written")) << e;
  EXPECT_FALSE(has(e, "reset")) << e;
  metile_launch_release(l);

  // The device runs again on the buffer made before.
  metile_launch* again = prepare(normal, b);
  ASSERT_EQ(metile_launch_run(again), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_OK) << metile_last_error();
  void* p = nullptr;
  EXPECT_EQ(metile_buffer_contents(b, &p), METILE_OK) << metile_last_error();
  metile_launch_release(again);
  metile_buffer_release(b);
  metile_kernel_release(hang);
  metile_kernel_release(normal);
}

// A stop reaches the kernels through the stop word's copy in GPU memory, which the host clears
// before the word serves a launch again: after three cancels (the pool has handed out a stopped
// word again by then), a kernel runs until its time limit stops it.
TEST_F(CudaStandin, AStoppedWordIsClearedBeforeALaunchReadsItAgain) {
  metile_kernel* normal = compile(gpu0_, "ones");
  metile_kernel* hang = compile(gpu0_, "hang_again");
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, gpu0_, 128), METILE_OK);
  for (int round = 0; round < 3; ++round) {
    metile_launch* l = prepare(hang, b);
    ASSERT_EQ(metile_launch_run(l), METILE_OK) << metile_last_error();
    metile_cancel_launches();
    ASSERT_EQ(metile_device_synchronize(gpu0_), METILE_ERROR_DEVICE) << round;
    EXPECT_TRUE(has(metile_last_error(), "kernel hang_again (the last launched) was cancelled")) << metile_last_error();
    metile_launch_release(l);
    metile_launch* next = prepare(normal, b);  // takes a fresh word; the wait releases the old one
    ASSERT_EQ(metile_launch_run(next), METILE_OK) << metile_last_error();
    ASSERT_EQ(metile_device_synchronize(gpu0_), METILE_OK) << metile_last_error();
    metile_launch_release(next);
  }
  auto t0 = std::chrono::steady_clock::now();
  metile_launch* l = run_limited(hang, b, 0.3);
  ASSERT_EQ(metile_device_synchronize(gpu0_), METILE_ERROR_DEVICE);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string e = metile_last_error();
  EXPECT_TRUE(has(e, "kernel hang_again did not finish within 0.3 s (the launch's timeout) and was stopped")) << e;
  EXPECT_GE(waited, 0.3);
  metile_launch_release(l);
  metile_buffer_release(b);
  metile_kernel_release(hang);
  metile_kernel_release(normal);
}

// A kernel that answered its stop at once but whose grid takes 1.5 s more to leave (a huge grid
// of programs that each start, read the word and leave) is waited for, not reset.
TEST_F(CudaStandin, AKernelThatAnsweredGetsTimeForItsGridToLeave) {
  metile_kernel* hang = compile(gpu0_, "hang_drain");
  auto [old, old_stream, old_event] = make_some();
  auto t0 = std::chrono::steady_clock::now();
  metile_launch* l = run_limited(hang, old, 0.2);
  ASSERT_EQ(metile_device_synchronize(gpu0_), METILE_ERROR_DEVICE);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string e = metile_last_error();
  EXPECT_TRUE(has(e, "kernel hang_drain did not finish within 0.2 s (the launch's timeout) and was "
                     "stopped; its outputs are partly written")) << e;
  EXPECT_FALSE(has(e, "reset")) << e;
  EXPECT_GE(waited, 1.7);  // the limit, then the drain: past the 1 s grace of a silent kernel
  metile_launch_release(l);
  void* p = nullptr;
  EXPECT_EQ(metile_buffer_contents(old, &p), METILE_OK) << metile_last_error();
  metile_buffer_release(old);
  metile_event_release(old_event);
  EXPECT_EQ(metile_stream_destroy(gpu0_, old_stream), METILE_OK) << metile_last_error();
  metile_kernel_release(hang);
}

// Last in this file: it resets cuda:0, after which only what is made anew works.
TEST_F(CudaStandin, AKernelThatNeverChecksItsStopWordIsEndedByTheReset) {
  metile_kernel* normal = compile(gpu0_, "ones");
  metile_kernel* hang = compile(gpu0_, "hang_nopoll");
  auto [old, old_stream, old_event] = make_some();
  metile_launch* l = run_limited(hang, old, 0.2);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(metile_device_synchronize(gpu0_), METILE_ERROR_DEVICE);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string e = metile_last_error();
  EXPECT_TRUE(has(e, "kernel hang_nopoll did not finish within 0.2 s (the launch's timeout) and did "
                     "not stop when asked (within 1 s: it reached no check of its stop word)")) << e;
  EXPECT_TRUE(has(e, "the cuda:0 device was reset")) << e;
  EXPECT_GE(waited, 1.0);  // the limit, then the grace
  metile_launch_release(l);

  // What was made before is reported gone, not used.
  void* p = nullptr;
  ASSERT_EQ(metile_buffer_contents(old, &p), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "made before the cuda:0 device was reset")) << metile_last_error();
  ASSERT_EQ(metile_event_record(old_event, 0), METILE_ERROR_INVALID_ARGUMENT);
  metile_launch* stale = prepare(normal, old);
  ASSERT_EQ(metile_launch_run(stale), METILE_ERROR_INVALID_ARGUMENT);
  metile_launch_release(stale);
  metile_buffer* fresh = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&fresh, gpu0_, 128), METILE_OK);
  metile_launch* on_old_stream = prepare(normal, fresh);
  metile_launch_options o = METILE_LAUNCH_OPTIONS_INIT;
  o.stream = old_stream;
  ASSERT_EQ(metile_launch_set_options(on_old_stream, &o), METILE_OK);
  ASSERT_EQ(metile_launch_run(on_old_stream), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(has(metile_last_error(), "this stream was made before")) << metile_last_error();
  metile_launch_release(on_old_stream);
  EXPECT_EQ(metile_stream_destroy(gpu0_, old_stream), METILE_OK);  // the reset destroyed it

  // The device runs again: the kernel compiled before is loaded into the new context.
  metile_launch* again = prepare(normal, fresh);
  ASSERT_EQ(metile_launch_run(again), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_device_synchronize(gpu0_), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_buffer_contents(fresh, &p), METILE_OK);
  metile_launch_release(again);
  metile_event_release(old_event);
  metile_buffer_release(fresh);
  metile_buffer_release(old);
  metile_kernel_release(hang);
  metile_kernel_release(normal);
}

}  // namespace

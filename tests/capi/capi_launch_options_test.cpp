// Per-launch options, streams, events and device indices through the C API (issue 32 items 3
// and 4) on the host devices: a launch's own time limit, streams and events where launches
// finish before they return, "name:N" device names, and buffers of one device refused by a
// launch on another. tests/gpu/test_cuda_streams.py covers cuda on a GPU.
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "capi_util.h"

namespace METILE_UNITY_ID {

using namespace metile_capi_test;

// Each instance stores 1 to X[0 .. 31]; the grid says how many instances.
const char* kOnes = R"(kernel @ones(%X: ptr<f32>) {
  %0 = const {value = 0} : i32
  %1 = arange %0 {size = 32} : tile<32xi32>
  %2 = ptr_offset %X, %1 : tile<32xptr<f32>>
  %3 = const {value = 1.0} : f32
  store %2, %3
}
)";

// A device, the kernel compiled on it and a 32-float output buffer.
struct Ones {
  metile_device* dev = nullptr;
  metile_program* p = nullptr;
  metile_kernel* k = nullptr;
  metile_buffer* out = nullptr;
  explicit Ones(const char* device) {
    EXPECT_EQ(metile_device_open(&dev, device), METILE_OK) << metile_last_error();
    EXPECT_EQ(metile_program_parse(&p, kOnes), METILE_OK) << metile_last_error();
    EXPECT_EQ(metile_kernel_compile(&k, dev, p, nullptr), METILE_OK) << metile_last_error();
    EXPECT_EQ(metile_buffer_alloc(&out, dev, 32 * sizeof(float)), METILE_OK);
  }
  ~Ones() {
    metile_buffer_release(out);
    metile_kernel_release(k);
    metile_program_release(p);
    metile_device_release(dev);
  }
  metile_launch* prepare(uint32_t g0, uint32_t g1 = 1, uint32_t g2 = 1) {
    const uint32_t grid[3] = {g0, g1, g2};
    metile_arg a = METILE_ARG_BUFFER_INIT(out);
    metile_launch* l = nullptr;
    EXPECT_EQ(metile_launch_create(&l, k, grid, &a, 1), METILE_OK) << metile_last_error();
    return l;
  }
  float first() {
    void* p = nullptr;
    EXPECT_EQ(metile_buffer_contents(out, &p), METILE_OK);
    return static_cast<float*>(p)[0];
  }
};

const char* const kHostDevices[] = {"interp", "cpu", "metal-sim"};

TEST(LaunchOptions, OwnTimeoutStopsALaunchOnEveryHostDevice) {
  for (const char* device : kHostDevices) {
    Ones o(device);
    // 2^48 instances: only the limit ends it.
    metile_launch* huge = o.prepare(65536, 65536, 65536);
    metile_launch_options opts = METILE_LAUNCH_OPTIONS_INIT;
    opts.timeout_s = 0.3;
    ASSERT_EQ(metile_launch_set_options(huge, &opts), METILE_OK) << metile_last_error();
    EXPECT_TRUE(fails_with(metile_launch_run(huge), METILE_ERROR_DEVICE,
                           "kernel ones did not finish within 0.3 s (the launch's timeout)"))
        << device;
    metile_launch_release(huge);
    // The process stays usable: the next launch runs to the end.
    metile_launch* small = o.prepare(3);
    opts.timeout_s = 0;  // no limit
    ASSERT_EQ(metile_launch_set_options(small, &opts), METILE_OK);
    ASSERT_EQ(metile_launch_run(small), METILE_OK) << device << ": " << last_error();
    opts.timeout_s = INFINITY;  // no limit either
    ASSERT_EQ(metile_launch_set_options(small, &opts), METILE_OK);
    ASSERT_EQ(metile_launch_run(small), METILE_OK) << device << ": " << last_error();
    ASSERT_EQ(metile_launch_set_options(small, nullptr), METILE_OK);
    ASSERT_EQ(metile_launch_run(small), METILE_OK) << device << ": " << last_error();
    EXPECT_EQ(o.first(), 1.0f) << device;
    metile_launch_release(small);
  }
}

TEST(LaunchOptions, BadOptionsAreRefused) {
  Ones o("interp");
  metile_launch* l = o.prepare(1);
  metile_launch_options opts = METILE_LAUNCH_OPTIONS_INIT;
  opts.timeout_s = std::nan("");
  EXPECT_TRUE(fails_with(metile_launch_set_options(l, &opts), METILE_ERROR_INVALID_ARGUMENT, "NaN"));
  opts.timeout_s = -1;
  opts.struct_size = offsetof(metile_launch_options, stream);
  EXPECT_TRUE(fails_with(metile_launch_set_options(l, &opts), METILE_ERROR_INVALID_ARGUMENT,
                         "struct_size is too small"));
  EXPECT_TRUE(fails_with(metile_launch_set_options(nullptr, nullptr), METILE_ERROR_INVALID_ARGUMENT,
                         "metile_launch is NULL"));
  metile_launch_release(l);
}

TEST(LaunchOptions, StreamsAndEventsOnDevicesWithoutStreams) {
  for (const char* device : kHostDevices) {
    Ones o(device);
    uint64_t s = 0;
    ASSERT_EQ(metile_stream_create(o.dev, &s), METILE_OK) << metile_last_error();
    EXPECT_NE(s, 0u);
    metile_event *start = nullptr, *end = nullptr;
    ASSERT_EQ(metile_event_create(&start, o.dev), METILE_OK);
    ASSERT_EQ(metile_event_create(&end, o.dev), METILE_OK);
    double ms = -1;
    EXPECT_TRUE(fails_with(metile_event_elapsed_ms(start, end, &ms), METILE_ERROR_INVALID_ARGUMENT,
                           "both events recorded"));
    EXPECT_EQ(metile_event_synchronize(end), METILE_OK);  // never recorded: returns at once
    metile_launch* l = o.prepare(2);
    metile_launch_options opts = METILE_LAUNCH_OPTIONS_INIT;
    opts.stream = s;
    ASSERT_EQ(metile_launch_set_options(l, &opts), METILE_OK);
    ASSERT_EQ(metile_event_record(start, s), METILE_OK);
    ASSERT_EQ(metile_launch_run(l), METILE_OK) << device << ": " << last_error();
    ASSERT_EQ(metile_event_record(end, 0), METILE_OK);
    ASSERT_EQ(metile_event_synchronize(end), METILE_OK);
    ASSERT_EQ(metile_event_elapsed_ms(start, end, &ms), METILE_OK) << last_error();
    EXPECT_GE(ms, 0.0) << device;
    EXPECT_EQ(o.first(), 1.0f) << device;
    EXPECT_TRUE(fails_with(metile_event_elapsed_ms(start, end, nullptr), METILE_ERROR_INVALID_ARGUMENT, "out_ms"));
    metile_launch_release(l);
    metile_event_release(start);
    metile_event_release(end);
    EXPECT_TRUE(fails_with(metile_event_record(end, 0), METILE_ERROR_INVALID_ARGUMENT, "metile_event"));
    EXPECT_EQ(metile_stream_destroy(o.dev, s), METILE_OK);
    EXPECT_TRUE(fails_with(metile_stream_destroy(o.dev, 0), METILE_ERROR_INVALID_ARGUMENT, "stream 0"));
  }
}

TEST(LaunchOptions, EventsOfTwoDevicesAreNotCompared) {
  metile_device *a = nullptr, *b = nullptr;
  ASSERT_EQ(metile_device_open(&a, "interp"), METILE_OK);
  ASSERT_EQ(metile_device_open(&b, "cpu"), METILE_OK);
  metile_event *ea = nullptr, *eb = nullptr;
  ASSERT_EQ(metile_event_create(&ea, a), METILE_OK);
  ASSERT_EQ(metile_event_create(&eb, b), METILE_OK);
  ASSERT_EQ(metile_event_record(ea, 0), METILE_OK);
  ASSERT_EQ(metile_event_record(eb, 0), METILE_OK);
  double ms = 0;
  EXPECT_TRUE(fails_with(metile_event_elapsed_ms(ea, eb, &ms), METILE_ERROR_INVALID_ARGUMENT,
                         "different devices (interp and cpu)"));
  metile_event_release(ea);
  metile_event_release(eb);
  metile_device_release(a);
  metile_device_release(b);
}

TEST(LaunchOptions, DeviceIndices) {
  metile_device* d = nullptr;
  EXPECT_TRUE(fails_with(metile_device_open(&d, "cpu:1"), METILE_ERROR_INVALID_ARGUMENT,
                         "cpu is not chosen by index"));
  EXPECT_TRUE(fails_with(metile_device_open(&d, "interp:0"), METILE_ERROR_INVALID_ARGUMENT,
                         "interp is not chosen by index"));
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1:2", "cuda:99999999"})
    EXPECT_TRUE(fails_with(metile_device_open(&d, bad), METILE_ERROR_INVALID_ARGUMENT,
                           "must be a GPU index"))
        << bad;
  metile_device* cuda = nullptr;
  if (metile_device_open(&cuda, "cuda") != METILE_OK) {
    // No GPU here: an index says the device is unavailable, as "cuda" does.
    EXPECT_TRUE(fails_with(metile_device_open(&d, "cuda:1"), METILE_ERROR_DEVICE_UNAVAILABLE,
                           "cuda:1 is unavailable"));
  } else {
    metile_device* zero = nullptr;
    ASSERT_EQ(metile_device_open(&zero, "cuda:0"), METILE_OK);
    metile_device_info info = METILE_DEVICE_INFO_INIT;
    ASSERT_EQ(metile_device_get_info(zero, &info), METILE_OK);
    EXPECT_EQ(info.ordinal, 0);
    metile_device_release(zero);
    metile_device_release(cuda);
  }
  // An older caller's struct, without `ordinal`, is filled up to its end.
  ASSERT_EQ(metile_device_open(&d, "cpu"), METILE_OK);
  metile_device_info info = METILE_DEVICE_INFO_INIT;
  info.ordinal = 77;
  info.struct_size = offsetof(metile_device_info, ordinal);
  ASSERT_EQ(metile_device_get_info(d, &info), METILE_OK) << last_error();
  EXPECT_EQ(info.ordinal, 77);
  info.struct_size = sizeof info;
  ASSERT_EQ(metile_device_get_info(d, &info), METILE_OK);
  EXPECT_EQ(info.ordinal, 0);
  metile_device_release(d);
}

TEST(LaunchOptions, ABufferOfAnotherDeviceIsRefused) {
  Ones o("interp");
  metile_device* cpu = nullptr;
  ASSERT_EQ(metile_device_open(&cpu, "cpu"), METILE_OK);
  metile_buffer* foreign = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&foreign, cpu, 32 * sizeof(float)), METILE_OK);
  metile_arg a = METILE_ARG_BUFFER_INIT(foreign);
  const uint32_t grid[3] = {1, 1, 1};
  EXPECT_TRUE(fails_with(metile_kernel_launch(o.k, grid, &a, 1), METILE_ERROR_INVALID_ARGUMENT,
                         "argument `X`: the buffer belongs to device cpu, the kernel ones runs on interp"));
  metile_launch* l = nullptr;
  EXPECT_TRUE(fails_with(metile_launch_create(&l, o.k, grid, &a, 1), METILE_ERROR_INVALID_ARGUMENT,
                         "belongs to device cpu"));
  metile_launch* mine = o.prepare(1);
  EXPECT_TRUE(fails_with(metile_launch_set_arg(mine, 0, &a), METILE_ERROR_INVALID_ARGUMENT,
                         "belongs to device cpu"));
  metile_launch_release(mine);
  metile_buffer_release(foreign);
  metile_device_release(cpu);
}

}  // namespace

// The C API of the compile cache and the autotune helpers.
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <cerrno>
#include <cstring>

#include "cache/cache.h"
#include "cache_fake_device.h"
#include "handles.h"
#include "scoped_env.h"

namespace metile {
namespace METILE_UNITY_ID {

using test::all_files;
using test::FakeDevice;
using test::TempDir;

// Points the process-wide cache at a fresh directory for one test and restores the defaults.
class CacheApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(metile_cache_set_dir(dir.path().c_str()), METILE_OK);
    ASSERT_EQ(metile_cache_set_enabled(1), METILE_OK);
    ASSERT_EQ(metile_cache_clear(), METILE_OK);
  }
  void TearDown() override {
    EXPECT_EQ(metile_cache_clear(), METILE_OK);
    EXPECT_EQ(metile_cache_set_dir(nullptr), METILE_OK);
    EXPECT_EQ(metile_cache_set_max_bytes(kDefaultCacheMaxBytes), METILE_OK);
  }
  metile_cache_stats stats() {
    metile_cache_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(metile_cache_get_stats(&s), METILE_OK);
    return s;
  }
  TempDir dir;
};

std::string error_text() { return metile_last_error(); }

TEST_F(CacheApi, DirectoryRoundTripsAndDefaultsComeBack) {
  char* got = nullptr;
  ASSERT_EQ(metile_cache_get_dir(&got), METILE_OK);
  EXPECT_EQ(std::string(got), dir.path());
  metile_free(got);

  {
    test::ScopedEnv env("METILE_CACHE_DIR", "/tmp/metile-capi-default");
    ASSERT_EQ(metile_cache_set_dir(nullptr), METILE_OK);
    ASSERT_EQ(metile_cache_get_dir(&got), METILE_OK);
    EXPECT_EQ(std::string(got), "/tmp/metile-capi-default");
    metile_free(got);
  }

  EXPECT_EQ(metile_cache_set_dir(""), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(error_text().find("must not be empty"), std::string::npos) << error_text();
  EXPECT_EQ(metile_cache_get_dir(nullptr), METILE_ERROR_INVALID_ARGUMENT);
}

TEST_F(CacheApi, RejectsBadSettings) {
  EXPECT_EQ(metile_cache_set_enabled(2), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(error_text().find("enabled must be 0 or 1"), std::string::npos) << error_text();
  EXPECT_EQ(metile_cache_set_max_bytes(0), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(error_text().find("size cap"), std::string::npos) << error_text();
  EXPECT_EQ(metile_cache_set_max_bytes(1 << 20), METILE_OK);
  EXPECT_EQ(global_cache().max_bytes(), uint64_t{1} << 20);
  EXPECT_EQ(metile_cache_set_enabled(0), METILE_OK);
  EXPECT_FALSE(global_cache().disk_enabled());
  EXPECT_EQ(metile_cache_set_enabled(1), METILE_OK);
  EXPECT_TRUE(global_cache().disk_enabled());
}

TEST_F(CacheApi, StatsCheckTheirStruct) {
  EXPECT_EQ(metile_cache_get_stats(nullptr), METILE_ERROR_INVALID_ARGUMENT);
  metile_cache_stats small{};
  small.struct_size = sizeof(size_t);
  EXPECT_EQ(metile_cache_get_stats(&small), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(error_text().find("struct_size"), std::string::npos) << error_text();
}

TEST_F(CacheApi, AutotuneWinnersPersist) {
  char* out = reinterpret_cast<char*>(1);
  ASSERT_EQ(metile_autotune_lookup("gemm:1024:f32", &out), METILE_OK);
  EXPECT_EQ(out, nullptr);
  ASSERT_EQ(metile_autotune_store("gemm:1024:f32", "BM=64,BN=128"), METILE_OK);
  ASSERT_EQ(metile_autotune_lookup("gemm:1024:f32", &out), METILE_OK);
  ASSERT_NE(out, nullptr);
  EXPECT_STREQ(out, "BM=64,BN=128");
  metile_free(out);
  // A second process (here: a second cache object) reads the same record.
  Cache other;
  other.set_dir(dir.path());
  EXPECT_EQ(other.find_autotune("gemm:1024:f32"), "BM=64,BN=128");

  EXPECT_EQ(metile_autotune_store(nullptr, "x"), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_autotune_store("k", nullptr), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_autotune_lookup(nullptr, &out), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_autotune_lookup("k", nullptr), METILE_ERROR_INVALID_ARGUMENT);

  ASSERT_EQ(metile_cache_clear(), METILE_OK);
  ASSERT_EQ(metile_autotune_lookup("gemm:1024:f32", &out), METILE_OK);
  EXPECT_EQ(out, nullptr) << "clear removes autotune records too";
}

TEST_F(CacheApi, ClearReportsFilesItCannotRemove) {
  ASSERT_EQ(metile_autotune_store("k", "w"), METILE_OK);
  if (::geteuid() == 0) GTEST_SKIP() << "root can remove files from a read-only directory";
  std::string sub = dir.path() + "/autotune";
  ::chmod(sub.c_str(), 0555);
  EXPECT_EQ(metile_cache_clear(), METILE_ERROR_IO);
  EXPECT_NE(error_text().find(sub), std::string::npos) << error_text();
  ::chmod(sub.c_str(), 0755);
}

// A prepared launch on the fake device, wrapped in a C handle as metile_launch_create makes it.
struct FakeLaunchHandle {
  FakeLaunchHandle(std::shared_ptr<FakeDevice> dev, std::vector<int> sleep_ms) {
    auto ck = std::make_shared<CompiledKernel>();
    ck->device = dev;
    auto launch = std::make_unique<test::FakeLaunch>(dev.get());
    launch->sleep_ms = std::move(sleep_ms);
    raw = launch.get();
    auto h = capi::make_handle<metile_launch>();
    h->impl = std::move(launch);
    h->kernel = std::move(ck);
    handle = capi::publish(h);
  }
  ~FakeLaunchHandle() { metile_launch_release(handle); }
  metile_launch* handle;
  test::FakeLaunch* raw;
};

TEST_F(CacheApi, AutotuneTimeSynchronizesAroundEveryTimedRun) {
  auto dev = std::make_shared<FakeDevice>("fake v1");
  FakeLaunchHandle a(dev, {}), b(dev, {});
  metile_launch* launches[] = {a.handle, b.handle};
  double ms[2] = {-1, -1};
  ASSERT_EQ(metile_autotune_time(launches, 2, 2, 3, ms), METILE_OK) << error_text();
  EXPECT_EQ(a.raw->runs, 5);
  EXPECT_EQ(b.raw->runs, 5);
  // Warmup runs, a synchronize, then each timed run followed by its own synchronize.
  EXPECT_EQ(dev->events, "rrsrsrsrs" "rrsrsrsrs");
  EXPECT_GE(ms[0], 0.0);
  EXPECT_GE(ms[1], 0.0);
}

TEST_F(CacheApi, AutotuneTimeReportsTheMedian) {
  auto dev = std::make_shared<FakeDevice>("fake v1");
  // No warmup; the timed runs sleep 5, 400 and 5 ms: the median is a 5 ms run, the mean is not.
  FakeLaunchHandle a(dev, {5, 400, 5});
  metile_launch* launches[] = {a.handle};
  double ms = 0;
  ASSERT_EQ(metile_autotune_time(launches, 1, 0, 3, &ms), METILE_OK) << error_text();
  EXPECT_GE(ms, 5.0);
  EXPECT_LT(ms, 400.0);
}

TEST_F(CacheApi, AutotuneTimeRejectsBadArguments) {
  auto dev = std::make_shared<FakeDevice>("fake v1");
  FakeLaunchHandle a(dev, {});
  metile_launch* launches[] = {a.handle};
  double ms = 0;
  EXPECT_EQ(metile_autotune_time(nullptr, 0, 0, 1, nullptr), METILE_OK) << "nothing to time";
  EXPECT_EQ(metile_autotune_time(nullptr, 1, 0, 1, &ms), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_autotune_time(launches, 1, 0, 1, nullptr), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_autotune_time(launches, 1, -1, 1, &ms), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(error_text().find("warmup"), std::string::npos) << error_text();
  EXPECT_EQ(metile_autotune_time(launches, 1, 0, 0, &ms), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(error_text().find("rep"), std::string::npos) << error_text();
  int not_a_launch = 0;
  metile_launch* bogus[] = {a.handle, reinterpret_cast<metile_launch*>(&not_a_launch)};
  double two[2] = {-7, -7};
  EXPECT_EQ(metile_autotune_time(bogus, 2, 0, 1, two), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(a.raw->runs, 0) << "handles are checked before anything runs";
  EXPECT_EQ(two[0], -7);
}

// The interp device has no cache identity: the memory level serves it, the disk never sees it.
TEST_F(CacheApi, InterpKernelsUseTheMemoryCacheOnly) {
  metile_device* dev = nullptr;
  if (metile_device_open(&dev, "interp") != METILE_OK) GTEST_SKIP() << error_text();
  Builder bld("scale");
  ValueId x = bld.param("X", Type::ptr(DType::f32));
  ValueId offs = bld.binary(OpKind::ADD,
                            bld.binary(OpKind::MUL, bld.grid(OpKind::PROGRAM_ID, 0),
                                       bld.const_int(DType::i32, 16)),
                            bld.arange(kNoValue, 16));
  ValueId ptrs = bld.binary(OpKind::ADD, x, offs);
  bld.store(ptrs, bld.binary(OpKind::MUL, bld.load(ptrs, kNoValue, kNoValue),
                             bld.const_float(DType::f32, 3.0)), kNoValue);
  std::string text = print(bld.finish());
  metile_program* prog = nullptr;
  ASSERT_EQ(metile_program_parse(&prog, text.c_str()), METILE_OK) << error_text();

  metile_kernel* k1 = nullptr;
  metile_kernel* k2 = nullptr;
  ASSERT_EQ(metile_kernel_compile(&k1, dev, prog, nullptr), METILE_OK) << error_text();
  ASSERT_EQ(metile_kernel_compile(&k2, dev, prog, nullptr), METILE_OK) << error_text();
  metile_kernel_info i1{}, i2{};
  i1.struct_size = i2.struct_size = sizeof(metile_kernel_info);
  ASSERT_EQ(metile_kernel_get_info(k1, &i1), METILE_OK);
  ASSERT_EQ(metile_kernel_get_info(k2, &i2), METILE_OK);
  EXPECT_EQ(i1.from_cache, 0);
  EXPECT_EQ(i2.from_cache, 1);
  char key1[65], key2[65];
  ASSERT_EQ(metile_kernel_cache_key(k1, key1), METILE_OK);
  ASSERT_EQ(metile_kernel_cache_key(k2, key2), METILE_OK);
  EXPECT_EQ(std::strlen(key1), 64u);
  EXPECT_STREQ(key1, key2);

  metile_compile_options opts;
  metile_compile_options_init(&opts);
  opts.no_cache = 1;
  metile_kernel* k3 = nullptr;
  ASSERT_EQ(metile_kernel_compile(&k3, dev, prog, &opts), METILE_OK) << error_text();
  metile_kernel_info i3{};
  i3.struct_size = sizeof i3;
  ASSERT_EQ(metile_kernel_get_info(k3, &i3), METILE_OK);
  EXPECT_EQ(i3.from_cache, 0);

  // The kernel served from memory runs correctly.
  std::vector<float> host(32);
  for (int i = 0; i < 32; ++i) host[i] = static_cast<float>(i);
  metile_buffer* buf = nullptr;
  ASSERT_EQ(metile_buffer_wrap(&buf, dev, host.data(), host.size() * sizeof(float)), METILE_OK);
  metile_arg arg{};
  arg.kind = METILE_ARG_BUFFER;
  arg.buffer = buf;
  uint32_t grid[3] = {2, 1, 1};
  ASSERT_EQ(metile_kernel_launch(k2, grid, &arg, 1), METILE_OK) << error_text();
  ASSERT_EQ(metile_device_synchronize(dev), METILE_OK);
  float* out = nullptr;
  ASSERT_EQ(metile_buffer_contents(buf, reinterpret_cast<void**>(&out)), METILE_OK);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 3.0f * static_cast<float>(i)) << i;

  metile_cache_stats s = stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.bytes_written, 0u);
  EXPECT_TRUE(all_files(dir.path()).empty());

  // After clear() the next compile builds again.
  ASSERT_EQ(metile_cache_clear(), METILE_OK);
  metile_kernel* k4 = nullptr;
  ASSERT_EQ(metile_kernel_compile(&k4, dev, prog, nullptr), METILE_OK);
  metile_kernel_info i4{};
  i4.struct_size = sizeof i4;
  ASSERT_EQ(metile_kernel_get_info(k4, &i4), METILE_OK);
  EXPECT_EQ(i4.from_cache, 0);
  EXPECT_EQ(stats().misses, 1u);

  for (metile_kernel* k : {k1, k2, k3, k4}) metile_kernel_release(k);
  metile_buffer_release(buf);
  metile_program_release(prog);
  metile_device_release(dev);
}

}  // namespace
}  // namespace metile

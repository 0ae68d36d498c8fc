// The metal device (src/runtime/metal) through the stand-in Objective-C runtime and
// Metal.framework (tests/metal_standin). These run in the `metal_standin_unit` ctest, whose
// environment names the stand-in; elsewhere on Linux the device is unavailable and they skip
// (the kernel suite then runs on metal in the same ctest: interp_kernels_test.cpp).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "kernels/kernels.h"
#include "runtime/device.h"
#include "runtime/metal/metal_toolchain.h"
#include "runtime/metal/objc_bridge.h"
#include "codegen/metal/msl_signature.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

using metal::MTLSize;
using metal::NSInteger;
using metal::NSUInteger;
using metal::ObjcBool;
using metal::Sel;

/** A function of the stand-in libraries (by dlsym on the copy the device opened). */
template <class F>
F* standin(const char* library_env, const char* name) {
  const char* path = std::getenv(library_env);
  void* h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  void* f = h ? dlsym(h, name) : nullptr;
  if (f == nullptr) ADD_FAILURE() << "the stand-in has no " << name;
  return reinterpret_cast<F*>(f);
}
long live_objects() { return standin<long()>("METILE_OBJC_LIBRARY", "standin_objc_live_objects")(); }
long unpooled() { return standin<long()>("METILE_OBJC_LIBRARY", "standin_objc_unpooled_autoreleases")(); }

class MetalDevice : public testing::Test {
 protected:
  void SetUp() override {
    for (const DeviceEntry& e : device_registry())
      if (std::string(e.name) == "metal" && !(why_ = e.probe()).empty())
        GTEST_SKIP() << "metal is unavailable here: " << why_;
    dev_ = open_device("metal");
  }
  std::string why_;
  std::shared_ptr<Device> dev_;
};

// Hand-written MSL, as the emitter would write it, for tests that need a kernel directly.
const char* kAddOne = R"(#include <metal_stdlib>
using namespace metal;
[[kernel]] void add_one(
    device float* X [[buffer(0)]],
    constant int& N [[buffer(1)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tiitg [[thread_index_in_threadgroup]]) {
  int i = int(tgpig.x) * 64 + int(tiitg);
  if (i < N) X[i] += 1.0f;
}
)";

Artifact msl_artifact(const std::string& msl, const metal_sim::MslSignature& sig, int threads) {
  Artifact a;
  a.kind = ArtifactKind::msl;
  a.entry = sig.kernel;
  a.sources[Stage::msl] = msl;
  a.sources[Stage::msl_signature] = metal_sim::print_signature(sig);
  a.threads_per_group = threads;
  return a;
}

metal_sim::MslSignature add_one_signature() {
  using metal_sim::MslArg;
  return {"add_one",
          {MslArg::buffer("X", 0, DType::f32, false), MslArg::scalar("N", 1, DType::i32),
           MslArg::builtin_arg("tgpig", metal_sim::MslBuiltin::threadgroup_position_in_grid),
           MslArg::builtin_arg("tiitg", metal_sim::MslBuiltin::thread_index_in_threadgroup)}};
}

metile_status status_of(const std::function<void()>& f, std::string* message) {
  try {
    f();
  } catch (const Error& e) {
    *message = e.what();
    return e.status();
  }
  return METILE_OK;
}

TEST_F(MetalDevice, DescribesTheGpuFromItsCapabilities) {
  const DeviceInfo& i = dev_->info();
  EXPECT_EQ(i.name, "metal");
  EXPECT_EQ(i.architecture, "apple7");  // supportsFamily: answers yes up to Apple7
  EXPECT_NE(i.description.find("stand-in Metal GPU"), std::string::npos) << i.description;
  EXPECT_NE(i.description.find("Metal 3"), std::string::npos) << i.description;
  EXPECT_EQ(i.max_threads_per_group, 1024);
  EXPECT_EQ(i.threadgroup_memory_bytes, 32768u);
  EXPECT_TRUE(i.asynchronous);
  EXPECT_NE(dev_->cache_identity().find("metal;apple7;"), std::string::npos);
}

// Each prototype kind of metal_selectors.def, checked by value against the stand-in's methods.
TEST_F(MetalDevice, BridgeSendsEachPrototypeKind) {
  std::string why;
  const metal::ObjcRuntime& rt = *metal::ObjcRuntime::get(&why);
  metal::AutoreleasePool pool(rt);
  metal::id device = rt.create_system_default_device();
  ASSERT_NE(device, nullptr);
  MTLSize m = rt.send<MTLSize>(Sel::maxThreadsPerThreadgroup, device);  // struct return
  EXPECT_EQ(m.width, 1024u);
  EXPECT_EQ(m.height, 1024u);
  EXPECT_EQ(m.depth, 1024u);
  EXPECT_TRUE(rt.send<ObjcBool>(Sel::supportsFamily, device, NSInteger{1007}));
  EXPECT_FALSE(rt.send<ObjcBool>(Sel::supportsFamily, device, NSInteger{1008}));
  EXPECT_EQ(rt.send<NSUInteger>(Sel::maxThreadgroupMemoryLength, device), 32768u);
  std::string text = "Grüße, \xe2\x9c\x93 and a NUL-free tail";
  metal::id s = rt.make_string(text);
  EXPECT_EQ(rt.text(s), text);
  rt.release(s);
  metal::id b = rt.send<metal::id>(Sel::newBufferWithLength, device, NSUInteger{100}, NSUInteger{0});
  EXPECT_EQ(rt.send<NSUInteger>(Sel::length, b), 100u);
  EXPECT_NE(rt.send<void*>(Sel::contents, b), nullptr);
  rt.release(b);
  rt.release(device);
  // A prototype that disagrees with the table is refused before anything is sent.
  std::string msg;
  EXPECT_EQ(status_of([&] { rt.send<NSUInteger>(Sel::name, device); }, &msg), METILE_ERROR_INTERNAL);
  EXPECT_NE(msg.find("metal_selectors.def"), std::string::npos) << msg;
}

TEST_F(MetalDevice, LaunchesAreAsynchronousAndSynchronizeWaits) {
  auto k = dev_->load(nullptr, {}, msl_artifact(kAddOne, add_one_signature(), 64));
  auto buf = dev_->alloc(1000 * sizeof(float));
  std::vector<LaunchArg> args(2);
  args[0].buffer = buf.get();
  args[1].bits = 1000;
  Grid g;
  g.dims = {16, 1, 1};
  auto launch = k->prepare(g, args);
  for (int r = 0; r < 40; ++r) launch->run();  // more than the 16 kept in flight
  dev_->synchronize();
  auto* x = static_cast<float*>(buf->contents());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(x[i], 40.0f) << i;
  // An offset into the buffer reaches setBuffer:offset:atIndex:.
  args[0].offset = 4 * sizeof(float);
  args[1].bits = 2;
  k->prepare(g, args)->run();
  dev_->synchronize();
  EXPECT_EQ(x[3], 40.0f);
  EXPECT_EQ(x[4], 41.0f);
  EXPECT_EQ(x[5], 41.0f);
  EXPECT_EQ(x[6], 40.0f);
}

TEST_F(MetalDevice, ReleasesEveryObjectAndAutoreleasesInsidePools) {
  auto k = dev_->load(nullptr, {}, msl_artifact(kAddOne, add_one_signature(), 64));
  auto buf = dev_->alloc(256);
  std::vector<LaunchArg> args(2);
  args[0].buffer = buf.get();
  args[1].bits = 64;
  Grid g;
  k->prepare(g, args)->run();
  dev_->synchronize();
  long base = live_objects(), base_unpooled = unpooled();
  for (int r = 0; r < 5; ++r) k->prepare(g, args)->run();
  dev_->synchronize();
  EXPECT_EQ(live_objects(), base);
  buf.reset();
  k.reset();
  EXPECT_EQ(live_objects(), base - 2);  // the buffer and the pipeline state
  EXPECT_EQ(unpooled(), base_unpooled);
}

// At process exit the C++ thread_local destructors run first, then the device cache's
// destructor: the metal device's destructor still waits for its command buffers and releases
// them inside an autorelease pool. libobjc serves pools then (its per-thread state is not a C++
// thread_local); the stand-in runtime once kept them in a thread_local vector, written after
// exit had freed it (glibc aborted later, in malloc_consolidate). The child is a fresh process
// (threadsafe style), so its device has a live queue thread, with glibc's per-thread cache off:
// small freed blocks then go to the fastbins, whose links glibc checks, so a write after free
// there aborts every time instead of now and then.
TEST_F(MetalDevice, AutoreleasePoolsServeMessagesAtProcessExit) {
  const std::string style = GTEST_FLAG_GET(death_test_style);
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string saved = tunables ? tunables : "";
  setenv("GLIBC_TUNABLES", (saved.empty() ? "" : saved + ":").append("glibc.malloc.tcache_count=0").c_str(), 1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto k = dev_->load(nullptr, {}, msl_artifact(kAddOne, add_one_signature(), 64));
        auto buf = dev_->alloc(256);
        std::vector<LaunchArg> args(2);
        args[0].buffer = buf.get();
        args[1].bits = 64;
        k->prepare(Grid{}, args)->run();  // left pending: the exit-time destructor waits for it
        std::atexit([] {  // runs after the thread_local destructors, before the device cache's
          const metal::ObjcRuntime& rt = *metal::ObjcRuntime::get(nullptr);
          long before = live_objects();
          {
            metal::AutoreleasePool pool(rt);
            metal::id path = rt.make_string("/tmp");
            for (int i = 0; i < 64; ++i)  // autoreleased URLs, more than a fresh pool holds
              rt.send<metal::id>(Sel::fileURLWithPath, rt.get_class("NSURL"), path);
            rt.release(path);
          }
          if (live_objects() != before) std::_Exit(3);  // the pool released every URL
        });
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, style);
  if (tunables) setenv("GLIBC_TUNABLES", saved.c_str(), 1);
  else unsetenv("GLIBC_TUNABLES");
}

TEST_F(MetalDevice, CompileErrorCarriesTheCompilerLog) {
  std::string broken = kAddOne;
  broken.replace(broken.find("X[i] += 1.0f"), 12, "X[i] += undefined_name");
  std::string msg;
  metile_status s = status_of(
      [&] { dev_->load(nullptr, {}, msl_artifact(broken, add_one_signature(), 64)); }, &msg);
  EXPECT_EQ(s, METILE_ERROR_COMPILE);
  EXPECT_NE(msg.find("add_one: Metal rejected the kernel"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undefined_name"), std::string::npos) << msg;
  EXPECT_NE(msg.find("add_one.metal:9"), std::string::npos) << msg;  // the log's location
}

TEST_F(MetalDevice, RefusesMoreThreadsThanThePipelineAllows) {
  auto set_max = standin<void(unsigned long)>("METILE_METAL_FRAMEWORK",
                                              "standin_metal_set_pipeline_max_threads");
  set_max(32);
  std::string msg;
  metile_status s = status_of(
      [&] { dev_->load(nullptr, {}, msl_artifact(kAddOne, add_one_signature(), 64)); }, &msg);
  set_max(1024);
  EXPECT_EQ(s, METILE_ERROR_UNSUPPORTED);
  EXPECT_NE(msg.find("needs 64 threads per threadgroup"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at most 32"), std::string::npos) << msg;
}

TEST_F(MetalDevice, WrapSharesPageAlignedMemoryAndCopiesTheRest) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* host = static_cast<float*>(std::aligned_alloc(page, 2 * page));
  for (size_t i = 0; i < 2 * page / sizeof(float); ++i) host[i] = static_cast<float>(i);
  auto shared = dev_->wrap(host, 2 * page);
  EXPECT_TRUE(shared->shares_memory());
  EXPECT_EQ(shared->contents(), host);
  auto rejected = standin<long()>("METILE_METAL_FRAMEWORK", "standin_metal_rejected_no_copy");
  long before = rejected();
  for (auto [p, n] : {std::pair<float*, size_t>{host + 1, 64}, {host, 100}}) {
    auto copy = dev_->wrap(p, n);
    EXPECT_FALSE(copy->shares_memory());
    EXPECT_NE(copy->contents(), p);
    EXPECT_EQ(copy->size(), n);
    EXPECT_EQ(std::memcmp(copy->contents(), p, n), 0);
  }
  EXPECT_EQ(rejected(), before);  // unaligned memory never reaches newBufferWithBytesNoCopy
  // A kernel writes through the shared wrap into the caller's memory.
  auto k = dev_->load(nullptr, {}, msl_artifact(kAddOne, add_one_signature(), 64));
  std::vector<LaunchArg> args(2);
  args[0].buffer = shared.get();
  args[1].bits = 64;
  k->prepare(Grid{}, args)->run();
  dev_->synchronize();
  EXPECT_EQ(host[0], 1.0f);
  EXPECT_EQ(host[63], 64.0f);
  EXPECT_EQ(host[64], 64.0f);
  shared.reset();
  std::free(host);
}

TEST_F(MetalDevice, OutOfMemoryIsAStatus) {
  auto limit = standin<void(unsigned long)>("METILE_METAL_FRAMEWORK",
                                            "standin_metal_fail_allocations_over");
  limit(1 << 20);
  std::string msg;
  metile_status s = status_of([&] { dev_->alloc(2 << 20); }, &msg);
  metile_status copy = status_of([&] { dev_->wrap(msg.data(), 3 << 20); }, &msg);  // copy path
  limit(0);
  EXPECT_EQ(s, METILE_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(copy, METILE_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(msg.find("cannot allocate a buffer of 3145728 bytes"), std::string::npos) << msg;
  EXPECT_NO_THROW(dev_->alloc(2 << 20));
}

TEST_F(MetalDevice, KernelFailureSurfacesAtSynchronize) {
  const char* msl = R"(#include <metal_stdlib>
using namespace metal;
[[kernel]] void split(
    device float* Out [[buffer(0)]],
    threadgroup float* Scratch [[threadgroup(0)]],
    uint lid [[thread_index_in_threadgroup]]) {
  if (lid < 32u) {
    Scratch[lid] = float(lid);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    Out[lid] = Scratch[31u - lid];
  }
}
)";
  using metal_sim::MslArg;
  metal_sim::MslSignature sig{
      "split",
      {MslArg::buffer("Out", 0, DType::f32, false), MslArg::threadgroup("Scratch", 0, DType::f32, 64),
       MslArg::builtin_arg("lid", metal_sim::MslBuiltin::thread_index_in_threadgroup)}};
  auto k = dev_->load(nullptr, {}, msl_artifact(msl, sig, 64));
  auto buf = dev_->alloc(64 * sizeof(float));
  std::vector<LaunchArg> args(1);
  args[0].buffer = buf.get();
  k->prepare(Grid{}, args)->run();  // returns before the kernel ran
  std::string msg;
  EXPECT_EQ(status_of([&] { dev_->synchronize(); }, &msg), METILE_ERROR_DEVICE);
  EXPECT_NE(msg.find("kernel split failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("barrier"), std::string::npos) << msg;
  EXPECT_NO_THROW(dev_->synchronize());  // reported once
}

TEST_F(MetalDevice, BadLaunchArgumentsAreRefused) {
  auto k = dev_->load(nullptr, {}, msl_artifact(kAddOne, add_one_signature(), 64));
  auto buf = dev_->alloc(64);
  std::string msg;
  std::vector<LaunchArg> too_few(1);
  too_few[0].buffer = buf.get();
  EXPECT_EQ(status_of([&] { k->prepare(Grid{}, too_few); }, &msg), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("1 launch arguments for 2 parameters"), std::string::npos) << msg;
  std::vector<LaunchArg> swapped(2);
  swapped[1].buffer = buf.get();
  EXPECT_EQ(status_of([&] { k->prepare(Grid{}, swapped); }, &msg), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("needs a buffer"), std::string::npos) << msg;
}

// With an offline compiler ($METILE_XCRUN; the metal_standin_metallib ctest points it at a
// stand-in script) kernels are built to a metallib, cached, and loaded with newLibraryWithURL.
TEST_F(MetalDevice, BuildsMetallibsWithTheOfflineCompiler) {
  if (metal::metal_toolchain().xcrun.empty()) GTEST_SKIP() << "no xcrun (METILE_XCRUN unset)";
  kernels::Case c = kernels::make_case(kernels::case_names().front());
  Artifact a = dev_->build(c.program, {});
  EXPECT_EQ(a.kind, ArtifactKind::metallib);
  EXPECT_FALSE(a.bytes.empty());
  EXPECT_NE(dev_->cache_identity().find("metallib"), std::string::npos);
  kernels::RunResult r = kernels::run_case("metal", c);
  ASSERT_EQ(r.status, METILE_OK) << r.message;
  EXPECT_EQ(kernels::compare(r.outputs, c.expected, c.rtol, c.atol), "");
}

}  // namespace
}  // namespace metile

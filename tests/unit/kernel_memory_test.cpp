// Compiled code does not pile up: the memory level of the cache keeps a bounded number of
// kernels, and a loaded shared object holds no file descriptor and is unmapped when released.
#include <gtest/gtest.h>

#include <dirent.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "cache_fake_device.h"
#include "driver/compile.h"
#include "runtime/cpu/toolchain.h"
#include "runtime/host/shared_object.h"

namespace metile {
namespace METILE_UNITY_ID {

using test::FakeDevice;
using test::store_const;

size_t open_fds() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (d != nullptr && ::readdir(d) != nullptr) ++n;
  if (d != nullptr) ::closedir(d);
  return n;
}

size_t mappings() {
  std::ifstream in("/proc/self/maps");
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(KernelMemory, MemoryLevelKeepsABoundedNumberOfKernels) {
  Cache cache;
  cache.set_enabled(false);  // the memory level only
  auto dev = std::make_shared<FakeDevice>("fake v1", 256);
  std::vector<std::weak_ptr<Kernel>> loaded;
  for (int i = 0; i < 2000; ++i) {
    auto k = compile_kernel(cache, dev, store_const("k" + std::to_string(i), i), {});
    loaded.push_back(k->kernel);
  }  // every CompiledKernel is released here
  size_t alive = 0;
  for (auto& w : loaded) alive += !w.expired();
  EXPECT_EQ(alive, kDefaultMemoryEntries);
  // The most recent ones are the ones kept, and they are memory hits.
  EXPECT_FALSE(loaded.back().expired());
  EXPECT_TRUE(loaded.front().expired());
  auto again = compile_kernel(cache, dev, store_const("k1999", 1999), {});
  EXPECT_TRUE(again->from_cache);
  // Using an old entry makes it recent again.
  cache.set_memory_entries(2);
  compile_kernel(cache, dev, store_const("a", 0), {});
  auto a_kernel = std::weak_ptr<Kernel>(compile_kernel(cache, dev, store_const("a", 0), {})->kernel);
  compile_kernel(cache, dev, store_const("b", 0), {});
  EXPECT_TRUE(compile_kernel(cache, dev, store_const("a", 0), {})->from_cache);
  compile_kernel(cache, dev, store_const("c", 0), {});
  EXPECT_FALSE(a_kernel.expired()) << "a was used after b, so b is the one dropped";
  EXPECT_EQ(dev->builds.load(), 2000 + 3);
}

// Two tiny libraries whose `value()` differ, compiled once by the host compiler.
struct Libraries {
  std::vector<uint8_t> one, two;
};

const Libraries& libraries() {
  static Libraries* libs = [] {
    auto* l = new Libraries();
    cpu::Toolchain tc = cpu::current_toolchain();
    l->one = cpu::compile_shared_object(tc, "extern \"C\" int value() { return 1; }\n", "one");
    l->two = cpu::compile_shared_object(tc, "extern \"C\" int value() { return 2; }\n", "two");
    return l;
  }();
  return *libs;
}

int value_of(const host::SharedObject& so) {
  return reinterpret_cast<int (*)()>(so.symbol("value"))();
}

TEST(KernelMemory, LoadedLibrariesHoldNoDescriptorAndAreUnmapped) {
  if (!cpu::probe_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  const Libraries& libs = libraries();
  { host::SharedObject warm(libs.one, "test", "warm"); }
  size_t fds = open_fds(), maps = mappings();
  for (int i = 0; i < 2000; ++i) {
    host::SharedObject so(i % 2 ? libs.one : libs.two, "test", "lib");
    ASSERT_EQ(value_of(so), i % 2 ? 1 : 2);
    ASSERT_LE(open_fds(), fds) << "a loaded library keeps a descriptor";
  }
  EXPECT_LE(open_fds(), fds);
  EXPECT_LE(mappings(), maps + 8) << "released libraries stay mapped";
}

// A library stays loaded while others come and go: the names it was loaded under are never
// reused, or dlopen would hand the old library out for a new one.
TEST(KernelMemory, NewLibrariesNeverAliasOneStillLoaded) {
  if (!cpu::probe_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  const Libraries& libs = libraries();
  std::vector<std::unique_ptr<host::SharedObject>> kept;
  for (int i = 0; i < 50; ++i) {
    kept.push_back(std::make_unique<host::SharedObject>(libs.one, "test", "kept"));
    host::SharedObject fresh(libs.two, "test", "fresh");
    ASSERT_EQ(value_of(fresh), 2) << "iteration " << i;
  }
  for (auto& k : kept) EXPECT_EQ(value_of(*k), 1);
}

// Another loader in the process (a second copy of this code, as the Metal stand-in links, or
// anyone dlopen-ing a memfd) left a library mapped under /proc/self/fd/N and closed N: a new
// library must not be loaded under that name, or dlopen would return the other one.
TEST(KernelMemory, NamesAnotherLoaderLeftMappedAreNotReused) {
  if (!cpu::probe_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  const Libraries& libs = libraries();
  std::vector<void*> foreign;
  for (int i = 0; i < 8; ++i) {
    int fd = ::memfd_create("foreign", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, libs.one.data(), libs.one.size()),
              static_cast<ssize_t>(libs.one.size()));
    void* h = ::dlopen(("/proc/self/fd/" + std::to_string(fd)).c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << ::dlerror();
    ::close(fd);  // the next memfd gets this number back
    foreign.push_back(h);
    host::SharedObject mine(libs.two, "test", "mine");
    EXPECT_EQ(value_of(mine), 2) << "iteration " << i;
  }
  for (void* h : foreign) ::dlclose(h);
}

TEST(KernelMemory, CorruptLibraryIsADeviceError) {
  std::vector<uint8_t> junk = {'n', 'o', 't', ' ', 'E', 'L', 'F'};
  try {
    host::SharedObject so(junk, "test", "junk");
    FAIL() << "loaded junk";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_DEVICE);
    EXPECT_NE(std::string(e.what()).find("cannot load the compiled kernel junk"), std::string::npos);
  }
}

}  // namespace
}  // namespace metile

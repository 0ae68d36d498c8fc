// The compile cache across real processes: tests/cache/cache_driver.c compiles and runs a kernel
// through the public C API, once into an empty cache directory and once more afterwards.
#include <gtest/gtest.h>
#include <metile/metile.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "cache_fake_device.h"

extern char** environ;

namespace metile {
namespace METILE_UNITY_ID {

using test::all_files;
using test::TempDir;

struct DriverRun {
  int status = -1;
  std::string out;
};

// Runs the driver with METILE_CACHE_DIR=dir (and the rest of this process's environment).
DriverRun run_driver(const std::string& device, const std::string& expect, const std::string& dir) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "METILE_CACHE", 12) != 0) env.emplace_back(*e);
  env.push_back("METILE_CACHE_DIR=" + dir);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = METILE_CACHE_DRIVER;
  std::vector<std::string> args = {exe, device, expect};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  int fds[2];
  DriverRun r;
  if (::pipe(fds) != 0) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc == 0) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) r.out.append(buf, static_cast<size_t>(n));
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  ::close(fds[0]);
  return r;
}

bool device_available(const char* name) {
  char* list = nullptr;
  if (metile_devices_available(&list) != METILE_OK) return false;
  std::string names = std::string(",") + list + ",";
  metile_free(list);
  return names.find(std::string(",") + name + ",") != std::string::npos;
}

TEST(CacheAcrossProcesses, CpuKernelIsLoadedFromDiskByTheSecondProcess) {
  if (!device_available("cpu")) GTEST_SKIP() << "the cpu device is not available here";
  TempDir dir;
  DriverRun cold = run_driver("cpu", "miss", dir.path());
  ASSERT_EQ(cold.status, 0) << cold.out;
  EXPECT_NE(cold.out.find("from_cache=0"), std::string::npos) << cold.out;
  EXPECT_NE(cold.out.find("disk_hits=0 misses=2"), std::string::npos) << cold.out;
  // Two kernels, and the record of the compiler probe (runtime/cpu/toolchain.cpp).
  size_t entries = 0;
  for (const std::string& f : all_files(dir.path())) {
    if (f.ends_with(".mtc")) ++entries;
    else EXPECT_TRUE(f.starts_with("autotune/") && f.ends_with(".mta")) << f;
  }
  ASSERT_EQ(entries, 2u);

  DriverRun warm = run_driver("cpu", "hit", dir.path());
  ASSERT_EQ(warm.status, 0) << warm.out << " (status 2: wrong results, 3: not a cache hit)";
  EXPECT_NE(warm.out.find("from_cache=1"), std::string::npos) << warm.out;
  EXPECT_NE(warm.out.find("disk_hits=2 misses=0"), std::string::npos) << warm.out;
}

TEST(CacheAcrossProcesses, InterpNeverTouchesTheDisk) {
  TempDir dir;
  for (int i = 0; i < 2; ++i) {
    DriverRun r = run_driver("interp", "miss", dir.path());
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("disk_hits=0 misses=2"), std::string::npos) << r.out;
  }
  EXPECT_TRUE(all_files(dir.path()).empty());
}

}  // namespace
}  // namespace metile

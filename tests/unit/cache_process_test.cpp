// The disk cache under several processes: concurrent writers of the same entries, and a warm
// process that loads what another one compiled.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "cache/cache.h"
#include "cache_fake_device.h"
#include "driver/compile.h"

namespace metile {
namespace METILE_UNITY_ID {

using test::all_files;
using test::dir_secret;
using test::FakeDevice;
using test::store_const;
using test::TempDir;

constexpr int kKernels = 20;

// Runs `body` in a child process; its return value becomes the exit status (exceptions: 100).
pid_t spawn(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 100;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", ::getpid(), e.what());
    }
    ::_exit(rc);  // skip gtest's and the parent's atexit handlers
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CacheProcesses, EightWritersOfTheSameKernelsAllSucceed) {
  TempDir dir;
  std::vector<pid_t> children;
  for (int c = 0; c < 8; ++c) {
    children.push_back(spawn([&, c] {
      Cache cache;
      cache.set_dir(dir.path());
      cache.set_enabled(true);
      auto dev = std::make_shared<FakeDevice>("fake v1", 64 * 1024);
      // Each child starts at a different kernel so reads, writes and renames interleave.
      for (int i = 0; i < kKernels; ++i) {
        int k = (i + c * 3) % kKernels;
        auto ck = compile_kernel(cache, dev, store_const("k" + std::to_string(k), k), {});
        if (!ck->kernel) return 1;  // load() verified the artifact, whether built or read
      }
      CacheStats s = cache.stats();
      return s.disk_hits + s.misses == kKernels ? 0 : 2;
    }));
  }
  for (pid_t pid : children) EXPECT_EQ(wait_for(pid), 0);

  Cache check;
  check.set_dir(dir.path());
  FakeDevice dev("fake v1");
  std::vector<std::string> files = all_files(dir.path());
  EXPECT_EQ(files.size(), static_cast<size_t>(kKernels)) << "stray or missing files";
  for (int k = 0; k < kKernels; ++k) {
    std::string key = check.key(dev, *store_const("k" + std::to_string(k), k), {});
    std::ifstream in(check.entry_path(key), std::ios::binary);
    Bytes bytes{std::istreambuf_iterator<char>(in), {}};
    auto raw = decode_entry(bytes, *parse_key_hex(key), PayloadKind::artifact, dir_secret(dir.path()));
    ASSERT_TRUE(raw) << "entry " << k << " is not valid";
    auto entry = deserialize_artifact(*raw);
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->artifact.bytes.size(), 64u * 1024);
  }
  for (const std::string& f : files) EXPECT_TRUE(f.ends_with(".mtc")) << f;
}

TEST(CacheProcesses, WarmProcessLoadsInsteadOfCompiling) {
  TempDir dir;
  {
    Cache cache;
    cache.set_dir(dir.path());
    auto dev = std::make_shared<FakeDevice>("fake v1");
    for (int k = 0; k < kKernels; ++k) compile_kernel(cache, dev, store_const("w", k), {});
    ASSERT_EQ(dev->builds, kKernels);
  }
  pid_t pid = spawn([&] {
    Cache cache;
    cache.set_dir(dir.path());
    auto dev = std::make_shared<FakeDevice>("fake v1");
    for (int k = 0; k < kKernels; ++k)
      if (!compile_kernel(cache, dev, store_const("w", k), {})->from_cache) return 1;
    if (dev->builds != 0) return 2;
    return cache.stats().disk_hits == kKernels ? 0 : 3;
  });
  EXPECT_EQ(wait_for(pid), 0);
}

TEST(CacheProcesses, ThreadsCompilingAtOnceAgree) {
  TempDir dir;
  Cache cache;
  cache.set_dir(dir.path());
  auto dev = std::make_shared<FakeDevice>("fake v1");
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        int k = (i + t) % 10;
        try {
          if (!compile_kernel(cache, dev, store_const("t", k), {})->kernel) failures++;
        } catch (...) {
          failures++;
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(all_files(dir.path()).size(), 10u);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.memory_hits + s.disk_hits + s.misses, 40u);
}

}  // namespace
}  // namespace metile

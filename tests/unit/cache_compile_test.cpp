// compile_kernel through a Cache: the memory and disk levels, key sensitivity, bad entries,
// unwritable disks, pruning, statistics, logging and debug dumps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <set>

#include "cache/cache.h"
#include "cache_fake_device.h"
#include "scoped_env.h"
#include "driver/compile.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

using test::all_files;
using test::dir_secret;
using test::FakeDevice;
using test::store_const;
using test::TempDir;

std::shared_ptr<FakeDevice> fake(const std::string& identity = "fake v1", size_t payload = 4096) {
  return std::make_shared<FakeDevice>(identity, payload);
}

std::unique_ptr<Cache> cache_in(const std::string& dir,
                                CacheIdentity id = default_cache_identity()) {
  auto c = std::make_unique<Cache>(std::move(id));
  c->set_dir(dir);
  c->set_enabled(true);
  return c;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The entry at `path` decodes, for `key`, to a valid artifact.
bool valid_entry(const std::string& path, const std::string& key) {
  std::string dir = path.substr(0, path.size() - 72);  // <dir>/<2 hex>/<64 hex>.mtc
  auto raw = decode_entry(read_bytes(path), *parse_key_hex(key), PayloadKind::artifact,
                          dir_secret(dir));
  return raw && deserialize_artifact(*raw);
}

TEST(CacheCompile, SecondBuilderLoadsFromDisk) {
  TempDir dir;
  auto prog = store_const("k", 1);
  auto dev_a = fake();
  auto a = compile_kernel(*cache_in(dir.path()), dev_a, prog, {});
  EXPECT_EQ(dev_a->builds, 1);
  EXPECT_FALSE(a->from_cache);
  EXPECT_EQ(a->cache_key.size(), 64u);
  std::string path = dir.path() + "/" + a->cache_key.substr(0, 2) + "/" + a->cache_key + ".mtc";
  EXPECT_TRUE(valid_entry(path, a->cache_key));

  auto dev_b = fake();
  auto cache_b = cache_in(dir.path());
  auto b = compile_kernel(*cache_b, dev_b, prog, {});
  EXPECT_EQ(dev_b->builds, 0);
  EXPECT_EQ(dev_b->loads, 1);
  EXPECT_TRUE(b->from_cache);
  EXPECT_EQ(b->cache_key, a->cache_key);
  EXPECT_EQ(b->artifact.sources, a->artifact.sources);
  EXPECT_EQ(b->artifact.threads_per_group, 32);
  EXPECT_EQ(cache_b->stats().disk_hits, 1u);
  EXPECT_EQ(cache_b->entry_path(a->cache_key), path);
}

TEST(CacheCompile, EveryKeyInputMatters) {
  TempDir dir;
  auto prog = store_const("k", 1);
  std::string key = compile_kernel(*cache_in(dir.path()), fake(), prog, {})->cache_key;

  struct Case {
    const char* what;
    std::shared_ptr<const Program> program;
    CompileOptions options;
    std::string device_identity;
    CacheIdentity identity;
  };
  CompileOptions opt0;
  opt0.opt_level = 0;
  CompileOptions threads;
  threads.num_threads = 128;
  CompileOptions tf32;
  tf32.allow_tf32 = 0;
  CacheIdentity other_build = default_cache_identity();
  other_build.build_identity = "a different compiler";
  CacheIdentity other_format = default_cache_identity();
  other_format.format_version += 1;
  std::vector<Case> cases = {
      {"program", store_const("k", 2), {}, "fake v1", default_cache_identity()},
      {"kernel name", store_const("k2", 1), {}, "fake v1", default_cache_identity()},
      {"opt_level", prog, opt0, "fake v1", default_cache_identity()},
      {"num_threads", prog, threads, "fake v1", default_cache_identity()},
      {"allow_tf32", prog, tf32, "fake v1", default_cache_identity()},
      {"device identity", prog, {}, "fake v2", default_cache_identity()},
      {"build identity", prog, {}, "fake v1", other_build},
      {"format version", prog, {}, "fake v1", other_format},
  };
  std::set<std::string> keys = {key};
  for (const Case& c : cases) {
    auto dev = fake(c.device_identity);
    auto k = compile_kernel(*cache_in(dir.path(), c.identity), dev, c.program, c.options);
    EXPECT_EQ(dev->builds, 1) << c.what << " changed but the cache hit";
    EXPECT_FALSE(k->from_cache) << c.what;
    EXPECT_TRUE(keys.insert(k->cache_key).second) << c.what << " did not change the key";
  }
  // Source locations are part of the key: they reach the kernel (error sites, device_print
  // lines), so the same ops traced from another file are built again.
  auto dev = fake();
  auto moved = compile_kernel(*cache_in(dir.path()), dev, store_const("k", 1, "elsewhere.py"), {});
  EXPECT_EQ(dev->builds, 1);
  EXPECT_NE(moved->cache_key, key);
}

TEST(CacheCompile, KeyMaterialFieldsAreFramed) {
  KeyMaterial a{1, "ab", "c", "", ""};
  KeyMaterial b{1, "a", "bc", "", ""};
  EXPECT_NE(compute_cache_key(a), compute_cache_key(b));
  EXPECT_EQ(compute_cache_key(a), compute_cache_key(a));
}

// Replaces the entry for `prog` with what `corrupt` makes of it, then checks a fresh builder
// treats it as a miss, rebuilds, and leaves a valid entry behind.
void expect_replaced(
    const char* what,
    const std::function<void(const std::string& path, const std::string& dir)>& corrupt) {
  TempDir dir;
  auto prog = store_const("k", 1);
  auto first = compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  std::string path = cache_in(dir.path())->entry_path(first->cache_key);
  corrupt(path, dir.path());
  ASSERT_FALSE(valid_entry(path, first->cache_key)) << what << ": the corruption did nothing";

  auto dev = fake();
  auto cache = cache_in(dir.path());
  auto again = compile_kernel(*cache, dev, prog, {});
  EXPECT_EQ(dev->builds, 1) << what << " was used";
  EXPECT_FALSE(again->from_cache) << what;
  EXPECT_EQ(cache->stats().misses, 1u) << what;
  EXPECT_TRUE(valid_entry(path, first->cache_key)) << what << " was not replaced";
  auto third_dev = fake();
  EXPECT_TRUE(compile_kernel(*cache_in(dir.path()), third_dev, prog, {})->from_cache) << what;
  EXPECT_EQ(third_dev->builds, 0) << what;
}

TEST(CacheCompile, BadEntriesAreMissesAndGetReplaced) {
  expect_replaced("a flipped payload byte", [](const std::string& p, const std::string&) {
    auto b = read_bytes(p);
    b[b.size() - 10] ^= 0xff;
    write_bytes(p, b);
  });
  expect_replaced("a truncated entry", [](const std::string& p, const std::string&) {
    auto b = read_bytes(p);
    b.resize(b.size() / 2);
    write_bytes(p, b);
  });
  expect_replaced("an empty file",
                  [](const std::string& p, const std::string&) { write_bytes(p, {}); });
  expect_replaced("a foreign file", [](const std::string& p, const std::string&) {
    std::string text = "not a metile cache entry\n";
    write_bytes(p, {text.begin(), text.end()});
  });
  expect_replaced("another key's entry", [](const std::string& p, const std::string& d) {
    auto other = compile_kernel(*cache_in(d), fake(), store_const("other", 7), {});
    write_bytes(p, read_bytes(cache_in(d)->entry_path(other->cache_key)));
  });
  expect_replaced(
      "an entry of another format version", [](const std::string& p, const std::string& d) {
        auto b = read_bytes(p);
        auto key = *parse_key_hex(p.substr(p.size() - 68, 64));
        auto raw = decode_entry(b, key, PayloadKind::artifact, dir_secret(d));
        write_bytes(p, encode_entry(key, PayloadKind::artifact, *raw, dir_secret(d),
                                    kCacheFormatVersion + 1));
      });
  expect_replaced("a valid stream with a bad payload",
                  [](const std::string& p, const std::string& d) {
                    auto key = *parse_key_hex(p.substr(p.size() - 68, 64));
                    Bytes junk = {1, 2, 3};
                    write_bytes(p, encode_entry(key, PayloadKind::artifact, junk, dir_secret(d)));
                  });
  expect_replaced("a forged entry (right key and crc, no secret)",
                  [](const std::string& p, const std::string& d) {
                    auto key = *parse_key_hex(p.substr(p.size() - 68, 64));
                    auto raw = decode_entry(read_bytes(p), key, PayloadKind::artifact, dir_secret(d));
                    MacKey guess{};
                    write_bytes(p, encode_entry(key, PayloadKind::artifact, *raw, guess));
                  });
}

TEST(CacheCompile, MemoryLevelReusesTheLoadedKernel) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  auto dev = fake();
  auto prog = store_const("k", 1);
  auto a = compile_kernel(*cache, dev, prog, {});
  auto b = compile_kernel(*cache, dev, prog, {});
  EXPECT_EQ(dev->builds, 1);
  EXPECT_EQ(dev->loads, 1);
  EXPECT_TRUE(b->from_cache);
  EXPECT_EQ(a->kernel, b->kernel);
  EXPECT_EQ(b->device, dev);
  EXPECT_EQ(b->artifact.sources, a->artifact.sources);
  EXPECT_EQ(cache->stats().memory_hits, 1u);
  // Another instance of the same kind of device shares the disk entry, not the loaded kernel.
  auto other = fake();
  auto c = compile_kernel(*cache, other, prog, {});
  EXPECT_EQ(other->builds, 0);
  EXPECT_EQ(other->loads, 1);
  EXPECT_NE(c->kernel, a->kernel);
  EXPECT_EQ(cache->stats().disk_hits, 1u);
}

TEST(CacheCompile, DeviceWithoutIdentityUsesMemoryOnly) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  auto dev = fake("");
  auto prog = store_const("k", 1);
  auto a = compile_kernel(*cache, dev, prog, {});
  auto b = compile_kernel(*cache, dev, prog, {});
  EXPECT_EQ(dev->builds, 1);
  EXPECT_TRUE(b->from_cache);
  EXPECT_EQ(a->cache_key.size(), 64u);
  EXPECT_TRUE(all_files(dir.path()).empty());
  CacheStats s = cache->stats();
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.bytes_written, 0u);
}

TEST(CacheCompile, NoCacheBypassesBothLevels) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  auto dev = fake();
  auto prog = store_const("k", 1);
  compile_kernel(*cache, dev, prog, {});
  CompileOptions no_cache;
  no_cache.no_cache = true;
  auto a = compile_kernel(*cache, dev, prog, no_cache);
  auto b = compile_kernel(*cache, dev, prog, no_cache);
  EXPECT_EQ(dev->builds, 3);
  EXPECT_FALSE(a->from_cache);
  EXPECT_FALSE(b->from_cache);
  EXPECT_EQ(a->cache_key, b->cache_key) << "no_cache is not part of the key";
  CacheStats s = cache->stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.memory_hits + s.disk_hits, 0u);

  TempDir fresh;
  auto c = cache_in(fresh.path());
  compile_kernel(*c, dev, prog, no_cache);
  EXPECT_TRUE(all_files(fresh.path()).empty());
}

TEST(CacheCompile, DisabledDiskWritesNothing) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  cache->set_enabled(false);
  EXPECT_FALSE(cache->disk_enabled());
  compile_kernel(*cache, fake(), store_const("k", 1), {});
  EXPECT_TRUE(all_files(dir.path()).empty());

  auto env_cache = std::make_unique<Cache>();
  env_cache->set_dir(dir.path());
  ::setenv("METILE_CACHE", "0", 1);
  EXPECT_FALSE(env_cache->disk_enabled());
  compile_kernel(*env_cache, fake(), store_const("k", 2), {});
  ::unsetenv("METILE_CACHE");
  EXPECT_TRUE(env_cache->disk_enabled());
  EXPECT_TRUE(all_files(dir.path()).empty());
}

TEST(CacheCompile, StatisticsCountBytesAndSavedTime) {
  TempDir dir;
  auto prog = store_const("k", 1);
  auto writer = cache_in(dir.path());
  auto first = compile_kernel(*writer, fake(), prog, {});
  std::string path = writer->entry_path(first->cache_key);
  uint64_t size = read_bytes(path).size();
  CacheStats w = writer->stats();
  EXPECT_EQ(w.misses, 1u);
  EXPECT_EQ(w.bytes_written, size);
  EXPECT_EQ(w.bytes_read, 0u);

  auto raw = decode_entry(read_bytes(path), *parse_key_hex(first->cache_key),
                          PayloadKind::artifact, dir_secret(dir.path()));
  double recorded = deserialize_artifact(*raw)->build_seconds;
  EXPECT_GT(recorded, 0.0);

  auto reader = cache_in(dir.path());
  auto dev = fake();
  compile_kernel(*reader, dev, prog, {});
  compile_kernel(*reader, dev, prog, {});
  CacheStats r = reader->stats();
  EXPECT_EQ(r.disk_hits, 1u);
  EXPECT_EQ(r.memory_hits, 1u);
  EXPECT_EQ(r.misses, 0u);
  EXPECT_EQ(r.bytes_read, size);
  EXPECT_DOUBLE_EQ(r.compile_seconds_saved, 2 * recorded);

  reader->clear();
  CacheStats z = reader->stats();
  EXPECT_EQ(z.disk_hits + z.memory_hits + z.misses + z.bytes_read + z.bytes_written, 0u);
  EXPECT_EQ(z.compile_seconds_saved, 0.0);
}

TEST(CacheCompile, ClearRemovesEntriesAndMemory) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  auto dev = fake();
  for (int i = 0; i < 5; ++i) compile_kernel(*cache, dev, store_const("k", i), {});
  cache->store_autotune("tune", "winner");
  write_bytes(dir.path() + "/user-file.txt", {1});
  ASSERT_EQ(all_files(dir.path()).size(), 7u);
  cache->clear();
  EXPECT_EQ(all_files(dir.path()), std::vector<std::string>{"user-file.txt"})
      << "clear removes only what the cache wrote";
  compile_kernel(*cache, dev, store_const("k", 0), {});
  EXPECT_EQ(dev->builds, 6) << "the memory level was cleared too";
}

// Whether chmod can stop this process from writing (it cannot for root).
bool permissions_apply(const std::string& dir) {
  ::chmod(dir.c_str(), 0555);
  std::string probe = dir + "/probe";
  bool wrote = std::ofstream(probe).good();
  ::unlink(probe.c_str());
  ::chmod(dir.c_str(), 0755);
  return !wrote;
}

TEST(CacheCompile, ReadOnlyDirectoryCompilesWithOneWarning) {
  TempDir dir;
  auto prog = store_const("k", 1);
  // Populate first: a read-only cache still serves what it holds.
  std::string key = compile_kernel(*cache_in(dir.path()), fake(), prog, {})->cache_key;
  auto cache = cache_in(dir.path());
  if (permissions_apply(dir.path())) {
    ::chmod(dir.path().c_str(), 0555);
    ::chmod((dir.path() + "/" + key.substr(0, 2)).c_str(), 0555);
  } else {
    // Running as root, where mode bits do not stop writes: simulate what a read-only file system
    // does to each step of a publication.
    cache->set_write_fault_hook([](const char*, uint64_t) { return EROFS; });
  }
  auto before = all_files(dir.path());
  ::unsetenv("METILE_LOG");
  testing::internal::CaptureStderr();
  auto dev = fake();
  auto hit = compile_kernel(*cache, dev, prog, {});
  auto a = compile_kernel(*cache, dev, store_const("k", 2), {});
  auto b = compile_kernel(*cache, dev, store_const("k", 3), {});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(hit->from_cache);
  EXPECT_EQ(dev->builds, 2);
  EXPECT_TRUE(a->kernel && b->kernel);
  EXPECT_EQ(count(err, "metile: warning: compile cache: cannot write to " + dir.path()), 1) << err;
  EXPECT_EQ(all_files(dir.path()), before);
  EXPECT_EQ(cache->stats().bytes_written, 0u);
  // The memory level keeps working.
  EXPECT_TRUE(compile_kernel(*cache, dev, store_const("k", 2), {})->from_cache);
  EXPECT_EQ(dev->builds, 2);
}

TEST(CacheCompile, FullDiskMidWriteLeavesNothingBehind) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  std::vector<std::string> steps;
  // ENOSPC once 64 KiB of the entry are on disk: the temp file is partly written when it fails.
  cache->set_write_fault_hook([&](const char* step, uint64_t offset) {
    steps.push_back(step);
    return std::string(step) == "write" && offset >= 64 * 1024 ? ENOSPC : 0;
  });
  auto dev = fake("fake v1", 300 * 1024);
  testing::internal::CaptureStderr();
  auto a = compile_kernel(*cache, dev, store_const("k", 1), {});
  auto b = compile_kernel(*cache, dev, store_const("k", 2), {});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(a->kernel && b->kernel);
  EXPECT_EQ(dev->builds, 2);
  EXPECT_EQ(count(err, "cannot write to " + dir.path()), 1) << err;
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_EQ(std::count(steps.begin(), steps.end(), std::string("write")), 2)
      << "one write went through before the failure; the second kernel did not try again";
  EXPECT_TRUE(all_files(dir.path()).empty()) << "a partial entry or temp file was left";
  EXPECT_EQ(cache->stats().bytes_written, 0u);
}

TEST(CacheCompile, FailedRenameLeavesNoTempFile) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  cache->set_write_fault_hook(
      [](const char* step, uint64_t) { return std::string(step) == "rename" ? EXDEV : 0; });
  testing::internal::CaptureStderr();
  compile_kernel(*cache, fake(), store_const("k", 1), {});
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(all_files(dir.path()).empty());
}

void set_mtime(const std::string& path, int64_t seconds_ago) {
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(CacheCompile, PrunesLeastRecentlyUsedToTheCap) {
  TempDir dir;
  const size_t payload = 10000;  // incompressible, so each entry is a little over 10 kB
  std::vector<std::string> paths;
  {
    auto writer = cache_in(dir.path());
    for (int i = 0; i < 3; ++i)
      paths.push_back(writer->entry_path(
          compile_kernel(*writer, fake("fake v1", payload), store_const("k", i), {})->cache_key));
  }
  uint64_t entry_size = read_bytes(paths[0]).size();
  ASSERT_GT(entry_size, payload);
  for (int i = 0; i < 3; ++i) set_mtime(paths[i], 100 - i);  // k0 oldest, k2 newest

  auto cache = cache_in(dir.path());
  cache->set_max_bytes(entry_size * 3 + entry_size / 2);
  // Reading k0 makes it the most recently used.
  auto dev = fake("fake v1", payload);
  EXPECT_TRUE(compile_kernel(*cache, dev, store_const("k", 0), {})->from_cache);
  // A fourth entry crosses the cap; the least recently used (k1) goes.
  std::string p3 =
      cache->entry_path(compile_kernel(*cache, dev, store_const("k", 3), {})->cache_key);
  EXPECT_TRUE(std::filesystem::exists(paths[0]));
  EXPECT_FALSE(std::filesystem::exists(paths[1]));
  EXPECT_TRUE(std::filesystem::exists(paths[2]));
  EXPECT_TRUE(std::filesystem::exists(p3));
}

// Fills every shard with one old 1000-byte entry (shard i older than shard i + 1), so a sample
// of any few shards predicts 256 kB plus whatever was just written.
std::vector<std::string> fill_shards(const std::string& dir) {
  std::vector<std::string> paths;
  for (int i = 0; i < 256; ++i) {
    char shard[9];  // room for any unsigned in hex, so the compiler sees no truncation
    std::snprintf(shard, sizeof shard, "%02x", static_cast<unsigned>(i));
    std::filesystem::create_directories(dir + "/" + shard);
    std::string path = dir + "/" + shard + "/" + shard + std::string(62, '0') + ".mtc";
    write_bytes(path, std::vector<uint8_t>(1000, 7));
    set_mtime(path, 10000 - i);
    paths.push_back(path);
  }
  return paths;
}

TEST(CacheCompile, FirstWriteUnderTheCapPrunesNothing) {
  TempDir dir;
  auto old = fill_shards(dir.path());
  auto cache = cache_in(dir.path());
  cache->set_max_bytes(400000);
  compile_kernel(*cache, fake("fake v1", 16), store_const("k", 0), {});
  for (const std::string& p : old) EXPECT_TRUE(std::filesystem::exists(p)) << p;
}

TEST(CacheCompile, FirstWriteOverTheCapPrunesOldestToNinetyPercent) {
  TempDir dir;
  auto old = fill_shards(dir.path());
  auto cache = cache_in(dir.path());
  cache->set_max_bytes(200000);
  auto k = compile_kernel(*cache, fake("fake v1", 16), store_const("k", 0), {});
  std::string fresh = cache->entry_path(k->cache_key);
  uint64_t total = 0;
  for (const std::string& f : all_files(dir.path()))
    total += std::filesystem::file_size(dir.path() + "/" + f);
  EXPECT_LE(total, 180000u);
  EXPECT_GT(total, 170000u) << "pruned far more than needed";
  EXPECT_TRUE(std::filesystem::exists(fresh));
  // Least recently used first: the survivors are exactly the newest old entries.
  size_t kept = std::count_if(old.begin(), old.end(),
                              [](const std::string& p) { return std::filesystem::exists(p); });
  for (size_t i = 0; i < old.size(); ++i)
    EXPECT_EQ(std::filesystem::exists(old[i]), i >= old.size() - kept) << old[i];
}

TEST(CacheCompile, PruningKeepsTheNewestEntryEvenOverTheCap) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  cache->set_max_bytes(1000);
  auto dev = fake("fake v1", 5000);
  std::string p0 =
      cache->entry_path(compile_kernel(*cache, dev, store_const("k", 0), {})->cache_key);
  std::string p1 =
      cache->entry_path(compile_kernel(*cache, dev, store_const("k", 1), {})->cache_key);
  EXPECT_FALSE(std::filesystem::exists(p0));
  EXPECT_TRUE(std::filesystem::exists(p1));
}

TEST(CacheCompile, PruningRemovesStaleTempFiles) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  cache->set_max_bytes(1);
  auto dev = fake();
  std::string p0 =
      cache->entry_path(compile_kernel(*cache, dev, store_const("k", 0), {})->cache_key);
  std::string shard = p0.substr(0, p0.find_last_of('/'));
  std::string stale = shard + "/.x.mtc.1.2.3.tmp", fresh = shard + "/.y.mtc.1.2.3.tmp";
  write_bytes(stale, {1});
  write_bytes(fresh, {1});
  set_mtime(stale, 2 * 3600);
  compile_kernel(*cache, dev, store_const("k", 1), {});
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(fresh)) << "a writer may still be working on it";
}

TEST(CacheCompile, SettingsAndDefaults) {
  Cache cache;
  EXPECT_THROW(cache.set_dir(std::string()), Error);
  EXPECT_THROW(cache.set_max_bytes(0), Error);
  {
    test::ScopedEnv env("METILE_CACHE_DIR", "/tmp/metile-env-dir/");
    EXPECT_EQ(cache.dir(), "/tmp/metile-env-dir");
  }
  {
    test::ScopedEnv env("METILE_CACHE_DIR", nullptr), xdg("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(cache.dir(), "/tmp/xdg/metile");
    test::ScopedEnv relative("XDG_CACHE_HOME", "relative/xdg");  // ignored, as the XDG spec says
    test::ScopedEnv home("HOME", "/tmp/home");
    EXPECT_EQ(cache.dir(), "/tmp/home/.cache/metile");
  }
  cache.set_dir("relative/dir");
  EXPECT_EQ(cache.dir(), std::filesystem::current_path().string() + "/relative/dir");
  cache.set_dir(std::nullopt);
  EXPECT_NE(cache.dir(), std::filesystem::current_path().string() + "/relative/dir");

  EXPECT_EQ(cache.max_bytes(), kDefaultCacheMaxBytes);
  test::ScopedEnv max_bytes("METILE_CACHE_MAX_BYTES", "12345");
  EXPECT_EQ(cache.max_bytes(), 12345u);
  cache.set_max_bytes(777);
  EXPECT_EQ(cache.max_bytes(), 777u);
}

TEST(CacheCompile, LogsOneLinePerCompile) {
  TempDir dir;
  auto prog = store_const("logged", 1);
  ::setenv("METILE_LOG", "info", 1);
  testing::internal::CaptureStderr();
  compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  auto cache = cache_in(dir.path());
  auto dev = fake();
  compile_kernel(*cache, dev, prog, {});
  compile_kernel(*cache, dev, prog, {});
  std::string err = testing::internal::GetCapturedStderr();
  ::unsetenv("METILE_LOG");
  EXPECT_EQ(count(err, "\n"), 3) << err;
  EXPECT_NE(err.find("metile: info: logged on fake: compiled in "), std::string::npos) << err;
  EXPECT_NE(err.find("metile: info: logged on fake: loaded from disk cache in "), std::string::npos)
      << err;
  EXPECT_NE(err.find("metile: info: logged on fake: memory cache hit"), std::string::npos) << err;
}

TEST(CacheCompile, DebugDumpsOnHitsToo) {
  TempDir dir, dumps;
  auto prog = store_const("dumped", 1);
  compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  ::setenv("METILE_DEBUG", "all", 1);
  ::setenv("METILE_DEBUG_DIR", dumps.path().c_str(), 1);
  auto hit = compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  ::unsetenv("METILE_DEBUG");
  ::unsetenv("METILE_DEBUG_DIR");
  EXPECT_TRUE(hit->from_cache);
  std::vector<uint8_t> src = read_bytes(dumps.path() + "/dumped.msl_signature.txt");
  EXPECT_EQ(std::string(src.begin(), src.end()), hit->artifact.sources.at(Stage::msl_signature));
  EXPECT_TRUE(std::filesystem::exists(dumps.path() + "/dumped.tile_ir.txt"));
}

TEST(CacheCompile, EntryThatNoLongerLoadsIsRebuilt) {
  TempDir dir;
  auto prog = store_const("k", 1);
  auto first = compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  // A well-formed entry whose artifact the device rejects (as if a library it needs vanished).
  CachedArtifact wrong{fake()->expected(*store_const("k", 99), {}), 0.5};
  std::string path = cache_in(dir.path())->entry_path(first->cache_key);
  write_bytes(path, encode_entry(*parse_key_hex(first->cache_key), PayloadKind::artifact,
                                 serialize_artifact(wrong), dir_secret(dir.path())));
  auto dev = fake();
  auto cache = cache_in(dir.path());
  auto k = compile_kernel(*cache, dev, prog, {});
  EXPECT_EQ(dev->builds, 1);
  EXPECT_FALSE(k->from_cache);
  EXPECT_EQ(cache->stats().disk_hits, 0u);
  EXPECT_EQ(cache->stats().misses, 1u);
  auto again = fake();
  EXPECT_TRUE(compile_kernel(*cache_in(dir.path()), again, prog, {})->from_cache);
  EXPECT_EQ(again->builds, 0);
}

TEST(CacheAutotune, StoresAndLooksUpWinners) {
  TempDir dir;
  auto cache = cache_in(dir.path());
  EXPECT_FALSE(cache->find_autotune("gemm"));
  cache->store_autotune("gemm", "BM=64");
  cache->store_autotune("gemm", "BM=128");  // replaces
  cache->store_autotune("softmax", "");
  EXPECT_EQ(cache_in(dir.path())->find_autotune("gemm"), "BM=128");
  EXPECT_EQ(cache_in(dir.path())->find_autotune("softmax"), "");
  auto files = all_files(dir.path());
  ASSERT_EQ(files.size(), 2u);
  std::string gemm = dir.path() + "/autotune/" + sha256_hex("gemm") + ".mta";
  ASSERT_TRUE(std::filesystem::exists(gemm));
  auto b = read_bytes(gemm);
  b.back() ^= 1;
  write_bytes(gemm, b);
  EXPECT_FALSE(cache->find_autotune("gemm")) << "corrupt records read as missing";
  // A record that is intact but names another key is not this key's winner.
  write_bytes(gemm, encode_entry(*parse_key_hex(sha256_hex("gemm")), PayloadKind::autotune,
                                 serialize_autotune("not gemm", "BM=32"), dir_secret(dir.path())));
  EXPECT_FALSE(cache->find_autotune("gemm"));
  cache->set_enabled(false);
  cache->store_autotune("off", "x");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/autotune/" + sha256_hex("off") + ".mta"));
}

}  // namespace
}  // namespace metile

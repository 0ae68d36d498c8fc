// The cache directory is not trusted blindly: FIFOs and symlinks planted under entry names, forged
// entries, directories others can write, a secret others can read, and symlinks planted in the
// debug-dump directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cache/cache.h"
#include "cache/trust.h"
#include "cache_fake_device.h"
#include "driver/compile.h"

namespace metile {
namespace METILE_UNITY_ID {

using test::all_files;
using test::FakeDevice;
using test::store_const;
using test::TempDir;

std::shared_ptr<FakeDevice> fake() { return std::make_shared<FakeDevice>("fake v1", 4096); }

std::unique_ptr<Cache> cache_in(const std::string& dir) {
  auto c = std::make_unique<Cache>();
  c->set_dir(dir);
  c->set_enabled(true);
  return c;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Compiles `prog` against `dir` with a fresh cache and device; true when it was a disk hit.
bool disk_hit(const std::string& dir, std::shared_ptr<const Program> prog) {
  auto dev = fake();
  auto k = compile_kernel(*cache_in(dir), dev, prog, {});
  return k->from_cache && dev->builds == 0;
}

TEST(CacheTrust, FifoUnderAnEntryNameIsAMissNotAHang) {
  TempDir dir;
  auto prog = store_const("k", 1);
  std::string path = cache_in(dir.path())->entry_path(cache_in(dir.path())->key(*fake(), *prog, {}));
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_FALSE(disk_hit(dir.path(), prog));  // would block in open() without O_NONBLOCK
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the FIFO was replaced by the new entry";
  EXPECT_TRUE(disk_hit(dir.path(), prog));
}

TEST(CacheTrust, SymlinkedEntryIsNotFollowed) {
  TempDir dir, elsewhere;
  auto prog = store_const("k", 1);
  compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  std::string path = cache_in(dir.path())->entry_path(cache_in(dir.path())->key(*fake(), *prog, {}));
  // A valid entry moved elsewhere and linked back: O_NOFOLLOW makes the link a miss.
  std::string moved = elsewhere.path() + "/entry";
  std::filesystem::rename(path, moved);
  std::filesystem::create_symlink(moved, path);
  EXPECT_FALSE(disk_hit(dir.path(), prog));
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(CacheTrust, OversizedEntryIsNotRead) {
  TempDir dir;
  auto prog = store_const("k", 1);
  compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  std::string path = cache_in(dir.path())->entry_path(cache_in(dir.path())->key(*fake(), *prog, {}));
  EXPECT_TRUE(read_whole_file(path));
  EXPECT_FALSE(read_whole_file(path, 10)) << "larger than the cap";
}

TEST(CacheTrust, SecretIsPrivateAndSharedByProcesses) {
  TempDir dir;
  compile_kernel(*cache_in(dir.path()), fake(), store_const("k", 1), {});
  std::string secret = dir.path() + "/" + kCacheSecretName;
  struct stat st;
  ASSERT_EQ(::lstat(secret.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  std::string why;
  auto a = cache_secret(dir.path(), false, &why);
  auto b = cache_secret(dir.path(), true, &why);
  ASSERT_TRUE(a && b) << why;
  EXPECT_EQ(*a, *b) << "a second reader must not replace the secret";
  EXPECT_TRUE(disk_hit(dir.path(), store_const("k", 1)));
}

TEST(CacheTrust, ReadableSecretMakesTheDirectoryUnused) {
  TempDir dir;
  auto prog = store_const("k", 1);
  compile_kernel(*cache_in(dir.path()), fake(), prog, {});
  std::string secret = dir.path() + "/" + kCacheSecretName;
  ASSERT_EQ(::chmod(secret.c_str(), 0644), 0);
  std::string why;
  EXPECT_FALSE(cache_secret(dir.path(), true, &why));
  EXPECT_NE(why.find("only its owner"), std::string::npos) << why;
  EXPECT_FALSE(disk_hit(dir.path(), prog)) << "a secret others can read protects nothing";
}

TEST(CacheTrust, WritableByOthersDirectoryIsNotUsed) {
  TempDir dir;
  std::string root = dir.path() + "/shared";
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(root.c_str(), 0777), 0);
  EXPECT_NE(untrusted_dir_reason(root).find("writable by group or others"), std::string::npos);
  testing::internal::CaptureStderr();
  auto prog = store_const("k", 1);
  compile_kernel(*cache_in(root), fake(), prog, {});
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not using " + root), std::string::npos) << err;
  EXPECT_TRUE(all_files(root).empty()) << "nothing is written into an untrusted directory";
  EXPECT_FALSE(std::filesystem::exists(root + "/" + kCacheSecretName));
  EXPECT_FALSE(disk_hit(root, prog));
  // Made private again, it is used.
  ASSERT_EQ(::chmod(root.c_str(), 0700), 0);
  compile_kernel(*cache_in(root), fake(), prog, {});
  EXPECT_TRUE(disk_hit(root, prog));
}

TEST(CacheTrust, DirectoryOfAnotherUserIsNotUsed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  TempDir dir;
  std::string root = dir.path() + "/theirs";
  ASSERT_EQ(::mkdir(root.c_str(), 0700), 0);
  ASSERT_EQ(::chown(root.c_str(), 65534, 65534), 0);
  EXPECT_NE(untrusted_dir_reason(root).find("belongs to uid 65534"), std::string::npos);
  auto prog = store_const("k", 1);
  compile_kernel(*cache_in(root), fake(), prog, {});
  EXPECT_TRUE(all_files(root).empty());
  EXPECT_FALSE(disk_hit(root, prog));
}

TEST(CacheTrust, NewCacheDirectoriesArePrivate) {
  TempDir dir;
  std::string root = dir.path() + "/a/b";
  compile_kernel(*cache_in(root), fake(), store_const("k", 1), {});
  struct stat st;
  ASSERT_EQ(::stat(root.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);
  EXPECT_TRUE(disk_hit(root, store_const("k", 1)));
}

TEST(CacheTrust, DebugDumpReplacesAPlantedSymlinkInsteadOfWritingThroughIt) {
  TempDir dir, dumps, victim_dir;
  std::string victim = victim_dir.path() + "/victim";
  { std::ofstream(victim) << "precious"; }
  std::string planted = dumps.path() + "/dumped.tile_ir.txt";
  std::filesystem::create_symlink(victim, planted);
  ::setenv("METILE_DEBUG", "tile_ir", 1);
  ::setenv("METILE_DEBUG_DIR", dumps.path().c_str(), 1);
  compile_kernel(*cache_in(dir.path()), fake(), store_const("dumped", 1), {});
  ::unsetenv("METILE_DEBUG");
  ::unsetenv("METILE_DEBUG_DIR");
  EXPECT_EQ(read_text(victim), "precious");
  struct stat st;
  ASSERT_EQ(::lstat(planted.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_NE(read_text(planted).find("kernel @dumped"), std::string::npos) << read_text(planted);
}

}  // namespace
}  // namespace metile

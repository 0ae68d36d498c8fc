// A fake device for compile-cache tests: build() derives deterministic bytes from the program
// text and options and counts calls; load() checks that the artifact is exactly what build()
// makes for that program, so a cache that hands back the wrong entry fails the test.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cache/trust.h"
#include "frontend/builder.h"
#include "runtime/device.h"
#include "support/error.h"
#include "support/sha256.h"

namespace metile::test {

class FakeBuffer : public Buffer {
 public:
  explicit FakeBuffer(size_t n) : data_(n) {}
  void* contents() override { return data_.data(); }
  size_t size() const override { return data_.size(); }

 private:
  std::vector<uint8_t> data_;
};

class FakeDevice;

class FakeLaunch : public PreparedLaunch {
 public:
  explicit FakeLaunch(FakeDevice* d) : device(d) {}
  /** Runs take sleep_ms[i % size] milliseconds (none when empty). */
  void run() override;
  FakeDevice* device;
  std::vector<int> sleep_ms;
  int runs = 0;
};

class FakeKernel : public Kernel {
 public:
  explicit FakeKernel(FakeDevice* d) : device(d) {}
  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override {
    auto l = std::make_unique<FakeLaunch>(device);
    l->grid = grid;
    l->args = std::move(args);
    return l;
  }
  FakeDevice* device;
};

class FakeDevice : public Device {
 public:
  explicit FakeDevice(std::string identity, size_t payload_bytes = 4096)
      : identity_(std::move(identity)), payload_bytes_(payload_bytes) {
    info_.name = "fake";
    info_.description = "compile-cache test device";
  }
  const DeviceInfo& info() const override { return info_; }
  std::shared_ptr<Buffer> alloc(size_t bytes) override {
    return std::make_shared<FakeBuffer>(bytes);
  }
  std::shared_ptr<Buffer> wrap(void*, size_t bytes) override { return alloc(bytes); }
  void synchronize() override { events += 's'; }
  std::string cache_identity() const override { return identity_; }

  /** What build() produces for `program`: pseudo-random (incompressible) bytes from its text. */
  Artifact expected(const Program& program, const CompileOptions& options) const {
    Artifact a;
    a.kind = ArtifactKind::none;
    std::string text = print(program, false) + "|" + options.key();
    Sha256 seed;
    seed.update(text);
    Sha256::Digest block = seed.finish();
    while (a.bytes.size() < payload_bytes_) {
      Sha256 next;
      next.update(block.data(), block.size());
      block = next.finish();
      size_t take = std::min(block.size(), payload_bytes_ - a.bytes.size());
      a.bytes.insert(a.bytes.end(), block.begin(), block.begin() + take);
    }
    // The text a device keeps beside the pipeline's stages (metal keeps its signature there).
    a.sources[Stage::msl_signature] = "// source of " + program.name + "\n" + text;
    a.threads_per_group = 32;
    a.threadgroup_memory_bytes = 128;
    return a;
  }

  Artifact build(const Program& program, const CompileOptions& options) override {
    builds++;
    return expected(program, options);
  }

  std::shared_ptr<Kernel> load(std::shared_ptr<const Program> program,
                               const CompileOptions& options, const Artifact& artifact) override {
    loads++;
    Artifact want = expected(*program, options);
    // compile_kernel adds the Tile IR pipeline's text; the rest is what build() wrote.
    std::map<Stage, std::string> sources = artifact.sources;
    sources.erase(Stage::tile_ir_opt);
    if (artifact.kind != want.kind || artifact.bytes != want.bytes || sources != want.sources || artifact.threads_per_group != want.threads_per_group ||
        artifact.threadgroup_memory_bytes != want.threadgroup_memory_bytes)
      fail(METILE_ERROR_INTERNAL, "fake", "artifact does not match program ", program->name);
    return std::make_shared<FakeKernel>(this);
  }

  std::atomic<int> builds{0};
  std::atomic<int> loads{0};
  /** 'r' per launch run, 's' per synchronize, in order (single-threaded tests only). */
  std::string events;

 private:
  DeviceInfo info_;
  std::string identity_;
  size_t payload_bytes_;
};

inline void FakeLaunch::run() {
  if (!sleep_ms.empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms[runs % sleep_ms.size()]));
  runs++;
  device->events += 'r';
}

/** A small valid program `X[pid] = value`; `file` only changes source locations. */
inline std::shared_ptr<const Program> store_const(const std::string& name, int value,
                                                  const std::string& file = "k.py") {
  Builder b(name);
  b.set_loc(file, 1);
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId pid = b.grid(OpKind::PROGRAM_ID, 0);
  b.store(b.binary(OpKind::ADD, x, pid), b.const_float(DType::f32, value), kNoValue);
  return std::make_shared<const Program>(b.finish());
}

/** A fresh directory, removed (made writable first) with everything in it at scope exit. */
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "metile-cache-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    for (auto& e : std::filesystem::recursive_directory_iterator(path_, ec))
      if (e.is_directory(ec)) ::chmod(e.path().c_str(), 0755);
    ::chmod(path_.c_str(), 0755);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/** Every file under `dir`, relative paths. */
// Every file under `dir` except the cache's secret (trust.h).
inline std::vector<std::string> all_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && std::filesystem::relative(e.path(), dir) != kCacheSecretName)
      out.push_back(std::filesystem::relative(e.path(), dir).string());
  return out;
}

// The secret of the cache in `dir` (created there when missing), for tests that read or write
// entries themselves.
inline MacKey dir_secret(const std::string& dir) {
  std::string why;
  auto key = cache_secret(dir, /*create=*/true, &why);
  if (!key) throw std::runtime_error("no cache secret in " + dir + ": " + why);
  return *key;
}

}  // namespace metile::test

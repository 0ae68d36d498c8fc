#include "cache/cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cache/trust.h"
#include "runtime/host/build_store.h"
#include "support/embedded.h"
#include "support/env.h"
#include "support/error.h"
#include "support/log.h"
#include "support/sha256.h"

namespace metile {

namespace {

constexpr const char* kEntrySuffix = ".mtc";
constexpr const char* kAutotuneSuffix = ".mta";
constexpr const char* kAutotuneDir = "autotune";
// A temp file this old belongs to a writer that died; publications take milliseconds.
constexpr int64_t kStaleTempNs = int64_t{3600} * 1000000000;
// Shard directories (of 256) read to predict the cache's size at a process's first write.
constexpr int kSampleShards = 4;

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_named(const std::string& name, const char* suffix) {
  std::string_view s = name;
  return s.size() == 64 + std::strlen(suffix) && s.ends_with(suffix) && is_hex(s.substr(0, 64));
}

bool is_shard_dir(const std::string& name) { return name.size() == 2 && is_hex(name); }

bool is_entry(const std::string& name) { return is_named(name, kEntrySuffix); }

std::string home_dir() {
  std::string home = env_string("HOME");
  if (!home.empty()) return home;
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found && found->pw_dir)
    return found->pw_dir;
  return {};
}

// Absolute and without trailing slashes, so the directory means the same after a chdir().
std::string normalize_dir(const std::string& dir) {
  std::error_code ec;
  std::string abs = std::filesystem::absolute(dir, ec).lexically_normal().string();
  if (ec) abs = dir;
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs;
}

std::string default_dir() {
  std::string dir = env_string("METILE_CACHE_DIR");
  if (!dir.empty()) return normalize_dir(dir);
  // The XDG base directory spec says relative values are to be ignored.
  std::string xdg = env_string("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg[0] == '/') return normalize_dir(xdg + "/metile");
  std::string home = home_dir();
  return home.empty() ? std::string() : normalize_dir(home + "/.cache/metile");
}

// Best effort: a read-only cache still serves hits, it just cannot record their recency.
void touch(const std::string& path) { (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

// Removes the files `dir` holds that metile wrote; records the first failure other than ENOENT.
void remove_matching(const std::string& dir, const char* suffix, std::string* first_error) {
  auto ours = [&](const std::string& n) { return is_named(n, suffix) || is_temp_name(n); };
  for (const FileInfo& f : list_files(dir, ours)) {
    if (::unlink(f.path.c_str()) != 0 && errno != ENOENT && first_error->empty())
      *first_error = f.path + ": " + std::strerror(errno);
  }
  (void)::rmdir(dir.c_str());  // only succeeds when nothing else lives there
}

}  // namespace

CacheIdentity default_cache_identity() {
  return CacheIdentity{kCacheFormatVersion, kBuildIdentity};
}

std::string compute_cache_key(const KeyMaterial& m) {
  Sha256 h;
  auto field = [&](std::string_view s) {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t{s.size()} >> (8 * i));
    h.update(len, sizeof len);
    h.update(s);
  };
  field("metile compile cache");
  field(std::to_string(m.format_version));
  field(m.build_identity);
  field(m.device_identity);
  field(m.options);
  field(m.program_text);
  return to_hex(h.finish());
}

Cache::Cache(CacheIdentity identity) : identity_(std::move(identity)) {}

void Cache::set_dir(std::optional<std::string> dir) {
  if (dir && dir->empty())
    fail(METILE_ERROR_INVALID_ARGUMENT, "cache", "the cache directory must not be empty");
  std::lock_guard<std::mutex> lock(mu_);
  settings_.dir = dir ? std::optional(normalize_dir(*dir)) : std::nullopt;
}

std::string Cache::dir() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (settings_.dir) return *settings_.dir;
  }
  return default_dir();
}

void Cache::set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mu_);
  settings_.enabled = enabled;
}

bool Cache::disk_enabled() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (settings_.enabled) return *settings_.enabled;
  }
  return env_string("METILE_CACHE", "1") != "0";
}

void Cache::set_max_bytes(uint64_t max_bytes) {
  if (max_bytes == 0)
    fail(METILE_ERROR_INVALID_ARGUMENT, "cache",
         "the size cap must be > 0 bytes (to turn the disk cache off, disable it instead)");
  std::lock_guard<std::mutex> lock(mu_);
  settings_.max_bytes = max_bytes;
}

uint64_t Cache::max_bytes() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (settings_.max_bytes) return *settings_.max_bytes;
  }
  long long env = env_int("METILE_CACHE_MAX_BYTES", 0);
  return env > 0 ? static_cast<uint64_t>(env) : kDefaultCacheMaxBytes;
}

void Cache::set_write_fault_hook(WriteFaultHook hook) {
  std::lock_guard<std::mutex> lock(mu_);
  hook_ = std::move(hook);
}

std::string Cache::key(const Device& device, const Program& program,
                       const CompileOptions& options) const {
  KeyMaterial m;
  m.format_version = identity_.format_version;
  m.build_identity = identity_.build_identity;
  m.device_identity = device.cache_identity();
  if (m.device_identity.empty()) m.device_identity = "memory-only device " + device.info().name;
  m.options = options.key();
  // Locations reach the kernel (bounds-check and loop-step error sites, device_print lines,
  // interp's errors): the same ops traced from another line are another kernel.
  m.program_text = print(program, /*with_locations=*/true);
  return compute_cache_key(m);
}

std::string Cache::entry_path(const std::string& key) const {
  std::string d = dir();
  if (d.empty()) return {};
  return d + "/" + key.substr(0, 2) + "/" + key + kEntrySuffix;
}

std::string Cache::disk_dir(MacKey* mac) const {
  if (!disk_enabled()) return {};
  std::string d = dir();
  if (d.empty()) {
    warn_once("cache: no directory",
              "compile cache: no cache directory (set METILE_CACHE_DIR or HOME); kernels are "
              "cached in memory only");
    return {};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (trusted_dir_ == d) {
      *mac = secret_;
      return d;
    }
  }
  // Entries are code this process runs: only a directory of the user's that no one else can
  // write, with the user's secret in it, is used (checked once per directory and process).
  std::string why;
  struct stat st;
  if (::stat(d.c_str(), &st) != 0 && errno == ENOENT) {
    if (int err = make_dirs(d)) why = cat("cannot create it: ", std::strerror(err));
  }
  if (why.empty()) why = untrusted_dir_reason(d);
  std::optional<MacKey> secret;
  if (why.empty()) secret = cache_secret(d, /*create=*/true, &why);
  if (!secret) {
    warn_once("cache: untrusted " + d,
              cat("compile cache: not using ", d, " (", why, "); kernels are cached in memory only"));
    return {};
  }
  std::lock_guard<std::mutex> lock(mu_);
  trusted_dir_ = d;
  secret_ = *secret;
  *mac = secret_;
  return d;
}

void Cache::set_memory_entries(size_t entries) {
  std::vector<MemorySlot> dropped;  // destroyed after the lock: unloading code takes a while
  std::lock_guard<std::mutex> lock(mu_);
  memory_entries_ = std::max<size_t>(entries, 1);
  while (memory_.size() > memory_entries_) {
    auto it = memory_.find(recency_.back());
    dropped.push_back(std::move(it->second));
    memory_.erase(it);
    recency_.pop_back();
  }
}

std::optional<MemoryEntry> Cache::find_in_memory(const std::string& key,
                                                 const std::shared_ptr<Device>& device) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = memory_.find({key, device.get()});
  if (it == memory_.end()) return std::nullopt;
  recency_.splice(recency_.begin(), recency_, it->second.recency);
  stats_.memory_hits++;
  stats_.compile_seconds_saved += it->second.entry.build_seconds;
  return it->second.entry;
}

void Cache::remember(const std::string& key, const std::shared_ptr<Device>& device,
                     MemoryEntry entry) {
  std::vector<MemorySlot> dropped;
  std::lock_guard<std::mutex> lock(mu_);
  MemoryKey k{key, device.get()};
  auto it = memory_.find(k);
  if (it != memory_.end()) {
    dropped.push_back(std::move(it->second));
    recency_.erase(it->second.recency);
    memory_.erase(it);
  }
  recency_.push_front(k);
  memory_[k] = {device, std::move(entry), recency_.begin()};
  // Bounded: a process that compiles many distinct kernels keeps only the recent ones loaded.
  while (memory_.size() > memory_entries_) {
    auto last = memory_.find(recency_.back());
    dropped.push_back(std::move(last->second));
    memory_.erase(last);
    recency_.pop_back();
  }
}

std::optional<Cache::DiskHit> Cache::find_on_disk(const std::string& key) {
  MacKey mac;
  std::string d = disk_dir(&mac);
  auto digest = parse_key_hex(key);
  if (d.empty() || !digest) return std::nullopt;
  std::string path = entry_path(key);
  auto file = read_whole_file(path);
  if (!file) return std::nullopt;
  auto raw = decode_entry(*file, *digest, PayloadKind::artifact, mac, identity_.format_version);
  if (!raw) {
    log(LogLevel::debug, cat("compile cache: ignoring unusable entry ", path));
    return std::nullopt;
  }
  auto entry = deserialize_artifact(*raw);
  if (!entry) return std::nullopt;
  touch(path);
  return DiskHit{std::move(*entry), file->size()};
}

void Cache::count_disk_hit(const DiskHit& hit) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.disk_hits++;
  stats_.bytes_read += hit.file_bytes;
  stats_.compile_seconds_saved += hit.entry.build_seconds;
}

void Cache::store_on_disk(const std::string& key, const CachedArtifact& entry) {
  MacKey mac;
  std::string d = disk_dir(&mac);
  auto digest = parse_key_hex(key);
  if (d.empty() || !digest || writes_broken(d)) return;
  Bytes file = encode_entry(*digest, PayloadKind::artifact, serialize_artifact(entry), mac,
                            identity_.format_version);
  std::string path = d + "/" + key.substr(0, 2) + "/" + key + kEntrySuffix;
  WriteFaultHook hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = hook_;
  }
  if (int err = publish_file(path, file, hook)) {
    write_failed(d, err);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_written += file.size();
  }
  after_write(d, path, file.size());
}

void Cache::count_miss() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.misses++;
}

bool Cache::writes_broken(const std::string& dir) const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_dir_ == dir;
}

void Cache::write_failed(const std::string& dir, int err) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    broken_dir_ = dir;
  }
  warn_once("cache: write " + dir,
            cat("compile cache: cannot write to ", dir, " (", std::strerror(err),
                "); continuing without saving compiled kernels there"));
}

void Cache::after_write(const std::string& dir, const std::string& path, uint64_t bytes) {
  uint64_t max = max_bytes();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (estimate_dir_ != dir) {
      estimate_dir_ = dir;
      estimate_.reset();
    }
    if (estimate_) {
      *estimate_ += bytes;
      if (*estimate_ <= max) return;
    }
  }
  if (!estimate_known(dir)) {
    // First write here: keys are uniform hashes, so a few shards predict the whole directory at
    // a fraction of a full scan's cost. Only a prediction past the cap pays for the exact scan.
    uint64_t sample = 0;
    int shard = std::stoi(path.substr(dir.size() + 1, 2), nullptr, 16);
    for (int i = 0; i < kSampleShards; ++i) {
      char name[3];
      std::snprintf(name, sizeof name, "%02x", (shard + i) % 256);
      for (const FileInfo& f : list_files(dir + "/" + name, is_entry)) sample += f.size;
    }
    uint64_t predicted = sample * (256 / kSampleShards);
    if (predicted <= max) {
      std::lock_guard<std::mutex> lock(mu_);
      if (estimate_dir_ == dir) estimate_ = predicted;
      return;
    }
  }
  // Prune to 90% of the cap so the next few writes do not each pay for a scan.
  uint64_t total = prune(dir, max, max - max / 10, path);
  std::lock_guard<std::mutex> lock(mu_);
  if (estimate_dir_ == dir) estimate_ = total;
}

bool Cache::estimate_known(const std::string& dir) const {
  std::lock_guard<std::mutex> lock(mu_);
  return estimate_dir_ == dir && estimate_.has_value();
}

uint64_t Cache::prune(const std::string& dir, uint64_t max, uint64_t target,
                      const std::string& keep) {
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  auto entry_or_temp = [](const std::string& n) {
    return is_named(n, kEntrySuffix) || is_temp_name(n);
  };
  std::vector<FileInfo> entries;
  uint64_t total = 0;
  for (const std::string& shard : list_dirs(dir)) {
    if (!is_shard_dir(shard)) continue;
    for (FileInfo& f : list_files(dir + "/" + shard, entry_or_temp)) {
      std::string name = f.path.substr(f.path.find_last_of('/') + 1);
      if (is_temp_name(name)) {
        if (now - f.mtime_ns > kStaleTempNs) ::unlink(f.path.c_str());
        continue;
      }
      total += f.size;
      entries.push_back(std::move(f));
    }
  }
  if (total <= max) return total;
  std::sort(entries.begin(), entries.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.mtime_ns < b.mtime_ns; });
  uint64_t removed = 0;
  for (const FileInfo& f : entries) {
    if (total <= target) break;
    if (f.path == keep) continue;
    // Another process may be pruning too; whoever unlinks first frees the bytes.
    if (::unlink(f.path.c_str()) == 0 || errno == ENOENT) {
      total -= f.size;
      removed++;
    }
  }
  log(LogLevel::debug,
      cat("compile cache: pruned ", removed, " entries from ", dir, "; ", total, " bytes remain"));
  return total;
}

std::string Cache::autotune_path(const std::string& dir, std::string_view key) const {
  return dir + "/" + kAutotuneDir + "/" + sha256_hex(key) + kAutotuneSuffix;
}

void Cache::store_autotune(std::string_view key, std::string_view winner) {
  MacKey mac;
  std::string d = disk_dir(&mac);
  if (d.empty() || writes_broken(d)) return;
  auto digest = parse_key_hex(sha256_hex(key));
  Bytes file = encode_entry(*digest, PayloadKind::autotune, serialize_autotune(key, winner), mac,
                            identity_.format_version);
  WriteFaultHook hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    hook = hook_;
  }
  if (int err = publish_file(autotune_path(d, key), file, hook)) write_failed(d, err);
}

std::optional<std::string> Cache::find_autotune(std::string_view key) {
  MacKey mac;
  std::string d = disk_dir(&mac);
  if (d.empty()) return std::nullopt;
  auto file = read_whole_file(autotune_path(d, key));
  if (!file) return std::nullopt;
  auto raw = decode_entry(*file, *parse_key_hex(sha256_hex(key)), PayloadKind::autotune, mac,
                          identity_.format_version);
  if (!raw) return std::nullopt;
  return deserialize_autotune(*raw, key);
}

CacheStats Cache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Cache::clear() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    memory_.clear();
    recency_.clear();
    stats_ = {};
    broken_dir_.clear();
    trusted_dir_.clear();
    estimate_.reset();
  }
  std::string d = dir();
  if (d.empty()) return;
  std::string first_error;
  for (const std::string& sub : list_dirs(d)) {
    if (is_shard_dir(sub)) remove_matching(d + "/" + sub, kEntrySuffix, &first_error);
    if (sub == kAutotuneDir) remove_matching(d + "/" + sub, kAutotuneSuffix, &first_error);
  }
  if (!first_error.empty())
    fail(METILE_ERROR_IO, "cache", "cannot remove cache entry ", first_error);
}

namespace {

// The host toolchains' store (runtime/host/build_store.h) on this cache's disk level: records
// as autotune records, artifacts under a key of their own domain (the build identity and the
// caller's key text; no program, so no kernel's key).
class CacheBuildStore final : public host::BuildStore {
 public:
  explicit CacheBuildStore(Cache& cache) : cache_(cache) {}
  std::optional<std::string> find_record(std::string_view key) override {
    return cache_.find_autotune(key);
  }
  void store_record(std::string_view key, std::string_view text) override {
    cache_.store_autotune(key, text);
  }
  std::optional<Artifact> find_artifact(std::string_view key) override {
    auto hit = cache_.find_on_disk(artifact_key(key));
    if (!hit) return std::nullopt;
    return std::move(hit->entry.artifact);
  }
  void store_artifact(std::string_view key, const Artifact& artifact,
                      double build_seconds) override {
    cache_.store_on_disk(artifact_key(key), CachedArtifact{artifact, build_seconds});
  }

 private:
  std::string artifact_key(std::string_view key) const {
    KeyMaterial m;
    m.build_identity = cache_.identity().build_identity;
    m.device_identity = "host build";
    m.program_text = std::string(key);
    return compute_cache_key(m);
  }
  Cache& cache_;
};

}  // namespace

Cache& global_cache() {
  // Never destroyed: kernels may be compiled during exit.
  static Cache* cache = [] {
    auto* c = new Cache();
    host::set_build_store(new CacheBuildStore(*c));
    return c;
  }();
  return *cache;
}

}  // namespace metile

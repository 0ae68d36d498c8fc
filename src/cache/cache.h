/** \file cache.h
 * The compile cache: an in-memory map of loaded kernels in front of a directory of
 * zlib-compressed entries (entry.h) shared by every process of the user. compile.cpp decides
 * between the levels; this class owns the settings, the statistics, key derivation, the files and
 * their pruning, and the persisted autotune winners. All methods are thread-safe.
 *
 * Layout under the cache directory:
 *   <2 hex>/<64 hex>.mtc    one compiled kernel (PayloadKind::artifact)
 *   autotune/<64 hex>.mta   one autotune winner, named by sha256 of the caller's key
 *   .<name>.<pid>.<rand>.<n>.tmp   a publication in progress (or abandoned by a crash)
 */
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "cache/entry.h"
#include "cache/files.h"
#include "runtime/device.h"

namespace metile {

struct CacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  /** Compiles that found no usable entry (requests with CompileOptions::no_cache are not counted).
   */
  uint64_t misses = 0;
  uint64_t bytes_read = 0;     // entry files read for disk hits
  uint64_t bytes_written = 0;  // entry files published
  /** Sum over hits of the build time recorded when the entry was first compiled. */
  double compile_seconds_saved = 0;
};

/** What, besides the device, options and program, distinguishes one compiler from another. */
struct CacheIdentity {
  uint32_t format_version = kCacheFormatVersion;
  /** Hash of every compiler source (generated at build time; see cmake/build_identity.cmake). */
  std::string build_identity;
};
CacheIdentity default_cache_identity();

/** Every input of a key, each framed by its length so no two tuples hash alike. */
struct KeyMaterial {
  uint32_t format_version = kCacheFormatVersion;
  std::string build_identity;
  std::string device_identity;
  std::string options;
  std::string program_text;  // print(program, /*with_locations=*/true)
};
/** sha256 of the key material, 64 lowercase hex digits. */
std::string compute_cache_key(const KeyMaterial& m);

/** A kernel kept in memory for the device instance it was loaded on. */
struct MemoryEntry {
  std::shared_ptr<Kernel> kernel;
  Artifact artifact;
  double build_seconds = 0;
};

inline constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{1} << 30;
/** Kernels the memory level keeps loaded (least recently used ones beyond this are dropped, and
 * their code unloaded once the caller releases them too). */
inline constexpr size_t kDefaultMemoryEntries = 128;

class Cache {
 public:
  explicit Cache(CacheIdentity identity = default_cache_identity());

  /** Overrides the directory (made absolute); nullopt restores $METILE_CACHE_DIR / XDG / HOME. */
  void set_dir(std::optional<std::string> dir);
  /** The directory in use; "" when no override, variable or home directory names one. */
  std::string dir() const;
  void set_enabled(bool enabled);
  /** The disk level is on: not disabled by set_enabled(false) or METILE_CACHE=0. */
  bool disk_enabled() const;
  void set_max_bytes(uint64_t max_bytes);
  /** set_max_bytes, else $METILE_CACHE_MAX_BYTES, else 1 GiB. */
  uint64_t max_bytes() const;
  void set_write_fault_hook(WriteFaultHook hook);
  /** How many kernels the memory level keeps (at least 1). */
  void set_memory_entries(size_t entries);

  const CacheIdentity& identity() const { return identity_; }
  /**
   * The key of compiling `program` for `device` with `options`. Devices with an empty
   * cache_identity() get a key from their name; such keys are only used in memory.
   */
  std::string key(const Device& device, const Program& program,
                  const CompileOptions& options) const;
  /** Where the entry for `key` lives on disk ("" without a directory). */
  std::string entry_path(const std::string& key) const;

  /** A kernel loaded earlier on this device instance (and still among the memory level's most
   * recently used); counts a memory hit. */
  std::optional<MemoryEntry> find_in_memory(const std::string& key,
                                            const std::shared_ptr<Device>& device);
  void remember(const std::string& key, const std::shared_ptr<Device>& device, MemoryEntry entry);

  struct DiskHit {
    CachedArtifact entry;
    uint64_t file_bytes = 0;
  };
  /** The valid entry for `key`, touched for LRU. nullopt: absent or unusable. */
  std::optional<DiskHit> find_on_disk(const std::string& key);
  /** Publishes the entry; on a failed write warns once and stops writing to this directory. */
  void store_on_disk(const std::string& key, const CachedArtifact& entry);
  /** Statistics the caller records once it knows how a lookup ended (a disk entry may not load). */
  void count_disk_hit(const DiskHit& hit);
  void count_miss();

  /** Persists `winner` for `key` (a no-op when the disk level is off; warns on failure). */
  void store_autotune(std::string_view key, std::string_view winner);
  std::optional<std::string> find_autotune(std::string_view key);

  CacheStats stats() const;
  /** Forgets the memory level and the statistics and removes every entry metile wrote on disk. */
  void clear();

 private:
  struct Settings {
    std::optional<std::string> dir;
    std::optional<bool> enabled;
    std::optional<uint64_t> max_bytes;
  };
  /** Directory to read from and write to, with its secret in `*mac`; "" when the disk level is
   * off or the directory cannot be trusted (trust.h; warns once). */
  std::string disk_dir(MacKey* mac) const;
  bool writes_broken(const std::string& dir) const;
  void write_failed(const std::string& dir, int err);
  void after_write(const std::string& dir, const std::string& path, uint64_t bytes);
  bool estimate_known(const std::string& dir) const;
  /**
   * Scans `dir`; when it holds more than `max` bytes, removes least recently used entries (never
   * `keep`) until at most `target` remain. Returns the bytes left. Also drops stale temp files.
   */
  uint64_t prune(const std::string& dir, uint64_t max, uint64_t target, const std::string& keep);
  std::string autotune_path(const std::string& dir, std::string_view key) const;

  const CacheIdentity identity_;
  mutable std::mutex mu_;
  Settings settings_;
  WriteFaultHook hook_;
  CacheStats stats_;
  // The entry owns its device: a kernel must not outlive the device it was loaded on, and a live
  // device's address cannot be reused by another one.
  using MemoryKey = std::pair<std::string, const Device*>;
  struct MemorySlot {
    std::shared_ptr<Device> device;
    MemoryEntry entry;
    std::list<MemoryKey>::iterator recency;
  };
  std::map<MemoryKey, MemorySlot> memory_;
  std::list<MemoryKey> recency_;  // most recently used first
  size_t memory_entries_ = kDefaultMemoryEntries;
  std::string broken_dir_;  // writes to it failed; do not try again
  mutable std::string trusted_dir_;  // checked by disk_dir(), whose secret is secret_
  mutable MacKey secret_{};
  // Running estimate of the directory's size, started at the first write into it from a sample
  // of shards (or a full scan when the sample predicts more than the cap).
  std::string estimate_dir_;
  std::optional<uint64_t> estimate_;
};

/** The process-wide cache that compile_kernel() and the C API use. */
Cache& global_cache();

}  // namespace metile

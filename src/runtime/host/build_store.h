/** \file build_store.h
 * Where the host toolchains keep what they made, so that another kernel or process does not make
 * it again: the cpu compiler's probes (records: short text) and metal-sim's clang builds
 * (artifacts: a shared object and what was measured building it), each under a key text that
 * names everything that went into it. The compile cache provides the store (its disk level:
 * HMAC-checked entries, METILE_CACHE=0, pruning; see cache.cpp's global_cache()), so runtime/
 * never includes cache/. Without a store nothing is kept and every build runs.
 */
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/artifact.h"

namespace metile::host {

class BuildStore {
 public:
  virtual ~BuildStore() = default;
  /** The text stored under `key`, or nullopt (absent, unusable, or the disk level off). */
  virtual std::optional<std::string> find_record(std::string_view key) = 0;
  virtual void store_record(std::string_view key, std::string_view text) = 0;
  /** The artifact stored under `key`, or nullopt. */
  virtual std::optional<Artifact> find_artifact(std::string_view key) = 0;
  /** Keeps `artifact` under `key`; `build_seconds` is what making it took. Failures are the
   *  store's to report; the caller goes on without it. */
  virtual void store_artifact(std::string_view key, const Artifact& artifact,
                              double build_seconds) = 0;
};

/** Installs the process's store (the compile cache does, once); nullptr removes it. A copy of
 *  the library linked statically into another module (the Linux stand-in Metal.framework) has
 *  its own and installs its copy of the cache's. */
void set_build_store(BuildStore* store);
/** The installed store, or nullptr. */
BuildStore* build_store();

}  // namespace metile::host

/** \file artifact.h
 * What Device::build() produces and the compile cache stores: the compiled code and everything
 * needed to explain and launch it. A header of its own so the cache serialises artifacts without
 * seeing the device interface.
 */
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/stage.h"

namespace metile {

/** What Artifact::bytes hold. */
enum class ArtifactKind : uint8_t {
  none,             // nothing: interp runs the Tile IR itself
  shared_object,    // a host shared object (cpu, metal-sim), loaded by runtime/host/shared_object.h
  cubin,            // NVRTC output for cuModuleLoadData
  metallib,         // a compiled Metal library
  msl,              // no binary: Metal compiles sources[msl] when the kernel loads
};

/** The names cache entries store (so the on-disk format predates the enum and stays as it was). */
inline constexpr Named<ArtifactKind> kArtifactKindNames[] = {
    {ArtifactKind::none, "none"},         {ArtifactKind::shared_object, "so"},
    {ArtifactKind::cubin, "cubin"},       {ArtifactKind::metallib, "metallib"},
    {ArtifactKind::msl, "msl"},
};

inline const char* artifact_kind_name(ArtifactKind kind) { return name_in(kArtifactKindNames, kind); }
inline std::optional<ArtifactKind> parse_artifact_kind(std::string_view name) {
  return parse_in(kArtifactKindNames, name);
}

/** What build() produces: the compiled code and everything needed to explain it. */
struct Artifact {
  ArtifactKind kind = ArtifactKind::none;
  std::string entry;                    // the kernel's symbol, where it is not the name
  std::vector<uint8_t> bytes;           // the binary
  std::map<Stage, std::string> sources;  // the texts the device keeps (cpp, msl, gpu_ir, ...)
  int threads_per_group = 1;
  uint64_t threadgroup_memory_bytes = 0;
};

}  // namespace metile

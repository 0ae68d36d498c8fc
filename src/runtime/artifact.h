/** \file artifact.h
 * What Device::build() produces and the compile cache stores: the compiled code and everything
 * needed to explain and launch it. A header of its own so the cache serialises artifacts without
 * seeing the device interface.
 */
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace metile {

/** What build() produces: the compiled code and everything needed to explain it. */
struct Artifact {
  std::string kind;                          // "so", "cubin", "metallib", "msl", "none"
  std::string entry;                         // the kernel's symbol, where it is not the name
  std::vector<uint8_t> bytes;                // the binary
  std::map<std::string, std::string> sources;  // stage name -> text ("cpp", "msl", ...)
  int threads_per_group = 1;
  uint64_t threadgroup_memory_bytes = 0;
};

}  // namespace metile

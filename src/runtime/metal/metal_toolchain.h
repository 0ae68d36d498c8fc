/** \file metal_toolchain.h
 * The offline Metal compiler: `xcrun -sdk macosx metal` (MSL -> AIR) and `metallib` (AIR ->
 * .metallib). $METILE_XCRUN names the xcrun command (default `xcrun` on PATH; tests point it at
 * a stand-in script). Without it the metal device compiles MSL at run time with
 * newLibraryWithSource:options:error: instead.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metile::metal {

struct MetalToolchain {
  std::string xcrun;    // "" when unavailable
  std::string version;  // first line of `metal --version`, part of the cache identity
};

/** Probes once per process. */
const MetalToolchain& metal_toolchain();

/**
 * Compiles `msl` with `metal -O2 -fno-fast-math` (plus `-std=<language>` when `language`, an
 * MslKernel::language such as "metal4.0", is not empty) and links it with `metallib`; returns
 * the metallib's bytes. Throws METILE_ERROR_COMPILE with the compiler's log.
 */
std::vector<uint8_t> build_metallib(const MetalToolchain& tc, const std::string& msl,
                                    const std::string& kernel_name, const std::string& language);

/** A temporary file holding `bytes` for as long as the object lives. */
class TempFile {
 public:
  TempFile(const std::string& suffix, const void* bytes, size_t size);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace metile::metal

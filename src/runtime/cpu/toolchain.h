/** \file toolchain.h
 * The host C++ compiler the cpu device builds kernels with: $METILE_CXX (a command, possibly
 * with leading words such as `ccache g++`), else the first of c++, clang++, g++ on PATH.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metile::cpu {

struct Toolchain {
  std::vector<std::string> command;  // resolved executable first, then any extra words
  std::string version;               // first line of `--version` ("" when it printed nothing)
  std::string target;                // what -march=native resolves to ("native" if unknown)
  std::vector<std::string> flags;    // code generation flags
  /** "cpu;" + arch + target + compiler path + version + flags, for compile-cache keys. */
  std::string identity() const;
};

/** Flags every kernel is compiled with (besides -o and the input). */
const std::vector<std::string>& kernel_flags();

/** "" when a compiler can be found, else why not. Re-reads the environment each call. */
std::string probe_compiler();

/** The toolchain in use now (resolved per call; version and target cached per compiler). */
Toolchain current_toolchain();

/**
 * Compiles `source` into a shared object and returns its bytes. A failing compiler, or one still
 * running after METILE_TIMEOUT_S (host/process.h; it is killed), throws METILE_ERROR_COMPILE with
 * its command line and the start of its log; a missing one throws METILE_ERROR_DEVICE_UNAVAILABLE.
 */
std::vector<uint8_t> compile_shared_object(const Toolchain& tc, const std::string& source,
                                           const std::string& kernel_name);

}  // namespace metile::cpu

/** \file toolchain.h
 * The host clang that compiles MSL for metal-sim: finding it ($METILE_CLANG, else the newest
 * clang++-N on PATH, else clang++; version >= 15 because the shim needs _Float16 and bool-sized
 * vector elements on every target) and running it on a source text.
 */
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace metile::metal_sim {

inline constexpr int kMinClangMajor = 15;

struct Clang {
  std::string command;  // as found: a name on PATH or a path
  std::string version;  // the first line of `--version`
  int major = 0;
};

struct ClangProbe {
  Clang clang;
  std::string unavailable;  // "" when clang is usable, else why not
};

/** Probes once per process (thread-safe) and remembers the answer. */
const ClangProbe& probe_clang();

/** Probes one candidate command; `unavailable` says why it cannot be used. */
ClangProbe probe_clang_command(const std::string& command);

/** What one clang run produced. */
struct ClangRun {
  bool ok = false;
  std::string log;              // clang's stdout and stderr
  std::vector<uint8_t> output;  // the output file's bytes (when ok and one was asked for)
};

/**
 * Compiles `source` (C++17; file name `source_name` in diagnostics) with the given extra files
 * placed in its include directory. With `shared_object`, links a shared library and returns its
 * bytes; otherwise only checks the source (-fsyntax-only). Throws METILE_ERROR_COMPILE only when
 * clang cannot be run, is killed, or runs past METILE_TIMEOUT_S (host/process.h).
 */
ClangRun run_clang(const Clang& clang, std::string_view source, std::string_view source_name,
                   const std::vector<std::pair<std::string, std::string_view>>& include_files,
                   bool shared_object);

/**
 * The clang optimization level of kernels' shared objects: $METILE_METAL_SIM_OPT, 0 to 3 (2 when
 * unset). 0 builds a kernel two to three times faster and runs it slower: the choice of test
 * suites, whose kernels mostly run once. Part of the device's cache identity. Any other value
 * throws METILE_ERROR_INVALID_ARGUMENT naming the variable.
 */
int opt_level();

/** How many times run_clang has started clang in this process (build_msl's shared objects come
 *  from the compile cache when the same translation unit was built before). */
uint64_t clang_runs();

}  // namespace metile::metal_sim

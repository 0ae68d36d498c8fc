// Helpers shared by the metal-sim tests: the hand-written kernels in tests/metal, skipping when no
// usable clang exists, and checking that a call fails with a given status and message.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "codegen/metal/msl_signature.h"
#include "runtime/metal_sim/sim_kernel.h"
#include "runtime/metal_sim/toolchain.h"
#include "support/error.h"

namespace metile::metal_sim::testing {

inline std::filesystem::path metal_dir() {
  return std::filesystem::path(METILE_TESTS_DIR) / "metal";
}

inline std::string read_metal(const std::string& name) {
  std::ifstream in(metal_dir() / name);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/** The status and message `f` throws (METILE_OK and "" when it returns). */
inline std::pair<metile_status, std::string> error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.status(), e.what()};
  }
  return {METILE_OK, ""};
}

}  // namespace metile::metal_sim::testing

#define METAL_SIM_REQUIRE_CLANG()                                        \
  do {                                                                   \
    const auto& probe_ = ::metile::metal_sim::probe_clang();             \
    if (!probe_.unavailable.empty()) GTEST_SKIP() << probe_.unavailable; \
  } while (0)

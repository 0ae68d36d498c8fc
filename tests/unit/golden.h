// Golden files: emitted text kept under tests/golden and reviewed like code. A change shows up as
// a diff; after reviewing it, METILE_UPDATE_GOLDEN=1 rewrites the files (the test then skips).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/env.h"

namespace metile {

inline void expect_golden(const std::string& text, const std::string& file, const std::string& what) {
  const std::filesystem::path path = std::filesystem::path(METILE_TESTS_DIR) / "golden" / file;
  if (env_string("METILE_UPDATE_GOLDEN") == "1") {
    std::ofstream(path, std::ios::binary) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing " << path << " (METILE_UPDATE_GOLDEN=1 writes it)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(text, want.str()) << what << " differs from " << path
                              << "; review the change, then regenerate with METILE_UPDATE_GOLDEN=1";
}

}  // namespace metile

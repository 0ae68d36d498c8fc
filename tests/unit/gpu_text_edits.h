// The op-table tests' check that the GPU IR parser (with its verifier) refuses malformed forms:
// each edit of a text it reads back unchanged must be refused.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ir/gpu_parse.h"
#include "support/error.h"

namespace metile {

/** Expects gpu::parse to throw on each text made from `ok` by replacing the first `from` with `to`. */
inline void expect_edits_refused(const std::string& ok, const std::vector<std::pair<std::string, std::string>>& edits) {
  for (const auto& [from, to] : edits) {
    std::string bad = ok;
    const size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    bad.replace(at, from.size(), to);
    EXPECT_THROW(gpu::parse(bad), Error) << to;
  }
}

}  // namespace metile

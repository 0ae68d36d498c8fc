// How often `needle` occurs in `text`, overlapping occurrences included: the tests that read
// generated IR and source count ops and spellings with it.
#pragma once

#include <string>

namespace metile {

inline int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace metile

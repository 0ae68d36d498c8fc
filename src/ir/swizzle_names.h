/** \file swizzle_names.h
 * The pattern names of `tile_swizzle` and their codes in swizzle.h (host code only; swizzle.h
 * itself is pasted into MSL and CUDA preludes, where strings have no place). The builder also
 * accepts the original's spellings "grouped2", "grouped4", "grouped8" (grouped with that group
 * size) and "auto" (morton): it rewrites them with canonical_swizzle before the op is built.
 */
#ifndef METILE_IR_SWIZZLE_NAMES_H
#define METILE_IR_SWIZZLE_NAMES_H

#include <string>
#include <string_view>

#include "ir/swizzle.h"

namespace metile {

struct SwizzleName {
  const char* name;
  int code;
  const char* symbol;  // how generated kernels spell the code (swizzle.h is in their prelude)
};

#define METILE_SWIZZLE_ROW(name, CODE) {name, CODE, #CODE}
inline constexpr SwizzleName kSwizzleNames[] = {
    METILE_SWIZZLE_ROW("diagonal", METILE_SWIZZLE_DIAGONAL),
    METILE_SWIZZLE_ROW("grouped", METILE_SWIZZLE_GROUPED),
    METILE_SWIZZLE_ROW("morton", METILE_SWIZZLE_MORTON),
    METILE_SWIZZLE_ROW("hilbert", METILE_SWIZZLE_HILBERT),
    METILE_SWIZZLE_ROW("linear", METILE_SWIZZLE_LINEAR),
};
#undef METILE_SWIZZLE_ROW

/** The code of a canonical pattern name, or -1. */
inline int swizzle_code(std::string_view name) {
  for (const SwizzleName& s : kSwizzleNames)
    if (name == s.name) return s.code;
  return -1;
}

/** The symbol that spells a canonical pattern's code in generated source, or nullptr. */
inline const char* swizzle_symbol(std::string_view name) {
  for (const SwizzleName& s : kSwizzleNames)
    if (name == s.name) return s.symbol;
  return nullptr;
}

/** "diagonal, grouped, ..." for error messages. */
inline std::string swizzle_name_list() {
  std::string out;
  for (const SwizzleName& s : kSwizzleNames) out += std::string(out.empty() ? "" : ", ") + s.name;
  return out + ", grouped2, grouped4, grouped8, auto";
}

/** Rewrites the alias spellings: "groupedN" -> ("grouped", N), "auto" -> "morton". */
inline void canonical_swizzle(std::string& pattern, int& block_size) {
  if (pattern == "auto") {
    pattern = "morton";
  } else if (pattern.size() > 7 && pattern.compare(0, 7, "grouped") == 0 &&
             pattern.find_first_not_of("0123456789", 7) == std::string::npos &&
             pattern.size() <= 11) {
    block_size = std::stoi(pattern.substr(7));
    pattern = "grouped";
  }
}

}  // namespace metile

#endif  // METILE_IR_SWIZZLE_NAMES_H

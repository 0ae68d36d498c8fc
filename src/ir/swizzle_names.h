/** \file swizzle_names.h
 * The host-side names of swizzle.h's patterns: how kernels spell them (the `pattern` attribute of
 * tile_swizzle) and the enumerator generated code passes. Kept out of swizzle.h, which generated
 * code pastes and which therefore holds no strings.
 */
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "ir/swizzle.h"

namespace metile {

struct SwizzlePatternName {
  metile_swizzle_pattern code;
  const char* name;        // the tile_swizzle attribute: "morton"
  const char* enumerator;  // in generated code: "METILE_SWIZZLE_MORTON"
};
inline constexpr SwizzlePatternName kSwizzlePatterns[] = {
    {METILE_SWIZZLE_MORTON, "morton", "METILE_SWIZZLE_MORTON"},
    {METILE_SWIZZLE_DIAGONAL, "diagonal", "METILE_SWIZZLE_DIAGONAL"},
    {METILE_SWIZZLE_GROUPED, "grouped", "METILE_SWIZZLE_GROUPED"},
};

/** The pattern a kernel names; nullopt for an unknown name (the verifier rejects those). */
inline std::optional<SwizzlePatternName> find_swizzle_pattern(std::string_view name) {
  for (const SwizzlePatternName& p : kSwizzlePatterns)
    if (name == p.name) return p;
  return std::nullopt;
}

/** "morton, diagonal or grouped", for messages. */
inline std::string swizzle_pattern_list() {
  std::string s;
  const size_t n = std::size(kSwizzlePatterns);
  for (size_t i = 0; i < n; ++i)
    s += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + kSwizzlePatterns[i].name;
  return s;
}

}  // namespace metile

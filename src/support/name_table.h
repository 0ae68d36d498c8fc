/** \file name_table.h
 * Enums that cross a boundary as text (cache entries, the C API, environment variables) keep one
 * table of {value, name} rows; these two lookups are the only way between the two.
 */
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace metile {

template <typename E>
struct Named {
  E value;
  const char* name;
};

/** The name of `value` in `table`; "?" for a value the table lacks. */
template <typename E, size_t N>
constexpr const char* name_in(const Named<E> (&table)[N], E value) {
  for (const Named<E>& row : table)
    if (row.value == value) return row.name;
  return "?";
}

/** The value `name` spells in `table`; nullopt for any other text. */
template <typename E, size_t N>
constexpr std::optional<E> parse_in(const Named<E> (&table)[N], std::string_view name) {
  for (const Named<E>& row : table)
    if (name == row.name) return row.value;
  return std::nullopt;
}

}  // namespace metile

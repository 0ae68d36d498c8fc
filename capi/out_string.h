/** \file out_string.h
 * Returning strings through `char **`: allocated with malloc so metile_free() releases them.
 */
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace metile::capi {

inline char* dup_string(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

}  // namespace metile::capi

#include "support/env.h"

#include <cstdlib>

namespace metile {

std::string env_string(const char* name, std::string_view fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::string(fallback);
  return v;
}

long long env_int(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  return (end != nullptr && *end == '\0') ? n : fallback;
}

}  // namespace metile

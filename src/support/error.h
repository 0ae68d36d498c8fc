/** \file error.h
 * Internal error type. Library code throws metile::Error; the C ABI guard (capi/guard.h) turns it
 * into a metile_status plus the thread-local message. Messages start with "[subsystem] " and, for
 * program errors, the user's "file:line: ".
 */
#pragma once

#include <metile/metile.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace metile {

class Error : public std::runtime_error {
 public:
  Error(metile_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  metile_status status() const { return status_; }

 private:
  metile_status status_;
};

namespace detail {
inline void append_all(std::ostringstream&) {}
template <typename T, typename... Rest>
void append_all(std::ostringstream& os, T&& first, Rest&&... rest) {
  os << std::forward<T>(first);
  append_all(os, std::forward<Rest>(rest)...);
}
}  // namespace detail

/** Concatenates its arguments with operator<<. */
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream os;
  detail::append_all(os, std::forward<Args>(args)...);
  return os.str();
}

/** Throws Error(status, "[subsystem] " + parts...). */
template <typename... Args>
[[noreturn]] void fail(metile_status status, const char* subsystem, Args&&... parts) {
  throw Error(status, cat("[", subsystem, "] ", std::forward<Args>(parts)...));
}

}  // namespace metile

/** Internal invariant check: a failure is a metile bug, reported as METILE_ERROR_INTERNAL. */
#define METILE_ASSERT(cond, ...)                                                        \
  do {                                                                                  \
    if (!(cond))                                                                        \
      ::metile::fail(METILE_ERROR_INTERNAL, "internal", __FILE__, ":", __LINE__, ": ", \
                     #cond, " " __VA_OPT__(, ) __VA_ARGS__);                            \
  } while (0)

// An environment variable set (or removed) for one scope and restored after it: the unit tests
// run many to a process (scripts/test.sh's shards), so a test must leave the environment it
// found, e.g. the METILE_CACHE_DIR the whole run shares.
#pragma once

#include <cstdlib>
#include <string>

namespace metile::test {

class ScopedEnv {
 public:
  /** Sets `name` to `value`, or removes it when `value` is null. */
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ScopedEnv(const char* name, const std::string& value) : ScopedEnv(name, value.c_str()) {}
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace metile::test

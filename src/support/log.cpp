#include "support/log.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "support/env.h"

namespace metile {

static LogLevel current_level() {
  // Read each time: tests and users flip METILE_LOG at run time, and logging is never hot.
  std::string v = env_string("METILE_LOG", "warn");
  if (v == "error") return LogLevel::error;
  if (v == "info") return LogLevel::info;
  if (v == "debug") return LogLevel::debug;
  return LogLevel::warn;
}

bool log_enabled(LogLevel level) { return level <= current_level(); }

void log(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  static const char* names[] = {"error", "warning", "info", "debug"};
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "metile: %s: %.*s\n", names[static_cast<int>(level)],
               static_cast<int>(message.size()), message.data());
}

void warn_once(std::string_view key, std::string_view message) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.emplace(key).second) return;
  }
  log(LogLevel::warn, message);
}

}  // namespace metile

#include "support/env.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

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

bool debug_stage_enabled(std::string_view stage) {
  std::string v = env_string("METILE_DEBUG");
  if (v.empty()) return false;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "all" || item == "1" || item == stage) return true;
  }
  return false;
}

void debug_dump(std::string_view stage, std::string_view kernel, std::string_view text) {
  if (!debug_stage_enabled(stage)) return;
  std::string dir = env_string("METILE_DEBUG_DIR");
  if (!dir.empty()) {
    std::string path = dir + "/" + std::string(kernel) + "." + std::string(stage) + ".txt";
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (out) return;
    warn_once(path, "cannot write debug dump " + path + "; printing it instead");
  }
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "// ===== metile %.*s: %.*s =====\n%.*s\n", static_cast<int>(stage.size()),
               stage.data(), static_cast<int>(kernel.size()), kernel.data(),
               static_cast<int>(text.size()), text.data());
}

}  // namespace metile

#include "support/env.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
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

namespace {

// Writes a private new file and renames it over `path`: a symlink or file planted under the name
// (METILE_DEBUG_DIR may be a shared directory) is replaced, never followed or written through.
bool write_new_file(const std::string& path, std::string_view text) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + "." + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1)) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = ::close(fd) == 0 && done == text.size() && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}

}  // namespace

void debug_dump(std::string_view stage, std::string_view kernel, std::string_view text) {
  if (!debug_stage_enabled(stage)) return;
  std::string dir = env_string("METILE_DEBUG_DIR");
  if (!dir.empty()) {
    std::string path = dir + "/" + std::string(kernel) + "." + std::string(stage) + ".txt";
    if (write_new_file(path, text)) return;
    warn_once(path, "cannot write debug dump " + path + "; printing it instead");
  }
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "// ===== metile %.*s: %.*s =====\n%.*s\n", static_cast<int>(stage.size()),
               stage.data(), static_cast<int>(kernel.size()), kernel.data(),
               static_cast<int>(text.size()), text.data());
}

}  // namespace metile

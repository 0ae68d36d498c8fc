#include "support/debug_dump.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>

#include "support/env.h"
#include "support/text.h"
#include "support/log.h"

namespace metile {

namespace {

bool is_all(const std::string& item) { return item == "all" || item == "1"; }

std::vector<std::string> requested() {
  std::vector<std::string> items;
  const std::string text = env_string("METILE_DEBUG");  // split_list returns views into it
  for (std::string_view item : split_list(text)) items.emplace_back(item);
  return items;
}

const Stage* find_stage(std::string_view name) {
  for (const Stage& s : kStages)
    if (name == stage_name(s)) return &s;
  return nullptr;
}

}  // namespace

std::vector<Stage> debug_stages() {
  bool wanted[kStages.size()] = {};
  for (const std::string& item : requested()) {
    if (is_all(item)) return {kStages.begin(), kStages.end()};
    if (const Stage* s = find_stage(item)) {
      wanted[static_cast<size_t>(*s)] = true;
      continue;
    }
    std::string known;
    for (Stage s : kStages) known += std::string(known.empty() ? "" : ", ") + stage_name(s);
    warn_once("METILE_DEBUG=" + item, "METILE_DEBUG names an unknown stage '" + item +
                                          "'; the stages are " + known + " (or all)");
  }
  std::vector<Stage> out;
  for (Stage s : kStages)
    if (wanted[static_cast<size_t>(s)]) out.push_back(s);
  return out;
}

bool debug_stage_enabled(std::string_view stage) {
  for (const std::string& item : requested())
    if (is_all(item) || item == stage) return true;
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

#include "support/debug_dump.h"

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "support/env.h"
#include "support/log.h"

namespace metile {

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

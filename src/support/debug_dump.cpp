#include "support/debug_dump.h"

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "support/env.h"
#include "support/log.h"

namespace metile {

namespace {

bool is_all(const std::string& item) { return item == "all" || item == "1"; }

std::vector<std::string> requested() {
  std::vector<std::string> items;
  std::stringstream ss(env_string("METILE_DEBUG"));
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

const Stage* find_stage(std::string_view name) {
  for (const Stage& s : kStages)
    if (name == stage_name(s)) return &s;
  return nullptr;
}

}  // namespace

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::tile_ir: return "tile_ir";
    case Stage::gpu_ir: return "gpu_ir";
    case Stage::gpu_ir_opt: return "gpu_ir_opt";
    case Stage::msl: return "msl";
    case Stage::cuda: return "cuda";
    case Stage::cpp: return "cpp";
  }
  return "?";
}

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

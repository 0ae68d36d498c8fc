// The pass table, expanded from passes.def.
#include "passes/pass.h"
#include "support/error.h"

namespace metile {

const std::vector<PassInfo>& gpu_passes() {
  static const std::vector<PassInfo> passes = {
#define PASS(name, fn, summary) {name, fn, summary},
#include "passes/passes.def"
  };
  return passes;
}

void run_gpu_pass(std::string_view name, gpu::Function& f, const PassContext& ctx) {
  for (const PassInfo& p : gpu_passes())
    if (p.name == name) {
      p.run(f, ctx);
      gpu::verify(f);
      return;
    }
  std::string known;
  for (const PassInfo& p : gpu_passes()) known += (known.empty() ? "" : ", ") + std::string(p.name);
  fail(METILE_ERROR_INVALID_ARGUMENT, "passes", "unknown pass \"", name, "\" (known: ", known, ")");
}

}  // namespace metile

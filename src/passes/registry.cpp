// The pass table, expanded from passes.def.
#include "passes/pass.h"

#include "ir/gpu_parse.h"
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

std::string run_gpu_passes_on_text(std::string_view text, const std::vector<std::string>& passes,
                                   const GpuTarget& target) {
  gpu::Function f = gpu::parse(text);
  PassContext ctx{target};
  for (const std::string& p : passes) run_gpu_pass(p, f, ctx);
  return gpu::print(f);
}

}  // namespace metile

#include "runtime/compile.h"

#include <chrono>
#include <sstream>

#include "support/env.h"

namespace metile {

std::string CompileOptions::key() const {
  std::ostringstream os;
  os << "num_threads=" << num_threads << ";allow_tf32=" << allow_tf32 << ";opt_level=" << opt_level;
  return os.str();
}

std::shared_ptr<CompiledKernel> compile_kernel(const std::shared_ptr<Device>& device,
                                               std::shared_ptr<const Program> program,
                                               const CompileOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto ck = std::make_shared<CompiledKernel>();
  ck->program = program;
  ck->options = options;
  debug_dump("tile_ir", program->name, print(*program));
  ck->artifact = device->build(*program, options);
  for (const auto& [stage, text] : ck->artifact.sources) debug_dump(stage, program->name, text);
  ck->kernel = device->load(program, options, ck->artifact);
  ck->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return ck;
}

}  // namespace metile

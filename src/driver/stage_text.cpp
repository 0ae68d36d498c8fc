#include "driver/stage_text.h"

#include "codegen/cpu_cpp.h"
#include "codegen/cuda/cuda.h"
#include "codegen/metal/msl.h"
#include "passes/pipeline.h"
#include "passes/tile/tile_pipeline.h"
#include "target/gpu_target.h"

namespace metile {

std::string stage_text(Stage stage, const Program& user_program, const CompileOptions& options) {
  if (stage == Stage::tile_ir) return print(user_program);
  // Every backend sees the Tile IR pipeline's output, so the dumped stages start from it too.
  std::shared_ptr<const Program> lowered = run_tile_pipeline(user_program, options, false).program;
  const Program& program = *lowered;
  switch (stage) {
    case Stage::tile_ir: return print(user_program);
    case Stage::tile_ir_opt: return print(program);
    case Stage::layouts:
      return run_gpu_pipeline(program, apple_gpu_target(), options, "METILE_DEBUG").layouts;
    case Stage::gpu_ir:
      return run_gpu_pipeline(program, apple_gpu_target(), options, "METILE_DEBUG").gpu_ir;
    case Stage::gpu_ir_opt:
      return run_gpu_pipeline(program, apple_gpu_target(), options, "METILE_DEBUG").gpu_ir_opt;
    case Stage::msl:
      return emit_msl(run_gpu_pipeline(program, apple_gpu_target(), options, "METILE_DEBUG")
                          .function).source;
    case Stage::cuda:
      return emit_cuda(run_gpu_pipeline(program, nvidia_gpu_target(), options, "METILE_DEBUG")
                           .function).source;
    case Stage::cpp: return generate_cpu_cpp(program).text;
    case Stage::msl_signature:
      return metal_sim::print_signature(
          emit_msl(run_gpu_pipeline(program, apple_gpu_target(), options, "METILE_DEBUG").function)
              .signature);
    case Stage::msl_language:
      return emit_msl(run_gpu_pipeline(program, apple_gpu_target(), options, "METILE_DEBUG").function)
          .language;
    case Stage::cuda_tensor_maps:
      return emit_cuda(run_gpu_pipeline(program, nvidia_gpu_target(), options, "METILE_DEBUG").function)
          .tensor_maps;
  }
  return {};
}

}  // namespace metile

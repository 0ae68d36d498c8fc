// Writes the parser fuzzers' seed corpora and libFuzzer dictionaries into the directory given as
// the only argument: for the Tile IR, every suite kernel printed with and without source
// locations (corpus/, tile_ir.dict: every op name from the op table, dtypes, keywords); for the
// GPU IR, every suite kernel and a few GEMMs lowered for Apple and NVIDIA (gpu_corpus/,
// gpu_ir.dict: the GPU op table's names, builtins, element-wise and atomic Tile IR ops).
#include <filesystem>
#include <fstream>
#include <iostream>

#include "ir/gpu_ir.h"
#include "ir/ops.h"
#include "kernels/kernels.h"
#include "passes/pipeline.h"
#include "support/error.h"

namespace {

int write_gpu_corpus(const std::filesystem::path& dir) {
  using namespace metile;
  std::filesystem::create_directories(dir / "gpu_corpus");
  std::vector<Program> programs = kernels::all_programs();
  for (DType d : {DType::f32, DType::f16}) {
    kernels::GemmConfig g;
    g.dtype = d;
    g.bounds = d == DType::f16;
    g.bias = true;
    programs.push_back(kernels::gemm(g));
  }
  int n = 0;
  for (const GpuTarget& t : {apple_gpu_target(), apple_gpu_target(kAppleTensorOpsFamily, true),
                             nvidia_gpu_target("sm_90")})
    for (const Program& p : programs) {
      try {
        GpuPipelineResult r = run_gpu_pipeline(p, t, CompileOptions{}, t.name);
        std::ofstream(dir / "gpu_corpus" / (std::to_string(n++) + "_" + p.name + ".gpuir")) << r.gpu_ir_opt;
      } catch (const Error&) {
        // a kernel this target cannot run: no seed
      }
    }
  std::ofstream dict(dir / "gpu_ir.dict");
  for (gpu::GpuOpKind k : {
#define GPU_OP(E, name, traits) gpu::GpuOpKind::E,
#include "ir/gpu_ops.def"
       })
    dict << "\"" << gpu::gpu_op_name(k) << "\"\n";
  for (OpKind k : all_ops())
    if (is_elementwise(k) || k == OpKind::SELECT || k == OpKind::PTR_OFFSET || has_trait(k, kAtomic))
      dict << "\"" << op_name(k) << "\"\n";
  for (int b = 0; b < gpu::kBuiltinCount; ++b)
    dict << "\"" << gpu::builtin_name(static_cast<gpu::Builtin>(b)) << ".x\"\n";
  for (const char* t : {"gpu_kernel @", "threads=", "simd=", "#2 = tile<", " thr=", " reg=", " padded",
                        " thread", " x4 #2", "ptr<", ", threadgroup>", "for ", " to ", " step ",
                        " iter(", ") -> (", "yield", ".sum", ".max", "value=", "width=", "size=",
                        "\\\"", "f32", "f16", "bf16", "i32", "bool", "inf", "nan", "(4,2):(2,1)"})
    dict << "\"" << t << "\"\n";
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: parse_fuzz_corpus DIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path dir = argv[1];
  fs::create_directories(dir / "corpus");
  int n = 0;
  for (const metile::Program& p : metile::kernels::all_programs())
    for (bool locs : {true, false})
      std::ofstream(dir / "corpus" / (std::to_string(n++) + "_" + p.name + ".mtir"))
          << metile::print(p, locs);
  std::ofstream dict(dir / "tile_ir.dict");
  for (metile::OpKind k : metile::all_ops()) dict << "\"" << metile::op_name(k) << "\"\n";
  for (const char* t : {"kernel @",
                        "num_threads(",
                        "constexprs(",
                        "iter_args(",
                        " to ",
                        " step ",
                        "->",
                        "loc(\\\"",
                        "tile<",
                        "ptr<",
                        ", threadgroup>",
                        "f32",
                        "f16",
                        "bf16",
                        "i32",
                        "u32",
                        "i64",
                        "bool",
                        "i8",
                        "u8",
                        "{axis = ",
                        "{size = ",
                        "{value = ",
                        "inf",
                        "nan",
                        "-inf",
                        "1e38",
                        "%"})
    dict << "\"" << t << "\"\n";
  int gpu_seeds = write_gpu_corpus(dir);
  std::cout << "wrote " << n << " seeds and tile_ir.dict, " << gpu_seeds
            << " GPU IR seeds and gpu_ir.dict to " << dir << "\n";
  return 0;
}

/** \file cuda.h
 * CUDA C++ from GPU IR: the CUDA dialect of the GPU emitter (gpu_emit.h). The kernel is
 * `extern "C" __global__`, named after the program, takes pointers and scalars in parameter
 * order, and carves its threadgroup arrays out of dynamic shared memory (the runtime passes the
 * total at launch). Compiled by NVRTC in the cuda device; CI compiles it without a GPU.
 */
#pragma once

#include <cstdint>
#include <string>

#include "ir/gpu_ir.h"

namespace metile {

struct CudaKernelSource {
  std::string source;
  std::string entry;
  int threads_per_group = 0;
  uint64_t dynamic_shared_bytes = 0;
  /** The TMA tensor maps the kernel takes after its parameters, one src/target/tma.h line each. */
  std::string tensor_maps;
};

CudaKernelSource emit_cuda(const gpu::Function& f);

}  // namespace metile

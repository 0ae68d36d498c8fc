/** \file cuda_device.h
 * The `cuda` device: buffers in managed memory (prefetched to the GPU before launches), one
 * stream, asynchronous launches through cuLaunchKernel, cubins from NVRTC. The CUDA C++ comes from
 * the GPU IR's CUDA dialect; build_from_source() is the seam between code generation and this
 * runtime (also used by tests with hand-written kernels).
 */
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/device.h"

namespace metile {

/** What the runtime needs to know about generated CUDA C++ besides its text. */
struct CudaSource {
  std::string text;
  std::string entry;  // extern "C" __global__ function name: the program's name
  int threads_per_group = 1;
  uint64_t dynamic_shared_bytes = 0;
  std::string tensor_maps;  // CudaKernelSource::tensor_maps
};

/**
 * Tile IR -> GPU IR -> CUDA C++ -> cubin for `arch` (e.g. "sm_90"; `wgmma` off: no warpgroup
 * atoms, see cuda_wgmma_enabled), without needing a GPU: CI
 * compiles every test kernel this way. `shared_memory_limit` is the most shared memory a block
 * may use (the device's CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN); 0 takes the
 * architecture's documented limit (nvidia_gpu_target). A kernel over it is
 * METILE_ERROR_UNSUPPORTED naming the kernel, the bytes and the limit.
 */
Artifact cuda_build_program(const Program& program, const CompileOptions& options,
                            const std::string& arch, uint64_t shared_memory_limit = 0,
                            bool wgmma = true);
/**
 * Whether dots may use Hopper's warpgroup atoms (wgmma; the kernel then compiles for the
 * architecture-specific target, sm_90a): on unless METILE_CUDA_WGMMA=0 (read when a cuda
 * device opens; it becomes part of the device's cache identity).
 */
bool cuda_wgmma_enabled();

/** Compiles `src` with NVRTC for the open CUDA device (or `arch` when no device: CI). */
Artifact cuda_build_from_source(const CudaSource& src, const std::string& arch);

}  // namespace metile

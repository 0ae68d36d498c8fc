/** \file tma.h
 * The CUDA spelling of the tensor-memory-accelerator ops (GpuDialect::tma): mbarrier setup and
 * waits, the bulk tensor copies through the kernel's tensor maps, the warpgroup's group waits and
 * `opaque`.
 */
#pragma once

#include <string>
#include <vector>

#include "codegen/gpu_emit.h"

namespace metile {

/** Writes the statements of one such op (GpuDialect::tma's arguments). */
void emit_cuda_tma(SourceWriter& w, const gpu::Op& op, const std::vector<std::string>& operands, DType element,
                   const std::string& result);

}  // namespace metile

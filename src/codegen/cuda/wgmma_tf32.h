/** \file wgmma_tf32.h
 * The CUDA spelling of a transposed tf32 wgmma `mma` op (src/passes/dot_choices.cpp):
 * C^T = B^T A^T with B^T's fragments read from B's threadgroup array into registers.
 */
#pragma once

#include "codegen/gpu_emit.h"

namespace metile {

/** Writes the statements of one transposed tf32 wgmma `mma` op (identifiers start with mma_). */
void emit_cuda_wgmma_transposed(SourceWriter& w, const MmaSpec& s);

}  // namespace metile

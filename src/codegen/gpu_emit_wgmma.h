/** \file gpu_emit_wgmma.h
 * The CUDA spelling of an `mma` op on the warpgroup atom "wgmma" (sm_90a): matrix descriptors
 * over the swizzled arrays of src/codegen/wgmma_layout.h and wgmma.mma_async per m64 block and
 * k step, fenced, committed and waited for.
 */
#pragma once

#include "codegen/gpu_emit.h"

namespace metile {

/** Writes the statements of one wgmma `mma` op (identifiers it declares start with mma_). */
void emit_cuda_wgmma(SourceWriter& w, const MmaSpec& s);

}  // namespace metile

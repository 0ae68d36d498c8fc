/** \file wgmma.h
 * The CUDA spelling of an `mma` op on the warpgroup atom "wgmma" (sm_90a): matrix descriptors
 * over the swizzled arrays of src/target/swizzled_tile.h and wgmma.mma_async per m64 block and
 * k step, fenced, committed and waited for.
 */
#pragma once

#include <cstdint>
#include <string>

#include "codegen/gpu_emit.h"

namespace metile {

/** Writes the statements of one wgmma `mma` op (identifiers it declares start with mma_). */
void emit_cuda_wgmma(SourceWriter& w, const MmaSpec& s);

/** The constant part of a matrix descriptor, as a C literal: leading and stride byte offsets
 * (in 16-byte units) and the swizzle mode (bits 62-63). */
std::string wgmma_descriptor_high(int64_t leading, int64_t stride, int64_t mode);
/** The asm output list binding `regs` accumulators of block i: "+f"(acc[i * regs + r]). */
std::string wgmma_accumulator_outputs(const std::string& acc, int64_t block, int64_t regs);
/** Commits the group, waits for it and keeps the compiler from moving accumulator reads above. */
void wgmma_commit_and_wait(SourceWriter& w, const std::string& acc, int64_t regs);

}  // namespace metile

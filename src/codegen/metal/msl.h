/** \file msl.h
 * Metal Shading Language from GPU IR: the MSL dialect of the GPU emitter (gpu_emit.h). The
 * kernel takes device buffers at [[buffer(i)]] in parameter order, every scalar as a member of
 * one `constant` struct bound after them (so scalars take one binding of Metal's 31), threadgroup
 * arrays as [[threadgroup(k)]] arguments (their sizes are in the signature, so the runtime
 * provides them) and the builtins it reads. Used by metal-sim and the metal device.
 */
#pragma once

#include <string>

#include "ir/gpu_ir.h"
#include "codegen/metal/msl_signature.h"

namespace metile {

struct MslKernel {
  std::string source;
  metal_sim::MslSignature signature;
  int threads_per_group = 0;
  /**
   * The MSL version the source needs: "metal4.0" when it uses Metal 4 headers (<metal_tensor>,
   * MetalPerformancePrimitives: tensor_ops dots), which compilers expose only at that version;
   * "" when the compiler's default serves.
   */
  std::string language;
};

MslKernel emit_msl(const gpu::Function& f);

}  // namespace metile

/** \file metal_sim_device.h
 * The "metal-sim" device: Metal Shading Language run on the host (clang + metal_shim.h, one
 * fiber per GPU thread). Its Artifact is a shared object plus the MSL and its signature
 * (sources "msl" and "msl_signature"), so load() needs nothing else.
 *
 * build() runs the GPU pipeline (lower + passes, src/passes/pipeline.h), emits MSL with its
 * signature (src/codegen/metal/msl.h) and compiles it; the stages "gpu_ir", "gpu_ir_opt" and "msl"
 * are kept in the Artifact. The registry reaches the device through runtime/backends.h.
 */
#pragma once

#include <memory>
#include <string>

#include "runtime/device.h"
#include "codegen/metal/msl_signature.h"

namespace metile::metal_sim {

/** Compiles `msl` and packs it as the Artifact metal-sim's load() takes. */
Artifact make_msl_artifact(std::string msl, const MslSignature& signature, int threads_per_group);

}  // namespace metile::metal_sim

/** \file trampoline.h
 * The C++ that lets metal-sim call an MSL kernel compiled as host code: one entry point with the
 * ABI of metal_sim_abi.h, which casts each launch argument and builtin to the kernel's parameter.
 */
#pragma once

#include <string>

#include "codegen/metal/msl_signature.h"

namespace metile::metal_sim {

/**
 * C++ appended after the prepared MSL: exports metal_sim_abi_version and metal_sim_entry, which
 * calls the kernel with each argument cast to the signature's type.
 */
std::string make_trampoline(const MslSignature& signature);

}  // namespace metile::metal_sim

/** \file kernel_params.h
 * The stand-in Metal compiler's front end: the parameter lists of the `[[kernel]]` functions in
 * MSL text, read from the text alone (as Metal's compiler does), as metal-sim signatures.
 * Threadgroup arguments get a placeholder element count: their size arrives at dispatch, with
 * setThreadgroupMemoryLength:atIndex:.
 */
#pragma once

#include <string>
#include <vector>

#include "codegen/metal/msl_signature.h"

namespace metile::standin {

/** Throws metile::Error (METILE_ERROR_COMPILE) naming the parameter it cannot read. */
std::vector<metal_sim::MslSignature> kernel_signatures(const std::string& msl);

}  // namespace metile::standin

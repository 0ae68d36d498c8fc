/** \file msl_prepare.h
 * Turns MSL into the C++ that metal_shim.h compiles, line for line (clang's diagnostics keep the
 * MSL's line numbers). Two constructs need the source rather than the header:
 * - `threadgroup`: on a kernel-scope variable it makes one object per threadgroup, shared by its
 *   threads; those declarations become references into the group's threadgroup memory
 *   (`auto& name = ::metal::detail::threadgroup_variable<T[N]>(id, "name");`). Everywhere else
 *   (pointers, casts, parameters) it is only a qualifier and is dropped.
 * - `[[...]]` attribute lists: Metal's attributes ([[kernel]], [[buffer(i)]],
 *   [[thread_position_in_grid]], ...) are checked and removed; standard and clang:: attributes
 *   stay. When a signature is given, the kernel's parameters are checked against it.
 */
#pragma once

#include <string>
#include <string_view>

#include "codegen/metal/msl_signature.h"

namespace metile::metal_sim {

/**
 * Returns the prepared text. `file_name` prefixes error locations. Throws METILE_ERROR_COMPILE
 * for MSL metal-sim cannot run (an unknown attribute, an initialized or program-scope threadgroup
 * variable) and for a kernel whose parameters disagree with `signature` (when not null).
 */
std::string prepare_msl(std::string_view msl, std::string_view file_name,
                        const MslSignature* signature);

}  // namespace metile::metal_sim

/** \file param_access.h
 * Which pointer parameters a program reads and writes through. Pointers are traced back to
 * their parameters through the ops and loop-carried values pointer_provenance.h follows; a
 * carried pointer counts as the parameters its init and its yields may point into.
 * Ops that read memory have the kMemory trait; those that also write it, kSideEffect.
 */
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "ir/tile_ir.h"

namespace metile {

struct ParamAccess {
  std::set<ValueId> read;     // parameter values a memory op reads through
  std::set<ValueId> written;  // parameter values a memory op writes through
};

ParamAccess param_access(const Program& program);

/** For each value, bit i: a pointer that may point into parameter i (ir/pointer_provenance.h). */
std::vector<uint64_t> param_masks(const Program& program);

}  // namespace metile

/** \file diff_gen.h
 * Random valid Tile IR programs for the differential fuzzer (diff_fuzz.cpp). The ops come from
 * the op table (ops.def traits: every binary, compare, unary, reduction and scan op) besides
 * casts, select, transposes (through reshapes to 2-D) and loops; operands are shaped so that
 * every device must give the same answer:
 *
 * - integer divisors are made positive and shift amounts smaller than the width;
 * - inputs are exact: quarters and small integers (X, I), and special values (Z: NaNs of either
 *   sign with payloads, quiet and signalling, subnormals, signed zeros; M: bool bytes other than
 *   0 and 1, also used as a load mask); a value is "fuzzy" once an op whose result
 *   legitimately differs between devices touched it (transcendentals, division, products that
 *   may be contracted into FMAs, f16/bf16 arithmetic, sums whose order differs); fuzzy values
 *   never reach a discontinuous op (compare, floor, float -> int cast) and are compared with a
 *   tolerance; exact ones are compared bit for bit.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/tile_ir.h"

namespace metile::fuzz {

struct GenProgram {
  Program program;
  int64_t size = 0;          // elements of every input and output buffer
  int outputs = 0;           // output parameters Y0.. after X (f32), I (i32), Z (f32), M (bool)
  std::vector<bool> fuzzy;   // per output: compare with a tolerance
};

/** The program of `seed` (the same seed gives the same program on every machine). */
GenProgram generate(uint64_t seed);

}  // namespace metile::fuzz

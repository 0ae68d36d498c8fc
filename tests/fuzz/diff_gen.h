/** \file diff_gen.h
 * Random valid Tile IR programs for the differential fuzzer (diff_fuzz.cpp). The ops come from
 * the op table (ops.def traits: every binary, compare, unary, reduction and scan op) besides
 * casts, select, transposes (through reshapes to 2-D) and loops; operands are shaped so that
 * every device must give the same answer:
 *
 * - integer divisors are made positive and shift amounts smaller than the width;
 * - inputs are exact (quarters and small integers); a value is "fuzzy" once an op whose result
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
  int outputs = 0;           // output parameters Y0.. after X (f32) and I (i32)
  std::vector<bool> fuzzy;   // per output: compare with a tolerance
};

/** The program of `seed` (the same seed gives the same program on every machine). */
GenProgram generate(uint64_t seed);

}  // namespace metile::fuzz

/** \file cpu_cpp.h
 * Tile IR -> C++ for the `cpu` device. One program instance is one call of a static function
 * whose tiles are fixed-size local arrays filled by simple counted loops the host compiler
 * vectorizes; element-wise chains are fused into the loop of their consumer (cpu_plan.h).
 *
 * The exported entry point runs a range of program instances:
 *   extern "C" void metile_entry(<params in their C types>, mt_range* range);
 * On a fault (a `for` whose runtime step is 0) the entry stops and sets range->fault to the
 * fault code, which cpu_fault_loop() turns back into the loop. With range->stream set, stores of
 * 1-D tiles of consecutive addresses use non-temporal stores (see emit_streamed_store), fenced
 * before the entry returns. Pointer parameters are pointers to the element's storage type, scalars are passed in their
 * storage type (f16/bf16 as their 16-bit patterns, bool as one byte).
 */
#pragma once

#include <cstdint>
#include <string>

#include "codegen/c_like.h"
#include "ir/tile_ir.h"

namespace metile {

struct CpuSource {
  std::string text;          // complete translation unit (prelude included)
  std::string entry;         // exported symbol
  std::string stack_symbol;  // exported `const uint64_t`: bytes of stack one instance may need
  uint64_t stack_bytes = 0;
};

/** The C++ dialect of the CPU backend. */
const Dialect& cpu_dialect();

/** The `for` op that fault code `code` (1-based, pre-order) names; null when none does. */
const Op* cpu_fault_loop(const Program& program, uint32_t code);

/** Translates a verified program. Throws METILE_ERROR_UNSUPPORTED for ops it cannot run. */
CpuSource generate_cpu_cpp(const Program& program);

}  // namespace metile
